//! The [`Daemon`]: everything built once at startup and shared by every connection — the
//! config, each module's pinned roots, the tool registry, the audit log, the approvals, the
//! brake.

pub use crate::config::absolute;
use crate::config::{ActionClass, Config, Grant, ModuleCfg, ModuleId, ModuleSettings};
use crate::registry::{Entry, Registrar};
use hands_git::{Git, GitSettings};
use hands_roots::{Policy, PolicyLists, Resolver, RootSpec, Trust};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Everything a connection needs, built once at startup.
pub struct Daemon {
    pub config: Config,
    shell: Option<Arc<crate::shell_mcp::Shell>>,
    /// The tool registry: every published tool with its handler, in `tools/list` order.
    tools: Vec<Entry>,
    pub(crate) audit: Arc<crate::audit::Audit>,
    /// `hands stop` is in effect: external-class calls are refused until `--release`.
    /// The brake; shared with tools-git, whose push reads it before it sends.
    stopped: Arc<std::sync::atomic::AtomicBool>,
    /// tools-git's pushes in flight, which the brake waits for.
    pushes: Vec<Arc<hands_git::InFlight>>,
    /// *Session* permissions of stateless (2026-07-28) HTTP clients, which have no connection
    /// to hold them: (client, module, tool, epoch), kept while the daemon runs.
    stateless_sessions: Mutex<HashSet<(String, String, String, u64)>>,
    /// Asking a person, and the standing permissions (`src/gate/approvals.rs`).
    pub approvals: Arc<crate::gate::approvals::Approvals>,
    /// Each module's resolver, for the gate's check of denied paths before anyone is asked.
    resolvers: Vec<(ModuleId, Arc<Resolver>)>,
    /// The policy lists every resolver was built from ([`policy_lists`]).
    lists: PolicyLists,
    /// tools-shell's network gate, when its commands reach the network through the proxy: a
    /// call's `Caller` registers its client there while a command of the call waits.
    netgate: Option<Arc<crate::netgate::NetGate>>,
}

/// Builds the compiled policy shared by every module's resolver.
pub fn policy_lists(config: &Config) -> PolicyLists {
    let home = crate::config::home_dir();
    PolicyLists {
        credentials: hands_sandbox::profiles::credentials()
            .map(|c| crate::config::expand_tilde(c, home.as_deref()))
            .filter(|p| p.is_absolute())
            .collect(),
        deny: config.deny.clone(),
        secret_patterns: config.secret_patterns.clone(),
        secret_exceptions: hands_sandbox::profiles::secret_exceptions()
            .map(str::to_string)
            .collect(),
        protected: (hands_sandbox::profiles::protected().map(str::to_string))
            .chain(config.protected_extra.iter().map(|e| e.trim_end_matches('/').to_string()))
            .collect(),
        host_paths: crate::config::trusted::paths(config),
    }
}

/// Pins a module's roots under the shared policy lists and the shared walk of what the host
/// trusts.
fn resolver_for(
    m: &ModuleCfg,
    lists: &PolicyLists,
    trust: &Arc<Trust>,
) -> anyhow::Result<Arc<Resolver>> {
    let specs: Vec<RootSpec> =
        m.roots.iter().map(|r| RootSpec { path: r.path.clone(), writable: r.writable }).collect();
    let policy = Policy::new(lists).map_err(|e| anyhow::anyhow!("sandbox.secret_patterns: {e}"))?;
    let resolver =
        Resolver::new(&specs, policy).map_err(|e| anyhow::anyhow!("{}: {e}", m.id.name()))?;
    Ok(Arc::new(resolver.with_trust(trust.clone())))
}

/// One walk of every module's roots for what the host trusts there (git's config as git
/// resolves it, protected names' link targets), shared by every resolver: a repository in one
/// module's root can name a hooks folder or an included config in another's.
fn trust_for(config: &Config, lists: &PolicyLists) -> Arc<Trust> {
    let roots: Vec<PathBuf> = config
        .modules
        .iter()
        .flat_map(|m| &m.roots)
        .filter_map(|r| std::fs::canonicalize(&r.path).ok())
        .collect();
    // A person who raised tools-shell's walk limit has roots that large.
    let limit = config
        .modules
        .iter()
        .filter_map(|m| match &m.settings {
            ModuleSettings::Shell(s) => Some(s.walk_entries),
            _ => None,
        })
        .fold(hands_roots::trust::WALK_LIMIT, usize::max);
    Arc::new(Trust::new(&roots, lists, crate::config::home_dir(), limit))
}

fn git_settings(
    m: &ModuleCfg,
    cfg: &hands_git::settings::Settings,
    state_dir: &Path,
) -> GitSettings {
    // Trust on first use records host keys here; a relative state dir is not used for it.
    cfg.git_settings(
        m.has(Grant::Network),
        state_dir.is_absolute().then(|| state_dir.to_path_buf()),
    )
}

/// The configured `push.ssh_auth_sock` of tools-git, `~` expanded. libssh2 finds the
/// ssh-agent only through `SSH_AUTH_SOCK`, so `main` exports this before any thread starts.
pub fn git_agent_socket(config: &Config) -> Option<PathBuf> {
    config.modules.iter().find_map(|m| match &m.settings {
        ModuleSettings::Git(cfg) => cfg.push.as_ref().and_then(|p| p.ssh_auth_sock.clone()),
        _ => None,
    })
}

impl Daemon {
    /// Pins every declared module's roots and assembles the tool catalogue. Nothing is made in
    /// the roots (SPEC §3): protected names that do not exist are kept from being created by
    /// the walls themselves.
    /// `serve`, `check` and `doctor` build the same daemon, so what they report is what serves.
    pub fn new(config: Config) -> anyhow::Result<Daemon> {
        Daemon::with_tools(config, Vec::new())
    }

    /// The daemon with `extra` tools beside the modules' (the MCP conformance suite's scenario
    /// tools, `tests/conformance`): published, gated and (under `--read-only`) filtered like
    /// the rest; one named like a module's tool is refused.
    pub fn with_tools(config: Config, extra: Vec<Entry>) -> anyhow::Result<Daemon> {
        crate::config::trusted::refuse(&config).map_err(|e| anyhow::anyhow!("{e}"))?;
        let lists = policy_lists(&config);
        let trust = trust_for(&config, &lists);
        let mut shell = None;
        let stopped = Arc::new(std::sync::atomic::AtomicBool::new(false));
        // What commands may move while tools-git reads or writes a work tree (decision 0083).
        let still = Arc::new(hands_sandbox::still::Still::default());
        let mut pushes = Vec::new();
        let mut tools = Vec::new();
        let mut resolvers = Vec::new();
        for m in &config.modules {
            let resolver = resolver_for(m, &lists, &trust)?;
            resolvers.push((m.id, resolver.clone()));
            match &m.settings {
                ModuleSettings::Fs(_) => {
                    let mut registrar = Registrar::new(m.id, resolver);
                    hands_fs::catalogue::register(&mut registrar);
                    tools.extend(registrar.into_entries());
                }
                ModuleSettings::Git(cfg) => {
                    let g = Git::new(resolver, git_settings(m, cfg, &config.state_dir))
                        .map_err(|e| anyhow::anyhow!("tools-git: {e}"))?;
                    g.set_brake(stopped.clone());
                    g.set_still(still.clone());
                    pushes.push(g.pushes());
                    let push = g.push_configured();
                    let mut registrar = Registrar::new(m.id, Arc::new(g));
                    hands_git::catalogue::register(&mut registrar, push);
                    tools.extend(registrar.into_entries());
                }
                ModuleSettings::Shell(cfg) => {
                    // Elsewhere than Linux nothing can contain a command, so nothing runs one
                    // (the banner and the doctor say so); files and git still work. With
                    // `bash = false` the module still runs: `run`, `os-*` and the tmux tools
                    // that only show or end sessions.
                    if cfg!(target_os = "linux") {
                        let sh =
                            crate::shell_mcp::new(m, cfg, &config, resolver, &lists, still.clone())
                                .map_err(|e| anyhow::anyhow!("tools-shell: {e:#}"))?;
                        let sh = Arc::new(sh);
                        tools.extend(crate::shell_mcp::tools(&sh, cfg, m.has(Grant::Network)));
                        shell = Some(sh);
                    }
                }
            }
        }
        for t in extra {
            if tools.iter().any(|had| had.name() == t.name()) {
                anyhow::bail!(
                    "two tools are named `{}`: a tool added must not shadow one",
                    t.name()
                );
            }
            tools.push(t);
        }
        let audit = Arc::new(crate::audit::Audit::open(&absolute(&config.state_dir))?);
        let timeout = std::time::Duration::from_secs(config.trust.approval_timeout_secs.max(1));
        let approvals = Arc::new(crate::gate::approvals::Approvals::new(
            &absolute(&config.state_dir),
            timeout,
        )?);
        let netgate = shell.as_ref().map(|sh| {
            let module = ModuleId::Shell.name();
            let gate = crate::netgate::NetGate::new(module, approvals.clone(), audit.clone());
            sh.connect_network(gate.clone());
            gate
        });
        if config.read_only {
            tools.retain(|t| t.class == ActionClass::Read);
        }
        Ok(Daemon {
            config,
            shell,
            tools,
            audit,
            stopped,
            pushes,
            stateless_sessions: Default::default(),
            approvals,
            resolvers,
            lists,
            netgate,
        })
    }

    /// tools-shell's network gate, when the module runs.
    pub fn netgate(&self) -> Option<&Arc<crate::netgate::NetGate>> {
        self.netgate.as_ref()
    }

    /// The brake (`hands stop`): refuse external-class calls from now on and end every running
    /// command; returns how many were running.
    pub async fn stop(&self) -> usize {
        self.stopped.store(true, std::sync::atomic::Ordering::SeqCst);
        // A push past its brake check finishes before the stop answers (none lands after it);
        // one that sends for longer than a minute is not waited for.
        let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !self.pushes.iter().all(|p| p.is_idle()) && std::time::Instant::now() < until {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        match &self.shell {
            Some(sh) => sh.stop_all().await,
            None => 0,
        }
    }

    /// The daemon is ending (a stdio client has gone): the tmux sessions it holds end with it,
    /// unless tools-shell keeps them (`keep_sessions`); returns how many ended.
    pub async fn shutdown(&self) -> usize {
        match &self.shell {
            Some(sh) => sh.shutdown().await,
            None => 0,
        }
    }

    /// `hands stop --release`: external-class calls run again.
    pub fn release(&self) {
        self.stopped.store(false, std::sync::atomic::Ordering::SeqCst);
        if let Some(sh) = &self.shell {
            sh.release();
        }
    }

    /// A module's resolver, for the gate's check of denied paths before anyone is asked.
    pub fn resolver(&self, module: ModuleId) -> Option<&Arc<Resolver>> {
        self.resolvers.iter().find(|(id, _)| *id == module).map(|(_, r)| r)
    }

    /// The policy lists every module's resolver was built from.
    pub fn lists(&self) -> &PolicyLists {
        &self.lists
    }

    /// The *session* permissions of stateless (2026-07-28) HTTP clients.
    pub(crate) fn stateless_sessions(&self) -> &Mutex<HashSet<(String, String, String, u64)>> {
        &self.stateless_sessions
    }

    /// The brake itself, for the gate, which reads it before a call and after a person answered.
    pub(crate) fn brake(&self) -> &std::sync::atomic::AtomicBool {
        &self.stopped
    }

    pub fn is_stopped(&self) -> bool {
        self.stopped.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The tool registry, in `tools/list` order.
    pub fn tools(&self) -> &[Entry] {
        &self.tools
    }

    /// The published tool named `name`.
    pub fn tool(&self, name: &str) -> Option<&Entry> {
        self.tools.iter().find(|t| t.name() == name)
    }

    /// Modules that are declared but publish no tool (tools-shell elsewhere than Linux).
    pub fn unavailable_modules(&self) -> Vec<ModuleId> {
        self.config
            .modules
            .iter()
            .map(|m| m.id)
            .filter(|id| !self.tools.iter().any(|t| t.module == *id))
            .collect()
    }

    /// Runs the sandbox self-test once, when a module runs commands (waiting for it when it
    /// is running on another thread).
    pub fn self_test(&self) -> Option<&hands_sandbox::probe::Probe> {
        self.shell.as_ref().map(|s| s.self_test())
    }

    /// Whether a module runs commands, and the self-test's result once it has finished
    /// (`Some(None)` while it runs): for pages that must not wait for it.
    pub fn self_test_now(&self) -> Option<Option<&hands_sandbox::probe::Probe>> {
        self.shell.as_ref().map(|s| s.probed())
    }

    /// Where a daemon whose modules run commands runs in a container: which, and what its
    /// commands get there (decision 0071), for `hands check` and `initialize`. `None` outside
    /// a container, or with no such module.
    pub fn container_line(&self) -> Option<String> {
        self.shell.as_ref()?;
        let best_effort = self.config.sandbox_mode == crate::config::SandboxMode::BestEffort;
        hands_sandbox::container::detect().map(|c| c.summary(best_effort))
    }

    /// tools-shell's commands, when the module runs.
    pub fn shell(&self) -> Option<&Arc<crate::shell_mcp::Shell>> {
        self.shell.as_ref()
    }

    /// Whether the audit log can take a record now (see [`crate::audit::Audit::ready`]).
    pub fn audit_ready(&self) -> Result<(), crate::audit::AuditError> {
        self.audit.ready()
    }

    /// Writes one record (`hands exec`, the control socket's acts); an error says the record
    /// is missing.
    pub async fn append_audit(
        &self,
        entry: crate::audit::Entry,
    ) -> Result<(), crate::audit::AuditError> {
        use crate::audit::AuditError;
        let audit = self.audit.clone();
        let log = || self.audit.path().to_path_buf();
        let written = tokio::task::spawn_blocking(move || audit.append(&entry)).await;
        self.audit.settle_later();
        match written {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(source)) => Err(AuditError::Write { log: log(), source }),
            Err(source) => Err(AuditError::Task { log: log(), source }),
        }
    }
}
