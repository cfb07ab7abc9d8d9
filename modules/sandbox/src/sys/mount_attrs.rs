//! Mounts and their attributes: `mount`, the new mount API's `mount_setattr` (read-only,
//! nosuid, nodev, id-mapped, recursively or on a detached tree), `pivot_root`, detaching.

use super::{check, cstr, errno};
use anyhow::Result;
use std::ffi::CString;
use std::os::fd::AsRawFd;
use std::path::Path;

pub fn mount(
    src: Option<&Path>,
    target: &Path,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> Result<()> {
    let src_c = src.map(cstr).transpose()?;
    let target_c = cstr(target)?;
    let fstype_c = fstype.map(cstr).transpose()?;
    let data_c = data.map(cstr).transpose()?;
    let ptr = |c: &Option<CString>| c.as_ref().map_or(std::ptr::null(), |c| c.as_ptr());
    // SAFETY: every pointer is a NUL-terminated string that outlives the call, or null.
    let ret = unsafe {
        libc::mount(
            ptr(&src_c),
            target_c.as_ptr(),
            ptr(&fstype_c),
            flags,
            ptr(&data_c).cast::<libc::c_void>(),
        )
    };
    let what =
        src.map_or_else(|| fstype.unwrap_or("none").to_string(), |s| s.display().to_string());
    check(ret.into(), format_args!("mount {what} on {}", target.display())).map(drop)
}

#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

const MOUNT_ATTR_RDONLY: u64 = 0x1;
const AT_RECURSIVE: libc::c_int = 0x8000;

const MOUNT_ATTR_NOSUID: u64 = 0x2;
const MOUNT_ATTR_NODEV: u64 = 0x4;

/// Makes the mount at `path` (and, when `recursive`, every mount below it) read-only. Unlike a remount, this
/// changes only the read-only bit, so the locked nosuid/nodev/noexec flags of a mount that came
/// from the parent user namespace stay as they are (a remount that dropped them is refused).
pub fn make_read_only(path: &Path, recursive: bool) -> Result<()> {
    set_attrs(path, MOUNT_ATTR_RDONLY, recursive)
}

fn set_attrs(path: &Path, attrs: u64, recursive: bool) -> Result<()> {
    let c = cstr(path)?;
    let attr = MountAttr { attr_set: attrs, attr_clr: 0, propagation: 0, userns_fd: 0 };
    // SAFETY: `c` is a NUL-terminated path and `attr` a mount_attr of the size passed.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            c.as_ptr(),
            if recursive { AT_RECURSIVE } else { 0 },
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    check(ret, format_args!("mount_setattr({attrs:#x}) {}", path.display())).map(drop)
}

/// Makes the detached mount behind `tree` (from `open_tree`) read-only before it is attached.
pub fn make_fd_read_only(tree: &impl AsRawFd) -> Result<()> {
    set_fd_attrs(tree, MOUNT_ATTR_RDONLY, 0)
}

/// [`make_fd_read_only`] for a detached tree and every mount in it.
pub fn make_tree_read_only(tree: &impl AsRawFd) -> Result<()> {
    set_fd_attrs(tree, MOUNT_ATTR_RDONLY, AT_RECURSIVE)
}

/// A root's detached tree, every mount in it, made nosuid and nodev (a set-uid program or a
/// device node that happens to lie in a root is inert inside the sandbox), and read-only when
/// asked, before it is attached: the command never sees it otherwise.
pub fn set_root_attrs(tree: &impl AsRawFd, read_only: bool) -> Result<()> {
    let ro = if read_only { MOUNT_ATTR_RDONLY } else { 0 };
    set_fd_attrs(tree, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | ro, AT_RECURSIVE)
}

fn set_fd_attrs(tree: &impl AsRawFd, attrs: u64, flags: libc::c_int) -> Result<()> {
    let attr = MountAttr { attr_set: attrs, attr_clr: 0, propagation: 0, userns_fd: 0 };
    // SAFETY: a valid mount fd, an empty NUL-terminated path with AT_EMPTY_PATH, and a
    // mount_attr of the size passed.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            tree.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH | flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    check(ret, format_args!("mount_setattr({attrs:#x}) of a detached mount")).map(drop)
}

/// `MOUNT_ATTR_IDMAP` (Linux 5.12): the mount takes the id mapping of a user namespace.
const MOUNT_ATTR_IDMAP: u64 = 0x0010_0000;

/// A root's detached tree (from `open_tree` in the host's mount namespace), every mount in it,
/// id-mapped through the user namespace behind `userns` (its uid and gid maps say which owner
/// on disk the command sees as itself), made nosuid, nodev and private (no mount made on it
/// later reaches the host's peers), and read-only when asked, in one call: all or nothing.
/// The errno when the kernel refuses: EINVAL for a file system without id-mapped mounts (or
/// a kernel before 5.12: ENOSYS), EPERM without `CAP_SYS_ADMIN` in the host's namespace.
pub fn set_idmap_attrs(
    tree: &impl AsRawFd,
    userns: &impl AsRawFd,
    read_only: bool,
) -> std::result::Result<(), i32> {
    let ro = if read_only { MOUNT_ATTR_RDONLY } else { 0 };
    let attr = MountAttr {
        attr_set: MOUNT_ATTR_IDMAP | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | ro,
        attr_clr: 0,
        propagation: libc::MS_PRIVATE,
        userns_fd: userns.as_raw_fd() as u64,
    };
    // SAFETY: a valid mount fd, an empty NUL-terminated path with AT_EMPTY_PATH, and a
    // mount_attr of the size passed.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            tree.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH | AT_RECURSIVE,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if ret < 0 { Err(errno()) } else { Ok(()) }
}

pub fn pivot_root(new_root: &Path, put_old: &Path) -> Result<()> {
    let (a, b) = (cstr(new_root)?, cstr(put_old)?);
    // SAFETY: two NUL-terminated paths.
    let ret = unsafe { libc::syscall(libc::SYS_pivot_root, a.as_ptr(), b.as_ptr()) };
    check(ret, "pivot_root").map(drop)
}

pub fn umount_detach(path: &Path) -> Result<()> {
    let c = cstr(path)?;
    // SAFETY: a NUL-terminated path.
    let ret = unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
    check(ret.into(), format_args!("umount {}", path.display())).map(drop)
}
