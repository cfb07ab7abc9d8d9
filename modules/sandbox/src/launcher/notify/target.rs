//! The command's paths as the init reads them: a path argument from the command's memory, the
//! folder it starts from (the command's working folder or descriptor, through its `/proc`
//! entries, never the init's own), and the folder its final name is in, found by the kernel
//! (`locate`). See `notify.rs` for why the init performs each call itself.

use super::{MAX_LINKS, PATH_MAX, trim_slashes};
use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags, Stat};
use std::ffi::OsStr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

/// A path argument and the folder it starts from, read while the call was known valid.
pub(super) struct Arg {
    pub(super) base: Base,
    pub(super) path: Vec<u8>,
}

/// Where a path argument starts: the root, or a folder or file of the target's (its working
/// folder, a descriptor it named). The two paths of one call that start from the same place
/// share one descriptor of it, opened once ([`Bases`]).
#[derive(Clone)]
pub(super) enum Base {
    Root,
    Fd(Arc<OwnedFd>),
}

impl Base {
    pub(super) fn fd(&self) -> Result<BorrowedFd<'_>, i32> {
        match self {
            Base::Root => root(),
            Base::Fd(fd) => Ok(fd.as_fd()),
        }
    }

    /// Whether `self` and `other` are the same opening (so a path from each starts at one
    /// folder).
    fn same(&self, other: &Base) -> bool {
        match (self, other) {
            (Base::Root, Base::Root) => true,
            (Base::Fd(a), Base::Fd(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

/// The places one call's paths start from, each opened once for the call: a `rename` or a
/// `link` names the caller's working folder (or one descriptor) twice, and both paths start
/// from one look at it.
#[derive(Default)]
pub(super) struct Bases {
    opened: Vec<(i32, Base)>,
}

impl Bases {
    /// [`base_dir`], reusing what this call opened already for `dir`.
    pub(super) fn of(&mut self, tid: u32, dir: i32, path: &[u8]) -> Result<Base, i32> {
        if path.first() == Some(&b'/') {
            return Ok(Base::Root);
        }
        if let Some((_, base)) = self.opened.iter().find(|(d, _)| *d == dir) {
            return Ok(base.clone());
        }
        let base = base_dir(tid, dir, path)?;
        self.opened.push((dir, base.clone()));
        Ok(base)
    }
}

/// The init's root (the sandbox's, fixed since its `pivot_root`), opened once: every absolute
/// path starts there.
pub(super) fn root() -> Result<BorrowedFd<'static>, i32> {
    static ROOT: OnceLock<OwnedFd> = OnceLock::new();
    fixed_dir(&ROOT, "/")
}

/// The sandbox's `/proc`, opened once: a caller's folder is looked up from there (`TID/cwd`),
/// not walked to from `/` on every call (the walk was a tenth of the init's time per call,
/// profiled).
fn proc_dir() -> Result<BorrowedFd<'static>, i32> {
    static PROC: OnceLock<OwnedFd> = OnceLock::new();
    fixed_dir(&PROC, "/proc")
}

/// The init's own descriptor table in `/proc` (`/proc/self/fd`, which is `/proc/1/fd`: every
/// thread of the init shares one table), opened once: a descriptor's real path is read as
/// one name there.
fn own_fds() -> Result<BorrowedFd<'static>, i32> {
    static FDS: OnceLock<OwnedFd> = OnceLock::new();
    fixed_dir(&FDS, "/proc/self/fd")
}

/// A folder of the init's that stays where it is for the sandbox's life, opened once.
fn fixed_dir(cell: &'static OnceLock<OwnedFd>, path: &str) -> Result<BorrowedFd<'static>, i32> {
    if let Some(fd) = cell.get() {
        return Ok(fd.as_fd());
    }
    let fd = open_dir(path)?;
    Ok(cell.get_or_init(|| fd).as_fd())
}

/// A NUL-terminated string at `addr` in the target's memory, read in pieces that never cross
/// a page (so a string that ends just before an unmapped page is still read) of at most
/// [`PIECE`] bytes: most paths are far shorter than a page, and the kernel copies what is
/// asked for.
pub(super) fn read_path(tid: u32, addr: u64) -> Result<Vec<u8>, i32> {
    const PIECE: usize = 512;
    if addr == 0 {
        return Err(libc::EFAULT);
    }
    let mut out = Vec::new();
    let mut at = addr;
    let mut buf = [0u8; PIECE];
    while out.len() < PATH_MAX {
        let room = (4096 - (at % 4096) as usize).min(PATH_MAX - out.len()).min(PIECE);
        let n = crate::sys::seccomp_notify::read_memory(tid, at, &mut buf[..room])
            .map_err(|_| libc::EFAULT)?;
        if n == 0 {
            return Err(libc::EFAULT);
        }
        if let Some(end) = buf[..n].iter().position(|&b| b == 0) {
            out.extend_from_slice(&buf[..end]);
            return Ok(out);
        }
        out.extend_from_slice(&buf[..n]);
        at += n as u64;
    }
    Err(libc::ENAMETOOLONG)
}

/// The caller's umask, from the second line of `/proc/TID/status` (one read: the kernel
/// renders the whole file, the buffer takes its start).
pub(super) fn read_umask(tid: u32) -> Option<u32> {
    u32::from_str_radix(&status_field(tid, "Umask:")?, 8).ok()
}

/// The thread group (process) thread `tid` belongs to.
pub(super) fn read_tgid(tid: u32) -> Option<libc::pid_t> {
    status_field(tid, "Tgid:")?.parse().ok()
}

/// A field among the first lines of `/proc/TID/status` (`Umask:` is the second, `Tgid:` the
/// fourth), trimmed.
fn status_field(tid: u32, key: &str) -> Option<String> {
    let path = format!("/proc/{tid}/status");
    let fd =
        rustix::fs::open(path.as_str(), OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()).ok()?;
    let mut buf = [0u8; 512];
    let n = rustix::io::read(&fd, &mut buf).ok()?;
    let status = std::str::from_utf8(&buf[..n]).ok()?;
    status.lines().find_map(|l| l.strip_prefix(key)).map(|v| v.trim().to_string())
}

pub(super) fn open_dir(p: &str) -> Result<OwnedFd, i32> {
    rustix::fs::open(p, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
        .map_err(|e| e.raw_os_error())
}

/// Where a path argument starts: `/` for an absolute one, else the target's working folder or
/// the descriptor it named (through its /proc entry: the target's, not ours).
pub(super) fn base_dir(tid: u32, dir: i32, path: &[u8]) -> Result<Base, i32> {
    if path.first() == Some(&b'/') {
        return Ok(Base::Root);
    }
    let at = if dir == libc::AT_FDCWD {
        format!("{tid}/cwd")
    } else if dir < 0 {
        return Err(libc::EBADF);
    } else {
        format!("{tid}/fd/{dir}")
    };
    rustix::fs::openat(proc_dir()?, at.as_str(), OFlags::PATH | OFlags::CLOEXEC, Mode::empty())
        .map(|fd| Base::Fd(Arc::new(fd)))
        .map_err(|e| if e == rustix::io::Errno::NOENT { libc::EBADF } else { e.raw_os_error() })
}

/// The real path of one of our folders, as the kernel names this thread's working folder
/// (`fchdir`, then `getcwd`: half the cost of reading the folder's `/proc/self/fd` link on this
/// project's machine, measured), or, where that cannot name it (no search permission, removed,
/// past `PATH_MAX`, not under our root), as [`real_path`] reads it. The serving thread's working
/// folder is its own (it unshared `CLONE_FS`) and no path it opens is relative to it: it stays
/// at the last folder named.
pub(super) fn folder_path(dir: BorrowedFd<'_>) -> Option<PathBuf> {
    if rustix::process::fchdir(dir).is_ok()
        && let Ok(cwd) = rustix::process::getcwd(Vec::new())
        && cwd.as_bytes().first() == Some(&b'/')
    {
        return Some(PathBuf::from(OsStr::from_bytes(cwd.as_bytes())));
    }
    real_path(dir)
}

/// The real path of one of our descriptors.
pub(super) fn real_path(fd: impl AsFd) -> Option<PathBuf> {
    base_path_of(fd).map(|b| PathBuf::from(OsStr::from_bytes(&b)))
}

pub(super) fn base_path_of(fd: impl AsFd) -> Option<Vec<u8>> {
    let link = fd.as_fd().as_raw_fd().to_string();
    rustix::fs::readlinkat(own_fds().ok()?, link.as_str(), Vec::new()).ok().map(|c| c.into_bytes())
}

/// `/proc/self` and `/proc/thread-self` at the start of a path name the target, not us.
pub(super) fn as_target(path: &[u8], tid: u32) -> Vec<u8> {
    let p = as_target_from(path, b"/proc/thread-self", tid);
    if p != path {
        return p;
    }
    as_target_from(path, b"/proc/self", tid)
}

/// `path` with `prefix` (a /proc folder of ours: `/proc/self`, `/proc/1`, each with an
/// optional `/task/N`) replaced by the target's.
fn as_target_from(path: &[u8], prefix: &[u8], tid: u32) -> Vec<u8> {
    let Some(rest) = path.strip_prefix(prefix).filter(|r| r.is_empty() || r[0] == b'/') else {
        return path.to_vec();
    };
    let mut out = format!("/proc/{tid}").into_bytes();
    if prefix.ends_with(b"thread-self") {
        out.extend_from_slice(format!("/task/{tid}").as_bytes());
        out.extend_from_slice(rest);
        return out;
    }
    // Our own thread's folder is the target thread's.
    if let Some(task) = rest.strip_prefix(b"/task/") {
        let end = task.iter().position(|&b| b == b'/').unwrap_or(task.len());
        out.extend_from_slice(format!("/task/{tid}").as_bytes());
        out.extend_from_slice(&task[end..]);
        return out;
    }
    out.extend_from_slice(rest);
    out
}

/// The `/proc` folder of ours that `real` (a path the kernel resolved on /proc) is in: `/proc/1`,
/// or `/proc/N` for a thread N of ours (the init's other threads have folders of their own,
/// hidden from listings but reachable: found by the fourth attack pass, a command opened the
/// init's own descriptors through `/proc/3/fd/N`). Anything else is returned unchanged-safe:
/// `/proc/1`, which `real` then does not start with.
fn our_proc_folder(real: &[u8]) -> Vec<u8> {
    let n = real.strip_prefix(b"/proc/").map(|r| {
        let end = r.iter().position(|&b| b == b'/').unwrap_or(r.len());
        &r[..end]
    });
    match n {
        Some(n)
            if !n.is_empty()
                && n.iter().all(u8::is_ascii_digit)
                && n != b"1"
                && rustix::fs::stat(
                    format!("/proc/self/task/{}", String::from_utf8_lossy(n)).as_str(),
                )
                .is_ok() =>
        {
            [b"/proc/".as_slice(), n].concat()
        }
        _ => b"/proc/1".to_vec(),
    }
}

/// `parent` as the target means it, when the step where it fails lies in a /proc folder the
/// kernel resolved for us (`/dev/fd/3` -> `/proc/1/fd/3`: our descriptor 3, or none, not the
/// command's): the steps up to there put back as the target's, the rest as written. `None`
/// when that folder is the target's own already, or none of ours (an error path only: a few
/// `openat2` more where a create fails anyway).
fn through_our_proc(base: BorrowedFd<'_>, parent: &[u8], tid: u32) -> Option<Vec<u8>> {
    let how = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let ends = parent.iter().enumerate().filter(|&(i, &b)| b == b'/' && i > 0).map(|(i, _)| i);
    let mut before: Option<(OwnedFd, usize)> = None;
    for end in ends.chain(std::iter::once(parent.len())) {
        let step = OsStr::from_bytes(&parent[..end]);
        match rustix::fs::openat2(base, step, how, Mode::empty(), ResolveFlags::NO_MAGICLINKS) {
            Ok(dir) => before = Some((dir, end)),
            Err(_) => break,
        }
    }
    let (dir, end) = before?;
    // `f_type`'s type differs between architectures and libcs.
    #[allow(clippy::unnecessary_cast)]
    let on_proc = rustix::fs::fstatfs(&dir)
        .is_ok_and(|s| s.f_type as i64 == rustix::fs::PROC_SUPER_MAGIC as i64);
    let real = base_path_of(&dir).filter(|_| on_proc)?;
    let mut theirs = as_target_from(&real, &our_proc_folder(&real), tid);
    (theirs != real).then(|| {
        theirs.extend_from_slice(&parent[end..]);
        theirs
    })
}

/// Where a path's final name is: the folder (a descriptor), the name, and the entry as `lstat`
/// saw it when `locate` looked (`Some(None)`: absent).
pub(super) struct Place {
    pub(super) dir: OwnedFd,
    pub(super) name: Vec<u8>,
    pub(super) entry: Option<Option<Stat>>,
    /// The folder's real path ([`folder_path`], read once when it was located); `None`: the
    /// kernel cannot name it (past `PATH_MAX`).
    pub(super) real: Option<PathBuf>,
}

impl Place {
    /// Whether an entry is at the name (a symbolic link counts, dangling or not), as `lstat`
    /// saw it when `locate` looked, or now.
    pub(super) fn there(&self) -> bool {
        self.entry.map_or_else(|| there(&self.dir, &self.name), |e| e.is_some())
    }

    /// The entry as `lstat` sees it (looked at once), and as `stat` does (following a link).
    pub(super) fn entry(&self) -> (Option<Stat>, Option<Stat>) {
        let name = OsStr::from_bytes(&self.name);
        let lstat = match self.entry {
            Some(e) => e,
            None => rustix::fs::statat(&self.dir, name, AtFlags::SYMLINK_NOFOLLOW).ok(),
        };
        let link = lstat.is_some_and(|s| FileType::from_raw_mode(s.st_mode) == FileType::Symlink);
        let stat =
            if link { rustix::fs::statat(&self.dir, name, AtFlags::empty()).ok() } else { lstat };
        (lstat, stat)
    }
}

/// Whether an entry is at `name` in `dir` now (a symbolic link counts, dangling or not).
pub(super) fn there(dir: impl AsFd, name: &[u8]) -> bool {
    rustix::fs::statat(dir, OsStr::from_bytes(name), AtFlags::SYMLINK_NOFOLLOW).is_ok()
}

/// A path's folder and its final name, which keeps a trailing slash: the kernel gives it its
/// meaning (a folder).
fn split(path: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let trimmed = trim_slashes(path).len();
    if trimmed == 0 {
        return (b"/".to_vec(), b".".to_vec());
    }
    match path[..trimmed].iter().rposition(|&b| b == b'/') {
        Some(0) => (b"/".to_vec(), path[1..].to_vec()),
        Some(i) => (path[..i].to_vec(), path[i + 1..].to_vec()),
        None => (b".".to_vec(), path.to_vec()),
    }
}

/// [`locate`] of two paths of one call (a rename's or a link's), neither followed. When both
/// name the same folder from the same start, the folder is resolved once and both places are
/// in it — one look at it, as a rename within a folder means (`git`'s object, Python's byte
/// code: most renames and links). Otherwise each is located on its own.
pub(super) fn locate_both(tid: u32, old: &Arg, new: &Arg) -> Result<(Place, Place), i32> {
    let first = locate(tid, old, false)?;
    let (new_parent, new_name) = split(&as_target(&new.path, tid));
    if !old.base.same(&new.base) || split(&as_target(&old.path, tid)).0 != new_parent {
        return Ok((first, locate(tid, new, false)?));
    }
    let dir = first.dir.try_clone().map_err(|_| libc::EMFILE)?;
    let real = first.real.clone();
    Ok((first, Place { dir, name: new_name, entry: None, real }))
}

/// The folder a path's final name is in (a descriptor) and that name. The folder is found by
/// the kernel (`openat2`, magic links refused first, then allowed: `/proc/TID/cwd/x`); with
/// `follow`, a symbolic link at the end is followed as `open(O_CREAT)` would, and its target
/// located again, so what is checked is the entry the open creates.
pub(super) fn locate(tid: u32, arg: &Arg, follow: bool) -> Result<Place, i32> {
    let mut next: Option<OwnedFd> = None;
    let mut path = as_target(&arg.path, tid);
    for _ in 0..MAX_LINKS {
        let base = match &next {
            Some(fd) => fd.as_fd(),
            None => arg.base.fd()?,
        };
        let (parent, name) = split(&path);
        let how = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let parent = OsStr::from_bytes(&parent);
        let none = Mode::empty();
        let dir = match rustix::fs::openat2(base, parent, how, none, ResolveFlags::NO_MAGICLINKS) {
            Ok(d) => d,
            // A step through a /proc folder of ours fails as ours would (ELOOP at a magic
            // link; ENOENT or ENOTDIR where our descriptor N is missing or no folder).
            Err(e) => {
                if let Some(theirs) = through_our_proc(base, parent.as_bytes(), tid) {
                    path = theirs;
                    path.push(b'/');
                    path.extend_from_slice(&name);
                    next = Some(root()?.try_clone_to_owned().map_err(|_| libc::EMFILE)?);
                    continue;
                }
                if e != rustix::io::Errno::LOOP {
                    return Err(e.raw_os_error());
                }
                rustix::fs::openat2(base, parent, how, none, ResolveFlags::empty())
                    .map_err(|e| e.raw_os_error())?
            }
        };
        // The folder's path, read once here for the walls too.
        let real = folder_path(dir.as_fd());
        // `f_type`'s type differs between architectures and libcs.
        #[allow(clippy::unnecessary_cast)]
        let on_proc = || {
            rustix::fs::fstatfs(&dir)
                .is_ok_and(|s| s.f_type as i64 == rustix::fs::PROC_SUPER_MAGIC as i64)
        };
        // A link met on the way (`/dev/fd` -> `/proc/self/fd`) was resolved by the kernel for
        // us, the namespace's PID 1, which the command never is: put the target back. Only a
        // path under `/proc` can be one of our /proc folders (`our_proc_folder`), so no other
        // folder is asked for its file system.
        let bytes = real.as_deref().map(|r| r.as_os_str().as_bytes());
        let under_proc = bytes.is_some_and(|r| r == b"/proc" || r.starts_with(b"/proc/"));
        if under_proc
            && on_proc()
            && let Some(real) = bytes
        {
            let ours = as_target_from(real, &our_proc_folder(real), tid);
            if ours != real {
                path = ours;
                path.push(b'/');
                path.extend_from_slice(&name);
                next = Some(root()?.try_clone_to_owned().map_err(|_| libc::EMFILE)?);
                continue;
            }
        }
        if !follow {
            return Ok(Place { dir, name, entry: None, real });
        }
        let entry =
            rustix::fs::statat(&dir, OsStr::from_bytes(&name), AtFlags::SYMLINK_NOFOLLOW).ok();
        let is_link =
            entry.is_some_and(|s| FileType::from_raw_mode(s.st_mode) == FileType::Symlink);
        // Nothing can be created in /proc; its links (fd/N, cwd) are opened as they are.
        if !is_link || on_proc() {
            return Ok(Place { dir, name, entry: Some(entry), real });
        }
        let target = rustix::fs::readlinkat(&dir, OsStr::from_bytes(&name), Vec::new())
            .map_err(|e| e.raw_os_error())?;
        path = as_target(target.as_bytes(), tid);
        next = Some(if path.first() == Some(&b'/') {
            root()?.try_clone_to_owned().map_err(|_| libc::EMFILE)?
        } else {
            dir
        });
    }
    Err(libc::ELOOP)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_self_names_the_target() {
        assert_eq!(as_target(b"/proc/self/fd/1", 7), b"/proc/7/fd/1");
        assert_eq!(as_target(b"/proc/thread-self", 7), b"/proc/7/task/7");
        assert_eq!(as_target(b"/proc/selfish", 7), b"/proc/selfish");
        assert_eq!(as_target_from(b"/proc/1/fd", b"/proc/1", 7), b"/proc/7/fd");
        assert_eq!(as_target_from(b"/proc/1/task/3/fd", b"/proc/1", 7), b"/proc/7/task/7/fd");
        assert_eq!(as_target_from(b"/proc/12/fd", b"/proc/1", 7), b"/proc/12/fd");
    }
}
