//! tools-shell's [`Shell`]: what every command of the module runs with, built once at startup
//! from the module's settings and the daemon's sandbox settings, and the brake (`hands stop`)
//! that ends its commands and sessions. Running one command is in `commands.rs`, how contained
//! commands are in `containment.rs`, the network by domain in `network.rs`; the tmux sessions
//! are in `sessions.rs` (with `sessions/`): all of them parts of the [`Shell`], which holds
//! their state.

mod commands;
mod containment;
mod network;
mod prepare;
mod ready;
mod session_walls;
pub mod sessions;
mod sockets;

pub use commands::Tee;
pub use prepare::{ALLOW_REMEDY, Checked, Launching, Prepared};

use crate::ShellError;
use crate::allow;
use crate::settings::{NetworkMode, ShellSettings, ShellTool};
use hands_roots::{Resolver, RootSpec};
use hands_sandbox::{launcher, masks, netns, probe};
use network::Network;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
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
    /// The daemon's state dir (canonical) and its identity: never granted by a widening
    /// (`needs`), as nothing else the host trusts is (the resolver's policy holds the rest).
    state_dir: PathBuf,
    state_id: Option<launcher::Identity>,
    /// The launcher spec without `argv` and `cwd`.
    base: launcher::Builder,
    pub(crate) output_chars: usize,
    slots: Arc<Semaphore>,
    /// The `hands` binary (the netns holder, `__remask`, the proxy's listeners).
    pub(crate) exe: PathBuf,
    /// What starts every command: `hands-sandbox` beside `exe`, else `exe` (found once).
    pub(crate) launcher: PathBuf,
    enforce: bool,
    roots: Vec<PathBuf>,
    probe: std::sync::OnceLock<probe::Probe>,
    /// The module's private network namespaces, one for each client; none with
    /// `network.mode = "host"`.
    netns: Option<netns::Netns>,
    /// A `sock_diag` socket in each client's namespace (`sockets.rs`).
    diags: sockets::Diags,
    /// The network by domain (SPEC §5.4): the proxy, once the daemon gave it its gate.
    network: Option<Network>,
    /// The module's tmux sessions (`sessions.rs`).
    pub(crate) tmux: sessions::Sessions,
    /// What commands may move, shared with tools-git (decision 0083).
    pub(crate) still: Arc<hands_sandbox::still::Still>,
    /// The report channels of the sessions this daemon started (`session_walls.rs`).
    session_walls: Mutex<std::collections::HashMap<String, session_walls::SessionWalls>>,
    /// `keep_sessions`: tmux sessions outlive this daemon (else they end with it).
    pub(crate) keep_sessions: bool,
    /// Secret files and hard links to denied files in the roots, added to `masked` per call.
    masks: Arc<masks::Masks>,
    /// The `PATH` of commands; `run` resolves binaries against it on the host.
    path: String,
    /// The compiled `commands` table (SPEC §4.4).
    policy: allow::Policy,
    /// The allowed programs as they were when the configuration was loaded (`pins.rs`).
    pins: crate::pins::Pins,
    /// The denied and confirm-listed programs' files (`hidden.rs`): the denied ones are masked
    /// in every run, the confirm-listed ones in every run no person confirmed.
    hidden: crate::hidden::Hidden,
    /// The `tools` entries behind the `os-*` tools, by index.
    os_tools: Vec<ShellTool>,
    /// The output cap of `run` and `os-*`.
    run_output_chars: usize,
    /// The brake: `true` while `hands stop` is in effect. Every running (or queued) command
    /// holds a receiver and is stopped when it turns `true`; the receiver count is the
    /// registry `stop_all` waits on.
    pub(crate) halt: tokio::sync::watch::Sender<bool>,
    /// The commands running now, for the dashboard.
    running: crate::running::Registry,
    /// A sandbox made ready ahead of the next command (`ready.rs`).
    ready: Arc<ready::Slot>,
    /// The same for the next tmux client command (`capture-pane`, `send-keys`) of the session
    /// last used: its spec binds that session's socket folder.
    ready_tmux: Arc<ready::Slot>,
    /// The process bound chosen at startup, and why better ones were passed over.
    bound: launcher::bounds::Choice,
    /// Who commands run as when the daemon is root (`sandbox.run_as`).
    pub(crate) run_as: Option<launcher::Ids>,
    /// Set when user namespaces cannot be made and `best-effort` runs commands without them.
    without_namespaces: std::sync::atomic::AtomicBool,
    /// The commands' home then, when they run as `run_as` (see [`reachable_by_run_as`]).
    bare_home: std::sync::OnceLock<PathBuf>,
    /// What `bash`'s `outputs` may add to an answer, encoded (see [`Setup::answer_cap`]).
    pub(crate) answer_cap: Option<u64>,
    /// Removes the cgroup leaves of killed launchers when the daemon exits.
    _sweeper: launcher::bounds::Sweeper,
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
    let dir = run_as_folder(&of);
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

/// The folder [`reachable_by_run_as`] names for the records folder whose metadata is `of`.
fn run_as_folder(of: &std::fs::Metadata) -> PathBuf {
    use std::os::unix::fs::MetadataExt;
    PathBuf::from(format!("/tmp/hands-{:x}-{:x}", of.dev(), of.ino()))
}

/// Where the tmux sockets of the session records in `records` were moved, when they were (a
/// root daemon without namespaces, [`reachable_by_run_as`]): that folder's `tmux/`, if it is
/// root's and no one else writes it.
pub(crate) fn moved_sockets(records: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let dir = run_as_folder(&std::fs::metadata(records).ok()?);
    let meta = std::fs::symlink_metadata(&dir).ok()?;
    (meta.is_dir() && meta.uid() == 0 && meta.mode() & 0o022 == 0).then(|| dir.join("tmux"))
}

/// Resolves once the brake is on (never, if the shell is gone).
pub(crate) async fn halted(rx: &mut tokio::sync::watch::Receiver<bool>) {
    if rx.wait_for(|on| *on).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// How long a stopped command gets between SIGTERM and SIGKILL.
pub(crate) const GRACE: Duration = Duration::from_secs(2);
/// How long the output pipes may stay open after the launcher ended.
const DRAIN: Duration = Duration::from_secs(2);

/// What the daemon gives the module at startup: its declaration, its validated settings, and
/// the daemon's own sandbox settings.
pub struct Setup<'a> {
    pub module: Module,
    pub settings: &'a ShellSettings,
    /// Who commands run as when the daemon is root (`sandbox.run_as`).
    pub run_as: Option<&'a str>,
    pub resolver: Arc<Resolver>,
    pub lists: &'a hands_roots::PolicyLists,
    pub state_dir: &'a Path,
    /// `sandbox.mode = "enforce"`.
    pub enforce: bool,
    /// The largest answer the daemon's transports all deliver, in bytes, when one has a cap
    /// (a runner's link): `bash`'s `outputs` are fitted under it.
    pub answer_cap: Option<u64>,
    /// The daemon's record of what commands may move, shared with tools-git (decision 0083):
    /// every command counts itself there while it runs, and the live sessions are its census.
    pub still: Arc<hands_sandbox::still::Still>,
}

impl Shell {
    pub fn new(setup: Setup<'_>) -> anyhow::Result<Shell> {
        use anyhow::Context;
        let Setup {
            module: m,
            settings: cfg,
            run_as,
            resolver,
            lists,
            state_dir,
            enforce,
            answer_cap,
            still,
        } = setup;
        let state = if state_dir.is_absolute() {
            state_dir.to_path_buf()
        } else {
            std::env::current_dir().context("current folder")?.join(state_dir)
        };
        // Canonical: the launcher opens what the spec names without following a link (the
        // sandbox home, a tmux session's socket folder), so no link may lie on their way.
        std::fs::create_dir_all(&state)
            .with_context(|| format!("cannot create the state dir {}", state.display()))?;
        let state = std::fs::canonicalize(&state)
            .with_context(|| format!("cannot resolve {}", state.display()))?;
        let state_id = std::fs::metadata(&state).ok().map(|m| {
            use std::os::unix::fs::MetadataExt;
            launcher::Identity { dev: m.dev(), ino: m.ino() }
        });
        // One home per set of roots: what one project's commands leave in the carried caches
        // runs in no other project's (found by session 40's attack pass; decision 0105).
        let key = roots_key(resolver.roots());
        let home = state.join("sandbox-home/tools-shell").join(&key);
        std::fs::create_dir_all(&home)
            .with_context(|| format!("cannot create the sandbox home {}", home.display()))?;
        let home = std::fs::canonicalize(&home)
            .with_context(|| format!("cannot resolve {}", home.display()))?;
        let path = cfg.command_path.clone();
        let mut system: Vec<PathBuf> = launcher::SYSTEM.iter().map(PathBuf::from).collect();
        for dir in path.split(':').map(PathBuf::from) {
            if launcher::is_clean(&dir) && !system.iter().any(|s| dir.starts_with(s)) {
                system.push(dir);
            }
        }
        system.retain(|p| p.exists());
        // The roots as the resolver pinned them at startup, each with the identity of its
        // pinned descriptor: the launcher binds the folder the daemon pinned, or refuses to start
        // (SPEC §3, one resolution).
        let mut pinned = Vec::new();
        for r in resolver.roots() {
            let id = launcher::Identity::of(r.fd())
                .with_context(|| format!("cannot stat the root {}", r.path().display()))?;
            pinned.push((r.path().to_path_buf(), id));
        }
        let roots: Vec<launcher::Root> = resolver
            .roots()
            .iter()
            .map(|r| launcher::Root { path: r.path().to_path_buf(), writable: r.writable() })
            .collect();
        let mut protected: Vec<PathBuf> = m
            .roots
            .iter()
            .filter(|r| r.writable)
            .flat_map(|r| lists.protected.iter().map(|p| r.path.join(p)))
            .filter(|p| launcher::is_clean(p) && std::fs::symlink_metadata(p).is_ok())
            .collect();
        // What the host trusts (the daemon's binary and launcher, its config, the home's
        // start-up surface under `allow_home`), under each of its names, where it lies in a
        // writable root: bound read-only where it exists, its folders pinned so that no rename
        // carries it aside; one that does not exist yet is for the in-run walls to keep from
        // being made. Other names of the same file (hard links) are found by the walk. Only
        // the names whose folders are real (the policy lists each path also through its real
        // folder): the launcher refuses to start at a link on the way to a protected path.
        let in_writable = |p: &Path| m.roots.iter().any(|r| r.writable && p.starts_with(&r.path));
        let real_way =
            |p: &Path| p.parent().is_some_and(|d| hands_roots::lenient_canonical(d) == d);
        for (p, _) in resolver.policy().host_paths() {
            let fits = launcher::is_clean(p) && in_writable(p) && real_way(p);
            if fits && !protected.iter().any(|q| q == p) {
                protected.push(p.to_path_buf());
            }
        }
        // The denied programs, by their files: not in any run's view (decision 0067). The
        // shell the `bash` tool runs cannot be one.
        let hidden = crate::hidden::Hidden::load(&cfg.policy, &path, &system);
        if cfg.bash
            && let Some(b) = allow::resolve("bash", &path)
            && let Ok(m) = std::fs::metadata(&b)
        {
            use std::os::unix::fs::MetadataExt;
            if hidden.denied.ids.contains(&(m.dev(), m.ino())) {
                anyhow::bail!(
                    "commands.deny names {} (under this or another name), which the \
                     `bash` tool runs; hint: set bash = false, or remove it from commands.deny",
                    b.display()
                );
            }
        }
        // Denied and credential paths: masked where they exist; where they do not, a command
        // is refused creating them in a writable root while it runs (the in-run walls take
        // the spec's masked paths as names it may not make). Nothing is made in the roots.
        let masked: Vec<PathBuf> = lists
            .credentials
            .iter()
            .chain(&lists.deny)
            // `sandbox.deny` marks a folder with a trailing `/`; the path is the folder's.
            .map(|p| p.components().collect::<PathBuf>())
            .filter(|p| launcher::is_clean(p))
            .chain(hidden.denied.paths.iter().cloned())
            .collect();
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
        // A program that starts a shell of the user's (tmux, an editor's `:!`) takes `SHELL`,
        // else the login shell, which for `sandbox.run_as` or `nobody` is often `nologin`: a
        // `tmux` run in `bash` ended at once (found by the fourth attack pass). The bash on the
        // sandbox's PATH, or `/bin/sh`; `env` may name another.
        let shell = allow::resolve("bash", &path).map(|b| b.to_string_lossy().into_owned());
        env.insert("SHELL".into(), shell.unwrap_or_else(|| "/bin/sh".into()));
        for (k, v) in &cfg.env {
            env.insert(k.clone(), v.clone());
        }
        // Always the sandbox's own, whatever `env` says.
        env.insert("PATH".into(), path.clone());
        env.insert("HOME".into(), home.to_string_lossy().into_owned());
        env.insert("TMPDIR".into(), "/tmp".into());
        // The grant with `mode = "host"` is the host's network; the grant otherwise is the
        // network by domain, which keeps the private namespace and adds the proxy.
        let (host_network, network) = match (m.network, &cfg.network) {
            (false, _) => (false, None),
            (true, NetworkMode::Host) => (true, None),
            (true, NetworkMode::Domains(rules)) => (
                false,
                Some(Network {
                    rules: rules.clone(),
                    proxy: std::sync::OnceLock::new(),
                    listening: Mutex::new(std::collections::HashMap::new()),
                    sessions: Mutex::default(),
                }),
            ),
        };
        let first_writable = m.roots.iter().find(|r| r.writable).map(|r| r.path.as_path());
        let run_as = launcher::run_as(run_as, first_writable)?;
        if let Some(ids) = run_as {
            let keep: Vec<PathBuf> =
                hands_sandbox::profiles::home_carried().map(PathBuf::from).collect();
            for other in launcher::hand_over(&home, &keep, (ids.uid, ids.gid))? {
                tracing::warn!(
                    "the commands' cache {} was another user's: its files still are, so a tool                      may fail to write them; remove it (the next command starts it afresh) if                      that happens",
                    other.display()
                );
            }
        }
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
        // A fresh home every run, with only the caches carried (decision 0068).
        .keep(hands_sandbox::profiles::home_carried().map(PathBuf::from))
        .limits(cfg.limits.clone());
        let base = pinned.into_iter().fold(base, |b, (path, id)| b.seen(path, id));
        let exe = std::env::current_exe().context("cannot find the hands binary to re-run")?;
        let sessions = sessions::Sessions::new(&state, &m.name, &path)?;
        let writable: Vec<PathBuf> = resolver
            .roots()
            .iter()
            .filter(|r| r.writable())
            .map(|r| r.path().to_path_buf())
            .collect();
        let census = sessions.clone();
        still.set_shell(writable, Box::new(move || census.live()));
        let netns = if host_network {
            None
        } else {
            // One loopback per set of roots (decision 0105) and client (0106): another
            // project's, or another client's, servers and debug ports are not its to reach.
            let name = format!("{}-{key}", m.name);
            Some(netns::Netns::new(&exe, &state.join("netns"), &name)?)
        };
        Ok(Shell {
            hidden,
            pins: crate::pins::Pins::load(&cfg.policy, &cfg.tools, &path),
            path,
            policy: cfg.policy.clone(),
            os_tools: cfg.tools.clone(),
            run_output_chars: cfg.run_output_chars,
            masks: Arc::new(masks::Masks::new(
                &m.roots,
                resolver.clone(),
                home.clone(),
                cfg.walk_entries,
            )),
            halt: tokio::sync::watch::channel(false).0,
            running: Default::default(),
            ready: Default::default(),
            ready_tmux: Default::default(),
            resolver,
            state_dir: state.clone(),
            state_id,
            base,
            output_chars: cfg.output_chars,
            slots: Arc::new(Semaphore::new(cfg.max_concurrent)),
            launcher: launcher::launcher_binary(&exe),
            exe,
            enforce,
            roots: m.roots.iter().map(|r| r.path.clone()).collect(),
            probe: std::sync::OnceLock::new(),
            netns,
            diags: sockets::Diags::default(),
            network,
            tmux: sessions,
            keep_sessions: cfg.keep_sessions,
            still,
            session_walls: Mutex::default(),
            answer_cap,
            _sweeper: launcher::bounds::Sweeper::new(bound.bound.clone()),
            bound,
            run_as,
            without_namespaces: Default::default(),
            bare_home: std::sync::OnceLock::new(),
        })
    }

    /// The absolute folders of the commands' `path`, by their real names (a `needs.write` may
    /// not name one: decision 0068).
    pub fn path_folders(&self) -> Vec<PathBuf> {
        self.path
            .split(':')
            .filter(|d| Path::new(d).is_absolute())
            .filter_map(|d| std::fs::canonicalize(d).ok())
            .collect()
    }

    /// The binary every command starts through (`hands-sandbox`, or `hands __sandbox`).
    pub fn launcher(&self) -> &std::path::Path {
        &self.launcher
    }

    /// The commands running now, oldest first.
    pub fn running(&self) -> Vec<crate::running::RunningCommand> {
        self.running.running()
    }

    /// Stops one running command and its whole process tree (TERM, grace, KILL) and waits,
    /// bounded, until it has ended; its command line, or `None` when no such command runs.
    pub async fn stop_command(&self, id: u64) -> Option<String> {
        self.running.stop(id, GRACE + DRAIN + Duration::from_secs(1)).await
    }

    /// The brake: ends every running command and tmux session of the module now (TERM, grace,
    /// KILL, as a timeout does), refuses new ones until [`Shell::release`], and returns how many
    /// commands were running or queued plus how many sessions ended. Waits, bounded, until they
    /// have ended.
    pub async fn stop_all(&self) -> usize {
        let running = self.halt.receiver_count();
        self.halt.send_replace(true);
        tokio::join!(self.ready.end(), self.ready_tmux.end());
        let sessions = self.tmux_kill_all().await;
        let until = Instant::now() + GRACE + DRAIN + Duration::from_secs(1);
        while self.halt.receiver_count() > 0 && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        running + sessions
    }

    /// The daemon is ending (its client has gone): unless `keep_sessions`, the tmux sessions
    /// it holds end now, gracefully (TERM, grace, KILL) — those it started, and kept ones it
    /// adopted; a session another live daemon started is that daemon's. Each session's launcher
    /// also dies with the daemon that started it (its parent-death signal), so a daemon killed
    /// outright leaves none either. Returns how many ended.
    pub async fn shutdown(&self) -> usize {
        tokio::join!(self.ready.end(), self.ready_tmux.end());
        if self.keep_sessions { 0 } else { self.tmux_end_own().await }
    }

    /// Keeps the network namespace holder of the session's client while a kept session lives,
    /// so that client's commands under a later daemon share the session's loopback.
    pub(crate) fn keep_loopback_for(&self, session: netns::Process, client: &str) {
        if let Some(n) = &self.netns
            && let Err(e) = n.keep_for(&client_key(client), session)
        {
            tracing::warn!("a kept tmux session may lose its loopback with the daemon: {e:#}");
        }
    }

    /// Lifts the brake: commands run again.
    pub fn release(&self) {
        self.ready.resume();
        self.ready_tmux.resume();
        self.halt.send_replace(false);
    }

    /// The brake's refusal while `hands stop` holds. Read *after* a start has registered
    /// itself (a command's halt receiver, a session's record), it makes the brake atomic with
    /// the start: `stop_all` turns the brake on before it looks for what to end.
    pub(crate) fn refuse_when_braked(&self) -> Result<(), ShellError> {
        if *self.halt.borrow() { Err(ShellError::Braked) } else { Ok(()) }
    }
}

/// Runs `f`, a few system calls of work that must not hold up the daemon's other calls: on a
/// one-thread runtime (a stdio daemon: one client) in place, since a hop to tokio's blocking
/// threads costs two wake-ups across threads, each a halted CPU woken on an idle machine
/// (issue 34: tens of microseconds in a VM); on a multi-thread runtime (HTTP, many clients) on
/// those threads. A panic is the caller's error either way, never the runtime's end.
pub async fn briefly<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Unfinished> {
    if on_one_thread() {
        return std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
            .map_err(|_| Unfinished::Panicked);
    }
    Ok(tokio::task::spawn_blocking(f).await?)
}

/// A short, stable name for a set of roots (their real paths and whether each is writable):
/// the folder of the sandbox home its commands share.
fn roots_key(roots: &[hands_roots::Root]) -> String {
    use sha2::{Digest, Sha256};
    let mut lines: Vec<Vec<u8>> = roots
        .iter()
        .map(|r| {
            use std::os::unix::ffi::OsStrExt;
            let mut l = r.path().as_os_str().as_bytes().to_vec();
            l.extend_from_slice(if r.writable() { b"\0rw\n" } else { b"\0ro\n" });
            l
        })
        .collect();
    lines.sort();
    let digest = Sha256::digest(lines.concat());
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// A short, stable name for a client's identity (`stdio`, a configured name, an OAuth
/// identity, `runner:<agent>`): its network namespace's (decision 0106). A digest, so that no
/// identity an issuer hands out can choose another's name.
fn client_key(client: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(client.as_bytes());
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// Whether the caller runs on a one-thread tokio runtime (a stdio daemon: one client), where
/// short work is done in place rather than on the blocking threads.
pub fn on_one_thread() -> bool {
    tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::CurrentThread)
}

/// Why work handed to [`briefly`] (or to tokio's blocking threads) gave no result.
#[derive(Debug, thiserror::Error)]
pub enum Unfinished {
    #[error("it panicked")]
    Panicked,
    #[error("its thread ended without a result: {0}")]
    Lost(#[from] tokio::task::JoinError),
}
