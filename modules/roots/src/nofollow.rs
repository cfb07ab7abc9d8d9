//! What the daemon creates itself beneath a root (a session's log folder, a command's output
//! file), following no symlink at all: a folder on the way that a command swapped for a
//! symlink makes it fail, so nothing lands outside the root.

use crate::Resolver;
use crate::openat::{open_flags, openat2_plain, walk_nofollow};
use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;
use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::path::{Component, Path};

impl Resolver {
    /// Opens the folder that holds `abs` (absolute, clean) beneath the most specific root that
    /// contains it, following no symlink at all (`RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`, or
    /// `O_NOFOLLOW | O_DIRECTORY` per component): a folder on the way that a command swapped for
    /// a symlink makes it fail, so what the daemon creates there cannot land outside the root.
    /// Returns the folder's descriptor and the last component's name.
    pub fn open_parent_nofollow(&self, abs: &Path) -> std::io::Result<(OwnedFd, OsString)> {
        let bad = || std::io::Error::new(std::io::ErrorKind::InvalidInput, "not below a root");
        let root = self.root_of(abs).ok_or_else(bad)?;
        let rel = abs.strip_prefix(&self.roots[root].path).map_err(|_| bad())?;
        if rel.components().any(|c| !matches!(c, Component::Normal(_))) {
            return Err(bad());
        }
        let name = rel.file_name().ok_or_else(bad)?.to_os_string();
        let parent = rel.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let flags = OFlags::PATH | OFlags::DIRECTORY;
        let fd = match openat2_plain(self.roots[root].fd(), parent, flags) {
            Err(Errno::NOSYS) => walk_nofollow(self.roots[root].fd(), parent, open_flags(flags)),
            other => other,
        }?;
        Ok((fd, name))
    }

    /// Creates the folder `abs` (mode `mode`) through [`Resolver::open_parent_nofollow`],
    /// never following a symlink, never replacing anything. `Ok(false)` when something already
    /// has that name.
    pub fn create_dir_nofollow(&self, abs: &Path, mode: u32) -> std::io::Result<bool> {
        let (dir, name) = self.open_parent_nofollow(abs)?;
        match rustix::fs::mkdirat(&dir, &name, Mode::from_raw_mode(mode)) {
            Ok(()) => Ok(true),
            Err(Errno::EXIST) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }
}
