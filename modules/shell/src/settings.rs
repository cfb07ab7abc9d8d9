//! tools-shell's `config` table: the raw shape a daemon's config file may hold ([`RawSettings`],
//! strict serde) and its validation, once at startup, into [`ShellSettings`] with concrete
//! values — the compiled `commands` policy, the limits, the output caps, the commands' `PATH`,
//! the network mode. A value out of range is a problem naming the range, never clamped at use;
//! the daemon's config loader places each problem at its file, line, section and key.

use hands_sandbox::launcher::Limits;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::ops::RangeInclusive;
use std::path::PathBuf;

/// The `config` table of tools-shell, exactly as the file may write it.
#[derive(Debug, Deserialize, Default, Clone)]
#[serde(deny_unknown_fields)]
pub struct RawSettings {
    pub path: Option<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    pub output_chars: Option<u64>,
    /// The output cap of `run` and the `os-*` tools (default 8192 characters).
    pub run_output_chars: Option<u64>,
    pub max_concurrent: Option<u64>,
    pub limits: Option<RawLimits>,
    pub bash: Option<bool>,
    pub commands: Option<RawCommands>,
    #[serde(default)]
    pub tools: Vec<ShellTool>,
    /// The network by domain (SPEC §5.4), with the `network` grant.
    pub network: Option<RawNetwork>,
    /// Whether a command may make a repository (`git init`, `git clone`, `cargo new`) inside
    /// a writable root; refused by default (`docs/decisions/0046-walls-in-run.md`).
    #[serde(default)]
    pub new_repositories: NewRepositories,
    /// Whether tmux sessions outlive the daemon that started them (SPEC §4.2); off by default:
    /// a session ends with its daemon (`docs/decisions/0056-nothing-left-behind.md`).
    pub keep_sessions: Option<bool>,
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
    /// Commands may make repositories (a `.git` folder) in writable roots; the sandbox checks
    /// what their config holds and keeps hooks out (decision 0054).
    Allow,
}

/// `config.network` of tools-shell: `allow`/`deny`/`unknown`, or `mode = "host"`.
#[derive(Debug, Deserialize, Default, Clone)]
#[serde(deny_unknown_fields)]
pub struct RawNetwork {
    pub mode: Option<String>,
    #[serde(default)]
    pub allow: Vec<String>,
    #[serde(default)]
    pub deny: Vec<String>,
    pub unknown: Option<String>,
}

/// `config.limits` of tools-shell: per command.
#[derive(Debug, Deserialize, Default, Clone)]
#[serde(deny_unknown_fields)]
pub struct RawLimits {
    pub processes: Option<u64>,
    pub open_files: Option<u64>,
    pub file_size_mb: Option<u64>,
    pub memory_mb: Option<u64>,
    /// Files and folders the walk of the roots (masks, protected paths) may visit; past it
    /// commands refuse (default 200,000).
    pub walk_entries: Option<u64>,
}

/// `config.commands` of tools-shell (SPEC §4.4).
#[derive(Debug, Deserialize, Default, Clone)]
#[serde(deny_unknown_fields)]
pub struct RawCommands {
    #[serde(default)]
    pub allow: Vec<String>,
    #[serde(default)]
    pub deny: Vec<String>,
    pub confirm: Option<Vec<String>>,
}

/// One `tools` entry: the program behind one published `os-*` tool.
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct ShellTool {
    pub bin: String,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub description: String,
}

/// What the `network` grant gives tools-shell's commands.
#[derive(Debug, Clone)]
pub enum NetworkMode {
    /// `mode = "host"`: the host's whole network.
    Host,
    /// The module's private namespace, and the proxy judging every connection by these rules.
    Domains(hands_sandbox::proxy::Rules),
}

/// One problem in the table; the daemon places it at its file, line and section.
pub use hands_tool::Problem;

/// The validated table: every default filled in, every range checked, the policy compiled.
#[derive(Debug, Clone)]
pub struct ShellSettings {
    /// `path` as the file writes it, empty when unset (`hands check` shows it so).
    pub path_written: String,
    /// The `PATH` of the module's commands: `path` with `~/` taken from the daemon's `HOME`
    /// (as everywhere in the config: no shell expands it in `PATH`), or the system's folders
    /// when `path` is unset or empty. Its folders are bound read-only into the sandbox.
    pub command_path: String,
    /// Extra variables of the commands, `~` expanded in their values.
    pub env: BTreeMap<String, String>,
    /// The output cap of `bash` and the tmux tools, in characters.
    pub output_chars: usize,
    /// The output cap of `run` and `os-*`, in characters.
    pub run_output_chars: usize,
    /// Commands at once; more are queued.
    pub max_concurrent: usize,
    /// Per command: processes, open files, file size, memory.
    pub limits: Limits,
    /// Files and folders the walk of the roots may visit before commands refuse.
    pub walk_entries: usize,
    /// `bash` and the tmux tools that run shell text are published.
    pub bash: bool,
    /// The compiled `commands` table (the default `confirm` list when it is not set).
    pub policy: crate::allow::Policy,
    /// The `tools` entries, by index (each names its `os-*` tool; two with one name are a
    /// doctor warning, and the first is published).
    pub tools: Vec<ShellTool>,
    /// What the `network` grant gives (without the grant nothing of it applies).
    pub network: NetworkMode,
    pub new_repositories: NewRepositories,
    /// tmux sessions outlive their daemon; the next daemon of the state dir adopts them.
    pub keep_sessions: bool,
}

impl Default for ShellSettings {
    /// The settings of an empty table (the embedded default config's, and the stand-in of a
    /// refused one).
    fn default() -> ShellSettings {
        use crate::allow::{DEFAULT_CONFIRM, Entry, Policy};
        let confirm = DEFAULT_CONFIRM
            .iter()
            .map(|b| Entry::Prefix { bin: b.to_string(), args: Vec::new() })
            .collect();
        ShellSettings {
            path_written: String::new(),
            command_path: DEFAULT_COMMAND_PATH.to_string(),
            env: BTreeMap::new(),
            output_chars: DEFAULT_OUTPUT_CHARS,
            run_output_chars: crate::run::DEFAULT_OUTPUT_CHARS as usize,
            max_concurrent: DEFAULT_MAX_CONCURRENT,
            limits: Limits::default(),
            walk_entries: hands_sandbox::masks::WALK_LIMIT,
            bash: true,
            policy: Policy { allow: Vec::new(), deny: Vec::new(), confirm },
            tools: Vec::new(),
            network: NetworkMode::Domains(hands_sandbox::proxy::Rules::default()),
            new_repositories: NewRepositories::Refuse,
            keep_sessions: false,
        }
    }
}

/// The `PATH` of tools-shell's commands when `path` is not set.
pub const DEFAULT_COMMAND_PATH: &str = "/usr/local/bin:/usr/bin:/bin";
/// `output_chars` when it is not set.
pub const DEFAULT_OUTPUT_CHARS: usize = 30_000;
/// `max_concurrent` when it is not set.
pub const DEFAULT_MAX_CONCURRENT: usize = 4;

/// The ranges the numbers must lie in.
pub const MAX_CONCURRENT: RangeInclusive<u64> = 1..=1024;
pub const OUTPUT_CHARS: RangeInclusive<u64> = 100..=1_000_000;
pub const RUN_OUTPUT_CHARS: RangeInclusive<u64> = 1..=1_000_000;
/// Up to the kernel's largest `pid_max`; the cgroup's `pids.max` is one more (the init). Zero
/// is kept: no command can start (the sandbox cannot fork it), which is how the tests build a
/// sandbox that fails.
pub const PROCESSES: RangeInclusive<u64> = 0..=4_194_304;
/// Up to the kernel's default ceiling of a hard limit (`fs.nr_open`).
pub const OPEN_FILES: RangeInclusive<u64> = 1..=1_048_576;
/// Up to 16 TiB, in MiB.
pub const FILE_SIZE_MB: RangeInclusive<u64> = 1..=16_777_216;
pub const MEMORY_MB: RangeInclusive<u64> = 1..=16_777_216;
/// A walk of more entries would take minutes before every command.
pub const WALK_ENTRIES: RangeInclusive<u64> = 1..=100_000_000;

impl RawSettings {
    /// Validates the table; `expand` is the daemon's `~` expansion (the only one its config
    /// file knows). Every problem is reported, not just the first.
    pub fn validate(self, expand: &dyn Fn(&str) -> PathBuf) -> Result<ShellSettings, Vec<Problem>> {
        let mut problems = Vec::new();
        let d = ShellSettings::default();
        let c = self.commands.clone().unwrap_or_default();
        let policy = match crate::allow::Policy::new(&c.allow, &c.deny, c.confirm.as_deref()) {
            Ok(p) => Some(p),
            Err((list, i, e)) => {
                problems.push(Problem::new(
                    format!("commands.{list}[{i}]"),
                    format!("commands.{list}[{i}]: {e}"),
                    Some(
                        "entries are binary names with optional leading arguments, e.g. \"kubectl get\", or \"*\"",
                    ),
                ));
                None
            }
        };
        for (i, t) in self.tools.iter().enumerate() {
            if let Err(e) = crate::allow::tool_name(&t.bin, &t.args) {
                problems.push(Problem::new(
                    format!("tools[{i}]"),
                    e.to_string(),
                    Some(
                        "a tools entry is { bin = \"kubectl\", args = [\"get\"], description = \"...\" }",
                    ),
                ));
            }
        }
        let network = match network_mode(self.network.clone().unwrap_or_default()) {
            Ok(n) => Some(n),
            Err(p) => {
                problems.push(p);
                None
            }
        };
        // Every range fits a `usize` on any target (the largest is 100,000,000).
        let mut number = |key: &str, value: Option<u64>, range: RangeInclusive<u64>, hint| {
            Problem::check_range(key, value?, &range, hint).map_err(|p| problems.push(p)).ok()
        };
        let max_concurrent = number(
            "max_concurrent",
            self.max_concurrent,
            MAX_CONCURRENT,
            "the default is 4 commands at once",
        );
        let output_chars = number(
            "output_chars",
            self.output_chars,
            OUTPUT_CHARS,
            "the default is 30000 characters",
        );
        let run_output_chars = number(
            "run_output_chars",
            self.run_output_chars,
            RUN_OUTPUT_CHARS,
            "the default is 8192 characters",
        );
        let l = self.limits.clone().unwrap_or_default();
        let limits = Limits {
            processes: number(
                "limits.processes",
                l.processes,
                PROCESSES,
                "the default is 512 processes and threads",
            )
            .unwrap_or(d.limits.processes),
            open_files: number(
                "limits.open_files",
                l.open_files,
                OPEN_FILES,
                "the default is 1024 open files",
            )
            .unwrap_or(d.limits.open_files),
            file_size_mb: number(
                "limits.file_size_mb",
                l.file_size_mb,
                FILE_SIZE_MB,
                "the default is 4096 MiB",
            )
            .unwrap_or(d.limits.file_size_mb),
            memory_mb: number(
                "limits.memory_mb",
                l.memory_mb,
                MEMORY_MB,
                "the default is 8192 MiB",
            )
            .unwrap_or(d.limits.memory_mb),
        };
        let walk_entries = number(
            "limits.walk_entries",
            l.walk_entries,
            WALK_ENTRIES,
            "the default is 200000 files and folders",
        );
        if !problems.is_empty() {
            return Err(problems);
        }
        let command_path = match self.path.as_deref().filter(|p| !p.is_empty()) {
            None => DEFAULT_COMMAND_PATH.to_string(),
            Some(path) => path
                .split(':')
                .map(|dir| expand(dir).to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(":"),
        };
        let env = (self.env.into_iter())
            .map(|(k, v)| (k, expand(&v).to_string_lossy().into_owned()))
            .collect();
        Ok(ShellSettings {
            path_written: self.path.unwrap_or_default(),
            command_path,
            env,
            output_chars: output_chars.map_or(d.output_chars, |n| n as usize),
            run_output_chars: run_output_chars.map_or(d.run_output_chars, |n| n as usize),
            max_concurrent: max_concurrent.map_or(d.max_concurrent, |n| n as usize),
            limits,
            walk_entries: walk_entries.map_or(d.walk_entries, |n| n as usize),
            bash: self.bash.unwrap_or(d.bash),
            policy: policy.unwrap_or(d.policy),
            tools: self.tools,
            network: network.unwrap_or(d.network),
            new_repositories: self.new_repositories,
            keep_sessions: self.keep_sessions.unwrap_or(d.keep_sessions),
        })
    }
}

/// The validated network rules; a table without one keeps the defaults (`allow = []`,
/// `unknown = "ask"`: every host asks a person).
fn network_mode(n: RawNetwork) -> Result<NetworkMode, Problem> {
    use hands_sandbox::proxy::{Rules, Unknown};
    match n.mode.as_deref() {
        Some("host") => {
            if !n.allow.is_empty() || !n.deny.is_empty() || n.unknown.is_some() {
                return Err(Problem::new(
                    "network.mode",
                    "mode = \"host\" gives the host's whole network, so allow, deny and \
                     unknown would mean nothing",
                    Some("drop mode for the network by domain, or drop the lists"),
                ));
            }
            return Ok(NetworkMode::Host);
        }
        Some("domains") | None => {}
        Some(other) => {
            return Err(Problem::new(
                "network.mode",
                format!("unknown mode `{}`", other.chars().take(100).collect::<String>()),
                Some("mode is \"host\" (the host's network) or absent (the network by domain)"),
            ));
        }
    }
    let unknown = match n.unknown.as_deref() {
        None | Some("ask") => Unknown::Ask,
        Some("deny") => Unknown::Deny,
        Some(other) => {
            return Err(Problem::new(
                "network.unknown",
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
                return Err(Problem::new(
                    format!("network.{key}[{i}]"),
                    format!("`{}`: {}", err.entry, err.why),
                    Some(
                        "entries are host names (`pkg.example.org`), `*.` wildcards for subdomains, IP addresses or CIDR ranges, each optionally with `:port`",
                    ),
                ));
            }
        }
    }
    Rules::new(&n.allow, &n.deny, unknown)
        .map(NetworkMode::Domains)
        .map_err(|e| Problem::new("network", e.why, Some("see the entry named")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn validate(raw: RawSettings) -> Result<ShellSettings, Vec<Problem>> {
        raw.validate(&|s| match s.strip_prefix("~/") {
            Some(rest) => PathBuf::from("/home/x").join(rest),
            None => PathBuf::from(s),
        })
    }

    #[test]
    fn an_empty_table_is_the_default() {
        let Ok(s) = validate(RawSettings::default()) else { panic!("the empty table refused") };
        let d = ShellSettings::default();
        assert_eq!(s.command_path, d.command_path);
        assert_eq!(s.policy.confirm, d.policy.confirm, "the default confirm list");
        assert_eq!((s.output_chars, s.run_output_chars, s.max_concurrent), (30_000, 8192, 4));
        assert_eq!(s.walk_entries, hands_sandbox::masks::WALK_LIMIT);
        assert_eq!(s.limits.processes, 512);
        assert!(s.bash && s.path_written.is_empty());
    }

    #[test]
    fn paths_and_env_expand_once() {
        let raw = RawSettings {
            path: Some("~/bin:/usr/bin".into()),
            env: [("CARGO_HOME".to_string(), "~/.cargo".to_string())].into(),
            ..RawSettings::default()
        };
        let Ok(s) = validate(raw) else { panic!("valid settings refused") };
        assert_eq!(s.command_path, "/home/x/bin:/usr/bin");
        assert_eq!(s.path_written, "~/bin:/usr/bin");
        assert_eq!(s.env["CARGO_HOME"], "/home/x/.cargo");
    }

    #[test]
    fn every_number_out_of_range_names_its_key_and_range() {
        let raw = RawSettings {
            max_concurrent: Some(0),
            limits: Some(RawLimits {
                processes: Some(u64::MAX),
                memory_mb: Some(0),
                walk_entries: Some(0),
                ..RawLimits::default()
            }),
            ..RawSettings::default()
        };
        let Err(problems) = validate(raw) else { panic!("out-of-range numbers accepted") };
        let shown: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
        assert_eq!(
            shown,
            [
                "max_concurrent: must be between 1 and 1024; got 0",
                "limits.processes: must be between 0 and 4194304; got 18446744073709551615",
                "limits.memory_mb: must be between 1 and 16777216; got 0",
                "limits.walk_entries: must be between 1 and 100000000; got 0",
            ]
        );
        // The bounds themselves are allowed.
        let raw = RawSettings {
            limits: Some(RawLimits {
                processes: Some(0),
                open_files: Some(1),
                walk_entries: Some(1),
                ..RawLimits::default()
            }),
            ..RawSettings::default()
        };
        let Ok(s) = validate(raw) else { panic!("the bounds refused") };
        assert_eq!((s.limits.processes, s.limits.open_files, s.walk_entries), (0, 1, 1));
    }
}
