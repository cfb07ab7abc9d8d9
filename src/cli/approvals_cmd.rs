//! `hands approvals list|approve|deny|revoke`: a person's answers at the gate, from a
//! terminal. Parked actions live in the daemons (asked over their control sockets); the
//! *always* permissions in `<state_dir>/approvals.json`.

use super::printout::{self, state_dir};
use crate::control::protocol::{Choice, Reply, Request, Standing, Via};
use crate::gate::approvals;
use crate::{control, shown};
use clap::Subcommand;
use std::path::PathBuf;
use std::process::ExitCode;

/// `hands approvals ...`: the parked actions live in the daemons (asked over their control
#[derive(Subcommand, Debug)]
pub enum ApprovalsCmd {
    /// Actions waiting for a person, and the standing *always* permissions
    List,
    /// Allow a waiting action: once (the default), for the rest of the client's session (for a
    /// 2026-07-28 client, which has none: that client until the daemon restarts), or always
    /// (for that client, module, tool and module version; `revoke` ends it)
    Approve {
        id: String,
        #[arg(long = "for", value_enum, default_value_t = For::Once)]
        scope: For,
    },
    /// Refuse a waiting action
    Deny { id: String },
    /// End a standing permission (its id from `list`), or all of them with --all (session
    /// permissions of live connections included)
    Revoke {
        #[arg(required_unless_present = "all")]
        id: Option<String>,
        #[arg(long, conflicts_with = "id")]
        all: bool,
    },
}

/// How long `hands approvals approve` allows an action for.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum For {
    /// This action only
    Once,
    /// This action and the same tool for the rest of the client's connection
    Session,
    /// The same tool for this client and module version, across restarts
    Always,
}

/// sockets); the *always* permissions in `<state_dir>/approvals.json`.
pub(super) fn approvals_cmd(config: Option<PathBuf>, action: ApprovalsCmd) -> ExitCode {
    let dir = match state_dir(config) {
        Ok(d) => d,
        Err(code) => return code,
    };
    let always_path = dir.join("approvals.json");
    // Daemons that gave no answer: said, and counted, so that a listing never takes a daemon
    // it could not read for one with nothing waiting.
    let failed = std::cell::Cell::new(0usize);
    let live = |req: Request| -> Vec<Reply> {
        control::client::request_all(&dir, &req)
            .into_iter()
            .filter_map(|(_, a)| match a {
                Ok(v) => Some(v),
                Err(e) => {
                    // The error names its socket.
                    printout::out(&format!("hands: {e}"));
                    failed.set(failed.get() + 1);
                    None
                }
            })
            .collect()
    };
    match action {
        ApprovalsCmd::List => {
            let mut waiting = 0;
            let mut refused = false;
            for reply in live(Request::Approvals) {
                let (pid, pending) = match reply {
                    Reply::Pending { pid, pending } => (pid, pending),
                    // A daemon that refused this terminal is said, not taken for one with
                    // nothing waiting.
                    Reply::Failed { error, .. } => {
                        refused = true;
                        printout::out(&format!("hands: a daemon {}", shown::shown(&error).text));
                        continue;
                    }
                    _ => continue,
                };
                for p in pending {
                    waiting += 1;
                    // Described here from its parts (every part escaped, `src/shown.rs`), not
                    // printed as the daemon worded it.
                    let action = approvals::Pending::from(p.clone()).action.describe();
                    printout::out(&format!(
                        "waiting {} (daemon {pid}, expires at {}): {action}",
                        shown::shown(&p.id).text,
                        p.expires,
                    ));
                }
            }
            let failed = failed.get();
            if failed > 0 {
                refused = true;
                printout::out(&format!(
                    "hands: {failed} daemon(s) could not be asked (above); what waits there is \
                     not listed — its log names each waiting action, and the dashboard shows it"
                ));
            } else if waiting == 0 && !refused {
                printout::out("no action is waiting for a person");
            }
            match approvals::read_always(&always_path) {
                Ok(all) if all.is_empty() => printout::out("no standing always permissions"),
                Ok(all) => {
                    for s in all {
                        printout::out(&format!(
                            "always {}: client {} may run `{}` of {} (hands {}, granted at {})",
                            s.id, s.client, s.tool, s.module, s.version, s.granted
                        ));
                    }
                }
                Err(e) => {
                    printout::out(&format!("hands: {e:#}"));
                    return ExitCode::from(1);
                }
            }
            if refused { ExitCode::from(1) } else { ExitCode::SUCCESS }
        }
        ApprovalsCmd::Approve { id, scope } => {
            let choice = match scope {
                For::Once => Choice::Once,
                For::Session => Choice::Session,
                For::Always => Choice::Always,
            };
            answer_parked(&live, &id, choice)
        }
        ApprovalsCmd::Deny { id } => answer_parked(&live, &id, Choice::Reject),
        ApprovalsCmd::Revoke { id, all } => {
            let standing = match id {
                Some(id) => Standing::Id(id),
                None => Standing::All,
            };
            if let Err(e) = revoke(&dir, &always_path, standing) {
                printout::out(&format!("hands: {e}"));
                return ExitCode::from(1);
            }
            if all {
                // Every live daemon's session permissions end too.
                live(Request::RevokeSessions);
                if failed.get() > 0 {
                    printout::out(
                        "hands: the always permissions are revoked, but the session permissions \
                         of the daemon(s) above may still hold; run it again, or restart them",
                    );
                    return ExitCode::from(1);
                }
                printout::out("revoked every standing permission, session permissions included");
            } else {
                printout::out("revoked");
            }
            ExitCode::SUCCESS
        }
    }
}

/// A revoke, done by the first live daemon of the state dir (which records it); with no
/// daemon serving, done here on the file (there is no audit log to write then).
fn revoke(dir: &std::path::Path, file: &std::path::Path, standing: Standing) -> Result<(), String> {
    let req = Request::Revoke { standing: standing.clone(), via: Via::Terminal };
    match control::client::request_one(dir, &req) {
        Some((_, Ok(Reply::Done { .. }))) => Ok(()),
        Some((_, Ok(Reply::Failed { error, .. }))) => Err(error),
        Some((path, Ok(other))) => {
            Err(format!("{}: an answer this hands does not expect: {other:?}", path.display()))
        }
        Some((_, Err(e))) => Err(e.to_string()),
        None => match control::act::revoke_standing(file, &standing) {
            Ok(true) => Ok(()),
            Ok(false) => Err(control::act::unknown(&standing)),
            Err(e) => Err(format!("{e:#}")),
        },
    }
}

/// Sends a person's answer for a parked action to every live daemon; one of them holds it.
fn answer_parked(live: &dyn Fn(Request) -> Vec<Reply>, id: &str, choice: Choice) -> ExitCode {
    let answers = live(Request::Answer { id: id.into(), choice, via: Via::Terminal });
    if answers.iter().any(Reply::ok) {
        let said = match choice {
            Choice::Reject => "denied",
            Choice::Once => "approved once:",
            Choice::Session => {
                "approved for the rest of the client's session (a 2026-07-28 client's: until the \
                 daemon restarts):"
            }
            Choice::Always => "approved always (`hands approvals revoke` ends it):",
        };
        printout::out(&format!("{said} {id}"));
        return ExitCode::SUCCESS;
    }
    let why = answers
        .iter()
        .find_map(|r| match r {
            Reply::Failed { error, .. } => Some(error.as_str()),
            _ => None,
        })
        .unwrap_or("no running daemon found in the state dir (check --config)");
    printout::out(&format!("hands: {why}"));
    ExitCode::from(1)
}
