//! The catalogue of tools-fs as data: each tool's [`Spec`] beside the function that implements
//! it, in the order `tools/list` shows them. The daemon's registry publishes it.

use crate::{FsError, ToolText, edit, glob, grep, list_dir, read, write};
use hands_roots::Resolver;
use hands_tool::{Class, Hints, Register, Spec};

/// `write`: replaces what was there; the same content twice leaves one result.
const WRITES: Hints =
    Hints { read_only: false, destructive: true, idempotent: true, open_world: false };

/// `edit`: replaces text; a second identical edit finds no match.
const EDITS: Hints =
    Hints { read_only: false, destructive: true, idempotent: false, open_world: false };

/// Publishes the tools of tools-fs, in order.
pub fn register<R: Register<Resolver, FsError>>(r: &mut R) {
    r.capped(
        Spec {
            name: "read",
            title: "Read file",
            description: "Read a text file under the roots with line numbers (cat -n style). \
            Returns up to `limit` lines (default 2000) from line `offset` (1-based), lines over \
            2000 chars cut, at most 256 KiB, plus total_lines, encoding, line_ending and the \
            file's sha256 (pass it to write/edit as expected_sha256). Binary files, FIFOs, \
            devices, secret files (.env, keys) and denied paths are refused.",
            class: Class::Read,
            hints: Hints::LOOKS,
        },
        read::read_within,
        read::read,
        ToolText::text,
    );
    r.tool(
        Spec {
            name: "write",
            title: "Write file",
            description: "Create a file (and its missing folders) or replace it atomically, \
            keeping its permissions. Pass expected_sha256 from read to refuse if the file \
            changed since. Refused in read-only roots, protected paths (.git/hooks, \
            .vscode, .envrc, …), secret files and hard-linked files. Prefer edit for small \
            changes to existing files.",
            class: Class::Write,
            hints: WRITES,
        },
        write::write,
        ToolText::text,
    );
    r.tool(
        Spec {
            name: "edit",
            title: "Edit file",
            description: "Replace old_string with new_string in a text file. old_string must \
            occur exactly once (or set replace_all); on 0 matches the error shows the \
            closest lines, on several it gives their line numbers. Line endings, BOM and \
            final newline are preserved; the write is atomic. Returns a unified diff and \
            the new sha256.",
            class: Class::Write,
            hints: EDITS,
        },
        edit::edit,
        ToolText::text,
    );
    r.capped(
        Spec {
            name: "list_dir",
            title: "List folder",
            description: "List a folder under the roots: folders first, then files with \
            sizes, each sorted by name; symlinks shown with their target, never followed. \
            At most `limit` entries (default 1000).",
            class: Class::Read,
            hints: Hints::LOOKS,
        },
        list_dir::list_dir_within,
        list_dir::list_dir,
        ToolText::text,
    );
    r.tool(
        Spec {
            name: "glob",
            title: "Find files",
            description: "Find files whose path relative to `path` (default: the first root) \
            matches a glob such as `**/*.rs` or `src/*.{ts,tsx}`. Skips hidden and \
            .gitignored files unless `hidden`/`ignored` are set; never follows links; \
            sorted by path; at most `limit` results (default 1000).",
            class: Class::Read,
            hints: Hints::LOOKS,
        },
        glob::glob,
        ToolText::text,
    );
    r.tool(
        Spec {
            name: "grep",
            title: "Search file contents",
            description: "Search file contents with a regex (or a literal string) like \
            ripgrep: skips binary, hidden and .gitignored files unless asked; `glob` filters \
            files; `context`/`before`/`after` add lines; `output` is content (default), files \
            or count. Lines are cut at 500 chars; stops at `limit` matches (default 100).",
            class: Class::Read,
            hints: Hints::LOOKS,
        },
        grep::grep,
        ToolText::text,
    );
}
