//! What the tmux tools take and return, as their published schemas show them: the parameters
//! of `tmux_start`, `tmux_read`, `tmux_send`, `tmux_list` and `tmux_kill`, a `ready`/`wait`
//! condition, and each result with the text a person reads.

use super::{DEFAULT_WAIT_SECS, MAX_NAME, MAX_QUIET_MS, MAX_WAIT_SECS, MIN_QUIET_MS};
use crate::needs::{Needs, Widening};
use crate::pane::PatternError;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Parameters of `tmux_start`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StartParams {
    /// The command line to keep running (a server, a watcher, a REPL), run with
    /// `bash -c` inside the sandbox.
    pub command: String,
    /// Working folder: absolute (under a root) or relative to the first root. Default: the
    /// first root.
    #[serde(default)]
    pub cwd: Option<String>,
    /// Session name: letters, digits, `_` and `-`, at most 32, not starting with `-`. Default:
    /// `s1`, `s2`, ... (the first free one).
    #[serde(default)]
    pub name: Option<String>,
    /// Wait until the session is ready before returning: `{"port": 8080}` (a TCP listener of
    /// the session on that port), `{"pattern": "regex"}` (the pattern appears in its output)
    /// or `{"quiet_ms": 500}` (no new output for that long). Returns early when the command
    /// ends (`ended`, with its exit status). Default: return at once.
    #[serde(default)]
    pub ready: Option<Condition>,
    /// How long `ready` may wait, in seconds. Default 30, at most 600; then `timed_out`.
    #[serde(default)]
    pub timeout_secs: Option<u64>,
    /// Optional: a widening for the session's life, which a person approves; every
    /// `tmux_send` into the session is then asked too.
    #[serde(default)]
    pub needs: Option<Needs>,
}

/// What `ready` and `wait` wait for: exactly one of these.
#[derive(Debug, Default, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Condition {
    /// `tmux_start` only: a TCP port on which a process of the session listens.
    #[serde(default)]
    pub port: Option<u16>,
    /// A regular expression (Rust `regex` syntax, `^`/`$` at line ends, at most 1000
    /// characters) matched against the output as a person sees it (control sequences
    /// stripped); for `tmux_send`, against what follows the echo of the typed text.
    #[serde(default)]
    pub pattern: Option<String>,
    /// No new output for this many milliseconds (50 to 600000).
    #[serde(default)]
    pub quiet_ms: Option<u64>,
    /// `tmux_send` only: the typed command line ended — the pane's bash is back at its
    /// prompt (seen by its `PS0`/`PROMPT_COMMAND` marks), or the session's command ended.
    #[serde(default)]
    pub exit: Option<bool>,
}

/// A checked [`Condition`].
#[derive(Debug, Clone)]
pub enum Until {
    Port(u16),
    Pattern(regex::Regex),
    Quiet(std::time::Duration),
    Exit,
}

/// A tmux tool's argument that cannot be used: a session name, a `ready`/`wait` condition
/// (`what` names which), a timeout. The call fails before tmux is asked anything; the text says
/// what to send instead.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ArgError {
    /// Quoted at most [`hands_roots::QUOTE_MAX`] characters long: an error never echoes a flood.
    #[error(
        "invalid session name {:?}: use 1 to {MAX_NAME} letters, digits, `_` or `-`, not \
         starting with `-` (tmux target syntax such as `:` or `.` is not allowed)",
        hands_roots::shown(.0)
    )]
    SessionName(String),
    /// None, or more than one, of the condition's fields is given (`allowed` lists them).
    #[error("{what} takes exactly one of {allowed}; e.g. {{\"pattern\": \"ready\"}}")]
    NotOne { what: &'static str, allowed: &'static str },
    /// `port` outside `tmux_start`'s `ready`.
    #[error("{what} takes {allowed}; port is for tmux_start's ready")]
    PortNotHere { what: &'static str, allowed: &'static str },
    #[error("ready.port must be between 1 and 65535; got 0")]
    PortZero,
    #[error("{what}.{source}")]
    Pattern { what: &'static str, source: PatternError },
    #[error("{what}.quiet_ms must be between {MIN_QUIET_MS} and {MAX_QUIET_MS}; got {ms}")]
    QuietRange { what: &'static str, ms: u64 },
    /// A quiet spell no shorter than the wait could only time out.
    #[error(
        "{what}.quiet_ms ({ms}) must be shorter than timeout_secs ({timeout} s), or the wait \
         could only time out"
    )]
    QuietTooLong { what: &'static str, ms: u64, timeout: u64 },
    /// `exit` outside `tmux_send`'s `wait`.
    #[error("{what} takes {allowed}; exit is for tmux_send's wait")]
    ExitNotHere { what: &'static str, allowed: &'static str },
    #[error("{what}.exit can only be true; leave wait out to return at once")]
    ExitFalse { what: &'static str },
    #[error("timeout_secs must be between 1 and {MAX_WAIT_SECS}; got {0}")]
    Timeout(u64),
}

impl Condition {
    /// Checks that exactly one condition is given and that it can be waited for; `what` is
    /// the parameter's name (`ready` or `wait`), `timeout` the wait's bound.
    pub fn check(&self, what: &'static str, timeout: u64) -> Result<Until, ArgError> {
        let given = [
            self.port.is_some(),
            self.pattern.is_some(),
            self.quiet_ms.is_some(),
            self.exit.is_some(),
        ];
        let allowed =
            if what == "ready" { "port, pattern or quiet_ms" } else { "pattern, quiet_ms or exit" };
        if given.iter().filter(|g| **g).count() != 1 {
            return Err(ArgError::NotOne { what, allowed });
        }
        if let Some(p) = self.port {
            if what != "ready" {
                return Err(ArgError::PortNotHere { what, allowed });
            }
            if p == 0 {
                return Err(ArgError::PortZero);
            }
            return Ok(Until::Port(p));
        }
        if let Some(p) = &self.pattern {
            return crate::pane::pattern(p)
                .map(Until::Pattern)
                .map_err(|source| ArgError::Pattern { what, source });
        }
        if let Some(ms) = self.quiet_ms {
            if !(MIN_QUIET_MS..=MAX_QUIET_MS).contains(&ms) {
                return Err(ArgError::QuietRange { what, ms });
            }
            if ms >= timeout.saturating_mul(1000) {
                return Err(ArgError::QuietTooLong { what, ms, timeout });
            }
            return Ok(Until::Quiet(std::time::Duration::from_millis(ms)));
        }
        match self.exit {
            Some(true) if what != "ready" => Ok(Until::Exit),
            Some(true) => Err(ArgError::ExitNotHere { what, allowed }),
            _ => Err(ArgError::ExitFalse { what }),
        }
    }
}

/// Checks `timeout_secs` of a wait: the default, or 1 to 600.
pub fn wait_secs(t: Option<u64>) -> Result<u64, ArgError> {
    let t = t.unwrap_or(DEFAULT_WAIT_SECS);
    if t == 0 || t > MAX_WAIT_SECS {
        return Err(ArgError::Timeout(t));
    }
    Ok(t)
}

/// Parameters of `tmux_read`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadParams {
    /// The session's name.
    pub session: String,
    /// How many of the last lines of the pane to return (with `since`: the first lines after
    /// the cursor). Default 100, at most 5000.
    #[serde(default)]
    pub lines: Option<u32>,
    /// A `cursor` from an earlier tmux tool result: return only what the pane printed after
    /// it, oldest first (then `more` says whether to read again with the new `cursor`).
    #[serde(default)]
    pub since: Option<u64>,
}

/// Parameters of `tmux_send`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SendParams {
    /// The session's name.
    pub session: String,
    /// Text typed literally into the pane (no tmux key names, no format expansion).
    pub text: String,
    /// Press Enter after the text. Default true.
    #[serde(default)]
    pub enter: Option<bool>,
    /// Wait before returning: `{"pattern": "regex"}` (appears in the output after the echo
    /// of the text), `{"quiet_ms": 300}` (no new output for that long) or `{"exit": true}`
    /// (the typed command ended: the pane runs bash, or the session's command ends). The
    /// result then holds the text printed since the send. Default: return at once.
    #[serde(default)]
    pub wait: Option<Condition>,
    /// How long `wait` may wait, in seconds. Default 30, at most 600; then `timed_out`.
    #[serde(default)]
    pub timeout_secs: Option<u64>,
}

/// Parameters of `tmux_list` (none).
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListParams {}

/// Parameters of `tmux_kill`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KillParams {
    /// The session's name.
    pub session: String,
}

/// A session's state: its command still runs, or it ended (with `exit_status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum State {
    Running,
    Ended,
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            State::Running => "running",
            State::Ended => "ended",
        })
    }
}

/// What a session runs and how it stands, as `tmux_start` and `tmux_list` report it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Facts {
    pub command: String,
    pub cwd: String,
    /// When it started: seconds since the UNIX epoch.
    pub started: u64,
    pub state: State,
    /// The command's exit status once it ended (128 + N for signal N).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_status: Option<i32>,
    /// The widening a person approved for the session (`needs` of `tmux_start`): it lasts for
    /// the session's life, and every `tmux_send` into it is asked again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub needs: Option<Widening>,
}

impl fmt::Display for Facts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.state)?;
        if let Some(s) = self.exit_status {
            write!(f, " (exit status {s})")?;
        }
        write!(f, "  cwd {}  started {}  $ {}", self.cwd, self.started, self.command)?;
        match &self.needs {
            Some(w) => write!(f, "  [widened: {w}]"),
            None => Ok(()),
        }
    }
}

/// One session, as `tmux_list` reports it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Session {
    pub name: String,
    #[serde(flatten)]
    pub facts: Facts,
    /// Pass as `since` to tmux_read to get only what the pane prints from now on.
    pub cursor: u64,
    /// Kept past the daemon that started it (`keep_sessions`): it runs until tmux_kill or
    /// `hands stop`; otherwise it ends with its daemon.
    pub kept: bool,
}

impl fmt::Display for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}  {}{}", self.name, self.facts, if self.kept { "  (kept)" } else { "" })
    }
}

/// The result of `tmux_start`: the session's name, which tmux_read, tmux_send and tmux_kill
/// take as `session`, and what it runs.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Started {
    /// The session's name: pass it as `session` to tmux_read, tmux_send and tmux_kill.
    pub session: String,
    #[serde(flatten)]
    pub facts: Facts,
    /// The sandbox's containment tier (`full`, or what is missing), as `bash` reports it.
    pub containment: String,
    /// With `ready`: whether it held (false when the command ended first or on timeout).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    /// `ready` did not hold within `timeout_secs`.
    pub timed_out: bool,
    /// The command has ended (see `exit_status`).
    pub ended: bool,
    /// With `ready`: milliseconds from the command's start to this answer.
    pub waited_ms: u64,
    /// The last lines of the pane (at most 20).
    pub text: String,
    /// TCP ports on which processes of the session listen.
    pub ports: Vec<u16>,
    /// Pass as `since` to tmux_read to get only what the pane prints after this result.
    pub cursor: u64,
    /// What the session's walls refused while it started (a `.git` or protected path its
    /// command tried to create, a connection the network proxy refused); `tmux_read` and
    /// `tmux_send` list what comes after.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub denied: Vec<crate::bash::Denied>,
}

impl fmt::Display for Started {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "session {}  {} · containment: {}", self.session, self.facts, self.containment)?;
        match (self.ready, self.timed_out, self.ended) {
            (Some(true), ..) => write!(f, "\nready after {} ms", self.waited_ms)?,
            (Some(false), _, true) => write!(f, "\nnot ready: the command ended first")?,
            (Some(false), true, _) => {
                write!(f, "\nnot ready: timed out after {} ms", self.waited_ms)?
            }
            _ => {}
        }
        if !self.ports.is_empty() {
            let ports: Vec<String> = self.ports.iter().map(u16::to_string).collect();
            write!(f, "\nlistening on {}", ports.join(", "))?;
        }
        if !self.text.is_empty() {
            write!(f, "\n{}", self.text)?;
        }
        write!(f, "\n[cursor {}]", self.cursor)?;
        crate::bash::write_denied(f, &self.denied)
    }
}

/// The result of `tmux_list`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ListOutput {
    pub sessions: Vec<Session>,
}

impl fmt::Display for ListOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.sessions.is_empty() {
            return f.write_str("no tmux sessions");
        }
        for (i, s) in self.sessions.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{s}")?;
        }
        Ok(())
    }
}

/// The result of `tmux_read`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ReadOutput {
    pub session: String,
    /// The last lines of the pane (control characters escaped).
    pub text: String,
    /// How many lines `text` holds.
    pub lines: usize,
    /// The session's command has ended.
    pub ended: bool,
    /// Its exit status once ended (128 + N for signal N).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_status: Option<i32>,
    /// `text` was cut to the character budget (its end is kept; with `since`, a line longer
    /// than the budget was cut).
    pub truncated: bool,
    /// Pass as `since` to get only what the pane prints after this text.
    pub cursor: u64,
    /// With `since`: more output follows; read again with `cursor`.
    pub more: bool,
    /// With `since`: lines printed after it that are no longer kept (the log keeps the last
    /// 8 MiB of output), so not in `text`.
    pub lost_lines: u64,
    /// The widening a person approved for the session, if any (see `tmux_list`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub needs: Option<Widening>,
    /// What the session's walls refused since the result before (a `.git` or protected path
    /// a pane tried to create, a connection the network proxy refused), so a denial is not
    /// taken for a broken tool.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub denied: Vec<crate::bash::Denied>,
}

impl fmt::Display for ReadOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.lost_lines > 0 {
            writeln!(f, "[{} earlier lines no longer kept]", self.lost_lines)?;
        }
        f.write_str(&self.text)?;
        match (self.ended, self.exit_status) {
            (true, Some(s)) => write!(f, "\n[session {} ended, exit status {s}", self.session)?,
            (true, None) => write!(f, "\n[session {} ended", self.session)?,
            _ => write!(f, "\n[session {} running", self.session)?,
        }
        let more = if self.more { "; more follows" } else { "" };
        write!(f, "; cursor {}{more}]", self.cursor)?;
        if let Some(w) = &self.needs {
            write!(f, "\n[widened: {w}; every tmux_send into it is asked]")?;
        }
        crate::bash::write_denied(f, &self.denied)
    }
}

/// The result of `tmux_send`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SendOutput {
    pub session: String,
    /// Characters typed (Enter not counted).
    pub sent_chars: usize,
    pub enter: bool,
    /// The sandbox's containment tier (`full`, or what is missing), as `bash` reports it.
    pub containment: String,
    /// With `wait`: what the pane printed after the send, the echo of the typed text left
    /// out (its end, when long: see `truncated`); empty without `wait`.
    pub text: String,
    /// `text` is only the end of it; tmux_read with `since` = `sent_at` pages through it all.
    pub truncated: bool,
    /// With `wait`: whether it held (false on timeout, or when the session's command ended
    /// first while waiting for a pattern or quiet).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    /// `wait` did not hold within `timeout_secs`.
    pub timed_out: bool,
    /// The session's command has ended (see `exit_status`).
    pub ended: bool,
    /// With `wait: {exit: true}`: the typed command's exit status (from the pane's bash), or
    /// the session's once its command ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_status: Option<i32>,
    /// With `wait`: milliseconds from the typing to this answer.
    pub waited_ms: u64,
    /// The cursor just before the text was typed.
    pub sent_at: u64,
    /// Pass as `since` to tmux_read to get what the pane prints after this result.
    pub cursor: u64,
    /// What the session's walls refused since the result before (a `.git` or protected path
    /// a pane tried to create, a connection the network proxy refused), so a denial is not
    /// taken for a broken tool.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub denied: Vec<crate::bash::Denied>,
}

impl fmt::Display for SendOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let enter = if self.enter { " and Enter" } else { "" };
        write!(
            f,
            "typed {} characters{enter} into {} · containment: {}",
            self.sent_chars, self.session, self.containment
        )?;
        match (self.ready, self.timed_out) {
            (Some(false), true) => write!(f, "\nwait timed out after {} ms", self.waited_ms)?,
            (Some(false), _) => write!(f, "\nwait did not hold: the session's command ended")?,
            (Some(true), _) => write!(f, "\nwaited {} ms", self.waited_ms)?,
            _ => {}
        }
        if let Some(s) = self.exit_status {
            write!(f, " (exit status {s})")?;
        }
        if !self.text.is_empty() {
            let cut = if self.truncated { "[...]\n" } else { "" };
            write!(f, "\n{cut}{}", self.text)?;
        }
        write!(f, "\n[cursor {}]", self.cursor)?;
        crate::bash::write_denied(f, &self.denied)
    }
}

/// The result of `tmux_kill`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct KillOutput {
    pub session: String,
    /// The session existed and it and every process it started are gone.
    pub killed: bool,
    /// How much the pane had printed (its last cursor).
    pub cursor: u64,
}

impl fmt::Display for KillOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "session {} and all its processes ended", self.session)
    }
}
