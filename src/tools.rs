//! The tool catalogue: every published tool's name, title, description, schemas, annotations,
//! module and action class, in the stable order `tools/list` shows them.

use crate::config::{ActionClass, ModuleId};
use hands_fs::{edit, list, read, search, write};
use hands_git as git;
use rmcp::handler::server::tool::{schema_for_output, schema_for_type};
use rmcp::model::{Tool, ToolAnnotations};

/// Which implementation a published tool dispatches to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolKind {
    Read,
    Write,
    Edit,
    ListDir,
    Glob,
    Grep,
    GitStatus,
    GitDiff,
    GitLog,
    GitBranches,
    GitBranch,
    GitSwitch,
    GitCommit,
    GitBranchCommits,
    GitWorktreeAdd,
    GitPush,
    Bash,
    TmuxStart,
    TmuxRead,
    TmuxSend,
    TmuxList,
    TmuxKill,
    /// `run`: one allowlisted program with exactly the given argv.
    Run,
    /// A published `os-*` tool: the index of its entry in tools-shell's `tools`.
    OsTool(usize),
    /// A test-only tool of the MCP conformance suite (`src/conformance_tools.rs`).
    #[cfg(feature = "conformance-tools")]
    Conformance,
}

#[derive(Debug, Clone)]
pub struct ToolDef {
    pub tool: Tool,
    pub kind: ToolKind,
    pub module: ModuleId,
    pub class: ActionClass,
}

pub use crate::errors::Denial;

/// `O`'s output schema, with the optional `denied` list every refusal carries.
fn output_schema<O: schemars::JsonSchema + 'static>() -> std::sync::Arc<rmcp::model::JsonObject> {
    let mut schema = (*schema_for_output::<O>()).clone();
    let denied = serde_json::json!({
        "description": "Only on a refusal (isError true): what was blocked, by which layer, \
                        and what a person can do.",
        "type": "array",
        "items": schemars::schema_for!(Denial),
    });
    if let Some(serde_json::Value::Object(props)) = schema.get_mut("properties") {
        props.insert("denied".into(), denied);
    }
    std::sync::Arc::new(schema)
}

/// Hints, stated honestly: (read_only, destructive, idempotent, open_world).
fn annotations(title: &str, hints: (bool, bool, bool, bool)) -> ToolAnnotations {
    let (ro, destructive, idempotent, open_world) = hints;
    ToolAnnotations::with_title(title)
        .read_only(ro)
        .destructive(destructive)
        .idempotent(idempotent)
        .open_world(open_world)
}

struct Spec {
    name: &'static str,
    title: &'static str,
    description: &'static str,
    kind: ToolKind,
    class: ActionClass,
    hints: (bool, bool, bool, bool),
}

fn def<P, O>(module: ModuleId, s: Spec) -> ToolDef
where
    P: schemars::JsonSchema + 'static,
    O: schemars::JsonSchema + 'static,
{
    let tool = Tool::new_with_raw(s.name, Some(s.description.into()), schema_for_type::<P>())
        .with_title(s.title)
        .with_raw_output_schema(output_schema::<O>())
        .with_annotations(annotations(s.title, s.hints));
    ToolDef { tool, kind: s.kind, module, class: s.class }
}

/// The tools of tools-fs, in their published order.
pub fn fs_tools() -> Vec<ToolDef> {
    let m = ModuleId::Fs;
    vec![
        def::<read::ReadParams, read::ReadOutput>(
            m,
            Spec {
                name: "read",
                title: "Read file",
                description: "Read a text file under the roots with line numbers (cat -n style). \
                Returns up to `limit` lines (default 2000) from line `offset` (1-based), lines over \
                2000 chars cut, at most 256 KiB, plus total_lines, encoding, line_ending and the \
                file's sha256 (pass it to write/edit as expected_sha256). Binary files, FIFOs, \
                devices, secret files (.env, keys) and denied paths are refused.",
                kind: ToolKind::Read,
                class: ActionClass::Read,
                hints: (true, false, true, false),
            },
        ),
        def::<write::WriteParams, write::WriteOutput>(
            m,
            Spec {
                name: "write",
                title: "Write file",
                description: "Create a file (and its missing folders) or replace it atomically, \
                keeping its permissions. Pass expected_sha256 from read to refuse if the file \
                changed since. Refused in read-only roots, protected paths (.git/hooks, \
                .vscode, .envrc, …), secret files and hard-linked files. Prefer edit for small \
                changes to existing files.",
                kind: ToolKind::Write,
                class: ActionClass::Write,
                hints: (false, true, true, false),
            },
        ),
        def::<edit::EditParams, edit::EditOutput>(
            m,
            Spec {
                name: "edit",
                title: "Edit file",
                description: "Replace old_string with new_string in a text file. old_string must \
                occur exactly once (or set replace_all); on 0 matches the error shows the \
                closest lines, on several it gives their line numbers. Line endings, BOM and \
                final newline are preserved; the write is atomic. Returns a unified diff and \
                the new sha256.",
                kind: ToolKind::Edit,
                class: ActionClass::Write,
                hints: (false, true, false, false),
            },
        ),
        def::<list::ListDirParams, list::ListDirOutput>(
            m,
            Spec {
                name: "list_dir",
                title: "List folder",
                description: "List a folder under the roots: folders first, then files with \
                sizes, each sorted by name; symlinks shown with their target, never followed. \
                At most `limit` entries (default 1000).",
                kind: ToolKind::ListDir,
                class: ActionClass::Read,
                hints: (true, false, true, false),
            },
        ),
        def::<search::GlobParams, search::GlobOutput>(
            m,
            Spec {
                name: "glob",
                title: "Find files",
                description: "Find files whose path relative to `path` (default: the first root) \
                matches a glob such as `**/*.rs` or `src/*.{ts,tsx}`. Skips hidden and \
                .gitignored files unless `hidden`/`ignored` are set; never follows links; \
                sorted by path; at most `limit` results (default 1000).",
                kind: ToolKind::Glob,
                class: ActionClass::Read,
                hints: (true, false, true, false),
            },
        ),
        def::<search::GrepParams, search::GrepOutput>(
            m,
            Spec {
                name: "grep",
                title: "Search file contents",
                description: "Search file contents with a regex (or a literal string) like \
                ripgrep: skips binary, hidden and .gitignored files unless asked; `glob` filters \
                files; `context`/`before`/`after` add lines; `output` is content (default), files \
                or count. Lines are cut at 500 chars; stops at `limit` matches (default 100).",
                kind: ToolKind::Grep,
                class: ActionClass::Read,
                hints: (true, false, true, false),
            },
        ),
    ]
}

/// The tools of tools-git, in their published order.
pub fn git_tools() -> Vec<ToolDef> {
    let m = ModuleId::Git;
    vec![
        def::<git::StatusParams, git::StatusOutput>(
            m,
            Spec {
                name: "git_status",
                title: "Git status",
                description: "The branch, its upstream and ahead/behind counts, and the staged, \
                unstaged, untracked and conflicted files of a repository under the roots \
                (`repo`, default the first root). At most 1000 entries, with `truncated`.",
                kind: ToolKind::GitStatus,
                class: ActionClass::Read,
                hints: (true, false, true, false),
            },
        ),
        def::<git::DiffParams, git::DiffOutput>(
            m,
            Spec {
                name: "git_diff",
                title: "Git diff",
                description: "The patch of the unstaged changes (or the staged ones with \
                `staged`), optionally of one `path` (relative to the repository's work tree, as \
                git_status prints it, or absolute), with `context` lines (default 3). Capped \
                at 256 KiB with `truncated`; secret files show no content.",
                kind: ToolKind::GitDiff,
                class: ActionClass::Read,
                hints: (true, false, true, false),
            },
        ),
        def::<git::LogParams, git::LogOutput>(
            m,
            Spec {
                name: "git_log",
                title: "Git log",
                description: "Commits newest first from `rev` (default HEAD), optionally touching \
                `path` (relative to the repository's work tree, or absolute): id, author, \
                date, summary. `limit` defaults to 20, at most 500.",
                kind: ToolKind::GitLog,
                class: ActionClass::Read,
                hints: (true, false, true, false),
            },
        ),
        def::<git::BranchesParams, git::BranchesOutput>(
            m,
            Spec {
                name: "git_branches",
                title: "Git branches",
                description: "Local branches with the current one marked, each with its upstream \
                and last commit.",
                kind: ToolKind::GitBranches,
                class: ActionClass::Read,
                hints: (true, false, true, false),
            },
        ),
        def::<git::BranchParams, git::BranchOutput>(
            m,
            Spec {
                name: "git_branch",
                title: "Create branch",
                description: "Make a branch `name` at `start` (default HEAD) and check it out \
                unless `checkout` is false. Names starting with `-`, containing `..` or `@{`, \
                or failing git's ref rules are refused.",
                kind: ToolKind::GitBranch,
                class: ActionClass::Write,
                hints: (false, false, false, false),
            },
        ),
        def::<git::SwitchParams, git::SwitchOutput>(
            m,
            Spec {
                name: "git_switch",
                title: "Switch branch",
                description: "Check out an existing local branch. Refuses, naming the files, when \
                local changes would be overwritten; never discards work.",
                kind: ToolKind::GitSwitch,
                class: ActionClass::Write,
                hints: (false, false, true, false),
            },
        ),
        def::<git::CommitParams, git::CommitOutput>(
            m,
            Spec {
                name: "git_commit",
                title: "Commit",
                description: "Commit every change, untracked files included (or only `paths`, \
                relative to the repository's work tree as git_status prints them, or \
                absolute), with the configured author. Never runs hooks; secret files are left out and \
                listed in `skipped`. Returns the new commit id.",
                kind: ToolKind::GitCommit,
                class: ActionClass::Write,
                hints: (false, false, false, false),
            },
        ),
        def::<git::BranchCommitsParams, git::BranchCommitsOutput>(
            m,
            Spec {
                name: "git_branch_commits",
                title: "Commits on a branch",
                description: "The commits on `branch` that `base` (default: the default branch) \
                lacks, newest first.",
                kind: ToolKind::GitBranchCommits,
                class: ActionClass::Read,
                hints: (true, false, true, false),
            },
        ),
        def::<git::WorktreeAddParams, git::WorktreeAddOutput>(
            m,
            Spec {
                name: "git_worktree_add",
                title: "Add worktree",
                description: "Add a worktree at `path` (under a writable root) on `branch`, made \
                from HEAD if it does not exist.",
                kind: ToolKind::GitWorktreeAdd,
                class: ActionClass::Write,
                hints: (false, false, false, false),
            },
        ),
        def::<git::PushParams, git::PushOutput>(
            m,
            Spec {
                name: "git_push",
                title: "Push branch",
                description: "Push one branch to the configured remote, never forced (a \
                non-fast-forward is refused), only when it matches the configured patterns \
                (default task/*) and the module holds the network grant; with push.urls set, \
                only to a remote URL listed there. Off until push is configured.",
                kind: ToolKind::GitPush,
                class: ActionClass::External,
                hints: (false, false, true, true),
            },
        ),
    ]
}

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

/// The tools of tools-shell, in their published order: bash, the tmux tools, run, os-*.
/// With `bash = false`, `bash`, `tmux_start` and `tmux_send` are left out; `tmux_read`,
/// `tmux_list` and `tmux_kill` stay, because sessions outlive a restart and a change of
/// config, and these only show or end them.
pub fn shell_tools(c: &ShellCatalogue) -> Vec<ToolDef> {
    let mut all = bash_tools(c.network);
    if !c.bash {
        all.retain(|d| {
            !matches!(d.kind, ToolKind::Bash | ToolKind::TmuxStart | ToolKind::TmuxSend)
        });
    }
    if c.run {
        all.push(run_tool(c.network));
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

fn run_tool(network: bool) -> ToolDef {
    def::<hands_shell::run::RunParams, hands_shell::bash::BashOutput>(
        ModuleId::Shell,
        Spec {
            name: "run",
            title: "Run an allowlisted program",
            description: "Run one program with exactly the given `argv` (name first, looked up \
            in the configured PATH; no `/`), never through a shell: `|`, `;`, `$(…)` and `*` \
            are literal. Only binaries (and leading arguments) the person's allowlist admits \
            run; some (rm, shells, …) need a person's yes on every run. Same sandbox and result \
            as bash: exit_code (or signal), timed_out, duration_ms, the END of stdout and \
            stderr (8 KB by default, with truncated and dropped_bytes). `cwd` defaults to the \
            first root; `timeout_secs` to 120 (max 600).",
            kind: ToolKind::Run,
            class: ActionClass::External,
            hints: (false, true, false, network),
        },
    )
}

/// One published `os-*` tool: the entry's description (or a plain one when it is empty) and
/// the fixed command it runs.
fn os_tool(index: usize, name: String, t: &crate::config::ShellTool, network: bool) -> ToolDef {
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
    let tool = Tool::new_with_raw(
        name,
        Some(description.into()),
        schema_for_type::<hands_shell::run::OsToolParams>(),
    )
    .with_title(title.clone())
    .with_raw_output_schema(output_schema::<hands_shell::bash::BashOutput>())
    .with_annotations(annotations(&title, (false, true, false, network)));
    ToolDef {
        tool,
        kind: ToolKind::OsTool(index),
        module: ModuleId::Shell,
        class: ActionClass::External,
    }
}

/// `bash` and the tmux tools, in their published order.
fn bash_tools(network: bool) -> Vec<ToolDef> {
    use hands_shell::tmux as t;
    let m = ModuleId::Shell;
    vec![
        def::<hands_shell::bash::BashParams, hands_shell::bash::BashOutput>(
            m,
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
                is a normal result. For servers and watchers that keep running, use tmux_start.",
                kind: ToolKind::Bash,
                class: ActionClass::External,
                hints: (false, true, false, network),
            },
        ),
        def::<t::StartParams, t::Started>(
            m,
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
                session's listening ports and a `cursor` for tmux_read's since. Commands of this \
                module share one private loopback, so a server started here is reachable from \
                bash (and from nothing else). A command that cannot start (not found) is an error.",
                kind: ToolKind::TmuxStart,
                class: ActionClass::External,
                hints: (false, true, false, network),
            },
        ),
        def::<t::ReadParams, t::ReadOutput>(
            m,
            Spec {
                name: "tmux_read",
                title: "Read a tmux session",
                description: "The last `lines` lines (default 100, max 5000) of a session's \
                pane, whether its command has ended, and its exit status once it has. With \
                `since` (a cursor from any tmux result): only what was printed after it, oldest \
                first, at most `lines` lines; `more` says to read again with the new `cursor`; \
                output no longer kept (the last 8 MiB are) is counted in lost_lines.",
                kind: ToolKind::TmuxRead,
                class: ActionClass::Read,
                hints: (true, false, true, false),
            },
        ),
        def::<t::SendParams, t::SendOutput>(
            m,
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
                kind: ToolKind::TmuxSend,
                class: ActionClass::External,
                hints: (false, true, false, network),
            },
        ),
        def::<t::ListParams, t::ListOutput>(
            m,
            Spec {
                name: "tmux_list",
                title: "List tmux sessions",
                description: "This module's tmux sessions: name, command, cwd, start time \
                (seconds since the epoch), running or ended (with exit status), cursor.",
                kind: ToolKind::TmuxList,
                class: ActionClass::Read,
                hints: (true, false, true, false),
            },
        ),
        def::<t::KillParams, t::KillOutput>(
            m,
            Spec {
                name: "tmux_kill",
                title: "End a tmux session",
                description: "End a session and every process it started (background and \
                `setsid` children included).",
                kind: ToolKind::TmuxKill,
                class: ActionClass::External,
                hints: (false, true, true, false),
            },
        ),
    ]
}
