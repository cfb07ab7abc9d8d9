//! The init's answer to an `open` the filter sent it: one that creates (decision 0046: the new
//! name is checked before it is made) or one that writes (decision 0079: the file opened is
//! checked by its real path once it is open, and refused when the walls protect it).
//!
//! A read-only bind keeps a protected file from being written only while it lasts: a host
//! rename over the file (`git config` on the host commits `.git/config.lock` by rename) takes
//! the bind off in every sandbox, and a command that outlives it would find the new file
//! writable. So every open for writing comes here, and what is checked is the file the init
//! holds, whatever name or `/proc` link led to it. Truncation waits for the check.

use super::super::Walls;
use super::super::target::{Arg, Place, locate, real_path};
use super::{Answer, Job, MAX_THREADS, SEALED, Wake, errno_of, send};
use rustix::fs::{FileType, Mode, OFlags};
use std::ffi::OsStr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// Whether an open with `flags` writes: Linux truncates on O_TRUNC whatever the access mode
/// (O_RDONLY too, given the right to write), so a truncation is a write.
fn writes(flags: i32) -> bool {
    flags & libc::O_ACCMODE != libc::O_RDONLY || flags & libc::O_TRUNC != 0
}

/// An open as the init performs it, on the folder it located and its own copy of the name.
struct Open {
    flags: i32,
    mode: u32,
    walls: Arc<Walls>,
    /// Whether configs the init sealed are watched (`new_repositories = "allow"`).
    watch: bool,
}

/// What became of an open.
enum Opened {
    Answer(Answer),
    /// Refused by the walls: the file's real path, and why.
    Refused(PathBuf, String),
}

impl Open {
    fn run(&self, dir: &OwnedFd, name: &[u8]) -> Opened {
        let flags = self.flags;
        let (trunc, writes) = (flags & libc::O_TRUNC != 0, writes(flags));
        let base = (flags | libc::O_CLOEXEC | libc::O_NOCTTY) & !(libc::O_TRUNC * trunc as i32);
        let open = |f: i32| {
            let f = OFlags::from_bits_retain(f as u32);
            rustix::fs::openat(dir, OsStr::from_bytes(name), f, Mode::from_raw_mode(self.mode))
        };
        // Whether this open made the file: a new file is the command's own, its name checked
        // before; an existing one is checked below. Without O_EXCL the create is tried first,
        // so the answer is the kernel's, not a look taken before.
        let creating = flags & libc::O_CREAT != 0;
        let opened = if !creating || flags & libc::O_EXCL != 0 {
            open(base).map(|fd| (fd, creating))
        } else {
            match open(base | libc::O_EXCL) {
                Err(rustix::io::Errno::EXIST) => open(base & !libc::O_CREAT).map(|fd| (fd, false)),
                other => other.map(|fd| (fd, true)),
            }
        };
        let (fd, made) = match opened {
            Ok(v) => v,
            Err(e) => return Opened::Answer(errno_of(e)),
        };
        if writes && !made {
            // The file opened, by its real path: a name swapped meanwhile, a descriptor's
            // /proc link or a symbolic link lead here as well as the name does.
            let Some(real) = real_path(&fd) else {
                return Opened::Answer(Answer::Errno(libc::EACCES));
            };
            if let Some(why) = self.walls.written(&real) {
                return Opened::Refused(real, why);
            }
        }
        // A file this open made is new (no sealed config: those were there before, and one
        // is never created in place) and has nothing to cut: nothing more to look at.
        if made {
            return Opened::Answer(Answer::Fd(fd, flags & libc::O_CLOEXEC != 0));
        }
        let st = rustix::fs::fstat(&fd);
        if self.watch && st.as_ref().is_ok_and(|st| self.walls.sealed((st.st_dev, st.st_ino))) {
            return Opened::Answer(Answer::Errno(libc::EACCES));
        }
        let regular = st.is_ok_and(|st| FileType::from_raw_mode(st.st_mode).is_file());
        if trunc && regular {
            // On a descriptor that can write: this one, or the same file opened again through
            // its /proc link (O_RDONLY|O_TRUNC).
            let cut = if flags & libc::O_ACCMODE == libc::O_RDONLY {
                let again = format!("/proc/self/fd/{}", fd.as_raw_fd());
                let w = OFlags::WRONLY | OFlags::CLOEXEC | OFlags::NOCTTY;
                rustix::fs::open(again.as_str(), w, Mode::empty())
                    .and_then(|w| rustix::fs::ftruncate(&w, 0))
            } else {
                rustix::fs::ftruncate(&fd, 0)
            };
            if let Err(e) = cut {
                return Opened::Answer(errno_of(e));
            }
        }
        Opened::Answer(Answer::Fd(fd, flags & libc::O_CLOEXEC != 0))
    }
}

impl Job {
    /// Checks and performs an open that creates or writes.
    pub(super) fn open(
        &self,
        tid: u32,
        last: &Arg,
        flags: i32,
        mode: u32,
        umask: Option<u32>,
    ) -> Answer {
        let follow = flags & (libc::O_EXCL | libc::O_NOFOLLOW) == 0;
        let place = match locate(tid, last, follow) {
            Ok(v) => v,
            Err(e) => return Answer::Errno(e),
        };
        // The entry as it is now, looked at once: whether it is a sealed config or a FIFO
        // (advisory: the descriptor opened is checked again). An exclusive create opens
        // nothing that is there (the kernel answers EEXIST, whatever the entry is): no look.
        let exclusive = flags & (libc::O_CREAT | libc::O_EXCL) == libc::O_CREAT | libc::O_EXCL;
        let (lstat, stat) = if exclusive { (None, None) } else { place.entry() };
        let Place { dir, name, real, .. } = place;
        let tty = libc::makedev(5, 0);
        if stat.is_some_and(|s| {
            FileType::from_raw_mode(s.st_mode).is_char_device() && s.st_rdev == tty
        }) {
            return self.controlling_terminal(tid, flags);
        }
        // The folder's lock for a git dir's piece, held until the file is made.
        let mut _held = None;
        if flags & libc::O_CREAT != 0 {
            // A shell's `>>` or `>` onto a file that is there writes it: say so (the name is
            // refused either way, as it would be made should the file go meanwhile).
            let start = if lstat.is_some() && flags & libc::O_EXCL == 0 {
                super::super::REFUSED_WRITE
            } else {
                super::super::REFUSED
            };
            match self.check_as(start, &dir, real, &name, super::super::Kind::File) {
                super::Checked::Go(h) => _held = h,
                super::Checked::Stop(a) => return a,
                super::Checked::Config(real) => {
                    return self.refuse(&real, &name, "a config is not created in place");
                }
            }
        }
        let watch = self.walls.watches_writes() && writes(flags);
        let sealed = |st: Option<rustix::fs::Stat>| {
            st.is_some_and(|st| self.walls.sealed((st.st_dev, st.st_ino)))
        };
        if watch && sealed(if follow { stat } else { lstat }) {
            let shown = real_path(&dir).unwrap_or_default();
            return self.refuse(&shown, &name, SEALED);
        }
        let how = Open { flags, mode, walls: self.walls.clone(), watch };
        let fifo = stat.is_some_and(|s| FileType::from_raw_mode(s.st_mode) == FileType::Fifo);
        if !fifo || self.busy.fetch_add(1, Ordering::AcqRel) >= MAX_THREADS {
            if fifo {
                self.busy.fetch_sub(1, Ordering::AcqRel);
            }
            return self.answer(how.run(&dir, &name));
        }
        // Opening a FIFO waits for its other end, which another of the command's calls may be
        // about to open: on a thread of its own. That thread opens what is there and makes
        // nothing: it holds no folder lock, and the name's check above judged the folder as it
        // was then — a FIFO swapped for nothing meanwhile would otherwise let it create a git
        // dir's last piece after other pieces were allowed beside the gap (found attacking
        // this: `HEAD` made last beside `config` and `refs`). The name gone: ENOENT.
        let how = Open { flags: flags & !libc::O_CREAT, ..how };
        let job = self.clone();
        let spawned = std::thread::Builder::new().spawn(move || {
            let answer = if crate::sys::unshare(libc::CLONE_FS).is_ok() {
                if let Some(umask) = umask {
                    super::set_umask(umask);
                }
                job.answer(how.run(&dir, &name))
            } else {
                Answer::Errno(libc::EAGAIN)
            };
            // A thread of its own runs where the scheduler put it: no hold, and the answer
            // leaves the listener's same-CPU flag as the serving thread keeps it.
            let _ = send(&job.listener, job.req.id, answer, None, Wake::Plain);
            job.busy.fetch_sub(1, Ordering::AcqRel);
        });
        match spawned {
            Ok(_) => Answer::Later,
            Err(_) => {
                self.busy.fetch_sub(1, Ordering::AcqRel);
                Answer::Errno(libc::EAGAIN)
            }
        }
    }

    /// `/dev/tty` means the caller's controlling terminal, which the init (with none) cannot
    /// open as itself: the caller's, from its `/proc/TID/stat`, opened in the sandbox's own
    /// devpts (the command starts a session of its own, so any terminal it controls is one
    /// it opened there) and checked to be that device. None: ENXIO, as the kernel says.
    fn controlling_terminal(&self, tid: u32, flags: i32) -> Answer {
        #[expect(clippy::disallowed_methods, reason = "procfs: the caller's controlling terminal")]
        let stat = std::fs::read_to_string(format!("/proc/{tid}/stat")).unwrap_or_default();
        // After the command's name (which may hold anything but ends at the last `)`): state,
        // ppid, pgrp, session, tty_nr.
        let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
        let nr: u64 = after.split_whitespace().nth(4).and_then(|n| n.parse().ok()).unwrap_or(0);
        let (major, minor) = ((nr >> 8) & 0xfff, (nr & 0xff) | ((nr >> 12) & 0xfff00));
        if !(136..144).contains(&major) {
            return Answer::Errno(libc::ENXIO);
        }
        let Ok(pts) = super::super::target::open_dir("/dev/pts") else {
            return Answer::Errno(libc::ENXIO);
        };
        let name = ((major - 136) * 256 + minor).to_string();
        let flags = flags & !(libc::O_CREAT | libc::O_EXCL | libc::O_TRUNC);
        let how = Open { flags, mode: 0, walls: self.walls.clone(), watch: false };
        match self.answer(how.run(&pts, name.as_bytes())) {
            Answer::Fd(fd, c) if rustix::fs::fstat(&fd).is_ok_and(|s| s.st_rdev == nr) => {
                Answer::Fd(fd, c)
            }
            Answer::Fd(..) => Answer::Errno(libc::ENXIO),
            other => other,
        }
    }

    /// `truncate(path, length)`: the file is opened for writing as an open is (checked by its
    /// real path once open), then cut on that descriptor.
    pub(super) fn truncate(&self, tid: u32, last: &Arg, length: u64) -> Answer {
        let Place { dir, name, .. } = match locate(tid, last, true) {
            Ok(v) => v,
            Err(e) => return Answer::Errno(e),
        };
        // Non-blocking: a FIFO there answers at once (truncate(2) never waits for a reader).
        let flags = libc::O_WRONLY | libc::O_NONBLOCK;
        let watch = self.walls.watches_writes();
        let how = Open { flags, mode: 0, walls: self.walls.clone(), watch };
        match self.answer(how.run(&dir, &name)) {
            Answer::Fd(fd, _) => match rustix::fs::ftruncate(&fd, length) {
                Ok(()) => Answer::Value(0),
                Err(e) => errno_of(e),
            },
            Answer::Errno(libc::ENXIO) => Answer::Errno(libc::EINVAL),
            other => other,
        }
    }

    /// The answer for an open, with the report and the line a refusal gets.
    fn answer(&self, opened: Opened) -> Answer {
        match opened {
            Opened::Answer(a) => a,
            Opened::Refused(real, why) => {
                let (dir, name) =
                    (real.parent().unwrap_or(&real), real.file_name().unwrap_or_default());
                self.refuse_as(super::super::REFUSED_WRITE, dir, name.as_bytes(), &why)
            }
        }
    }
}
