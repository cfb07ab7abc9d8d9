//! The HTTP side of the proxy: `CONNECT host:port` tunnels (what HTTPS clients send) and plain
//! `GET http://host/…` requests, forwarded in origin form. One request per connection for plain
//! HTTP (`Connection: close` both ways), so a second request on a kept-alive connection can
//! never reach a host that was not judged. A refusal is `403` with a one-line reason; a
//! malformed head is `400`, an oversized one `431`; the proxy keeps serving.

use super::{Proxy, RefusedKind, relay::relay, token_of};
use base64::Engine;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const MAX_HEADERS: usize = 100;

pub async fn serve(proxy: Arc<Proxy>, mut client: TcpStream) {
    let head = match tokio::time::timeout(
        proxy.limits.handshake,
        read_head(&mut client, proxy.limits.head_bytes),
    )
    .await
    {
        Ok(Ok(head)) => head,
        Ok(Err(Bad(status, why))) => return answer(&mut client, status, &why).await,
        Err(_) => {
            return answer(&mut client, "408 Request Timeout", "no request head in time").await;
        }
    };
    let (end, request) = match parse(&head.bytes) {
        Ok(parsed) => parsed,
        Err(Bad(status, why)) => return answer(&mut client, status, &why).await,
    };
    let (host, port, protocol) = match &request.target {
        Goal::Tunnel { host, port } => (host.clone(), *port, "connect"),
        Goal::Plain { host, port, .. } => (host.clone(), *port, "http"),
    };
    let opened = match proxy.open(request.token.as_deref(), &host, port, protocol).await {
        Ok(opened) => opened,
        Err(refused) => {
            let status = match refused.kind {
                RefusedKind::Rule => "403 Forbidden",
                RefusedKind::Unreachable => "502 Bad Gateway",
            };
            return answer(&mut client, status, &format!("hands: {}", refused.why)).await;
        }
    };
    let mut opened = opened;
    let rest = &head.bytes[end..];
    let mut sent = rest.len() as u64;
    match &request.target {
        Goal::Tunnel { .. } => {
            if client.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n").await.is_err() {
                return;
            }
            if !rest.is_empty() && opened.stream.write_all(rest).await.is_err() {
                return;
            }
        }
        Goal::Plain { .. } => {
            let forwarded = request.forward();
            sent += forwarded.len() as u64;
            if opened.stream.write_all(&forwarded).await.is_err()
                || opened.stream.write_all(rest).await.is_err()
            {
                return;
            }
        }
    }
    let (up, down) = relay(&mut client, &mut opened.stream, proxy.limits.idle).await;
    proxy.close(&opened, up + sent, down);
}

/// A malformed or unacceptable request: the status line and why.
struct Bad(&'static str, String);

struct Head {
    bytes: Vec<u8>,
}

/// Reads until the end of the head (`\r\n\r\n`), at most `cap` bytes of head.
async fn read_head(client: &mut TcpStream, cap: usize) -> Result<Head, Bad> {
    let mut bytes = Vec::with_capacity(1024);
    let mut buf = [0u8; 4096];
    loop {
        let n = client
            .read(&mut buf)
            .await
            .map_err(|e| Bad("400 Bad Request", format!("cannot read the request: {e}")))?;
        if n == 0 {
            return Err(Bad("400 Bad Request", "the request ended before its head".into()));
        }
        let from = bytes.len().saturating_sub(3);
        bytes.extend_from_slice(&buf[..n]);
        if let Some(at) = find(&bytes[from..], b"\r\n\r\n") {
            if from + at + 4 > cap {
                break;
            }
            return Ok(Head { bytes });
        }
        if bytes.len() > cap {
            break;
        }
    }
    Err(Bad("431 Request Header Fields Too Large", format!("the request head is over {cap} bytes")))
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

enum Goal {
    Tunnel { host: String, port: u16 },
    Plain { host: String, port: u16, path: String },
}

struct Request {
    method: String,
    version: u8,
    target: Goal,
    token: Option<String>,
    /// The headers to forward, without the proxy's own.
    headers: Vec<(String, Vec<u8>)>,
}

impl Request {
    /// The head sent upstream for a plain request: origin form, no proxy headers, one request.
    fn forward(&self) -> Vec<u8> {
        let Goal::Plain { host, port, path } = &self.target else {
            return Vec::new();
        };
        let mut out = format!("{} {} HTTP/1.{}\r\n", self.method, path, self.version).into_bytes();
        let mut has_host = false;
        for (name, value) in &self.headers {
            if name.eq_ignore_ascii_case("host") {
                has_host = true;
            }
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value);
            out.extend_from_slice(b"\r\n");
        }
        if !has_host {
            let host = if *port == 80 { host.clone() } else { format!("{host}:{port}") };
            out.extend_from_slice(format!("Host: {host}\r\n").as_bytes());
        }
        out.extend_from_slice(b"Connection: close\r\n\r\n");
        out
    }
}

fn parse(bytes: &[u8]) -> Result<(usize, Request), Bad> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let end = match req.parse(bytes) {
        Ok(httparse::Status::Complete(end)) => end,
        Ok(httparse::Status::Partial) => {
            return Err(Bad("400 Bad Request", "an incomplete request head".into()));
        }
        Err(e) => return Err(Bad("400 Bad Request", format!("a malformed request head: {e}"))),
    };
    let method = req.method.unwrap_or_default().to_string();
    let uri = req.path.unwrap_or_default();
    let version = req.version.unwrap_or(1);
    let mut token = None;
    let mut kept = Vec::new();
    for h in req.headers.iter() {
        let name = h.name;
        if name.eq_ignore_ascii_case("proxy-authorization") {
            token = basic_token(h.value);
            continue;
        }
        if name.eq_ignore_ascii_case("proxy-connection")
            || name.eq_ignore_ascii_case("connection")
            || name.eq_ignore_ascii_case("keep-alive")
        {
            continue;
        }
        kept.push((name.to_string(), h.value.to_vec()));
    }
    let target = if method.eq_ignore_ascii_case("CONNECT") {
        let (host, port) = authority(uri, None)?;
        Goal::Tunnel { host, port }
    } else {
        let Some(rest) = uri.strip_prefix("http://").or_else(|| {
            uri.get(..7).filter(|p| p.eq_ignore_ascii_case("http://")).map(|_| &uri[7..])
        }) else {
            let why = if uri.starts_with('/') {
                "a request without a host: send it to the server, or use an absolute URL \
                 (`GET http://host/path`) through the proxy"
            } else {
                "only http:// URLs are forwarded as plain requests; HTTPS goes through CONNECT"
            };
            return Err(Bad("400 Bad Request", why.into()));
        };
        let (auth, path) = match rest.find(['/', '?']) {
            Some(i) => (&rest[..i], rest[i..].to_string()),
            None => (rest, "/".to_string()),
        };
        let path = if path.starts_with('?') { format!("/{path}") } else { path };
        let auth = auth.rsplit_once('@').map(|(_, a)| a).unwrap_or(auth);
        let (host, port) = authority(auth, Some(80))?;
        Goal::Plain { host, port, path }
    };
    Ok((end, Request { method, version, target, token, headers: kept }))
}

/// `host:port`, `[v6]:port`, or `host` with a default port.
fn authority(text: &str, default: Option<u16>) -> Result<(String, u16), Bad> {
    let bad = || Bad("400 Bad Request", format!("`{}` is not host:port", cut(text)));
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (inside, after) = rest.split_once(']').ok_or_else(bad)?;
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p.parse::<u16>().map_err(|_| bad())?),
            None if after.is_empty() => None,
            None => return Err(bad()),
        };
        (format!("[{inside}]"), port)
    } else {
        match text.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), Some(p.parse::<u16>().map_err(|_| bad())?)),
            None => (text.to_string(), None),
        }
    };
    let port = port.or(default).filter(|p| *p != 0).ok_or_else(bad)?;
    if host.is_empty() {
        return Err(bad());
    }
    Ok((host, port))
}

fn basic_token(value: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(value).ok()?.trim();
    let (scheme, b64) = text.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD.decode(b64.trim()).ok()?;
    let credentials = String::from_utf8(decoded).ok()?;
    token_of(&credentials).map(str::to_string)
}

fn cut(text: &str) -> String {
    if text.len() <= 200 {
        text.to_string()
    } else {
        let mut end = 200;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}… ({} bytes)", &text[..end], text.len())
    }
}

async fn answer(client: &mut TcpStream, status: &str, why: &str) {
    let body = format!("{}\n", why.replace(['\r', '\n'], " "));
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n",
        body.len()
    );
    let _ = client.write_all(head.as_bytes()).await;
    let _ = client.write_all(body.as_bytes()).await;
    let _ = client.shutdown().await;
}
