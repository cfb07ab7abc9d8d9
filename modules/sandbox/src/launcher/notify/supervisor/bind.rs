//! `bind(2)`: a unix socket's path is a new name like any other (found by the fourth attack
//! pass: sockets named `refs` and `objects` beside a `HEAD` and a `config` made a git dir that
//! the host's git took for a repository, and ran its fsmonitor). The init reads the address
//! once, takes a copy of the caller's socket (`pidfd_getfd`) and binds it itself: a path after
//! the walls' check, by its final name in the folder the init located; any other address (an
//! IP port, an abstract or unnamed unix socket, netlink) as it was read.

use super::super::Kind;
use super::super::target::{Arg, Base, base_dir, read_tgid};
use super::{Answer, Job, errno_of};
use std::os::fd::{AsFd, OwnedFd};

/// The address of a `bind`, read once: its bytes, and the path it names, if any. The socket
/// `fd` is looked at first, as the kernel does: a bad descriptor is EBADF and a file ENOTSOCK
/// before a bad address is EFAULT.
pub(super) fn read_address(tid: u32, fd: i32, addr: u64, len: u32) -> Result<Vec<Arg>, i32> {
    let sock = socket_of(tid, fd)?;
    if rustix::fs::fstat(&sock).map(|s| s.st_mode & libc::S_IFMT) != Ok(libc::S_IFSOCK) {
        return Err(libc::ENOTSOCK);
    }
    drop(sock);
    let len = len as usize;
    if len > std::mem::size_of::<libc::sockaddr_storage>() {
        return Err(libc::EINVAL);
    }
    let mut raw = vec![0u8; len];
    if len > 0 {
        let n = crate::sys::seccomp_notify::read_memory(tid, addr, &mut raw)
            .map_err(|_| libc::EFAULT)?;
        if n != len {
            return Err(libc::EFAULT);
        }
    }
    let unix = len > 2 && u16::from_ne_bytes([raw[0], raw[1]]) == libc::AF_UNIX as u16;
    // As the kernel's `unix_bind` answers a unix address longer than its structure.
    if unix && len > std::mem::size_of::<libc::sockaddr_un>() {
        return Err(libc::EINVAL);
    }
    let path: Option<Vec<u8>> = (unix && raw[2] != 0)
        .then(|| raw[2..].split(|&b| b == 0).next().unwrap_or_default().to_vec());
    let mut args = vec![Arg { base: Base::Root, path: raw }];
    if let Some(path) = path {
        args.push(Arg { base: base_dir(tid, libc::AT_FDCWD, &path)?, path });
    }
    Ok(args)
}

impl Job {
    /// Binds the caller's socket `fd`: `args` as [`read_address`] made them.
    pub(super) fn bind(&self, tid: u32, fd: i32, mut args: Vec<Arg>) -> Answer {
        let Some(last) = args.pop() else { return Answer::Errno(libc::EINVAL) };
        let sock = match socket_of(tid, fd) {
            Ok(s) => s,
            Err(e) => return Answer::Errno(e),
        };
        let bind = |addr: &[u8]| crate::sys::seccomp_notify::bind_raw(sock.as_fd(), addr);
        // A unix address given to another kind of socket names no file: the kernel answers it
        // as it would bare (EAFNOSUPPORT or EINVAL), from the address as read.
        let unix = rustix::net::sockopt::socket_domain(&sock)
            .is_ok_and(|d| d == rustix::net::AddressFamily::UNIX);
        if !unix && let Some(raw) = args.first() {
            return match bind(&raw.path) {
                Ok(()) => Answer::Value(0),
                Err(e) => errno_of(e),
            };
        }
        if args.is_empty() {
            // No path: the address as read.
            return match bind(&last.path) {
                Ok(()) => Answer::Value(0),
                Err(e) => errno_of(e),
            };
        }
        let place = match super::locate(tid, &last, false) {
            Ok(p) => p,
            Err(e) => return Answer::Errno(e),
        };
        if let Some(real) = &place.real
            && self.walls.caches.iter().any(|c| real.starts_with(c))
        {
            return self.refuse(
                real,
                &place.name,
                "a unix socket in a cache shared with the other clients' runs (decision 0107): \
                 bind it in /tmp or the project",
            );
        }
        self.at_place(place, Kind::File, |dir, name| {
            use std::os::unix::ffi::OsStrExt;
            let mut addr = (libc::AF_UNIX as u16).to_ne_bytes().to_vec();
            addr.extend_from_slice(name.as_bytes());
            // A path that fills `sun_path` needs no NUL (the kernel ends it).
            if addr.len() < std::mem::size_of::<libc::sockaddr_un>() {
                addr.push(0);
            }
            // By its final name from the located folder: this thread's working folder is its
            // own (it unshared CLONE_FS) and goes back to `/` at once.
            rustix::process::fchdir(dir)?;
            let r = bind(&addr);
            let _ = rustix::process::chdir("/");
            r
        })
    }
}

/// A copy of the caller's descriptor `fd`: from the calling thread's own table (Linux 6.9+),
/// else its thread group's (the same table unless the thread was made without
/// `CLONE_FILES`).
fn socket_of(tid: u32, fd: i32) -> Result<OwnedFd, i32> {
    let pidfd = match crate::sys::pidfd_open_thread(tid as libc::pid_t) {
        Ok(p) => p,
        Err(_) => {
            let tgid = read_tgid(tid).ok_or(libc::ESRCH)?;
            crate::sys::pidfd_open(tgid).map_err(|_| libc::ESRCH)?
        }
    };
    crate::sys::seccomp_notify::pidfd_getfd(&pidfd, fd).map_err(|e| {
        crate::sys::errno_of(&e)
            .map(|n| if n == libc::EBADF { libc::EBADF } else { libc::EPERM })
            .unwrap_or(libc::EBADF)
    })
}
