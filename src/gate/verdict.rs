//! The gate's verdict and the one function that returns it ([`decide`]). A tool runs only on
//! [`Verdict::Allow`]; [`Verdict::Deny`] cannot be built without its reason, so a refusal with
//! nothing to say — and a "deny" that runs anyway — cannot be written.

mod ask;

use super::{Asker, Call, Retry};
use crate::audit::{DecidedBy, Decision};
use crate::config::{ActionClass, TrustAction};
use crate::errors::Denial;
use rmcp::RoleServer;
use rmcp::model::InputRequiredResult;
use rmcp::service::RequestContext;
use std::sync::atomic::Ordering;

/// What the gate said about one call.
#[derive(Debug)]
pub enum Verdict {
    /// The call runs; `by` decided it (the policy, a standing permission, a person).
    Allow { by: DecidedBy },
    /// The call does not run; `why` says what was blocked, by which layer, and what a person
    /// can do (SPEC §6).
    Deny { by: DecidedBy, why: Refusal },
    /// Not decided yet: a 2026-07-28 client puts this question to its person and retries the
    /// call with the answer. Nothing runs and nothing is recorded until then.
    Ask(InputRequiredResult),
}

/// Why a call was refused: the text a person and a model read (short; it says what to do) and
/// the `structuredContent.denied` entry that carries the same in parts.
#[derive(Debug, Clone)]
pub struct Refusal {
    pub message: String,
    pub denial: Denial,
}

impl Refusal {
    /// A refusal of `what` by `layer`, saying `message` (also the denial's `why`) and `remedy`.
    pub fn new(what: &str, layer: &str, message: String, remedy: &str) -> Refusal {
        let denial = Denial::new(what, layer, &message, remedy);
        Refusal { message, denial }
    }
}

impl Verdict {
    /// Whether the tool runs: only an allow runs it.
    pub fn runs(&self) -> bool {
        matches!(self, Verdict::Allow { .. })
    }

    /// The audit record's `decision` and `decided_by`; `None` while a person is still asked.
    pub fn recorded(&self) -> Option<(Decision, DecidedBy)> {
        match self {
            Verdict::Allow { by } => Some((Decision::Allow, *by)),
            Verdict::Deny { by, .. } => Some((Decision::Deny, *by)),
            Verdict::Ask(_) => None,
        }
    }
}

/// What a person can do about an `ask` that was not approved.
pub(super) const ASK_REMEDY: &str = "a person allows it when asked: through the client, with `hands approvals approve ID` while it waits, or on the dashboard";

/// What a person can do about the brake.
const RELEASE: &str = "a person runs `hands stop --release` (or restarts the daemon)";

/// The verdict on one call. In order: a refusal found `before` the gate (a wall missing in
/// `enforce`, the allowlist), the brake (external class), the audit log's health (anything but
/// reads), denied and credential paths, then the module's policy; `ask` (or a confirm-listed
/// run the policy would allow) goes to a standing permission or a person.
pub async fn decide(
    asker: &Asker<'_>,
    call: &Call<'_>,
    before: Option<Refusal>,
    retry: Retry,
    ctx: &RequestContext<RoleServer>,
) -> Verdict {
    let policy = |why| Verdict::Deny { by: DecidedBy::Policy, why };
    if let Some(why) = before {
        return policy(why);
    }
    // `tmux_kill` only ends a session: it works under the brake (whose point is ending).
    let braked = || {
        call.class == ActionClass::External
            && call.tool != "tmux_kill"
            && asker.stopped.load(Ordering::SeqCst)
    };
    let brake = || Verdict::Deny {
        by: DecidedBy::Stop,
        why: Refusal::new(
            call.tool,
            "brake",
            format!(
                "`{}` is refused: a person stopped this daemon's commands with `hands stop`; \
                 they run again after `hands stop --release` (or a restart)",
                call.tool
            ),
            RELEASE,
        ),
    };
    if braked() {
        return brake();
    }
    // Nothing that must be audited runs while the log cannot take its record.
    if call.class != ActionClass::Read
        && let Err(why) = asker.audit.ready()
    {
        return policy(Refusal::new(
            call.tool,
            "audit",
            format!("`{}` is refused: {why}", call.tool),
            "a person frees space in the state dir's file system (or fixes what stops the audit log), then retries",
        ));
    }
    if let Some(why) = hidden_path(asker, call) {
        return policy(why);
    }
    match trust_for(asker, call) {
        TrustAction::Deny => {
            let (class, module) = (call.class, call.module.name());
            return policy(Refusal::new(
                call.tool,
                "gate",
                format!(
                    "`{}` is refused by policy: trust.{class} = \"deny\" for {module}; a person \
                     can change this in daemon.toml",
                    call.tool
                ),
                &format!(
                    "a person can set trust.{class} to \"ask\" or \"allow\" for {module} in \
                     daemon.toml"
                ),
            ));
        }
        // A one-run expansion (`needs`) widens what the policy allowed: a person decides it.
        TrustAction::Allow if !call.confirm && !call.widens() => {
            return Verdict::Allow { by: DecidedBy::Policy };
        }
        // `ask`, or a confirm-listed run the policy would allow: a person decides.
        TrustAction::Allow | TrustAction::Ask => {}
    }
    let verdict = ask::ask_person(asker, call, retry, ctx).await;
    // A person may answer after `hands stop` (a parked action waits minutes): the brake still
    // wins.
    if verdict.runs() && braked() {
        return brake();
    }
    verdict
}

/// The module's trust action for the call's class; a module that is not declared denies.
fn trust_for(asker: &Asker<'_>, call: &Call<'_>) -> TrustAction {
    (asker.config.modules.iter())
        .find(|m| m.id == call.module)
        .map(|m| m.trust.for_class(call.class))
        .unwrap_or(TrustAction::Deny)
}

/// A path argument that names a denied or credential path: refused before the policy and
/// before any person is asked, at every trust level (SPEC §3).
fn hidden_path(asker: &Asker<'_>, call: &Call<'_>) -> Option<Refusal> {
    let resolver = asker.resolver?;
    ["path", "cwd", "repo"].iter().find_map(|key| {
        let p = call.arguments.get(*key)?.as_str()?;
        resolver.refuse_denied(p).err().map(|e| {
            let denial = crate::errors::ToolFailure::denial(&e).unwrap_or_else(|| {
                Denial::new(p, "denied-paths", &e.to_string(), "this cannot be approved")
            });
            Refusal { message: format!("`{}` is refused: {e}", call.tool), denial }
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal() -> Refusal {
        Refusal::new("bash", "gate", "`bash` is refused".into(), "a person can allow it")
    }

    #[test]
    fn only_an_allow_runs_a_tool() {
        assert!(Verdict::Allow { by: DecidedBy::Policy }.runs());
        assert!(Verdict::Allow { by: DecidedBy::PersonViaClient }.runs());
        for by in [DecidedBy::Policy, DecidedBy::Stop, DecidedBy::PersonViaTerminal] {
            assert!(!Verdict::Deny { by, why: refusal() }.runs());
        }
        let ask = InputRequiredResult::new(None, Some("state".into()));
        assert!(!Verdict::Ask(ask).runs());
    }

    #[test]
    fn the_audit_record_follows_the_verdict() {
        let allow = Verdict::Allow { by: DecidedBy::StandingPermission };
        assert_eq!(allow.recorded(), Some((Decision::Allow, DecidedBy::StandingPermission)));
        let deny = Verdict::Deny { by: DecidedBy::Stop, why: refusal() };
        assert_eq!(deny.recorded(), Some((Decision::Deny, DecidedBy::Stop)));
        let ask = InputRequiredResult::new(None, Some("state".into()));
        assert_eq!(Verdict::Ask(ask).recorded(), None, "nothing is recorded until decided");
    }

    #[test]
    fn a_refusal_carries_its_reason_in_both_forms() {
        let r = refusal();
        assert_eq!(r.message, "`bash` is refused");
        assert_eq!(r.denial.why, r.message);
        assert_eq!((r.denial.what.as_str(), r.denial.layer.as_str()), ("bash", "gate"));
    }
}
