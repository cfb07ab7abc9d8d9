//! The runner's agent sessions: each `open` the relay sends becomes, at its first message, an
//! rmcp service of its own — a [`HandsServer`] whose identity is `runner:<agent>` — fed from
//! the link and answering into the [`Outbox`]. Nothing in an envelope reaches anything but
//! these sessions: no policy, no address, no other client's session. The relay can open at
//! most [`MAX_SESSIONS`], queue at most [`MAX_QUEUED`] messages in each and
//! [`MAX_INBOUND_BYTES`] of requests in all; past a bound a request is answered "busy", and a
//! session whose answers overflow ends.

use crate::link::drive::{Full, Outbox};
use crate::link::{
    CloseReason, Envelope, MAX_FRAME, MAX_INBOUND_BYTES, MAX_QUEUED, MAX_SESSIONS, close, msg,
};
use crate::server::{Daemon, HandsServer};
use rmcp::ServiceExt;
use rmcp::model::{ClientJsonRpcMessage, RequestId, ServerJsonRpcMessage};
use rmcp::service::RoleServer;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Request ids remembered per session, so that one sent again after a reconnect is not run
/// twice.
const SEEN: usize = 4096;

/// The identity prefix of every agent that comes through a runner's link (SPEC §13): no name a
/// relay sends can equal `stdio`, an HTTP client's name or a person's channel.
pub const PREFIX: &str = "runner:";

enum Slot {
    /// Opened; its service starts with its first message.
    Opened {
        agent: String,
    },
    Serving(Serving),
}

struct Serving {
    tx: mpsc::Sender<(ClientJsonRpcMessage, usize)>,
    /// The session's commands die when it is cancelled (the relay closed it).
    gone: CancellationToken,
    seen: crate::runner::seen::Seen,
}

/// Every session of the runner's link.
pub struct Sessions {
    daemon: Arc<Daemon>,
    asks_client: bool,
    outbox: Arc<Outbox>,
    table: Mutex<HashMap<String, Slot>>,
    /// Bytes received and not yet taken by their sessions.
    inbound: Arc<AtomicUsize>,
    /// Frames that were no envelope, for a quiet log.
    garbage: AtomicU64,
    me: Weak<Sessions>,
}

impl Sessions {
    pub fn new(daemon: Arc<Daemon>, asks_client: bool, outbox: Arc<Outbox>) -> Arc<Sessions> {
        Arc::new_cyclic(|me| Sessions {
            daemon,
            asks_client,
            outbox,
            table: Mutex::default(),
            inbound: Arc::default(),
            garbage: AtomicU64::new(0),
            me: me.clone(),
        })
    }

    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<String, Slot>> {
        hands_roots::lock(&self.table)
    }

    /// How many sessions are open.
    pub fn len(&self) -> usize {
        self.table().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// One text frame from the relay.
    pub fn on_frame(&self, text: &str) {
        match Envelope::parse(text) {
            Ok(Envelope::Open { session, agent }) => self.open(session, agent),
            Ok(Envelope::Msg { session, message, .. }) => self.deliver(session, message.get()),
            Ok(Envelope::Close { session, reason }) => {
                let why = reason.map_or("none given", CloseReason::word);
                self.end(&session, &format!("the relay closed it (reason: {why})"));
            }
            Err(e) => {
                // A relay that sends garbage is told nothing and changes nothing; the log says
                // so once, then every thousandth time.
                let n = self.garbage.fetch_add(1, Ordering::Relaxed);
                if n.is_multiple_of(1000) {
                    tracing::warn!(
                        "runner: ignored a frame from the relay ({e}); {} so far",
                        n + 1
                    );
                }
            }
        }
    }

    /// Refuses an opening: the relay is told why, so that its agent reads it (decision 0086).
    fn refuse(&self, session: &str, reason: CloseReason, why: &str) {
        tracing::warn!(session = %hands_roots::shown(session), "runner: refused a session: {why}");
        self.outbox.push_control(close(session, Some(reason)));
    }

    fn open(&self, session: String, agent: String) {
        if !crate::config::is_link_name(&agent) {
            let why = format!(
                "its agent name `{}` is not 1-64 letters, digits, `.`, `_`, `-`, `@`",
                hands_roots::shown(&agent)
            );
            return self.refuse(&session, CloseReason::BadAgent, &why);
        }
        let mut table = self.table();
        if table.contains_key(&session) {
            // Sent again after a reconnect: it is open already.
            return;
        }
        if table.len() >= MAX_SESSIONS {
            drop(table);
            let why = format!("{MAX_SESSIONS} sessions are open already");
            return self.refuse(&session, CloseReason::Full, &why);
        }
        tracing::info!(session = %session, "runner: agent `{agent}` opened a session");
        table.insert(session, Slot::Opened { agent });
    }

    fn deliver(&self, session: String, raw: &str) {
        let parsed = serde_json::from_str::<ClientJsonRpcMessage>(raw);
        let mut table = self.table();
        let Some(slot) = table.get_mut(&session) else {
            drop(table);
            // A session this runner does not have (ended, or of an old relay): the relay is
            // told, once per message.
            self.outbox.push_control(close(&session, Some(CloseReason::NoSession)));
            return;
        };
        let message = match parsed {
            Ok(m) => m,
            Err(e) => {
                drop(table);
                return self.invalid(&session, raw, &e.to_string());
            }
        };
        if let Slot::Opened { agent } = slot {
            // A 2026-07-28 call's *session* permissions live on the daemon by client (gate/ask.rs
            // reads the era from the call), so a session that carries one call needs nothing
            // more here.
            let agent = std::mem::take(agent);
            *slot = Slot::Serving(self.serve(&session, &agent));
        }
        let Slot::Serving(s) = slot else { return };
        if let ClientJsonRpcMessage::Request(r) = &message
            && !s.seen.first(&serde_json::to_vec(&r.id).unwrap_or_default())
        {
            // Sent again after a reconnect: it runs once.
            return;
        }
        let bytes = raw.len();
        let id = match &message {
            ClientJsonRpcMessage::Request(r) => Some(r.id.clone()),
            _ => None,
        };
        if self.inbound.fetch_add(bytes, Ordering::SeqCst) + bytes > MAX_INBOUND_BYTES {
            self.inbound.fetch_sub(bytes, Ordering::SeqCst);
            drop(table);
            let why = format!("the runner holds {MAX_INBOUND_BYTES} bytes of requests already");
            return self.busy(&session, id, &why);
        }
        if s.tx.try_send((message, bytes)).is_err() {
            self.inbound.fetch_sub(bytes, Ordering::SeqCst);
            drop(table);
            let why = format!("{MAX_QUEUED} messages of this session wait already");
            self.busy(&session, id, &why);
        }
    }

    /// A message past a bound: a request is answered with an error saying so (the session goes
    /// on), anything else is dropped.
    fn busy(&self, session: &str, id: Option<RequestId>, why: &str) {
        let n = self.garbage.fetch_add(1, Ordering::Relaxed);
        if n.is_multiple_of(1000) {
            tracing::warn!(session = %session, "runner: refused a message of the relay: {why}");
        }
        let Some(id) = id else { return };
        let answer = serde_json::json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {"code": -32000, "message": format!("the runner is busy: {why}; try again")},
        });
        if self.outbox.push(session, msg(session, &answer, None)).is_err() {
            self.end_and_tell(session, CloseReason::Overflow, "its answers overflowed");
        }
    }

    /// A message that is no JSON-RPC message this server takes: a request is answered with an
    /// error (its id read back), anything else dropped.
    fn invalid(&self, session: &str, raw: &str, why: &str) {
        let id = serde_json::from_str::<serde_json::Value>(raw)
            .ok()
            .and_then(|v| v.get("id").cloned())
            .filter(|id| id.is_string() || id.is_number());
        let Some(id) = id else { return };
        let answer = serde_json::json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {"code": -32600, "message": format!(
                "invalid request: not a JSON-RPC 2.0 message this server understands ({})",
                hands_roots::shown(why)
            )},
        });
        if self.outbox.push(session, msg(session, &answer, None)).is_err() {
            self.end_and_tell(session, CloseReason::Overflow, "its answers overflowed");
        }
    }

    fn serve(&self, session: &str, agent: &str) -> Serving {
        let (tx, rx) = mpsc::channel(MAX_QUEUED);
        let client = format!("{PREFIX}{agent}");
        let server = HandsServer::for_runner(self.daemon.clone(), &client, self.asks_client);
        let gone = server.gone();
        let transport = LinkTransport {
            rx,
            session: session.to_string(),
            outbox: self.outbox.clone(),
            inbound: self.inbound.clone(),
            held: HashMap::new(),
        };
        let me = self.me.clone();
        let id = session.to_string();
        tokio::spawn(async move {
            match server.serve(transport).await {
                Ok(running) => {
                    let _ = running.waiting().await;
                }
                Err(e) => tracing::debug!(session = %id, "runner: a session did not start: {e}"),
            }
            if let Some(me) = me.upgrade() {
                me.end_and_tell(&id, CloseReason::Ended, "it ended");
            }
        });
        Serving { tx, gone, seen: crate::runner::seen::Seen::new(SEEN) }
    }

    /// Ends `session` here (its commands stop); nothing is sent.
    fn end(&self, session: &str, why: &str) -> bool {
        let slot = self.table().remove(session);
        self.outbox.forget(session);
        match slot {
            Some(Slot::Serving(s)) => {
                tracing::info!(session = %session, "runner: session ended: {why}");
                s.gone.cancel();
                true
            }
            Some(Slot::Opened { .. }) => true,
            None => false,
        }
    }

    /// Ends `session` and tells the relay why.
    fn end_and_tell(&self, session: &str, reason: CloseReason, why: &str) {
        if self.end(session, why) {
            self.outbox.push_control(close(session, Some(reason)));
        }
    }

    /// Ends every session (the link is gone for good, or it came back to a new relay): their
    /// commands stop, their results are lost.
    pub fn end_all(&self, why: &str) {
        let ids: Vec<String> = self.table().keys().cloned().collect();
        for id in ids {
            self.end(&id, why);
        }
    }

    /// Ends every session and tells the relay why (the runner is shutting down), so that its
    /// agents read that at once rather than a call lost after the relay's linger.
    pub fn close_all(&self, reason: CloseReason, why: &str) {
        let ids: Vec<String> = self.table().keys().cloned().collect();
        for id in ids {
            self.end_and_tell(&id, reason, why);
        }
    }
}

/// What goes out in place of a message of `bytes` bytes, more than a link frame holds (the relay
/// would refuse the frame, and the link would fail on it at every reconnect): for an answer to
/// request `id`, an error saying so — the call ran and is not run again; for anything else, a
/// log line here and nothing (a notification the agent can do without).
fn too_large(session: &str, id: Option<&RequestId>, bytes: usize) -> Option<String> {
    tracing::warn!("a message of {bytes} bytes is more than the link carries; not sent");
    let id = id?;
    let message = format!(
        "the answer was {bytes} bytes, more than a runner's link carries ({} MiB): the call \
         ran, and is not run again; ask for less (fewer or smaller `outputs`, a narrower read)",
        MAX_FRAME >> 20
    );
    let error = serde_json::json!({"jsonrpc": "2.0", "id": id,
        "error": {"code": -32603, "message": message}});
    Some(msg(session, &error, None))
}

/// rmcp's transport of one session: messages from the link in, answers to the outbox. A
/// request's bytes count against [`MAX_INBOUND_BYTES`] until it is answered (rmcp runs each in
/// a task of its own, so what is held is what is in flight, not only what is queued).
struct LinkTransport {
    rx: mpsc::Receiver<(ClientJsonRpcMessage, usize)>,
    session: String,
    outbox: Arc<Outbox>,
    inbound: Arc<AtomicUsize>,
    held: HashMap<RequestId, usize>,
}

impl Drop for LinkTransport {
    fn drop(&mut self) {
        let held: usize = self.held.values().sum();
        self.inbound.fetch_sub(held, Ordering::SeqCst);
    }
}

impl rmcp::transport::Transport<RoleServer> for LinkTransport {
    type Error = Full;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Full>> + Send + 'static {
        // A question asked in the middle of a call names the call, so that the relay puts it on
        // that call's own answer stream.
        let answered = match &item {
            ServerJsonRpcMessage::Response(r) => Some(&r.id),
            ServerJsonRpcMessage::Error(e) => e.id.as_ref(),
            _ => None,
        };
        if let Some(bytes) = answered.and_then(|id| self.held.remove(id)) {
            self.inbound.fetch_sub(bytes, Ordering::SeqCst);
        }
        let call = match &item {
            ServerJsonRpcMessage::Request(r) => {
                use rmcp::model::GetExtensions;
                r.request
                    .extensions()
                    .get::<rmcp::service::OriginatingRequestId>()
                    .and_then(|o| serde_json::to_value(&o.0).ok())
            }
            _ => None,
        };
        let mut text = msg(&self.session, &item, call);
        if text.len() > MAX_FRAME {
            match too_large(&self.session, answered, text.len()) {
                Some(instead) => text = instead,
                None => return std::future::ready(Ok(())),
            }
        }
        let pushed = self.outbox.push(&self.session, text);
        if pushed.is_err() {
            // Its answers overflow (the link is gone and they pile up): the session ends, and
            // the relay's agent is told its call was lost.
            self.rx.close();
        }
        std::future::ready(pushed)
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        let (m, bytes) = self.rx.recv().await?;
        match &m {
            ClientJsonRpcMessage::Request(r) => {
                if let Some(old) = self.held.insert(r.id.clone(), bytes) {
                    self.inbound.fetch_sub(old, Ordering::SeqCst);
                }
            }
            _ => {
                self.inbound.fetch_sub(bytes, Ordering::SeqCst);
            }
        }
        Some(m)
    }

    async fn close(&mut self) -> Result<(), Full> {
        self.rx.close();
        Ok(())
    }
}
