//! Confined path resolution: every path a tool touches is resolved here, beneath a pinned root.
//!
//! A [`Resolver`] holds the module's roots, each canonicalised once and pinned as an `O_PATH`
//! directory descriptor, and a [`Policy`] (runner-denied and credential paths, secret-file
//! patterns, protected paths). Resolution is lexical first (no `..`, no NUL, under a root), then
//! by the kernel: `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)` from the root's descriptor,
//! so a symlink that leaves the root or a `/proc` magic link fails in the kernel, not in a
//! check that could race. Callers then work on the descriptors returned, never on the path.

// The lib target itself is checked without this (clippy.toml, SPEC §11).
#![cfg_attr(
    test,
    allow(
        clippy::disallowed_methods,
        reason = "unit tests make and read their fixtures by path and spawn what they test against"
    )
)]

pub mod busy;
mod error;
pub mod fold;
pub mod gitcfg;
mod home;
mod lock;
mod nofollow;
mod openat;
mod policy;
pub mod trust;
mod walk;
mod write_checks;

pub use error::{PATH_MAX, PathError, QUOTE_MAX, Result, Shown, shown};
pub use home::{expand_tilde, home_dir};
pub use lock::lock;
pub use openat::fd_path;
use openat::{fstat, open_flags, openat2_beneath, openat2_plain, reopen};
pub use policy::{HostPath, Policy, PolicyLists, rule_ends, rule_fits, rule_within};
pub use rustix::fs::FileType;
pub use trust::{Trust, TrustError, Trusted};
pub use walk::{
    Folder, Item, Listing, WalkError, lenient_canonical, lexical, open_start, open_start_at,
    walk_beneath,
};

use rustix::fs::{Mode, OFlags, Stat};
use rustix::io::Errno;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// A root as declared in the configuration, before it is canonicalised and pinned.
#[derive(Debug, Clone)]
pub struct RootSpec {
    pub path: PathBuf,
    pub writable: bool,
}

/// A canonical root directory, pinned by an `O_PATH` descriptor for the daemon's lifetime.
#[derive(Debug)]
pub struct Root {
    path: PathBuf,
    fd: OwnedFd,
    writable: bool,
}

impl Root {
    /// Canonicalises `spec.path` and pins it; it must exist and be a directory.
    pub fn pin(spec: &RootSpec) -> Result<Root> {
        let path = std::fs::canonicalize(&spec.path)
            .map_err(|e| PathError::RootUnusable { root: spec.path.clone(), why: e.to_string() })?;
        let fd = rustix::fs::open(
            &path,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| PathError::RootUnusable {
            root: spec.path.clone(),
            why: if e == Errno::NOTDIR { "not a directory".to_string() } else { e.to_string() },
        })?;
        Ok(Root { path, fd, writable: spec.writable })
    }

    /// The canonical absolute path of the root.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether tools may write beneath this root.
    pub fn writable(&self) -> bool {
        self.writable
    }

    /// The pinned directory descriptor.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// A path placed lexically under one root: which root, and the components beneath it.
#[derive(Debug, Clone)]
pub struct Located {
    pub root: usize,
    /// Relative to the root; empty for the root itself. Contains no `..`, `.` or root component.
    pub rel: PathBuf,
    /// `root.path().join(rel)`, as the caller would print it.
    pub abs: PathBuf,
}

/// A regular file opened for reading through the resolver.
#[derive(Debug)]
pub struct OpenedFile {
    pub file: File,
    /// The real absolute path of the file (after in-root symlinks).
    pub abs: PathBuf,
    pub stat: Stat,
}

/// A directory opened through the resolver.
#[derive(Debug)]
pub struct OpenedDir {
    pub fd: OwnedFd,
    /// The real absolute path of the directory (after in-root symlinks).
    pub abs: PathBuf,
    /// Index of the most specific root that contains it.
    pub root: usize,
    /// The directory's own size (`st_size`): on most filesystems it grows with the entries.
    pub size: u64,
}

/// Where a write will land: the parent directory's descriptor and the final name.
#[derive(Debug)]
pub struct WriteTarget {
    pub parent: OwnedFd,
    pub name: OsString,
    /// The real absolute path the file will have.
    pub abs: PathBuf,
    /// The file that is there now, if any (always a regular file with one link).
    pub existing: Option<Stat>,
    /// The folders made on the way to it: removed again unless the write [`Made::keep`]s them.
    pub made: Made,
    /// The folders locked while a `HEAD` or a git control name is checked and written
    /// ([`trust::lock_folder`]): held until the write is done, when this is dropped.
    pub held: Vec<OwnedFd>,
}

/// The folders a write made for its file, innermost last: each its parent's descriptor and its
/// name. Dropped without [`Made::keep`] — the write failed, at its checks or after them (the
/// disk full, the rename refused) — each is removed again while it is still empty (one that a
/// command filled meanwhile stays), so a failed write leaves no folder of its own behind.
#[derive(Debug, Default)]
pub struct Made(Vec<(OwnedFd, OsString)>);

impl Made {
    /// The write is done: the folders it made stay.
    pub fn keep(mut self) {
        self.0.clear();
    }
}

impl Drop for Made {
    fn drop(&mut self) {
        for (dir, name) in self.0.drain(..).rev() {
            // Only an empty folder goes; an error is the folder still holding something.
            let _ = rustix::fs::unlinkat(&dir, name.as_os_str(), rustix::fs::AtFlags::REMOVEDIR);
        }
    }
}

/// The kind of a filesystem object, for messages.
pub fn kind_name(ft: FileType) -> &'static str {
    match ft {
        FileType::RegularFile => "regular file",
        FileType::Directory => "directory",
        FileType::Symlink => "symlink",
        FileType::Fifo => "FIFO",
        FileType::Socket => "socket",
        FileType::CharacterDevice => "character device",
        FileType::BlockDevice => "block device",
        FileType::Unknown => "unknown file type",
    }
}

/// Resolves tool paths beneath the roots of one module, under one policy.
#[derive(Debug)]
pub struct Resolver {
    roots: Vec<Root>,
    policy: Policy,
    /// What the host trusts in the roots of every module (git's config as git resolves it,
    /// protected names' link targets): refused to writes like a protected path.
    trust: Option<Arc<Trust>>,
}

impl Resolver {
    /// Pins every root. Fails on the first root that is missing or not a directory.
    pub fn new(specs: &[RootSpec], policy: Policy) -> Result<Resolver> {
        if specs.is_empty() {
            return Err(PathError::NoRoots);
        }
        let roots = specs.iter().map(Root::pin).collect::<Result<Vec<_>>>()?;
        Ok(Resolver { roots, policy, trust: None })
    }

    /// The same resolver, refusing writes to what `trust` finds the host trusts (the daemon
    /// gives every module's resolver one shared walk of all the roots).
    pub fn with_trust(mut self, trust: Arc<Trust>) -> Resolver {
        self.trust = Some(trust);
        self
    }

    /// The walk of what the host trusts, when this resolver has one.
    pub fn trust(&self) -> Option<&Arc<Trust>> {
        self.trust.as_ref()
    }

    /// Why writing or creating `abs` is refused because the host trusts it (git's config and
    /// hooks as git resolves them, a protected name's link target), if it is; also a refusal
    /// when the walk could not check the roots.
    pub fn host_trusted(&self, abs: &Path) -> Result<()> {
        let Some(trust) = &self.trust else { return Ok(()) };
        match trust.current() {
            Ok(known) => match known.covers(abs) {
                Some(why) => {
                    Err(PathError::Protected { path: abs.to_path_buf(), rule: why.into() })
                }
                None => Ok(()),
            },
            Err(why) => Err(PathError::Unchecked { path: abs.to_path_buf(), why: why.to_string() }),
        }
    }

    pub fn roots(&self) -> &[Root] {
        &self.roots
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    fn roots_list(&self) -> String {
        self.roots.iter().map(|r| r.path.display().to_string()).collect::<Vec<_>>().join(", ")
    }

    /// The most specific root whose path contains `abs` (component-wise, so `/work/proj-x` is
    /// not under `/work/proj`).
    pub fn root_of(&self, abs: &Path) -> Option<usize> {
        self.roots
            .iter()
            .enumerate()
            .filter(|(_, r)| abs.starts_with(&r.path))
            .max_by_key(|(_, r)| r.path.as_os_str().len())
            .map(|(i, _)| i)
    }

    /// Lexical placement of a tool path: refuses NUL, `..`, and paths outside every root, before
    /// any filesystem call. An empty path means the first root.
    pub fn locate(&self, path: &str) -> Result<Located> {
        if path.len() >= PATH_MAX {
            return Err(PathError::TooLong { len: path.len() });
        }
        if path.contains('\0') {
            return Err(PathError::Nul);
        }
        let p = Path::new(path);
        if p.components().next() == Some(Component::Normal("~".as_ref())) {
            return Err(PathError::Tilde { path: path.to_string() });
        }
        let mut clean = PathBuf::new();
        for c in p.components() {
            match c {
                Component::ParentDir => {
                    return Err(PathError::DotDot { path: path.to_string() });
                }
                Component::CurDir => {}
                Component::RootDir => clean.push("/"),
                Component::Prefix(_) => {
                    return Err(PathError::Outside { path: path.into(), roots: self.roots_list() });
                }
                Component::Normal(n) => clean.push(n),
            }
        }
        // Joining an empty path would add a trailing `/`; the first root is spelt as pinned.
        let abs = if p.is_absolute() {
            clean
        } else if clean.as_os_str().is_empty() {
            self.roots[0].path.clone()
        } else {
            self.roots[0].path.join(clean)
        };
        let root = self
            .root_of(&abs)
            .ok_or_else(|| PathError::Outside { path: path.into(), roots: self.roots_list() })?;
        let rel = abs.strip_prefix(&self.roots[root].path).unwrap_or(Path::new("")).to_path_buf();
        Ok(Located { root, rel, abs })
    }

    /// Opens `rel` beneath `root` with the kernel's confinement, mapping errors to refusals.
    fn open_beneath(
        &self,
        root: usize,
        rel: &Path,
        flags: OFlags,
        shown: &Path,
    ) -> Result<OwnedFd> {
        let rel: &Path = if rel.as_os_str().is_empty() { Path::new(".") } else { rel };
        openat2_beneath(self.roots[root].fd(), rel, flags)
            .map_err(|e| self.map_open_error(e, shown, root))
    }

    /// Opens the located path like `open_beneath` and returns what it opened with its real path
    /// and root. A first try follows no symlink at all: when it succeeds, nothing but plain
    /// folders was on the way, so the located path (under a canonical root, no `..`) is the
    /// real path, and the kernel need not be asked for the descriptor's name. A symlink on the
    /// way (`ELOOP`) takes the usual open, which follows links that stay beneath the root.
    fn open_real(&self, loc: &Located, flags: OFlags) -> Result<(OwnedFd, PathBuf, Option<usize>)> {
        let rel: &Path = if loc.rel.as_os_str().is_empty() { Path::new(".") } else { &loc.rel };
        match openat2_plain(self.roots[loc.root].fd(), rel, flags) {
            Ok(fd) => return Ok((fd, loc.abs.clone(), Some(loc.root))),
            Err(Errno::LOOP | Errno::NOSYS) => {}
            Err(e) => return Err(self.map_open_error(e, &loc.abs, loc.root)),
        }
        let fd = self.open_beneath(loc.root, &loc.rel, flags, &loc.abs)?;
        let (abs, root) = self.real_path(fd.as_fd(), &loc.abs);
        Ok((fd, abs, root))
    }

    fn map_open_error(&self, e: Errno, shown: &Path, root: usize) -> PathError {
        let path = shown.to_path_buf();
        match e {
            Errno::XDEV => PathError::Escapes { path, root: self.roots[root].path.clone() },
            Errno::LOOP => PathError::LinkLoop { path },
            Errno::NOENT => PathError::NotFound { path },
            Errno::NOTDIR => PathError::NotADirectory { path },
            other => PathError::Io { path, op: "open", source: std::io::Error::from(other) },
        }
    }

    /// The real path of an open descriptor, and the root that holds it.
    fn real_path(&self, fd: BorrowedFd<'_>, fallback: &Path) -> (PathBuf, Option<usize>) {
        let real = fd_path(fd).unwrap_or_else(|| fallback.to_path_buf());
        let root = self.root_of(&real);
        (real, root)
    }

    /// The check the trust gate runs before it asks anyone: a tool path that names a denied
    /// or credential path is refused by name, without touching the filesystem (the tool would
    /// refuse it anyway, after a person had been asked for nothing). Secret files are left to
    /// the tools, which refuse them or, like `git_diff`, show them masked; other problems
    /// (outside the roots, `..`) are left to the tool's own resolution.
    pub fn refuse_denied(&self, path: &str) -> Result<()> {
        match self.locate(path) {
            Ok(loc) => self.check_hidden(&loc.abs, None, false),
            Err(_) => Ok(()),
        }
    }

    /// Refuses a path that the policy hides from every tool (denied, credential, secret).
    fn check_hidden(&self, abs: &Path, stat: Option<&Stat>, is_file: bool) -> Result<()> {
        if let Some(why) = self.policy.denied(abs, stat) {
            return Err(PathError::Denied { path: abs.to_path_buf(), why });
        }
        if is_file && self.policy.is_secret(abs) {
            return Err(PathError::Secret { path: abs.to_path_buf() });
        }
        Ok(())
    }

    /// Opens a regular file for reading. FIFOs, devices and sockets are refused without ever
    /// being opened for I/O (they are inspected through an `O_PATH` descriptor first).
    pub fn open_file(&self, path: &str) -> Result<OpenedFile> {
        let loc = self.locate(path)?;
        self.open_file_at(&loc)
    }

    fn open_file_at(&self, loc: &Located) -> Result<OpenedFile> {
        let (opath, abs, _) = self.open_real(loc, OFlags::PATH)?;
        let st = fstat(&opath, &loc.abs)?;
        let ft = FileType::from_raw_mode(st.st_mode);
        if ft == FileType::Directory {
            return Err(PathError::IsADirectory { path: abs });
        }
        self.check_hidden(&abs, Some(&st), true)?;
        if ft != FileType::RegularFile {
            return Err(PathError::NotRegular { path: abs, kind: kind_name(ft) });
        }
        // Reopen the very object the O_PATH descriptor names (not the path, which could have
        // been swapped since), through its /proc/self/fd entry; fall back to a beneath-open with
        // O_NONBLOCK and an identity comparison when /proc is unavailable.
        let fd = match reopen(opath.as_fd(), OFlags::RDONLY | OFlags::CLOEXEC) {
            Ok(fd) => fd,
            Err(_) => {
                let fd = self.open_beneath(
                    loc.root,
                    &loc.rel,
                    OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY,
                    &loc.abs,
                )?;
                let st2 = fstat(&fd, &loc.abs)?;
                if (st2.st_dev, st2.st_ino) != (st.st_dev, st.st_ino) {
                    return Err(PathError::Changed { path: abs });
                }
                fd
            }
        };
        Ok(OpenedFile { file: File::from(fd), abs, stat: st })
    }

    /// Opens a file a walk produced (the walk follows no symlinks): one beneath-open that
    /// follows no symlink at all, so the walked path is the real path, then the checks of
    /// [`Resolver::walked_file`]. `O_NONBLOCK` keeps a FIFO swapped in under the walker from
    /// blocking the open.
    pub fn open_walked(&self, abs: &Path) -> Result<OpenedFile> {
        let s = abs.to_str().ok_or_else(|| PathError::NotUtf8 { path: abs.to_path_buf() })?;
        let loc = self.locate(s)?;
        let flags = OFlags::RDONLY | OFlags::NONBLOCK;
        let rel: &Path = if loc.rel.as_os_str().is_empty() { Path::new(".") } else { &loc.rel };
        let fd = openat2_plain(self.roots[loc.root].fd(), rel, flags)
            .map_err(|e| self.map_open_error(e, &loc.abs, loc.root))?;
        self.walked_file(fd, loc.abs)
    }

    /// A file a walk produced, just opened: one `fstat` refuses anything but a regular file
    /// and checks the policy by name and by identity.
    fn walked_file(&self, fd: OwnedFd, abs: PathBuf) -> Result<OpenedFile> {
        let st = fstat(&fd, &abs)?;
        let ft = FileType::from_raw_mode(st.st_mode);
        if ft != FileType::RegularFile {
            return Err(PathError::NotRegular { path: abs, kind: kind_name(ft) });
        }
        self.check_hidden(&abs, Some(&st), true)?;
        Ok(OpenedFile { file: File::from(fd), abs, stat: st })
    }

    /// The inode of the entry `abs` a walk found, when it is, now, beneath its root and
    /// reached without any symlink (a symlink at the end is the entry itself). A walk that
    /// reads folders by path (the `ignore` crate's) can be led out of the root by a folder
    /// swapped for a symlink between two of its reads; comparing this inode with the one the
    /// walk read drops what it found there (`glob` shows names only: one descriptor-based
    /// resolve per name shown is the whole cost).
    pub fn entry_ino(&self, abs: &Path) -> Option<u64> {
        let fd = self.open_plain(abs, OFlags::PATH | OFlags::NOFOLLOW)?;
        Some(fstat(&fd, abs).ok()?.st_ino)
    }

    /// [`Resolver::entry_ino`] for a walker thread, which is handed one folder's entries
    /// together: the folder is resolved (beneath its root, without any symlink) once and kept
    /// in `last` ([`Resolver::walked_dir`]), and each of its entries costs one `fstatat` on it.
    pub fn entry_ino_in(&self, last: &mut LastDir, abs: &Path) -> Option<u64> {
        let Some((dir, name)) = self.walked_dir(last, abs) else { return self.entry_ino(abs) };
        Some(openat::statat_nofollow(dir.as_fd(), name).ok()?.st_ino)
    }

    /// [`Resolver::open_walked`] for a walker thread: the file is opened (`O_NOFOLLOW`) in its
    /// folder as [`Resolver::walked_dir`] resolved it, then checked as `open_walked` checks it.
    /// Anything unusual (the folder cannot be resolved, the open fails) takes `open_walked`'s
    /// own way, which says why.
    pub fn open_walked_in(&self, last: &mut LastDir, abs: &Path) -> Result<OpenedFile> {
        let Some((dir, name)) = self.walked_dir(last, abs) else { return self.open_walked(abs) };
        let flags = open_flags(OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOFOLLOW);
        let Ok(fd) = rustix::fs::openat(dir, name, flags, Mode::empty()) else {
            return self.open_walked(abs);
        };
        self.walked_file(fd, abs.to_path_buf())
    }

    /// The folder of `abs`, an entry a walk found, and its name in it: the folder resolved
    /// beneath its root without any symlink, once for all the entries a walker thread takes
    /// from it in a row (kept in `last`). It is resolved after the walk read it, as each entry
    /// was before, so what is checked or opened there is still what lies beneath the root now;
    /// a folder swapped for a symlink since is a new resolution for the next folder's entries.
    /// `None` for a path no folder of a root holds (a root that is a file).
    fn walked_dir<'l, 'p>(
        &self,
        last: &'l mut LastDir,
        abs: &'p Path,
    ) -> Option<(&'l OwnedFd, &'p OsStr)> {
        let (dir, name) = (abs.parent()?, abs.file_name()?);
        if !matches!(&last.0, Some((kept, _)) if kept == dir) {
            last.0 = None;
            let fd = self.open_plain(dir, OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW)?;
            last.0 = Some((dir.to_path_buf(), fd));
        }
        last.0.as_ref().map(|(_, fd)| (fd, name))
    }

    /// `abs` opened beneath its root with `flags`, following no symlink on the way.
    fn open_plain(&self, abs: &Path, flags: OFlags) -> Option<OwnedFd> {
        let loc = self.locate(abs.to_str()?).ok()?;
        let rel: &Path = if loc.rel.as_os_str().is_empty() { Path::new(".") } else { &loc.rel };
        openat2_plain(self.roots[loc.root].fd(), rel, flags).ok()
    }

    /// Opens a directory (for listing or walking).
    pub fn open_dir(&self, path: &str) -> Result<OpenedDir> {
        let loc = self.locate(path)?;
        let (fd, abs, root) =
            self.open_real(&loc, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC)?;
        let st = fstat(&fd, &loc.abs)?;
        self.check_hidden(&abs, Some(&st), false)?;
        let size = u64::try_from(st.st_size).unwrap_or(0);
        Ok(OpenedDir { fd, abs, root: root.unwrap_or(loc.root), size })
    }

    /// What the policy hides among the entries beneath `base` (a folder that passed the policy
    /// when it was opened): `list_dir` and `glob` use it so that listings and searches never
    /// surface what `read` would refuse.
    pub fn hider(&self, base: &Path) -> Hider<'_> {
        Hider { policy: &self.policy, near: self.policy.denied_near(base) }
    }
}

/// The folder a walker thread resolved last ([`Resolver::entry_ino_in`]), with its descriptor.
#[derive(Default)]
pub struct LastDir(Option<(PathBuf, OwnedFd)>);

/// A copy is another thread's: it starts with no folder (a descriptor is not shared).
impl Clone for LastDir {
    fn clone(&self) -> LastDir {
        LastDir::default()
    }
}

/// The policy's rule for the entries beneath one folder ([`Resolver::hider`]): denied,
/// credential or secret. Only the denied paths near the folder (beneath it, or above it) are
/// compared by name — the dozens of others cannot match there.
pub struct Hider<'a> {
    policy: &'a Policy,
    near: Vec<PathBuf>,
}

impl Hider<'_> {
    /// The denied paths near the folder, for a walker's own filter (which must own them).
    pub fn near(&self) -> &[PathBuf] {
        &self.near
    }

    /// Whether the entry `name` of the folder `dir` is hidden; `dev_ino` is its identity when
    /// known, `is_file` whether it is not a folder (secret patterns apply to files only).
    pub fn hides(
        &self,
        dir: &Path,
        name: &OsStr,
        dev_ino: Option<(u64, u64)>,
        is_file: bool,
    ) -> bool {
        let by_name = !self.near.is_empty() && {
            let abs = dir.join(name);
            self.near.iter().any(|d| abs.starts_with(d))
        };
        by_name
            || dev_ino.is_some_and(|(dev, ino)| self.policy.is_denied_identity(dev, ino))
            || (is_file && self.policy.is_secret(Path::new(name)))
    }
}

#[cfg(test)]
mod tests;
