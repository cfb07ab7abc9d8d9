//! `hands __remask` (the request as JSON on stdin): masks secret files that appeared after a tmux session started, in
//! that session's running sandbox.
//!
//! A `bash` command gets the masks of the roots as they are when it starts; a tmux session lives
//! on, and a `.env` a person creates meanwhile would be readable by what the model types into it.
//! So before `tmux_send` types, the daemon walks the roots (as for any command) and, when the
//! walk finds secret files the session has not masked, runs this helper: it joins the session
//! launcher's user and mount namespaces (the daemon's uid owns them, so it holds every
//! capability there and none outside), and covers each new path as the launcher would have —
//! an empty mode-000 file or a mode-000 tmpfs, read-only. The mounts stay in the session's mount
//! namespace; the host's is never touched.
//!
//! Unlike the launcher, the helper pins no folders: a process whose working folder lies below a
//! folder bound over itself afterwards keeps seeing the folder underneath, masks and all
//! missing. Nor is a pin needed to keep the secret hidden: a renamed folder carries the mask
//! with it (a mount sits on the file's entry, not on its path).
//!
//! The blank is made in a tmpfs no process of the sandbox can reach before the blank is in place
//! and read-only: a folder's blank is a detached tmpfs (the new mount API); a file's is cloned
//! from a tmpfs attached only in a private copy of the session's mount namespace, since kernels
//! before 6.15 (Debian's 6.1 and 6.12) refuse to clone from a mount that is not attached in the
//! caller's namespace (`EINVAL`), and a detached clone may then be moved into any namespace.
//!
//! Every target is reached through descriptors (`O_NOFOLLOW` per component, the mask moved
//! onto the final descriptor), so a folder swapped for a symlink cannot redirect a mask.
//!
//! Prints one JSON line: `{"masked": [...], "absent": [...]}` (a path the sandbox no longer
//! shows, or shows as a symlink or through one, is absent: nothing to cover). Exit 0; 125 with a
//! `hands remask:` line when the namespaces could not be joined or a mount failed.

use super::sys;
use crate::netns::Process;
use anyhow::{Context, Result, ensure};
use rustix::fs::{Mode, OFlags};
use rustix::mount::{
    FsMountFlags, FsOpenFlags, MountAttrFlags, MoveMountFlags, OpenTreeFlags, fsconfig_create,
    fsconfig_set_string, fsmount, fsopen, move_mount, open_tree,
};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};
use std::process::ExitCode;

/// What to mask, and in which session's sandbox.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// The session's launcher: it holds the sandbox's user and mount namespaces.
    pub launcher: Process,
    /// The paths to cover (absolute and clean; the walk of the roots found them).
    pub paths: Vec<PathBuf>,
}

/// What the helper did.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Answer {
    pub masked: Vec<PathBuf>,
    pub absent: Vec<PathBuf>,
}

/// Why `hands __remask` masked nothing ([`request`]).
#[derive(Debug, thiserror::Error)]
pub enum RemaskError {
    /// It had not ended within this long (it was killed).
    #[error("the helper did not finish within {0:?}")]
    Timeout(std::time::Duration),
    /// It could not be started, fed or waited on.
    #[error("the helper could not run: {0}")]
    Run(std::io::Error),
    /// It failed, saying this on its stderr (its own `hands remask: …` line).
    #[error("{0}")]
    Failed(String),
    /// It answered something that is not an [`Answer`].
    #[error("the helper's answer is unreadable: {0}")]
    Unreadable(serde_json::Error),
}

/// Asks `hands __remask` (the binary at `exe`) to mask `paths` in the running sandbox of the
/// launcher `launcher`, waiting at most `limit`: what it masked and what was absent, or why it
/// could not. The one place the daemon starts `__remask`.
#[expect(
    clippy::disallowed_methods,
    reason = "starts the daemon's own `hands __remask`, which masks paths in a sandbox"
)]
pub async fn request(
    exe: &Path,
    launcher: &Process,
    paths: &[&Path],
    limit: std::time::Duration,
) -> std::result::Result<Answer, RemaskError> {
    use std::process::Stdio;
    use tokio::io::AsyncWriteExt;
    let request = serde_json::json!({ "launcher": launcher, "paths": paths }).to_string();
    let run = async {
        let mut child = tokio::process::Command::new(exe)
            .arg("__remask")
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin.write_all(request.as_bytes()).await?;
        }
        child.wait_with_output().await
    };
    let out = tokio::time::timeout(limit, run)
        .await
        .map_err(|_| RemaskError::Timeout(limit))?
        .map_err(RemaskError::Run)?;
    if !out.status.success() {
        return Err(RemaskError::Failed(String::from_utf8_lossy(&out.stderr).trim().to_string()));
    }
    serde_json::from_slice(&out.stdout).map_err(RemaskError::Unreadable)
}

/// The mount points in the sandbox of the session launcher `launcher`, as its processes see
/// them (`/proc/PID/mountinfo`, rendered from the sandbox's root): a mask the host took off by
/// renaming over or removing its file is no longer among them (decision 0079). `None` when
/// the launcher is gone, its table cannot be read, or it has no mount namespace of its own
/// (`best-effort` without namespaces masks nothing).
#[expect(
    clippy::disallowed_methods,
    reason = "procfs: a session launcher's mount table, read to find masks the host took off"
)]
pub fn mount_points(launcher: &Process) -> Option<std::collections::HashSet<PathBuf>> {
    use std::os::unix::fs::MetadataExt;
    let ns = |pid: &str| std::fs::metadata(format!("/proc/{pid}/ns/mnt")).map(|m| m.ino());
    if let (Ok(theirs), Ok(ours)) = (ns(&launcher.pid.to_string()), ns("self"))
        && theirs == ours
    {
        return None;
    }
    let text = std::fs::read_to_string(format!("/proc/{}/mountinfo", launcher.pid)).ok()?;
    // Read before the table is trusted: the pid is still the launcher's.
    if !launcher.alive() {
        return None;
    }
    Some(text.lines().filter_map(|l| l.split(' ').nth(4)).map(unescape).collect())
}

/// A mountinfo field with its octal escapes (`\040` for a space) decoded.
fn unescape(field: &str) -> PathBuf {
    use std::os::unix::ffi::OsStringExt;
    let b = field.as_bytes();
    let (mut out, mut i) = (Vec::with_capacity(b.len()), 0);
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|d| b[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal {
            Some(d) => {
                out.push(d.iter().fold(0u8, |n, c| n.wrapping_mul(8) + (c - b'0')));
                i += 4;
            }
            None => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    PathBuf::from(std::ffi::OsString::from_vec(out))
}

/// Runs `hands __remask`: the request comes on stdin (it may name more paths than one argument
/// can hold).
pub fn main() -> ExitCode {
    let done = serde_json::from_reader::<_, Request>(std::io::stdin().lock())
        .context("the request is not valid")
        .and_then(|r| remask(&r));
    #[expect(
        clippy::disallowed_methods,
        reason = "stdout is the pipe that carries the helper's answer to the daemon"
    )]
    let mut out = std::io::stdout().lock();
    match done.and_then(|a| Ok(serde_json::to_string(&a)?)) {
        Ok(line) => {
            let _ = writeln!(out, "{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            let _ = writeln!(std::io::stderr().lock(), "hands remask: {e:#}");
            ExitCode::from(super::SETUP_FAILED)
        }
    }
}

fn clean(p: &Path) -> bool {
    p.is_absolute()
        && p.components().all(|c| matches!(c, Component::RootDir | Component::Normal(_)))
        && p.components().count() > 1
}

fn remask(r: &Request) -> Result<Answer> {
    for p in &r.paths {
        ensure!(clean(p), "{} is not a clean absolute path below /", p.display());
    }
    let gone =
        || anyhow::anyhow!("the session's sandbox (launcher pid {}) is gone", r.launcher.pid);
    let pidfd = sys::pidfd_open(r.launcher.pid).map_err(|_| gone())?;
    // Checked after the pidfd exists: a pid with the recorded start time now is the launcher,
    // and the pidfd cannot come to mean another process.
    ensure!(r.launcher.alive(), gone());
    sys::setns(&pidfd, libc::CLONE_NEWUSER | libc::CLONE_NEWNS)
        .context("cannot join the session's namespaces")?;
    let mut blanks = blank_files(r.paths.len(), &pidfd)?;

    let mut answer = Answer::default();
    for p in &r.paths {
        // The target is opened component by component without following any symlink, and the
        // mask is moved onto that descriptor: a folder the session's commands swapped for a
        // symlink makes the path absent, never carries the mask somewhere else (where the
        // secret would stay readable once the folder is swapped back).
        let Some((target, is_dir)) = open_nofollow(p)? else {
            answer.absent.push(p.clone());
            continue;
        };
        let blank = match (is_dir, blanks.pop()) {
            (true, _) => blank_folder()?,
            (false, Some(file)) => file,
            (false, None) => anyhow::bail!("no blank is left for {}", p.display()),
        };
        attach(&blank, &target).with_context(|| format!("cannot mask {}", p.display()))?;
        answer.masked.push(p.clone());
    }
    Ok(answer)
}

/// `p` opened from the namespace's root without following a link (`crate::resolve`): `None`
/// when there is nothing to cover — absent, a symlink itself (a symlink's target is masked by
/// its real name), or behind a folder that is a symlink now.
fn open_nofollow(p: &Path) -> Result<Option<(OwnedFd, bool)>> {
    let root = crate::resolve::host_root().context("cannot open the sandbox's root")?;
    Ok(
        match crate::resolve::open_nofollow(&root, p)
            .with_context(|| format!("cannot open {}", p.display()))?
        {
            crate::resolve::Target::Found(fd, is_dir) => Some((fd, is_dir)),
            crate::resolve::Target::Absent | crate::resolve::Target::Linked(_) => None,
        },
    )
}

/// Moves the detached mount `tree` onto the entry behind the descriptor `target`.
pub(super) fn attach(tree: &OwnedFd, target: &OwnedFd) -> rustix::io::Result<()> {
    move_mount(
        tree,
        "",
        target,
        "",
        MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH | MoveMountFlags::MOVE_MOUNT_T_EMPTY_PATH,
    )
}

/// A detached copy of the tree behind `at` (an `O_PATH` descriptor) and every mount below it.
pub(super) fn clone_tree(at: &OwnedFd) -> rustix::io::Result<OwnedFd> {
    open_tree(
        at,
        "",
        OpenTreeFlags::OPEN_TREE_CLONE
            | OpenTreeFlags::OPEN_TREE_CLOEXEC
            | OpenTreeFlags::AT_RECURSIVE
            | OpenTreeFlags::AT_EMPTY_PATH,
    )
}

/// A fresh, detached tmpfs of mode 000 (its root), at most 4 KiB.
fn tmpfs(read_only: bool) -> Result<OwnedFd> {
    let fs = fsopen("tmpfs", FsOpenFlags::FSOPEN_CLOEXEC).context("fsopen tmpfs")?;
    fsconfig_set_string(&fs, "mode", "000").context("tmpfs mode")?;
    fsconfig_set_string(&fs, "size", "4k").context("tmpfs size")?;
    fsconfig_create(&fs).context("create tmpfs")?;
    let mut attrs = MountAttrFlags::MOUNT_ATTR_NOSUID
        | MountAttrFlags::MOUNT_ATTR_NODEV
        | MountAttrFlags::MOUNT_ATTR_NOEXEC;
    if read_only {
        attrs |= MountAttrFlags::MOUNT_ATTR_RDONLY;
    }
    fsmount(&fs, FsMountFlags::FSMOUNT_CLOEXEC, attrs).context("fsmount tmpfs")
}

/// A folder mask: an empty, read-only tmpfs of mode 000.
pub(super) fn blank_folder() -> Result<OwnedFd> {
    tmpfs(true)
}

/// `n` file masks, each an empty mode-000 file cloned as a mount of its own and made read-only
/// (reading it and writing it both fail; a chmod too), detached, for the session's mount
/// namespace (the caller is in it, and back in it on return; `session` is its launcher).
///
/// The clones are made in a private copy of that namespace, where the tmpfs holding the blank is
/// attached over its root: nothing of the sandbox sees that copy, and a clone of an attached
/// mount is what every kernel allows. The copy ends when the helper leaves it.
fn blank_files(n: usize, session: &OwnedFd) -> Result<Vec<OwnedFd>> {
    sys::unshare(libc::CLONE_NEWNS).context("cannot make a private mount namespace")?;
    let fs = tmpfs(false)?;
    let root =
        rustix::fs::open("/", OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
            .context("cannot open the private namespace's root")?;
    attach(&fs, &root).context("cannot attach the blank's tmpfs in the private namespace")?;
    let flags = OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::CLOEXEC;
    drop(rustix::fs::openat(&fs, "masked", flags, Mode::empty()).context("create the blank")?);
    let blanks = (0..n)
        .map(|_| {
            let flags = OpenTreeFlags::OPEN_TREE_CLONE | OpenTreeFlags::OPEN_TREE_CLOEXEC;
            let tree = open_tree(&fs, "masked", flags).context("clone the blank")?;
            sys::make_fd_read_only(&tree)?;
            Ok(tree)
        })
        .collect::<Result<Vec<_>>>()?;
    sys::setns(session, libc::CLONE_NEWNS).context("cannot go back to the session's namespace")?;
    Ok(blanks)
}
