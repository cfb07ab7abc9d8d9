//! Refusals and failures of the git tools, each saying what was wrong and what to do.

use hands_roots::{PathError, shown};
use std::path::PathBuf;

/// Why a git tool refused or failed. Returned by every [`crate::Git`] method; the message is
/// shown to the person or model as it is, so each one names the argument, path or setting at
/// fault and what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// A path (repository, worktree, filter) was refused or not found by the roots resolver.
    #[error(transparent)]
    Path(#[from] PathError),
    /// The settings given to [`crate::Git::new`] are unusable; the daemon refuses to start
    /// the module.
    #[error("tools-git settings: {0}")]
    Settings(String),
    /// The folder exists but holds no repository (parent folders are never searched).
    #[error(
        "`{}` is not a git repository (hands does not search parent folders); pass the folder that holds `.git`",
        shown(path)
    )]
    NotARepo { path: PathBuf },
    /// The repository is owned by another user and libgit2's ownership check refused it.
    #[error(
        "`{}` is owned by another user, so git refuses to open it (safe.directory); ask the person to fix its ownership",
        shown(path)
    )]
    Owner { path: PathBuf },
    /// Part of the repository (git dir, work tree, common dir, alternates, a symlink inside
    /// `.git`) lies outside every root or on a denied path.
    #[error(
        "repository `{}` is refused: its {what} `{}` is outside the roots of tools-git; only repositories wholly under the roots can be used",
        shown(repo),
        shown(target)
    )]
    RepoOutside { repo: PathBuf, what: &'static str, target: PathBuf },
    /// The repository could not be checked completely (a git dir too large to scan, a folder
    /// in it the daemon may not list): refused rather than used half-checked.
    #[error(
        "repository `{}` is refused: {why}; the git tools use only repositories they could check completely",
        shown(repo)
    )]
    Unchecked { repo: PathBuf, why: String },
    /// The repository's config has a key that would read a file outside the roots or run a
    /// program through a URL rewrite.
    #[error(
        "repository config key `{key_q}` = `{value_q}` is refused: {why}; remove it from the repository's config", key_q = shown(key), value_q = shown(value)
    )]
    HostileConfig { key: String, value: String, why: &'static str },
    /// A ref, branch or revision argument failed the input hardening (option-like, range or
    /// reflog syntax, characters git forbids in ref names).
    #[error(
        "argument `{arg}` = `{value_q}` is refused: {why}; pass a plain branch name, tag or commit id", value_q = shown(value)
    )]
    BadName { arg: &'static str, value: String, why: &'static str },
    /// A free-text argument (commit message) is unusable.
    #[error("argument `{arg}` is refused: {why}")]
    BadArgument { arg: &'static str, why: String },
    /// A path filter lies outside the repository's work tree.
    #[error(
        "path `{}` is outside the repository's work tree `{}`; pass a path relative to the work tree (as git_status prints it) or an absolute path inside it",
        shown(given),
        shown(workdir)
    )]
    PathOutsideRepo { given: String, workdir: PathBuf },
    /// A relative path filter names nothing in the work tree, but does name something there
    /// when read relative to the first root (the spelling of the file tools).
    #[error(
        "path `{}` names nothing in the work tree `{}`; git paths are relative to the work tree (as git_status prints them): pass `{}`",
        shown(given),
        shown(workdir),
        shown(meant)
    )]
    PathNotInWorkTree { given: String, workdir: PathBuf, meant: String },
    /// A command could change the work tree while the tool reads or writes it by name
    /// (decision 0083).
    #[error(
        "{tool} is refused now: {busy} where a folder could be swapped for a link under the tool while it reads or writes files by name (decision 0083); run it again once nothing runs there (tmux_kill ends a session), or run git in `bash`, where the sandbox's walls hold"
    )]
    Moving { tool: &'static str, busy: String },
    /// The tool needs a work tree and the repository is bare.
    #[error("`{}` is a bare repository; {tool} needs a work tree", shown(path))]
    Bare { path: PathBuf, tool: &'static str },
    /// A revision or base name resolves to nothing.
    #[error("{arg} `{value_q}` names no commit in this repository; see git_branches or git_log", value_q = shown(value))]
    RevNotFound { arg: &'static str, value: String },
    /// `switch` or `push` named a local branch that does not exist.
    #[error(
        "there is no local branch `{name_q}`; see git_branches, or make it with git_branch (start `origin/{name_q}` to start from a remote branch)", name_q = shown(name)
    )]
    BranchNotFound { name: String },
    /// `branch` was asked to make a branch that exists already.
    #[error("branch `{name_q}` already exists; use git_switch to check it out", name_q = shown(name))]
    BranchExists { name: String },
    /// HEAD has no commit yet, and the tool needs one.
    #[error("HEAD has no commits yet; make the first commit with git_commit")]
    Unborn,
    /// `branch_commits` was given no base and the repository has no default branch.
    #[error("no default branch found (no origin/HEAD, main or master); pass `base`")]
    NoBase,
    /// A merge, rebase or similar is in progress.
    #[error("a {state} is in progress in `{}`; finish or abort it with git first", shown(path))]
    Busy { path: PathBuf, state: String },
    /// A checkout would overwrite local changes (safe checkout refused).
    #[error(
        "switching to `{branch_q}` would overwrite local changes in: {}; commit them with git_commit first",
        paths.join(", "), branch_q = shown(branch)
    )]
    WouldOverwrite { branch: String, paths: Vec<String> },
    /// A checkout would create or change protected files (things run outside the sandbox).
    #[error(
        "{what} would create or change protected files ({}): something outside the sandbox executes them, so a person must make that change",
        paths.join(", ")
    )]
    ProtectedChange { what: String, paths: Vec<String> },
    /// A tree to check out is one git itself never writes (`pieces::malformed`).
    #[error(
        "{what} would check out a tree git itself never writes ({why}): what such a tree writes is not what its checks see, so it is refused; `git fsck` on the host names it, and a person can rebuild the branch with git"
    )]
    MalformedTree { what: String, why: String },
    /// The index holds unresolved conflicts.
    #[error("the index has unresolved conflicts ({}); resolve them before committing", paths.join(", "))]
    Conflicts { paths: Vec<String> },
    /// Neither the settings nor the repository give a commit identity.
    #[error(
        "no commit identity: set author_name/author_email in tools-git's config or user.name/user.email in the repo"
    )]
    NoIdentity,
    /// The commit would record no change.
    #[error("nothing to commit{}", if *with_paths { " in the given paths" } else { "" })]
    NothingToCommit { with_paths: bool },
    /// A path given to `commit` is a secret or denied file.
    #[error("`{path_q}` is a secret or denied file; it is never committed by hands", path_q = shown(path))]
    HiddenPath { path: String },
    /// The branch is checked out elsewhere (worktree_add).
    #[error("branch `{name_q}` is already checked out in another worktree; pick another branch", name_q = shown(name))]
    CheckedOutElsewhere { name: String },
    /// Pushing is not configured.
    #[error("pushing is off: tools-git has no push configured")]
    PushOff,
    /// Pushing needs the network grant.
    #[error("push needs the `network` grant for tools-git")]
    PushNoNetwork,
    /// The branch matches none of the configured push patterns.
    #[error("branch `{branch_q}` does not match the push patterns {patterns}", branch_q = shown(branch))]
    PushBranchRefused { branch: String, patterns: String },
    /// The repository has no remote of the configured name.
    #[error("the repository has no remote `{remote_q}` (the configured push remote)", remote_q = shown(remote))]
    PushNoRemote { remote: String },
    /// Push over SSH cannot start: no usable ssh-agent, no user name, or a state dir missing
    /// for trust on first use. Nothing was sent; no connection was made.
    #[error("remote `{remote_q}` is `{url_q}`: {why}", remote_q = shown(remote), url_q = shown(url))]
    PushSshSetup { remote: String, url: String, why: String },
    /// The SSH server's host key is not the expected one, or the host is not known; the
    /// connection was dropped before authentication, so nothing was sent.
    #[error("SSH host key check for `{host}` refused the push: {why}. Nothing was sent")]
    PushHostKey { host: String, why: String },
    /// SSH authentication through the ssh-agent failed.
    #[error("SSH push to `{url_q}` could not authenticate: {why}", url_q = shown(url))]
    PushSshAuth { url: String, why: String },
    /// The SSH remote could not be reached or failed mid-way.
    #[error("push to `{url_q}` failed: {message}", url_q = shown(url))]
    PushNetwork { url: String, message: String },
    /// The remote's URL is of a kind hands does not push to.
    #[error("remote `{remote_q}` is `{url_q}`: {why}", remote_q = shown(remote), url_q = shown(url))]
    PushUrl { remote: String, url: String, why: &'static str },
    /// `push.urls` is set and does not list the remote's URL.
    #[error(
        "remote `{}` is `{}`, which tools-git's push.urls does not list; hands pushes only to the remotes listed there — push to one of them, or ask the person to add this URL to push.urls",
        shown(remote),
        shown(url)
    )]
    PushNotListed { remote: String, url: String },
    /// A local remote outside the roots, with `push.urls` unset.
    #[error(
        "remote `{}` is `{}`, a local repository outside the roots of tools-git; a person can allow pushing there by listing it in tools-git's push.urls (only the pushed branch and its objects are written)",
        shown(remote),
        shown(url)
    )]
    PushOutsideRoots { remote: String, url: String },
    /// The remote has commits the local branch lacks.
    #[error(
        "non-fast-forward: {remote_q}/{branch_q} has commits that {branch_q} lacks; pull/rebase first — hands never force-pushes", remote_q = shown(remote), branch_q = shown(branch)
    )]
    NonFastForward { remote: String, branch: String },
    /// The remote is a non-bare repository with the branch checked out.
    #[error(
        "remote `{remote_q}` has `{branch_q}` checked out in its work tree; push to a bare repository", remote_q = shown(remote), branch_q = shown(branch)
    )]
    PushCheckedOut { remote: String, branch: String },
    /// The remote rejected the update.
    #[error("the remote rejected {refname_q}: {message}", refname_q = shown(refname))]
    PushRejected { refname: String, message: String },
    /// Any other libgit2 failure, with the operation that failed.
    #[error("git {op} failed: {}", source.message())]
    Git {
        op: &'static str,
        #[source]
        source: git2::Error,
    },
}

impl GitError {
    /// Wraps a libgit2 error with the operation that failed.
    pub(crate) fn git(op: &'static str) -> impl FnOnce(git2::Error) -> GitError {
        move |source| GitError::Git { op, source }
    }

    /// Whether this is a policy refusal (outside the roots, hostile config, hardened input,
    /// push policy, protected files) rather than an ordinary failure; refusals are audited.
    pub fn is_refusal(&self) -> bool {
        match self {
            GitError::Path(e) => e.is_refusal(),
            GitError::RepoOutside { .. }
            | GitError::Unchecked { .. }
            | GitError::HostileConfig { .. }
            | GitError::BadName { .. }
            | GitError::PathOutsideRepo { .. }
            | GitError::ProtectedChange { .. }
            | GitError::MalformedTree { .. }
            | GitError::Moving { .. }
            | GitError::HiddenPath { .. }
            | GitError::PushOff
            | GitError::PushNoNetwork
            | GitError::PushBranchRefused { .. }
            | GitError::PushSshSetup { .. }
            | GitError::PushHostKey { .. }
            | GitError::PushUrl { .. }
            | GitError::PushNotListed { .. }
            | GitError::PushOutsideRoots { .. }
            | GitError::NonFastForward { .. } => true,
            _ => false,
        }
    }
}
