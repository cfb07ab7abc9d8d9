//! "command not found" for a program the person has (issue 36 point 2): a `bash` command that
//! fails because a program is not on the commands' `PATH`, while the person's own `PATH` (the
//! daemon's, at startup) has it, gets a `denied` entry naming where it is and the lines to add
//! — so an agent tells the person what to change instead of guessing at a broken toolchain.

use crate::bash::Denied;
use std::path::{Path, PathBuf};

/// At most this many programs are named per command (a script with many missing names is
/// not helped by a long list).
const MAX: usize = 4;

/// The programs `stderr` says were not found: bash's `NAME: command not found` (with or without
/// `bash: line N:` before it) and dash's `sh: N: NAME: not found`.
pub fn not_found_names(stderr: &str) -> Vec<String> {
    let mut names = Vec::new();
    for line in stderr.lines() {
        let line = line.trim_end();
        let rest =
            line.strip_suffix(": command not found").or_else(|| line.strip_suffix(": not found"));
        let Some(rest) = rest else { continue };
        let name = rest.rsplit(": ").next().unwrap_or(rest).trim();
        let plain = !name.is_empty()
            && name.len() <= 128
            && !name.contains('/')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || "._+-".contains(c));
        if plain && !names.iter().any(|n| n == name) {
            names.push(name.to_string());
            if names.len() == MAX {
                break;
            }
        }
    }
    names
}

/// The first folder of `path` (a `PATH` value) holding an executable `name`.
fn lookup(path: &str, name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    path.split(':').filter(|d| d.starts_with('/')).map(Path::new).find_map(|d| {
        let p = d.join(name);
        std::fs::metadata(&p)
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            .then(|| d.to_path_buf())
    })
}

/// A `denied` entry for each program `stderr` says was not found that `person_path` has and
/// `command_path` (the commands' `PATH`) does not.
pub fn missing_programs(stderr: &str, person_path: &str, command_path: &str) -> Vec<Denied> {
    not_found_names(stderr)
        .into_iter()
        .filter(|name| lookup(command_path, name).is_none())
        .filter_map(|name| {
            let dir = lookup(person_path, &name)?;
            let install = match dir.file_name() {
                Some(n) if n == "bin" => dir.parent().unwrap_or(&dir).to_path_buf(),
                _ => dir.clone(),
            };
            Some(Denied {
                what: name.clone(),
                layer: "sandbox (view)".into(),
                why: format!(
                    "`{name}` is not on the commands' PATH; on the person's PATH it is {}",
                    dir.join(&name).display()
                ),
                remedy: format!(
                    "a person adds {} to tools-shell's config `path` and its install folder \
                     {} as a read-only root (filesystem = [..., {{ path = \"{}\" }}]) — \
                     `hands init` writes such a config for a project",
                    dir.display(),
                    install.display(),
                    install.display()
                ),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_from_bash_and_dash() {
        let err = "bash: line 1: cargo: command not found\nsh: 1: node: not found\n\
                   x: command not found\nbash: ./build.sh: No such file\n\
                   bash: line 2: /opt/x/bin/y: command not found\nbash: cargo: command not found\n";
        assert_eq!(not_found_names(err), ["cargo", "node", "x"]);
        let many: String =
            (0..10).map(|i| format!("bash: line {i}: p{i}: command not found\n")).collect();
        assert_eq!(not_found_names(&many).len(), MAX);
    }

    #[test]
    fn only_what_the_person_has_and_commands_lack() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("tool/bin");
        std::fs::create_dir_all(&bin).unwrap();
        let prog = bin.join("fixture-prog");
        std::fs::write(&prog, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).unwrap();
        let person = format!("/usr/bin:{}", bin.display());
        let err = "bash: line 1: fixture-prog: command not found\n\
                   bash: line 2: nowhere-prog: command not found\n";
        let d = missing_programs(err, &person, "/usr/bin:/bin");
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].what, "fixture-prog");
        assert!(d[0].remedy.contains(&bin.display().to_string()), "{}", d[0].remedy);
        assert!(d[0].remedy.contains(&dir.path().join("tool").display().to_string()));
        // Already on the commands' PATH: not the problem, so nothing is said.
        assert!(missing_programs(err, &person, &person).is_empty());
    }
}
