//! The trust gate (SPEC §6): for every call, one [`Verdict`] — allow, deny with a reason, or
//! ask the client's person first — from the brake, the audit log's health, the denied paths,
//! the module's `[trust]` policy, standing permissions and a person's answer. Whether a tool
//! runs follows from the verdict's variant alone ([`Verdict::Allow`]); a deny always carries
//! its reason, and the audit record is derived from the verdict.
//!
//! `verdict.rs` holds the enum and the one function that returns it ([`decide`]), `verdict/ask.rs`
//! how a person is asked, `action.rs` what is asked and answered, `approvals.rs` the approval store,
//! whose parts are in `approvals/`: `elicit.rs` (asking through the client, the sealed request
//! state), `parked.rs` (the parked actions and the wait) and `always.rs` (standing *always*
//! permissions).

mod action;
pub mod approvals;
mod desktop;
mod verdict;

pub use verdict::{Refusal, Verdict, decide};

use crate::config::{ActionClass, Config, ModuleId};
use std::collections::HashSet;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;

/// The call the gate judges: which tool of which module, its class, and the arguments a person
/// would see (for `run` and `os-*`, with the full argv and the binary it resolved to).
pub struct Call<'a> {
    pub tool: &'a str,
    pub module: ModuleId,
    pub class: ActionClass,
    pub arguments: &'a serde_json::Value,
    /// The argv is confirm-listed (SPEC §4.4): whatever the policy allows, a person must say
    /// yes to this one run; only the policy's `deny` still refuses without asking.
    pub confirm: bool,
}

impl Call<'_> {
    /// Whether the call carries a one-run expansion (`needs`): a person decides it, whatever
    /// the policy allows, and never *always*.
    pub fn widens(&self) -> bool {
        action::widens(self.arguments)
    }
}

/// What a retried call echoes back after an input-required result.
#[derive(Default)]
pub struct Retry {
    pub state: Option<String>,
    pub responses: Option<rmcp::model::InputResponses>,
}

/// Who is asking — one connection's identity and its *session* permissions — and the parts of
/// the daemon the gate reads to answer (handed in by the server, so that the gate needs no
/// daemon).
pub struct Asker<'a> {
    /// `stdio`, or the `name` of an HTTP client's token: what approvals and the audit record.
    pub client: &'a str,
    /// Whether the client may be asked (what it declared then chooses how); `false`: every
    /// question is parked for a person at this machine (a runner's `approvals = "local"`).
    pub asks_client: bool,
    /// This connection's session permissions: (module, tool, epoch granted in).
    pub session: &'a Mutex<HashSet<(String, String, u64)>>,
    /// The daemon's configuration: each module's `[trust]` policy, the approval timeout.
    pub config: &'a Config,
    /// Asking a person, and the standing permissions.
    pub approvals: &'a approvals::Approvals,
    /// The audit log, whose health is checked before anything that must be recorded runs.
    pub audit: &'a crate::audit::Audit,
    /// The brake (`hands stop`): read before the call and again after a person answered.
    pub stopped: &'a AtomicBool,
    /// The *session* permissions of stateless (2026-07-28) HTTP clients, which have no
    /// connection to hold them: (client, module, tool, epoch), kept by the daemon.
    pub stateless_sessions: &'a Mutex<HashSet<(String, String, String, u64)>>,
    /// The resolver of the call's module, for the check of denied paths before anyone is
    /// asked (`None`: the module has none).
    pub resolver: Option<&'a hands_roots::Resolver>,
    /// The request's ways of ending (`notifications/cancelled`, a disconnect, an HTTP
    /// hangup): a question parked for a person is taken back when the call no longer waits.
    pub waits: &'a hands_shell::Caller,
}

use hands_roots::lock;
