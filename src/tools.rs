//! tools-shell's catalogue: a table of each tool's [`Spec`] beside its handler, in the order
//! `tools/list` shows them (bash, the tmux tools, run, os-*). tools-fs and tools-git export
//! theirs from their crates (`catalogue.rs`); this one stays here until tools-shell moves into
//! `modules/shell`, and is shaped to move with it: data, and handlers that only parse, call
//! [`crate::shell_mcp::Shell`] and shape the result.

use crate::config::ModuleId;
use crate::errors::{Answer, shell_refusal};
use crate::registry::{Entry, Handler, parsing, published, structured};
use crate::shell_mcp::{Caller, Refusal, Shell};
use hands_shell::bash::{BashOutput, BashParams};
use hands_shell::run::{OsToolParams, RunParams};
use hands_shell::tmux as t;
use hands_tool::{Class, Hints, Spec};
use std::future::Future;
use std::sync::Arc;

/// Which of tools-shell's tools are published: `bash` (and the tmux tools that run shell
/// text) unless `bash = false`; `run` when `commands.allow` admits something; one `os-*` tool
/// per `tools` entry (the first of two entries with one name wins).
pub struct ShellCatalogue<'a> {
    /// The module holds the `network` grant, so commands reach the host network (open world).
    pub network: bool,
    pub bash: bool,
    pub run: bool,
    pub os_tools: &'a [crate::config::ShellTool],
}

/// Runs commands: may destroy, never idempotent; open world with the network grant.
const fn runs(network: bool) -> Hints {
    Hints { read_only: false, destructive: true, idempotent: false, open_world: network }
}

/// One row of the table: the spec, whether it runs shell text (left out with `bash = false`),
/// whether it starts a command (refused before the gate when a wall is missing), and the
/// handler.
struct Row {
    spec: Spec,
    shell_text: bool,
    starts: bool,
    make: fn(&Spec, bool, &Arc<Shell>) -> Entry,
}

/// An entry whose handler parses `P`, awaits `f` and shapes its `O` (or its refusal).
fn entry<P, O, F, Fut>(spec: &Spec, starts: bool, sh: &Arc<Shell>, f: F) -> Entry
where
    P: hands_tool::Params,
    O: hands_tool::Output + std::fmt::Display,
    F: Fn(Arc<Shell>, P, Caller) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, Refusal>> + Send + 'static,
{
    let name = spec.name;
    let call = parsing(sh, name, move |sh, params: P, caller| {
        let run = f(sh, params, caller);
        async move { Answer::plain(shaped(run.await, name)) }
    });
    Entry::new::<P, O>(ModuleId::Shell, spec, starts, Handler::Call(call))
}

/// A tools-shell result: structured content plus its text mirror, or the refusal as a tool
/// error (with denial feedback when a wall or the brake refused it).
pub fn shaped<O: serde::Serialize + std::fmt::Display>(
    r: Result<O, Refusal>,
    name: &str,
) -> rmcp::model::CallToolResult {
    match r {
        Ok(out) => structured(&out, out.to_string(), name),
        Err(Refusal(msg)) => shell_refusal(msg, name),
    }
}

/// `bash` and the tmux tools, in their published order.
fn table(network: bool) -> [Row; 6] {
    [
        Row {
            spec: Spec {
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
                is a normal result. For servers and watchers that keep running, use tmux_start.",
                class: Class::External,
                hints: runs(network),
            },
            shell_text: true,
            starts: true,
            make: |spec, starts, sh| {
                entry(spec, starts, sh, |sh, p: BashParams, c| async move { sh.bash(p, c).await })
            },
        },
        Row {
            spec: Spec {
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
                session's listening ports and a `cursor` for tmux_read's since. Commands of this \
                module share one private loopback, so a server started here is reachable from \
                bash (and from nothing else). A command that cannot start (not found) is an error.",
                class: Class::External,
                hints: runs(network),
            },
            shell_text: true,
            starts: true,
            make: |spec, starts, sh| {
                entry(spec, starts, sh, |sh, p: t::StartParams, c| async move {
                    sh.tmux_start(p, c).await
                })
            },
        },
        Row {
            spec: Spec {
                name: "tmux_read",
                title: "Read a tmux session",
                description: "The last `lines` lines (default 100, max 5000) of a session's \
                pane, whether its command has ended, and its exit status once it has. With \
                `since` (a cursor from any tmux result): only what was printed after it, oldest \
                first, at most `lines` lines; `more` says to read again with the new `cursor`; \
                output no longer kept (the last 8 MiB are) is counted in lost_lines.",
                class: Class::Read,
                hints: Hints::LOOKS,
            },
            shell_text: false,
            starts: false,
            make: |spec, starts, sh| {
                entry(
                    spec,
                    starts,
                    sh,
                    |sh, p: t::ReadParams, _| async move { sh.tmux_read(p).await },
                )
            },
        },
        Row {
            spec: Spec {
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
            },
            shell_text: true,
            starts: false,
            make: |spec, starts, sh| {
                entry(spec, starts, sh, |sh, p: t::SendParams, c| async move {
                    sh.tmux_send(p, c).await
                })
            },
        },
        Row {
            spec: Spec {
                name: "tmux_list",
                title: "List tmux sessions",
                description: "This module's tmux sessions: name, command, cwd, start time \
                (seconds since the epoch), running or ended (with exit status), cursor.",
                class: Class::Read,
                hints: Hints::LOOKS,
            },
            shell_text: false,
            starts: false,
            make: |spec, starts, sh| {
                entry(
                    spec,
                    starts,
                    sh,
                    |sh, p: t::ListParams, _| async move { sh.tmux_list(p).await },
                )
            },
        },
        Row {
            spec: Spec {
                name: "tmux_kill",
                title: "End a tmux session",
                description: "End a session and every process it started (background and \
                `setsid` children included).",
                class: Class::External,
                hints: Hints { idempotent: true, open_world: false, ..runs(network) },
            },
            shell_text: false,
            starts: false,
            make: |spec, starts, sh| {
                entry(
                    spec,
                    starts,
                    sh,
                    |sh, p: t::KillParams, _| async move { sh.tmux_kill(p).await },
                )
            },
        },
    ]
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

/// The tools of tools-shell, in their published order: bash, the tmux tools, run, os-*.
/// With `bash = false`, `bash`, `tmux_start` and `tmux_send` are left out; `tmux_read`,
/// `tmux_list` and `tmux_kill` stay, because sessions outlive a restart and a change of
/// config, and these only show or end them.
pub fn shell_tools(c: &ShellCatalogue, sh: &Arc<Shell>) -> Vec<Entry> {
    let mut all: Vec<Entry> = table(c.network)
        .iter()
        .filter(|row| c.bash || !row.shell_text)
        .map(|row| (row.make)(&row.spec, row.starts, sh))
        .collect();
    // `needs`, the one-run expansion, lives outside the tools' own parameters (src/needs.rs).
    for e in all.iter_mut().filter(|e| matches!(e.tool.name.as_ref(), "bash" | "tmux_start")) {
        crate::needs::publish(&mut e.tool);
    }
    if c.run {
        let spec = Spec { hints: runs(c.network), ..RUN };
        all.push(Entry::new::<RunParams, BashOutput>(
            ModuleId::Shell,
            &spec,
            true,
            Handler::Program(None),
        ));
    }
    let mut names: Vec<String> = Vec::new();
    for (i, t) in c.os_tools.iter().enumerate() {
        let Ok(name) = hands_shell::allow::tool_name(&t.bin, &t.args) else { continue };
        if names.contains(&name) {
            tracing::warn!(
                "tools-shell: tools[{i}] would publish `{name}` again; only the first entry is published"
            );
            continue;
        }
        names.push(name.clone());
        all.push(os_tool(i, name, t, c.network));
    }
    all
}

/// One published `os-*` tool: the entry's description (or a plain one when it is empty) and
/// the fixed command it runs.
fn os_tool(index: usize, name: String, t: &crate::config::ShellTool, network: bool) -> Entry {
    let fixed = std::iter::once(t.bin.clone()).chain(t.args.iter().cloned()).collect::<Vec<_>>();
    let fixed = hands_shell::allow::show(&fixed);
    let what = if t.description.trim().is_empty() {
        format!("Run `{fixed}`.")
    } else {
        t.description.trim().to_string()
    };
    let description = format!(
        "{what} Runs `{fixed} ARGS…` in the sandbox, never through a shell: `args` are \
         appended as given. Result as bash (output capped at 8 KB by default)."
    );
    let title = format!("Run {fixed}");
    let tool = published::<OsToolParams, BashOutput>(name, &title, description, runs(network));
    Entry {
        tool,
        module: ModuleId::Shell,
        class: crate::config::ActionClass::External,
        runs_commands: true,
        handler: Handler::Program(Some(index)),
    }
}
