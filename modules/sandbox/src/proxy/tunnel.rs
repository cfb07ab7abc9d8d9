//! What the proxy checked is what a tunnel reaches (SPEC §5.4): the first bytes a command sends
//! into a CONNECT or SOCKS5 tunnel are read before any of them goes upstream, and judged
//! against the host the proxy admitted:
//!
//! - a TLS ClientHello must name that host (SNI, case and a final dot aside); with no name it
//!   passes only when the target is an IP address (there is no name to compare); an ECH
//!   extension passes only beside a matching outer name (a real ECH's outer name is its
//!   provider's, which no target matches);
//! - a plain HTTP/1 request (a method, a space, and ` HTTP/` on its first line: `curl
//!   --proxytunnel`, an `http://` URL through SOCKS) is served as the HTTP proxy serves a plain
//!   request (`http_proxy.rs`): its `Host` must name the host, only the body its head frames goes
//!   up, and it is the tunnel's one request (`Connection: close`), so no later request on the
//!   connection goes unchecked;
//! - HTTP/2 without TLS (its preface, `PRI * HTTP/2.0`) is refused: its requests name their host
//!   in HPACK-compressed frames, which the proxy does not read;
//! - anything else (SSH, a database's protocol) passes as it is.
//!
//! While the command has sent nothing, the host's bytes go to it (a server that speaks first);
//! once it has sent part of a first message, the rest must come within the handshake time.

use super::sni::{self, Hello};
use std::io;
use tokio::net::TcpStream;
use tokio::time::Instant;

/// The longest first line of a plain HTTP request the proxy waits for.
const MAX_LINE: usize = 16 * 1024;

/// The first flight's bytes (to send upstream first), what they are, and the bytes the host
/// sent meanwhile.
pub struct FirstFlight {
    pub bytes: Vec<u8>,
    pub kind: Flight,
    pub down: u64,
}

/// What the first flight was.
pub enum Flight {
    /// Anything but plain HTTP, judged and passed: relay it.
    Pass,
    /// A plain HTTP request's whole head: serve it as the HTTP proxy serves one.
    Http,
}

/// Why a tunnel was refused, and what to answer the command in it.
pub struct Refusal {
    pub why: String,
    /// The bytes that tell the command's client (a TLS alert, an HTTP 403), when one fits.
    pub answer: Vec<u8>,
}

/// How the first bytes look so far.
enum Verdict {
    Pass,
    Http,
    Need,
    Refuse(Refusal),
}

/// How a tunnel went on after its first flight.
pub(super) enum Tunnel {
    /// Judged and sent upstream: relay the rest (bytes sent up and down so far).
    Relay { sent: u64, down: u64 },
    /// A plain HTTP request (`bytes`: its head and what followed, nothing sent upstream yet;
    /// `down`: bytes the host sent so far), for `http_proxy.rs` to serve as the tunnel's one request.
    Http { bytes: Vec<u8>, down: u64 },
    /// Refused (recorded, and answered in the tunnel), or ended before anything was judged.
    Ended,
}

/// Judges the first flight of a tunnel the proxy opened (`initial`: what the command sent
/// with its request) and goes on with it: a pass is sent upstream, a plain HTTP request is
/// handed back for `http_proxy.rs` to serve (`http_proxy::through_tunnel`); a refusal is recorded (the
/// command's result lists it) and answered in the tunnel.
pub(super) async fn open(
    proxy: &super::Proxy,
    opened: &super::Opened,
    client: &TcpStream,
    initial: &[u8],
) -> Tunnel {
    let limits = &proxy.limits;
    let judged =
        first_flight(client, &opened.stream, &opened.host, initial, limits.handshake, limits.idle);
    match judged.await {
        Ok(FirstFlight { bytes, kind: Flight::Pass, down }) => {
            match write_all(&opened.stream, &bytes).await {
                Ok(()) => Tunnel::Relay { sent: bytes.len() as u64, down },
                Err(_) => Tunnel::Ended,
            }
        }
        Ok(FirstFlight { bytes, kind: Flight::Http, down }) => {
            // Empty lines before the request line are dropped, as servers ignore them.
            let bytes = bytes[blank_lines(&bytes)..].to_vec();
            Tunnel::Http { bytes, down }
        }
        Err(Some(refusal)) => {
            proxy.refuse_opened(opened, &refusal.why);
            let _ = write_all(client, &refusal.answer).await;
            Tunnel::Ended
        }
        Err(None) => Tunnel::Ended,
    }
}

/// Reads and judges the command's first flight into a tunnel to `host` (as the proxy shows
/// it), starting with `initial`. `handshake` bounds a partial first message, `idle` the wait
/// for the first byte.
async fn first_flight(
    client: &TcpStream,
    upstream: &TcpStream,
    host: &str,
    initial: &[u8],
    handshake: std::time::Duration,
    idle: std::time::Duration,
) -> Result<FirstFlight, Option<Refusal>> {
    let mut bytes = initial.to_vec();
    if !bytes.is_empty() {
        match judge(&bytes, host) {
            Verdict::Pass => return Ok(FirstFlight { bytes, kind: Flight::Pass, down: 0 }),
            Verdict::Http => return Ok(FirstFlight { bytes, kind: Flight::Http, down: 0 }),
            Verdict::Refuse(r) => return Err(Some(r)),
            Verdict::Need => {}
        }
    }
    let mut down = 0u64;
    let mut buf = vec![0u8; 16 * 1024];
    let mut from_host = vec![0u8; 16 * 1024];
    let mut deadline = Instant::now() + if bytes.is_empty() { idle } else { handshake };
    loop {
        tokio::select! {
            r = read_some(client, &mut buf) => {
                let n = r.map_err(|_| None)?;
                if n == 0 {
                    // The command ended the tunnel before a whole first message: nothing to
                    // judge, and nothing reaches the host.
                    return if bytes.is_empty() {
                        Ok(FirstFlight { bytes, kind: Flight::Pass, down })
                    } else {
                        Err(None)
                    };
                }
                if bytes.is_empty() {
                    deadline = Instant::now() + handshake;
                }
                bytes.extend_from_slice(&buf[..n]);
                match judge(&bytes, host) {
                    Verdict::Pass => return Ok(FirstFlight { bytes, kind: Flight::Pass, down }),
                    Verdict::Http => return Ok(FirstFlight { bytes, kind: Flight::Http, down }),
                    Verdict::Refuse(r) => return Err(Some(r)),
                    Verdict::Need => {}
                }
            }
            r = read_some(upstream, &mut from_host) => {
                let n = r.map_err(|_| None)?;
                if n == 0 {
                    return Err(None);
                }
                write_all(client, &from_host[..n]).await.map_err(|_| None)?;
                down += n as u64;
            }
            () = tokio::time::sleep_until(deadline) => {
                return Err(Some(Refusal {
                    why: "the command's first message into the tunnel did not come whole in \
                          time, so it could not be checked"
                        .into(),
                    answer: Vec::new(),
                }));
            }
        }
    }
}

/// How many bytes of empty lines (CR, LF) `bytes` starts with: HTTP servers skip them before a
/// request line (RFC 9112 §2.2), so they do not make a request something else (found by the
/// fourth attack pass: `\r\nGET … Host: denied` in a tunnel passed unchecked).
fn blank_lines(bytes: &[u8]) -> usize {
    bytes.iter().take_while(|b| **b == b'\r' || **b == b'\n').count()
}

/// Whether `bytes` start a ClientHello in SSLv2's record format (RFC 5246 appendix E.2: a
/// two-byte length with its high bit set, message type 1, a version 2.0 or 3.x), which carries
/// no extensions and so no server name; `None` while it cannot be told.
fn sslv2_hello(bytes: &[u8]) -> Option<bool> {
    match bytes {
        [b0, ..] if b0 & 0x80 == 0 => Some(false),
        [_, _, t, v, _, ..] => Some(*t == 1 && matches!(*v, 0 | 2 | 3)),
        _ => None,
    }
}

/// Judges the bytes so far.
fn judge(bytes: &[u8], host: &str) -> Verdict {
    match sslv2_hello(bytes) {
        None => return Verdict::Need,
        // Found by the fourth attack pass: such a hello reached a name target unchecked.
        Some(true) => {
            let nameless = sni::ClientHello { server_name: None, ech: false };
            return judge_hello(&nameless, host);
        }
        Some(false) => {}
    }
    let all = bytes.len();
    let bytes = &bytes[blank_lines(bytes)..];
    if bytes.is_empty() {
        if all > MAX_LINE {
            return Verdict::Refuse(Refusal {
                why: format!("over {MAX_LINE} bytes of empty lines in a tunnel to {host}"),
                answer: http_status("400 Bad Request", "only empty lines were sent"),
            });
        }
        return Verdict::Need;
    }
    if bytes.first() == Some(&0x16) {
        return match sni::client_hello(bytes) {
            Hello::Need => Verdict::Need,
            Hello::Bad(why) => refuse_tls(format!("{why}, so its server name cannot be checked")),
            Hello::Done(hello) => judge_hello(&hello, host),
        };
    }
    if bytes.starts_with(H2_PREFACE) {
        return Verdict::Refuse(Refusal {
            why: format!(
                "HTTP/2 without TLS (prior knowledge) in a tunnel to {host}: its requests name \
                 their host inside compressed headers, which the proxy does not read; use https \
                 (HTTP/2 over TLS names its host in the handshake) or HTTP/1.1"
            ),
            answer: h2_refusal(),
        });
    }
    match plain_http(bytes) {
        // A whole head is served as a plain request; a head that never ends is refused.
        Some(true) if super::head_end(bytes).is_some() => Verdict::Http,
        Some(true) if bytes.len() > MAX_LINE => Verdict::Refuse(Refusal {
            why: format!("a plain HTTP request head in a tunnel to {host} over {MAX_LINE} bytes"),
            answer: http_status(
                "431 Request Header Fields Too Large",
                "the request head is too large",
            ),
        }),
        Some(true) | None => Verdict::Need,
        Some(false) => Verdict::Pass,
    }
}

/// The first line of HTTP/2's connection preface (RFC 9113 §3.4), which a client with prior
/// knowledge sends first, without TLS and without an `Upgrade`. Its head would pass as a plain
/// request (`PRI * HTTP/2.0` and an empty line) with no `Host`, and every request after it names
/// its host in HPACK-compressed frames (found by the fourth attack pass, noted in session 27).
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n";

/// What an HTTP/2 client understands as "use HTTP/1.1": the server's preface (an empty
/// SETTINGS frame) and a GOAWAY with `HTTP_1_1_REQUIRED` (RFC 9113 §7), whose debug data says
/// why.
fn h2_refusal() -> Vec<u8> {
    let debug = b"hands: HTTP/2 without TLS cannot be checked; use https or HTTP/1.1";
    let mut out = vec![0, 0, 0, 0x4, 0, 0, 0, 0, 0];
    let len = (8 + debug.len()) as u32;
    out.extend_from_slice(&len.to_be_bytes()[1..]);
    out.extend_from_slice(&[0x7, 0, 0, 0, 0, 0]);
    out.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0x0d]);
    out.extend_from_slice(debug);
    out
}

fn judge_hello(hello: &sni::ClientHello, host: &str) -> Verdict {
    let target = normal(host);
    let is_ip = target.parse::<std::net::IpAddr>().is_ok()
        || target
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::Ipv6Addr>()
            .is_ok();
    match &hello.server_name {
        Some(name) if normal(name) == target => Verdict::Pass,
        Some(name) => refuse_tls(format!(
            "the TLS ClientHello names {} (SNI), not {host}, the host the proxy admitted",
            super::cut(name)
        )),
        None if is_ip => Verdict::Pass,
        None if hello.ech => refuse_tls(format!(
            "the TLS ClientHello to {host} hides its server name (encrypted ClientHello) and \
             names no outer one"
        )),
        None => refuse_tls(format!(
            "the TLS ClientHello to {host} names no server (no SNI), so the server it reaches \
             cannot be checked"
        )),
    }
}

fn refuse_tls(why: String) -> Verdict {
    // A fatal `access_denied` alert (RFC 8446 §6.2): clients print "alert access denied".
    Verdict::Refuse(Refusal { why, answer: vec![0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 49] })
}

fn http_status(status: &str, why: &str) -> Vec<u8> {
    let body = format!("hands: {why}\n");
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: \
         {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// A host name as compared: lowercase, without a final dot.
pub fn normal(host: &str) -> String {
    host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase()
}

/// Whether the bytes start a plain HTTP/1 request: `Some(true)` when the first line is
/// `METHOD SP … SP HTTP/…` (or such a start runs past [`MAX_LINE`] without ending), `Some(false)`
/// when they cannot, `None` while it cannot be told yet.
fn plain_http(bytes: &[u8]) -> Option<bool> {
    let method = |b: &u8| b.is_ascii_uppercase() || *b == b'_' || *b == b'-';
    let n = bytes.iter().take_while(|b| method(b)).count();
    if n == bytes.len() {
        return if n > 32 { Some(false) } else { None };
    }
    if n == 0 || n > 32 || bytes[n] != b' ' {
        return Some(false);
    }
    match bytes.iter().position(|b| *b == b'\n') {
        Some(end) => {
            let line = &bytes[..end];
            Some(line.windows(6).any(|w| w == b" HTTP/"))
        }
        None if bytes.len() > MAX_LINE => Some(true),
        None => None,
    }
}

/// Reads what is there (at least one byte, or 0 at the end), through `&TcpStream`.
pub async fn read_some(s: &TcpStream, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        s.readable().await?;
        match s.try_read(buf) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            r => return r,
        }
    }
}

/// Writes all of `data`, through `&TcpStream`.
pub async fn write_all(s: &TcpStream, mut data: &[u8]) -> io::Result<()> {
    while !data.is_empty() {
        s.writable().await?;
        match s.try_write(data) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => data = &data[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::sni::tests::{hello, sni};
    use super::*;

    fn passes(bytes: &[u8], host: &str) -> bool {
        matches!(judge(bytes, host), Verdict::Pass)
    }

    fn refused(bytes: &[u8], host: &str) -> String {
        match judge(bytes, host) {
            Verdict::Refuse(r) => r.why,
            Verdict::Pass | Verdict::Http => panic!("passed"),
            Verdict::Need => panic!("needs more"),
        }
    }

    #[test]
    fn a_client_hello_must_name_the_admitted_host() {
        let h = hello(&[sni("Example.ORG.")], 512);
        assert!(passes(&h, "example.org"));
        assert!(passes(&h, "EXAMPLE.org."));
        assert!(
            refused(&hello(&[sni("other.example")], 512), "example.org").contains("other.example")
        );
        assert!(refused(&hello(&[], 512), "example.org").contains("no SNI"));
        // An IP target has no name to compare: a hello without one passes, one with a name not.
        assert!(passes(&hello(&[], 512), "192.0.2.7"));
        assert!(passes(&hello(&[], 512), "[2001:db8::1]"));
        assert!(!passes(&hello(&[sni("example.org")], 512), "192.0.2.7"));
        // ECH: only beside the admitted outer name.
        let ech = (0xfe0d, vec![1, 2, 3]);
        assert!(passes(&hello(&[sni("example.org"), ech.clone()], 512), "example.org"));
        assert!(!passes(&hello(&[sni("public.example"), ech.clone()], 512), "example.org"));
        assert!(!passes(&hello(&[ech], 512), "example.org"));
    }

    #[test]
    fn plain_http_is_served_whole_and_other_protocols_pass() {
        for req in [
            "GET / HTTP/1.1\r\nHost: other\r\n\r\n",
            "M-SEARCH * HTTP/1.1\r\n\r\n",
            "PROPFIND /x HTTP/1.0\n\n",
        ] {
            assert!(matches!(judge(req.as_bytes(), "example.org"), Verdict::Http), "{req}");
        }
        // Not yet a whole head: wait; a head that runs past the bound: refused.
        assert!(matches!(judge(b"GET / HTTP/1.1\r\nHost: x\r\n", "h"), Verdict::Need));
        let long = format!("GET /{} HTTP/1.1", "a".repeat(MAX_LINE));
        assert!(refused(long.as_bytes(), "example.org").contains("over"));
        for other in [
            &b"SSH-2.0-OpenSSH_9.6 Ubuntu\r\n"[..],
            b"EHLO example.org\r\n",
            b"\0\0\0\x08\x04\xd2\x16/",
        ] {
            assert!(passes(other, "example.org"), "{other:?}");
        }
        // Too little to tell: a method without its space, a request line without its end.
        assert!(matches!(judge(b"GE", "h"), Verdict::Need));
        assert!(matches!(judge(b"GET /index", "h"), Verdict::Need));
    }

    /// Found by the fourth attack pass: empty lines before a request line made it "not HTTP",
    /// so its `Host` (a denied one) went through unchecked; an SSLv2-format ClientHello (no
    /// server name) reached a name target.
    #[test]
    fn empty_lines_before_a_request_and_sslv2_hellos_are_judged() {
        let smuggled = b"\r\n\r\nGET /t HTTP/1.1\r\nHost: denied.example\r\n\r\n";
        assert!(matches!(judge(smuggled, "example.org"), Verdict::Http));
        assert!(matches!(judge(b"\r\n\n", "example.org"), Verdict::Need));
        let flood = vec![b'\n'; MAX_LINE + 1];
        assert!(refused(&flood, "example.org").contains("empty lines"));
        // A TLS 1.2 hello in SSLv2's format: no name to check against a name target.
        let v2 = b"\x80\x2e\x01\x03\x03\x00\x15\x00\x00\x00\x10";
        assert!(refused(v2, "example.org").contains("no SNI"));
        assert!(passes(v2, "192.0.2.7"));
        assert!(matches!(judge(b"\x80\x2e", "example.org"), Verdict::Need));
        // Binary protocols that are not such a hello still pass.
        assert!(passes(b"\x80\x2e\x05\x03\x03", "example.org"));
    }

    /// HTTP/2 with prior knowledge: its preface's head would be served as a plain request with
    /// no `Host`, and the requests after it name their hosts where the proxy does not read.
    #[test]
    fn http2_without_tls_is_refused_with_a_goaway() {
        let preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0";
        for n in [H2_PREFACE.len(), preface.len()] {
            assert!(refused(&preface[..n], "example.org").contains("HTTP/2 without TLS"));
        }
        assert!(refused(b"\r\nPRI * HTTP/2.0\r\n", "192.0.2.7").contains("use https"));
        assert!(matches!(judge(b"PRI * HTTP/2", "example.org"), Verdict::Need));
        // A plain request that only looks alike is still served.
        assert!(matches!(judge(b"PRI / HTTP/1.1\r\n\r\n", "example.org"), Verdict::Http));
        let Verdict::Refuse(r) = judge(preface, "example.org") else { panic!("passed") };
        // SETTINGS (type 4) on stream 0, then GOAWAY (type 7) with HTTP_1_1_REQUIRED (0xd).
        assert_eq!(&r.answer[..9], &[0, 0, 0, 4, 0, 0, 0, 0, 0]);
        let len = u32::from_be_bytes([0, r.answer[9], r.answer[10], r.answer[11]]) as usize;
        assert_eq!((r.answer[12], r.answer.len()), (7, 18 + len));
        assert_eq!(&r.answer[18..26], &[0, 0, 0, 0, 0, 0, 0, 0x0d]);
    }
}
