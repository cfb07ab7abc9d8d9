//! The walls a command hit, as the daemon lists them in a result's `denied`: what the
//! launcher reported on its own channel, then, as hints, error lines on the command's stderr
//! that name a path the spec walls off.

use crate::launcher::{Report, Spec};
use std::path::{Path, PathBuf};

/// The prefix of every line the launcher writes on the command's stderr.
const LAUNCHER_LINE: &str = "hands sandbox:";

/// A wall a command hit while it ran, as the daemon lists it in `denied`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    pub what: String,
    pub layer: &'static str,
    pub why: String,
    pub remedy: String,
}

/// At most this many walls per result: the text stays short.
const MAX_HITS: usize = 10;

/// The walls a command hit: what the launcher reported (refused creates, the memory bound),
/// then, as hints, `Permission denied` / `Read-only file system` errors on its stderr that name
/// a path the spec walls off (a protected path, a masked one, a read-only root, a folder
/// outside every root). Only the reports say that a wall refused something; an error line
/// can only point at a path that is a wall in the spec, and a line in the launcher's own
/// format is never read (the command can print one). The spec's `cwd` resolves relative names.
pub fn walls_hit(reports: &[Report], stderr: &str, spec: &Spec) -> Vec<Hit> {
    let (protected, masked) = (&spec.protected, &spec.masked);
    let roots: Vec<(PathBuf, bool)> =
        spec.roots.iter().map(|r| (r.path.clone(), r.writable)).collect();
    let cwd = &spec.cwd;
    let mut hits: Vec<Hit> = Vec::new();
    let mut add = |h: Hit| {
        if hits.len() < MAX_HITS && !hits.iter().any(|o| o.what == h.what) {
            hits.push(h);
        }
    };
    for report in reports {
        match report {
            Report::OutOfMemory { limit_mb } => add(Hit {
                what: "memory".into(),
                layer: "sandbox (bounds)",
                why: format!(
                    "the command's processes used more than tools-shell's limits.memory_mb \
                     ({limit_mb} MiB) and were killed"
                ),
                remedy: "a person can raise tools-shell's limits.memory_mb in daemon.toml".into(),
            }),
            Report::Refused { path, wall } => add(Hit {
                what: path.display().to_string(),
                layer: "sandbox (in-run walls)",
                why: wall.clone(),
                remedy: if wall.starts_with(super::WRITTEN) {
                    "a person can change it on the host".into()
                } else if !wall.contains("`.git`") {
                    "a person can create it on the host, after reading what it would hold".into()
                } else {
                    "a person can create it on the host; a command may make repositories \
                     outside the roots (/tmp), or in them when a person sets tools-shell's \
                     config.new_repositories = \"allow\""
                        .into()
                },
            }),
            Report::SetupFailed { .. } | Report::Ended { .. } => {}
        }
    }
    for line in stderr.lines() {
        if line.starts_with(LAUNCHER_LINE) {
            continue;
        }
        // A rename over or a removal of a read-only bind (a protected file) fails busy.
        let denied = line.contains("Permission denied")
            || line.contains("Operation not permitted")
            || line.contains("Device or resource busy");
        let read_only = line.contains("Read-only file system");
        if !denied && !read_only {
            continue;
        }
        for name in named_paths(line) {
            let p = lexical(&cwd.join(name));
            let under = |w: &PathBuf| p == *w || p.starts_with(w);
            let wall = if masked.iter().any(under) {
                Some((
                    "a denied or secret path, masked in the sandbox",
                    "a person can remove it from sandbox.deny or sandbox.secret_patterns, or \
                     read it on the host",
                ))
            } else if protected.iter().any(under) {
                Some((
                    "a protected path, read-only to commands",
                    "a person can change it on the host (sandbox-profiles/protected.txt, \
                     sandbox.protected_extra)",
                ))
            } else {
                match roots
                    .iter()
                    .filter(|(r, _)| p.starts_with(r))
                    .max_by_key(|(r, _)| r.components().count())
                {
                    Some((_, false)) => Some((
                        "a read-only root",
                        "a person can make the root writable in daemon.toml (write = true)",
                    )),
                    Some((_, true)) => None,
                    None if read_only && !p.starts_with("/tmp") && !p.starts_with("/dev") => {
                        Some((
                            "outside the roots: the sandbox's system folders are read-only",
                            "write inside a root or /tmp; a person can add a root in daemon.toml",
                        ))
                    }
                    None => None,
                }
            };
            if let Some((why, remedy)) = wall {
                add(Hit {
                    what: p.display().to_string(),
                    layer: "sandbox (filesystem)",
                    why: why.into(),
                    remedy: remedy.into(),
                });
            }
        }
    }
    hits
}

/// Paths an error line names: quoted ones (`'…'`, `"…"`, `‘…’`), and `word:` fields before the
/// error text (`bash: .envrc: Permission denied`).
fn named_paths(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for (open, close) in [('\'', '\''), ('"', '"'), ('‘', '’')] {
        let mut rest = line;
        while let Some(i) = rest.find(open) {
            let after = &rest[i + open.len_utf8()..];
            let Some(j) = after.find(close) else { break };
            out.push(&after[..j]);
            rest = &after[j + close.len_utf8()..];
        }
    }
    for field in line.split(": ").map(str::trim) {
        let field = field.strip_prefix("cannot create ").unwrap_or(field);
        if field.contains('/') || field.starts_with('.') {
            out.push(field);
        }
    }
    out.retain(|p| !p.is_empty() && !p.contains(' ') && p.len() < 4096);
    out
}

/// `..` and `.` taken out by name (the daemon cannot resolve the sandbox's view of links).
fn lexical(p: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in p.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::Normal(n) => out.push(n),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_creates_come_from_reports_and_wall_errors_from_stderr() {
        let root = |p: &str, writable| crate::launcher::Root { path: p.into(), writable };
        let spec = crate::launcher::Spec::builder(crate::launcher::Confinement {
            roots: vec![root("/w", true), root("/ro", false)],
            protected: vec!["/w/.git/config".into()],
            protected_rules: vec![],
            masked: vec!["/w/.env".into()],
            system: vec![],
            home: "/h".into(),
        })
        .build(vec!["true".into()], "/w".into());
        // A line in the launcher's format on stderr is the command's own: never a hit, even
        // one that also says "Permission denied" about a walled path.
        let err = "hands sandbox: refused creating /w/forged/.git: a `.git` folder\n\
                   hands sandbox: refused creating /w/.env: Permission denied\n\
                   cat: .env: Permission denied\n\
                   bash: line 1: /w/.git/config: Read-only file system\n\
                   touch: cannot touch '/ro/x': Read-only file system\n\
                   touch: cannot touch '/w/ok': Permission denied\n\
                   sh: 1: cannot create /usr/x: Read-only file system\n";
        let reports = [
            Report::Refused { path: "/w/sub/.git".into(), wall: "a `.git` folder".into() },
            Report::OutOfMemory { limit_mb: 64 },
        ];
        let hits = walls_hit(&reports, err, &spec);
        let what: Vec<&str> = hits.iter().map(|h| h.what.as_str()).collect();
        assert_eq!(what, ["/w/sub/.git", "memory", "/w/.env", "/w/.git/config", "/ro/x", "/usr/x"]);
        assert_eq!(hits[0].layer, "sandbox (in-run walls)");
        assert!(hits[1].why.contains("64 MiB"), "{:?}", hits[1]);
        assert!(
            walls_hit(&[], "hands sandbox: refused creating /w/x: a `.git` folder", &spec)
                .is_empty()
        );
    }
}
