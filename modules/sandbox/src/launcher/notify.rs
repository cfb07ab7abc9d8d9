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
//! it can create nothing the command could not. `umask` is sent too, and is the one call let
//! continue (its arguments are values): the init notes that the command changed its umask,
//! which it otherwise need not read per create. `docs/decisions/0046-walls-in-run.md` has the
//! reasoning and what is left, 0074 what a call costs.
//!
//! A refused call fails with EACCES; the init sends [`Report::Refused`](super::Report) on the
//! launcher's report channel, which the daemon lists in the result's `denied`, and writes one
//! `hands sandbox: refused creating PATH: WHY` line on the command's stderr for a person (the
//! daemon never reads it: the command can print the same).
//!
//! By job: `rules.rs` is the policy (which new names are walls), `filter.rs` the BPF filter the
//! command installs, `supervisor.rs` the init's answering of each call (with `target.rs`, how
//! it reads and resolves the command's paths), `hits.rs` the walls a command hit as the daemon
//! lists them; this file holds the handoff of the listener between them.

use anyhow::{Context, Result};
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};

mod filter;
mod hits;
mod rules;
mod supervisor;
mod target;
pub use hits::{Hit, walls_hit};
pub use rules::{Kind, Verdict, Walls};
pub use supervisor::serve;

/// The start of the line the init writes for each refused create, for a person.
pub const REFUSED: &str = "hands sandbox: refused creating ";

/// The start of the line the init writes for each refused open for writing (decision 0079).
pub const REFUSED_WRITE: &str = "hands sandbox: refused writing ";

/// How the reason for a refused open for writing begins (`Walls::written`).
pub(crate) const WRITTEN: &str = "opening an existing file for writing";

/// How the launcher's last line on the command's stderr begins when the memory bound's cgroup
/// killed the command's processes for lack of memory, for a person.
pub const OUT_OF_MEMORY: &str = "hands sandbox: the command's processes ran out of memory";

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
    pub fn install(&self) -> Result<()> {
        // A change of uid (`run_as`) made this process undumpable, which would keep the init
        // (same uid, no capabilities) from taking the descriptor; execve sets it again anyway.
        super::sys::seccomp_notify::set_dumpable()?;
        let listener = filter::install_filter()?;
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
    super::sys::seccomp_notify::pidfd_getfd(&pidfd, n)
}
