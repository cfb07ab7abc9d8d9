//! What tools-shell hides from commands beyond the fixed deny lists, and what it makes
//! read-only to them: names inside the roots found by one complete walk (secret files, hard
//! links to denied files, protected paths at any depth, every repository's git dir — nested,
//! bare, or named by a `.git` file — and the `.git` files themselves), refreshed for every
//! command through a short-lived cache; and the empty placeholders that make a missing denied
//! path inside a writable root impossible to create.
//!
//! The walk fails closed: when it cannot see everything (more entries than [`WALK_LIMIT`], a
//! folder it cannot list), commands refuse to start rather than run with part of the masks. A
//! folder the daemon may not read is masked whole, so hiding a secret behind `chmod 000` hides
//! it from the next command too. Everything the daemon creates in a root goes through the
//! resolver's descriptors, never following a symlink (`Resolver::create_file_nofollow`).

use hands_roots::{Folder, Policy, Resolver, WalkError};
use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::ffi::OsStr;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Entries one walk of the roots visits at most, unless tools-shell's `limits.walk_entries`
/// says otherwise. Past it commands refuse (the walk could not check the rest), naming the
/// count and what to do: a tree this large is either a flood a command made or a root wider
/// than a project. A walk costs a few microseconds per entry, for every command that starts
/// after the cache expired.
pub const WALK_LIMIT: usize = 200_000;
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
/// What git reads from a git dir that runs programs or moves where it reads from: bound
/// read-only in every git dir the walk finds.
const GIT_CONTROL: &[&str] = &["config", "config.worktree", "commondir", "hooks"];

/// The startup placeholders, made again whenever the walk runs: a command (or a person) that
/// removed one does not leave the next commands without it.
pub struct Repair {
    pub denied: Vec<DeniedPath>,
    pub roots: Vec<hands_roots::RootSpec>,
    /// Folders the launcher mounts on (the sandbox home): without one every command would fail
    /// to start.
    pub dirs: Vec<PathBuf>,
    /// `[sandbox].protected_extra`'s folders, made like the built-in ones.
    pub extra_folders: Vec<String>,
}

/// The names inside the roots that commands must not see, found by walking the roots.
pub struct Masks {
    roots: Vec<PathBuf>,
    resolver: Arc<Resolver>,
    limit: usize,
    /// The last walk's result (or why it failed), when it ended, and how long it may be reused.
    cache: Mutex<Option<(Instant, Duration, Walked)>>,
    repair: Option<Repair>,
}

type Walked = Result<Arc<Found>, Arc<str>>;

/// One walk's result.
#[derive(Debug, Default)]
pub struct Found {
    /// Secret files, hard links to denied files, and folders the daemon cannot read, as
    /// absolute paths.
    pub paths: Vec<PathBuf>,
    /// A name that must be masked but cannot travel in the launcher's JSON spec (not UTF-8).
    pub unmaskable: Option<PathBuf>,
    /// Protected paths at any depth inside the roots (`.git/hooks` of a nested repository, a
    /// bare repository's `config`, a `.git` file): the launcher binds them read-only.
    pub protected: Vec<PathBuf>,
    /// Every git dir found (by what it holds: `HEAD` and `objects` + `refs`, or `commondir`).
    pub gitdirs: Vec<GitDir>,
    /// Folders a `.git` file names as its git dir (`gitdir: ...`), resolved by name.
    pub pointed: Vec<PathBuf>,
    /// Entries the walk visited.
    pub seen: usize,
}

/// A git dir the walk found.
#[derive(Debug)]
pub struct GitDir {
    pub path: PathBuf,
    /// The folder its `commondir` names (resolved by name), if it has one.
    pub commondir: Option<PathBuf>,
    /// Its own `config` sets `extensions.worktreeConfig`.
    pub worktree_config: bool,
    pub has_config_worktree: bool,
}

impl Masks {
    pub fn new(
        roots: &[hands_roots::RootSpec],
        resolver: Arc<Resolver>,
        repair: Option<Repair>,
        limit: usize,
    ) -> Masks {
        let all: Vec<&PathBuf> = roots.iter().map(|r| &r.path).collect();
        // A root inside another is walked as part of the outer one.
        let mut roots: Vec<PathBuf> = all
            .iter()
            .filter(|p| !all.iter().any(|o| p.starts_with(o) && p != &o))
            .map(|p| p.to_path_buf())
            .collect();
        roots.sort();
        roots.dedup();
        Masks { roots, resolver, limit, cache: Mutex::new(None), repair }
    }

    /// The names to mask for a command starting now: the last walk's when it is younger than
    /// [`TTL`] (longer for a slow walk), else a new walk's. An error, saying why and what to
    /// do, when the walk could not check everything: the command must not start. Blocking;
    /// call it off the async runtime.
    pub fn current(&self) -> Result<Arc<Found>, Arc<str>> {
        let mut cache = hands_roots::lock(&self.cache);
        if let Some((at, ttl, found)) = cache.as_ref()
            && at.elapsed() < *ttl
        {
            return found.clone();
        }
        let started = Instant::now();
        if let Some(r) = &self.repair {
            self.remake_placeholders(r);
        }
        let walked = self.walk_now();
        if let Ok(found) = &walked {
            tracing::debug!(
                entries = found.seen,
                masked = found.paths.len(),
                elapsed_us = started.elapsed().as_micros() as u64,
                "walked the roots for masks"
            );
        }
        // Stamped when the walk ended, so a slow walk is not immediately stale.
        let ttl = TTL.max(started.elapsed().saturating_mul(10));
        *cache = Some((Instant::now(), ttl, walked.clone()));
        walked
    }

    fn walk_now(&self) -> Walked {
        let start = self
            .roots
            .iter()
            .map(|p| {
                let pinned = self.resolver.roots().iter().find(|r| r.path() == p);
                let fd = match pinned {
                    Some(r) => hands_roots::open_start_at(r.fd()),
                    None => hands_roots::open_start(p),
                };
                fd.map(|fd| (p.clone(), fd)).map_err(|e| {
                    Arc::<str>::from(format!(
                        "refused: the root {} cannot be opened to check it for secret files \
                         and protected paths ({}), so commands do not start; a person can make \
                         it readable again or remove it from the roots",
                        p.display(),
                        std::io::Error::from(e)
                    ))
                })
            })
            .collect::<Result<Vec<(PathBuf, OwnedFd)>, _>>()?;
        let mut found = walk(start, self.resolver.policy(), self.limit).map_err(|e| {
            let what = match &e {
                WalkError::Limit { limit } => format!(
                    "the roots hold more than {limit} files and folders (a command may have \
                     made them: a flood of files or hard links). A person can remove them, \
                     narrow the roots, or raise tools-shell's `limits.walk_entries`"
                ),
                other => format!(
                    "{other}. A person can fix or remove that folder (or narrow the roots); the \
                     next command walks again"
                ),
            };
            tracing::warn!("commands refused: the walk of the roots did not finish: {what}");
            Arc::<str>::from(format!(
                "refused: the roots could not be checked completely for secret files and \
                 protected paths, so the command did not start (it would have run with part of \
                 the masks): {what}"
            ))
        })?;
        let writable: Vec<&Path> =
            self.resolver.roots().iter().filter(|r| r.writable()).map(|r| r.path()).collect();
        git_placeholders(&mut found, &writable, &self.resolver);
        Ok(Arc::new(found))
    }

    /// The startup placeholders again (a few `mkdirat`/`openat` calls that find them there).
    fn remake_placeholders(&self, r: &Repair) {
        let mut none = Vec::new();
        let extra: Vec<&str> = r.extra_folders.iter().map(String::as_str).collect();
        if let Err(e) = protected_placeholders(&r.roots, &extra, &self.resolver, true, &mut none) {
            tracing::warn!("{e:#}");
        }
        if let Err(e) = placeholders(&r.denied, &r.roots, &self.resolver, true, &mut none) {
            tracing::warn!("{e:#}");
        }
        for d in &r.dirs {
            if std::fs::symlink_metadata(d).is_ok() {
                continue;
            }
            // Inside a root a command can reach it: made component by component through the
            // resolver, never through a symlink a command left on the way.
            let made = if self.resolver.root_of(d).is_some() {
                let mut ancestors: Vec<&Path> = d
                    .ancestors()
                    .take_while(|a| {
                        self.resolver
                            .root_of(a)
                            .is_some_and(|i| self.resolver.roots()[i].path() != *a)
                    })
                    .collect();
                ancestors.reverse();
                ancestors
                    .iter()
                    .try_for_each(|a| self.resolver.create_dir_nofollow(a, 0o755).map(drop))
            } else {
                std::fs::create_dir_all(d)
            };
            match made {
                Ok(()) => tracing::warn!(
                    "re-created {}, which the sandbox mounts on: it had been removed (by a \
                     command, or a person)",
                    d.display()
                ),
                Err(e) => tracing::warn!(
                    "cannot re-create {}, which the sandbox mounts on: {e}; commands fail to \
                     start until a person creates it",
                    d.display()
                ),
            }
        }
    }
}

/// What a made `commondir` holds: the repository folder itself, which is what git takes when
/// there is none. `./`, not `.`: libgit2 refuses to open a repository whose commondir is `.`.
const COMMONDIR_HERE: &[u8] = b"./\n";

/// For every git dir the walk found in a writable root: makes a missing `commondir`, and a
/// missing `config.worktree` where the repository's config sets `extensions.worktreeConfig`
/// (git reads it then), and adds both to the protected paths. A command that could create
/// them could point git's config and hooks at a folder of its own, or add config, which the
/// person's git would then run (`core.fsmonitor`); a file the sandbox binds read-only cannot be
/// created or changed. Made through the resolver's descriptors: a folder swapped for a symlink
/// makes the create fail, never land outside. One that cannot be made is logged, and stays a
/// gap for that repository.
fn git_placeholders(found: &mut Found, writable: &[&Path], resolver: &Resolver) {
    let flags: HashMap<&Path, bool> =
        found.gitdirs.iter().map(|g| (g.path.as_path(), g.worktree_config)).collect();
    let mut make: Vec<(PathBuf, &[u8], &str)> = Vec::new();
    for g in &found.gitdirs {
        if !writable.iter().any(|r| g.path.starts_with(r)) {
            continue;
        }
        if g.commondir.is_none() {
            make.push((
                g.path.join("commondir"),
                COMMONDIR_HERE,
                "holding `./`: the repository itself, as without one",
            ));
        }
        let common = g.commondir.as_deref().unwrap_or(&g.path);
        let wants = g.worktree_config || flags.get(common).copied().unwrap_or(false);
        if wants && !g.has_config_worktree {
            make.push((
                g.path.join("config.worktree"),
                b"",
                "empty: extensions.worktreeConfig makes git read it",
            ));
        }
    }
    for (at, contents, what) in make {
        match resolver.create_file_nofollow(&at, contents, 0o644) {
            Ok(true) => {
                tracing::info!(
                    "created {} ({what}) so that commands cannot create it and redirect or add \
                     to git's config",
                    at.display()
                );
                keep(&mut found.protected, &mut found.unmaskable, at);
            }
            Ok(false) => keep(&mut found.protected, &mut found.unmaskable, at),
            Err(e) => tracing::warn!("cannot create {}: {e}", at.display()),
        }
    }
}

/// Walks `roots` completely, never following a symlink, not entering denied folders; an
/// error when it could not see everything (more than `limit` entries, a folder it could not
/// list). The result does not depend on the order the walk takes.
pub fn walk(
    roots: Vec<(PathBuf, OwnedFd)>,
    policy: &Policy,
    limit: usize,
) -> Result<Found, WalkError<Infallible>> {
    let mut found = Found::default();
    let tops: Vec<PathBuf> = roots.iter().map(|(p, _)| p.clone()).collect();
    // A file is compared with the denied names only when one lies inside a root (a credential
    // linked into a project): usually none does, and the walk visits every file.
    let denied_inside = tops.iter().any(|r| !policy.denied_near(r).is_empty());
    let seen = hands_roots::walk_beneath::<Infallible>(roots, limit, |l| {
        let folder = l.folder;
        let Some(_) = folder.fd else {
            // A folder the daemon may not list could hold anything: it is masked whole (a
            // command that made it unreadable finds it masked, not its secrets readable).
            keep(&mut found.paths, &mut found.unmaskable, folder.path.to_path_buf());
            return Ok(());
        };
        let root = tops.iter().find(|r| folder.path.starts_with(r));
        let kind_of =
            |name: &str, k: rustix::fs::FileType| l.get(name).is_some_and(|i| i.kind == k);
        use rustix::fs::FileType as T;
        // By what it holds (a bare repository under any name, a separate git dir), or by
        // its name (`.git`, a submodule's `.git/modules/NAME`), complete or not yet.
        let by_name = || {
            let parent = folder.path.parent();
            folder.path.file_name() == Some(OsStr::new(".git"))
                || (parent.and_then(Path::file_name) == Some(OsStr::new("modules"))
                    && parent.and_then(Path::parent).and_then(Path::file_name)
                        == Some(OsStr::new(".git")))
        };
        let is_gitdir = (kind_of("HEAD", T::RegularFile)
            && (kind_of("commondir", T::RegularFile)
                || (kind_of("objects", T::Directory) && kind_of("refs", T::Directory))))
            || by_name();
        if is_gitdir {
            found.gitdirs.push(git_dir(folder, l, &mut found.protected, &mut found.unmaskable));
        }
        for item in l.entries.iter_mut() {
            let path = folder.path.join(&item.name);
            // A protected path at any depth (a nested repository's `.git/hooks`, a
            // subproject's `.vscode`): bound read-only by the launcher. A protected folder is
            // still walked, for the secret files in it.
            if item.kind != T::Symlink
                && policy.protected_leaf(&item.name)
                && let Some(root) = root
                && let Ok(rel) = path.strip_prefix(root)
                && policy.protected(rel).is_some()
            {
                keep(&mut found.protected, &mut found.unmaskable, path.clone());
            }
            match item.kind {
                T::Directory => {
                    if policy.denied(&path, None).is_none() {
                        item.descend = true;
                    } else {
                        // A denied or credential folder reached by its real name (`~/.aws` a
                        // link to `~/dotfiles/aws`, a root spelt otherwise): masked here too,
                        // not only by the name it was configured under.
                        keep(&mut found.paths, &mut found.unmaskable, path);
                    }
                }
                T::RegularFile => {
                    if item.name == ".git" {
                        // A submodule's or linked worktree's `.git` file: read-only, and the
                        // git dir it names is protected like any other.
                        if let Some(head) = folder.read_head(&item.name, 4096)
                            && let Some(target) = gitdir_line(&head)
                        {
                            found.pointed.push(hands_roots::lexical(&folder.path.join(target)));
                        }
                        keep(&mut found.protected, &mut found.unmaskable, path.clone());
                    }
                    // Another name of a denied file is hidden; another name of a file the
                    // host trusts (`deps/hands-HASH`, cargo's hard link of the daemon's own
                    // binary) is read-only, as the file itself is.
                    let named = policy.is_secret(&path)
                        || (denied_inside && policy.denied(&path, None).is_some());
                    let linked = if named {
                        None
                    } else {
                        folder.stat(&item.name).ok().filter(|st| st.st_nlink > 1)
                    };
                    let id = linked.map(|st| (st.st_dev, st.st_ino));
                    if named || id.is_some_and(|(d, i)| policy.is_denied_identity(d, i)) {
                        keep(&mut found.paths, &mut found.unmaskable, path);
                    } else if id.is_some_and(|(d, i)| policy.is_host_identity(d, i)) {
                        keep(&mut found.protected, &mut found.unmaskable, path);
                    }
                }
                _ => {}
            }
        }
        Ok(())
    })?;
    found.seen = seen;
    // The git dirs `.git` files name: protected like the ones found by what they hold (the
    // launcher binds only what exists). One outside the roots is refused to the tools and
    // invisible to commands like any path outside the roots.
    let known: HashSet<&Path> = found.gitdirs.iter().map(|g| g.path.as_path()).collect();
    let mut more = Vec::new();
    for target in &found.pointed {
        if !known.contains(target.as_path()) && tops.iter().any(|r| target.starts_with(r)) {
            more.extend(GIT_CONTROL.iter().map(|n| target.join(n)));
        }
    }
    for p in more {
        keep(&mut found.protected, &mut found.unmaskable, p);
    }
    Ok(found)
}

/// A git dir's record, its control files added to `protected`.
fn git_dir(
    folder: Folder<'_>,
    l: &hands_roots::Listing<'_>,
    protected: &mut Vec<PathBuf>,
    unmaskable: &mut Option<PathBuf>,
) -> GitDir {
    for name in GIT_CONTROL {
        if l.get(name).is_some_and(|i| i.kind != rustix::fs::FileType::Symlink) {
            keep(protected, unmaskable, folder.path.join(name));
        }
    }
    let commondir = l.get("commondir").and_then(|_| {
        let text = folder.read_head(OsStr::new("commondir"), 4096)?;
        let line = String::from_utf8(text).ok()?;
        let line = line.lines().next()?.trim();
        (!line.is_empty()).then(|| hands_roots::lexical(&folder.path.join(line)))
    });
    let worktree_config = l.get("config").is_some()
        && folder.read_head(OsStr::new("config"), 1 << 20).is_some_and(|c| worktree_config(&c));
    GitDir {
        path: folder.path.to_path_buf(),
        commondir,
        worktree_config,
        has_config_worktree: l.get("config.worktree").is_some(),
    }
}

/// The git dir a `.git` file names (`gitdir: <path>` on its first line).
fn gitdir_line(text: &[u8]) -> Option<PathBuf> {
    let text = std::str::from_utf8(text).ok()?;
    let target = text.lines().next()?.strip_prefix("gitdir:")?.trim();
    (!target.is_empty()).then(|| PathBuf::from(target))
}

/// Whether a git config text sets `extensions.worktreeConfig` to true (git's section and key
/// names are case-insensitive; a bare key means true).
fn worktree_config(text: &[u8]) -> bool {
    let text = String::from_utf8_lossy(text);
    let mut section = String::new();
    let mut on = false;
    for line in text.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix('[') {
            section = rest.split(']').next().unwrap_or("").trim().to_ascii_lowercase();
            continue;
        }
        if section != "extensions" {
            continue;
        }
        let (key, value) = line.split_once('=').unwrap_or((line, "true"));
        if key.trim().eq_ignore_ascii_case("worktreeconfig") {
            let v = value.split(['#', ';']).next().unwrap_or("").trim().to_ascii_lowercase();
            on = matches!(v.as_str(), "true" | "yes" | "on" | "1" | "");
        }
    }
    on
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
#[derive(Debug, Clone)]
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
    roots: &[hands_roots::RootSpec],
    resolver: &Resolver,
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
        // Through the resolver's descriptors: a folder on the way swapped for a symlink makes
        // this fail rather than create the placeholder wherever the link points.
        let created = if folder {
            resolver.create_dir_nofollow(&at, 0o700)
        } else {
            resolver.create_file_nofollow(&at, b"", 0o600)
        };
        match created {
            Ok(true) => tracing::info!(
                "created the empty {} {} so that commands cannot create the denied path {} \
                 (the sandbox masks it); it may be removed while hands is not running",
                if folder { "folder" } else { "file" },
                at.display(),
                d.path.display()
            ),
            Ok(false) => {}
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
    roots: &[hands_roots::RootSpec],
    extra: &[&str],
    resolver: &Resolver,
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
            match resolver.create_dir_nofollow(&at, 0o755) {
                Ok(true) => tracing::info!(
                    "created the empty folder {} so that commands cannot create the protected \
                     path (the sandbox binds it read-only)",
                    at.display()
                ),
                Ok(false) => {}
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
    use hands_roots::PolicyLists;
    use hands_roots::RootSpec as RootCfg;

    fn start(p: &Path) -> Vec<(PathBuf, OwnedFd)> {
        vec![(p.to_path_buf(), hands_roots::open_start(p).unwrap())]
    }

    fn resolver(roots: &[RootCfg]) -> Resolver {
        let specs: Vec<hands_roots::RootSpec> = roots
            .iter()
            .map(|r| hands_roots::RootSpec { path: r.path.clone(), writable: r.writable })
            .collect();
        Resolver::new(&specs, Policy::new(&PolicyLists::default()).unwrap()).unwrap()
    }

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
        let found = walk(start(&root), &p, 1000).unwrap();
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
        let found = walk(start(&root), &p, 1000).unwrap();
        let mut paths = found.paths.clone();
        paths.sort();
        let want = [
            root.join(".env"),
            root.join("a/b/key.pem"),
            root.join("a/innocent"),
            root.join("denied"),
        ];
        assert_eq!(paths, want, "the denied folder is masked whole, not walked");
        assert!(found.seen >= 7, "{}", found.seen);
        // Past the limit the walk fails: no partial result to mistake for a complete one.
        assert!(matches!(walk(start(&root), &p, 2), Err(WalkError::Limit { limit: 2 })));
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
        let r = resolver(&roots);
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
            placeholders(&denied, &roots, &r, false, &mut missing).unwrap(),
            Vec::<PathBuf>::new()
        );
        assert_eq!(missing, want);
        assert_eq!(std::fs::read_dir(&rw).unwrap().count(), 0, "check made something");
        let made = placeholders(&denied, &roots, &r, true, &mut Vec::new()).unwrap();
        assert_eq!(made, want);
        assert!(rw.join(".ssh").is_dir());
        assert!(rw.join(".docker").is_dir());
        assert!(rw.join("private").is_dir());
        assert_eq!(std::fs::read(rw.join(".netrc")).unwrap(), b"");
        assert!(!ro.join(".aws").exists());
        assert!(!base.join("elsewhere").exists());
        // The next start finds the folder and makes the next missing component, then nothing.
        let again = placeholders(&denied, &roots, &r, true, &mut Vec::new()).unwrap();
        assert_eq!(again, [rw.join(".docker/config.json")]);
        assert_eq!(std::fs::read(rw.join(".docker/config.json")).unwrap(), b"");
        assert_eq!(
            placeholders(&denied, &roots, &r, true, &mut Vec::new()).unwrap(),
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
        let r = resolver(&roots);
        let denied = [
            DeniedPath::credential(&rw.join("link/.ssh")),
            DeniedPath::credential(&rw.join(".aws")),
        ];
        assert_eq!(
            placeholders(&denied, &roots, &r, true, &mut Vec::new()).unwrap(),
            Vec::<PathBuf>::new()
        );
        assert!(!out.join(".ssh").exists());
        assert!(!base.join("gone").exists());
    }

    /// Every git dir is found by what it holds — a nested `.git`, a bare repository under any
    /// name, a folder a `.git` file names — and its control files are protected; the `.git`
    /// file itself is protected; a missing `commondir` is made (and a missing `config.worktree`
    /// where `extensions.worktreeConfig` is on), by descriptors only.
    #[test]
    fn git_dirs_are_found_by_what_they_hold_and_their_control_files_protected() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let root = base.join("root");
        let bare = root.join("deep/x.git");
        let sep = root.join("gd");
        for g in [&bare, &sep] {
            std::fs::create_dir_all(g.join("objects")).unwrap();
            std::fs::create_dir_all(g.join("refs")).unwrap();
            std::fs::create_dir_all(g.join("hooks")).unwrap();
            std::fs::write(g.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        }
        std::fs::write(bare.join("config"), "[core]\n\tbare = true\n").unwrap();
        std::fs::write(
            sep.join("config"),
            "[core]\n\trepositoryformatversion = 1\n[Extensions]\n\tworktreeConfig = true\n",
        )
        .unwrap();
        std::fs::create_dir_all(root.join("wt")).unwrap();
        std::fs::write(root.join("wt/.git"), "gitdir: ../gd\n").unwrap();
        // Not a git dir: a `config` and `hooks` without HEAD stay writable.
        std::fs::create_dir_all(root.join("app/hooks")).unwrap();
        std::fs::write(root.join("app/config"), "x").unwrap();
        let roots = [RootCfg { path: root.clone(), writable: true }];
        let r = resolver(&roots);
        let mut found = walk(start(&root), &policy(vec![]), 1000).unwrap();
        git_placeholders(&mut found, &[root.as_path()], &r);
        let got: HashSet<PathBuf> = found.protected.iter().cloned().collect();
        for want in [
            bare.join("config"),
            bare.join("hooks"),
            bare.join("commondir"),
            sep.join("config"),
            sep.join("hooks"),
            sep.join("commondir"),
            sep.join("config.worktree"),
            root.join("wt/.git"),
        ] {
            assert!(got.contains(&want), "{} not protected: {got:?}", want.display());
        }
        assert!(!got.contains(&root.join("app/config")) && !got.contains(&root.join("app/hooks")));
        assert_eq!(std::fs::read(bare.join("commondir")).unwrap(), b"./\n");
        assert_eq!(std::fs::read(sep.join("config.worktree")).unwrap(), b"");
        assert!(!bare.join("config.worktree").exists(), "no worktreeConfig there");
        assert_eq!(found.pointed, std::slice::from_ref(&sep));
    }

    /// A git dir reached through a folder that is now a symlink out of the root: the
    /// `commondir` the daemon makes fails instead of landing at the link's target.
    #[test]
    fn a_commondir_is_never_made_through_a_symlinked_folder() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let (root, out) = (base.join("root"), base.join("out"));
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(out.join(".git")).unwrap();
        std::os::unix::fs::symlink(&out, root.join("sub")).unwrap();
        let roots = [RootCfg { path: root.clone(), writable: true }];
        let r = resolver(&roots);
        // As if the walk had listed `sub/.git` the moment before a command swapped `sub`.
        let mut found = Found::default();
        found.gitdirs.push(GitDir {
            path: root.join("sub/.git"),
            commondir: None,
            worktree_config: false,
            has_config_worktree: false,
        });
        git_placeholders(&mut found, &[root.as_path()], &r);
        assert!(!out.join(".git/commondir").exists(), "created outside the root");
        assert!(found.protected.is_empty());
    }

    #[test]
    fn worktree_config_is_read_as_git_reads_it() {
        for (text, on) in [
            ("[extensions]\n\tworktreeConfig = true\n", true),
            ("[EXTENSIONS]\nworktreeconfig\n", true),
            ("[extensions]\n\tworktreeConfig = yes ; why\n", true),
            ("[extensions]\n\tworktreeConfig = false\n", false),
            ("[core]\n\tworktreeConfig = true\n", false),
            ("", false),
        ] {
            assert_eq!(worktree_config(text.as_bytes()), on, "{text:?}");
        }
    }
}
