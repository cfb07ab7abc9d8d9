//! The MCP server: one [`Daemon`] (config, pinned roots, the tool catalogue) shared by every
//! connection, and [`HandsServer`], the rmcp handler that lists tools and dispatches calls
//! through the trust policy to the module crates.

use crate::config::{
    ActionClass, Config, GitConfig, Grant, ModuleCfg, ModuleId, ModuleSettings,
};
use crate::errors::{
    ALLOW_REMEDY, Answer, ToolFailure, internal_failure, invalid_arguments, module_error, refused,
    shell_refusal, tool_error, unknown_tool,
};
use crate::gate::{Asker, Call, Refusal, Retry, Verdict};
use crate::tools::{ToolDef, ToolKind};
use hands_fs::ToolText;
use hands_git::{Git, GitSettings, PushSettings};
use hands_roots::{Policy, PolicyLists, Resolver, RootSpec};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::Mutex;

/// Test-only: the conformance suite's scenario tools, gated like every other tool.
#[cfg(feature = "conformance-tools")]
#[path = "conformance_tools.rs"]
mod conformance_tools;

/// Everything a connection needs, built once at startup.
pub struct Daemon {
    pub config: Config,
    fs: Option<Arc<Resolver>>,
    git: Option<Arc<Git>>,
    shell: Option<Arc<crate::shell::Shell>>,
    tools: Vec<ToolDef>,
    audit: Arc<crate::audit::Audit>,
    /// `hands stop` is in effect: external-class calls are refused until `--release`.
    /// The brake; shared with tools-git, whose push reads it before it sends.
    stopped: Arc<std::sync::atomic::AtomicBool>,
    /// *Session* permissions of stateless (2026-07-28) HTTP clients, which have no connection
    /// to hold them: (client, module, tool, epoch), kept while the daemon runs.
    stateless_sessions: Mutex<HashSet<(String, String, String, u64)>>,
    /// Asking a person, and the standing permissions (`src/approvals.rs`).
    pub approvals: Arc<crate::approvals::Approvals>,
    /// Each module's resolver, for the gate's check of denied paths before anyone is asked.
    resolvers: Vec<(ModuleId, Arc<Resolver>)>,
}

/// Builds the compiled policy shared by every module's resolver.
pub fn policy_lists(config: &Config) -> PolicyLists {
    let home = crate::config::home_dir();
    PolicyLists {
        credentials: crate::profiles::credentials()
            .map(|c| crate::config::expand_tilde(c, home.as_deref()))
            .filter(|p| p.is_absolute())
            .collect(),
        deny: config.deny.clone(),
        secret_patterns: config.secret_patterns.clone(),
        secret_exceptions: crate::profiles::secret_exceptions().map(str::to_string).collect(),
        protected: (crate::profiles::protected().map(str::to_string))
            .chain(config.protected_extra.iter().map(|e| e.trim_end_matches('/').to_string()))
            .collect(),
    }
}

/// Pins a module's roots under the shared policy lists.
fn resolver_for(m: &ModuleCfg, lists: &PolicyLists) -> anyhow::Result<Arc<Resolver>> {
    let specs: Vec<RootSpec> =
        m.roots.iter().map(|r| RootSpec { path: r.path.clone(), writable: r.writable }).collect();
    let policy = Policy::new(lists).map_err(|e| anyhow::anyhow!("sandbox.secret_patterns: {e}"))?;
    let resolver =
        Resolver::new(&specs, policy).map_err(|e| anyhow::anyhow!("{}: {e}", m.id.name()))?;
    Ok(Arc::new(resolver))
}

fn git_settings(m: &ModuleCfg, cfg: &GitConfig, state_dir: &Path) -> GitSettings {
    let author = match (&cfg.author_name, &cfg.author_email) {
        (Some(n), Some(e)) => Some((n.clone(), e.clone())),
        _ => None,
    };
    let push = cfg.push.as_ref().map(|p| {
        let d = PushSettings::default();
        PushSettings {
            remote: p.remote.clone().unwrap_or(d.remote),
            branches: p.branches.clone().unwrap_or(d.branches),
            ssh_auth_sock: setting_path(p.ssh_auth_sock.as_deref()),
            known_hosts: setting_path(p.known_hosts.as_deref()),
            urls: p.urls.as_ref().map(|list| list.iter().map(|u| push_url(u)).collect()),
        }
    });
    GitSettings {
        author,
        push,
        network: m.has(Grant::Network),
        // Trust on first use records host keys here; a relative state dir is not used for it.
        state_dir: state_dir.is_absolute().then(|| state_dir.to_path_buf()),
    }
}

/// A `push.urls` entry with a leading `~` expanded (URLs pass as they are).
fn push_url(u: &str) -> String {
    if !u.starts_with('~') {
        return u.to_string();
    }
    let home = crate::config::home_dir();
    crate::config::expand_tilde(u, home.as_deref()).to_string_lossy().into_owned()
}

/// A path-valued setting: empty = unset, `~` expanded.
fn setting_path(value: Option<&str>) -> Option<PathBuf> {
    let home = crate::config::home_dir();
    value.filter(|v| !v.is_empty()).map(|v| crate::config::expand_tilde(v, home.as_deref()))
}

/// The configured `push.ssh_auth_sock` of tools-git, `~` expanded. libssh2 finds the
/// ssh-agent only through `SSH_AUTH_SOCK`, so `main` exports this before any thread starts.
pub fn git_agent_socket(config: &Config) -> Option<PathBuf> {
    config.modules.iter().find_map(|m| match &m.settings {
        ModuleSettings::Git(cfg) => {
            cfg.push.as_ref().and_then(|p| setting_path(p.ssh_auth_sock.as_deref()))
        }
        _ => None,
    })
}

impl Daemon {
    /// Pins every declared module's roots and assembles the tool catalogue, for serving: the
    /// sandbox's placeholders are made in the roots.
    pub fn new(config: Config) -> anyhow::Result<Daemon> {
        Daemon::build(config, true)
    }

    /// The same daemon for `hands check` and `doctor`: nothing is made in the roots (the report
    /// lists the placeholders `serve` would make).
    pub fn inspect(config: Config) -> anyhow::Result<Daemon> {
        Daemon::build(config, false)
    }

    fn build(config: Config, make_placeholders: bool) -> anyhow::Result<Daemon> {
        refuse_state_dir_in_roots(&config)?;
        let lists = policy_lists(&config);
        let mut fs = None;
        let mut git = None;
        let mut shell = None;
        let stopped = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut tools = Vec::new();
        let mut resolvers = Vec::new();
        for m in &config.modules {
            let resolver = resolver_for(m, &lists)?;
            resolvers.push((m.id, resolver.clone()));
            match &m.settings {
                ModuleSettings::Fs => {
                    fs = Some(resolver);
                    tools.extend(crate::tools::fs_tools());
                }
                ModuleSettings::Git(cfg) => {
                    let g = Git::new(resolver, git_settings(m, cfg, &config.state_dir))
                        .map_err(|e| anyhow::anyhow!("tools-git: {e}"))?;
                    g.set_brake(stopped.clone());
                    git = Some(Arc::new(g));
                    tools.extend(crate::tools::git_tools());
                }
                ModuleSettings::Shell(cfg) => {
                    // Elsewhere than Linux nothing can contain a command, so nothing runs one
                    // (the banner and the doctor say so); files and git still work. With
                    // `bash = false` the module still runs: `run`, `os-*` and the tmux tools
                    // that only show or end sessions.
                    if cfg!(target_os = "linux") {
                        let sh = crate::shell::Shell::new(
                            m,
                            cfg,
                            config.run_as.as_deref(),
                            resolver,
                            &lists,
                            &config.state_dir,
                            &config.protected_extra,
                            config.sandbox_mode == crate::config::SandboxMode::Enforce,
                            make_placeholders,
                        )
                        .map_err(|e| anyhow::anyhow!("tools-shell: {e:#}"))?;
                        tools.extend(crate::tools::shell_tools(&crate::tools::ShellCatalogue {
                            network: m.has(Grant::Network),
                            bash: cfg.bash != Some(false),
                            run: sh.policy().admits_something(),
                            os_tools: &cfg.tools,
                        }));
                        shell = Some(Arc::new(sh));
                    }
                }
            }
        }
        #[cfg(feature = "conformance-tools")]
        tools.extend(conformance_tools::tools());
        let audit = Arc::new(crate::audit::Audit::open(&absolute(&config.state_dir))?);
        let timeout = std::time::Duration::from_secs(config.trust.approval_timeout_secs.max(1));
        let approvals =
            Arc::new(crate::approvals::Approvals::new(&absolute(&config.state_dir), timeout)?);
        if let Some(sh) = &shell {
            let module = ModuleId::Shell.name();
            sh.connect_network(crate::netgate::NetGate::new(
                module,
                approvals.clone(),
                audit.clone(),
            ));
        }
        Ok(Daemon {
            config,
            fs,
            git,
            shell,
            tools,
            audit,
            stopped,
            stateless_sessions: Default::default(),
            approvals,
            resolvers,
        })
    }

    /// The brake (`hands stop`): refuse external-class calls from now on and end every running
    /// command; returns how many were running.
    pub async fn stop(&self) -> usize {
        self.stopped.store(true, std::sync::atomic::Ordering::SeqCst);
        match &self.shell {
            Some(sh) => sh.stop_all().await,
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

    /// The *session* permissions of stateless (2026-07-28) HTTP clients.
    pub(crate) fn stateless_sessions(&self) -> &Mutex<HashSet<(String, String, String, u64)>> {
        &self.stateless_sessions
    }

    pub fn is_stopped(&self) -> bool {
        self.stopped.load(std::sync::atomic::Ordering::SeqCst)
    }

    pub fn tools(&self) -> &[ToolDef] {
        &self.tools
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

    /// Runs the sandbox self-test once, when a module runs commands.
    pub fn self_test(&self) -> Option<&crate::probe::Probe> {
        self.shell.as_ref().map(|s| s.self_test())
    }

    /// tools-shell's commands, when the module runs.
    pub fn shell(&self) -> Option<&Arc<crate::shell::Shell>> {
        self.shell.as_ref()
    }

    /// Writes one record (`hands exec`); an error says the record is missing.
    /// Whether the audit log can take a record now (see [`crate::audit::Audit::ready`]).
    pub fn audit_ready(&self) -> Result<(), String> {
        self.audit.ready()
    }

    pub async fn append_audit(&self, entry: crate::audit::Entry) -> Result<(), String> {
        let audit = self.audit.clone();
        match tokio::task::spawn_blocking(move || audit.append(&entry)).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => {
                Err(format!("cannot write the audit log {}: {e}", self.audit.path().display()))
            }
            Err(e) => {
                Err(format!("cannot write the audit log {}: {e}", self.audit.path().display()))
            }
        }
    }
}

/// The state dir holds what the daemon trusts and commands must not touch — the audit log,
/// the standing permissions, the control sockets, tmux session records — so it may not lie
/// inside a root (where the file tools and commands could rewrite it), nor contain one.
fn refuse_state_dir_in_roots(config: &Config) -> anyhow::Result<()> {
    let state = lenient_canonical(&absolute(&config.state_dir));
    for m in &config.modules {
        for r in &m.roots {
            let root = lenient_canonical(&r.path);
            if state.starts_with(&root) || root.starts_with(&state) {
                anyhow::bail!(
                    "the state dir {} lies inside the root {} of {} (or holds it): commands and \
                     file tools could rewrite the audit log and grant themselves approvals. Set \
                     [daemon] state_dir to a folder outside every root, or declare a narrower \
                     root (with no config, run hands from a project folder rather than from \
                     your home)",
                    state.display(),
                    root.display(),
                    m.id.name()
                );
            }
        }
    }
    Ok(())
}

/// The canonical form of the deepest existing ancestor, with the missing rest appended.
fn lenient_canonical(p: &Path) -> PathBuf {
    let mut missing = Vec::new();
    let mut cur = p.to_path_buf();
    loop {
        if let Ok(c) = std::fs::canonicalize(&cur) {
            return missing.iter().rev().fold(c, |acc: PathBuf, part| acc.join(part));
        }
        match (cur.file_name().map(|n| n.to_os_string()), cur.parent()) {
            (Some(name), Some(parent)) => {
                missing.push(name);
                cur = parent.to_path_buf();
            }
            _ => return p.to_path_buf(),
        }
    }
}

/// A relative state dir is taken from the current folder, as tools-shell does.
pub fn absolute(p: &Path) -> PathBuf {
    if p.is_absolute() {
        return p.to_path_buf();
    }
    std::env::current_dir().map(|c| c.join(p)).unwrap_or_else(|_| p.to_path_buf())
}

/// The rmcp handler of one connection.
#[derive(Clone)]
pub struct HandsServer {
    daemon: Arc<Daemon>,
    /// Who is connected: `stdio`, or the `name` of an HTTP client's token. It is the identity
    /// approvals and the audit log record.
    client: Arc<str>,
    /// Standing *session* permissions of this connection: (module, tool, epoch granted in).
    session: Arc<Mutex<HashSet<(String, String, u64)>>>,
    /// Cancelled when this connection's client has gone (the stdio transport tells): its
    /// running commands die at once.
    gone: tokio_util::sync::CancellationToken,
}

impl HandsServer {
    pub fn new(daemon: Arc<Daemon>, client: &str) -> Self {
        HandsServer {
            daemon,
            client: Arc::from(client),
            session: Default::default(),
            gone: Default::default(),
        }
    }

    /// The token that ends this connection's commands when cancelled.
    pub fn gone(&self) -> tokio_util::sync::CancellationToken {
        self.gone.clone()
    }

    /// The connected client's identity (`stdio` or an HTTP client's configured name).
    pub fn client(&self) -> &str {
        &self.client
    }

    /// The gate, the call, and its audit record (SPEC §8): every write- and external-class
    /// call and every call that does not succeed is recorded and fsynced before its result is
    /// returned; a read-class success is not recorded.
    async fn audited(
        &self,
        def: &ToolDef,
        args: JsonObject,
        retry: Retry,
        ctx: &RequestContext<RoleServer>,
    ) -> CallToolResponse {
        let mut arguments = serde_json::Value::Object(args.clone());
        // `run` and `os-*`: SPEC §4.4's policy before the trust gate; the record and the
        // person's question carry the full argv and the binary it resolved to.
        let program = match def.kind {
            ToolKind::Run | ToolKind::OsTool(_) => Some(self.program(def, args.clone())),
            _ => None,
        };
        // A command that cannot run (a wall missing in `enforce`) is refused before anyone is
        // asked to approve it (SPEC §5.2).
        let cannot_run = match def.kind {
            ToolKind::Bash | ToolKind::TmuxStart | ToolKind::Run | ToolKind::OsTool(_) => {
                self.daemon.shell().and_then(|sh| sh.cannot_run())
            }
            _ => None,
        };
        let mut confirm = false;
        let before = match (&program, cannot_run) {
            (_, Some(crate::shell::Refusal(msg))) => Some(Refusal::new(
                def.tool.name.as_ref(),
                "sandbox",
                msg,
                "a person fixes the missing wall as `hands doctor` says, or sets \
                 sandbox.mode = \"best-effort\"",
            )),
            (Some(Err((argv, msg))), None) => {
                if let (Some(argv), Some(a)) = (argv, arguments.as_object_mut()) {
                    a.insert("argv".into(), serde_json::json!(argv));
                }
                let what = argv.as_ref().map(|a| hands_shell::allow::show(a));
                let what = what.as_deref().unwrap_or(def.tool.name.as_ref());
                Some(Refusal::new(what, "allowlist", msg.clone(), ALLOW_REMEDY))
            }
            (Some(Ok(run)), None) => {
                if let Some(a) = arguments.as_object_mut() {
                    a.insert("argv".into(), serde_json::json!(run.checked.argv));
                    a.insert("binary".into(), serde_json::json!(run.checked.program));
                }
                confirm = run.checked.confirm;
                None
            }
            (None, None) => None,
        };
        let call = Call {
            tool: def.tool.name.as_ref(),
            module: def.module,
            class: def.class,
            arguments: &arguments,
            confirm,
        };
        let asker = Asker { daemon: &self.daemon, client: self.client(), session: &self.session };
        let verdict = match crate::gate::decide(&asker, &call, before, retry, ctx).await {
            // Not decided yet: the client asks its person and retries.
            Verdict::Ask(input) => return CallToolResponse::InputRequired(input),
            decided => decided,
        };
        let answer = match (&verdict, program) {
            (Verdict::Ask(_), _) => return tool_error("the gate has not decided".into()).into(),
            (Verdict::Deny { why, .. }, _) => Answer {
                result: refused(why.message.clone(), vec![why.denial.clone()]),
                refused: true,
            },
            (Verdict::Allow { .. }, Some(Ok(run))) => Answer::plain(match self.daemon.shell().cloned() {
                Some(sh) => shaped(
                    sh.run_program(
                        &run.checked,
                        run.cwd,
                        run.timeout_secs,
                        crate::shell::Caller::of(ctx, &self.gone),
                        None,
                    )
                    .await,
                    &def.tool.name,
                ),
                None => tool_error(format!("`{}` is not available", def.tool.name)),
            }),
            (Verdict::Allow { .. }, _) => self.dispatch(def, args, ctx).await,
        };
        let Answer { result, refused } = answer;
        let Some((decision, decided_by)) = verdict.recorded() else { return result.into() };
        let failed = result.is_error == Some(true);
        if def.class == ActionClass::Read && !failed {
            return result.into();
        }
        let first_line = |r: &CallToolResult| {
            let text: String = r
                .content
                .iter()
                .filter_map(|c| c.as_text())
                .map(|t| t.text.as_str())
                .collect::<Vec<_>>()
                .join("\n");
            text.lines().next().unwrap_or("").to_string()
        };
        // The gate's refusal in full; a module's refusal (its error's own `is_refusal`) and a
        // plain failure by their first line.
        let outcome = match (&verdict, refused, failed) {
            (Verdict::Deny { why, .. }, _, _) => format!("refused: {}", why.message),
            (_, true, _) => format!("refused: {}", first_line(&result)),
            (_, false, true) => format!("error: {}", first_line(&result)),
            (_, false, false) => "ok".to_string(),
        };
        let entry = crate::audit::Entry {
            client: self.client().to_string(),
            module: def.module.name().to_string(),
            tool: def.tool.name.to_string(),
            class: def.class.to_string(),
            arguments,
            decision,
            decided_by,
            outcome,
            result: result.structured_content.as_ref().and_then(crate::audit::facts),
        };
        let audit = self.daemon.audit.clone();
        let written = tokio::task::spawn_blocking(move || audit.append(&entry)).await;
        match written {
            Ok(Ok(_)) => result,
            Ok(Err(e)) => self.unaudited(def, &result, &e.to_string()),
            Err(e) => self.unaudited(def, &result, &e.to_string()),
        }
        .into()
    }

    /// The parsed call of `run` or an `os-*` tool, checked by the policy and resolved on PATH;
    /// or why it is refused (with the argv, when there is one).
    fn program(
        &self,
        def: &ToolDef,
        args: JsonObject,
    ) -> Result<Program, (Option<Vec<String>>, String)> {
        let name = def.tool.name.as_ref();
        let Some(sh) = self.daemon.shell.as_ref() else {
            return Err((
                None,
                format!("`{name}` is not available: tools-shell does not run here"),
            ));
        };
        let bad = |e: CallToolResult| (None, text_of(&e));
        let (argv, cwd, timeout_secs) = match def.kind {
            ToolKind::OsTool(i) => {
                let p: hands_shell::run::OsToolParams = parse(args, name).map_err(bad)?;
                let argv = sh
                    .os_argv(i, &p.args)
                    .ok_or_else(|| (None, format!("`{name}` has no entry")))?;
                (argv, p.cwd, p.timeout_secs)
            }
            _ => {
                let p: hands_shell::run::RunParams = parse(args, name).map_err(bad)?;
                (p.argv, p.cwd, p.timeout_secs)
            }
        };
        match sh.check(&argv) {
            Ok(checked) => Ok(Program { checked, cwd, timeout_secs }),
            Err(crate::shell::Refusal(msg)) => Err((Some(argv), msg)),
        }
    }

    /// The call happened (or was refused) but its record could not be written: the client
    /// learns both, and the daemon's log says so.
    fn unaudited(&self, def: &ToolDef, result: &CallToolResult, why: &str) -> CallToolResult {
        let path = self.daemon.audit.path().display().to_string();
        tracing::error!(tool = %def.tool.name, "cannot write the audit log {path}: {why}");
        let mut content = result.content.clone();
        content.push(ContentBlock::text(format!(
            "hands could not write this call's audit record to {path} ({why}); the result above \
             stands, but a person should fix the audit log (disk space, permissions)"
        )));
        CallToolResult::error(content)
    }

    async fn dispatch(
        &self,
        def: &ToolDef,
        args: JsonObject,
        ctx: &RequestContext<RoleServer>,
    ) -> Answer {
        let missing = || {
            Answer::plain(tool_error(format!(
                "`{}` is not available: its module is not declared",
                def.tool.name
            )))
        };
        let fs = self.daemon.fs.clone();
        let git = self.daemon.git.clone();
        use ToolKind as K;
        match def.kind {
            K::Bash => {
                let Some(sh) = self.daemon.shell().cloned() else { return missing() };
                let params: hands_shell::bash::BashParams = match parse(args, "bash") {
                    Ok(p) => p,
                    Err(e) => return Answer::plain(e),
                };
                Answer::plain(shaped(
                    sh.bash(params, crate::shell::Caller::of(ctx, &self.gone)).await,
                    "bash",
                ))
            }
            K::TmuxStart | K::TmuxRead | K::TmuxSend | K::TmuxList | K::TmuxKill => {
                let Some(sh) = self.daemon.shell().cloned() else { return missing() };
                let name = def.tool.name.as_ref();
                Answer::plain(match def.kind {
                    K::TmuxStart => match parse(args, name) {
                        Ok(p) => shaped(
                            sh.tmux_start(p, crate::shell::Caller::of(ctx, &self.gone)).await,
                            name,
                        ),
                        Err(e) => e,
                    },
                    K::TmuxRead => match parse(args, name) {
                        Ok(p) => shaped(sh.tmux_read(p).await, name),
                        Err(e) => e,
                    },
                    K::TmuxSend => match parse(args, name) {
                        Ok(p) => shaped(
                            sh.tmux_send(p, crate::shell::Caller::of(ctx, &self.gone)).await,
                            name,
                        ),
                        Err(e) => e,
                    },
                    K::TmuxList => match parse(args, name) {
                        Ok(p) => shaped(sh.tmux_list(p).await, name),
                        Err(e) => e,
                    },
                    _ => match parse(args, name) {
                        Ok(p) => shaped(sh.tmux_kill(p).await, name),
                        Err(e) => e,
                    },
                })
            }
            K::Run | K::OsTool(_) => Answer::plain(tool_error(format!(
                "`{}` runs through the allowlist, not here",
                def.tool.name
            ))),
            K::Read | K::Write | K::Edit | K::ListDir | K::Glob | K::Grep => {
                let Some(r) = fs else { return missing() };
                match def.kind {
                    K::Read => {
                        let (small, whole) = (hands_fs::read::read_within, hands_fs::read::read);
                        run_small(r, args, "read", small, whole, ToolText::text).await
                    }
                    K::Write => run(r, args, "write", hands_fs::write::write, ToolText::text).await,
                    K::Edit => run(r, args, "edit", hands_fs::edit::edit, ToolText::text).await,
                    K::ListDir => {
                        let small = hands_fs::list::list_dir_within;
                        let whole = hands_fs::list::list_dir;
                        run_small(r, args, "list_dir", small, whole, ToolText::text).await
                    }
                    K::Glob => run(r, args, "glob", hands_fs::search::glob, ToolText::text).await,
                    _ => run(r, args, "grep", hands_fs::search::grep, ToolText::text).await,
                }
            }
            _ => {
                let Some(g) = git else { return missing() };
                let name = def.tool.name.to_string();
                match def.kind {
                    K::GitStatus => run(g, args, "git_status", Git::status, show).await,
                    K::GitDiff => run(g, args, "git_diff", Git::diff, show).await,
                    K::GitLog => run(g, args, "git_log", Git::log, show).await,
                    K::GitBranches => run(g, args, "git_branches", Git::branches, show).await,
                    K::GitBranch => run(g, args, "git_branch", Git::branch, show).await,
                    K::GitSwitch => run(g, args, "git_switch", Git::switch, show).await,
                    K::GitCommit => run(g, args, "git_commit", Git::commit, show).await,
                    K::GitBranchCommits => {
                        run(g, args, "git_branch_commits", Git::branch_commits, show).await
                    }
                    K::GitWorktreeAdd => {
                        run(g, args, "git_worktree_add", Git::worktree_add, show).await
                    }
                    K::GitPush => run(g, args, "git_push", Git::push, show).await,
                    _ => Answer::plain(tool_error(format!("`{name}` has no implementation"))),
                }
            }
        }
    }
}

/// A `run`/`os-*` call that passed the policy.
struct Program {
    checked: crate::shell::Checked,
    cwd: Option<String>,
    timeout_secs: Option<u64>,
}

fn text_of(r: &CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text())
        .map(|t| t.text.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The text mirror of an output that renders itself with `Display`.
fn show<O: std::fmt::Display>(o: &O) -> String {
    o.to_string()
}

/// Parses a tool's arguments, or the tool error that says what is wrong with them.
fn parse<P: DeserializeOwned>(args: JsonObject, name: &str) -> Result<P, CallToolResult> {
    serde_json::from_value(serde_json::Value::Object(args)).map_err(|e| invalid_arguments(name, &e))
}

/// A tools-shell result: structured content plus its text mirror, or the refusal as a tool
/// error.
fn shaped<O: Serialize + std::fmt::Display>(
    r: Result<O, crate::shell::Refusal>,
    name: &str,
) -> CallToolResult {
    match r {
        Ok(out) => structured(&out, out.to_string(), name),
        Err(crate::shell::Refusal(msg)) => shell_refusal(msg, name),
    }
}

/// A successful result: structured content plus its text mirror.
fn structured<O: Serialize>(out: &O, text: String, name: &str) -> CallToolResult {
    match serde_json::to_value(out) {
        Ok(v) => {
            let mut r = CallToolResult::success(vec![ContentBlock::text(text)]);
            r.structured_content = Some(v);
            r
        }
        Err(e) => tool_error(format!("`{name}` produced a result that cannot be encoded: {e}")),
    }
}

/// Parses the arguments, runs a module function on a blocking thread and shapes its result:
/// structured content plus its text mirror, or a tool error carrying the module's message.
async fn run<S, P, O, E>(
    state: Arc<S>,
    args: JsonObject,
    name: &'static str,
    f: fn(&S, P) -> Result<O, E>,
    text: fn(&O) -> String,
) -> Answer
where
    S: Send + Sync + 'static,
    P: DeserializeOwned + Send + 'static,
    O: Serialize + Send + 'static,
    E: ToolFailure + Send + 'static,
{
    match parse(args, name) {
        Ok(params) => on_pool(state, params, name, f, text).await,
        Err(e) => Answer::plain(e),
    }
}

/// A module function that stops with `None` when its target is over the given size cap.
type Capped<S, P, O, E> = fn(&S, P, Option<u64>) -> Result<Option<O>, E>;

/// `run` for `read` and `list_dir`, whose calls are mostly small. On the stdio daemon's one
/// runtime thread the call is first tried right there with `small`, capped at
/// [`hands_fs::INLINE_CAP`] bytes: a small call takes tens of microseconds, about what the hop
/// to a blocking thread and back costs. Over the cap it stops right after opening, and `whole`
/// runs on the blocking pool like every other call, so a large file or folder cannot hold up
/// the client's other calls. Over HTTP (many clients, a worker per core) the pool serves every
/// call.
async fn run_small<S, P, O, E>(
    state: Arc<S>,
    args: JsonObject,
    name: &'static str,
    small: Capped<S, P, O, E>,
    whole: fn(&S, P) -> Result<O, E>,
    text: fn(&O) -> String,
) -> Answer
where
    S: Send + Sync + 'static,
    P: DeserializeOwned + Clone + Send + 'static,
    O: Serialize + Send + 'static,
    E: ToolFailure + Send + 'static,
{
    let params: P = match parse(args, name) {
        Ok(p) => p,
        Err(e) => return Answer::plain(e),
    };
    let one_thread = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::CurrentThread);
    if one_thread {
        let inline = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            small(&state, params.clone(), Some(hands_fs::INLINE_CAP))
        }));
        match inline {
            Ok(Ok(Some(out))) => return Answer::plain(structured(&out, text(&out), name)),
            Ok(Ok(None)) => {}
            Ok(Err(e)) => return module_error(&e),
            Err(_) => return Answer::plain(internal_failure(name, "it panicked")),
        }
    }
    on_pool(state, params, name, whole, text).await
}

/// Runs `f` on a blocking thread and shapes its result: structured content plus its text
/// mirror, or a tool error carrying the module's message.
async fn on_pool<S, P, O, E>(
    state: Arc<S>,
    params: P,
    name: &'static str,
    f: fn(&S, P) -> Result<O, E>,
    text: fn(&O) -> String,
) -> Answer
where
    S: Send + Sync + 'static,
    P: Send + 'static,
    O: Serialize + Send + 'static,
    E: ToolFailure + Send + 'static,
{
    let joined = tokio::task::spawn_blocking(move || f(&state, params)).await;
    match joined {
        Ok(Ok(out)) => Answer::plain(structured(&out, text(&out), name)),
        Ok(Err(e)) => module_error(&e),
        Err(e) => Answer::plain(internal_failure(name, &e.to_string())),
    }
}

impl ServerHandler for HandsServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(
                Implementation::new("hands", env!("CARGO_PKG_VERSION"))
                    .with_title("hands — confined files, shell and git for coding agents"),
            )
            .with_instructions(
                "Tools act only beneath the roots the person declared; paths may be absolute \
                 (under a root) or relative to the first root. Refusals say why and what to do.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(
            self.daemon.tools.iter().map(|d| d.tool.clone()).collect(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let Some(def) = self.daemon.tools.iter().find(|d| d.tool.name == request.name) else {
            return Err(unknown_tool(request.name.as_ref()));
        };
        #[cfg(feature = "conformance-tools")]
        if def.kind == ToolKind::Conformance {
            let def = def.clone();
            return self.conformance(&def, request, &context).await;
        }
        let retry = Retry { state: request.request_state, responses: request.input_responses };
        let args = request.arguments.unwrap_or_default();
        // Commands this call runs are shown on the dashboard under the client's name.
        let call = self.audited(def, args, retry, &context);
        // A command's network question may go to this client while the call waits (netgate.rs).
        let call =
            crate::netgate::CLIENT_ASKS.scope(crate::netgate::client_channel(&context), call);
        Ok(crate::shell::CLIENT.scope(self.client().to_string(), call).await)
    }
}
