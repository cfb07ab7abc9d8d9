//! `deny` and `confirm` where programs run (issue 37 point 1, decision 0067): the files of the
//! denied and confirm-listed programs, found once when the configuration is loaded, are masked
//! in every run that may not use them — a masked program cannot be executed, read or mapped by
//! the loader, whatever runs it (`rg --pre`, `sed e`, `find -exec`, a git config, `ld.so`).
//!
//! A program is every file its name resolves to in a folder of the module's `path` or of the
//! system's bin folders, under each of its names: the real file behind a link (`/bin/sh` is
//! `dash`, `rbash` is `bash`), every other hard link to it in the system folders, and the
//! multi-call binaries of `sandbox-profiles/multicall.txt` (`busybox`, `toybox`: each can be
//! any program). Entries with arguments (`kubectl delete`) are a form of a program, not a
//! program: they are checked on the argv only.

use crate::allow::{Entry, Policy};
use std::collections::BTreeSet;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The system's bin folders, looked in besides the module's `path`.
const BIN_FOLDERS: &[&str] =
    &["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"];

/// Entries a walk for other hard links visits at most, per walk.
const LINK_WALK_LIMIT: usize = 500_000;

/// The files of one group of programs, and their identities.
#[derive(Debug, Clone, Default)]
pub struct Files {
    /// The names the entries gave (and the multi-call binaries'), for telling a person which
    /// program a command missed.
    pub names: Vec<String>,
    /// Every name to mask (absolute, real folders).
    pub paths: Vec<PathBuf>,
    /// (device, inode) of each file.
    pub ids: BTreeSet<(u64, u64)>,
}

/// The denied and the confirm-listed programs' files.
#[derive(Debug, Clone, Default)]
pub struct Hidden {
    pub denied: Files,
    pub confirm: Files,
}

/// The multi-call binaries (`sandbox-profiles/multicall.txt`).
fn multicall() -> impl Iterator<Item = &'static str> {
    include_str!("../../../sandbox-profiles/multicall.txt")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
}

impl Hidden {
    /// The files of `policy`'s bare deny and confirm entries, looked up in `path` and the
    /// system's bin folders; `system` are the folders a walk for other hard links covers.
    pub fn load(policy: &Policy, path: &str, system: &[PathBuf]) -> Hidden {
        let folders = folders(path);
        let group = |entries: &[Entry]| -> Files {
            let names: Vec<String> = entries
                .iter()
                .filter_map(|e| match e {
                    Entry::Prefix { bin, args } if args.is_empty() => Some(bin.clone()),
                    _ => None,
                })
                .collect();
            let mut names = names;
            if !names.is_empty() {
                names.extend(multicall().map(str::to_string));
            }
            Files { names: names.clone(), ..files(&names, &folders, system) }
        };
        Hidden { denied: group(&policy.deny), confirm: group(&policy.confirm) }
    }
}

/// The programs of `group` a command's `stderr` says it could not run (a line naming one as a
/// word, with "Permission denied": how a shell, `env` or a library reports a masked file).
pub fn missed<'a>(group: &'a Files, stderr: &str) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    for line in stderr.lines().filter(|l| l.contains("Permission denied")) {
        let words: Vec<&str> =
            line.split(|c: char| !(c.is_alphanumeric() || matches!(c, '-' | '_' | '.'))).collect();
        for n in &group.names {
            if words.contains(&n.as_str()) && !out.contains(&n.as_str()) {
                out.push(n);
            }
        }
    }
    out
}

/// The folders a name is looked up in: `path`'s absolute ones, then the system's, each once
/// by its real path.
fn folders(path: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for d in path.split(':').chain(BIN_FOLDERS.iter().copied()) {
        if !Path::new(d).is_absolute() {
            continue;
        }
        let Ok(real) = std::fs::canonicalize(d) else { continue };
        if !out.contains(&real) {
            out.push(real);
        }
    }
    out
}

fn files(names: &[String], folders: &[PathBuf], system: &[PathBuf]) -> Files {
    let mut f = Files::default();
    let mut linked: Vec<(u64, u64)> = Vec::new();
    for name in names {
        for dir in folders {
            let Ok(real) = std::fs::canonicalize(dir.join(name)) else { continue };
            let Ok(m) = std::fs::metadata(&real) else { continue };
            if !m.is_file() {
                continue;
            }
            if f.ids.insert((m.dev(), m.ino())) && m.nlink() > 1 {
                linked.push((m.dev(), m.ino()));
            }
            if !f.paths.contains(&real) {
                f.paths.push(real);
            }
        }
    }
    if !linked.is_empty() {
        for p in other_names(&linked, system) {
            if !f.paths.contains(&p) {
                f.paths.push(p);
            }
        }
    }
    f
}

/// Every file under `system` (not crossing into another file system) that is one of `ids`.
fn other_names(ids: &[(u64, u64)], system: &[PathBuf]) -> Vec<PathBuf> {
    let devs: BTreeSet<u64> = ids.iter().map(|(d, _)| *d).collect();
    let mut out = Vec::new();
    let mut todo: Vec<PathBuf> = system
        .iter()
        .filter_map(|s| std::fs::canonicalize(s).ok())
        .filter(|s| std::fs::metadata(s).is_ok_and(|m| devs.contains(&m.dev())))
        .collect();
    let mut seen = 0usize;
    while let Some(dir) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for e in entries.flatten() {
            seen += 1;
            if seen > LINK_WALK_LIMIT {
                tracing::warn!(
                    "stopped looking for other names of denied or confirm-listed programs after \
                     {LINK_WALK_LIMIT} entries of the system folders"
                );
                return out;
            }
            let Ok(m) = e.metadata() else { continue };
            if m.is_dir() && !m.file_type().is_symlink() {
                if devs.contains(&m.dev()) {
                    todo.push(e.path());
                }
            } else if m.is_file() && m.nlink() > 1 && ids.contains(&(m.dev(), m.ino())) {
                out.push(e.path());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_is_every_name_of_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let (bin, lib) = (base.join("bin"), base.join("lib"));
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(lib.join("deep")).unwrap();
        std::fs::write(bin.join("del"), "x").unwrap();
        std::fs::hard_link(bin.join("del"), lib.join("deep/other-name")).unwrap();
        std::os::unix::fs::symlink("del", bin.join("rdel")).unwrap();
        std::fs::write(bin.join("keep"), "y").unwrap();
        let policy = Policy::new(&["*".into()], &["del".into(), "a b".into()], Some(&[])).unwrap();
        let h = Hidden::load(&policy, bin.to_str().unwrap(), std::slice::from_ref(&base));
        let mut got = h.denied.paths.clone();
        got.retain(|p| p.starts_with(&base));
        got.sort();
        assert_eq!(got, vec![bin.join("del"), lib.join("deep/other-name")]);
        assert!(h.confirm.paths.is_empty(), "no confirm entries, nothing hidden for them");
    }
}
