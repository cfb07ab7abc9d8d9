//! A notified call as the init reads it from `seccomp_data`: which call, its directory
//! arguments as given, and its path arguments as addresses in the command's memory (read
//! later, once, by the supervisor).

/// A decoded call: directory arguments as given (`AT_FDCWD` or a descriptor of the command),
/// path arguments as addresses in the command's memory.
pub(super) enum Call {
    Open {
        dir: i32,
        path: u64,
        flags: i32,
        mode: u32,
    },
    Mkdir {
        dir: i32,
        path: u64,
        mode: u32,
    },
    Mknod {
        dir: i32,
        path: u64,
        mode: u32,
        dev: u64,
    },
    Rename {
        odir: i32,
        old: u64,
        ndir: i32,
        new: u64,
        flags: u32,
    },
    Link {
        odir: i32,
        old: u64,
        ndir: i32,
        new: u64,
        flags: i32,
    },
    Symlink {
        target: u64,
        ndir: i32,
        new: u64,
    },
    /// `truncate(2)` by path: a write, checked as an open for writing is (decision 0079).
    Truncate {
        path: u64,
        length: u64,
    },
    /// `bind(2)`: a unix socket's path is a new name (`bind.rs`).
    Bind {
        fd: i32,
        addr: u64,
        len: u32,
    },
}

pub(super) fn decode(nr: libc::c_long, a: [u64; 6]) -> Option<Call> {
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
        libc::SYS_truncate => Call::Truncate { path: a[0], length: a[1] },
        libc::SYS_bind => Call::Bind { fd: fd(a[0]), addr: a[1], len: a[2] as u32 },
        _ => return None,
    })
}
