//! What the gate asks a person about, and what comes back: the [`Action`] described exactly,
//! how the client can reach its person ([`Reach`]), the person's [`Choice`] and the
//! [`Channel`] it came through, and the gate's answer after asking ([`Asked`]).

use rmcp::model::{ClientCapabilities, InputRequiredResult};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The choices a person is offered, as the form's enum values.
pub const CHOICES: [&str; 4] = ["allow_once", "allow_session", "allow_always", "reject"];

/// How a client can reach its person, by what it declared (SPEC §6): the gate never sends a
/// request for a capability the client did not declare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// Form elicitation (an `elicitation` capability with `form`, or with neither mode: the
    /// 2025-06-18 spelling, which meant form).
    Form,
    /// Only URL elicitation: the client can open the action's dashboard entry for its person.
    Url,
    /// No elicitation: the person answers at `hands approvals` or on the dashboard.
    Nobody,
}

impl Reach {
    pub fn of(caps: Option<&ClientCapabilities>) -> Reach {
        match caps.and_then(|c| c.elicitation.as_ref()) {
            Some(e) if e.form.is_some() || e.url.is_none() => Reach::Form,
            Some(_) => Reach::Url,
            None => Reach::Nobody,
        }
    }
}

/// What a person chose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    Once,
    Session,
    Always,
}

/// How the person was reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    Client,
    Terminal,
    /// The person's dashboard (`src/dashboard`), which answers parked actions with any choice.
    Dashboard,
}

/// One action waiting at the gate, described exactly.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Action {
    pub client: String,
    pub module: String,
    pub tool: String,
    pub class: String,
    pub arguments: Value,
    /// Once only: the answer allows this one run, and no *session* or *always* answer is
    /// offered, honoured or consulted — a confirm-listed program (SPEC §4.4), or a proxy
    /// connection whose command is unknown (`netgate.rs`: one such client stands for every
    /// agent). The name is the wire's (the control protocol carries actions between daemons).
    pub confirm: bool,
    /// A *session* answer lasts for this client until the daemon restarts, not for a
    /// connection: a 2026-07-28 client has no session, and the network proxy's questions come
    /// from commands, not a connection (SPEC §6). The person is offered it in those words.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub until_restart: bool,
}

/// The *session* choice as a 2025-era client's person reads it.
pub const SESSION_CHOICE: &str = "Allow for this session";
/// The *session* choice where it lasts until the daemon restarts ([`Action::until_restart`]).
pub const UNTIL_RESTART_CHOICE: &str = "Allow for this client until the daemon restarts";

/// Whether a call's arguments (as the gate sees them) carry a widening (`needs`, SPEC §6):
/// `bash` and `tmux_start` with one, as their check admitted it, and a `tmux_send` into a
/// session that has one (the check names it there: `hands_shell::Shell::prepare`).
pub fn widens(arguments: &Value) -> bool {
    arguments.get("needs").is_some_and(|n| !n.is_null())
}

/// A widening as a person reads it, one row a grant: how long it lasts, then each `write` path
/// with the identity (device, inode) its check saw — the run gets exactly that folder — and
/// each `network` host.
pub fn widening_rows(needs: &Value) -> Vec<(&'static str, String)> {
    let mut rows = Vec::new();
    let lasts = needs.get("lasts").and_then(Value::as_str).unwrap_or("this run only");
    rows.push(("lasts", lasts.to_string()));
    let list = |key| needs.get(key).and_then(Value::as_array).cloned().unwrap_or_default();
    for w in list("write") {
        let text = match (w.get("path").and_then(Value::as_str), &w) {
            (Some(path), _) => {
                let num = |k| w.get(k).map(Value::to_string).unwrap_or_default();
                format!("{path} (device {}, inode {})", num("device"), num("inode"))
            }
            (None, Value::String(s)) => s.clone(),
            (None, other) => other.to_string(),
        };
        rows.push(("write", text));
    }
    for n in list("network") {
        rows.push(("network", n.as_str().map_or_else(|| n.to_string(), str::to_string)));
    }
    rows
}

impl Action {
    /// A `bash` call of tools-shell by `client`, for the gate's unit tests.
    #[cfg(test)]
    pub fn bash_of(client: &str, command: &str) -> Action {
        Action {
            client: client.into(),
            module: "tools-shell".into(),
            tool: "bash".into(),
            class: "external".into(),
            arguments: serde_json::json!({ "command": command }),
            confirm: false,
            until_restart: false,
        }
    }

    /// Whether the action carries a one-run expansion ([`widens`]): never answered *always*.
    pub fn widens(&self) -> bool {
        widens(&self.arguments)
    }

    /// What the *session* choice is called for this action: see [`Action::until_restart`].
    pub fn session_choice(&self) -> &'static str {
        if self.until_restart { UNTIL_RESTART_CHOICE } else { SESSION_CHOICE }
    }

    /// A digest of everything that identifies the action: changing any argument changes it.
    pub fn digest(&self) -> String {
        use sha2::Digest;
        let text = json!([self.client, self.module, self.tool, self.class, self.arguments]);
        hex::encode(sha2::Sha256::digest(text.to_string().as_bytes()))
    }

    /// The exact action in words a person can judge: tool, module, a widening's grants, and
    /// every argument once ([`Action::argument_rows`]).
    ///
    /// Every part is rendered by [`crate::shown::shown`] (control, invisible and bidirectional
    /// characters visibly escaped), an argv by [`crate::shown::argv`] (its argument boundaries
    /// kept); a description that needed it says so on its second line.
    pub fn describe(&self) -> String {
        let mut escaped = false;
        let mut take = |s: crate::shown::Shown| {
            escaped |= s.escaped;
            s.text
        };
        let show = crate::shown::shown;
        let head = format!(
            "{} wants to run `{}` ({} class) of {}",
            take(show(&self.client)),
            take(show(&self.tool)),
            take(show(&self.class)),
            take(show(&self.module))
        );
        let mut s = String::new();
        if self.until_restart && !self.confirm {
            s.push_str(&format!(
                "\n  for this session: means for client `{}` until the daemon restarts (it has \
                 no session of its own)",
                take(show(&self.client))
            ));
        }
        if self.confirm {
            s.push_str(
                "\n  once only: a yes allows this one run only, no session or always permission \
                 covers it (a confirm-listed program, or a connection whose command is unknown)",
            );
        }
        if let Some(n) = self.arguments.get("needs").filter(|_| self.widens()) {
            s.push_str("\n  needs (a widening; never always):");
            for (key, text) in widening_rows(n) {
                s.push_str(&format!("\n    {key}: {}", take(show(&text))));
            }
        }
        for (key, v) in self.argument_rows() {
            s.push_str(&format!("\n  {key}: {}", take(v)));
        }
        let note = if escaped { format!("\n  {}", crate::shown::NOTE) } else { String::new() };
        format!("{head}{note}{s}")
    }
}

/// The arguments a person reads first, each on a row of its own, in this order.
const NAMED: [&str; 9] =
    ["command", "argv", "binary", "cwd", "repo", "branch", "path", "session", "text"];

impl Action {
    /// The action's arguments as a person reads them, each once: those of [`NAMED`] on rows of
    /// their own (an argv with its argument boundaries, `["a b"]` is not `["a", "b"]`), then
    /// every other one together as JSON (`other arguments`), less a widening's `needs`, which
    /// has rows of its own ([`widening_rows`]). Every part rendered by [`crate::shown::shown`].
    /// (The whole arguments used to follow the named rows: a parked 64 KiB command was shown
    /// twice, and a dashboard page of 32 of them was ~16 MB.)
    pub fn argument_rows(&self) -> Vec<(&'static str, crate::shown::Shown)> {
        let show = crate::shown::shown;
        let Value::Object(all) = &self.arguments else {
            return vec![("arguments", show(&self.arguments.to_string()))];
        };
        let mut rows = Vec::new();
        for key in NAMED {
            if let Some(v) = all.get(key) {
                let v = match v {
                    Value::String(s) => show(s),
                    list @ Value::Array(_) => crate::shown::argv(list),
                    other => show(&other.to_string()),
                };
                rows.push((key, v));
            }
        }
        let widening = self.widens();
        let rest: serde_json::Map<String, Value> = all
            .iter()
            .filter(|(k, _)| !(NAMED.contains(&k.as_str()) || widening && *k == "needs"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if !rest.is_empty() {
            rows.push(("other arguments", show(&Value::Object(rest).to_string())));
        }
        rows
    }
}

/// The gate's answer after asking.
#[derive(Debug)]
pub enum Asked {
    Allowed(Choice, Channel),
    /// Refused, and by whom: a person through a channel, or nobody (`None`: no answer in time,
    /// a state that is invalid, expired or spent, a malformed answer) — the gate fails closed.
    Refused(String, Option<Channel>),
    /// Return this to the client; it retries with the answer.
    InputRequired(InputRequiredResult),
    /// A URL-only client's retry: wait for the person's answer to this parked action
    /// (`Approvals::await_parked`, `parked.rs`).
    Parked(String),
}
