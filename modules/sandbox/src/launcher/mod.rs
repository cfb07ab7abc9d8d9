//! The sandbox launcher behind the hidden `hands __sandbox` subcommand: it reads a JSON
//! [`Spec`] on descriptor [`SPEC_FD`] (see `spec`), reports to the daemon on a channel of its
//! own ([`report`]), makes the command's cgroup (see
//! `bounds`), clones a child into new user, mount, PID, IPC and UTS namespaces (and network,
//! without its client's shared one) — on cgroup v2 straight into that cgroup
//! (`clone3(CLONE_INTO_CGROUP)`), elsewhere moved into it while it builds the root — writes
//! the child's uid and gid maps from outside, and waits. The child is PID 1 of its namespace:
//! it builds the new root, becomes the command's user (`no_new_privs`, no capabilities) under
//! Landlock, then forks the command, which inherits all of that, adds rlimits, `setsid` and
//! seccomp, and execs. PID 1 stays as a small init:
//! it reaps, forwards SIGTERM, SIGINT and SIGHUP to the command's process group, and kills
//! what is left once the command has ended, so the command is an ordinary process (`kill $$`
//! ends it as anywhere) and nothing outlives it. Once all of it is reaped and the walls' last
//! report sent, the init and the launcher let go of the output and the launcher sends
//! [`Report::Ended`]: the daemon answers then, while the namespaces are taken down.
//!
//! Signals: SIGTERM, SIGINT or SIGHUP sent to the launcher is passed to the init, which passes
//! it to the command; SIGKILL to the launcher kills the init (parent-death signal), and with
//! it every process of the namespace.
//!
//! Exit status: the command's exit code, or 128 + the signal that ended it. When the sandbox
//! cannot be built the launcher sends [`Report::SetupFailed`], prints `hands sandbox: ...` on
//! stderr for a person, and exits 125, and the command never starts. The daemon decides on the
//! report alone: a command can exit 125 and print such a line too.

pub mod bounds;
mod call;
pub mod holder;
pub mod idmap;
mod mounts;
pub mod notify;
pub mod remask;
pub mod report;
use report::{failure_bytes, failure_read};
mod run_home;
pub use run_home::hand_over;
mod spec;
#[cfg(test)]
mod tests_spec;
mod walls;
use crate::sys;

pub use crate::resolve::Identity;
pub use bounds::Bound;
pub use report::{Cause, Failure, Report, Reported, Reports};
pub use spec::{
    Builder, Confinement, Ids, LAUNCHER, Limits, Root, SPEC_FD, SYSTEM, Spec, attach_spec,
    is_clean, launcher_binary, launcher_command,
};
use std::io::{Read, Write};
use std::process::ExitCode;

/// Exit code of the launcher when the sandbox could not be built.
pub const SETUP_FAILED: u8 = 125;

/// Exit code of the network namespace holder (`holder.rs`) when namespaces cannot be made here:
/// the daemon's typed cause ([`Cause::NoNamespaces`]), so no one reads it from the text.
pub const NO_NAMESPACES: u8 = 124;

/// What the launcher's refusal says when a path is not what the daemon's check saw there (SPEC
/// §3, one resolution; `mounts.rs`), for a person; the daemon acts on [`Cause::Changed`].
pub const CHANGED: &str = "changed since the daemon's check";

/// How often a launcher with a `watch` file checks it.
const WATCH_MS: i32 = 2000;

/// What this machine's kernel offers the sandbox, for doctor and the tier.
pub fn landlock_abi() -> u32 {
    sys::landlock_abi()
}

/// The home the passwd database gives the daemon's own user (its effective uid), whatever
/// `HOME` says: the home a login of that user starts in.
pub fn own_passwd_home() -> Option<std::path::PathBuf> {
    sys::passwd_home(sys::euid())
}

/// Runs `hands __sandbox`, whose spec is on descriptor [`SPEC_FD`].
pub fn main() -> ExitCode {
    let (reporter, spec) = Spec::receive();
    match spec.and_then(|(spec, fd)| launch(spec, fd, &reporter)) {
        // Nothing is left to flush (stderr is unbuffered) or to clean up (the leaf is gone): the
        // allocator's and libraries' exit handlers would only delay the daemon's answer.
        Ok(code) => sys::exit_now(code),
        Err(e) => {
            let failure = report::Failure::of(&e);
            reporter.send(&failure.report());
            let mut err = std::io::stderr().lock();
            let _ = writeln!(err, "hands sandbox: {}", failure.why);
            ExitCode::from(SETUP_FAILED)
        }
    }
}

/// A step of building the namespaces that the kernel refused (EPERM, EACCES) in a container:
/// its runtime forbids it (a seccomp profile, a masked `/proc`, no `CAP_SYS_ADMIN`), so the
/// daemon may run without namespaces ([`Cause::NoNamespaces`]); the reason names the
/// container, and the daemon's refusal and doctor the `run` flags that allow it
/// ([`crate::container::Container::remedy`]). Anywhere else `e` is passed on as it is.
fn in_container(e: anyhow::Error) -> anyhow::Error {
    let refused = matches!(sys::errno_of(&e), Some(libc::EPERM | libc::EACCES));
    match crate::container::detect() {
        Some(c) if refused => {
            let why = format!("{e:#}: {} forbids it", c.described());
            report::Failure::new(Cause::NoNamespaces, why).into()
        }
        _ => e,
    }
}

/// Why user namespaces could not be made, with the remedy for this machine (in a container
/// the refusal and doctor name it: the flags it is started with).
#[expect(
    clippy::disallowed_methods,
    reason = "procfs: the kernel's user-namespace switches, read to name the remedy"
)]
pub fn userns_refused(errno: i32) -> String {
    let apparmor =
        std::fs::read_to_string("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
            .is_ok_and(|v| v.trim() == "1");
    let max = std::fs::read_to_string("/proc/sys/user/max_user_namespaces")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok());
    let unpriv = std::fs::read_to_string("/proc/sys/kernel/unprivileged_userns_clone")
        .is_ok_and(|v| v.trim() == "0");
    let why = std::io::Error::from_raw_os_error(errno);
    if max == Some(0) {
        format!(
            "user namespaces are switched off (user.max_user_namespaces = 0; {why}); a person \
             can allow them with `sysctl -w user.max_user_namespaces=15000`"
        )
    } else if unpriv && sys::euid() != 0 {
        format!(
            "unprivileged user namespaces are switched off (kernel.unprivileged_userns_clone = \
             0; {why}); a person can allow them with `sysctl -w \
             kernel.unprivileged_userns_clone=1`"
        )
    } else if apparmor {
        format!(
            "AppArmor restricts unprivileged user namespaces \
             (kernel.apparmor_restrict_unprivileged_userns = 1; {why}); a person can install \
             the profile that ships with hands: `hands doctor` prints the two commands"
        )
    } else if let Some(c) =
        crate::container::detect().filter(|_| matches!(errno, libc::EPERM | libc::ENOSYS))
    {
        let without = if c.sys_admin { "" } else { ", without CAP_SYS_ADMIN" };
        format!(
            "the kernel refused to make a user namespace ({why}): {} forbids it (its seccomp \
             profile{without})",
            c.described()
        )
    } else if errno == libc::EPERM || errno == libc::ENOSYS {
        use crate::container::{DOCKER_FLAGS, PODMAN_FLAGS};
        format!(
            "the kernel refused to make a user namespace ({why}): in a container, its seccomp \
             profile or missing CAP_SYS_ADMIN forbids it; run the container with `docker run \
             {DOCKER_FLAGS}` or `podman run {PODMAN_FLAGS}`, or set sandbox.mode = \
             \"best-effort\" to run with Landlock and seccomp alone"
        )
    } else {
        format!("the kernel refused to make a user namespace ({why})")
    }
}

fn launch(spec: Spec, spec_fd: std::fs::File, reporter: &report::Reporter) -> anyhow::Result<u8> {
    use anyhow::Context;
    spec.validate()?;
    // Read while the container's traces are in sight: the init inherits the answer, and no
    // longer sees them once it has its new root.
    let _ = crate::container::detect();
    if let Some(parent) = spec.parent {
        sys::die_with_parent()?;
        // The parent may have died before the line above: then nothing would signal us.
        anyhow::ensure!(
            std::os::unix::process::parent_id() as i32 == parent,
            "the daemon (pid {parent}) is gone"
        );
    }
    let (uid, gid) = spec.command_ids();
    if !spec.home.is_dir() {
        std::fs::create_dir_all(&spec.home)
            .with_context(|| format!("cannot create the sandbox home {}", spec.home.display()))?;
    }
    // Without a mount namespace there is no private /tmp: the command's TMPDIR is here.
    let tmp = spec.home.join("tmp");
    if spec.without_namespaces && !tmp.is_dir() {
        std::fs::create_dir(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
    }
    if spec.run_as.is_some() {
        use std::os::unix::fs::MetadataExt;
        // The command's home (and its TMPDIR) belongs to the user it runs as.
        for dir in [&spec.home, &tmp] {
            if std::fs::metadata(dir).is_ok_and(|m| m.uid() != uid) {
                sys::chown(dir, uid, gid)?;
            }
        }
        // Root's supplementary groups would reach the command: none do.
        sys::drop_groups()?;
        sys::give_stdio(uid, gid);
    }
    // Opened now: the launcher joins the sandbox's mount namespace below.
    #[expect(
        clippy::disallowed_methods,
        reason = "the `watch` file is a session marker in the state dir, not a path of a root"
    )]
    let watch = match &spec.watch {
        Some(p) => {
            Some(std::fs::File::open(p).with_context(|| format!("cannot open {}", p.display()))?)
        }
        None => None,
    };
    // Roots owned by another user than the command's, cloned and id-mapped while this process
    // is still the host's root; the init inherits them (`idmap`).
    let mut premade =
        if namespaces_wanted(&spec) { idmap::prepare(&spec) } else { Default::default() };
    let mut leaf = bounds::Leaf::create(&spec.bound, spec.limits.processes, spec.limits.memory_mb)?;
    let (err_read, err_write) = sys::pipe()?;
    let (go_read, go_write) = sys::pipe()?;
    // The init's word that the command and all it left have ended (one byte: the status).
    let (done_read, done_write) = sys::pipe()?;
    let (signals, old_mask) = sys::catch_stop_signals()?;
    if spec.without_namespaces {
        // No init of a PID namespace to end what the command leaves behind: what leaves its
        // process group (`setsid`) and its parent is orphaned to this process, and ended below.
        sys::become_subreaper()?;
    }
    let mut flags = libc::CLONE_NEWUSER
        | libc::CLONE_NEWNS
        | libc::CLONE_NEWPID
        | libc::CLONE_NEWIPC
        | libc::CLONE_NEWUTS;
    let mut namespaces = true;
    if !spec.network && !spec.without_namespaces {
        match spec.netns {
            Some(h) => holder::join(h, sys::euid() != 0).map_err(in_container)?,
            None => flags |= libc::CLONE_NEWNET,
        }
    }
    let flags = if spec.without_namespaces { 0 } else { flags };
    // On cgroup v2 the init starts in its leaf (no migration); elsewhere, or where `clone3` is
    // refused, it is cloned as before and moved in below.
    let into_leaf = leaf.as_ref().and_then(bounds::Leaf::v2_folder);
    let cloned = into_leaf.map(|dir| sys::clone_into_cgroup(flags, dir));
    let placed = matches!(cloned, Some(Ok(_)));
    let pid = match cloned {
        Some(Ok(pid)) => Ok(pid),
        _ => sys::clone_into(flags),
    };
    let pid = match pid {
        Ok(pid) => pid,
        Err(_) if spec.without_namespaces => return Err(sys::os_err("fork")),
        Err(e) => {
            let errno = sys::errno();
            if matches!(errno, libc::EPERM | libc::ENOSPC | libc::EACCES | libc::EINVAL) {
                return Err(report::Failure::new(Cause::NoNamespaces, userns_refused(errno)).into());
            }
            return Err(e);
        }
    };
    if spec.without_namespaces {
        namespaces = false;
    }
    if pid == 0 {
        drop(spec_fd);
        drop(err_read);
        drop(go_write);
        drop(done_read);
        drop(signals);
        let mut err_write = Some(std::fs::File::from(err_write));
        // Killing the launcher kills the init, and with it every process of the namespace. A
        // launcher that died before this line, or before it wrote the maps, closes the pipe.
        if sys::die_with_parent().is_err() || !sys::read_byte(&go_read) {
            sys::exit_now(SETUP_FAILED);
        }
        // Without namespaces the child is the command: it waits until it is in its cgroup.
        if !namespaces && !sys::read_byte(&go_read) {
            sys::exit_now(SETUP_FAILED);
        }
        let failed = if namespaces {
            let pipes = Pipes {
                err_write: &mut err_write,
                placed: &go_read,
                leaf: leaf.as_ref(),
                done: done_write,
            };
            init(&spec, &mut premade, &old_mask, pipes, reporter)
        } else {
            leaf.as_ref()
                .map_or(Ok(()), bounds::Leaf::enter)
                .and_then(|()| command(&spec, &old_mask, None))
        };
        if let (Err(e), Some(w)) = (failed, err_write.as_mut()) {
            let _ = w.write_all(&failure_bytes(&e));
        }
        sys::exit_now(SETUP_FAILED);
    }
    drop(err_write);
    drop(go_read);
    drop(done_write);
    // The init holds its own copies of the trees.
    drop(premade);
    let pidfd = sys::pidfd_open(pid);
    // Two bytes on the go pipe: the first once the maps are written (the init may build the
    // root), the second once the launcher has put the init in its cgroup v2 leaf where
    // `clone3` was refused (the move may wait for an RCU grace period, which so overlaps the
    // building of the root). On cgroup v1 the init moves itself (`Leaf::enter`).
    let mut go = std::fs::File::from(go_write);
    let started = (|| -> anyhow::Result<()> {
        if namespaces {
            mounts::write_maps(pid, spec.run_as)?;
        }
        let _ = go.write_all(b"1");
        if let (Some(l), false) = (leaf.as_mut(), placed)
            && l.added_by_launcher()
        {
            l.add(pid)?;
        }
        Ok(())
    })();
    if let Err(e) = started {
        sys::signal(pid, libc::SIGKILL);
        let _ = sys::wait(pid);
        return Err(e);
    }
    let _ = go.write_all(b"1");
    drop(go);
    if namespaces && spec.watch.is_some() {
        // A tmux session's launcher holds the sandbox's user and mount namespaces for
        // `hands __remask`, which joins them through the launcher's pid.
        if let Ok(fd) = &pidfd {
            let _ = sys::setns(fd, libc::CLONE_NEWUSER | libc::CLONE_NEWNS);
        }
    }
    // The write end closes on the command's execve (close-on-exec) and in the init: an empty
    // read means the command started; anything else is why it did not.
    let mut why = String::new();
    let _ = std::fs::File::from(err_read).read_to_string(&mut why);
    // Whether the daemon was told the run ended (`Report::Ended`) before the init was gone.
    let mut told = false;
    let mut done = namespaces.then_some(done_read);
    if let Ok(pidfd) = &pidfd {
        let tick = if watch.is_some() { WATCH_MS } else { -1 };
        loop {
            match sys::wait_event(pidfd, &signals, done.as_ref(), tick) {
                // Every process of the command is gone: the daemon may answer now, while the
                // init's namespaces are taken down and the cgroup leaf removed (issue 34: half
                // a millisecond of every command).
                Ok(sys::Event::Done(Some(code))) => {
                    done = None;
                    if why.is_empty() {
                        bounds::out_of_memory(leaf.as_ref(), &spec, reporter);
                        sys::let_go_of_output();
                        reporter.send(&Report::Ended { code });
                        told = true;
                    }
                }
                Ok(sys::Event::Done(None)) => done = None,
                // The init passes it on to the command's process group; without namespaces
                // the child is the command, the leader of its own group.
                Ok(sys::Event::Signal(sig)) => {
                    sys::signal(if namespaces { pid } else { -pid }, sig);
                }
                Ok(sys::Event::Tick) => {
                    use std::os::unix::fs::MetadataExt;
                    if !namespaces {
                        sys::reap_others(pid);
                    }
                    // A removed marker has no links left: end everything in the sandbox.
                    if watch.as_ref().is_some_and(|f| f.metadata().is_ok_and(|m| m.nlink() == 0)) {
                        sys::signal(pid, libc::SIGKILL);
                    }
                }
                Ok(sys::Event::Ended) | Err(_) => break,
            }
        }
    }
    let status = sys::wait(pid);
    if !namespaces {
        // No init to end what the command left behind: its process group, what was orphaned
        // to this process, and its cgroup.
        sys::signal(-pid, libc::SIGKILL);
        sys::end_children();
        if let Some(l) = &leaf {
            l.kill_all();
        }
    }
    if !why.is_empty() {
        drop(leaf);
        return Err(failure_read(&why).into());
    }
    if !told {
        bounds::out_of_memory(leaf.as_ref(), &spec, reporter);
    }
    drop(leaf);
    status
}

/// The pipes the init is given: the error pipe (closed at the command's exec), the go pipe's
/// read end (the launcher has placed it in its cgroup v2 leaf, if it does), the leaf the init
/// enters itself on cgroup v1 ([`bounds::Leaf::enter`]), and the done pipe.
struct Pipes<'a> {
    err_write: &'a mut Option<std::fs::File>,
    placed: &'a std::os::fd::OwnedFd,
    leaf: Option<&'a bounds::Leaf>,
    done: std::os::fd::OwnedFd,
}

/// Whether the launcher will make namespaces for `spec` (a root daemon's roots may then be
/// id-mapped).
fn namespaces_wanted(spec: &Spec) -> bool {
    spec.run_as.is_some() && !spec.without_namespaces
}

/// PID 1 of the sandbox: builds the new root, forks the command and stays as its init.
/// Returns only on failure (before the command started).
fn init(
    spec: &Spec,
    premade: &mut std::collections::BTreeMap<std::path::PathBuf, idmap::Premade>,
    old_mask: &libc::sigset_t,
    pipes: Pipes<'_>,
    reporter: &report::Reporter,
) -> anyhow::Result<()> {
    let Pipes { err_write, placed, leaf, done } = pipes;
    // Ubuntu's AppArmor restriction lets an unprivileged process make a user namespace but
    // takes every capability in it away: the first mount is where that shows.
    // A container's runtime forbids some of what follows (a masked /proc, seccomp on
    // pivot_root): `in_container` says so.
    #[expect(
        clippy::disallowed_methods,
        reason = "procfs: AppArmor's user-namespace switch, read to name the remedy"
    )]
    let no_caps = |e: anyhow::Error| {
        let restricted =
            std::fs::read_to_string("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
                .is_ok_and(|v| v.trim() == "1");
        if restricted {
            let why = format!(
                "{e:#}: the user namespace was made without capabilities: {}",
                userns_refused(libc::EPERM)
            );
            report::Failure::new(Cause::NoNamespaces, why).into()
        } else {
            in_container(e)
        }
    };
    let walled = mounts::build_root(spec, premade).map_err(no_caps)?;
    // What a sandbox made ready ahead checks when its call comes (decision 0077).
    let built = spec.ready.then(|| call::Built { marks: mounts::marks(spec), walled });
    // Every tree was attached (or is not needed): none stays open in the init.
    premade.clear();
    if !spec.network && spec.netns.is_none() {
        sys::loopback_up()?;
    }
    let _ = sys::set_hostname("sandbox");
    // The launcher has put us in the command's cgroup by now (or has died), or we enter it
    // ourselves: a cgroup namespace rooted at that leaf, and nothing is forked before.
    if !sys::read_byte(placed) {
        sys::exit_now(SETUP_FAILED);
    }
    if let Some(l) = leaf {
        l.enter()?;
    }
    sys::unshare(libc::CLONE_NEWCGROUP).map_err(no_caps)?;
    // The launcher's stop signals stay blocked here and come through a signalfd; each gets a
    // handler too, so the kernel does not drop one sent from outside the namespace.
    for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
        sys::catch(sig);
    }
    let sigs = sys::signalfd(&[libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGCHLD])?;
    // The init becomes the command's user before the command exists: it can signal it (and
    // nothing else), and keeps no capability; the command inherits all of this.
    drop_privileges(spec)?;
    // The init creates what the command asks to create (`notify`): under the same Landlock
    // rules, it can create nothing the command could not.
    walls::landlock(spec, false)?;
    let handoff = notify::Handoff::new()?;
    // A change of uid clears the parent-death signal: set it again, then make sure the
    // launcher did not die in between (it still reads the error pipe).
    sys::die_with_parent()?;
    if !err_write.as_ref().is_some_and(sys::reader_alive) {
        sys::exit_now(SETUP_FAILED);
    }
    // A sandbox made ready ahead waits here for its call (decision 0077).
    let call;
    let spec = match &built {
        Some(built) => {
            call = call::wait_for_call(spec, built, reporter)?;
            &call
        }
        None => spec,
    };
    let child = sys::fork()?;
    if child == 0 {
        drop(sigs);
        drop(done);
        let failed = command(spec, old_mask, Some(&handoff));
        if let (Err(e), Some(w)) = (failed, err_write.as_mut()) {
            let _ = w.write_all(&failure_bytes(&e));
        }
        sys::exit_now(SETUP_FAILED);
    }
    let mut walls_done = None;
    // The command's listener: what it creates while it runs is checked here (a failure is the
    // command's own error to report; it does not start).
    if let Ok(Some(listener)) = handoff.receive(child) {
        let walls = notify::Walls::of(spec);
        let reporter = reporter.clone();
        let (served, ended) = std::sync::mpsc::channel::<()>();
        let spawned = std::thread::Builder::new().name("walls".into()).spawn(move || {
            notify::serve(listener, walls, reporter);
            let _ = served.send(());
        });
        walls_done = spawned.ok().map(|_| ended);
    }
    // The command's copy of the error pipe closes at its execve; the init's now.
    *err_write = None;
    let code = loop {
        match sys::read_signal(&sigs) {
            Ok(libc::SIGCHLD) => {
                let mut ended = None;
                loop {
                    match sys::reap_one() {
                        sys::Reaped::Ended(p, code) if p == child => ended = Some(code),
                        sys::Reaped::Ended(..) => {}
                        sys::Reaped::None | sys::Reaped::NoChildren => break,
                    }
                }
                if let Some(code) = ended {
                    break code;
                }
            }
            // To the command's process group (it called setsid, and a session leader cannot
            // leave its group), once only: a trap would run again for a second TERM. Before
            // its setsid there is no such group yet, so then to the command itself.
            Ok(sig) => {
                if !sys::signal_group(child, sig) {
                    sys::signal(child, sig);
                }
            }
            Err(_) => break SETUP_FAILED,
        }
    };
    // The command has ended: whatever it left running ends with it.
    sys::signal(-1, libc::SIGKILL);
    while sys::wait_any().is_some() {}
    // Every process of the command is reaped. Once the walls' thread has sent its last report
    // and written its last line (it stops when nothing uses the filter), the launcher may tell
    // the daemon; this process's own end (its namespaces) is then nobody's wait. A thread that
    // does not stop in time leaves the word unsaid: the daemon waits for the exit as before.
    let stopped = walls_done.is_none_or(|ended| ended.recv_timeout(WALLS_STOP).is_ok());
    if stopped {
        sys::let_go_of_output();
        let _ = rustix::io::write(&done, &[code]);
    }
    sys::exit_now(code)
}

/// How long the init waits for its walls' thread to stop once the command's last process is
/// gone (the kernel wakes it at once: this bounds a thread busy with a slow call's answer).
const WALLS_STOP: std::time::Duration = std::time::Duration::from_millis(200);

/// The command's own process: confines itself, then execs. Returns only on failure. With
/// namespaces there is an init, and `handoff` passes it the in-run walls' listener.
fn command(
    spec: &Spec,
    old_mask: &libc::sigset_t,
    handoff: Option<&notify::Handoff>,
) -> anyhow::Result<()> {
    let namespaces = handoff.is_some();
    sys::restore_signal_mask(old_mask)?;
    sys::default_action(libc::SIGPIPE);
    std::env::set_current_dir(&spec.cwd)
        .map_err(|e| anyhow::anyhow!("cannot enter cwd {}: {e}", spec.cwd.display()))?;
    walls::rlimits(
        &spec.limits,
        namespaces && spec.bound == Bound::Rlimit,
        !spec.bound.bounds_memory(),
    )?;
    // Only 0-2 reach the command; the error pipe stays open until the execve closes it.
    sys::cloexec_from(3)?;
    sys::setsid()?;
    let mut env = std::borrow::Cow::Borrowed(&spec.env);
    if !namespaces {
        drop_privileges(spec)?;
        // No init here: the command itself dies with the launcher (set after the change of
        // uid, which clears it).
        sys::die_with_parent()?;
        // No private /tmp without a mount namespace, and the host's is out of Landlock's
        // reach: temporary files go to the sandbox home's (made in `launch`).
        env.to_mut().insert("TMPDIR".into(), spec.home.join("tmp").to_string_lossy().into_owned());
    }
    // A layer of its own, though the init restricted itself with the same rules before it
    // forked this process: Landlock lets a process ptrace (and read the `/proc/<pid>/environ`
    // and memory of) only processes in its own domain or below, so the command's nested domain
    // keeps it off the init, which shares its uid when the daemon is an ordinary user (found by
    // scripts/test-as-user: without this layer /proc/1/environ showed the launcher's).
    walls::landlock(spec, !namespaces)?;
    let program = sys::find_program(&spec.argv[0], env.get("PATH").map(String::as_str))?;
    // The program the daemon's configuration admitted, by identity (decision 0068): checked
    // in the command's own view, the last thing before the exec.
    if let Some((dev, ino)) = spec.program {
        use std::os::unix::fs::MetadataExt;
        let now = std::fs::metadata(&program).map(|m| (m.dev(), m.ino())).ok();
        if now != Some((dev, ino)) {
            // Not what the check saw: a refusal of one resolution (SPEC §3), typed as such.
            let why = format!(
                "refused to start: {} is not the file the configuration admitted (device {dev}, \
                 inode {ino}; now {}): it was replaced after the daemon loaded its \
                 configuration; a person who changed it on purpose restarts the daemon",
                program.display(),
                now.map_or_else(|| "gone".to_string(), |(d, i)| format!("device {d}, inode {i}"))
            );
            return Err(report::Failure::new(Cause::Changed, why).into());
        }
        if let Some(interpreter) = masked_interpreter(&program, &spec.masked) {
            anyhow::bail!(
                "refused to start: {} is a script run by {}, a program this run may not use (a \
                 confirm-listed program in a run no person confirmed, or a denied one); a \
                 person can confirm the run, or take the interpreter off commands.confirm",
                program.display(),
                interpreter.display()
            );
        }
    }
    // Before the main filter, which refuses any later listener: the newest filter's listener
    // would get the calls first.
    if let Some(h) = handoff {
        h.install()?;
    }
    walls::seccomp()?;
    sys::exec(&program, &spec.argv, &env)
}

/// The interpreter on `program`'s `#!` line, when its real file is one of `masked`.
#[expect(
    clippy::disallowed_methods,
    reason = "the command's own program, read inside the built sandbox, under its walls"
)]
fn masked_interpreter(
    program: &std::path::Path,
    masked: &[std::path::PathBuf],
) -> Option<std::path::PathBuf> {
    let mut head = [0u8; 256];
    let n = std::fs::File::open(program).and_then(|mut f| f.read(&mut head)).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = line.split(|b| *b == b'\n').next()?;
    let text = std::str::from_utf8(line).ok()?;
    let interpreter = std::path::PathBuf::from(text.split_whitespace().next()?);
    let real = std::fs::canonicalize(&interpreter).unwrap_or(interpreter);
    masked.contains(&real).then_some(real)
}

/// Locks the securebits, becomes `run_as` (a root daemon's commands), sets `no_new_privs` and
/// drops every capability.
fn drop_privileges(spec: &Spec) -> anyhow::Result<()> {
    walls::lock_privileges(spec.without_namespaces && sys::euid() != 0)?;
    if let Some(ids) = spec.run_as {
        sys::become_ids(ids.uid, ids.gid)?;
    }
    walls::no_new_privs()?;
    walls::clear_capabilities()
}

/// Who the commands of a daemon run as root run as (SPEC §5.2 item 6): `sandbox.run_as` (a
/// user name or uid), else the owner of the module's first writable root, else `nobody`.
/// `None` for a daemon that is not root: its commands run as itself.
pub fn run_as(
    configured: Option<&str>,
    first_writable_root: Option<&std::path::Path>,
) -> anyhow::Result<Option<Ids>> {
    use std::os::unix::fs::MetadataExt;
    if sys::euid() != 0 {
        return Ok(None);
    }
    let (uid, gid) = match configured {
        Some(name) => sys::lookup_user(name).ok_or_else(|| {
            anyhow::anyhow!(
                "sandbox.run_as = {name:?} is neither a user of this machine nor a uid; name a \
                 user (e.g. the project's owner) or a uid"
            )
        })?,
        None => match first_writable_root.and_then(|r| std::fs::metadata(r).ok()) {
            Some(m) if m.uid() != 0 => (m.uid(), m.gid()),
            _ => sys::lookup_user("nobody").unwrap_or((65534, 65534)),
        },
    };
    anyhow::ensure!(
        uid != 0,
        "sandbox.run_as names root: a daemon run as root never runs commands as root; name an \
         ordinary user (e.g. the project's owner) or leave it out (nobody)"
    );
    Ok(Some(Ids { uid, gid }))
}
