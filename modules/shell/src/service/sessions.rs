//! tools-shell's tmux sessions (SPEC §4.2): each session is a tmux server of its own, run by a
//! sandbox launcher as PID 1 of its own PID namespace, in the module's sandbox and shared
//! network namespace, on a socket in the state dir that only that session's sandbox sees.
//!
//! The tmux *client* commands (new-session, capture-pane, send-keys, ...) run through the
//! launcher too, never on the host: a tmux client obeys its server (it opens files the server
//! names), and the server is inside the sandbox.
//!
//! State, under `<state>/tmux/<module>/`: `<name>.json` (command, cwd, start time, the
//! launcher's pid and start time; written by the daemon, invisible to commands), `<name>.alive`
//! (the launcher's `watch` file: removing it ends the session), `<name>.log` (the launcher's
//! stderr) and `s/<name>/tmux.sock`, beside the pane's output log `s/<name>/out.NNNNNN`
//! (`wait.rs`). A session ends with the daemon that started it unless `keep_sessions`; a
//! kept one outlives it, and the next daemon reads the same files and adopts it
//! (`docs/decisions/0056-nothing-left-behind.md`); `hands stop` ends kept sessions with no
//! daemon running ([`end_sessions_in`]).
//!
//! Here: the session records, the masking of secret files that appear while a session runs,
//! reading, listing and ending sessions; `tmux_start.rs` starts one, `tmux_send.rs` types into
//! one, `wait.rs` waits on a pane's output.

mod tmux_send;
mod tmux_start;
mod wait;

use crate::ShellError;
use crate::needs::Widening;
use crate::service::Shell;
use crate::tmux::{self, Facts, KillOutput, ListOutput, ReadOutput, Session, State, check_name};
use hands_sandbox::netns;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The longest unix socket path (`sun_path` holds 108 bytes with its NUL).
const MAX_SOCKET_PATH: usize = 100;
/// How long a tmux client command may take.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a new server gets to create its socket: a deadline, not a wait (the socket is
/// polled every 10 ms). 5 s was too short once in a VM under software emulation at load 9.
const SERVER_START: Duration = Duration::from_secs(20);
/// How long after start a command that exits 126/127 counts as "could not start".
const START_CHECK: Duration = Duration::from_millis(500);
/// The lines of the pane `tmux_start` returns.
const START_LINES: u32 = 20;

/// Where a module's sessions live.
#[derive(Clone)]
pub struct Sessions {
    dir: PathBuf,
    /// Where the socket folders live when not in `dir/s`: set once, before any session
    /// starts, where `sandbox.run_as`'s user must reach them on the host.
    sockets: std::sync::OnceLock<PathBuf>,
    /// `bash` on the configured PATH: tmux's `default-shell`, which runs each command.
    bash: String,
}

/// What the daemon records of a session.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Meta {
    name: String,
    command: String,
    cwd: String,
    started: u64,
    launcher: netns::Process,
    /// Who started it (the dashboard shows it); absent in records of older versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    client: Option<String>,
    /// The secret files masked in the session's sandbox: those the walk found when it started,
    /// and those masked since (see [`Shell::remask`]); absent in records of older versions.
    #[serde(default)]
    masked: Vec<PathBuf>,
    /// The pane's output is logged (`wait.rs`), so cursors work; false in records of older
    /// versions.
    #[serde(default)]
    log: bool,
    /// The widening a person approved for the session's life (`needs`): every `tmux_send`
    /// into it is asked, naming it, by any client and after a restart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    needs: Option<Widening>,
    /// The daemon the session ends with; none for a session kept past its daemon
    /// (`keep_sessions`, and every session of older versions, which all outlived theirs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    daemon: Option<netns::Process>,
}

impl Sessions {
    pub fn new(state: &Path, module: &str, path: &str) -> anyhow::Result<Sessions> {
        use anyhow::Context;
        let dir = state.join("tmux").join(module);
        std::fs::create_dir_all(dir.join("s"))
            .with_context(|| format!("cannot create {}", dir.display()))?;
        let bash = path
            .split(':')
            .map(|d| Path::new(d).join("bash"))
            .find(|p| p.is_file())
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_else(|| "/bin/bash".into());
        Ok(Sessions { dir, sockets: std::sync::OnceLock::new(), bash })
    }

    /// Moves the socket folders to `dir` (once, before any session starts): see
    /// [`crate::service::reachable_by_run_as`].
    pub(crate) fn move_sockets(&self, dir: PathBuf) {
        let _ = self.sockets.set(dir);
    }

    /// The folder of the module's session records, in the state dir.
    pub(crate) fn records(&self) -> &Path {
        &self.dir
    }

    fn meta_path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.json"))
    }

    fn marker(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.alive"))
    }

    fn socket_dir(&self, name: &str) -> PathBuf {
        match self.sockets.get() {
            Some(base) => base.join(name),
            None => self.dir.join("s").join(name),
        }
    }

    fn socket(&self, name: &str) -> String {
        self.socket_dir(name).join("tmux.sock").to_string_lossy().into_owned()
    }

    #[expect(clippy::disallowed_methods, reason = "a session's record in the state dir")]
    fn read_meta(&self, name: &str) -> Option<Meta> {
        let text = std::fs::read_to_string(self.meta_path(name)).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Names of the recorded sessions whose server still runs (decision 0083's census).
    pub(crate) fn live(&self) -> Vec<String> {
        let live = |n: &String| self.read_meta(n).is_some_and(|m| m.launcher.alive());
        self.names().into_iter().filter(live).collect()
    }

    /// Names of recorded sessions, sorted.
    fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&self.dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let n = e.file_name().to_str()?.strip_suffix(".json")?.to_string();
                check_name(&n).is_ok().then_some(n)
            })
            .collect();
        names.sort();
        names
    }

    /// Removes everything recorded of a session (its launcher already gone).
    fn forget(&self, name: &str) {
        let _ = std::fs::remove_file(self.marker(name));
        let _ = std::fs::remove_file(self.meta_path(name));
        let _ = std::fs::remove_file(self.dir.join(format!("{name}.log")));
        let _ = std::fs::remove_dir_all(self.socket_dir(name));
    }
}

/// Ends a session's launcher, and with it its PID namespace: SIGTERM (forwarded to every
/// process), a grace period, then SIGKILL. Waits until it is gone.
async fn end_launcher(l: netns::Process) {
    if l.alive() {
        let _ = tokio::task::spawn_blocking(move || end_launcher_now(l)).await;
    }
}

/// [`end_launcher`], blocking the calling thread.
fn end_launcher_now(l: netns::Process) {
    use rustix::process::{Pid, Signal, kill_process};
    let Some(pid) = Pid::from_raw(l.pid) else { return };
    if !l.alive() {
        return;
    }
    let _ = kill_process(pid, Signal::TERM);
    let until = Instant::now() + crate::service::GRACE;
    while l.alive() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    if l.alive() {
        let _ = kill_process(pid, Signal::KILL);
    }
    let until = Instant::now() + Duration::from_secs(5);
    while l.alive() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `hands stop` with no daemon running: ends every tmux session recorded in the state dir
/// `state` (kept sessions, which outlived their daemon) and forgets it; the names ended, each
/// with its module. The module's network namespace holder then ends by itself, once nothing
/// it serves is alive.
pub fn end_sessions_in(state: &Path) -> Vec<(String, String)> {
    let mut ended = Vec::new();
    let modules = std::fs::read_dir(state.join("tmux")).into_iter().flatten().flatten();
    for module in modules.filter(|e| e.file_type().is_ok_and(|t| t.is_dir())) {
        let module_name = module.file_name().to_string_lossy().into_owned();
        let t = Sessions {
            dir: module.path(),
            sockets: std::sync::OnceLock::new(),
            bash: String::new(),
        };
        // A root daemon's sockets may have been moved to /tmp (`reachable_by_run_as`), which
        // names that folder by the records folder's identity: found again the same way.
        if let Some(moved) = crate::service::moved_sockets(&t.dir) {
            t.move_sockets(moved);
        }
        for name in t.names() {
            if let Some(m) = t.read_meta(&name) {
                let was_alive = m.launcher.alive();
                end_launcher_now(m.launcher);
                if was_alive {
                    ended.push((module_name.clone(), name.clone()));
                }
            }
            t.forget(&name);
        }
    }
    ended
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn no_session(name: &str) -> ShellError {
    ShellError::Failed(format!(
        "no tmux session named {name:?}; tmux_list shows this module's sessions"
    ))
}

/// Refuses a client the session `m` another client started: a client reads, types into and
/// ends only its own sessions (SPEC §13: a session is a client like any other, its identity in
/// the scopes is its own). `whose` is the calling client; `None` is the person (the dashboard,
/// `hands stop`), who sees every session. A record of an older version names no client.
fn owned(m: &Meta, whose: Option<&str>) -> Result<(), ShellError> {
    match (&m.client, whose) {
        (Some(started_by), Some(caller)) if started_by != caller => {
            Err(ShellError::Failed(format!(
                "tmux session {:?} was started by another client (`{}`): a client reads, types \
                 into and ends only its own sessions; start one of your own with tmux_start (a \
                 person can end it with `hands stop` or on the dashboard)",
                m.name,
                hands_roots::shown(started_by)
            )))
        }
        _ => Ok(()),
    }
}

impl Shell {
    /// The recorded, live session `name`, or the refusal that says it does not exist.
    fn live_session(&self, name: &str) -> Result<Meta, ShellError> {
        check_name(name)?;
        let t = &self.tmux;
        match t.read_meta(name) {
            Some(m) if m.launcher.alive() => Ok(m),
            Some(_) => {
                t.forget(name);
                self.end_session_state(name);
                Err(ShellError::Failed(format!(
                    "tmux session {name:?} is gone (its server ended, e.g. with the machine); \
                     start it again with tmux_start"
                )))
            }
            None => Err(no_session(name)),
        }
    }

    /// Runs one tmux client command in the session's sandbox and returns its stdout, or a
    /// refusal carrying tmux's complaint.
    async fn tmux_client(
        &self,
        name: &str,
        argv: Vec<String>,
        cwd: &str,
    ) -> Result<Vec<u8>, ShellError> {
        let socket_dir = self.tmux.socket_dir(name);
        let mut walked_again = false;
        loop {
            let mut spec =
                self.spec(argv.clone(), Path::new(cwd), Some(&socket_dir), None, None).await?;
            // A client writes nothing in the roots: what a server (the session's own, or one a
            // command put in its place) makes it run cannot change a work tree either.
            spec.read_only_roots_but(&socket_dir);
            // A sandbox made ready for this session's client commands, else one of its own
            // (decision 0078).
            let started = match self.ready_tmux.take(&spec) {
                Some(ready) => Ok(ready),
                None => spec.spawn_piped(&self.launcher),
            };
            let run = async { hands_sandbox::launcher::Spec::output_of(started?).await };
            let (out, reported) = tokio::time::timeout(CLIENT_TIMEOUT, run)
                .await
                .map_err(|_| {
                    ShellError::Failed(format!("tmux did not answer within {CLIENT_TIMEOUT:?}"))
                })?
                .map_err(|e| {
                    ShellError::Sandbox(format!("the sandbox launcher could not start: {e}"))
                })?;
            if out.status.success() {
                self.ready_tmux.prepare(&spec, &self.launcher);
                return Ok(out.stdout);
            }
            // The launcher's report, not what tmux printed, says whether the sandbox was built.
            if let Some((why, cause)) = reported.setup_failed() {
                if cause == hands_sandbox::launcher::Cause::Changed && !walked_again {
                    self.walk_again(why);
                    walked_again = true;
                    continue;
                }
                return Err(ShellError::Failed(format!(
                    "tmux could not run for session {name:?}: its sandbox could not be built \
                     (hands sandbox: {why})"
                )));
            }
            let err = String::from_utf8_lossy(&out.stderr);
            return Err(ShellError::Failed(format!(
                "tmux failed for session {name:?}: {}",
                err.trim()
            )));
        }
    }

    /// The cursor of a session now (0 when it keeps no log).
    fn cursor(&self, m: &Meta) -> u64 {
        if m.log { wait::Log::new(self.tmux.socket_dir(&m.name)).end() } else { 0 }
    }

    /// Masks, in the session's running sandbox, the secret files the roots hold now that it has
    /// not masked yet (a `.env` created after it started), through `hands __remask`
    /// (`hands_sandbox::launcher::remask`), and records them. Refuses when that fails: what is typed next
    /// could read them.
    async fn remask(&self, m: &mut Meta) -> Result<(), ShellError> {
        let found = self.found_masks().await?;
        let known: std::collections::HashSet<PathBuf> = m.masked.iter().cloned().collect();
        // A mask stays only while it is a mount in the session's view: a host rename over its
        // file (an editor's atomic save) took it off, and the new file counts as not masked
        // (decision 0079). One under a masked folder is covered by that folder's mask.
        let mounted = hands_sandbox::launcher::remask::mount_points(&m.launcher);
        let held = |p: &PathBuf| {
            known.contains(p)
                && mounted
                    .as_ref()
                    .is_none_or(|on| p.ancestors().any(|a| on.contains(a) && known.contains(a)))
        };
        let new: Vec<&PathBuf> = found.paths.iter().filter(|p| !held(p)).collect();
        if new.is_empty() {
            return Ok(());
        }
        let name = &m.name;
        let refuse = |why: String| {
            let list: Vec<String> = new.iter().map(|p| p.display().to_string()).collect();
            ShellError::Failed(format!(
                "secret files appeared in the roots after tmux session {name:?} started ({}), and \
                 they could not be hidden from it: {why}; nothing was typed. tmux_kill the session \
                 and start it again (a new session masks them)",
                list.join(", ")
            ))
        };
        let paths: Vec<&std::path::Path> = new.iter().map(|p| p.as_path()).collect();
        let answer = hands_sandbox::launcher::remask::request(
            &self.exe,
            &m.launcher,
            &paths,
            CLIENT_TIMEOUT,
        )
        .await
        .map_err(|e| refuse(e.to_string()))?;
        tracing::info!(
            session = %name,
            masked = ?answer.masked,
            absent = ?answer.absent,
            "masked secret files that appeared after the tmux session started"
        );
        m.masked.extend(answer.masked.into_iter().filter(|p| !known.contains(p)));
        let text = serde_json::to_string(&*m).map_err(|e| refuse(e.to_string()))?;
        write_atomic(&self.tmux.meta_path(name), &text)
            .map_err(|e| refuse(format!("cannot record the session: {e}")))
    }

    async fn read_pane(&self, name: &str, cwd: &str, lines: u32) -> Result<ReadOutput, ShellError> {
        let argv = tmux::read_argv(&self.tmux.socket(name), name, lines);
        let out = self.tmux_client(name, argv, cwd).await?;
        tmux::read_output(name, &out, lines, self.output_chars).ok_or_else(|| {
            ShellError::Failed(format!("tmux gave an unreadable answer for session {name:?}"))
        })
    }

    /// Reads the pane; when tmux shows it closed but has no exit status yet, makes tmux reap
    /// (see `reap_argv`) and reads again, for up to two seconds.
    async fn read_settled(
        &self,
        name: &str,
        cwd: &str,
        lines: u32,
    ) -> Result<ReadOutput, ShellError> {
        let mut r = self.read_pane(name, cwd, lines).await?;
        for _ in 0..20 {
            if !r.ended || r.exit_status.is_some() {
                break;
            }
            self.tmux_client(name, tmux::reap_argv(&self.tmux.socket(name)), cwd).await?;
            tokio::time::sleep(Duration::from_millis(100)).await;
            r = self.read_pane(name, cwd, lines).await?;
        }
        Ok(r)
    }

    /// `tmux_read`.
    pub async fn tmux_read(
        &self,
        p: tmux::ReadParams,
        whose: Option<&str>,
    ) -> Result<ReadOutput, ShellError> {
        let lines = p.lines.unwrap_or(tmux::DEFAULT_LINES);
        if lines == 0 || lines > tmux::MAX_LINES {
            return Err(ShellError::Failed(format!(
                "lines must be between 1 and {}; got {lines}",
                tmux::MAX_LINES
            )));
        }
        let m = self.live_session(&p.session)?;
        owned(&m, whose)?;
        let Some(since) = p.since else {
            let mut r = self.read_settled(&m.name, &m.cwd, lines).await?;
            r.cursor = self.cursor(&m);
            r.needs = m.needs;
            r.denied = self.session_denied(&m.name);
            return Ok(r);
        };
        if !m.log {
            return Err(ShellError::Failed(format!(
                "tmux session {:?} was started by an older hands, which kept no output log, so \
                 `since` cannot be used; read without it, or start the session again",
                m.name
            )));
        }
        // The state first: once it says ended, the log holds everything before it.
        let state = self.read_settled(&m.name, &m.cwd, 1).await?;
        let log = wait::Log::new(self.tmux.socket_dir(&m.name));
        let c = log.read(since, wait::READ_CAP)?;
        let page = crate::pane::page(&c.data, lines as usize, self.output_chars);
        let denied = self.session_denied(&m.name);
        Ok(ReadOutput {
            session: m.name,
            lines: page.lines,
            text: page.text,
            ended: state.ended,
            exit_status: state.exit_status,
            truncated: page.cut,
            cursor: c.start + page.consumed as u64,
            more: page.more || c.more,
            lost_lines: c.lost_lines,
            needs: m.needs,
            denied,
        })
    }

    /// `tmux_list`.
    pub async fn tmux_list(
        &self,
        _p: tmux::ListParams,
        whose: Option<&str>,
    ) -> Result<ListOutput, ShellError> {
        let mut sessions = Vec::new();
        for name in self.tmux.names() {
            let Ok(m) = self.live_session(&name) else { continue };
            if owned(&m, whose).is_err() {
                continue;
            }
            let (ended, exit_status) = match self.read_settled(&name, &m.cwd, 1).await {
                Ok(r) => (r.ended, r.exit_status),
                Err(_) => (true, None),
            };
            let cursor = self.cursor(&m);
            sessions.push(Session {
                cursor,
                // An adopted kept session ends with a daemon that does not keep sessions.
                kept: m.daemon.is_none() && self.keep_sessions,
                name: m.name,
                facts: Facts {
                    command: m.command,
                    cwd: m.cwd,
                    started: m.started,
                    state: if ended { State::Ended } else { State::Running },
                    exit_status,
                    needs: m.needs,
                },
            });
        }
        Ok(ListOutput { sessions })
    }

    /// The widening a person approved for the session `name`, when it has one: what a
    /// `tmux_send` into it types with (`Shell::prepare` names it to the person asked).
    pub(crate) fn widening_of(&self, name: &str) -> Option<Widening> {
        check_name(name).ok()?;
        self.tmux.read_meta(name).and_then(|m| m.needs)
    }

    /// Who started a session (the MCP client's identity), when its record says.
    pub fn tmux_client_of(&self, session: &str) -> Option<String> {
        self.tmux.read_meta(session).and_then(|m| m.client)
    }

    /// `tmux_kill`.
    pub async fn tmux_kill(
        &self,
        p: tmux::KillParams,
        whose: Option<&str>,
    ) -> Result<KillOutput, ShellError> {
        check_name(&p.session)?;
        let Some(m) = self.tmux.read_meta(&p.session) else { return Err(no_session(&p.session)) };
        owned(&m, whose)?;
        let cursor = self.cursor(&m);
        end_launcher(m.launcher).await;
        if m.launcher.alive() {
            return Err(ShellError::Failed(format!(
                "tmux session {:?} did not end (pid {}); a person can kill it",
                m.name, m.launcher.pid
            )));
        }
        self.tmux.forget(&m.name);
        self.end_session_state(&m.name);
        Ok(KillOutput { session: m.name, killed: true, cursor })
    }

    /// Ends the sessions this daemon holds at its end ([`Shell::shutdown`]): every recorded
    /// session but those another live daemon started (they end with it).
    pub(crate) async fn tmux_end_own(&self) -> usize {
        let me = netns::this_process();
        let mut n = 0;
        for name in self.tmux.names() {
            let Some(m) = self.tmux.read_meta(&name) else { continue };
            if m.daemon.is_some_and(|d| Some(d) != me && d.alive()) {
                continue;
            }
            if m.launcher.alive() {
                end_launcher(m.launcher).await;
                n += 1;
            }
            self.tmux.forget(&name);
            self.end_session_state(&name);
        }
        n
    }

    /// Ends every tmux session of the module (`hands stop`); returns how many there were.
    pub async fn tmux_kill_all(&self) -> usize {
        let mut n = 0;
        for name in self.tmux.names() {
            if let Some(m) = self.tmux.read_meta(&name) {
                end_launcher(m.launcher).await;
                n += 1;
            }
            self.tmux.forget(&name);
            self.end_session_state(&name);
        }
        n
    }
}

/// Writes a file through a temporary name and a rename, so a reader never sees half of it.
#[expect(clippy::disallowed_methods, reason = "the sessions' records in the state dir")]
fn write_atomic(path: &Path, text: &str) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}
