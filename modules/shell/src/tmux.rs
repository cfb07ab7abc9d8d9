//! tools-shell's tmux tools without MCP or the sandbox: their parameters and results, the rules
//! for session names, the tmux command lines (built with `tmux_interface`) and the reading of
//! tmux's answers.
//!
//! Every session has a tmux server of its own (one PID namespace each, so killing a session
//! kills every process it started); the daemon runs these command lines inside the module's
//! sandbox, never on the host.

use crate::capture::render;
use crate::needs::{Needs, Widening};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::fmt;
use tmux_interface::{
    CapturePane, DisplayMessage, NewSession, PipePane, RunShell, SendKeys, SetOption, Tmux,
    TmuxCommand,
};

/// Default and maximum of `tmux_read`'s `lines`.
pub const DEFAULT_LINES: u32 = 100;
pub const MAX_LINES: u32 = 5000;
/// The longest session name.
pub const MAX_NAME: usize = 32;
/// The most characters `tmux_send` types in one call.
pub const MAX_SEND_CHARS: usize = 16 * 1024;
/// Scrollback each pane keeps (a little over `MAX_LINES`).
const HISTORY: &str = "6000";
/// The pane size of a new session.
const WIDTH: usize = 200;
const HEIGHT: usize = 50;
/// Default and maximum of `timeout_secs` for `ready` and `wait`.
pub const DEFAULT_WAIT_SECS: u64 = 30;
pub const MAX_WAIT_SECS: u64 = 600;
/// The bounds of `quiet_ms`.
pub const MIN_QUIET_MS: u64 = 50;
pub const MAX_QUIET_MS: u64 = 600_000;
/// The pane's output log (`pipe-pane` into `split`): files `out.NNNNNN` of `LOG_CHUNK` bytes
/// in the session's socket folder, the newest `LOG_KEEP` of them kept; a removed file's line
/// count is appended to `dropped` as `INDEX LINES`.
pub const LOG_CHUNK: u64 = 1 << 20;
pub const LOG_KEEP: usize = 8;
/// Made by the log's writer once it runs; the pane's command waits for it (at most 2 s), so
/// that its first output is in the log.
pub const LOG_READY: &str = "piped";
pub const LOG_DROPPED: &str = "dropped";
pub const LOG_PREFIX: &str = "out.";

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

impl Condition {
    /// Checks that exactly one condition is given and that it can be waited for; `what` is
    /// the parameter's name (`ready` or `wait`), `timeout` the wait's bound.
    pub fn check(&self, what: &str, timeout: u64) -> Result<Until, String> {
        let given = [
            self.port.is_some(),
            self.pattern.is_some(),
            self.quiet_ms.is_some(),
            self.exit.is_some(),
        ];
        let allowed =
            if what == "ready" { "port, pattern or quiet_ms" } else { "pattern, quiet_ms or exit" };
        if given.iter().filter(|g| **g).count() != 1 {
            return Err(format!(
                "{what} takes exactly one of {allowed}; e.g. {{\"pattern\": \"ready\"}}"
            ));
        }
        if let Some(p) = self.port {
            if what != "ready" {
                return Err(format!("{what} takes {allowed}; port is for tmux_start's ready"));
            }
            if p == 0 {
                return Err("ready.port must be between 1 and 65535; got 0".into());
            }
            return Ok(Until::Port(p));
        }
        if let Some(p) = &self.pattern {
            return crate::pane::pattern(p).map(Until::Pattern).map_err(|e| format!("{what}.{e}"));
        }
        if let Some(ms) = self.quiet_ms {
            if !(MIN_QUIET_MS..=MAX_QUIET_MS).contains(&ms) {
                return Err(format!(
                    "{what}.quiet_ms must be between {MIN_QUIET_MS} and {MAX_QUIET_MS}; got {ms}"
                ));
            }
            if ms >= timeout.saturating_mul(1000) {
                return Err(format!(
                    "{what}.quiet_ms ({ms}) must be shorter than timeout_secs ({timeout} s), or \
                     the wait could only time out"
                ));
            }
            return Ok(Until::Quiet(std::time::Duration::from_millis(ms)));
        }
        match self.exit {
            Some(true) if what != "ready" => Ok(Until::Exit),
            Some(true) => Err(format!("{what} takes {allowed}; exit is for tmux_send's wait")),
            _ => Err(format!("{what}.exit can only be true; leave wait out to return at once")),
        }
    }
}

/// Checks `timeout_secs` of a wait: the default, or 1 to 600.
pub fn wait_secs(t: Option<u64>) -> Result<u64, String> {
    let t = t.unwrap_or(DEFAULT_WAIT_SECS);
    if t == 0 || t > MAX_WAIT_SECS {
        return Err(format!("timeout_secs must be between 1 and {MAX_WAIT_SECS}; got {t}"));
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
        write!(f, "\n[cursor {}]", self.cursor)
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
        match &self.needs {
            Some(w) => write!(f, "\n[widened: {w}; every tmux_send into it is asked]"),
            None => Ok(()),
        }
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
        write!(f, "\n[cursor {}]", self.cursor)
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

/// Checks a session name: tmux target syntax (`:`, `.`), option-like names, whitespace and
/// anything outside `[A-Za-z0-9_-]` are refused.
pub fn check_name(name: &str) -> Result<(), String> {
    let ok_chars = name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if name.is_empty() || name.len() > MAX_NAME || !ok_chars || name.starts_with('-') {
        return Err(format!(
            "invalid session name {name:?}: use 1 to {MAX_NAME} letters, digits, `_` or `-`, \
             not starting with `-` (tmux target syntax such as `:` or `.` is not allowed)"
        ));
    }
    Ok(())
}

/// The first free default name, `s1`, `s2`, ...
pub fn default_name(taken: &[String]) -> String {
    (1..).map(|i| format!("s{i}")).find(|n| !taken.contains(n)).unwrap_or_default()
}

/// tmux reads an argument that ends in `;` as the end of a command (and `\;` as a literal `;`),
/// so a trailing `;` gets its backslash; nothing else in an argument is special.
fn arg(s: &str) -> String {
    match s.strip_suffix(';') {
        Some(head) => format!("{head}\\;"),
        None => s.to_string(),
    }
}

/// `tmux -S SOCKET` followed by the commands, joined by `;` arguments.
fn client(socket: &str, commands: Vec<Vec<String>>) -> Vec<String> {
    let mut v: Vec<String> =
        Tmux::new().socket_path(socket).build().to_vec().iter().map(|a| a.to_string()).collect();
    for (i, c) in commands.into_iter().enumerate() {
        if i > 0 {
            v.push(";".into());
        }
        v.extend(c);
    }
    v
}

fn words(cmd: TmuxCommand<'_>) -> Vec<String> {
    cmd.to_vec().iter().map(|a| arg(a)).collect()
}

/// The server of one session, run in the foreground (`-D`) as the sandbox's PID 1, with no
/// config file of the user's.
pub fn server_argv(socket: &str) -> Vec<String> {
    Tmux::new()
        .socket_path(socket)
        .file("/dev/null")
        .no_daemon()
        .build()
        .to_vec()
        .iter()
        .map(|a| a.to_string())
        .collect()
}

/// The line the pane's shell runs before the command: on exit, the shell asks the terminal
/// (tmux) where its cursor is and waits for the answer, at most 2 s. tmux answers only once it
/// has read and drawn everything written before the question — and tmux (3.3) closes a pane's
/// terminal as soon as its process has exited, dropping output it had not read yet, which lost
/// the whole output of a command that ends at once on a busy machine. The exit status is the
/// command's (an EXIT trap keeps it); nothing is drawn (the question is an escape sequence,
/// and echo is off before it is asked, as the terminal echoes an answer when it arrives);
/// skipped when stdin or stdout is not the terminal.
const DRAIN_ON_EXIT: &str = r#"trap 'if [ -t 0 ] && [ -t 1 ]; then stty -echo 2>/dev/null; printf "\033[6n"; IFS= read -rs -t 2 -d R _; fi' EXIT"#;

/// What the pane's shell runs: `trap` (its own line), then the command as written, in a
/// subshell of its own lines — so that a command that `exec`s replaces the subshell, not the
/// shell whose EXIT trap must still run.
fn pane_script(trap: &str, command: &str) -> String {
    format!("{trap}\n(\n{command}\n)")
}

/// A word for `sh`: single-quoted.
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// What the pane's shell runs before [`pane_script`]: the shell-integration marks (OSC 133)
/// an interactive bash in the pane prints — `C` when it starts a command line it read
/// (`PS0`), `D;STATUS` when it is back at its prompt (`PROMPT_COMMAND`) — by which
/// `tmux_send`'s `wait: {exit: true}` knows the typed command ended; then a wait (at most
/// 2 s) for the output log's writer ([`pipe_argv`]), so that no output precedes the log.
fn prelude(log_dir: &str) -> String {
    let ready = sh_quote(&format!("{log_dir}/{LOG_READY}"));
    format!(
        "export PS0=$'\\e]133;C\\a' PROMPT_COMMAND='printf \"\\033]133;D;%s\\007\" \"$?\"'\n\
         _i=0; until [ -e {ready} ] || [ $_i -ge 200 ]; do sleep 0.01; _i=$((_i+1)); done; unset _i"
    )
}

/// The pane's output log: tmux pipes what it reads from the pane into `split`, which writes
/// `out.000000`, `out.000001`, ... of [`LOG_CHUNK`] bytes each, as it arrives (unbuffered;
/// `head` would hold back a prompt without a newline); a loop beside it removes all but the
/// newest [`LOG_KEEP`], noting each one's line count in [`LOG_DROPPED`]. Runs in the
/// session's sandbox (tmux's `sh -c`), in its socket folder; tmux expands formats in it, so
/// `#` is doubled.
fn pipe_script(log_dir: &str) -> String {
    let script = format!(
        "cd {dir} || exit 1; p=$$; \
         ( while kill -0 $p 2>/dev/null; do sleep 1; set -- {LOG_PREFIX}*; \
           while [ $# -gt {LOG_KEEP} ]; do echo \"${{1#{LOG_PREFIX}}} $(wc -l < \"$1\")\" >> {LOG_DROPPED}; \
           rm -f \"$1\"; shift; done; done ) </dev/null >/dev/null 2>&1 & \
         : > {LOG_READY}; exec split -b {LOG_CHUNK} -d -a 6 - {LOG_PREFIX}",
        dir = sh_quote(log_dir),
    );
    script.replace('#', "##")
}

/// Makes the session: panes stay after their command ends, the command runs with `shell -c`
/// after [`prelude`] and [`DRAIN_ON_EXIT`] ([`pane_script`]), and its output is logged in
/// `log_dir` ([`pipe_script`]).
pub fn new_session_argv(
    socket: &str,
    name: &str,
    cwd: &str,
    shell: &str,
    command: &str,
    log_dir: &str,
) -> Vec<String> {
    let set = |option: &'static str, value: &str| {
        words(SetOption::new().global().option(option).value(value.to_string()).build())
    };
    let new = NewSession::new()
        .detached()
        .session_name(name.to_string())
        .start_directory(cwd.to_string())
        .width(WIDTH)
        .height(HEIGHT)
        .shell_command(format!("{}\n{}", prelude(log_dir), pane_script(DRAIN_ON_EXIT, command)))
        .build();
    // `stdin()` is tmux's `-O`: the pane's output goes to the command's stdin.
    let pipe = PipePane::new()
        .stdin()
        .target_pane(format!("={name}:"))
        .shell_command(pipe_script(log_dir))
        .build();
    client(
        socket,
        vec![
            set("remain-on-exit", "on"),
            // No "Pane is dead" line in the pane's text (`-q`: a tmux without it goes on).
            words(
                SetOption::new().global().quiet().option("remain-on-exit-format").value("").build(),
            ),
            set("default-shell", shell),
            set("history-limit", HISTORY),
            set("status", "off"),
            words(new),
            words(pipe),
        ],
    )
}

/// The format `read_argv` prints first: dead flag, exit status and ending signal of the pane.
const STATE_FORMAT: &str = "#{pane_dead}:#{pane_dead_status}:#{pane_dead_signal}";

/// Prints the pane's state line, then the last `lines` lines of history and screen, wrapped
/// lines joined.
pub fn read_argv(socket: &str, name: &str, lines: u32) -> Vec<String> {
    let target = format!("={name}:");
    let state =
        DisplayMessage::new().print().target_pane(target.clone()).message(STATE_FORMAT).build();
    let capture = CapturePane::new()
        .stdout()
        .join()
        .start_line(format!("-{lines}"))
        .target_pane(target)
        .build();
    client(socket, vec![words(state), words(capture)])
}

/// Types `text` literally (`-l`), then Enter when asked.
pub fn send_argv(socket: &str, name: &str, text: &str, enter: bool) -> Vec<String> {
    let target = format!("={name}:");
    let mut commands = Vec::new();
    if !text.is_empty() {
        let mut typed = words(SendKeys::new().disable_lookup().target_pane(target.clone()).build());
        typed.push("--".into());
        typed.push(arg(text));
        commands.push(typed);
    }
    if enter {
        commands.push(words(SendKeys::new().target_pane(target).key("Enter").build()));
    }
    client(socket, commands)
}

/// Makes the server reap its children: `run-shell true` forks a job whose end brings a SIGCHLD,
/// and tmux's handler then reaps every ended child. Needed because tmux (through libutempter)
/// sets SIGCHLD to its default while it registers a new pane, and a pane whose command ends in
/// that window loses its SIGCHLD: tmux sees the pane closed but never learns its exit status.
pub fn reap_argv(socket: &str) -> Vec<String> {
    client(socket, vec![words(RunShell::new().shell_command("true").build())])
}

/// Reads `read_argv`'s state line: `(ended, exit_status)`.
pub fn parse_state(line: &str) -> Option<(bool, Option<i32>)> {
    let mut f = line.trim().split(':');
    let (dead, status, signal) = (f.next()?, f.next()?, f.next().unwrap_or(""));
    // A command ended by signal N reads as 128 + N, as a shell reports it.
    let by_signal = signal.parse::<i32>().ok().map(|n| 128 + n);
    match dead {
        "1" => Some((true, status.parse().ok().or(by_signal))),
        "0" | "" => Some((false, None)),
        _ => None,
    }
}

/// Shapes `read_argv`'s output into `tmux_read`'s result: trailing blank screen rows dropped,
/// the last `lines` lines kept, then the end kept within `max_chars`.
pub fn read_output(
    session: &str,
    stdout: &[u8],
    lines: u32,
    max_chars: usize,
) -> Option<ReadOutput> {
    let text = String::from_utf8_lossy(stdout);
    let (state, pane) = text.split_once('\n').unwrap_or((&text, ""));
    let (ended, exit_status) = parse_state(state)?;
    let mut rows: Vec<&str> = pane.lines().map(str::trim_end).collect();
    while rows.last().is_some_and(|r| r.is_empty()) {
        rows.pop();
    }
    let keep = rows.len().saturating_sub(lines as usize);
    let rows = &rows[keep..];
    let joined = rows.join("\n");
    let r = render(joined.as_bytes(), joined.len() as u64, max_chars);
    Some(ReadOutput {
        session: session.to_string(),
        lines: r.text.lines().count(),
        text: r.text,
        ended,
        exit_status,
        truncated: r.dropped_bytes > 0,
        cursor: 0,
        more: false,
        lost_lines: 0,
        needs: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_with_tmux_syntax_or_option_shape_are_refused() {
        for bad in ["", "-x", "a:b", "a.b", "a b", "$1", "=a", "a;", &"x".repeat(33), "é"] {
            assert!(check_name(bad).is_err(), "{bad:?} must be refused");
        }
        for good in ["s1", "web_server", "a-b", "X", &"x".repeat(32)] {
            assert!(check_name(good).is_ok(), "{good:?} must be accepted");
        }
    }

    #[test]
    fn the_first_free_default_name_is_chosen() {
        assert_eq!(default_name(&[]), "s1");
        assert_eq!(default_name(&["s1".into(), "s3".into()]), "s2");
    }

    #[test]
    fn a_trailing_semicolon_is_escaped_and_nothing_else_changes() {
        assert_eq!(arg("a;"), "a\\;");
        assert_eq!(arg(";"), "\\;");
        assert_eq!(arg("a\\;"), "a\\\\;");
        assert_eq!(arg("C-c #{x} ; y"), "C-c #{x} ; y");
    }

    #[test]
    fn send_types_literally_after_a_double_dash_then_enter() {
        let v = send_argv("/s", "w", "-rf ;", true);
        assert_eq!(
            v,
            [
                "tmux",
                "-S",
                "/s",
                "send-keys",
                "-l",
                "-t",
                "=w:",
                "--",
                "-rf \\;",
                ";",
                "send-keys",
                "-t",
                "=w:",
                "Enter"
            ]
        );
    }

    #[test]
    fn the_command_runs_after_the_drain_line_and_keeps_its_exit_status() {
        let v = new_session_argv("/s", "w", "/", "bash", "echo a; exit 3", "/l");
        let pipe = v.iter().position(|a| a == "pipe-pane").unwrap();
        let script = &v[pipe - 2];
        assert_eq!(
            script,
            &format!("{}\n{}", prelude("/l"), pane_script(DRAIN_ON_EXIT, "echo a; exit 3"))
        );
        assert_eq!(&v[pipe..pipe + 4], ["pipe-pane", "-O", "-t", "=w:"]);
        assert_eq!(v[pipe + 4], pipe_script("/l"));
        // The log's writer, run by sh from a folder named with a quote and a `#` (which tmux
        // would expand, so it is doubled): it writes what comes in, at once, to out.000000.
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("it's #1");
        std::fs::create_dir(&log).unwrap();
        let script = pipe_script(log.to_str().unwrap()).replace("##", "#");
        let mut child = std::process::Command::new("sh")
            .arg("-c")
            .arg(&script)
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b">>> ").unwrap();
        let out = log.join("out.000000");
        let start = std::time::Instant::now();
        while std::fs::read(&out).unwrap_or_default() != b">>> " && start.elapsed().as_secs() < 5 {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert_eq!(std::fs::read(&out).unwrap(), b">>> ", "a prompt without a newline is logged");
        assert!(log.join(LOG_READY).exists());
        drop(stdin);
        assert!(child.wait().unwrap().success());
        let run = |trap: &str, cmd: &str| {
            std::process::Command::new("bash")
                .arg("-c")
                .arg(pane_script(trap, cmd))
                .stdin(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .output()
                .unwrap()
        };
        // Run by bash outside a terminal: the trap skips the question, the status is kept,
        // however the command ends (a comment or a here-document on its last line included).
        for (cmd, status) in [
            ("echo a; exit 3", 3),
            ("false", 1),
            ("true", 0),
            ("nosuch_cmd_x", 127),
            ("exec sh -c 'exit 5'", 5),
            ("true # a comment", 0),
            ("cat <<EOF\nx\nEOF", 0),
        ] {
            assert_eq!(run(DRAIN_ON_EXIT, cmd).status.code(), Some(status), "{cmd}");
        }
        // A command that `exec`s still leaves the shell to run its EXIT trap (the drain).
        let marked = "trap 'echo TRAPPED' EXIT";
        for cmd in ["exec printf 'x\\n'", "printf 'x\\n'", "exec sh -c 'echo x; exit 2'"] {
            let out = run(marked, cmd);
            assert_eq!(String::from_utf8_lossy(&out.stdout), "x\nTRAPPED\n", "{cmd}");
        }
    }

    #[test]
    fn state_lines_are_read() {
        assert_eq!(parse_state("1:3:\n"), Some((true, Some(3))));
        assert_eq!(parse_state("1::15"), Some((true, Some(143))));
        assert_eq!(parse_state("0:"), Some((false, None)));
        assert_eq!(parse_state("garbage"), None);
    }

    #[test]
    fn read_keeps_the_last_lines_without_blank_screen_rows() {
        let out = b"1:3:\na\nb\nc\n\n\n";
        let r = read_output("s", out, 2, 1000).unwrap();
        assert_eq!(r.text, "b\nc");
        assert_eq!((r.lines, r.ended, r.exit_status, r.truncated), (2, true, Some(3), false));
    }
}
