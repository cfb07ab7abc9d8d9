//! The seccomp user-notification calls the init's wall keeper makes (`launcher::notify`):
//! installing the notifying filter, and receiving, checking and answering its requests.

use super::{errno, os_err, owned};
use anyhow::Result;
use std::os::fd::{AsRawFd, OwnedFd};

/// Makes this process dumpable again (a change of uid cleared it), so that a process of the
/// same uid may take its descriptors.
pub fn set_dumpable() -> Result<()> {
    // SAFETY: prctl with integer arguments.
    if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0) } < 0 {
        return Err(os_err("prctl(PR_SET_DUMPABLE)"));
    }
    Ok(())
}

/// `pidfd_getfd`: a copy of descriptor `n` of the process behind `pidfd`.
pub fn pidfd_getfd(pidfd: &OwnedFd, n: i32) -> Result<OwnedFd> {
    // SAFETY: integer arguments; the result is a new descriptor owned by us.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), n, 0) };
    if fd < 0 {
        return Err(os_err("pidfd_getfd"));
    }
    Ok(owned(fd as i32))
}

/// Installs the BPF program `prog` with `flags` (`SECCOMP_FILTER_FLAG_*`); the listener's
/// descriptor when `flags` asks for one. The error is the errno, for the caller to retry
/// with fewer flags.
pub fn install_filter(prog: &[libc::sock_filter], flags: libc::c_ulong) -> Result<OwnedFd, i32> {
    let fprog = libc::sock_fprog {
        len: u16::try_from(prog.len()).map_err(|_| libc::E2BIG)?,
        filter: prog.as_ptr().cast_mut(),
    };
    // SAFETY: `fprog` points at `prog`, alive for the call; the kernel copies it.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            flags,
            &fprog as *const libc::sock_fprog,
        )
    };
    if fd < 0 { Err(errno()) } else { Ok(owned(fd as i32)) }
}

/// Waits for the next request on `listener`; the errno when there is none.
pub fn receive(listener: &OwnedFd) -> Result<libc::seccomp_notif, i32> {
    // SAFETY: an all-zero seccomp_notif is what the kernel expects to fill.
    let mut req: libc::seccomp_notif = unsafe { std::mem::zeroed() };
    // SAFETY: `req` is a valid seccomp_notif for the kernel to write.
    let ret =
        unsafe { libc::ioctl(listener.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_RECV as _, &mut req) };
    if ret < 0 { Err(errno()) } else { Ok(req) }
}

/// Whether no process uses the listener's filter any more (the command and all it started
/// have exited): then `receive` fails at once with ENOENT, and would forever.
pub fn orphaned(listener: &OwnedFd) -> bool {
    use rustix::event::{PollFd, PollFlags, poll};
    let mut fds = [PollFd::new(listener, PollFlags::IN)];
    let zero = rustix::event::Timespec { tv_sec: 0, tv_nsec: 0 };
    poll(&mut fds, Some(&zero)).is_ok_and(|_| fds[0].revents().contains(PollFlags::HUP))
}

/// Whether request `id` is still waiting (its process has not died or been interrupted):
/// checked after reading the target's memory, which it might have changed otherwise.
pub fn still_valid(listener: &OwnedFd, id: u64) -> bool {
    let mut id = id;
    // SAFETY: `id` is a valid u64 for the kernel to read.
    let ret = unsafe {
        libc::ioctl(listener.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_ID_VALID as _, &mut id)
    };
    ret >= 0
}

/// Answers request `id` with a copy of `fd` in the target (the call's result is its number);
/// the errno when that failed.
pub fn answer_fd(listener: &OwnedFd, id: u64, fd: &OwnedFd, cloexec: bool) -> Result<(), i32> {
    let add = libc::seccomp_notif_addfd {
        id,
        flags: libc::SECCOMP_ADDFD_FLAG_SEND as u32,
        srcfd: fd.as_raw_fd() as u32,
        newfd: 0,
        newfd_flags: if cloexec { libc::O_CLOEXEC as u32 } else { 0 },
    };
    // SAFETY: `add` is a valid seccomp_notif_addfd; the kernel dups `srcfd` into the target
    // and answers the call with its number.
    let ret =
        unsafe { libc::ioctl(listener.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_ADDFD as _, &add) };
    if ret < 0 { Err(errno()) } else { Ok(()) }
}

/// Answers request `id` with `val`, or with the error `errno` when it is not 0. ENOENT (the
/// call was interrupted or its process died) needs nothing, so the result is not returned.
pub fn answer(listener: &OwnedFd, id: u64, val: i64, errno: i32) {
    let resp = libc::seccomp_notif_resp { id, val, error: -errno, flags: 0 };
    // SAFETY: `resp` is a valid seccomp_notif_resp for the kernel to read.
    let _ =
        unsafe { libc::ioctl(listener.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_SEND as _, &resp) };
}
