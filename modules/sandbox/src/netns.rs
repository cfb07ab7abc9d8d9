//! The daemon's side of a module's private network namespaces (the holder process itself is
//! `launcher/holder.rs`): one for each of the module's clients (decision 0106), each kept by a
//! holder named by a pid file `<module>-<client key>.pid` in the state dir. Find a client's
//! live holder, or start one, and hand its pid and start time to every launcher of that
//! client. A holder lives while one of its users does: each daemon that uses it and each tmux
//! session kept past its daemon is a file `PID-START` in `<pid file stem>.users/` beside it.

use anyhow::{Context, Result, anyhow};
use std::collections::HashMap;
use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// A process named for good by its pid and start time: the network namespace holder, or a
/// tmux session's launcher. A reused pid has another start time, so it is never mistaken.
#[derive(Debug, Clone, Copy, serde::Deserialize, serde::Serialize, PartialEq, Eq, Hash)]
#[serde(deny_unknown_fields)]
pub struct Process {
    pub pid: i32,
    pub start: u64,
}

impl Process {
    /// Whether this very process is still alive.
    pub fn alive(self) -> bool {
        start_time(self.pid) == Some(self.start)
    }
}

/// The start time of `pid` (field 22 of `/proc/PID/stat`, clock ticks since boot): with the pid
/// it names one process for good, since a reused pid starts later.
#[expect(
    clippy::disallowed_methods,
    reason = "procfs: a process's start time, which names it for good"
)]
pub fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses; the fields after it do not.
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    rest.split(' ').nth(19)?.parse().ok()
}

/// The folder of a holder's users, beside its pid file.
pub fn users_dir(pidfile: &Path) -> PathBuf {
    pidfile.with_extension("users")
}

/// Whether a user named in `dir` is alive; the entries of users that have ended are removed.
pub fn any_user_alive(dir: &Path) -> bool {
    let mut alive = false;
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = e.file_name();
        let user = name.to_str().and_then(|n| {
            let (pid, start) = n.split_once('-')?;
            Some(Process { pid: pid.parse().ok()?, start: start.parse().ok()? })
        });
        match user {
            Some(p) if p.alive() => alive = true,
            _ => {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    alive
}

/// Names `p` among the holder's users in `dir`.
#[expect(clippy::disallowed_methods, reason = "the holder's users folder in the state dir")]
fn add_user(dir: &Path, p: Process) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let entry = dir.join(format!("{}-{}", p.pid, p.start));
    std::fs::write(&entry, b"").with_context(|| format!("cannot write {}", entry.display()))
}

/// This process, named for good.
pub fn this_process() -> Option<Process> {
    let pid = std::process::id() as i32;
    Some(Process { pid, start: start_time(pid)? })
}

/// The module's holders, one for each client key: reused while alive, started again when gone.
pub struct Netns {
    exe: PathBuf,
    dir: PathBuf,
    module: String,
    current: Mutex<HashMap<String, Process>>,
}

impl Netns {
    /// `dir` is the state dir's `netns/` folder; `module` begins the pid files' names in it.
    pub fn new(exe: &Path, dir: &Path, module: &str) -> Result<Netns> {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        Ok(Netns {
            exe: exe.to_path_buf(),
            dir: dir.to_path_buf(),
            module: module.to_string(),
            current: Mutex::new(HashMap::new()),
        })
    }

    /// The pid file of the holder of client `key` (a short hex digest: a file name's piece).
    fn pidfile(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{}-{key}.pid", self.module))
    }

    /// The live holder of client `key`, starting one when there is none. Several daemons
    /// sharing a state dir agree on one through a lock file.
    pub fn holder(&self, key: &str) -> Result<Process> {
        let mut current = hands_roots::lock(&self.current);
        if let Some(h) = current.get(key).copied()
            && h.alive()
        {
            return Ok(h);
        }
        let pidfile = self.pidfile(key);
        let lock_path = pidfile.with_extension("lock");
        #[expect(clippy::disallowed_methods, reason = "the holder's lock file in the state dir")]
        let lock = std::fs::File::create(&lock_path)
            .with_context(|| format!("cannot open {}", lock_path.display()))?;
        rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive)
            .with_context(|| format!("cannot lock {}", lock_path.display()))?;
        // Named before the holder is picked, under the lock the holder takes to end: it then
        // either sees this daemon or is gone from the pid file.
        let me = this_process().ok_or_else(|| anyhow!("cannot read /proc/self/stat"))?;
        add_user(&users_dir(&pidfile), me)?;
        let h = match read_live(&pidfile) {
            Some(h) => h,
            None => self.spawn(&pidfile)?,
        };
        current.insert(key.to_string(), h);
        Ok(h)
    }

    /// Keeps client `key`'s holder (and so its loopback, for new commands) while `session`
    /// lives: a tmux session kept past the daemon (`keep_sessions`).
    pub fn keep_for(&self, key: &str, session: Process) -> Result<()> {
        add_user(&users_dir(&self.pidfile(key)), session)
    }

    #[expect(
        clippy::disallowed_methods,
        reason = "starts the daemon's own binary as the netns holder (`hands __netns`)"
    )]
    fn spawn(&self, pidfile: &Path) -> Result<Process> {
        use std::os::unix::process::CommandExt;
        use std::process::Stdio;
        let mut child = std::process::Command::new(&self.exe)
            .arg("__netns")
            .arg(pidfile)
            .env_clear()
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own process group: a Ctrl-C meant for the daemon leaves the namespace be.
            .process_group(0)
            .spawn()
            .context("cannot start the network namespace holder (hands __netns)")?;
        let mut line = String::new();
        if let Some(out) = child.stdout.take() {
            let _ = std::io::BufReader::new(out).read_line(&mut line);
        }
        if line.trim() != "ready" {
            let mut why = String::new();
            if let Some(mut err) = child.stderr.take() {
                let _ = err.read_to_string(&mut why);
            }
            let _ = child.kill();
            let code = child.wait().ok().and_then(|s| s.code());
            let why =
                format!("the module's private network namespace could not be made: {}", why.trim());
            // Its exit code, not its words, says that no user namespace can be made here.
            let cause = match code {
                Some(c) if c == i32::from(crate::launcher::NO_NAMESPACES) => {
                    crate::launcher::Cause::NoNamespaces
                }
                _ => crate::launcher::Cause::Other,
            };
            return Err(crate::launcher::Failure::new(cause, why).into());
        }
        // The holder outlives this call (and the daemon, while a kept session needs it); a
        // thread reaps it if it ends first.
        std::thread::spawn(move || child.wait());
        read_live(pidfile).ok_or_else(|| {
            anyhow!("the network namespace holder did not record itself in {}", pidfile.display())
        })
    }
}

/// The holder named by `pidfile`, when that process is alive and is a holder.
#[expect(
    clippy::disallowed_methods,
    reason = "the holder's pid file in the state dir, and its cmdline in procfs"
)]
fn read_live(pidfile: &Path) -> Option<Process> {
    let text = std::fs::read_to_string(pidfile).ok()?;
    let mut f = text.split_whitespace();
    let h = Process { pid: f.next()?.parse().ok()?, start: f.next()?.parse().ok()? };
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", h.pid)).ok()?;
    let is_holder = cmdline.split(|b| *b == 0).any(|a| a == b"__netns");
    (is_holder && h.alive()).then_some(h)
}
