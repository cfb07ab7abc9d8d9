//! Open-file-description byte locks on folders, the marks daemons leave on the trees their
//! commands and git tools work in (decision 0084), and the descriptors a launcher inherits.

use super::{check, owned};
use anyhow::Result;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::path::Path;

/// Opens the folder `path` to be marked: read-only (a shared lock needs only that), not
/// following a final link, close-on-exec.
pub fn open_folder(path: &Path) -> Result<OwnedFd> {
    let c = super::cstr(path.as_os_str())?;
    // SAFETY: a NUL-terminated path and flags.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    check(fd.into(), format!("open {}", path.display()))?;
    Ok(owned(fd))
}

fn one_byte(kind: libc::c_short, at: i64) -> libc::flock {
    libc::flock {
        l_type: kind,
        l_whence: libc::SEEK_SET as libc::c_short,
        l_start: at,
        l_len: 1,
        l_pid: 0,
    }
}

/// Takes a shared lock on byte `at` of the folder open as `fd`, held until the last
/// descriptor of that open folder closes (an open-file-description lock: another descriptor
/// of the same process does not release it, a child's inherited copy keeps it).
pub fn mark(fd: BorrowedFd<'_>, at: i64) -> Result<()> {
    let mut lock = one_byte(libc::F_RDLCK as libc::c_short, at);
    // SAFETY: `lock` is a flock struct that lives across the call.
    let ret = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_OFD_SETLK, &mut lock) };
    check(ret.into(), "fcntl(F_OFD_SETLK)").map(drop)
}

/// Whether another open file description holds a lock on byte `at` of the folder open as
/// `fd` (this description's own marks do not count).
pub fn marked(fd: BorrowedFd<'_>, at: i64) -> Result<bool> {
    let mut lock = one_byte(libc::F_WRLCK as libc::c_short, at);
    // SAFETY: as above; F_OFD_GETLK writes the first conflicting lock into `lock`.
    let ret = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_OFD_GETLK, &mut lock) };
    check(ret.into(), "fcntl(F_OFD_GETLK)")?;
    Ok(lock.l_type != libc::F_UNLCK as libc::c_short)
}

/// Lets the child `command` starts inherit `fds` (their close-on-exec flag cleared in the
/// child only, between its fork and its exec).
pub fn inherit(command: &mut std::process::Command, fds: Vec<RawFd>) {
    use std::os::unix::process::CommandExt;
    if fds.is_empty() {
        return;
    }
    // SAFETY: the hook runs in the forked child before exec and calls only fcntl, which is
    // async-signal-safe; it allocates nothing.
    unsafe {
        command.pre_exec(move || {
            for &fd in &fds {
                if libc::fcntl(fd, libc::F_SETFD, 0) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
}
