//! The launcher's reports to the daemon, on a channel of their own (issue 35 point 3): the
//! sandbox could not be built ([`Report::SetupFailed`]), the in-run walls refused a create
//! ([`Report::Refused`]), the memory bound killed the command ([`Report::OutOfMemory`]). Typed
//! on both sides like the [`Spec`](super::Spec), and never mixed with the command's output:
//! before, the daemon parsed `hands sandbox: …` lines from the command's own stderr, where the
//! command could print a forged one or bury a real one under more output.
//!
//! The channel is a `SOCK_SEQPACKET` socket pair. The daemon's end is [`Reports`]; the
//! launcher's end is its stdin, on which the daemon has already sent the spec's sealed memfd
//! (`SCM_RIGHTS`, queued before the launcher starts): a child given only its standard streams
//! is still started with `posix_spawn`, as the spec's module explains. The launcher moves the
//! socket above the standard streams, close-on-exec; its init keeps a copy for the in-run
//! walls; the command never has it (only fds 0–2 reach it, SPEC §5.2 item 7). One report is
//! one message of JSON. The daemon reads them as they come until [`Report::Ended`] (every
//! process of the command reaped, the output let go: the answer need not wait for the
//! namespaces' teardown, decision 0076), or to the end once the launcher has ended.

use serde::{Deserialize, Serialize};
use std::io::IoSlice;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::PathBuf;
use std::sync::Arc;

/// The longest report: a path (at most 4 KiB) with its reason fits many times over.
const MAX_REPORT: usize = 16 << 10;

/// What a setup failure's reason is cut to, so that its report stays under [`MAX_REPORT`].
const MAX_WHY: usize = 8 << 10;

/// At most this many reports are read (each writer caps its own; this bounds a broken one).
const MAX_READ: usize = 256;

/// One thing the launcher tells the daemon.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "report", rename_all = "snake_case")]
pub enum Report {
    /// The sandbox could not be built: the command never started, and the launcher exits 125.
    SetupFailed {
        /// Why, for a person: what failed and what they can do.
        why: String,
        /// What kind of failure it is, for the daemon to act on.
        cause: Cause,
    },
    /// The in-run walls refused creating `path` (as the command sees it) while it ran.
    Refused {
        path: PathBuf,
        /// Which wall, for a person (`a .git folder`, `a protected path (…)`).
        wall: String,
    },
    /// The memory bound's cgroup killed the command's processes for lack of memory.
    OutOfMemory {
        /// The bound, in MiB (tools-shell's `limits.memory_mb`).
        limit_mb: u64,
    },
    /// The command and every process it left have ended, and neither the launcher nor its
    /// init holds the command's output any more: what is left of the run is tidying up (the
    /// namespaces, the cgroup leaf), which nobody need wait for. Sent last, after any
    /// [`Report::OutOfMemory`].
    Ended {
        /// The status the launcher will exit with: the command's exit code, or 128 + the
        /// signal that ended it.
        code: u8,
    },
}

/// What kind of setup failure a [`Report::SetupFailed`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// The namespaces cannot be had here: no user namespace can be made, or a container's
    /// runtime forbids what the sandbox needs of them (a fresh `/proc`, `pivot_root`, joining
    /// the module's network namespace). A daemon may run without namespaces (`best-effort`,
    /// doctor's version lines).
    NoNamespaces,
    /// A path was not what the daemon's check saw there (SPEC §3, one resolution): the daemon
    /// walks the roots again once before it gives up.
    Changed,
    /// Anything else: the reason says what.
    Other,
}

/// A launcher error that carries its [`Cause`]; any error without one is [`Cause::Other`].
#[derive(Debug, thiserror::Error)]
#[error("{why}")]
pub struct Failure {
    pub cause: Cause,
    pub why: String,
}

impl Failure {
    pub fn new(cause: Cause, why: impl Into<String>) -> Failure {
        Failure { cause, why: why.into() }
    }

    /// The failure `e` is: its cause where a [`Failure`] in its chain names one, and its whole
    /// text as the reason.
    pub fn of(e: &anyhow::Error) -> Failure {
        let cause =
            e.chain().find_map(|c| c.downcast_ref::<Failure>()).map_or(Cause::Other, |f| f.cause);
        Failure { cause, why: format!("{e:#}") }
    }

    /// The report that says so, its reason cut to [`MAX_WHY`].
    pub fn report(&self) -> Report {
        let mut why = self.why.clone();
        if why.len() > MAX_WHY {
            let mut end = MAX_WHY;
            while !why.is_char_boundary(end) {
                end -= 1;
            }
            why.truncate(end);
            why.push('…');
        }
        Report::SetupFailed { why, cause: self.cause }
    }
}

/// The daemon's end of a launcher's report channel (see [`attach_spec`](super::attach_spec)).
#[derive(Debug)]
pub struct Reports(OwnedFd);

/// What one launcher reported.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reported {
    pub reports: Vec<Report>,
    /// Messages that were not a report of this build (cut, or from another version).
    pub unreadable: usize,
}

impl Reported {
    /// `more`, read after these, added to them.
    pub fn extend(&mut self, more: Reported) {
        self.reports.extend(more.reports);
        self.unreadable += more.unreadable;
    }

    /// The setup failure, when the sandbox could not be built (the command never started).
    pub fn setup_failed(&self) -> Option<(&str, Cause)> {
        self.reports.iter().find_map(|r| match r {
            Report::SetupFailed { why, cause } => Some((why.as_str(), *cause)),
            _ => None,
        })
    }
}

impl Reports {
    /// Gives a sandbox made ready ahead (decision 0077) its call: the call's whole spec, in a
    /// sealed memfd like the first, which its init reads before it forks the command.
    pub fn send_call(&self, call: &super::Spec) -> std::io::Result<()> {
        let fd = crate::sys::sealed_memfd("hands-call", &call.to_json()?)?;
        send_spec(&self.0, &fd)
    }

    /// Every report sent so far, read without waiting. Called once the launcher has ended or
    /// sent [`Report::Ended`], that is all of them: its init ends before it does, nothing is
    /// sent after that word, and the command never held the channel.
    pub fn read(self) -> Reported {
        self.drain()
    }

    /// The reports queued so far, read without waiting, the channel kept: a tmux session's
    /// launcher lives on, and each of its results takes what its walls reported since the last.
    pub fn drain(&self) -> Reported {
        let mut got = Reported::default();
        let mut buf = vec![0u8; MAX_REPORT];
        for _ in 0..MAX_READ {
            match self.next(&mut buf) {
                Next::Report(r) => got.reports.push(r),
                Next::Unreadable => got.unreadable += 1,
                Next::Interrupted => {}
                // Nothing more queued (a writer is still alive: what it sends later is lost),
                // the end, or a broken channel.
                Next::Empty | Next::End => break,
            }
        }
        got
    }

    /// Waits for [`Report::Ended`], keeping the reports before it in `got`, and returns the
    /// status the launcher will exit with, as its wait status would give it: from then on the
    /// run's result is whole, though the launcher is still tidying up (reap it with
    /// [`reap_later`]). Pending for good when the channel ends without one (the
    /// sandbox could not be built, the launcher was killed, a launcher of an older build):
    /// the caller waits for the launcher's exit beside it. Cancel-safe: a report read is in
    /// `got` before anything waits again.
    pub async fn ended(&self, got: &mut Reported) -> std::process::ExitStatus {
        let Ok(fd) = crate::sys::async_readable(self.0.as_fd()) else {
            return std::future::pending().await;
        };
        let mut buf = vec![0u8; MAX_REPORT];
        let mut read = 0;
        loop {
            let Ok(mut ready) = fd.readable().await else {
                return std::future::pending().await;
            };
            loop {
                match self.next(&mut buf) {
                    Next::Report(Report::Ended { code }) => {
                        return std::os::unix::process::ExitStatusExt::from_raw(
                            i32::from(code) << 8,
                        );
                    }
                    Next::Report(r) if read < MAX_READ => got.reports.push(r),
                    Next::Report(_) => {}
                    Next::Unreadable => got.unreadable += 1,
                    Next::Interrupted => continue,
                    Next::Empty => {
                        ready.clear_ready();
                        break;
                    }
                    Next::End => return std::future::pending().await,
                }
                read += 1;
            }
        }
    }

    /// One message, read without waiting.
    fn next(&self, buf: &mut [u8]) -> Next {
        use rustix::net::RecvFlags;
        match rustix::net::recv(&self.0, &mut *buf, RecvFlags::DONTWAIT | RecvFlags::TRUNC) {
            // The end: every writer has closed its copy.
            Ok((_, 0)) => Next::End,
            Ok((n, len)) if len <= n => match serde_json::from_slice(&buf[..n]) {
                Ok(r) => Next::Report(r),
                Err(_) => Next::Unreadable,
            },
            Ok(_) => Next::Unreadable,
            // A launcher that ended with a message of the daemon's unread (the call sent to a
            // sandbox made ready that failed meanwhile) leaves ECONNRESET on this end, which the
            // next read returns once, before what the launcher sent: its failure is still queued.
            Err(rustix::io::Errno::INTR | rustix::io::Errno::CONNRESET) => Next::Interrupted,
            Err(rustix::io::Errno::AGAIN) => Next::Empty,
            Err(_) => Next::End,
        }
    }
}

/// What one read of the channel found.
enum Next {
    Report(Report),
    /// A message that is not a report of this build (cut, or from another version).
    Unreadable,
    Interrupted,
    /// Nothing queued now.
    Empty,
    /// Every writer has closed its end, or the channel is broken.
    End,
}

/// Reaps a launcher that has sent [`Report::Ended`] once it has tidied up, off the caller's
/// way; a daemon that exits first leaves its cgroup leaf to the next launcher's sweep, or its
/// own at exit.
pub fn reap_later(mut launcher: tokio::process::Child) {
    tokio::spawn(async move {
        let _ = launcher.wait().await;
    });
}

/// The launcher's and its init's end of the channel: sends one report, never waits (a full
/// channel drops it rather than stall the init's supervisor), never raises SIGPIPE (a caller
/// that dropped its [`Reports`] reads nothing).
#[derive(Debug, Clone, Default)]
pub struct Reporter(Option<Arc<OwnedFd>>);

impl Reporter {
    pub fn new(fd: OwnedFd) -> Reporter {
        Reporter(Some(Arc::new(fd)))
    }

    /// The descriptor of the call's spec, waited for (a sandbox made ready ahead: its init).
    pub(crate) fn receive_call(&self) -> std::io::Result<OwnedFd> {
        let Some(fd) = &self.0 else {
            return Err(std::io::Error::other("no channel to the daemon to receive a call on"));
        };
        loop {
            match receive_spec(fd.as_fd(), true) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                got => return got,
            }
        }
    }

    pub fn send(&self, report: &Report) {
        use rustix::net::SendFlags;
        let Some(fd) = &self.0 else { return };
        if let Ok(bytes) = serde_json::to_vec(report) {
            let _ =
                rustix::net::send(fd.as_fd(), &bytes, SendFlags::DONTWAIT | SendFlags::NOSIGNAL);
        }
    }
}

/// The daemon's side of a launch: the launcher's end of a new channel (its stdin) with the
/// spec's memfd queued on it, and the daemon's end.
pub(crate) fn channel(spec: OwnedFd) -> std::io::Result<(OwnedFd, Reports)> {
    use rustix::net::{AddressFamily, SocketFlags, SocketType};
    let (ours, theirs) = rustix::net::socketpair(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )?;
    send_spec(&ours, &spec)?;
    Ok((theirs, Reports(ours)))
}

/// Queues a spec's descriptor on the channel (one byte carries it).
fn send_spec(channel: &OwnedFd, spec: &OwnedFd) -> std::io::Result<()> {
    use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
    let fds = [spec.as_fd()];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !control.push(SendAncillaryMessage::ScmRights(&fds)) {
        return Err(std::io::ErrorKind::OutOfMemory.into());
    }
    let flags = SendFlags::NOSIGNAL | SendFlags::DONTWAIT;
    rustix::net::sendmsg(channel, &[IoSlice::new(b"S")], &mut control, flags)?;
    Ok(())
}

/// The launcher's side: the spec's descriptor, received on `channel` (its stdin), where the
/// daemon queued it before the launcher started (so nothing waits).
pub(crate) fn receive_spec(channel: BorrowedFd<'_>, wait: bool) -> std::io::Result<OwnedFd> {
    use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
    let mut byte = [0u8; 1];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    rustix::net::recvmsg(
        channel,
        &mut [std::io::IoSliceMut::new(&mut byte)],
        &mut control,
        if wait { RecvFlags::CMSG_CLOEXEC } else { RecvFlags::CMSG_CLOEXEC | RecvFlags::DONTWAIT },
    )?;
    let mut fds: Vec<OwnedFd> = Vec::new();
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(rights) = message {
            fds.extend(rights);
        }
    }
    match (fds.pop(), fds.is_empty()) {
        (Some(fd), true) => Ok(fd),
        _ => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "the channel on stdin carried no single spec descriptor",
        )),
    }
}

/// What the sandbox's init or the command's process writes on the error pipe when it fails
/// before the command starts: the report the launcher passes on.
pub(super) fn failure_bytes(e: &anyhow::Error) -> Vec<u8> {
    serde_json::to_vec(&Failure::of(e).report()).unwrap_or_else(|_| format!("{e:#}").into())
}

/// The failure the error pipe carried (see [`failure_bytes`]).
pub(super) fn failure_read(bytes: &str) -> Failure {
    match serde_json::from_str(bytes) {
        Ok(Report::SetupFailed { why, cause }) => Failure::new(cause, why),
        _ => Failure::new(Cause::Other, bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_cross_typed_and_a_cut_or_foreign_message_is_counted_not_taken() {
        let memfd = crate::sys::sealed_memfd("t", b"{}").unwrap();
        let (theirs, ours) = channel(memfd).unwrap();
        let spec = receive_spec(theirs.as_fd(), false).unwrap();
        assert_eq!(
            std::fs::read_to_string(format!("/proc/self/fd/{}", {
                use std::os::fd::AsRawFd;
                spec.as_raw_fd()
            }))
            .unwrap(),
            "{}"
        );
        let to = Reporter::new(theirs);
        to.send(&Report::Refused { path: "/w/.envrc".into(), wall: "a protected path".into() });
        to.send(&Failure::new(Cause::Changed, "x".repeat(MAX_WHY * 2)).report());
        let _ = rustix::net::send(
            to.0.as_ref().unwrap().as_fd(),
            b"not json",
            rustix::net::SendFlags::empty(),
        );
        drop(to);
        let got = ours.read();
        assert_eq!(got.unreadable, 1);
        assert_eq!(
            got.reports[0],
            Report::Refused { path: "/w/.envrc".into(), wall: "a protected path".into() }
        );
        let (why, cause) = got.setup_failed().unwrap();
        assert_eq!(cause, Cause::Changed);
        assert!(why.len() <= MAX_WHY + 3, "{}", why.len());
    }

    /// A call reaches the init of a sandbox made ready whatever its size (a memfd, like the
    /// spec); a channel whose daemon end is gone ends the wait with an error.
    #[test]
    fn a_call_crosses_the_channel_after_the_spec_and_a_closed_one_ends_the_wait() {
        let memfd = crate::sys::sealed_memfd("t", b"{}").unwrap();
        let (theirs, ours) = channel(memfd).unwrap();
        receive_spec(theirs.as_fd(), false).unwrap();
        let mut call = super::super::Spec::builder(super::super::Confinement {
            roots: vec![],
            protected: vec![],
            protected_rules: vec![],
            masked: vec![],
            system: vec![],
            home: "/h".into(),
        })
        .build(vec!["true".into()], "/w".into());
        call.set_env("BIG", "x".repeat(1 << 20));
        ours.send_call(&call).unwrap();
        let to = Reporter::new(theirs);
        let (got, _) = super::super::Spec::read(to.receive_call().unwrap()).unwrap();
        assert_eq!(got.env["BIG"].len(), 1 << 20);
        drop(ours);
        assert!(to.receive_call().is_err(), "the daemon's end is gone");
    }

    /// A launcher made ready that fails and ends with the daemon's call unread: its failure is
    /// still read (the kernel's ECONNRESET comes first, once; found by the suite under load).
    #[test]
    fn a_failure_sent_before_an_unread_call_is_still_read() {
        let memfd = crate::sys::sealed_memfd("t", b"{}").unwrap();
        let (theirs, ours) = channel(memfd).unwrap();
        receive_spec(theirs.as_fd(), false).unwrap();
        let to = Reporter::new(theirs);
        to.send(&Failure::new(Cause::Changed, "moved").report());
        let call = crate::sys::sealed_memfd("c", b"{}").unwrap();
        send_spec(&ours.0, &call).unwrap();
        drop(to);
        let got = ours.read();
        assert_eq!(got.setup_failed(), Some(("moved", Cause::Changed)), "{got:?}");
    }

    #[tokio::test]
    async fn ended_keeps_the_reports_before_it_and_waits_for_good_without_one() {
        let memfd = crate::sys::sealed_memfd("t", b"{}").unwrap();
        let (theirs, ours) = channel(memfd).unwrap();
        receive_spec(theirs.as_fd(), false).unwrap();
        let to = Reporter::new(theirs);
        let refused = Report::Refused { path: "/w/.envrc".into(), wall: "a protected path".into() };
        let waiting = tokio::spawn(async move {
            let mut got = Reported::default();
            let code = ours.ended(&mut got).await;
            (code, got, ours)
        });
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        to.send(&refused);
        to.send(&Report::OutOfMemory { limit_mb: 64 });
        to.send(&Report::Ended { code: 137 });
        let (code, got, ours) = waiting.await.unwrap();
        assert_eq!(std::os::unix::process::ExitStatusExt::into_raw(code) >> 8, 137);
        assert_eq!(got.reports, vec![refused.clone(), Report::OutOfMemory { limit_mb: 64 }]);
        // Without the word: the channel's end is no answer (the launcher's exit is).
        to.send(&refused);
        drop(to);
        let mut got = Reported::default();
        let wait =
            tokio::time::timeout(std::time::Duration::from_millis(100), ours.ended(&mut got));
        assert!(wait.await.is_err(), "no Ended, no answer");
        assert_eq!(got.reports, vec![refused], "what came is kept");
    }

    #[test]
    fn a_cause_is_found_under_context() {
        use anyhow::Context;
        let e: anyhow::Result<()> = Err(Failure::new(Cause::NoNamespaces, "no userns").into());
        let e = e.context("building the sandbox").unwrap_err();
        let f = Failure::of(&e);
        assert_eq!(f.cause, Cause::NoNamespaces);
        assert_eq!(f.why, "building the sandbox: no userns");
        assert_eq!(Failure::of(&anyhow::anyhow!("plain")).cause, Cause::Other);
    }
}
