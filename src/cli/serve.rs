//! `hands serve`: load the config, build the daemon, open the control socket and the
//! dashboard, then serve MCP on stdio or over streamable HTTP.

use super::doctor;
use super::printout::{self, eprint_line};
use crate::registry::Entry;
use crate::{config, control, dashboard, server, transport};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

pub(super) fn init_logging(level: Option<&str>) {
    use tracing_subscriber::EnvFilter;
    let filter = match level {
        Some(l) => EnvFilter::new(l),
        None => EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn")),
    };
    // Colour only for a person's terminal: a client's log file of the daemon's stderr would
    // otherwise fill with escape codes.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .with_env_filter(filter)
        .init();
}

/// Raises the descriptor soft limit to the hard one. A desktop's soft limit is often 1,024
/// (kept low for programs that still use `select`), which a few hundred HTTP connections, their
/// commands' pipes and the audit log could exhaust, and then the control socket and the
/// dashboard could not accept the person's brake. Nothing the daemon starts inherits the raise
/// as its own: the launcher sets every command's limit from its module's `limits.open_files`.
pub(super) fn raise_open_files() {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let now = getrlimit(Resource::Nofile);
    // An unlimited hard limit is not one the kernel lets a soft limit take: leave it.
    let Some(hard) = now.maximum else { return };
    if now.current.is_some_and(|soft| soft >= hard) {
        return;
    }
    let soft = now.current.map_or_else(|| "unlimited".to_string(), |s| s.to_string());
    match setrlimit(Resource::Nofile, Rlimit { current: Some(hard), maximum: Some(hard) }) {
        Ok(()) => tracing::debug!("descriptor limit raised from {soft} to the hard limit, {hard}"),
        Err(e) => tracing::debug!("cannot raise the descriptor limit from {soft} to {hard}: {e}"),
    }
}

pub(super) fn serve(
    config: Option<PathBuf>,
    http: Option<String>,
    log_level: Option<String>,
    read_only: bool,
    extra: Vec<Entry>,
) -> ExitCode {
    init_logging(log_level.as_deref());
    raise_open_files();
    let cfg = match config::load(config.as_deref()) {
        Ok(c) if read_only => c.read_only(),
        Ok(c) => c,
        Err(e) => {
            eprint_line(&e.to_string());
            return ExitCode::from(1);
        }
    };
    if let Some(sock) = server::git_agent_socket(&cfg) {
        // libssh2 (git push over SSH) finds the ssh-agent only through SSH_AUTH_SOCK, so the
        // configured push.ssh_auth_sock becomes this process's SSH_AUTH_SOCK, set while no
        // other thread runs (the tokio runtime starts below; logging spawns no thread). The
        // daemon never hands its own environment to anything it spawns, so the socket path
        // goes no further than libssh2.
        if let Err(e) =
            hands_sandbox::set_env_while_single_threaded("SSH_AUTH_SOCK", sock.as_os_str())
        {
            eprint_line(&format!("hands: push.ssh_auth_sock: {e:#}"));
            return ExitCode::from(1);
        }
    }
    // Tokens are read and the loopback rule checked before anything starts.
    let http = match transport::http_setup::Setup::new(&cfg, http.as_deref()) {
        Ok(h) => h,
        Err(e) => {
            eprint_line(&format!("hands: {e:#}"));
            return ExitCode::from(1);
        }
    };
    // `[runner]`: the token and the trust roots are read before anything starts.
    let runner = match cfg.runner.as_ref().map(|r| crate::runner::Setup::new(r, &cfg)).transpose() {
        Ok(r) => r,
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
    let daemon = match server::Daemon::with_tools(cfg, extra) {
        Ok(d) => Arc::new(d),
        Err(e) => {
            eprint_line(&format!("hands: {e:#}"));
            return ExitCode::from(1);
        }
    };
    // What `hands check` warns about from the file alone, on every start too (a person who
    // never runs check still reads it where the daemon's stderr goes).
    for w in printout::check_findings(&daemon).warnings {
        eprint_line(&format!("hands: warning: {w}"));
    }
    // The sandbox self-test (a few seconds: it starts sandboxes) runs beside serving, so that
    // `initialize` answers at once (clients with short connect timeouts give up otherwise).
    // Every command waits for it before the gate (`Shell::prepare`), so none runs before the
    // walls it needs are known to hold. The banner comes at once; the tier in a line after it.
    if http.is_none() {
        // Over HTTP the banner waits for the bound address (`--http 127.0.0.1:0`).
        eprint_line(&printout::banner(&daemon, "stdio"));
    }
    if daemon.self_test_now().is_some() {
        let daemon = daemon.clone();
        let probe = move || {
            let tier = printout::containment(&daemon);
            eprint_line(&format!("hands: {}", tier.trim_start_matches(" · ")));
        };
        if let Err(e) = std::thread::Builder::new().name("self-test".into()).spawn(probe) {
            eprint_line(&format!("hands: cannot start the sandbox self-test's thread: {e}"));
            return ExitCode::from(1);
        }
    }
    // One client over stdio: its calls are served on one thread (file work still goes to the
    // blocking pool), which spares every call the wake-ups between worker threads. Over HTTP,
    // many clients: a worker per core.
    let mut builder = if http.is_none() && runner.is_none() {
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
            match dashboard::start(daemon.clone(), setup, doctor::doctor).await {
                Ok(addr) => eprint_line(&format!("hands: dashboard at http://{addr}/")),
                Err(e) => eprint_line(&format!("hands: warning: {e:#}; no dashboard here")),
            }
        }
        // The first command's sandbox, built once the self-test has passed (decision 0078).
        if let Some(shell) = daemon.shell().cloned() {
            tokio::spawn(async move { shell.ready_first().await });
        }
        // The runner's link lives as long as the process; it never ends serving. On the way out
        // its sessions are closed, the relay told why.
        let runner_on = runner.is_some();
        let link = runner.map(|setup| {
            eprint_line(&format!("hands: {}", setup.describe()));
            crate::runner::start(daemon.clone(), setup)
        });
        if let Some(setup) = http {
            // Over HTTP the banner waits for the bound address (`--http 127.0.0.1:0`).
            let banner = daemon.clone();
            let bound = move |t: &str| eprint_line(&printout::banner(&banner, t));
            let served = transport::http::serve(daemon, setup, bound).await;
            if let Some(link) = link {
                link.shut().await;
            }
            return served;
        }
        let (input, output) = rmcp::transport::io::stdio_pipes();
        let server = server::HandsServer::new(daemon.clone(), "stdio");
        let transport = transport::stdio::Stdio::new(input, output).cancel_on_hangup(server.gone());
        let service = match server.serve(transport).await {
            Ok(s) => Some(s),
            // stdin ended before a client said anything (`hands serve < /dev/null`, a client
            // that connected and left): nothing was asked, so nothing failed.
            Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => None,
            Err(e) => return Err(e.into()),
        };
        let served = match service {
            Some(service) => Some(service.waiting().await),
            None => None,
        };
        if runner_on {
            // A runner (a service with no stdio client, stdin at /dev/null) serves its relay
            // until it is stopped.
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        if let Some(link) = link {
            link.shut().await;
        }
        // A stdio daemon ends with its client (a runner when it is stopped), and nothing it
        // started runs on unsupervised.
        daemon.shutdown().await;
        if let Some(served) = served {
            served?;
        }
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
