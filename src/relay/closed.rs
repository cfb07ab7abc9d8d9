//! What an agent reads when its runner closed its session: what happened, why (the `close`'s
//! reason, decision 0086) and what to do, in the relay's own words — the reason is a word of the
//! link's, never the runner's text, so nothing a runner sends is echoed to an agent.

use crate::link::{CloseReason, MAX_SESSIONS};

/// The error of a call that was waiting (or comes later) in a session runner `runner` closed.
pub fn by_runner(runner: &str, agent: &str, reason: Option<CloseReason>) -> String {
    const LOST: &str = "a call still waiting was lost (it ran at most once)";
    match reason {
        Some(CloseReason::Full) => format!(
            "runner {runner} refused the session: it serves {MAX_SESSIONS} sessions already, its \
             limit; try again in a moment, or end a session you no longer use (an HTTP DELETE)"
        ),
        Some(CloseReason::BadAgent) => format!(
            "runner {runner} refused the session: it does not take the agent name {agent}; a \
             person renames the agent in relay.toml (1-64 letters, digits, `.`, `_`, `-`, `@`)"
        ),
        Some(CloseReason::ShuttingDown) => format!(
            "runner {runner} is shutting down: it stopped the session's commands, and {LOST}; \
             try again once it is back (GET /runners says when it is connected)"
        ),
        Some(CloseReason::NoSession) => format!(
            "runner {runner} no longer has this session (it ended there, or the runner \
             restarted): {LOST}; start a new session"
        ),
        Some(CloseReason::Overflow) => format!(
            "runner {runner} ended the session: its answers overflowed what it keeps while the \
             link is slow or down, and {LOST}; start a new session"
        ),
        Some(CloseReason::Ended) => format!(
            "runner {runner} ended the session (its server for it stopped): {LOST}; start a \
             new session"
        ),
        Some(CloseReason::Other) | None => format!(
            "runner {runner} ended the session without a reason this relay knows: {LOST}; start \
             a new session, and if it happens again a person reads the runner's log"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every reason says what happened, why and what to do, and stays one short line.
    #[test]
    fn each_reason_says_what_why_and_what_to_do() {
        use CloseReason::*;
        let all = [Full, BadAgent, ShuttingDown, NoSession, Overflow, Ended, Other];
        for reason in all.map(Some).into_iter().chain([None]) {
            let said = by_runner("box-1", "alice", reason);
            assert!(said.starts_with("runner box-1 "), "{said}");
            let to_do = ["try again", "start a new session", "a person"];
            assert!(to_do.iter().any(|t| said.contains(t)), "nothing to do: {said}");
            assert!(said.len() < 260, "{} bytes: {said}", said.len());
        }
        assert!(by_runner("box-1", "alice", Some(Full)).contains("64 sessions already"));
        assert!(by_runner("box-1", "alice", Some(ShuttingDown)).contains("shutting down"));
    }
}
