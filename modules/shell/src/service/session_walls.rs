//! What a tmux session's walls refused while it runs: its launcher's report channel, kept open
//! for the session's life, and its network ticket. Each `tmux_start`, `tmux_read` and
//! `tmux_send` result lists in `denied` what was refused since the result before, as `bash`'s
//! lists what its command met — a pane's refused create is not taken for a broken tool.

use super::Shell;
use super::commands::network_denials;
use crate::bash::Denied;
use hands_roots::lock;
use hands_sandbox::launcher;

/// A running session's report channel and the spec its server started with (the walls
/// `walls_hit` names a refusal by).
#[derive(Debug)]
pub(crate) struct SessionWalls {
    pub(crate) reports: launcher::Reports,
    pub(crate) spec: launcher::Spec,
}

impl Shell {
    /// Keeps a new session's report channel while it runs (a new one replaces the old).
    pub(crate) fn keep_session_walls(&self, session: &str, walls: SessionWalls) {
        lock(&self.session_walls).insert(session.into(), walls);
    }

    /// What the session's walls refused since the last call: refused creates and the memory
    /// bound from its launcher, connections from its proxy ticket. Nothing for a session this
    /// daemon did not start (one adopted from a daemon before: its channel ended with it).
    pub(crate) fn session_denied(&self, session: &str) -> Vec<Denied> {
        let mut out = match lock(&self.session_walls).get(session) {
            Some(w) => self.wall_denials(&w.reports.drain().reports, "", &w.spec),
            None => Vec::new(),
        };
        if let Some(t) = self.session_ticket_denied(session) {
            out.extend(network_denials(t));
        }
        out
    }

    /// Forgets a session's channel once it ended or was killed.
    pub(crate) fn end_session_walls(&self, session: &str) {
        lock(&self.session_walls).remove(session);
    }
}
