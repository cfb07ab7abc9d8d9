//! The daemon's local control socket, and the client side used by `hands stop` and `hands
//! approvals`.
//!
//! A serving daemon listens on `<state_dir>/control.sock`, mode 0600, and answers only peers
//! whose uid (SO_PEERCRED) is its own or root. The protocol is one JSON request line,
//! `{"op": "..."}`, then one JSON response line, `{"ok": true, ...}` or
//! `{"ok": false, "error": "..."}`. Ops: `status`, `stop`, `release`, and for `hands
//! approvals`: `approvals` (the parked actions), `answer` (`id`, and `allow` from a terminal or
//! `choice` + `via: "dashboard"` from another daemon's dashboard) and
//! `revoke_sessions`; a new op is one arm in [`answer`]. `exec` (`hands exec`, see
//! `src/exec.rs`) is the one op whose answer is several lines (the output as it comes); it goes
//! to one daemon, the first live socket, via [`stream_one`].
//!
//! Several daemons may share a state dir (every stdio client starts its own `hands serve`).
//! The first takes `control.sock`; while it lives, a later one listens on
//! `control-<pid>.sock` instead, and the client side asks every live socket, so `hands stop`
//! reaches every daemon of the state dir. A socket nobody listens on (left by a crash) is
//! stale: the daemon replaces it and the client removes it. When no socket can be made at all
//! (e.g. a state dir path too long for a unix socket), the daemon serves anyway and warns that
//! `hands stop` cannot reach it.

use crate::server::Daemon;
use serde_json::{Value, json};
use std::io::{BufRead, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

/// The primary socket's name in the state dir.
pub const SOCKET: &str = "control.sock";
/// The longest request line accepted.
const MAX_REQUEST: u64 = 64 * 1024;
/// How long a peer has to send its request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the client waits for an answer (`stop` waits for commands to end).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(20);

/// The bound socket; removes its file when dropped (only if the file is still this socket).
pub struct Control {
    path: PathBuf,
    id: (u64, u64),
}

impl Drop for Control {
    fn drop(&mut self) {
        if std::fs::symlink_metadata(&self.path).is_ok_and(|m| (m.dev(), m.ino()) == self.id) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Binds the control socket in the daemon's state dir and serves it on the current tokio
/// runtime until the runtime ends.
pub fn start(daemon: Arc<Daemon>) -> anyhow::Result<Control> {
    use anyhow::Context;
    let dir = crate::server::absolute(&daemon.config.state_dir);
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("cannot create the state dir {}", dir.display()))?;
    let pid = std::process::id();
    let tmp = dir.join(format!(".control-{pid}.sock.tmp"));
    let _ = std::fs::remove_file(&tmp);
    let std_listener = std::os::unix::net::UnixListener::bind(&tmp)
        .with_context(|| format!("cannot bind the control socket {}", tmp.display()))?;
    // Peers are checked by uid anyway; the mode keeps other users from even connecting.
    let made = (|| {
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))?;
        let primary = dir.join(SOCKET);
        let path = if claim(&tmp, &primary) {
            std::fs::remove_file(&tmp)?;
            primary
        } else {
            let own = dir.join(format!("control-{pid}.sock"));
            std::fs::rename(&tmp, &own)?;
            own
        };
        let m = std::fs::symlink_metadata(&path)?;
        std_listener.set_nonblocking(true)?;
        std::io::Result::Ok((path, (m.dev(), m.ino())))
    })();
    let (path, id) = match made {
        Ok(x) => x,
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            return Err(e)
                .context(format!("cannot set up the control socket in {}", dir.display()));
        }
    };
    let listener = tokio::net::UnixListener::from_std(std_listener)
        .context("cannot serve the control socket")?;
    tokio::spawn(async move {
        loop {
            match listener.accept().await {
                Ok((stream, _)) => {
                    tokio::spawn(connection(stream, daemon.clone()));
                }
                Err(e) => {
                    tracing::warn!("control socket: accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    });
    Ok(Control { path, id })
}

/// Takes `primary` for the socket at `tmp` (a hard link, so two daemons starting together
/// cannot both take it); false when a live daemon holds it.
fn claim(tmp: &Path, primary: &Path) -> bool {
    for _ in 0..2 {
        match std::fs::hard_link(tmp, primary) {
            Ok(()) => return true,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                if std::os::unix::net::UnixStream::connect(primary).is_ok() {
                    return false;
                }
                // Nobody listens: a crashed daemon's socket.
                let _ = std::fs::remove_file(primary);
            }
            Err(_) => return false,
        }
    }
    false
}

async fn connection(stream: tokio::net::UnixStream, daemon: Arc<Daemon>) {
    let me = rustix::process::geteuid().as_raw();
    let peer = stream.peer_cred();
    let (read, mut write) = stream.into_split();
    // The request line is read first, whoever the peer is, so a refused peer gets its answer
    // instead of a broken pipe; nothing in it is acted on before the checks below.
    let mut line = String::new();
    let mut limited = tokio::io::BufReader::new(tokio::io::AsyncReadExt::take(read, MAX_REQUEST));
    let got = tokio::time::timeout(REQUEST_TIMEOUT, limited.read_line(&mut line)).await;
    let reply = match peer.as_ref().map(|c| (c.uid(), c.pid())) {
        Ok((uid, pid)) if (uid == me || uid == 0) && !same_user_namespace(pid) => {
            tracing::warn!("control socket: refused a peer in another user namespace");
            fail("refused: the peer runs in another user namespace (a sandboxed command?)".into())
        }
        Ok((uid, _)) if uid == me || uid == 0 => match got {
            Ok(Ok(n)) if n > 0 => match serde_json::from_str::<Value>(&line) {
                Ok(req) if req.get("op").and_then(Value::as_str) == Some("exec") => {
                    crate::exec::serve(&req, &daemon, limited, &mut write).await;
                    let _ = write.shutdown().await;
                    return;
                }
                Ok(req) => answer(&req, &daemon).await,
                Err(e) => fail(format!("the request is not JSON ({e}); send {{\"op\": ...}}")),
            },
            _ => fail("no request line arrived".into()),
        },
        Ok((uid, _)) => {
            tracing::warn!("control socket: refused a peer with uid {uid}");
            fail(format!("refused: uid {uid} is neither this daemon's uid ({me}) nor root"))
        }
        Err(e) => fail(format!("refused: the peer's credentials cannot be read ({e})")),
    };
    let mut text = reply.to_string();
    text.push('\n');
    let _ = write.write_all(text.as_bytes()).await;
    let _ = write.shutdown().await;
}

/// Whether the peer shares the daemon's user namespace. A sandboxed command runs as the same
/// uid in a user namespace of its own; it must not reach the brake or, later, approvals (a
/// state dir placed inside a root would otherwise put the socket in its reach).
fn same_user_namespace(pid: Option<i32>) -> bool {
    let ns = |p: &str| std::fs::metadata(format!("/proc/{p}/ns/user")).map(|m| (m.dev(), m.ino()));
    match (pid, ns("self")) {
        (Some(pid), Ok(own)) => ns(&pid.to_string()).is_ok_and(|peer| peer == own),
        _ => false,
    }
}

fn fail(error: String) -> Value {
    json!({ "ok": false, "error": error })
}

/// One request's answer.
async fn answer(req: &Value, daemon: &Daemon) -> Value {
    let pid = std::process::id();
    match req.get("op").and_then(Value::as_str) {
        Some("status") => json!({ "ok": true, "pid": pid, "stopped": daemon.is_stopped() }),
        // A dashboard that already stopped (or released) its own daemon asks the others only.
        Some("stop" | "release")
            if req.get("except").and_then(Value::as_u64) == Some(pid.into()) =>
        {
            json!({ "ok": true, "pid": pid, "skipped": true })
        }
        Some("stop") => {
            let ended = daemon.stop().await;
            daemon.record_control("stop", format!("ok: ended {ended} commands and sessions")).await;
            json!({ "ok": true, "pid": pid, "stopped": true, "ended": ended })
        }
        Some("release") => {
            daemon.release();
            daemon.record_control("release", "ok".into()).await;
            json!({ "ok": true, "pid": pid, "stopped": false })
        }
        Some("approvals") => {
            json!({ "ok": true, "pid": pid, "pending": daemon.approvals.parked() })
        }
        Some("answer") => {
            use crate::approvals::{Channel, Choice, choice_named};
            // `choice` (once, session, always, reject) and `via: "dashboard"` come from another
            // daemon's dashboard; a terminal sends `allow`.
            let named = req.get("choice").and_then(Value::as_str).map(choice_named);
            let choice = match (named, req.get("allow").and_then(Value::as_bool)) {
                (Some(Some(c)), _) => c,
                (None, Some(allow)) => allow.then_some(Choice::Once),
                _ => {
                    return fail(
                        "`answer` needs \"id\" and \"allow\" (bool) or \"choice\" (once, \
                         session, always, reject)"
                            .into(),
                    );
                }
            };
            let via = match req.get("via").and_then(Value::as_str) {
                Some("dashboard") => Channel::Dashboard,
                _ => Channel::Terminal,
            };
            let Some(id) = req.get("id").and_then(Value::as_str) else {
                return fail("`answer` needs \"id\" (string)".into());
            };
            match daemon.approvals.answer_as(id, choice, via) {
                Ok(()) => json!({ "ok": true, "pid": pid }),
                Err(e) => fail(e),
            }
        }
        Some("revoke_sessions") => {
            daemon.approvals.revoke_sessions();
            json!({ "ok": true, "pid": pid })
        }
        Some(op) => fail(format!(
            "unknown op `{op}`; this daemon knows status, stop, release, approvals, answer, \
             revoke_sessions, exec"
        )),
        None => fail("the request has no \"op\"; send {\"op\": \"status\"}".into()),
    }
}

/// The control sockets in a state dir: `control.sock` first, then `control-<pid>.sock`.
fn sockets(state_dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(state_dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("control-") && n.ends_with(".sock"))
                .map(|n| state_dir.join(n))
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found.insert(0, state_dir.join(SOCKET));
    found
}

/// Sends one request to every live daemon of the state dir; each answer (or the error that
/// prevented one) with its socket. Stale sockets are removed and skipped.
pub fn request_all(state_dir: &Path, req: &Value) -> Vec<(PathBuf, Result<Value, String>)> {
    let mut out = Vec::new();
    for path in sockets(state_dir) {
        let stream = match std::os::unix::net::UnixStream::connect(&path) {
            Ok(s) => s,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                let _ = std::fs::remove_file(&path);
                continue;
            }
            Err(e) => {
                out.push((path.clone(), Err(format!("cannot connect to {}: {e}", path.display()))));
                continue;
            }
        };
        let answer = exchange(stream, req).map_err(|e| format!("{}: {e}", path.display()));
        out.push((path, answer));
    }
    out
}

/// Sends one request to the first live daemon of the state dir and returns its answer lines
/// to read as they come (`exec`), each read bounded by `wait`.
pub fn stream_one(
    state_dir: &Path,
    req: &Value,
    wait: Duration,
) -> Result<std::io::BufReader<std::os::unix::net::UnixStream>, String> {
    for path in sockets(state_dir) {
        let mut stream = match std::os::unix::net::UnixStream::connect(&path) {
            Ok(s) => s,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                let _ = std::fs::remove_file(&path);
                continue;
            }
            Err(e) => return Err(format!("cannot connect to {}: {e}", path.display())),
        };
        let sent = (|| {
            stream.set_read_timeout(Some(wait))?;
            stream.set_write_timeout(Some(REQUEST_TIMEOUT))?;
            let mut line = req.to_string();
            line.push('\n');
            stream.write_all(line.as_bytes())
        })();
        return match sent {
            Ok(()) => Ok(std::io::BufReader::new(stream)),
            Err(e) => Err(format!("{}: {e}", path.display())),
        };
    }
    Err(format!(
        "no running daemon found in {} (no live control socket); start `hands serve` with \
         this config, or check --config: it must name the daemon's state_dir",
        state_dir.display()
    ))
}

fn exchange(mut stream: std::os::unix::net::UnixStream, req: &Value) -> std::io::Result<Value> {
    stream.set_read_timeout(Some(ANSWER_TIMEOUT))?;
    stream.set_write_timeout(Some(REQUEST_TIMEOUT))?;
    let mut line = req.to_string();
    line.push('\n');
    stream.write_all(line.as_bytes())?;
    let mut answer = String::new();
    std::io::BufReader::new(std::io::Read::take(stream, MAX_REQUEST)).read_line(&mut answer)?;
    serde_json::from_str(&answer).map_err(|e| {
        std::io::Error::other(format!("the daemon's answer is not JSON ({e}): {answer:?}"))
    })
}
