//! What the daemon tells a person: the startup banner, the resolved policy (`hands check`) and
//! the doctor's findings (`hands doctor`).

use crate::config::{Grant, ModuleId, ModuleSettings, SandboxMode};
use crate::server::Daemon;
use std::fmt::Write as _;
use std::io::Write as _;
use std::process::Command;

/// Prints a report on stdout. Only `check` and `doctor` call it; `serve` never does, because
/// on stdio, stdout is the protocol.
pub fn out(s: &str) {
    let mut o = std::io::stdout().lock();
    let _ = writeln!(o, "{s}");
}

fn roots_summary(daemon: &Daemon, id: ModuleId) -> String {
    daemon
        .config
        .modules
        .iter()
        .find(|m| m.id == id)
        .map(|m| {
            m.roots
                .iter()
                .map(|r| format!("{} ({})", r.path.display(), if r.writable { "rw" } else { "ro" }))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default()
}

/// The one-line startup banner (stderr).
pub fn banner(daemon: &Daemon, transport: &str) -> String {
    let c = &daemon.config;
    let mut s = format!("hands {} · {transport} · config: {}", env!("CARGO_PKG_VERSION"), c.source);
    for m in &c.modules {
        let _ = write!(
            s,
            " · {}: {} (trust: read {}, write {}, external {})",
            m.id.name(),
            roots_summary(daemon, m.id),
            m.trust.read,
            m.trust.write,
            m.trust.external
        );
    }
    let unavailable = daemon.unavailable_modules();
    if !unavailable.is_empty() {
        let names: Vec<_> = unavailable.iter().map(|m| m.name()).collect();
        let _ = write!(s, " · no tools published: {}", names.join(", "));
    }
    if let Some(p) = daemon.self_test() {
        let _ = write!(s, " · containment: {} (sandbox self-test)", p.tier());
        if c.sandbox_mode == SandboxMode::Enforce && !p.missing().is_empty() {
            let _ = write!(s, " · sandbox.mode = enforce: commands refuse to run");
        }
    } else {
        let _ = write!(s, " · containment: no module runs commands");
    }
    s
}

/// The resolved policy, as `hands check` prints it.
pub fn policy(daemon: &Daemon) -> String {
    let c = &daemon.config;
    let mut s = String::new();
    let _ = writeln!(s, "config: {}", c.source);
    let _ = writeln!(s, "state_dir: {}", c.state_dir.display());
    let _ = writeln!(
        s,
        "trust: read = {}, write = {}, external = {}, approval_timeout_secs = {}",
        c.trust.read, c.trust.write, c.trust.external, c.trust.approval_timeout_secs
    );
    let _ = writeln!(
        s,
        "sandbox: mode = {}, deny = [{}]",
        match c.sandbox_mode {
            SandboxMode::Enforce => "enforce",
            SandboxMode::BestEffort => "best-effort",
        },
        c.deny.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", ")
    );
    let _ = writeln!(s, "secret_patterns: {}", c.secret_patterns.join(", "));
    if let Some(h) = &c.http {
        let clients: Vec<String> = h
            .clients
            .iter()
            .map(|cl| match (&cl.token_env, &cl.token_file) {
                (Some(v), _) => format!("{} (token from ${v})", cl.name),
                (None, Some(f)) => format!("{} (token from {})", cl.name, f.display()),
                (None, None) => cl.name.clone(),
            })
            .collect();
        let _ = writeln!(
            s,
            "http: listen {}, allowed_hosts [{}], clients [{}]",
            h.listen,
            h.allowed_hosts.join(", "),
            clients.join(", ")
        );
    }
    if let Some(d) = &c.dashboard {
        let token = match (&d.token_env, &d.token_file) {
            (Some(v), _) => format!("${v}"),
            (None, Some(f)) => f.display().to_string(),
            (None, None) => "none".to_string(),
        };
        let _ = writeln!(s, "dashboard: listen {}, login token from {token}", d.listen);
    }
    for m in &c.modules {
        let grants: Vec<_> = m.grants.iter().map(|g| g.name()).collect();
        let _ = writeln!(s, "module {}:", m.id.name());
        let _ = writeln!(s, "  grants: {}", grants.join(", "));
        for r in &m.roots {
            let _ = writeln!(
                s,
                "  root: {} ({})",
                r.path.display(),
                if r.writable { "read-write" } else { "read-only" }
            );
        }
        let _ = writeln!(
            s,
            "  trust: read = {}, write = {}, external = {}",
            m.trust.read, m.trust.write, m.trust.external
        );
        match &m.settings {
            ModuleSettings::Shell(sh) => {
                let _ = writeln!(
                    s,
                    "  settings: path = {}, output_chars = {}, max_concurrent = {}, bash = {}",
                    sh.path.as_deref().unwrap_or("(system folders)"),
                    sh.output_chars.unwrap_or(30_000),
                    sh.max_concurrent.unwrap_or(4),
                    sh.bash.unwrap_or(true)
                );
                if let Ok(p) = sh.policy() {
                    let list = |l: &[hands_shell::allow::Entry]| {
                        l.iter().map(|e| format!("\"{e}\"")).collect::<Vec<_>>().join(", ")
                    };
                    let _ = writeln!(
                        s,
                        "  commands: allow [{}], deny [{}], confirm [{}]; run_output_chars = {}",
                        list(&p.allow),
                        list(&p.deny),
                        list(&p.confirm),
                        sh.run_output_chars.unwrap_or(hands_shell::run::DEFAULT_OUTPUT_CHARS)
                    );
                }
                let unmade = daemon.shell().map_or(&[][..], |s| s.unmade_placeholders());
                if !unmade.is_empty() {
                    let list: Vec<_> = unmade.iter().map(|p| p.display().to_string()).collect();
                    let _ = writeln!(
                        s,
                        "  placeholders: `hands serve` creates these empty, so that commands \
                         cannot create the protected or denied paths there: {}",
                        list.join(", ")
                    );
                }
            }
            ModuleSettings::Git(g) => {
                let author = match (&g.author_name, &g.author_email) {
                    (Some(n), Some(e)) => format!("{n} <{e}>"),
                    _ => "the repository's identity".to_string(),
                };
                let push = match &g.push {
                    None => "off".to_string(),
                    Some(p) => format!(
                        "to {} for [{}], ssh agent {}, host keys {}",
                        p.remote.as_deref().unwrap_or("origin"),
                        p.branches.clone().unwrap_or_else(|| vec!["task/*".into()]).join(", "),
                        p.ssh_auth_sock
                            .as_deref()
                            .filter(|s| !s.is_empty())
                            .unwrap_or("$SSH_AUTH_SOCK"),
                        p.known_hosts
                            .as_deref()
                            .filter(|s| !s.is_empty())
                            .unwrap_or("recorded on first use in the state dir")
                    ),
                };
                let _ = writeln!(s, "  settings: author = {author}, push = {push}");
            }
            ModuleSettings::Fs => {}
        }
        let tools: Vec<_> = daemon
            .tools()
            .iter()
            .filter(|t| t.module == m.id)
            .map(|t| t.tool.name.to_string())
            .collect();
        if tools.is_empty() {
            let _ = writeln!(s, "  tools: none");
        } else {
            let _ = writeln!(s, "  tools: {}", tools.join(", "));
        }
    }
    s.trim_end().to_string()
}

/// SPEC §4.4's doctor warnings for tools-shell's `commands` and `tools`: `allow = ["*"]`, a
/// published tool `allow` does not admit (or `deny` refuses, or PATH lacks), an empty
/// description, two entries with one name; and a PATH folder inside a writable root, where a
/// command could plant a program under an allowed name.
fn shell_warnings(sh: &crate::config::ShellConfig, m: &crate::config::ModuleCfg) -> Vec<String> {
    use hands_shell::allow::{Entry, tool_name};
    let mut w = Vec::new();
    let Ok(policy) = sh.policy() else { return w };
    if policy.allows_everything() {
        w.push(
            "tools-shell: commands.allow = [\"*\"] admits every program on the module's PATH \
             (only deny and confirm still stop one)"
                .to_string(),
        );
    }
    let path = sh.command_path();
    let mut seen: Vec<(String, usize)> = Vec::new();
    for (i, t) in sh.tools.iter().enumerate() {
        let Ok(name) = tool_name(&t.bin, &t.args) else { continue };
        let fixed: Vec<String> = std::iter::once(t.bin.clone()).chain(t.args.clone()).collect();
        // Admitted when some entry could match a call: its tokens and the fixed ones agree
        // as far as both go.
        let admitted = policy.allow.iter().any(|e| match e {
            Entry::Any => true,
            Entry::Prefix { bin, args } => {
                bin == &t.bin && args.iter().zip(&t.args).all(|(a, b)| a == b)
            }
        });
        if !admitted {
            w.push(format!(
                "tools-shell: tools[{i}] publishes `{name}`, but commands.allow does not admit \
                 `{}`: every call is refused",
                fixed.join(" ")
            ));
        } else if let Some(d) = policy.deny.iter().find(|e| e.matches(&fixed)) {
            w.push(format!(
                "tools-shell: tools[{i}] publishes `{name}`, but commands.deny lists `{d}`: \
                 every call is refused"
            ));
        }
        if hands_shell::allow::resolve(&t.bin, &path).is_none() {
            w.push(format!(
                "tools-shell: tools[{i}] publishes `{name}`, but `{}` is not on the module's \
                 PATH ({path})",
                t.bin
            ));
        }
        if t.description.trim().is_empty() {
            w.push(format!(
                "tools-shell: tools[{i}] (`{name}`) has an empty description; a model sees only \
                 the command line"
            ));
        }
        match seen.iter().find(|(n, _)| *n == name) {
            Some((_, first)) => w.push(format!(
                "tools-shell: tools[{first}] and tools[{i}] would both publish `{name}`; only \
                 tools[{first}] is published"
            )),
            None => seen.push((name, i)),
        }
    }
    for dir in path.split(':').filter(|d| std::path::Path::new(d).is_absolute()) {
        let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.into());
        if let Some(r) = m.roots.iter().find(|r| r.writable && dir.starts_with(&r.path)) {
            w.push(format!(
                "tools-shell: PATH folder {} lies in the writable root {}: a command can put a \
                 program there under an allowed name",
                dir.display(),
                r.path.display()
            ));
        }
    }
    w
}

/// The first line a program prints for its version flag (`tmux -V`, `git --version`).
fn version_of(bin: &str, flag: &str) -> Option<String> {
    let out = Command::new(bin).arg(flag).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    Some(text.lines().next().unwrap_or("").trim().to_string())
}

/// The doctor's findings beyond `check`: tool versions and warnings (SPEC §9).
pub fn doctor(daemon: &Daemon) -> String {
    let c = &daemon.config;
    let mut warnings = Vec::new();
    if c.sandbox_mode == SandboxMode::BestEffort {
        warnings.push(
            "sandbox.mode = \"best-effort\": commands may run with less than full containment"
                .to_string(),
        );
    }
    let default_secrets: Vec<String> =
        crate::profiles::secret_patterns().map(str::to_string).collect();
    if c.secret_patterns != default_secrets {
        warnings.push("sandbox.secret_patterns differs from the default list".to_string());
    }
    for m in &c.modules {
        if m.has(Grant::Network) && m.trust.external == crate::config::TrustAction::Allow {
            warnings.push(format!(
                "{}: trust.external = \"allow\" with the network grant: a model can reach the network without a person",
                m.id.name()
            ));
        }
        let lists = crate::server::policy_lists(c);
        for r in &m.roots {
            for cred in lists.credentials.iter().chain(lists.deny.iter()) {
                if cred.starts_with(&r.path) && cred.exists() {
                    warnings.push(format!(
                        "{}: root {} contains the denied path {} (it stays refused)",
                        m.id.name(),
                        r.path.display(),
                        cred.display()
                    ));
                }
            }
        }
    }
    if let Some(h) = &c.http {
        if h.listen.parse::<std::net::SocketAddr>().is_ok_and(|a| !a.ip().is_loopback()) {
            warnings.push(format!(
                "[server.http] listens on {}, not a loopback address: whoever holds a client's \
                 token reaches the tools from the network (hands speaks plain HTTP; put TLS in \
                 front)",
                h.listen
            ));
        }
        // The same checks `serve` makes first: tokens present, long enough, distinct.
        if let Err(e) = crate::http::Setup::new(Some(h), None) {
            warnings.push(format!("`hands serve` would refuse to start: {e:#}"));
        }
        for cl in &h.clients {
            let Some(file) = &cl.token_file else { continue };
            if let Ok(meta) = std::fs::metadata(file) {
                use std::os::unix::fs::PermissionsExt as _;
                if meta.permissions().mode() & 0o077 != 0 {
                    warnings.push(format!(
                        "[[server.http.clients]] `{}`: token_file {} is readable by other users \
                         (mode {:o}); `chmod 600` it",
                        cl.name,
                        file.display(),
                        meta.permissions().mode() & 0o777
                    ));
                }
            }
        }
    }
    if let Some(d) = &c.dashboard {
        if d.listen.parse::<std::net::SocketAddr>().is_ok_and(|a| !a.ip().is_loopback()) {
            warnings.push(format!(
                "[server.dashboard] listens on {}, not a loopback address: the person's page \
                 (approvals, the brake) is reachable from the network over plain HTTP",
                d.listen
            ));
        }
        if let Err(e) = crate::dashboard::Setup::new(c) {
            warnings.push(format!("`hands serve` would refuse to start: {e:#}"));
        }
    }
    for m in &c.modules {
        if let ModuleSettings::Shell(sh) = &m.settings {
            warnings.extend(shell_warnings(sh, m));
        }
    }
    for id in daemon.unavailable_modules() {
        let why = if id == ModuleId::Shell && !cfg!(target_os = "linux") {
            ": commands can be contained only on Linux"
        } else {
            ""
        };
        warnings.push(format!("{} is declared but publishes no tools{why}", id.name()));
    }
    let mut s = String::from("doctor:\n");
    for (bin, flag) in [("tmux", "-V"), ("git", "--version")] {
        let _ = writeln!(
            s,
            "  {bin}: {}",
            version_of(bin, flag).unwrap_or_else(|| "not found".to_string())
        );
    }
    if let Some(p) = daemon.self_test() {
        let _ = writeln!(s, "  sandbox self-test: {}\n{}", p.tier(), p.table());
        for m in p.missing() {
            warnings.push(format!("sandbox guarantee missing: {m}"));
        }
    } else {
        let _ = writeln!(s, "  sandbox self-test: no module runs commands");
    }
    if warnings.is_empty() {
        let _ = writeln!(s, "warnings: none");
    } else {
        for w in warnings {
            let _ = writeln!(s, "warning: {w}");
        }
    }
    s.trim_end().to_string()
}
