//! HTTP clients that vanish mid-call: a running `bash` is stopped once its client has gone.
//!
//! A client of the session era (protocol 2025-11-25 and before) gets each answer as an SSE stream
//! on the connection that carried the call. When that connection closes before the stream ends,
//! the client may only have blinked: the MCP spec says a disconnect is not a cancellation, and
//! rmcp lets the client resume the stream (a GET with `Last-Event-ID`). So the door waits
//! [`GRACE`]; if nothing at all arrives for the session meanwhile — no resume, no other call, no
//! ping — the client is taken to have gone and the call's [`Hangup`] fires, which stops its
//! command as a cancellation would. A `DELETE` of the session (a client that closes properly)
//! fires the hangups of all its calls at once, instead of after rmcp's 5 s wait for in-flight
//! answers. Stateless calls (2026-07-28) need none of this: rmcp cancels them itself when their
//! connection drops.
//!
//! Sessions are known by the service that served them (one per configured client) and their id,
//! and only after rmcp accepted a call in them, so a client cannot touch another's session and
//! made-up ids leave nothing behind.

use crate::hangup::Hangup;
use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use std::collections::HashMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// How long a session may stay silent after one of its answer streams was cut before the call
/// is stopped. rmcp's client reconnects after 3 s (the SSE `retry` rmcp's server sends).
pub const GRACE: Duration = Duration::from_secs(10);

/// Sessions idle this long are forgotten when the table grows past [`SWEEP_AT`]; rmcp itself
/// ends a session after 5 idle minutes.
const FORGET_AFTER: Duration = Duration::from_secs(30 * 60);
const SWEEP_AT: usize = 1024;

/// (service index, session id): a session id means something only to the service that made it.
type Key = (usize, String);

struct Seen {
    /// The last time any request of the session reached the door.
    last: Instant,
    /// Cancelled when the session is deleted; every call's hangup is a child of it.
    closed: CancellationToken,
}

/// The sessions the door has seen calls in.
#[derive(Default)]
pub struct Sessions {
    seen: Mutex<HashMap<Key, Seen>>,
}

impl Sessions {
    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Seen>> {
        hands_roots::lock(&self.seen)
    }

    /// A request of the session arrived: it is alive.
    pub fn touch(&self, service: usize, id: &str) {
        if let Some(s) = self.table().get_mut(&(service, id.to_string())) {
            s.last = Instant::now();
        }
    }

    /// A call rmcp accepted: the session is known from now on; its token (which a delete
    /// cancels).
    fn accepted(&self, key: &Key) -> CancellationToken {
        let mut table = self.table();
        let now = Instant::now();
        if !table.contains_key(key) && table.len() >= SWEEP_AT {
            sweep(&mut table, now);
        }
        let s = table
            .entry(key.clone())
            .or_insert_with(|| Seen { last: now, closed: CancellationToken::new() });
        s.last = now;
        s.closed.clone()
    }

    /// The session was deleted: every call still running in it stops now.
    pub fn deleted(&self, service: usize, id: &str) {
        if let Some(s) = self.table().remove(&(service, id.to_string())) {
            s.closed.cancel();
        }
    }

    /// Whether the session was heard from after `since` (a deleted one never is).
    fn heard_since(&self, key: &Key, since: Instant) -> bool {
        self.table().get(key).is_some_and(|s| s.last > since)
    }

    /// Prepares a session's POST: the hangup goes into its extensions before rmcp sees it, and
    /// [`Sessions::watch`] ties it to the answer. `None` for a request outside a session.
    pub fn prepare<B>(
        self: &Arc<Self>,
        service: usize,
        req: &mut http::Request<B>,
    ) -> Option<Pending> {
        let id = req.headers().get("mcp-session-id")?.to_str().ok()?.to_string();
        let key = (service, id);
        // A known session's call is tied to the session at once; the first call of a new one
        // is tied once rmcp has accepted it (see [`Pending::watch`]).
        let linked = self.table().get(&key).map(|s| s.closed.child_token());
        let hangup = Hangup(linked.clone().unwrap_or_default());
        req.extensions_mut().insert(hangup.clone());
        Some(Pending { sessions: self.clone(), key, hangup, linked: linked.is_some() })
    }
}

/// Forgets the sessions idle for [`FORGET_AFTER`] at `now`.
fn sweep(table: &mut HashMap<Key, Seen>, now: Instant) {
    table.retain(|_, s| now.saturating_duration_since(s.last) < FORGET_AFTER);
}

/// A session's POST on its way through rmcp.
pub struct Pending {
    sessions: Arc<Sessions>,
    key: Key,
    hangup: Hangup,
    /// Whether the hangup is already a child of the session's token.
    linked: bool,
}

impl Pending {
    /// rmcp's answer: an accepted call's stream is watched; if its connection closes before the
    /// stream ends, the call's hangup fires unless the session is heard from within [`GRACE`].
    /// A refused one (an unknown session, a malformed body) is passed on untouched.
    pub fn watch(self, answer: http::Response<Boxed>) -> http::Response<Boxed> {
        if !answer.status().is_success() {
            return answer;
        }
        let session = self.sessions.accepted(&self.key);
        if answer.body().is_end_stream() {
            // `202 Accepted` for a notification: nothing runs on.
            return answer;
        }
        if !self.linked {
            // The call's token is in rmcp's hands already; it follows the session's from here.
            let own = self.hangup.0.clone();
            tokio::spawn(async move {
                tokio::select! {
                    () = session.cancelled() => own.cancel(),
                    () = own.cancelled() => {}
                }
            });
        }
        answer.map(|inner| {
            http_body_util::BodyExt::boxed(Watched {
                inner,
                armed: Some((self.sessions, self.key, self.hangup)),
            })
        })
    }
}

type Boxed = http_body_util::combinators::BoxBody<Bytes, Infallible>;

/// An answer stream that notices being dropped before its end.
struct Watched {
    inner: Boxed,
    armed: Option<(Arc<Sessions>, Key, Hangup)>,
}

impl Body for Watched {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(None) = polled {
            // Delivered in full: nothing to watch, and the call's token is done with.
            if let Some((_, _, hangup)) = self.armed.take() {
                hangup.0.cancel();
            }
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        let Some((sessions, key, hangup)) = self.armed.take() else { return };
        if self.inner.is_end_stream() {
            // Sent in full; hyper need not poll a finished body to its end.
            hangup.0.cancel();
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            hangup.0.cancel();
            return;
        };
        let cut = Instant::now();
        runtime.spawn(async move {
            tokio::select! {
                () = tokio::time::sleep(GRACE) => {}
                () = hangup.0.cancelled() => return,
            }
            if sessions.heard_since(&key, cut) {
                tracing::debug!(session = %key.1, "http: an answer stream was cut; the client is back");
            } else {
                tracing::info!(
                    session = %key.1,
                    "http: an answer stream was cut and the client was silent for {GRACE:?}; \
                     its call is stopped"
                );
                hangup.0.cancel();
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delete_fires_its_own_sessions_calls_and_no_other() {
        let s = Sessions::default();
        let mine = s.accepted(&(0, "abc".into())).child_token();
        let same_id_other_client = s.accepted(&(1, "abc".into())).child_token();
        s.deleted(1, "zzz");
        assert!(!mine.is_cancelled() && !same_id_other_client.is_cancelled());
        s.deleted(1, "abc");
        assert!(same_id_other_client.is_cancelled());
        assert!(!mine.is_cancelled(), "another client's delete reached this session");
        s.deleted(0, "abc");
        assert!(mine.is_cancelled());
    }

    #[test]
    fn only_known_sessions_are_heard_and_made_up_ids_leave_nothing() {
        let s = Sessions::default();
        let key = (0, "abc".to_string());
        let before = Instant::now();
        s.touch(0, "made-up");
        s.touch(0, "abc");
        assert!(s.table().is_empty(), "a touch recorded a session rmcp never accepted");
        assert!(!s.heard_since(&key, before));
        s.accepted(&key);
        let cut = Instant::now();
        assert!(!s.heard_since(&key, cut));
        std::thread::sleep(Duration::from_millis(2));
        s.touch(0, "abc");
        assert!(s.heard_since(&key, cut));
        s.deleted(0, "abc");
        assert!(!s.heard_since(&key, cut), "a deleted session is never heard from");
    }

    #[test]
    fn a_full_table_forgets_long_idle_sessions() {
        let s = Sessions::default();
        for i in 0..SWEEP_AT {
            s.accepted(&(0, format!("s{i}")));
        }
        let mut table = s.table();
        let now = Instant::now();
        for (_, seen) in table.iter_mut().take(10) {
            seen.last = now + FORGET_AFTER;
        }
        sweep(&mut table, now + FORGET_AFTER + Duration::from_secs(1));
        assert_eq!(table.len(), 10, "only the sessions heard from within the last half hour stay");
    }
}
