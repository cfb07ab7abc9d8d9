//! The daemon's side of the control socket: where `hands stop`, `hands approvals`, `hands
//! exec` and other daemons' dashboards reach a serving daemon.
//!
//! A serving daemon listens on `<state_dir>/control.sock`, mode 0600, and answers only peers
//! whose uid (SO_PEERCRED) is root, or its own in its own user namespace. The peer sends one
//! [`Request`] line and gets one [`Reply`] line ([`crate::control::protocol`]), from
//! [`Daemon::act`]; `exec` (`src/control/exec.rs`) is the one request answered by several
//! lines (the output as it comes).
//!
//! Several daemons may share a state dir (every stdio client starts its own `hands serve`).
//! The first takes `control.sock`; while it lives, a later one listens on
//! `control-<pid>.sock` instead, and the client side (`src/control/client.rs`) asks every
//! live socket, so `hands stop` reaches every daemon of the state dir. A socket nobody listens on (left by a crash) is
//! stale: the daemon replaces it and the client removes it. When no socket can be made at all
//! (e.g. a state dir path too long for a unix socket), the daemon serves anyway and warns that
//! `hands stop` cannot reach it.

use crate::control::protocol::{Failure, MAX_LINE, REQUEST_TIMEOUT, Reply, Request, SOCKET};
use crate::server::Daemon;
use crate::transport::conns::{Cut, Tally};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

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
    // Failed accepts (out of descriptors?) are counted into one warning a second at most.
    let tally = Tally::new("control socket");
    tokio::spawn(async move {
        loop {
            match listener.accept().await {
                Ok((stream, _)) => {
                    tokio::spawn(connection(stream, daemon.clone()));
                }
                Err(e) => {
                    tally.note(Cut::Accept, Some(e.to_string()));
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
    let mut limited = tokio::io::BufReader::new(tokio::io::AsyncReadExt::take(read, MAX_LINE));
    let got = tokio::time::timeout(REQUEST_TIMEOUT, limited.read_line(&mut line)).await;
    let reply = match peer.as_ref().map(|c| (c.uid(), c.pid())) {
        // The namespace is compared for a peer of the daemon's own uid: that is what a
        // sandboxed command is (the kernel reports its uid as this namespace sees it, so a
        // command that is "root" in its own user namespace shows as the uid it is mapped to,
        // never 0). A uid-0 peer of a daemon of another uid is the machine's root, whose
        // /proc/PID/ns/user this daemon may not even read; root may act
        // (docs/decisions/i18-rest-root-peer.md).
        Ok((uid, pid)) if uid == me && !same_user_namespace(pid) => {
            tracing::warn!("control socket: refused a peer in another user namespace");
            refused(
                "refused: the peer runs in another user namespace (a sandboxed command?); a \
                 person runs `hands` as the daemon's user or root, outside any sandbox",
            )
        }
        Ok((uid, _)) if uid == me || uid == 0 => match got {
            Ok(Ok(n)) if n > 0 => match Request::from_line(&line) {
                Ok(Request::Exec(req)) => {
                    crate::control::exec::serve(req, &daemon, limited, &mut write).await;
                    let _ = write.shutdown().await;
                    return;
                }
                Ok(req) => daemon.act(req).await,
                Err(e) => Reply::failed(Failure::Invalid, e.to_string()),
            },
            _ => Reply::failed(Failure::Invalid, "no request line arrived"),
        },
        Ok((uid, _)) => {
            tracing::warn!("control socket: refused a peer with uid {uid}");
            refused(&format!(
                "refused: uid {uid} is neither this daemon's uid ({me}) nor root; run `hands` \
                 as uid {me} or as root"
            ))
        }
        Err(e) => refused(&format!("refused: the peer's credentials cannot be read ({e})")),
    };
    let _ = write.write_all(reply.to_line().as_bytes()).await;
    let _ = write.shutdown().await;
}

fn refused(why: &str) -> Reply {
    Reply::failed(Failure::Refused, why)
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
