//! tools-shell's tmux sessions (SPEC §4.2): each session is a tmux server of its own, run by a
//! sandbox launcher as PID 1 of its own PID namespace, in the module's sandbox and shared
//! network namespace, on a socket in the state dir that only that session's sandbox sees.
//!
//! The tmux *client* commands (new-session, capture-pane, send-keys, ...) run through the
//! launcher too, never on the host: a tmux client obeys its server (it opens files the server
//! names), and the server is inside the sandbox.
//!
//! A session's name is its client's own: two clients may each have a `build`. Its record, its
//! files and its tmux-level name are that name and a tag of the client (`build-1f2e3d4c`,
//! [`key_of`]); a client types and sees its own name, the person (the dashboard, the control
//! socket) every session, by its name where that is unique, else by its record's.
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

mod masked_since;
mod tmux_send;
mod tmux_start;
mod wait;

use crate::ShellError;
use crate::needs::Widening;
use crate::service::Shell;
use crate::tmux::{self, Facts, KillOutput, ListOutput, ReadOutput, Session, State, check_name};
use hands_sandbox::netns;
use hands_tool::Refused;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The longest unix socket path (`sun_path` holds 108 bytes with its NUL).
const MAX_SOCKET_PATH: usize = 100;
/// How long a tmux client command may take, its sandbox's start included: a bound for a server
/// that stopped answering, not a wait. 10 s was too short once for a `tmux_send` in a VM under
/// software emulation on a 2-core CI host, where a sandbox's first start takes 13 s.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(30);
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
    /// The record's own name: its files' and its tmux session's ([`key_of`]).
    name: String,
    /// The name its client gave it, and knows it by; absent in records of older versions, whose
    /// `name` is that.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    called: Option<String>,
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

impl Meta {
    /// The name the session's client knows it by.
    fn called(&self) -> &str {
        self.called.as_deref().unwrap_or(&self.name)
    }
}

/// A client's tag in the names of its sessions' records: stable across restarts (a kept
/// session is found again by the next daemon), short (a socket path holds 108 bytes), and no
/// secret — what a record's `client` says decides whose it is ([`owned`]).
fn tag(client: &str) -> String {
    let fnv =
        client.bytes().fold(0x811c_9dc5_u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193));
    format!("{fnv:08x}")
}

/// The record's name of client `whose`'s session `name`: `name-TAG`.
fn key_of(name: &str, whose: &str) -> String {
    format!("{name}-{}", tag(whose))
}

/// Whether `n` can name a record: `NAME-TAG`, or a session's name as an older version
/// recorded it.
fn is_key(n: &str) -> bool {
    let tagged = n.rsplit_once('-').is_some_and(|(name, tag)| {
        check_name(name).is_ok() && tag.len() == 8 && tag.bytes().all(|b| b.is_ascii_hexdigit())
    });
    tagged || check_name(n).is_ok()
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
        let live = self.all().into_iter().filter(|m| m.launcher.alive());
        live.map(|m| m.called().to_string()).collect()
    }

    /// Names of recorded sessions (the records' own), sorted.
    fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&self.dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let n = e.file_name().to_str()?.strip_suffix(".json")?.to_string();
                is_key(&n).then_some(n)
            })
            .collect();
        names.sort();
        names
    }

    /// Every session's record.
    fn all(&self) -> Vec<Meta> {
        self.names().iter().filter_map(|n| self.read_meta(n)).collect()
    }

    /// The record of the session `whose` calls `name`: its own, else one an older version
    /// recorded under `name` itself (whoever started it: [`owned`] decides). The person
    /// (`None`) names a record by the record's own name, as [`Shell::tmux_list`] shows it to
    /// them: a client's name for its session may be another's record's (`build-5d8b6dab`), so
    /// taking it for a client's name let one client point the person's Stop at another's
    /// session (found by an attack on per-client names).
    fn find(&self, name: &str, whose: Option<&str>) -> Result<Option<Meta>, ShellError> {
        if let Some(client) = whose {
            check_name(name)?;
            let older = || self.read_meta(name).filter(|m| m.called.is_none());
            return Ok(self.read_meta(&key_of(name, client)).or_else(older));
        }
        if !is_key(name) {
            check_name(name)?;
        }
        Ok(self.read_meta(name))
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
                    ended.push((module_name.clone(), m.called().to_string()));
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

fn no_session(name: &str, whose: Option<&str>) -> ShellError {
    ShellError::Failed(match whose {
        Some(_) => format!(
            "no tmux session named {name:?} is yours (a client sees the sessions it started, \
             under the names it gave them); tmux_list shows yours, tmux_start starts one"
        ),
        None => format!("no tmux session named {name:?}; tmux_list shows this module's sessions"),
    })
}

/// Refuses a client the session `m` another client started: a client reads, types into and
/// ends only its own sessions (SPEC §13: a session is a client like any other, its identity in
/// the scopes is its own). `whose` is the calling client; `None` is the person (the dashboard,
/// `hands stop`), who sees every session. A record of an older version names no client.
fn owned(m: &Meta, whose: Option<&str>) -> Result<(), ShellError> {
    match (&m.client, whose) {
        (Some(started_by), Some(caller)) if started_by != caller => {
            // Whose it is stays unsaid: a client learns nothing of another's.
            Err(ShellError::Failed(format!(
                "tmux session {:?} was started by another client: a client reads, types into \
                 and ends only its own sessions; start one of your own with tmux_start (a person \
                 can end it with `hands stop` or on the dashboard)",
                m.called(),
            )))
        }
        _ => Ok(()),
    }
}

impl Shell {
    /// The session `whose` calls `name`, when it is theirs ([`owned`]), or the refusal that
    /// says it is not there or not theirs.
    fn session_of(&self, name: &str, whose: Option<&str>) -> Result<Meta, ShellError> {
        let m = self.tmux.find(name, whose)?.ok_or_else(|| no_session(name, whose))?;
        owned(&m, whose)?;
        Ok(m)
    }

    /// The recorded, live session `whose` calls `name`, or the refusal that says it is not
    /// there, not theirs, or gone (then forgotten).
    fn live_session(&self, name: &str, whose: Option<&str>) -> Result<Meta, ShellError> {
        self.alive(self.session_of(name, whose)?)
    }

    /// The session while its server runs; one whose server ended is forgotten.
    fn alive(&self, m: Meta) -> Result<Meta, ShellError> {
        if m.launcher.alive() {
            return Ok(m);
        }
        self.tmux.forget(&m.name);
        self.end_session_state(&m.name);
        Err(ShellError::Failed(format!(
            "tmux session {:?} is gone (its server ended, e.g. with the machine); start it again \
             with tmux_start",
            m.called()
        )))
    }

    /// The check before the gate of `tool` (`tmux_read`, `tmux_send`, `tmux_kill`) of the
    /// session `whose` calls `name`: one that is not there or not theirs is refused before
    /// anyone is asked about it (a person asked to let a client end or type into a session it
    /// cannot touch would be asked for nothing). The session's widening, when it has one: what
    /// a `tmux_send` types with, named to the person asked.
    pub(crate) fn own_session(
        &self,
        tool: &str,
        name: &str,
        whose: &str,
    ) -> Result<Option<Widening>, Refused> {
        match self.session_of(name, Some(whose)) {
            Ok(m) => Ok(m.needs),
            Err(e) => Err(Refused {
                what: name.to_string(),
                layer: "sessions",
                message: format!("`{tool}` is refused before asking anyone: {e}"),
                remedy: "start a session of your own with tmux_start (tmux_list shows yours); a \
                         person ends any session with `hands stop` or on the dashboard"
                    .into(),
                argv: None,
            }),
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
        // In the network namespace of the session's client, as its server is.
        let client = self.tmux.read_meta(name).and_then(|m| m.client);
        let client = client.as_deref().unwrap_or(super::containment::STDIO);
        let mut walked_again = false;
        loop {
            let mut spec = self
                .spec(argv.clone(), Path::new(cwd), client, Some(&socket_dir), None, None)
                .await?;
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
        let m = self.live_session(&p.session, whose)?;
        let Some(since) = p.since else {
            let mut r = self.read_settled(&m.name, &m.cwd, lines).await?;
            r.session = p.session;
            r.cursor = self.cursor(&m);
            r.needs = m.needs;
            r.denied = self.session_denied(&m.name);
            return Ok(r);
        };
        if !m.log {
            return Err(ShellError::Failed(format!(
                "tmux session {:?} was started by an older hands, which kept no output log, so \
                 `since` cannot be used; read without it, or start the session again",
                m.called()
            )));
        }
        // The state first: once it says ended, the log holds everything before it.
        let state = self.read_settled(&m.name, &m.cwd, 1).await?;
        let log = wait::Log::new(self.tmux.socket_dir(&m.name));
        let c = log.read(since, wait::READ_CAP)?;
        let page = crate::pane::page(&c.data, lines as usize, self.output_chars);
        let denied = self.session_denied(&m.name);
        Ok(ReadOutput {
            session: p.session,
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
        let mine = self.tmux.all().into_iter().filter(|m| owned(m, whose).is_ok());
        let live: Vec<Meta> = mine.filter_map(|m| self.alive(m).ok()).collect();
        let mut sessions = Vec::new();
        for m in &live {
            // A client knows its sessions by its own names; the person by the records' (what
            // `find` takes back: one name, one session, whatever the clients chose).
            let name = if whose.is_some() { m.called() } else { &m.name };
            let (ended, exit_status) = match self.read_settled(&m.name, &m.cwd, 1).await {
                Ok(r) => (r.ended, r.exit_status),
                Err(_) => (true, None),
            };
            sessions.push(Session {
                cursor: self.cursor(m),
                // An adopted kept session ends with a daemon that does not keep sessions.
                kept: m.daemon.is_none() && self.keep_sessions,
                name: name.to_string(),
                facts: Facts {
                    command: m.command.clone(),
                    cwd: m.cwd.clone(),
                    started: m.started,
                    state: if ended { State::Ended } else { State::Running },
                    exit_status,
                    needs: m.needs.clone(),
                },
            });
        }
        Ok(ListOutput { sessions })
    }

    /// Who started a session as the person names it (`tmux_list` without a client), when its
    /// record says: the MCP client's identity.
    pub fn tmux_client_of(&self, session: &str) -> Option<String> {
        self.tmux.find(session, None).ok().flatten().and_then(|m| m.client)
    }

    /// `tmux_kill`.
    pub async fn tmux_kill(
        &self,
        p: tmux::KillParams,
        whose: Option<&str>,
    ) -> Result<KillOutput, ShellError> {
        let m = self.session_of(&p.session, whose)?;
        let cursor = self.cursor(&m);
        end_launcher(m.launcher).await;
        if m.launcher.alive() {
            return Err(ShellError::Failed(format!(
                "tmux session {:?} did not end (pid {}); a person can kill it",
                m.called(),
                m.launcher.pid
            )));
        }
        self.tmux.forget(&m.name);
        self.end_session_state(&m.name);
        Ok(KillOutput { session: p.session, killed: true, cursor })
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
