//! `hands doctor`'s findings beyond `check`: the versions of tmux and git, the sandbox's
//! guarantees as the self-test found them, the AppArmor profile to install, and every warning
//! (SPEC §9). The dashboard shows the same warnings.

use super::printout::shell_warnings;
use crate::config::{Grant, ModuleId, ModuleSettings, SandboxMode};
use crate::server::Daemon;
use hands_sandbox::host::Versions;
use std::fmt::Write as _;

/// The oldest tmux `hands` can use: 3.2 brought `-D` (the server stays in the foreground), which
/// each session's launcher runs its own tmux server with (`hands_shell::tmux::server_argv`).
const TMUX_MIN: (u32, u32) = (3, 2);

/// The oldest git doctor accepts. `hands` runs no git program (tools-git is libgit2, in
/// process), so nothing here needs a given version; the git that matters is the person's, who
/// reviews, merges and pushes what the agent committed. 2.30 is the oldest release line that
/// got the fix for CVE-2022-24765 (2.30.3: a repository planted in a folder above the work tree
/// could make git run programs), so an older git is one to upgrade anyway.
const GIT_MIN: (u32, u32) = (2, 30);

/// How long a version flag may take to answer, its sandbox's start included. Generous: a sandbox
/// start on an emulated or heavily loaded machine (QEMU without KVM, found by the VM matrix in
/// CI) took over 5 s, and a version that is not read is reported as a doctor failure; a flag
/// that truly hangs still ends here.
const VERSION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The `(major, minor)` of a version line (`tmux 3.3a`, `tmux next-3.4`, `git version 2.47.3`):
/// the first word after the program's name that starts with a digit once a `next-` is taken
/// off (a tmux built from its development branch, ahead of the release it names); a letter
/// after a number (`3.3a`) is a patch and is ignored.
fn parse_version(line: &str) -> Option<(u32, u32)> {
    fn number(part: Option<&str>) -> Option<u32> {
        let digits: String = part?.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    }
    line.split_whitespace().skip(1).find_map(|word| {
        let word = word.strip_prefix("next-").unwrap_or(word);
        if !word.starts_with(|c: char| c.is_ascii_digit()) {
            return None;
        }
        let mut parts = word.split('.');
        let major = number(parts.next())?;
        Some((major, number(parts.next()).unwrap_or(0)))
    })
}

/// A program doctor reports on: where it is looked for and what it is needed for.
struct Needed<'a> {
    bin: &'static str,
    flag: &'static str,
    min: (u32, u32),
    /// The `PATH` it is looked up in.
    path: &'a str,
    /// That `PATH`, named for a person: "tools-shell's PATH".
    path_name: &'a str,
    /// The module whose warning it is, or `None` when none needs it (a version line only).
    module: Option<ModuleId>,
    /// What it is for, ending a "missing" warning.
    why: &'static str,
}

/// A program's doctor line (`tmux 3.3a (/usr/bin/tmux)`) and, when a module needs it and it is
/// missing, too old or of a version doctor cannot read, a warning saying what to do. The
/// version flag runs in a sandbox of its own (`versions`); a program found inside a writable
/// root is not run at all: a command could have put it there.
fn tool_check(
    n: &Needed,
    daemon: &Daemon,
    versions: &Result<Versions, String>,
) -> (String, Option<String>) {
    let (bin, min) = (n.bin, format!("{}.{}", n.min.0, n.min.1));
    let prefix = n.module.map(|m| format!("{}: ", m.name())).unwrap_or_default();
    let Some(program) = hands_shell::allow::resolve(bin, n.path) else {
        let warning = format!(
            "{prefix}{bin} is not on {} ({}): {}; install the `{bin}` package ({min} or newer)",
            n.path_name, n.path, n.why
        );
        return (format!("not found on {}", n.path_name), n.module.map(|_| warning));
    };
    let real = std::fs::canonicalize(&program).unwrap_or_else(|_| program.clone());
    let planted = daemon
        .config
        .modules
        .iter()
        .flat_map(|m| &m.roots)
        .find(|r| r.writable && (real.starts_with(&r.path) || program.starts_with(&r.path)));
    if let Some(r) = planted {
        let warning = format!(
            "{prefix}cannot tell the version of {}: it lies in the writable root {}, where a \
             command could have put it, so doctor does not run it; install the `{bin}` package \
             ({min} or newer) in a system folder and take that folder off {}",
            program.display(),
            r.path.display(),
            n.path_name
        );
        let line = format!("{} (not run: in a writable root)", program.display());
        return (line, n.module.map(|_| warning));
    }
    let answer = versions
        .as_ref()
        .map_err(Clone::clone)
        .and_then(|v| v.line(&program, n.flag, VERSION_TIMEOUT).map_err(|e| e.to_string()));
    let (shown, warning) = match &answer {
        Err(why) => (
            format!("version not read: `{bin} {}` {why}", n.flag),
            Some(format!(
                "{prefix}cannot tell the version of {} (`{bin} {}` {why}); {min} or newer is \
                 needed: install or upgrade the `{bin}` package",
                program.display(),
                n.flag
            )),
        ),
        Ok(line) => {
            let shown = if line.is_empty() { "no version".to_string() } else { line.clone() };
            let warning = match parse_version(line) {
                None => Some(format!(
                    "{prefix}cannot tell the version of {} (`{bin} {}` printed {line:?}); {min} \
                     or newer is needed: install or upgrade the `{bin}` package",
                    program.display(),
                    n.flag
                )),
                Some(v) if v < n.min => Some(format!(
                    "{prefix}{} is {line:?}, older than {min}: upgrade the `{bin}` package (or \
                     put a newer {bin} first on {})",
                    program.display(),
                    n.path_name
                )),
                Some(_) => None,
            };
            (shown, warning)
        }
    };
    (format!("{shown} ({})", program.display()), warning.filter(|_| n.module.is_some()))
}

/// How doctor runs version flags: through the launcher tools-shell runs (or the one beside
/// this binary), hiding the denied and credential paths, as the user commands run as.
fn versions(daemon: &Daemon) -> Result<Versions, String> {
    let c = &daemon.config;
    let lists = crate::server::policy_lists(c);
    let masked = lists.credentials.iter().chain(&lists.deny).cloned().collect();
    let (launcher, run_as) = match daemon.shell() {
        Some(sh) => (sh.launcher().to_path_buf(), sh.run_as()),
        None => {
            let exe = std::env::current_exe().map_err(|e| {
                format!("cannot find the launcher: the hands binary is not found ({e})")
            })?;
            let run_as = hands_sandbox::launcher::run_as(c.run_as.as_deref(), None)
                .map_err(|e| format!("cannot choose who it runs as: {e:#}"))?;
            (hands_sandbox::launcher::launcher_binary(&exe), run_as)
        }
    };
    Ok(Versions { launcher, masked, run_as })
}

/// The tmux and git lines of the doctor's report, and their warnings (SPEC §9). tmux is looked
/// up where tools-shell's sandbox finds it, on the module's PATH; git on doctor's own PATH,
/// the person's, since no module runs it.
fn tool_checks(daemon: &Daemon) -> (String, Vec<String>) {
    let c = &daemon.config;
    let versions = versions(daemon);
    let env_path = std::env::var("PATH").unwrap_or_default();
    let declared = |id| c.modules.iter().any(|m| m.id == id);
    let shell = c.modules.iter().find_map(|m| match &m.settings {
        ModuleSettings::Shell(sh) => Some(sh.command_path.clone()),
        _ => None,
    });
    // tmux_start runs only where tools-shell publishes its tools.
    let shell_runs = shell.is_some() && !daemon.unavailable_modules().contains(&ModuleId::Shell);
    let checks = [
        Needed {
            bin: "tmux",
            flag: "-V",
            min: TMUX_MIN,
            path: shell.as_deref().unwrap_or(&env_path),
            path_name: if shell.is_some() { "tools-shell's PATH" } else { "PATH" },
            module: shell_runs.then_some(ModuleId::Shell),
            why: "tmux_start cannot start a session",
        },
        Needed {
            bin: "git",
            flag: "--version",
            min: GIT_MIN,
            path: &env_path,
            path_name: "PATH",
            module: declared(ModuleId::Git).then_some(ModuleId::Git),
            why: "tools-git does not need it (libgit2, in process), but you do, to review and \
                  merge what the agent commits",
        },
    ];
    let mut lines = String::new();
    let mut warnings = Vec::new();
    for n in &checks {
        let (line, warning) = tool_check(n, daemon, &versions);
        let _ = writeln!(lines, "  {}: {line}", n.bin);
        warnings.extend(warning);
    }
    (lines, warnings)
}

/// The AppArmor profile that lets `exe` and the launcher beside it make user namespaces (SPEC
/// §5.2), as shipped in `sandbox-profiles/apparmor/hands` with the binaries' real folder and
/// `exe`'s name put in, comments dropped.
pub fn apparmor_profile(exe: &std::path::Path) -> String {
    const PROFILE: &str = include_str!("../../sandbox-profiles/apparmor/hands");
    const SHIPPED: &str = "/usr/local/bin/{hands,hands-sandbox}";
    let dir = exe.parent().unwrap_or(std::path::Path::new("/")).display().to_string();
    let name = exe.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let here =
        format!("{}/{{{name},{}}}", dir.trim_end_matches('/'), hands_sandbox::launcher::LAUNCHER);
    PROFILE
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.replace(SHIPPED, &here))
        .collect::<Vec<_>>()
        .join("\n")
        .trim()
        .to_string()
}

/// The two commands that install [`apparmor_profile`] for `exe`.
fn apparmor_commands(exe: &std::path::Path) -> String {
    format!(
        "sudo tee /etc/apparmor.d/hands >/dev/null <<'EOF'\n{}\nEOF\nsudo apparmor_parser -r \
         /etc/apparmor.d/hands",
        apparmor_profile(exe)
    )
}

/// The doctor's lines on how commands are contained here: the process bound and what was
/// passed over, Landlock, who commands run as, and the remedy for a missing wall.
#[expect(
    clippy::disallowed_methods,
    reason = "procfs (/proc/sys/kernel/...), not a path of a root"
)]
fn sandbox_section(
    sh: &crate::shell_mcp::Shell,
    daemon: &Daemon,
    probe: &hands_sandbox::probe::Probe,
    s: &mut String,
    warnings: &mut Vec<String>,
) {
    use std::os::unix::fs::MetadataExt;
    let choice = sh.bound();
    let where_ = match &choice.bound {
        hands_sandbox::launcher::Bound::CgroupV2 { dir, .. }
        | hands_sandbox::launcher::Bound::CgroupV1 { dir, .. } => {
            format!(" (leaves in {})", dir.display())
        }
        _ => String::new(),
    };
    // The probe says when the bound chosen at startup does not hold: `RLIMIT_NPROC` where
    // commands run without namespaces would count every process of the uid, so it is not set.
    let unbound = probe.checks.iter().any(|c| c.name == "process bound" && c.holds == Some(false));
    if unbound && choice.bound == hands_sandbox::launcher::Bound::Rlimit {
        let _ = writeln!(
            s,
            "  process bound: none (RLIMIT_NPROC, the best this machine offers, binds only inside \
             a user namespace, and commands run without one)"
        );
    } else {
        let _ = writeln!(s, "  process bound: {}{where_}", choice.bound.name());
    }
    for why in &choice.passed_over {
        let _ = writeln!(s, "    passed over: {why}");
    }
    if !choice.bound.bounds_memory() {
        let _ = writeln!(
            s,
            "    (no memory bound for the whole command: RLIMIT_AS per process only, so a \
             program that reserves more address space than limits.memory_mb — a wasm runtime, \
             a JIT, a sanitizer — fails; a cgroup v2 delegated to the daemon gives a resident \
             bound instead, e.g. `systemd-run --user --scope -p Delegate=yes hands serve`)"
        );
    }
    if let Ok(exe) = std::env::current_exe() {
        let launcher = sh.launcher();
        if launcher == exe {
            let _ = writeln!(
                s,
                "  launcher: {} __sandbox ({} is not beside it: each command starts a few ms \
                 slower; `cargo install --path .` installs both)",
                exe.display(),
                hands_sandbox::launcher::LAUNCHER
            );
        } else {
            let _ = writeln!(s, "  launcher: {}", launcher.display());
        }
    }
    let abi = hands_sandbox::launcher::landlock_abi();
    let _ = writeln!(
        s,
        "  Landlock: {}",
        match abi {
            0 => "unavailable (the mount namespace is the filesystem wall)".to_string(),
            1 => "ABI 1, not used (it forbids renames across folders)".to_string(),
            n => format!("ABI {n}"),
        }
    );
    if let Some(ids) = sh.run_as() {
        let _ = writeln!(
            s,
            "  commands run as: uid {} gid {} (the daemon is root; sandbox.run_as)",
            ids.uid, ids.gid
        );
        // A writable root of another owner is bound id-mapped (SPEC §5.2 item 6); where the
        // kernel or its file system cannot, commands cannot write it: say so, and what to do.
        let module = daemon.config.modules.iter().find(|m| m.id == ModuleId::Shell);
        // Without namespaces (best-effort) nothing is mounted: a root is written by its modes.
        let bare = probe.checks.iter().any(|c| c.name == "host processes hidden");
        for r in module.iter().flat_map(|m| &m.roots).filter(|r| r.writable) {
            let owner = std::fs::metadata(&r.path).map(|m| m.uid()).ok();
            if bare && owner.is_some_and(|o| o != ids.uid) {
                warnings.push(format!(
                    "tools-shell: commands run as uid {} without namespaces, so the writable \
                     root {} (uid {}) is not bound id-mapped: they can write there only what \
                     its modes allow; a person can set sandbox.run_as to the root's owner (an \
                     ordinary user), or allow user namespaces",
                    ids.uid,
                    r.path.display(),
                    owner.unwrap_or_default()
                ));
                continue;
            }
            match hands_sandbox::launcher::idmap::support(&r.path, ids) {
                Ok(None) => {}
                Ok(Some(owner)) => {
                    let _ = writeln!(
                        s,
                        "  {}: owned by uid {owner}, bound id-mapped (commands write as its \
                         owner)",
                        r.path.display()
                    );
                }
                Err(why) => warnings.push(format!("tools-shell: {why}")),
            }
        }
    }
    let restricted =
        std::fs::read_to_string("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
            .is_ok_and(|v| v.trim() == "1");
    if restricted {
        let exe = std::env::current_exe()
            .and_then(std::fs::canonicalize)
            .unwrap_or_else(|_| "/usr/local/bin/hands".into());
        let _ = writeln!(
            s,
            "  AppArmor restricts unprivileged user namespaces here \
             (kernel.apparmor_restrict_unprivileged_userns = 1); the profile \
             sandbox-profiles/apparmor/hands grants them to this binary. Install it with:\n{}",
            apparmor_commands(&exe)
                .lines()
                .map(|l| format!("      {l}"))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}

/// What `hands doctor` found.
pub struct DoctorReport {
    /// The report as printed: tool versions, the sandbox self-test, warnings.
    pub text: String,
    /// `hands serve` would refuse to start with this config and environment (a client's token
    /// missing or short, a dashboard token it would refuse); the report says why.
    pub serve_refuses: bool,
}

/// The doctor's report as text (the dashboard shows its warnings).
pub fn doctor(daemon: &Daemon) -> String {
    doctor_report(daemon).text
}

/// The doctor's findings beyond `check`: tool versions and warnings (SPEC §9).
pub fn doctor_report(daemon: &Daemon) -> DoctorReport {
    let c = &daemon.config;
    let mut warnings = Vec::new();
    let mut serve_refuses = false;
    if c.sandbox_mode == SandboxMode::BestEffort {
        warnings.push(
            "sandbox.mode = \"best-effort\": commands may run with less than full containment"
                .to_string(),
        );
    }
    warnings.extend(crate::config::trusted::warnings(c));
    let default_secrets: Vec<String> =
        hands_sandbox::profiles::secret_patterns().map(str::to_string).collect();
    if c.secret_patterns != default_secrets {
        warnings.push("sandbox.secret_patterns differs from the default list".to_string());
    }
    for m in &c.modules {
        if let ModuleSettings::Shell(sh) = &m.settings
            && m.has(Grant::Network)
            && matches!(sh.network, crate::config::NetworkMode::Host)
        {
            warnings.push(format!(
                "{}: network.mode = \"host\": commands reach the host's whole network \
                 (loopback services, the LAN, the cloud metadata address); drop `mode` for the \
                 network by domain and list the hosts in network.allow",
                m.id.name()
            ));
        }
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
        if let Some(w) = (h.oauth.as_ref())
            .and_then(|o| super::printout::oauth_warning(o, &h.listen, "[server.http.oauth]"))
        {
            warnings.push(w);
        }
        // The same checks `serve` makes first: tokens present, long enough, distinct.
        if let Err(e) = crate::transport::http_setup::Setup::new(c, None) {
            warnings.push(format!("`hands serve` would refuse to start: {e:#}"));
            serve_refuses = true;
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
    if let Some(r) = &c.runner {
        if r.approvals == crate::config::RunnerApprovals::Client {
            warnings.push(format!(
                "[runner] approvals = \"client\": the relay at {} carries the agents' answers to \
                 this machine's questions, so whoever runs the relay could answer them; \
                 \"local\" parks every question for a person here",
                r.url
            ));
        }
        if let Err(e) = crate::runner::Setup::new(r, c) {
            warnings.push(format!("`hands serve` would refuse to start: {e:#}"));
            serve_refuses = true;
        }
        if let crate::config::TokenSource::File(file) = &r.token
            && let Ok(meta) = std::fs::metadata(file)
        {
            use std::os::unix::fs::PermissionsExt as _;
            if meta.permissions().mode() & 0o077 != 0 {
                warnings.push(format!(
                    "[runner]: token_file {} is readable by other users (mode {:o}); `chmod 600` \
                     it",
                    file.display(),
                    meta.permissions().mode() & 0o777
                ));
            }
        }
        if let Some(status) = crate::runner::last_status(c).filter(|s| !s.starts_with("connected"))
        {
            warnings.push(format!("[runner]: the running daemon's link to the relay: {status}"));
        }
    }
    if let Some(m) = crate::transport::http_setup::loopback_reacher(c) {
        let doors: Vec<String> = (c.http.iter().map(|h| format!("[server.http] at {}", h.listen)))
            .chain(c.dashboard.iter().map(|d| format!("the dashboard at {}", d.listen)))
            .collect();
        if !doors.is_empty() {
            warnings.push(format!(
                "{}: the `network` grant puts its commands on the host's network, so they reach \
                 {} like any local program; only tokens keep them out — `serve` refuses HTTP on \
                 loopback without per-client tokens, and any token file a command or file tool \
                 could read",
                m.id.name(),
                doors.join(" and ")
            ));
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
            serve_refuses = true;
        }
    }
    for m in &c.modules {
        if let ModuleSettings::Shell(sh) = &m.settings {
            warnings.extend(shell_warnings(c, sh, m));
        }
        if let ModuleSettings::Git(g) = &m.settings
            && g.push.as_ref().is_some_and(|p| p.urls.is_none())
            && m.has(Grant::Network)
        {
            warnings.push(
                "tools-git: push over SSH is on without push.urls: git_push goes to whatever URL \
                 the repository's config gives the remote, and a command can make a repository \
                 whose remote is any SSH host; list the allowed remotes in push.urls"
                    .to_string(),
            );
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
    let (lines, tool_warnings) = tool_checks(daemon);
    s.push_str(&lines);
    warnings.extend(tool_warnings);
    if let Some(p) = daemon.self_test() {
        let _ = writeln!(s, "  sandbox self-test: {}\n{}", p.tier(), p.table());
        for m in p.missing() {
            warnings.push(format!("sandbox guarantee missing: {m}"));
        }
        if let Some(sh) = daemon.shell() {
            sandbox_section(sh, daemon, p, &mut s, &mut warnings);
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
    DoctorReport { text: s.trim_end().to_string(), serve_refuses }
}

#[cfg(test)]
mod tests {
    use super::parse_version;

    #[test]
    fn versions_are_read_from_the_lines_tmux_and_git_print() {
        assert_eq!(parse_version("tmux 3.3a"), Some((3, 3)));
        assert_eq!(parse_version("tmux 3.2"), Some((3, 2)));
        assert_eq!(parse_version("tmux next-3.4"), Some((3, 4)));
        assert_eq!(parse_version("tmux 2.9"), Some((2, 9)));
        assert_eq!(parse_version("tmux 3.2-rc3"), Some((3, 2)));
        assert_eq!(parse_version("git version 2.47.3"), Some((2, 47)));
        assert_eq!(parse_version("git version 2.39.5 (Apple Git-154)"), Some((2, 39)));
        // Minor versions compare as numbers: 2.9 is older than 2.30.
        assert!(parse_version("git version 2.9.5").is_some_and(|v| v < super::GIT_MIN));
        assert!(parse_version("tmux 3.10").is_some_and(|v| v >= super::TMUX_MIN));
        // What doctor cannot read is no version, which it warns of.
        for line in ["tmux master", "", "tmux", "git version", "3.3"] {
            assert_eq!(parse_version(line), None, "{line:?}");
        }
    }

    #[test]
    fn the_apparmor_profile_names_both_binaries_where_they_are() {
        let p = super::apparmor_profile(std::path::Path::new("/opt/tools/hands"));
        assert!(
            p.contains("profile hands /opt/tools/{hands,hands-sandbox} flags=(unconfined) {"),
            "{p}"
        );
        assert!(p.contains("  userns,"), "{p}");
        assert!(!p.contains("/usr/local/bin"), "{p}");
        assert!(!p.lines().any(|l| l.starts_with('#')), "{p}");
    }
}
