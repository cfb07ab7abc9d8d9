//! A plain HTTP request's body, forwarded exactly as its head frames it (`Content-Length`, or
//! `Transfer-Encoding: chunked` read chunk by chunk) and not a byte more: whatever the command
//! sends after it — a second, pipelined request naming another `Host` — never reaches the
//! host the proxy admitted for the first (SPEC §5.4). A head whose framing is ambiguous (both
//! headers, two lengths, a coding other than chunked last) is refused before anything is sent.

use super::tunnel::{read_some, write_all};
use std::io;
use std::time::Duration;
use tokio::net::TcpStream;

/// The longest chunk-size or trailer line read.
const MAX_LINE: usize = 4096;
/// The most trailer lines after the last chunk.
const MAX_TRAILERS: usize = 100;

/// How a request's body is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// This many bytes (none without either header).
    Length(u64),
    Chunked,
}

/// Why a request's framing is ambiguous ([`framing`]): the proxy answers `400 Bad Request`
/// with it, and sends nothing on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FramingError {
    #[error("a request with both Transfer-Encoding and Content-Length")]
    Both,
    #[error("a request whose Transfer-Encoding does not end in one chunked")]
    NotChunked,
    #[error("a request whose Content-Length is not a number")]
    NotANumber,
    #[error("a request with differing Content-Length values")]
    Differing,
}

/// The framing of a request with these headers, or why it is refused (RFC 9112 §6).
pub fn framing(headers: &[(String, Vec<u8>)]) -> Result<Framing, FramingError> {
    let values = |name: &str| -> Vec<String> {
        headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .flat_map(|(_, v)| {
                String::from_utf8_lossy(v)
                    .split(',')
                    .map(|s| s.trim().to_ascii_lowercase())
                    .collect::<Vec<_>>()
            })
            .filter(|s| !s.is_empty())
            .collect()
    };
    let codings = values("transfer-encoding");
    let lengths = values("content-length");
    if !codings.is_empty() {
        if !lengths.is_empty() {
            return Err(FramingError::Both);
        }
        if codings.last().map(String::as_str) != Some("chunked")
            || codings.iter().filter(|c| *c == "chunked").count() != 1
        {
            return Err(FramingError::NotChunked);
        }
        return Ok(Framing::Chunked);
    }
    match lengths.as_slice() {
        [] => Ok(Framing::Length(0)),
        [first, rest @ ..] if rest.iter().all(|l| l == first) => first
            .parse::<u64>()
            .ok()
            .filter(|_| first.bytes().all(|b| b.is_ascii_digit()))
            .map(Framing::Length)
            .ok_or(FramingError::NotANumber),
        _ => Err(FramingError::Differing),
    }
}

/// The command's bytes: what the proxy read past the head first, then the connection.
struct Source<'a> {
    pending: Vec<u8>,
    at: usize,
    stream: &'a TcpStream,
    idle: Duration,
}

impl Source<'_> {
    /// At least one more byte in `pending[at..]`, or an error at the end or when idle.
    async fn fill(&mut self) -> io::Result<()> {
        if self.at < self.pending.len() {
            return Ok(());
        }
        let mut buf = vec![0u8; 64 * 1024];
        let n = tokio::time::timeout(self.idle, read_some(self.stream, &mut buf))
            .await
            .map_err(|_| io::Error::from(io::ErrorKind::TimedOut))??;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        self.pending = buf[..n].to_vec();
        self.at = 0;
        Ok(())
    }

    /// Forwards `n` bytes to `dst`.
    async fn copy(&mut self, mut n: u64, dst: &TcpStream) -> io::Result<u64> {
        let total = n;
        while n > 0 {
            self.fill().await?;
            let have = (self.pending.len() - self.at).min(usize::try_from(n).unwrap_or(usize::MAX));
            write_all(dst, &self.pending[self.at..self.at + have]).await?;
            self.at += have;
            n -= have as u64;
        }
        Ok(total)
    }

    /// Reads one line (through its `\n`), at most [`MAX_LINE`] bytes.
    async fn line(&mut self) -> io::Result<Vec<u8>> {
        let mut line = Vec::new();
        loop {
            self.fill().await?;
            let rest = &self.pending[self.at..];
            match rest.iter().position(|b| *b == b'\n') {
                Some(i) => {
                    line.extend_from_slice(&rest[..=i]);
                    self.at += i + 1;
                    return Ok(line);
                }
                None => {
                    line.extend_from_slice(rest);
                    self.at = self.pending.len();
                }
            }
            if line.len() > MAX_LINE {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "a chunk line too long"));
            }
        }
    }
}

/// Forwards the body of a request framed by `framing` from the command (`rest`, the bytes read
/// past the head, then `client`) to `upstream`; returns the bytes sent. Nothing after the body
/// is forwarded.
pub async fn forward(
    framing: Framing,
    rest: &[u8],
    client: &TcpStream,
    upstream: &TcpStream,
    idle: Duration,
) -> io::Result<u64> {
    let mut src = Source { pending: rest.to_vec(), at: 0, stream: client, idle };
    match framing {
        Framing::Length(n) => src.copy(n, upstream).await,
        Framing::Chunked => {
            let bad = |why: &str| io::Error::new(io::ErrorKind::InvalidData, why.to_string());
            let mut sent = 0u64;
            loop {
                let line = src.line().await?;
                let text = std::str::from_utf8(&line).map_err(|_| bad("a chunk size not ASCII"))?;
                let digits = text.split(';').next().unwrap_or_default().trim();
                let size = u64::from_str_radix(digits, 16).map_err(|_| bad("a bad chunk size"))?;
                if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(bad("a bad chunk size"));
                }
                write_all(upstream, &line).await?;
                sent += line.len() as u64;
                if size == 0 {
                    break;
                }
                sent += src.copy(size, upstream).await?;
                let end = src.line().await?;
                if end != b"\r\n" && end != b"\n" {
                    return Err(bad("a chunk not ended by CRLF"));
                }
                write_all(upstream, &end).await?;
                sent += end.len() as u64;
            }
            for _ in 0..=MAX_TRAILERS {
                let line = src.line().await?;
                write_all(upstream, &line).await?;
                sent += line.len() as u64;
                if line == b"\r\n" || line == b"\n" {
                    return Ok(sent);
                }
            }
            Err(bad("too many trailer lines"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(pairs: &[(&str, &str)]) -> Vec<(String, Vec<u8>)> {
        pairs.iter().map(|(n, v)| (n.to_string(), v.as_bytes().to_vec())).collect()
    }

    #[test]
    fn framing_follows_rfc_9112_and_refuses_ambiguity() {
        assert_eq!(framing(&h(&[])), Ok(Framing::Length(0)));
        assert_eq!(framing(&h(&[("Content-Length", "12")])), Ok(Framing::Length(12)));
        assert_eq!(framing(&h(&[("content-length", "5, 5")])), Ok(Framing::Length(5)));
        assert_eq!(framing(&h(&[("Transfer-Encoding", "gzip, chunked")])), Ok(Framing::Chunked));
        for (bad, why) in [
            (h(&[("Content-Length", "5"), ("Content-Length", "6")]), FramingError::Differing),
            (h(&[("Content-Length", "-1")]), FramingError::NotANumber),
            (h(&[("Content-Length", "+5")]), FramingError::NotANumber),
            (h(&[("Transfer-Encoding", "chunked"), ("Content-Length", "5")]), FramingError::Both),
            (h(&[("Transfer-Encoding", "chunked, gzip")]), FramingError::NotChunked),
            (
                h(&[("Transfer-Encoding", "chunked"), ("Transfer-Encoding", "chunked")]),
                FramingError::NotChunked,
            ),
        ] {
            assert_eq!(framing(&bad), Err(why), "{bad:?}");
        }
    }

    /// Sends `rest` + `more` as the command, forwards the body, and returns what the host got.
    async fn through(framing: Framing, rest: &[u8], more: &[u8]) -> io::Result<Vec<u8>> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let pair = || async {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let a = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
            let (b, _) = l.accept().await.unwrap();
            (a, b)
        };
        let (mut command, client) = pair().await;
        let (upstream, mut host) = pair().await;
        command.write_all(more).await.unwrap();
        let sent = forward(framing, rest, &client, &upstream, Duration::from_secs(2)).await;
        drop(upstream);
        let mut got = Vec::new();
        host.read_to_end(&mut got).await.unwrap();
        sent.map(|n| {
            assert_eq!(n as usize, got.len());
            got
        })
    }

    #[tokio::test]
    async fn only_the_framed_body_is_forwarded() {
        let smuggled = b"GET / HTTP/1.1\r\nHost: other.example\r\n\r\n";
        let mut more = b"lo".to_vec();
        more.extend(smuggled);
        assert_eq!(through(Framing::Length(5), b"hel", &more).await.unwrap(), b"hello");
        assert_eq!(through(Framing::Length(0), smuggled, b"").await.unwrap(), b"");
        let chunked = b"5;x=1\r\nhello\r\n0\r\nTrailer: t\r\n\r\n";
        let mut more = chunked[4..].to_vec();
        more.extend(smuggled);
        assert_eq!(through(Framing::Chunked, &chunked[..4], &more).await.unwrap(), chunked);
        for bad in [&b"zz\r\n"[..], b"5\r\nhelloXX", b"5\r\nhel"] {
            assert!(through(Framing::Chunked, bad, b"").await.is_err(), "{bad:?}");
        }
    }
}
