//! The proxy's listeners inside a module's private network namespace. The daemon cannot enter
//! that namespace itself (it is multi-threaded, and an ordinary user has no capability in its
//! own user namespace), so it re-runs its binary as `hands __netns-listen PID START`: the child
//! joins the holder's user and network namespaces through a pidfd, binds two loopback
//! listeners there (HTTP and SOCKS5) and hands them back over the unix socket that is its
//! stdin (SCM_RIGHTS). A socket keeps the namespace it was made in, so the daemon then accepts,
//! on its own runtime, connections that only the module's commands can make.

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

/// Runs `hands __netns-listen PID START` (the child's side).
pub fn child_main(pid: i32, start: u64) -> ExitCode {
    match child(pid, start) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // The daemon reads nothing but the descriptors; its error says what failed.
            drop(e);
            ExitCode::from(125)
        }
    }
}

fn child(pid: i32, start: u64) -> io::Result<()> {
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
    let http = TcpListener::bind("127.0.0.1:0")?;
    let socks = TcpListener::bind("127.0.0.1:0")?;
    let fds = [http.as_fd(), socks.as_fd()];
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
#[expect(
    clippy::disallowed_methods,
    reason = "starts the daemon's own `hands __netns-listen`, which binds inside the namespace"
)]
pub fn acquire(exe: &Path, pid: i32, start: u64) -> io::Result<Listeners> {
    let (ours, theirs) = UnixStream::pair()?;
    let mut child = Command::new(exe)
        .arg("__netns-listen")
        .arg(pid.to_string())
        .arg(start.to_string())
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
    if fds.len() != 2 {
        return Err(io::Error::other(format!(
            "the helper that opens the proxy's listeners in the module's network namespace \
             failed ({status}); is the namespace holder (pid {pid}) still alive?"
        )));
    }
    let socks = TcpListener::from(fds.pop().ok_or(io::ErrorKind::InvalidData)?);
    let http = TcpListener::from(fds.pop().ok_or(io::ErrorKind::InvalidData)?);
    Ok(Listeners { http, socks })
}
