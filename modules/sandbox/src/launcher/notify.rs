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
//! A refused call fails with EACCES and the init writes one `hands sandbox: refused creating
//! PATH: WHY` line on the command's stderr, which the daemon lists in the result's `denied`.

use anyhow::{Context, Result};
use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags, ResolveFlags};
use std::ffi::OsStr;
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The start of the line the init writes for each refused create; the daemon parses it.
pub const REFUSED: &str = "hands sandbox: refused creating ";

/// How the launcher's last line on the command's stderr begins when the memory bound's cgroup
/// killed the command's processes for lack of memory.
pub const OUT_OF_MEMORY: &str = "hands sandbox: the command's processes ran out of memory";

/// At most this many refusal lines per command (a loop of refused creates must not flood the
/// output); the rest are counted in one last line.
const MAX_LINES: usize = 20;

/// Calls handled at once on their own threads (an open of a FIFO blocks until its other end
/// opens); beyond this the init handles them one by one.
const MAX_THREADS: usize = 32;

/// Longest path the kernel accepts (with its NUL).
const PATH_MAX: usize = 4096;

/// Symbolic links followed at the end of an `O_CREAT` path, as the kernel's own limit.
const MAX_LINKS: usize = 40;

/// What may not be created, from the spec.
#[derive(Debug, Clone)]
pub struct Walls {
    /// Every root: (path, writable). A read-only root's own binds already refuse creates.
    roots: Vec<(PathBuf, bool)>,
    /// The protected rules, split into components (`*` is any one component).
    rules: Vec<Vec<Vec<u8>>>,
    /// With `new_repositories = "allow"`: the `.git` folders this run made (a name that did
    /// not exist when it was asked for), inside which everything is the new repository's own.
    /// None: a new `.git` is refused.
    made: Option<Arc<std::sync::Mutex<Vec<PathBuf>>>>,
}

impl Walls {
    pub fn new(roots: &[super::Root], rules: &[String], new_repositories: bool) -> Walls {
        let rules = rules
            .iter()
            .map(|r| {
                r.trim_matches('/')
                    .split('/')
                    .filter(|c| !c.is_empty())
                    .map(|c| c.as_bytes().to_ascii_lowercase())
                    .collect::<Vec<_>>()
            })
            .filter(|r| !r.is_empty())
            .collect();
        let roots = roots.iter().map(|r| (r.path.clone(), r.writable)).collect();
        let made = new_repositories.then(Default::default);
        Walls { roots, rules, made }
    }

    /// Why a new entry `name` in the folder `parent` is refused because with it the folder
    /// would be a git dir under another name (`HEAD`, `refs`, and `objects` or `commondir`, as
    /// git's discovery checks; `config` arms one): git run in that folder on the host would use
    /// its config. Folders inside a `.git` (which cannot be made in a root) are git's own.
    /// `present` says whether an entry exists there (the new one counts).
    pub fn makes_git_dir(
        &self,
        parent: &Path,
        name: &[u8],
        present: impl Fn(&[u8]) -> bool,
    ) -> Option<String> {
        let name = trim_slashes(name);
        if self.made.is_some() {
            // New repositories are the person's choice; a bare one is one of them.
            return None;
        }
        let parts: [&[u8]; 5] = [b"HEAD", b"refs", b"objects", b"commondir", b"config"];
        if !parts.iter().any(|p| p.eq_ignore_ascii_case(name)) {
            return None;
        }
        let (root, writable) = self
            .roots
            .iter()
            .filter(|(r, _)| parent.starts_with(r))
            .max_by_key(|(r, _)| r.components().count())?;
        let inside_git = parent
            .strip_prefix(root)
            .ok()?
            .components()
            .any(|c| c.as_os_str().as_bytes().eq_ignore_ascii_case(b".git"));
        if !writable || inside_git {
            return None;
        }
        let git_dir =
            present(b"HEAD") && present(b"refs") && (present(b"objects") || present(b"commondir"));
        git_dir.then(|| {
            "it would make this folder a git dir (HEAD, refs, objects) inside a root: git run \
             there on the host would use its config"
                .to_string()
        })
    }

    /// Why a new entry `name` in the folder whose real path is `parent` is refused; `carries`
    /// is set for an entry that brings content or a target along (a rename, a hard link, a
    /// symbolic link), which is refused also at a name that leads to a protected path.
    pub fn refusal(&self, parent: &Path, name: &[u8], carries: bool) -> Option<String> {
        let name = trim_slashes(name);
        if name.is_empty() || name == b"." || name == b".." || name.contains(&b'/') {
            return None;
        }
        // The innermost root holding the folder decides; none, or a read-only one: no check
        // (outside the roots are the sandbox's own /tmp and home, and read-only binds).
        let (root, writable) = self
            .roots
            .iter()
            .filter(|(r, _)| parent.starts_with(r))
            .max_by_key(|(r, _)| r.components().count())?;
        if !writable {
            return None;
        }
        let mut rel: Vec<Vec<u8>> = parent
            .strip_prefix(root)
            .ok()?
            .components()
            .map(|c| c.as_os_str().as_bytes().to_ascii_lowercase())
            .collect();
        rel.push(name.to_ascii_lowercase());
        if let Some(made) = &self.made {
            let full = parent.join(OsStr::from_bytes(name));
            let mut made = hands_roots::lock(made);
            if rel.last().is_some_and(|n| n == b".git") {
                // Only a `.git` that is not there yet becomes the run's own: an existing
                // repository's git dir keeps its walls.
                if std::fs::symlink_metadata(&full).is_err() {
                    made.push(full);
                }
                return None;
            }
            if made.iter().any(|m| full.starts_with(m)) {
                return None;
            }
        }
        if rel.last().is_some_and(|n| n == b".git") {
            return Some(
                "a `.git` folder or file inside a root: a git on the host (the person's, an \
                 editor's) would run what its config names"
                    .into(),
            );
        }
        let matches = |rule: &[Vec<u8>], comps: &[Vec<u8>]| {
            rule.len() == comps.len() && rule.iter().zip(comps).all(|(r, c)| r == b"*" || r == c)
        };
        for rule in &self.rules {
            // The rule anywhere in the path: a protected folder covers what is inside it.
            if rel.windows(rule.len()).any(|w| matches(rule, w)) {
                return Some(format!(
                    "a protected path (rule `{}` of sandbox-profiles/protected.txt): programs \
                     on the host read it",
                    shown_rule(rule)
                ));
            }
            // A folder renamed or linked to a name on the way to a protected path would bring
            // that path along.
            if carries {
                for k in 1..rule.len() {
                    if rel.len() >= k && matches(&rule[..k], &rel[rel.len() - k..]) {
                        return Some(format!(
                            "a name on the way to a protected path (rule `{}`): what it \
                             brings along would be read by programs on the host",
                            shown_rule(rule)
                        ));
                    }
                }
            }
        }
        None
    }
}

fn shown_rule(rule: &[Vec<u8>]) -> String {
    rule.iter().map(|c| String::from_utf8_lossy(c).into_owned()).collect::<Vec<_>>().join("/")
}

fn trim_slashes(name: &[u8]) -> &[u8] {
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
    pub fn install(&self) -> Result<()> {
        // A change of uid (`run_as`) made this process undumpable, which would keep the init
        // (same uid, no capabilities) from taking the descriptor; execve sets it again anyway.
        super::sys::notify::set_dumpable()?;
        let listener = install_filter()?;
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

/// The filter, as classic BPF: foreign architectures pass (the main filter kills them).
fn program() -> Vec<libc::sock_filter> {
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
        p.push(ins(JSET, 0, 1, libc::O_CREAT as u32));
        p.push(ins(RET, 0, 0, notify));
        p.push(ins(RET, 0, 0, allow));
    }
    p.push(ins(RET, 0, 0, allow));
    p
}

/// Installs the filter with a new listener (close-on-exec). With the kernel's
/// `WAIT_KILLABLE_RECV` (5.19+), a signal to the command while the init works on its call
/// does not restart the call behind the init's back.
fn install_filter() -> Result<OwnedFd> {
    let prog = program();
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
pub fn serve(listener: OwnedFd, walls: Walls) {
    // The umask is per process; `CLONE_FS` makes this thread's its own, set per call.
    if super::sys::unshare(libc::CLONE_FS).is_err() {
        return;
    }
    let listener = Arc::new(listener);
    let walls = Arc::new(walls);
    let busy = Arc::new(AtomicUsize::new(0));
    let lines = Arc::new(AtomicUsize::new(0));
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
                if let Some(a) = self.check(&dir, &name, false) {
                    return a;
                }
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
            Call::Mkdir { mode, .. } => self.at_name(tid, &last, false, |dir, name| {
                rustix::fs::mkdirat(dir, name, Mode::from_raw_mode(mode))
            }),
            Call::Mknod { mode, dev, .. } => self.at_name(tid, &last, false, |dir, name| {
                let kind = FileType::from_raw_mode(mode);
                let kind = if mode & libc::S_IFMT == 0 { FileType::RegularFile } else { kind };
                rustix::fs::mknodat(dir, name, kind, Mode::from_raw_mode(mode & 0o7777), dev)
            }),
            Call::Symlink { .. } => {
                let Some(target) = args.pop() else { return Answer::Errno(libc::EINVAL) };
                self.at_name(tid, &last, true, |dir, name| {
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
                if swaps && let Some(a) = self.check(&odir, &oname, true) {
                    return a;
                }
                let flags = RenameFlags::from_bits_retain(flags);
                self.at_name(tid, &last, true, |dir, name| {
                    rustix::fs::renameat_with(&odir, OsStr::from_bytes(&oname), dir, name, flags)
                })
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
                self.at_name(tid, &last, true, |dir, name| {
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
        carries: bool,
        op: impl FnOnce(BorrowedFd<'_>, &OsStr) -> rustix::io::Result<()>,
    ) -> Answer {
        let (dir, name) = match locate(tid, arg, false) {
            Ok(v) => v,
            Err(e) => return Answer::Errno(e),
        };
        if let Some(a) = self.check(&dir, &name, carries) {
            return a;
        }
        match op(dir.as_fd(), OsStr::from_bytes(&name)) {
            Ok(()) => Answer::Value(0),
            Err(e) => errno_of(e),
        }
    }

    /// The walls for a new entry `name` in `dir`: None when it may be made; else the EACCES
    /// answer, after the line on stderr.
    fn check(&self, dir: &OwnedFd, name: &[u8], carries: bool) -> Option<Answer> {
        let real = real_path(dir)?;
        let why = self.walls.refusal(&real, name, carries).or_else(|| {
            let present = |n: &[u8]| {
                trim_slashes(name).eq_ignore_ascii_case(n)
                    || rustix::fs::statat(dir, OsStr::from_bytes(n), AtFlags::SYMLINK_NOFOLLOW)
                        .is_ok()
            };
            self.walls.makes_git_dir(&real, name, present)
        })?;
        let n = self.lines.fetch_add(1, Ordering::AcqRel);
        let shown = real.join(OsStr::from_bytes(trim_slashes(name)));
        let line = if n < MAX_LINES {
            format!("{REFUSED}{}: {why}\n", shown.display())
        } else if n == MAX_LINES {
            "hands sandbox: more creates were refused; only the first ones are listed\n".into()
        } else {
            String::new()
        };
        if !line.is_empty() {
            let _ = std::io::stderr().lock().write_all(line.as_bytes());
        }
        Some(Answer::Errno(libc::EACCES))
    }
}

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

/// A NUL-terminated string at `addr` in the target's memory (read page by page, so a string
/// that ends just before an unmapped page is still read).
fn read_path(mem: &std::fs::File, addr: u64) -> Result<Vec<u8>, i32> {
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

fn read_umask(tid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("Umask:"))?;
    u32::from_str_radix(line.trim(), 8).ok()
}

fn open_dir(p: &str) -> Result<OwnedFd, i32> {
    rustix::fs::open(p, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
        .map_err(|e| e.raw_os_error())
}

/// Where a path argument starts: `/` for an absolute one, else the target's working folder or
/// the descriptor it named (through its /proc entry: the target's, not ours).
fn base_dir(tid: u32, dir: i32, path: &[u8]) -> Result<OwnedFd, i32> {
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
fn real_path(fd: &OwnedFd) -> Option<PathBuf> {
    base_path_of(fd).map(|b| PathBuf::from(OsStr::from_bytes(&b)))
}

fn base_path_of(fd: &OwnedFd) -> Option<Vec<u8>> {
    let link = format!("/proc/self/fd/{}", fd.as_raw_fd());
    rustix::fs::readlink(link.as_str(), Vec::new()).ok().map(|c| c.into_bytes())
}

/// `/proc/self` and `/proc/thread-self` at the start of a path name the target, not us.
fn as_target(path: &[u8], tid: u32) -> Vec<u8> {
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
fn locate(tid: u32, arg: &Arg, follow: bool) -> Result<(OwnedFd, Vec<u8>), i32> {
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

    fn walls() -> Walls {
        let roots = vec![
            super::super::Root { path: "/w".into(), writable: true },
            super::super::Root { path: "/w/ro".into(), writable: false },
        ];
        let rules: Vec<String> =
            [".git/hooks", ".git/modules/*/config", ".envrc", ".gemini", ".kiro/settings/mcp.json"]
                .iter()
                .map(|s| s.to_string())
                .collect();
        Walls::new(&roots, &rules, false)
    }

    #[test]
    fn new_repositories_allowed_open_only_the_new_git_dir() {
        let base = std::env::temp_dir().join(format!("hands-walls-{}", std::process::id()));
        std::fs::create_dir_all(base.join(".git")).unwrap();
        let roots = vec![super::super::Root { path: base.clone(), writable: true }];
        let rules = vec![".git/modules/*/config".to_string(), ".envrc".to_string()];
        let w = Walls::new(&roots, &rules, true);
        // The existing repository's `.git` may be asked for (it fails with EEXIST) but stays
        // walled; a new one is the run's own.
        assert!(w.refusal(&base, b".git", false).is_none());
        assert!(w.refusal(&base.join(".git/modules/m"), b"config", false).is_some());
        assert!(w.refusal(&base.join("new"), b".git", false).is_none());
        assert!(w.refusal(&base.join("new/.git/modules/m"), b"config", false).is_none());
        assert!(w.refusal(&base.join("new"), b".envrc", false).is_some());
        assert!(
            Walls::new(&roots, &rules, false).refusal(&base.join("n2"), b".git", false).is_some()
        );
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn names_refused_under_writable_roots_only() {
        let w = walls();
        assert!(w.refusal(Path::new("/w/sub"), b".git", false).is_some());
        assert!(w.refusal(Path::new("/w"), b".GIT/", false).is_some());
        assert!(w.refusal(Path::new("/w/a"), b".envrc", false).is_some());
        assert!(w.refusal(Path::new("/w/.git/modules/x"), b"config", false).is_some());
        assert!(w.refusal(Path::new("/w/.gemini"), b"settings.json", false).is_some());
        assert!(w.refusal(Path::new("/w/.git"), b"index.lock", false).is_none());
        assert!(w.refusal(Path::new("/w/ro"), b".git", false).is_none());
        assert!(w.refusal(Path::new("/tmp"), b".git", false).is_none());
        assert!(w.refusal(Path::new("/w/src"), b"main.rs", false).is_none());
        assert!(w.refusal(Path::new("/wx"), b".git", false).is_none());
    }

    #[test]
    fn the_last_piece_of_a_git_dir_is_refused_outside_dot_git() {
        let w = walls();
        let has = |names: &'static [&'static str]| {
            move |n: &[u8]| names.iter().any(|x| x.as_bytes() == n)
        };
        let all = has(&["HEAD", "refs", "objects"]);
        assert!(w.makes_git_dir(Path::new("/w/evil"), b"config", all).is_some());
        assert!(
            w.makes_git_dir(Path::new("/w/evil"), b"HEAD", has(&["HEAD", "refs", "objects"]))
                .is_some()
        );
        assert!(w.makes_git_dir(Path::new("/w/evil"), b"HEAD", has(&["HEAD", "refs"])).is_none());
        assert!(w.makes_git_dir(Path::new("/w/.git"), b"HEAD", all).is_none());
        assert!(w.makes_git_dir(Path::new("/w/.git/modules/m"), b"HEAD", all).is_none());
        assert!(w.makes_git_dir(Path::new("/tmp/x"), b"HEAD", all).is_none());
        assert!(w.makes_git_dir(Path::new("/w/evil"), b"notes", all).is_none());
    }

    #[test]
    fn carried_names_refused_on_the_way_to_a_rule() {
        let w = walls();
        assert!(w.refusal(Path::new("/w"), b".kiro", true).is_some());
        assert!(w.refusal(Path::new("/w/.kiro"), b"settings", true).is_some());
        assert!(w.refusal(Path::new("/w"), b".kiro", false).is_none());
        assert!(w.refusal(Path::new("/w"), b"kiro", true).is_none());
    }

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

/// The walls a command hit, read from its stderr: the init's refused-create lines, and
/// `Permission denied` / `Read-only file system` errors that name a path the spec walls off
/// (a protected path, a masked one, a read-only root, a folder outside every root). The
/// spec's `cwd` resolves relative names.
pub fn walls_hit(stderr: &str, spec: &super::Spec) -> Vec<Hit> {
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
    for line in stderr.lines() {
        if line.starts_with(OUT_OF_MEMORY) {
            add(Hit {
                what: "memory".into(),
                layer: "sandbox (bounds)",
                why: format!(
                    "the command's processes used more than tools-shell's limits.memory_mb ({} \
                     MiB) and were killed",
                    spec.limits.memory_mb
                ),
                remedy: "a person can raise tools-shell's limits.memory_mb in daemon.toml".into(),
            });
            continue;
        }
        if let Some(rest) = line.strip_prefix(REFUSED) {
            if let Some((what, why)) = rest.split_once(": ") {
                add(Hit {
                    what: what.to_string(),
                    layer: "sandbox (in-run walls)",
                    why: why.to_string(),
                    remedy: "a person can create it on the host; a command may make \
                             repositories outside the roots (/tmp), or in them when a person \
                             sets tools-shell's config.new_repositories = \"allow\""
                        .into(),
                });
            }
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
    fn refused_creates_and_wall_errors_are_read_from_stderr() {
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
        let err = "hands sandbox: refused creating /w/sub/.git: a `.git` folder\n\
                   cat: .env: Permission denied\n\
                   bash: line 1: /w/.git/config: Read-only file system\n\
                   touch: cannot touch '/ro/x': Read-only file system\n\
                   touch: cannot touch '/w/ok': Permission denied\n\
                   sh: 1: cannot create /usr/x: Read-only file system\n";
        let hits = walls_hit(err, &spec);
        let what: Vec<&str> = hits.iter().map(|h| h.what.as_str()).collect();
        assert_eq!(what, ["/w/sub/.git", "/w/.env", "/w/.git/config", "/ro/x", "/usr/x"]);
    }
}
