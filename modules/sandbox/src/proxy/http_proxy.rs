//! The HTTP side of the proxy: `CONNECT host:port` tunnels (what HTTPS clients send) and plain
//! `GET http://host/…` requests, forwarded in origin form. One request per connection for plain
//! HTTP (`Connection: close` both ways, and only the body its head frames is forwarded:
//! `body.rs`), so a second request on the connection can never reach a host that was not
//! judged; a `Host` header that names another host than the URL is refused, and a tunnel's
//! first bytes are checked (`tunnel.rs`: the TLS server name). A refusal is `403` with a
//! one-line reason; a malformed head is `400`, an oversized one `431`; the proxy keeps serving.

use super::{Proxy, RefusedKind, body, cut, find, relay::relay, token_of, tunnel};
use base64::Engine;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const MAX_HEADERS: usize = 100;

/// Serves one connection of a command of client `on`.
pub async fn serve(proxy: Arc<Proxy>, mut client: TcpStream, on: &str) {
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
    // What the proxy checks is what is reached: a plain request's `Host` names the URL's host
    // (a server that hosts several names answers by `Host`), and its body is framed plainly.
    let framing = match &request.target {
        Goal::Tunnel { .. } => None,
        Goal::Plain { .. } => {
            if let Err(why) = request.host_matches(&host) {
                proxy.refused_request(request.token.as_deref(), &host, port, protocol, &why);
                return answer(&mut client, "403 Forbidden", &format!("hands: {why}")).await;
            }
            match body::framing(&request.headers) {
                Ok(f) => Some(f),
                Err(why) => {
                    return answer(&mut client, "400 Bad Request", &why.to_string()).await;
                }
            }
        }
    };
    let opened = match proxy.open(request.token.as_deref(), &host, port, protocol, on).await {
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
    let Some(framing) = framing else {
        if client.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n").await.is_err() {
            return;
        }
        return through_tunnel(&proxy, &mut opened, &mut client, rest).await;
    };
    let forwarded = request.forward();
    if opened.stream.write_all(&forwarded).await.is_err() {
        return;
    }
    let (up, down) =
        super::relay::request(framing, rest, &client, &opened.stream, proxy.limits.idle).await;
    proxy.close(&opened, up + forwarded.len() as u64, down);
}

/// A tunnel the proxy opened (a CONNECT's, or SOCKS5's), from its first flight (`initial`:
/// what the command sent with its request) to its end: judged (`tunnel.rs`), then relayed, or
/// served as one plain HTTP request ([`in_tunnel`]), and closed with its byte counts.
pub(super) async fn through_tunnel(
    proxy: &Proxy,
    opened: &mut super::Opened,
    client: &mut TcpStream,
    initial: &[u8],
) {
    match tunnel::open(proxy, opened, client, initial).await {
        tunnel::Tunnel::Relay { sent, down } => {
            let (up, more) = relay(client, &mut opened.stream, proxy.limits.idle).await;
            proxy.close(opened, up + sent, down + more);
        }
        tunnel::Tunnel::Http { bytes, down } => {
            if let Some((up, more)) = in_tunnel(proxy, opened, client, &bytes).await {
                proxy.close(opened, up, down + more);
            }
        }
        tunnel::Tunnel::Ended => {}
    }
}

/// A plain HTTP request that came as a tunnel's first flight (`bytes`: its whole head and what
/// followed it), served as a plain request to the tunnel's host: its `Host` must name that
/// host, only the body its head frames goes up, and it is the tunnel's one request. Returns the
/// bytes sent up and down; `None` when it was refused (recorded, and answered in the tunnel) or
/// malformed.
async fn in_tunnel(
    proxy: &Proxy,
    opened: &super::Opened,
    client: &TcpStream,
    bytes: &[u8],
) -> Option<(u64, u64)> {
    let refuse = |status: &str, why: &str| {
        let body = format!("{}\n", why.replace(['\r', '\n'], " "));
        format!(
            "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: \
             {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
    };
    let (end, head) = match parse_head(bytes) {
        Ok(parsed) => parsed,
        Err(Bad(status, why)) => {
            let _ = tunnel::write_all(client, &refuse(status, &why)).await;
            return None;
        }
    };
    let request = Request {
        method: head.method,
        version: head.version,
        target: Goal::Plain { host: opened.host.clone(), port: opened.port, path: head.uri },
        token: None,
        headers: head.headers,
    };
    if let Err(why) = request.host_matches(&opened.host) {
        proxy.refuse_opened(opened, &why);
        let _ = tunnel::write_all(client, &refuse("403 Forbidden", &format!("hands: {why}"))).await;
        return None;
    }
    let framing = match body::framing(&request.headers) {
        Ok(f) => f,
        Err(why) => {
            let _ = tunnel::write_all(client, &refuse("400 Bad Request", &why.to_string())).await;
            return None;
        }
    };
    let forwarded = request.forward();
    tunnel::write_all(&opened.stream, &forwarded).await.ok()?;
    let idle = proxy.limits.idle;
    let (up, down) =
        super::relay::request(framing, &bytes[end..], client, &opened.stream, idle).await;
    Some((up + forwarded.len() as u64, down))
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
    /// Whether the request's `Host` header (when it has one; a second is refused) names `host`,
    /// the URL's host the proxy judges; its port is not compared (the connection goes to the
    /// URL's port, and a server chooses what it serves by name).
    fn host_matches(&self, host: &str) -> Result<(), String> {
        let given: Vec<&Vec<u8>> = (self.headers.iter())
            .filter(|(n, _)| n.eq_ignore_ascii_case("host"))
            .map(|(_, v)| v)
            .collect();
        let named = match given.as_slice() {
            [] => return Ok(()),
            [one] => String::from_utf8_lossy(one).trim().to_string(),
            _ => return Err(format!("the request to {host} has more than one Host header")),
        };
        let same = authority(&named, Some(80))
            .is_ok_and(|(h, _)| tunnel::normal(&h) == tunnel::normal(host));
        if same {
            return Ok(());
        }
        Err(format!(
            "the request's Host header names {}, not {host}, the host the proxy admitted (a \
             server that hosts several names would answer for the other); send the request to \
             the URL of the host it is for",
            cut(&named)
        ))
    }

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

/// A request head as read: method, target as written, version, the proxy token, the headers to
/// forward (without the proxy's own and the connection's).
struct ParsedHead {
    method: String,
    uri: String,
    version: u8,
    token: Option<String>,
    headers: Vec<(String, Vec<u8>)>,
}

fn parse_head(bytes: &[u8]) -> Result<(usize, ParsedHead), Bad> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let end = match req.parse(bytes) {
        Ok(httparse::Status::Complete(end)) => end,
        Ok(httparse::Status::Partial) => {
            return Err(Bad("400 Bad Request", "an incomplete request head".into()));
        }
        Err(e) => return Err(Bad("400 Bad Request", format!("a malformed request head: {e}"))),
    };
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
    let head = ParsedHead {
        method: req.method.unwrap_or_default().to_string(),
        uri: req.path.unwrap_or_default().to_string(),
        version: req.version.unwrap_or(1),
        token,
        headers: kept,
    };
    Ok((end, head))
}

fn parse(bytes: &[u8]) -> Result<(usize, Request), Bad> {
    let (end, head) = parse_head(bytes)?;
    let ParsedHead { method, uri, version, token, headers: kept } = head;
    let uri = uri.as_str();
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
