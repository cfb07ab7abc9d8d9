//! The host's own programs asked for their version — the lines `hands doctor` reports for
//! tmux and git (`tmux -V`, `git --version`) — run through the launcher like every command
//! (SPEC §11: nothing `hands` starts runs outside a sandbox). The sandbox is a small one of its
//! own, not a module's: the system folders and the program's folder read-only, no root, no
//! network, a home of its own that is removed afterwards, a handful of processes, and the
//! daemon's `run_as` when it is root. Where no user namespace can be made it runs again with
//! Landlock and seccomp alone, as `best-effort` commands do: a fixed flag of a program the
//! person has on a PATH needs no more, and doctor is where a person looks to learn why the
//! namespaces are missing.

use crate::launcher::{self, Bound, Confinement, Ids, Spec};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// How many processes a version flag may have at once: it needs one; a program that forks
/// past this is not answering a version flag.
const PROCESSES: u64 = 16;

/// The longest part of a program's or the launcher's complaint a reason quotes.
const QUOTED_CHARS: usize = 200;

/// How version flags are run: through which launcher, hiding what, as whom.
#[derive(Debug, Clone)]
pub struct Versions {
    /// `hands-sandbox`, or `hands` itself ([`launcher::launcher_binary`]).
    pub launcher: PathBuf,
    /// Denied and credential paths, hidden where they lie inside a folder the program sees.
    pub masked: Vec<PathBuf>,
    /// Who the program runs as for a daemon that is root ([`launcher::run_as`]).
    pub run_as: Option<Ids>,
}

impl Versions {
    /// The first line `program` prints on stdout for `flag`, trimmed (empty when it prints
    /// nothing there and exits 0). An error says why there is none: the sandbox could not be
    /// built, the program failed (with the first line of its stderr), or it did not answer
    /// within `limit` and was killed. The caller decides whether the program may be run at
    /// all (doctor runs none that lies in a writable root, where a command could have put it).
    pub fn line(
        &self,
        program: &Path,
        flag: &str,
        limit: Duration,
    ) -> Result<String, VersionError> {
        let home = crate::probe::unique_dir("hands-version");
        std::fs::create_dir(&home)
            .map_err(|source| VersionError::Home { path: home.clone(), source })?;
        let mut answer = self.run(program, flag, limit, &home, false);
        if matches!(&answer, Err(VersionError::NoNamespaces(_))) {
            answer = self.run(program, flag, limit, &home, true);
        }
        let _ = std::fs::remove_dir_all(&home);
        answer
    }

    fn run(
        &self,
        program: &Path,
        flag: &str,
        limit: Duration,
        home: &Path,
        bare: bool,
    ) -> Result<String, VersionError> {
        let spec = self.spec(program, flag, home, bare);
        let (child, reports) = spec
            .command(&self.launcher)
            .and_then(|(mut c, reports)| {
                Ok((c.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?, reports))
            })
            .map_err(|e| {
                VersionError::Sandbox(format!(
                    "the launcher {} cannot start: {e}",
                    self.launcher.display()
                ))
            })?;
        let out = crate::probe::wait(child, limit).ok_or(VersionError::Hung(limit))?;
        // The launcher's report alone says the sandbox was not built: the program's stderr
        // could say anything.
        if let Some((why, cause)) = reports.read().setup_failed() {
            let why: String = format!("hands sandbox: {why}").chars().take(QUOTED_CHARS).collect();
            return Err(if cause == launcher::Cause::NoNamespaces && !bare {
                VersionError::NoNamespaces(why)
            } else {
                VersionError::Sandbox(why)
            });
        }
        let stderr = String::from_utf8_lossy(&out.stderr);
        let said = |prefix: &str| {
            let line = stderr.lines().find(|l| l.starts_with(prefix)).unwrap_or("").trim();
            line.chars().take(QUOTED_CHARS).collect::<String>()
        };
        let line =
            String::from_utf8_lossy(&out.stdout).lines().next().unwrap_or("").trim().to_string();
        if line.is_empty() && !out.status.success() {
            return Err(VersionError::Program { status: out.status.to_string(), said: said("") });
        }
        Ok(line)
    }

    /// The version flag's sandbox: the system folders and the folder `program` lies in (and
    /// the one it links to) read-only; nothing else of the host.
    fn spec(&self, program: &Path, flag: &str, home: &Path, bare: bool) -> Spec {
        let mut system: Vec<PathBuf> =
            launcher::SYSTEM.iter().map(PathBuf::from).filter(|p| p.exists()).collect();
        let real = std::fs::canonicalize(program).ok();
        for dir in [Some(program), real.as_deref()].into_iter().flatten().filter_map(Path::parent) {
            if !system.iter().any(|s| dir.starts_with(s)) {
                system.push(dir.to_path_buf());
            }
        }
        let base = Spec::builder(Confinement {
            roots: Vec::new(),
            protected: Vec::new(),
            protected_rules: Vec::new(),
            // A path the launcher would refuse is not one a folder here can hold.
            masked: self.masked.iter().filter(|p| launcher::is_clean(p)).cloned().collect(),
            system,
            home: home.to_path_buf(),
        })
        .bound(Bound::Rlimit)
        .cap_processes(PROCESSES)
        .run_as(self.run_as)
        .parent(std::process::id() as i32);
        let base = if bare { base.without_namespaces() } else { base };
        base.build(vec![program.display().to_string(), flag.to_string()], home.to_path_buf())
    }
}

/// Why a version flag gave no line ([`Versions::line`]); doctor shows it beside the program and
/// warns when a module needs that program.
#[derive(Debug, thiserror::Error)]
pub enum VersionError {
    /// The version flag's sandbox needs a home of its own, and it could not be made.
    #[error("cannot make its sandbox's home {}: {source}", path.display())]
    Home { path: PathBuf, source: std::io::Error },
    /// The launcher could not make namespaces here. `line` never returns it: it tries again
    /// without them, and a failure of that try is [`VersionError::Sandbox`].
    #[error("could not run in its sandbox ({0})")]
    NoNamespaces(String),
    /// The sandbox could not be built, or the launcher could not start (the launcher's own
    /// line, or why it did not start).
    #[error("could not run in its sandbox ({0})")]
    Sandbox(String),
    /// The program ended with `status`, printing nothing on stdout; `said` is its stderr's
    /// first line (empty when it said nothing).
    #[error(
        "printed nothing and ended with {status}{}",
        if said.is_empty() { String::new() } else { format!(", saying {said:?}") }
    )]
    Program { status: String, said: String },
    /// It had not ended within this long, and was killed.
    #[error("did not answer within {} s and was killed", .0.as_secs())]
    Hung(Duration),
}

#[cfg(test)]
mod tests {
    use super::Versions;
    use std::path::{Path, PathBuf};
    use std::time::Duration;

    // What runs is tested through the real launcher in the suite (`suite::tmux`, doctor's
    // test); here, only that no launcher means no version and a reason, and no home left.
    #[test]
    fn without_its_launcher_a_version_flag_is_not_run_and_says_why() {
        let v = Versions {
            launcher: PathBuf::from("/nonexistent/hands-sandbox"),
            masked: Vec::new(),
            run_as: None,
        };
        let why = v.line(Path::new("/bin/sh"), "--version", Duration::from_secs(5)).unwrap_err();
        assert!(matches!(why, super::VersionError::Sandbox(_)), "{why:?}");
        let why = why.to_string();
        assert!(why.starts_with("could not run in its sandbox (the launcher "), "{why}");
        assert!(why.contains("/nonexistent/hands-sandbox cannot start"), "{why}");
        let tmp = std::fs::canonicalize(std::env::temp_dir()).unwrap();
        let mine = format!("hands-version-{}-", std::process::id());
        let left = std::fs::read_dir(tmp).unwrap().flatten();
        assert!(!left.into_iter().any(|e| e.file_name().to_string_lossy().starts_with(&mine)));
    }
}
