//! The parked-action store: an action waits under an id (`a-…`) until a person answers it at
//! a terminal (`hands approvals approve|deny ID`) or on the dashboard, or the approval timeout
//! passes; a URL-only 2026-07-28 client's action waits detached, for its retry.

use super::elicit::url_params;
use super::{ApprovalError, Approvals, now, random_hex};
use crate::gate::action::{Action, Asked, Channel, Choice};
use hands_roots::lock;
use rmcp::model::InputRequiredResult;
use serde::{Deserialize, Serialize};
use std::time::Duration;
use tokio::sync::oneshot;

/// The most actions parked at once in one daemon: past it a new one is refused at once
/// (decision 0088). Each waits for a person, who reads each in the daemon's log, a desktop
/// notice and `hands approvals list`.
pub const MAX_PARKED: usize = 32;

/// The most one client may have waiting at once: half, so that one client's questions (a
/// token a person gave out, dropping calls as it goes) never keep every other client's out.
pub const MAX_PARKED_EACH: usize = MAX_PARKED / 2;

/// A person's answer to a parked action: the choice (`None`: denied) and where it was made.
pub(super) type Answer = (Option<Choice>, Channel);

/// An action parked for a person at a terminal (or on the dashboard).
pub struct Parked {
    pub id: String,
    pub action: String,
    pub expires: u64,
    detail: Action,
    /// The person's choice (`None`: denied) and where they made it.
    answer: oneshot::Sender<Answer>,
}

/// A parked action with its parts, as the dashboard shows it.
pub struct Pending {
    pub id: String,
    pub expires: u64,
    pub action: Action,
}

/// A parked action as `hands approvals list` shows it (`action`), with its parts for the
/// dashboard of another daemon of the state dir.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParkedView {
    pub id: String,
    pub action: String,
    pub expires: u64,
    /// Its parts, on the wire beside `id`, `action` and `expires` (`client`, `module`, …).
    #[serde(flatten)]
    pub detail: Action,
}

impl Approvals {
    /// The first round of a 2026-07-28 client that declared only URL elicitation: the action
    /// is parked (the dashboard and `hands approvals` show it), and the client is asked to open
    /// its dashboard entry; the retry waits for the person's answer there. `None` when the
    /// dashboard does not serve: the caller parks the call itself.
    pub fn input_required_url(
        &self,
        a: &Action,
    ) -> Option<Result<InputRequiredResult, ApprovalError>> {
        self.dashboard.get()?;
        Some(self.url_round(a))
    }

    pub(super) fn url_round(&self, a: &Action) -> Result<InputRequiredResult, ApprovalError> {
        let (id, rx) = self.enter(a)?;
        let Some(url) = self.dashboard_entry(&id) else {
            lock(&self.parked).remove(&id);
            return Err(ApprovalError::NoDashboard);
        };
        // The client may never retry: `prune` drops the action once its time is up.
        lock(&self.detached).insert(id.clone(), rx);
        let params = url_params(a, url, &id);
        self.sealed_request(a, params, Some(id))
    }

    /// (or on the dashboard), or the approval timeout passes.
    pub async fn park(&self, a: &Action) -> Asked {
        self.park_then(a, |_| {}).await
    }

    /// [`Approvals::park`], calling `parked` with the id once the action waits under it (to
    /// point a URL-elicitation client at the dashboard's entry).
    pub async fn park_then(&self, a: &Action, parked: impl FnOnce(&str)) -> Asked {
        let (id, rx) = match self.enter(a) {
            Ok(entered) => entered,
            Err(e) => return Asked::Refused(e.to_string(), None),
        };
        parked(&id);
        self.wait(&id, rx, self.timeout).await
    }

    /// Parks the action under a new id (the daemon's stderr names it); the receiver gets the
    /// person's answer.
    fn enter(&self, a: &Action) -> Result<(String, oneshot::Receiver<Answer>), ApprovalError> {
        self.prune();
        let id = random_hex(4).map(|h| format!("a-{h}")).map_err(ApprovalError::Park)?;
        let (tx, rx) = oneshot::channel();
        let expires = now() + self.timeout.as_secs();
        {
            let mut parked = lock(&self.parked);
            if parked.len() >= MAX_PARKED {
                return Err(ApprovalError::TooMany { waiting: parked.len() });
            }
            let mine = parked.values().filter(|p| p.detail.client == a.client).count();
            if mine >= MAX_PARKED_EACH {
                let client = crate::shown::shown(&a.client).text;
                return Err(ApprovalError::TooManyOfOne { client, waiting: mine });
            }
            let action = a.describe();
            parked.insert(
                id.clone(),
                Parked { id: id.clone(), action, expires, detail: a.clone(), answer: tx },
            );
        }
        let how = self.how_to_answer(&id);
        tracing::warn!(
            "approval needed ({id}): {}\n  {how}, within {} s",
            a.describe(),
            self.timeout.as_secs()
        );
        crate::gate::desktop::tell(&id, &a.describe(), &how);
        Ok((id, rx))
    }

    /// Drops actions parked for a URL-only client whose time is up and that nobody retried.
    fn prune(&self) {
        let now = now();
        let mut detached = lock(&self.detached);
        if detached.is_empty() {
            return;
        }
        let mut parked = lock(&self.parked);
        let over: Vec<String> = detached
            .keys()
            .filter(|id| parked.get(*id).is_none_or(|p| p.expires <= now))
            .cloned()
            .collect();
        for id in over {
            detached.remove(&id);
            parked.remove(&id);
        }
    }

    /// The retry of a URL-only 2026-07-28 client: waits (for what is left of the approval
    /// timeout) for the person's answer to the action parked in its first round.
    pub async fn await_parked(&self, id: &str) -> Asked {
        let rx = lock(&self.detached).remove(id);
        let left = lock(&self.parked).get(id).map(|p| p.expires.saturating_sub(now()));
        match (rx, left) {
            (Some(rx), Some(left)) => self.wait(id, rx, Duration::from_secs(left.max(1))).await,
            (Some(rx), None) => self.wait(id, rx, Duration::from_secs(1)).await,
            _ => Asked::Refused(
                format!("approval {id} is no longer waiting (expired, or already answered)"),
                None,
            ),
        }
    }

    /// Waits for a person's answer to the action parked under `id`, then unparks it.
    async fn wait(&self, id: &str, rx: oneshot::Receiver<Answer>, timeout: Duration) -> Asked {
        /// Unparks the action however the wait ends: answered, timed out, or dropped because
        /// the call no longer waits (its question is taken back).
        struct Unpark<'a>(&'a Approvals, &'a str);
        impl Drop for Unpark<'_> {
            fn drop(&mut self) {
                lock(&self.0.parked).remove(self.1);
            }
        }
        let unpark = Unpark(self, id);
        let answer = tokio::time::timeout(timeout, rx).await;
        drop(unpark);
        match answer {
            Ok(Ok((Some(choice), via))) => Asked::Allowed(choice, via),
            Ok(Ok((None, via))) => {
                let place =
                    if via == Channel::Dashboard { "on the dashboard" } else { "at a terminal" };
                Asked::Refused(format!("a person denied it {place} (approval {id})"), Some(via))
            }
            _ => Asked::Refused(
                format!(
                    "no person approved it within {} s (approval {id}); the client cannot ask \
                     a person itself, so a person must run `hands approvals approve {id}` in a \
                     terminal (or answer on the dashboard) while the call waits — retry the \
                     call and approve it then",
                    self.timeout.as_secs()
                ),
                None,
            ),
        }
    }

    /// Answers a parked action (`hands approvals approve|deny ID`, or the dashboard) with a
    /// person's choice (`None` denies), made through `via`. A
    /// parked action's client cannot ask its person, so the dashboard may answer it with any
    /// of the four choices; a session or always choice binds that client, as if it had asked.
    pub fn answer_as(
        &self,
        id: &str,
        choice: Option<Choice>,
        via: Channel,
    ) -> Result<(), ApprovalError> {
        let parked = lock(&self.parked).remove(id);
        match parked {
            Some(p) => p
                .answer
                .send((choice, via))
                .map_err(|_| ApprovalError::NotWaiting { id: id.to_string() }),
            None => Err(ApprovalError::NoSuchAction { id: id.to_string() }),
        }
    }

    /// The parked actions with their parts, oldest id order.
    pub fn pending(&self) -> Vec<Pending> {
        self.prune();
        lock(&self.parked)
            .values()
            .map(|p| Pending { id: p.id.clone(), expires: p.expires, action: p.detail.clone() })
            .collect()
    }

    /// The parked actions.
    pub fn parked(&self) -> Vec<ParkedView> {
        self.prune();
        lock(&self.parked)
            .values()
            .map(|p| ParkedView {
                id: p.id.clone(),
                action: p.action.clone(),
                expires: p.expires,
                detail: p.detail.clone(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn action(client: &str) -> Action {
        Action::bash_of(client, "ls")
    }

    /// Found by the eighth attack pass: one client's dropped calls held all 32 places.
    #[test]
    fn one_client_holds_half_of_the_places_and_all_clients_all_of_them() {
        let dir = tempfile::tempdir().unwrap();
        let ap = Approvals::new(dir.path(), Duration::from_secs(60)).unwrap();
        let mut held = Vec::new();
        for _ in 0..MAX_PARKED_EACH {
            held.push(ap.enter(&action("alpha")).unwrap());
        }
        let e = ap.enter(&action("alpha")).unwrap_err().to_string();
        assert!(e.contains("client `alpha` has 16 actions waiting"), "{e}");
        for _ in 0..MAX_PARKED_EACH {
            held.push(ap.enter(&action("beta")).unwrap());
        }
        let e = ap.enter(&action("gamma")).unwrap_err().to_string();
        assert!(e.contains("32 actions are already waiting"), "{e}");
        assert_eq!(ap.parked().len(), MAX_PARKED);
    }

    /// A call that no longer waits takes its question back: the waiting future dropped (as the
    /// gate drops it when the call is cancelled or its client goes) unparks the action.
    #[tokio::test]
    async fn a_wait_given_up_unparks_its_action() {
        let dir = tempfile::tempdir().unwrap();
        let ap = std::sync::Arc::new(Approvals::new(dir.path(), Duration::from_secs(60)).unwrap());
        let waiting = {
            let ap = ap.clone();
            tokio::spawn(async move { ap.park(&action("alpha")).await })
        };
        for _ in 0..100 {
            if !ap.parked().is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let id = ap.parked()[0].id.clone();
        waiting.abort();
        let _ = waiting.await;
        assert!(ap.parked().is_empty(), "still parked after its call gave up");
        let e = ap.answer_as(&id, Some(Choice::Once), Channel::Terminal).unwrap_err();
        assert!(e.to_string().contains("no action is waiting"), "{e}");
    }
}
