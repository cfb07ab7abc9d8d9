//! Users from the passwd database (a uid and gid by name, a home by uid), and a path's owner.

use super::{check, cstr};
use anyhow::Result;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Changes the owner of `path` (not following a symlink).
pub fn chown(path: &Path, uid: libc::uid_t, gid: libc::gid_t) -> Result<()> {
    let c = cstr(path)?;
    // SAFETY: a NUL-terminated path and integer ids.
    let ret = unsafe { libc::lchown(c.as_ptr(), uid, gid) };
    check(ret.into(), format_args!("chown {}", path.display())).map(drop)
}

/// The uid and primary gid of the user `name` (or of the uid `name` is), from the passwd
/// database; a uid without an entry keeps its number as the gid.
pub fn lookup_user(name: &str) -> Option<(libc::uid_t, libc::gid_t)> {
    let mut buf = vec![0u8; 16 * 1024];
    // SAFETY: passwd is plain data, filled by the call.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    let ret = match name.parse::<libc::uid_t>() {
        // SAFETY: valid out-pointers and a buffer of the length passed.
        Ok(uid) => unsafe {
            libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr().cast(), buf.len(), &mut found)
        },
        Err(_) => {
            let c = cstr(name).ok()?;
            // SAFETY: as above, and a NUL-terminated name.
            unsafe {
                libc::getpwnam_r(
                    c.as_ptr(),
                    &mut pw,
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    &mut found,
                )
            }
        }
    };
    if ret == 0 && !found.is_null() {
        return Some((pw.pw_uid, pw.pw_gid));
    }
    name.parse::<libc::uid_t>().ok().map(|uid| (uid, uid))
}

/// The home folder the passwd database gives `uid` (the one a login shell starts in, whatever
/// `HOME` says), when it has an entry with one.
pub fn passwd_home(uid: libc::uid_t) -> Option<PathBuf> {
    let mut buf = vec![0u8; 16 * 1024];
    // SAFETY: passwd is plain data, filled by the call.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: valid out-pointers and a buffer of the length passed.
    let ret =
        unsafe { libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr().cast(), buf.len(), &mut found) };
    if ret != 0 || found.is_null() || pw.pw_dir.is_null() {
        return None;
    }
    // SAFETY: a NUL-terminated string inside `buf`, which lives until the copy below.
    let dir = unsafe { std::ffi::CStr::from_ptr(pw.pw_dir) };
    let dir = PathBuf::from(OsStr::from_bytes(dir.to_bytes()));
    dir.is_absolute().then_some(dir)
}
