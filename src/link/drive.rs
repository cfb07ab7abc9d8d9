//! The driver both ends of a link run over one WebSocket connection: frames in go to the end's
//! handler; what the end sends waits in its [`Outbox`] until the other end confirms it. Each
//! batch written is followed by a ping carrying the sequence number of its last message, and
//! the pong to it confirms everything up to there (the other end read the ping after them, in
//! order). When a connection dies, what was not confirmed is sent again over the next one, and
//! the receiving end drops what it already had (a request id it has seen, a response nobody
//! waits for): a message arrives once, and a call never runs twice. A link silent for
//! [`DEAD_AFTER`](super::DEAD_AFTER) is dead.

use super::{DEAD_AFTER, MAX_OUTBOUND_BYTES, MAX_QUEUED, PING_EVERY};
use futures_util::{SinkExt, StreamExt};
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::Notify;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::{Bytes, Message, Utf8Bytes};
use tokio_util::sync::CancellationToken;

/// The session's queue is full: [`super::MAX_QUEUED`] messages (or the end's byte bound) wait
/// for the other end already. The session is ended.
#[derive(Debug, thiserror::Error)]
#[error("session {0}: {MAX_QUEUED} messages already wait for the other end of the link")]
pub struct Full(pub String);

struct Entry {
    seq: u64,
    session: String,
    text: Utf8Bytes,
}

#[derive(Default)]
struct State {
    /// Sent or to send, oldest first, not yet confirmed.
    entries: VecDeque<Entry>,
    next_seq: u64,
    /// The newest sequence number written over the current connection.
    written: u64,
    per_session: HashMap<String, usize>,
    bytes: usize,
}

/// What one end sends, kept until confirmed; outlives each connection.
#[derive(Default)]
pub struct Outbox {
    state: Mutex<State>,
    wake: Notify,
}

impl Outbox {
    /// Queues `text` (an envelope) of `session`; [`Full`] past the session's bound.
    pub fn push(&self, session: &str, text: String) -> Result<(), Full> {
        let mut s = hands_roots::lock(&self.state);
        let queued = s.per_session.get(session).copied().unwrap_or(0);
        if queued >= MAX_QUEUED || s.bytes + text.len() > MAX_OUTBOUND_BYTES {
            return Err(Full(session.to_string()));
        }
        s.next_seq += 1;
        let seq = s.next_seq;
        s.bytes += text.len();
        *s.per_session.entry(session.to_string()).or_default() += 1;
        s.entries.push_back(Entry { seq, session: session.to_string(), text: text.into() });
        drop(s);
        self.wake.notify_one();
        Ok(())
    }

    /// Queues a frame that is not a session's (a `close` of a session this end refuses); it is
    /// counted against no session's bound, and dropped when the end's byte bound is reached.
    pub fn push_control(&self, text: String) {
        let mut s = hands_roots::lock(&self.state);
        if s.bytes + text.len() > MAX_OUTBOUND_BYTES {
            return;
        }
        s.next_seq += 1;
        let seq = s.next_seq;
        s.bytes += text.len();
        s.entries.push_back(Entry { seq, session: String::new(), text: text.into() });
        drop(s);
        self.wake.notify_one();
    }

    /// Forgets everything queued for `session` (it ended).
    pub fn forget(&self, session: &str) {
        let mut s = hands_roots::lock(&self.state);
        if s.per_session.remove(session).is_none() {
            return;
        }
        let mut freed = 0;
        s.entries.retain(|e| {
            let keep = e.session != session;
            if !keep {
                freed += e.text.len();
            }
            keep
        });
        s.bytes -= freed;
    }

    /// Forgets everything (the other end is a new instance: nothing queued can be delivered).
    pub fn clear(&self) {
        let mut s = hands_roots::lock(&self.state);
        let next = s.next_seq;
        *s = State { next_seq: next, ..State::default() };
    }

    fn confirm(&self, upto: u64) {
        let mut s = hands_roots::lock(&self.state);
        while s.entries.front().is_some_and(|e| e.seq <= upto && e.seq <= s.written) {
            let Some(e) = s.entries.pop_front() else { break };
            s.bytes -= e.text.len();
            if let Some(n) = s.per_session.get_mut(&e.session) {
                *n -= 1;
                if *n == 0 {
                    s.per_session.remove(&e.session);
                }
            }
        }
    }

    /// A new connection: everything unconfirmed goes out again.
    fn rewind(&self) {
        let mut s = hands_roots::lock(&self.state);
        s.written = s.entries.front().map_or(s.next_seq, |e| e.seq - 1);
    }

    /// The messages not yet written on this connection (at most `max`), marked written.
    fn unwritten(&self, max: usize) -> Vec<Utf8Bytes> {
        let mut s = hands_roots::lock(&self.state);
        let from = s.written;
        let batch: Vec<(u64, Utf8Bytes)> = (s.entries.iter())
            .filter(|e| e.seq > from)
            .take(max)
            .map(|e| (e.seq, e.text.clone()))
            .collect();
        if let Some((seq, _)) = batch.last() {
            s.written = *seq;
        }
        batch.into_iter().map(|(_, t)| t).collect()
    }

    fn written(&self) -> u64 {
        hands_roots::lock(&self.state).written
    }

    /// How many messages wait, sent or not (for tests and the log).
    pub fn len(&self) -> usize {
        hands_roots::lock(&self.state).entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// How a connection ended.
#[derive(Debug)]
pub enum Ended {
    /// The other end closed it, or this end was told to stop (`stop`).
    Closed,
    /// Nothing was heard for this long ([`DEAD_AFTER`]).
    Dead(Duration),
    /// The connection failed (a frame over the size cap, a reset, a protocol error).
    Failed(String),
}

impl std::fmt::Display for Ended {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ended::Closed => f.write_str("closed"),
            Ended::Dead(after) => write!(f, "silent for {} s: taken as dead", after.as_secs()),
            Ended::Failed(e) => write!(f, "failed: {e}"),
        }
    }
}

/// How often a connection pings, and how long a silence means it is dead.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    pub ping_every: Duration,
    pub dead_after: Duration,
}

/// SPEC §13's numbers: [`PING_EVERY`] and [`DEAD_AFTER`].
pub const TIMING: Timing = Timing { ping_every: PING_EVERY, dead_after: DEAD_AFTER };

/// Runs one connection until it ends: every text frame goes to `on_text` (which must not wait),
/// the outbox's messages go out, pings go out every [`PING_EVERY`].
pub async fn drive<S>(
    ws: WebSocketStream<S>,
    outbox: &Outbox,
    on_text: impl FnMut(&str),
    stop: &CancellationToken,
) -> Ended
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    drive_timed(ws, outbox, on_text, stop, TIMING).await
}

/// [`drive`] with its pings and dead-link bound given (tests use short ones).
async fn drive_timed<S>(
    ws: WebSocketStream<S>,
    outbox: &Outbox,
    mut on_text: impl FnMut(&str),
    stop: &CancellationToken,
    timing: Timing,
) -> Ended
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let (mut sink, mut stream) = ws.split();
    outbox.rewind();
    let heard = AtomicU64::new(0);
    let start = tokio::time::Instant::now();
    let now = || u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
    let reader = async {
        loop {
            let frame = match stream.next().await {
                None => return Ended::Closed,
                Some(Err(e)) => return Ended::Failed(e.to_string()),
                Some(Ok(f)) => f,
            };
            heard.store(now(), Ordering::Relaxed);
            match frame {
                Message::Text(t) => on_text(t.as_str()),
                Message::Pong(p) => {
                    if let Some(seq) = std::str::from_utf8(&p).ok().and_then(|s| s.parse().ok()) {
                        outbox.confirm(seq);
                    }
                }
                Message::Close(_) => return Ended::Closed,
                // Pings are answered by tungstenite itself; binary frames mean nothing here.
                Message::Ping(_) | Message::Binary(_) | Message::Frame(_) => {}
            }
        }
    };
    let writer = async {
        let mut ticker = tokio::time::interval(timing.ping_every);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let batch = outbox.unwritten(64);
            if !batch.is_empty() {
                for text in batch {
                    if let Err(e) = sink.feed(Message::Text(text)).await {
                        return Ended::Failed(e.to_string());
                    }
                }
                let ping = Message::Ping(Bytes::from(outbox.written().to_string()));
                if let Err(e) = sink.send(ping).await {
                    return Ended::Failed(e.to_string());
                }
                continue;
            }
            tokio::select! {
                () = outbox.wake.notified() => {}
                _ = ticker.tick() => {
                    let silent = now().saturating_sub(heard.load(Ordering::Relaxed));
                    if silent >= timing.dead_after.as_millis() as u64 {
                        return Ended::Dead(timing.dead_after);
                    }
                    let ping = Message::Ping(Bytes::from(outbox.written().to_string()));
                    if let Err(e) = sink.send(ping).await {
                        return Ended::Failed(e.to_string());
                    }
                }
                () = stop.cancelled() => {
                    let _ = sink.send(Message::Close(None)).await;
                    return Ended::Closed;
                }
            }
        }
    };
    tokio::select! {
        e = reader => e,
        e = writer => e,
    }
}

/// The WebSocket settings both ends use: frames and messages capped at
/// [`MAX_FRAME`](super::MAX_FRAME), checked before a frame's payload is read.
pub fn ws_config() -> tokio_tungstenite::tungstenite::protocol::WebSocketConfig {
    tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
        .max_frame_size(Some(super::MAX_FRAME))
        .max_message_size(Some(super::MAX_FRAME))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio_tungstenite::tungstenite::protocol::Role;

    async fn pair()
    -> (WebSocketStream<tokio::io::DuplexStream>, WebSocketStream<tokio::io::DuplexStream>) {
        let (a, b) = tokio::io::duplex(1 << 20);
        let a = WebSocketStream::from_raw_socket(a, Role::Client, Some(ws_config())).await;
        let b = WebSocketStream::from_raw_socket(b, Role::Server, Some(ws_config())).await;
        (a, b)
    }

    #[tokio::test]
    async fn a_message_unconfirmed_when_the_link_dies_goes_out_again_once() {
        let out = Outbox::default();
        out.push("s", "one".into()).unwrap();
        // The first connection's other end reads nothing and vanishes.
        let (a, b) = pair().await;
        drop(b);
        let stop = CancellationToken::new();
        let ended = drive(a, &out, |_| {}, &stop).await;
        assert!(!matches!(ended, Ended::Dead(_)), "{ended}");
        assert_eq!(out.len(), 1, "nothing confirmed the message: it is kept");
        // The next connection delivers it, and the pong confirms it.
        let (a, b) = pair().await;
        let got = std::sync::Arc::new(Mutex::new(Vec::<String>::new()));
        let seen = got.clone();
        let other = tokio::spawn(async move {
            let o = Outbox::default();
            let stop = CancellationToken::new();
            let s2 = stop.clone();
            drive(
                b,
                &o,
                move |t| {
                    hands_roots::lock(&seen).push(t.to_string());
                    s2.cancel();
                },
                &stop,
            )
            .await
        });
        let mine = tokio::spawn(async move {
            let stop = CancellationToken::new();
            let r = tokio::time::timeout(
                std::time::Duration::from_secs(2),
                drive(a, &out, |_| {}, &stop),
            )
            .await;
            (r.is_ok(), out.len())
        });
        other.await.unwrap();
        let (ended, left) = mine.await.unwrap();
        assert!(ended);
        assert_eq!(*hands_roots::lock(&got), vec!["one".to_string()]);
        let _ = left;
    }

    #[tokio::test]
    async fn a_session_past_its_bound_is_refused_and_others_are_not() {
        let out = Outbox::default();
        for i in 0..MAX_QUEUED {
            out.push("flood", format!("{i}")).unwrap();
        }
        assert!(out.push("flood", "one more".into()).is_err());
        assert!(out.push("quiet", "fine".into()).is_ok());
        out.forget("flood");
        assert_eq!(out.len(), 1);
        assert!(out.push("flood", "again".into()).is_ok());
    }

    #[tokio::test]
    async fn a_silent_link_is_dead_within_its_ping_and_silence_bounds() {
        let (a, b) = pair().await;
        // The other end's socket stays open but nothing reads or answers it.
        let out = Outbox::default();
        let stop = CancellationToken::new();
        let timing = Timing {
            ping_every: Duration::from_millis(50),
            dead_after: Duration::from_millis(150),
        };
        let t0 = tokio::time::Instant::now();
        let ended = drive_timed(a, &out, |_| {}, &stop, timing).await;
        assert!(matches!(ended, Ended::Dead(_)), "{ended}");
        // Noticed at the first tick past the silence: within `dead_after + ping_every` (SPEC
        // §13's 45 s + 15 s = 60 s), with room for a loaded machine.
        let took = t0.elapsed();
        assert!(took >= timing.dead_after, "{took:?}");
        assert!(took < timing.dead_after + timing.ping_every * 4, "{took:?}");
        drop(b);
    }

    #[test]
    fn the_numbers_notice_a_dead_link_within_a_minute() {
        assert!(TIMING.dead_after + TIMING.ping_every <= Duration::from_secs(60));
    }
}
