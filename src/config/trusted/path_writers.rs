//! Programs that run under an allowed name from where an agent could write them (issue 37
//! point 3, decision 0068): tools-shell's `path` folders, and what a link there leads to,
//! asked of the one rule of who reaches a path (`trusted::reach`).

use super::{Reach, reach};
use crate::config::{Config, ConfigError, ModuleSettings, ShellSettings};
use std::path::{Path, PathBuf};

/// Where a module's command or file tool could write a program that tools-shell's `run`,
/// `os-*` or `hands exec` would then start under an allowed name (issue 37 point 3, decision
/// 0068): a folder of its `path`, or the real file an allowed name resolves to (a link in a
/// `path` folder leading into a root). Refused when the module publishes allowlisted programs
/// and no `bash`: there the allowlist is what confines the agent. With `bash` the agent runs
/// any program anyway, so a project's `.venv/bin` on `path` is a doctor warning, not an error.
pub fn path_writers(config: &Config, sh: &ShellSettings) -> Vec<(PathBuf, Reach)> {
    let mut out = Vec::new();
    {
        let dirs: Vec<&Path> =
            sh.command_path.split(':').map(Path::new).filter(|d| d.is_absolute()).collect();
        let mut places: Vec<PathBuf> = dirs.iter().map(|d| d.to_path_buf()).collect();
        for d in &dirs {
            let Ok(entries) = std::fs::read_dir(d) else { continue };
            for e in entries.flatten().take(20_000) {
                if e.file_type().is_ok_and(|t| t.is_symlink())
                    && let Ok(real) = std::fs::canonicalize(e.path())
                {
                    places.push(real);
                }
            }
        }
        for p in places {
            if let Some(r) = reach(config, &p).into_iter().find(|r| r.write) {
                out.push((p, r));
            }
        }
    }
    out
}

pub(super) fn refuse(config: &Config) -> Result<(), ConfigError> {
    for m in &config.modules {
        let ModuleSettings::Shell(sh) = &m.settings else { continue };
        let publishes = sh.policy.admits_something() || !sh.tools.is_empty();
        if sh.bash || !publishes {
            continue;
        }
        if let Some((p, r)) = path_writers(config, sh).into_iter().next() {
            return Err(super::problem(
                config,
                "tools-shell config.path",
                format!(
                    "{} (on tools-shell's path, or what a name there leads to) lies {}: a \
                     program written there would run under an allowed name through `run`, \
                     `os-*` and `hands exec`, which are all tools-shell offers without `bash`",
                    p.display(),
                    r.place
                ),
                "keep tools-shell's path to folders no module writes (system folders, a \
                 toolchain outside the roots), or make that root read-only",
            ));
        }
    }
    Ok(())
}
