//! The catalogue of tools-shell as data: each tool's [`Spec`] beside the function that implements
//! it, in the order `tools/list` shows them (bash, the tmux tools, run, os-*), and which of them
//! the settings publish. The daemon's registry publishes it.

use crate::bash::{BashOutput, BashParams};
use crate::run::{OsToolParams, RunParams};
use crate::service::{Launching, Prepared};
use crate::settings::{ShellSettings, ShellTool};
use crate::tmux as t;
use crate::{Caller, Shell, ShellError};
use hands_tool::{Class, Hints, Made, RegisterTasks, Spec, no_files};
use std::sync::Arc;

/// Runs commands: may destroy, never idempotent; open world with the network grant.
const fn runs(network: bool) -> Hints {
    Hints { read_only: false, destructive: true, idempotent: false, open_world: network }
}

/// Publishes the tools of tools-shell, in order: `bash`, the tmux tools, `run`, `os-*`.
/// `network`: the module holds the `network` grant, so commands reach the network (open world).
///
/// The tools that start a command (`bash`, `tmux_start`, `run`, `os-*`) and those that take a
/// session (`tmux_read`, `tmux_send`, `tmux_kill`) are checked before the gate by
/// [`Shell::prepare`]: a wall missing, the allowlist, the widening (`needs`) a person is asked
/// about, a widened session typed into, a session that is not the caller's (refused before
/// anyone is asked about it).
///
/// With `bash = false`, `bash`, `tmux_start` and `tmux_send` (which run shell text) are left
/// out; `tmux_read`, `tmux_list` and `tmux_kill` stay, because sessions outlive a restart and a
/// change of config, and these only show or end them. `run` is published when
/// `commands.allow` admits something; one `os-*` tool per `tools` entry (the first of two
/// entries with one name wins).
pub fn register<R: RegisterTasks<Shell, ShellError, Caller>>(
    settings: &ShellSettings,
    network: bool,
    r: &mut R,
) {
    if settings.bash {
        r.checked(
            bash(network).into(),
            Arc::new(|sh: &Shell, p: &BashParams, _: &str| {
                sh.check_outputs(p.cwd.as_deref(), &p.outputs)?;
                sh.prepare(Launching::Command {
                    tool: "bash",
                    needs: p.needs.as_ref(),
                    session: false,
                })
            }),
            |sh, p: BashParams, g: Prepared, c| {
                Box::pin(async move { sh.bash(p, g.needs, c).await })
            },
            ToString::to_string,
            BashOutput::take_files,
        );
        r.checked(
            tmux_start(network).into(),
            Arc::new(|sh: &Shell, p: &t::StartParams, _: &str| {
                let needs = p.needs.as_ref();
                sh.prepare(Launching::Command { tool: "tmux_start", needs, session: true })
            }),
            |sh, p: t::StartParams, g: Prepared, c| {
                Box::pin(async move { sh.tmux_start(p, g.needs, c).await })
            },
            ToString::to_string,
            no_files,
        );
    }
    r.checked(
        TMUX_READ.into(),
        Arc::new(|sh: &Shell, p: &t::ReadParams, whose: &str| {
            sh.prepare(Launching::Session { tool: "tmux_read", session: &p.session, whose })
        }),
        |sh, p: t::ReadParams, _: Prepared, c| {
            Box::pin(async move { sh.tmux_read(p, Some(&c.client)).await })
        },
        ToString::to_string,
        no_files,
    );
    if settings.bash {
        r.checked(
            tmux_send(network).into(),
            Arc::new(|sh: &Shell, p: &t::SendParams, whose: &str| {
                sh.prepare(Launching::Send { session: &p.session, whose })
            }),
            |sh, p: t::SendParams, _: Prepared, c| {
                Box::pin(async move { sh.tmux_send(p, c).await })
            },
            ToString::to_string,
            no_files,
        );
    }
    r.task(
        TMUX_LIST,
        |sh, p: t::ListParams, c| Box::pin(async move { sh.tmux_list(p, Some(&c.client)).await }),
        ToString::to_string,
    );
    r.checked(
        tmux_kill(network).into(),
        Arc::new(|sh: &Shell, p: &t::KillParams, whose: &str| {
            sh.prepare(Launching::Session { tool: "tmux_kill", session: &p.session, whose })
        }),
        |sh, p: t::KillParams, _: Prepared, c| {
            Box::pin(async move { sh.tmux_kill(p, Some(&c.client)).await })
        },
        ToString::to_string,
        no_files,
    );
    if settings.policy.admits_something() {
        r.checked(
            Spec { hints: runs(network), ..RUN }.into(),
            Arc::new(|sh: &Shell, p: &RunParams, _: &str| {
                sh.prepare(Launching::Program { tool: "run", argv: Some(p.argv.clone()) })
            }),
            |sh, p: RunParams, g: Prepared, c| {
                Box::pin(async move { sh.run_checked(g, p.cwd, p.timeout_secs, c).await })
            },
            ToString::to_string,
            no_files,
        );
    }
    let mut names: Vec<String> = Vec::new();
    for (i, tool) in settings.tools.iter().enumerate() {
        let Ok(name) = crate::allow::tool_name(&tool.bin, &tool.args) else { continue };
        if names.contains(&name) {
            tracing::warn!(
                "tools-shell: tools[{i}] would publish `{name}` again; only the first entry is published"
            );
            continue;
        }
        names.push(name.clone());
        let made = os_tool(name.clone(), tool, network);
        r.checked(
            made,
            Arc::new(move |sh: &Shell, p: &OsToolParams, _: &str| {
                sh.prepare(Launching::Program { tool: &name, argv: sh.os_argv(i, &p.args) })
            }),
            |sh, p: OsToolParams, g: Prepared, c| {
                Box::pin(async move { sh.run_checked(g, p.cwd, p.timeout_secs, c).await })
            },
            ToString::to_string,
            no_files,
        );
    }
}

fn bash(network: bool) -> Spec {
    Spec {
        name: "bash",
        title: "Run a command",
        description: "Run `command` with bash (non-interactive, stdin /dev/null) inside \
        the sandbox until it ends: it sees only the roots (read-only ones read-only), \
        system folders and a private /tmp and HOME; credential files are masked; no \
        network unless the module holds the network grant (commands still share a \
        private loopback). `cwd` defaults to the first root; `timeout_secs` defaults to \
        120 (max 600), after which the whole process tree is stopped. Returns exit_code \
        (or signal), timed_out, duration_ms and the END of stdout and stderr (capped, \
        with truncated and dropped_bytes; control characters escaped). A non-zero exit \
        is a normal result. `outputs` (at most 8 paths, 20 MiB in all) returns files the \
        command made (a report, an image, an archive) as embedded resources after it ends. \
        For servers and watchers that keep running, use tmux_start.",
        class: Class::External,
        hints: runs(network),
    }
}

fn tmux_start(network: bool) -> Spec {
    Spec {
        name: "tmux_start",
        title: "Start a long-running command",
        description: "Start `command` (a dev server, a watcher, a REPL) in a new tmux \
        session inside the same sandbox as bash; returns `session`, the name the other \
        tmux tools take. It keeps running after this call; its pane stays after it ends \
        so tmux_read can show the output and exit status. `ready` waits until it is up: \
        {\"port\": N} (the session listens on N), {\"pattern\": \"regex\"} (printed) \
        or {\"quiet_ms\": N} (no output for N ms), at most `timeout_secs` (default 30, \
        max 600); if the command ends first you get ended, exit_status and its last lines \
        (ready false), on timeout timed_out. The result has the last lines, the \
        session's listening ports and a `cursor` for tmux_read's since. Your commands in \
        this module share one private loopback, so a server started here is reachable from \
        your bash (and from nothing else). A command that cannot start (not found) is an error.",
        class: Class::External,
        hints: runs(network),
    }
}

const TMUX_READ: Spec = Spec {
    name: "tmux_read",
    title: "Read a tmux session",
    description: "The last `lines` lines (default 100, max 5000) of a session's \
    pane, whether its command has ended, and its exit status once it has. With \
    `since` (a cursor from any tmux result): only what was printed after it, oldest \
    first, at most `lines` lines; `more` says to read again with the new `cursor`; \
    output no longer kept (the last 8 MiB are) is counted in lost_lines.",
    class: Class::Read,
    hints: Hints::LOOKS,
};

fn tmux_send(network: bool) -> Spec {
    Spec {
        name: "tmux_send",
        title: "Type into a tmux session",
        description: "Type `text` literally into a session's pane (no tmux key names or \
        formats are interpreted), then Enter unless `enter` is false. `wait` returns what \
        the pane printed after the typed line (its echo left out): once \
        {\"pattern\": \"regex\"} appears, after {\"quiet_ms\": N} without output, or \
        at {\"exit\": true} when the typed command ends (the pane runs bash; gives \
        exit_status) — at most `timeout_secs` (default 30, max 600), then timed_out. The \
        end is kept when long (truncated); tmux_read since=sent_at has it all.",
        class: Class::External,
        hints: runs(network),
    }
}

const TMUX_LIST: Spec = Spec {
    name: "tmux_list",
    title: "List tmux sessions",
    description: "This module's tmux sessions: name, command, cwd, start time \
    (seconds since the epoch), running or ended (with exit status), cursor.",
    class: Class::Read,
    hints: Hints::LOOKS,
};

fn tmux_kill(network: bool) -> Spec {
    Spec {
        name: "tmux_kill",
        title: "End a tmux session",
        description: "End a session and every process it started (background and \
        `setsid` children included).",
        class: Class::External,
        hints: Hints { idempotent: true, open_world: false, ..runs(network) },
    }
}

/// The `run` tool: its argv is checked against the allowlist before the gate.
const RUN: Spec = Spec {
    name: "run",
    title: "Run an allowlisted program",
    description: "Run one program with exactly the given `argv` (name first, looked up \
    in the configured PATH; no `/`), never through a shell: `|`, `;`, `$(…)` and `*` \
    are literal. Only binaries (and leading arguments) the person's allowlist admits \
    run; some (rm, shells, …) need a person's yes on every run. Same sandbox and result \
    as bash: exit_code (or signal), timed_out, duration_ms, the END of stdout and \
    stderr (8 KB by default, with truncated and dropped_bytes). `cwd` defaults to the \
    first root; `timeout_secs` to 120 (max 600).",
    class: Class::External,
    hints: runs(false),
};

/// One `os-*` tool named `name`: the entry's description (or a plain one when it is empty) and
/// the fixed command it runs.
fn os_tool(name: String, tool: &ShellTool, network: bool) -> Made {
    let fixed =
        std::iter::once(tool.bin.clone()).chain(tool.args.iter().cloned()).collect::<Vec<_>>();
    let fixed = crate::allow::show(&fixed);
    let what = if tool.description.trim().is_empty() {
        format!("Run `{fixed}`.")
    } else {
        tool.description.trim().to_string()
    };
    Made {
        name,
        title: format!("Run {fixed}"),
        description: format!(
            "{what} Runs `{fixed} ARGS…` in the sandbox, never through a shell: `args` are \
             appended as given. Result as bash (output capped at 8 KB by default)."
        ),
        class: Class::External,
        hints: runs(network),
    }
}
