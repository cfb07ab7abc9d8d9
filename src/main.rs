//! `hands`: the daemon's command line — serve MCP on stdio, check a configuration, run the doctor.
//!
//! Nothing but the MCP transport writes to stdout while serving; logs and the banner go to
//! stderr. `check` and `doctor` are the person's commands and print their report on stdout.

mod config;
mod probe;
mod profiles;
mod report;
#[cfg(target_os = "linux")]
mod sandbox;
mod server;
mod shell;
mod stdio;
mod tools;

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
    /// Serve MCP on stdio (the embedded default when there is no config)
    Serve {
        /// The configuration file (default: ./daemon.toml, else the embedded default)
        #[arg(long)]
        config: Option<PathBuf>,
        /// Serve streamable HTTP at ADDR instead of stdio
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
    /// Internal: run one command in the sandbox described by the JSON spec (tools-shell's
    /// re-exec; see src/sandbox)
    #[cfg(target_os = "linux")]
    #[command(name = "__sandbox", hide = true)]
    Sandbox { spec: String },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve { config, http, log_level } => serve(config, http, log_level),
        Command::Check { config } => check(config, false),
        Command::Doctor { config } => check(config, true),
        #[cfg(target_os = "linux")]
        Command::Sandbox { spec } => sandbox::main(&spec),
    }
}

/// Writes a line to stderr; the only place outside `report` that does.
fn eprint_line(s: &str) {
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
    if http.is_some() || cfg.http.is_some() {
        eprint_line(
            "hands: the streamable HTTP transport is not in this version yet; serve on stdio \
             (drop --http and [server.http])",
        );
        return ExitCode::from(1);
    }
    let daemon = match server::Daemon::new(cfg) {
        Ok(d) => Arc::new(d),
        Err(e) => {
            eprint_line(&format!("hands: {e:#}"));
            return ExitCode::from(1);
        }
    };
    // The sandbox self-test runs before serving, so every result states what held.
    let _ = daemon.self_test();
    eprint_line(&report::banner(&daemon, "stdio"));
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprint_line(&format!("hands: cannot start the async runtime: {e}"));
            return ExitCode::from(1);
        }
    };
    let result = rt.block_on(async move {
        use rmcp::ServiceExt;
        let service = {
            let (input, output) = rmcp::transport::io::stdio_pipes();
            let stream = stdio::framed(input, output);
            server::HandsServer::new(daemon, "stdio").serve(tokio::io::split(stream)).await?
        };
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
    let daemon = match server::Daemon::new(cfg) {
        Ok(d) => d,
        Err(e) => {
            report::out(&format!("hands: {e:#}"));
            return ExitCode::from(1);
        }
    };
    report::out(&report::policy(&daemon));
    if doctor {
        report::out(&report::doctor(&daemon));
        let enforce = daemon.config.sandbox_mode == config::SandboxMode::Enforce;
        if enforce && daemon.self_test().is_some_and(|p| !p.missing().is_empty()) {
            return ExitCode::from(1);
        }
    }
    ExitCode::SUCCESS
}
