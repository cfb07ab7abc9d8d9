//! The relay's runners: for each configured name, its live link (at most one: a new
//! authenticated connection replaces the old), its outbox (kept across a reconnect), and the
//! agent sessions open on it. Frames from the runner are routed here to the call or session
//! they answer; a runner's `open`, a message for a session it was never given, or an answer
//! nobody waits for is dropped.

use crate::link::drive::{Full, Outbox};
use crate::link::{CloseReason, Envelope, LINGER, MAX_QUEUED, MAX_SESSIONS, close, msg};
use crate::transport::shares::{Over, Shares};
use rmcp::model::{NumberOrString, RequestId};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::SystemTime;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Runner requests remembered per session (as the runner remembers the agent's).
const SEEN: usize = 4096;

/// Bytes of a runner's messages the relay holds for its agents (queued, or being passed on):
/// past it, the session whose message overflowed is ended, so a runner gone wrong cannot grow
/// the relay's memory. Two of the largest frames fit.
const MAX_HELD: usize = 32 * 1024 * 1024;

/// A runner message's bytes, counted against its runner's [`MAX_HELD`] until dropped (when
/// the agent has been given it, or it was dropped on the way).
pub struct Held {
    bytes: usize,
    of: Arc<AtomicUsize>,
}

impl Held {
    /// The message's size as the runner sent it.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.of.fetch_sub(self.bytes, Ordering::SeqCst);
    }
}

/// What a waiting call or a session's other traffic receives, with its bytes held.
pub type Delivery<T> = (T, Held);

/// What a call waiting at the relay receives from its runner.
#[derive(Debug)]
pub enum Inbound {
    /// The answer: the whole JSON-RPC response.
    Answer(Value),
    /// A request of the runner made in the middle of the call (a person's question).
    Request(Value),
    /// A notification for the call (progress).
    Notification(Value),
}

/// A call of an agent waiting for its runner.
struct Waiting {
    tx: mpsc::Sender<Delivery<Inbound>>,
    progress: Option<Value>,
}

/// One agent session on a runner's link.
pub struct LinkSession {
    pub id: String,
    /// The agent it serves (one agent holds at most [`MAX_PER_AGENT`] of a runner's).
    agent: String,
    runner: Weak<Runner>,
    calls: Mutex<HashMap<String, Waiting>>,
    /// Requests and notifications of the runner not tied to a waiting call.
    pub(super) loose: mpsc::Sender<Delivery<Value>>,
    /// Runner requests already seen (one sent again after a reconnect is not asked twice):
    /// the newest [`SEEN`], oldest first, so that a runner cannot grow it without end.
    seen: Mutex<crate::runner::seen::Seen>,
    /// Cancelled when the session ended; `why` says how.
    pub ended: CancellationToken,
    why: Mutex<String>,
}

/// A request id as a map key (numbers and strings never collide: `n:1` and `s:1`).
pub fn key(id: &RequestId) -> String {
    match id {
        NumberOrString::Number(n) => format!("n:{n}"),
        NumberOrString::String(s) => format!("s:{s}"),
    }
}

fn key_of(v: &Value) -> Option<String> {
    match v {
        Value::Number(n) => Some(format!("n:{n}")),
        Value::String(s) => Some(format!("s:{s}")),
        _ => None,
    }
}

impl LinkSession {
    /// Sends one JSON-RPC message to the runner.
    pub fn send<T: serde::Serialize>(&self, message: &T) -> Result<(), Full> {
        let runner = self.runner.upgrade().ok_or_else(|| Full(self.id.clone()))?;
        runner.outbox.push(&self.id, msg(&self.id, message, None))
    }

    /// Waits for the runner's answers to the call `id`; `progress` is its progress token.
    pub fn wait(
        &self,
        id: &RequestId,
        progress: Option<Value>,
    ) -> mpsc::Receiver<Delivery<Inbound>> {
        let (tx, rx) = mpsc::channel(MAX_QUEUED);
        hands_roots::lock(&self.calls).insert(key(id), Waiting { tx, progress });
        rx
    }

    pub fn done(&self, id: &RequestId) {
        hands_roots::lock(&self.calls).remove(&key(id));
    }

    /// Why the session ended (empty while it runs).
    pub fn why(&self) -> String {
        hands_roots::lock(&self.why).clone()
    }

    fn end(&self, why: &str) {
        let mut w = hands_roots::lock(&self.why);
        if w.is_empty() {
            *w = why.to_string();
        }
        drop(w);
        hands_roots::lock(&self.calls).clear();
        self.ended.cancel();
    }

    /// Closes the session from the agent's side (its HTTP session ended).
    pub fn close(&self) {
        let Some(runner) = self.runner.upgrade() else { return };
        runner.outbox.forget(&self.id);
        if hands_roots::lock(&runner.state).sessions.remove(&self.id).is_some() {
            runner.outbox.push_control(close(&self.id, Some(CloseReason::Ended)));
        }
        self.end("the agent closed it");
    }

    /// A message of the runner in this session.
    fn route(&self, message: Value, call: Option<&Value>, held: Held) {
        let id = message.get("id").and_then(key_of);
        let is_request = message.get("method").is_some();
        let mut calls = hands_roots::lock(&self.calls);
        let (target, inbound) = match (is_request, id) {
            (false, Some(id)) => {
                // An answer: to its call, which then waits for nothing more (a second answer,
                // sent again after a reconnect or by a runner gone wrong, goes nowhere).
                match calls.remove(&id) {
                    Some(w) => (Some(w.tx), Inbound::Answer(message)),
                    None => return,
                }
            }
            (true, Some(id)) => {
                if !hands_roots::lock(&self.seen).first(id.as_bytes()) {
                    return;
                }
                let call = call.and_then(key_of).and_then(|c| calls.get(&c));
                (call.map(|w| w.tx.clone()), Inbound::Request(message))
            }
            (true, None) => {
                let token = message.pointer("/params/progressToken");
                let call = calls.values().find(|w| token.is_some() && w.progress.as_ref() == token);
                (call.map(|w| w.tx.clone()), Inbound::Notification(message))
            }
            (false, None) => return,
        };
        drop(calls);
        let sent = match target {
            Some(tx) => tx.try_send((inbound, held)).is_ok(),
            None => {
                let (Inbound::Request(m) | Inbound::Notification(m) | Inbound::Answer(m)) = inbound;
                self.loose.try_send((m, held)).is_ok()
            }
        };
        if !sent {
            tracing::warn!(session = %self.id, "relay: the runner queued more than {MAX_QUEUED} messages for one session; it is ended");
            if let Some(r) = self.runner.upgrade() {
                r.end_session(&self.id, "the runner sent more than a session holds");
            }
        }
    }
}

struct Live {
    id: u64,
    since: SystemTime,
    stop: CancellationToken,
}

#[derive(Default)]
struct State {
    live: Option<Live>,
    /// The instance of the runner process last connected.
    instance: Option<String>,
    sessions: HashMap<String, Arc<LinkSession>>,
}

/// Why an agent's session with a runner was not opened ([`Runner::open`]); the agent's
/// request fails with it (an MCP internal error), and a later one may succeed.
/// A runner's sessions: [`MAX_SESSIONS`] in all, and half of them for any one agent, so that
/// one agent cannot keep the others out.
pub const SESSIONS: Shares = Shares { total: MAX_SESSIONS, each: MAX_SESSIONS / 2 };

/// The most sessions of one runner one agent may hold.
pub const MAX_PER_AGENT: usize = SESSIONS.each;

#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The runner's link is down (it never came, or it dropped and has not come back).
    #[error("runner {runner} is not connected")]
    NotConnected { runner: String },
    /// The runner serves [`MAX_SESSIONS`] sessions already.
    #[error("runner {runner} serves {MAX_SESSIONS} sessions already; try again in a moment")]
    Busy { runner: String },
    /// The agent holds [`MAX_PER_AGENT`] of the runner's sessions already.
    #[error(
        "agent {agent} holds {MAX_PER_AGENT} sessions of runner {runner} already, the most one \
         agent may (so that no agent keeps the others out); end one (an HTTP DELETE of its \
         session) or let an idle one expire, then try again"
    )]
    Crowded { runner: String, agent: String },
    /// The link's outbound queue had no room for the session's opening.
    #[error(transparent)]
    Queue(#[from] Full),
}

/// One configured runner.
pub struct Runner {
    pub name: String,
    pub token_sha256: [u8; 32],
    pub outbox: Arc<Outbox>,
    state: Mutex<State>,
    /// Bumped on every connection; a linger timer that finds it unchanged ends the sessions.
    generation: AtomicU64,
    /// Frames of this runner that meant nothing, for a quiet log.
    odd: AtomicU64,
    /// Bytes of its messages held for agents ([`MAX_HELD`]).
    held: Arc<AtomicUsize>,
    me: Weak<Runner>,
}

impl Runner {
    pub fn new(name: String, token_sha256: [u8; 32]) -> Arc<Runner> {
        Arc::new_cyclic(|me| Runner {
            name,
            token_sha256,
            outbox: Arc::default(),
            state: Mutex::default(),
            generation: AtomicU64::new(0),
            odd: AtomicU64::new(0),
            held: Arc::default(),
            me: me.clone(),
        })
    }

    /// Since when it is connected, if it is.
    pub fn since(&self) -> Option<SystemTime> {
        hands_roots::lock(&self.state).live.as_ref().map(|l| l.since)
    }

    /// A new authenticated connection of runner process `instance`: the old one (if any) is
    /// stopped; sessions of another process are ended. Returns the connection's id and stop.
    pub fn connected(&self, instance: &str) -> (u64, CancellationToken) {
        let id = self.generation.fetch_add(1, Ordering::SeqCst) + 1;
        let stop = CancellationToken::new();
        let mut s = hands_roots::lock(&self.state);
        if let Some(old) = s.live.take() {
            tracing::info!(
                "relay: runner `{}` connected again; the older link is closed",
                self.name
            );
            old.stop.cancel();
        }
        let restarted = s.instance.as_deref().is_some_and(|i| i != instance);
        s.instance = Some(instance.to_string());
        s.live = Some(Live { id, since: SystemTime::now(), stop: stop.clone() });
        let ended: Vec<Arc<LinkSession>> =
            if restarted { s.sessions.drain().map(|(_, v)| v).collect() } else { Vec::new() };
        drop(s);
        if restarted {
            self.outbox.clear();
            self.tell_ended(&ended);
        }
        for session in ended {
            session.end(&format!(
                "runner `{}` restarted: the call's result was lost (it ran at most once)",
                self.name
            ));
        }
        (id, stop)
    }

    /// Connection `id` ended. If no other took its place within [`LINGER`], waiting calls are
    /// answered as lost.
    pub fn disconnected(&self, id: u64) {
        let mut s = hands_roots::lock(&self.state);
        if s.live.as_ref().is_some_and(|l| l.id == id) {
            s.live = None;
        } else {
            return;
        }
        drop(s);
        let me = self.me.clone();
        tokio::spawn(async move {
            tokio::time::sleep(LINGER).await;
            let Some(me) = me.upgrade() else { return };
            if me.generation.load(Ordering::SeqCst) != id {
                return;
            }
            let ended: Vec<Arc<LinkSession>> =
                hands_roots::lock(&me.state).sessions.drain().map(|(_, v)| v).collect();
            me.outbox.clear();
            me.tell_ended(&ended);
            for session in ended {
                session.end(&format!(
                    "the link to runner `{}` dropped and did not come back within {} s: the \
                     call's result was lost (it ran at most once)",
                    me.name,
                    LINGER.as_secs()
                ));
            }
        });
    }

    /// Queues a `close` for each session the relay dropped with its messages, for the runner's
    /// next link: a runner that comes back to this same relay (a link the relay saw close and
    /// the runner did not, or a second process under its name that came and went) would else
    /// keep serving them, each holding one of its slots for good (found by the fifth attack
    /// pass: after an outage a runner took 56 new sessions of 64).
    fn tell_ended(&self, ended: &[Arc<LinkSession>]) {
        for session in ended {
            self.outbox.push_control(close(&session.id, Some(CloseReason::NoSession)));
        }
    }

    /// Opens an agent session: `Err` says why not (not connected, too many sessions).
    pub fn open(
        &self,
        agent: &str,
        loose: mpsc::Sender<Delivery<Value>>,
    ) -> Result<Arc<LinkSession>, OpenError> {
        let mut s = hands_roots::lock(&self.state);
        if s.live.is_none() {
            return Err(OpenError::NotConnected { runner: self.name.to_string() });
        }
        if let Some(full) = self.full_for(&s, agent) {
            return Err(full);
        }
        let id = crate::link::random_id();
        let session = Arc::new(LinkSession {
            id: id.clone(),
            agent: agent.to_string(),
            runner: self.me.clone(),
            calls: Mutex::default(),
            loose,
            seen: Mutex::new(crate::runner::seen::Seen::new(SEEN)),
            ended: CancellationToken::new(),
            why: Mutex::default(),
        });
        s.sessions.insert(id.clone(), session.clone());
        drop(s);
        let open = Envelope::Open { session: id.clone(), agent: agent.to_string() };
        if let Err(full) = self.outbox.push(&id, open.to_text()) {
            // Never opened on the runner: it must not hold one of its sessions either.
            hands_roots::lock(&self.state).sessions.remove(&id);
            return Err(full.into());
        }
        Ok(session)
    }

    /// Why a new session of `agent` could not open now (for the door's 503), if it could not.
    pub fn busy_for(&self, agent: &str) -> Option<OpenError> {
        self.full_for(&hands_roots::lock(&self.state), agent)
    }

    /// Whether the runner, or `agent`'s share of it, is full (found by the fifth attack pass:
    /// one agent opened all 64 sessions and kept every other agent out).
    fn full_for(&self, s: &State, agent: &str) -> Option<OpenError> {
        let runner = self.name.to_string();
        let held = s.sessions.values().filter(|v| v.agent == agent).count();
        match SESSIONS.over(s.sessions.len(), held)? {
            Over::Total => Some(OpenError::Busy { runner }),
            Over::Share => Some(OpenError::Crowded { runner, agent: agent.to_string() }),
        }
    }

    fn end_session(&self, id: &str, why: &str) {
        let session = hands_roots::lock(&self.state).sessions.remove(id);
        self.outbox.forget(id);
        if let Some(s) = session {
            self.outbox.push_control(close(id, Some(CloseReason::Overflow)));
            s.end(why);
        }
    }

    /// A frame of this runner that meant nothing: dropped, and said in the log the first time
    /// and every thousandth after, so that a runner sending garbage cannot flood the log.
    fn odd(&self, what: std::fmt::Arguments<'_>) {
        let n = self.odd.fetch_add(1, Ordering::Relaxed);
        if n.is_multiple_of(1000) {
            tracing::warn!("relay: runner `{}` {what}; dropped ({} so far)", self.name, n + 1);
        }
    }

    /// One text frame from this runner.
    pub fn on_frame(&self, text: &str) {
        let envelope = match Envelope::parse(text) {
            Ok(e) => e,
            Err(e) => return self.odd(format_args!("sent a frame that is no envelope ({e})")),
        };
        match envelope {
            Envelope::Close { session, reason } => {
                let s = hands_roots::lock(&self.state).sessions.remove(&session);
                self.outbox.forget(&session);
                if let Some(s) = s {
                    s.end(&super::closed::by_runner(&self.name, &s.agent, reason));
                }
            }
            Envelope::Msg { session, message, call } => {
                let s = hands_roots::lock(&self.state).sessions.get(&session).cloned();
                let Some(s) = s else {
                    // A session that ended here, or that the relay never opened.
                    return;
                };
                // Counted before it is parsed: past the bound, it is not even read.
                let bytes = message.get().len();
                if self.held.fetch_add(bytes, Ordering::SeqCst) + bytes > MAX_HELD {
                    self.held.fetch_sub(bytes, Ordering::SeqCst);
                    self.end_session(&session, "the runner sent more than the relay holds");
                    return self.odd(format_args!(
                        "sent more than the relay holds for its agents ({MAX_HELD} bytes)"
                    ));
                }
                let held = Held { bytes, of: self.held.clone() };
                match serde_json::from_str::<Value>(message.get()) {
                    Ok(m) if m.is_object() => s.route(m, call.as_ref(), held),
                    _ => self.odd(format_args!("sent a message that is no JSON-RPC")),
                }
            }
            Envelope::Open { .. } => {
                self.odd(format_args!("tried to open a session; only agents do"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::MAX_FRAME;
    use serde_json::json;

    fn session_of(r: &Arc<Runner>) -> (Arc<LinkSession>, mpsc::Receiver<Delivery<Value>>) {
        r.connected("one-instance");
        let (tx, rx) = mpsc::channel(MAX_QUEUED);
        (r.open("alice", tx).unwrap(), rx)
    }

    /// A notification of the runner with `size` bytes of data, for no call.
    fn note(session: &str, size: usize) -> String {
        let m = json!({"jsonrpc": "2.0", "method": "notifications/message",
            "params": {"level": "info", "data": "x".repeat(size)}});
        msg(session, &m, None)
    }

    #[tokio::test]
    async fn a_runner_cannot_queue_more_than_a_session_or_the_relay_holds() {
        let r = Runner::new("box-1".into(), [0; 32]);
        // Nobody reads this session's traffic: the 257th message ends it.
        let (s, rx) = session_of(&r);
        for _ in 0..MAX_QUEUED {
            r.on_frame(&note(&s.id, 10));
        }
        assert!(!s.ended.is_cancelled());
        r.on_frame(&note(&s.id, 10));
        assert!(s.ended.is_cancelled() && s.why().contains("more than a session holds"));
        drop(rx);
        assert_eq!(r.held.load(Ordering::SeqCst), 0, "what was dropped is no longer held");
        // Two of the largest messages fit what the relay holds for agents; a third ends the
        // session, and its bytes are never held.
        let (s, rx) = session_of(&r);
        let big = MAX_FRAME - 1024;
        r.on_frame(&note(&s.id, big));
        r.on_frame(&note(&s.id, big));
        assert!(!s.ended.is_cancelled());
        let held = r.held.load(Ordering::SeqCst);
        assert!(held > 2 * big && held <= MAX_HELD, "{held}");
        r.on_frame(&note(&s.id, big));
        assert!(s.ended.is_cancelled() && s.why().contains("more than the relay holds"));
        assert_eq!(r.held.load(Ordering::SeqCst), held);
        drop(rx);
        assert_eq!(r.held.load(Ordering::SeqCst), 0);
    }

    /// One agent holds at most half a runner's sessions: the others still get in (found by
    /// the fifth attack pass: one agent opened all 64 and kept every other out).
    #[tokio::test]
    async fn one_agent_cannot_take_every_session() {
        let r = Runner::new("box-1".into(), [0; 32]);
        r.connected("one-instance");
        let mut held = Vec::new();
        for _ in 0..MAX_PER_AGENT {
            let (tx, rx) = mpsc::channel(MAX_QUEUED);
            held.push((r.open("carol", tx).unwrap(), rx));
        }
        let (tx, _rx) = mpsc::channel(MAX_QUEUED);
        let e = r.open("carol", tx).map(drop).unwrap_err();
        assert!(matches!(e, OpenError::Crowded { .. }), "{e}");
        assert!(e.to_string().contains("DELETE"), "says what to do: {e}");
        assert!(r.busy_for("carol").is_some() && r.busy_for("alice").is_none());
        let (tx, _rx) = mpsc::channel(MAX_QUEUED);
        assert!(r.open("alice", tx).is_ok(), "another agent still gets in");
    }

    /// Sessions the relay drops — the runner came back as another process, or its link stayed
    /// down past [`LINGER`] — leave a `close` each for the runner's next link, which would else
    /// keep serving them, one slot each (found by the fifth attack pass).
    #[tokio::test(start_paused = true)]
    async fn a_dropped_session_is_closed_on_the_runner_too() {
        let r = Runner::new("box-1".into(), [0; 32]);
        let (s, _rx) = session_of(&r);
        r.connected("another-instance");
        assert!(s.ended.is_cancelled());
        assert_eq!(r.outbox.len(), 1, "its open was dropped, a close queued");
        let (s, _rx) = session_of(&r);
        r.outbox.clear();
        let id = r.generation.load(Ordering::SeqCst);
        r.disconnected(id);
        tokio::time::sleep(LINGER + std::time::Duration::from_secs(1)).await;
        assert!(s.ended.is_cancelled());
        assert_eq!(r.outbox.len(), 1, "a close waits for the link's return");
    }

    /// A session whose opening finds the link's queue full is refused and holds no place: a
    /// slow runner's link cannot fill the relay's table with sessions that never opened (they
    /// stayed, and after 64 refusals the runner was "busy" until its link dropped).
    #[tokio::test]
    async fn an_opening_the_queue_refuses_leaves_no_session() {
        let r = Runner::new("box-1".into(), [0; 32]);
        r.connected("one-instance");
        let chunk = "x".repeat(1024 * 1024);
        for _ in 0..=crate::link::MAX_OUTBOUND_BYTES / chunk.len() {
            r.outbox.push_control(chunk.clone());
        }
        for _ in 0..=MAX_SESSIONS {
            let (tx, _rx) = mpsc::channel(MAX_QUEUED);
            assert!(matches!(r.open("alice", tx), Err(OpenError::Queue(_))));
        }
        assert!(hands_roots::lock(&r.state).sessions.is_empty());
        assert!(r.busy_for("alice").is_none());
        // The positive control: once the queue drains, a session opens and is held.
        r.outbox.clear();
        let (tx, _rx) = mpsc::channel(MAX_QUEUED);
        let s = r.open("alice", tx).unwrap();
        assert!(hands_roots::lock(&r.state).sessions.contains_key(&s.id));
    }

    #[tokio::test]
    async fn a_call_takes_one_answer_and_garbage_changes_nothing() {
        let r = Runner::new("box-1".into(), [0; 32]);
        let (s, _loose) = session_of(&r);
        let id = RequestId::Number(7);
        let mut rx = s.wait(&id, None);
        for junk in ["garbage", "{}", r#"{"v":1,"type":"open","session":"x","agent":"a"}"#] {
            r.on_frame(junk);
        }
        r.on_frame(&msg("no-such-session", &json!({"jsonrpc":"2.0","id":7,"result":{}}), None));
        let answer = |text: &str| json!({"jsonrpc": "2.0", "id": 7, "result": {"said": text}});
        r.on_frame(&msg(&s.id, &answer("first"), None));
        r.on_frame(&msg(&s.id, &answer("second"), None));
        let Ok((Inbound::Answer(v), _)) = rx.try_recv() else { panic!("no answer") };
        assert_eq!(v["result"]["said"], "first");
        assert!(rx.try_recv().is_err(), "a second answer reached the call");
        assert!(!s.ended.is_cancelled());
        assert_eq!(r.odd.load(Ordering::Relaxed), 3);
    }
}
