//! Copies bytes both ways between a command's connection and the upstream host, counting them,
//! until both sides are done or neither has sent a byte for the idle time.
//!
//! The bytes go through a pipe with `splice(2)`, socket to pipe and pipe to socket, so the
//! kernel moves page references instead of the proxy reading every byte into its own memory
//! and writing it out again (that second pass cost a 10 MB GET 2.4× its direct time on
//! loopback; see benches/README.md). Where a pipe cannot be made (the descriptor limit), the
//! relay copies through buffers instead.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt, Interest};
use tokio::net::TcpStream;
use tokio::time::Instant;

/// The buffer of the copying fallback, per direction.
const BUF: usize = 256 * 1024;
/// The pipe size asked for per direction: one `splice` moves up to this much. 1 MiB is the
/// default `fs.pipe-max-size`, which an ordinary user may ask for; a refusal keeps 64 KiB.
const PIPE: usize = 1024 * 1024;

/// Relays until both directions ended (each end's EOF is passed on as a shutdown of the
/// other's write side) or the connection was idle for `idle`. Returns the bytes sent from `a`
/// to `b` and from `b` to `a`.
pub async fn relay(a: &mut TcpStream, b: &mut TcpStream, idle: Duration) -> (u64, u64) {
    match (pipe(), pipe()) {
        (Ok(up), Ok(down)) => spliced(a, b, idle, up, down).await,
        _ => copied(a, b, idle).await,
    }
}

/// A plain HTTP request after its head: the body its head frames goes up (`body.rs`, nothing
/// after it), the host's answer comes down, until the host ends it, the body cannot be read as
/// framed, or nothing moved for `idle`. Returns the bytes sent up (the body) and down.
pub async fn request(
    framing: super::body::Framing,
    rest: &[u8],
    client: &TcpStream,
    upstream: &TcpStream,
    idle: Duration,
) -> (u64, u64) {
    let activity = Activity { start: Instant::now(), last_ms: AtomicU64::new(0) };
    let down = AtomicU64::new(0);
    let up_fut = super::body::forward(framing, rest, client, upstream, idle);
    let down_fut = async {
        match pipe() {
            Ok(p) => pump(upstream, client, p, &down, &activity).await,
            Err(_) => copy_down(upstream, client, &down, &activity).await,
        }
    };
    tokio::pin!(up_fut, down_fut);
    let mut up = None;
    loop {
        tokio::select! {
            r = &mut up_fut, if up.is_none() => match r {
                Ok(n) => {
                    activity.touch();
                    up = Some(n);
                }
                // A body that cannot be read as its head framed it: the request is broken.
                Err(_) => break,
            },
            _ = &mut down_fut => break,
            () = activity.idle(idle), if up.is_some() => break,
        }
    }
    (up.unwrap_or(0), down.load(Ordering::Relaxed))
}

/// One direction through a buffer, where no pipe can be made.
async fn copy_down(
    src: &TcpStream,
    dst: &TcpStream,
    moved: &AtomicU64,
    activity: &Activity,
) -> End {
    use super::tunnel::{read_some, write_all};
    let mut buf = vec![0u8; BUF];
    loop {
        match read_some(src, &mut buf).await {
            Ok(0) | Err(_) => {
                let _ = rustix::net::shutdown(dst, rustix::net::Shutdown::Write);
                return End::Eof;
            }
            Ok(n) => {
                if write_all(dst, &buf[..n]).await.is_err() {
                    return End::Broken;
                }
                moved.fetch_add(n as u64, Ordering::Relaxed);
                activity.touch();
            }
        }
    }
}

/// A non-blocking pipe, as large as the system lets an ordinary user have.
fn pipe() -> io::Result<(OwnedFd, OwnedFd, usize)> {
    use rustix::pipe::{PipeFlags, fcntl_getpipe_size, fcntl_setpipe_size, pipe_with};
    let (r, w) = pipe_with(PipeFlags::NONBLOCK | PipeFlags::CLOEXEC)?;
    let size = fcntl_setpipe_size(&w, PIPE).or_else(|_| fcntl_getpipe_size(&w))?;
    Ok((r, w, size))
}

/// What both directions share: the last time a byte moved, in milliseconds from `start`.
struct Activity {
    start: Instant,
    last_ms: AtomicU64,
}

impl Activity {
    fn touch(&self) {
        self.last_ms.store(self.start.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    /// Resolves once no byte moved for `idle`.
    async fn idle(&self, idle: Duration) {
        loop {
            let last = self.start + Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
            if last.elapsed() >= idle {
                return;
            }
            tokio::time::sleep_until(last + idle).await;
        }
    }
}

/// How a direction ended.
enum End {
    /// Its source sent EOF (or failed to read): passed on, the other direction goes on.
    Eof,
    /// Its destination refused a write: the connection is over.
    Broken,
}

async fn spliced(
    a: &TcpStream,
    b: &TcpStream,
    idle: Duration,
    up_pipe: (OwnedFd, OwnedFd, usize),
    down_pipe: (OwnedFd, OwnedFd, usize),
) -> (u64, u64) {
    let activity = Activity { start: Instant::now(), last_ms: AtomicU64::new(0) };
    let (up, down) = (AtomicU64::new(0), AtomicU64::new(0));
    let up_fut = pump(a, b, up_pipe, &up, &activity);
    let down_fut = pump(b, a, down_pipe, &down, &activity);
    tokio::pin!(up_fut, down_fut);
    let (mut up_open, mut down_open) = (true, true);
    while up_open || down_open {
        tokio::select! {
            end = &mut up_fut, if up_open => {
                up_open = false;
                if matches!(end, End::Broken) {
                    break;
                }
            }
            end = &mut down_fut, if down_open => {
                down_open = false;
                if matches!(end, End::Broken) {
                    break;
                }
            }
            () = activity.idle(idle) => break,
        }
    }
    (up.load(Ordering::Relaxed), down.load(Ordering::Relaxed))
}

/// One direction: `src` into the pipe, the pipe into `dst`, until `src` ends.
async fn pump(
    src: &TcpStream,
    dst: &TcpStream,
    (pipe_r, pipe_w, size): (OwnedFd, OwnedFd, usize),
    moved: &AtomicU64,
    activity: &Activity,
) -> End {
    use rustix::pipe::{SpliceFlags, splice};
    let flags = SpliceFlags::NONBLOCK | SpliceFlags::MOVE;
    loop {
        let filled = loop {
            if src.readable().await.is_err() {
                break 0;
            }
            match src.try_io(Interest::READABLE, || {
                splice(src.as_fd(), None, &pipe_w, None, size, flags).map_err(io::Error::from)
            }) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(_) => break 0,
            }
        };
        if filled == 0 {
            let _ = rustix::net::shutdown(dst, rustix::net::Shutdown::Write);
            return End::Eof;
        }
        let mut pending = filled;
        while pending > 0 {
            if dst.writable().await.is_err() {
                return End::Broken;
            }
            match dst.try_io(Interest::WRITABLE, || {
                splice(&pipe_r, None, dst.as_fd(), None, pending, flags).map_err(io::Error::from)
            }) {
                Ok(0) => return End::Broken,
                Ok(n) => {
                    pending -= n;
                    moved.fetch_add(n as u64, Ordering::Relaxed);
                    activity.touch();
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(_) => return End::Broken,
            }
        }
    }
}

/// The copying relay: a buffer per direction, read then written.
async fn copied(a: &mut TcpStream, b: &mut TcpStream, idle: Duration) -> (u64, u64) {
    let (mut a_read, mut a_write) = a.split();
    let (mut b_read, mut b_write) = b.split();
    let mut up_buf = vec![0u8; BUF];
    let mut down_buf = vec![0u8; BUF];
    let (mut up, mut down) = (0u64, 0u64);
    let (mut up_open, mut down_open) = (true, true);
    let mut deadline = Instant::now() + idle;
    while up_open || down_open {
        tokio::select! {
            r = a_read.read(&mut up_buf), if up_open => match r {
                Ok(0) | Err(_) => {
                    up_open = false;
                    let _ = b_write.shutdown().await;
                }
                Ok(n) => {
                    if b_write.write_all(&up_buf[..n]).await.is_err() {
                        break;
                    }
                    up += n as u64;
                    deadline = Instant::now() + idle;
                }
            },
            r = b_read.read(&mut down_buf), if down_open => match r {
                Ok(0) | Err(_) => {
                    down_open = false;
                    let _ = a_write.shutdown().await;
                }
                Ok(n) => {
                    if a_write.write_all(&down_buf[..n]).await.is_err() {
                        break;
                    }
                    down += n as u64;
                    deadline = Instant::now() + idle;
                }
            },
            () = tokio::time::sleep_until(deadline) => break,
        }
    }
    (up, down)
}
