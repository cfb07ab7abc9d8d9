//! The tool catalogue: every published tool's name, title, description, schemas, annotations,
//! module and action class, in the stable order `tools/list` shows them.

use crate::config::{ActionClass, ModuleId};
use hands_fs::{edit, list, read, search, write};
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
}

#[derive(Debug, Clone)]
pub struct ToolDef {
    pub tool: Tool,
    pub kind: ToolKind,
    pub module: ModuleId,
    pub class: ActionClass,
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
        .with_raw_output_schema(schema_for_output::<O>())
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
