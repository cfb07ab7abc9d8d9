//! Running one command to its end: `bash`, and `run`/`os-*`/`hands exec` (one allowlisted
//! program, argv given exactly, no shell) checked by the policy first. Each re-runs the
//! daemon's binary as `hands __sandbox` (see `hands_sandbox::launcher`, which takes the spec on
//! a descriptor), captures the end of its output, and stops the whole tree on timeout,
//! cancellation, the brake or client disconnect. Whether the sandbox was built, and which
//! walls refused what, come from the launcher's reports on a channel of their own, never from
//! the command's output (which the command can forge).

use super::{Checked, DRAIN, GRACE, Shell, halted};
use crate::allow::{self, Verdict};
use crate::bash::{self, BashOutput, BashParams, Ending, RunOutput};
use crate::capture::Tail;
use crate::needs::Widening;
use crate::{Caller, ShellError};
use hands_roots::lock;
use hands_sandbox::{launcher, masks};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;

/// [`DRAIN`] when the output is also streamed to a terminal (`hands exec`): the pipes may hold
/// what the terminal has not taken yet, and it must arrive whole.
const STREAM_DRAIN: Duration = Duration::from_secs(30);

/// Where a command's output goes as it arrives, besides its tail: `(is_stderr, bytes)`.
pub type Tee = tokio::sync::mpsc::Sender<(bool, Vec<u8>)>;

/// How one command runs besides its argv: its output cap, where its output also goes (`hands
/// exec`), the widening its check admitted, the allowlisted program it is (`run`, `os-*`,
/// `hands exec`), if it is one, and the files its result returns (`bash`'s `outputs`).
struct Run<'a> {
    output_chars: usize,
    tee: Option<Tee>,
    widening: Option<&'a Widening>,
    program: Option<&'a Checked>,
    outputs: &'a [String],
}

impl Shell {
    /// A command's working folder, resolved through the roots (default: the first root).
    pub(crate) async fn resolve_cwd(&self, cwd: Option<String>) -> Result<PathBuf, ShellError> {
        let resolver = self.resolver.clone();
        let cwd_arg = cwd.unwrap_or_default();
        super::briefly(move || resolver.open_dir(&cwd_arg).map(|d| d.abs))
            .await
            .map_err(|e| ShellError::Failed(format!("cwd could not be checked: {e}")))?
            .map_err(|e| ShellError::Failed(format!("bad cwd: {e}")))
    }

    /// Runs one `bash` call to its end, with the widening its check admitted (`needs`), if any.
    pub async fn bash(
        &self,
        p: BashParams,
        widening: Option<Widening>,
        caller: Caller,
    ) -> Result<BashOutput, ShellError> {
        // Checked before the gate too (`check_outputs`); this run never reads more.
        if p.outputs.len() > crate::outputs::MAX_FILES {
            return Err(ShellError::Failed(format!(
                "`outputs` names more than {} files; nothing ran",
                crate::outputs::MAX_FILES
            )));
        }
        let argv = json!(crate::bash::argv(&p.command));
        let run = Run {
            output_chars: self.output_chars,
            tee: None,
            widening: widening.as_ref(),
            program: None,
            outputs: &p.outputs,
        };
        self.launch(argv, p.cwd, p.timeout_secs, caller, run).await
    }

    /// The policy of `run`, `os-*` and `hands exec`.
    pub fn policy(&self) -> &allow::Policy {
        &self.policy
    }

    /// The full argv of the `os-*` tool behind `tools[index]`: its binary, its fixed leading
    /// arguments, then the caller's.
    pub fn os_argv(&self, index: usize, args: &[String]) -> Option<Vec<String>> {
        let t = self.os_tools.get(index)?;
        Some(std::iter::once(&t.bin).chain(&t.args).chain(args).cloned().collect())
    }

    /// SPEC §4.4's policy for one argv (name, deny, allow, confirm), then the binary resolved
    /// on the configured PATH.
    pub fn check(&self, argv: &[String]) -> Result<Checked, ShellError> {
        let verdict = self.policy.decide(argv).map_err(|e| ShellError::Failed(e.to_string()))?;
        let bin = argv.first().map(String::as_str).unwrap_or_default();
        let pin = self.pins.resolve(bin, &self.path)?;
        let (program, identity) = (pin.path.clone(), (pin.dev, pin.ino));
        // By the file, not the name: `rbash` is `bash`, a link named `ls` to busybox is busybox
        // (decision 0067).
        if self.hidden.denied.ids.contains(&identity) {
            return Err(ShellError::Failed(format!(
                "`{}` resolves to {}, the file of a program commands.deny lists (under another \
                 name); refused, nothing ran; a person can change commands.deny",
                hands_roots::shown(bin),
                program.display()
            )));
        }
        let confirm = verdict == Verdict::Confirm || self.hidden.confirm.ids.contains(&identity);
        Ok(Checked { argv: argv.to_vec(), program, identity, confirm })
    }

    /// The walls a command hit, as a result lists them (`walls_hit`: the launcher's reports,
    /// then error lines naming a walled path). A wall at a path the host trusts says what that
    /// path is and what a person can do; a masked program's file is left to the list that
    /// keeps it out.
    pub(crate) fn wall_denials(
        &self,
        reports: &[launcher::Report],
        stderr: &str,
        spec: &launcher::Spec,
    ) -> Vec<crate::bash::Denied> {
        let policy = self.resolver.policy();
        let program_file = |what: &str| {
            let p = Path::new(what);
            self.hidden.denied.paths.iter().chain(&self.hidden.confirm.paths).any(|f| f == p)
        };
        let walls = launcher::notify::walls_hit(reports, stderr, spec);
        walls
            .into_iter()
            .filter(|h| !program_file(&h.what))
            .map(|h| match policy.host_path(Path::new(&h.what), None) {
                Some(t) => crate::bash::Denied {
                    why: format!("{}: the host trusts it, so it is read-only here", t.what),
                    remedy: t.remedy.clone(),
                    what: h.what,
                    layer: h.layer.into(),
                },
                None => crate::bash::Denied {
                    what: h.what,
                    layer: h.layer.into(),
                    why: h.why,
                    remedy: h.remedy,
                },
            })
            .collect()
    }

    /// Runs the program a call's check prepared (`run`, `os-*`; see [`Shell::prepare`]).
    pub async fn run_checked(
        &self,
        prepared: super::Prepared,
        cwd: Option<String>,
        timeout_secs: Option<u64>,
        caller: Caller,
    ) -> Result<RunOutput, ShellError> {
        let Some(c) = prepared.program else {
            return Err(ShellError::Failed("the program was not checked before it ran".into()));
        };
        self.run_program(&c, cwd, timeout_secs, caller, None).await.map(RunOutput)
    }

    /// Runs one checked program with exactly its arguments (no shell), output capped at
    /// `run_output_chars`; `tee` also receives the output as it arrives (`hands exec`).
    pub async fn run_program(
        &self,
        c: &Checked,
        cwd: Option<String>,
        timeout_secs: Option<u64>,
        caller: Caller,
        tee: Option<Tee>,
    ) -> Result<BashOutput, ShellError> {
        let mut argv: Vec<Value> = vec![json!(c.program)];
        argv.extend(c.argv.iter().skip(1).map(|a| json!(a)));
        let output_chars = self.run_output_chars;
        let run = Run { output_chars, tee, widening: None, program: Some(c), outputs: &[] };
        self.launch(Value::Array(argv), cwd, timeout_secs, caller, run).await
    }

    /// The timeout checked, the brake and the self-test consulted, the cwd resolved, a slot
    /// taken; then the command runs to its end.
    async fn launch(
        &self,
        argv: Value,
        cwd: Option<String>,
        timeout_secs: Option<u64>,
        caller: Caller,
        run: Run<'_>,
    ) -> Result<BashOutput, ShellError> {
        let Run { output_chars, tee, widening, program, outputs } = run;
        let timeout = timeout_secs.unwrap_or(bash::DEFAULT_TIMEOUT_SECS);
        if timeout == 0 || timeout > bash::MAX_TIMEOUT_SECS {
            return Err(ShellError::Failed(format!(
                "timeout_secs must be between 1 and {}; got {timeout}",
                bash::MAX_TIMEOUT_SECS
            )));
        }
        self.refuse_when_unsafe()?;
        let cwd = self.resolve_cwd(cwd).await?;
        let mut halt = self.halt.subscribe();
        let _slot = tokio::select! {
            s = self.slots.clone().acquire_owned() => {
                s.map_err(|_| ShellError::Failed("tools-shell is shutting down".into()))?
            }
            () = caller.cancelled() => return Err(ShellError::Cancelled("cancelled before it started".into())),
            () = halted(&mut halt) => return Err(ShellError::Braked),
        };
        drop(halt);
        let label = crate::running::label(&argv);
        let argv: Vec<String> = serde_json::from_value(argv).map_err(|e| {
            ShellError::Failed(format!("the command is not a list of strings: {e}"))
        })?;
        let network = widening.map(|w| w.network.as_slice()).unwrap_or_default();
        let mut walked_again = false;
        // Counted as running while it runs: a git tool does not read or write its work tree
        // by name meanwhile, and it waits while one does (decision 0083).
        let widened = widening.map(Widening::write_paths).unwrap_or_default();
        let moving =
            self.still.moving(&widened).await.map_err(|e| ShellError::Failed(e.to_string()))?;
        // What a person approved is what the run gets: checked again now, after the question.
        self.recheck_needs(widening).await?;
        let (spec, ticket, _asks, (mut out, reported)) = loop {
            let mut spec =
                self.spec(argv.clone(), &cwd, &caller.client, None, None, widening).await?;
            if let Some(c) = program {
                // The file the configuration admitted, or nothing (decision 0068); and a run
                // no person confirmed has no confirm-listed program in it (decision 0067).
                spec.expect_program(c.identity.0, c.identity.1);
                if !c.confirm {
                    spec.add_masks(self.hidden.confirm.paths.iter().cloned());
                }
            }
            let (spec, ticket) = self.with_proxy(spec, &label, &caller.client, network)?;
            // While the call waits, its client may be asked about the command's connections.
            let asks = ticket.as_ref().and_then(|t| caller.asks_for(t.token()));
            let limit = Duration::from_secs(timeout);
            match self.run(&spec, label.clone(), limit, &caller, output_chars, tee.clone()).await {
                Ok(ran) => break (spec, ticket, asks, ran),
                Err(ShellError::Changed(why)) if !walked_again => {
                    self.walk_again(&why);
                    walked_again = true;
                }
                Err(e) => return Err(e),
            }
        };
        drop(moving);
        // The next command's sandbox, built while the agent reads this one's answer; after a
        // call a person widened (`needs`), an ordinary call's, which the next is likelier to be.
        if widening.is_none() {
            self.ready.prepare(&spec, &self.launcher);
        } else {
            self.prepare_ordinary(&caller.client).await;
        }
        // Walls the command hit while it ran (refused creates, masked and read-only paths).
        out.denied.extend(self.wall_denials(&reported.reports, &out.stderr, &spec));
        // A denied program, or a confirm-listed one in a run no person confirmed, is not in
        // the run (decision 0067): say so rather than leave a bare "Permission denied".
        let mut groups = vec![(&self.hidden.denied, true)];
        if program.is_some_and(|c| !c.confirm) {
            groups.push((&self.hidden.confirm, false));
        }
        for (group, denied) in groups {
            for name in crate::hidden::missed(group, &out.stderr) {
                out.denied.push(crate::bash::Denied {
                    what: name.to_string(),
                    layer: if denied { "commands.deny" } else { "commands.confirm" }.into(),
                    why: if denied {
                        format!(
                            "`{name}` is a denied program: it is in no command's sandbox, \
                                 whatever runs it"
                        )
                    } else {
                        format!(
                            "`{name}` is confirm-listed: it is only in a run a person \
                                 confirmed, and no one confirmed this one"
                        )
                    },
                    remedy: if denied {
                        "a person can take it off tools-shell's commands.deny".into()
                    } else {
                        "a person can confirm the run (run it as `run`, or `hands exec`, and \
                         say yes), or take it off tools-shell's commands.confirm"
                            .into()
                    },
                });
            }
        }
        // A program the person has that the commands' PATH lacks (the daemon's own PATH is
        // the person's, from where they started it).
        if out.exit_code.is_some_and(|c| c != 0) {
            let person = std::env::var("PATH").unwrap_or_default();
            out.denied.extend(crate::hints::missing_programs(&out.stderr, &person, &self.path));
        }
        if let Some(t) = ticket {
            out.denied.extend(network_denials(t.denied()));
        }
        if !outputs.is_empty() {
            self.collect_outputs(&cwd, outputs.to_vec(), &mut out).await;
        }
        Ok(out)
    }

    /// Reads the files `outputs` names into the result, once the command has ended (see
    /// `crate::outputs`): off the runtime's threads, as `read` would read them.
    async fn collect_outputs(&self, cwd: &Path, paths: Vec<String>, out: &mut BashOutput) {
        let (resolver, cwd, wire) = (self.resolver.clone(), cwd.to_path_buf(), self.answer_cap);
        let asked = paths.clone();
        let read = move || crate::outputs::collect(&resolver, &cwd, &paths, wire);
        (out.outputs, out.files) = match tokio::task::spawn_blocking(read).await {
            Ok(read) => read,
            Err(e) => (crate::outputs::failed(&asked, &e.to_string()), Vec::new()),
        };
    }

    /// The launcher spec for one command of `client` (in that client's network namespace): the
    /// base plus the names the walk of the roots finds now (secret files, hard links to denied
    /// files, unix sockets that are not the client's own), passed to `__sandbox` on a
    /// descriptor.
    /// A tmux session adds its socket folder as a writable root and its marker as `watch`; a
    /// widening (`needs`) its `write` paths, each with the identity its check saw.
    pub(crate) async fn spec(
        &self,
        argv: Vec<String>,
        cwd: &Path,
        client: &str,
        socket_dir: Option<&Path>,
        watch: Option<&Path>,
        widening: Option<&Widening>,
    ) -> Result<launcher::Spec, ShellError> {
        let found = self.found_masks().await?;
        let mut spec = self
            .netns_spec(self.base.clone(), client)
            .map_err(|f| ShellError::Sandbox(f.why))?
            .mask(found.paths.iter().cloned())
            .protect(found.protected.iter().cloned());
        // What the walk saw at each: the launcher refuses to start when one was moved aside.
        for (path, id) in &found.ids {
            spec = spec.seen(path.clone(), *id);
        }
        // Unix sockets that are not this client's own (decision 0107).
        for (path, id) in self.foreign_sockets(&found, client, socket_dir)? {
            spec = spec.mask([path.clone()]).seen(path, id);
        }
        if let Some(dir) = socket_dir {
            spec = spec.root(dir.to_path_buf(), true);
        }
        // `needs.write` a person approved for this call: writable roots of this launch only,
        // each bound only while it is still what the person was shown.
        for g in widening.map(|w| w.write.as_slice()).unwrap_or_default() {
            spec = spec.root(g.path.clone(), true).seen(g.path.clone(), g.id());
        }
        // Everything dies with the daemon (its parent-death signal), but a tmux server of
        // `keep_sessions`, which a later daemon adopts; a session's server also ends when its
        // marker in the state dir is removed.
        if let Some(w) = watch {
            spec = spec.watch(w.to_path_buf());
        }
        if watch.is_none() || !self.keep_sessions {
            spec = spec.parent(std::process::id() as i32);
        }
        Ok(spec.build(argv, cwd.to_path_buf()))
    }
    /// After the launcher reported an entry that is not what the daemon's check saw there
    /// ([`launcher::Cause::Changed`], SPEC §3): the walk's result is dropped, so a retry walks
    /// the roots again — a protected file git replaced since, or a folder a session moved
    /// aside, is found as it is now. A root or a `needs` path that changed stays refused:
    /// their identities are not the walk's.
    pub(crate) fn walk_again(&self, why: &str) {
        // Worth a person's eye: git replacing a file, or a command moving a protected or
        // secret path aside between the walk and the start.
        tracing::warn!(
            "a path the walk of the roots saw changed before a command started; walking again: {why}"
        );
        self.masks.forget();
    }

    /// The secret files and hard links to denied files in the roots now (the walk, cached for
    /// a moment), refusing a name the sandbox cannot mask.
    pub(crate) async fn found_masks(&self) -> Result<Arc<masks::Found>, ShellError> {
        // A walk's result still fresh is taken in place; a walk runs on a blocking thread.
        let found = match self.masks.fresh() {
            Some(found) => Ok(found),
            None => {
                let masks = self.masks.clone();
                tokio::task::spawn_blocking(move || masks.current()).await
            }
        };
        let found = found
            .map_err(|e| {
                ShellError::Failed(format!("the roots could not be scanned for secret files: {e}"))
            })?
            .map_err(ShellError::Masks)?;
        if let Some(p) = &found.unmaskable {
            return Err(ShellError::Failed(format!(
                "refused: {} must be hidden from commands or read-only to them (a secret file, \
                 a hard link to a denied file, or a protected path) but its name is not UTF-8, \
                 which the sandbox spec cannot carry; a person can rename or remove it",
                p.display()
            )));
        }
        Ok(found)
    }

    // Starts the launcher (`hands` re-executed), the one way a command runs; its output, and
    // what the launcher reported.
    async fn run(
        &self,
        spec: &launcher::Spec,
        label: String,
        timeout: Duration,
        caller: &Caller,
        output_chars: usize,
        tee: Option<Tee>,
    ) -> Result<(BashOutput, launcher::Reported), ShellError> {
        let started = Instant::now();
        let mut halt = self.halt.subscribe();
        if *halt.borrow() {
            return Err(ShellError::Braked);
        }
        // Its stdin is the spec and the report channel (the command's is /dev/null); a sandbox
        // made ready for this very spec is given it instead (decision 0077).
        let (mut child, reports) = match self.ready.take(spec) {
            Some(ready) => ready,
            None => spec.spawn_piped(&self.launcher).map_err(|e| {
                ShellError::Sandbox(format!("the sandbox launcher could not start: {e}"))
            })?,
        };
        let keep = output_chars.saturating_mul(4);
        let out = Arc::new(Mutex::new(Tail::new(keep)));
        let err = Arc::new(Mutex::new(Tail::new(keep)));
        let registered = self.running.register(&caller.client, label, out.clone(), err.clone());
        let drain_for = if tee.is_some() { STREAM_DRAIN } else { DRAIN };
        let readers = [
            child.stdout.take().map(|s| drain(s, out.clone(), tee.clone().map(|t| (t, false)))),
            child.stderr.take().map(|s| drain(s, err.clone(), tee.map(|t| (t, true)))),
        ];
        let mut tick = tokio::time::interval_at(
            tokio::time::Instant::now() + Duration::from_secs(1),
            Duration::from_secs(1),
        );
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut timed_out = false;
        let mut cancelled = false;
        let mut stopped = false;
        let mut by_person = false;
        // The reports read before the launcher's word that the run ended, if it came.
        let mut early = launcher::Reported::default();
        let mut told = false;
        let status = loop {
            tokio::select! {
                s = child.wait() => break s,
                // Every process of the run has ended and the output is whole: the answer need
                // not wait for the launcher to take down the namespaces and the cgroup leaf.
                s = reports.ended(&mut early) => {
                    told = true;
                    break Ok(s);
                }
                () = &mut deadline, if !timed_out && !cancelled => {
                    timed_out = true;
                    break stop(&mut child).await;
                }
                () = caller.cancelled(), if !timed_out && !cancelled => {
                    cancelled = true;
                    break stop(&mut child).await;
                }
                () = registered.stop.cancelled(), if !timed_out && !cancelled => {
                    (cancelled, by_person) = (true, true);
                    break stop(&mut child).await;
                }
                () = halted(&mut halt), if !timed_out && !cancelled => {
                    (cancelled, stopped) = (true, true);
                    break stop(&mut child).await;
                }
                _ = tick.tick() => {
                    let secs = started.elapsed().as_secs();
                    caller
                        .progress(secs as f64, || {
                            let bytes = total(&out) + total(&err);
                            format!("running {secs} s, {bytes} bytes of output")
                        })
                        .await;
                }
            }
        };
        if told {
            launcher::report::reap_later(child);
        }

        // Every process of the sandbox is gone once the launcher is, or has told it was; the
        // pipes close with them.
        for r in readers.into_iter().flatten() {
            let abort = r.abort_handle();
            if tokio::time::timeout(drain_for, r).await.is_err() {
                abort.abort();
            }
        }
        let duration_ms = started.elapsed().as_millis() as u64;
        if stopped {
            return Err(ShellError::Braked);
        }
        if by_person {
            return Err(ShellError::StoppedByPerson);
        }
        if cancelled {
            return Err(ShellError::Cancelled(
                "cancelled: the command and its processes were stopped".into(),
            ));
        }
        let status = status.map_err(|e| {
            ShellError::Sandbox(format!("waiting for the sandbox launcher failed: {e}"))
        })?;
        let (out, err) = (lock(&out), lock(&err));
        let ending = match (status.code(), std::os::unix::process::ExitStatusExt::signal(&status)) {
            (Some(code), _) => Ending::from_code(code),
            (None, Some(sig)) => Ending::Signal(sig),
            (None, None) => Ending::Exit(-1),
        };
        // Every writer of the channel (the launcher, its init) has ended, or said its last
        // word: all of it is there. Its report alone says the command never started; an exit
        // code of 125 and a `hands sandbox:` line on stderr are what any command can produce.
        let mut reported = early;
        reported.extend(reports.read());
        if let Some((why, cause)) = reported.setup_failed() {
            let why = format!(
                "the command did not run: the sandbox could not be built (hands sandbox: {why})"
            );
            return Err(match cause {
                launcher::Cause::Changed => ShellError::Changed(why),
                _ => ShellError::Sandbox(why),
            });
        }
        if reported.unreadable > 0 {
            tracing::warn!(
                "{} reports of the sandbox launcher could not be read (a launcher of another \
                 build?); `hands-sandbox` and `hands` are installed together",
                reported.unreadable
            );
        }
        let output = bash::output(
            ending,
            timed_out,
            duration_ms,
            &out,
            &err,
            output_chars,
            &self.containment(),
        );
        Ok((output, reported))
    }
}

fn total(t: &Mutex<Tail>) -> u64 {
    lock(t).total()
}

/// Reads a pipe to its end into a tail, and into the tee while its receiver listens.
fn drain<R>(
    mut r: R,
    tail: Arc<Mutex<Tail>>,
    mut tee: Option<(Tee, bool)>,
) -> tokio::task::JoinHandle<()>
where
    R: tokio::io::AsyncRead + Unpin + Send + 'static,
{
    tokio::spawn(async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match r.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    lock(&tail).push(&buf[..n]);
                    if let Some((tx, is_err)) = &tee
                        && tx.send((*is_err, buf[..n].to_vec())).await.is_err()
                    {
                        tee = None;
                    }
                }
            }
        }
    })
}

/// SIGTERM to the launcher (it forwards it to every process of the sandbox), a grace period,
/// then SIGKILL (which takes the whole PID namespace with it).
async fn stop(child: &mut tokio::process::Child) -> std::io::Result<std::process::ExitStatus> {
    if let Some(pid) = child.id().and_then(|id| rustix::process::Pid::from_raw(id as i32)) {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
    }
    match tokio::time::timeout(GRACE, child.wait()).await {
        Ok(s) => s,
        Err(_) => {
            let _ = child.start_kill();
            child.wait().await
        }
    }
}

/// The connections the network proxy refused a command, as a result lists them.
pub(crate) fn network_denials(
    refused: Vec<hands_sandbox::proxy::Denial>,
) -> Vec<crate::bash::Denied> {
    refused
        .into_iter()
        .map(|d| {
            // A deny entry wins over allow: adding the host there would change nothing.
            let remedy = if d.by_deny_entry {
                "a person can remove that entry from tools-shell's config.network.deny (deny \
                 wins over allow)"
            } else {
                "a person can add the host to tools-shell's config.network.allow, or approve \
                 it when asked (unknown = \"ask\")"
            };
            crate::bash::Denied {
                what: format!("{}:{}", d.host, d.port),
                layer: "network".into(),
                why: d.why,
                remedy: remedy.into(),
            }
        })
        .collect()
}
