//! The front ends' side of the control socket: one [`Request`] to every live daemon of a
//! state dir (`hands stop`, `hands approvals`, a dashboard reaching the other daemons), or to
//! the first one (`hands exec`, a revoke), and their [`Reply`] lines back.

use crate::control::protocol::{LineError, MAX_REPLY, REQUEST_TIMEOUT, Reply, Request, SOCKET};
use std::io::{BufRead, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long a front end waits for an answer (`stop` waits for commands to end).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(20);

/// Why a daemon of the state dir gave no answer; each text names the socket (or the state dir).
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// No live control socket in the state dir: no daemon serves it.
    #[error(
        "no running daemon found in {} (no live control socket); start `hands serve` with this \
         config, or check --config: it must name the daemon's state_dir",
        state_dir.display()
    )]
    NoDaemon { state_dir: PathBuf },
    /// The socket is there, and connecting to it failed (other than nobody listening).
    #[error("cannot connect to {}: {source}", socket.display())]
    Connect { socket: PathBuf, source: std::io::Error },
    /// The request could not be sent, or the answer not read in time.
    #[error("{}: {source}", socket.display())]
    Exchange { socket: PathBuf, source: std::io::Error },
    /// The answer ran past [`MAX_REPLY`] bytes without ending: it is not read as less.
    #[error("{}: the daemon's answer is longer than {max} bytes, and was not read", socket.display())]
    TooLong { socket: PathBuf, max: u64 },
    /// The answer is not a reply this `hands` reads.
    #[error("{}: {source}", socket.display())]
    Reply { socket: PathBuf, source: LineError },
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

/// Connects to each live daemon of the state dir in turn: the connected stream, or the
/// error that prevented it, with its socket. Stale sockets are removed and skipped.
fn live(state_dir: &Path) -> impl Iterator<Item = (PathBuf, Result<UnixStream, ClientError>)> {
    sockets(state_dir).into_iter().filter_map(|path| match UnixStream::connect(&path) {
        Ok(s) => Some((path, Ok(s))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            // Nobody listens: a crashed daemon's socket.
            let _ = std::fs::remove_file(&path);
            None
        }
        Err(source) => {
            let why = ClientError::Connect { socket: path.clone(), source };
            Some((path, Err(why)))
        }
    })
}

/// Sends one request to every live daemon of the state dir; each answer (or the error that
/// prevented one) with its socket.
pub fn request_all(state_dir: &Path, req: &Request) -> Vec<(PathBuf, Result<Reply, ClientError>)> {
    live(state_dir)
        .map(|(path, stream)| {
            let answer = stream.and_then(|s| exchange(s, req, &path));
            (path, answer)
        })
        .collect()
}

/// Sends one request to the first live daemon of the state dir; `None` when none runs.
pub fn request_one(
    state_dir: &Path,
    req: &Request,
) -> Option<(PathBuf, Result<Reply, ClientError>)> {
    let (path, stream) = live(state_dir).next()?;
    let answer = stream.and_then(|s| exchange(s, req, &path));
    Some((path, answer))
}

/// [`request_all`] from async code: the exchanges block, so they run on the blocking pool.
pub async fn request_all_async(
    state_dir: PathBuf,
    req: Request,
) -> Vec<(PathBuf, Result<Reply, ClientError>)> {
    tokio::task::spawn_blocking(move || request_all(&state_dir, &req)).await.unwrap_or_default()
}

/// Sends one request to the first live daemon of the state dir and returns its answer lines
/// to read as they come (`exec`), each read bounded by `wait`.
pub fn stream_one(
    state_dir: &Path,
    req: &Request,
    wait: Duration,
) -> Result<std::io::BufReader<UnixStream>, ClientError> {
    let Some((path, stream)) = live(state_dir).next() else {
        return Err(ClientError::NoDaemon { state_dir: state_dir.to_path_buf() });
    };
    let mut stream = stream?;
    let sent = (|| {
        stream.set_read_timeout(Some(wait))?;
        stream.set_write_timeout(Some(REQUEST_TIMEOUT))?;
        stream.write_all(req.to_line().as_bytes())
    })();
    match sent {
        Ok(()) => Ok(std::io::BufReader::new(stream)),
        Err(source) => Err(ClientError::Exchange { socket: path, source }),
    }
}

/// Sends `req` on `stream` (connected to `socket`) and reads the one reply line.
fn exchange(mut stream: UnixStream, req: &Request, socket: &Path) -> Result<Reply, ClientError> {
    let answer = (|| {
        stream.set_read_timeout(Some(ANSWER_TIMEOUT))?;
        stream.set_write_timeout(Some(REQUEST_TIMEOUT))?;
        stream.write_all(req.to_line().as_bytes())?;
        let mut answer = String::new();
        std::io::BufReader::new(std::io::Read::take(stream, MAX_REPLY)).read_line(&mut answer)?;
        std::io::Result::Ok(answer)
    })()
    .map_err(|source| ClientError::Exchange { socket: socket.to_path_buf(), source })?;
    if answer.len() as u64 >= MAX_REPLY && !answer.ends_with('\n') {
        return Err(ClientError::TooLong { socket: socket.to_path_buf(), max: MAX_REPLY });
    }
    Reply::from_line(&answer)
        .map_err(|source| ClientError::Reply { socket: socket.to_path_buf(), source })
}
