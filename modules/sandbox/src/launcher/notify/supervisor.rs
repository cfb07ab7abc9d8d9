//! The init's side of the in-run walls: it answers each notified call of the command itself,
//! on a descriptor of the checked parent folder with its own copy of the name, never letting
//! the call continue (see `notify.rs`). Each refusal goes on the launcher's report channel.

use super::target::{
    Arg, Base, Bases, Place, locate, locate_both, read_path, read_umask, real_path, root, there,
};
use super::{Kind, REFUSED, Verdict, Walls, trim_slashes};

mod answer;
mod bind;
mod crowd;
mod decoded;
mod open;
use crate::launcher::Report;
use answer::{Wake, send};
use decoded::{Call, decode};
use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags};
use std::ffi::OsStr;
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Refusals reported and written: at most this many at once (a loop of refused creates must
/// not flood the output or the channel), and one more per [`REFILL`] after that, up to this
/// many again — so a tmux session that lives for hours still lists a refusal made long after
/// its first burst. What goes unlisted is said in one line per burst.
const MAX_LINES: u32 = 20;

/// How often one more refusal may be listed once the first [`MAX_LINES`] are spent.
const REFILL: std::time::Duration = std::time::Duration::from_secs(1);

/// The refusals that may still be listed now.
struct Budget {
    left: u32,
    since: std::time::Instant,
    /// The "more were refused" line was written for the current burst.
    said: bool,
}

impl Budget {
    fn new() -> Budget {
        Budget { left: MAX_LINES, since: std::time::Instant::now(), said: false }
    }

    /// Whether this refusal is listed.
    fn take(&mut self) -> Listing {
        let earned = (self.since.elapsed().as_millis() / REFILL.as_millis()) as u32;
        if earned > 0 {
            self.left = (self.left + earned).min(MAX_LINES);
            self.since += REFILL * earned;
        }
        if self.left > 0 {
            self.left -= 1;
            self.said = false;
            Listing::Listed
        } else if !self.said {
            self.said = true;
            Listing::FirstUnlisted
        } else {
            Listing::Unlisted
        }
    }
}

/// What becomes of one refusal in the report and on stderr.
enum Listing {
    Listed,
    /// The first of a burst past the budget: one line says more were refused.
    FirstUnlisted,
    Unlisted,
}

/// Calls handled at once on their own threads (an open of a FIFO blocks until its other end
/// opens); beyond this the init handles them one by one.
const MAX_THREADS: usize = 32;

/// The init's side: answers the command's notified calls until the listener closes (every
/// process of the command has ended). Runs on a thread of its own.
pub fn serve(listener: OwnedFd, walls: Walls, reporter: crate::launcher::report::Reporter) {
    // The umask is per process; `CLONE_FS` makes this thread's its own, set per call.
    if crate::sys::unshare(libc::CLONE_FS).is_err() {
        return;
    }
    // Whether an answer wakes the caller on this thread's CPU (Linux 6.6+).
    let same_cpu = crate::sys::seccomp_notify::sync_wake_up(&listener);
    let umask = Arc::new(Umask::now());
    let listener = Arc::new(listener);
    let walls = Arc::new(walls);
    let busy = Arc::new(AtomicUsize::new(0));
    let lines = Arc::new(std::sync::Mutex::new(Budget::new()));
    let reporter = Arc::new(reporter);
    // The caller the last answer woke on this thread's CPU, which has run nothing else since
    // when its next call is already waiting (a program creating file after file).
    let mut here_last = None;
    let mut crowd = crowd::Crowd::default();
    loop {
        let (req, woken) = match crate::sys::seccomp_notify::receive(&listener) {
            Ok(got) => got,
            // Interrupted, or the target died before we read it: next. Once nothing uses the
            // filter, every receive fails at once: stop rather than spin until the init exits
            // (found by a profile of the launcher: a core busy for milliseconds per command).
            Err(libc::ENOENT) if crate::sys::seccomp_notify::orphaned(&listener) => return,
            Err(libc::EINTR | libc::ENOENT) => continue,
            Err(_) => return,
        };
        if req.data.nr as libc::c_long == libc::SYS_umask {
            umask.changed.store(true, Ordering::Release);
            crate::sys::seccomp_notify::let_continue(&listener, req.id);
            continue;
        }
        let alone = crowd.alone(req.pid);
        let wake = match (same_cpu, alone) {
            (false, _) => Wake::Plain,
            (true, true) => Wake::Here,
            (true, false) => Wake::Anywhere,
        };
        let job = Job {
            umask: umask.clone(),
            listener: listener.clone(),
            walls: walls.clone(),
            lines: lines.clone(),
            busy: busy.clone(),
            reporter: reporter.clone(),
            req,
            here: alone && (woken || here_last == Some(req.pid)),
            wake,
        };
        if !job.here {
            crate::sys::seccomp_notify::unpin();
        }
        here_last = job.run().then_some(req.pid);
    }
}

/// The command's umask without reading it: every process of the command starts with the
/// init's (a fork copies it, an exec keeps it), and only `umask(2)` changes it, which the
/// filter sends here. Until a process of the command calls it, a call that makes something
/// with a mode uses `initial`; from the first `umask` call on (noted before the call runs, so
/// no read can be taken for current after it) each such call reads its caller's from
/// `/proc/TID/status`, which makes the kernel render the whole file (a fifth of a create's
/// cost through the walls, measured). None of the real-work bench's programs (cp, python,
/// tar, git, sha256sum) calls it.
struct Umask {
    initial: u32,
    changed: AtomicBool,
}

impl Umask {
    /// The umask of this thread, which has just unshared `CLONE_FS` from the init: the init's,
    /// which the command was forked with.
    fn now() -> Umask {
        let initial = rustix::process::umask(Mode::empty());
        rustix::process::umask(initial);
        Umask { initial: initial.bits(), changed: AtomicBool::new(false) }
    }

    fn of(&self, tid: u32) -> Option<u32> {
        if self.changed.load(Ordering::Acquire) { read_umask(tid) } else { Some(self.initial) }
    }
}

/// Sets this thread's umask, which is its own (it unshared `CLONE_FS`), unless it is `mask`
/// already: a command's calls mostly come with one umask, and the call is skipped.
pub(super) fn set_umask(mask: u32) {
    thread_local! {
        static SET: std::cell::Cell<Option<u32>> = const { std::cell::Cell::new(None) };
    }
    SET.with(|set| {
        if set.get() != Some(mask) {
            rustix::process::umask(Mode::from_raw_mode(mask));
            set.set(Some(mask));
        }
    });
}

/// One notified call.
#[derive(Clone)]
struct Job {
    umask: Arc<Umask>,
    listener: Arc<OwnedFd>,
    walls: Arc<Walls>,
    lines: Arc<std::sync::Mutex<Budget>>,
    /// Opens of FIFOs running on threads of their own.
    busy: Arc<AtomicUsize>,
    /// The launcher's report channel, where each refusal goes.
    reporter: Arc<crate::launcher::report::Reporter>,
    req: libc::seccomp_notif,
    /// The caller is on this thread's CPU (its call woke this thread there, or the last answer
    /// woke it here): a descriptor's hand-over may hold both there
    /// ([`crate::sys::seccomp_notify::answer_fd`]).
    here: bool,
    /// Where an answer wakes the caller.
    wake: Wake,
}

/// A call read from the target: the call, the caller's umask when it makes something with a
/// mode, and its path arguments.
type Prepared = (Call, Option<u32>, Vec<Arg>);

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

impl Job {
    /// Whether the answer woke the caller on this thread's CPU.
    fn run(&self) -> bool {
        let tid = self.req.pid;
        let answer = match self.prepare(tid) {
            Ok(Some((call, umask, args))) => self.perform(tid, call, umask, args),
            Ok(None) => return false,
            Err(errno) => Answer::Errno(errno),
        };
        let hold = self.here.then_some(self.req.pid);
        send(&self.listener, self.req.id, answer, hold, self.wake)
    }

    /// Reads everything of the target the call needs (its paths, umask, the folders its
    /// descriptors name), then checks the call is still waiting: from then on nothing is read
    /// from the target again. `Ok(None)`: the call is gone (the target died).
    fn prepare(&self, tid: u32) -> Result<Option<Prepared>, i32> {
        let d = &self.req.data;
        let Some(call) = decode(d.nr as libc::c_long, d.args) else {
            return Err(libc::ENOSYS);
        };
        // Only what is made with a mode needs the caller's umask (a rename, a link or a
        // symbolic link does not).
        let moded = match &call {
            Call::Open { flags, .. } => flags & libc::O_CREAT != 0,
            Call::Mkdir { .. } | Call::Mknod { .. } | Call::Bind { .. } => true,
            Call::Rename { .. } | Call::Link { .. } | Call::Symlink { .. } => false,
            Call::Truncate { .. } => false,
        };
        let umask = if moded { Some(self.umask.of(tid).ok_or(libc::EPERM)?) } else { None };
        let mut bases = Bases::default();
        let mut arg = |dir: i32, addr: u64, empty_ok: bool| -> Result<Arg, i32> {
            let path = read_path(tid, addr)?;
            if path.is_empty() && !empty_ok {
                return Err(libc::ENOENT);
            }
            Ok(Arg { base: bases.of(tid, dir, &path)?, path })
        };
        let args = match &call {
            Call::Open { dir, path, .. }
            | Call::Mkdir { dir, path, .. }
            | Call::Mknod { dir, path, .. } => vec![arg(*dir, *path, false)?],
            Call::Truncate { path, .. } => vec![arg(libc::AT_FDCWD, *path, false)?],
            Call::Rename { odir, old, ndir, new, .. } => {
                vec![arg(*odir, *old, false)?, arg(*ndir, *new, false)?]
            }
            Call::Link { odir, old, ndir, new, flags } => {
                let empty = flags & libc::AT_EMPTY_PATH != 0;
                vec![arg(*odir, *old, empty)?, arg(*ndir, *new, false)?]
            }
            Call::Symlink { target, ndir, new } => {
                let t = read_path(tid, *target)?;
                if t.is_empty() {
                    return Err(libc::ENOENT);
                }
                vec![Arg { base: Base::Root, path: t }, arg(*ndir, *new, false)?]
            }
            Call::Bind { fd, addr, len } => bind::read_address(tid, *fd, *addr, *len)?,
        };
        if !crate::sys::seccomp_notify::still_valid(&self.listener, self.req.id) {
            return Ok(None);
        }
        Ok(Some((call, umask, args)))
    }

    /// Checks and performs the call on the descriptors and copies `prepare` made.
    fn perform(&self, tid: u32, call: Call, umask: Option<u32>, mut args: Vec<Arg>) -> Answer {
        if let Some(umask) = umask {
            set_umask(umask);
        }
        let Some(last) = args.pop() else { return Answer::Errno(libc::EINVAL) };
        match call {
            Call::Open { flags, mode, .. } => self.open(tid, &last, flags, mode, umask),
            Call::Truncate { length, .. } => self.truncate(tid, &last, length),
            Call::Bind { fd, .. } => {
                args.push(last);
                self.bind(tid, fd, args)
            }
            Call::Mkdir { mode, .. } => match locate(tid, &last, false) {
                // A name that is there: the kernel's answer is EEXIST whatever the rules say
                // (it looks before it asks for write access), and nothing is made to check.
                Ok(place) if place.there() => Answer::Errno(libc::EEXIST),
                Ok(place) => self.at_place(place, Kind::Dir, |dir, name| {
                    rustix::fs::mkdirat(dir, name, Mode::from_raw_mode(mode))
                }),
                Err(e) => Answer::Errno(e),
            },
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
                let (Place { dir: odir, name: oname, real: oreal, .. }, new) =
                    match locate_both(tid, &old, &last) {
                        Ok(both) => both,
                        Err(e) => return Answer::Errno(e),
                    };
                // An exchange (or a whiteout) gives the old name a new entry too.
                let swaps = flags & (libc::RENAME_EXCHANGE | libc::RENAME_WHITEOUT) != 0;
                let _held_old = match swaps.then(|| self.check(&odir, oreal, &oname, Kind::Rename))
                {
                    None => None,
                    Some(Checked::Go(held)) => held,
                    Some(Checked::Stop(a)) => return a,
                    Some(Checked::Config(real)) => {
                        return self.refuse(&real, &oname, "a config is not exchanged");
                    }
                };
                let Place { dir, name, real, .. } = new;
                let _held = match self.check(&dir, real, &name, Kind::Rename) {
                    Checked::Go(held) => held,
                    Checked::Stop(a) => return a,
                    // `mv` asks not to replace first, then renames plainly.
                    Checked::Config(real) if flags & !libc::RENAME_NOREPLACE == 0 => {
                        let flags = RenameFlags::from_bits_retain(flags);
                        return self.checked_config(&odir, &oname, (&dir, &name), flags, &real);
                    }
                    Checked::Config(real) => {
                        return self.refuse(&real, &name, "a config is renamed in plainly");
                    }
                };
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
                let old_base = match old.base.fd() {
                    Ok(fd) => fd,
                    Err(e) => return Answer::Errno(e),
                };
                let located;
                let new;
                let mut oreal = None;
                let (odir, oname, oflags) = if old.path.is_empty() {
                    new = None;
                    match root() {
                        // Our own descriptor of the same file, followed as a magic link (which
                        // also links an O_TMPFILE file).
                        Ok(root) => {
                            let p = format!("/proc/self/fd/{}", old_base.as_raw_fd()).into_bytes();
                            (root, p, AtFlags::SYMLINK_FOLLOW)
                        }
                        Err(e) => return Answer::Errno(e),
                    }
                } else {
                    match locate_both(tid, &old, &last) {
                        Ok((p, n)) => {
                            located = p.dir;
                            oreal = p.real;
                            new = Some(n);
                            let flags =
                                if follow { AtFlags::SYMLINK_FOLLOW } else { AtFlags::empty() };
                            (located.as_fd(), p.name, flags)
                        }
                        Err(e) => return Answer::Errno(e),
                    }
                };
                // A protected file, or git's lock file on its way to a protected name, gets no
                // second name that could be opened for writing (decision 0079): found by its
                // real path, as an open for writing is. The entry itself (not followed) by a
                // plain name: that path is its folder's, read when located, and the name, as its
                // descriptor's /proc link would say; refused only when it is there.
                let named = oreal.filter(|_| !follow && plain(&oname));
                let computed = named.is_some();
                let source = if old.path.is_empty() {
                    Some(real_path(old_base))
                } else if let Some(folder) = named {
                    Some(Some(folder.join(OsStr::from_bytes(&oname))))
                } else {
                    let flags = OFlags::PATH | OFlags::CLOEXEC;
                    let flags = if follow { flags } else { flags | OFlags::NOFOLLOW };
                    // Not there: the link itself fails and says why.
                    rustix::fs::openat(odir, OsStr::from_bytes(&oname), flags, Mode::empty())
                        .ok()
                        .map(real_path)
                };
                // A source that is there but that the kernel cannot name is not linked.
                let source = match source {
                    Some(None) => return self.refuse(Path::new(NAMELESS), &oname, TOO_DEEP),
                    other => other.flatten(),
                };
                if let Some(why) = source.as_deref().and_then(|s| self.walls.written(s))
                    && (!computed || there(odir, &oname))
                {
                    let shown = source.unwrap_or_default();
                    let (dir, name) = (shown.parent().unwrap_or(&shown), shown.file_name());
                    let name = name.unwrap_or_default().as_bytes();
                    return self.refuse_as(super::REFUSED_WRITE, dir, name, &why);
                }
                // A sealed config gets no second name that could be opened for writing.
                if self.walls.watches_writes() {
                    let st = if old.path.is_empty() {
                        rustix::fs::fstat(old_base)
                    } else {
                        rustix::fs::statat(odir, OsStr::from_bytes(&oname), oflags)
                    };
                    if st.is_ok_and(|st| self.walls.sealed((st.st_dev, st.st_ino))) {
                        let shown = real_path(odir).unwrap_or_default();
                        return self.refuse(&shown, &oname, SEALED);
                    }
                }
                let new = match new.map_or_else(|| locate(tid, &last, false), Ok) {
                    Ok(p) => p,
                    Err(e) => return Answer::Errno(e),
                };
                self.at_place(new, Kind::Link, |dir, name| {
                    rustix::fs::linkat(odir, OsStr::from_bytes(&oname), dir, name, oflags)
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
        match locate(tid, arg, false) {
            Ok(place) => self.at_place(place, kind, op),
            Err(e) => Answer::Errno(e),
        }
    }

    /// Checks the new entry at `place` and runs `op` on its folder and name.
    fn at_place(
        &self,
        place: Place,
        kind: Kind,
        op: impl FnOnce(BorrowedFd<'_>, &OsStr) -> rustix::io::Result<()>,
    ) -> Answer {
        let Place { dir, name, real, .. } = place;
        let _held = match self.check(&dir, real, &name, kind) {
            Checked::Go(held) => held,
            Checked::Stop(a) => return a,
            Checked::Config(real) => {
                return self.refuse(&real, &name, "a config is made by rename");
            }
        };
        match op(dir.as_fd(), OsStr::from_bytes(&name)) {
            Ok(()) => Answer::Value(0),
            Err(e) => errno_of(e),
        }
    }

    /// The walls for a new entry `name` in `dir` (whose real path is `real`) made as `kind`.
    fn check(&self, dir: &OwnedFd, real: Option<PathBuf>, name: &[u8], kind: Kind) -> Checked {
        self.check_as(REFUSED, dir, real, name, kind)
    }

    /// [`Job::check`], a refusal's line beginning with `start`.
    fn check_as(
        &self,
        start: &str,
        dir: &OwnedFd,
        real: Option<PathBuf>,
        name: &[u8],
        kind: Kind,
    ) -> Checked {
        // A folder the kernel cannot name (its path past PATH_MAX, made by relative steps):
        // nothing the walls cannot check is made (found by the fourth attack pass: every
        // create there went unchecked, and a `mv` of the tree to a short name carried a git
        // dir in).
        let Some(real) = real else {
            return Checked::Stop(self.refuse_as(start, Path::new(NAMELESS), name, TOO_DEEP));
        };
        let why = match self.walls.verdict(&real, name, kind) {
            Verdict::Refuse(why) => why,
            Verdict::CheckConfig => return Checked::Config(real),
            // A read-only root's bind refuses the create itself (EROFS, as always); one the
            // host moved aside or replaced left a writable folder there (decision 0079).
            Verdict::Allow if self.walls.in_read_only_root(&real) && !read_only_mount(dir) => {
                super::rules::READ_ONLY_GONE.to_string()
            }
            Verdict::Allow => match super::rules::piece_lock(dir.as_fd(), name) {
                Err(_) => super::rules::UNLOCKED.to_string(),
                Ok(held) => {
                    let present = |n: &[u8]| {
                        hands_roots::fold::same(trim_slashes(name), n)
                            || rustix::fs::statat(
                                dir,
                                OsStr::from_bytes(n),
                                AtFlags::SYMLINK_NOFOLLOW,
                            )
                            .is_ok()
                    };
                    match self.walls.makes_git_dir(&real, name, present) {
                        Some(why) => why,
                        None => return Checked::Go(held),
                    }
                }
            },
        };
        Checked::Stop(self.refuse_as(start, &real, name, &why))
    }

    /// EACCES for a new entry `name` in `real`, after the report and the line on stderr that
    /// say why.
    fn refuse(&self, real: &Path, name: &[u8], why: &str) -> Answer {
        self.refuse_as(REFUSED, real, name, why)
    }

    /// EACCES for `name` in `real`, after the report and a line on stderr that begins with
    /// `start` ([`REFUSED`], or [`super::REFUSED_WRITE`] for an open for writing).
    fn refuse_as(&self, start: &str, real: &Path, name: &[u8], why: &str) -> Answer {
        let listed = hands_roots::lock(&self.lines).take();
        let shown = real.join(OsStr::from_bytes(trim_slashes(name)));
        let line = match listed {
            Listing::Listed => {
                self.reporter.send(&Report::Refused { path: shown.clone(), wall: why.into() });
                format!("{start}{}: {why}\n", shown.display())
            }
            Listing::FirstUnlisted => {
                "hands sandbox: more creates were refused; only some are listed\n".into()
            }
            Listing::Unlisted => String::new(),
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
        // The copy gets the source's own mode bits (its creator's umask applied then), not
        // whatever umask an earlier call left on this thread.
        set_umask(0);
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

/// Whether `name` is one entry's own name (not `.`, `..`, empty or with a slash).
fn plain(name: &[u8]) -> bool {
    !matches!(name, b"" | b"." | b"..") && !name.contains(&b'/')
}

/// Whether `dir` lies on a read-only mount (an unreadable answer counts as not).
fn read_only_mount(dir: &OwnedFd) -> bool {
    rustix::fs::fstatvfs(dir)
        .is_ok_and(|v| v.f_flag.contains(rustix::fs::StatVfsMountFlags::RDONLY))
}

/// What the walls say about a new entry.
enum Checked {
    /// Make it, holding the folder's lock if any ([`super::rules::piece_lock`]) until then.
    Go(Option<OwnedFd>),
    Stop(Answer),
    /// A rename onto a new repository's config: check its content ([`Job::checked_config`]).
    Config(PathBuf),
}

/// Why an open for writing (or a new name) of a config the init wrote is refused.
/// What a refusal shows for a folder whose path the kernel cannot give (past `PATH_MAX`).
const NAMELESS: &str = "(a folder too deep to name)";
/// Why nothing is made in such a folder.
const TOO_DEEP: &str = "its folder's path is longer than the kernel can name (4096 bytes), so \
                        the walls cannot tell what it is, and nothing unchecked is made; make \
                        the tree shallower";
const SEALED: &str = "the config of a repository a command made, which the sandbox checked: \
                      git changes it only through its lock file";
