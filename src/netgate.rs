//! The daemon's side of the network proxy (`hands_sandbox::proxy::Gate`): a host no rule
//! covers is put to a person through the trust gate's parked channel (`hands approvals` and the
//! dashboard: the connection arrives while a command runs, when no client request is there to
//! carry a question), standing *session* and *always* permissions are kept per client, module,
//! host and port, and every decision and closed connection becomes an audit record.

use crate::approvals::{Action, Approvals, Asked, Channel, Choice};
use crate::audit::{Audit, DecidedBy, Decision, Entry};
use hands_sandbox::proxy::{Answer, Asking, Gate, Question, Record};
use serde_json::json;
use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError, mpsc};

/// Who decided, as the proxy carries it in `Record::by` and the audit reads it back.
const BY_STANDING: &str = "standing permission";
const BY_TERMINAL: &str = "person via terminal";
const BY_DASHBOARD: &str = "person via dashboard";
const BY_CLIENT: &str = "person via client";

/// The client named in a question from a command whose connection carried no known token.
const UNIDENTIFIED: &str = "an unidentified command";

type Sessions = HashSet<(String, String, u16, u64)>;

pub struct NetGate {
    module: String,
    approvals: Arc<Approvals>,
    /// (client, host, port, epoch): *for this session* answers, for as long as the daemon runs
    /// or until `hands approvals revoke --all` moves the epoch.
    session: Arc<Mutex<Sessions>>,
    /// Records go to one writer thread, in order, so a connection never waits on a disk flush.
    records: Mutex<mpsc::Sender<Entry>>,
}

impl NetGate {
    pub fn new(module: &str, approvals: Arc<Approvals>, audit: Arc<Audit>) -> Arc<NetGate> {
        let (tx, rx) = mpsc::channel::<Entry>();
        std::thread::spawn(move || {
            for entry in rx {
                if let Err(e) = audit.append(&entry) {
                    tracing::error!("the audit log could not record a network decision: {e}");
                }
            }
        });
        Arc::new(NetGate {
            module: module.to_string(),
            approvals,
            session: Arc::default(),
            records: Mutex::new(tx),
        })
    }

    fn action(&self, q: &Question) -> Action {
        let (client, command) = match &q.asker {
            Some(a) => (a.client.clone(), a.command.clone()),
            None => (UNIDENTIFIED.to_string(), String::new()),
        };
        Action {
            client,
            module: self.module.clone(),
            // The tool names the host and port, so a standing permission covers exactly them.
            tool: format!("network {}:{}", q.host, q.port),
            class: "external".into(),
            arguments: json!({ "host": q.host, "port": q.port, "command": command }),
            confirm: false,
        }
    }
}

impl Gate for NetGate {
    fn ask(&self, q: Question) -> Asking {
        let action = self.action(&q);
        let key = (action.client.clone(), q.host.clone(), q.port, self.approvals.epoch());
        let known = self.session.lock().unwrap_or_else(PoisonError::into_inner).contains(&key);
        if known || self.approvals.always_allows(&action) {
            return Box::pin(async { Answer::Allow { by: BY_STANDING.into() } });
        }
        let approvals = Arc::clone(&self.approvals);
        let session = Arc::clone(&self.session);
        Box::pin(async move {
            match approvals.park(&action).await {
                Asked::Allowed(choice, via) => {
                    match choice {
                        Choice::Once => {}
                        Choice::Session => {
                            session.lock().unwrap_or_else(PoisonError::into_inner).insert(key);
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
        let _ = self.records.lock().unwrap_or_else(PoisonError::into_inner).send(entry);
    }
}
