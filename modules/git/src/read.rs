//! The read-class tools: `status`, `diff`, `log`, `branches` and `branch_commits`.

use crate::names::check_rev;
use crate::{Git, GitError, rfc3339};
use git2::{BranchType, Commit, DiffFormat, DiffOptions, Oid, Repository, Sort, Status};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::Path;

/// Most status entries returned; `truncated` says when there were more.
const STATUS_CAP: usize = 1000;
/// Most bytes of patch text returned by `diff`.
const DIFF_CAP: usize = 256 * 1024;
/// Files larger than this are diffed as binary (never loaded for a text diff).
const DIFF_MAX_FILE: i64 = 8 * 1024 * 1024;
/// Default and largest `log` limit.
const LOG_DEFAULT: u32 = 20;
const LOG_MAX: u32 = 500;
/// Most commits `log` examines when filtering by path before it stops.
const LOG_SCAN_CAP: usize = 50_000;
/// Most commits `branch_commits` returns, and most branches `branches` lists.
const LIST_CAP: usize = 500;
const BRANCHES_CAP: usize = 1000;

/// Parameters of `git_status`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StatusParams {
    /// Repository folder (the one holding `.git`): absolute, or relative to the first root.
    /// Default: the first root. Parent folders are not searched.
    pub repo: Option<String>,
}

/// One changed file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct FileStatus {
    /// Path relative to the work tree (`old -> new` for a rename; a trailing `/` for an
    /// untracked folder).
    pub path: String,
    /// `added`, `modified`, `deleted`, `renamed`, `typechange`, `untracked` or `conflicted`.
    pub status: String,
}

/// What `git_status` returns.
#[derive(Debug, Serialize, JsonSchema)]
pub struct StatusOutput {
    /// The checked-out branch; absent when HEAD is detached.
    pub branch: Option<String>,
    /// The commit HEAD points at; absent before the first commit.
    pub head: Option<String>,
    /// The branch's upstream (e.g. `origin/main`), if one is configured.
    pub upstream: Option<String>,
    /// Commits on the branch that the upstream lacks.
    pub ahead: Option<usize>,
    /// Commits on the upstream that the branch lacks.
    pub behind: Option<usize>,
    /// Changes in the index (what git_commit with paths or git_diff staged would show).
    pub staged: Vec<FileStatus>,
    /// Changes in the work tree not yet staged.
    pub unstaged: Vec<FileStatus>,
    /// Files git does not track and does not ignore.
    pub untracked: Vec<FileStatus>,
    /// Files with unresolved merge conflicts.
    pub conflicted: Vec<FileStatus>,
    /// Entries in all four lists before the cap.
    pub total: usize,
    /// Whether the 1000-entry cap cut the lists.
    pub truncated: bool,
}

impl Git {
    /// `git_status`: branch, upstream ahead/behind, and the changed files, structured.
    pub fn status(&self, p: StatusParams) -> Result<StatusOutput, GitError> {
        let at = p.repo.clone();
        let _held = self.hold("git_status")?;
        self.with_read(at.as_deref(), |r| {
            r.workdir("git_status")?;
            let repo = &r.repo;
            let (branch, head) = head_state(repo)?;
            let (mut upstream, mut ahead, mut behind) = (None, None, None);
            if let (Some(name), Some(local)) = (&branch, head)
                && let Ok(b) = repo.find_branch(name, BranchType::Local)
                && let Ok(up) = b.upstream()
            {
                upstream = up.name().ok().flatten().map(str::to_string);
                if let Some(up_id) = up.get().target()
                    && let Ok((a, b)) = repo.graph_ahead_behind(local, up_id)
                {
                    ahead = Some(a);
                    behind = Some(b);
                }
            }

            let mut opts = git2::StatusOptions::new();
            opts.include_untracked(true)
                .recurse_untracked_dirs(false)
                .include_ignored(false)
                .renames_head_to_index(true);
            let statuses = repo.statuses(Some(&mut opts)).map_err(GitError::git("status"))?;
            let mut out = StatusOutput {
                branch,
                head: head.map(|h| h.to_string()),
                upstream,
                ahead,
                behind,
                staged: Vec::new(),
                unstaged: Vec::new(),
                untracked: Vec::new(),
                conflicted: Vec::new(),
                total: 0,
                truncated: false,
            };
            let push =
                |list: &mut Vec<FileStatus>, path: String, status: &str, total: &mut usize| {
                    *total += 1;
                    if *total <= STATUS_CAP {
                        list.push(FileStatus { path, status: status.to_string() });
                    }
                };
            for entry in statuses.iter() {
                let s = entry.status();
                let path = String::from_utf8_lossy(entry.path_bytes()).into_owned();
                if s.is_conflicted() {
                    push(&mut out.conflicted, path, "conflicted", &mut out.total);
                    continue;
                }
                let staged = if s.is_index_new() {
                    Some("added")
                } else if s.is_index_modified() {
                    Some("modified")
                } else if s.is_index_deleted() {
                    Some("deleted")
                } else if s.is_index_renamed() {
                    Some("renamed")
                } else if s.is_index_typechange() {
                    Some("typechange")
                } else {
                    None
                };
                if let Some(st) = staged {
                    let shown = match (st, entry.head_to_index()) {
                        ("renamed", Some(d)) => format!(
                            "{} -> {}",
                            d.old_file().path().map(|p| p.to_string_lossy()).unwrap_or_default(),
                            d.new_file().path().map(|p| p.to_string_lossy()).unwrap_or_default()
                        ),
                        _ => path.clone(),
                    };
                    push(&mut out.staged, shown, st, &mut out.total);
                }
                if s.contains(Status::WT_NEW) {
                    push(&mut out.untracked, path.clone(), "untracked", &mut out.total);
                } else if s.is_wt_modified() {
                    push(&mut out.unstaged, path.clone(), "modified", &mut out.total);
                } else if s.is_wt_deleted() {
                    push(&mut out.unstaged, path.clone(), "deleted", &mut out.total);
                } else if s.is_wt_typechange() {
                    push(&mut out.unstaged, path.clone(), "typechange", &mut out.total);
                } else if s.is_wt_renamed() {
                    push(&mut out.unstaged, path.clone(), "renamed", &mut out.total);
                }
            }
            out.truncated = out.total > STATUS_CAP;
            Ok(out)
        })
    }
}

/// The checked-out branch (if HEAD is on one) and the commit HEAD points at (if any yet).
pub(crate) fn head_state(repo: &Repository) -> Result<(Option<String>, Option<Oid>), GitError> {
    let head = repo.find_reference("HEAD").map_err(GitError::git("read HEAD"))?;
    let branch =
        head.symbolic_target().and_then(|t| t.strip_prefix("refs/heads/")).map(str::to_string);
    let id = head.resolve().ok().and_then(|r| r.target());
    Ok((branch, id))
}

impl fmt::Display for StatusOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.branch, &self.head) {
            (Some(b), _) => write!(f, "on branch {b}")?,
            (None, Some(h)) => write!(f, "HEAD detached at {}", short(h))?,
            (None, None) => write!(f, "HEAD detached")?,
        }
        if self.head.is_none() {
            write!(f, " (no commits yet)")?;
        }
        if let Some(up) = &self.upstream {
            write!(
                f,
                " (upstream {up}: ahead {}, behind {})",
                self.ahead.unwrap_or(0),
                self.behind.unwrap_or(0)
            )?;
        }
        writeln!(f)?;
        for (title, list) in [
            ("conflicted", &self.conflicted),
            ("staged", &self.staged),
            ("unstaged", &self.unstaged),
            ("untracked", &self.untracked),
        ] {
            if list.is_empty() {
                continue;
            }
            writeln!(f, "{title}:")?;
            for e in list {
                writeln!(f, "  {:<10} {}", e.status, e.path)?;
            }
        }
        if self.total == 0 {
            writeln!(f, "nothing to commit, working tree clean")?;
        }
        if self.truncated {
            writeln!(f, "(showing {STATUS_CAP} of {} entries)", self.total)?;
        }
        Ok(())
    }
}

/// Parameters of `git_diff`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DiffParams {
    /// Repository folder (the one holding `.git`): absolute, or relative to the first root.
    /// Default: the first root.
    pub repo: Option<String>,
    /// `true`: the staged changes (index against HEAD); default `false`: the unstaged ones
    /// (work tree against index).
    pub staged: Option<bool>,
    /// Only this file or folder: relative to the repository's work tree, as git_status and
    /// git_diff print it (`src/a.rs`), or absolute under the roots; it must lie inside the
    /// work tree. Default: everything.
    pub path: Option<String>,
    /// Lines of context around each change (default 3, max 1000).
    pub context: Option<u32>,
}

/// What `git_diff` returns.
#[derive(Debug, Serialize, JsonSchema)]
pub struct DiffOutput {
    /// The unified diff, cut at 256 KiB. Secret and denied files show a note instead of
    /// their content.
    pub patch: String,
    /// Files with changes.
    pub files_changed: usize,
    /// Whether the 256 KiB cap cut the patch.
    pub truncated: bool,
}

impl Git {
    /// `git_diff`: the patch of the unstaged or staged changes, optionally of one path.
    pub fn diff(&self, p: DiffParams) -> Result<DiffOutput, GitError> {
        let at = p.repo.clone();
        let _held = self.hold("git_diff")?;
        self.with_read(at.as_deref(), |r| {
            let workdir = r.workdir("git_diff")?.to_path_buf();
            let repo = &r.repo;
            let mut opts = DiffOptions::new();
            opts.context_lines(p.context.unwrap_or(3).min(1000))
                .max_size(DIFF_MAX_FILE)
                .disable_pathspec_match(true);
            if let Some(path) = &p.path {
                let rel = self.repo_relative(&workdir, path)?;
                if !rel.as_os_str().is_empty() {
                    opts.pathspec(rel);
                }
            }
            let diff = if p.staged.unwrap_or(false) {
                let tree = match repo.head() {
                    Ok(h) => Some(h.peel_to_tree().map_err(GitError::git("diff"))?),
                    Err(_) => None,
                };
                repo.diff_tree_to_index(tree.as_ref(), None, Some(&mut opts))
            } else {
                repo.diff_index_to_workdir(None, Some(&mut opts))
            }
            .map_err(GitError::git("diff"))?;

            let files_changed = diff.deltas().len();
            let mut patch: Vec<u8> = Vec::new();
            let mut truncated = false;
            let printed = diff.print(DiffFormat::Patch, |delta, _hunk, line| {
                let path = delta.new_file().path().or_else(|| delta.old_file().path());
                let hidden = path.is_some_and(|p| self.hidden(&workdir, p));
                let origin = line.origin();
                let mut chunk: Vec<u8> = Vec::new();
                if hidden {
                    if origin != 'F' {
                        return true;
                    }
                    chunk.extend_from_slice(line.content());
                    chunk.extend_from_slice(b"(secret or denied file: content not shown)\n");
                } else {
                    if matches!(origin, '+' | '-' | ' ') {
                        chunk.push(origin as u8);
                    }
                    chunk.extend_from_slice(line.content());
                }
                if patch.len() + chunk.len() > DIFF_CAP {
                    truncated = true;
                    return false;
                }
                patch.extend_from_slice(&chunk);
                true
            });
            if let Err(e) = printed
                && !truncated
            {
                return Err(GitError::Git { op: "diff", source: e });
            }
            Ok(DiffOutput {
                patch: String::from_utf8_lossy(&patch).into_owned(),
                files_changed,
                truncated,
            })
        })
    }
}

impl fmt::Display for DiffOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.files_changed == 0 {
            return writeln!(f, "no changes");
        }
        f.write_str(&self.patch)?;
        if self.truncated {
            writeln!(
                f,
                "(patch cut at 256 KiB; {} changed; pass `path` to see one)",
                hands_tool::counted(self.files_changed as u64, "file", "files")
            )?;
        }
        Ok(())
    }
}

/// One commit, as `log` and `branch_commits` list it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct CommitInfo {
    /// Full commit id.
    pub id: String,
    /// Author name.
    pub author: String,
    /// Author email.
    pub email: String,
    /// Author date, RFC 3339 in the author's offset.
    pub date: String,
    /// First line of the message.
    pub summary: String,
}

impl CommitInfo {
    pub(crate) fn of(c: &Commit<'_>) -> CommitInfo {
        let a = c.author();
        CommitInfo {
            id: c.id().to_string(),
            author: String::from_utf8_lossy(a.name_bytes()).into_owned(),
            email: String::from_utf8_lossy(a.email_bytes()).into_owned(),
            date: rfc3339(a.when()),
            summary: c
                .summary_bytes()
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .unwrap_or_default(),
        }
    }
}

fn write_commits(f: &mut fmt::Formatter<'_>, commits: &[CommitInfo]) -> fmt::Result {
    for c in commits {
        writeln!(f, "{} {} {} {}", short(&c.id), c.date, c.author, c.summary)?;
    }
    Ok(())
}

pub(crate) fn short(id: &str) -> &str {
    id.get(..10).unwrap_or(id)
}

/// Parameters of `git_log`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LogParams {
    /// Repository folder (the one holding `.git`): absolute, or relative to the first root.
    /// Default: the first root.
    pub repo: Option<String>,
    /// Where to start: a branch, tag, remote branch (`origin/main`), commit id or `HEAD`
    /// (default). No ranges or `~`/`^` syntax.
    pub rev: Option<String>,
    /// Most commits to return (default 20, 1 to 500; outside that range is an error).
    pub limit: Option<u32>,
    /// Only commits that change this file or folder: relative to the repository's work tree,
    /// as git_status and git_diff print it (`src/a.rs`), or absolute under the roots; it must
    /// lie inside the work tree.
    pub path: Option<String>,
}

/// What `git_log` returns.
#[derive(Debug, Serialize, JsonSchema)]
pub struct LogOutput {
    /// Commits, newest first.
    pub commits: Vec<CommitInfo>,
    /// Whether more commits were left out (by `limit`, or by the scan cap with `path`).
    pub truncated: bool,
}

impl Git {
    /// `git_log`: commits reachable from `rev`, newest first, optionally only those touching
    /// `path`.
    pub fn log(&self, p: LogParams) -> Result<LogOutput, GitError> {
        if let Some(rev) = &p.rev {
            check_rev("rev", rev)?;
        }
        let _held = self.hold("git_log")?;
        let at = p.repo.clone();
        self.with_read(at.as_deref(), |r| {
            let repo = &r.repo;
            let filter = match &p.path {
                Some(path) => Some(self.repo_relative(r.workdir("git_log with `path`")?, path)?),
                None => None,
            };
            let start = match &p.rev {
                Some(rev) => resolve(repo, "rev", rev)?,
                None => match head_state(repo)?.1 {
                    Some(id) => id,
                    None => return Ok(LogOutput { commits: Vec::new(), truncated: false }),
                },
            };
            let limit = p.limit.unwrap_or(LOG_DEFAULT);
            if !(1..=LOG_MAX).contains(&limit) {
                return Err(GitError::BadArgument {
                    arg: "limit",
                    why: format!("must be between 1 and {LOG_MAX} (commits); got {limit}"),
                });
            }
            let limit = limit as usize;
            // `Sort::NONE` is libgit2's lazy walk in commit-date order, newest first, as `git log`
            // does by default. Any other sorting makes libgit2 read the whole history before the
            // first commit comes out (over 10,000 commits that was most of a 500-commit log).
            let mut walk = repo.revwalk().map_err(GitError::git("log"))?;
            walk.set_sorting(Sort::NONE).map_err(GitError::git("log"))?;
            walk.push(start).map_err(GitError::git("log"))?;
            let mut commits = Vec::new();
            let mut truncated = false;
            for (scanned, id) in walk.enumerate() {
                if scanned >= LOG_SCAN_CAP {
                    truncated = true;
                    break;
                }
                let id = id.map_err(GitError::git("log"))?;
                let c = repo.find_commit(id).map_err(GitError::git("log"))?;
                if let Some(rel) = &filter
                    && !touches(&c, rel)
                {
                    continue;
                }
                if commits.len() == limit {
                    truncated = true;
                    break;
                }
                commits.push(CommitInfo::of(&c));
            }
            Ok(LogOutput { commits, truncated })
        })
    }
}

/// Whether a commit changes `rel` (relative to the tree root; empty = anything): its entry
/// differs from every parent's (so a merge that only brings in one side's change counts, as
/// in git's default history simplification).
fn touches(c: &Commit<'_>, rel: &Path) -> bool {
    let entry = |c: &Commit<'_>| -> Option<Oid> {
        let tree = c.tree().ok()?;
        if rel.as_os_str().is_empty() {
            return Some(tree.id());
        }
        tree.get_path(rel).ok().map(|e| e.id())
    };
    let mine = entry(c);
    if c.parent_count() == 0 {
        return mine.is_some();
    }
    c.parents().all(|parent| entry(&parent) != mine)
}

/// Resolves a checked revision name to a commit id.
pub(crate) fn resolve(repo: &Repository, arg: &'static str, value: &str) -> Result<Oid, GitError> {
    let not_found = || GitError::RevNotFound { arg, value: value.to_string() };
    let obj = repo.revparse_single(value).map_err(|e| match e.code() {
        git2::ErrorCode::NotFound | git2::ErrorCode::Ambiguous | git2::ErrorCode::InvalidSpec => {
            not_found()
        }
        _ => GitError::Git { op: "resolve", source: e },
    })?;
    let c = obj.peel_to_commit().map_err(|_| not_found())?;
    Ok(c.id())
}

impl fmt::Display for LogOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.commits.is_empty() {
            return writeln!(f, "no commits");
        }
        write_commits(f, &self.commits)?;
        if self.truncated {
            writeln!(f, "(more commits not shown; raise `limit` up to 500)")?;
        }
        Ok(())
    }
}

/// Parameters of `git_branches`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BranchesParams {
    /// Repository folder (the one holding `.git`): absolute, or relative to the first root.
    /// Default: the first root.
    pub repo: Option<String>,
}

/// One local branch.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct BranchInfo {
    /// Branch name (without `refs/heads/`).
    pub name: String,
    /// Whether it is checked out here.
    pub current: bool,
    /// Its upstream (e.g. `origin/main`), if configured.
    pub upstream: Option<String>,
    /// Id of its last commit.
    pub last_commit: String,
    /// First line of its last commit's message.
    pub summary: String,
}

/// What `git_branches` returns.
#[derive(Debug, Serialize, JsonSchema)]
pub struct BranchesOutput {
    /// Local branches, sorted by name.
    pub branches: Vec<BranchInfo>,
    /// Whether the 1000-branch cap cut the list.
    pub truncated: bool,
}

impl Git {
    /// `git_branches`: local branches, the current one marked, with upstream and last commit.
    pub fn branches(&self, p: BranchesParams) -> Result<BranchesOutput, GitError> {
        let _held = self.hold("git_branches")?;
        let at = p.repo.clone();
        self.with_read(at.as_deref(), |r| {
            let repo = &r.repo;
            let mut branches = Vec::new();
            let mut truncated = false;
            for b in
                repo.branches(Some(BranchType::Local)).map_err(GitError::git("list branches"))?
            {
                let (b, _) = b.map_err(GitError::git("list branches"))?;
                if branches.len() == BRANCHES_CAP {
                    truncated = true;
                    break;
                }
                let name = String::from_utf8_lossy(
                    b.name_bytes().map_err(GitError::git("list branches"))?,
                )
                .into_owned();
                let upstream =
                    b.upstream().ok().and_then(|u| u.name().ok().flatten().map(str::to_string));
                let (last_commit, summary) = match b.get().peel_to_commit() {
                    Ok(c) => (c.id().to_string(), CommitInfo::of(&c).summary),
                    Err(_) => (String::new(), String::new()),
                };
                branches.push(BranchInfo {
                    name,
                    current: b.is_head(),
                    upstream,
                    last_commit,
                    summary,
                });
            }
            branches.sort_by(|a, b| a.name.cmp(&b.name));
            Ok(BranchesOutput { branches, truncated })
        })
    }
}

impl fmt::Display for BranchesOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.branches.is_empty() {
            return writeln!(f, "no branches yet");
        }
        for b in &self.branches {
            let mark = if b.current { '*' } else { ' ' };
            write!(f, "{mark} {} {}", b.name, short(&b.last_commit))?;
            if let Some(up) = &b.upstream {
                write!(f, " [{up}]")?;
            }
            writeln!(f, " {}", b.summary)?;
        }
        if self.truncated {
            writeln!(f, "(more branches not shown)")?;
        }
        Ok(())
    }
}

/// Parameters of `git_branch_commits`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BranchCommitsParams {
    /// Repository folder (the one holding `.git`): absolute, or relative to the first root.
    /// Default: the first root.
    pub repo: Option<String>,
    /// The branch whose own commits to list (local, or remote like `origin/task/x`).
    pub branch: String,
    /// What to compare against. Default: the default branch (the target of `origin/HEAD`,
    /// else `main`, else `master`).
    pub base: Option<String>,
}

/// What `git_branch_commits` returns.
#[derive(Debug, Serialize, JsonSchema)]
pub struct BranchCommitsOutput {
    /// The branch listed.
    pub branch: String,
    /// The base compared against.
    pub base: String,
    /// Commits on `branch` that `base` lacks, newest first (at most 500).
    pub commits: Vec<CommitInfo>,
    /// Whether the 500-commit cap cut the list.
    pub truncated: bool,
}

impl Git {
    /// `git_branch_commits`: the commits on `branch` that `base` lacks.
    pub fn branch_commits(&self, p: BranchCommitsParams) -> Result<BranchCommitsOutput, GitError> {
        check_rev("branch", &p.branch)?;
        if let Some(base) = &p.base {
            check_rev("base", base)?;
        }
        let _held = self.hold("git_branch_commits")?;
        let at = p.repo.clone();
        self.with_read(at.as_deref(), |r| {
            let repo = &r.repo;
            let tip = resolve(repo, "branch", &p.branch)?;
            let (base, base_id) = match &p.base {
                Some(b) => (b.clone(), resolve(repo, "base", b)?),
                None => default_base(repo).ok_or(GitError::NoBase)?,
            };
            let mut walk = repo.revwalk().map_err(GitError::git("log"))?;
            walk.set_sorting(Sort::TOPOLOGICAL | Sort::TIME).map_err(GitError::git("log"))?;
            walk.push(tip).map_err(GitError::git("log"))?;
            walk.hide(base_id).map_err(GitError::git("log"))?;
            let mut commits = Vec::new();
            let mut truncated = false;
            for id in walk {
                let id = id.map_err(GitError::git("log"))?;
                if commits.len() == LIST_CAP {
                    truncated = true;
                    break;
                }
                let c = repo.find_commit(id).map_err(GitError::git("log"))?;
                commits.push(CommitInfo::of(&c));
            }
            Ok(BranchCommitsOutput { branch: p.branch, base, commits, truncated })
        })
    }
}

/// The default branch: what `origin/HEAD` points at, else `main`, else `master`.
fn default_base(repo: &Repository) -> Option<(String, Oid)> {
    if let Ok(r) = repo.find_reference("refs/remotes/origin/HEAD")
        && let Some(t) = r.symbolic_target()
    {
        let name = t.strip_prefix("refs/remotes/").unwrap_or(t).to_string();
        if let Ok(id) = repo.refname_to_id(t) {
            return Some((name, id));
        }
    }
    ["main", "master"].iter().find_map(|n| {
        let b = repo.find_branch(n, BranchType::Local).ok()?;
        Some((n.to_string(), b.get().target()?))
    })
}

impl fmt::Display for BranchCommitsOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.commits.is_empty() {
            return writeln!(f, "{} has no commits that {} lacks", self.branch, self.base);
        }
        let n = hands_tool::counted(self.commits.len() as u64, "commit", "commits");
        writeln!(f, "{n} on {} that {} lacks:", self.branch, self.base)?;
        write_commits(f, &self.commits)?;
        if self.truncated {
            writeln!(f, "(more not shown)")?;
        }
        Ok(())
    }
}
