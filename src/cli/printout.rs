//! What the daemon tells a person: the startup banner, the resolved policy (`hands check`)
//! and what the file alone shows is wrong with it; the doctor's findings are in `doctor.rs`.

use crate::config;
use crate::config::{Grant, ModuleId, ModuleSettings, SandboxMode};
use crate::server::{self, Daemon};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

/// Prints a report on stdout. Only `check` and `doctor` call it; `serve` never does, because
/// on stdio, stdout is the protocol.
#[expect(
    clippy::disallowed_methods,
    reason = "the report printer (`hands check`/`doctor`): stdout is the person's terminal"
)]
pub fn out(s: &str) {
    let mut o = std::io::stdout().lock();
    let _ = writeln!(o, "{s}");
}

/// Writes a line to stderr (the banner, a serve that cannot start).
pub(crate) fn eprint_line(s: &str) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{s}");
}

/// The state dir a subcommand's config names (relative: from the current folder).
pub(super) fn state_dir(config: Option<PathBuf>) -> Result<PathBuf, ExitCode> {
    match config::load(config.as_deref()) {
        Ok(c) => Ok(server::absolute(&c.state_dir)),
        Err(e) => {
            out(&e.to_string());
            Err(ExitCode::from(1))
        }
    }
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
    match daemon.self_test_now() {
        Some(Some(_)) => s.push_str(&containment(daemon)),
        // The self-test runs beside serving: its line follows when it ends.
        Some(None) => s.push_str(" · containment: the sandbox self-test is running"),
        None => s.push_str(" · containment: no module runs commands"),
    }
    s
}

/// The banner's containment part, once the sandbox self-test has ended (it waits for it).
pub fn containment(daemon: &Daemon) -> String {
    let mut s = String::new();
    if let Some(p) = daemon.self_test() {
        let _ = write!(s, " · containment: {} (sandbox self-test)", p.tier());
        if daemon.config.sandbox_mode == SandboxMode::Enforce && !p.missing().is_empty() {
            let _ = write!(s, " · sandbox.mode = enforce: commands refuse to run");
            if let Some(c) = hands_sandbox::container::detect() {
                let _ = write!(s, "; this is {}: a person can {}", c.described(), c.remedy(false));
            }
        }
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
    if let Some(line) = daemon.container_line() {
        let _ = writeln!(s, "container: {line}");
    }
    let _ = writeln!(s, "secret_patterns: {}", c.secret_patterns.join(", "));
    if !c.protected_extra.is_empty() {
        let _ = writeln!(s, "protected_extra: {}", c.protected_extra.join(", "));
    }
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
        if let Some(o) = &h.oauth {
            let _ = writeln!(s, "http oauth: {}", o.describe());
        }
    }
    if let Some(r) = &c.runner {
        // The token's source, never the token.
        let ca = r.ca_file.as_ref().map_or("the system's roots".to_string(), |f| {
            format!("the system's roots and {}", f.display())
        });
        let _ = writeln!(
            s,
            "runner: {} as `{}`, token from {}, trusting {ca}, approvals = \"{}\"",
            r.url, r.name, r.token, r.approvals
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
                if m.has(Grant::Network) {
                    let _ = writeln!(s, "  network: {}", network_rules(sh));
                }
                let _ = writeln!(
                    s,
                    "  settings: path = {}, output_chars = {}, max_concurrent = {}, bash = {}, \
                     keep_sessions = {}",
                    if sh.path_written.is_empty() { "(system folders)" } else { &sh.path_written },
                    sh.output_chars,
                    sh.max_concurrent,
                    sh.bash,
                    sh.keep_sessions
                );
                {
                    let p = &sh.policy;
                    let list = |l: &[hands_shell::allow::Entry]| {
                        l.iter().map(|e| format!("\"{e}\"")).collect::<Vec<_>>().join(", ")
                    };
                    let _ = writeln!(
                        s,
                        "  commands: allow [{}], deny [{}], confirm [{}]; run_output_chars = {}",
                        list(&p.allow),
                        list(&p.deny),
                        list(&p.confirm),
                        sh.run_output_chars
                    );
                }
            }
            ModuleSettings::Git(g) => {
                let author = match &g.author {
                    Some((n, e)) => format!("{n} <{e}>"),
                    None => "the repository's identity".to_string(),
                };
                let push = match &g.push {
                    None => "off".to_string(),
                    Some(p) => format!(
                        "to {} for [{}], ssh agent {}, host keys {}",
                        p.remote,
                        p.branches.join(", "),
                        p.ssh_auth_sock
                            .as_ref()
                            .map_or("$SSH_AUTH_SOCK".into(), |s| s.display().to_string()),
                        p.known_hosts
                            .as_ref()
                            .map_or("recorded on first use in the state dir".into(), |s| s
                                .display()
                                .to_string())
                    ),
                };
                let _ = writeln!(s, "  settings: author = {author}, push = {push}");
                if let Some(p) = &g.push {
                    let urls = match &p.urls {
                        Some(urls) => format!("only to [{}]", urls.join(", ")),
                        None => "to the URL the repository's config gives the remote (push.urls \
                                 unset; local remotes only under writable roots)"
                            .to_string(),
                    };
                    let _ = writeln!(s, "  push urls: {urls}");
                }
            }
            ModuleSettings::Fs(_) => {}
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

/// What `hands check` finds in the file alone (`doctor` reports the same among its warnings):
/// HTTP that `serve` would refuse to serve without tokens, and allowlist entries that admit a
/// program which runs another one.
pub struct CheckFindings {
    pub warnings: Vec<String>,
    /// `hands serve` would refuse to start with this file, whatever the environment holds.
    pub serve_refuses: bool,
}

/// The findings of `hands check` (see [`CheckFindings`]).
pub fn check_findings(daemon: &Daemon) -> CheckFindings {
    let c = &daemon.config;
    let mut f = CheckFindings { warnings: Vec::new(), serve_refuses: false };
    if let Some(h) = c.http.as_ref().filter(|h| h.clients.is_empty() && h.oauth.is_none())
        && let Some(why) = crate::transport::http_setup::loopback_refusal(c, &h.listen)
    {
        f.warnings.push(format!("`hands serve` would refuse to start: {why}"));
        f.serve_refuses = true;
    }
    if let Some(h) = c.http.as_ref()
        && let Some(o) = &h.oauth
        && let Some(w) = oauth_warning(o, &h.listen, "[server.http.oauth]")
    {
        f.warnings.push(w);
    }
    for m in &c.modules {
        if let ModuleSettings::Shell(sh) = &m.settings {
            f.warnings.extend(file_warnings(sh, m));
        }
    }
    f
}

/// SPEC §9: an OAuth issuer that is not HTTPS while the endpoint is reached from outside
/// loopback (a plain-`http` issuer is only accepted on loopback: a test provider on this
/// machine, whose keys then vouch for clients on the network).
pub fn oauth_warning(o: &crate::config::OAuthCfg, listen: &str, table: &str) -> Option<String> {
    let outside = listen.parse::<std::net::SocketAddr>().is_ok_and(|a| !a.ip().is_loopback());
    (o.issuer_is_plain_http() && outside).then(|| {
        format!(
            "{table}: the issuer {} is plain HTTP (on loopback) while {listen} is reached from \
             other machines; an identity provider for the network is https (e.g. \
             https://login.example.org)",
            o.issuer
        )
    })
}

/// What `check` warns about tools-shell from the file alone (`doctor` too): allow entries
/// admitting programs that run programs, and `network.allow = ["*"]`.
fn file_warnings(sh: &crate::config::ShellSettings, m: &crate::config::ModuleCfg) -> Vec<String> {
    let mut w = wrapper_warnings(sh);
    if m.has(crate::config::Grant::Network)
        && let crate::config::NetworkMode::Domains(r) = &sh.network
        && r.admits_every_host()
    {
        w.push(
            "tools-shell: network.allow = [\"*\"] lets commands reach every host name through \
             the proxy (addresses are still checked, every connection is audited); list the \
             hosts the toolchain needs instead"
                .to_string(),
        );
    }
    w
}

/// `commands.allow` entries that admit a program which runs other programs: a wrapper (`env`,
/// `timeout`, `xargs`, …: what it runs is checked too, but the entry widens what a model can
/// phrase) or an opaque one (a shell, `make`, an interpreter: what it runs cannot be checked,
/// so deny and confirm do not reach inside it). `sandbox-profiles/wrappers.txt` lists both.
fn wrapper_warnings(sh: &crate::config::ShellSettings) -> Vec<String> {
    use hands_shell::allow::Entry;
    let mut w = Vec::new();
    let policy = &sh.policy;
    let Ok(profile) = hands_shell::wrappers::Profile::embedded() else {
        return w;
    };
    for e in &policy.allow {
        let Entry::Prefix { bin, .. } = e else { continue };
        if profile.is_wrapper(bin) {
            w.push(format!(
                "tools-shell: commands.allow admits `{e}`, which runs the program named in its \
                 arguments: hands checks that program too (it must be allowed, deny and confirm \
                 apply), and refuses the forms that hide it (sandbox-profiles/wrappers.txt)"
            ));
        } else if profile.is_opaque(bin) {
            w.push(format!(
                "tools-shell: commands.allow admits `{e}`, which runs commands it reads as text, \
                 from files or from its input: what it runs is not checked, so commands.deny and \
                 commands.confirm do not reach inside it{}",
                if policy.confirm.iter().any(|c| c.matches(std::slice::from_ref(bin))) {
                    " (confirm lists it: a person says yes to each run)"
                } else {
                    ""
                }
            ));
        }
    }
    w
}

/// SPEC §4.4's doctor warnings for tools-shell's `commands` and `tools`: `allow = ["*"]`, a
/// published tool `allow` does not admit (or `deny` refuses, or PATH lacks), an empty
/// description, two entries with one name; and a PATH folder inside a writable root, where a
/// command could plant a program under an allowed name.
pub(super) fn shell_warnings(
    config: &crate::config::Config,
    sh: &crate::config::ShellSettings,
    m: &crate::config::ModuleCfg,
) -> Vec<String> {
    use hands_shell::allow::{Entry, tool_name};
    let mut w = Vec::new();
    let policy = &sh.policy;
    w.extend(file_warnings(sh, m));
    if sh.new_repositories == hands_shell::settings::NewRepositories::Allow {
        w.push(
            "tools-shell: new_repositories = \"allow\" lets a command make a repository in a \
             writable root: its config holds only keys git itself writes (checked by the \
             sandbox), but its files, attributes and branches are the command's, and `git add` \
             can make it a submodule of yours"
                .to_string(),
        );
    }
    if policy.allows_everything() {
        w.push(
            "tools-shell: commands.allow = [\"*\"] admits every program on the module's PATH \
             (only deny and confirm still stop one), each with every option it has \
             (sandbox-profiles/own-options.txt lists those known to run or write other things)"
                .to_string(),
        );
    }
    // What each allowed program can do with its own options (SPEC §4.4, decision 0067).
    let mut named: Vec<&str> = Vec::new();
    for e in &policy.allow {
        if let Entry::Prefix { bin, .. } = e
            && !named.contains(&bin.as_str())
        {
            named.push(bin);
        }
    }
    for bin in named {
        let known = hands_shell::options::of(bin);
        if known.is_empty() {
            continue;
        }
        let list: Vec<String> = known.iter().map(|(o, what)| format!("{o} ({what})")).collect();
        w.push(format!(
            "tools-shell: commands.allow admits `{bin}`, whose own options run or write other \
             things: {}; hands does not check them — a denied program, and a confirm-listed \
             one in a run no person confirmed, is not in the run, but anything else can be",
            list.join("; ")
        ));
    }
    let path = &sh.command_path;
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
        if hands_shell::allow::resolve(&t.bin, path).is_none() {
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
    // Refused by `check` and `serve` without `bash` (`config::path_writers`); with
    // it the agent runs any program anyway, so it is worth knowing, not an error.
    for (p, r) in crate::config::path_writers::path_writers(config, sh) {
        w.push(format!(
            "tools-shell: {} (on its path, or what a name there leads to) lies {}: `run`, \
             `os-*` and `hands exec` run whatever a command or file tool put there under an \
             allowed name",
            p.display(),
            r.place
        ));
    }
    // A variable that names a folder (CARGO_HOME = "~/.cargo") only helps a command that can
    // see the folder: a system folder, a PATH folder or one of the module's roots.
    let home = crate::config::home_dir();
    let path_dirs: Vec<&str> = path.split(':').collect();
    for (k, v) in &sh.env {
        let p = crate::config::expand_tilde(v, home.as_deref());
        let seen = hands_sandbox::launcher::SYSTEM.iter().any(|s| p.starts_with(s))
            || path_dirs.iter().any(|d| !d.is_empty() && p.starts_with(d))
            || m.roots.iter().any(|r| p.starts_with(&r.path));
        if p.is_absolute() && p.is_dir() && !seen {
            w.push(format!(
                "tools-shell: env {k} names the folder {}, which commands cannot see; declare it \
                 as a root of tools-shell (read-only: filesystem = [..., {{ path = \"{v}\" }}]) \
                 if its commands need it",
                p.display()
            ));
        }
    }
    w
}

/// The resolved network rules of tools-shell with the `network` grant (SPEC §5.4).
fn network_rules(sh: &crate::config::ShellSettings) -> String {
    match &sh.network {
        crate::config::NetworkMode::Host => {
            "mode = host: commands get the host's whole network (loopback services, the LAN, \
             the cloud metadata address, any host)"
                .to_string()
        }
        crate::config::NetworkMode::Domains(r) => {
            let list = |l: &[hands_sandbox::proxy::Entry]| {
                l.iter().map(|e| format!("\"{e}\"")).collect::<Vec<_>>().join(", ")
            };
            let unknown = match r.unknown() {
                hands_sandbox::proxy::Unknown::Ask => "ask a person",
                hands_sandbox::proxy::Unknown::Deny => "refused",
            };
            format!(
                "by domain through the proxy: allow [{}], deny [{}], other hosts: {unknown}; \
                 loopback, link-local, private and this host's addresses only when named",
                list(r.allow()),
                list(r.deny())
            )
        }
    }
}
