//! The command's paths as the init reads them: a path argument from the command's memory, the
//! folder it starts from (the command's working folder or descriptor, through its `/proc`
//! entries, never the init's own), and the folder its final name is in, found by the kernel
//! (`locate`). See `notify.rs` for why the init performs each call itself.

use super::{MAX_LINKS, PATH_MAX, trim_slashes};
use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags};
use std::ffi::OsStr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

/// A path argument and the folder it starts from, read while the call was known valid.
pub(super) struct Arg {
    pub(super) base: OwnedFd,
    pub(super) path: Vec<u8>,
}

/// A NUL-terminated string at `addr` in the target's memory (read page by page, so a string
/// that ends just before an unmapped page is still read).
pub(super) fn read_path(mem: &std::fs::File, addr: u64) -> Result<Vec<u8>, i32> {
    if addr == 0 {
        return Err(libc::EFAULT);
    }
    let mut out = Vec::new();
    let mut at = addr;
    while out.len() < PATH_MAX {
        let room = (4096 - (at % 4096) as usize).min(PATH_MAX - out.len());
        let mut buf = vec![0u8; room];
        let n = mem.read_at(&mut buf, at).map_err(|_| libc::EFAULT)?;
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

#[expect(clippy::disallowed_methods, reason = "procfs: the caller's umask in /proc/TID/status")]
pub(super) fn read_umask(tid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("Umask:"))?;
    u32::from_str_radix(line.trim(), 8).ok()
}

pub(super) fn open_dir(p: &str) -> Result<OwnedFd, i32> {
    rustix::fs::open(p, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
        .map_err(|e| e.raw_os_error())
}

/// Where a path argument starts: `/` for an absolute one, else the target's working folder or
/// the descriptor it named (through its /proc entry: the target's, not ours).
pub(super) fn base_dir(tid: u32, dir: i32, path: &[u8]) -> Result<OwnedFd, i32> {
    if path.first() == Some(&b'/') {
        return open_dir("/");
    }
    let at = if dir == libc::AT_FDCWD {
        format!("/proc/{tid}/cwd")
    } else if dir < 0 {
        return Err(libc::EBADF);
    } else {
        format!("/proc/{tid}/fd/{dir}")
    };
    rustix::fs::open(at.as_str(), OFlags::PATH | OFlags::CLOEXEC, Mode::empty())
        .map_err(|e| if e == rustix::io::Errno::NOENT { libc::EBADF } else { e.raw_os_error() })
}

/// The real path of one of our descriptors.
pub(super) fn real_path(fd: &OwnedFd) -> Option<PathBuf> {
    base_path_of(fd).map(|b| PathBuf::from(OsStr::from_bytes(&b)))
}

pub(super) fn base_path_of(fd: &OwnedFd) -> Option<Vec<u8>> {
    let link = format!("/proc/self/fd/{}", fd.as_raw_fd());
    rustix::fs::readlink(link.as_str(), Vec::new()).ok().map(|c| c.into_bytes())
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

/// The folder a path's final name is in (a descriptor) and that name. The folder is found by
/// the kernel (`openat2`, magic links refused first, then allowed: `/proc/TID/cwd/x`); with
/// `follow`, a symbolic link at the end is followed as `open(O_CREAT)` would, and its target
/// located again, so what is checked is the entry the open creates.
pub(super) fn locate(tid: u32, arg: &Arg, follow: bool) -> Result<(OwnedFd, Vec<u8>), i32> {
    let mut base = arg.base.try_clone().map_err(|_| libc::EMFILE)?;
    let mut path = as_target(&arg.path, tid);
    for _ in 0..MAX_LINKS {
        let trimmed = trim_slashes(&path).len();
        // The final name keeps a trailing slash: the kernel gives it its meaning (a folder).
        let (parent, name): (Vec<u8>, Vec<u8>) = if trimmed == 0 {
            (b"/".to_vec(), b".".to_vec())
        } else {
            match path[..trimmed].iter().rposition(|&b| b == b'/') {
                Some(0) => (b"/".to_vec(), path[1..].to_vec()),
                Some(i) => (path[..i].to_vec(), path[i + 1..].to_vec()),
                None => (b".".to_vec(), path.clone()),
            }
        };
        let how = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let parent = OsStr::from_bytes(&parent);
        let none = Mode::empty();
        let dir = match rustix::fs::openat2(&base, parent, how, none, ResolveFlags::NO_MAGICLINKS) {
            Ok(d) => d,
            Err(rustix::io::Errno::LOOP) => {
                rustix::fs::openat2(&base, parent, how, none, ResolveFlags::empty())
                    .map_err(|e| e.raw_os_error())?
            }
            Err(e) => return Err(e.raw_os_error()),
        };
        // `f_type`'s type differs between architectures and libcs.
        #[allow(clippy::unnecessary_cast)]
        let on_proc = rustix::fs::fstatfs(&dir)
            .is_ok_and(|s| s.f_type as i64 == rustix::fs::PROC_SUPER_MAGIC as i64);
        // A link met on the way (`/dev/fd` -> `/proc/self/fd`) was resolved by the kernel for
        // us, the namespace's PID 1, which the command never is: put the target back.
        if on_proc && let Some(real) = base_path_of(&dir) {
            let ours = as_target_from(&real, b"/proc/1", tid);
            if ours != real {
                path = ours;
                path.push(b'/');
                path.extend_from_slice(&name);
                base = open_dir("/")?;
                continue;
            }
        }
        if !follow {
            return Ok((dir, name));
        }
        let is_link = rustix::fs::statat(&dir, OsStr::from_bytes(&name), AtFlags::SYMLINK_NOFOLLOW)
            .is_ok_and(|s| FileType::from_raw_mode(s.st_mode) == FileType::Symlink);
        // Nothing can be created in /proc; its links (fd/N, cwd) are opened as they are.
        if !is_link || on_proc {
            return Ok((dir, name));
        }
        let target = rustix::fs::readlinkat(&dir, OsStr::from_bytes(&name), Vec::new())
            .map_err(|e| e.raw_os_error())?;
        path = as_target(target.as_bytes(), tid);
        base = if path.first() == Some(&b'/') { open_dir("/")? } else { dir };
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
