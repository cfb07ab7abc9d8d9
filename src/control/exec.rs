//! `hands exec -- BIN ARGS…` (SPEC §4.4), the daemon's side: a person's own command from a
//! terminal (`src/cli/exec_cmd.rs`), run by the serving daemon under the same allow/deny policy,
//! sandbox and audit log as `run`.
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
use crate::control::protocol::{Confirmed, Exec, Exited, Failure, Reply, Stream};
use crate::server::Daemon;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

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
        Err(e) => {
            return refuse(&arguments, DecidedBy::Policy, e.to_string()).await;
        }
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
    let caller = crate::shell_mcp::Caller::terminal(ct);
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
        Err(e) => {
            let msg = e.to_string();
            let outcome = if e.is_refusal() { "refused" } else { "error" };
            let entry =
                record(&arguments, Decision::Allow, decided_by, format!("{outcome}: {msg}"), None);
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
        audit_error: daemon.append_audit(entry).await.err().map(|e| e.to_string()),
    })
}
