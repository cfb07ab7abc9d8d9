//! Reading a configuration: which file a subcommand uses, the embedded default, and the strict
//! parse whose errors name the file, the line and the `[[builtins]]` id the parser stopped at.

use super::daemon_sections::{RawConfig, validate};
use super::{
    Config, ConfigError, ConfigProblem, EMBEDDED, Grant, ModuleCfg, ModuleId, ModuleSettings,
    Problems, RootCfg, SandboxMode, ShellSettings, Trust, default_state_dir, home_dir,
    user_config_file,
};
use std::path::{Path, PathBuf};

/// Where a configuration comes from: a file (and why that one), or the embedded default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Located {
    /// `--config F`, `$HANDS_CONFIG` or the per-user file, absolute.
    File { path: PathBuf, from: &'static str },
    /// No file: the embedded default.
    Default,
}

/// Which file a subcommand uses: `--config F`, else `$HANDS_CONFIG`, else the per-user file
/// ([`user_config_file`]) when it exists, else the embedded default. The current folder is
/// never looked in: it is where the agent writes, and a policy the agent can write is none.
pub fn locate(explicit: Option<&Path>) -> Located {
    let absolute = |p: &Path| super::trusted::absolute(p);
    if let Some(p) = explicit {
        return Located::File { path: absolute(p), from: "--config" };
    }
    if let Some(p) = std::env::var_os("HANDS_CONFIG").filter(|p| !p.is_empty()) {
        return Located::File { path: absolute(Path::new(&p)), from: "$HANDS_CONFIG" };
    }
    match user_config_file() {
        // A name that exists in any form is used (and then read or refused): a dangling link
        // or a folder there is a mistake to report, not a reason to fall back silently.
        Some(p) if std::fs::symlink_metadata(&p).is_ok() => {
            Located::File { path: p, from: "the per-user config file" }
        }
        _ => Located::Default,
    }
}

/// Loads the configuration a subcommand should use ([`locate`]), and refuses a file that a
/// command or file tool of that configuration could write ([`super::trusted::placement`]).
#[expect(
    clippy::disallowed_methods,
    reason = "the config file the person names (or the per-user one)"
)]
pub fn load(explicit: Option<&Path>) -> Result<Config, ConfigError> {
    match locate(explicit) {
        Located::File { path, from } => {
            let shown = path.display().to_string();
            let src = std::fs::read_to_string(&path).map_err(|e| ConfigError {
                file: shown.clone(),
                problems: vec![ConfigProblem {
                    line: None,
                    section: String::new(),
                    key: String::new(),
                    message: format!("cannot read the file (named by {from}): {e}"),
                    hint: Some("pass an existing file with --config".into()),
                }],
            })?;
            let cfg = parse(&src, &shown)?;
            let cfg = Config { file: Some(path), ..cfg };
            super::trusted::placement(&cfg)?;
            Ok(cfg)
        }
        Located::Default => embedded_default(),
    }
}

/// The embedded default: the current directory is the one writable root of all three modules,
/// trust asks a person before external actions, commands get no network.
pub fn embedded_default() -> Result<Config, ConfigError> {
    let cwd = std::env::current_dir().and_then(std::fs::canonicalize).map_err(|e| ConfigError {
        file: EMBEDDED.into(),
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
        root_links: Vec::new(),
        trust: trust.clone(),
        settings,
    };
    Ok(Config {
        source: EMBEDDED.into(),
        file: None,
        state_dir: default_state_dir(home.as_deref()),
        trust: trust.clone(),
        sandbox_mode: SandboxMode::Enforce,
        deny: Vec::new(),
        secret_patterns: hands_sandbox::profiles::secret_patterns().map(str::to_string).collect(),
        protected_extra: Vec::new(),
        run_as: None,
        http: None,
        dashboard: None,
        runner: None,
        read_only: false,
        modules: vec![
            module(ModuleId::Fs, &[Grant::Filesystem], ModuleSettings::Fs(Default::default())),
            module(
                ModuleId::Shell,
                &[Grant::Filesystem, Grant::Spawn],
                ModuleSettings::Shell(ShellSettings::default()),
            ),
            module(
                ModuleId::Git,
                &[Grant::Filesystem, Grant::Spawn],
                ModuleSettings::Git(Default::default()),
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
