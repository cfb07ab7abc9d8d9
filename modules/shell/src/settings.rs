//! tools-shell's settings: the `config` table of its `[[builtins]]` entry as serde reads it
//! (`deny_unknown_fields` throughout), and what is derived from it — the compiled `commands`
//! policy, the commands' `PATH`, the network mode. The daemon's config loader places problems
//! at file, line and key; the rules of what is valid live here.

use serde::Deserialize;
use std::collections::BTreeMap;

/// The `config` table of tools-shell. `commands` and `tools` (SPEC §4.4) are checked by the
/// daemon's config loader after parsing.
#[derive(Debug, Deserialize, Default, Clone)]
#[serde(deny_unknown_fields)]
pub struct ShellConfig {
    pub path: Option<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    pub output_chars: Option<u64>,
    /// The output cap of `run` and the `os-*` tools (default 8192 characters).
    pub run_output_chars: Option<u64>,
    pub max_concurrent: Option<u64>,
    pub limits: Option<ShellLimits>,
    pub bash: Option<bool>,
    pub commands: Option<ShellCommands>,
    #[serde(default)]
    pub tools: Vec<ShellTool>,
    /// The network by domain (SPEC §5.4), with the `network` grant.
    pub network: Option<ShellNetwork>,
    /// Whether a command may make a repository (`git init`, `git clone`, `cargo new`) inside
    /// a writable root; refused by default (`docs/decisions/0046-walls-in-run.md`).
    #[serde(default)]
    pub new_repositories: NewRepositories,
    /// The gate's override of this module's tool classes: the daemon's (the gate is not the
    /// module's), which reads it from the same table. Named here so the key is known and an
    /// unknown key's error lists it as before.
    #[serde(default)]
    #[allow(dead_code)] // Never read here: only named.
    trust: Option<serde::de::IgnoredAny>,
}

/// `config.new_repositories` of tools-shell.
#[derive(Debug, Deserialize, Default, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum NewRepositories {
    /// A `.git` (or a git dir under another name) made in a writable root is refused: its
    /// config could name a program a git on the host runs.
    #[default]
    Refuse,
    /// Commands may make repositories in writable roots; the person accepts that a new
    /// repository's config and hooks are the command's until its next command.
    Allow,
}

/// `config.network` of tools-shell: `allow`/`deny`/`unknown`, or `mode = "host"`.
#[derive(Debug, Deserialize, Default, Clone)]
#[serde(deny_unknown_fields)]
pub struct ShellNetwork {
    pub mode: Option<String>,
    #[serde(default)]
    pub allow: Vec<String>,
    #[serde(default)]
    pub deny: Vec<String>,
    pub unknown: Option<String>,
}

/// What the `network` grant gives tools-shell's commands.
#[derive(Debug, Clone)]
pub enum NetworkMode {
    /// `mode = "host"`: the host's whole network.
    Host,
    /// The module's private namespace, and the proxy judging every connection by these rules.
    Domains(hands_sandbox::proxy::Rules),
}

impl ShellConfig {
    /// The validated network rules; a table without one keeps the defaults (`allow = []`,
    /// `unknown = "ask"`: every host asks a person). The error is (key, message, hint).
    pub fn network_mode(&self) -> Result<NetworkMode, (String, String, Option<&'static str>)> {
        use hands_sandbox::proxy::{Rules, Unknown};
        let n = self.network.clone().unwrap_or_default();
        match n.mode.as_deref() {
            Some("host") => {
                if !n.allow.is_empty() || !n.deny.is_empty() || n.unknown.is_some() {
                    return Err((
                        "config.network.mode".into(),
                        "mode = \"host\" gives the host's whole network, so allow, deny and \
                         unknown would mean nothing"
                            .into(),
                        Some("drop mode for the network by domain, or drop the lists"),
                    ));
                }
                return Ok(NetworkMode::Host);
            }
            Some("domains") | None => {}
            Some(other) => {
                return Err((
                    "config.network.mode".into(),
                    format!("unknown mode `{}`", other.chars().take(100).collect::<String>()),
                    Some("mode is \"host\" (the host's network) or absent (the network by domain)"),
                ));
            }
        }
        let unknown = match n.unknown.as_deref() {
            None | Some("ask") => Unknown::Ask,
            Some("deny") => Unknown::Deny,
            Some(other) => {
                return Err((
                    "config.network.unknown".into(),
                    format!(
                        "`{}` is neither \"ask\" nor \"deny\"",
                        other.chars().take(100).collect::<String>()
                    ),
                    Some(
                        "unknown = \"ask\" asks a person about a host no rule covers; \"deny\" refuses it",
                    ),
                ));
            }
        };
        for (key, list) in [("allow", &n.allow), ("deny", &n.deny)] {
            for (i, e) in list.iter().enumerate() {
                if let Err(err) = e.parse::<hands_sandbox::proxy::Entry>() {
                    return Err((
                        format!("config.network.{key}[{i}]"),
                        format!("`{}`: {}", err.entry, err.why),
                        Some(
                            "entries are host names (`crates.io`), `*.` wildcards for subdomains, IP addresses or CIDR ranges, each optionally with `:port`",
                        ),
                    ));
                }
            }
        }
        Rules::new(&n.allow, &n.deny, unknown)
            .map(NetworkMode::Domains)
            .map_err(|e| ("config.network".into(), e.why, Some("see the entry named")))
    }
}

#[derive(Debug, Deserialize, Default, Clone)]
#[serde(deny_unknown_fields)]
pub struct ShellLimits {
    pub processes: Option<u64>,
    pub open_files: Option<u64>,
    pub file_size_mb: Option<u64>,
    pub memory_mb: Option<u64>,
    /// Files and folders the walk of the roots (masks, protected paths) may visit; past it
    /// commands refuse (default 200,000).
    pub walk_entries: Option<u64>,
}

#[derive(Debug, Deserialize, Default, Clone)]
#[serde(deny_unknown_fields)]
pub struct ShellCommands {
    #[serde(default)]
    pub allow: Vec<String>,
    #[serde(default)]
    pub deny: Vec<String>,
    pub confirm: Option<Vec<String>>,
}

#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct ShellTool {
    pub bin: String,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub description: String,
}

impl ShellConfig {
    /// The compiled `commands` table (the default `confirm` list when it is not set).
    pub fn policy(&self) -> Result<crate::allow::Policy, String> {
        let c = self.commands.clone().unwrap_or_default();
        crate::allow::Policy::new(&c.allow, &c.deny, c.confirm.as_deref())
            .map_err(|(list, i, e)| format!("commands.{list}[{i}]: {e}"))
    }

    /// The `PATH` of the module's commands: `path` (a `~/` entry taken from the daemon's
    /// `HOME`, as everywhere in the config: no shell expands it in `PATH`), or the system's
    /// folders when it is empty. Its folders are bound read-only into the sandbox.
    pub fn command_path(&self) -> String {
        let Some(path) = self.path.as_deref().filter(|p| !p.is_empty()) else {
            return DEFAULT_COMMAND_PATH.to_string();
        };
        let home = hands_roots::home_dir();
        let dirs: Vec<String> = path
            .split(':')
            .map(|d| hands_roots::expand_tilde(d, home.as_deref()).to_string_lossy().into_owned())
            .collect();
        dirs.join(":")
    }
}

/// The `PATH` of tools-shell's commands when `path` is not set.
pub const DEFAULT_COMMAND_PATH: &str = "/usr/local/bin:/usr/bin:/bin";
