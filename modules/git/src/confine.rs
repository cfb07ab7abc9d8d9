//! Opening a repository under the roots: where it may be, what its config may say, and the
//! checks that make a hostile repository refuse rather than reach outside the roots.

use crate::{Git, GitError};
use git2::{Repository, RepositoryOpenFlags};
use hands_roots::PathError;
use std::ffi::OsStr;
use std::io::Read;
use std::path::{Component, Path, PathBuf};

/// Entries of a git dir inspected for symlinks leaving the roots; past this the walk stops.
const GITDIR_SCAN_LIMIT: usize = 200_000;
/// How deep libgit2 follows `objects/info/alternates` chains (it stops at 5).
const ALTERNATES_DEPTH: u32 = 5;

/// Opened repositories kept between read-class calls (most recently used last).
pub(crate) const REPO_CACHE_SIZE: usize = 8;

/// An opened repository kept for reuse, with the stamps it was checked against.
pub(crate) struct CachedRepo {
    /// The real path the tools named (the work tree, or the bare repository).
    key: PathBuf,
    stamp: Vec<FileStamp>,
    repository: Repository,
}

impl std::fmt::Debug for CachedRepo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedRepo").field("key", &self.key).finish_non_exhaustive()
    }
}

/// (dev, inode, mtime s, mtime ns, size) of a file (mtime -1 and size 0 for a directory), or
/// all zero when it is missing.
type FileStamp = (u64, u64, i64, i64, u64);

/// Stamps of what decides where the repository reads from: `DIR/.git` itself and the common
/// dir's `objects` and `refs` (not followed: a folder swapped for another, or for a link,
/// changes its identity, and libgit2 keeps pack files and ref caches of the old one open), the
/// git dir's `HEAD`, `config` and `config.worktree`, and the common dir's `config` (these
/// followed). `None` where stamps are unavailable, which turns caching off.
#[cfg(unix)]
fn stamp(abs: &Path, gitdir: &Path, commondir: &Path) -> Option<Vec<FileStamp>> {
    use std::os::unix::fs::MetadataExt;
    let files = [
        abs.join(".git"),
        gitdir.join("HEAD"),
        gitdir.join("config"),
        gitdir.join("config.worktree"),
        commondir.join("config"),
        commondir.join("objects"),
        commondir.join("refs"),
    ];
    // Which of `files` are stamped as themselves, not as what they point to.
    let unfollowed = |i: usize| i == 0 || i >= 5;
    Some(
        files
            .iter()
            .enumerate()
            .map(
                |(i, f)| {
                    if unfollowed(i) { std::fs::symlink_metadata(f) } else { std::fs::metadata(f) }
                },
            )
            .map(|m| match m {
                // A directory's mtime moves with every lock file created in it (git's own
                // `status` takes `index.lock`): its identity is what counts.
                Ok(m) if m.is_dir() => (m.dev(), m.ino(), -1, -1, 0),
                Ok(m) => (m.dev(), m.ino(), m.mtime(), m.mtime_nsec(), m.size()),
                Err(_) => (0, 0, 0, 0, 0),
            })
            .collect(),
    )
}

#[cfg(not(unix))]
fn stamp(_abs: &Path, _gitdir: &Path, _commondir: &Path) -> Option<Vec<FileStamp>> {
    None
}

/// libgit2's open of `abs` itself (no parent search), errors mapped.
pub(crate) fn open_repository(abs: &Path) -> Result<Repository, GitError> {
    Repository::open_ext(abs, RepositoryOpenFlags::NO_SEARCH, std::iter::empty::<&OsStr>()).map_err(
        |e| match e.code() {
            git2::ErrorCode::NotFound => GitError::NotARepo { path: abs.to_path_buf() },
            git2::ErrorCode::Owner => GitError::Owner { path: abs.to_path_buf() },
            _ => GitError::Git { op: "open", source: e },
        },
    )
}

/// The files libgit2 reads by path when it opens the repository whose git dir is `gitdir`,
/// and in the common dir its `commondir` names; those that exist must be regular files (the
/// walk of the git dir after the open checks everything else before any tool reads it).
#[expect(
    clippy::disallowed_methods,
    reason = "libgit2 reads these by path, in a git dir already confined to the roots"
)]
fn opened_files_regular(repo: &Path, gitdir: &Path) -> Result<(), GitError> {
    const OPENED: [&str; 5] = ["HEAD", "config", "config.worktree", "commondir", "gitdir"];
    let check = |dir: &Path| -> Result<(), GitError> {
        for name in OPENED {
            let p = dir.join(name);
            // Following a link (stat never blocks): what libgit2 would open.
            if let Ok(m) = std::fs::metadata(&p) {
                let kind =
                    hands_roots::FileType::from_raw_mode(std::os::unix::fs::MetadataExt::mode(&m));
                if kind != hands_roots::FileType::RegularFile
                    && kind != hands_roots::FileType::Directory
                {
                    return Err(special_in(repo, &p, kind));
                }
            }
        }
        Ok(())
    };
    check(gitdir)?;
    // `commondir` was a regular file just now; read at most a line of it, opened without
    // blocking in case it was swapped for a FIFO since.
    use std::os::unix::fs::OpenOptionsExt;
    let nonblocking = rustix::fs::OFlags::NONBLOCK.bits() as i32;
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nonblocking)
        .open(gitdir.join("commondir"));
    let commondir = opened.ok().and_then(|f| {
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(f.take(4096)), &mut line).ok()?;
        Some(gitdir.join(line.trim()))
    });
    match commondir {
        Some(c) if c != gitdir => check(&c),
        _ => Ok(()),
    }
}

/// The refusal of a special file met in a git dir.
fn special_in(repo: &Path, at: &Path, kind: hands_roots::FileType) -> GitError {
    GitError::Unchecked {
        repo: repo.to_path_buf(),
        why: format!(
            "{} in its git dir is a {} where git keeps a regular file (a command may have made \
             it; reading it would block); a person can remove it",
            at.display(),
            hands_roots::kind_name(kind)
        ),
    }
}

/// A repository opened and checked: every part of it lies under the roots.
pub(crate) struct Repo {
    pub(crate) repo: Repository,
    /// The real path of the work tree, `None` for a bare repository.
    pub(crate) workdir: Option<PathBuf>,
    /// The real path of the git dir (`.git`, or `.git/worktrees/NAME` for a linked worktree).
    pub(crate) gitdir: PathBuf,
}

impl Repo {
    /// The work tree, or a clear refusal for a bare repository.
    pub(crate) fn workdir(&self, tool: &'static str) -> Result<&Path, GitError> {
        self.workdir.as_deref().ok_or_else(|| GitError::Bare { path: self.gitdir.clone(), tool })
    }

    /// Refuses while a merge, rebase, cherry-pick or similar is in progress.
    pub(crate) fn check_clean_state(&self) -> Result<(), GitError> {
        let state = self.repo.state();
        if state == git2::RepositoryState::Clean {
            return Ok(());
        }
        Err(GitError::Busy {
            path: self.workdir.clone().unwrap_or_else(|| self.gitdir.clone()),
            state: format!("{state:?}").to_lowercase(),
        })
    }
}

/// Whether a repository will be written to (refs, index, work tree, worktrees).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    Read,
    Write,
}

impl Git {
    /// Opens the repository at the tool path `repo` (default: the first root) and checks it:
    /// no parent search, `.git` files, git dir, common dir, work tree, alternates and symlinks
    /// inside the git dir all under the roots, a config that reads nothing outside them, and
    /// for [`Access::Write`] a writable, unprotected location.
    pub(crate) fn open(&self, repo: Option<&str>, access: Access) -> Result<Repo, GitError> {
        let abs = self.resolver.open_dir(repo.unwrap_or(""))?.abs;
        if access == Access::Write {
            // Write tools open afresh; the cached entry would only go stale.
            self.evict(&abs);
        }
        self.check_dotgit(&abs)?;
        let repository = open_repository(&abs)?;
        let (r, _) = self.check_opened(&abs, repository, access)?;
        Ok(r)
    }

    /// Runs a read-class tool on the repository at `repo`, reusing an opened repository kept
    /// from an earlier call when the on-disk stamps of its `.git`, `HEAD` and config files are
    /// unchanged. Every check [`Git::open`] runs is run again, against the current state,
    /// before the repository is used; a failing check drops the cached entry and refuses.
    pub(crate) fn with_read<T>(
        &self,
        repo: Option<&str>,
        f: impl FnOnce(&Repo) -> Result<T, GitError>,
    ) -> Result<T, GitError> {
        let abs = self.resolver.open_dir(repo.unwrap_or(""))?.abs;
        // Taken out of the cache for the whole call: a failed check leaves it dropped.
        let cached = self.take_cached(&abs);
        self.check_dotgit(&abs)?;
        let reused = cached.and_then(|c| {
            let now = stamp(&abs, c.repository.path(), c.repository.commondir())?;
            if now != c.stamp {
                return None;
            }
            // libgit2 keeps the parsed index; re-read it when it changed on disk.
            let mut index = c.repository.index().ok()?;
            index.read(false).ok()?;
            Some(c.repository)
        });
        let repository = match reused {
            Some(r) => r,
            None => open_repository(&abs)?,
        };
        // Stamped before the checks, so a change made while they run shows on the next call.
        let st = stamp(&abs, repository.path(), repository.commondir());
        let (r, _) = self.check_opened(&abs, repository, Access::Read)?;
        let Some(st) = st else {
            return f(&r);
        };
        let out = f(&r)?;
        self.put_cached(CachedRepo { key: abs, stamp: st, repository: r.repo });
        Ok(out)
    }

    /// The checks of [`Git::open`] after libgit2 opened the repository; also returns the real
    /// common dir.
    fn check_opened(
        &self,
        abs: &Path,
        repository: Repository,
        access: Access,
    ) -> Result<(Repo, PathBuf), GitError> {
        let gitdir = self.inside(abs, "git dir", repository.path())?;
        let commondir = self.inside(abs, "common dir", repository.commondir())?;
        let workdir = match repository.workdir() {
            Some(w) => Some(self.inside(abs, "work tree", w)?),
            None => None,
        };
        self.check_gitdir_links(abs, &gitdir)?;
        if commondir != gitdir {
            self.check_gitdir_links(abs, &commondir)?;
        }
        self.check_alternates(abs, &commondir.join("objects"), 0)?;
        self.check_config(&repository, &commondir)?;

        if access == Access::Write {
            self.check_writable(&commondir)?;
            self.check_writable(&gitdir)?;
            if let Some(w) = &workdir {
                self.check_writable(w)?;
            }
        }
        Ok((Repo { repo: repository, workdir, gitdir }, commondir))
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, Vec<CachedRepo>> {
        hands_roots::lock(&self.repos)
    }

    fn take_cached(&self, key: &Path) -> Option<CachedRepo> {
        let mut cache = self.cache();
        let i = cache.iter().position(|c| c.key == key)?;
        Some(cache.remove(i))
    }

    fn put_cached(&self, entry: CachedRepo) {
        let mut cache = self.cache();
        cache.retain(|c| c.key != entry.key);
        cache.push(entry);
        while cache.len() > REPO_CACHE_SIZE {
            cache.remove(0);
        }
    }

    /// Drops the cached repository at `key`, if any.
    pub(crate) fn evict(&self, key: &Path) {
        drop(self.take_cached(key));
    }

    /// Pre-checks `DIR/.git` before libgit2 follows it: a directory (or in-root link to one)
    /// is fine; a `.git` file must name a git dir under the roots. The files libgit2 reads
    /// while it opens a repository must be regular files (a FIFO there would block it).
    fn check_dotgit(&self, dir: &Path) -> Result<(), GitError> {
        let dotgit = dir.join(".git");
        let shown = path_str(&dotgit)?;
        match self.resolver.open_dir(shown) {
            Ok(_) => opened_files_regular(dir, &dotgit),
            // A bare repository, or none: the folder itself.
            Err(PathError::NotFound { .. }) => opened_files_regular(dir, dir),
            Err(PathError::NotADirectory { .. }) => {
                let mut opened = self.resolver.open_file(shown)?;
                let mut text = String::new();
                (&mut opened.file)
                    .take(4096)
                    .read_to_string(&mut text)
                    .map_err(|e| PathError::Io { path: dotgit.clone(), op: "read", source: e })?;
                let Some(target) = text.lines().next().and_then(|l| l.strip_prefix("gitdir:"))
                else {
                    return Err(GitError::NotARepo { path: dir.to_path_buf() });
                };
                let target = dir.join(target.trim());
                let target = self.inside(dir, ".git file's target", &target)?;
                opened_files_regular(dir, &target)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Canonicalises `p` (lexically when it does not exist) and requires it to lie under a
    /// root and off every denied path; returns the real path.
    pub(crate) fn inside(
        &self,
        repo: &Path,
        what: &'static str,
        p: &Path,
    ) -> Result<PathBuf, GitError> {
        let real = std::fs::canonicalize(p).unwrap_or_else(|_| lexical(p));
        let outside =
            || GitError::RepoOutside { repo: repo.to_path_buf(), what, target: real.clone() };
        if self.resolver.root_of(&real).is_none() {
            return Err(outside());
        }
        if self.resolver.policy().denied(&real, None).is_some() {
            return Err(outside());
        }
        Ok(real)
    }

    /// Refuses a symlink anywhere in a git dir whose target leaves the roots (a `.git/objects`
    /// or `.git/refs` pointing into another user's repository would let the tools read it).
    /// Fails closed: a git dir too large to check completely, or with a folder the daemon may
    /// not list, is refused too — a partial check would let the links sit past its end.
    fn check_gitdir_links(&self, repo: &Path, gitdir: &Path) -> Result<(), GitError> {
        let unchecked = |why: String| GitError::Unchecked { repo: repo.to_path_buf(), why };
        let fd = hands_roots::open_start(gitdir).map_err(|e| {
            unchecked(format!("its git dir cannot be opened: {}", std::io::Error::from(e)))
        })?;
        let start = vec![(gitdir.to_path_buf(), fd)];
        let walked = hands_roots::walk_beneath(start, GITDIR_SCAN_LIMIT, |l| {
            let Some(_) = l.folder.fd else {
                return Err(unchecked(format!(
                    "{} in its git dir cannot be listed",
                    l.folder.path.display()
                )));
            };
            for item in l.entries.iter_mut() {
                match item.kind {
                    hands_roots::FileType::Symlink => {
                        let at = l.folder.path.join(&item.name);
                        self.inside(repo, "symlink inside the git dir", &at)?;
                    }
                    // Linked worktrees' own git dirs are checked when they are opened.
                    hands_roots::FileType::Directory => item.descend = true,
                    hands_roots::FileType::RegularFile => {}
                    // libgit2 opens what it reads by path, blocking: a FIFO (or a device) at a
                    // ref, the index or an object would hang the tool (issue 23.4).
                    kind => {
                        return Err(special_in(repo, &l.folder.path.join(&item.name), kind));
                    }
                }
            }
            Ok(())
        });
        match walked {
            Ok(_) => Ok(()),
            Err(hands_roots::WalkError::Visit(e)) => Err(e),
            Err(hands_roots::WalkError::Limit { limit }) => Err(unchecked(format!(
                "its git dir holds more than {limit} entries, too many to check for symlinks \
                 that leave the roots (a command may have made them); a person can run `git gc` \
                 or remove what does not belong there"
            ))),
            Err(e @ hands_roots::WalkError::Io { .. }) => Err(unchecked(e.to_string())),
        }
    }

    /// Refuses `objects/info/alternates` entries that borrow objects from outside the roots,
    /// following chains as deep as libgit2 does. The file is read as libgit2 1.9 reads it
    /// (`load_alternates`): a C string (nothing after a NUL), lines split at `\r` as well as
    /// `\n`, nothing trimmed, raw bytes; a line starting with `.` is joined to this `objects`
    /// folder, and any other relative line is taken from the daemon's own working folder —
    /// where git takes it from `objects` — so such a line must be inside the roots both ways.
    /// (Found by session 41's attack pass: a line split at `\r`, or a relative line read from
    /// the daemon's folder, let the git tools read another repository's objects.)
    #[expect(
        clippy::disallowed_methods,
        reason = "libgit2 reads it by path too, in a repository already confined to the roots"
    )]
    fn check_alternates(&self, repo: &Path, objects: &Path, depth: u32) -> Result<(), GitError> {
        use std::os::unix::ffi::OsStrExt;
        if depth > ALTERNATES_DEPTH {
            return Ok(());
        }
        let file = objects.join("info").join("alternates");
        let Ok(bytes) = std::fs::read(&file) else { return Ok(()) };
        let text = bytes.split(|b| *b == 0).next().unwrap_or_default();
        for line in text.split(|b| *b == b'\r' || *b == b'\n') {
            let (Some(&first), path) = (line.first(), Path::new(std::ffi::OsStr::from_bytes(line)))
            else {
                continue;
            };
            let mut ways = vec![objects.join(path)];
            if first == b'#' {
                continue;
            } else if first != b'.' && first != b'/' {
                let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
                ways.push(cwd.join(path));
            }
            let mut alt = PathBuf::new();
            for way in ways {
                alt = self.inside(repo, "alternate object store", &way)?;
            }
            self.check_alternates(repo, &alt, depth + 1)?;
        }
        Ok(())
    }

    /// Scans the repository's config (its own file, worktree config and every include) for
    /// keys that would make libgit2 read a file outside the roots, or rewrite a URL into a
    /// program (`ext::`). Keys that make command-line git run programs are inert in libgit2
    /// (see the README) and are left alone.
    fn check_config(&self, repo: &Repository, commondir: &Path) -> Result<(), GitError> {
        let config = repo.config().map_err(GitError::git("read config"))?;
        let mut entries = config.entries(None).map_err(GitError::git("read config"))?;
        let mut found: Vec<(String, String)> = Vec::new();
        while let Some(entry) = entries.next() {
            let entry = entry.map_err(GitError::git("read config"))?;
            let name = String::from_utf8_lossy(entry.name_bytes()).to_lowercase();
            let value = String::from_utf8_lossy(entry.value_bytes()).into_owned();
            found.push((name, value));
        }
        for (key, value) in found {
            let hostile =
                |why| GitError::HostileConfig { key: key.clone(), value: value.clone(), why };
            let path_valued = key == "include.path"
                || (key.starts_with("includeif.") && key.ends_with(".path"))
                || key == "core.excludesfile"
                || key == "core.attributesfile";
            if path_valued {
                if !self.config_path_inside(&value, commondir) {
                    return Err(hostile("it reads a file outside the roots"));
                }
            } else if key.starts_with("url.")
                && (key.ends_with(".insteadof") || key.ends_with(".pushinsteadof"))
            {
                let base = &key["url.".len()..key.rfind('.').unwrap_or(key.len())];
                if is_ext(base) || is_ext(&value) {
                    return Err(hostile("`ext::` URLs run a program"));
                }
                if let Some(local) = local_url_path(base)
                    && !self.config_path_inside(local, commondir)
                {
                    return Err(hostile("it rewrites URLs to a path outside the roots"));
                }
            } else if key.starts_with("remote.")
                && (key.ends_with(".url") || key.ends_with(".pushurl"))
                && is_ext(&value)
            {
                return Err(hostile("`ext::` URLs run a program"));
            }
        }
        Ok(())
    }

    /// Whether a path from the config (absolute, `~/…`, or relative to the git dir) lies under
    /// a root.
    fn config_path_inside(&self, value: &str, base: &Path) -> bool {
        let p = if let Some(rest) = value.strip_prefix("~/") {
            match std::env::var_os("HOME") {
                Some(home) => PathBuf::from(home).join(rest),
                None => return false,
            }
        } else if value.starts_with('~') {
            return false;
        } else {
            base.join(value)
        };
        let real = std::fs::canonicalize(&p).unwrap_or_else(|_| lexical(&p));
        self.resolver.root_of(&real).is_some()
            && self.resolver.policy().denied(&real, None).is_none()
    }

    /// Refuses writes where the resolver would: read-only roots, denied and protected paths.
    pub(crate) fn check_writable(&self, abs: &Path) -> Result<(), GitError> {
        let Some(i) = self.resolver.root_of(abs) else {
            return Err(GitError::RepoOutside {
                repo: abs.to_path_buf(),
                what: "location",
                target: abs.to_path_buf(),
            });
        };
        let root = &self.resolver.roots()[i];
        if let Some(why) = self.resolver.policy().denied(abs, None) {
            return Err(PathError::Denied { path: abs.to_path_buf(), why }.into());
        }
        if !root.writable() {
            return Err(PathError::ReadOnlyRoot {
                path: abs.to_path_buf(),
                root: root.path().to_path_buf(),
            }
            .into());
        }
        let rel = abs.strip_prefix(root.path()).unwrap_or(Path::new(""));
        if let Some(rule) = self.resolver.policy().protected(rel) {
            return Err(PathError::Protected { path: abs.to_path_buf(), rule }.into());
        }
        if let Some(t) = self.resolver.policy().host_path(abs, None) {
            let (what, remedy) = (t.what.clone(), t.remedy.clone());
            return Err(PathError::Trusted { path: abs.to_path_buf(), what, remedy }.into());
        }
        Ok(self.resolver.host_trusted(abs)?)
    }

    /// Places a path filter given as git prints it — relative to the work tree — or absolute
    /// under the roots: `..` and NUL are refused before anything else, then the path must lie
    /// under a root and inside the work tree. Returned relative to the work tree (empty for
    /// the work tree itself).
    pub(crate) fn repo_relative(&self, workdir: &Path, given: &str) -> Result<PathBuf, GitError> {
        if given.contains('\0') {
            return Err(PathError::Nul.into());
        }
        let p = Path::new(given);
        if p.components().any(|c| c == Component::ParentDir) {
            return Err(PathError::DotDot { path: given.to_string() }.into());
        }
        let joined;
        let abs = if p.is_absolute() {
            given
        } else {
            joined = workdir.join(p);
            path_str(&joined)?
        };
        let loc = self.resolver.locate(abs)?;
        // The root part of `loc.abs` is canonical; the rest is lexical and `..`-free.
        let Ok(rel) = loc.abs.strip_prefix(workdir) else {
            return Err(GitError::PathOutsideRepo {
                given: given.to_string(),
                workdir: workdir.to_path_buf(),
            });
        };
        if !p.is_absolute() && std::fs::symlink_metadata(&loc.abs).is_err() {
            // The old spelling, relative to the first root, matches nothing here: say so
            // rather than filter everything away.
            let root_rel = self.resolver.roots()[0].path().join(p);
            if let Ok(meant) = root_rel.strip_prefix(workdir)
                && !meant.as_os_str().is_empty()
                && std::fs::symlink_metadata(&root_rel).is_ok()
            {
                return Err(GitError::PathNotInWorkTree {
                    given: given.to_string(),
                    workdir: workdir.to_path_buf(),
                    meant: meant.to_string_lossy().into_owned(),
                });
            }
        }
        Ok(rel.to_path_buf())
    }

    /// Whether the file at `rel` in the work tree is one the policy hides from every tool
    /// (denied, credential, secret — by name, and by file identity, so a hard link to
    /// `~/.ssh/id_ed25519` under an innocent name is hidden too): its content is never shown
    /// or committed.
    pub(crate) fn hidden(&self, workdir: &Path, rel: &Path) -> bool {
        use std::os::unix::fs::MetadataExt;
        let abs = workdir.join(rel);
        // The entry itself, not a symlink's target: git stores a symlink as its target's name.
        let id = std::fs::symlink_metadata(&abs).ok().map(|m| (m.dev(), m.ino()));
        self.resolver.policy().denied_ids(&abs, id).is_some()
            || self.resolver.policy().is_secret(&abs)
    }

    /// The protected rule a work-tree path falls under, if any (by its place in its root), or
    /// what the host trusts there (the daemon's own binary, a start-up file of the home).
    pub(crate) fn protected(&self, workdir: &Path, rel: &Path) -> Option<String> {
        use std::os::unix::fs::MetadataExt;
        let abs = workdir.join(rel);
        let root = self.resolver.root_of(&abs)?;
        let in_root = abs.strip_prefix(self.resolver.roots()[root].path()).ok()?;
        let id = std::fs::symlink_metadata(&abs).ok().map(|m| (m.dev(), m.ino()));
        self.resolver
            .policy()
            .protected(in_root)
            .or_else(|| self.resolver.policy().host_path(&abs, id).map(|t| t.what.clone()))
            .or_else(|| self.resolver.host_trusted(&abs).err().map(|e| e.to_string()))
    }
}

/// The path as UTF-8, for the resolver's string interface.
pub(crate) fn path_str(p: &Path) -> Result<&str, GitError> {
    p.to_str().ok_or_else(|| PathError::NotUtf8 { path: p.to_path_buf() }.into())
}

/// Removes `.` and folds `..` without touching the filesystem.
pub(crate) fn lexical(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

fn is_ext(url: &str) -> bool {
    url.trim_start().to_ascii_lowercase().starts_with("ext::")
}

/// The filesystem path a local URL names (`/path` or `file:///path`), if it is one.
pub(crate) fn local_url_path(url: &str) -> Option<&str> {
    if url.starts_with('/') {
        return Some(url);
    }
    let lower = url.to_ascii_lowercase();
    if lower.starts_with("file://") {
        let rest = &url["file://".len()..];
        let rest = if rest.to_ascii_lowercase().starts_with("localhost/") {
            &rest["localhost".len()..]
        } else {
            rest
        };
        return rest.starts_with('/').then_some(rest);
    }
    None
}
