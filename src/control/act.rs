//! [`Daemon::act`]: the one place a person's action is carried out — the brake and its
//! release, answering a parked action, revoking standing permissions, stopping one command or
//! session — and its audit record written. The control socket, the dashboard and (through the
//! socket) `hands stop` / `hands approvals` all hand it a [`Request`] and render its [`Reply`].
//!
//! It acts on this daemon only. Reaching the other daemons of the state dir (`hands stop`
//! stops them all; the dashboard's brake too) is the front end's: it sends the same request
//! to their sockets ([`crate::control::client`]).

use crate::audit::{Decision, Entry};
use crate::control::protocol::{Choice, Failure, Reply, Request, Standing, Via};
use crate::server::Daemon;
use serde_json::{Value, json};
use std::path::Path;

impl Daemon {
    /// Carries out one person's request on this daemon and writes its audit record (an answer
    /// to a parked action is recorded by the call it lets through or refuses, which says who
    /// decided). `exec` streams its output and is served by the socket, not here.
    pub async fn act(&self, req: Request) -> Reply {
        let pid = std::process::id();
        match req {
            Request::Status => Reply::Status { pid, stopped: self.is_stopped() },
            // A dashboard that already stopped (or released) its own daemon asks the others only.
            Request::Stop { except: Some(p), .. } | Request::Release { except: Some(p), .. }
                if p == pid =>
            {
                Reply::Skipped { pid }
            }
            Request::Stop { via, .. } => {
                let ended = self.stop().await;
                let outcome = format!("ok: ended {ended} commands and sessions");
                self.record_act(via, "stop", json!({}), outcome).await;
                Reply::Brake { pid, stopped: true, ended }
            }
            Request::Release { via, .. } => {
                self.release();
                self.record_act(via, "release", json!({}), "ok".into()).await;
                Reply::Brake { pid, stopped: false, ended: 0 }
            }
            Request::Approvals => Reply::Pending { pid, pending: self.approvals.parked() },
            Request::Answer { id, choice, via } => {
                if let Some(refusal) = self.unoffered(&id, choice) {
                    return refusal;
                }
                match self.approvals.answer_as(&id, choice.into(), via.channel()) {
                    Ok(()) => Reply::Done { pid },
                    Err(e) => Reply::failed(Failure::Conflict, e.to_string()),
                }
            }
            Request::Revoke { standing, via } => self.revoke(standing, via).await,
            Request::RevokeSessions => {
                self.approvals.revoke_sessions();
                Reply::Done { pid }
            }
            Request::StopCommand { id, via } => {
                let Some(sh) = self.shell() else { return no_shell() };
                match sh.stop_command(id).await {
                    Some(command) => {
                        let args = json!({ "command": command });
                        self.record_act(via, "stop_command", args, "ok".into()).await;
                        Reply::Done { pid }
                    }
                    None => Reply::failed(
                        Failure::Conflict,
                        format!("command {id} is not running (it may have ended)"),
                    ),
                }
            }
            Request::StopSession { session, via } => {
                let Some(sh) = self.shell() else { return no_shell() };
                let params = hands_shell::tmux::KillParams { session: session.clone() };
                // The person: any session, whoever started it.
                let killed = sh.tmux_kill(params, None).await;
                let outcome = match &killed {
                    Ok(_) => "ok".to_string(),
                    Err(e) if e.is_refusal() => format!("refused: {e}"),
                    Err(e) => format!("error: {e}"),
                };
                self.record_act(via, "tmux_kill", json!({ "session": session }), outcome).await;
                match killed {
                    Ok(_) => Reply::Done { pid },
                    Err(e) => Reply::failed(Failure::Conflict, e.to_string()),
                }
            }
            Request::Exec(_) => Reply::failed(
                Failure::Invalid,
                "`exec` streams its output over the control socket; it is not an action",
            ),
        }
    }

    /// Refuses an answer the action was never offered, leaving it waiting: *always* for a
    /// one-run expansion (`needs`, SPEC §6: once or for the session, never always), and
    /// anything but once for a confirm-listed program (SPEC §4.4: each run asks). The
    /// dashboard and the client's form do not offer them; a hand-written request is told why.
    fn unoffered(&self, id: &str, choice: Choice) -> Option<Reply> {
        if !matches!(choice, Choice::Always | Choice::Session) {
            return None;
        }
        let pending = self.approvals.pending();
        let action = &pending.iter().find(|p| p.id == id)?.action;
        let tool = crate::shown::shown(&action.tool).text;
        let what = if action.confirm {
            let name = if choice == Choice::Always { "always" } else { "for the session" };
            format!(
                "approval {id} cannot be answered *{name}*: `{tool}` runs a confirm-listed \
                 program (commands.confirm) or comes from a command the proxy cannot tell, \
                 which a person allows one run at a time"
            )
        } else if choice == Choice::Always && action.widens() {
            format!(
                "approval {id} cannot be answered *always*: `{tool}` asks for a one-run \
                 widening (`needs`), which a person grants once or for this session, never always"
            )
        } else {
            return None;
        };
        Some(Reply::failed(
            Failure::Invalid,
            format!(
                "{what}; it is still waiting — answer it once (`hands approvals approve {id}`), \
                 or deny it (`hands approvals deny {id}`)"
            ),
        ))
    }

    /// Ends standing permissions: the file's *always* ones (shared by every daemon of the
    /// state dir), and for [`Standing::All`] this daemon's *session* ones too.
    async fn revoke(&self, standing: Standing, via: Via) -> Reply {
        let file = crate::server::absolute(&self.config.state_dir).join("approvals.json");
        let which = standing.clone();
        let done = tokio::task::spawn_blocking(move || revoke_standing(&file, &which)).await;
        match done {
            Ok(Ok(true)) => {}
            Ok(Ok(false)) => return Reply::failed(Failure::UnknownPermission, unknown(&standing)),
            Ok(Err(e)) => return Reply::failed(Failure::Conflict, format!("{e:#}")),
            Err(e) => return Reply::failed(Failure::Internal, e.to_string()),
        }
        let args = match &standing {
            Standing::Id(id) => json!({ "id": id }),
            Standing::All => {
                self.approvals.revoke_sessions();
                json!({ "all": true })
            }
        };
        self.record_act(via, "revoke", args, "ok".into()).await;
        Reply::Done { pid: std::process::id() }
    }

    /// Writes the record of a person's action: module `hands`, class `control`, allowed by
    /// the person through `via`. A record that cannot be written is logged: the action is
    /// done either way (a brake must not wait for a full disk).
    async fn record_act(&self, via: Via, op: &str, arguments: Value, outcome: String) {
        let entry = Entry {
            client: via.client().into(),
            module: "hands".into(),
            tool: op.into(),
            class: "control".into(),
            arguments,
            decision: Decision::Allow,
            decided_by: via.decided_by(),
            outcome,
            result: None,
        };
        if let Err(e) = self.append_audit(entry).await {
            tracing::error!("cannot record `{op}`: {e}");
        }
    }
}

fn no_shell() -> Reply {
    Reply::failed(Failure::Absent, "tools-shell does not run here")
}

/// What `hands approvals revoke` says about an id no standing permission has.
pub fn unknown(standing: &Standing) -> String {
    let id = match standing {
        Standing::Id(id) => id.as_str(),
        Standing::All => "",
    };
    format!("no standing permission has the id {id}; `hands approvals list` shows them")
}

/// Removes the standing *always* permission `standing` names (or all of them) from `file`,
/// under its lock; `Ok(false)` when no permission has the id (the file is left as it was).
/// The daemon does this for a revoke; `hands approvals revoke` itself when no daemon runs.
pub fn revoke_standing(file: &Path, standing: &Standing) -> anyhow::Result<bool> {
    let mut found = true;
    let updated = crate::gate::approvals::update_always(file, |list| {
        let before = list.len();
        match standing {
            Standing::Id(id) => list.retain(|s| &s.id != id),
            Standing::All => list.clear(),
        }
        if matches!(standing, Standing::Id(_)) && list.len() == before {
            found = false;
            // An error leaves the file untouched.
            anyhow::bail!("{}", unknown(standing));
        }
        Ok(())
    });
    match updated {
        Ok(()) => Ok(true),
        Err(_) if !found => Ok(false),
        Err(e) => Err(e),
    }
}
