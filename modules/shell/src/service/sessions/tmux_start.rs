//! `tmux_start`: a new session's tmux server started in its own sandbox, in a process group of
//! its own, its record written, its command typed, and its readiness waited for.

use super::{
    MAX_SOCKET_PATH, Meta, SERVER_START, START_CHECK, START_LINES, end_launcher, key_of, now_secs,
    owned, wait, write_atomic,
};
use crate::needs::Widening;
use crate::service::Shell;
use crate::service::session_walls::SessionWalls;
use crate::tmux::{self, Facts, Started, State, check_name};
use crate::{Caller, ShellError};
use hands_sandbox::netns;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A session's server as it started: its launcher, the secret files its sandbox masks, its
/// network ticket, and its report channel.
type Server = (netns::Process, Vec<PathBuf>, Option<hands_sandbox::proxy::Ticket>, SessionWalls);

impl Shell {
    /// `tmux_start`, with the widening its check admitted (`needs`): the session's server gets
    /// it for the session's life, and its record keeps it (every `tmux_send` is asked).
    pub async fn tmux_start(
        &self,
        p: tmux::StartParams,
        widening: Option<Widening>,
        caller: Caller,
    ) -> Result<Started, ShellError> {
        // Checked before anything starts: a bad `ready` starts nothing.
        let timeout = tmux::wait_secs(p.timeout_secs)?;
        let ready = match &p.ready {
            Some(c) => Some(c.check("ready", timeout)?),
            None => None,
        };
        self.refuse_when_unsafe()?;
        self.refuse_when_braked()?;
        // Counted as a running command until its record is written (decision 0083).
        let widened = widening.as_ref().map(Widening::write_paths).unwrap_or_default();
        let moving =
            self.still.moving(&widened).await.map_err(|e| ShellError::Failed(e.to_string()))?;
        // What a person approved is what the session gets: checked again now.
        self.recheck_needs(widening.as_ref()).await?;
        let t = &self.tmux;
        let whose = Some(caller.client.as_str());
        // The client's own name for it, and its record's (`key_of`): another client's session of
        // the same name is neither in the way nor touched.
        let called = match p.name {
            Some(n) => {
                check_name(&n)?;
                n
            }
            None => {
                let mine = t.all().into_iter().filter(|m| owned(m, whose).is_ok());
                tmux::default_name(&mine.map(|m| m.called().to_string()).collect::<Vec<_>>())
            }
        };
        let name = key_of(&called, &caller.client);
        match t.find(&called, whose)? {
            Some(m) if owned(&m, whose).is_ok() => {
                if m.launcher.alive() {
                    return Err(ShellError::Failed(format!(
                        "tmux session {called:?} already exists; read it, tmux_kill it, or \
                         choose another name"
                    )));
                }
                t.forget(&m.name);
            }
            // Two clients whose tags are alike: the record is the other's, and stays.
            Some(m) if m.name == name => {
                return Err(ShellError::Failed(format!(
                    "tmux session name {called:?} is taken by another client's session recorded \
                     as {name:?}; choose another name"
                )));
            }
            _ => {}
        }
        let socket = t.socket(&name);
        if socket.len() > MAX_SOCKET_PATH {
            return Err(ShellError::Failed(format!(
                "the tmux socket path {socket} is longer than {MAX_SOCKET_PATH} bytes, which unix \
                 sockets cannot hold; choose a shorter session name, or a person can choose a \
                 shorter daemon.state_dir"
            )));
        }
        let cwd = self.resolve_cwd(p.cwd).await?;
        let cwd_s = cwd.to_string_lossy().into_owned();
        let label = format!("tmux session {called}: {}", p.command);
        // The server's launcher keeps the command's marks for the session's life (decision 0084).
        let marks = moving.marks();
        let start =
            || self.start_server(&name, &cwd, &label, &caller.client, widening.as_ref(), marks);
        let (launcher, masked, ticket, walls) = match start().await {
            // A walk that saw an entry moved aside since: once more, after a new walk.
            Err(ShellError::Changed(why)) => {
                self.walk_again(&why);
                start().await?
            }
            started => started?,
        };
        if self.keep_sessions {
            self.keep_loopback_for(launcher, &caller.client);
        }
        let meta = Meta {
            name: name.clone(),
            called: Some(called.clone()),
            command: p.command.clone(),
            cwd: cwd_s.clone(),
            started: now_secs(),
            launcher,
            client: Some(caller.client.clone()),
            masked,
            log: true,
            needs: widening,
            daemon: if self.keep_sessions { None } else { hands_sandbox::netns::this_process() },
        };
        let recorded = serde_json::to_string(&meta)
            .map_err(|e| e.to_string())
            .and_then(|text| write_atomic(&t.meta_path(&name), &text).map_err(|e| e.to_string()));
        if let Err(e) = recorded {
            end_launcher(launcher).await;
            t.forget(&name);
            return Err(ShellError::Failed(format!("cannot record tmux session {called:?}: {e}")));
        }
        // The brake is atomic with the start: recorded first, then the brake read. A stop
        // that came before this read is seen here and this start ends itself; one after it
        // finds the record (`tmux_kill_all` lists the records after the brake is on).
        if let Err(halted) = self.refuse_when_braked() {
            end_launcher(launcher).await;
            t.forget(&name);
            return Err(halted);
        }
        let log_dir = t.socket_dir(&name).to_string_lossy().into_owned();
        let argv = tmux::new_session_argv(&socket, &name, &cwd_s, &t.bash, &p.command, &log_dir);
        // `waited_ms` counts from the command's start.
        let begun = Instant::now();
        if let Err(e) = self.tmux_client(&name, argv, &cwd_s).await {
            end_launcher(launcher).await;
            t.forget(&name);
            // A stop that came meanwhile ended the server under the client ("server exited
            // unexpectedly"): say it was the stop (seen once in suite::stop's race).
            self.refuse_when_braked()?;
            return Err(e);
        }
        // A command that cannot start (not found, not executable) ends at once with 127/126:
        // report it rather than leave a dead pane.
        let until = Instant::now() + START_CHECK;
        let mut state = (false, None);
        loop {
            if let Ok(r) = self.read_settled(&name, &cwd_s, 50).await {
                state = (r.ended, r.exit_status);
                if r.ended && matches!(r.exit_status, Some(126 | 127)) {
                    end_launcher(launcher).await;
                    t.forget(&name);
                    let status = r.exit_status.unwrap_or_default();
                    let why = if status == 127 {
                        "the shell found no such command"
                    } else {
                        "the command was found but could not be run"
                    };
                    // The shell's own complaint, when tmux caught it before the pane closed.
                    let said = r.text.trim();
                    return Err(ShellError::Failed(format!(
                        "the command did not start in tmux session {called:?} (exit status \
                         {status}: {why}){}{said}",
                        if said.is_empty() { "" } else { ": " }
                    )));
                }
                // Dead with no status yet: tmux saw the pane close before it reaped the
                // process; the status follows.
                if r.ended && r.exit_status.is_some() {
                    break;
                }
            }
            if Instant::now() >= until {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let waited = match &ready {
            Some(u) if !state.0 => {
                let w =
                    self.wait_for(&meta, u, 0, None, Duration::from_secs(timeout), &caller).await?;
                if w.ended {
                    state = (true, w.exit_status);
                }
                Some(w)
            }
            _ => None,
        };
        self.keep_session_ticket(&name, ticket);
        self.keep_session_walls(&name, walls);
        // The last lines as tmux shows them, and the state once more.
        let (text, state) = match self.read_settled(&name, &cwd_s, START_LINES).await {
            Ok(r) => (r.text, if r.ended { (true, r.exit_status) } else { state }),
            Err(_) => (String::new(), state),
        };
        Ok(Started {
            session: called,
            facts: Facts {
                command: meta.command.clone(),
                cwd: meta.cwd.clone(),
                started: meta.started,
                state: if state.0 { State::Ended } else { State::Running },
                exit_status: state.1,
                needs: meta.needs.clone(),
            },
            containment: self.containment(),
            ready: ready
                .as_ref()
                .map(|_| waited.as_ref().is_some_and(|w| w.outcome == wait::Outcome::Held)),
            timed_out: waited.as_ref().is_some_and(|w| w.outcome == wait::Outcome::TimedOut),
            ended: state.0,
            waited_ms: if waited.is_some() { begun.elapsed().as_millis() as u64 } else { 0 },
            text: wait::last_lines(&text, START_LINES as usize),
            ports: wait::session_ports(meta.launcher),
            cursor: self.cursor(&meta),
            denied: self.session_denied(&meta.name),
        })
    }

    /// Starts the session's tmux server in its own sandbox, in its own process group, and waits
    /// for its socket. Returns the launcher, the secret files the sandbox masks (what the walk
    /// found), and the session's ticket with the network proxy: the server's environment is
    /// tmux's global one, so every pane gets the proxy variables `bash` gets.
    async fn start_server(
        &self,
        name: &str,
        cwd: &Path,
        label: &str,
        client: &str,
        widening: Option<&Widening>,
        marks: &hands_sandbox::still::Marks,
    ) -> Result<Server, ShellError> {
        let t = &self.tmux;
        let socket_dir = t.socket_dir(name);
        let _ = std::fs::remove_dir_all(&socket_dir);
        let fail =
            |what: &str, e: std::io::Error| ShellError::Failed(format!("cannot {what}: {e}"));
        std::fs::create_dir_all(&socket_dir)
            .map_err(|e| fail("create the tmux socket folder", e))?;
        // The server runs as `sandbox.run_as` under a root daemon: its socket folder is theirs.
        if let Some(ids) = self.run_as {
            std::os::unix::fs::chown(&socket_dir, Some(ids.uid), Some(ids.gid))
                .map_err(|e| fail("give the tmux socket folder to sandbox.run_as", e))?;
        }
        let marker = t.marker(name);
        #[expect(clippy::disallowed_methods, reason = "the session's marker in the state dir")]
        std::fs::write(&marker, b"").map_err(|e| fail("create the session marker", e))?;
        let log_path = t.dir.join(format!("{name}.log"));
        #[expect(clippy::disallowed_methods, reason = "the session's log in the state dir")]
        let log =
            std::fs::File::create(&log_path).map_err(|e| fail("create the session log", e))?;
        let argv = tmux::server_argv(&t.socket(name));
        let spec = self.spec(argv, cwd, client, Some(&socket_dir), Some(&marker), widening).await?;
        let network = widening.map(|w| w.network.as_slice()).unwrap_or_default();
        let (spec, ticket) = self.with_proxy(spec, label, client, network)?;
        let walls_spec = spec.clone();
        let (mut child, reports) = spec
            .spawn_detached(&self.launcher, log, marks)
            .map_err(|e| fail("start the sandbox launcher", e))?;
        let pid = child.id() as i32;
        let start = netns::start_time(pid);
        // Reaped here while the daemon lives; by init after.
        std::thread::spawn(move || child.wait());
        // The launcher's report says why a server never started (its sandbox could not be
        // built); the log, which tmux writes too, is only shown.
        #[expect(
            clippy::disallowed_methods,
            reason = "the session's log in the state dir, shown when its server never started"
        )]
        let not_started = |how: &str, reports: hands_sandbox::launcher::Reports| {
            let reported = reports.read();
            let (why, cause) = match reported.setup_failed() {
                Some((why, cause)) => {
                    (format!("its sandbox could not be built (hands sandbox: {why})"), cause)
                }
                None => (
                    std::fs::read_to_string(&log_path).unwrap_or_default().trim().to_string(),
                    hands_sandbox::launcher::Cause::Other,
                ),
            };
            let why = format!("the tmux server of session {name:?} {how}: {why}");
            match cause {
                hands_sandbox::launcher::Cause::Changed => ShellError::Changed(why),
                _ => ShellError::Sandbox(why),
            }
        };
        let Some(start) = start else {
            t.forget(name);
            return Err(not_started("ended at once", reports));
        };
        let launcher = netns::Process { pid, start };
        let socket = PathBuf::from(t.socket(name));
        let until = Instant::now() + SERVER_START;
        while !socket.exists() {
            if !launcher.alive() || Instant::now() >= until {
                end_launcher(launcher).await;
                t.forget(name);
                return Err(not_started("did not start", reports));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // The session's walls report on while it runs: each result takes what came since the
        // last (`session_walls.rs`).
        // What it started with hidden (the walk's secrets, and sockets not its client's).
        let masked = walls_spec.masked().to_vec();
        let walls = SessionWalls { reports, spec: walls_spec };
        Ok((launcher, masked, ticket, walls))
    }
}
