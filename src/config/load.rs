//! Reading a configuration: which file a subcommand uses, the embedded default, and the strict
//! parse whose errors name the file, the line and the `[[builtins]]` id the parser stopped at.

use super::daemon::{RawConfig, validate};
use super::{
    Config, ConfigError, ConfigProblem, Grant, ModuleCfg, ModuleId, ModuleSettings, Problems,
    RootCfg, SandboxMode, ShellSettings, Trust, default_state_dir, home_dir,
};
use std::path::{Path, PathBuf};

/// Which file a subcommand uses: `--config F`, else `./daemon.toml`, else the embedded default.
pub fn locate(explicit: Option<&Path>) -> Option<PathBuf> {
    if let Some(p) = explicit {
        return Some(p.to_path_buf());
    }
    let local = PathBuf::from("daemon.toml");
    local.is_file().then_some(local)
}

/// Loads the configuration a subcommand should use.
// The config file the person names (or ./daemon.toml).
#[allow(clippy::disallowed_methods)]
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
