//! `hands`: the daemon's command line — serve MCP on stdio, check a configuration, run the doctor.
//!
//! Nothing but the MCP transport writes to stdout while serving; logs and the banner go to
//! stderr. `check` and `doctor` are the person's commands and print their report on stdout.

use crate::control::protocol::{Choice, Reply, Request, Standing, Via};
#[cfg(target_os = "linux")]
use crate::sandbox;
use crate::{approvals, audit, config, control, dashboard, exec, report, server, shown, stdio};

use clap::{Parser, Subcommand};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

#[derive(Parser, Debug)]
#[command(
    name = "hands",
    version,
    about = "Confined files, shell and git for coding agents, over MCP"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Serve MCP on stdio, or over streamable HTTP with --http or [server.http]
    Serve {
        /// The configuration file (default: ./daemon.toml, else the embedded default)
        #[arg(long)]
        config: Option<PathBuf>,
        /// Serve streamable HTTP at http://ADDR/mcp instead of stdio (overrides
        /// [server.http].listen)
        #[arg(long, value_name = "ADDR")]
        http: Option<String>,
        /// Log filter (also RUST_LOG), e.g. info, debug, hands=trace
        #[arg(long)]
        log_level: Option<String>,
    },
    /// Validate the configuration and print the resolved policy
    Check {
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Everything check does, plus tool versions and warnings; exit 0 when it is safe to serve
    Doctor {
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Print the audit log, one record a line; --verify checks its hash chain
    Audit {
        #[arg(long)]
        config: Option<PathBuf>,
        /// Keep printing records as they are written
        #[arg(long, conflicts_with = "verify")]
        follow: bool,
        /// Check every record's hash and link; exit 1 naming the first broken record
        #[arg(long)]
        verify: bool,
    },
    /// The brake: end every running command of the daemon and refuse new ones until
    /// `hands stop --release` or a restart
    Stop {
        #[arg(long)]
        config: Option<PathBuf>,
        /// Lift the brake: commands run again
        #[arg(long)]
        release: bool,
    },
    /// A person's answers at the gate: list what waits and what stands, approve or deny a
    /// waiting action, revoke standing permissions
    Approvals {
        #[arg(long, global = true)]
        config: Option<PathBuf>,
        #[command(subcommand)]
        action: ApprovalsCmd,
    },
    /// A person runs one allowlisted program through the running daemon's policy, sandbox and
    /// audit log; a confirm-listed one asks y/N here first. Prints its output exactly and exits
    /// with its status (126: refused or declined; 125: no daemon answered)
    Exec {
        #[arg(long)]
        config: Option<PathBuf>,
        /// Working folder (under a root of tools-shell); default: the current folder when it
        /// lies under one, else the module's first root
        #[arg(long)]
        cwd: Option<PathBuf>,
        /// Seconds before the command's whole tree is stopped (default 120, at most 600)
        #[arg(long)]
        timeout_secs: Option<u64>,
        /// The program's name (looked up in tools-shell's PATH), then its arguments
        #[arg(last = true, required = true, value_name = "BIN ARGS")]
        argv: Vec<String>,
    },
    /// Internal: run one command in the sandbox described by the JSON spec (tools-shell's
    /// re-exec; see src/sandbox)
    #[cfg(target_os = "linux")]
    #[command(name = "__sandbox", hide = true)]
    Sandbox { spec: String },
    /// Internal: hold a module's private network namespace (see src/sandbox/netns.rs)
    #[cfg(target_os = "linux")]
    #[command(name = "__netns", hide = true)]
    Netns { pidfile: PathBuf },
    /// Internal: mask new secret files in a running tmux session's sandbox (see
    /// src/sandbox/remask.rs)
    #[cfg(target_os = "linux")]
    #[command(name = "__remask", hide = true)]
    Remask,
    /// Internal: open the network proxy's listeners inside a module's network namespace (see
    /// modules/sandbox/src/listen.rs)
    #[cfg(target_os = "linux")]
    #[command(name = "__netns-listen", hide = true)]
    NetnsListen { pid: i32, start: u64 },
}

#[derive(Subcommand, Debug)]
enum ApprovalsCmd {
    /// Actions waiting for a person, and the standing *always* permissions
    List,
    /// Allow a waiting action once
    Approve { id: String },
    /// Refuse a waiting action
    Deny { id: String },
    /// End a standing permission (its id from `list`), or all of them with --all (session
    /// permissions of live connections included)
    Revoke {
        #[arg(required_unless_present = "all")]
        id: Option<String>,
        #[arg(long, conflicts_with = "id")]
        all: bool,
    },
}

/// Parses the command line and runs the command it names; `src/main.rs` calls only this.
pub fn run() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve { config, http, log_level } => serve(config, http, log_level),
        Command::Check { config } => check(config, false),
        Command::Doctor { config } => check(config, true),
        Command::Audit { config, follow, verify } => audit_cmd(config, follow, verify),
        Command::Stop { config, release } => stop_cmd(config, release),
        Command::Approvals { config, action } => approvals_cmd(config, action),
        Command::Exec { config, cwd, timeout_secs, argv } => {
            exec_cmd(config, cwd, timeout_secs, argv)
        }
        #[cfg(target_os = "linux")]
        Command::Sandbox { spec } => sandbox::main(&spec),
        #[cfg(target_os = "linux")]
        Command::Netns { pidfile } => sandbox::holder::holder_main(&pidfile),
        #[cfg(target_os = "linux")]
        Command::Remask => sandbox::remask::main(),
        #[cfg(target_os = "linux")]
        Command::NetnsListen { pid, start } => hands_sandbox::listen::child_main(pid, start),
    }
}

/// Writes a line to stderr; the only place outside `report` that does.
pub(crate) fn eprint_line(s: &str) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{s}");
}

fn init_logging(level: Option<&str>) {
    use tracing_subscriber::EnvFilter;
    let filter = match level {
        Some(l) => EnvFilter::new(l),
        None => EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn")),
    };
    tracing_subscriber::fmt().with_writer(std::io::stderr).with_env_filter(filter).init();
}

fn serve(config: Option<PathBuf>, http: Option<String>, log_level: Option<String>) -> ExitCode {
    init_logging(log_level.as_deref());
    let cfg = match config::load(config.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprint_line(&e.to_string());
            return ExitCode::from(1);
        }
    };
    if let Some(sock) = server::git_agent_socket(&cfg) {
        // libssh2 (git push over SSH) finds the ssh-agent only through SSH_AUTH_SOCK, so the
        // configured push.ssh_auth_sock becomes this process's SSH_AUTH_SOCK. `set_var` is
        // unsafe because another thread could read the environment at the same time; here
        // none exists yet: the tokio runtime starts below, logging spawns no thread, and
        // nothing before this point starts one. The daemon never hands its own environment
        // to anything it spawns, so the socket path goes no further than libssh2.
        #[allow(unsafe_code)]
        unsafe {
            std::env::set_var("SSH_AUTH_SOCK", &sock)
        };
    }
    // Tokens are read and the loopback rule checked before anything starts.
    let http = match crate::http::Setup::new(&cfg, http.as_deref()) {
        Ok(h) => h,
        Err(e) => {
            eprint_line(&format!("hands: {e:#}"));
            return ExitCode::from(1);
        }
    };
    let dashboard = match dashboard::Setup::new(&cfg) {
        Ok(d) => d,
        Err(e) => {
            eprint_line(&format!("hands: {e:#}"));
            return ExitCode::from(1);
        }
    };
    let daemon = match server::Daemon::new(cfg) {
        Ok(d) => Arc::new(d),
        Err(e) => {
            eprint_line(&format!("hands: {e:#}"));
            return ExitCode::from(1);
        }
    };
    // The sandbox self-test runs before serving, so every result states what held.
    let _ = daemon.self_test();
    if http.is_none() {
        // Over HTTP the banner waits for the bound address (`--http 127.0.0.1:0`).
        eprint_line(&report::banner(&daemon, "stdio"));
    }
    // One client over stdio: its calls are served on one thread (file work still goes to the
    // blocking pool), which spares every call the wake-ups between worker threads. Over HTTP,
    // many clients: a worker per core.
    let mut builder = if http.is_none() {
        tokio::runtime::Builder::new_current_thread()
    } else {
        tokio::runtime::Builder::new_multi_thread()
    };
    let rt = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprint_line(&format!("hands: cannot start the async runtime: {e}"));
            return ExitCode::from(1);
        }
    };
    let result = rt.block_on(async move {
        use rmcp::ServiceExt;
        // `hands stop`'s door; serving goes on without it, and says so.
        let _control = control::start(daemon.clone())
            .inspect_err(|e| {
                eprint_line(&format!(
                    "hands: warning: {e:#}; `hands stop` cannot reach this daemon"
                ))
            })
            .ok();
        if let Some(setup) = dashboard {
            // The person's page; serving MCP goes on without it (another daemon of this state
            // dir may hold the port), and says so.
            match dashboard::start(daemon.clone(), setup).await {
                Ok(addr) => eprint_line(&format!("hands: dashboard at http://{addr}/")),
                Err(e) => eprint_line(&format!("hands: warning: {e:#}; no dashboard here")),
            }
        }
        if let Some(setup) = http {
            return crate::http::serve(daemon, setup).await;
        }
        let (input, output) = rmcp::transport::io::stdio_pipes();
        let server = server::HandsServer::new(daemon, "stdio");
        let transport = stdio::Stdio::new(input, output).cancel_on_hangup(server.gone());
        let service = server.serve(transport).await?;
        service.waiting().await?;
        anyhow::Ok(())
    });
    // A pending stdin read cannot be cancelled; do not wait for it on the way out.
    rt.shutdown_background();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprint_line(&format!("hands: {e:#}"));
            ExitCode::from(1)
        }
    }
}

fn check(config: Option<PathBuf>, doctor: bool) -> ExitCode {
    let cfg = match config::load(config.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            report::out(&e.to_string());
            return ExitCode::from(1);
        }
    };
    let daemon = match server::Daemon::inspect(cfg) {
        Ok(d) => d,
        Err(e) => {
            report::out(&format!("hands: {e:#}"));
            return ExitCode::from(1);
        }
    };
    report::out(&report::policy(&daemon));
    if !doctor {
        // What the file alone shows; `doctor` reports the same among its warnings.
        let found = report::check_findings(&daemon);
        for w in &found.warnings {
            report::out(&format!("warning: {w}"));
        }
        if found.serve_refuses {
            return ExitCode::from(1);
        }
    }
    if doctor {
        // Exit 1 when it is not safe to serve: `serve` would refuse to start, or in enforce
        // mode a missing guarantee would refuse every command. (`check` validates the file
        // alone: the tokens it names are read at startup, from wherever `serve` runs.)
        let found = report::doctor_report(&daemon);
        report::out(&found.text);
        let enforce = daemon.config.sandbox_mode == config::SandboxMode::Enforce;
        if found.serve_refuses
            || (enforce && daemon.self_test().is_some_and(|p| !p.missing().is_empty()))
        {
            return ExitCode::from(1);
        }
    }
    ExitCode::SUCCESS
}

/// The state dir a subcommand's config names (relative: from the current folder).
fn state_dir(config: Option<PathBuf>) -> Result<PathBuf, ExitCode> {
    match config::load(config.as_deref()) {
        Ok(c) => Ok(server::absolute(&c.state_dir)),
        Err(e) => {
            report::out(&e.to_string());
            Err(ExitCode::from(1))
        }
    }
}

/// `hands audit [--follow] [--verify]`.
fn audit_cmd(config: Option<PathBuf>, follow: bool, verify: bool) -> ExitCode {
    let dir = match state_dir(config) {
        Ok(d) => d,
        Err(code) => return code,
    };
    let path = audit::path_in(&dir);
    if verify {
        return match audit::verify(&path) {
            Ok(v) => {
                for w in &v.warnings {
                    report::out(&format!("warning: {w}"));
                }
                match v.broken {
                    Some(b) => {
                        report::out(&format!(
                            "{}: broken at {b}; {} records before it are intact",
                            path.display(),
                            v.records
                        ));
                        ExitCode::from(1)
                    }
                    None => {
                        report::out(&format!(
                            "{}: {} records, chain intact",
                            path.display(),
                            v.records
                        ));
                        ExitCode::SUCCESS
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                report::out(&format!(
                    "hands: there is no audit log at {}: no daemon has served with this \
                     state_dir, or the log was removed",
                    path.display()
                ));
                ExitCode::from(1)
            }
            Err(e) => {
                report::out(&format!("hands: cannot read the audit log {}: {e}", path.display()));
                ExitCode::from(1)
            }
        };
    }
    match print_audit(&path, follow) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            report::out(&format!("hands: cannot read the audit log {}: {e}", path.display()));
            ExitCode::from(1)
        }
    }
}

/// Prints every complete record; with `follow`, keeps polling for new ones.
fn print_audit(path: &std::path::Path, follow: bool) -> std::io::Result<()> {
    use std::io::{Read, Seek};
    let mut file = loop {
        match std::fs::File::open(path) {
            Ok(f) => break f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !follow => {
                report::out(&format!("{}: no records yet", path.display()));
                return Ok(());
            }
            // The daemon creates the log when it starts; wait for it.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::thread::sleep(std::time::Duration::from_millis(250));
            }
            Err(e) => return Err(e),
        }
    };
    let mut pending: Vec<u8> = Vec::new();
    let mut offset = 0u64;
    loop {
        let mut chunk = Vec::new();
        file.read_to_end(&mut chunk)?;
        offset += chunk.len() as u64;
        pending.extend_from_slice(&chunk);
        while let Some(i) = pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = pending.drain(..=i).collect();
            report::out(&audit::render(&line[..line.len() - 1]));
        }
        if !follow {
            if !pending.is_empty() {
                report::out(&audit::render(&pending));
            }
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_millis(250));
        if std::fs::metadata(path).is_ok_and(|m| m.len() < offset) {
            // Replaced or truncated by someone: start again from its beginning.
            file = std::fs::File::open(path)?;
            offset = 0;
            pending.clear();
        } else {
            file.seek(std::io::SeekFrom::Start(offset))?;
        }
    }
}

/// `hands exec -- BIN ARGS…`: the cwd is the given one, else the current folder when it lies
/// under a root of tools-shell (else the daemon uses the module's first root).
fn exec_cmd(
    config: Option<PathBuf>,
    cwd: Option<PathBuf>,
    timeout_secs: Option<u64>,
    argv: Vec<String>,
) -> ExitCode {
    let cfg = match config::load(config.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            report::out(&e.to_string());
            return ExitCode::from(1);
        }
    };
    let dir = server::absolute(&cfg.state_dir);
    let cwd = cwd.map(|c| server::absolute(&c)).or_else(|| {
        let here = std::env::current_dir().ok()?;
        let shell = cfg.modules.iter().find(|m| m.id == config::ModuleId::Shell)?;
        shell.roots.iter().any(|r| here.starts_with(&r.path)).then_some(here)
    });
    let cwd = cwd.map(|c| c.to_string_lossy().into_owned());
    ExitCode::from(exec::client(&dir, &argv, cwd, timeout_secs))
}

/// `hands stop [--release]`: asks every live daemon of the state dir.
fn stop_cmd(config: Option<PathBuf>, release: bool) -> ExitCode {
    let dir = match state_dir(config) {
        Ok(d) => d,
        Err(code) => return code,
    };
    let (op, req) = if release {
        ("release", Request::Release { via: Via::Terminal, except: None })
    } else {
        ("stop", Request::Stop { via: Via::Terminal, except: None })
    };
    let answers = control::client::request_all(&dir, &req);
    if answers.is_empty() {
        report::out(&format!(
            "hands: no running daemon found in {} (no live control socket); nothing to {op}. \
             Check --config: it must name the daemon's state_dir",
            dir.display()
        ));
        return ExitCode::from(1);
    }
    let mut failed = false;
    for (path, answer) in answers {
        match answer {
            Ok(Reply::Brake { pid, stopped: false, .. }) => {
                report::out(&format!("hands: daemon {pid} released: commands run again"));
            }
            Ok(Reply::Brake { pid, stopped: true, ended }) => report::out(&format!(
                "hands: daemon {pid} stopped: ended {ended} running commands and tmux sessions; \
                 new commands are refused until `hands stop --release`"
            )),
            Ok(other) => {
                failed = true;
                report::out(&format!("hands: {}: {}", path.display(), quoted_error(&other)));
            }
            Err(e) => {
                failed = true;
                report::out(&format!("hands: {e}"));
            }
        }
    }
    if failed { ExitCode::from(1) } else { ExitCode::SUCCESS }
}

/// A failed reply's error as `hands stop` has always printed it: a JSON string.
fn quoted_error(reply: &Reply) -> String {
    match reply {
        Reply::Failed { error, .. } => serde_json::Value::from(error.as_str()).to_string(),
        _ => "null".into(),
    }
}

/// `hands approvals ...`: the parked actions live in the daemons (asked over their control
/// sockets); the *always* permissions in `<state_dir>/approvals.json`.
fn approvals_cmd(config: Option<PathBuf>, action: ApprovalsCmd) -> ExitCode {
    let dir = match state_dir(config) {
        Ok(d) => d,
        Err(code) => return code,
    };
    let always_path = dir.join("approvals.json");
    let live = |req: Request| -> Vec<Reply> {
        control::client::request_all(&dir, &req)
            .into_iter()
            .filter_map(|(path, a)| match a {
                Ok(v) => Some(v),
                Err(e) => {
                    report::out(&format!("hands: {}: {e}", path.display()));
                    None
                }
            })
            .collect()
    };
    match action {
        ApprovalsCmd::List => {
            let mut waiting = 0;
            for reply in live(Request::Approvals) {
                let Reply::Pending { pid, pending } = reply else { continue };
                for p in pending {
                    waiting += 1;
                    // Described here from its parts (every part escaped, `src/shown.rs`), not
                    // printed as the daemon worded it.
                    let action = approvals::Pending::from(p.clone()).action.describe();
                    report::out(&format!(
                        "waiting {} (daemon {pid}, expires at {}): {action}",
                        shown::shown(&p.id).text,
                        p.expires,
                    ));
                }
            }
            if waiting == 0 {
                report::out("no action is waiting for a person");
            }
            match approvals::read_always(&always_path) {
                Ok(all) if all.is_empty() => report::out("no standing always permissions"),
                Ok(all) => {
                    for s in all {
                        report::out(&format!(
                            "always {}: client {} may run `{}` of {} (hands {}, granted at {})",
                            s.id, s.client, s.tool, s.module, s.version, s.granted
                        ));
                    }
                }
                Err(e) => {
                    report::out(&format!("hands: {e:#}"));
                    return ExitCode::from(1);
                }
            }
            ExitCode::SUCCESS
        }
        ApprovalsCmd::Approve { id } => answer_parked(&live, &id, Choice::Once),
        ApprovalsCmd::Deny { id } => answer_parked(&live, &id, Choice::Reject),
        ApprovalsCmd::Revoke { id, all } => {
            let standing = match id {
                Some(id) => Standing::Id(id),
                None => Standing::All,
            };
            if let Err(e) = revoke(&dir, &always_path, standing) {
                report::out(&format!("hands: {e}"));
                return ExitCode::from(1);
            }
            if all {
                // Every live daemon's session permissions end too.
                live(Request::RevokeSessions);
                report::out("revoked every standing permission, session permissions included");
            } else {
                report::out("revoked");
            }
            ExitCode::SUCCESS
        }
    }
}

/// A revoke, done by the first live daemon of the state dir (which records it); with no
/// daemon serving, done here on the file (there is no audit log to write then).
fn revoke(dir: &std::path::Path, file: &std::path::Path, standing: Standing) -> Result<(), String> {
    let req = Request::Revoke { standing: standing.clone(), via: Via::Terminal };
    match control::client::request_one(dir, &req) {
        Some((_, Ok(Reply::Done { .. }))) => Ok(()),
        Some((_, Ok(Reply::Failed { error, .. }))) => Err(error),
        Some((path, Ok(other))) => {
            Err(format!("{}: an answer this hands does not expect: {other:?}", path.display()))
        }
        Some((_, Err(e))) => Err(e),
        None => match control::act::revoke_standing(file, &standing) {
            Ok(true) => Ok(()),
            Ok(false) => Err(control::act::unknown(&standing)),
            Err(e) => Err(format!("{e:#}")),
        },
    }
}

/// Sends a person's answer for a parked action to every live daemon; one of them holds it.
fn answer_parked(live: &dyn Fn(Request) -> Vec<Reply>, id: &str, choice: Choice) -> ExitCode {
    let answers = live(Request::Answer { id: id.into(), choice, via: Via::Terminal });
    if answers.iter().any(Reply::ok) {
        let said = if choice == Choice::Reject { "denied" } else { "approved" };
        report::out(&format!("{said} {id}"));
        return ExitCode::SUCCESS;
    }
    let why = answers
        .iter()
        .find_map(|r| match r {
            Reply::Failed { error, .. } => Some(error.as_str()),
            _ => None,
        })
        .unwrap_or("no running daemon found in the state dir (check --config)");
    report::out(&format!("hands: {why}"));
    ExitCode::from(1)
}

/// mimalloc, not glibc's malloc: a `glob` over 57,000 files allocates a path and an entry per
/// file, and glibc spent a sixth of the walk in malloc/free; mimalloc cut the walk by a fifth
/// (benches/README.md). Built with `no_thp`: it does not ask for transparent huge pages, which
/// kept the idle daemon's few megabytes of heap in 2 MiB pages (21 against 14 MiB resident).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
