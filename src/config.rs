//! `daemon.toml`: a raw serde shape parsed strictly, then validated into types that cannot be
//! wrong (canonical roots, parsed grants, merged trust). Errors name the file, the line, the
//! `[[builtins]]` id and the key, with a `hint:` when there is something to do.

use serde::Deserialize;
use std::fmt;
use std::path::{Path, PathBuf};
use toml::Spanned;

// tools-shell's settings are its own (modules/shell/src/settings.rs); named here as before.
pub use hands_shell::settings::{
    DEFAULT_COMMAND_PATH, NetworkMode, ShellCommands, ShellConfig, ShellLimits, ShellNetwork,
    ShellTool,
};
// `~` and the daemon's home, shared with the modules' settings (hands-roots).
pub use hands_roots::{expand_tilde, home_dir};

// ---------------------------------------------------------------------------------------------
// Raw shape: exactly what the file may say.

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    daemon: RawDaemon,
    #[serde(default)]
    server: RawServer,
    #[serde(default)]
    trust: RawTrust,
    #[serde(default)]
    sandbox: RawSandbox,
    #[serde(default)]
    builtins: Vec<Spanned<RawBuiltin>>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawDaemon {
    state_dir: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawServer {
    http: Option<Spanned<RawHttp>>,
    dashboard: Option<Spanned<RawDashboard>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHttp {
    listen: Spanned<String>,
    #[serde(default)]
    allowed_hosts: Vec<String>,
    #[serde(default)]
    clients: Vec<Spanned<RawHttpClient>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHttpClient {
    name: String,
    token_env: Option<String>,
    token_file: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDashboard {
    #[serde(default = "default_dashboard_listen")]
    listen: String,
    token_env: Option<String>,
    token_file: Option<String>,
}

fn default_dashboard_listen() -> String {
    "127.0.0.1:8766".to_string()
}

#[derive(Debug, Deserialize, Default, Clone)]
#[serde(deny_unknown_fields)]
struct RawTrust {
    read: Option<TrustAction>,
    write: Option<TrustAction>,
    external: Option<TrustAction>,
    approval_timeout_secs: Option<u64>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawSandbox {
    mode: Option<SandboxMode>,
    #[serde(default)]
    deny: Vec<Spanned<String>>,
    secret_patterns: Option<Vec<Spanned<String>>>,
    #[serde(default)]
    protected_extra: Vec<Spanned<String>>,
    /// The user a daemon run as root runs commands as (a name or a uid).
    run_as: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBuiltin {
    id: Spanned<String>,
    #[serde(default)]
    grants: Vec<Spanned<String>>,
    #[serde(default)]
    filesystem: Vec<Spanned<RawRoot>>,
    config: Option<Spanned<toml::Table>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRoot {
    path: Spanned<String>,
    #[serde(default)]
    write: bool,
}

/// The `config` table of tools-fs.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FsRawConfig {
    trust: Option<RawTrust>,
}

/// The `config` table of tools-git.
// Read by the shell and git modules as they land; validated now so files written for them check.
#[allow(dead_code)]
#[derive(Debug, Deserialize, Default, Clone)]
#[serde(deny_unknown_fields)]
pub struct GitConfig {
    pub author_name: Option<String>,
    pub author_email: Option<String>,
    pub push: Option<GitPush>,
    trust: Option<RawTrust>,
}

// Read by the shell and git modules as they land; validated now so files written for them check.
#[allow(dead_code)]
#[derive(Debug, Deserialize, Default, Clone)]
#[serde(deny_unknown_fields)]
pub struct GitPush {
    pub remote: Option<String>,
    pub branches: Option<Vec<String>>,
    pub ssh_auth_sock: Option<String>,
    pub known_hosts: Option<String>,
    /// The only remote URLs or local paths a push may go to (`~` expands).
    pub urls: Option<Vec<String>>,
}

// ---------------------------------------------------------------------------------------------
// Validated shape.

/// What a class of action does at the trust gate.
#[derive(Debug, Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum TrustAction {
    Allow,
    Ask,
    Deny,
}

impl fmt::Display for TrustAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TrustAction::Allow => "allow",
            TrustAction::Ask => "ask",
            TrustAction::Deny => "deny",
        })
    }
}

/// The action class of a tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActionClass {
    Read,
    Write,
    External,
}

impl fmt::Display for ActionClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ActionClass::Read => "read",
            ActionClass::Write => "write",
            ActionClass::External => "external",
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trust {
    pub read: TrustAction,
    pub write: TrustAction,
    pub external: TrustAction,
    pub approval_timeout_secs: u64,
}

impl Default for Trust {
    fn default() -> Self {
        Trust {
            read: TrustAction::Allow,
            write: TrustAction::Allow,
            external: TrustAction::Ask,
            approval_timeout_secs: 120,
        }
    }
}

impl Trust {
    fn overlay(&self, raw: &RawTrust) -> Trust {
        Trust {
            read: raw.read.unwrap_or(self.read),
            write: raw.write.unwrap_or(self.write),
            external: raw.external.unwrap_or(self.external),
            approval_timeout_secs: raw.approval_timeout_secs.unwrap_or(self.approval_timeout_secs),
        }
    }

    pub fn for_class(&self, class: ActionClass) -> TrustAction {
        match class {
            ActionClass::Read => self.read,
            ActionClass::Write => self.write,
            ActionClass::External => self.external,
        }
    }
}

#[derive(Debug, Deserialize, Clone, Copy, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    #[default]
    Enforce,
    BestEffort,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ModuleId {
    Fs,
    Shell,
    Git,
}

impl ModuleId {
    pub fn name(self) -> &'static str {
        match self {
            ModuleId::Fs => "tools-fs",
            ModuleId::Shell => "tools-shell",
            ModuleId::Git => "tools-git",
        }
    }

    fn parse(s: &str) -> Option<ModuleId> {
        match s {
            "tools-fs" => Some(ModuleId::Fs),
            "tools-shell" => Some(ModuleId::Shell),
            "tools-git" => Some(ModuleId::Git),
            _ => None,
        }
    }

    fn required_grants(self) -> &'static [Grant] {
        match self {
            ModuleId::Fs => &[Grant::Filesystem],
            ModuleId::Shell | ModuleId::Git => &[Grant::Filesystem, Grant::Spawn],
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Grant {
    Filesystem,
    Spawn,
    Network,
}

impl Grant {
    fn parse(s: &str) -> Option<Grant> {
        match s {
            "filesystem" => Some(Grant::Filesystem),
            "spawn" => Some(Grant::Spawn),
            "network" => Some(Grant::Network),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Grant::Filesystem => "filesystem",
            Grant::Spawn => "spawn",
            Grant::Network => "network",
        }
    }
}

/// A validated root: canonical, existing, a directory (the roots resolver's own spec type, so
/// the sandbox's mask walk takes the same value).
pub type RootCfg = hands_roots::RootSpec;

#[derive(Debug, Clone)]
// Built once at startup and read by reference: boxing the shell's settings would buy nothing.
#[allow(clippy::large_enum_variant)]
pub enum ModuleSettings {
    Fs,
    Shell(ShellConfig),
    Git(GitConfig),
}

#[derive(Debug, Clone)]
pub struct ModuleCfg {
    pub id: ModuleId,
    pub grants: Vec<Grant>,
    pub roots: Vec<RootCfg>,
    pub trust: Trust,
    pub settings: ModuleSettings,
}

impl ModuleCfg {
    pub fn has(&self, g: Grant) -> bool {
        self.grants.contains(&g)
    }
}

#[derive(Debug, Clone)]
pub struct HttpClientCfg {
    pub name: String,
    pub token_env: Option<String>,
    pub token_file: Option<PathBuf>,
}

#[derive(Debug, Clone)]
pub struct HttpCfg {
    pub listen: String,
    pub allowed_hosts: Vec<String>,
    pub clients: Vec<HttpClientCfg>,
}

#[derive(Debug, Clone)]
pub struct DashboardCfg {
    pub listen: String,
    pub token_env: Option<String>,
    pub token_file: Option<PathBuf>,
}

#[derive(Debug, Clone)]
pub struct Config {
    /// Where it came from: a file path, or the embedded default.
    pub source: String,
    pub state_dir: PathBuf,
    pub trust: Trust,
    pub sandbox_mode: SandboxMode,
    pub deny: Vec<PathBuf>,
    pub secret_patterns: Vec<String>,
    /// `[sandbox].protected_extra`: protected rules added to `sandbox-profiles/protected.txt`,
    /// as written (a trailing `/` marks a folder made empty where missing).
    pub protected_extra: Vec<String>,
    /// `sandbox.run_as`: who commands run as when the daemon is root (SPEC §5.2 item 6).
    pub run_as: Option<String>,
    pub http: Option<HttpCfg>,
    pub dashboard: Option<DashboardCfg>,
    pub modules: Vec<ModuleCfg>,
}

// ---------------------------------------------------------------------------------------------
// Errors.

/// One problem in a configuration file, located as precisely as the parser allows.
#[derive(Debug, Clone)]
pub struct ConfigProblem {
    pub line: Option<usize>,
    /// `[[builtins]] id "tools-fs"`, `[sandbox]`, …
    pub section: String,
    pub key: String,
    pub message: String,
    pub hint: Option<String>,
}

/// Every problem found in one configuration file.
#[derive(Debug, Clone)]
pub struct ConfigError {
    pub file: String,
    pub problems: Vec<ConfigProblem>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.problems.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{}", self.file)?;
            if let Some(l) = p.line {
                write!(f, ":{l}")?;
            }
            write!(f, ": ")?;
            if !p.section.is_empty() {
                write!(f, "{}: ", p.section)?;
            }
            if !p.key.is_empty() {
                write!(f, "{}: ", p.key)?;
            }
            write!(f, "{}", p.message)?;
            if let Some(h) = &p.hint {
                write!(f, "\nhint: {h}")?;
            }
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

struct Problems<'a> {
    src: &'a str,
    list: Vec<ConfigProblem>,
}

impl Problems<'_> {
    fn line_of(&self, offset: usize) -> usize {
        self.src[..offset.min(self.src.len())].matches('\n').count() + 1
    }

    fn add(
        &mut self,
        span: Option<std::ops::Range<usize>>,
        section: &str,
        key: &str,
        message: impl Into<String>,
        hint: Option<&str>,
    ) {
        let line = span.map(|s| self.line_of(s.start));
        self.list.push(ConfigProblem {
            line,
            section: section.to_string(),
            key: key.to_string(),
            message: message.into(),
            hint: hint.map(str::to_string),
        });
    }
}

// ---------------------------------------------------------------------------------------------
// Loading.

fn default_state_dir(home: Option<&Path>) -> PathBuf {
    if let Some(x) = std::env::var_os("XDG_STATE_HOME").filter(|x| !x.is_empty()) {
        return PathBuf::from(x).join("hands");
    }
    match home {
        Some(h) => h.join(".local/state/hands"),
        None => PathBuf::from("/tmp/hands-state"),
    }
}

/// Which file a subcommand uses: `--config F`, else `./daemon.toml`, else the embedded default.
pub fn locate(explicit: Option<&Path>) -> Option<PathBuf> {
    if let Some(p) = explicit {
        return Some(p.to_path_buf());
    }
    let local = PathBuf::from("daemon.toml");
    local.is_file().then_some(local)
}

/// Loads the configuration a subcommand should use.
pub fn load(explicit: Option<&Path>) -> Result<Config, ConfigError> {
    match locate(explicit) {
        Some(path) => {
            let shown = path.display().to_string();
            let src = std::fs::read_to_string(&path).map_err(|e| ConfigError {
                file: shown.clone(),
                problems: vec![ConfigProblem {
                    line: None,
                    section: String::new(),
                    key: String::new(),
                    message: format!("cannot read the file: {e}"),
                    hint: Some("pass an existing file with --config".into()),
                }],
            })?;
            parse(&src, &shown)
        }
        None => embedded_default(),
    }
}

/// The embedded default: the current directory is the one writable root of all three modules,
/// trust asks a person before external actions, commands get no network.
pub fn embedded_default() -> Result<Config, ConfigError> {
    let cwd = std::env::current_dir().and_then(std::fs::canonicalize).map_err(|e| ConfigError {
        file: "embedded default".into(),
        problems: vec![ConfigProblem {
            line: None,
            section: String::new(),
            key: String::new(),
            message: format!("cannot use the current directory as the root: {e}"),
            hint: Some("run hands from an existing directory, or pass --config".into()),
        }],
    })?;
    let home = home_dir();
    let root = vec![RootCfg { path: cwd, writable: true }];
    let trust = Trust::default();
    let module = |id, grants: &[Grant], settings| ModuleCfg {
        id,
        grants: grants.to_vec(),
        roots: root.clone(),
        trust: trust.clone(),
        settings,
    };
    Ok(Config {
        source: "embedded default".into(),
        state_dir: default_state_dir(home.as_deref()),
        trust: trust.clone(),
        sandbox_mode: SandboxMode::Enforce,
        deny: Vec::new(),
        secret_patterns: crate::profiles::secret_patterns().map(str::to_string).collect(),
        protected_extra: Vec::new(),
        run_as: None,
        http: None,
        dashboard: None,
        modules: vec![
            module(ModuleId::Fs, &[Grant::Filesystem], ModuleSettings::Fs),
            module(
                ModuleId::Shell,
                &[Grant::Filesystem, Grant::Spawn],
                ModuleSettings::Shell(ShellConfig::default()),
            ),
            module(
                ModuleId::Git,
                &[Grant::Filesystem, Grant::Spawn],
                ModuleSettings::Git(GitConfig::default()),
            ),
        ],
    })
}

/// The `[[builtins]]` id whose block contains `offset`, found by scanning the text (used to
/// name the module in errors the TOML parser reports).
fn builtin_at(src: &str, offset: usize) -> Option<String> {
    let before = &src[..offset.min(src.len())];
    let start = before.rfind("[[builtins]]")?;
    // The block ends at the next table header after it.
    let block_end = src[start + 12..].find("\n[").map(|i| start + 12 + i).unwrap_or(src.len());
    if offset > block_end {
        return None;
    }
    let block = &src[start..block_end];
    block.lines().find_map(|l| {
        let l = l.trim();
        let rest = l.strip_prefix("id")?.trim_start().strip_prefix('=')?.trim();
        Some(rest.trim_matches('"').to_string())
    })
}

/// Parses and validates a configuration text; `file` names it in errors.
pub fn parse(src: &str, file: &str) -> Result<Config, ConfigError> {
    let raw: RawConfig = toml::from_str(src).map_err(|e| {
        let line = e.span().map(|s| src[..s.start.min(src.len())].matches('\n').count() + 1);
        let section = e
            .span()
            .and_then(|s| builtin_at(src, s.start))
            .map(|id| format!("[[builtins]] id \"{id}\""))
            .unwrap_or_default();
        let msg = e.message().to_string();
        let hint = if msg.contains("unknown field") {
            Some("daemon.toml.example lists every key this version accepts".to_string())
        } else if msg.contains("unknown variant") {
            Some("check the spelling of the value against daemon.toml.example".to_string())
        } else {
            None
        };
        ConfigError {
            file: file.to_string(),
            problems: vec![ConfigProblem { line, section, key: String::new(), message: msg, hint }],
        }
    })?;
    let mut p = Problems { src, list: Vec::new() };
    let cfg = validate(raw, &mut p);
    if p.list.is_empty()
        && let Some(cfg) = cfg
    {
        return Ok(Config { source: file.to_string(), ..cfg });
    }
    Err(ConfigError { file: file.to_string(), problems: p.list })
}

fn validate(raw: RawConfig, p: &mut Problems<'_>) -> Option<Config> {
    let home = home_dir();
    let state_dir = match &raw.daemon.state_dir {
        Some(s) if s.get_ref().trim().is_empty() => {
            p.add(Some(s.span()), "[daemon]", "state_dir", "must not be empty", None);
            PathBuf::new()
        }
        Some(s) => expand_tilde(s.get_ref(), home.as_deref()),
        None => default_state_dir(home.as_deref()),
    };
    let trust = Trust::default().overlay(&raw.trust);
    if trust.approval_timeout_secs == 0 || trust.approval_timeout_secs > 3600 {
        p.add(
            None,
            "[trust]",
            "approval_timeout_secs",
            format!("{} is out of range", trust.approval_timeout_secs),
            Some("use 1 to 3600 seconds"),
        );
    }

    let deny: Vec<PathBuf> =
        raw.sandbox.deny.iter().map(|d| expand_tilde(d.get_ref(), home.as_deref())).collect();
    for d in &raw.sandbox.deny {
        if !expand_tilde(d.get_ref(), home.as_deref()).is_absolute() {
            p.add(
                Some(d.span()),
                "[sandbox]",
                "deny",
                format!("`{}` is not an absolute path", d.get_ref()),
                Some("write it as /abs/path or ~/path"),
            );
        }
    }
    let secret_patterns: Vec<String> = match &raw.sandbox.secret_patterns {
        Some(v) => {
            for s in v {
                if let Err(e) = globset::Glob::new(s.get_ref()) {
                    p.add(Some(s.span()), "[sandbox]", "secret_patterns", e.to_string(), None);
                }
            }
            v.iter().map(|s| s.get_ref().clone()).collect()
        }
        None => crate::profiles::secret_patterns().map(str::to_string).collect(),
    };

    // Protected rules match relative paths at any depth in every root, component by component.
    for e in &raw.sandbox.protected_extra {
        let rule = e.get_ref().strip_suffix('/').unwrap_or(e.get_ref());
        let bad = rule.is_empty()
            || rule.starts_with('/')
            || rule.starts_with('~')
            || rule.split('/').any(|c| c.is_empty() || c == "." || c == "..")
            || rule.contains('\0');
        if !bad && e.get_ref().ends_with('/') && rule.contains('/') {
            p.add(
                Some(e.span()),
                "[sandbox]",
                "protected_extra",
                format!("`{}`: a folder entry (ending in `/`) is one name", e.get_ref()),
                Some(
                    "a missing folder is made empty only at a root's top (\".tool/\"); protect a \
                     deeper path as a rule without the trailing `/` (\".tool/hooks\")",
                ),
            );
        }
        if bad {
            p.add(
                Some(e.span()),
                "[sandbox]",
                "protected_extra",
                format!("`{}` is not a relative path of whole components", e.get_ref()),
                Some(
                    "write it as it appears inside a root, e.g. \".tool/settings.json\", or \
                     \".tool/\" for a folder made empty where it is missing",
                ),
            );
        }
    }
    let protected_extra: Vec<String> =
        raw.sandbox.protected_extra.iter().map(|e| e.get_ref().clone()).collect();

    let http = raw.server.http.as_ref().map(|h| {
        let span = h.span();
        let h = h.get_ref();
        let mut names_seen: Vec<&str> = Vec::new();
        let clients = h
            .clients
            .iter()
            .map(|c| {
                let cs = c.span();
                let c = c.get_ref();
                // The name is the client's identity in approvals and the audit log: it must be
                // unique, and not one of the built-in identities (`stdio`, and `http` for
                // token-less loopback clients).
                let name_ok = !c.name.is_empty()
                    && c.name.len() <= 64
                    && c.name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-@".contains(&b));
                if !name_ok {
                    p.add(
                        Some(cs.clone()),
                        "[[server.http.clients]]",
                        "name",
                        format!(
                            "client name `{}` is not 1-64 letters, digits, `.`, `_`, `-`, `@`",
                            c.name
                        ),
                        Some("the name is the client's identity in approvals and the audit log"),
                    );
                } else if c.name == "stdio" || c.name == "http" {
                    p.add(
                        Some(cs.clone()),
                        "[[server.http.clients]]",
                        "name",
                        format!("client name `{}` is reserved", c.name),
                        Some("`stdio` names the stdio client, `http` a token-less loopback one"),
                    );
                } else if names_seen.contains(&c.name.as_str()) {
                    p.add(
                        Some(cs.clone()),
                        "[[server.http.clients]]",
                        "name",
                        format!("client name `{}` appears twice", c.name),
                        Some("each client needs its own name and token"),
                    );
                }
                names_seen.push(&c.name);
                if c.token_env.is_some() == c.token_file.is_some() {
                    p.add(
                        Some(cs),
                        "[[server.http.clients]]",
                        "token_env",
                        format!(
                            "client `{}` needs exactly one of token_env and token_file",
                            c.name
                        ),
                        Some("token_env = \"HANDS_TOKEN_X\" reads the token from that variable"),
                    );
                }
                HttpClientCfg {
                    name: c.name.clone(),
                    token_env: c.token_env.clone(),
                    token_file: c.token_file.as_deref().map(|f| expand_tilde(f, home.as_deref())),
                }
            })
            .collect();
        if h.listen.get_ref().parse::<std::net::SocketAddr>().is_err() {
            p.add(
                Some(h.listen.span()),
                "[server.http]",
                "listen",
                format!("`{}` is not an address:port", h.listen.get_ref()),
                Some("for example 127.0.0.1:8765"),
            );
        }
        let _ = span;
        HttpCfg {
            listen: h.listen.get_ref().clone(),
            allowed_hosts: if h.allowed_hosts.is_empty() {
                vec!["localhost".into(), "127.0.0.1".into(), "[::1]".into()]
            } else {
                h.allowed_hosts.clone()
            },
            clients,
        }
    });
    let dashboard = raw.server.dashboard.as_ref().map(|d| {
        let span = d.span();
        let d = d.get_ref();
        if d.token_env.is_some() == d.token_file.is_some() {
            p.add(
                Some(span),
                "[server.dashboard]",
                "token_env",
                "needs exactly one of token_env and token_file",
                Some("the token is the person's login to the dashboard"),
            );
        }
        DashboardCfg {
            listen: d.listen.clone(),
            token_env: d.token_env.clone(),
            token_file: d.token_file.as_deref().map(|f| expand_tilde(f, home.as_deref())),
        }
    });

    let mut modules: Vec<ModuleCfg> = Vec::new();
    for b in &raw.builtins {
        let bspan = b.span();
        let b = b.get_ref();
        let id_text = b.id.get_ref();
        let Some(id) = ModuleId::parse(id_text) else {
            p.add(
                Some(b.id.span()),
                "[[builtins]]",
                "id",
                format!("unknown module id `{id_text}`"),
                Some("the modules are tools-fs, tools-shell and tools-git"),
            );
            continue;
        };
        let section = format!("[[builtins]] id \"{id_text}\"");
        if modules.iter().any(|m| m.id == id) {
            p.add(
                Some(b.id.span()),
                &section,
                "id",
                "declared twice",
                Some("each module may appear at most once; merge the two blocks"),
            );
            continue;
        }
        let mut grants = Vec::new();
        for g in &b.grants {
            match Grant::parse(g.get_ref()) {
                Some(gr) if !grants.contains(&gr) => grants.push(gr),
                Some(_) => {}
                None => p.add(
                    Some(g.span()),
                    &section,
                    "grants",
                    format!("unknown grant `{}`", g.get_ref()),
                    Some("grants are filesystem, spawn and network"),
                ),
            }
        }
        for need in id.required_grants() {
            if !grants.contains(need) {
                p.add(
                    Some(bspan.clone()),
                    &section,
                    "grants",
                    format!("{} needs the `{}` grant", id.name(), need.name()),
                    Some(&format!("add \"{}\" to grants", need.name())),
                );
            }
        }
        let mut roots = Vec::new();
        if b.filesystem.is_empty() {
            p.add(
                Some(bspan.clone()),
                &section,
                "filesystem",
                "declares no roots",
                Some("add filesystem = [{ path = \"~/project\", write = true }]"),
            );
        }
        for (i, r) in b.filesystem.iter().enumerate() {
            let r = r.get_ref();
            let key = format!("filesystem[{i}].path");
            let raw_path = r.path.get_ref();
            let expanded = expand_tilde(raw_path, home.as_deref());
            if !expanded.is_absolute() {
                p.add(
                    Some(r.path.span()),
                    &section,
                    &key,
                    format!("`{raw_path}` is not an absolute path"),
                    Some("write roots as /abs/path or ~/path"),
                );
                continue;
            }
            match std::fs::metadata(&expanded) {
                Err(e) => p.add(
                    Some(r.path.span()),
                    &section,
                    &key,
                    format!("`{raw_path}` cannot be used as a root: {e}"),
                    Some("roots must exist before the daemon starts; create the folder or fix the path"),
                ),
                Ok(m) if !m.is_dir() => p.add(
                    Some(r.path.span()),
                    &section,
                    &key,
                    format!(
                        "`{raw_path}` is not a directory{}",
                        if r.write { " (write = true needs a folder)" } else { "" }
                    ),
                    Some("roots are folders; name the folder that contains the file"),
                ),
                Ok(_) => match std::fs::canonicalize(&expanded) {
                    Ok(c) => roots.push(RootCfg { path: c, writable: r.write }),
                    Err(e) => p.add(Some(r.path.span()), &section, &key, e.to_string(), None),
                },
            }
        }
        let settings_span = b.config.as_ref().map(|c| c.span());
        let table = b.config.as_ref().map(|c| c.get_ref().clone()).unwrap_or_default();
        let mut bad_config = |e: toml::de::Error| {
            p.add(
                settings_span.clone(),
                &section,
                "config",
                e.message().to_string(),
                Some("daemon.toml.example lists each module's config keys"),
            )
        };
        let (settings, trust_override) = match id {
            ModuleId::Fs => match toml::Value::Table(table).try_into::<FsRawConfig>() {
                Ok(c) => (ModuleSettings::Fs, c.trust),
                Err(e) => {
                    bad_config(e);
                    (ModuleSettings::Fs, None)
                }
            },
            ModuleId::Shell => match toml::Value::Table(table.clone()).try_into::<ShellConfig>() {
                // The module's table names `trust` (so the key is known); the gate reads it.
                Ok(c) => match table.get("trust").cloned().map(|t| t.try_into::<RawTrust>()) {
                    Some(Err(e)) => {
                        bad_config(e);
                        (ModuleSettings::Shell(c), None)
                    }
                    t => (ModuleSettings::Shell(c), t.and_then(Result::ok)),
                },
                Err(e) => {
                    bad_config(e);
                    (ModuleSettings::Shell(ShellConfig::default()), None)
                }
            },
            ModuleId::Git => match toml::Value::Table(table).try_into::<GitConfig>() {
                Ok(c) => {
                    let t = c.trust.clone();
                    (ModuleSettings::Git(c), t)
                }
                Err(e) => {
                    bad_config(e);
                    (ModuleSettings::Git(GitConfig::default()), None)
                }
            },
        };
        if let ModuleSettings::Shell(sh) = &settings {
            for (key, message, hint) in check_shell(sh) {
                p.add(settings_span.clone(), &section, &key, message, hint);
            }
        }
        if let ModuleSettings::Git(g) = &settings
            && g.author_name.is_some() != g.author_email.is_some()
        {
            p.add(
                settings_span.clone(),
                &section,
                "config.author_name",
                "author_name and author_email go together",
                Some("set both, or neither to use the repository's identity"),
            );
        }
        // A module overrides how its tools' classes are decided; how long a person is waited
        // for is the daemon's (one approvals queue), so a module-level value is refused rather
        // than silently ignored.
        if trust_override.as_ref().is_some_and(|t| t.approval_timeout_secs.is_some()) {
            p.add(
                settings_span.clone(),
                &section,
                "config.trust.approval_timeout_secs",
                "a module cannot set approval_timeout_secs: it is daemon-wide",
                Some("set it in the top-level [trust] table"),
            );
        }
        let trust = match &trust_override {
            Some(t) => trust.overlay(t),
            None => trust.clone(),
        };
        modules.push(ModuleCfg { id, grants, roots, trust, settings });
    }
    if raw.builtins.is_empty() {
        p.add(
            None,
            "",
            "builtins",
            "no modules are declared, so no tools would be published",
            Some("add a [[builtins]] block, e.g. id = \"tools-fs\""),
        );
    }
    modules.sort_by_key(|m| m.id);
    Some(Config {
        source: String::new(),
        state_dir,
        trust,
        sandbox_mode: raw.sandbox.mode.unwrap_or_default(),
        deny,
        secret_patterns,
        protected_extra,
        run_as: raw.sandbox.run_as.clone(),
        http,
        dashboard,
        modules,
    })
}

/// The checks of tools-shell's `commands` and `tools` that make a config invalid: entries that
/// are not names (a `/`, `.`, `..`), `*` with arguments, published names MCP would refuse.
/// (A tool whose binary `allow` does not admit, an empty description and two entries with one
/// name are `hands doctor` warnings, not errors.) Each finding: key, message, hint.
fn check_shell(sh: &ShellConfig) -> Vec<(String, String, Option<&'static str>)> {
    use hands_shell::allow;
    let mut out = Vec::new();
    if let Err(e) = sh.policy() {
        let key = e.split(':').next().unwrap_or("commands").to_string();
        out.push((
            format!("config.{key}"),
            e,
            Some("entries are binary names with optional leading arguments, e.g. \"kubectl get\", or \"*\""),
        ));
    }
    for (i, t) in sh.tools.iter().enumerate() {
        if let Err(e) = allow::tool_name(&t.bin, &t.args) {
            out.push((
                format!("config.tools[{i}]"),
                e.to_string(),
                Some("a tools entry is { bin = \"kubectl\", args = [\"get\"], description = \"...\" }"),
            ));
        }
    }
    if let Err(e) = sh.network_mode() {
        out.push(e);
    }
    if sh.run_output_chars == Some(0) {
        out.push((
            "config.run_output_chars".into(),
            "must be at least 1".into(),
            Some("the default is 8192 characters"),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(src: &str) -> String {
        match parse(src, "daemon.toml") {
            Ok(_) => panic!("expected an error"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn unknown_key_in_builtin_names_the_id_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let src = format!(
            "[[builtins]]\nid = \"tools-fs\"\ngrants = [\"filesystem\"]\nfilesystem = [{{ path = \"{}\" }}]\ncolour = 1\n",
            dir.path().display()
        );
        let e = err(&src);
        assert!(e.contains("daemon.toml:5"), "{e}");
        assert!(e.contains("tools-fs"), "{e}");
        assert!(e.contains("colour"), "{e}");
        assert!(e.contains("hint:"), "{e}");
    }

    #[test]
    fn shell_commands_and_tools_are_checked_strictly() {
        let dir = tempfile::tempdir().unwrap();
        let module = |config: &str| {
            format!(
                "[[builtins]]\nid = \"tools-shell\"\ngrants = [\"filesystem\", \"spawn\"]\n\
                 filesystem = [{{ path = \"{}\" }}]\nconfig = {{ {config} }}\n",
                dir.path().display()
            )
        };
        let e = err(&module("commands = { allow = [\"/bin/sh\"] }"));
        assert!(e.contains("config.commands.allow[0]") && e.contains("never by path"), "{e}");
        let e = err(&module("commands = { deny = [\"* x\"] }"));
        assert!(e.contains("config.commands.deny[0]"), "{e}");
        let e = err(&module("tools = [{ bin = \"kubectl\", args = [\"--context=x\"] }]"));
        assert!(e.contains("config.tools[0]") && e.contains("os-kubectl---context=x"), "{e}");
        let e = err(&module("commands = { allow = [\"rg\"], colour = 1 }"));
        assert!(e.contains("colour"), "{e}");
        let e = err(&module("tools = [{ bin = \"rg\", arg = [\"x\"] }]"));
        assert!(e.contains("arg"), "{e}");
        let ok = module(
            "bash = false, run_output_chars = 100, commands = { allow = [\"kubectl get\", \"*\"] }, \
             tools = [{ bin = \"kubectl\", args = [\"get\"], description = \"Read.\" }]",
        );
        assert!(parse(&ok, "daemon.toml").is_ok());
    }

    #[test]
    fn tilde_expands_only_at_the_start() {
        let h = Path::new("/home/x");
        assert_eq!(expand_tilde("~/a", Some(h)), PathBuf::from("/home/x/a"));
        assert_eq!(expand_tilde("~", Some(h)), PathBuf::from("/home/x"));
        assert_eq!(expand_tilde("/a/~/b", Some(h)), PathBuf::from("/a/~/b"));
        assert_eq!(expand_tilde("~user/a", Some(h)), PathBuf::from("~user/a"));
    }
}
