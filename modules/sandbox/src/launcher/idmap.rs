//! Id-mapped roots (SPEC §5.2 item 6, decision 0061). A daemon run as root runs commands as
//! `sandbox.run_as` (R), never as root; a root owned by another user (O: root itself in a
//! root-owned checkout on a build box or in a container) is then bound through an id-mapped
//! mount, so that the command sees O's files as its own and what it creates there belongs to O
//! on disk: `touch`, `git commit`, `cargo build` work as they would for the project's owner,
//! while a file outside the roots that only root may read stays unreadable (the command is R,
//! not root, everywhere else).
//!
//! The composition of the maps, for a file on disk owned by uid k in a root with owner O:
//!
//! 1. The file system's own idmapping is the host's (ext4, xfs, btrfs, tmpfs…): k as stored.
//! 2. The mount's idmapping, the maps of a helper user namespace made here (its one process
//!    exits at once; the descriptor keeps the namespace): `O R 1`, and every other id to
//!    itself except R, which has no mapping. The kernel reads an on-disk id as an id *inside*
//!    that namespace and shows the one *outside*: O shows as R, any other k as k, and an
//!    on-disk R as the overflow id (owner of nothing). What R creates is stored as O; an id
//!    the map cannot send back (root, O's own kernel id) cannot create anything there.
//! 3. The sandbox's user namespace maps root and R to themselves (`mounts::write_maps`): the
//!    command, kernel id R, sees itself as R (`id -u`) and O's files as R's.
//!
//! Gids the same way (O's group shows as R's group). Only the root's tree is id-mapped, and
//! only when O is not R; the system folders, the home and `/tmp` are bound as they are.
//!
//! The mapping needs `CAP_SYS_ADMIN` in the host's user namespace (the file system's), which
//! the init, root of a new user namespace only, lacks: the launcher — still the host's root —
//! clones and maps each such root before it clones the init, which inherits the detached
//! trees and attaches them where it would have bound the root (`mounts::bind_checked`). Where
//! the kernel or the file system refuses (before 5.12, or a file system without id-mapped
//! mounts), the root is bound as before and the command can write there only what its modes
//! allow: the daemon's self-test and `hands doctor` say so beforehand ([`support`]), naming
//! `sandbox.run_as` as the choice to make.

use super::{Ids, Spec, remask, sys};
use crate::resolve::{Identity, Target};
use anyhow::{Context, Result};
use std::collections::BTreeMap;
use std::os::fd::OwnedFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// A root the launcher cloned and id-mapped, for the init to attach.
pub(super) struct Premade {
    /// The detached tree, id-mapped, nosuid, nodev, private (and read-only unless writable).
    pub tree: OwnedFd,
    pub is_dir: bool,
    /// The identity of the root it was cloned from (checked against the daemon's check).
    pub id: Identity,
}

/// A uid (or gid) map that sends `owner` to `to` and every other id to itself, except `to`,
/// which has none; the identity when they are the same id.
pub(crate) fn map_text(owner: u32, to: u32) -> String {
    // Ids run from 0 up to, not including, u32::MAX (the invalid id).
    const END: u64 = u32::MAX as u64;
    if owner == to {
        return format!("0 0 {END}\n");
    }
    let mut text = format!("{owner} {to} 1\n");
    let mut holes = [u64::from(owner), u64::from(to)];
    holes.sort_unstable();
    let mut start = 0u64;
    for hole in holes {
        if hole > start {
            text.push_str(&format!("{start} {start} {}\n", hole - start));
        }
        start = hole + 1;
    }
    if END > start {
        text.push_str(&format!("{start} {start} {}\n", END - start));
    }
    text
}

/// A user namespace whose maps send `owner` to `to` (see [`map_text`]), as a descriptor of
/// `/proc/PID/ns/user`: a child is cloned into a new user namespace and waits on a pipe while
/// this process (the host's root) writes its maps and opens the namespace, then exits.
fn userns(owner: Ids, to: Ids) -> Result<OwnedFd> {
    let (wait_read, wait_write) = sys::pipe()?;
    let pid = sys::clone_into(libc::CLONE_NEWUSER)
        .context("cannot make a user namespace for an id-mapped root")?;
    if pid == 0 {
        // Only async-signal-safe calls here (the daemon may have threads): close, read, _exit.
        drop(wait_write);
        sys::read_byte(&wait_read);
        sys::exit_now(0);
    }
    drop(wait_read);
    #[expect(
        clippy::disallowed_methods,
        reason = "procfs: the new user namespace's maps and its ns/user link"
    )]
    let made = (|| -> Result<OwnedFd> {
        let write = |file: &str, text: String| {
            let path = format!("/proc/{pid}/{file}");
            std::fs::write(&path, text).with_context(|| format!("cannot write {path}"))
        };
        write("uid_map", map_text(owner.uid, to.uid))?;
        write("gid_map", map_text(owner.gid, to.gid))?;
        let ns = format!("/proc/{pid}/ns/user");
        Ok(std::fs::File::open(&ns).with_context(|| format!("cannot open {ns}"))?.into())
    })();
    drop(wait_write);
    let _ = sys::wait(pid);
    made
}

/// Why the kernel refused to id-map a mount, in words, from its errno.
fn refusal(errno: i32) -> String {
    let why = std::io::Error::from_raw_os_error(errno);
    match errno {
        libc::EINVAL => format!(
            "its file system does not support id-mapped mounts ({why}; ext4, xfs, btrfs and \
             vfat do, tmpfs on Linux 6.3+, overlayfs on 5.19+ when mounted on the host, but not a \
             container's own overlay root: bind-mount the project into the container instead)"
        ),
        libc::ENOSYS => format!("this kernel has no id-mapped mounts ({why}; Linux 5.12+)"),
        libc::EPERM => format!(
            "the kernel refused ({why}): id-mapped mounts need CAP_SYS_ADMIN in the host's user \
             namespace, which a container's root does not have"
        ),
        _ => format!("the kernel refused ({why})"),
    }
}

/// Why a root cannot be bound id-mapped: the step of the trial that failed.
#[derive(Debug, thiserror::Error)]
pub enum Unmapped {
    /// The host's `/` could not be opened to reach the root from it.
    #[error("cannot open / ({0})")]
    HostRoot(std::io::Error),
    /// The root is not there, or its path goes through a symbolic link.
    #[error("it is gone, or reached through a symbolic link")]
    Gone,
    /// The root could not be opened.
    #[error("cannot open it ({0})")]
    Open(std::io::Error),
    /// The helper user namespace that carries the map could not be made.
    #[error("{0:#}")]
    Namespace(anyhow::Error),
    /// The root's mount could not be cloned.
    #[error("cannot clone its mount ({0})")]
    Clone(rustix::io::Errno),
    /// The kernel refused to id-map the clone (this errno; the text says which file systems and
    /// kernels can).
    #[error("{}", refusal(*.0))]
    Refused(i32),
}

/// Why commands cannot use a root as its owner ([`support`]); the text says what a person can
/// do. Doctor warns with it; tools-shell refuses a `needs.write` grant with it before asking.
#[derive(Debug, thiserror::Error)]
pub enum IdmapError {
    /// The root could not be looked at.
    #[error("cannot stat {}: {source}", path.display())]
    Stat { path: PathBuf, source: std::io::Error },
    /// The root belongs to `owner`, commands run as `to`, and the id-mapped bind failed.
    #[error(
        "commands run as uid {to} but {} belongs to uid {owner} and cannot be bound id-mapped: \
         {why}; they can write there only what its modes allow; {}",
        path.display(),
        fix(*owner, *to)
    )]
    Unmappable { path: PathBuf, owner: u32, to: u32, why: Unmapped },
}

/// What a person can do about a root of `owner` that commands run as `to` cannot use as its
/// owner.
fn fix(owner: u32, to: u32) -> String {
    if owner == 0 {
        format!(
            "a person can give the root to an ordinary user (`chown -R`) and set \
             sandbox.run_as to that user, or set sandbox.run_as to a user who may write it \
             (commands now run as uid {to})"
        )
    } else {
        format!("a person can set sandbox.run_as = \"{owner}\" (the root's owner)")
    }
}

/// A detached, id-mapped copy of the tree behind `at` (an `O_PATH` descriptor of a root).
fn mapped_tree(at: &OwnedFd, ns: &OwnedFd, read_only: bool) -> Result<OwnedFd, Unmapped> {
    let tree = remask::clone_tree(at).map_err(Unmapped::Clone)?;
    sys::set_idmap_attrs(&tree, ns, read_only).map_err(Unmapped::Refused)?;
    Ok(tree)
}

/// The roots of `spec` the launcher maps (a daemon run as root, with namespaces): each one
/// whose owner is not the command's uid, opened from the host's root without following a link
/// and checked against the identity the daemon's check saw. A root that cannot be opened, is
/// not what the check saw, or cannot be id-mapped is left out: the init binds it as before,
/// and refuses the start where it must (`mounts::open_checked`).
pub(super) fn prepare(spec: &Spec) -> BTreeMap<PathBuf, Premade> {
    let mut made = BTreeMap::new();
    let Some(to) = spec.run_as.filter(|_| !spec.without_namespaces) else { return made };
    let Ok(host) = crate::resolve::host_root() else { return made };
    let mut namespaces: Vec<(Ids, OwnedFd)> = Vec::new();
    for r in &spec.roots {
        let Ok(Target::Found(fd, is_dir)) = crate::resolve::open_nofollow(&host, &r.path) else {
            continue;
        };
        let Ok(st) = rustix::fs::fstat(&fd) else { continue };
        let owner = Ids { uid: st.st_uid, gid: st.st_gid };
        let id = Identity { dev: st.st_dev, ino: st.st_ino };
        if owner.uid == to.uid || spec.seen_at(&r.path).is_some_and(|seen| seen != id) {
            continue;
        }
        let ns = match namespaces.iter().position(|(o, _)| *o == owner) {
            Some(i) => &namespaces[i].1,
            None => match userns(owner, to) {
                Ok(ns) => {
                    namespaces.push((owner, ns));
                    &namespaces[namespaces.len() - 1].1
                }
                Err(_) => continue,
            },
        };
        if let Ok(tree) = mapped_tree(&fd, ns, !r.writable) {
            made.insert(r.path.clone(), Premade { tree, is_dir, id });
        }
    }
    made
}

/// Whether commands run as `to` can use the root `path` as its owner (for a daemon run as
/// root, before anyone is asked): `Ok(None)` when they are its owner, `Ok(Some(owner))` when
/// it can be bound id-mapped (tried now on a detached copy, thrown away), else why not, with
/// what a person can do.
pub fn support(path: &Path, to: Ids) -> Result<Option<u32>, IdmapError> {
    let meta = std::fs::metadata(path)
        .map_err(|source| IdmapError::Stat { path: path.to_path_buf(), source })?;
    if meta.uid() == to.uid {
        return Ok(None);
    }
    let owner = Ids { uid: meta.uid(), gid: meta.gid() };
    let tried = (|| -> Result<(), Unmapped> {
        let host = crate::resolve::host_root().map_err(Unmapped::HostRoot)?;
        let at = match crate::resolve::open_nofollow(&host, path) {
            Ok(Target::Found(fd, _)) => fd,
            Ok(_) => return Err(Unmapped::Gone),
            Err(e) => return Err(Unmapped::Open(e)),
        };
        let ns = userns(owner, to).map_err(Unmapped::Namespace)?;
        mapped_tree(&at, &ns, true).map(drop)
    })();
    tried.map(|()| Some(owner.uid)).map_err(|why| IdmapError::Unmappable {
        path: path.to_path_buf(),
        owner: owner.uid,
        to: to.uid,
        why,
    })
}

#[cfg(test)]
mod tests {
    use super::map_text;

    #[test]
    fn the_map_sends_the_owner_to_the_command_and_leaves_the_rest() {
        assert_eq!(
            map_text(0, 65534),
            "0 65534 1\n1 1 65533\n65535 65535 4294901760\n",
            "root shows as nobody; nobody has no mapping"
        );
        assert_eq!(map_text(1000, 1000), "0 0 4294967295\n");
        assert_eq!(map_text(1001, 1000), "1001 1000 1\n0 0 1000\n1002 1002 4294966293\n");
        // Every line but the first maps an id to itself, and none covers the owner or `to`.
        for (owner, to) in [(0u32, 1u32), (5, 0), (4294967294, 3)] {
            let text = map_text(owner, to);
            let mut covered = 0u64;
            for l in text.lines() {
                let n: Vec<u64> = l.split(' ').map(|x| x.parse().unwrap()).collect();
                covered += n[2];
                if n[0] != u64::from(owner) {
                    assert_eq!(n[0], n[1], "{text}");
                    let range = n[0]..n[0] + n[2];
                    assert!(!range.contains(&u64::from(owner)), "{text}");
                    assert!(!range.contains(&u64::from(to)), "{text}");
                }
            }
            assert_eq!(covered, u64::from(u32::MAX) - 1, "all ids but `to`: {text}");
        }
    }
}
