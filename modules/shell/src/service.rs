//! tools-shell's commands: `bash`, `run`/`os-*` and `hands exec` (one allowlisted program,
//! argv given exactly, no shell). Each re-runs the daemon's binary as `hands __sandbox` (see
//! `hands_sandbox::launcher`, which takes the spec on a descriptor), captures the end of its
//! output, and stops the whole tree on timeout, cancellation or client disconnect. The tmux
//! sessions are in `sessions.rs`.

use crate::allow::{self, Verdict};
use crate::bash::{self, BashOutput, BashParams, Ending};
use crate::caller::{Caller, Refusal};
use crate::capture::Tail;
use crate::sessions;
use crate::settings::{NetworkMode, ShellConfig, ShellTool};
use hands_roots::{Resolver, RootSpec, lock};
use hands_sandbox::{launcher, masks, netns, probe};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;
use tokio::sync::Semaphore;

/// The module as the daemon declared it.
pub struct Module {
    /// Its name (`tools-shell`): the folder of its state (tmux sessions, network namespace).
    pub name: String,
    pub roots: Vec<RootSpec>,
    /// It has the `network` grant.
    pub network: bool,
}

/// What every command of the module runs with; built once at startup.
pub struct Shell {
    resolver: Arc<Resolver>,
    /// The launcher spec without `argv` and `cwd`.
    base: launcher::Builder,
    pub(crate) output_chars: usize,
    slots: Arc<Semaphore>,
    pub(crate) exe: PathBuf,
    enforce: bool,
    roots: Vec<PathBuf>,
    probe: std::sync::OnceLock<probe::Probe>,
    /// The module's shared private network namespace; none with `network.mode = "host"`.
    netns: Option<netns::Netns>,
    /// The network by domain (SPEC §5.4): the proxy, once the daemon gave it its gate.
    network: Option<Network>,
    /// The module's tmux sessions (`sessions.rs`).
    pub(crate) tmux: sessions::Sessions,
    /// Secret files and hard links to denied files in the roots, added to `masked` per call.
    masks: Arc<masks::Masks>,
    /// The `PATH` of commands; `run` resolves binaries against it on the host.
    path: String,
    /// The compiled `commands` table (SPEC §4.4).
    policy: allow::Policy,
    /// The `tools` entries behind the `os-*` tools, by index.
    os_tools: Vec<ShellTool>,
    /// The output cap of `run` and `os-*`.
    run_output_chars: usize,
    /// The brake: `true` while `hands stop` is in effect. Every running (or queued) command
    /// holds a receiver and is stopped when it turns `true`; the receiver count is the
    /// registry `stop_all` waits on.
    pub(crate) halt: tokio::sync::watch::Sender<bool>,
    /// The commands running now, for the dashboard.
    running: crate::registry::Registry,
    /// What `serve` would have made in the roots, when this instance made nothing.
    unmade: Vec<PathBuf>,
    /// The process bound chosen at startup, and why better ones were passed over.
    bound: launcher::bounds::Choice,
    /// Who commands run as when the daemon is root (`sandbox.run_as`).
    pub(crate) run_as: Option<launcher::Ids>,
    /// Set when user namespaces cannot be made and `best-effort` runs commands without them.
    without_namespaces: std::sync::atomic::AtomicBool,
    /// The commands' home then, when they run as `run_as` (see [`reachable_by_run_as`]).
    bare_home: std::sync::OnceLock<PathBuf>,
}

/// A folder for a root daemon's commands run as `sandbox.run_as` without namespaces
/// (`best-effort` in a container with no user namespaces): there they reach their home and
/// tmux's sockets through the host's own folders, and a root daemon's state dir is usually
/// under `/root` (0700). `/tmp/hands-<dev>-<inode of the module's session records>`, the same
/// for a restarted daemon (its sessions are found again); root's and 0711, so others may pass
/// through it, not list it (the launcher gives the home in it to the user, each session's
/// socket folder is the user's and 0700). One that exists must be a folder of root's that no
/// one else writes, or nothing moves and the error says why.
pub(crate) fn reachable_by_run_as(records: &Path) -> anyhow::Result<PathBuf> {
    use anyhow::{Context, bail};
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    let of =
        std::fs::metadata(records).with_context(|| format!("cannot read {}", records.display()))?;
    let dir = PathBuf::from(format!("/tmp/hands-{:x}-{:x}", of.dev(), of.ino()));
    match std::fs::DirBuilder::new().mode(0o711).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e).with_context(|| format!("cannot create {}", dir.display())),
    }
    let meta = std::fs::symlink_metadata(&dir)
        .with_context(|| format!("cannot read {}", dir.display()))?;
    if !meta.is_dir() || meta.uid() != 0 || meta.mode() & 0o022 != 0 {
        bail!(
            "{} is not a folder of root's that only root writes (someone else made it): remove \
             it and restart the daemon",
            dir.display()
        );
    }
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o711))
        .with_context(|| format!("cannot set the mode of {}", dir.display()))?;
    Ok(dir)
}

/// The network by domain of one module: its rules, the proxy serving them (made once the
/// daemon's gate exists), and the listeners in the namespace of the current holder.
struct Network {
    rules: hands_sandbox::proxy::Rules,
    proxy: std::sync::OnceLock<Arc<hands_sandbox::proxy::Proxy>>,
    /// The holder whose namespace the listeners are in, and their ports (HTTP, SOCKS5).
    listening: Mutex<Option<(netns::Process, u16, u16)>>,
    /// The tickets of the tmux sessions, by name: a session's panes use its proxy variables
    /// for as long as it lives (dropped at `tmux_kill`, or when it is found gone).
    sessions: Mutex<std::collections::HashMap<String, hands_sandbox::proxy::Ticket>>,
}

/// What a command stopped by the brake, or refused while it holds, returns.
pub(crate) const HALTED: &str = "stopped by `hands stop`: a person ended this daemon's \
                                 commands; commands are refused until `hands stop --release` (or \
                                 a restart)";

/// Resolves once the brake is on (never, if the shell is gone).
pub(crate) async fn halted(rx: &mut tokio::sync::watch::Receiver<bool>) {
    if rx.wait_for(|on| *on).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Folders every command sees read-only, when they exist.
pub const SYSTEM: &[&str] = &["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc", "/opt"];
/// The launcher's exit code when the sandbox could not be built (`hands_sandbox::launcher`).
const SETUP_FAILED: i32 = 125;
/// How long a stopped command gets between SIGTERM and SIGKILL.
pub(crate) const GRACE: Duration = Duration::from_secs(2);
/// How long the output pipes may stay open after the launcher ended.
const DRAIN: Duration = Duration::from_secs(2);
/// The same when the output is also streamed to a terminal (`hands exec`): the pipes may hold
/// what the terminal has not taken yet, and it must arrive whole.
const STREAM_DRAIN: Duration = Duration::from_secs(30);

fn clean_abs(p: &Path) -> bool {
    p.is_absolute()
        && p.components().count() > 1
        && p.components().all(|c| matches!(c, Component::RootDir | Component::Normal(_)))
}

/// Where a command's output goes as it arrives, besides its tail: `(is_stderr, bytes)`.
pub type Tee = tokio::sync::mpsc::Sender<(bool, Vec<u8>)>;

/// One allowlisted command, checked by the policy and resolved on the configured PATH.
#[derive(Debug, Clone)]
pub struct Checked {
    /// The binary's name, then the arguments, as asked.
    pub argv: Vec<String>,
    /// The absolute path the binary resolved to; the sandbox runs it as argv[0].
    pub program: PathBuf,
    /// Only a person's yes for this one run lets it run.
    pub confirm: bool,
}

impl Shell {
    // Startup wiring: each argument is a separate piece of the daemon's config.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        m: &Module,
        cfg: &ShellConfig,
        run_as: Option<&str>,
        resolver: Arc<Resolver>,
        lists: &hands_roots::PolicyLists,
        state_dir: &Path,
        protected_extra: &[String],
        enforce: bool,
        make_placeholders: bool,
    ) -> anyhow::Result<Shell> {
        use anyhow::Context;
        let daemon_home = hands_roots::home_dir();
        let state = if state_dir.is_absolute() {
            state_dir.to_path_buf()
        } else {
            std::env::current_dir().context("current folder")?.join(state_dir)
        };
        let home = state.join("sandbox-home/tools-shell");
        std::fs::create_dir_all(&home)
            .with_context(|| format!("cannot create the sandbox home {}", home.display()))?;
        let home = std::fs::canonicalize(&home)
            .with_context(|| format!("cannot resolve {}", home.display()))?;
        let path = cfg.command_path();
        let policy = cfg.policy().map_err(|e| anyhow::anyhow!("{e}"))?;
        let mut system: Vec<PathBuf> = SYSTEM.iter().map(PathBuf::from).collect();
        for dir in path.split(':').map(PathBuf::from) {
            if clean_abs(&dir) && !system.iter().any(|s| dir.starts_with(s)) {
                system.push(dir);
            }
        }
        system.retain(|p| p.exists());
        let roots: Vec<launcher::Root> = m
            .roots
            .iter()
            .map(|r| launcher::Root { path: r.path.clone(), writable: r.writable })
            .collect();
        // `hands check`/`doctor` make nothing in the roots: they list what `serve` would make.
        let mut unmade = Vec::new();
        let folders: Vec<&str> =
            protected_extra.iter().filter_map(|e| e.strip_suffix('/')).collect();
        masks::protected_placeholders(
            &m.roots,
            &folders,
            &resolver,
            make_placeholders,
            &mut unmade,
        )?;
        let protected: Vec<PathBuf> = m
            .roots
            .iter()
            .filter(|r| r.writable)
            .flat_map(|r| lists.protected.iter().map(|p| r.path.join(p)))
            .filter(|p| clean_abs(p) && std::fs::symlink_metadata(p).is_ok())
            .collect();
        let mut masked: Vec<PathBuf> =
            lists.credentials.iter().chain(&lists.deny).filter(|p| clean_abs(p)).cloned().collect();
        // A missing denied path in a writable root gets an empty placeholder, so a command
        // meets a mask there instead of creating it; what the walk finds is added per call.
        let denied: Vec<masks::DeniedPath> =
            (lists.credentials.iter().map(|p| (p, true)))
                .chain(lists.deny.iter().map(|p| (p, false)))
                .filter(|(p, _)| clean_abs(p))
                .map(|(p, cred)| {
                    if cred { masks::DeniedPath::credential(p) } else { masks::DeniedPath::deny(p) }
                })
                .collect();
        masked.extend(masks::placeholders(
            &denied,
            &m.roots,
            &resolver,
            make_placeholders,
            &mut unmade,
        )?);
        // `serve` makes them again whenever it walks the roots: a removed one comes back.
        let repair = make_placeholders.then(|| masks::Repair {
            denied,
            roots: m.roots.clone(),
            dirs: vec![home.clone()],
            extra_folders: folders.iter().map(|f| f.to_string()).collect(),
        });
        let mut env: BTreeMap<String, String> = BTreeMap::new();
        for (k, v) in [
            ("LANG", "C.UTF-8"),
            ("TERM", "dumb"),
            ("PAGER", "cat"),
            ("GIT_PAGER", "cat"),
            ("GIT_EDITOR", "true"),
            ("GIT_TERMINAL_PROMPT", "0"),
        ] {
            env.insert(k.into(), v.into());
        }
        for (k, v) in &cfg.env {
            let v = hands_roots::expand_tilde(v, daemon_home.as_deref());
            env.insert(k.clone(), v.to_string_lossy().into_owned());
        }
        // Always the sandbox's own, whatever `env` says.
        env.insert("PATH".into(), path.clone());
        env.insert("HOME".into(), home.to_string_lossy().into_owned());
        env.insert("TMPDIR".into(), "/tmp".into());
        let l = cfg.limits.clone().unwrap_or_default();
        let walk_limit = l
            .walk_entries
            .map_or(masks::WALK_LIMIT, |n| usize::try_from(n).unwrap_or(usize::MAX).max(1));
        let limits = launcher::Limits {
            processes: l.processes.unwrap_or(512),
            open_files: l.open_files.unwrap_or(1024),
            file_size_mb: l.file_size_mb.unwrap_or(4096),
            memory_mb: l.memory_mb.unwrap_or(8192),
        };
        // The grant with `mode = "host"` is the host's network; the grant otherwise is the
        // network by domain, which keeps the private namespace and adds the proxy.
        let (host_network, network) = match (m.network, cfg.network_mode()) {
            (false, _) => (false, None),
            (true, Ok(NetworkMode::Host)) => (true, None),
            (true, Ok(NetworkMode::Domains(rules))) => (
                false,
                Some(Network {
                    rules,
                    proxy: std::sync::OnceLock::new(),
                    listening: Mutex::new(None),
                    sessions: Mutex::default(),
                }),
            ),
            (true, Err((key, why, _))) => anyhow::bail!("{key}: {why}"),
        };
        let first_writable = m.roots.iter().find(|r| r.writable).map(|r| r.path.as_path());
        let run_as = launcher::run_as(run_as, first_writable)?;
        let bound =
            launcher::bounds::choose(rustix::process::geteuid().as_raw() != 0 || run_as.is_some());
        let base = launcher::Spec::builder(launcher::Confinement {
            roots,
            protected,
            protected_rules: lists.protected.clone(),
            masked,
            system,
            home: home.clone(),
        })
        .bound(bound.bound.clone())
        .run_as(run_as)
        .env(env)
        .host_network(host_network)
        .new_repositories(cfg.new_repositories == crate::settings::NewRepositories::Allow)
        .limits(limits);
        let exe = std::env::current_exe().context("cannot find the hands binary to re-run")?;
        let sessions = sessions::Sessions::new(&state, &m.name, &path)?;
        let netns = if host_network {
            None
        } else {
            Some(netns::Netns::new(&exe, &state.join("netns"), &m.name)?)
        };
        // The config refused values out of range (`config/shell.rs`), so none is clamped here.
        let max = cfg.max_concurrent.unwrap_or(4) as usize;
        let output_chars = cfg.output_chars.unwrap_or(30_000) as usize;
        let run_output_chars =
            cfg.run_output_chars.unwrap_or(crate::run::DEFAULT_OUTPUT_CHARS) as usize;
        Ok(Shell {
            path,
            policy,
            os_tools: cfg.tools.clone(),
            run_output_chars,
            masks: Arc::new(masks::Masks::new(&m.roots, resolver.clone(), repair, walk_limit)),
            halt: tokio::sync::watch::channel(false).0,
            running: Default::default(),
            resolver,
            base,
            output_chars,
            slots: Arc::new(Semaphore::new(max)),
            exe,
            enforce,
            roots: m.roots.iter().map(|r| r.path.clone()).collect(),
            probe: std::sync::OnceLock::new(),
            netns,
            network,
            tmux: sessions,
            unmade,
            bound,
            run_as,
            without_namespaces: Default::default(),
            bare_home: std::sync::OnceLock::new(),
        })
    }

    /// The commands running now, oldest first.
    pub fn running(&self) -> Vec<crate::registry::RunningCommand> {
        self.running.running()
    }

    /// Stops one running command and its whole process tree (TERM, grace, KILL) and waits,
    /// bounded, until it has ended; its command line, or `None` when no such command runs.
    pub async fn stop_command(&self, id: u64) -> Option<String> {
        self.running.stop(id, GRACE + DRAIN + Duration::from_secs(1)).await
    }

    /// The placeholders `hands serve` makes in the roots and this (`check`/`doctor`) instance
    /// did not: missing protected folders and the first missing component of denied paths.
    pub fn unmade_placeholders(&self) -> &[PathBuf] {
        &self.unmade
    }

    /// The brake: ends every running command and tmux session of the module now (TERM, grace,
    /// KILL, as a timeout does), refuses new ones until [`Shell::release`], and returns how many
    /// commands were running or queued plus how many sessions ended. Waits, bounded, until they
    /// have ended.
    pub async fn stop_all(&self) -> usize {
        let running = self.halt.receiver_count();
        self.halt.send_replace(true);
        let sessions = self.tmux_kill_all().await;
        let until = Instant::now() + GRACE + DRAIN + Duration::from_secs(1);
        while self.halt.receiver_count() > 0 && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        running + sessions
    }

    /// Lifts the brake: commands run again.
    pub fn release(&self) {
        self.halt.send_replace(false);
    }

    /// The brake's refusal while `hands stop` holds. Read *after* a start has registered
    /// itself (a command's halt receiver, a session's record), it makes the brake atomic with
    /// the start: `stop_all` turns the brake on before it looks for what to end.
    pub(crate) fn refuse_when_braked(&self) -> Result<(), Refusal> {
        if *self.halt.borrow() { Err(Refusal(HALTED.into())) } else { Ok(()) }
    }

    /// Gives the network by domain its gate (the daemon's approvals and audit log), which
    /// exist only after the modules are built. Without it, a proxied connection is refused.
    pub fn connect_network(&self, gate: Arc<dyn hands_sandbox::proxy::Gate>) {
        if let Some(n) = &self.network {
            let proxy = hands_sandbox::proxy::Proxy::new(
                n.rules.clone(),
                gate,
                hands_sandbox::proxy::Limits::default(),
            );
            let _ = n.proxy.set(proxy);
        }
    }

    /// Makes sure the proxy listens inside the namespace of `holder` (a new holder is a new
    /// namespace) and returns the ports.
    fn proxy_ports(&self, holder: netns::Process) -> Result<Option<(u16, u16)>, Refusal> {
        let Some(n) = &self.network else { return Ok(None) };
        let Some(proxy) = n.proxy.get() else {
            return Err(Refusal("the network proxy is not ready (no gate)".into()));
        };
        let mut listening = lock(&n.listening);
        if let Some((h, http, socks)) = *listening
            && h == holder
        {
            return Ok(Some((http, socks)));
        }
        let refuse = |e: std::io::Error| {
            Refusal(format!(
                "the network proxy could not listen in the module's network namespace: {e}"
            ))
        };
        let l =
            hands_sandbox::listen::acquire(&self.exe, holder.pid, holder.start).map_err(refuse)?;
        let (http, socks) = l.ports().map_err(refuse)?;
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| Refusal("the network proxy needs the daemon's runtime".into()))?;
        let _guard = runtime.enter();
        for (listener, is_http) in [(l.http, true), (l.socks, false)] {
            listener.set_nonblocking(true).map_err(refuse)?;
            let listener = tokio::net::TcpListener::from_std(listener).map_err(refuse)?;
            let proxy = Arc::clone(proxy);
            if is_http {
                runtime.spawn(proxy.serve_http(listener));
            } else {
                runtime.spawn(proxy.serve_socks(listener));
            }
        }
        *listening = Some((holder, http, socks));
        Ok(Some((http, socks)))
    }

    /// Whether commands reach the network through the proxy (`network` by domain), the only
    /// way a `needs.network` grant can be carried.
    pub fn network_proxied(&self) -> bool {
        self.network.is_some() && self.netns.is_some()
    }

    /// A command's ticket with the proxy and the spec carrying its proxy variables; the spec
    /// unchanged without the network by domain.
    pub(crate) fn with_proxy(
        &self,
        mut spec: launcher::Spec,
        label: &str,
        client: &str,
    ) -> Result<(launcher::Spec, Option<hands_sandbox::proxy::Ticket>), Refusal> {
        // `needs.network` a person approved for this call (`src/needs.rs`): the ticket's own
        // allow entries. Without the proxy nothing could carry them: refused, not ignored.
        let granted = crate::needs::granted().map(|n| n.network.clone()).unwrap_or_default();
        if !granted.is_empty() && !self.network_proxied() {
            return Err(Refusal(crate::needs::NO_PROXY.into()));
        }
        let (Some(n), Some(netns)) = (&self.network, &self.netns) else { return Ok((spec, None)) };
        let holder = netns.holder().map_err(|e| Refusal(format!("{e:#}")))?;
        let Some((http, socks)) = self.proxy_ports(holder)? else { return Ok((spec, None)) };
        let Some(proxy) = n.proxy.get() else { return Ok((spec, None)) };
        let asker =
            hands_sandbox::proxy::Asker { command: label.to_string(), client: client.to_string() };
        let ticket = proxy
            .ticket(asker)
            .map_err(|e| Refusal(format!("the network proxy could not issue a ticket: {e}")))?;
        let entries: Result<Vec<hands_sandbox::proxy::Entry>, _> =
            granted.iter().map(|g| g.parse()).collect();
        ticket.grant(entries.map_err(|e| Refusal(format!("needs.network: {e}")))?);
        for (k, v) in ticket.env(http, socks) {
            spec.set_env(k, v);
        }
        Ok((spec, Some(ticket)))
    }

    /// Keeps a tmux session's ticket while the session lives (a new one replaces the old).
    pub(crate) fn keep_session_ticket(
        &self,
        session: &str,
        ticket: Option<hands_sandbox::proxy::Ticket>,
    ) {
        if let (Some(n), Some(t)) = (&self.network, ticket) {
            lock(&n.sessions).insert(session.into(), t);
        }
    }

    /// Ends a tmux session's ticket: its token names no command any more.
    pub(crate) fn end_session_ticket(&self, session: &str) {
        if let Some(n) = &self.network {
            lock(&n.sessions).remove(session);
        }
    }

    /// The sandbox self-test, run once (at startup, or by `hands doctor`). In `best-effort`,
    /// where no user namespace can be made, it runs again without namespaces, and so do the
    /// commands after it.
    pub fn self_test(&self) -> &probe::Probe {
        self.probe.get_or_init(|| {
            let run = || match self.with_netns(self.base.clone()) {
                Ok(base) => probe::run(&self.exe, &base, &self.roots),
                Err(Refusal(why)) => probe::failed(why),
            };
            let mut p = run();
            if !self.enforce && p.userns_refused() {
                self.without_namespaces.store(true, std::sync::atomic::Ordering::Relaxed);
                // Commands as `run_as` now reach their home and the tmux sockets through the
                // host's folders, where a root daemon's state dir is usually closed to them.
                let moved = match self.run_as {
                    Some(_) => reachable_by_run_as(self.tmux.records()).map(|dir| {
                        self.tmux.move_sockets(dir.join("tmux"));
                        let _ = self.bare_home.set(dir.join("home"));
                    }),
                    None => Ok(()),
                };
                p = run();
                if let Err(e) = moved {
                    p.checks.push(probe::Check {
                        name: "home and tmux sockets reachable",
                        holds: Some(false),
                        note: format!("{e:#}"),
                    });
                }
            }
            p.mechanisms = self.mechanisms();
            if self.bound.bound == launcher::Bound::None || self.rlimit_unbound() {
                let mut why = self.bound.passed_over.clone();
                if self.rlimit_unbound() {
                    why.push("RLIMIT_NPROC: binds only inside a user namespace".into());
                }
                p.checks.push(probe::Check {
                    name: "process bound",
                    holds: Some(false),
                    note: why.join("; "),
                });
            }
            p
        })
    }

    /// The walls' mechanisms, as the tier names them.
    fn mechanisms(&self) -> Vec<String> {
        let ns = if self.without_namespaces.load(std::sync::atomic::Ordering::Relaxed) {
            "no namespaces (Landlock and seccomp alone)"
        } else {
            "namespaces"
        };
        let landlock = match launcher::landlock_abi() {
            0 => "Landlock unavailable".to_string(),
            1 => "Landlock ABI 1 (not used: it forbids renames across folders)".to_string(),
            n => format!("Landlock ABI {n}"),
        };
        let bound = if self.rlimit_unbound() {
            "no process bound (RLIMIT_NPROC binds only in a user namespace)"
        } else {
            self.bound.bound.name()
        };
        let mut m = vec![ns.to_string(), landlock, "seccomp".into(), bound.into()];
        if let Some(ids) = self.run_as {
            m.push(format!("as uid {}", ids.uid));
        }
        m
    }

    /// Whether the chosen bound is `RLIMIT_NPROC` but commands run without namespaces: on the
    /// host it would count every process of the uid, so the launcher does not set it.
    fn rlimit_unbound(&self) -> bool {
        self.bound.bound == launcher::Bound::Rlimit
            && self.without_namespaces.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The process bound chosen at startup, and why better mechanisms were passed over.
    pub fn bound(&self) -> &launcher::bounds::Choice {
        &self.bound
    }

    /// Who the commands run as, for a daemon run as root.
    pub fn run_as(&self) -> Option<launcher::Ids> {
        self.run_as
    }

    /// Adds the module's shared network namespace to a launcher spec (starting its holder when
    /// there is none). Blocks briefly the first time.
    fn with_netns(&self, spec: launcher::Builder) -> Result<launcher::Builder, Refusal> {
        if self.without_namespaces.load(std::sync::atomic::Ordering::Relaxed) {
            let spec = spec.without_namespaces();
            return Ok(match self.bare_home.get() {
                Some(home) => spec.home(home.clone()),
                None => spec,
            });
        }
        match &self.netns {
            Some(n) => Ok(spec.netns(n.holder().map_err(|e| Refusal(format!("{e:#}")))?)),
            None => Ok(spec),
        }
    }

    /// The containment tier of a command run now.
    pub(crate) fn containment(&self) -> String {
        match self.probe.get() {
            Some(p) => p.tier(),
            None => "full (launcher refuses to run without every layer; not probed)".into(),
        }
    }

    /// Refuses while `hands stop` holds, and in `enforce` mode when the self-test found a
    /// guarantee missing.
    pub(crate) fn refuse_when_unsafe(&self) -> Result<(), Refusal> {
        if *self.halt.borrow() {
            return Err(Refusal(HALTED.into()));
        }
        self.cannot_run().map_or(Ok(()), Err)
    }

    /// In `enforce` mode, when the self-test found a guarantee missing: why no command can run.
    /// The server asks this before the trust gate, so nobody approves a command that would not
    /// run (SPEC §5.2).
    pub fn cannot_run(&self) -> Option<Refusal> {
        let p = self.probe.get().filter(|p| self.enforce && !p.missing().is_empty())?;
        let remedy = p
            .checks
            .iter()
            .filter(|c| c.holds == Some(false))
            .map(|c| format!("{}: {}", c.name, c.note))
            .collect::<Vec<_>>()
            .join("; ");
        Some(Refusal(format!(
            "refused before anyone was asked: sandbox.mode = \"enforce\" and the sandbox \
             self-test found these guarantees missing: {} ({remedy}); `hands doctor` shows why \
             and how to fix it. A person can fix the host or set sandbox.mode = \"best-effort\"",
            p.missing().join(", ")
        )))
    }

    /// A command's working folder, resolved through the roots (default: the first root).
    pub(crate) async fn resolve_cwd(&self, cwd: Option<String>) -> Result<PathBuf, Refusal> {
        let resolver = self.resolver.clone();
        let cwd_arg = cwd.unwrap_or_default();
        tokio::task::spawn_blocking(move || resolver.open_dir(&cwd_arg).map(|d| d.abs))
            .await
            .map_err(|e| Refusal(format!("cwd could not be checked: {e}")))?
            .map_err(|e| Refusal(format!("bad cwd: {e}")))
    }

    /// Runs one `bash` call to its end.
    pub async fn bash(&self, p: BashParams, caller: Caller) -> Result<BashOutput, Refusal> {
        let argv = json!(["bash", "--noprofile", "--norc", "-c", p.command]);
        self.launch(argv, p.cwd, p.timeout_secs, caller, self.output_chars, None).await
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
    pub fn check(&self, argv: &[String]) -> Result<Checked, Refusal> {
        let verdict = self.policy.decide(argv).map_err(|e| Refusal(e.to_string()))?;
        let bin = argv.first().map(String::as_str).unwrap_or_default();
        let program = allow::resolve(bin, &self.path).ok_or_else(|| {
            Refusal(format!(
                "`{}` is not found in the module's PATH ({}); a person can install it there \
                 or add its folder to tools-shell's `path`",
                hands_roots::shown(bin),
                self.path
            ))
        })?;
        Ok(Checked { argv: argv.to_vec(), program, confirm: verdict == Verdict::Confirm })
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
    ) -> Result<BashOutput, Refusal> {
        let mut argv: Vec<Value> = vec![json!(c.program)];
        argv.extend(c.argv.iter().skip(1).map(|a| json!(a)));
        let chars = self.run_output_chars;
        self.launch(Value::Array(argv), cwd, timeout_secs, caller, chars, tee).await
    }

    /// The timeout checked, the brake and the self-test consulted, the cwd resolved, a slot
    /// taken; then the command runs to its end.
    async fn launch(
        &self,
        argv: Value,
        cwd: Option<String>,
        timeout_secs: Option<u64>,
        caller: Caller,
        output_chars: usize,
        tee: Option<Tee>,
    ) -> Result<BashOutput, Refusal> {
        let timeout = timeout_secs.unwrap_or(bash::DEFAULT_TIMEOUT_SECS);
        if timeout == 0 || timeout > bash::MAX_TIMEOUT_SECS {
            return Err(Refusal(format!(
                "timeout_secs must be between 1 and {}; got {timeout}",
                bash::MAX_TIMEOUT_SECS
            )));
        }
        self.refuse_when_unsafe()?;
        let cwd = self.resolve_cwd(cwd).await?;
        let mut halt = self.halt.subscribe();
        let _slot = tokio::select! {
            s = self.slots.clone().acquire_owned() => {
                s.map_err(|_| Refusal("tools-shell is shutting down".into()))?
            }
            () = caller.cancelled() => return Err(Refusal("cancelled before it started".into())),
            () = halted(&mut halt) => return Err(Refusal(HALTED.into())),
        };
        drop(halt);
        let label = crate::registry::label(&argv);
        let argv: Vec<String> = serde_json::from_value(argv)
            .map_err(|e| Refusal(format!("the command is not a list of strings: {e}")))?;
        let spec = self.spec(argv, &cwd, None, None).await?;
        let (spec, ticket) = self.with_proxy(spec, &label, &caller.client)?;
        // While the call waits, its client may be asked about the command's connections.
        let _asks = ticket.as_ref().and_then(|t| caller.asks_for(t.token()));
        let mut out = self
            .run(&spec, label, Duration::from_secs(timeout), &caller, output_chars, tee)
            .await?;
        // Walls the command hit while it ran (refused creates, masked and read-only paths).
        out.denied.extend(launcher::notify::walls_hit(&out.stderr, &spec).into_iter().map(|h| {
            crate::bash::Denied {
                what: h.what,
                layer: h.layer.into(),
                why: h.why,
                remedy: h.remedy,
            }
        }));
        if let Some(t) = ticket {
            out.denied.extend(t.denied().into_iter().map(|d| {
                crate::bash::Denied {
                    what: format!("{}:{}", d.host, d.port),
                    layer: "network".into(),
                    why: d.why,
                    remedy: "a person can add the host to tools-shell's config.network.allow, or \
                         approve it when asked (unknown = \"ask\")"
                        .into(),
                }
            }));
        }
        Ok(out)
    }

    /// The launcher spec for one command: the base plus the names the walk of the roots finds
    /// now (secret files, hard links to denied files), passed to `__sandbox` on a descriptor.
    /// A tmux session adds its socket folder as a writable root and its marker as `watch`.
    pub(crate) async fn spec(
        &self,
        argv: Vec<String>,
        cwd: &Path,
        socket_dir: Option<&Path>,
        watch: Option<&Path>,
    ) -> Result<launcher::Spec, Refusal> {
        self.spec_and_masks(argv, cwd, socket_dir, watch).await.map(|(spec, _)| spec)
    }

    /// The secret files and hard links to denied files in the roots now (the walk, cached for
    /// a moment), refusing a name the sandbox cannot mask.
    pub(crate) async fn found_masks(&self) -> Result<Arc<masks::Found>, Refusal> {
        let masks = self.masks.clone();
        let found = tokio::task::spawn_blocking(move || masks.current())
            .await
            .map_err(|e| Refusal(format!("the roots could not be scanned for secret files: {e}")))?
            .map_err(|why| Refusal(why.to_string()))?;
        if let Some(p) = &found.unmaskable {
            return Err(Refusal(format!(
                "refused: {} must be hidden from commands or read-only to them (a secret file, \
                 a hard link to a denied file, or a protected path) but its name is not UTF-8, \
                 which the sandbox spec cannot carry; a person can rename or remove it",
                p.display()
            )));
        }
        Ok(found)
    }

    /// [`Shell::spec`], and the paths the walk added to the masks (a tmux session records them).
    pub(crate) async fn spec_and_masks(
        &self,
        argv: Vec<String>,
        cwd: &Path,
        socket_dir: Option<&Path>,
        watch: Option<&Path>,
    ) -> Result<(launcher::Spec, Arc<masks::Found>), Refusal> {
        let found = self.found_masks().await?;
        let mut spec = self
            .with_netns(self.base.clone())?
            .mask(found.paths.iter().cloned())
            .protect(found.protected.iter().cloned());
        if let Some(dir) = socket_dir {
            spec = spec.root(dir.to_path_buf(), true);
        }
        // `needs.write` a person approved for this call: writable roots of this launch only.
        if let Some(n) = crate::needs::granted() {
            for p in &n.write {
                spec = spec.root(p.clone(), true);
            }
        }
        spec = match watch {
            // A tmux server outlives the daemon; everything else dies with it.
            Some(w) => spec.watch(w.to_path_buf()),
            None => spec.parent(std::process::id() as i32),
        };
        Ok((spec.build(argv, cwd.to_path_buf()), found))
    }

    // Starts the launcher (`hands` re-executed), the one way a command runs.
    #[allow(clippy::disallowed_methods)]
    async fn run(
        &self,
        spec: &launcher::Spec,
        label: String,
        timeout: Duration,
        caller: &Caller,
        output_chars: usize,
        tee: Option<Tee>,
    ) -> Result<BashOutput, Refusal> {
        use std::process::Stdio;
        let started = Instant::now();
        let mut halt = self.halt.subscribe();
        if *halt.borrow() {
            return Err(Refusal(HALTED.into()));
        }
        let launcher = spec
            .command(&self.exe)
            .map_err(|e| Refusal(format!("the sandbox spec could not be passed on: {e}")))?;
        let mut child = tokio::process::Command::from(launcher)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| Refusal(format!("the sandbox launcher could not start: {e}")))?;
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
        let status = loop {
            tokio::select! {
                s = child.wait() => break s,
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
        // Every process of the sandbox is gone once the launcher is; the pipes close with them.
        for r in readers.into_iter().flatten() {
            let abort = r.abort_handle();
            if tokio::time::timeout(drain_for, r).await.is_err() {
                abort.abort();
            }
        }
        let duration_ms = started.elapsed().as_millis() as u64;
        if stopped {
            return Err(Refusal(HALTED.into()));
        }
        if by_person {
            return Err(Refusal(
                "stopped by a person on the dashboard: the command and its processes were ended"
                    .into(),
            ));
        }
        if cancelled {
            return Err(Refusal("cancelled: the command and its processes were stopped".into()));
        }
        let status =
            status.map_err(|e| Refusal(format!("waiting for the sandbox launcher failed: {e}")))?;
        let (out, err) = (lock(&out), lock(&err));
        let ending = match (status.code(), std::os::unix::process::ExitStatusExt::signal(&status)) {
            (Some(code), _) => Ending::from_code(code),
            (None, Some(sig)) => Ending::Signal(sig),
            (None, None) => Ending::Exit(-1),
        };
        if ending == Ending::Exit(SETUP_FAILED) {
            let text = String::from_utf8_lossy(&err.bytes()).into_owned();
            if let Some(line) = text.lines().find(|l| l.starts_with("hands sandbox:")) {
                return Err(Refusal(format!(
                    "the command did not run: the sandbox could not be built ({line})"
                )));
            }
        }
        Ok(bash::output(
            ending,
            timed_out,
            duration_ms,
            &out,
            &err,
            output_chars,
            &self.containment(),
        ))
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
