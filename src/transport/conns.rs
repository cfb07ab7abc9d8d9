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

pub use super::tally::{Cut, Tally};
use tokio_util::sync::CancellationToken;

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

/// One listener's cap, and its name in the log.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub name: &'static str,
    pub cap: usize,
}

/// `/mcp`: a client opens a few connections at a time (a call each, and a stream); 256 serve
/// dozens of agents and keep a flood's share of descriptors well inside a desktop's 1,024.
pub const MCP: Limits = Limits { name: "http", cap: 256 };

/// The dashboard: a browser opens at most six connections to a host; 64 serve a person's tabs.
pub const DASHBOARD: Limits = Limits { name: "dashboard", cap: 64 };

/// `hands relay`: every agent of an organization, for all its runners, and the runners'
/// upgrades; the relay raises its descriptor limit to hold them.
pub const RELAY: Limits = Limits { name: "relay", cap: 1024 };

/// One connection as its listener sees it.
struct Conn {
    /// When the listener's table began, to read `free_since` against.
    epoch: Instant,
    /// Set while a request its door vouched for is served, until its answer has been sent.
    vouched: AtomicBool,
    /// When the connection was accepted or last finished a vouched-for request (ms after
    /// `epoch`): the longest-free goes first to make room.
    free_since: AtomicU64,
    /// Its request's body came too slowly: the answer is a 408 and the connection closes.
    late: AtomicBool,
    /// Closes the connection (to make room for another).
    cut: CancellationToken,
}

impl Conn {
    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }
}

/// In every request's extensions until its door vouches for it ([`vouch`]).
#[derive(Clone)]
struct Slot(Arc<Conn>);

/// The door's word that `req` passed its checks (a client's token, a person's session): its
/// connection is not closed to make room while the request is served. The connection's handle
/// leaves the request here, so it goes no further (to rmcp, to handlers).
pub fn vouch<B>(req: &mut Request<B>) {
    if let Some(Slot(conn)) = req.extensions_mut().remove::<Slot>() {
        conn.vouched.store(true, Ordering::SeqCst);
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
                .filter(|(_, c)| !c.vouched.load(Ordering::SeqCst))
                .min_by_key(|(_, c)| c.free_since.load(Ordering::SeqCst))?;
            if let Some(c) = live.remove(&id) {
                c.cut.cancel();
            }
            self.tally.note(Cut::Evicted, None);
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let conn = Arc::new(Conn {
            epoch: self.epoch,
            vouched: AtomicBool::new(false),
            free_since: AtomicU64::new(0),
            late: AtomicBool::new(false),
            cut: CancellationToken::new(),
        });
        conn.free_since.store(conn.now(), Ordering::SeqCst);
        live.insert(id, conn.clone());
        Some(Admitted { table: self.clone(), id, conn })
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
    let (conn, tally) = (admitted.conn.clone(), admitted.table.tally.clone());
    let ended = match tls {
        None => serve_io(TokioIo::new(stream), &conn, handler, &stop).await,
        Some(acceptor) => {
            let shaken = tokio::select! {
                r = tokio::time::timeout(HEADER_TIMEOUT, acceptor.accept(stream)) => r,
                () = conn.cut.cancelled() => return,
                () = stop.cancelled() => return,
            };
            match shaken {
                Ok(Ok(s)) => serve_io(TokioIo::new(s), &conn, handler, &stop).await,
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
    handler: H,
    stop: &CancellationToken,
) -> Result<(), hyper::Error>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    H: Fn(Request<Timed>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<Boxed>> + Send + 'static,
{
    let svc = {
        let conn = conn.clone();
        hyper::service::service_fn(move |req: Request<Incoming>| {
            let (conn, handler) = (conn.clone(), handler.clone());
            async move {
                let served = Served(conn.clone());
                let (mut parts, body) = req.into_parts();
                parts.extensions.insert(Slot(conn.clone()));
                let body = Timed::new(body, conn.clone());
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
        if self.0.vouched.swap(false, Ordering::SeqCst) {
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

/// Why a request's body could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    /// The body came slower than [`BODY_TIMEOUT`] and [`BODY_RATE`] allow; the connection
    /// answers 408 and closes, whatever the handler makes of this.
    #[error("the request body did not arrive in time")]
    Late,
    /// The connection failed or the client closed it mid-body.
    #[error("reading the request body: {0}")]
    Read(#[from] hyper::Error),
}

/// A request's body, cut when it comes too slowly: it must be complete within
/// [`BODY_TIMEOUT`] plus a second per [`BODY_RATE`] bytes received since the head.
pub struct Timed {
    inner: Incoming,
    conn: Arc<Conn>,
    start: tokio::time::Instant,
    received: u64,
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Timed {
    fn new(inner: Incoming, conn: Arc<Conn>) -> Timed {
        Timed { inner, conn, start: tokio::time::Instant::now(), received: 0, timer: None }
    }

    fn deadline(&self) -> tokio::time::Instant {
        self.start + allowed(self.received)
    }
}

/// How long a body may take once `received` bytes of it have come.
fn allowed(received: u64) -> Duration {
    BODY_TIMEOUT + Duration::from_millis(received.saturating_mul(1000) / BODY_RATE)
}

impl Body for Timed {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = &mut *self;
        if this.conn.late.load(Ordering::SeqCst) {
            return Poll::Ready(None);
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                let n = frame.data_ref().map_or(0, |d| d.len());
                this.received = this.received.saturating_add(n as u64);
                let deadline = this.deadline();
                if let Some(timer) = &mut this.timer {
                    timer.as_mut().reset(deadline);
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(BodyError::Read(e)))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => {
                let deadline = this.deadline();
                let timer =
                    this.timer.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
                match timer.as_mut().poll(cx) {
                    Poll::Ready(()) => {
                        this.conn.late.store(true, Ordering::SeqCst);
                        Poll::Ready(Some(Err(BodyError::Late)))
                    }
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A short plain-text answer that closes its connection.
fn closing(status: StatusCode, text: &str) -> Response<Boxed> {
    let mut r = Response::new(http_body_util::Full::new(Bytes::from(format!("{text}\n"))).boxed());
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(header::CONNECTION, HeaderValue::from_static("close"));
    r
}

/// The answer to a request whose body came too slowly.
fn late() -> Response<Boxed> {
    closing(
        StatusCode::REQUEST_TIMEOUT,
        &format!(
            "hands: the request body did not arrive in time ({} s, and a second more for every \
             {} KiB); send the body with the head, at once",
            BODY_TIMEOUT.as_secs(),
            BODY_RATE / 1024
        ),
    )
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
        let table = Arc::new(Table::new(Limits { name: "test", cap: 3 }));
        let a = table.admit().unwrap();
        let b = table.admit().unwrap();
        let c = table.admit().unwrap();
        // a serves a vouched-for request; b is older than c.
        a.conn.vouched.store(true, Ordering::SeqCst);
        b.conn.free_since.store(0, Ordering::SeqCst);
        c.conn.free_since.store(5, Ordering::SeqCst);
        let d = table.admit().expect("room was made");
        assert!(b.conn.cut.is_cancelled(), "the longest-free connection was not the one closed");
        assert!(!a.conn.cut.is_cancelled() && !c.conn.cut.is_cancelled());
        // Every slot vouched for: the newcomer is refused, nobody is closed.
        c.conn.vouched.store(true, Ordering::SeqCst);
        d.conn.vouched.store(true, Ordering::SeqCst);
        assert!(
            table.admit().is_none(),
            "a connection was closed while every slot was vouched for"
        );
        // A vouched-for request's answer sent: its connection may make room again.
        drop(Served(d.conn.clone()));
        assert!(!d.conn.vouched.load(Ordering::SeqCst));
        let _e = table.admit().expect("room was made again");
        assert!(d.conn.cut.is_cancelled());
        // An evicted connection's task ending gives back nothing more; one that ends by itself
        // gives back its slot.
        drop((b, d));
        assert_eq!(hands_roots::lock(&table.live).len(), 3, "an evicted slot was given back twice");
        drop(a);
        assert_eq!(hands_roots::lock(&table.live).len(), 2);
    }

    #[test]
    fn a_body_gets_ten_seconds_and_a_second_per_64_kib() {
        assert_eq!(allowed(0), Duration::from_secs(10));
        assert_eq!(allowed(64 * 1024), Duration::from_secs(11));
        assert_eq!(allowed(4 * 1024 * 1024), Duration::from_secs(74));
        assert_eq!(allowed(u64::MAX), BODY_TIMEOUT + Duration::from_millis(u64::MAX / BODY_RATE));
    }
}
