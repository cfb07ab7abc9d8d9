//! The command's home: a fresh tmpfs for every run, into which only the spec's `keep` folders
//! (the caches of `sandbox-profiles/home-carried.txt`) are bound from the home folder on the
//! host. Nothing else a run writes in its home — `.gitconfig`, `.bashrc`, `.config/…`,
//! `.local/bin` — is there for the next run (decision 0068).

use super::{remask, sys};
use anyhow::{Context, Result};
use rustix::fs::{AtFlags, Mode, OFlags};
use std::os::fd::OwnedFd;
use std::path::{Component, Path};

/// Mounts a fresh home at `inside` (the new root's view of the spec's home) and binds each
/// `keep` folder of `store` (the host's home folder, opened and checked by the caller) into it. A kept
/// folder is reached component by component without following a link and made where it is
/// missing, owned by the command's user; one whose way holds a link or a file is not carried
/// (the run gets an empty folder there): a link planted by a command of an older version must
/// not bind some other folder of the host into the sandbox.
pub(super) fn build(
    store: &OwnedFd,
    inside: &Path,
    keep: &[std::path::PathBuf],
    (uid, gid): (libc::uid_t, libc::gid_t),
    size_mb: u64,
) -> Result<()> {
    std::fs::create_dir_all(inside)
        .with_context(|| format!("cannot create {}", inside.display()))?;
    let data = format!("mode=0700,size={}m,uid={uid},gid={gid}", size_mb.max(1));
    sys::mount(
        Some(Path::new("tmpfs")),
        inside,
        Some("tmpfs"),
        libc::MS_NOSUID | libc::MS_NODEV,
        Some(&data),
    )?;
    for rel in keep {
        let Some(from) = carried(store, rel, (uid, gid))? else { continue };
        let to = inside.join(rel);
        for dir in to
            .ancestors()
            .take_while(|a| a.starts_with(inside) && *a != inside)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
        {
            if std::fs::symlink_metadata(dir).is_err() {
                std::fs::create_dir(dir)
                    .with_context(|| format!("cannot create {}", dir.display()))?;
                sys::chown(dir, uid, gid)?;
            }
        }
        let at = rustix::fs::open(
            &to,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .with_context(|| format!("cannot open {}", to.display()))?;
        let what = || format!("cannot carry {} into the command's home", rel.display());
        let tree = remask::clone_tree(&from).with_context(what)?;
        sys::set_root_attrs(&tree, false).with_context(what)?;
        remask::attach(&tree, &at).with_context(what)?;
    }
    Ok(())
}

/// The folder `rel` below `store` as an `O_PATH` descriptor, made (owned by `ids`) where it
/// is missing; `None` when a link, or anything but a folder, lies on its way.
fn carried(
    store: &OwnedFd,
    rel: &Path,
    (uid, gid): (libc::uid_t, libc::gid_t),
) -> Result<Option<OwnedFd>> {
    let mut cur = rustix::fs::openat(
        store,
        ".",
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .context("cannot open the sandbox home")?;
    for c in rel.components() {
        let Component::Normal(name) = c else { return Ok(None) };
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        cur = match rustix::fs::openat(&cur, name, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::NOENT) => {
                match rustix::fs::mkdirat(&cur, name, Mode::from_raw_mode(0o700)) {
                    Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                    Err(e) => {
                        return Err(e).with_context(|| {
                            format!("cannot make {} in the sandbox home", rel.display())
                        });
                    }
                }
                // The folder was made by the launcher (root, for a root daemon): the command's.
                rustix::fs::chownat(
                    &cur,
                    name,
                    Some(rustix::fs::Uid::from_raw(uid)),
                    Some(rustix::fs::Gid::from_raw(gid)),
                    AtFlags::SYMLINK_NOFOLLOW,
                )
                .with_context(|| format!("cannot give {} to the command's user", rel.display()))?;
                match rustix::fs::openat(&cur, name, flags, Mode::empty()) {
                    Ok(fd) => fd,
                    Err(rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR) => return Ok(None),
                    Err(e) => {
                        return Err(e).with_context(|| format!("cannot open {}", rel.display()));
                    }
                }
            }
            Err(rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR) => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("cannot open {}", rel.display())),
        };
    }
    Ok(Some(cur))
}
