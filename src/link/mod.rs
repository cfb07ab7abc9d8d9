//! The link between a runner and its relay (SPEC §13, decision 0065): one WebSocket, one small
//! versioned JSON envelope per text frame, the numbers both ends hold to, and the driver both
//! ends run ([`drive`]), which keeps what it sent until the other end confirms it and sends it
//! again over the next connection.
//!
//! An envelope is `{"v":1,"type":"open","session":ID,"agent":NAME}` (relay to runner: an agent's
//! session starts), `{"v":1,"type":"msg","session":ID,"message":{…JSON-RPC…}}` (either way) or
//! `{"v":1,"type":"close","session":ID}` (either way: the session ends). A runner's `msg` may
//! carry `"call":ID`, the id of the agent's request it belongs to, so that the relay delivers a
//! question on that call's own answer stream; a `close` may carry `"reason":WORD`, why the end
//! that sent it closed the session ([`CloseReason`], decision 0086).

pub mod drive;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::time::Duration;

/// The WebSocket subprotocol of this envelope's version.
pub const SUBPROTOCOL: &str = "hands-runner.v1";

/// The header each end names its process instance in (runner: its upgrade request; relay: the
/// `101` answer). A reconnect to the same instance resumes its sessions; to another, nothing of
/// the old link can be delivered any more, so its sessions end at once.
pub const INSTANCE_HEADER: &str = "hands-instance";

/// The largest frame either end reads (and so the largest message): a `write` of the biggest
/// file the HTTP door takes, with room for its JSON escaping (set beside `[runner]`'s config).
pub const MAX_FRAME: usize = crate::config::LINK_FRAME;

/// Agent sessions a runner serves at once; the relay refuses the next agent with 503.
pub const MAX_SESSIONS: usize = 64;

/// Messages queued for one session, on either end, before the session is ended.
pub const MAX_QUEUED: usize = 256;

/// Bytes of the requests a runner holds (queued, or in flight until answered): past it, a
/// request is answered "busy" (a flood cannot grow memory, SPEC §13: under 200 MB). The gate
/// keeps a parked call's arguments in several forms (its question, its record, the log), about
/// six times their size: three parked 4 MiB writes fit and the runner stays near 120 MB.
pub const MAX_INBOUND_BYTES: usize = 16 * 1024 * 1024;

/// Bytes of messages sent and not yet confirmed, on one end: past it, the session whose message
/// overflowed is ended.
pub const MAX_OUTBOUND_BYTES: usize = 64 * 1024 * 1024;

/// How often each end pings; every ping's pong also confirms what was sent before it.
pub const PING_EVERY: Duration = Duration::from_secs(15);

/// A link silent this long is dead (SPEC §13: noticed within 60 s; checked every
/// [`PING_EVERY`], so found dead at most 60 s after the last frame).
pub const DEAD_AFTER: Duration = Duration::from_secs(45);

/// How long sessions outlive a dropped link, waiting for it to come back: their results are
/// kept meanwhile; past it, a call still waiting is answered as lost and the runner's sessions
/// end (their commands stop).
pub const LINGER: Duration = Duration::from_secs(60);

/// One envelope.
#[derive(Debug, Clone)]
pub enum Envelope {
    Open { session: String, agent: String },
    Msg { session: String, message: Box<RawValue>, call: Option<serde_json::Value> },
    Close { session: String, reason: Option<CloseReason> },
}

/// Why an end closed a session, carried in its `close` (decision 0086). Optional on the wire: a
/// peer that sends none, or one that does not know the field, still closes. A word, never text
/// from the peer, so that nothing it sends is echoed to an agent or a log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CloseReason {
    /// The runner serves [`MAX_SESSIONS`] sessions already; the opening is refused.
    Full,
    /// The agent's name is not one the runner takes (`[A-Za-z0-9._@-]{1,64}`).
    BadAgent,
    /// The end does not have the session: it ended there, or the process restarted.
    NoSession,
    /// The session's messages overflowed what the end keeps for the other.
    Overflow,
    /// The session ended on its own: the runner's server for it stopped, or the agent left.
    Ended,
    /// The runner is shutting down; its commands are stopped.
    ShuttingDown,
    /// A reason of a newer peer that this end does not know.
    #[serde(other)]
    Other,
}

impl CloseReason {
    /// Its word on the wire, for a log line.
    pub fn word(self) -> &'static str {
        match self {
            CloseReason::Full => "full",
            CloseReason::BadAgent => "bad_agent",
            CloseReason::NoSession => "no_session",
            CloseReason::Overflow => "overflow",
            CloseReason::Ended => "ended",
            CloseReason::ShuttingDown => "shutting_down",
            CloseReason::Other => "other",
        }
    }
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Kind {
    Open,
    Msg,
    Close,
}

/// The envelope as it travels: one flat object (unknown keys are ignored, so a later version
/// can add optional ones; `v` says when the meaning changed).
#[derive(Serialize, Deserialize)]
struct Wire<'a> {
    v: u32,
    #[serde(rename = "type")]
    kind: Kind,
    session: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    agent: Option<&'a str>,
    #[serde(borrow, skip_serializing_if = "Option::is_none")]
    message: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    call: Option<serde_json::Value>,
    #[serde(default, deserialize_with = "any_reason", skip_serializing_if = "Option::is_none")]
    reason: Option<CloseReason>,
}

/// A `close`'s reason: one this end does not know, or that is not a word, is [`CloseReason::Other`]
/// rather than a frame refused whole (the session must still close).
fn any_reason<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<CloseReason>, D::Error> {
    let v = Option::<serde_json::Value>::deserialize(d)?;
    Ok(v.map(|v| serde_json::from_value(v).unwrap_or(CloseReason::Other)))
}

/// Why a frame is not an envelope; the text is short and never quotes the frame whole.
#[derive(Debug, thiserror::Error)]
pub enum BadFrame {
    #[error("not a JSON envelope: {0}")]
    Json(String),
    #[error("envelope version {0}; this end speaks 1")]
    Version(u32),
    #[error("a session id must be 1-128 printable ASCII characters")]
    Session,
    #[error("`{0}` lacks its `{1}`")]
    Missing(&'static str, &'static str),
}

impl Envelope {
    pub fn session(&self) -> &str {
        match self {
            Envelope::Open { session, .. }
            | Envelope::Msg { session, .. }
            | Envelope::Close { session, .. } => session,
        }
    }

    pub fn parse(text: &str) -> Result<Envelope, BadFrame> {
        let w: Wire<'_> = serde_json::from_str(text)
            .map_err(|e| BadFrame::Json(hands_roots::shown(&e.to_string()).to_string()))?;
        if w.v != 1 {
            return Err(BadFrame::Version(w.v));
        }
        let ok =
            (1..=128).contains(&w.session.len()) && w.session.bytes().all(|b| b.is_ascii_graphic());
        if !ok {
            return Err(BadFrame::Session);
        }
        let session = w.session.to_string();
        Ok(match w.kind {
            Kind::Open => Envelope::Open {
                session,
                agent: w.agent.ok_or(BadFrame::Missing("open", "agent"))?.to_string(),
            },
            Kind::Msg => Envelope::Msg {
                session,
                message: w.message.ok_or(BadFrame::Missing("msg", "message"))?.to_owned(),
                call: w.call,
            },
            Kind::Close => Envelope::Close { session, reason: w.reason },
        })
    }

    pub fn to_text(&self) -> String {
        let w = match self {
            Envelope::Open { session, agent } => Wire {
                v: 1,
                kind: Kind::Open,
                session,
                agent: Some(agent),
                message: None,
                call: None,
                reason: None,
            },
            Envelope::Msg { session, message, call } => Wire {
                v: 1,
                kind: Kind::Msg,
                session,
                agent: None,
                message: Some(message),
                call: call.clone(),
                reason: None,
            },
            Envelope::Close { session, reason } => Wire {
                v: 1,
                kind: Kind::Close,
                session,
                agent: None,
                message: None,
                call: None,
                reason: *reason,
            },
        };
        // A struct of strings and JSON values always serializes.
        serde_json::to_string(&w).unwrap_or_default()
    }
}

/// A `msg` envelope for `message` (any JSON-RPC message) in `session`.
pub fn msg<T: Serialize>(session: &str, message: &T, call: Option<serde_json::Value>) -> String {
    let message = serde_json::value::to_raw_value(message)
        .unwrap_or_else(|_| RawValue::from_string("null".into()).unwrap_or_default());
    Envelope::Msg { session: session.to_string(), message, call }.to_text()
}

/// A `close` envelope of `session`, saying why when this end knows.
pub fn close(session: &str, reason: Option<CloseReason>) -> String {
    Envelope::Close { session: session.to_string(), reason }.to_text()
}

/// A random 128-bit id in hex: a session's or a process instance's.
pub fn random_id() -> String {
    let mut b = [0u8; 16];
    if getrandom::fill(&mut b).is_err() {
        // No kernel randomness: unique within this process is enough for an instance's
        // sessions, which is all such an id is compared within.
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        b[..8].copy_from_slice(&t.to_le_bytes());
        b[8..].copy_from_slice(&N.fetch_add(1, Ordering::Relaxed).to_le_bytes());
    }
    hex::encode(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelopes_round_trip_and_garbage_is_refused() {
        // The message travels as it came (a `RawValue`: never re-encoded, keys in their order).
        let ping = RawValue::from_string(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#.into());
        let m = msg("s1", &ping.unwrap(), None);
        assert_eq!(
            m,
            r#"{"v":1,"type":"msg","session":"s1","message":{"jsonrpc":"2.0","id":1,"method":"ping"}}"#
        );
        assert!(matches!(Envelope::parse(&m), Ok(Envelope::Msg { .. })));
        let open = Envelope::Open { session: "s".into(), agent: "alice".into() };
        assert_eq!(Envelope::parse(&open.to_text()).unwrap().to_text(), open.to_text());
        for bad in [
            "garbage",
            r#"{"v":2,"type":"close","session":"s"}"#,
            r#"{"v":1,"type":"open","session":"s"}"#,
            r#"{"v":1,"type":"msg","session":"","message":{}}"#,
            r#"{"v":1,"type":"shout","session":"s"}"#,
        ] {
            assert!(Envelope::parse(bad).is_err(), "{bad}");
        }
    }

    /// A `close`'s reason is optional: a close without one (an older peer's) still closes, none
    /// is written when there is none, and a reason this end does not know is `Other`.
    #[test]
    fn a_close_reason_is_optional_and_unknown_ones_still_close() {
        assert_eq!(close("s", None), r#"{"v":1,"type":"close","session":"s"}"#);
        let full = close("s", Some(CloseReason::Full));
        assert_eq!(full, r#"{"v":1,"type":"close","session":"s","reason":"full"}"#);
        let reason = |text: &str| match Envelope::parse(text) {
            Ok(Envelope::Close { session, reason }) if session == "s" => reason,
            other => panic!("{text}: {other:?}"),
        };
        assert_eq!(reason(&full), Some(CloseReason::Full));
        assert_eq!(reason(r#"{"v":1,"type":"close","session":"s"}"#), None);
        let newer = r#"{"v":1,"type":"close","session":"s","reason":"moon_phase"}"#;
        assert_eq!(reason(newer), Some(CloseReason::Other));
        let odd = r#"{"v":1,"type":"close","session":"s","reason":{"x":[1]}}"#;
        assert_eq!(reason(odd), Some(CloseReason::Other));
        use CloseReason::*;
        for r in [Full, BadAgent, NoSession, Overflow, Ended, ShuttingDown] {
            assert_eq!(reason(&close("s", Some(r))), Some(r));
            assert!(close("s", Some(r)).contains(&format!(r#""reason":"{}""#, r.word())));
        }
    }
}
