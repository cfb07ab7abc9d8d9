//! Thin wrappers over the libc calls the launcher needs, each turning `-1` into an error that
//! names the call. The crate's one unsafe zone. By job: `mount_attrs.rs` (mounts and their
//! attributes), `signals.rs` (signals and reaping), `users.rs` (the passwd database, owners),
//! `seccomp_notify.rs` (seccomp user notification), `ifaddrs.rs` (the machine's own addresses),
//! `libgit2.rs` (libgit2's process-global options, for hands-git), `marks.rs` (byte locks on
//! folders, decision 0084); the rest here (processes, descriptors, namespaces, exec).

#![allow(unsafe_code)]

pub mod ifaddrs;
pub mod libgit2;
pub mod marks;
mod mount_attrs;
pub mod seccomp_notify;
mod signals;
mod users;
pub use ifaddrs::own_addresses;
pub use mount_attrs::*;
pub use signals::*;
pub use users::*;

use anyhow::{Context, Result, anyhow};
use std::collections::BTreeMap;
use std::ffi::{CString, OsStr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Sets `key` in this process's environment, only while the process has a single thread: what
/// makes `set_var` unsafe is another thread reading the environment at the same moment, and
/// only this thread could start one.
pub fn set_env_while_single_threaded(key: &str, value: &OsStr) -> Result<()> {
    let threads = std::fs::read_dir("/proc/self/task")
        .context("cannot count this process's threads in /proc/self/task")?
        .count();
    anyhow::ensure!(
        threads == 1,
        "{key} can be set only before any thread starts, and {threads} threads run"
    );
    // SAFETY: the process has one thread (counted above), so nothing reads the environment
    // while it changes.
    unsafe { std::env::set_var(key, value) };
    Ok(())
}

/// Wraps a raw descriptor just returned by the kernel.
pub fn owned(fd: i32) -> OwnedFd {
    // SAFETY: callers pass a descriptor the kernel just returned and nothing else owns.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// The last OS error, prefixed with what was being done.
pub fn os_err(what: impl std::fmt::Display) -> anyhow::Error {
    anyhow::Error::new(OsError { what: what.to_string(), error: std::io::Error::last_os_error() })
}

/// A system call that failed: what was being done and the kernel's answer, read as one line
/// (`mount proc on /newroot/proc: Operation not permitted (os error 1)`); [`errno_of`] finds
/// the answer again where the launcher must act on it.
#[derive(Debug)]
pub struct OsError {
    what: String,
    error: std::io::Error,
}

impl std::fmt::Display for OsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.what, self.error)
    }
}

// No `source`: the kernel's answer is already in the line, and `{:#}` would say it twice.
impl std::error::Error for OsError {}

/// The errno of the first failed system call in `e`'s chain ([`os_err`]), if it has one.
pub fn errno_of(e: &anyhow::Error) -> Option<i32> {
    e.chain().find_map(|c| c.downcast_ref::<OsError>()).and_then(|o| o.error.raw_os_error())
}

fn check(ret: libc::c_long, what: impl std::fmt::Display) -> Result<libc::c_long> {
    if ret < 0 { Err(os_err(what)) } else { Ok(ret) }
}

pub fn cstr(s: impl AsRef<OsStr>) -> Result<CString> {
    CString::new(s.as_ref().as_bytes()).map_err(|_| anyhow!("a NUL byte in {:?}", s.as_ref()))
}

/// A close-on-exec pipe: (read, write).
pub fn pipe() -> Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0i32; 2];
    // SAFETY: `fds` is a valid two-element array for pipe2 to fill.
    let ret = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    check(ret.into(), "pipe2")?;
    Ok((owned(fds[0]), owned(fds[1])))
}

/// The caller's real uid and gid.
pub fn ids() -> (libc::uid_t, libc::gid_t) {
    // SAFETY: getuid and getgid take nothing and cannot fail.
    unsafe { (libc::getuid(), libc::getgid()) }
}

pub fn unshare(flags: libc::c_int) -> Result<()> {
    // SAFETY: unshare takes flags only; the launcher is single-threaded here.
    check(unsafe { libc::unshare(flags) }.into(), "unshare").map(drop)
}

pub fn fork() -> Result<libc::pid_t> {
    // SAFETY: the launcher has one thread, so the child may go on running Rust code.
    let pid = unsafe { libc::fork() };
    check(pid.into(), "fork")?;
    Ok(pid)
}

/// Ends the process at once, without running destructors or flushing anything of the parent's.
pub fn exit_now(code: u8) -> ! {
    // SAFETY: _exit never returns and touches no Rust state.
    unsafe { libc::_exit(code.into()) }
}

/// Waits for `pid` and turns its end into an exit code: the code, or 128 + the signal.
pub fn wait(pid: libc::pid_t) -> Result<u8> {
    loop {
        let mut status = 0;
        // SAFETY: `status` is a valid out-pointer.
        let ret = unsafe { libc::waitpid(pid, &mut status, 0) };
        if ret < 0 {
            if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return Err(os_err("waitpid"));
        }
        if libc::WIFEXITED(status) {
            return Ok(libc::WEXITSTATUS(status) as u8);
        }
        if libc::WIFSIGNALED(status) {
            return Ok(128u8.saturating_add(libc::WTERMSIG(status) as u8));
        }
    }
}

/// Blocks SIGTERM, SIGINT and SIGHUP and returns a signalfd that receives them, with the mask
/// that was in force before (for the child to restore).
pub fn catch_stop_signals() -> Result<(OwnedFd, libc::sigset_t)> {
    // SAFETY: sigset_t is plain data; every pointer is to a local that outlives the call.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            libc::sigaddset(&mut set, sig);
        }
        check(libc::sigprocmask(libc::SIG_BLOCK, &set, &mut old).into(), "sigprocmask")?;
        let fd = libc::signalfd(-1, &set, libc::SFD_CLOEXEC);
        check(fd.into(), "signalfd")?;
        Ok((owned(fd), old))
    }
}

/// Restores a signal mask saved by [`catch_stop_signals`].
pub fn restore_signal_mask(old: &libc::sigset_t) -> Result<()> {
    // SAFETY: `old` is a valid sigset_t.
    let ret = unsafe { libc::sigprocmask(libc::SIG_SETMASK, old, std::ptr::null_mut()) };
    check(ret.into(), "sigprocmask").map(drop)
}

pub fn pidfd_open(pid: libc::pid_t) -> Result<OwnedFd> {
    pidfd_open_flags(pid, 0)
}

/// A pidfd of thread `tid` itself (`PIDFD_THREAD`, Linux 6.9+): `pidfd_getfd` through it reads
/// that thread's descriptor table, which a thread made without `CLONE_FILES` has of its own.
pub fn pidfd_open_thread(tid: libc::pid_t) -> Result<OwnedFd> {
    pidfd_open_flags(tid, libc::O_EXCL)
}

fn pidfd_open_flags(pid: libc::pid_t, flags: i32) -> Result<OwnedFd> {
    // SAFETY: pidfd_open takes integers only.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, flags) };
    check(fd, "pidfd_open")?;
    Ok(owned(fd as i32))
}

/// What [`wait_event`] saw.
pub enum Event {
    /// The process behind the pidfd ended.
    Ended,
    /// A signal arrived on the signalfd.
    Signal(i32),
    /// The `done` pipe said something: the byte written on it, or `None` at its end without one.
    Done(Option<u8>),
    /// `timeout_ms` passed with none of them.
    Tick,
}

/// Waits until the process behind `pidfd` ends, a signal arrives on `sigfd`, `done` (when
/// there is one) is readable, or `timeout_ms` passes (-1: no timeout).
pub fn wait_event(
    pidfd: &OwnedFd,
    sigfd: &OwnedFd,
    done: Option<&OwnedFd>,
    timeout_ms: i32,
) -> Result<Event> {
    loop {
        let mut fds = [
            libc::pollfd { fd: pidfd.as_raw_fd(), events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: sigfd.as_raw_fd(), events: libc::POLLIN, revents: 0 },
            // A negative descriptor is left out by poll.
            libc::pollfd {
                fd: done.map_or(-1, |d| d.as_raw_fd()),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: three valid pollfds.
        let ret = unsafe { libc::poll(fds.as_mut_ptr(), 3, timeout_ms) };
        if ret < 0 {
            if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return Err(os_err("poll"));
        }
        if ret == 0 {
            return Ok(Event::Tick);
        }
        if fds[1].revents & libc::POLLIN != 0 {
            // SAFETY: signalfd_siginfo is plain data, read in whole by the kernel.
            let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
            let size = std::mem::size_of::<libc::signalfd_siginfo>();
            // SAFETY: `info` is `size` writable bytes.
            let n = unsafe {
                libc::read(
                    sigfd.as_raw_fd(),
                    (&mut info as *mut libc::signalfd_siginfo).cast(),
                    size,
                )
            };
            if n == size as isize {
                return Ok(Event::Signal(info.ssi_signo as i32));
            }
        }
        if let Some(d) = done
            && fds[2].revents != 0
        {
            let mut b = [0u8; 1];
            // SAFETY: one writable byte.
            let n = unsafe { libc::read(d.as_raw_fd(), b.as_mut_ptr().cast(), 1) };
            if n < 0 && errno() == libc::EINTR {
                continue;
            }
            return Ok(Event::Done((n == 1).then_some(b[0])));
        }
        if fds[0].revents != 0 {
            return Ok(Event::Ended);
        }
    }
}

/// `fd` watched by the tokio runtime for when it can be read, for as long as it is borrowed.
pub fn async_readable(
    fd: std::os::fd::BorrowedFd<'_>,
) -> std::io::Result<tokio::io::unix::AsyncFd<std::os::fd::BorrowedFd<'_>>> {
    use tokio::io::{Interest, unix::AsyncFd};
    // SAFETY: the `AsyncFd` holds the borrow, so the descriptor stays open, the same one,
    // for all its life.
    unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }.map_err(|e| e.into_parts().1)
}

/// Puts `/dev/null` on descriptors 1 and 2 (or closes them where it cannot be opened): a
/// process that outlives its command lets go of the command's output pipes, whose readers
/// then see their end.
pub fn let_go_of_output() {
    // SAFETY: a constant C string; the descriptors are this process's own standard streams.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        for fd in [1, 2] {
            if null < 0 || libc::dup2(null, fd) < 0 {
                libc::close(fd);
            }
        }
        if null >= 0 {
            libc::close(null);
        }
    }
}

pub fn die_with_parent() -> Result<()> {
    // SAFETY: prctl with integer arguments.
    let ret = unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) };
    check(ret.into(), "prctl(PR_SET_PDEATHSIG)").map(drop)
}

/// Whether the pipe behind the write end `fd` still has a reader.
pub fn reader_alive(fd: &impl AsRawFd) -> bool {
    let mut p = libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLOUT, revents: 0 };
    // SAFETY: one valid pollfd, no wait.
    let ret = unsafe { libc::poll(&mut p, 1, 0) };
    ret >= 0 && p.revents & libc::POLLERR == 0
}

pub fn set_hostname(name: &str) -> Result<()> {
    // SAFETY: the pointer and length describe `name`.
    let ret = unsafe { libc::sethostname(name.as_ptr().cast(), name.len()) };
    check(ret.into(), "sethostname").map(drop)
}

#[repr(C)]
struct IfreqFlags {
    name: [libc::c_char; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

const SIOCGIFFLAGS: libc::c_ulong = 0x8913;
const SIOCSIFFLAGS: libc::c_ulong = 0x8914;

/// Brings `lo` up in the new network namespace, so the command has a working loopback.
pub fn loopback_up() -> Result<()> {
    // SAFETY: socket takes integers only.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    check(fd.into(), "socket for loopback")?;
    let sock = owned(fd);
    let mut req = IfreqFlags { name: [0; libc::IFNAMSIZ], flags: 0, _pad: [0; 22] };
    req.name[0] = b'l' as libc::c_char;
    req.name[1] = b'o' as libc::c_char;
    // SAFETY: `req` is an ifreq-shaped buffer that lives across both calls.
    let ret = unsafe { libc::ioctl(sock.as_raw_fd(), SIOCGIFFLAGS, &mut req as *mut IfreqFlags) };
    check(ret.into(), "ioctl(SIOCGIFFLAGS, lo)")?;
    req.flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
    // SAFETY: as above.
    let ret = unsafe { libc::ioctl(sock.as_raw_fd(), SIOCSIFFLAGS, &mut req as *mut IfreqFlags) };
    check(ret.into(), "ioctl(SIOCSIFFLAGS, lo up)").map(drop)
}

/// Marks every descriptor from `first` up close-on-exec, so none reaches the command.
pub fn cloexec_from(first: u32) -> Result<()> {
    // SAFETY: close_range with integer arguments; CLOEXEC closes nothing now.
    let ret =
        unsafe { libc::syscall(libc::SYS_close_range, first, u32::MAX, libc::CLOSE_RANGE_CLOEXEC) };
    check(ret, "close_range").map(drop)
}

pub fn setsid() -> Result<()> {
    // SAFETY: no arguments.
    check(unsafe { libc::setsid() }.into(), "setsid").map(drop)
}

/// Resolves `argv0` against `PATH` the way a shell would, inside the new root.
pub fn find_program(argv0: &str, path: Option<&str>) -> Result<PathBuf> {
    if argv0.contains('/') {
        return Ok(PathBuf::from(argv0));
    }
    for dir in path.unwrap_or("/usr/bin:/bin").split(':') {
        let candidate = Path::new(if dir.is_empty() { "." } else { dir }).join(argv0);
        let c = cstr(&candidate)?;
        // SAFETY: a NUL-terminated path.
        if candidate.is_file() && unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0 {
            return Ok(candidate);
        }
    }
    Err(anyhow!("{argv0}: command not found in the sandbox's PATH"))
}

/// Replaces the process with `program`; returns only on failure.
pub fn exec(program: &Path, argv: &[String], env: &BTreeMap<String, String>) -> Result<()> {
    let prog = cstr(program)?;
    let args = argv.iter().map(cstr).collect::<Result<Vec<_>>>()?;
    let envs = env.iter().map(|(k, v)| cstr(format!("{k}={v}"))).collect::<Result<Vec<_>>>()?;
    let mut arg_ptrs: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    arg_ptrs.push(std::ptr::null());
    let mut env_ptrs: Vec<*const libc::c_char> = envs.iter().map(|a| a.as_ptr()).collect();
    env_ptrs.push(std::ptr::null());
    // SAFETY: null-terminated arrays of NUL-terminated strings that outlive the call.
    unsafe { libc::execve(prog.as_ptr(), arg_ptrs.as_ptr(), env_ptrs.as_ptr()) };
    Err(os_err(format_args!("cannot run {}", program.display())))
}

/// Joins the namespaces `nstypes` (CLONE_NEW* flags) of the process behind `pidfd`.
pub fn setns(pidfd: &OwnedFd, nstypes: libc::c_int) -> Result<()> {
    // SAFETY: a valid pidfd and integer flags; the launcher is single-threaded here.
    check(unsafe { libc::setns(pidfd.as_raw_fd(), nstypes) }.into(), "setns").map(drop)
}

/// Points stdout at `/dev/null`, so whoever reads the pipe behind it sees its end.
#[expect(clippy::disallowed_methods, reason = "/dev/null, for the launcher's own stdout")]
pub fn stdout_to_null() -> Result<()> {
    let null = std::fs::File::options().write(true).open("/dev/null").context("/dev/null")?;
    // SAFETY: dup2 of a descriptor we own onto fd 1.
    check(unsafe { libc::dup2(null.as_raw_fd(), 1) }.into(), "dup2").map(drop)
}

/// `clone` with namespace flags and no new stack: like `fork`, the child goes on from here on
/// a copy of the caller's stack, already inside the new namespaces (PID 1 of a new PID
/// namespace). Returns 0 in the child.
pub fn clone_into(flags: libc::c_int) -> Result<libc::pid_t> {
    // SAFETY: a raw clone without CLONE_VM or a stack behaves as fork; the launcher has one
    // thread, so the child may go on running Rust code.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone,
            (flags | libc::SIGCHLD) as libc::c_ulong,
            0usize,
            0usize,
            0usize,
            0usize,
        )
    };
    check(pid, "clone")?;
    Ok(pid as libc::pid_t)
}

/// `clone3`'s `CLONE_INTO_CGROUP` (Linux 5.7), which the libc crate declares with too narrow
/// a type.
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// [`clone_into`] that starts the child in the cgroup v2 folder behind `cgroup`: `clone3` with
/// `CLONE_INTO_CGROUP`, so the child never runs outside it and nothing is migrated (a write of
/// its pid to `cgroup.procs` waits for the cgroup rwsem, whose writers wait for an RCU grace
/// period). The errno when the kernel or a seccomp filter refuses: ENOSYS (no `clone3`, or a
/// container's filter), E2BIG or EINVAL (a kernel without `CLONE_INTO_CGROUP`), EPERM, EACCES,
/// EBUSY... — the caller falls back to [`clone_into`] and a write of the pid.
pub fn clone_into_cgroup(flags: libc::c_int, cgroup: &impl AsRawFd) -> Result<libc::pid_t, i32> {
    // SAFETY: clone_args is plain data; all-zero is a valid start (no pidfd, tid or stack).
    let mut args: libc::clone_args = unsafe { std::mem::zeroed() };
    // Namespace flags are positive `c_int`s.
    args.flags = u64::from(flags as u32) | CLONE_INTO_CGROUP;
    args.exit_signal = libc::SIGCHLD as u64;
    args.cgroup = cgroup.as_raw_fd() as u64;
    // SAFETY: a valid clone_args of the size passed; without CLONE_VM or a stack the child goes
    // on as after fork, on a copy of this stack, and the launcher has one thread here.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone3,
            &mut args as *mut libc::clone_args,
            std::mem::size_of::<libc::clone_args>(),
        )
    };
    if pid < 0 { Err(errno()) } else { Ok(pid as libc::pid_t) }
}

/// The errno of the last failed call.
pub fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Empties the supplementary groups (root only): a command run as `sandbox.run_as` must not
/// keep root's groups.
pub fn drop_groups() -> Result<()> {
    // SAFETY: an empty list.
    check(unsafe { libc::setgroups(0, std::ptr::null()) }.into(), "setgroups").map(drop)
}

/// Becomes `uid`/`gid` for good (real, effective and saved ids).
pub fn become_ids(uid: libc::uid_t, gid: libc::gid_t) -> Result<()> {
    // SAFETY: integer arguments.
    check(unsafe { libc::setresgid(gid, gid, gid) }.into(), format_args!("setresgid({gid})"))?;
    // SAFETY: integer arguments.
    check(unsafe { libc::setresuid(uid, uid, uid) }.into(), format_args!("setresuid({uid})"))
        .map(drop)
}

/// The caller's effective uid.
pub fn euid() -> libc::uid_t {
    // SAFETY: geteuid takes nothing and cannot fail.
    unsafe { libc::geteuid() }
}

/// The Landlock ABI the kernel offers (0: none, or disabled at boot).
pub fn landlock_abi() -> u32 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: a null attribute with size 0 and the version flag only asks for the ABI.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(v).unwrap_or(0)
}

/// Reads one byte from `fd`; `false` at end of file or on an error.
pub fn read_byte(fd: &OwnedFd) -> bool {
    let mut b = [0u8; 1];
    loop {
        // SAFETY: one writable byte.
        let n = unsafe { libc::read(fd.as_raw_fd(), b.as_mut_ptr().cast(), 1) };
        if n == 1 {
            return true;
        }
        if n < 0 && errno() == libc::EINTR {
            continue;
        }
        return false;
    }
}

/// Gives the pipes and sockets on descriptors 0-2 to `uid`/`gid`: a command run as
/// `sandbox.run_as` reopens them through `/proc/self/fd` (`echo x > /dev/stderr`), which checks
/// the pipe's owner, and the daemon (root) made them. A terminal is left alone.
pub fn give_stdio(uid: libc::uid_t, gid: libc::gid_t) {
    for fd in 0..3 {
        // SAFETY: stat is plain data, filled by fstat.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: a descriptor number and a valid out-pointer.
        if unsafe { libc::fstat(fd, &mut st) } != 0 {
            continue;
        }
        let kind = st.st_mode & libc::S_IFMT;
        if kind == libc::S_IFIFO || kind == libc::S_IFSOCK {
            // SAFETY: integer arguments.
            unsafe { libc::fchown(fd, uid, gid) };
        }
    }
}

/// What the launcher's stdin is: a socket (the daemon's report channel), a regular file (a
/// spec given by hand), or something else (a terminal, a pipe, which a read would wait on).
pub fn stdin_type() -> Option<rustix::fs::FileType> {
    use std::os::fd::AsFd;
    let st = rustix::fs::fstat(std::io::stdin().as_fd()).ok()?;
    Some(rustix::fs::FileType::from_raw_mode(st.st_mode))
}

/// The launcher's stdin when it is a `kind` ([`stdin_type`]), moved to a close-on-exec
/// descriptor `>= at`; `/dev/null` takes its place as fd 0, the command's stdin.
pub fn take_stdin(at: i32, kind: rustix::fs::FileType) -> Option<OwnedFd> {
    use std::os::fd::AsFd;
    let stdin = std::io::stdin();
    if stdin_type() != Some(kind) {
        return None;
    }
    let moved = rustix::io::fcntl_dupfd_cloexec(stdin.as_fd(), at).ok()?;
    let null = rustix::fs::open(
        "/dev/null",
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .ok()?;
    // SAFETY: dup2 with two open descriptors: fd 0 becomes /dev/null (without close-on-exec,
    // as a stdin must be); what stdin was stays open at `moved`.
    if unsafe { libc::dup2(null.as_raw_fd(), 0) } < 0 {
        return None;
    }
    Some(moved)
}

/// A close-on-exec memfd holding `bytes`, sealed against any change.
pub fn sealed_memfd(name: &str, bytes: &[u8]) -> std::io::Result<OwnedFd> {
    use rustix::fs::{MemfdFlags, SealFlags};
    use std::io::Write;
    let fd = rustix::fs::memfd_create(name, MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)?;
    let mut file = std::fs::File::from(fd);
    file.write_all(bytes)?;
    let seals = SealFlags::SEAL | SealFlags::SHRINK | SealFlags::GROW | SealFlags::WRITE;
    rustix::fs::fcntl_add_seals(&file, seals)?;
    Ok(file.into())
}

#[cfg(test)]
mod env_tests {
    /// A test runs beside the harness's main thread: setting the environment is refused, and
    /// the variable is left alone. (The one-thread path runs in `hands serve`, suite::git_ssh.)
    #[test]
    fn setting_the_environment_with_a_second_thread_running_is_refused() {
        let key = "HANDS_TEST_SET_ENV_REFUSED";
        let e = super::set_env_while_single_threaded(key, std::ffi::OsStr::new("x")).unwrap_err();
        assert!(e.to_string().contains("before any thread starts"), "{e}");
        assert!(std::env::var_os(key).is_none());
    }
}
