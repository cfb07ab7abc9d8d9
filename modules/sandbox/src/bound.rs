//! The unix sockets bound in one network namespace, named by the identity of their files
//! (decision 0107). A pathname unix socket is reachable by its file from any namespace, so the
//! file alone does not say whose it is; but the kernel lists a socket in the namespace it was
//! made in, and `sock_diag`'s `UDIAG_SHOW_VFS` gives the device and inode of its file. A
//! socket file in the roots whose socket is not listed in a client's namespace is another's:
//! the host's (a person's tmux, another daemon's sessions, a tool's IPC) or another client's.
//!
//! The netlink socket asked is made inside the namespace by `hands __netns-listen` (the
//! daemon cannot enter it, [`crate::listen`]); a socket keeps the namespace it was made in.

use std::collections::HashSet;
use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};

const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_DUMP: u16 = 0x300;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const UDIAG_SHOW_VFS: u32 = 0x2;
const UNIX_DIAG_VFS: u16 = 1;
/// `struct nlmsghdr`, `struct unix_diag_req` and `struct unix_diag_msg`: their sizes.
const HEADER: usize = 16;
const REQUEST: usize = 24;
const MESSAGE: usize = 16;

/// A socket that asks about the unix sockets of the namespace it is made in.
pub fn diag_socket() -> io::Result<OwnedFd> {
    use rustix::net::{AddressFamily, SocketFlags, SocketType, netlink};
    let fd = rustix::net::socket_with(
        AddressFamily::NETLINK,
        SocketType::DGRAM,
        SocketFlags::CLOEXEC,
        Some(netlink::SOCK_DIAG),
    )?;
    Ok(fd)
}

/// The device and inode (its low 32 bits: all the kernel gives) of the file of every unix
/// socket bound in the namespace of `diag`, as `stat` spells them.
pub fn bound(diag: BorrowedFd<'_>, seq: u32) -> io::Result<HashSet<(u64, u32)>> {
    let mut req = Vec::with_capacity(HEADER + REQUEST);
    req.extend(((HEADER + REQUEST) as u32).to_ne_bytes());
    req.extend(SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    req.extend((NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    req.extend(seq.to_ne_bytes());
    req.extend(0u32.to_ne_bytes());
    // unix_diag_req: family, protocol, padding, every state, any inode, the files, any cookie.
    req.extend([libc::AF_UNIX as u8, 0, 0, 0]);
    req.extend(u32::MAX.to_ne_bytes());
    req.extend(0u32.to_ne_bytes());
    req.extend(UDIAG_SHOW_VFS.to_ne_bytes());
    req.extend([0xff; 8]);
    rustix::net::send(diag, &req, rustix::net::SendFlags::empty())?;
    let mut found = HashSet::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let (n, _) = rustix::net::recv(diag, &mut buf[..], rustix::net::RecvFlags::empty())?;
        let mut at = 0;
        while at + HEADER <= n {
            let len = u32_at(&buf, at) as usize;
            let kind = u16::from_ne_bytes([buf[at + 4], buf[at + 5]]);
            let this_seq = u32_at(&buf, at + 8);
            if len < HEADER || at + len > n {
                return Err(io::Error::other("a malformed sock_diag answer"));
            }
            if this_seq == seq {
                match kind {
                    NLMSG_DONE => return Ok(found),
                    NLMSG_ERROR if len >= HEADER + 4 => {
                        let errno = i32::from_ne_bytes(word(&buf, at + HEADER));
                        return Err(io::Error::from_raw_os_error(-errno));
                    }
                    SOCK_DIAG_BY_FAMILY => vfs_of(&buf[at + HEADER..at + len], &mut found),
                    _ => {}
                }
            }
            at += (len + 3) & !3;
        }
    }
}

/// Adds the file identity a `unix_diag_msg`'s attributes carry, if any.
fn vfs_of(msg: &[u8], found: &mut HashSet<(u64, u32)>) {
    let mut at = MESSAGE;
    while at + 4 <= msg.len() {
        let len = usize::from(u16::from_ne_bytes([msg[at], msg[at + 1]]));
        let kind = u16::from_ne_bytes([msg[at + 2], msg[at + 3]]);
        if len < 4 || at + len > msg.len() {
            return;
        }
        if kind == UNIX_DIAG_VFS && len >= 12 {
            let ino = u32_at(msg, at + 4);
            let dev = u32_at(msg, at + 8);
            // The kernel's own `dev_t` (major above bit 20), which `stat` encodes otherwise.
            found.insert((rustix::fs::makedev(dev >> 20, dev & 0xf_ffff), ino));
        }
        at += (len + 3) & !3;
    }
}

fn word(b: &[u8], at: usize) -> [u8; 4] {
    [b[at], b[at + 1], b[at + 2], b[at + 3]]
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(word(b, at))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;
    use std::os::unix::fs::MetadataExt;

    /// A socket bound here is listed with its file's identity; a plain file is not.
    #[test]
    fn a_bound_socket_is_listed_by_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        std::fs::write(dir.path().join("plain"), b"").unwrap();
        let diag = diag_socket().unwrap();
        let found = bound(diag.as_fd(), 7).unwrap();
        let m = std::fs::metadata(&path).unwrap();
        assert!(found.contains(&(m.dev(), m.ino() as u32)), "{found:?}");
        let p = std::fs::metadata(dir.path().join("plain")).unwrap();
        assert!(!found.contains(&(p.dev(), p.ino() as u32)));
        // Asked again on the same socket: the same answer.
        assert_eq!(bound(diag.as_fd(), 8).unwrap(), found);
    }
}
