//! `hands`: the daemon's command line — serve MCP on stdio, check a configuration, run the doctor.
//!
//! Nothing but the MCP transport writes to stdout while serving; logs and the banner go to
//! stderr. `check` and `doctor` are the person's commands and print their report on stdout.
//! One file per subcommand (`serve.rs`, `relay_cmd.rs`, `check.rs`, `audit.rs`, `stop.rs`,
//! `approvals_cmd.rs`, `exec_cmd.rs`: `_cmd` where the daemon has a part of the same name); what
//! `check` and `doctor` print is in `printout.rs` and `doctor.rs`.

mod approvals_cmd;
mod audit;
mod check;
pub mod doctor;
mod exec_cmd;
mod init;
pub mod printout;
mod relay_cmd;
mod serve;
mod stop;

#[cfg(target_os = "linux")]
use hands_sandbox::launcher;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

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
        /// The configuration file (default: $HANDS_CONFIG, else
        /// ~/.config/hands/daemon.toml, else the embedded default; never the current folder's)
        #[arg(long)]
        config: Option<PathBuf>,
        /// Serve streamable HTTP at http://ADDR/mcp instead of stdio (overrides
        /// [server.http].listen)
        #[arg(long, value_name = "ADDR")]
        http: Option<String>,
        /// Log filter (also RUST_LOG), e.g. info, debug, hands=trace
        #[arg(long)]
        log_level: Option<String>,
        /// Serve the same folders read-only: the file and git read tools, no shell, no writes
        #[arg(long)]
        read_only: bool,
    },
    /// Write ~/.config/hands/daemon.toml for the project in the current folder, with the
    /// toolchains found here (rustup, a Python venv, nvm's Node, Go, …) visible read-only
    Init {
        /// Replace an existing file
        #[arg(long)]
        force: bool,
        /// Print what would be written; write nothing
        #[arg(long)]
        print: bool,
    },
    /// The organization's side of runner mode: runners connect in over a WebSocket, agents
    /// reach each runner at /runners/NAME/mcp
    Relay {
        /// The relay's configuration (relay.toml.example documents every key)
        #[arg(long)]
        config: PathBuf,
        /// Log filter (also RUST_LOG), e.g. info, debug
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
        action: approvals_cmd::ApprovalsCmd,
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
    /// Internal: run one command in the sandbox described by the JSON spec on descriptor 3
    /// (tools-shell's re-exec; see modules/sandbox)
    #[cfg(target_os = "linux")]
    #[command(name = "__sandbox", hide = true)]
    Sandbox,
    /// Internal: hold a module's private network namespace (see modules/sandbox/src/launcher/holder.rs)
    #[cfg(target_os = "linux")]
    #[command(name = "__netns", hide = true)]
    Netns { pidfile: PathBuf },
    /// Internal: mask new secret files in a running tmux session's sandbox (see
    /// modules/sandbox/src/launcher/remask.rs)
    #[cfg(target_os = "linux")]
    #[command(name = "__remask", hide = true)]
    Remask,
    /// Internal: open the network proxy's listeners inside a module's network namespace (see
    /// modules/sandbox/src/listen.rs)
    #[cfg(target_os = "linux")]
    #[command(name = "__netns-listen", hide = true)]
    NetnsListen {
        pid: i32,
        start: u64,
        /// Only a `sock_diag` socket made there (decision 0107).
        #[arg(long)]
        diag: bool,
    },
}

/// Parses the command line and runs the command it names; `src/main.rs` calls only this.
pub fn run() -> ExitCode {
    run_with(Vec::new)
}

/// [`run`], with `extra` tools served beside the modules' by `serve` (`Daemon::with_tools`):
/// how the MCP conformance suite's build (`tests/conformance`) adds its scenario tools.
pub fn run_with(extra: fn() -> Vec<crate::registry::Entry>) -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve { config, http, log_level, read_only } => {
            serve::serve(config, http, log_level, read_only, extra())
        }
        Command::Init { force, print } => init::init(force, print),
        Command::Relay { config, log_level } => {
            serve::init_logging(log_level.as_deref());
            // The relay's cap (1,024 connections) and its runners' links need more than a
            // desktop's soft limit of 1,024 descriptors.
            serve::raise_open_files();
            relay_cmd::relay(&config)
        }
        Command::Check { config } => check::check(config, false),
        Command::Doctor { config } => check::check(config, true),
        Command::Audit { config, follow, verify } => audit::audit_cmd(config, follow, verify),
        Command::Stop { config, release } => stop::stop_cmd(config, release),
        Command::Approvals { config, action } => approvals_cmd::approvals_cmd(config, action),
        Command::Exec { config, cwd, timeout_secs, argv } => {
            exec_cmd::exec_cmd(config, cwd, timeout_secs, argv)
        }
        #[cfg(target_os = "linux")]
        Command::Sandbox => launcher::main(),
        #[cfg(target_os = "linux")]
        Command::Netns { pidfile } => launcher::holder::holder_main(&pidfile),
        #[cfg(target_os = "linux")]
        Command::Remask => launcher::remask::main(),
        #[cfg(target_os = "linux")]
        Command::NetnsListen { pid, start, diag } => {
            hands_sandbox::listen::child_main(pid, start, diag)
        }
    }
}

/// mimalloc, not glibc's malloc: a `glob` over 57,000 files allocates a path and an entry per
/// file, and glibc spent a sixth of the walk in malloc/free; mimalloc cut the walk by a fifth
/// (benches/README.md). Built with `no_thp`: it does not ask for transparent huge pages, which
/// kept the idle daemon's few megabytes of heap in 2 MiB pages (21 against 14 MiB resident).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
