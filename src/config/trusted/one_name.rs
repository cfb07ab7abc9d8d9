//! A file the daemon trusts for what it decides has exactly one name (SPEC §3, "What the host
//! trusts is out of reach"): its configuration, the standing permissions in the state dir, its
//! token files and private CAs. A hard link is the same file under another name, in any folder
//! of the same filesystem — a root among them — and neither its path nor the folders above it
//! tell (found by the tenth attack pass: `ln STATE/approvals.json ROOT/ap.json`, and one `bash`
//! command rewrote the standing permissions in place; a token file linked into a root was read
//! by `read`). So such a file with more than one name is refused: at start by `check`,
//! `doctor` and `serve` ([`refuse`]), and each time it is read for a decision ([`only_name`],
//! on the open file, since the link can be made after start).

use super::{Config, ConfigError, absolute, problem, token_files};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// A trusted file found with more than one name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManyNames {
    pub what: String,
    pub path: PathBuf,
    pub names: u64,
}

impl ManyNames {
    /// What is wrong and why.
    pub fn message(&self) -> String {
        format!(
            "{} {} has {} names (hard links): another name for it may lie where a command or a \
             file tool can write or read, and what is written there is what hands trusts",
            self.what,
            self.path.display(),
            self.names
        )
    }

    /// What a person does about it.
    pub fn hint(&self) -> String {
        format!(
            "a person removes the other name (`find / -xdev -samefile {}` lists every name) \
             and keeps this one, outside every root",
            self.path.display()
        )
    }
}

impl std::fmt::Display for ManyNames {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}\nhint: {}", self.message(), self.hint())
    }
}

impl std::error::Error for ManyNames {}

/// Refuses the open file `file` (named `path`, the daemon's `what`) when it has more than one
/// name: checked on the file itself (fstat), so a name swapped in between does not matter.
pub fn only_name(file: &std::fs::File, path: &Path, what: &str) -> Result<(), ManyNames> {
    match file.metadata() {
        Ok(m) if m.is_file() && m.nlink() > 1 => {
            Err(ManyNames { what: what.to_string(), path: path.to_path_buf(), names: m.nlink() })
        }
        _ => Ok(()),
    }
}

/// [`only_name`] of the file at `path`, when it is there.
#[expect(clippy::disallowed_methods, reason = "opened to look at, never read")]
pub fn only_name_at(path: &Path, what: &str) -> Result<(), ManyNames> {
    match std::fs::File::open(path) {
        Ok(f) => only_name(&f, path, what),
        Err(_) => Ok(()),
    }
}

/// Reads the file at `path` (the daemon's `what`) whole, refused when it has more than one
/// name.
#[expect(clippy::disallowed_methods, reason = "a trusted file, checked on the open file")]
pub fn read_one_name(path: &Path, what: &str) -> std::io::Result<String> {
    use std::io::Read;
    let mut f = std::fs::File::open(path)?;
    only_name(&f, path, what).map_err(std::io::Error::other)?;
    let mut text = String::new();
    f.read_to_string(&mut text)?;
    Ok(text)
}

/// The files of `config` the daemon trusts for what it decides, each with what it is: the
/// config file, the standing permissions, the token files, the private CAs.
fn trusted_files(config: &Config) -> Vec<(PathBuf, String, String)> {
    let mut out = Vec::new();
    if let Some(f) = &config.file {
        out.push((f.clone(), "the daemon's configuration".to_string(), String::new()));
    }
    let always = absolute(&config.state_dir).join("approvals.json");
    out.push((always, "the standing permissions".to_string(), "[daemon] state_dir".to_string()));
    for t in token_files(config) {
        out.push((absolute(&t.file), "token_file".to_string(), t.key));
    }
    let cas = [
        config.runner.as_ref().and_then(|r| r.ca_file.clone()).map(|c| (c, "[runner]")),
        config
            .http
            .as_ref()
            .and_then(|h| h.oauth.as_ref()?.ca_file.clone())
            .map(|c| (c, "[server.http.oauth]")),
    ];
    for (ca, key) in cas.into_iter().flatten() {
        out.push((absolute(&ca), "the private CA (ca_file)".to_string(), key.to_string()));
    }
    out
}

/// Refuses a configuration one of whose trusted files has more than one name.
pub(super) fn refuse(config: &Config) -> Result<(), ConfigError> {
    for (path, what, key) in trusted_files(config) {
        if let Err(e) = only_name_at(&path, &what) {
            return Err(problem(config, &key, e.message(), &e.hint()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_name_is_found_on_the_open_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("approvals.json");
        std::fs::write(&file, "[]").unwrap();
        let open = std::fs::File::open(&file).unwrap();
        assert_eq!(only_name(&open, &file, "x"), Ok(()));
        assert_eq!(only_name_at(&dir.path().join("missing"), "x"), Ok(()));
        // Made after the file was opened: still found.
        std::fs::hard_link(&file, dir.path().join("other")).unwrap();
        let e = only_name(&open, &file, "the standing permissions").unwrap_err();
        assert_eq!(e.names, 2);
        let text = e.to_string();
        assert!(text.contains("2 names") && text.contains("-samefile"), "{text}");
        std::fs::remove_file(dir.path().join("other")).unwrap();
        assert_eq!(only_name_at(&file, "x"), Ok(()));
    }
}
