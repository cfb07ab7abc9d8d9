//! Signals and reaping: sending, catching and reading signals (a `signalfd`), and the init's
//! reaping of its children.

use super::{check, errno, os_err, owned};
use anyhow::Result;
use std::os::fd::{AsRawFd, OwnedFd};

/// Sends `sig` to `pid` (a negative pid: a process group); errors are ignored (it may be gone).
pub fn signal(pid: libc::pid_t, sig: i32) {
    // SAFETY: kill with integer arguments.
    unsafe { libc::kill(pid, sig) };
}

/// Sends `sig` to the process group `pgid`; false when there is no such group.
pub fn signal_group(pgid: libc::pid_t, sig: i32) -> bool {
    // SAFETY: kill with integer arguments.
    unsafe { libc::kill(-pgid, sig) == 0 }
}

/// Sets `sig`'s action to the default (SIGPIPE: the Rust runtime ignores it, and an ignored
/// signal stays ignored across execve, so a command's `yes | head` would never end).
pub fn default_action(sig: i32) {
    // SAFETY: SIG_DFL is a valid handler.
    unsafe { libc::signal(sig, libc::SIG_DFL) };
}

extern "C" fn ignore_signal(_: libc::c_int) {}

/// Gives `sig` a handler that does nothing: the kernel drops a signal sent from outside to a
/// PID namespace's init that has no handler for it; with one it is queued (and read from the
/// signalfd, since it stays blocked).
pub fn catch(sig: i32) {
    // SAFETY: a zeroed sigaction with a valid extern "C" handler.
    unsafe {
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = ignore_signal as extern "C" fn(libc::c_int) as usize;
        libc::sigemptyset(&mut act.sa_mask);
        libc::sigaction(sig, &act, std::ptr::null_mut());
    }
}

/// A signalfd for `sigs`, which are blocked first.
pub fn signalfd(sigs: &[i32]) -> Result<OwnedFd> {
    // SAFETY: sigset_t is plain data; every pointer is to a local that outlives the call.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for &sig in sigs {
            libc::sigaddset(&mut set, sig);
        }
        check(
            libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()).into(),
            "sigprocmask",
        )?;
        let fd = libc::signalfd(-1, &set, libc::SFD_CLOEXEC);
        check(fd.into(), "signalfd")?;
        Ok(owned(fd))
    }
}

/// Reads one signal number from a signalfd (blocking).
pub fn read_signal(sigfd: &OwnedFd) -> Result<i32> {
    loop {
        // SAFETY: signalfd_siginfo is plain data, read in whole by the kernel.
        let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<libc::signalfd_siginfo>();
        // SAFETY: `info` is `size` writable bytes.
        let n = unsafe {
            libc::read(sigfd.as_raw_fd(), (&mut info as *mut libc::signalfd_siginfo).cast(), size)
        };
        if n == size as isize {
            return Ok(info.ssi_signo as i32);
        }
        if n < 0 && errno() == libc::EINTR {
            continue;
        }
        return Err(os_err("read(signalfd)"));
    }
}

/// How a reaped child ended.
pub enum Reaped {
    /// Nothing more to reap now.
    None,
    /// No children left at all.
    NoChildren,
    /// `pid` ended with this exit code (128 + the signal when a signal ended it).
    Ended(libc::pid_t, u8),
}

/// Reaps one ended child without waiting.
pub fn reap_one() -> Reaped {
    let mut status = 0;
    // SAFETY: `status` is a valid out-pointer.
    let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
    if pid == 0 {
        return Reaped::None;
    }
    if pid < 0 {
        return if errno() == libc::EINTR { Reaped::None } else { Reaped::NoChildren };
    }
    let code = if libc::WIFSIGNALED(status) {
        128u8.saturating_add(libc::WTERMSIG(status) as u8)
    } else {
        libc::WEXITSTATUS(status) as u8
    };
    Reaped::Ended(pid, code)
}

/// Waits for any child (blocking); `None` once there is none.
pub fn wait_any() -> Option<libc::pid_t> {
    loop {
        let mut status = 0;
        // SAFETY: `status` is a valid out-pointer.
        let pid = unsafe { libc::waitpid(-1, &mut status, 0) };
        if pid > 0 {
            return Some(pid);
        }
        if errno() != libc::EINTR {
            return None;
        }
    }
}

/// Makes this process the reaper of its orphaned descendants (`PR_SET_CHILD_SUBREAPER`): a
/// process that leaves its parent behind (a double fork, a shell's `setsid … &` after which the
/// shell exits) becomes this process's child rather than the host init's, so that
/// [`end_children`] reaches it even outside its command's process group.
pub fn become_subreaper() -> Result<()> {
    // SAFETY: prctl with integer arguments.
    let ret = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong) };
    check(ret.into(), "prctl(PR_SET_CHILD_SUBREAPER)").map(drop)
}

/// This process's children, ended ones included (`/proc/self/task/*/children`: a child is a
/// thread's); `None` where the kernel does not list them.
fn children() -> Option<Vec<libc::pid_t>> {
    let mut kids = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let path = task.ok()?.path().join("children");
        #[expect(clippy::disallowed_methods, reason = "procfs: this process's own children")]
        let text = std::fs::read_to_string(path).ok()?;
        kids.extend(text.split_whitespace().filter_map(|p| p.parse::<libc::pid_t>().ok()));
    }
    Some(kids)
}

/// Reaps, without waiting, every child but `keep` that has ended (the orphans a subreaper
/// takes in while its command runs).
pub fn reap_others(keep: libc::pid_t) {
    for kid in children().unwrap_or_default().into_iter().filter(|&k| k != keep) {
        let mut status = 0;
        // SAFETY: `status` is a valid out-pointer.
        unsafe { libc::waitpid(kid, &mut status, libc::WNOHANG) };
    }
}

/// Kills and reaps every child of this process, and every child that takes their place: a
/// killed child's orphans are this (sub)reaper's before that child can be reaped, so listing
/// again after each reap finds them. Where the children cannot be listed, only those that have
/// ended are reaped.
pub fn end_children() {
    loop {
        let Some(kids) = children() else {
            while let Reaped::Ended(..) = reap_one() {}
            return;
        };
        if kids.is_empty() {
            return;
        }
        for kid in kids {
            signal(kid, libc::SIGKILL);
        }
        if wait_any().is_none() {
            return;
        }
    }
}
