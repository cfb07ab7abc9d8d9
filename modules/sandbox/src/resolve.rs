//! One resolution (SPEC §3): a path opened component by component from a folder's descriptor,
//! no symbolic link followed on the way or at its end, and the identity (device, inode) of what
//! it names. The check that admits a path (a root pinned at startup, a `needs.write` path before
//! a person is asked, the walk that finds protected and masked paths) takes that identity; the
//! launcher opens the same path the same way and refuses to start when the entry there now is
//! another. Nothing that came from a check is resolved again by name.

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;
use serde::{Deserialize, Serialize};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

/// What a file or folder is, whatever name it has now: its device and inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Identity {
    pub dev: u64,
    pub ino: u64,
}

impl Identity {
    /// The identity of what `fd` refers to (an `O_PATH` descriptor works).
    pub fn of(fd: impl AsFd) -> std::io::Result<Identity> {
        let st = rustix::fs::fstat(fd)?;
        Ok(Identity { dev: st.st_dev, ino: st.st_ino })
    }
}

impl std::fmt::Display for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "device {}, inode {}", self.dev, self.ino)
    }
}

/// What [`open_nofollow`] found at a path.
#[derive(Debug)]
pub enum Target {
    /// The path's own entry (never a symlink) as an `O_PATH` descriptor, and whether it is a
    /// folder.
    Found(OwnedFd, bool),
    /// Nothing there (or a file where a folder should be on the way).
    Absent,
    /// The entry itself, or a folder on the way, is a symbolic link now: here.
    Linked(PathBuf),
}

/// Opens `path` (absolute and clean: no `.`, `..` or empty component) from `from` (a folder's
/// descriptor standing for `/`), every component `O_PATH | O_NOFOLLOW` (the folders on the way
/// also `O_DIRECTORY`): a folder swapped for a symlink is reported, never followed. `from` is
/// the host's `/` for the daemon's checks, and the scratch root of the launcher, whose
/// `oldroot` is the host's.
pub fn open_nofollow(from: impl AsFd, path: &Path) -> std::io::Result<Target> {
    let names: Vec<&std::ffi::OsStr> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n),
            _ => None,
        })
        .collect();
    let dup = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let mut cur = rustix::fs::openat(from.as_fd(), ".", dup, Mode::empty())?;
    let mut walked = PathBuf::from("/");
    for (i, name) in names.iter().enumerate() {
        walked.push(name);
        let mut flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        if i + 1 < names.len() {
            flags |= OFlags::DIRECTORY;
        }
        cur = match rustix::fs::openat(&cur, *name, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => return Ok(Target::Absent),
            Err(Errno::LOOP | Errno::NOTDIR) => {
                let link = rustix::fs::statat(&cur, *name, AtFlags::SYMLINK_NOFOLLOW)
                    .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Symlink);
                return Ok(if link { Target::Linked(walked) } else { Target::Absent });
            }
            Err(e) => return Err(e.into()),
        };
    }
    let st = rustix::fs::fstat(&cur)?;
    Ok(match FileType::from_raw_mode(st.st_mode) {
        // `O_PATH | O_NOFOLLOW` opens a symlink itself.
        FileType::Symlink => Target::Linked(walked),
        FileType::Directory => Target::Found(cur, true),
        _ => Target::Found(cur, false),
    })
}

/// The host's `/`, to open a path from with [`open_nofollow`].
pub fn host_root() -> std::io::Result<OwnedFd> {
    Ok(rustix::fs::open("/", OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_on_the_way_or_at_the_end_is_reported_never_followed() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(base.join("real/inner")).unwrap();
        std::os::unix::fs::symlink("real", base.join("link")).unwrap();
        let root = host_root().unwrap();
        let Target::Found(fd, true) = open_nofollow(&root, &base.join("real/inner")).unwrap()
        else {
            panic!("a real folder is found");
        };
        let meta = std::fs::metadata(base.join("real/inner")).unwrap();
        use std::os::unix::fs::MetadataExt;
        assert_eq!(Identity::of(&fd).unwrap(), Identity { dev: meta.dev(), ino: meta.ino() });
        for (p, at) in [("link/inner", "link"), ("link", "link")] {
            match open_nofollow(&root, &base.join(p)).unwrap() {
                Target::Linked(l) => assert_eq!(l, base.join(at)),
                other => panic!("{p}: {other:?}"),
            }
        }
        assert!(matches!(open_nofollow(&root, &base.join("none/x")).unwrap(), Target::Absent));
    }
}
