//! Asking through the client: the form a person answers, the URL request that points a
//! URL-only client at the dashboard, the sealed `requestState` of a 2026-07-28 input-required
//! round trip and its redemption on the retry, a 2025-era elicitation, and reading the answer
//! (only `accept` with an allow choice allows).
//!
//! The round trip keeps no state in the daemon but a set of spent nonces: the `requestState`
//! carries `{nonce, digest of the exact action, expiry}`, sealed with rmcp's HMAC codec under a
//! key that never leaves this process and bound to the client's identity. On the retry the
//! seal, the expiry, the nonce (single use) and the digest are checked; a different action
//! asks again.

use super::{ApprovalError, Approvals, SealError, now, random_hex};
use crate::gate::action::{Action, Asked, CHOICES, Channel, Choice};
use hands_roots::lock;
use rmcp::model::{
    ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema,
    InputRequest, InputRequiredResult, InputResponses, SealOptions,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// The key of the approval request inside `inputRequests`.
const INPUT_KEY: &str = "approval";

/// What `requestState` carries (sealed).
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Sealed {
    nonce: String,
    digest: String,
    expires: u64,
    /// The parked action a URL-only client's person answers on the dashboard.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    parked: Option<String>,
}

/// The URL elicitation that points a client's person at the action's dashboard entry.
pub fn url_params(a: &Action, url: String, id: &str) -> ElicitRequestParams {
    ElicitRequestParams::UrlElicitationParams {
        meta: None,
        message: format!(
            "hands needs a person's approval; decide on the dashboard (approval {id}).\n{}",
            a.describe()
        ),
        url,
        elicitation_id: id.to_string(),
    }
}

impl Approvals {
    /// The form a person answers: one choice among [`CHOICES`].
    pub(super) fn request(&self, a: &Action) -> Result<ElicitRequestParams, ApprovalError> {
        let mut choices: Vec<&str> = CHOICES.to_vec();
        let mut names = vec!["Allow once", a.session_choice(), "Always for this client", "Reject"];
        // A one-run expansion is never offered *always* (SPEC §6).
        if a.widens() {
            choices.retain(|c| *c != "allow_always");
            names.retain(|n| !n.starts_with("Always"));
        }
        let schema = json!({
            "type": "object",
            "properties": {
                "decision": {
                    "type": "string",
                    "title": "Decision",
                    "enum": choices,
                    "enumNames": names,
                }
            },
            "required": ["decision"],
        });
        // What `ElicitationSchema::from_json_schema` does, without its map: the literal above is
        // an object.
        let requested_schema: ElicitationSchema =
            serde_json::from_value(schema).map_err(ApprovalError::Form)?;
        Ok(ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: format!("hands needs a person's approval.\n{}", a.describe()),
            requested_schema,
        })
    }

    /// Reads a person's answer: only `accept` with an allow choice allows.
    /// An answer that came through the client: a person's choice, or a person's refusal (decline,
    /// cancel, reject); an answer that is none of these was decided by nobody.
    fn person_said(result: &ElicitResult) -> Asked {
        match Self::read_answer(result) {
            Ok(choice) => Asked::Allowed(choice, Channel::Client),
            Err(why) => {
                let person =
                    matches!(result.action, ElicitationAction::Decline | ElicitationAction::Cancel)
                        || result.content.as_ref().and_then(|c| c.get("decision"))
                            == Some(&Value::from("reject"));
                Asked::Refused(why, person.then_some(Channel::Client))
            }
        }
    }

    fn read_answer(result: &ElicitResult) -> Result<Choice, String> {
        match result.action {
            ElicitationAction::Accept => {}
            ElicitationAction::Decline => return Err("the person declined".into()),
            ElicitationAction::Cancel => return Err("the person cancelled".into()),
            _ => return Err("the answer is not accept".into()),
        }
        let decision =
            result.content.as_ref().and_then(|c| c.get("decision")).and_then(Value::as_str);
        match decision {
            Some("allow_once") => Ok(Choice::Once),
            Some("allow_session") => Ok(Choice::Session),
            Some("allow_always") => Ok(Choice::Always),
            Some("reject") => Err("the person rejected it".into()),
            other => Err(format!("the answer is not one of the choices ({other:?})")),
        }
    }

    /// The first round of a 2026-07-28 client: the form plus the sealed state.
    pub fn input_required(&self, a: &Action) -> Result<InputRequiredResult, ApprovalError> {
        self.sealed_request(a, self.request(a)?, None)
    }

    /// An input-required result asking `params`, with the sealed state of this action.
    pub(super) fn sealed_request(
        &self,
        a: &Action,
        params: ElicitRequestParams,
        parked: Option<String>,
    ) -> Result<InputRequiredResult, ApprovalError> {
        let nonce = random_hex(16).map_err(ApprovalError::Nonce)?;
        let expires = now() + self.timeout.as_secs();
        let sealed = Sealed { nonce, digest: a.digest(), expires, parked };
        let opts = SealOptions::new().associated_data(a.client.as_bytes()).ttl(self.timeout);
        let state = self.codec.seal_json_with(&sealed, &opts).map_err(ApprovalError::Seal)?;
        let req = InputRequest::Elicitation(ElicitRequest::new(params));
        let mut requests = BTreeMap::new();
        requests.insert(INPUT_KEY.to_string(), req);
        Ok(InputRequiredResult::new(Some(requests), Some(state)))
    }

    /// The retry of a 2026-07-28 client: checks the echoed state and reads the answer. A
    /// state for a different action asks again.
    pub fn redeem(&self, a: &Action, state: &str, responses: Option<&InputResponses>) -> Asked {
        let refuse = |why: String| Asked::Refused(why, None);
        let sealed: Sealed = match self.codec.open_json_with(state, a.client.as_bytes()) {
            Ok(s) => s,
            Err(e) => return refuse(format!("the approval state is not valid ({e})")),
        };
        if sealed.expires < now() {
            return refuse("the approval expired".into());
        }
        if sealed.digest != a.digest() {
            // Approved (or not) for other arguments: this action needs its own answer, asked
            // the way the first one was.
            let again =
                if sealed.parked.is_some() { self.url_round(a) } else { self.input_required(a) };
            return match again {
                Ok(r) => Asked::InputRequired(r),
                Err(e) => refuse(e.to_string()),
            };
        }
        {
            let mut spent = lock(&self.spent);
            let now = Instant::now();
            spent.retain(|_, until| *until > now);
            if spent.contains_key(&sealed.nonce) {
                return refuse("this approval was already used".into());
            }
            spent.insert(sealed.nonce, now + self.timeout + Duration::from_secs(60));
        }
        if let Some(id) = sealed.parked {
            // The person answers on the dashboard (or at a terminal); the client's answer to
            // the URL request only says whether it opened the page, and decides nothing.
            return Asked::Parked(id);
        }
        let Some(answer) = responses.and_then(|r| r.get(INPUT_KEY)) else {
            return refuse("the retry carries no answer to the approval request".into());
        };
        match serde_json::from_value::<ElicitResult>(answer.clone()) {
            Ok(r) => Self::person_said(&r),
            Err(e) => refuse(format!("the answer is malformed ({e})")),
        }
    }

    /// A 2025-era client that declared elicitation: ask it and wait.
    pub async fn elicit(&self, a: &Action, peer: &rmcp::Peer<rmcp::RoleServer>) -> Asked {
        let params = match self.request(a) {
            Ok(p) => p,
            Err(e) => return Asked::Refused(e.to_string(), None),
        };
        match peer.create_elicitation_with_timeout(params, Some(self.timeout)).await {
            Ok(r) => Self::person_said(&r),
            Err(e) => Asked::Refused(format!("no answer from the person ({e})"), None),
        }
    }
}

/// The approval key's seal for the request state of a tool that speaks MCP itself
/// (`crate::registry::Seal`): its own round trips use the same codec, key, client binding and
/// lifetime as the gate's.
impl Approvals {
    pub fn seal_for<T: Serialize>(&self, client: &str, value: &T) -> Result<String, SealError> {
        let opts = SealOptions::new().associated_data(client.as_bytes()).ttl(self.timeout);
        (self.codec.seal_json_with(value, &opts)).map_err(SealError::Seal)
    }

    pub fn open_for<T: serde::de::DeserializeOwned>(
        &self,
        client: &str,
        state: &str,
    ) -> Result<T, SealError> {
        (self.codec.open_json_with(state, client.as_bytes())).map_err(SealError::Open)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn action(cmd: &str) -> Action {
        Action::bash_of("stdio", cmd)
    }

    fn accept(decision: &str) -> InputResponses {
        let mut r = InputResponses::new();
        r.insert(
            INPUT_KEY.into(),
            json!({ "action": "accept", "content": { "decision": decision } }),
        );
        r
    }

    fn state_of(r: &InputRequiredResult) -> String {
        r.request_state.clone().unwrap()
    }

    #[test]
    fn a_sealed_state_is_single_use_and_bound_to_the_action_and_client() {
        let dir = tempfile::tempdir().unwrap();
        let ap = Approvals::new(dir.path(), Duration::from_secs(60)).unwrap();
        let a = action("ls");
        let state = state_of(&ap.input_required(&a).unwrap());
        assert!(matches!(
            ap.redeem(&a, &state, Some(&accept("allow_once"))),
            Asked::Allowed(Choice::Once, _)
        ));
        // Replayed.
        assert!(matches!(ap.redeem(&a, &state, Some(&accept("allow_once"))), Asked::Refused(..)));
        // Another action with this state asks again.
        let state = state_of(&ap.input_required(&a).unwrap());
        assert!(matches!(
            ap.redeem(&action("rm -rf /"), &state, Some(&accept("allow_once"))),
            Asked::InputRequired(_)
        ));
        // Another client cannot use it.
        let mut other = action("ls");
        other.client = "other".into();
        let state = state_of(&ap.input_required(&a).unwrap());
        assert!(matches!(
            ap.redeem(&other, &state, Some(&accept("allow_once"))),
            Asked::Refused(..)
        ));
        // Tampered.
        let mut t = state_of(&ap.input_required(&a).unwrap());
        let last = t.pop().unwrap();
        t.push(if last == 'A' { 'B' } else { 'A' });
        assert!(matches!(ap.redeem(&a, &t, Some(&accept("allow_once"))), Asked::Refused(..)));
    }

    #[test]
    fn only_an_explicit_allow_allows() {
        let dir = tempfile::tempdir().unwrap();
        let ap = Approvals::new(dir.path(), Duration::from_secs(60)).unwrap();
        let a = action("ls");
        let answers = [
            json!({ "action": "decline" }),
            json!({ "action": "cancel" }),
            json!({ "action": "accept", "content": { "decision": "reject" } }),
            json!({ "action": "accept", "content": { "decision": "yes please" } }),
            json!({ "action": "accept" }),
            json!("garbage"),
        ];
        for answer in answers {
            let state = state_of(&ap.input_required(&a).unwrap());
            let mut r = InputResponses::new();
            r.insert(INPUT_KEY.into(), answer.clone());
            assert!(matches!(ap.redeem(&a, &state, Some(&r)), Asked::Refused(..)), "{answer}");
        }
        let state = state_of(&ap.input_required(&a).unwrap());
        assert!(matches!(ap.redeem(&a, &state, None), Asked::Refused(..)));
    }
}
