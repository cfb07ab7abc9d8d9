//! The proxy's listeners inside a module's private network namespace. The daemon cannot enter
//! that namespace itself (it is multi-threaded, and an ordinary user has no capability in its
//! own user namespace), so it re-runs its binary as `hands __netns-listen PID START`: the child
//! joins the holder's user and network namespaces through a pidfd, binds two loopback
//! listeners there (HTTP and SOCKS5) and hands them back over the unix socket that is its
//! stdin (SCM_RIGHTS). A socket keeps the namespace it was made in, so the daemon then accepts,
//! on its own runtime, connections that only the module's commands can make. With `--diag` it
//! hands back only a `sock_diag` socket made there ([`crate::bound`]).

use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};
use rustix::thread::ThreadNameSpaceType;
use std::io::{self, IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::net::TcpListener;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};

/// The two listeners of one namespace.
#[derive(Debug)]
pub struct Listeners {
    pub http: TcpListener,
    pub socks: TcpListener,
}

impl Listeners {
    /// The ports commands are told (`HTTP_PROXY`, `ALL_PROXY`).
    pub fn ports(&self) -> io::Result<(u16, u16)> {
        Ok((self.http.local_addr()?.port(), self.socks.local_addr()?.port()))
    }
}

/// Runs `hands __netns-listen PID START [--diag]` (the child's side).
pub fn child_main(pid: i32, start: u64, diag: bool) -> ExitCode {
    match child(pid, start, diag) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // The daemon reads nothing but the descriptors; its error says what failed.
            drop(e);
            ExitCode::from(125)
        }
    }
}

fn child(pid: i32, start: u64, diag: bool) -> io::Result<()> {
    let pid = rustix::process::Pid::from_raw(pid).ok_or(io::ErrorKind::InvalidInput)?;
    let pidfd = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty())?;
    // The pidfd names one process for good; checking the start time after opening it makes
    // sure that process is the holder and not a reused pid.
    if crate::netns::start_time(pid.as_raw_nonzero().get()) != Some(start) {
        return Err(io::ErrorKind::NotFound.into());
    }
    rustix::thread::move_into_thread_name_spaces(
        pidfd.as_fd(),
        ThreadNameSpaceType::USER | ThreadNameSpaceType::NETWORK,
    )?;
    let made: Vec<OwnedFd> = if diag {
        vec![crate::bound::diag_socket()?]
    } else {
        let http = TcpListener::bind("127.0.0.1:0")?;
        let socks = TcpListener::bind("127.0.0.1:0")?;
        vec![http.into(), socks.into()]
    };
    let fds: Vec<_> = made.iter().map(|f| f.as_fd()).collect();
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(2))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !control.push(SendAncillaryMessage::ScmRights(&fds)) {
        return Err(io::ErrorKind::OutOfMemory.into());
    }
    let stdin = io::stdin();
    rustix::net::sendmsg(stdin.as_fd(), &[IoSlice::new(b"L")], &mut control, SendFlags::empty())?;
    Ok(())
}

/// The daemon's side: the listeners inside the namespace held by `pid` (started at `start`).
pub fn acquire(exe: &Path, pid: i32, start: u64) -> io::Result<Listeners> {
    let mut fds = from_child(exe, pid, start, false)?;
    let socks = TcpListener::from(fds.pop().ok_or(io::ErrorKind::InvalidData)?);
    let http = TcpListener::from(fds.pop().ok_or(io::ErrorKind::InvalidData)?);
    Ok(Listeners { http, socks })
}

/// The daemon's side: a `sock_diag` socket inside the namespace held by `pid`.
pub fn diag(exe: &Path, pid: i32, start: u64) -> io::Result<OwnedFd> {
    from_child(exe, pid, start, true)?.pop().ok_or_else(|| io::ErrorKind::InvalidData.into())
}

/// Runs `hands __netns-listen` and takes the descriptors it sends (two, or one for `diag`).
#[expect(
    clippy::disallowed_methods,
    reason = "starts the daemon's own `hands __netns-listen`, which binds inside the namespace"
)]
fn from_child(exe: &Path, pid: i32, start: u64, diag: bool) -> io::Result<Vec<OwnedFd>> {
    let (ours, theirs) = UnixStream::pair()?;
    let mut cmd = Command::new(exe);
    cmd.arg("__netns-listen").arg(pid.to_string()).arg(start.to_string());
    if diag {
        cmd.arg("--diag");
    }
    let mut child = cmd
        .env_clear()
        .stdin(Stdio::from(OwnedFd::from(theirs)))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let mut byte = [0u8; 1];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(2))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let got = rustix::net::recvmsg(
        ours.as_fd(),
        &mut [IoSliceMut::new(&mut byte)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    );
    let status = child.wait()?;
    got?;
    let mut fds: Vec<OwnedFd> = Vec::new();
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(rights) = message {
            fds.extend(rights);
        }
    }
    if fds.len() != if diag { 1 } else { 2 } {
        return Err(io::Error::other(format!(
            "the helper that opens sockets in the module's network namespace failed \
             ({status}); is the namespace holder (pid {pid}) still alive?"
        )));
    }
    Ok(fds)
}
