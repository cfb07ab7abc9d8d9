//! What the daemon tells a person: the startup banner, the resolved policy (`hands check`) and
//! the doctor's findings (`hands doctor`).

use crate::config::{Grant, ModuleId, ModuleSettings, SandboxMode};
use crate::server::Daemon;
use std::fmt::Write as _;
use std::io::Write as _;
use std::process::Command;

/// Prints a report on stdout. Only `check` and `doctor` call it; `serve` never does, because
/// on stdio, stdout is the protocol.
// The report printer (`hands check`/`doctor`): stdout is the person's terminal.
#[allow(clippy::disallowed_methods)]
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
    if let Some(h) = c.http.as_ref().filter(|h| h.clients.is_empty())
        && let Some(why) = crate::http::loopback_refusal(c, &h.listen)
    {
        f.warnings.push(format!("`hands serve` would refuse to start: {why}"));
        f.serve_refuses = true;
    }
    for m in &c.modules {
        if let ModuleSettings::Shell(sh) = &m.settings {
            f.warnings.extend(wrapper_warnings(sh));
        }
    }
    f
}

/// `commands.allow` entries that admit a program which runs other programs: a wrapper (`env`,
/// `timeout`, `xargs`, …: what it runs is checked too, but the entry widens what a model can
/// phrase) or an opaque one (a shell, `make`, an interpreter: what it runs cannot be checked,
/// so deny and confirm do not reach inside it). `sandbox-profiles/wrappers.txt` lists both.
fn wrapper_warnings(sh: &crate::config::ShellConfig) -> Vec<String> {
    use hands_shell::allow::Entry;
    let mut w = Vec::new();
    let (Ok(policy), Ok(profile)) = (sh.policy(), hands_shell::wrappers::Profile::embedded())
    else {
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
fn shell_warnings(sh: &crate::config::ShellConfig, m: &crate::config::ModuleCfg) -> Vec<String> {
    use hands_shell::allow::{Entry, tool_name};
    let mut w = Vec::new();
    let Ok(policy) = sh.policy() else { return w };
    w.extend(wrapper_warnings(sh));
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
    // A variable that names a folder (CARGO_HOME = "~/.cargo") only helps a command that can
    // see the folder: a system folder, a PATH folder or one of the module's roots.
    let home = crate::config::home_dir();
    let path_dirs: Vec<&str> = path.split(':').collect();
    for (k, v) in &sh.env {
        let p = crate::config::expand_tilde(v, home.as_deref());
        let seen = crate::shell::SYSTEM.iter().any(|s| p.starts_with(s))
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

/// The oldest tmux `hands` can use: 3.2 brought `-D` (the server stays in the foreground), which
/// each session's launcher runs its own tmux server with (`hands_shell::tmux::server_argv`).
const TMUX_MIN: (u32, u32) = (3, 2);

/// The oldest git doctor accepts. `hands` runs no git program (tools-git is libgit2, in
/// process), so nothing here needs a given version; the git that matters is the person's, who
/// reviews, merges and pushes what the agent committed. 2.30 is the oldest release line that
/// got the fix for CVE-2022-24765 (2.30.3: a repository planted in a folder above the work tree
/// could make git run programs), so an older git is one to upgrade anyway.
const GIT_MIN: (u32, u32) = (2, 30);

/// How long a version flag may take to answer.
const VERSION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

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

/// The first line `program` prints for its version flag (`tmux -V`, `git --version`), run
/// with an empty environment; `None` when it cannot be run or does not answer in time.
// Host spawns of `tmux -V`/`git --version`, to go through the launcher (issue 19 point 8).
#[allow(clippy::disallowed_methods)]
fn version_of(program: &std::path::Path, flag: &str) -> Option<String> {
    use std::io::Read as _;
    use std::process::Stdio;
    let mut child = Command::new(program)
        .arg(flag)
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let start = std::time::Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if start.elapsed() < VERSION_TIMEOUT => {
                std::thread::sleep(std::time::Duration::from_millis(10))
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
    let mut text = String::new();
    child.stdout.take()?.read_to_string(&mut text).ok()?;
    Some(text.lines().next().unwrap_or("").trim().to_string())
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
/// missing, too old or of a version doctor cannot read, a warning saying what to do. A program
/// found inside a writable root is not run: a command could have put it there.
fn tool_check(n: &Needed, daemon: &Daemon) -> (String, Option<String>) {
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
    let line = version_of(&program, n.flag).unwrap_or_default();
    let shown = if line.is_empty() { "no version".to_string() } else { line.clone() };
    let warning = match parse_version(&line) {
        None => Some(format!(
            "{prefix}cannot tell the version of {} (`{bin} {}` printed {line:?}); {min} or \
             newer is needed: install or upgrade the `{bin}` package",
            program.display(),
            n.flag
        )),
        Some(v) if v < n.min => Some(format!(
            "{prefix}{} is {line:?}, older than {min}: upgrade the `{bin}` package (or put a \
             newer {bin} first on {})",
            program.display(),
            n.path_name
        )),
        Some(_) => None,
    };
    (format!("{shown} ({})", program.display()), warning.filter(|_| n.module.is_some()))
}

/// The tmux and git lines of the doctor's report, and their warnings (SPEC §9). tmux is looked
/// up where tools-shell's sandbox finds it, on the module's PATH; git on doctor's own PATH,
/// the person's, since no module runs it.
fn tool_checks(daemon: &Daemon) -> (String, Vec<String>) {
    let c = &daemon.config;
    let env_path = std::env::var("PATH").unwrap_or_default();
    let declared = |id| c.modules.iter().any(|m| m.id == id);
    let shell = c.modules.iter().find_map(|m| match &m.settings {
        ModuleSettings::Shell(sh) => Some(sh.command_path()),
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
        let (line, warning) = tool_check(n, daemon);
        let _ = writeln!(lines, "  {}: {line}", n.bin);
        warnings.extend(warning);
    }
    (lines, warnings)
}

/// The AppArmor profile that lets `exe` make user namespaces (SPEC §5.2), as shipped in
/// `sandbox-profiles/apparmor/hands` with the binary's real path put in, comments dropped.
pub fn apparmor_profile(exe: &std::path::Path) -> String {
    const PROFILE: &str = include_str!("../sandbox-profiles/apparmor/hands");
    PROFILE
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.replace("/usr/local/bin/hands", &exe.display().to_string()))
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
// procfs (/proc/sys/kernel/...), not a path of a root.
#[allow(clippy::disallowed_methods)]
fn sandbox_section(
    sh: &crate::shell::Shell,
    daemon: &Daemon,
    _probe: &crate::probe::Probe,
    s: &mut String,
    warnings: &mut Vec<String>,
) {
    use std::os::unix::fs::MetadataExt;
    let choice = sh.bound();
    let where_ = match &choice.bound {
        crate::sandbox::Bound::CgroupV2 { dir, .. } | crate::sandbox::Bound::CgroupV1 { dir } => {
            format!(" (leaves in {})", dir.display())
        }
        _ => String::new(),
    };
    let _ = writeln!(s, "  process bound: {}{where_}", choice.bound.name());
    for why in &choice.passed_over {
        let _ = writeln!(s, "    passed over: {why}");
    }
    if matches!(choice.bound, crate::sandbox::Bound::Rlimit) {
        let _ = writeln!(
            s,
            "    (no memory bound for the whole command: RLIMIT_AS per process only; a cgroup v2 \
             delegated to the daemon gives one, e.g. `systemd-run --user --scope -p \
             Delegate=yes hands serve`)"
        );
    }
    let abi = crate::sandbox::landlock_abi();
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
        let module = daemon.config.modules.iter().find(|m| m.id == ModuleId::Shell);
        for r in module.iter().flat_map(|m| &m.roots).filter(|r| r.writable) {
            if let Ok(meta) = std::fs::metadata(&r.path)
                && meta.uid() != ids.uid
            {
                let fix = if meta.uid() == 0 {
                    format!(
                        "chown the root to the user commands should run as (uid {}), or set \
                         sandbox.run_as to a user who may write it",
                        ids.uid
                    )
                } else {
                    format!("set sandbox.run_as = \"{}\" (the root's owner)", meta.uid())
                };
                warnings.push(format!(
                    "tools-shell: commands run as uid {} but the writable root {} belongs to \
                     uid {}: they can write there only what its modes allow (id-mapped mounts \
                     are not used); {fix}",
                    ids.uid,
                    r.path.display(),
                    meta.uid(),
                ));
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

/// The resolved network rules of tools-shell with the `network` grant (SPEC §5.4).
fn network_rules(sh: &crate::config::ShellConfig) -> String {
    match sh.network_mode() {
        Ok(crate::config::NetworkMode::Host) => {
            "mode = host: commands get the host's whole network (loopback services, the LAN, \
             the cloud metadata address, any host)"
                .to_string()
        }
        Ok(crate::config::NetworkMode::Domains(r)) => {
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
        Err((key, why, _)) => format!("invalid ({key}: {why})"),
    }
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
    let default_secrets: Vec<String> =
        crate::profiles::secret_patterns().map(str::to_string).collect();
    if c.secret_patterns != default_secrets {
        warnings.push("sandbox.secret_patterns differs from the default list".to_string());
    }
    for m in &c.modules {
        if let ModuleSettings::Shell(sh) = &m.settings
            && m.has(Grant::Network)
            && matches!(sh.network_mode(), Ok(crate::config::NetworkMode::Host))
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
        // The same checks `serve` makes first: tokens present, long enough, distinct.
        if let Err(e) = crate::http::Setup::new(c, None) {
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
    if let Some(m) = crate::http::loopback_reacher(c) {
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
            warnings.extend(shell_warnings(sh, m));
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
}
