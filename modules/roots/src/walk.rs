//! The complete, descriptor-based walk of a tree that the sandbox masks, the protected paths
//! and the git dir checks rely on: every folder is entered through its parent's descriptor with
//! `O_NOFOLLOW | O_DIRECTORY`, so a folder swapped for a symlink while the walk runs makes that
//! open fail (the entry is then a link, and links are never followed) instead of leading the
//! walk into another tree; and a walk that cannot visit everything returns an error, never a
//! partial result, so a caller cannot mistake "stopped early" for "nothing there".

use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags, Stat};
use rustix::io::Errno;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One entry of a listed folder: its name, its own type (never a link's target), and whether
/// the visitor wants the walk to enter it (only honoured for folders).
#[derive(Debug)]
pub struct Item {
    pub name: OsString,
    pub kind: FileType,
    pub descend: bool,
}

/// One folder as the walk lists it, handed whole to the visitor.
pub struct Listing<'a> {
    pub folder: Folder<'a>,
    pub entries: &'a mut [Item],
}

/// The listed folder itself.
#[derive(Clone, Copy)]
pub struct Folder<'a> {
    /// The folder's path: a start path joined with the names walked, none of them a symlink.
    pub path: &'a Path,
    /// The folder, open for reading; `None` when it could not be opened or listed for lack of
    /// permission (the listing is then empty: a caller that must see everything treats the
    /// folder as unknown, e.g. masks it whole).
    pub fd: Option<BorrowedFd<'a>>,
}

impl Folder<'_> {
    /// `lstat` of an entry, through the folder's descriptor.
    pub fn stat(&self, name: &OsStr) -> Result<Stat, Errno> {
        let fd = self.fd.ok_or(Errno::ACCESS)?;
        rustix::fs::statat(fd, name, AtFlags::SYMLINK_NOFOLLOW)
    }

    /// Opens a regular file of this folder for reading: no symlink followed, non-blocking (a
    /// FIFO cannot stall the walk), and only when `fstat` says it is a regular file.
    pub fn open_file(&self, name: &OsStr) -> Result<File, Errno> {
        let fd = self.fd.ok_or(Errno::ACCESS)?;
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let f = rustix::fs::openat(fd, name, flags | OFlags::NOCTTY, Mode::empty())?;
        let st = rustix::fs::fstat(&f)?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
            return Err(Errno::INVAL);
        }
        Ok(File::from(f))
    }

    /// The first `limit` bytes of a regular file of this folder (see [`Listing::open_file`]).
    pub fn read_head(&self, name: &OsStr, limit: u64) -> Option<Vec<u8>> {
        use std::io::Read;
        let mut buf = Vec::new();
        self.open_file(name).ok()?.take(limit).read_to_end(&mut buf).ok()?;
        Some(buf)
    }
}

impl Listing<'_> {
    /// The entry named `name`, if the folder has one.
    pub fn get(&self, name: &str) -> Option<&Item> {
        self.entries.iter().find(|i| i.name.as_bytes() == name.as_bytes())
    }
}

/// Why a walk did not finish.
#[derive(Debug)]
pub enum WalkError<E> {
    /// More than `limit` entries: the rest was not visited.
    Limit { limit: usize },
    /// A folder could not be opened or listed for a reason other than permission (out of
    /// descriptors or memory, an I/O error): what lies beneath it is unknown.
    Io { path: PathBuf, errno: Errno },
    /// The visitor ended the walk.
    Visit(E),
}

impl<E: std::fmt::Display> std::fmt::Display for WalkError<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WalkError::Limit { limit } => write!(f, "the tree holds more than {limit} entries"),
            WalkError::Io { path, errno } => {
                write!(f, "cannot list {}: {}", path.display(), std::io::Error::from(*errno))
            }
            WalkError::Visit(e) => e.fmt(f),
        }
    }
}

/// Opens a folder to start a walk at (its path may hold symlinks: it is the caller's own,
/// canonical path, not one a command controls).
pub fn open_start(path: &Path) -> Result<OwnedFd, Errno> {
    rustix::fs::open(path, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
}

/// Opens a folder to start a walk at from a descriptor (an `O_PATH` root pin works).
pub fn open_start_at(fd: BorrowedFd<'_>) -> Result<OwnedFd, Errno> {
    rustix::fs::openat(fd, ".", OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
}

/// A folder waiting to be listed: its parent's descriptor (shared by its siblings, so the
/// descriptors open at once stay about as many as the tree is deep) and its name there.
struct Pending {
    parent: Arc<OwnedFd>,
    name: OsString,
    path: PathBuf,
}

/// Walks every folder beneath `start` (each a path and its open descriptor) depth-first,
/// handing each listing to `visit`, entering the entries it marks. Nothing is followed: a
/// folder is entered with `O_NOFOLLOW | O_DIRECTORY` from its parent's descriptor, so one that
/// became a symlink or was removed since it was listed is skipped (it is a link, or gone, now).
/// A folder that cannot be opened for lack of permission is handed over with no descriptor and
/// no entries. Returns how many entries were visited; an error when there were more than
/// `limit`, when a folder could not be listed for another reason, or when `visit` failed —
/// never a partial result.
pub fn walk_beneath<E>(
    start: Vec<(PathBuf, OwnedFd)>,
    limit: usize,
    mut visit: impl FnMut(&mut Listing<'_>) -> Result<(), E>,
) -> Result<usize, WalkError<E>> {
    let mut seen = 0usize;
    let mut stack: Vec<Pending> = Vec::new();
    let mut starts: Vec<(PathBuf, OwnedFd)> = start.into_iter().rev().collect();
    let dir_flags =
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NOCTTY;
    loop {
        let (path, fd) = if let Some(p) = stack.pop() {
            match rustix::fs::openat(p.parent.as_fd(), &p.name, dir_flags, Mode::empty()) {
                Ok(fd) => (p.path, fd),
                // Removed, or swapped for a link or a file since it was listed: not followed.
                Err(Errno::NOENT | Errno::LOOP | Errno::NOTDIR) => continue,
                Err(Errno::ACCESS | Errno::PERM) => {
                    let mut none: [Item; 0] = [];
                    let mut l =
                        Listing { folder: Folder { path: &p.path, fd: None }, entries: &mut none };
                    visit(&mut l).map_err(WalkError::Visit)?;
                    continue;
                }
                Err(errno) => return Err(WalkError::Io { path: p.path, errno }),
            }
        } else if let Some(s) = starts.pop() {
            s
        } else {
            break;
        };
        let mut entries = match list(&fd, limit.saturating_sub(seen)) {
            Ok(e) => e,
            Err(Listed::Limit) => return Err(WalkError::Limit { limit }),
            Err(Listed::Failed(Errno::ACCESS | Errno::PERM)) => {
                let mut none: [Item; 0] = [];
                let mut l =
                    Listing { folder: Folder { path: &path, fd: None }, entries: &mut none };
                visit(&mut l).map_err(WalkError::Visit)?;
                continue;
            }
            Err(Listed::Failed(errno)) => return Err(WalkError::Io { path, errno }),
        };
        seen += entries.len();
        let folder = Folder { path: &path, fd: Some(fd.as_fd()) };
        let mut l = Listing { folder, entries: &mut entries };
        visit(&mut l).map_err(WalkError::Visit)?;
        let parent = Arc::new(fd);
        for item in entries.into_iter().rev() {
            if item.descend && item.kind == FileType::Directory {
                let path = path.join(&item.name);
                stack.push(Pending { parent: parent.clone(), name: item.name, path });
            }
        }
    }
    Ok(seen)
}

enum Listed {
    Limit,
    Failed(Errno),
}

/// The entries of an open folder (without `.` and `..`), each with its own type; at most
/// `room` of them.
fn list(fd: &OwnedFd, room: usize) -> Result<Vec<Item>, Listed> {
    let dup = rustix::fs::openat(
        fd,
        ".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(Listed::Failed)?;
    let mut dir = Dir::new(dup).map_err(Listed::Failed)?;
    let mut out = Vec::new();
    while let Some(entry) = dir.read() {
        let entry = entry.map_err(Listed::Failed)?;
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        if out.len() == room {
            return Err(Listed::Limit);
        }
        let name = OsStr::from_bytes(name).to_os_string();
        let mut kind = entry.file_type();
        if kind == FileType::Unknown {
            // Some file systems leave the type out of the listing: ask for it (never followed).
            kind = match rustix::fs::statat(fd, &name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) => FileType::from_raw_mode(st.st_mode),
                Err(Errno::NOENT) => continue,
                Err(e) => return Err(Listed::Failed(e)),
            };
        }
        out.push(Item { name, kind, descend: false });
    }
    Ok(out)
}

/// `path` with `.` and `..` resolved by name only (no filesystem call): what a `gitdir:` line
/// or a `commondir` names, relative to the folder that holds it.
pub fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The canonical form of the deepest existing ancestor of `p`, with the missing rest appended
/// as written: the real path a file not made yet would have.
pub fn lenient_canonical(p: &Path) -> PathBuf {
    let mut missing = Vec::new();
    let mut cur = p.to_path_buf();
    loop {
        if let Ok(c) = std::fs::canonicalize(&cur) {
            return missing.iter().rev().fold(c, |acc: PathBuf, part| acc.join(part));
        }
        match (cur.file_name().map(|n| n.to_os_string()), cur.parent()) {
            (Some(name), Some(parent)) => {
                missing.push(name);
                cur = parent.to_path_buf();
            }
            _ => return p.to_path_buf(),
        }
    }
}
