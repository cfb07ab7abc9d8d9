//! The in-run walls: names a command must not create while it runs (a `.git` folder or file,
//! and the protected paths of `sandbox-profiles/protected.txt`, under a writable root). The
//! bind mounts the init places before the command starts cover what exists then; what a
//! command creates during its own run is covered here, by seccomp user notification.
//!
//! The command installs a filter that sends every call that can make a new name (`open`/
//! `openat` with `O_CREAT`, `creat`, `mkdir*`, `mknod*`, `rename*`, `link*`, `symlink*`) to a
//! listener, hands the listener to the sandbox's init (PID 1 of the same mount namespace), and
//! execs. `openat2` gets ENOSYS (its flags live in memory a filter cannot read; libc falls
//! back to `openat`). The init never lets such a call continue (the kernel's
//! `SECCOMP_USER_NOTIF_FLAG_CONTINUE` would re-read the path from the command's memory, which
//! another thread can rewrite after the check): it reads the path once, resolves the parent
//! folder to a descriptor, checks the real path of that folder and the final name, and then
//! performs the call itself on that descriptor with its own copy of the name, returning the
//! result (a new descriptor through `SECCOMP_IOCTL_NOTIF_ADDFD`). What is checked is what is
//! created. The init has the command's uid, no capabilities and the same Landlock rules, so
//! it can create nothing the command could not. `docs/decisions/0046-walls-in-run.md` has the
//! reasoning and what is left.
//!
//! A refused call fails with EACCES; the init sends [`Report::Refused`](super::Report) on the
//! launcher's report channel, which the daemon lists in the result's `denied`, and writes one
//! `hands sandbox: refused creating PATH: WHY` line on the command's stderr for a person (the
//! daemon never reads it: the command can print the same).

use anyhow::{Context, Result};
use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags};
use std::ffi::OsStr;
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

mod rules;
mod target;
pub use rules::{Kind, Verdict, Walls};
use target::{base_dir, locate, open_dir, read_path, read_umask, real_path};

/// The start of the line the init writes for each refused create, for a person.
pub const REFUSED: &str = "hands sandbox: refused creating ";

/// How the launcher's last line on the command's stderr begins when the memory bound's cgroup
/// killed the command's processes for lack of memory, for a person.
pub const OUT_OF_MEMORY: &str = "hands sandbox: the command's processes ran out of memory";

/// The prefix of every line the launcher writes on the command's stderr.
const LAUNCHER_LINE: &str = "hands sandbox:";

/// At most this many refusals per command are reported and written (a loop of refused creates
/// must not flood the output or the channel); the rest are counted in one last line.
const MAX_LINES: usize = 20;

/// Calls handled at once on their own threads (an open of a FIFO blocks until its other end
/// opens); beyond this the init handles them one by one.
const MAX_THREADS: usize = 32;

/// Longest path the kernel accepts (with its NUL).
const PATH_MAX: usize = 4096;

/// Symbolic links followed at the end of an `O_CREAT` path, as the kernel's own limit.
const MAX_LINKS: usize = 40;

pub(crate) fn trim_slashes(name: &[u8]) -> &[u8] {
    let mut n = name;
    while let Some(rest) = n.strip_suffix(b"/") {
        n = rest;
    }
    n
}

/// The command's side of handing the listener to the init, and the init's.
pub struct Handoff {
    to_init: (OwnedFd, OwnedFd),
    to_command: (OwnedFd, OwnedFd),
}

impl Handoff {
    /// Two pipes, made by the init before it forks the command.
    pub fn new() -> Result<Handoff> {
        Ok(Handoff { to_init: super::sys::pipe()?, to_command: super::sys::pipe()? })
    }

    /// In the command, after its other filters: installs the notifying filter, tells the init
    /// the listener's number and waits until the init holds it (the command's own copy is
    /// close-on-exec, so it never reaches the program).
    pub fn install(&self, writes: bool) -> Result<()> {
        // A change of uid (`run_as`) made this process undumpable, which would keep the init
        // (same uid, no capabilities) from taking the descriptor; execve sets it again anyway.
        super::sys::notify::set_dumpable()?;
        let listener = install_filter(writes)?;
        let n = listener.as_raw_fd().to_ne_bytes();
        std::fs::File::from(dup(&self.to_init.1)?)
            .write_all(&n)
            .context("cannot pass the seccomp listener to the sandbox's init")?;
        let mut ok = [0u8; 1];
        let got = std::fs::File::from(dup(&self.to_command.0)?).read_exact_or_eof(&mut ok);
        anyhow::ensure!(
            got && ok[0] == 1,
            "the sandbox's init could not take the seccomp listener (pidfd_getfd, Linux 5.6+)"
        );
        drop(listener);
        Ok(())
    }

    /// In the init, after the fork: the command's listener, or None when the command ended
    /// before making one (its own error says why).
    pub fn receive(self, child: libc::pid_t) -> Result<Option<OwnedFd>> {
        let Handoff { to_init, to_command } = self;
        drop(to_init.1);
        drop(to_command.0);
        let mut n = [0u8; 4];
        if !std::fs::File::from(to_init.0).read_exact_or_eof(&mut n) {
            return Ok(None);
        }
        let taken = take_fd(child, i32::from_ne_bytes(n));
        let mut reply = std::fs::File::from(to_command.1);
        let _ = reply.write_all(&[u8::from(taken.is_ok())]);
        taken.map(Some)
    }
}

trait ReadAll {
    fn read_exact_or_eof(&mut self, buf: &mut [u8]) -> bool;
}

impl ReadAll for std::fs::File {
    fn read_exact_or_eof(&mut self, buf: &mut [u8]) -> bool {
        std::io::Read::read_exact(self, buf).is_ok()
    }
}

fn dup(fd: &OwnedFd) -> Result<OwnedFd> {
    fd.try_clone().context("dup")
}

/// `pidfd_getfd`: a copy of descriptor `n` of process `pid`.
fn take_fd(pid: libc::pid_t, n: i32) -> Result<OwnedFd> {
    let pidfd = super::sys::pidfd_open(pid)?;
    super::sys::notify::pidfd_getfd(&pidfd, n)
}

/// `AUDIT_ARCH_*` of the architectures the filter is built for.
#[cfg(target_arch = "x86_64")]
const ARCH: u32 = 0xc000_003e;
#[cfg(target_arch = "aarch64")]
const ARCH: u32 = 0xc000_00b7;

/// Calls sent to the init whatever their arguments.
fn notified() -> Vec<libc::c_long> {
    let mut v = vec![
        libc::SYS_mkdirat,
        libc::SYS_mknodat,
        libc::SYS_renameat2,
        libc::SYS_linkat,
        libc::SYS_symlinkat,
    ];
    #[cfg(target_arch = "x86_64")]
    v.extend([
        libc::SYS_creat,
        libc::SYS_mkdir,
        libc::SYS_mknod,
        libc::SYS_rename,
        libc::SYS_renameat,
        libc::SYS_link,
        libc::SYS_symlink,
    ]);
    #[cfg(target_arch = "aarch64")]
    v.push(libc::SYS_renameat);
    v
}

/// Calls sent to the init when the flags argument (its index) holds `O_CREAT`.
fn notified_when_creating() -> Vec<(libc::c_long, u32)> {
    let mut v = vec![(libc::SYS_openat, 2)];
    #[cfg(target_arch = "x86_64")]
    v.push((libc::SYS_open, 1));
    v
}

/// The filter, as classic BPF: foreign architectures pass (the main filter kills them). With
/// `writes`, an open for writing is sent too, not only one that creates (`new_repositories =
/// "allow"`: a config the init wrote for a new repository is never opened for writing).
fn program(writes: bool) -> Vec<libc::sock_filter> {
    const LD_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
    const JEQ: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
    const JSET: u16 = 0x45; // BPF_JMP | BPF_JSET | BPF_K
    const RET: u16 = 0x06; // BPF_RET | BPF_K
    let ins = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
    let allow = libc::SECCOMP_RET_ALLOW;
    let notify = libc::SECCOMP_RET_USER_NOTIF;
    let mut p = vec![ins(LD_ABS, 0, 0, 4), ins(JEQ, 1, 0, ARCH), ins(RET, 0, 0, allow)];
    p.push(ins(LD_ABS, 0, 0, 0));
    // openat2's flags are in memory: ENOSYS, and libc uses openat.
    p.push(ins(JEQ, 0, 1, libc::SYS_openat2 as u32));
    p.push(ins(RET, 0, 0, libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32));
    for nr in notified() {
        p.push(ins(JEQ, 0, 1, nr as u32));
        p.push(ins(RET, 0, 0, notify));
    }
    for (nr, arg) in notified_when_creating() {
        // The low word of the argument (little-endian), tested for O_CREAT; both ends return.
        p.push(ins(JEQ, 0, 4, nr as u32));
        p.push(ins(LD_ABS, 0, 0, 16 + 8 * arg));
        p.push(ins(JSET, 0, 1, open_mask(writes)));
        p.push(ins(RET, 0, 0, notify));
        p.push(ins(RET, 0, 0, allow));
    }
    p.push(ins(RET, 0, 0, allow));
    p
}

/// The open flags that send an open to the init.
fn open_mask(writes: bool) -> u32 {
    let w = libc::O_WRONLY | libc::O_RDWR | libc::O_TRUNC;
    (libc::O_CREAT | if writes { w } else { 0 }) as u32
}

/// Installs the filter with a new listener (close-on-exec). With the kernel's
/// `WAIT_KILLABLE_RECV` (5.19+), a signal to the command while the init works on its call
/// does not restart the call behind the init's back.
fn install_filter(writes: bool) -> Result<OwnedFd> {
    let prog = program(writes);
    let mut flags =
        libc::SECCOMP_FILTER_FLAG_NEW_LISTENER | libc::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV;
    loop {
        let errno = match super::sys::notify::install_filter(&prog, flags) {
            Ok(fd) => return Ok(fd),
            Err(errno) => errno,
        };
        if errno == libc::EINVAL && flags & libc::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV != 0 {
            flags &= !libc::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV;
            continue;
        }
        anyhow::bail!(
            "seccomp user notification (needed to refuse a .git or protected path created \
             during a command; Linux 5.14+) failed: {}",
            std::io::Error::from_raw_os_error(errno)
        );
    }
}

/// The init's side: answers the command's notified calls until the listener closes (every
/// process of the command has ended). Runs on a thread of its own.
pub fn serve(listener: OwnedFd, walls: Walls, reporter: super::report::Reporter) {
    // The umask is per process; `CLONE_FS` makes this thread's its own, set per call.
    if super::sys::unshare(libc::CLONE_FS).is_err() {
        return;
    }
    let listener = Arc::new(listener);
    let walls = Arc::new(walls);
    let busy = Arc::new(AtomicUsize::new(0));
    let lines = Arc::new(AtomicUsize::new(0));
    let reporter = Arc::new(reporter);
    loop {
        let req = match super::sys::notify::receive(&listener) {
            Ok(req) => req,
            // Interrupted, or the target died before we read it: next. Once nothing uses the
            // filter, every receive fails at once: stop rather than spin until the init exits
            // (found by a profile of the launcher: a core busy for milliseconds per command).
            Err(libc::ENOENT) if super::sys::notify::orphaned(&listener) => return,
            Err(libc::EINTR | libc::ENOENT) => continue,
            Err(_) => return,
        };
        let job = Job {
            listener: listener.clone(),
            walls: walls.clone(),
            lines: lines.clone(),
            busy: busy.clone(),
            reporter: reporter.clone(),
            req,
        };
        job.run();
    }
}

/// One notified call.
struct Job {
    listener: Arc<OwnedFd>,
    walls: Arc<Walls>,
    lines: Arc<AtomicUsize>,
    /// Opens of FIFOs running on threads of their own.
    busy: Arc<AtomicUsize>,
    /// The launcher's report channel, where each refusal goes.
    reporter: Arc<super::report::Reporter>,
    req: libc::seccomp_notif,
}

/// A decoded call: directory arguments as given (`AT_FDCWD` or a descriptor of the command),
/// path arguments as addresses in the command's memory.
enum Call {
    Open { dir: i32, path: u64, flags: i32, mode: u32 },
    Mkdir { dir: i32, path: u64, mode: u32 },
    Mknod { dir: i32, path: u64, mode: u32, dev: u64 },
    Rename { odir: i32, old: u64, ndir: i32, new: u64, flags: u32 },
    Link { odir: i32, old: u64, ndir: i32, new: u64, flags: i32 },
    Symlink { target: u64, ndir: i32, new: u64 },
}

fn decode(nr: libc::c_long, a: [u64; 6]) -> Option<Call> {
    let fd = |v: u64| v as u32 as i32;
    let cwd = libc::AT_FDCWD;
    #[cfg(target_arch = "x86_64")]
    {
        let creat = libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC;
        match nr {
            libc::SYS_open => {
                return Some(Call::Open {
                    dir: cwd,
                    path: a[0],
                    flags: a[1] as i32,
                    mode: a[2] as u32,
                });
            }
            libc::SYS_creat => {
                return Some(Call::Open { dir: cwd, path: a[0], flags: creat, mode: a[1] as u32 });
            }
            libc::SYS_mkdir => {
                return Some(Call::Mkdir { dir: cwd, path: a[0], mode: a[1] as u32 });
            }
            libc::SYS_mknod => {
                return Some(Call::Mknod { dir: cwd, path: a[0], mode: a[1] as u32, dev: a[2] });
            }
            libc::SYS_rename => {
                return Some(Call::Rename { odir: cwd, old: a[0], ndir: cwd, new: a[1], flags: 0 });
            }
            libc::SYS_link => {
                return Some(Call::Link { odir: cwd, old: a[0], ndir: cwd, new: a[1], flags: 0 });
            }
            libc::SYS_symlink => {
                return Some(Call::Symlink { target: a[0], ndir: cwd, new: a[1] });
            }
            _ => {}
        }
    }
    Some(match nr {
        libc::SYS_openat => {
            Call::Open { dir: fd(a[0]), path: a[1], flags: a[2] as i32, mode: a[3] as u32 }
        }
        libc::SYS_mkdirat => Call::Mkdir { dir: fd(a[0]), path: a[1], mode: a[2] as u32 },
        libc::SYS_mknodat => {
            Call::Mknod { dir: fd(a[0]), path: a[1], mode: a[2] as u32, dev: a[3] }
        }
        libc::SYS_renameat => {
            Call::Rename { odir: fd(a[0]), old: a[1], ndir: fd(a[2]), new: a[3], flags: 0 }
        }
        libc::SYS_renameat2 => Call::Rename {
            odir: fd(a[0]),
            old: a[1],
            ndir: fd(a[2]),
            new: a[3],
            flags: a[4] as u32,
        },
        libc::SYS_linkat => {
            Call::Link { odir: fd(a[0]), old: a[1], ndir: fd(a[2]), new: a[3], flags: a[4] as i32 }
        }
        libc::SYS_symlinkat => Call::Symlink { target: a[0], ndir: fd(a[1]), new: a[2] },
        _ => return None,
    })
}

/// What the call answers: a value, an errno, or a descriptor to install.
enum Answer {
    Value(i64),
    Errno(i32),
    Fd(OwnedFd, bool),
    /// Answered by a thread of its own.
    Later,
}

fn errno_of(e: rustix::io::Errno) -> Answer {
    Answer::Errno(e.raw_os_error())
}

/// A path argument and the folder it starts from, read while the call was known valid.
struct Arg {
    base: OwnedFd,
    path: Vec<u8>,
}

impl Job {
    fn run(&self) {
        let tid = self.req.pid;
        let answer = match self.prepare(tid) {
            Ok(Some((call, umask, args))) => self.perform(tid, call, umask, args),
            Ok(None) => return,
            Err(errno) => Answer::Errno(errno),
        };
        send(&self.listener, self.req.id, answer);
    }

    /// Reads everything of the target the call needs (its paths, umask, the folders its
    /// descriptors name), then checks the call is still waiting: from then on nothing is read
    /// from the target again. `Ok(None)`: the call is gone (the target died).
    fn prepare(&self, tid: u32) -> Result<Option<(Call, u32, Vec<Arg>)>, i32> {
        let d = &self.req.data;
        let Some(call) = decode(d.nr as libc::c_long, d.args) else {
            return Err(libc::ENOSYS);
        };
        let mem = std::fs::File::open(format!("/proc/{tid}/mem")).map_err(|_| libc::EPERM)?;
        let umask = read_umask(tid).ok_or(libc::EPERM)?;
        let arg = |dir: i32, addr: u64, empty_ok: bool| -> Result<Arg, i32> {
            let path = read_path(&mem, addr)?;
            if path.is_empty() && !empty_ok {
                return Err(libc::ENOENT);
            }
            Ok(Arg { base: base_dir(tid, dir, &path)?, path })
        };
        let args = match &call {
            Call::Open { dir, path, .. }
            | Call::Mkdir { dir, path, .. }
            | Call::Mknod { dir, path, .. } => vec![arg(*dir, *path, false)?],
            Call::Rename { odir, old, ndir, new, .. } => {
                vec![arg(*odir, *old, false)?, arg(*ndir, *new, false)?]
            }
            Call::Link { odir, old, ndir, new, flags } => {
                let empty = flags & libc::AT_EMPTY_PATH != 0;
                vec![arg(*odir, *old, empty)?, arg(*ndir, *new, false)?]
            }
            Call::Symlink { target, ndir, new } => {
                let t = read_path(&mem, *target)?;
                if t.is_empty() {
                    return Err(libc::ENOENT);
                }
                let cwd = open_dir("/")?;
                vec![Arg { base: cwd, path: t }, arg(*ndir, *new, false)?]
            }
        };
        if !super::sys::notify::still_valid(&self.listener, self.req.id) {
            return Ok(None);
        }
        Ok(Some((call, umask, args)))
    }

    /// Checks and performs the call on the descriptors and copies `prepare` made.
    fn perform(&self, tid: u32, call: Call, umask: u32, mut args: Vec<Arg>) -> Answer {
        rustix::process::umask(Mode::from_raw_mode(umask));
        let Some(last) = args.pop() else { return Answer::Errno(libc::EINVAL) };
        match call {
            Call::Open { flags, mode, .. } => {
                let follow = flags & (libc::O_EXCL | libc::O_NOFOLLOW) == 0;
                let (dir, name) = match locate(tid, &last, follow) {
                    Ok(v) => v,
                    Err(e) => return Answer::Errno(e),
                };
                // Without O_CREAT the open makes nothing: only a write to a sealed config
                // (below) is refused.
                if flags & libc::O_CREAT != 0 {
                    match self.check(&dir, &name, Kind::File) {
                        Checked::Go => {}
                        Checked::Stop(a) => return a,
                        Checked::Config(real) => {
                            return self.refuse(&real, &name, "a config is not created in place");
                        }
                    }
                }
                let writes = flags & open_mask(true) as i32 != 0;
                let watch = writes && self.walls.watches_writes();
                let sealed = |st: Option<rustix::fs::Stat>| {
                    st.is_some_and(|st| self.walls.sealed((st.st_dev, st.st_ino)))
                };
                let at = if follow { AtFlags::empty() } else { AtFlags::SYMLINK_NOFOLLOW };
                if watch && sealed(rustix::fs::statat(&dir, OsStr::from_bytes(&name), at).ok()) {
                    let shown = real_path(&dir).unwrap_or_default();
                    return self.refuse(&shown, &name, SEALED);
                }
                let walls = self.walls.clone();
                let cloexec = flags & libc::O_CLOEXEC != 0;
                let fifo = rustix::fs::statat(&dir, OsStr::from_bytes(&name), AtFlags::empty())
                    .is_ok_and(|s| FileType::from_raw_mode(s.st_mode) == FileType::Fifo);
                let oflags =
                    OFlags::from_bits_retain((flags | libc::O_CLOEXEC | libc::O_NOCTTY) as u32);
                let open = move || match rustix::fs::openat(
                    &dir,
                    OsStr::from_bytes(&name),
                    oflags,
                    Mode::from_raw_mode(mode),
                ) {
                    // The file opened is the one checked (a name swapped meanwhile, or a
                    // descriptor's /proc link, is caught here).
                    Ok(fd)
                        if watch
                            && rustix::fs::fstat(&fd)
                                .is_ok_and(|st| walls.sealed((st.st_dev, st.st_ino))) =>
                    {
                        Answer::Errno(libc::EACCES)
                    }
                    Ok(fd) => Answer::Fd(fd, cloexec),
                    Err(e) => errno_of(e),
                };
                if !fifo || self.busy.fetch_add(1, Ordering::AcqRel) >= MAX_THREADS {
                    if fifo {
                        self.busy.fetch_sub(1, Ordering::AcqRel);
                    }
                    return open();
                }
                // Opening a FIFO waits for its other end, which another of the command's
                // calls may be about to open: on a thread of its own.
                let (listener, busy, id) = (self.listener.clone(), self.busy.clone(), self.req.id);
                let spawned = std::thread::Builder::new().spawn(move || {
                    if super::sys::unshare(libc::CLONE_FS).is_ok() {
                        rustix::process::umask(Mode::from_raw_mode(umask));
                        send(&listener, id, open());
                    } else {
                        respond(&listener, id, 0, libc::EAGAIN);
                    }
                    busy.fetch_sub(1, Ordering::AcqRel);
                });
                match spawned {
                    Ok(_) => Answer::Later,
                    Err(_) => {
                        self.busy.fetch_sub(1, Ordering::AcqRel);
                        Answer::Errno(libc::EAGAIN)
                    }
                }
            }
            Call::Mkdir { mode, .. } => self.at_name(tid, &last, Kind::Dir, |dir, name| {
                rustix::fs::mkdirat(dir, name, Mode::from_raw_mode(mode))
            }),
            Call::Mknod { mode, dev, .. } => self.at_name(tid, &last, Kind::File, |dir, name| {
                let kind = FileType::from_raw_mode(mode);
                let kind = if mode & libc::S_IFMT == 0 { FileType::RegularFile } else { kind };
                rustix::fs::mknodat(dir, name, kind, Mode::from_raw_mode(mode & 0o7777), dev)
            }),
            Call::Symlink { .. } => {
                let Some(target) = args.pop() else { return Answer::Errno(libc::EINVAL) };
                self.at_name(tid, &last, Kind::Symlink, |dir, name| {
                    rustix::fs::symlinkat(OsStr::from_bytes(&target.path), dir, name)
                })
            }
            Call::Rename { flags, .. } => {
                let Some(old) = args.pop() else { return Answer::Errno(libc::EINVAL) };
                let (odir, oname) = match locate(tid, &old, false) {
                    Ok(v) => v,
                    Err(e) => return Answer::Errno(e),
                };
                // An exchange (or a whiteout) gives the old name a new entry too.
                let swaps = flags & (libc::RENAME_EXCHANGE | libc::RENAME_WHITEOUT) != 0;
                if swaps {
                    match self.check(&odir, &oname, Kind::Rename) {
                        Checked::Go => {}
                        Checked::Stop(a) => return a,
                        Checked::Config(real) => {
                            return self.refuse(&real, &oname, "a config is not exchanged");
                        }
                    }
                }
                let (dir, name) = match locate(tid, &last, false) {
                    Ok(v) => v,
                    Err(e) => return Answer::Errno(e),
                };
                match self.check(&dir, &name, Kind::Rename) {
                    Checked::Go => {}
                    Checked::Stop(a) => return a,
                    // `mv` asks not to replace first, then renames plainly.
                    Checked::Config(real) if flags & !libc::RENAME_NOREPLACE == 0 => {
                        let flags = RenameFlags::from_bits_retain(flags);
                        return self.checked_config(&odir, &oname, (&dir, &name), flags, &real);
                    }
                    Checked::Config(real) => {
                        return self.refuse(&real, &name, "a config is renamed in plainly");
                    }
                }
                let flags = RenameFlags::from_bits_retain(flags);
                let (oname, name) = (OsStr::from_bytes(&oname), OsStr::from_bytes(&name));
                match rustix::fs::renameat_with(&odir, oname, &dir, name, flags) {
                    Ok(()) => Answer::Value(0),
                    Err(e) => errno_of(e),
                }
            }
            Call::Link { flags, .. } => {
                let Some(old) = args.pop() else { return Answer::Errno(libc::EINVAL) };
                let follow = flags & libc::AT_SYMLINK_FOLLOW != 0;
                // `AT_EMPTY_PATH` on a descriptor: its file, through the target's /proc entry
                // (what the O_TMPFILE idiom does through /proc/self/fd).
                let (odir, oname, oflags) = if old.path.is_empty() {
                    match open_dir("/") {
                        // Our own descriptor of the same file, followed as a magic link (which
                        // also links an O_TMPFILE file).
                        Ok(root) => {
                            let p = format!("/proc/self/fd/{}", old.base.as_raw_fd()).into_bytes();
                            (root, p, AtFlags::SYMLINK_FOLLOW)
                        }
                        Err(e) => return Answer::Errno(e),
                    }
                } else {
                    match locate(tid, &old, false) {
                        Ok((d, n)) => {
                            (d, n, if follow { AtFlags::SYMLINK_FOLLOW } else { AtFlags::empty() })
                        }
                        Err(e) => return Answer::Errno(e),
                    }
                };
                // A sealed config gets no second name that could be opened for writing.
                if self.walls.watches_writes() {
                    let st = if old.path.is_empty() {
                        rustix::fs::fstat(&old.base)
                    } else {
                        rustix::fs::statat(&odir, OsStr::from_bytes(&oname), oflags)
                    };
                    if st.is_ok_and(|st| self.walls.sealed((st.st_dev, st.st_ino))) {
                        let shown = real_path(&odir).unwrap_or_default();
                        return self.refuse(&shown, &oname, SEALED);
                    }
                }
                self.at_name(tid, &last, Kind::Link, |dir, name| {
                    rustix::fs::linkat(&odir, OsStr::from_bytes(&oname), dir, name, oflags)
                })
            }
        }
    }

    /// Locates `arg`'s parent and final name, checks them, and runs `op` on them.
    fn at_name(
        &self,
        tid: u32,
        arg: &Arg,
        kind: Kind,
        op: impl FnOnce(BorrowedFd<'_>, &OsStr) -> rustix::io::Result<()>,
    ) -> Answer {
        let (dir, name) = match locate(tid, arg, false) {
            Ok(v) => v,
            Err(e) => return Answer::Errno(e),
        };
        match self.check(&dir, &name, kind) {
            Checked::Go => {}
            Checked::Stop(a) => return a,
            Checked::Config(real) => {
                return self.refuse(&real, &name, "a config is made by rename");
            }
        }
        match op(dir.as_fd(), OsStr::from_bytes(&name)) {
            Ok(()) => Answer::Value(0),
            Err(e) => errno_of(e),
        }
    }

    /// The walls for a new entry `name` in `dir` made as `kind`.
    fn check(&self, dir: &OwnedFd, name: &[u8], kind: Kind) -> Checked {
        let Some(real) = real_path(dir) else { return Checked::Go };
        let why = match self.walls.verdict(&real, name, kind) {
            Verdict::Refuse(why) => why,
            Verdict::CheckConfig => return Checked::Config(real),
            Verdict::Allow => {
                let present = |n: &[u8]| {
                    trim_slashes(name).eq_ignore_ascii_case(n)
                        || rustix::fs::statat(dir, OsStr::from_bytes(n), AtFlags::SYMLINK_NOFOLLOW)
                            .is_ok()
                };
                match self.walls.makes_git_dir(&real, name, present) {
                    Some(why) => why,
                    None => return Checked::Go,
                }
            }
        };
        Checked::Stop(self.refuse(&real, name, &why))
    }

    /// EACCES for a new entry `name` in `real`, after the report and the line on stderr that
    /// say why.
    fn refuse(&self, real: &Path, name: &[u8], why: &str) -> Answer {
        let n = self.lines.fetch_add(1, Ordering::AcqRel);
        let shown = real.join(OsStr::from_bytes(trim_slashes(name)));
        let line = if n < MAX_LINES {
            self.reporter.send(&super::Report::Refused { path: shown.clone(), wall: why.into() });
            format!("{REFUSED}{}: {why}\n", shown.display())
        } else if n == MAX_LINES {
            "hands sandbox: more creates were refused; only the first ones are listed\n".into()
        } else {
            String::new()
        };
        if !line.is_empty() {
            let _ = std::io::stderr().lock().write_all(line.as_bytes());
        }
        Answer::Errno(libc::EACCES)
    }

    /// A rename onto the `config` of a repository the run made (git committing its lock
    /// file): the source is read once, checked, and a copy the init writes itself takes the
    /// name — so no descriptor the command kept of the source reaches the config — and is
    /// sealed: never opened for writing again in this run. The next command binds it
    /// read-only like every repository's.
    fn checked_config(
        &self,
        odir: &OwnedFd,
        oname: &[u8],
        (dir, name): (&OwnedFd, &[u8]),
        flags: RenameFlags,
        real: &Path,
    ) -> Answer {
        let read = || -> Result<(Vec<u8>, u32), rustix::io::Errno> {
            let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
            let src = rustix::fs::openat(odir, OsStr::from_bytes(oname), flags, Mode::empty())?;
            let st = rustix::fs::fstat(&src)?;
            let max = hands_roots::gitcfg::MAX_BYTES;
            if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile
                || st.st_size as u64 > max
            {
                return Err(rustix::io::Errno::INVAL);
            }
            let mut text = Vec::new();
            std::io::Read::read_to_end(
                &mut std::io::Read::take(std::fs::File::from(src), max),
                &mut text,
            )
            .map_err(|_| rustix::io::Errno::IO)?;
            Ok((text, st.st_mode & 0o777))
        };
        let (text, mode) = match read() {
            Ok(v) => v,
            Err(e) => return errno_of(e),
        };
        if let Some(why) = hands_roots::gitcfg::refusal_for_new_repository(&text) {
            return self.refuse(real, name, &format!("a repository a command made: {why}"));
        }
        let tmp = format!(".{}.hands-{}", String::from_utf8_lossy(name), self.req.id);
        let create =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let written = rustix::fs::openat(dir, tmp.as_str(), create, Mode::from_raw_mode(mode))
            .and_then(|fd| {
                std::io::Write::write_all(&mut std::fs::File::from(fd), &text)
                    .map_err(|_| rustix::io::Errno::IO)
            });
        if let Err(e) = written {
            let _ = rustix::fs::unlinkat(dir, tmp.as_str(), AtFlags::empty());
            return errno_of(e);
        }
        let to = OsStr::from_bytes(name);
        if let Err(e) = rustix::fs::renameat_with(dir, tmp.as_str(), dir, to, flags) {
            let _ = rustix::fs::unlinkat(dir, tmp.as_str(), AtFlags::empty());
            return errno_of(e);
        }
        self.walls.seal(real.join(to));
        let _ = rustix::fs::unlinkat(odir, OsStr::from_bytes(oname), AtFlags::empty());
        Answer::Value(0)
    }
}

/// What the walls say about a new entry.
enum Checked {
    Go,
    Stop(Answer),
    /// A rename onto a new repository's config: check its content ([`Job::checked_config`]).
    Config(PathBuf),
}

/// Why an open for writing (or a new name) of a config the init wrote is refused.
const SEALED: &str = "the config of a repository a command made, which the sandbox checked: \
                      git changes it only through its lock file";

/// Answers a call: a value, an errno, or a new descriptor of the target's.
fn send(listener: &OwnedFd, id: u64, answer: Answer) {
    match answer {
        Answer::Later => {}
        Answer::Value(v) => respond(listener, id, v, 0),
        Answer::Errno(e) => respond(listener, id, 0, e),
        Answer::Fd(fd, cloexec) => {
            match super::sys::notify::answer_fd(listener, id, &fd, cloexec) {
                Ok(()) | Err(libc::ENOENT) => {}
                Err(errno) => respond(listener, id, 0, errno),
            }
        }
    }
}

fn respond(listener: &OwnedFd, id: u64, val: i64, errno: i32) {
    super::sys::notify::answer(listener, id, val, errno);
}

/// A wall a command hit while it ran, as the daemon lists it in `denied`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    pub what: String,
    pub layer: &'static str,
    pub why: String,
    pub remedy: String,
}

/// At most this many walls per result: the text stays short.
const MAX_HITS: usize = 10;

/// The walls a command hit: what the launcher reported (refused creates, the memory bound),
/// then, as hints, `Permission denied` / `Read-only file system` errors on its stderr that name
/// a path the spec walls off (a protected path, a masked one, a read-only root, a folder
/// outside every root). Only the reports say that a wall refused something; an error line
/// can only point at a path that is a wall in the spec, and a line in the launcher's own
/// format is never read (the command can print one). The spec's `cwd` resolves relative names.
pub fn walls_hit(reports: &[super::Report], stderr: &str, spec: &super::Spec) -> Vec<Hit> {
    let (protected, masked) = (&spec.protected, &spec.masked);
    let roots: Vec<(PathBuf, bool)> =
        spec.roots.iter().map(|r| (r.path.clone(), r.writable)).collect();
    let cwd = &spec.cwd;
    let mut hits: Vec<Hit> = Vec::new();
    let mut add = |h: Hit| {
        if hits.len() < MAX_HITS && !hits.iter().any(|o| o.what == h.what) {
            hits.push(h);
        }
    };
    for report in reports {
        match report {
            super::Report::OutOfMemory { limit_mb } => add(Hit {
                what: "memory".into(),
                layer: "sandbox (bounds)",
                why: format!(
                    "the command's processes used more than tools-shell's limits.memory_mb \
                     ({limit_mb} MiB) and were killed"
                ),
                remedy: "a person can raise tools-shell's limits.memory_mb in daemon.toml".into(),
            }),
            super::Report::Refused { path, wall } => add(Hit {
                what: path.display().to_string(),
                layer: "sandbox (in-run walls)",
                why: wall.clone(),
                remedy: "a person can create it on the host; a command may make repositories \
                         outside the roots (/tmp), or in them when a person sets tools-shell's \
                         config.new_repositories = \"allow\""
                    .into(),
            }),
            super::Report::SetupFailed { .. } => {}
        }
    }
    for line in stderr.lines() {
        if line.starts_with(LAUNCHER_LINE) {
            continue;
        }
        // A rename over or a removal of a read-only bind (a protected file) fails busy.
        let denied = line.contains("Permission denied")
            || line.contains("Operation not permitted")
            || line.contains("Device or resource busy");
        let read_only = line.contains("Read-only file system");
        if !denied && !read_only {
            continue;
        }
        for name in named_paths(line) {
            let p = lexical(&cwd.join(name));
            let under = |w: &PathBuf| p == *w || p.starts_with(w);
            let wall = if masked.iter().any(under) {
                Some((
                    "a denied or secret path, masked in the sandbox",
                    "a person can remove it from sandbox.deny or sandbox.secret_patterns, or \
                     read it on the host",
                ))
            } else if protected.iter().any(under) {
                Some((
                    "a protected path, read-only to commands",
                    "a person can change it on the host (sandbox-profiles/protected.txt, \
                     sandbox.protected_extra)",
                ))
            } else {
                match roots
                    .iter()
                    .filter(|(r, _)| p.starts_with(r))
                    .max_by_key(|(r, _)| r.components().count())
                {
                    Some((_, false)) => Some((
                        "a read-only root",
                        "a person can make the root writable in daemon.toml (write = true)",
                    )),
                    Some((_, true)) => None,
                    None if read_only && !p.starts_with("/tmp") && !p.starts_with("/dev") => {
                        Some((
                            "outside the roots: the sandbox's system folders are read-only",
                            "write inside a root or /tmp; a person can add a root in daemon.toml",
                        ))
                    }
                    None => None,
                }
            };
            if let Some((why, remedy)) = wall {
                add(Hit {
                    what: p.display().to_string(),
                    layer: "sandbox (filesystem)",
                    why: why.into(),
                    remedy: remedy.into(),
                });
            }
        }
    }
    hits
}

/// Paths an error line names: quoted ones (`'…'`, `"…"`, `‘…’`), and `word:` fields before the
/// error text (`bash: .envrc: Permission denied`).
fn named_paths(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for (open, close) in [('\'', '\''), ('"', '"'), ('‘', '’')] {
        let mut rest = line;
        while let Some(i) = rest.find(open) {
            let after = &rest[i + open.len_utf8()..];
            let Some(j) = after.find(close) else { break };
            out.push(&after[..j]);
            rest = &after[j + close.len_utf8()..];
        }
    }
    for field in line.split(": ").map(str::trim) {
        let field = field.strip_prefix("cannot create ").unwrap_or(field);
        if field.contains('/') || field.starts_with('.') {
            out.push(field);
        }
    }
    out.retain(|p| !p.is_empty() && !p.contains(' ') && p.len() < 4096);
    out
}

/// `..` and `.` taken out by name (the daemon cannot resolve the sandbox's view of links).
fn lexical(p: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in p.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::Normal(n) => out.push(n),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod hits {
    use super::*;

    #[test]
    fn refused_creates_come_from_reports_and_wall_errors_from_stderr() {
        let root = |p: &str, writable| super::super::Root { path: p.into(), writable };
        let spec = super::super::Spec::builder(super::super::Confinement {
            roots: vec![root("/w", true), root("/ro", false)],
            protected: vec!["/w/.git/config".into()],
            protected_rules: vec![],
            masked: vec!["/w/.env".into()],
            system: vec![],
            home: "/h".into(),
        })
        .build(vec!["true".into()], "/w".into());
        // A line in the launcher's format on stderr is the command's own: never a hit, even
        // one that also says "Permission denied" about a walled path.
        let err = "hands sandbox: refused creating /w/forged/.git: a `.git` folder\n\
                   hands sandbox: refused creating /w/.env: Permission denied\n\
                   cat: .env: Permission denied\n\
                   bash: line 1: /w/.git/config: Read-only file system\n\
                   touch: cannot touch '/ro/x': Read-only file system\n\
                   touch: cannot touch '/w/ok': Permission denied\n\
                   sh: 1: cannot create /usr/x: Read-only file system\n";
        let reports = [
            super::super::Report::Refused {
                path: "/w/sub/.git".into(),
                wall: "a `.git` folder".into(),
            },
            super::super::Report::OutOfMemory { limit_mb: 64 },
        ];
        let hits = walls_hit(&reports, err, &spec);
        let what: Vec<&str> = hits.iter().map(|h| h.what.as_str()).collect();
        assert_eq!(what, ["/w/sub/.git", "memory", "/w/.env", "/w/.git/config", "/ro/x", "/usr/x"]);
        assert_eq!(hits[0].layer, "sandbox (in-run walls)");
        assert!(hits[1].why.contains("64 MiB"), "{:?}", hits[1]);
        assert!(
            walls_hit(&[], "hands sandbox: refused creating /w/x: a `.git` folder", &spec)
                .is_empty()
        );
    }
}
