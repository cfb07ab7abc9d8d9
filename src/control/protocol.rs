//! The control protocol: what a person's front end (`hands stop`, `hands approvals`, `hands
//! exec`, the dashboard) asks a daemon, and what the daemon answers. One JSON line each way
//! over the control socket; in process, the dashboard hands the same [`Request`] to
//! [`Daemon::act`](crate::server::Daemon::act) and renders the same [`Reply`].
//!
//! A request is tagged by `op` (`{"op": "stop"}`); a reply by `reply`, with `ok` beside it so
//! a person reading the socket by hand sees at once whether it worked (`{"ok": true, "reply":
//! "brake", "pid": 4242, "stopped": true, "ended": 1}`). `exec` is the one request answered by
//! several lines: [`Reply::Output`] as the command writes, then [`Reply::Exited`] (or
//! [`Reply::Confirm`] / [`Reply::Failed`] before anything runs).

use crate::gate::approvals::ParkedView;
use serde::{Deserialize, Serialize};

/// The primary socket's name in the state dir (a later daemon's is `control-<pid>.sock`).
pub const SOCKET: &str = "control.sock";
/// The longest line accepted either way.
pub const MAX_LINE: u64 = 64 * 1024;
/// The longest reply line a front end reads: a listing of every parked action (at most
/// `MAX_PARKED`, each at most `MAX_SHOWN` of arguments shown about three times over, a network
/// question's command cut where it is made) fits within it (decisions 0088, 0090). A longer
/// answer is a failure the front end names, never read as less.
pub const MAX_REPLY: u64 = 16 * 1024 * 1024;
/// How long a peer has to send its request.
pub const REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// One request a front end sends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// Is the daemon alive, and is its brake on?
    Status,
    /// The brake: end every running command and session, refuse new ones. `except` is the pid
    /// of a daemon that already stopped itself (a dashboard asking the others).
    Stop {
        #[serde(default)]
        via: Via,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        except: Option<u32>,
    },
    /// Lift the brake; `except` as for [`Request::Stop`].
    Release {
        #[serde(default)]
        via: Via,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        except: Option<u32>,
    },
    /// The actions parked for a person.
    Approvals,
    /// A person's answer to the parked action `id`.
    Answer {
        id: String,
        choice: Choice,
        #[serde(default)]
        via: Via,
    },
    /// End standing *always* permissions (one by id, or all; all also ends this daemon's
    /// *session* permissions).
    Revoke {
        standing: Standing,
        #[serde(default)]
        via: Via,
    },
    /// End every *session* permission this daemon holds (after another daemon revoked all).
    RevokeSessions,
    /// Stop one running command by its id (the dashboard's Stop).
    StopCommand {
        id: u64,
        #[serde(default)]
        via: Via,
    },
    /// Stop one tmux session by its name (the dashboard's Stop).
    StopSession {
        session: String,
        #[serde(default)]
        via: Via,
    },
    /// `hands exec`: run one allowlisted program for a person at a terminal.
    Exec(Exec),
}

/// Where the person acted: the audit record's client and `decided_by` follow from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Via {
    /// `hands stop`, `hands approvals` (client `terminal`, `person-via-terminal`).
    #[default]
    Terminal,
    /// The dashboard (client `dashboard`, `person-via-dashboard`).
    Dashboard,
}

/// A person's choice for a parked action, by its name on the dashboard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Choice {
    Once,
    Session,
    Always,
    Reject,
}

/// Which standing permissions a revoke ends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Standing {
    /// The one with this id (from `hands approvals list`).
    Id(String),
    /// Every *always* permission, and every live connection's *session* permissions.
    All,
}

/// `hands exec`'s request: the argv, where, for how long, and the person's answer when the
/// program is confirm-listed (absent the first time: the daemon asks back).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exec {
    pub argv: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<Confirmed>,
}

/// The person's answer at the terminal to a confirm-listed program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Confirmed {
    Yes,
    No,
}

/// One answer line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reply", rename_all = "snake_case")]
pub enum Reply {
    /// To [`Request::Status`].
    Status { pid: u32, stopped: bool },
    /// To a stop or release: the brake's state now, and how many commands and sessions the
    /// stop ended.
    Brake { pid: u32, stopped: bool, ended: usize },
    /// A stop or release whose `except` named this daemon: nothing done.
    Skipped { pid: u32 },
    /// To [`Request::Approvals`].
    Pending { pid: u32, pending: Vec<ParkedView> },
    /// An answer, revoke, or stop of one command or session was carried out.
    Done { pid: u32 },
    /// Nothing was done: why, in words for the person, and what kind of failure it is.
    Failed {
        error: String,
        #[serde(default)]
        kind: Failure,
    },
    /// `exec`: bytes the command wrote, hex-encoded (exactly as written).
    Output { stream: Stream, hex: String },
    /// `exec`: the command ended.
    Exited(Exited),
    /// `exec`: the program is confirm-listed; ask the person, then send the request again
    /// with `answer`.
    Confirm { question: String },
}

/// What kind of failure a [`Reply::Failed`] is; the dashboard maps it to an HTTP status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Failure {
    /// The socket refused the peer (another uid, another user namespace).
    #[default]
    Refused,
    /// The request could not be read or is not one this daemon knows.
    Invalid,
    /// What it names does not exist here (no tools-shell in this daemon).
    Absent,
    /// What it names is not (or no longer) in a state to do it: nothing waits under the id,
    /// the command already ended, the session is gone.
    Conflict,
    /// No standing permission has the id a revoke named.
    UnknownPermission,
    /// The daemon failed doing it (a file it could not write).
    Internal,
}

/// Which of the command's streams an [`Reply::Output`] is from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stream {
    Stdout,
    Stderr,
}

/// How a command run by `hands exec` ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exited {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub duration_ms: u64,
    pub containment: String,
    /// The command ran but its audit record could not be written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit_error: Option<String>,
}

/// A line that is not a request or reply this end reads (another version's, or not JSON).
#[derive(Debug, thiserror::Error)]
pub enum LineError {
    /// The daemon answered `line` (cut to a few hundred characters), which this `hands`
    /// cannot read.
    #[error("the daemon's answer is not one this hands reads ({source}): {line:?}")]
    Reply { line: String, source: serde_json::Error },
    /// A front end sent a request this daemon does not know; the daemon answers `invalid`.
    #[error(
        "the request is not one this daemon knows ({0}); send one JSON line such as \
         {{\"op\": \"status\"}} (ops: status, stop, release, approvals, answer, revoke, \
         revoke_sessions, stop_command, stop_session, exec)"
    )]
    Request(serde_json::Error),
}

impl Reply {
    /// A failure of `kind`, said in `error`.
    pub fn failed(kind: Failure, error: impl Into<String>) -> Reply {
        Reply::Failed { error: error.into(), kind }
    }

    /// Whether the request was carried out (or, for `exec`, goes on).
    pub fn ok(&self) -> bool {
        !matches!(self, Reply::Failed { .. } | Reply::Confirm { .. })
    }

    /// The reply as one line on the wire, `ok` beside its tag, newline-terminated.
    pub fn to_line(&self) -> String {
        let mut v = serde_json::to_value(self).unwrap_or_else(
            |e| serde_json::json!({ "reply": "failed", "error": format!("cannot encode: {e}") }),
        );
        if let Some(map) = v.as_object_mut() {
            map.insert("ok".into(), self.ok().into());
        }
        let mut line = v.to_string();
        line.push('\n');
        line
    }

    /// Reads one reply line (its `ok` is implied by its tag and not read).
    pub fn from_line(line: &str) -> Result<Reply, LineError> {
        serde_json::from_str(line)
            .map_err(|source| LineError::Reply { line: line.chars().take(300).collect(), source })
    }
}

impl Request {
    /// The request as one line on the wire, newline-terminated.
    pub fn to_line(&self) -> String {
        // A request holds only strings, numbers and unit variants: it always encodes.
        let mut line = serde_json::to_string(self).unwrap_or_default();
        line.push('\n');
        line
    }

    /// Reads one request line; the error says what this daemon understands.
    pub fn from_line(line: &str) -> Result<Request, LineError> {
        serde_json::from_str(line).map_err(LineError::Request)
    }
}

impl From<Choice> for Option<crate::gate::approvals::Choice> {
    fn from(c: Choice) -> Self {
        use crate::gate::approvals::Choice as Gate;
        match c {
            Choice::Once => Some(Gate::Once),
            Choice::Session => Some(Gate::Session),
            Choice::Always => Some(Gate::Always),
            Choice::Reject => None,
        }
    }
}

impl From<ParkedView> for crate::gate::approvals::Pending {
    /// A parked action another daemon reported, with its parts.
    fn from(v: ParkedView) -> Self {
        crate::gate::approvals::Pending { id: v.id, expires: v.expires, action: v.detail }
    }
}

impl Via {
    /// The channel the gate records a parked action's answer under.
    pub fn channel(self) -> crate::gate::approvals::Channel {
        match self {
            Via::Terminal => crate::gate::approvals::Channel::Terminal,
            Via::Dashboard => crate::gate::approvals::Channel::Dashboard,
        }
    }

    /// The audit record's client for an action done this way.
    pub fn client(self) -> &'static str {
        match self {
            Via::Terminal => "terminal",
            Via::Dashboard => "dashboard",
        }
    }

    /// The audit record's `decided_by` for an action done this way.
    pub fn decided_by(self) -> crate::audit::DecidedBy {
        match self {
            Via::Terminal => crate::audit::DecidedBy::PersonViaTerminal,
            Via::Dashboard => crate::audit::DecidedBy::PersonViaDashboard,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Every request variant, with every optional part both present and absent.
    fn every_request() -> Vec<Request> {
        let exec = Exec { argv: vec!["ls".into()], cwd: None, timeout_secs: None, answer: None };
        vec![
            Request::Status,
            Request::Stop { via: Via::Terminal, except: None },
            Request::Stop { via: Via::Dashboard, except: Some(42) },
            Request::Release { via: Via::Terminal, except: None },
            Request::Release { via: Via::Dashboard, except: Some(7) },
            Request::Approvals,
            Request::Answer { id: "a-1".into(), choice: Choice::Once, via: Via::Terminal },
            Request::Answer { id: "a-2".into(), choice: Choice::Session, via: Via::Dashboard },
            Request::Answer { id: "a-3".into(), choice: Choice::Always, via: Via::Dashboard },
            Request::Answer { id: "a-4".into(), choice: Choice::Reject, via: Via::Terminal },
            Request::Revoke { standing: Standing::Id("p-1".into()), via: Via::Terminal },
            Request::Revoke { standing: Standing::All, via: Via::Dashboard },
            Request::RevokeSessions,
            Request::StopCommand { id: 3, via: Via::Dashboard },
            Request::StopSession { session: "build".into(), via: Via::Dashboard },
            Request::Exec(exec.clone()),
            Request::Exec(Exec {
                argv: vec!["rm".into(), "a b\n\"c\"".into()],
                cwd: Some("/w".into()),
                timeout_secs: Some(5),
                answer: Some(Confirmed::No),
            }),
            Request::Exec(Exec { answer: Some(Confirmed::Yes), ..exec }),
        ]
    }

    #[test]
    fn every_request_parses_back_as_itself() {
        let all = every_request();
        // One of each variant is here (a new variant must be added above).
        let ops: std::collections::BTreeSet<String> = all
            .iter()
            .map(|r| serde_json::to_value(r).unwrap()["op"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(ops.len(), 10, "{ops:?}");
        for r in all {
            let line = r.to_line();
            assert!(line.ends_with('\n') && !line[..line.len() - 1].contains('\n'), "{line}");
            assert_eq!(Request::from_line(&line).unwrap(), r, "{line}");
        }
    }

    #[test]
    fn every_reply_parses_back_as_itself_with_ok_beside_it() {
        let parked = ParkedView {
            id: "a-1".into(),
            action: "stdio wants to run `write`".into(),
            expires: 99,
            detail: crate::gate::approvals::Action {
                client: "stdio".into(),
                module: "tools-fs".into(),
                tool: "write".into(),
                class: "write".into(),
                arguments: json!({ "path": "x" }),
                confirm: false,
                until_restart: false,
            },
        };
        let all = [
            (Reply::Status { pid: 1, stopped: false }, true),
            (Reply::Brake { pid: 1, stopped: true, ended: 2 }, true),
            (Reply::Skipped { pid: 1 }, true),
            (Reply::Pending { pid: 1, pending: vec![parked] }, true),
            (Reply::Done { pid: 1 }, true),
            (Reply::failed(Failure::Conflict, "no action is waiting under a-1"), false),
            (Reply::Output { stream: Stream::Stderr, hex: "0a".into() }, true),
            (
                Reply::Exited(Exited {
                    exit_code: Some(3),
                    signal: None,
                    timed_out: false,
                    duration_ms: 10,
                    containment: "full".into(),
                    audit_error: None,
                }),
                true,
            ),
            (Reply::Confirm { question: "run it?".into() }, false),
        ];
        for (r, ok) in all {
            let line = r.to_line();
            let v: serde_json::Value = serde_json::from_str(&line).unwrap();
            assert_eq!(v["ok"], ok, "{line}");
            assert_eq!(Reply::from_line(&line).unwrap(), r, "{line}");
        }
    }

    /// The lines the tests and older tools send by hand keep working.
    #[test]
    fn hand_written_lines_are_understood() {
        assert_eq!(
            Request::from_line("{\"op\":\"stop\"}\n").unwrap(),
            Request::Stop { via: Via::Terminal, except: None }
        );
        assert_eq!(
            Request::from_line(
                "{\"op\":\"answer\",\"id\":\"a-9\",\"choice\":\"session\",\"via\":\"dashboard\"}"
            )
            .unwrap(),
            Request::Answer { id: "a-9".into(), choice: Choice::Session, via: Via::Dashboard }
        );
        let line = Reply::Brake { pid: 5, stopped: true, ended: 1 }.to_line();
        assert!(line.contains("\"ok\":true") && line.contains("\"stopped\":true"), "{line}");
        assert!(line.contains("\"ended\":1"), "{line}");
        let e = Request::from_line("{\"op\":\"fly\"}").unwrap_err();
        assert!(matches!(e, LineError::Request(_)), "{e:?}");
        let e = e.to_string();
        assert!(e.contains("fly") && e.contains("ops: status"), "{e}");
    }
}
