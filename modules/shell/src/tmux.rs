//! tools-shell's tmux tools without MCP or the sandbox: their parameters and results, the rules
//! for session names, the tmux command lines (built with `tmux_interface`) and the reading of
//! tmux's answers. What the tools take and return is `tmux/tool_types.rs`.
//!
//! Every session has a tmux server of its own (one PID namespace each, so killing a session
//! kills every process it started); the daemon runs these command lines inside the module's
//! sandbox, never on the host.

use crate::capture::render;
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

mod tool_types;
pub use tool_types::ArgError;
pub use tool_types::{
    Condition, Facts, KillOutput, KillParams, ListOutput, ListParams, ReadOutput, ReadParams,
    SendOutput, SendParams, Session, StartParams, Started, State, Until, wait_secs,
};

/// Checks a session name: tmux target syntax (`:`, `.`), option-like names, whitespace and
/// anything outside `[A-Za-z0-9_-]` are refused.
pub fn check_name(name: &str) -> Result<(), ArgError> {
    let ok_chars = name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if name.is_empty() || name.len() > MAX_NAME || !ok_chars || name.starts_with('-') {
        return Err(ArgError::SessionName(name.to_string()));
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
        denied: Vec::new(),
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
    fn a_huge_name_is_not_echoed_whole() {
        // Found by the fourth attack pass: a 5 MB name came back whole in the error.
        let e = check_name(&"A".repeat(5_000_000)).unwrap_err().to_string();
        assert!(
            e.len() < 1_000 && e.contains("5000000 bytes in all"),
            "{}",
            &e[..200.min(e.len())]
        );
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
