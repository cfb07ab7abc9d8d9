//! The daemon's home and `~` in configured paths: every module's settings expand a leading `~`
//! the same way (roots, `PATH` entries, command environment), from the daemon's own `HOME`.

use std::path::{Path, PathBuf};

/// Expands a leading `~` to `home`; nothing else is expanded.
pub fn expand_tilde(p: &str, home: Option<&Path>) -> PathBuf {
    match (p.strip_prefix('~'), home) {
        (Some(""), Some(h)) => h.to_path_buf(),
        (Some(rest), Some(h)) if rest.starts_with('/') => h.join(&rest[1..]),
        _ => PathBuf::from(p),
    }
}

/// The daemon's `HOME`, when it names one.
pub fn home_dir() -> Option<PathBuf> {
    std::env::var_os("HOME").filter(|h| !h.is_empty()).map(PathBuf::from)
}
