//! The catalogue of tools-git as data: each tool's [`Spec`] beside the method that implements
//! it, in the order `tools/list` shows them. The daemon's registry publishes it.

use crate::{Git, GitError};
use hands_tool::{Class, Hints, Register, Spec};

/// Makes something new (a branch, a commit, a worktree): nothing is overwritten, and a second
/// call is another change (or refused).
const MAKES: Hints =
    Hints { read_only: false, destructive: false, idempotent: false, open_world: false };

/// The text mirror of an output: its `Display`.
fn text<O: std::fmt::Display>(o: &O) -> String {
    o.to_string()
}

/// Publishes the tools of tools-git, in order; `git_push` only when `push` is configured
/// (`Git::push_configured`): a tool that can only answer "pushing is off" would still be asked
/// about, and a person asked to approve it.
pub fn register<R: Register<Git, GitError>>(r: &mut R, push: bool) {
    r.tool(
        Spec {
            name: "git_status",
            title: "Git status",
            description: "The branch, its upstream and ahead/behind counts, and the staged, \
            unstaged, untracked and conflicted files of a repository under the roots \
            (`repo`, default the first root). At most 1000 entries, with `truncated`.",
            class: Class::Read,
            hints: Hints::LOOKS,
        },
        Git::status,
        text,
    );
    r.tool(
        Spec {
            name: "git_diff",
            title: "Git diff",
            description: "The patch of the unstaged changes (or the staged ones with \
            `staged`), optionally of one `path` (relative to the repository's work tree, as \
            git_status prints it, or absolute), with `context` lines (default 3). Capped \
            at 256 KiB with `truncated`; secret files show no content.",
            class: Class::Read,
            hints: Hints::LOOKS,
        },
        Git::diff,
        text,
    );
    r.tool(
        Spec {
            name: "git_log",
            title: "Git log",
            description: "Commits newest first from `rev` (default HEAD), optionally touching \
            `path` (relative to the repository's work tree, or absolute): id, author, \
            date, summary. `limit` defaults to 20, at most 500.",
            class: Class::Read,
            hints: Hints::LOOKS,
        },
        Git::log,
        text,
    );
    r.tool(
        Spec {
            name: "git_branches",
            title: "Git branches",
            description: "Local branches with the current one marked, each with its upstream \
            and last commit.",
            class: Class::Read,
            hints: Hints::LOOKS,
        },
        Git::branches,
        text,
    );
    r.tool(
        Spec {
            name: "git_branch",
            title: "Create branch",
            description: "Make a branch `name` at `start` (default HEAD) and check it out \
            unless `checkout` is false. Names starting with `-`, containing `..` or `@{`, \
            or failing git's ref rules are refused.",
            class: Class::Write,
            hints: MAKES,
        },
        Git::branch,
        text,
    );
    r.tool(
        Spec {
            name: "git_switch",
            title: "Switch branch",
            description: "Check out an existing local branch. Refuses, naming the files, when \
            local changes would be overwritten; never discards work.",
            class: Class::Write,
            hints: Hints { idempotent: true, ..MAKES },
        },
        Git::switch,
        text,
    );
    r.tool(
        Spec {
            name: "git_commit",
            title: "Commit",
            description: "Commit every change, untracked files included (or only `paths`, \
            relative to the repository's work tree as git_status prints them, or \
            absolute), with the configured author. Never runs hooks; secret files are left out and \
            listed in `skipped`. Returns the new commit id.",
            class: Class::Write,
            hints: MAKES,
        },
        Git::commit,
        text,
    );
    r.tool(
        Spec {
            name: "git_branch_commits",
            title: "Commits on a branch",
            description: "The commits on `branch` that `base` (default: the default branch) \
            lacks, newest first.",
            class: Class::Read,
            hints: Hints::LOOKS,
        },
        Git::branch_commits,
        text,
    );
    r.tool(
        Spec {
            name: "git_worktree_add",
            title: "Add worktree",
            description: "Add a worktree at `path` (under a writable root) on `branch`, made \
            from HEAD if it does not exist.",
            class: Class::Write,
            hints: MAKES,
        },
        Git::worktree_add,
        text,
    );
    if !push {
        return;
    }
    r.tool(
        Spec {
            name: "git_push",
            title: "Push branch",
            description: "Push one branch to the configured remote, never forced (a \
            non-fast-forward is refused), only when it matches the configured patterns \
            (default task/*) and the module holds the network grant; with push.urls set, \
            only to a remote URL listed there.",
            class: Class::External,
            hints: Hints { idempotent: true, open_world: true, ..MAKES },
        },
        Git::push,
        text,
    );
}
