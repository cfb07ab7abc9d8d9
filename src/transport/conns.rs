//! What every HTTP listener (`/mcp`, the dashboard, the relay's) holds to, so that no client
//! can take the descriptors or the slots the person's brake, or a client with a token, needs
//! (decision 0057):
//!
//! - **A cap per listener** ([`Limits::cap`]). At the cap, the connection that has gone longest
//!   without serving a request its door vouched for (a client's token, a person's session) is
//!   closed to make room: an idle kept-alive one, one still sending its head, or one inside a
//!   request nobody vouched for. A newcomer is answered `503` (with `Retry-After`) and closed
//!   only when every slot serves a vouched-for request. So a flood from anyone who can merely
//!   connect cannot keep a client with a token, or a logged-in person, out.
//! - **A token's share** ([`Limits::vouched`], decision 0087): one holder's vouched-for
//!   requests (an SSE stream is one while it is open) hold at most its share of the listener,
//!   all tokens' together at most a total that leaves room for the relay's runners; past it
//!   [`vouch`] answers 429 or 503.
//! - **Request heads** within [`HEADER_TIMEOUT`] (hyper's `header_read_timeout`, whose timer
//!   also runs while a kept-alive connection waits for its next request: an idle connection is
//!   closed after the same time).
//! - **Request bodies** within [`BODY_TIMEOUT`] plus a second per [`BODY_RATE`] bytes received
//!   ([`Timed`]); a late one is answered `408` and its connection closed.
//! - **TLS and upgrades** for the relay ([`serve_tls`]): the handshake is done inside the
//!   connection's slot within [`HEADER_TIMEOUT`], and a connection a WebSocket upgrade took over
//!   gives its slot back (a runner's link is bounded by the runners configured, not here).
//! - **A quiet log**: cut connections are counted by reason, and each listener writes at most
//!   one line a second about them ([`Tally`]), at debug (a failed `accept` at warn).

use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode, header};
use http_body_util::BodyExt;
use http_body_util::combinators::BoxBody;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;

use super::shares::{Over, Shares};
pub use super::tally::{Cut, Tally};
use tokio_util::sync::CancellationToken;

mod timed;

use timed::late;
pub use timed::{BodyError, Timed};

/// A response body as both listeners build them.
pub type Boxed = BoxBody<Bytes, Infallible>;

/// A client gets this long to send a request's head, and a kept-alive connection may wait this
/// long for its next request. Real clients send a head in one write.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// A request's body may take this long, plus a second per [`BODY_RATE`] bytes received.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(10);

/// The slowest body rate served past [`BODY_TIMEOUT`], in bytes a second: `/mcp`'s largest body
/// (4 MiB) may take 74 s in all.
pub const BODY_RATE: u64 = 64 * 1024;

/// The backlog each listener asks the kernel for (which caps it at `net.core.somaxconn`, 4,096
/// by default): a burst of connections waits there to be accepted — and refused or served at
/// once — rather than overflowing it, where the kernel drops the handshake's last step and an
/// idle client is only accepted a SYN-ACK retry (up to 31 s) later.
const BACKLOG: u32 = 4096;

/// Binds a listener for [`serve`], with room for a burst in its backlog.
pub fn bind(addr: std::net::SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    // As `TcpListener::bind` does: a restarted daemon takes its port back at once.
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(BACKLOG)
}

/// One listener's cap, its name in the log, and the share of its connections that requests
/// vouched for by a token may hold (decision 0087).
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub name: &'static str,
    pub cap: usize,
    /// `total`: the most connections the requests of every [`Holder::Token`] together may hold
    /// (below `cap` leaves the rest to runners); `each`: the most one holder's may, a runner's
    /// included.
    pub vouched: Shares,
}

/// `/mcp`: a client opens a few connections at a time (a call each, and a stream); 256 serve
/// dozens of agents and keep a flood's share of descriptors well inside a desktop's 1,024. A
/// client's requests in flight hold at most half of them: fifty sessions of one token, each
/// with its stream and a call, fit (the load test), and the others keep the other half.
pub const MCP: Limits =
    Limits { name: "http", cap: 256, vouched: Shares { total: 256, each: 128 } };

/// The dashboard: a browser opens at most six connections to a host; 64 serve a person's tabs.
/// One person, so no share.
pub const DASHBOARD: Limits =
    Limits { name: "dashboard", cap: 64, vouched: Shares { total: 64, each: 64 } };

/// `hands relay`: every agent of an organization, for all its runners, and the runners'
/// upgrades; the relay raises its descriptor limit to hold them. One agent's requests in flight
/// hold at most an eighth of them, and all agents' together never the last 128, which are left
/// for runners to (re)connect through.
pub const RELAY: Limits =
    Limits { name: "relay", cap: 1024, vouched: Shares { total: 896, each: 128 } };

/// One connection as its listener sees it.
struct Conn {
    /// When the listener's table began, to read `free_since` against.
    epoch: Instant,
    /// Whom its door vouched for the request it serves, until the answer has been sent.
    vouched: Mutex<Option<Voucher>>,
    /// When the connection was accepted or last finished a vouched-for request (ms after
    /// `epoch`): the longest-free goes first to make room.
    free_since: AtomicU64,
    /// Its request's body came too slowly: the answer is a 408 and the connection closes.
    late: Arc<AtomicBool>,
    /// Closes the connection (to make room for another).
    cut: CancellationToken,
}

impl Conn {
    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn is_vouched(&self) -> bool {
        hands_roots::lock(&self.vouched).is_some()
    }
}

/// Whom a door vouches for a request as ([`vouch`]).
#[derive(Clone, Copy, Debug)]
pub enum Holder<'a> {
    /// A client's or an agent's token (or a person's session), by the name of its holder.
    Token(&'a str),
    /// A relay runner's valid upgrade, by the runner's name: outside the tokens' total, so that
    /// agents never crowd a runner out.
    Runner(&'a str),
}

/// A [`Holder`] kept with the connection it vouched for.
#[derive(Debug, PartialEq, Eq)]
struct Voucher {
    runner: bool,
    name: Arc<str>,
}

impl Voucher {
    fn is(&self, holder: Holder<'_>) -> bool {
        match holder {
            Holder::Token(n) => !self.runner && *self.name == *n,
            Holder::Runner(n) => self.runner && *self.name == *n,
        }
    }
}

/// In every request's extensions until its door vouches for it ([`vouch`]).
#[derive(Clone)]
struct Slot(Arc<Conn>, Arc<Table>);

/// The door's word that `req` passed its checks as `holder`: its connection is not closed to
/// make room while the request is served. The connection's handle leaves the request here, so
/// it goes no further (to rmcp, to handlers).
///
/// `Err` is the answer when the holder's requests in flight hold its share of the listener's
/// connections already (`429`), or those of every token together hold theirs (`503`): an SSE
/// stream is a request in flight for as long as it is open, so without the share one token
/// could hold every slot for good (found by the seventh attack pass).
pub fn vouch<B>(req: &mut Request<B>, holder: Holder<'_>) -> Result<(), Box<Response<Boxed>>> {
    match req.extensions_mut().remove::<Slot>() {
        Some(Slot(conn, table)) => table.vouch(&conn, holder),
        None => Ok(()),
    }
}

/// The connections of one listener.
struct Table {
    limits: Limits,
    epoch: Instant,
    next: AtomicU64,
    live: Mutex<HashMap<u64, Arc<Conn>>>,
    tally: Arc<Tally>,
}

impl Table {
    fn new(limits: Limits) -> Table {
        Table {
            limits,
            epoch: Instant::now(),
            next: AtomicU64::new(0),
            live: Mutex::new(HashMap::new()),
            tally: Tally::new(limits.name),
        }
    }

    /// A slot for a new connection, made by closing the connection free the longest when the
    /// listener is at its cap; `None` when every connection serves a vouched-for request.
    fn admit(self: &Arc<Self>) -> Option<Admitted> {
        let mut live = hands_roots::lock(&self.live);
        if live.len() >= self.limits.cap {
            let (&id, _) = live
                .iter()
                .filter(|(_, c)| !c.is_vouched())
                .min_by_key(|(_, c)| c.free_since.load(Ordering::SeqCst))?;
            if let Some(c) = live.remove(&id) {
                c.cut.cancel();
            }
            self.tally.note(Cut::Evicted, None);
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let conn = Arc::new(Conn {
            epoch: self.epoch,
            vouched: Mutex::new(None),
            free_since: AtomicU64::new(0),
            late: Arc::default(),
            cut: CancellationToken::new(),
        });
        conn.free_since.store(conn.now(), Ordering::SeqCst);
        live.insert(id, conn.clone());
        Some(Admitted { table: self.clone(), id, conn })
    }

    /// Marks `conn` vouched for as `holder`, if the holder's share and the tokens' total allow.
    fn vouch(&self, conn: &Conn, holder: Holder<'_>) -> Result<(), Box<Response<Boxed>>> {
        let live = hands_roots::lock(&self.live);
        let (mut all, mut mine) = (0, 0);
        for c in live.values() {
            if let Some(v) = &*hands_roots::lock(&c.vouched) {
                all += usize::from(!v.runner);
                mine += usize::from(v.is(holder));
            }
        }
        let (runner, name) = match holder {
            Holder::Token(n) => (false, n),
            Holder::Runner(n) => (true, n),
        };
        let Shares { total, each } = self.limits.vouched;
        let all = if runner { 0 } else { all };
        let (status, text) = match self.limits.vouched.over(all, mine) {
            None => {
                *hands_roots::lock(&conn.vouched) = Some(Voucher { runner, name: name.into() });
                return Ok(());
            }
            Some(Over::Share) => (
                StatusCode::TOO_MANY_REQUESTS,
                format!(
                    "hands: `{}` has {each} requests in flight on this listener already (an SSE \
                     stream is one for as long as it is open), the most one token may, so that \
                     no one keeps the others out; close a stream, end a session you no longer \
                     use (an HTTP DELETE), or wait for a call to end, then try again",
                    hands_roots::shown(name)
                ),
            ),
            Some(Over::Total) => (
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "hands: requests in flight hold {total} of this listener's {} connections, \
                     the most all tokens together may; try again in a moment",
                    self.limits.cap
                ),
            ),
        };
        drop(live);
        self.tally.note(Cut::Share, None);
        let mut r = closing(status, &text);
        r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        Err(Box::new(r))
    }
}

/// A connection's place in its table, given back when its task ends.
struct Admitted {
    table: Arc<Table>,
    id: u64,
    conn: Arc<Conn>,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        hands_roots::lock(&self.table.live).remove(&self.id);
    }
}

/// Serves `listener` until `stop` is cancelled: each connection under `limits`, each request
/// (its body [`Timed`]) answered by `handler`.
pub async fn serve<H, F>(listener: TcpListener, limits: Limits, stop: CancellationToken, handler: H)
where
    H: Fn(Request<Timed>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<Boxed>> + Send + 'static,
{
    serve_tls(listener, limits, None, stop, handler).await;
}

/// [`serve`], over TLS through `tls` when it is given. The handshake is made in the
/// connection's slot, so one that never ends it is closed to make room, or at
/// [`HEADER_TIMEOUT`], like one that never sends its head. At the cap a TLS newcomer is closed
/// without the 503, which it could not read before a handshake.
pub async fn serve_tls<H, F>(
    listener: TcpListener,
    limits: Limits,
    tls: Option<TlsAcceptor>,
    stop: CancellationToken,
    handler: H,
) where
    H: Fn(Request<Timed>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<Boxed>> + Send + 'static,
{
    let table = Arc::new(Table::new(limits));
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            () = stop.cancelled() => return,
        };
        let stream = match accepted {
            Ok((s, _)) => s,
            Err(e) => {
                // Out of descriptors and the like: counted, a breath, and serving goes on.
                table.tally.note(Cut::Accept, Some(e.to_string()));
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Some(admitted) = table.admit() else {
            if tls.is_none() {
                full(&stream, limits);
            }
            table.tally.note(Cut::Full, None);
            continue;
        };
        no_nagle(&stream, limits.name);
        let tls = tls.clone();
        tokio::spawn(connection(stream, tls, admitted, handler.clone(), stop.clone()));
    }
}

/// Sets TCP_NODELAY on an accepted connection (`who` names the listener in the log). Answers
/// go out in several small writes (the head, SSE events): with Nagle's algorithm each next
/// write waited for the client's delayed ACK, 40 ms a call.
fn no_nagle(stream: &TcpStream, who: &str) {
    if let Err(e) = stream.set_nodelay(true) {
        tracing::debug!("{who}: cannot set TCP_NODELAY: {e}");
    }
}

/// Serves one connection (after its TLS handshake, if any) until it ends, is cut, or the
/// listener stops; `admitted` holds its slot until then.
async fn connection<H, F>(
    stream: TcpStream,
    tls: Option<TlsAcceptor>,
    admitted: Admitted,
    handler: H,
    stop: CancellationToken,
) where
    H: Fn(Request<Timed>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<Boxed>> + Send + 'static,
{
    let (conn, table) = (admitted.conn.clone(), admitted.table.clone());
    let tally = table.tally.clone();
    let ended = match tls {
        None => serve_io(TokioIo::new(stream), &conn, &table, handler, &stop).await,
        Some(acceptor) => {
            let shaken = tokio::select! {
                r = tokio::time::timeout(HEADER_TIMEOUT, acceptor.accept(stream)) => r,
                () = conn.cut.cancelled() => return,
                () = stop.cancelled() => return,
            };
            match shaken {
                Ok(Ok(s)) => serve_io(TokioIo::new(s), &conn, &table, handler, &stop).await,
                Ok(Err(e)) => return tally.note(Cut::Error, Some(format!("TLS handshake: {e}"))),
                Err(_) => return tally.note(Cut::Head, None),
            }
        }
    };
    match ended {
        _ if conn.late.load(Ordering::SeqCst) => tally.note(Cut::Body, None),
        Ok(()) => {}
        Err(e) if e.is_timeout() => tally.note(Cut::Head, None),
        Err(e) => tally.note(Cut::Error, Some(e.to_string())),
    }
}

/// Serves HTTP/1.1 on `io` for [`connection`]; an upgrade (a runner's WebSocket) ends it
/// here, handing `io` to whoever awaits it.
async fn serve_io<I, H, F>(
    io: I,
    conn: &Arc<Conn>,
    table: &Arc<Table>,
    handler: H,
    stop: &CancellationToken,
) -> Result<(), hyper::Error>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    H: Fn(Request<Timed>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<Boxed>> + Send + 'static,
{
    let svc = {
        let (conn, table) = (conn.clone(), table.clone());
        hyper::service::service_fn(move |req: Request<Incoming>| {
            let (conn, table, handler) = (conn.clone(), table.clone(), handler.clone());
            async move {
                let served = Served(conn.clone());
                let (mut parts, body) = req.into_parts();
                parts.extensions.insert(Slot(conn.clone(), table));
                let body = Timed::new(body, conn.late.clone());
                let answer = handler(Request::from_parts(parts, body)).await;
                let answer = if conn.late.load(Ordering::SeqCst) { late() } else { answer };
                Ok::<_, Infallible>(answer.map(|inner| Tracked { inner, _served: served }.boxed()))
            }
        })
    };
    let serving = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .serve_connection(io, svc)
        .with_upgrades();
    tokio::select! {
        r = serving => r,
        // Closed to make room (counted then), or the listener stops.
        () = conn.cut.cancelled() => Ok(()),
        () = stop.cancelled() => Ok(()),
    }
}

/// Held by an answer's body: once it has been sent (or dropped), the request is no longer
/// served, and a vouched-for one leaves its connection free from now.
struct Served(Arc<Conn>);

impl Drop for Served {
    fn drop(&mut self) {
        if hands_roots::lock(&self.0.vouched).take().is_some() {
            self.0.free_since.store(self.0.now(), Ordering::SeqCst);
        }
    }
}

/// An answer's body with the [`Served`] mark of its request.
struct Tracked {
    inner: Boxed,
    _served: Served,
}

impl Body for Tracked {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A short plain-text answer that closes its connection.
pub(super) fn closing(status: StatusCode, text: &str) -> Response<Boxed> {
    let mut r = Response::new(http_body_util::Full::new(Bytes::from(format!("{text}\n"))).boxed());
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(header::CONNECTION, HeaderValue::from_static("close"));
    r
}

/// Tells a connection the listener has no room for why it is closed, if its buffer takes it at
/// once (a fresh socket's does); nothing waits for the client.
fn full(stream: &TcpStream, limits: Limits) {
    let text = format!(
        "hands: this listener serves at most {} connections at once and each one is serving a \
         client's request; try again in a moment\n",
        limits.cap
    );
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n\
         X-Content-Type-Options: nosniff\r\nRetry-After: 1\r\nConnection: close\r\n\
         Content-Length: {}\r\n\r\n{text}",
        text.len()
    );
    let _ = stream.try_write(answer.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn at_the_cap_the_longest_free_unvouched_connection_makes_room() {
        let vouched = Shares { total: 3, each: 3 };
        let table = Arc::new(Table::new(Limits { name: "test", cap: 3, vouched }));
        let vouch = |c: &Arc<Conn>| *hands_roots::lock(&c.vouched) = Some(voucher("a"));
        let a = table.admit().unwrap();
        let b = table.admit().unwrap();
        let c = table.admit().unwrap();
        // a serves a vouched-for request; b is older than c.
        vouch(&a.conn);
        b.conn.free_since.store(0, Ordering::SeqCst);
        c.conn.free_since.store(5, Ordering::SeqCst);
        let d = table.admit().expect("room was made");
        assert!(b.conn.cut.is_cancelled(), "the longest-free connection was not the one closed");
        assert!(!a.conn.cut.is_cancelled() && !c.conn.cut.is_cancelled());
        // Every slot vouched for: the newcomer is refused, nobody is closed.
        vouch(&c.conn);
        vouch(&d.conn);
        assert!(
            table.admit().is_none(),
            "a connection was closed while every slot was vouched for"
        );
        // A vouched-for request's answer sent: its connection may make room again.
        drop(Served(d.conn.clone()));
        assert!(!d.conn.is_vouched());
        let _e = table.admit().expect("room was made again");
        assert!(d.conn.cut.is_cancelled());
        // An evicted connection's task ending gives back nothing more; one that ends by itself
        // gives back its slot.
        drop((b, d));
        assert_eq!(hands_roots::lock(&table.live).len(), 3, "an evicted slot was given back twice");
        drop(a);
        assert_eq!(hands_roots::lock(&table.live).len(), 2);
    }

    fn voucher(name: &str) -> Voucher {
        Voucher { runner: false, name: name.into() }
    }

    #[tokio::test]
    async fn a_token_vouches_for_its_share_and_runners_keep_the_rest() {
        let vouched = Shares { total: 3, each: 2 };
        let table = Arc::new(Table::new(Limits { name: "test", cap: 5, vouched }));
        let conns: Vec<Admitted> = (0..5).map(|_| table.admit().unwrap()).collect();
        let status = |r: Result<(), Box<Response<Boxed>>>| r.err().map(|r| r.status());
        assert_eq!(status(table.vouch(&conns[0].conn, Holder::Token("alice"))), None);
        assert_eq!(status(table.vouch(&conns[1].conn, Holder::Token("alice"))), None);
        // Alice's share is full; Bob still gets his.
        let third = table.vouch(&conns[2].conn, Holder::Token("alice"));
        assert_eq!(status(third), Some(StatusCode::TOO_MANY_REQUESTS));
        assert!(!conns[2].conn.is_vouched());
        assert_eq!(status(table.vouch(&conns[2].conn, Holder::Token("bob"))), None);
        // Every token's together: the total; a runner is outside it.
        let carol = table.vouch(&conns[3].conn, Holder::Token("carol"));
        assert_eq!(status(carol), Some(StatusCode::SERVICE_UNAVAILABLE));
        assert_eq!(status(table.vouch(&conns[3].conn, Holder::Runner("box-1"))), None);
        // So at the cap there is room to make, for a newcomer that may be a runner.
        assert!(table.admit().is_some());
        assert!(conns[4].conn.cut.is_cancelled());
        // An answer sent gives the share back.
        drop(Served(conns[0].conn.clone()));
        assert_eq!(status(table.vouch(&conns[1].conn, Holder::Token("carol"))), None);
    }
}
