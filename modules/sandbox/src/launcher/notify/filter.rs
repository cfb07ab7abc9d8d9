//! The BPF filter the command installs before it execs: every call that can make a new name
//! goes to the init as a user notification; `openat2` gets ENOSYS (see `notify.rs`).

use anyhow::Result;
use std::os::fd::OwnedFd;

/// `AUDIT_ARCH_*` of the architectures the filter is built for.
#[cfg(target_arch = "x86_64")]
const ARCH: u32 = 0xc000_003e;
#[cfg(target_arch = "aarch64")]
const ARCH: u32 = 0xc000_00b7;

/// Calls sent to the init whatever their arguments. `umask` makes no name: the init only notes
/// that the command changed its umask, and lets the call run (see `supervisor::Umask`).
fn notified() -> Vec<libc::c_long> {
    let mut v = vec![
        libc::SYS_umask,
        libc::SYS_mkdirat,
        libc::SYS_mknodat,
        libc::SYS_renameat2,
        libc::SYS_linkat,
        libc::SYS_symlinkat,
        libc::SYS_truncate,
        // A unix socket's path is a name (a git dir's `refs` and `objects` can be sockets).
        libc::SYS_bind,
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

/// The filter, as classic BPF: foreign architectures pass (the main filter kills them). An open
/// that writes is sent as well as one that creates: a protected file whose read-only bind the
/// host took off by renaming over it is refused by its real path (decision 0079).
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
        p.push(ins(JSET, 0, 1, open_mask()));
        p.push(ins(RET, 0, 0, notify));
        p.push(ins(RET, 0, 0, allow));
    }
    p.push(ins(RET, 0, 0, allow));
    p
}

/// The open flags that send an open to the init.
fn open_mask() -> u32 {
    (libc::O_CREAT | libc::O_WRONLY | libc::O_RDWR | libc::O_TRUNC) as u32
}

/// Installs the filter with a new listener (close-on-exec). With the kernel's
/// `WAIT_KILLABLE_RECV` (5.19+), a signal to the command while the init works on its call
/// does not restart the call behind the init's back.
pub(super) fn install_filter() -> Result<OwnedFd> {
    let prog = program();
    let mut flags =
        libc::SECCOMP_FILTER_FLAG_NEW_LISTENER | libc::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV;
    loop {
        let errno = match crate::sys::seccomp_notify::install_filter(&prog, flags) {
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
