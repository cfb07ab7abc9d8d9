//! The approval store (SPEC §6): what the gate keeps to ask a person — the seal key of the
//! request state, the spent nonces, the parked actions, the session epoch and where the
//! standing *always* permissions live. When the policy says `ask`, a call runs only after a
//! person says yes — through the client (a 2026-07-28 input-required result, or a 2025-era
//! elicitation request) or, for a client that can do neither, at a terminal with `hands
//! approvals approve ID` or on the dashboard. Anything but an explicit allow refuses.
//!
//! The channel follows what the client declared ([`Reach`]), in either era: a request is never
//! sent for a capability the client did not declare. Form elicitation: the form (input-required
//! in 2026-07-28, `elicitation/create` before). URL elicitation only: the action is parked and
//! the client is pointed at its dashboard entry. Nothing: the action is parked for `hands
//! approvals` and the dashboard.
//!
//! Its parts, in `approvals/`: `elicit.rs` (asking through the client, the sealed request
//! state), `parked.rs` (the parked actions and the wait), `always.rs` (the standing *always*
//! permissions); what is asked and answered is `../action.rs`. *Session* permissions are held by the connection
//! (`verdict/ask.rs`). The old paths (`crate::gate::approvals::Action` …) name the parts' items here.

mod always;
mod elicit;
mod parked;

pub use super::action::{Action, Asked, CHOICES, Channel, Choice, Reach, widening_rows};
pub use always::{Standing, module_version, read_always, update_always};
pub use elicit::url_params;
use parked::Answer;
pub use parked::{Parked, ParkedView, Pending};

use rmcp::model::RequestStateCodec;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::oneshot;

/// Why a person could not be asked, or a parked action not answered. Asking fails closed: the
/// gate refuses the call with this text (`Asked::Refused`); `hands approvals` and the dashboard
/// show an answer's failure as a conflict.
#[derive(Debug, thiserror::Error)]
pub enum ApprovalError {
    /// The form could not be built (its schema is fixed: a bug if it happens).
    #[error("cannot build the approval form: {0}")]
    Form(serde_json::Error),
    /// The kernel gave no random bytes for the request state's nonce.
    #[error("cannot make a nonce: {0}")]
    Nonce(std::io::Error),
    /// The kernel gave no random bytes for a parked action's id.
    #[error("cannot park: {0}")]
    Park(std::io::Error),
    /// The request state could not be sealed.
    #[error("cannot seal the request state: {0}")]
    Seal(rmcp::model::RequestStateError),
    /// A URL-only client was to be pointed at the dashboard, which does not serve (any more).
    #[error("the dashboard does not serve")]
    NoDashboard,
    /// The action under `id` was parked, but its call no longer waits for the answer.
    #[error("approval {id} is no longer waiting")]
    NotWaiting { id: String },
    /// As many actions as the daemon keeps are already waiting for a person
    /// ([`MAX_PARKED`](parked::MAX_PARKED)): the new one is refused without asking, so a
    /// command or client cannot flood a person with questions (or a listing past its size).
    #[error(
        "not put to a person: {waiting} actions are already waiting for one (the daemon's \
         bound); a person can answer or deny them with `hands approvals list`, `approve ID` or \
         `deny ID` (or on the dashboard), and the call can be retried then"
    )]
    TooMany { waiting: usize },
    /// This client has its share of them waiting already
    /// ([`MAX_PARKED_EACH`](parked::MAX_PARKED_EACH)).
    #[error(
        "not put to a person: client `{client}` has {waiting} actions waiting for one already, \
         the most one client may (so that no client keeps the others' questions out); the call \
         can be retried once a person answered one (`hands approvals list`, or the dashboard) \
         or one expired"
    )]
    TooManyOfOne { client: String, waiting: usize },
    /// No action is parked under `id` (answered, expired, or never).
    #[error("no action is waiting under {id}; `hands approvals list` shows them")]
    NoSuchAction { id: String },
}

/// Why a tool's own `requestState` was not sealed or opened (`crate::registry::Seal`).
#[derive(Debug, thiserror::Error)]
pub enum SealError {
    #[error("cannot seal the state: {0}")]
    Seal(rmcp::model::RequestStateError),
    /// Not sealed by this daemon for this client, tampered with, or expired.
    #[error("the request state is not valid ({0})")]
    Open(rmcp::model::RequestStateError),
}

/// The approval store of one daemon (`Daemon::approvals`); its methods live with the part they
/// serve (see the module's documentation).
pub struct Approvals {
    /// Seals and opens the `requestState` of input-required round trips (`elicit.rs`).
    pub(super) codec: RequestStateCodec,
    /// Session permissions granted under an older epoch are void (`revoke --all`).
    epoch: std::sync::atomic::AtomicU64,
    /// The nonces of redeemed request states, until they could no longer be valid.
    pub(super) spent: Mutex<HashMap<String, Instant>>,
    pub(super) parked: Mutex<BTreeMap<String, Parked>>,
    /// The answers of actions parked for a URL-only 2026-07-28 client: its retry takes the
    /// receiver and waits on it (the call that parked has already returned).
    pub(super) detached: Mutex<HashMap<String, oneshot::Receiver<Answer>>>,
    pub(super) always_path: PathBuf,
    pub(super) timeout: Duration,
    /// The dashboard's base URL (`http://ADDR/`), once it serves: a parked action's entry is
    /// `<base>#<id>`.
    pub(super) dashboard: std::sync::OnceLock<String>,
}

/// Seconds since the epoch: the expiry of request states and parked actions.
pub(super) fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// Random bytes from the kernel, hex-encoded.
pub(crate) fn random_hex(n: usize) -> std::io::Result<String> {
    let mut buf = vec![0u8; n];
    getrandom::fill(&mut buf).map_err(std::io::Error::other)?;
    Ok(hex::encode(buf))
}

impl Approvals {
    pub fn new(state_dir: &Path, timeout: Duration) -> anyhow::Result<Approvals> {
        use anyhow::Context;
        std::fs::create_dir_all(state_dir)
            .with_context(|| format!("cannot create {}", state_dir.display()))?;
        let key = random_hex(32).context("cannot read /dev/urandom for the approval key")?;
        let codec = RequestStateCodec::try_new(key.into_bytes())
            .map_err(|e| anyhow::anyhow!("cannot make the approval seal: {e}"))?;
        Ok(Approvals {
            codec,
            epoch: Default::default(),
            spent: Mutex::new(HashMap::new()),
            parked: Mutex::new(BTreeMap::new()),
            detached: Mutex::new(HashMap::new()),
            always_path: state_dir.join("approvals.json"),
            timeout,
            dashboard: std::sync::OnceLock::new(),
        })
    }

    /// Records the dashboard's base URL (`http://ADDR/`), once it listens.
    pub fn set_dashboard(&self, base: String) {
        let _ = self.dashboard.set(base);
    }

    /// The dashboard's entry for a parked action, when the dashboard serves.
    pub fn dashboard_entry(&self, id: &str) -> Option<String> {
        self.dashboard.get().map(|base| format!("{base}#{id}"))
    }

    /// How long a person has to answer.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// How a person answers parked action `id`: the two terminal commands, and the dashboard
    /// entry when the dashboard serves.
    pub fn how_to_answer(&self, id: &str) -> String {
        let page = self
            .dashboard_entry(id)
            .map(|u| format!(", or answer it on the dashboard at {u}"))
            .unwrap_or_default();
        format!(
            "a person can run `hands approvals approve {id}` or `hands approvals deny {id}`{page}"
        )
    }

    /// The current session epoch: a session permission holds only while it is unchanged.
    pub fn epoch(&self) -> u64 {
        self.epoch.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Ends every session permission of every connection (`hands approvals revoke --all`).
    pub fn revoke_sessions(&self) {
        self.epoch.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}
