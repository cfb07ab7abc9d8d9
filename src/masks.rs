//! What tools-shell hides from commands beyond the fixed deny lists: names inside the roots
//! found by one bounded walk (secret files, hard links to denied files), refreshed for every
//! command through a short-lived cache, and the empty placeholders that make a missing denied
//! path inside a writable root impossible to create.

use hands_roots::{Policy, Resolver};
use std::convert::Infallible;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Entries one walk of the roots visits at most; past it the rest of the roots is not scanned.
const WALK_LIMIT: usize = 200_000;
/// How long a walk's result is reused: a secret file created on the host is masked for every
/// command that starts this long after it appeared. A walk slower than a tenth of it is reused
/// ten times as long as it took, so walking never takes more than a tenth of the time.
const TTL: Duration = Duration::from_secs(2);
/// Credential-list entries that are folders, so a missing one gets a folder as placeholder
/// (the person's own tools then still find a folder where they expect one).
const CREDENTIAL_FOLDERS: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    "gcloud",
    ".kube",
    "keyrings",
    ".password-store",
    ".mozilla",
    "google-chrome",
    "chromium",
    "op",
];

/// The names inside the roots that commands must not see, found by walking the roots.
pub struct Masks {
    roots: Vec<PathBuf>,
    resolver: Arc<Resolver>,
    /// The last walk's result, when it ended, and how long it may be reused.
    cache: Mutex<Option<(Instant, Duration, Arc<Found>)>>,
    warned: AtomicBool,
}

/// One walk's result.
#[derive(Debug, Default)]
pub struct Found {
    /// Secret files and hard links to denied files, as absolute paths.
    pub paths: Vec<PathBuf>,
    /// A name that must be masked but cannot travel in the launcher's JSON spec (not UTF-8).
    pub unmaskable: Option<PathBuf>,
    /// Protected paths at any depth inside the roots (`.git/hooks` of a nested repository):
    /// the launcher binds them read-only.
    pub protected: Vec<PathBuf>,
    /// Repository folders (`.git`, and a submodule's `.git/modules/NAME`), whose missing
    /// `commondir` [`Masks::current`] makes.
    pub gitdirs: Vec<PathBuf>,
}

impl Masks {
    pub fn new(roots: &[crate::config::RootCfg], resolver: Arc<Resolver>) -> Masks {
        let all: Vec<&PathBuf> = roots.iter().map(|r| &r.path).collect();
        // A root inside another is walked as part of the outer one.
        let mut roots: Vec<PathBuf> = all
            .iter()
            .filter(|p| !all.iter().any(|o| p.starts_with(o) && p != &o))
            .map(|p| p.to_path_buf())
            .collect();
        roots.sort();
        roots.dedup();
        Masks { roots, resolver, cache: Mutex::new(None), warned: AtomicBool::new(false) }
    }

    /// The names to mask for a command starting now: the last walk's when it is younger than
    /// [`TTL`] (longer for a slow walk), else a new walk's. Blocking; call it off the async
    /// runtime.
    pub fn current(&self) -> Arc<Found> {
        let mut cache = self.cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((at, ttl, found)) = cache.as_ref()
            && at.elapsed() < *ttl
        {
            return found.clone();
        }
        let started = Instant::now();
        let (mut found, seen, complete) = walk(&self.roots, self.resolver.policy(), WALK_LIMIT);
        let writable: Vec<&Path> =
            self.resolver.roots().iter().filter(|r| r.writable()).map(|r| r.path()).collect();
        commondir_placeholders(&mut found, &writable);
        if !complete && !self.warned.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                "the roots hold more than {WALK_LIMIT} entries; only the first {WALK_LIMIT} are \
                 checked for secret files and hard links to denied files, so one beyond them is \
                 not masked for commands (narrow the roots to fix this)"
            );
        }
        tracing::debug!(
            entries = seen,
            masked = found.paths.len(),
            elapsed_us = started.elapsed().as_micros() as u64,
            "walked the roots for masks"
        );
        let found = Arc::new(found);
        // Stamped when the walk ended, so a slow walk is not immediately stale.
        let ttl = TTL.max(started.elapsed().saturating_mul(10));
        *cache = Some((Instant::now(), ttl, found.clone()));
        found
    }
}

/// What a made `commondir` holds: the repository folder itself, which is what git takes when
/// there is none. `./`, not `.`: libgit2 refuses to open a repository whose commondir is `.`.
const COMMONDIR_HERE: &[u8] = b"./\n";

/// Makes the missing `commondir` of every repository folder the walk found in a writable root,
/// and adds it to the protected paths. A command that could create it could point git's config
/// and hooks at a folder of its own, which the person's git would then run (`core.fsmonitor`);
/// a file the sandbox binds read-only cannot be created or changed. One that cannot be made is
/// logged, and stays a gap for that repository.
fn commondir_placeholders(found: &mut Found, writable: &[&Path]) {
    for gitdir in std::mem::take(&mut found.gitdirs) {
        if !writable.iter().any(|r| gitdir.starts_with(r)) {
            continue;
        }
        let at = gitdir.join("commondir");
        let made = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&at)
            .and_then(|mut f| std::io::Write::write_all(&mut f, COMMONDIR_HERE));
        match made {
            Ok(()) => {
                tracing::info!(
                    "created {} (holding `./`: the repository itself, as without one) so that \
                     commands cannot create it and redirect git's config and hooks",
                    at.display()
                );
                keep(&mut found.protected, &mut found.unmaskable, at);
            }
            // It exists: the walk found it and protects it.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => tracing::warn!("cannot create {}: {e}", at.display()),
        }
    }
}

/// Walks `roots` depth-first without following symlinks and without entering denied folders,
/// visiting at most `limit` entries. Returns what it found, how many entries it visited, and
/// whether it finished.
pub fn walk(roots: &[PathBuf], policy: &Policy, limit: usize) -> (Found, usize, bool) {
    let mut found = Found::default();
    // A file is compared with the denied names only when one lies inside a root (a credential
    // linked into a project): usually none does, and the walk visits every file.
    let denied_inside = roots.iter().any(|r| !policy.denied_near(r).is_empty());
    let Ok((seen, finished)) = hands_roots::walk_bounded::<Infallible>(roots, limit, |entry| {
        // The entry's own type (from the directory listing, or lstat): a symlink is never
        // followed, so the walk stays inside the roots.
        let Ok(kind) = entry.file_type() else { return Ok(false) };
        let path = entry.path();
        // A protected path at any depth (a nested repository's `.git/hooks`, a subproject's
        // `.vscode`): bound read-only by the launcher. A protected folder is still walked, for
        // the secret files in it.
        if !kind.is_symlink()
            && policy.protected_leaf(&entry.file_name())
            && let Some(root) = roots.iter().find(|r| path.starts_with(r))
            && let Ok(rel) = path.strip_prefix(root)
            && policy.protected(rel).is_some()
        {
            keep(&mut found.protected, &mut found.unmaskable, path.clone());
        }
        if kind.is_dir() {
            let name = entry.file_name();
            let submodule = || {
                let parent = path.parent();
                parent.and_then(Path::file_name) == Some(std::ffi::OsStr::new("modules"))
                    && parent.and_then(Path::parent).and_then(Path::file_name)
                        == Some(std::ffi::OsStr::new(".git"))
            };
            if name == ".git" || submodule() {
                found.gitdirs.push(path.clone());
            }
            if policy.denied(&path, None).is_none() {
                return Ok(true);
            }
            // A denied or credential folder reached by its real name (`~/.aws` a link to
            // `~/dotfiles/aws`, a root spelt otherwise): masked here too, not only by the name
            // it was configured under.
            keep(&mut found.paths, &mut found.unmaskable, path);
            return Ok(false);
        }
        let is_hidden = kind.is_file()
            && (policy.is_secret(&path)
                || (denied_inside && policy.denied(&path, None).is_some())
                || entry
                    .metadata()
                    .is_ok_and(|m| m.nlink() > 1 && policy.is_denied_identity(m.dev(), m.ino())));
        if is_hidden {
            keep(&mut found.paths, &mut found.unmaskable, path);
        }
        Ok(false)
    });
    (found, seen, finished)
}

/// Adds `path` to `list` (names to mask, or to bind read-only), or, when it cannot travel in
/// the launcher's JSON spec, records it as the one that makes commands refuse.
fn keep(list: &mut Vec<PathBuf>, unmaskable: &mut Option<PathBuf>, path: PathBuf) {
    if path.to_str().is_some() {
        list.push(path);
    } else if unmaskable.is_none() {
        *unmaskable = Some(path);
    }
}

/// A denied or credential path, and whether it names a folder.
pub struct DeniedPath {
    pub path: PathBuf,
    pub folder: bool,
}

impl DeniedPath {
    /// A credential-list entry: a folder when its name is one of [`CREDENTIAL_FOLDERS`].
    pub fn credential(path: &Path) -> DeniedPath {
        let folder = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| CREDENTIAL_FOLDERS.contains(&n));
        DeniedPath { path: path.to_path_buf(), folder }
    }

    /// A `sandbox.deny` entry: a folder when it is written with a trailing `/`.
    pub fn deny(path: &Path) -> DeniedPath {
        let folder = path.as_os_str().as_encoded_bytes().ends_with(b"/");
        DeniedPath { path: path.to_path_buf(), folder }
    }
}

/// Makes every missing denied path that lies inside a writable root impossible to create from a
/// command: the first missing component is created on the host, empty (a folder, mode 0700,
/// when more components follow or the entry is a folder; else a file, mode 0600), so the
/// launcher has something to mask and pins its parents. Returns the real paths of the
/// placeholders made or found, for the spec's `masked` list. Paths outside the roots or in
/// read-only roots need nothing: Landlock and the read-only binds refuse creating them.
/// With `make` false (`hands check`/`doctor`) nothing is created: the missing ones go to
/// `missing` instead, for the report.
pub fn placeholders(
    denied: &[DeniedPath],
    roots: &[crate::config::RootCfg],
    make: bool,
    missing: &mut Vec<PathBuf>,
) -> anyhow::Result<Vec<PathBuf>> {
    let mut made = Vec::new();
    for d in denied {
        let Some((at, folder)) = first_missing(d) else { continue };
        // The most specific root holding the real place decides, as it does for the tools.
        let root = roots
            .iter()
            .filter(|r| at.starts_with(&r.path))
            .max_by_key(|r| r.path.as_os_str().len());
        if !root.is_some_and(|r| r.writable && at != r.path) {
            continue;
        }
        if !make {
            missing.push(at);
            continue;
        }
        let created = if folder {
            std::fs::DirBuilder::new().mode(0o700).create(&at)
        } else {
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&at)
                .map(drop)
        };
        match created {
            Ok(()) => tracing::info!(
                "created the empty {} {} so that commands cannot create the denied path {} \
                 (the sandbox masks it); it may be removed while hands is not running",
                if folder { "folder" } else { "file" },
                at.display(),
                d.path.display()
            ),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => anyhow::bail!(
                "cannot create the placeholder {} that keeps commands from creating the denied \
                 path {}: {e}\nhint: create it yourself, or declare the root that holds it \
                 read-only",
                at.display(),
                d.path.display()
            ),
        }
        made.push(at);
    }
    Ok(made)
}

/// The real path of the first missing component of `d.path`, and whether it must be a folder;
/// `None` when the whole path exists or nothing can be created there.
fn first_missing(d: &DeniedPath) -> Option<(PathBuf, bool)> {
    let mut prefix = PathBuf::new();
    let mut comps = d.path.components().peekable();
    while let Some(c) = comps.next() {
        prefix.push(c);
        match std::fs::symlink_metadata(&prefix) {
            Ok(m) if m.file_type().is_symlink() && std::fs::metadata(&prefix).is_err() => {
                tracing::warn!(
                    "{} is a dangling symlink on the way to the denied path {}; a command may be \
                     able to create its target (remove the link, or create the target)",
                    prefix.display(),
                    d.path.display()
                );
                return None;
            }
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let parent = prefix.parent()?;
                let name = prefix.file_name()?;
                let real = std::fs::canonicalize(parent).ok()?.join(name);
                return Some((real, d.folder || comps.peek().is_some()));
            }
            // Not a folder on the way (ENOTDIR) or unreadable: nothing can be created below.
            Err(_) => return None,
        }
    }
    None
}

/// Protected entries that are folders: where one is missing in a writable root, an empty
/// folder takes its place, so the sandbox can bind it read-only and a command cannot create,
/// say, `.vscode/tasks.json` or `.claude/settings.json` that a tool on the host later runs.
/// `.git/hooks` only where `.git` is a folder already (an empty `.git` would confuse git).
/// The protected files (`.envrc`, `.mcp.json`, `.gitmodules`) get no placeholder: an empty one
/// would show in `git status`, and their consumers ask the person before trusting new content.
/// The protected.txt entries written with a trailing `/` are such folders too.
const PROTECTED_FOLDERS: &[&str] = &[".vscode", ".idea", ".claude", ".codex", ".cursor"];

/// Makes the missing protected folders of every writable root (see [`PROTECTED_FOLDERS`], and
/// `extra`: `[sandbox].protected_extra`'s folders); with `make` false only lists them in
/// `missing`.
pub fn protected_placeholders(
    roots: &[crate::config::RootCfg],
    extra: &[&str],
    make: bool,
    missing: &mut Vec<PathBuf>,
) -> anyhow::Result<()> {
    for r in roots.iter().filter(|r| r.writable) {
        let mut wanted: Vec<PathBuf> = (PROTECTED_FOLDERS.iter().copied())
            .chain(crate::profiles::protected_folders())
            .map(|p| r.path.join(p))
            .chain(extra.iter().map(|p| r.path.join(p)))
            .collect();
        if std::fs::symlink_metadata(r.path.join(".git")).is_ok_and(|m| m.is_dir()) {
            wanted.push(r.path.join(".git/hooks"));
        }
        for at in wanted {
            if !make {
                if std::fs::symlink_metadata(&at).is_err() {
                    missing.push(at);
                }
                continue;
            }
            match std::fs::DirBuilder::new().mode(0o755).create(&at) {
                Ok(()) => tracing::info!(
                    "created the empty folder {} so that commands cannot create the protected \
                     path (the sandbox binds it read-only)",
                    at.display()
                ),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => anyhow::bail!(
                    "cannot create the placeholder folder {} that keeps commands from creating a \
                     protected path: {e}\nhint: create it yourself, or declare the root read-only",
                    at.display()
                ),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RootCfg;
    use hands_roots::PolicyLists;

    fn policy(credentials: Vec<PathBuf>) -> Policy {
        let lists = PolicyLists {
            credentials,
            secret_patterns: vec![".env".into(), ".env.*".into(), "*.pem".into()],
            secret_exceptions: vec![".env.example".into()],
            ..PolicyLists::default()
        };
        Policy::new(&lists).unwrap()
    }

    #[test]
    fn a_credential_folder_reached_by_its_real_name_is_masked() {
        // `~/.aws` is a link to `~/dotfiles/aws`, and `~/dotfiles` is a root: the walk meets
        // the folder by its real name, which the policy knows as the credential's.
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let root = base.join("dotfiles");
        std::fs::create_dir_all(root.join("aws")).unwrap();
        std::fs::write(root.join("aws/credentials"), "secret").unwrap();
        std::fs::write(root.join("vimrc"), "set nu").unwrap();
        std::fs::create_dir_all(base.join("home")).unwrap();
        std::os::unix::fs::symlink(root.join("aws"), base.join("home/.aws")).unwrap();
        // A credential file too: `~/.netrc` a link to `~/dotfiles/netrc`.
        std::fs::write(root.join("netrc"), "machine x password y").unwrap();
        std::os::unix::fs::symlink(root.join("netrc"), base.join("home/.netrc")).unwrap();
        let p = policy(vec![base.join("home/.aws"), base.join("home/.netrc")]);
        let (found, _, complete) = walk(std::slice::from_ref(&root), &p, 1000);
        assert!(complete);
        let mut paths = found.paths.clone();
        paths.sort();
        assert_eq!(paths, [root.join("aws"), root.join("netrc")], "vimrc stays visible");
    }

    #[test]
    fn the_walk_finds_secrets_hard_links_and_denied_folders_but_not_exceptions_or_inside_them() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let root = base.join("root");
        let home = base.join("home");
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::create_dir_all(root.join("denied")).unwrap();
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        std::fs::write(root.join(".env"), "x").unwrap();
        std::fs::write(root.join(".env.example"), "x").unwrap();
        std::fs::write(root.join("a/b/key.pem"), "x").unwrap();
        std::fs::write(root.join("denied/other.pem"), "x").unwrap();
        std::fs::write(home.join(".ssh/id"), "x").unwrap();
        std::fs::hard_link(home.join(".ssh/id"), root.join("a/innocent")).unwrap();
        std::os::unix::fs::symlink(&home, root.join("link")).unwrap();
        let p = policy(vec![home.join(".ssh"), root.join("denied")]);
        let (found, seen, complete) = walk(std::slice::from_ref(&root), &p, 1000);
        let mut paths = found.paths.clone();
        paths.sort();
        let want = [
            root.join(".env"),
            root.join("a/b/key.pem"),
            root.join("a/innocent"),
            root.join("denied"),
        ];
        assert_eq!(paths, want, "the denied folder is masked whole, not walked");
        assert!(complete);
        assert!(seen >= 7, "{seen}");
        let (_, seen, complete) = walk(&[root], &p, 2);
        assert!(!complete);
        assert_eq!(seen, 2);
    }

    #[test]
    fn placeholders_only_in_writable_roots_folder_or_file_as_declared() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let rw = base.join("rw");
        let ro = base.join("ro");
        std::fs::create_dir_all(&rw).unwrap();
        std::fs::create_dir_all(&ro).unwrap();
        let roots = [
            RootCfg { path: rw.clone(), writable: true },
            RootCfg { path: ro.clone(), writable: false },
        ];
        let denied = [
            DeniedPath::credential(&rw.join(".ssh")),
            DeniedPath::credential(&rw.join(".netrc")),
            DeniedPath::credential(&rw.join(".docker/config.json")),
            DeniedPath::deny(Path::new(&format!("{}/private/", rw.display()))),
            DeniedPath::credential(&ro.join(".aws")),
            DeniedPath::credential(&base.join("elsewhere/.aws")),
        ];
        let want = [rw.join(".ssh"), rw.join(".netrc"), rw.join(".docker"), rw.join("private")];
        // `hands check`: the same places listed, nothing made.
        let mut missing = Vec::new();
        assert_eq!(
            placeholders(&denied, &roots, false, &mut missing).unwrap(),
            Vec::<PathBuf>::new()
        );
        assert_eq!(missing, want);
        assert_eq!(std::fs::read_dir(&rw).unwrap().count(), 0, "check made something");
        let made = placeholders(&denied, &roots, true, &mut Vec::new()).unwrap();
        assert_eq!(made, want);
        assert!(rw.join(".ssh").is_dir());
        assert!(rw.join(".docker").is_dir());
        assert!(rw.join("private").is_dir());
        assert_eq!(std::fs::read(rw.join(".netrc")).unwrap(), b"");
        assert!(!ro.join(".aws").exists());
        assert!(!base.join("elsewhere").exists());
        // The next start finds the folder and makes the next missing component, then nothing.
        let again = placeholders(&denied, &roots, true, &mut Vec::new()).unwrap();
        assert_eq!(again, [rw.join(".docker/config.json")]);
        assert_eq!(std::fs::read(rw.join(".docker/config.json")).unwrap(), b"");
        assert_eq!(
            placeholders(&denied, &roots, true, &mut Vec::new()).unwrap(),
            Vec::<PathBuf>::new()
        );
    }

    #[test]
    fn no_placeholder_through_a_symlink_out_of_the_root_or_a_dangling_one() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let rw = base.join("rw");
        let out = base.join("out");
        std::fs::create_dir_all(&rw).unwrap();
        std::fs::create_dir_all(&out).unwrap();
        std::os::unix::fs::symlink(&out, rw.join("link")).unwrap();
        std::os::unix::fs::symlink(base.join("gone"), rw.join(".aws")).unwrap();
        let roots = [RootCfg { path: rw.clone(), writable: true }];
        let denied = [
            DeniedPath::credential(&rw.join("link/.ssh")),
            DeniedPath::credential(&rw.join(".aws")),
        ];
        assert_eq!(
            placeholders(&denied, &roots, true, &mut Vec::new()).unwrap(),
            Vec::<PathBuf>::new()
        );
        assert!(!out.join(".ssh").exists());
        assert!(!base.join("gone").exists());
    }
}
