//! `hands exec -- BIN ARGS…` (SPEC §4.4): a person's own command from a terminal, run by the
//! serving daemon under the same allow/deny policy, sandbox and audit log as `run`.
//!
//! Over the control socket, [`Request::Exec`](crate::control::protocol::Request::Exec): the
//! argv, cwd, timeout and, the second time, the person's answer. The daemon checks the policy
//! (names, deny, allow, PATH); a confirm-listed argv without `answer` gets [`Reply::Confirm`]
//! and no record (nothing is decided yet); the terminal asks `y/N` and sends the request again
//! with the answer. A run streams its output as [`Reply::Output`] lines (bytes exactly as
//! written), then its audit record is written, then one [`Reply::Exited`] line. A refusal is
//! recorded first and answered with [`Reply::Failed`]. Closing the connection (Ctrl-C at the
//! terminal) stops the command and its whole tree.
//!
//! Records: client `terminal`, module `tools-shell`, tool `exec`, class `external`, the argv and
//! the binary it resolved to; `decided_by` is `person-via-terminal` for a confirm-listed argv
//! (the person answered `y` or `N`) and `policy` otherwise.

use crate::audit::{DecidedBy, Decision, Entry};
use crate::control::protocol::{Confirmed, Exec, Exited, Failure, Reply, Request, Stream};
use crate::server::Daemon;
use serde_json::{Value, json};
use std::io::{BufRead, Write};
use std::path::Path;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The exit status of `hands exec` when the daemon refused the command or the person declined.
pub const REFUSED: u8 = 126;
/// The exit status when no daemon could be asked or its answer was not understood.
pub const UNREACHABLE: u8 = 125;

/// The daemon's side of one `exec` request; writes every answer line to `write` and watches
/// `read` for the terminal going away.
pub async fn serve<R, W>(req: Exec, daemon: &Daemon, read: R, write: &mut W)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin,
{
    let reply = run(req, daemon, read, write).await;
    let _ = write.write_all(reply.to_line().as_bytes()).await;
}

/// A refusal (the command did not run, or failed to start).
fn fail(error: String) -> Reply {
    Reply::failed(Failure::Conflict, error)
}

async fn run<R, W>(req: Exec, daemon: &Daemon, mut read: R, write: &mut W) -> Reply
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin,
{
    let Exec { argv, cwd, timeout_secs, answer } = req;
    let Some(shell) = daemon.shell().cloned() else {
        return fail(
            "this daemon runs no commands: tools-shell is not declared in its config (or the \
             host is not Linux)"
                .into(),
        );
    };
    let mut arguments = json!({ "argv": argv });
    if let Some(c) = &cwd {
        arguments["cwd"] = json!(c);
    }
    let record = |arguments: &Value, decision, decided_by, outcome: String, result| Entry {
        client: "terminal".into(),
        module: "tools-shell".into(),
        tool: "exec".into(),
        class: "external".into(),
        arguments: arguments.clone(),
        decision,
        decided_by,
        outcome,
        result,
    };
    let refuse = |arguments: &Value, by, msg: String| {
        let entry = record(arguments, Decision::Deny, by, format!("refused: {msg}"), None);
        async move {
            match daemon.append_audit(entry).await {
                Ok(()) => fail(msg),
                Err(e) => fail(format!("{msg}; and {e}")),
            }
        }
    };
    let checked = match shell.check(&argv) {
        Ok(c) => c,
        Err(crate::shell::Refusal(msg)) => return refuse(&arguments, DecidedBy::Policy, msg).await,
    };
    arguments["binary"] = json!(checked.program);
    if let Err(why) = daemon.audit_ready() {
        return refuse(&arguments, DecidedBy::Policy, format!("refused: {why}")).await;
    }
    if daemon.is_stopped() {
        let msg = "refused: a person stopped this daemon's commands with `hands stop`; they run \
                   again after `hands stop --release` (or a restart)";
        return refuse(&arguments, DecidedBy::Stop, msg.into()).await;
    }
    let decided_by = match (checked.confirm, answer) {
        (false, _) => DecidedBy::Policy,
        (true, Some(Confirmed::Yes)) => DecidedBy::PersonViaTerminal,
        (true, Some(Confirmed::No)) => {
            let msg = format!(
                "`{}` was not run: the person declined at the terminal",
                crate::shown::shown(&hands_shell::allow::show(&argv)).text
            );
            return refuse(&arguments, DecidedBy::PersonViaTerminal, msg).await;
        }
        (true, None) => {
            // The person reads this at a terminal: escapes shown, not obeyed (`src/shown.rs`).
            let line = crate::shown::shown(&hands_shell::allow::show(&argv));
            let program = crate::shown::shown(&checked.program.display().to_string());
            let note = if line.escaped || program.escaped {
                format!(" {}", crate::shown::NOTE)
            } else {
                String::new()
            };
            return Reply::Confirm {
                question: format!(
                    "`{}` ({}){note} is confirm-listed: run it?",
                    line.text, program.text
                ),
            };
        }
    };
    // The terminal going away (Ctrl-C) stops the command.
    let ct = tokio_util::sync::CancellationToken::new();
    let gone = ct.clone();
    let watcher = tokio::spawn(async move {
        let mut buf = [0u8; 256];
        loop {
            match read.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
        gone.cancel();
    });
    let (tx, mut rx) = tokio::sync::mpsc::channel::<(bool, Vec<u8>)>(16);
    let caller = crate::shell::Caller::terminal(ct);
    let running = shell.run_program(&checked, cwd, timeout_secs, caller, Some(tx));
    let forward = async {
        let mut open = true;
        while let Some((is_err, bytes)) = rx.recv().await {
            if !open {
                continue;
            }
            let stream = if is_err { Stream::Stderr } else { Stream::Stdout };
            let line = Reply::Output { stream, hex: hex::encode(&bytes) }.to_line();
            open = write.write_all(line.as_bytes()).await.is_ok();
        }
    };
    let (result, ()) = tokio::join!(running, forward);
    watcher.abort();
    let out = match result {
        Ok(out) => out,
        Err(crate::shell::Refusal(msg)) => {
            let entry =
                record(&arguments, Decision::Allow, decided_by, format!("error: {msg}"), None);
            return match daemon.append_audit(entry).await {
                Ok(()) => fail(msg),
                Err(e) => fail(format!("{msg}; and {e}")),
            };
        }
    };
    let value = serde_json::to_value(&out).unwrap_or(Value::Null);
    let facts = crate::audit::facts(&value);
    let entry = record(&arguments, Decision::Allow, decided_by, "ok".into(), facts);
    Reply::Exited(Exited {
        // A signal's ending has no exit code.
        exit_code: out.exit_code.filter(|_| out.signal.is_none()),
        signal: out.signal,
        timed_out: out.timed_out,
        duration_ms: out.duration_ms,
        containment: out.containment,
        audit_error: daemon.append_audit(entry).await.err(),
    })
}

/// The terminal's side: `hands exec [--cwd DIR] [--timeout-secs N] -- BIN ARGS…`. Prints the
/// command's stdout and stderr exactly as it wrote them and returns its exit status (128 + N
/// for signal N); [`REFUSED`] when refused or declined; [`UNREACHABLE`] when no daemon answers.
pub fn client(state_dir: &Path, argv: &[String], cwd: Option<String>, timeout: Option<u64>) -> u8 {
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
