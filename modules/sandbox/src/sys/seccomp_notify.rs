//! The seccomp user-notification calls the init's wall keeper makes (`launcher::notify`):
//! installing the notifying filter, and receiving, checking and answering its requests.

use super::{errno, os_err, owned};
use anyhow::Result;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};

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

/// Asks the kernel to wake the command on the init's own CPU when a call is answered, and the
/// init on the command's when a call comes (`SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP`, Linux 6.6):
/// each notified call is a hand-off between two threads, never a cross-CPU wake-up.
/// Whether the kernel took it (older kernels answer EINVAL; the walls are the same).
pub fn sync_wake_up(listener: &OwnedFd) -> bool {
    set_sync_wake_up(listener, true)
}

/// Turns the same-CPU wake-up on or off; whether the kernel took it. Off for one answer to a
/// caller in parallel with others: woken on the init's CPU it may preempt the init while
/// another process's call waits (decisions 0081, 0082).
pub fn set_sync_wake_up(listener: &OwnedFd, on: bool) -> bool {
    const SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP: libc::c_ulong = 1;
    let flags = if on { SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP } else { 0 };
    // SAFETY: an integer argument; the kernel reads no memory of ours.
    let ret = unsafe {
        libc::ioctl(listener.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_SET_FLAGS as _, flags)
    };
    ret >= 0
}

/// Reads `buf.len()` bytes at `addr` in the memory of thread `tid` (`process_vm_readv`: one
/// call, where opening `/proc/TID/mem` took three); the count read, fewer when the range runs
/// into an unmapped page. The caller checks the request is still valid afterwards, so a
/// thread that ended and whose number was taken again is never trusted.
pub fn read_memory(tid: u32, addr: u64, buf: &mut [u8]) -> Result<usize, i32> {
    let local = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    let remote = libc::iovec { iov_base: addr as usize as *mut libc::c_void, iov_len: buf.len() };
    // SAFETY: `local` describes `buf`, alive and writable for the call; the kernel only reads
    // the other process's memory through `remote`.
    let n = unsafe { libc::process_vm_readv(tid as libc::pid_t, &local, 1, &remote, 1, 0) };
    if n < 0 { Err(errno()) } else { Ok(n as usize) }
}

/// Waits for the next request on `listener`; the errno when there is none. It waits in
/// `poll` first: the kernel's same-CPU wake-up (`sync_wake_up`) is for a poller, a thread
/// blocked in the receive itself is woken wherever the scheduler likes.
///
/// With the request, whether this thread waited for it: then the request's own call woke it,
/// on its caller's CPU, where [`answer_fd`] may hold both. A request already waiting came from
/// wherever its caller runs (another process's, while this thread answered one), and holding
/// it here would pull it off its own CPU (two processes of a parallel build, each pulled onto
/// the init's CPU, ran 1.8× slower than with no hold; decision 0080).
pub fn receive(listener: &OwnedFd) -> Result<(libc::seccomp_notif, bool), i32> {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    let mut fds = [PollFd::new(listener, PollFlags::IN)];
    let zero = Timespec { tv_sec: 0, tv_nsec: 0 };
    let waiting = poll(&mut fds, Some(&zero)).is_ok_and(|n| n > 0);
    if !waiting {
        unpin();
        match poll(&mut fds, None) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.raw_os_error()),
        }
    }
    // Nothing uses the filter any more and nothing waits: a kernel before 6.6 would block in
    // the receive for good (it waits on a count that no process will raise again).
    let revents = fds[0].revents();
    if revents.contains(PollFlags::HUP) && !revents.contains(PollFlags::IN) {
        return Err(libc::ENOENT);
    }
    // SAFETY: an all-zero seccomp_notif is what the kernel expects to fill.
    let mut req: libc::seccomp_notif = unsafe { std::mem::zeroed() };
    // SAFETY: `req` is a valid seccomp_notif for the kernel to write.
    let ret =
        unsafe { libc::ioctl(listener.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_RECV as _, &mut req) };
    if ret < 0 { Err(errno()) } else { Ok((req, !waiting)) }
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

/// Answers request `id` with a copy of `fd` in its thread (the call's result is its number);
/// whether the thread was held and goes on on this CPU, or the errno when that failed.
/// `hold`: the thread, when it is on this CPU (its call woke this one, [`receive`], or it
/// was woken here by the last answer), so that both stay there.
///
/// The hand-over is the one answer the kernel does not wake on the init's CPU: `ADDFD` wakes
/// the target with a plain wake-up, which the scheduler gives to an idle CPU, and the target's
/// "installed" wakes the init the same way. On a machine at rest each is an idle CPU's wake
/// (46 µs apiece traced on this project's virtual machine, a create cost 88–96 µs against 25
/// with both held here; decision 0080). So both threads are held on this CPU (the one the
/// target called from: its wake-up brought the init here) while the descriptor goes in, and
/// the answer is sent after, with the same-CPU wake-up. Where a thread cannot be held (its
/// affinity leaves this CPU out, or it is not ours to move) the answer goes as before. Only
/// where the threads run changes, never what is checked.
pub fn answer_fd(
    listener: &OwnedFd,
    id: u64,
    fd: &OwnedFd,
    cloexec: bool,
    hold: Option<u32>,
) -> Result<bool, i32> {
    let held = hold.and_then(Held::here);
    let add = libc::seccomp_notif_addfd {
        id,
        // Held, the target installs the descriptor and waits again, still in its call, for the
        // answer below: its affinity is given back before it runs a single instruction more.
        flags: if held.is_some() { 0 } else { libc::SECCOMP_ADDFD_FLAG_SEND as u32 },
        srcfd: fd.as_raw_fd() as u32,
        newfd: 0,
        newfd_flags: if cloexec { libc::O_CLOEXEC as u32 } else { 0 },
    };
    // SAFETY: `add` is a valid seccomp_notif_addfd; the kernel dups `srcfd` into the target
    // (and with SECCOMP_ADDFD_FLAG_SEND answers the call with its number).
    let ret =
        unsafe { libc::ioctl(listener.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_ADDFD as _, &add) };
    let failed = (ret < 0).then(errno);
    let Some(held) = held else {
        return failed.map_or(Ok(false), Err);
    };
    held.release();
    if let Some(errno) = failed {
        return Err(errno);
    }
    answer(listener, id, i64::from(ret), 0);
    Ok(true)
}

/// The target of a descriptor's hand-over, held on this CPU with this thread ([`answer_fd`]).
struct Held {
    target: rustix::process::Pid,
    /// The target's affinity before, given back by [`Held::release`].
    target_was: CpuSet,
    here: CpuSet,
}

use rustix::thread::{CpuSet, sched_getaffinity, sched_getcpu, sched_setaffinity};

impl Held {
    fn here(tid: u32) -> Option<Held> {
        let target = rustix::process::Pid::from_raw(tid as i32)?;
        let cpu = sched_getcpu();
        let target_was = sched_getaffinity(Some(target)).ok()?;
        if !target_was.is_set(cpu) {
            return None;
        }
        let mut here = CpuSet::new();
        here.set(cpu);
        if target_was != here {
            sched_setaffinity(Some(target), &here).ok()?;
        }
        pin(cpu, &here);
        Some(Held { target, target_was, here })
    }

    /// Gives the target its affinity back, unless another thread changed it meanwhile (then
    /// that change stands; the target is still in its call and has run nothing since), before
    /// the answer wakes it. This thread stays where it is: [`unpin`] gives its affinity back
    /// before it waits or serves a call it does not hold.
    fn release(self) {
        if self.target_was != self.here
            && sched_getaffinity(Some(self.target)).is_ok_and(|now| now == self.here)
        {
            let _ = sched_setaffinity(Some(self.target), &self.target_was);
        }
    }
}

thread_local! {
    /// The CPU a hold left this thread on, until [`unpin`].
    static PINNED: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
}

/// Holds this thread on `cpu` (`here`), unless a hold left it there already: a caller served
/// back to back is held for each of its hand-overs, and this thread's two affinity changes
/// around each (3 µs of a 36 µs create, measured) are made once for the run of them.
fn pin(cpu: usize, here: &CpuSet) {
    if PINNED.with(|p| p.get()) == Some(cpu) {
        return;
    }
    if let Some(own) = own_affinity()
        && own != *here
        && sched_setaffinity(None, here).is_ok()
    {
        PINNED.with(|p| p.set(Some(cpu)));
    }
}

/// Gives this thread its own affinity back if a hold left it pinned: before it waits for the
/// next call (a caller that calls next from another CPU wakes it there) and before it serves
/// a call it does not hold (a caller in parallel with others, woken here, must not keep it on
/// this CPU while another process's call waits; decisions 0081, 0097).
pub fn unpin() {
    if PINNED.with(|p| p.take()).is_some()
        && let Some(own) = own_affinity()
    {
        let _ = sched_setaffinity(None, &own);
    }
}

/// This thread's own affinity, read once: only a hold changes it, and [`unpin`] gives it back
/// (one `sched_getaffinity` less per descriptor handed over).
fn own_affinity() -> Option<CpuSet> {
    thread_local! {
        static OWN: std::cell::Cell<Option<CpuSet>> = const { std::cell::Cell::new(None) };
    }
    OWN.with(|own| {
        if own.get().is_none() {
            own.set(sched_getaffinity(None).ok());
        }
        own.get()
    })
}

/// Lets request `id` run as the caller made it (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`): only for
/// a call whose arguments are all values (`umask`), never one with a path in memory, which
/// the kernel would read again after the check.
pub fn let_continue(listener: &OwnedFd, id: u64) {
    let resp = libc::seccomp_notif_resp {
        id,
        val: 0,
        error: 0,
        flags: libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32,
    };
    // SAFETY: `resp` is a valid seccomp_notif_resp for the kernel to read.
    let _ =
        unsafe { libc::ioctl(listener.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_SEND as _, &resp) };
}

/// Answers request `id` with `val`, or with the error `errno` when it is not 0. ENOENT (the
/// call was interrupted or its process died) needs nothing, so the result is not returned.
pub fn answer(listener: &OwnedFd, id: u64, val: i64, errno: i32) {
    let resp = libc::seccomp_notif_resp { id, val, error: -errno, flags: 0 };
    // SAFETY: `resp` is a valid seccomp_notif_resp for the kernel to read.
    let _ =
        unsafe { libc::ioctl(listener.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_SEND as _, &resp) };
}

/// `bind(2)` of `fd` to an address given as its bytes (the init binds a command's socket to
/// the address it read once from the command's memory).
pub fn bind_raw(fd: BorrowedFd<'_>, addr: &[u8]) -> rustix::io::Result<()> {
    let len = libc::socklen_t::try_from(addr.len()).map_err(|_| rustix::io::Errno::INVAL)?;
    // SAFETY: `addr` is a live slice and `len` its length; the kernel copies at most `len`
    // bytes of it and keeps no pointer.
    let r = unsafe { libc::bind(fd.as_raw_fd(), addr.as_ptr().cast(), len) };
    if r < 0 { Err(rustix::io::Errno::from_raw_os_error(errno())) } else { Ok(()) }
}
