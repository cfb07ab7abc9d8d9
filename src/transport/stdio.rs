//! The stdio transport: rmcp's [`Transport`] over stdin and stdout, one JSON-RPC message per
//! line. Every line is parsed once, here: a line that is not JSON gets a JSON-RPC parse error
//! (-32700) and a JSON value that is not a JSON-RPC message this server understands gets an
//! invalid-request error (-32600), instead of silence. Lines are capped at [`MAX_LINE`]; a
//! longer one is skipped (never buffered whole) and answered with a parse error. Responses and
//! these errors share one writer behind a lock, so they never interleave within a line.
//!
//! The transport does its own reading and writing rather than handing rmcp a byte stream:
//! that would parse every message twice (once to check it, once in rmcp) and add two task
//! hand-offs to every call.

use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::service::RoleServer;
use rmcp::transport::Transport;
use serde_json::{Value, json};
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

/// Lines longer than this are refused whole (the rest of the line is skipped, not buffered).
const MAX_LINE: usize = 64 * 1024 * 1024;

/// What a UTF-8 byte-order mark at the start of a line is skipped as.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// The server's end of stdio: reads requests from `R`, writes answers to `W`.
pub struct Stdio<R, W> {
    input: BufReader<R>,
    /// The line being read. It lives here, not in `receive`'s future, because rmcp polls
    /// `receive` inside a `select!` and drops it whenever another branch is ready first: a
    /// half-read line must survive that.
    line: Vec<u8>,
    too_long: bool,
    output: Arc<Mutex<Option<W>>>,
    /// Cancelled when the client has gone: input ended and the process's stdout is broken.
    hangup: Option<CancellationToken>,
}

impl<R: AsyncRead + Unpin, W: AsyncWrite + Unpin> Stdio<R, W> {
    pub fn new(input: R, output: W) -> Self {
        Stdio {
            input: BufReader::with_capacity(1 << 16, input),
            line: Vec::new(),
            too_long: false,
            output: Arc::new(Mutex::new(Some(output))),
            hangup: None,
        }
    }

    /// Cancels `token` once the client has gone — its end of stdin closed and its end of this
    /// process's stdout too — so that running commands die at once instead of after rmcp's
    /// drain of in-flight answers (up to 5 s), which only serves a client that closed stdin but
    /// still reads. Watches the process's own stdout (fd 1): for the real stdio transport only.
    pub fn cancel_on_hangup(mut self, token: CancellationToken) -> Self {
        self.hangup = Some(token);
        self
    }

    /// Input has ended: watches stdout (every 100 ms) until it breaks, then cancels.
    fn watch_hangup(&mut self) {
        let Some(token) = self.hangup.take() else { return };
        tokio::spawn(async move {
            while !stdout_broken() {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            tracing::debug!("stdio client gone: cancelling its commands");
            token.cancel();
        });
    }

    /// The next whole line (without its newline), `(line, too_long)`; `None` at the end of
    /// input. Cancel-safe: what was read so far stays in `self`.
    async fn next_line(&mut self) -> Option<(Vec<u8>, bool)> {
        loop {
            let buf = match self.input.fill_buf().await {
                Ok(b) => b,
                Err(e) => {
                    tracing::debug!("stdin: {e}");
                    return None;
                }
            };
            if buf.is_empty() {
                // End of input: a last line without a newline still counts.
                if self.line.is_empty() && !self.too_long {
                    return None;
                }
                return Some(self.take_line());
            }
            let (chunk, done) = match buf.iter().position(|b| *b == b'\n') {
                Some(i) => (&buf[..i], i + 1),
                None => (buf, 0),
            };
            if !self.too_long {
                if self.line.len() + chunk.len() > MAX_LINE {
                    self.too_long = true;
                    self.line = Vec::new();
                } else {
                    self.line.extend_from_slice(chunk);
                }
            }
            let used = if done > 0 { done } else { chunk.len() };
            self.input.consume(used);
            if done > 0 {
                return Some(self.take_line());
            }
        }
    }

    fn take_line(&mut self) -> (Vec<u8>, bool) {
        let too_long = std::mem::take(&mut self.too_long);
        (std::mem::take(&mut self.line), too_long)
    }
}

/// Writes one line and flushes it; an error means stdout is gone.
async fn write_line<W: AsyncWrite + Unpin>(
    output: &Mutex<Option<W>>,
    mut line: Vec<u8>,
) -> std::io::Result<()> {
    line.push(b'\n');
    let mut out = output.lock().await;
    let Some(w) = out.as_mut() else {
        return Err(std::io::Error::new(std::io::ErrorKind::NotConnected, "stdout is closed"));
    };
    w.write_all(&line).await?;
    w.flush().await
}

impl<R, W> Transport<RoleServer> for Stdio<R, W>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let output = self.output.clone();
        let line = serde_json::to_vec(&item);
        async move {
            let line = line.map_err(|e| {
                std::io::Error::new(std::io::ErrorKind::InvalidData, format!("encode: {e}"))
            })?;
            write_line(&output, line).await
        }
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        loop {
            let Some((line, too_long)) = self.next_line().await else {
                self.watch_hangup();
                return None;
            };
            let answer = if too_long {
                Some(error_line(
                    Value::Null,
                    -32700,
                    format!("parse error: message longer than {MAX_LINE} bytes was skipped"),
                ))
            } else {
                let trimmed = line.trim_ascii();
                let trimmed = trimmed.strip_prefix(BOM).unwrap_or(trimmed);
                if trimmed.is_empty() {
                    continue;
                }
                match classify(trimmed) {
                    Ok(message) => return Some(message),
                    Err(answer) => answer,
                }
            };
            if let Some(answer) = answer
                && write_line(&self.output, answer).await.is_err()
            {
                // Stdout is gone: so is the client.
                self.watch_hangup();
                return None;
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        if let Some(mut w) = self.output.lock().await.take() {
            let _ = w.shutdown().await;
        }
        Ok(())
    }
}

/// Whether the reader of this process's stdout has gone (a pipe's or socket's other end
/// closed: `POLLERR`/`POLLHUP`).
#[expect(clippy::disallowed_methods, reason = "the stdio transport: stdout is the protocol")]
fn stdout_broken() -> bool {
    use rustix::event::{PollFd, PollFlags, Timespec};
    let stdout = std::io::stdout();
    let mut fds = [PollFd::new(&stdout, PollFlags::OUT)];
    let now = Timespec { tv_sec: 0, tv_nsec: 0 };
    match rustix::event::poll(&mut fds, Some(&now)) {
        Ok(_) => fds[0].revents().intersects(PollFlags::ERR | PollFlags::HUP),
        // Nothing to watch: nothing will tell.
        Err(_) => false,
    }
}

fn error_line(id: Value, code: i64, message: String) -> Vec<u8> {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
        .to_string()
        .into_bytes()
}

/// One input line: the message rmcp serves, or the error line to answer it with (`None`: drop
/// it in silence, as for a malformed notification, which has no id to answer).
fn classify(line: &[u8]) -> Result<ClientJsonRpcMessage, Option<Vec<u8>>> {
    let first = match serde_json::from_slice::<ClientJsonRpcMessage>(line) {
        Ok(m) => return Ok(m),
        Err(e) => e,
    };
    match serde_json::from_slice::<Value>(line) {
        Err(e) => Err(Some(error_line(
            Value::Null,
            -32700,
            format!(
                "parse error: the line is not valid JSON ({e}); send one JSON-RPC message per line"
            ),
        ))),
        Ok(v) => {
            let id = v.get("id").cloned();
            let is_notification = v.get("method").is_some() && id.is_none();
            if is_notification {
                tracing::warn!("dropping a malformed notification: {first}");
                return Err(None);
            }
            Err(Some(error_line(
                id.unwrap_or(Value::Null),
                -32600,
                "invalid request: not a JSON-RPC 2.0 request, response or notification this \
                 server understands"
                    .to_string(),
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[test]
    fn classify_answers_garbage_and_passes_requests() {
        assert!(classify(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).is_ok());
        let e = classify(b"{nope").unwrap_err().unwrap();
        assert!(String::from_utf8(e).unwrap().contains("-32700"));
        let e = classify(br#"{"id":7,"hello":1}"#).unwrap_err().unwrap();
        let s = String::from_utf8(e).unwrap();
        assert!(s.contains("-32600") && s.contains("\"id\":7"), "{s}");
    }

    /// A line split across reads, with `receive` dropped between them (as rmcp's `select!`
    /// does), still arrives whole; garbage in between is answered, blank lines skipped.
    #[tokio::test]
    async fn a_line_survives_a_dropped_receive() {
        let (mut client, server_in) = tokio::io::duplex(1024);
        let (server_out, mut replies) = tokio::io::duplex(1024);
        let mut t = Stdio::new(server_in, server_out);
        client.write_all(b"\n{nope}\n{\"jsonrpc\":\"2.0\",\"id\":1,").await.unwrap();
        let pending = tokio::time::timeout(std::time::Duration::from_millis(50), t.receive());
        assert!(pending.await.is_err(), "no whole message yet");
        client.write_all(b"\"method\":\"ping\"}\n").await.unwrap();
        let m = t.receive().await.expect("the ping");
        assert!(matches!(m, ClientJsonRpcMessage::Request(_)), "{m:?}");
        let mut buf = vec![0u8; 512];
        let n = replies.read(&mut buf).await.unwrap();
        let text = String::from_utf8_lossy(&buf[..n]);
        assert!(text.contains("-32700") && text.ends_with('\n'), "{text}");
        drop(client);
        assert!(t.receive().await.is_none(), "end of input ends the transport");
    }
}
