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
            // A folder of another user's on the way (the command's user changed since it was
            // made, and [`hand_over`] could not give it on): the run gets an empty one rather
            // than no sandbox at all.
            Err(rustix::io::Errno::ACCESS) => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("cannot open {}", rel.display())),
        };
    }
    Ok(Some(cur))
}

/// Gives the folders on the way to each `keep` folder of `store` (the host's home folder of
/// the commands) to the command's user `ids` where they belong to another: a root daemon's
/// commands run as `sandbox.run_as`, by default the owner of the first writable root, and a
/// project given to another owner or group since (a `chown` on a build box) changed who they
/// run as. The launcher, root only in the commands' user namespace, may not open a folder
/// whose group that namespace does not map: every command was refused (found by a root daemon
/// restarted after `chown nobody:root` of its `nobody:nogroup` project: "cannot open
/// .cargo/registry: Permission denied"). Only those folders, never their contents, and never
/// through a link (one on the way stops the walk: the launcher does not carry it either).
/// Returns the `keep` folders whose owner was another user: their contents still are, which
/// the command's tools may fail to write; the daemon names them.
pub fn hand_over(
    store: &Path,
    keep: &[std::path::PathBuf],
    (uid, gid): (libc::uid_t, libc::gid_t),
) -> Result<Vec<std::path::PathBuf>> {
    let dir = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let top = rustix::fs::open(store, dir, Mode::empty())
        .with_context(|| format!("cannot open the sandbox home {}", store.display()))?;
    let mut others = Vec::new();
    for rel in keep {
        let mut cur = None::<OwnedFd>;
        let mut other = false;
        for c in rel.components() {
            let Component::Normal(name) = c else { break };
            let at = cur.as_ref().unwrap_or(&top);
            let Ok(fd) = rustix::fs::openat(at, name, dir, Mode::empty()) else { break };
            let st = rustix::fs::fstat(&fd)
                .with_context(|| format!("cannot read {}", store.join(rel).display()))?;
            if (st.st_uid, st.st_gid) != (uid, gid) {
                other |= st.st_uid != uid;
                rustix::fs::chownat(
                    &fd,
                    "",
                    Some(rustix::fs::Uid::from_raw(uid)),
                    Some(rustix::fs::Gid::from_raw(gid)),
                    AtFlags::EMPTY_PATH,
                )
                .with_context(|| {
                    format!("cannot give {} to the commands' user", store.join(rel).display())
                })?;
            }
            cur = Some(fd);
        }
        if other {
            others.push(store.join(rel));
        }
    }
    Ok(others)
}
