//! Copies bytes both ways between a command's connection and the upstream host, counting them,
//! until both sides are done or neither has sent a byte for the idle time.

use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::time::Instant;

const BUF: usize = 64 * 1024;

/// Relays until both directions ended (each end's EOF is passed on as a shutdown of the
/// other's write side) or the connection was idle for `idle`. Returns the bytes sent from `a`
/// to `b` and from `b` to `a`.
pub async fn relay<A, B>(a: &mut A, b: &mut B, idle: Duration) -> (u64, u64)
where
    A: AsyncRead + AsyncWrite + Unpin,
    B: AsyncRead + AsyncWrite + Unpin,
{
    let (mut a_read, mut a_write) = tokio::io::split(a);
    let (mut b_read, mut b_write) = tokio::io::split(b);
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
