//! The daemon's side of the network proxy (`hands_sandbox::proxy::Gate`): a host no rule
//! covers is put to a person — through the client of the `bash` call that is still waiting for
//! the command, when that client is of the 2025-11-25 era and declared form elicitation (an
//! `elicitation/create` request in the middle of the call; the call's `Caller` carries that
//! channel, registered here by the command's proxy token while the call waits), else through
//! the trust gate's
//! parked channel (`hands approvals` and the dashboard; a 2026-07-28 client's input-required
//! result would end the call, so its commands' questions are parked too). Standing *session*
//! and *always* permissions are kept per client, module, host and port, and every decision and
//! closed connection becomes an audit record.

use crate::audit::{Audit, DecidedBy, Decision, Entry};
use crate::gate::approvals::{Action, Approvals, Asked, Channel, Choice};
use hands_sandbox::proxy::{Answer, Asking, Gate, Question, Record};
use rmcp::RoleServer;
use rmcp::service::RequestContext;
use serde_json::json;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, mpsc};

/// The client of a call that can be asked mid-call: a 2025-11-25-era client that declared form
/// elicitation (SPEC §6: nothing is sent for a capability it did not declare). A 2026-07-28
/// client has no such request: an input-required result would end the call and with it the
/// command, so a question of its command is parked instead.
pub fn client_channel(ctx: &RequestContext<RoleServer>) -> Option<rmcp::Peer<RoleServer>> {
    let modern = ctx
        .protocol_version()
        .is_some_and(|v| v.as_str() >= rmcp::model::ProtocolVersion::V_2026_07_28.as_str());
    let reach = crate::gate::approvals::Reach::of(ctx.client_capabilities().as_ref());
    (!modern && reach == crate::gate::approvals::Reach::Form).then(|| ctx.peer.clone())
}

/// While it lives, the connections of the command holding `token` are asked about through the
/// client of the call that started it ([`NetGate::ask_through`]). Dropped when the call ends.
pub struct ClientAsks {
    gate: Arc<NetGate>,
    token: String,
}

impl Drop for ClientAsks {
    fn drop(&mut self) {
        hands_roots::lock(&self.gate.asking).remove(&self.token);
    }
}

/// Who decided, as the proxy carries it in `Record::by` and the audit reads it back.
const BY_STANDING: &str = "standing permission";
const BY_TERMINAL: &str = "person via terminal";
const BY_DASHBOARD: &str = "person via dashboard";
const BY_CLIENT: &str = "person via client";

/// The client named in a question from a command whose connection carried no known token.
const UNIDENTIFIED: &str = "an unidentified command";

/// The most bytes of the asking command a question shows: the command is context (the host and
/// port are what is asked), and a question must fit a `hands approvals` listing whatever the
/// command's length (decision 0088).
pub const COMMAND_SHOWN: usize = 400;

/// The command as a question shows it: whole, or its first [`COMMAND_SHOWN`] bytes and how
/// many more there are.
fn command_shown(command: &str) -> String {
    if command.len() <= COMMAND_SHOWN {
        return command.to_string();
    }
    let mut end = COMMAND_SHOWN;
    while !command.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes more)", &command[..end], command.len() - end)
}

type Sessions = HashSet<(String, String, u16, u64)>;

pub struct NetGate {
    module: String,
    approvals: Arc<Approvals>,
    /// (client, host, port, epoch): *for this session* answers, for as long as the daemon runs
    /// or until `hands approvals revoke --all` moves the epoch.
    session: Arc<Mutex<Sessions>>,
    /// Records go to one writer thread, in order, so a connection never waits on a disk flush.
    records: Mutex<mpsc::Sender<Entry>>,
    /// The clients that can be asked about a command's connections, by the command's proxy
    /// token, while the call that started it waits (see [`ClientAsks`]).
    asking: Mutex<HashMap<String, rmcp::Peer<RoleServer>>>,
}

impl NetGate {
    pub fn new(module: &str, approvals: Arc<Approvals>, audit: Arc<Audit>) -> Arc<NetGate> {
        let (tx, rx) = mpsc::channel::<Entry>();
        std::thread::spawn(move || {
            for entry in rx {
                if let Err(e) = audit.append(&entry) {
                    tracing::error!("the audit log could not record a network decision: {e}");
                }
                audit.settle();
            }
        });
        Arc::new(NetGate {
            module: module.to_string(),
            approvals,
            session: Arc::default(),
            records: Mutex::new(tx),
            asking: Mutex::default(),
        })
    }

    /// Puts the questions of the command holding proxy `token` to `peer` (the client of the call
    /// that started it) while the returned guard lives.
    pub fn ask_through(self: &Arc<Self>, token: &str, peer: rmcp::Peer<RoleServer>) -> ClientAsks {
        hands_roots::lock(&self.asking).insert(token.to_string(), peer);
        ClientAsks { gate: Arc::clone(self), token: token.to_string() }
    }

    fn action(&self, q: &Question) -> Action {
        let (client, command) = match &q.asker {
            Some(a) => (a.client.clone(), command_shown(&a.command)),
            None => (UNIDENTIFIED.to_string(), String::new()),
        };
        Action {
            client,
            module: self.module.clone(),
            // The tool names the host and port, so a standing permission covers exactly them.
            tool: format!("network {}:{}", q.host, q.port),
            class: "external".into(),
            arguments: json!({ "host": q.host, "port": q.port, "command": command }),
            // A connection without its command's proxy credentials cannot be told from another
            // client's: a yes is for it alone, never a session or always one that would then
            // let every client's such connections through (found by the tenth attack pass).
            confirm: q.asker.is_none(),
            // The proxy's *session* answers are the daemon's, by client (`session` above).
            until_restart: true,
        }
    }
}

impl Gate for NetGate {
    fn ask(&self, q: Question) -> Asking {
        let action = self.action(&q);
        let key = (action.client.clone(), q.host.clone(), q.port, self.approvals.epoch());
        let known = !action.confirm
            && (hands_roots::lock(&self.session).contains(&key)
                || self.approvals.always_allows(&action));
        if known {
            return Box::pin(async { Answer::Allow { by: BY_STANDING.into() } });
        }
        let approvals = Arc::clone(&self.approvals);
        let session = Arc::clone(&self.session);
        let client =
            q.token.as_deref().and_then(|t| hands_roots::lock(&self.asking).get(t).cloned());
        Box::pin(async move {
            let asked = match client {
                Some(peer) => approvals.elicit(&action, &peer).await,
                None => approvals.park(&action).await,
            };
            match asked {
                Asked::Allowed(choice, via) => {
                    match choice {
                        Choice::Once => {}
                        // Offered once only (the control socket refuses more): once, whatever.
                        _ if action.confirm => {}
                        Choice::Session => {
                            hands_roots::lock(&session).insert(key);
                        }
                        Choice::Always => {
                            if let Err(e) = approvals.grant_always(&action) {
                                tracing::warn!("cannot record the always permission: {e:#}");
                            }
                        }
                    }
                    let by = match via {
                        Channel::Terminal => BY_TERMINAL,
                        Channel::Dashboard => BY_DASHBOARD,
                        Channel::Client => BY_CLIENT,
                    };
                    Answer::Allow { by: by.into() }
                }
                Asked::Refused(why, _) => Answer::Refuse { why },
                Asked::InputRequired(_) | Asked::Parked(_) => {
                    Answer::Refuse { why: "no person channel answered".into() }
                }
            }
        })
    }

    fn record(&self, r: Record) {
        let (decision, outcome) = match r.event {
            "refused" => {
                (Decision::Deny, format!("refused: {}", r.why.clone().unwrap_or_default()))
            }
            "closed" => (Decision::Allow, "closed".to_string()),
            _ => (Decision::Allow, "allowed".to_string()),
        };
        let decided_by = match r.by.as_str() {
            BY_STANDING => DecidedBy::StandingPermission,
            BY_TERMINAL => DecidedBy::PersonViaTerminal,
            BY_DASHBOARD => DecidedBy::PersonViaDashboard,
            BY_CLIENT => DecidedBy::PersonViaClient,
            _ => DecidedBy::Policy,
        };
        let (client, command) = match &r.asker {
            Some(a) => (a.client.clone(), a.command.clone()),
            None => (UNIDENTIFIED.to_string(), String::new()),
        };
        let entry = Entry {
            client,
            module: self.module.clone(),
            tool: "network".into(),
            class: "external".into(),
            arguments: json!({
                "host": r.host,
                "port": r.port,
                "protocol": r.protocol,
                "command": command,
            }),
            decision,
            decided_by,
            outcome,
            result: Some(json!({
                "address": r.address.map(|a| a.to_string()),
                "rule": r.by,
                "bytes_up": r.bytes_up,
                "bytes_down": r.bytes_down,
                "duration_ms": r.duration_ms,
            })),
        };
        let _ = hands_roots::lock(&self.records).send(entry);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_question_shows_a_long_command_cut_and_says_so() {
        assert_eq!(command_shown("curl -sS https://x.test/"), "curl -sS https://x.test/");
        let long = format!("curl https://x.test/ ; : {}", "é".repeat(40_000));
        let shown = command_shown(&long);
        assert!(shown.len() < COMMAND_SHOWN + 40, "{} bytes", shown.len());
        assert!(shown.starts_with("curl https://x.test/ ; : é"), "{shown}");
        let more = long.len() - shown.find('…').unwrap();
        assert!(shown.ends_with(&format!("… ({more} bytes more)")), "{shown}");
    }
}
