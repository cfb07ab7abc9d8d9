//! The sandbox launcher behind the hidden `hands __sandbox SPEC` subcommand: it reads a JSON
//! [`Spec`], builds the namespaces, the new root, the limits, Landlock and seccomp, and runs the
//! command inside as PID 1 of its own PID namespace.
//!
//! Signals: SIGTERM, SIGINT or SIGHUP sent to the launcher is forwarded to every process of the
//! sandbox; PID 1, which the kernel shields from signals it set no handler for, is ended in
//! the signal's stead once it is alone (see `launch`); SIGKILL to the launcher kills them all.
//!
//! Exit status: the command's exit code, or 128 + the signal that ended it. When the sandbox
//! cannot be built the launcher prints `hands sandbox: ...` on stderr and exits 125, and the
//! command never starts.
// This module is the one place that needs raw system calls (unshare, mount, pivot_root, fork,
// capset, prctl, ioctl, setrlimit) that no safe crate covers; every `unsafe` block is a plain
// libc call on arguments built just before it.
#![allow(unsafe_code)]

mod confine;
mod mounts;
pub mod netns;
pub mod remask;
mod sys;

use serde::Deserialize;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::{Component, PathBuf};
use std::process::ExitCode;

/// Exit code of the launcher when the sandbox could not be built.
pub const SETUP_FAILED: u8 = 125;

/// How often a launcher with a `watch` file checks it.
const WATCH_MS: i32 = 2000;

/// How often a launcher standing in for a stop signal PID 1 cannot receive checks whether PID 1
/// is the last process left.
const STAND_IN_MS: i32 = 20;

/// What to run and what it may see. Every path is absolute and canonical (the daemon's roots
/// are); `..` is refused.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    /// The command; `argv[0]` is looked up in the `PATH` of `env` when it has no `/`.
    pub argv: Vec<String>,
    /// Working directory inside the sandbox (normally inside a root).
    pub cwd: PathBuf,
    /// The whole environment of the command; nothing of the launcher's own is added.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Folders bound at their real paths, read-write or read-only.
    #[serde(default)]
    pub roots: Vec<Root>,
    /// Paths inside writable roots re-bound read-only (their parents pinned).
    #[serde(default)]
    pub protected: Vec<PathBuf>,
    /// Denied and credential paths: masked when they exist inside a bound folder.
    #[serde(default)]
    pub masked: Vec<PathBuf>,
    /// System folders bound read-only (`/usr`, `/etc`, ...); a symlink (merged `/usr`) is
    /// recreated as the same symlink.
    #[serde(default)]
    pub system: Vec<PathBuf>,
    /// The host network; without it the command gets a private network namespace with
    /// loopback only (the namespace is the wall; Landlock does not restrict TCP).
    #[serde(default)]
    pub network: bool,
    /// Without `network`: the module's shared network namespace to join; none gives the
    /// command a namespace of its own.
    #[serde(default)]
    pub netns: Option<crate::netns::Process>,
    /// The sandbox's own home folder, bound read-write at its path (created when missing).
    pub home: PathBuf,
    #[serde(default)]
    pub limits: Limits,
    /// A host file whose removal ends the sandbox (checked every 2 s): tmux sessions live while
    /// their marker in the state dir does, so nothing outlives a removed state dir.
    #[serde(default)]
    pub watch: Option<PathBuf>,
    /// The daemon's pid: the launcher (and with it the sandbox) dies with that process, even
    /// when it is killed with SIGKILL. None for what must outlive the daemon (tmux servers).
    #[serde(default)]
    pub parent: Option<i32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Root {
    pub path: PathBuf,
    #[serde(default)]
    pub writable: bool,
}

/// Per-command limits; the defaults are SPEC §2's.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Processes and threads at once (a pids cgroup; RLIMIT_NPROC does not bind root).
    pub processes: u64,
    pub open_files: u64,
    pub file_size_mb: u64,
    /// Address space per process, and the size of the private `/tmp`.
    pub memory_mb: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits { processes: 512, open_files: 1024, file_size_mb: 4096, memory_mb: 8192 }
    }
}

impl Spec {
    fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(!self.argv.is_empty(), "argv is empty");
        let roots = self.roots.iter().map(|r| &r.path);
        let lists = self.protected.iter().chain(&self.masked).chain(&self.system);
        for p in roots.chain(lists).chain([&self.cwd, &self.home]).chain(&self.watch) {
            let clean = p.is_absolute()
                && p.components().all(|c| matches!(c, Component::RootDir | Component::Normal(_)))
                && p.components().count() > 1;
            anyhow::ensure!(clean, "{} is not a clean absolute path below /", p.display());
        }
        Ok(())
    }
}

/// Runs `hands __sandbox SPEC`.
pub fn main(spec: &str) -> ExitCode {
    match launch(spec) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            let mut err = std::io::stderr().lock();
            let _ = writeln!(err, "hands sandbox: {e:#}");
            ExitCode::from(SETUP_FAILED)
        }
    }
}

fn launch(spec: &str) -> anyhow::Result<u8> {
    use anyhow::Context;
    let spec: Spec = serde_json::from_str(spec).context("the spec is not valid")?;
    spec.validate()?;
    if let Some(parent) = spec.parent {
        sys::die_with_parent()?;
        // The parent may have died before the line above: then nothing would signal us.
        anyhow::ensure!(
            std::os::unix::process::parent_id() as i32 == parent,
            "the daemon (pid {parent}) is gone"
        );
    }
    std::fs::create_dir_all(&spec.home)
        .with_context(|| format!("cannot create the sandbox home {}", spec.home.display()))?;
    // Opened now: after the child's pivot_root the launcher sees the sandbox's root too.
    let watch = match &spec.watch {
        Some(p) => {
            Some(std::fs::File::open(p).with_context(|| format!("cannot open {}", p.display()))?)
        }
        None => None,
    };
    let cgroup = confine::PidsCgroup::join(spec.limits.processes)?;
    let (err_read, err_write) = sys::pipe()?;
    let (signals, old_mask) = sys::catch_stop_signals()?;
    mounts::enter_namespaces(spec.network, spec.netns)?;
    let pid = sys::fork()?;
    if pid == 0 {
        drop(err_read);
        drop(signals);
        let mut err_write = std::fs::File::from(err_write);
        // Killing the launcher kills PID 1, and with it every process of the namespace. A
        // launcher that died before this line is seen as the pipe's closed read end.
        let orphan = sys::die_with_parent().is_err() || !sys::reader_alive(&err_write);
        if orphan {
            sys::exit_now(SETUP_FAILED);
        }
        let started = sys::restore_signal_mask(&old_mask).and_then(|()| child(&spec));
        if let Err(e) = started {
            let _ = err_write.write_all(format!("{e:#}").as_bytes());
        }
        sys::exit_now(SETUP_FAILED);
    }
    drop(err_write);
    let pidfd = sys::pidfd_open(pid);
    // The write end closes on the child's execve (close-on-exec): an empty read means the
    // command started; anything else is why it did not.
    let mut why = String::new();
    let _ = std::fs::File::from(err_read).read_to_string(&mut why);
    // SIGTERM, SIGINT or SIGHUP to the launcher goes to every process of the sandbox (found in
    // its pids cgroup), so a caller can ask for a clean stop, wait, then SIGKILL the launcher.
    //
    // PID 1 receives such a signal only if it set a handler: the kernel drops it otherwise (a
    // namespace's init cannot be killed from outside by a signal it did not ask for). A
    // command run as PID 1 — `bash -c 'sleep 30'` execs `sleep` — would then sit out the
    // caller's grace period and die by SIGKILL. So when PID 1 neither handles nor ignores the
    // signal, the launcher watches the sandbox and, once PID 1 is the last process left (the
    // others had their signal and their time), ends it by SIGKILL as the signal would have,
    // and reports the signal it stood in for.
    let mut stand_in: Option<i32> = None;
    let mut stood_in = false;
    if let Ok(pidfd) = &pidfd {
        loop {
            let tick = match (stand_in, &watch) {
                (Some(_), _) => STAND_IN_MS,
                (None, Some(_)) => WATCH_MS,
                (None, None) => -1,
            };
            match sys::wait_event(pidfd, &signals, tick) {
                Ok(sys::Event::Signal(sig)) => {
                    cgroup.signal_all(sig);
                    if stand_in.is_none() && pid1_drops(sig) {
                        stand_in = Some(sig);
                    }
                }
                Ok(sys::Event::Tick) => {
                    use std::os::unix::fs::MetadataExt;
                    // A removed marker has no links left: end everything in the sandbox.
                    if watch.as_ref().is_some_and(|f| f.metadata().is_ok_and(|m| m.nlink() == 0)) {
                        cgroup.signal_all(libc::SIGKILL);
                    }
                    if stand_in.is_some() && !stood_in && cgroup.count() <= 1 {
                        // SAFETY: kill with integer arguments.
                        unsafe { libc::kill(pid, libc::SIGKILL) };
                        stood_in = true;
                    }
                }
                Ok(sys::Event::Ended) | Err(_) => break,
            }
        }
    }
    let status = match (sys::wait(pid), stand_in) {
        (Ok(code), Some(sig)) if stood_in && i32::from(code) == 128 + libc::SIGKILL => {
            Ok(128u8.saturating_add(u8::try_from(sig).unwrap_or(0)))
        }
        (status, _) => status,
    };
    drop(cgroup);
    anyhow::ensure!(why.is_empty(), "{why}");
    status
}

/// Whether the sandbox's PID 1 neither handles nor ignores `sig`, so that the kernel drops it
/// (read from `/proc/1/status`: once the command runs, the launcher shares the sandbox's root
/// and sees its /proc). `false` when that cannot be told.
fn pid1_drops(sig: i32) -> bool {
    let Ok(status) = std::fs::read_to_string("/proc/1/status") else { return false };
    let mask = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
    };
    let Ok(bit) = u32::try_from(sig - 1).map(|b| 1u64.checked_shl(b).unwrap_or(0)) else {
        return false;
    };
    match (mask("SigCgt:"), mask("SigIgn:")) {
        (Some(caught), Some(ignored)) => bit != 0 && (caught | ignored) & bit == 0,
        _ => false,
    }
}

/// Runs in the child, PID 1 of the new PID namespace; returns only on failure.
fn child(spec: &Spec) -> anyhow::Result<()> {
    mounts::build_root(spec)?;
    if !spec.network && spec.netns.is_none() {
        sys::loopback_up()?;
    }
    let _ = sys::set_hostname("sandbox");
    std::env::set_current_dir(&spec.cwd)
        .map_err(|e| anyhow::anyhow!("cannot enter cwd {}: {e}", spec.cwd.display()))?;
    confine::rlimits(&spec.limits)?;
    // Only 0-2 reach the command; the error pipe stays open until the execve closes it.
    sys::cloexec_from(3)?;
    sys::setsid()?;
    confine::no_new_privs()?;
    confine::drop_capabilities()?;
    confine::landlock(spec)?;
    let program = sys::find_program(&spec.argv[0], spec.env.get("PATH").map(String::as_str))?;
    confine::seccomp()?;
    sys::exec(&program, &spec.argv, &spec.env)
}

/// Wraps a raw descriptor just returned by the kernel.
fn owned(fd: i32) -> OwnedFd {
    // SAFETY: callers pass a descriptor the kernel just returned and nothing else owns.
    unsafe { OwnedFd::from_raw_fd(fd) }
}
