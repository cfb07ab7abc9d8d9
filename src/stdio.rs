//! The stdio framing in front of rmcp: every line read from stdin is checked before rmcp sees
//! it, so a line that is not JSON gets a JSON-RPC parse error (-32700) and a JSON value that is
//! not a JSON-RPC message gets an invalid-request error (-32600), instead of silence. One writer
//! task owns stdout, so rmcp's responses and these errors never interleave within a line.

use rmcp::model::ClientJsonRpcMessage;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::mpsc;

/// Lines longer than this are refused whole (the rest of the line is skipped, not buffered).
const MAX_LINE: usize = 64 * 1024 * 1024;

/// Starts the pumps and returns the stream rmcp should serve on.
pub fn framed<R, W>(input: R, output: W) -> DuplexStream
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (ours, theirs) = tokio::io::duplex(1 << 20);
    let (from_rmcp, to_rmcp) = tokio::io::split(ours);
    let (tx, rx) = mpsc::channel::<Vec<u8>>(64);
    tokio::spawn(write_out(rx, output));
    tokio::spawn(pump_rmcp_output(from_rmcp, tx.clone()));
    tokio::spawn(pump_input(input, to_rmcp, tx));
    theirs
}

async fn write_out<W: AsyncWrite + Unpin>(mut rx: mpsc::Receiver<Vec<u8>>, mut out: W) {
    while let Some(mut line) = rx.recv().await {
        if line.last() != Some(&b'\n') {
            line.push(b'\n');
        }
        if out.write_all(&line).await.is_err() || out.flush().await.is_err() {
            return;
        }
    }
}

async fn pump_rmcp_output<R: AsyncRead + Unpin>(from: R, tx: mpsc::Sender<Vec<u8>>) {
    let mut r = BufReader::new(from);
    loop {
        let mut line = Vec::new();
        match r.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                if tx.send(line).await.is_err() {
                    return;
                }
            }
        }
    }
}

fn error_line(id: Value, code: i64, message: String) -> Vec<u8> {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
        .to_string()
        .into_bytes()
}

/// What to do with one input line: pass it to rmcp, or answer it here.
fn classify(line: &[u8]) -> Result<(), Option<Vec<u8>>> {
    if serde_json::from_slice::<ClientJsonRpcMessage>(line).is_ok() {
        return Ok(());
    }
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
                tracing::warn!("dropping a malformed notification");
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

async fn pump_input<R, W>(input: R, mut to_rmcp: W, tx: mpsc::Sender<Vec<u8>>)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut r = BufReader::with_capacity(1 << 16, input);
    loop {
        let (line, too_long) = match read_line_capped(&mut r).await {
            Ok(Some(x)) => x,
            Ok(None) | Err(_) => break,
        };
        if too_long {
            let e = error_line(
                Value::Null,
                -32700,
                format!("parse error: message longer than {MAX_LINE} bytes was skipped"),
            );
            if tx.send(e).await.is_err() {
                break;
            }
            continue;
        }
        let trimmed = line.trim_ascii();
        if trimmed.is_empty() {
            continue;
        }
        match classify(trimmed) {
            Ok(()) => {
                if to_rmcp.write_all(trimmed).await.is_err()
                    || to_rmcp.write_all(b"\n").await.is_err()
                    || to_rmcp.flush().await.is_err()
                {
                    break;
                }
            }
            Err(Some(answer)) => {
                if tx.send(answer).await.is_err() {
                    break;
                }
            }
            Err(None) => {}
        }
    }
    let _ = to_rmcp.shutdown().await;
}

/// Reads one line; past `MAX_LINE` bytes the rest of the line is consumed and dropped.
async fn read_line_capped<R: AsyncBufReadExt + Unpin>(
    r: &mut R,
) -> std::io::Result<Option<(Vec<u8>, bool)>> {
    let mut line = Vec::new();
    let mut too_long = false;
    loop {
        let buf = r.fill_buf().await?;
        if buf.is_empty() {
            return Ok(if line.is_empty() && !too_long { None } else { Some((line, too_long)) });
        }
        let (chunk, done) = match buf.iter().position(|b| *b == b'\n') {
            Some(i) => (&buf[..=i], true),
            None => (buf, false),
        };
        let n = chunk.len();
        if !too_long {
            if line.len() + n > MAX_LINE {
                too_long = true;
                line = Vec::new();
            } else {
                line.extend_from_slice(chunk);
            }
        }
        r.consume(n);
        if done {
            return Ok(Some((line, too_long)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classify_answers_garbage_and_passes_requests() {
        assert!(classify(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).is_ok());
        let e = classify(b"{nope").unwrap_err().unwrap();
        assert!(String::from_utf8(e).unwrap().contains("-32700"));
        let e = classify(br#"{"id":7,"hello":1}"#).unwrap_err().unwrap();
        let s = String::from_utf8(e).unwrap();
        assert!(s.contains("-32600") && s.contains("\"id\":7"), "{s}");
    }
}
