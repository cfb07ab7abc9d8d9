//! The namespaces and the new root: a tmpfs holding only what the spec names, entered with
//! pivot_root, the old root detached.

use super::{Spec, remask, sys};
use crate::resolve::{Identity, Target};
use anyhow::{Context, Result};
use std::collections::BTreeSet;
use std::os::fd::OwnedFd;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Where the host's root is reachable while the new root is built (after the first pivot).
const OLD: &str = "/oldroot";
/// Where the new root is built (after the first pivot).
const NEW: &str = "/newroot";

/// Devices bound from the host into the minimal `/dev`.
const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];

/// Writes the uid and gid maps of the sandbox's user namespace from outside (the launcher,
/// in the parent namespace), `setgroups` denied. A daemon run as an ordinary user maps its own
/// ids to themselves (all an unprivileged parent may map). A daemon run as root maps root and
/// `sandbox.run_as` to themselves: the init builds the root as root (it must reach the state
/// folder and create mount points), and the command becomes `run_as` before it runs, with no
/// capability and `no_new_privs`, so it never gets root back.
#[expect(
    clippy::disallowed_methods,
    reason = "procfs: the sandbox's uid and gid maps, written from outside"
)]
pub fn write_maps(pid: libc::pid_t, run_as: Option<super::Ids>) -> Result<()> {
    let write = |file: &str, text: String| {
        let path = format!("/proc/{pid}/{file}");
        std::fs::write(&path, text).with_context(|| format!("cannot write {path}"))
    };
    let map = |own: u32, other: Option<u32>| match other {
        Some(o) if o != own => format!("{own} {own} 1\n{o} {o} 1\n"),
        _ => format!("{own} {own} 1\n"),
    };
    let (uid, gid) = sys::ids();
    write("setgroups", "deny".into())?;
    write("uid_map", map(uid, run_as.map(|i| i.uid)))?;
    write("gid_map", map(gid, run_as.map(|i| i.gid)))
}

/// Maps the caller's uid and gid (read before it unshared: inside, they read as the overflow
/// id until mapped) to themselves in the user namespace it just entered.
#[expect(clippy::disallowed_methods, reason = "procfs: this process's own uid and gid maps")]
pub fn map_ids((uid, gid): (libc::uid_t, libc::gid_t)) -> Result<()> {
    let write = |file: &str, text: String| {
        std::fs::write(file, text).with_context(|| format!("cannot write {file}"))
    };
    write("/proc/self/setgroups", "deny".into())?;
    write("/proc/self/uid_map", format!("{uid} {uid} 1\n"))?;
    write("/proc/self/gid_map", format!("{gid} {gid} 1\n"))
}

fn rel(p: &Path) -> &Path {
    p.strip_prefix("/").unwrap_or(p)
}

fn host(p: &Path) -> PathBuf {
    Path::new(OLD).join(rel(p))
}

fn inside(p: &Path) -> PathBuf {
    Path::new(NEW).join(rel(p))
}

fn mkdirs(p: &Path) -> Result<()> {
    std::fs::create_dir_all(p).with_context(|| format!("cannot create {}", p.display()))
}

/// Binds `src` on `dst` (creating the mount point), read-only when asked.
#[expect(
    clippy::disallowed_methods,
    reason = "a mount point in the new root being built, not a path of a root"
)]
fn bind(src: &Path, dst: &Path, read_only: bool) -> Result<()> {
    // A source that vanished (removed since the daemon made or listed it) gets a message that
    // says so: the daemon makes the sandbox home again before the next command, so the next
    // one can start.
    anyhow::ensure!(
        std::fs::symlink_metadata(src).is_ok(),
        "cannot mount on {}: {} no longer exists (it was removed after the daemon made or \
         found it); the daemon makes its folders again for the next command, so try again",
        dst.strip_prefix(NEW).map_or(dst.to_path_buf(), |p| Path::new("/").join(p)).display(),
        src.strip_prefix(OLD).map_or(src.to_path_buf(), |p| Path::new("/").join(p)).display()
    );
    if src.is_dir() {
        mkdirs(dst)?;
    } else if std::fs::symlink_metadata(dst).is_err() {
        if let Some(parent) = dst.parent() {
            mkdirs(parent)?;
        }
        std::fs::File::create(dst)
            .with_context(|| format!("cannot create mount point {}", dst.display()))?;
    }
    sys::mount(Some(src), dst, None, libc::MS_BIND | libc::MS_REC, None)?;
    if read_only {
        sys::make_read_only(dst, true)?;
    }
    Ok(())
}

fn tmpfs(dst: &Path, flags: libc::c_ulong, data: &str) -> Result<()> {
    mkdirs(dst)?;
    sys::mount(Some(Path::new("tmpfs")), dst, Some("tmpfs"), flags, Some(data))
}

/// Builds the new root and enters it. Runs in the child, which holds every capability of the
/// new user namespace until `confine` drops them.
pub fn build_root(
    spec: &Spec,
    premade: &mut std::collections::BTreeMap<PathBuf, super::idmap::Premade>,
) -> Result<Vec<PathBuf>> {
    // Nothing done here may propagate back to the host.
    sys::mount(None, Path::new("/"), None, libc::MS_REC | libc::MS_PRIVATE, None)?;
    // A scratch tmpfs becomes the root first, with the host's root under it at /oldroot: then
    // every source, even one under the host's /tmp, stays reachable while the new root is built.
    let base = Path::new("/tmp");
    sys::mount(
        Some(Path::new("tmpfs")),
        base,
        Some("tmpfs"),
        libc::MS_NOSUID | libc::MS_NODEV,
        Some("mode=0700,size=64k"),
    )?;
    mkdirs(&base.join("oldroot"))?;
    mkdirs(&base.join("newroot"))?;
    sys::pivot_root(base, &base.join("oldroot"))?;
    std::env::set_current_dir("/").context("chdir /")?;
    tmpfs(Path::new(NEW), libc::MS_NOSUID | libc::MS_NODEV, "mode=0755,size=4m")?;

    // /proc, /dev and /tmp first: roots and the home may lie below /tmp and are bound on top.
    let proc_ = inside(Path::new("/proc"));
    mkdirs(&proc_)?;
    let no_exec = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    sys::mount(Some(Path::new("proc")), &proc_, Some("proc"), no_exec, None)?;
    // The command runs as the host's root (uid 0 maps to itself), and the kernel lets that uid
    // write the host-global sysctls and /proc/sysrq-trigger by file mode alone, capabilities or
    // not: /proc/sys is read-only and the trigger masked (Landlock keeps all of /proc read-only
    // too).
    bind(&proc_.join("sys"), &proc_.join("sys"), true)?;
    let trigger = proc_.join("sysrq-trigger");
    if trigger.exists() {
        bind(&host(Path::new("/dev/null")), &trigger, true)?;
    }
    build_dev()?;
    let tmp_opts = format!("mode=1777,size={}m", spec.limits.memory_mb.max(1));
    tmpfs(&inside(Path::new("/tmp")), libc::MS_NOSUID | libc::MS_NODEV, &tmp_opts)?;

    for s in &spec.system {
        let src = host(s);
        let Ok(meta) = std::fs::symlink_metadata(&src) else { continue };
        let dst = inside(s);
        if meta.file_type().is_symlink() {
            // Merged /usr: /bin -> usr/bin stays a (relative) symlink into the bound /usr.
            let target = std::fs::read_link(&src).context("readlink")?;
            if std::fs::symlink_metadata(&dst).is_err() {
                if let Some(parent) = dst.parent() {
                    mkdirs(parent)?;
                }
                std::os::unix::fs::symlink(&target, &dst)
                    .with_context(|| format!("cannot link {}", dst.display()))?;
            }
        } else {
            bind(&src, &dst, true)?;
        }
    }
    // The roots are bound from descriptors opened without following a link, each checked
    // against the identity the daemon's check saw (SPEC §3, one resolution): a folder swapped
    // for a link, or for another folder, since it was checked refuses the start.
    let scratch = crate::resolve::host_root().context("cannot open the scratch root")?;
    let ours = Ours::of(&[Path::new(NEW), &inside(Path::new("/tmp")), &inside(Path::new("/dev"))])?;
    // A fresh home each run, with only the caches carried (decision 0068), from the home folder
    // the daemon's check saw, opened the same way.
    let (store, _, _) = open_checked(spec, &scratch, &spec.home)?;
    super::run_home::build(
        &store,
        &inside(&spec.home),
        &spec.keep,
        spec.command_ids(),
        spec.limits.memory_mb,
    )?;
    // Outer roots first, so a read-only root nested in a writable one is bound on top.
    let mut roots: Vec<_> = spec.roots.iter().collect();
    roots.sort_by_key(|r| r.path.components().count());
    for r in &roots {
        match premade.remove(&r.path) {
            // Id-mapped by the launcher (`idmap`), from the entry the daemon's check saw.
            Some(p) => {
                let dst = mount_point(&r.path, p.is_dir, p.id, &ours)?;
                remask::attach(&p.tree, &dst)
                    .with_context(|| format!("cannot bind {} id-mapped", r.path.display()))?;
            }
            None => bind_checked(spec, &scratch, &ours, &r.path, r.writable)?,
        }
    }

    // Pin every folder between a writable root and a protected or masked path (a mount point
    // cannot be renamed), so `mv .git x` cannot carry a mask or a read-only bind aside.
    let existing = |p: &PathBuf| {
        std::fs::symlink_metadata(inside(p)).is_ok_and(|m| !m.file_type().is_symlink())
    };
    let guarded: Vec<&PathBuf> =
        spec.protected.iter().chain(&spec.masked).filter(|p| existing(p)).collect();
    let mut pins = BTreeSet::new();
    for p in &guarded {
        let Some(root) = roots.iter().rev().find(|r| p.starts_with(&r.path) && **p != r.path)
        else {
            continue;
        };
        if !root.writable {
            continue;
        }
        for a in p.ancestors().skip(1).take_while(|a| *a != root.path) {
            pins.insert((a.components().count(), a.to_path_buf()));
        }
    }
    // Every pin, read-only bind and mask is made through a descriptor of its target, opened
    // component by component without following a symlink, and moved onto exactly that entry:
    // a folder swapped for a symlink meanwhile (by a command running in the same root) makes
    // the launcher refuse to start, never carries a mask or a read-only bind elsewhere. Each
    // target is opened after the pins above it, so it is the entry the command will see.
    for (_, p) in &pins {
        let at = target(spec, &scratch, p)?;
        let Some((fd, _)) = &at else { continue };
        let tree = remask::clone_tree(fd).with_context(|| format!("cannot pin {}", p.display()))?;
        remask::attach(&tree, fd).with_context(|| format!("cannot pin {}", p.display()))?;
    }
    let mut walled: Vec<PathBuf> = Vec::new();
    for p in &spec.protected {
        let Some((fd, _)) = target(spec, &scratch, p)? else { continue };
        let what = || format!("cannot make {} read-only", p.display());
        let tree = remask::clone_tree(&fd).with_context(what)?;
        sys::make_tree_read_only(&tree).with_context(what)?;
        remask::attach(&tree, &fd).with_context(what)?;
        walled.push(p.clone());
    }
    // A masked file is covered by an empty mode-000 file bound read-only, so reading it and
    // writing it both fail; /dev/null would have taken writes as if they had worked. The file
    // lives in the scratch root, which is detached below; its clones stay.
    let blank = Path::new("/masked");
    #[expect(
        clippy::disallowed_methods,
        reason = "the masks' blank file, in the scratch root nothing of the sandbox reaches"
    )]
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o000)
        .open(blank)
        .with_context(|| format!("cannot create {}", blank.display()))?;
    // A read-only clone of the blank per file mask: cloned by path from the scratch root, which
    // nothing of the sandbox can reach (a detached mount cannot be cloned again).
    let blank_file = || -> Result<std::os::fd::OwnedFd> {
        use rustix::mount::OpenTreeFlags;
        let flags = OpenTreeFlags::OPEN_TREE_CLONE | OpenTreeFlags::OPEN_TREE_CLOEXEC;
        let tree = rustix::mount::open_tree(rustix::fs::CWD, blank, flags)
            .context("cannot clone the blank file")?;
        sys::make_fd_read_only(&tree)?;
        Ok(tree)
    };
    // A path listed twice (a credential the walk also met by its real name) or
    // lying in a folder masked already is covered: the entry there now is the blank, which is
    // not what the walk saw.
    let mut covered: Vec<&Path> = Vec::new();
    let mut masked_files = Vec::new();
    for p in &spec.masked {
        if covered.iter().any(|c| p.starts_with(c)) {
            continue;
        }
        let Some((fd, is_dir)) = target(spec, &scratch, p)? else { continue };
        if !is_dir {
            let id = Identity::of(&fd).with_context(|| format!("cannot stat {}", p.display()))?;
            masked_files.push((p.as_path(), id));
        }
        let cover = if is_dir { remask::blank_folder()? } else { blank_file()? };
        remask::attach(&cover, &fd).with_context(|| format!("cannot mask {}", p.display()))?;
        covered.push(p);
    }

    // Enter the new root and drop the old one (and the scratch root) from this namespace.
    std::env::set_current_dir(NEW).context("chdir to the new root")?;
    sys::pivot_root(Path::new("."), Path::new("."))?;
    sys::umount_detach(Path::new("."))?;
    std::env::set_current_dir("/").context("chdir /")?;
    sys::make_read_only(Path::new("/"), false)?;
    unmasked_alias(&masked_files)?;
    // What was walled and stays in view: a read-only bind under a masked folder is hidden.
    walled.retain(|p| !covered.iter().any(|m| p.starts_with(m) && p != m));
    walled.extend(covered.iter().map(|p| p.to_path_buf()));
    Ok(walled)
}

/// Refuses the sandbox when a masked file can be reached under another spelling of its name
/// without its mask: a mask covers one entry of the folder cache, and a folder whose file
/// system folds case but whose own entry compares names byte for byte gives each spelling an
/// entry of its own for the same file (the root folder of an ext4 file system with the
/// casefold flag on Linux 6.1: `cat .ENV` read the `.env` masked at `.env`; 6.12 and later
/// compare such a folder's names folded). One look per folder, in this view: its first masked
/// file's name with every ASCII letter's case turned, which names the masked file itself
/// when the folder folds (any other such file there is a secret too, and masked: not the same
/// file).
fn unmasked_alias(masked_files: &[(&Path, Identity)]) -> Result<()> {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    let mut looked = BTreeSet::new();
    for (p, id) in masked_files {
        let (Some(dir), Some(name)) = (p.parent(), p.file_name()) else { continue };
        let turned: Vec<u8> = name
            .as_bytes()
            .iter()
            .map(|b| {
                if b.is_ascii_lowercase() { b.to_ascii_uppercase() } else { b.to_ascii_lowercase() }
            })
            .collect();
        if turned == name.as_bytes() || !looked.insert(dir) {
            continue;
        }
        let alias = dir.join(std::ffi::OsString::from_vec(turned));
        let flags =
            rustix::fs::OFlags::PATH | rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::CLOEXEC;
        let Ok(fd) = rustix::fs::open(&alias, flags, rustix::fs::Mode::empty()) else { continue };
        anyhow::ensure!(
            Identity::of(&fd).ok().as_ref() != Some(id),
            "refused to start: the secret {} can be read unmasked as {}: its folder folds case \
             (the root of a case-folding file system, on a kernel that looks names up there byte \
             for byte) and the mask covers the name as stored only. Move the file into a \
             subfolder or out of the roots, or make the folder case-sensitive (`chattr -F` of \
             an empty folder)",
            p.display(),
            alias.display()
        );
    }
    Ok(())
}

/// The first of `walled` ([`build_root`]'s) that is no longer a mount's root in this view: a
/// host rename over the entry (or unlinking it) took its read-only bind or mask off in every
/// namespace, and the file now there shows writable or unmasked. One the init cannot reach
/// as the command's user is out of the command's reach too; a kernel without
/// `STATX_ATTR_MOUNT_ROOT` (before 5.8) says nothing (the marks are compared still).
pub fn unwalled(walled: &[PathBuf]) -> Option<&Path> {
    use rustix::fs::{AtFlags, CWD, StatxAttributes, StatxFlags, statx};
    let root = StatxAttributes::MOUNT_ROOT;
    walled.iter().map(PathBuf::as_path).find(|p| {
        match statx(CWD, *p, AtFlags::SYMLINK_NOFOLLOW, StatxFlags::TYPE) {
            Ok(st) => st.stx_attributes_mask.contains(root) && !st.stx_attributes.contains(root),
            Err(e) => e != rustix::io::Errno::ACCESS,
        }
    })
}

/// What the command's view shows at every root, protected and masked path, as the init sees it
/// from inside the built root: a sandbox made ready ahead (decision 0077) takes them once built
/// and again when its call comes, and refuses the call when one differs. A mask or read-only
/// bind whose entry the host renamed over or unlinked since is taken off in every other mount
/// namespace (the kernel detaches it lazily), so the file now there would show unmasked or
/// writable; so would a folder above it swapped on the host. `None` where nothing can be seen
/// (absent, or out of the init's reach as the command's user, as it is out of the command's).
pub fn marks(spec: &Spec) -> Vec<Option<(u64, u64, u32)>> {
    use rustix::fs::{AtFlags, CWD, statat};
    let roots = spec.roots.iter().map(|r| &r.path);
    roots
        .chain(&spec.protected)
        .chain(&spec.masked)
        .map(|p| {
            statat(CWD, p, AtFlags::SYMLINK_NOFOLLOW)
                .ok()
                .map(|st| (st.st_dev, st.st_ino, st.st_mode))
        })
        .collect()
}

/// The entry at `p` in the new root as an `O_PATH` descriptor (see `crate::resolve`), and
/// whether it is a folder; `None` when it is absent or a symlink itself (nothing to cover: a
/// symlink's target is masked by its real name) and no check saw it. A folder on the way that
/// is a symlink now refuses the start: it was a folder when the daemon walked the roots. So does
/// an entry the walk saw (its identity is in the spec) that is another one now, or gone: what
/// the walk protected or masked was moved aside between the walk and this start.
fn target(spec: &Spec, scratch: &OwnedFd, p: &Path) -> Result<Option<(OwnedFd, bool)>> {
    let seen = spec.seen_at(p);
    let at = inside(p);
    match crate::resolve::open_nofollow(scratch, &at)
        .with_context(|| format!("cannot open {}", p.display()))?
    {
        Target::Found(fd, is_dir) => {
            if let Some(seen) = seen {
                let id =
                    Identity::of(&fd).with_context(|| format!("cannot stat {}", p.display()))?;
                anyhow::ensure!(
                    id == seen,
                    changed(p, &format!("it is another entry now ({id}; the check saw {seen})"))
                );
            }
            Ok(Some((fd, is_dir)))
        }
        Target::Absent | Target::Linked(_) if seen.is_some() => Err(changed(
            p,
            "it is gone, or a symbolic link now, though the walk of the roots found it there",
        )),
        Target::Absent => Ok(None),
        Target::Linked(link) if link == at => Ok(None),
        Target::Linked(link) => Err(anyhow::anyhow!(
            "refused to start: {} must be masked or read-only, but {} on its way is a symbolic \
             link (a folder swapped for a link while the sandbox was being built, or a path \
             configured through a link); nothing ran. Try again; if it persists, a person can \
             name the real path in the configuration or remove the link",
            p.display(),
            shown(&link).display()
        )),
    }
}

/// The root `p` as the process sees it now — in the new root (the init), or on the host
/// without namespaces — opened without following a link and checked against the identity the
/// daemon's check saw: what Landlock's rules are made from (`walls::landlock`), never a name
/// resolved again.
/// Whether it is a folder comes along (a `needs.write` root may be a file, which takes only a
/// file's access rights).
pub(super) fn checked_root(spec: &Spec, p: &Path) -> Result<(OwnedFd, bool)> {
    let root = crate::resolve::host_root().context("cannot open /")?;
    match crate::resolve::open_nofollow(&root, p)
        .with_context(|| format!("cannot open {}", p.display()))?
    {
        Target::Found(fd, is_dir) => {
            let id = Identity::of(&fd).with_context(|| format!("cannot stat {}", p.display()))?;
            match spec.seen_at(p) {
                Some(seen) if seen != id => Err(changed(
                    p,
                    &format!("it is another entry now ({id}; the check saw {seen})"),
                )),
                _ => Ok((fd, is_dir)),
            }
        }
        Target::Absent => Err(anyhow::anyhow!("root {} no longer exists", p.display())),
        Target::Linked(at) => Err(changed(p, &format!("{} is a symbolic link now", at.display()))),
    }
}

/// `p` as the command sees it, for a path of the new root (`/newroot/...`).
fn shown(p: &Path) -> PathBuf {
    p.strip_prefix(NEW).map_or(p.to_path_buf(), |r| Path::new("/").join(r))
}

/// The refusal of a start because `p` is not what the daemon's check admitted (SPEC §3).
fn changed(p: &Path, how: &str) -> anyhow::Error {
    let why = format!(
        "refused to start: {} {}: {how}; nothing ran (it was moved, \
         replaced, or swapped for a link after it was checked — by a command or tmux session in \
         a writable root, or on the host). A person can put it back; a configured root replaced \
         on purpose is pinned again by restarting the daemon; a `needs` path is asked for again",
        p.display(),
        super::CHANGED
    );
    super::report::Failure::new(super::Cause::Changed, why).into()
}

/// The devices of the filesystems the new root is made of (its tmpfs, its `/tmp` and `/dev`):
/// a mount point is created only on these, never in a bound folder of the host's.
struct Ours(Vec<u64>);

impl Ours {
    fn of(paths: &[&Path]) -> Result<Ours> {
        let dev = |p: &&Path| -> Result<u64> {
            Ok(rustix::fs::stat(*p).with_context(|| format!("cannot stat {}", p.display()))?.st_dev)
        };
        Ok(Ours(paths.iter().map(dev).collect::<Result<_>>()?))
    }

    fn holds(&self, fd: &OwnedFd) -> Result<bool> {
        Ok(self.0.contains(&rustix::fs::fstat(fd).context("cannot stat a mount point")?.st_dev))
    }
}

/// Binds the host's `p` at the same path in the new root from a descriptor: opened component
/// by component from the host's root without following a link, checked against the identity
/// the daemon's check saw there (a root pinned at startup, a `needs.write` path before the
/// person was asked), cloned with its mounts, made nosuid, nodev (and read-only unless
/// `writable`) while still detached, and moved onto its mount point ([`mount_point`]).
fn bind_checked(
    spec: &Spec,
    scratch: &OwnedFd,
    ours: &Ours,
    p: &Path,
    writable: bool,
) -> Result<()> {
    let (src, is_dir, id) = open_checked(spec, scratch, p)?;
    let what = || format!("cannot bind {}", p.display());
    let tree = remask::clone_tree(&src).with_context(what)?;
    sys::set_root_attrs(&tree, !writable).with_context(what)?;
    let dst = mount_point(p, is_dir, id, ours)?;
    remask::attach(&tree, &dst).with_context(what)
}

/// The host's `p` as an `O_PATH` descriptor opened from the scratch root without following a
/// link, whether it is a folder, and its identity — which must be the one the daemon's check
/// saw there, if one did.
fn open_checked(spec: &Spec, scratch: &OwnedFd, p: &Path) -> Result<(OwnedFd, bool, Identity)> {
    let from_host = host(p);
    let (src, is_dir) = match crate::resolve::open_nofollow(scratch, &from_host)
        .with_context(|| format!("cannot open {}", p.display()))?
    {
        Target::Found(fd, is_dir) => (fd, is_dir),
        // The daemon makes the home again before the next command; a root that vanished
        // stays gone until a person looks.
        Target::Absent => anyhow::bail!(
            "cannot mount {}: it no longer exists (it was removed after the daemon made or \
             checked it); the daemon makes its own folders again for the next command, so try \
             again",
            p.display()
        ),
        Target::Linked(at) => {
            let at = at.strip_prefix(OLD).map_or(at.clone(), |r| Path::new("/").join(r));
            return Err(changed(p, &format!("{} is a symbolic link now", at.display())));
        }
    };
    let id = Identity::of(&src).with_context(|| format!("cannot stat {}", p.display()))?;
    if let Some(seen) = spec.seen_at(p) {
        anyhow::ensure!(
            id == seen,
            changed(p, &format!("it is another entry now ({id}; the check saw {seen})"))
        );
    }
    Ok((src, is_dir, id))
}

/// The entry `p`'s tree is attached on in the new root, opened from the new root's top without
/// following a link. A missing folder on the way, or the entry itself, is made only on a
/// filesystem of the new root's own ([`Ours`]), never through a bound folder of the host's (a
/// link planted there would lead it anywhere). One that exists in a bound folder (a root nested
/// in another root, or lying under a system folder) must be `id` itself: the same folder, seen
/// through the outer bind.
fn mount_point(p: &Path, is_dir: bool, id: Identity, ours: &Ours) -> Result<OwnedFd> {
    use rustix::fs::{Mode, OFlags};
    let names: Vec<&std::ffi::OsStr> = p
        .components()
        .filter_map(|c| match c {
            std::path::Component::Normal(n) => Some(n),
            _ => None,
        })
        .collect();
    let dir = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let mut cur = rustix::fs::open(NEW, dir, Mode::empty()).context("cannot open the new root")?;
    for (i, name) in names.iter().enumerate() {
        let last = i + 1 == names.len();
        let mut flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        if !last {
            flags |= OFlags::DIRECTORY;
        }
        let next = match rustix::fs::openat(&cur, *name, flags, Mode::empty()) {
            Err(rustix::io::Errno::NOENT) => {
                anyhow::ensure!(
                    ours.holds(&cur)?,
                    changed(p, "its mount point is missing in a folder bound from the host")
                );
                if last && !is_dir {
                    let create = OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::CLOEXEC;
                    drop(rustix::fs::openat(&cur, *name, create, Mode::from_raw_mode(0o644))?);
                } else {
                    rustix::fs::mkdirat(&cur, *name, Mode::from_raw_mode(0o755))?;
                }
                rustix::fs::openat(&cur, *name, flags, Mode::empty())
            }
            other => other,
        };
        cur = match next {
            Ok(fd) => fd,
            Err(rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR) => {
                return Err(changed(p, "a symbolic link lies on the way of its mount point"));
            }
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("cannot make the mount point of {}", p.display()));
            }
        };
    }
    let st = rustix::fs::fstat(&cur).context("cannot stat a mount point")?;
    if !ours.holds(&cur)? && (Identity { dev: st.st_dev, ino: st.st_ino }) != id {
        return Err(changed(p, "its mount point in a bound folder is another entry"));
    }
    if rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Symlink {
        return Err(changed(p, "its mount point is a symbolic link"));
    }
    Ok(cur)
}

/// A minimal `/dev`: a few devices bound from the host, a new devpts instance, `/dev/shm`.
fn build_dev() -> Result<()> {
    let dev = inside(Path::new("/dev"));
    tmpfs(&dev, libc::MS_NOSUID | libc::MS_NOEXEC, "mode=0755,size=64k")?;
    for name in DEVICES {
        let src = host(&Path::new("/dev").join(name));
        if std::fs::symlink_metadata(&src).is_ok() {
            bind(&src, &dev.join(name), false)?;
        }
    }
    let pts = dev.join("pts");
    mkdirs(&pts)?;
    sys::mount(
        Some(Path::new("devpts")),
        &pts,
        Some("devpts"),
        libc::MS_NOSUID | libc::MS_NOEXEC,
        Some("newinstance,ptmxmode=0666,mode=0620"),
    )?;
    let links = [
        ("pts/ptmx", "ptmx"),
        ("/proc/self/fd", "fd"),
        ("/proc/self/fd/0", "stdin"),
        ("/proc/self/fd/1", "stdout"),
        ("/proc/self/fd/2", "stderr"),
    ];
    for (target, name) in links {
        std::os::unix::fs::symlink(target, dev.join(name))
            .with_context(|| format!("cannot link /dev/{name}"))?;
    }
    let shm = dev.join("shm");
    mkdirs(&shm)?;
    std::fs::set_permissions(&shm, std::fs::Permissions::from_mode(0o1777))
        .context("chmod /dev/shm")
}
