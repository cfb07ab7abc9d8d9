//! `daemon.toml`: a raw serde shape parsed strictly, then validated into types that cannot be
//! wrong (canonical roots, parsed grants, merged trust). Each module's `config` table is that
//! module's own schema (`hands_fs::settings`, `hands_git::settings`, `hands_shell::settings`);
//! this module reads the file, dispatches the tables and places every problem at the
//! file, the line, the `[[builtins]]` id and the key, with a `hint:` when there is something to
//! do. `load` finds and reads the file, `daemon` holds the daemon's own sections, `modules`
//! the `[[builtins]]` blocks, `trusted` what the host trusts and who could reach it.

mod daemon_sections;
mod load;
mod modules;
pub mod oauth;
mod runner;
#[cfg(test)]
mod tests;
pub mod trusted;

pub use load::{Located, embedded_default, load, locate, parse};
pub use oauth::OAuthCfg;
pub use runner::{LINK_FRAME, RunnerApprovals, RunnerCfg, TokenSource, check_url, is_link_name};
pub use trusted::path_writers;
pub use trusted::{absolute, lenient_canonical};
// tools-shell's settings are its own (modules/shell/src/settings.rs); named here as before.
pub use hands_shell::settings::{DEFAULT_COMMAND_PATH, NetworkMode, ShellSettings, ShellTool};
// `~` and the daemon's home, shared with the modules' settings (hands-roots).
pub use hands_roots::{expand_tilde, home_dir};

/// The name of the embedded default, where a file's name would be.
pub const EMBEDDED: &str = "embedded default";

/// The per-user configuration file: `$XDG_CONFIG_HOME/hands/daemon.toml` when that variable
/// names an absolute folder, else `~/.config/hands/daemon.toml`; none without a home.
pub fn user_config_file() -> Option<PathBuf> {
    let base = match std::env::var_os("XDG_CONFIG_HOME").map(PathBuf::from) {
        Some(x) if x.is_absolute() => x,
        _ => home_dir()?.join(".config"),
    };
    Some(base.join("hands").join("daemon.toml"))
}

use serde::Deserialize;
use std::fmt;
use std::path::{Path, PathBuf};

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

/// A `[trust]` table as written: the daemon's, or a module's override of it (`modules.rs`).
#[derive(Debug, Deserialize, Default, Clone)]
#[serde(deny_unknown_fields)]
struct RawTrust {
    read: Option<TrustAction>,
    write: Option<TrustAction>,
    external: Option<TrustAction>,
    approval_timeout_secs: Option<u64>,
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
    Fs(hands_fs::settings::Settings),
    Shell(ShellSettings),
    Git(hands_git::settings::Settings),
}

#[derive(Debug, Clone)]
pub struct ModuleCfg {
    pub id: ModuleId,
    pub grants: Vec<Grant>,
    pub roots: Vec<RootCfg>,
    /// The symbolic links on the way to its roots as written: whoever may write the folder
    /// that holds one chooses what the next daemon serves ([`trusted::refuse`]).
    pub root_links: Vec<RootLink>,
    pub trust: Trust,
    pub settings: ModuleSettings,
}

/// A link met on the way to a root as the file writes it.
#[derive(Debug, Clone)]
pub struct RootLink {
    /// The root as written (`~/p/lnk`).
    pub given: String,
    /// The link, as reached.
    pub link: PathBuf,
    /// The real folder that holds it.
    pub folder: PathBuf,
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
    /// `[server.http.oauth]`: OAuth access tokens, beside or instead of the clients' tokens.
    pub oauth: Option<OAuthCfg>,
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
    /// The file, absolute, when it came from one ([`load`]); the daemon protects it.
    pub file: Option<PathBuf>,
    pub state_dir: PathBuf,
    pub trust: Trust,
    pub sandbox_mode: SandboxMode,
    pub deny: Vec<PathBuf>,
    pub secret_patterns: Vec<String>,
    /// `[sandbox].protected_extra`: protected rules added to `sandbox-profiles/protected.txt`,
    /// as written (a trailing `/` marks a folder).
    pub protected_extra: Vec<String>,
    /// `sandbox.run_as`: who commands run as when the daemon is root (SPEC §5.2 item 6).
    pub run_as: Option<String>,
    pub http: Option<HttpCfg>,
    pub dashboard: Option<DashboardCfg>,
    /// `[runner]`: the outbound link to an organization's relay (SPEC §13), when configured.
    pub runner: Option<RunnerCfg>,
    pub modules: Vec<ModuleCfg>,
    /// `hands serve --read-only`: only the read class is published (see [`Config::read_only`]).
    pub read_only: bool,
}

impl Config {
    /// `hands serve --read-only` (SPEC §1): the same folders, read-only — tools-shell goes
    /// (a command could write through anything it runs), every root becomes read-only, and
    /// only read-class tools are published (`read_only`), so nobody is asked about a write.
    pub fn read_only(mut self) -> Config {
        self.modules.retain(|m| m.id != ModuleId::Shell);
        for m in &mut self.modules {
            for r in &mut m.roots {
                r.writable = false;
            }
            m.trust.write = TrustAction::Deny;
            m.trust.external = TrustAction::Deny;
        }
        self.trust.write = TrustAction::Deny;
        self.trust.external = TrustAction::Deny;
        self.read_only = true;
        self
    }
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

/// The problems found in one file's text so far, each placed at its line (the relay's
/// `relay.toml` uses the same).
pub(crate) struct Problems<'a> {
    src: &'a str,
    list: Vec<ConfigProblem>,
}

impl<'a> Problems<'a> {
    pub(crate) fn new(src: &'a str) -> Problems<'a> {
        Problems { src, list: Vec::new() }
    }

    /// `Ok` when nothing was found, else every problem of `file`.
    pub(crate) fn finish(self, file: &str) -> Result<(), ConfigError> {
        if self.list.is_empty() {
            return Ok(());
        }
        Err(ConfigError { file: file.to_string(), problems: self.list })
    }
}

impl Problems<'_> {
    fn line_of(&self, offset: usize) -> usize {
        self.src[..offset.min(self.src.len())].matches('\n').count() + 1
    }

    pub(crate) fn add(
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
// Paths.

fn default_state_dir(home: Option<&Path>) -> PathBuf {
    if let Some(x) = std::env::var_os("XDG_STATE_HOME").filter(|x| !x.is_empty()) {
        return PathBuf::from(x).join("hands");
    }
    match home {
        Some(h) => h.join(".local/state/hands"),
        None => PathBuf::from("/tmp/hands-state"),
    }
}
