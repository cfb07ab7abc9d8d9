//! A client's private network namespace in a module (SPEC §4.2, decisions 0105 and 0106):
//! without the `network` grant every command and tmux server of one client of a module shares
//! a single loopback, so a dev server started with `tmux_start` is reachable from that
//! client's `bash` and from nothing else.
//!
//! A network namespace lives as long as something is in it, so a small holder process keeps it:
//! `hands __netns PIDFILE` unshares a user and a network namespace, brings loopback up, writes
//! `PID START` (its pid and start time) to PIDFILE and sleeps. It lives while something needs
//! it: a daemon of the state dir that uses it, or a tmux session kept past its daemon
//! (`keep_sessions`), each named by a file `PID-START` in the folder beside PIDFILE
//! (`<module>.users/`, see [`crate::netns::Netns`]). Every 2 s it checks them; when none is
//! alive it ends, under the pid file's lock so that no daemon picks it at that moment
//! (decision 0056). It also ends once PIDFILE no longer names it (the state folder was
//! removed, or a newer holder took over). Launchers join its user and network namespaces
//! through a pidfd before unsharing the rest (see [`join`]).

use super::{mounts, sys};
use crate::netns::{Process, start_time};
use anyhow::{Context, Result, anyhow};
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

/// How often the holder checks that PIDFILE still names it.
const CHECK: Duration = Duration::from_secs(2);

/// Runs `hands __netns PIDFILE`.
pub fn holder_main(pidfile: &Path) -> ExitCode {
    match hold(pidfile) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let _ = writeln!(std::io::stderr().lock(), "hands netns: {e:#}");
            match super::Failure::of(&e).cause {
                super::Cause::NoNamespaces => ExitCode::from(super::NO_NAMESPACES),
                _ => ExitCode::from(super::SETUP_FAILED),
            }
        }
    }
}

#[expect(
    clippy::disallowed_methods,
    reason = "the holder's pid and lock files in the state dir; stdout is the daemon's `ready` pipe"
)]
fn hold(pidfile: &Path) -> Result<()> {
    // No controlling terminal: a Ctrl-C meant for the daemon does not end the namespace.
    let _ = sys::setsid();
    let ids = sys::ids();
    if sys::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET).is_err() {
        // The first user namespace of a module is made here: name the remedy, as the launcher
        // does (a switched-off sysctl answers ENOSPC, AppArmor and containers EPERM).
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EPERM);
        let why = super::userns_refused(errno);
        return Err(super::Failure::new(super::Cause::NoNamespaces, why).into());
    }
    // A container's runtime may refuse what follows (decision 0071): no namespaces, then.
    mounts::map_ids(ids).map_err(super::in_container)?;
    sys::loopback_up().map_err(super::in_container)?;
    let pid = std::process::id() as i32;
    let start = start_time(pid).ok_or_else(|| anyhow!("cannot read /proc/self/stat"))?;
    let mine = format!("{pid} {start}\n");
    let tmp = pidfile.with_extension(format!("tmp{pid}"));
    std::fs::write(&tmp, &mine).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, pidfile)
        .with_context(|| format!("cannot write {}", pidfile.display()))?;
    // The daemon reads this line, then the holder has nothing more to say.
    {
        let mut out = std::io::stdout().lock();
        out.write_all(b"ready\n").context("cannot report readiness")?;
        out.flush().context("cannot report readiness")?;
    }
    sys::stdout_to_null()?;
    let users = crate::netns::users_dir(pidfile);
    loop {
        std::thread::sleep(CHECK);
        let named = || std::fs::read_to_string(pidfile).is_ok_and(|text| text == mine);
        if !named() {
            return Ok(());
        }
        if crate::netns::any_user_alive(&users) {
            continue;
        }
        // Nobody needs the namespace: end, under the lock a daemon takes to register itself
        // and pick a holder, so that it either saw this holder's pid file gone or registered
        // itself before the second look.
        let lock = std::fs::File::create(pidfile.with_extension("lock"))
            .with_context(|| format!("cannot open the lock beside {}", pidfile.display()))?;
        rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive)
            .context("cannot lock the holder's lock file")?;
        if crate::netns::any_user_alive(&users) {
            continue;
        }
        if named() {
            let _ = std::fs::remove_file(pidfile);
        }
        return Ok(());
    }
}

/// Joins the holder's network namespace, before the launcher clones the sandbox into the
/// rest. An ordinary user's launcher joins the holder's user namespace too (only there does it
/// hold the capability `setns` wants), so the sandbox's user namespace nests in the holder's;
/// root's stays in the host's, so that it may map `sandbox.run_as` into the sandbox.
pub fn join(holder: Process, with_userns: bool) -> Result<()> {
    let gone = || {
        anyhow!(
            "the module's network namespace holder (pid {}) is gone; the daemon starts a new one \
             on the next command",
            holder.pid
        )
    };
    let pidfd = sys::pidfd_open(holder.pid).map_err(|_| gone())?;
    // Checked after the pidfd exists: if the pid still has the recorded start time now, the
    // pidfd refers to the holder and cannot come to mean another process.
    if !holder.alive() {
        return Err(gone());
    }
    let userns = if with_userns { libc::CLONE_NEWUSER } else { 0 };
    sys::setns(&pidfd, userns | libc::CLONE_NEWNET)
        .context("cannot join the module's network namespace")
}
