//! The kernel's confined opens, beneath a pinned root: `openat2` with `RESOLVE_BENEATH` (or
//! an `O_NOFOLLOW` walk per component where it is missing), the stats and reopenings the
//! resolver builds on, and the path the kernel records for a descriptor.

use crate::{PathError, Result};
use rustix::fs::{AtFlags, Mode, OFlags, ResolveFlags, Stat};
use rustix::io::Errno;
use std::ffi::OsStr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// Beneath the starting folder, and no `/proc` magic link.
const RESOLVE: ResolveFlags = ResolveFlags::BENEATH.union(ResolveFlags::NO_MAGICLINKS);

pub(crate) fn openat2_beneath(
    dir: BorrowedFd<'_>,
    rel: &Path,
    flags: OFlags,
) -> std::result::Result<OwnedFd, Errno> {
    let flags = open_flags(flags);
    match rustix::fs::openat2(dir, rel, flags, Mode::empty(), RESOLVE) {
        Err(Errno::NOSYS) => walk_nofollow(dir, rel, flags),
        other => other,
    }
}

/// `openat2_beneath` that follows no symlink at all: `ELOOP` at the first one on the way (the
/// last component included); `ENOSYS` where the kernel has no openat2.
pub(crate) fn openat2_plain(
    dir: BorrowedFd<'_>,
    rel: &Path,
    flags: OFlags,
) -> std::result::Result<OwnedFd, Errno> {
    let how = RESOLVE.union(ResolveFlags::NO_SYMLINKS);
    rustix::fs::openat2(dir, rel, open_flags(flags), Mode::empty(), how)
}

/// Close-on-exec always, and no controlling terminal for real opens (openat2 refuses any flag
/// beside O_CLOEXEC/O_DIRECTORY/O_NOFOLLOW with O_PATH, with EINVAL).
pub(crate) fn open_flags(flags: OFlags) -> OFlags {
    if flags.contains(OFlags::PATH) {
        flags | OFlags::CLOEXEC
    } else {
        flags | OFlags::CLOEXEC | OFlags::NOCTTY
    }
}

/// Fallback for kernels without openat2: a component-by-component walk that follows no symlink
/// at all (stricter than openat2, which follows links that stay beneath the root).
pub(crate) fn walk_nofollow(
    dir: BorrowedFd<'_>,
    rel: &Path,
    flags: OFlags,
) -> std::result::Result<OwnedFd, Errno> {
    let comps: Vec<&OsStr> = rel
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n),
            _ => None,
        })
        .collect();
    let mut cur = rustix::fs::openat(
        dir,
        ".",
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    for (i, c) in comps.iter().enumerate() {
        let last = i + 1 == comps.len();
        let f = if last {
            flags | OFlags::NOFOLLOW
        } else {
            OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
        };
        cur = rustix::fs::openat(cur.as_fd(), *c, f, Mode::empty())?;
    }
    if comps.is_empty() {
        cur = rustix::fs::openat(dir, ".", flags, Mode::empty())?;
    }
    Ok(cur)
}

pub(crate) fn fstat(fd: &OwnedFd, shown: &Path) -> Result<Stat> {
    rustix::fs::fstat(fd).map_err(|e| PathError::Io {
        path: shown.to_path_buf(),
        op: "stat",
        source: e.into(),
    })
}

pub(crate) fn statat_nofollow(
    dir: BorrowedFd<'_>,
    name: &OsStr,
) -> std::result::Result<Stat, Errno> {
    rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
}

/// The path the kernel records for an open descriptor.
pub fn fd_path(fd: BorrowedFd<'_>) -> Option<PathBuf> {
    use std::os::fd::AsRawFd;
    let link = format!("/proc/self/fd/{}", fd.as_raw_fd());
    let target = std::fs::read_link(link).ok()?;
    // A deleted or unreachable object is reported with a suffix or without a leading slash.
    let bytes = target.as_os_str().as_bytes();
    if !bytes.starts_with(b"/") || bytes.ends_with(b" (deleted)") {
        return None;
    }
    Some(target)
}

/// Reopens the object an `O_PATH` descriptor names, with new flags.
pub(crate) fn reopen(fd: BorrowedFd<'_>, flags: OFlags) -> std::result::Result<OwnedFd, Errno> {
    use std::os::fd::AsRawFd;
    let link = format!("/proc/self/fd/{}", fd.as_raw_fd());
    rustix::fs::open(link.as_str(), flags | OFlags::CLOEXEC | OFlags::NOCTTY, Mode::empty())
}
