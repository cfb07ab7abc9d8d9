//! `hands exec -- BIN ARGS…` (SPEC §4.4), the terminal's side: sends the request to the
//! serving daemon (`src/control/exec.rs` runs it), prints the command's output exactly as it
//! comes, asks y/N for a confirm-listed program, and exits with the command's status.

use crate::config;
use crate::control::protocol::{Confirmed, Exec, Reply, Request, Stream};
use crate::server;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The exit status of `hands exec` when the daemon refused the command or the person declined.
pub const REFUSED: u8 = 126;
/// The exit status when no daemon could be asked or its answer was not understood.
pub const UNREACHABLE: u8 = 125;

/// `hands exec -- BIN ARGS…`: the cwd is the given one, else the current folder when it lies
/// under a root of tools-shell (else the daemon uses the module's first root).
pub(super) fn exec_cmd(
    config: Option<PathBuf>,
    cwd: Option<PathBuf>,
    timeout_secs: Option<u64>,
    argv: Vec<String>,
) -> ExitCode {
    let cfg = match config::load(config.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            super::printout::out(&e.to_string());
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
    ExitCode::from(client(&dir, &argv, cwd, timeout_secs))
}

/// The terminal's side: `hands exec [--cwd DIR] [--timeout-secs N] -- BIN ARGS…`. Prints the
/// command's stdout and stderr exactly as it wrote them and returns its exit status (128 + N
/// for signal N); [`REFUSED`] when refused or declined; [`UNREACHABLE`] when no daemon answers.
#[expect(
    clippy::disallowed_methods,
    reason = "`hands exec` prints the program's output exactly, on the person's terminal"
)]
fn client(state_dir: &Path, argv: &[String], cwd: Option<String>, timeout: Option<u64>) -> u8 {
    let mut req = Exec { argv: argv.to_vec(), cwd, timeout_secs: timeout, answer: None };
    let wait = std::time::Duration::from_secs(timeout.unwrap_or(120) + 60);
    loop {
        let mut lines = match crate::control::client::stream_one(
            state_dir,
            &Request::Exec(req.clone()),
            wait,
        ) {
            Ok(l) => l,
            Err(e) => {
                say(&format!("hands: {e}"));
                return UNREACHABLE;
            }
        };
        let mut stdout = std::io::stdout().lock();
        let mut stderr = std::io::stderr().lock();
        let mut line = String::new();
        loop {
            line.clear();
            match lines.read_line(&mut line) {
                Ok(0) => {
                    say("hands: the daemon closed the connection before the command ended");
                    return UNREACHABLE;
                }
                Ok(_) => {}
                Err(e) => {
                    say(&format!("hands: reading the daemon's answer failed: {e}"));
                    return UNREACHABLE;
                }
            }
            let reply = match Reply::from_line(&line) {
                Ok(r) => r,
                Err(e) => {
                    say(&format!("hands: {e}"));
                    return UNREACHABLE;
                }
            };
            match reply {
                Reply::Output { stream, hex } => {
                    let bytes = hex::decode(hex).unwrap_or_default();
                    let _ = match stream {
                        Stream::Stderr => stderr.write_all(&bytes).and_then(|()| stderr.flush()),
                        Stream::Stdout => stdout.write_all(&bytes).and_then(|()| stdout.flush()),
                    };
                }
                Reply::Exited(end) => {
                    if let Some(e) = &end.audit_error {
                        say(&format!("hands: warning: {e}"));
                    }
                    if end.timed_out {
                        say("hands: the command timed out and was stopped");
                    }
                    if let Some(s) = end.signal {
                        return (128 + s.clamp(0, 127)) as u8;
                    }
                    return end.exit_code.map(|c| c as u8).unwrap_or(1);
                }
                Reply::Confirm { question } if req.answer.is_none() => {
                    drop((stdout, stderr));
                    let yes = ask(&format!("hands: {question} [y/N] "));
                    req.answer = Some(if yes { Confirmed::Yes } else { Confirmed::No });
                    break;
                }
                Reply::Failed { error, .. } => {
                    say(&format!("hands: {error}"));
                    return REFUSED;
                }
                _ => {
                    say("hands: the daemon refused");
                    return REFUSED;
                }
            }
        }
    }
}

/// One line on stderr.
fn say(s: &str) {
    let mut e = std::io::stderr().lock();
    let _ = writeln!(e, "{s}");
}

/// Asks on stderr and reads the answer from stdin: only `y` or `yes` is a yes.
fn ask(question: &str) -> bool {
    let mut e = std::io::stderr().lock();
    let _ = write!(e, "{question}");
    let _ = e.flush();
    let mut answer = String::new();
    if std::io::stdin().lock().read_line(&mut answer).is_err() {
        return false;
    }
    matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}
