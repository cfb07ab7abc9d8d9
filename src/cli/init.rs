//! `hands init`: writes the person's `daemon.toml` (`$XDG_CONFIG_HOME/hands/daemon.toml`, else
//! `~/.config/hands/daemon.toml`) for the project in the current folder, with the toolchains
//! found on this machine made visible to commands, read-only. Found by a newcomer: with the
//! embedded default a Rust user's `cargo` was "command not found" — rustup's `~/.cargo/bin`
//! and `~/.rustup` lie outside the sandbox's view, and nothing said so.
//!
//! What it adds, each only where it exists: rustup's toolchains (`~/.rustup`, and
//! `~/.cargo/bin` for its proxies unless that folder holds `hands` itself — then the default
//! toolchain's own `bin`), the project's Python virtual environment (`.venv`, `venv`) and the
//! interpreter it links to, nvm's default Node, and any other toolchain program (`go`, `node`,
//! `python3`, `uv`, `deno`, `bun`, `java`, …) found on the person's PATH outside the system
//! folders — its install folder, read-only. Never a folder that is, holds or lies above the
//! home, a credential path, or the `hands` binary and its launcher.

use super::printout::out;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Programs whose install folder a project's commands usually need.
const TOOLCHAIN_PROGRAMS: &[&str] = &[
    "cargo", "rustc", "go", "node", "npm", "npx", "pnpm", "yarn", "deno", "bun", "python3", "uv",
    "java", "mvn", "gradle", "zig", "dotnet", "ruby", "gem", "bundle",
];

/// Folders every command already sees (the launcher's system folders).
const SYSTEM: &[&str] = &["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc", "/opt"];

/// What `init` found: read-only roots for tools-shell, PATH folders before the system's, and
/// variables a toolchain reads. Each with the reason it is there.
#[derive(Debug, Default)]
struct Found {
    roots: Vec<(PathBuf, String)>,
    path: Vec<PathBuf>,
    env: Vec<(String, String)>,
    skipped: Vec<String>,
}

impl Found {
    fn root(&mut self, p: PathBuf, why: &str) {
        if !self.roots.iter().any(|(r, _)| p.starts_with(r)) {
            self.roots.retain(|(r, _)| !r.starts_with(&p));
            self.roots.push((p, why.to_string()));
        }
    }

    fn path(&mut self, p: PathBuf) {
        if !self.path.contains(&p) {
            self.path.push(p);
        }
    }
}

/// What a folder may not be: the home or above it, holding a credential path, holding `hands`.
struct Never {
    home: PathBuf,
    credentials: Vec<PathBuf>,
    binaries: Vec<PathBuf>,
}

impl Never {
    fn why_not(&self, dir: &Path) -> Option<String> {
        if self.home.starts_with(dir) {
            return Some(format!("{} is or holds the home", dir.display()));
        }
        if let Some(c) = self.credentials.iter().find(|c| c.starts_with(dir)) {
            return Some(format!("{} holds the credential path {}", dir.display(), c.display()));
        }
        if let Some(b) = self.binaries.iter().find(|b| b.starts_with(dir)) {
            return Some(format!(
                "{} holds {}, which commands must not see",
                dir.display(),
                b.display()
            ));
        }
        None
    }
}

pub(super) fn init(force: bool, print: bool) -> ExitCode {
    let Some(home) = crate::config::home_dir() else {
        out(
            "hands init: HOME is not set; set it (or write daemon.toml by hand, see daemon.toml.example)",
        );
        return ExitCode::from(1);
    };
    let project = match std::env::current_dir().and_then(std::fs::canonicalize) {
        Ok(p) => p,
        Err(e) => {
            out(&format!("hands init: cannot use the current folder: {e}"));
            return ExitCode::from(1);
        }
    };
    if home.starts_with(&project) {
        out(&format!(
            "hands init: {} is or holds your home; run it from a project folder, which becomes \
             the writable root",
            project.display()
        ));
        return ExitCode::from(1);
    }
    // Where every subcommand looks for it (`config::locate`).
    let target =
        crate::config::user_config_file().unwrap_or_else(|| home.join(".config/hands/daemon.toml"));
    let text = render(&project, &detect(&project, &home));
    if print {
        out(&text);
        return ExitCode::SUCCESS;
    }
    if target.exists() && !force {
        out(&format!(
            "hands init: {} exists; nothing written. `hands init --print` shows what it would \
             write, `--force` replaces it",
            target.display()
        ));
        return ExitCode::from(1);
    }
    match write(&target, &text) {
        Ok(()) => {
            out(&text);
            out(&format!(
                "hands init: wrote {}; `hands check` shows the policy, `hands doctor` tries it",
                target.display()
            ));
            ExitCode::SUCCESS
        }
        Err(e) => {
            out(&format!("hands init: cannot write {}: {e}", target.display()));
            ExitCode::from(1)
        }
    }
}

/// The file, atomically (a temp file beside it, renamed), folder 0700 and file 0600.
#[expect(
    clippy::disallowed_methods,
    reason = "the person's own config folder, outside every root: this is the person's command"
)]
fn write(target: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let dir = target.parent().unwrap_or(Path::new("/"));
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    let tmp = dir.join(format!(".daemon.toml.{}", std::process::id()));
    let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
    let done = f.write_all(text.as_bytes()).and_then(|()| f.sync_all());
    if let Err(e) = done.and_then(|()| std::fs::rename(&tmp, target)) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(())
}

fn detect(project: &Path, home: &Path) -> Found {
    let mut found = Found::default();
    let exe = std::env::current_exe().and_then(std::fs::canonicalize).ok();
    let mut binaries: Vec<PathBuf> = exe.iter().cloned().collect();
    if let Some(dir) = exe.as_ref().and_then(|e| e.parent()) {
        binaries.push(dir.join("hands-sandbox"));
    }
    let never = Never {
        home: home.to_path_buf(),
        credentials: hands_sandbox::profiles::credentials()
            .map(|c| match c.strip_prefix("~/") {
                Some(rest) => home.join(rest),
                None => PathBuf::from(c),
            })
            .collect(),
        binaries,
    };
    rustup(home, &never, &mut found);
    venv(project, &never, &mut found);
    nvm(home, &never, &mut found);
    let person_path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&person_path) {
        for prog in TOOLCHAIN_PROGRAMS {
            let candidate = dir.join(prog);
            let Ok(real) = std::fs::canonicalize(&candidate) else { continue };
            if !is_executable(&real) || SYSTEM.iter().any(|s| real.starts_with(s)) {
                continue;
            }
            if found.roots.iter().any(|(r, _)| real.starts_with(r)) {
                continue;
            }
            // The install folder: the parent of its `bin`, else its own folder.
            let Some(bin) = real.parent() else { continue };
            let install = match bin.file_name() {
                Some(n) if n == "bin" => bin.parent().unwrap_or(bin).to_path_buf(),
                _ => bin.to_path_buf(),
            };
            match never.why_not(&install) {
                None => {
                    found.root(install, &format!("`{prog}` found on your PATH"));
                    found.path(bin.to_path_buf());
                    if dir.as_path() != bin {
                        found.path(dir.clone());
                    }
                }
                Some(why) => found.skipped.push(format!("`{prog}` ({}): {why}", real.display())),
            }
        }
    }
    found
}

/// rustup: `~/.rustup` read-only, `RUSTUP_HOME`, and its proxies in `~/.cargo/bin` — or, when
/// that folder holds `hands` (installed with cargo), the default toolchain's own `bin`.
fn rustup(home: &Path, never: &Never, found: &mut Found) {
    let rustup_home =
        std::env::var_os("RUSTUP_HOME").map(PathBuf::from).unwrap_or_else(|| home.join(".rustup"));
    let Ok(rustup_home) = std::fs::canonicalize(&rustup_home) else { return };
    if !rustup_home.join("toolchains").is_dir() {
        return;
    }
    if let Some(why) = never.why_not(&rustup_home) {
        found.skipped.push(format!("rustup: {why}"));
        return;
    }
    found.root(rustup_home.clone(), "rustup's toolchains");
    found.env.push(("RUSTUP_HOME".into(), rustup_home.display().to_string()));
    let cargo_bin = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| home.join(".cargo"))
        .join("bin");
    match std::fs::canonicalize(&cargo_bin) {
        Ok(bin) if bin.join("rustup").exists() && never.why_not(&bin).is_none() => {
            found.root(bin.clone(), "rustup's proxies (cargo, rustc, …)");
            found.path(bin);
        }
        _ => {
            // The default toolchain's binaries directly (rust-toolchain.toml files are then
            // not followed: a person can name another toolchain's bin in `path`).
            if let Some(tc) = default_toolchain(&rustup_home) {
                found.path(tc.join("bin"));
                found.skipped.push(format!(
                    "rustup's proxies in {} (that folder holds hands, or is missing): cargo and \
                     rustc come from {} directly",
                    cargo_bin.display(),
                    tc.display()
                ));
            }
        }
    }
}

/// `~/.rustup/settings.toml`'s `default_toolchain`, as a folder of `toolchains/` (`stable`
/// matches `stable-<host>`).
#[expect(
    clippy::disallowed_methods,
    reason = "reading the person's rustup settings; the person's own command"
)]
fn default_toolchain(rustup_home: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(rustup_home.join("settings.toml")).ok()?;
    let table: toml::Table = toml::from_str(&text).ok()?;
    let name = table.get("default_toolchain")?.as_str()?;
    let dir = rustup_home.join("toolchains");
    let exact = dir.join(name);
    if exact.join("bin").is_dir() {
        return Some(exact);
    }
    let mut matches: Vec<PathBuf> = std::fs::read_dir(&dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&format!("{name}-")))
        })
        .collect();
    matches.sort();
    matches.pop()
}

/// The project's virtual environment (`.venv`, `venv`): its `bin` first on PATH,
/// `VIRTUAL_ENV`, and the interpreter install it links to when that lies outside the system.
fn venv(project: &Path, never: &Never, found: &mut Found) {
    for name in [".venv", "venv"] {
        let venv = project.join(name);
        let python = venv.join("bin/python");
        if !python.exists() {
            continue;
        }
        found.path(venv.join("bin"));
        found.env.push(("VIRTUAL_ENV".into(), venv.display().to_string()));
        if let Ok(real) = std::fs::canonicalize(&python)
            && !SYSTEM.iter().any(|s| real.starts_with(s))
            && !real.starts_with(project)
            && let Some(install) = real.parent().and_then(Path::parent)
        {
            match never.why_not(install) {
                None => {
                    found.root(install.to_path_buf(), "the interpreter the project's venv uses")
                }
                Some(why) => found.skipped.push(format!("the venv's interpreter: {why}")),
            }
        }
        return;
    }
}

/// nvm's default Node (`~/.nvm/alias/default`, matched against `versions/node/`).
#[expect(
    clippy::disallowed_methods,
    reason = "reading the person's nvm alias; the person's own command"
)]
fn nvm(home: &Path, never: &Never, found: &mut Found) {
    let dir = std::env::var_os("NVM_DIR").map(PathBuf::from).unwrap_or_else(|| home.join(".nvm"));
    let Ok(alias) = std::fs::read_to_string(dir.join("alias/default")) else { return };
    let want = alias.trim().trim_start_matches('v').to_string();
    let Ok(entries) = std::fs::read_dir(dir.join("versions/node")) else { return };
    let mut versions: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .map(|n| n.trim_start_matches('v'))
                .is_some_and(|v| v == want || v.starts_with(&format!("{want}.")))
        })
        .collect();
    versions.sort();
    let Some(node) = versions.pop() else { return };
    match never.why_not(&node) {
        None => {
            found.root(node.clone(), "nvm's default Node");
            found.path(node.join("bin"));
        }
        Some(why) => found.skipped.push(format!("nvm: {why}")),
    }
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// A TOML string: quoted, with `\` and `"` escaped.
fn q(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

fn render(project: &Path, found: &Found) -> String {
    let project_s = q(&project.display().to_string());
    let mut t = String::new();
    let _ = writeln!(
        t,
        "# Written by `hands init` for {}.\n# Every key: daemon.toml.example. `hands check` shows \
         the resolved policy.\n",
        project.display()
    );
    let _ = writeln!(t, "[trust]\nread = \"allow\"\nwrite = \"allow\"\nexternal = \"ask\"\n");
    let _ = writeln!(
        t,
        "[[builtins]]\nid = \"tools-fs\"\ngrants = [\"filesystem\"]\nfilesystem = [{{ path = \
         {project_s}, write = true }}]\n"
    );
    let mut roots = vec![format!("{{ path = {project_s}, write = true }}")];
    for (r, _) in &found.roots {
        roots.push(format!("{{ path = {} }}", q(&r.display().to_string())));
    }
    let mut path: Vec<String> = found.path.iter().map(|p| p.display().to_string()).collect();
    path.extend(["/usr/local/bin", "/usr/bin", "/bin"].map(String::from));
    let _ = writeln!(t, "[[builtins]]\nid = \"tools-shell\"\ngrants = [\"filesystem\", \"spawn\"]");
    for (r, why) in &found.roots {
        let _ = writeln!(t, "# read-only: {} ({why})", r.display());
    }
    for s in &found.skipped {
        let _ = writeln!(t, "# not added: {s}");
    }
    let _ = writeln!(t, "filesystem = [{}]", roots.join(",\n              "));
    let mut config = vec![format!("path = {}", q(&path.join(":")))];
    if !found.env.is_empty() {
        let env: Vec<String> = found.env.iter().map(|(k, v)| format!("{k} = {}", q(v))).collect();
        config.push(format!("env = {{ {} }}", env.join(", ")));
    }
    let _ = writeln!(t, "config = {{ {} }}\n", config.join(",\n           "));
    let _ = writeln!(
        t,
        "[[builtins]]\nid = \"tools-git\"\ngrants = [\"filesystem\", \"spawn\"]\nfilesystem = \
         [{{ path = {project_s}, write = true }}]"
    );
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_the_home_a_credential_or_hands() {
        let never = Never {
            home: PathBuf::from("/home/p"),
            credentials: vec![PathBuf::from("/home/p/.cargo/credentials.toml")],
            binaries: vec![PathBuf::from("/home/p/.cargo/bin/hands")],
        };
        assert!(never.why_not(Path::new("/home")).is_some());
        assert!(never.why_not(Path::new("/home/p")).is_some());
        assert!(never.why_not(Path::new("/home/p/.cargo")).is_some());
        assert!(never.why_not(Path::new("/home/p/.cargo/bin")).is_some());
        assert!(never.why_not(Path::new("/home/p/.rustup")).is_none());
    }

    #[test]
    fn the_file_parses_and_names_what_was_found() {
        let mut found = Found::default();
        found.root(PathBuf::from("/home/p/.rustup"), "rustup's toolchains");
        found.root(PathBuf::from("/home/p/.rustup/toolchains"), "inside the first: dropped");
        found.path(PathBuf::from("/home/p/.rustup/toolchains/stable/bin"));
        found.env.push(("RUSTUP_HOME".into(), "/home/p/.rustup".into()));
        let text = render(Path::new("/srv/my \"proj\""), &found);
        let parsed: toml::Table = toml::from_str(&text).unwrap();
        let builtins = parsed["builtins"].as_array().unwrap();
        assert_eq!(builtins.len(), 3);
        let shell = &builtins[1];
        let fs = shell["filesystem"].as_array().unwrap();
        assert_eq!(fs.len(), 2, "{text}");
        assert_eq!(fs[1]["path"].as_str(), Some("/home/p/.rustup"));
        assert!(fs[1].get("write").is_none(), "toolchains are read-only: {text}");
        let path = shell["config"]["path"].as_str().unwrap();
        assert!(path.starts_with("/home/p/.rustup/toolchains/stable/bin:"), "{path}");
        assert_eq!(shell["config"]["env"]["RUSTUP_HOME"].as_str(), Some("/home/p/.rustup"));
        assert_eq!(builtins[0]["filesystem"][0]["path"].as_str(), Some("/srv/my \"proj\""));
    }
}
