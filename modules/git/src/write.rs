//! The write-class tools: `branch`, `switch`, `commit` and `worktree_add`. Each refuses a
//! repository in a read-only root and a checkout that would create or change protected files.

use crate::confine::{Access, Repo, path_str};
use crate::names::{check_branch, check_rev};
use crate::pieces::{git_dir_piece, malformed};
use crate::read::{head_state, resolve, short};
use crate::{Git, GitError};
use git2::build::CheckoutBuilder;
use git2::{BranchType, CheckoutNotificationType, Index, IndexAddOption, Oid, Repository, Tree};
use hands_roots::PathError;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::ffi::OsStr;
use std::fmt;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Most paths named in a "would overwrite" or "protected" refusal.
const NAMED_PATHS: usize = 20;
/// Longest commit message accepted.
const MAX_MESSAGE: usize = 64 * 1024;
/// Longest protected file compared with a new worktree's copy (bigger: not alike).
const MAX_PROTECTED: u64 = 1024 * 1024;

/// Parameters of `git_branch`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BranchParams {
    /// Repository folder (the one holding `.git`): absolute, or relative to the first root.
    /// Default: the first root.
    pub repo: Option<String>,
    /// Name of the new branch, e.g. `task/fix-login`.
    pub name: String,
    /// Commit to start from: a branch, tag, remote branch, commit id or `HEAD` (default).
    pub start: Option<String>,
    /// Check the new branch out (default true); refused if local changes would be overwritten.
    pub checkout: Option<bool>,
}

/// What `git_branch` returns.
#[derive(Debug, Serialize, JsonSchema)]
pub struct BranchOutput {
    /// The branch made.
    pub name: String,
    /// The commit it points at.
    pub commit: String,
    /// Whether it is now checked out.
    pub checked_out: bool,
}

impl fmt::Display for BranchOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "made branch {} at {}", self.name, short(&self.commit))?;
        if self.checked_out {
            write!(f, " and checked it out")?;
        }
        writeln!(f)
    }
}

/// Parameters of `git_switch`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SwitchParams {
    /// Repository folder (the one holding `.git`): absolute, or relative to the first root.
    /// Default: the first root.
    pub repo: Option<String>,
    /// Local branch to check out.
    pub branch: String,
}

/// What `git_switch` returns.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SwitchOutput {
    /// The branch now checked out.
    pub branch: String,
    /// The commit it points at.
    pub commit: String,
    /// Whether it was checked out already (nothing changed).
    pub already: bool,
}

impl fmt::Display for SwitchOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.already {
            writeln!(f, "already on {} ({})", self.branch, short(&self.commit))
        } else {
            writeln!(f, "switched to {} ({})", self.branch, short(&self.commit))
        }
    }
}

/// Parameters of `git_commit`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CommitParams {
    /// Repository folder (the one holding `.git`): absolute, or relative to the first root.
    /// Default: the first root.
    pub repo: Option<String>,
    /// Commit message: a summary line, optionally a blank line and a body (max 64 KiB).
    pub message: String,
    /// Commit only these files or folders — relative to the repository's work tree, as
    /// git_status prints them (`src/a.rs`), or absolute under the roots; inside the work
    /// tree — leaving other staged changes staged. Default: every change, untracked
    /// files included (`.gitignore` respected).
    pub paths: Option<Vec<String>>,
}

/// What `git_commit` returns.
#[derive(Debug, Serialize, JsonSchema)]
pub struct CommitOutput {
    /// The new commit's id.
    pub id: String,
    /// Its message's first line.
    pub summary: String,
    /// The branch it was made on; absent on a detached HEAD.
    pub branch: Option<String>,
    /// Files the commit changed, relative to the work tree.
    pub files: Vec<String>,
    /// Changed files left out because they are secret or denied (never committed by hands).
    pub skipped: Vec<String>,
}

impl fmt::Display for CommitOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let on = self.branch.as_deref().map(|b| format!(" on {b}")).unwrap_or_default();
        writeln!(f, "committed {}{on}: {}", short(&self.id), self.summary)?;
        for file in &self.files {
            writeln!(f, "  {file}")?;
        }
        if !self.skipped.is_empty() {
            writeln!(f, "left out (secret or denied): {}", self.skipped.join(", "))?;
        }
        Ok(())
    }
}

/// Parameters of `git_worktree_add`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorktreeAddParams {
    /// Repository folder (the one holding `.git`): absolute, or relative to the first root.
    /// Default: the first root.
    pub repo: Option<String>,
    /// New folder for the worktree, under a writable root (absolute, or relative to the first
    /// root); it must not exist yet. Missing parent folders are made.
    pub path: String,
    /// Branch to check out there; made from HEAD if it does not exist.
    pub branch: String,
}

/// What `git_worktree_add` returns.
#[derive(Debug, Serialize, JsonSchema)]
pub struct WorktreeAddOutput {
    /// The real absolute path of the new worktree.
    pub path: String,
    /// The branch checked out there.
    pub branch: String,
    /// Whether the branch was made (from HEAD) for it.
    pub created_branch: bool,
}

impl fmt::Display for WorktreeAddOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let made = if self.created_branch { " (new branch from HEAD)" } else { "" };
        writeln!(f, "worktree at {} on {}{made}", self.path, self.branch)
    }
}

impl Git {
    /// `git_branch`: makes a branch at `start` and, unless told not to, checks it out (the
    /// branch is removed again if that checkout is refused).
    pub fn branch(&self, p: BranchParams) -> Result<BranchOutput, GitError> {
        let name = check_branch("name", &p.name)?.to_string();
        if let Some(start) = &p.start {
            check_rev("start", start)?;
        }
        let checkout = p.checkout.unwrap_or(true);
        let _held = self.hold("git_branch")?;
        let r = self.open(p.repo.as_deref(), Access::Write)?;
        let repo = &r.repo;
        if repo.find_branch(&name, BranchType::Local).is_ok() {
            return Err(GitError::BranchExists { name });
        }
        let start = match &p.start {
            Some(s) => resolve(repo, "start", s)?,
            None => head_state(repo)?.1.ok_or(GitError::Unborn)?,
        };
        let commit = repo.find_commit(start).map_err(GitError::git("branch"))?;
        if checkout {
            r.workdir("git_branch with checkout")?;
            r.check_clean_state()?;
        }
        let mut made = repo.branch(&name, &commit, false).map_err(GitError::git("branch"))?;
        if checkout && let Err(e) = self.checkout_branch(&r, &name, start) {
            // Leave no trace of a branch the caller asked to be on but is not.
            let _ = made.delete();
            return Err(e);
        }
        Ok(BranchOutput { name, commit: start.to_string(), checked_out: checkout })
    }

    /// `git_switch`: checks out a local branch, refusing when local changes would be
    /// overwritten (naming the files) or protected files would change.
    pub fn switch(&self, p: SwitchParams) -> Result<SwitchOutput, GitError> {
        let name = check_branch("branch", &p.branch)?.to_string();
        let _held = self.hold("git_switch")?;
        let r = self.open(p.repo.as_deref(), Access::Write)?;
        r.workdir("git_switch")?;
        let repo = &r.repo;
        let b = repo
            .find_branch(&name, BranchType::Local)
            .map_err(|_| GitError::BranchNotFound { name: name.clone() })?;
        let target =
            b.get().target().ok_or_else(|| GitError::BranchNotFound { name: name.clone() })?;
        let (current, _) = head_state(repo)?;
        if current.as_deref() == Some(name.as_str()) {
            return Ok(SwitchOutput { branch: name, commit: target.to_string(), already: true });
        }
        r.check_clean_state()?;
        self.checkout_branch(&r, &name, target)?;
        Ok(SwitchOutput { branch: name, commit: target.to_string(), already: false })
    }

    /// Safe checkout of `target` then HEAD to `refs/heads/NAME`.
    fn checkout_branch(&self, r: &Repo, name: &str, target: Oid) -> Result<(), GitError> {
        let repo = &r.repo;
        let workdir = r.workdir("checkout")?;
        let new_tree =
            repo.find_commit(target).and_then(|c| c.tree()).map_err(GitError::git("checkout"))?;
        let old_tree = head_tree(repo)?;
        let _held = crate::pieces::lock_pieces(repo, workdir, old_tree.as_ref(), &new_tree)?;
        self.refuse_protected(
            repo,
            workdir,
            old_tree.as_ref(),
            &new_tree,
            format!("switching to `{name}`"),
        )?;

        let conflicts: RefCell<Vec<String>> = RefCell::new(Vec::new());
        let result = {
            let mut cb = CheckoutBuilder::new();
            cb.safe().notify_on(CheckoutNotificationType::CONFLICT).notify(|_, path, _, _, _| {
                if let Some(p) = path {
                    conflicts.borrow_mut().push(p.to_string_lossy().into_owned());
                }
                true
            });
            repo.checkout_tree(new_tree.as_object(), Some(&mut cb))
        };
        let conflicts = conflicts.into_inner();
        match result {
            Err(e) if !conflicts.is_empty() || e.code() == git2::ErrorCode::Conflict => {
                return Err(GitError::WouldOverwrite {
                    branch: name.to_string(),
                    paths: name_some(conflicts),
                });
            }
            Err(e) => return Err(GitError::Git { op: "checkout", source: e }),
            Ok(()) => {}
        }
        repo.set_head(&format!("refs/heads/{name}")).map_err(GitError::git("checkout"))?;
        Ok(())
    }

    /// Refuses a change from `old` to `new` (trees checked out into `workdir`) that touches a
    /// protected path: those are executed outside the sandbox, so only a person changes them.
    fn refuse_protected(
        &self,
        repo: &Repository,
        workdir: &Path,
        old: Option<&Tree<'_>>,
        new: &Tree<'_>,
        what: String,
    ) -> Result<(), GitError> {
        if let Some(why) = malformed(repo, new, old).map_err(GitError::git("checkout"))? {
            return Err(GitError::MalformedTree { what, why });
        }
        let diff = repo.diff_tree_to_tree(old, Some(new), None).map_err(GitError::git("diff"))?;
        let mut hit = Vec::new();
        for d in diff.deltas() {
            for f in [d.old_file(), d.new_file()] {
                let Some(p) = f.path() else { continue };
                let written = d.status() != git2::Delta::Deleted;
                let why = match self.protected(workdir, p) {
                    Some(_) => Some(String::new()),
                    None if written => git_dir_piece(new, workdir, p).map(|w| format!(" ({w})")),
                    None => None,
                };
                if let Some(why) = why {
                    let s = format!("{}{why}", p.to_string_lossy());
                    if !hit.contains(&s) {
                        hit.push(s);
                    }
                }
            }
        }
        if hit.is_empty() {
            return Ok(());
        }
        Err(GitError::ProtectedChange { what, paths: name_some(hit) })
    }

    /// Refuses a new worktree at `target` whose `tree` holds a protected path that the
    /// repository's own work tree does not hold alike (same kind, same bytes). A command can
    /// move HEAD and write any commit, but can neither make nor change a protected file in the
    /// roots (decision 0046 and the read-only masks), so what the work tree holds is the
    /// person's (decision 0017, amended).
    fn refuse_protected_new(
        &self,
        repo: &Repository,
        target: &Path,
        tree: &Tree<'_>,
        what: String,
    ) -> Result<(), GitError> {
        if let Some(why) = malformed(repo, tree, None).map_err(GitError::git("worktree add"))? {
            return Err(GitError::MalformedTree { what, why });
        }
        let mut hit = Vec::new();
        // The work tree's real path, once: a protected file is compared at that very path.
        let real = repo.workdir().and_then(|w| std::fs::canonicalize(w).ok());
        tree.walk(git2::TreeWalkMode::PreOrder, |dir, entry| {
            let rel = Path::new(dir).join(OsStr::from_bytes(entry.name_bytes()));
            if entry.kind() == Some(git2::ObjectType::Tree) {
                return git2::TreeWalkResult::Ok;
            }
            let why = match self.protected(target, &rel) {
                Some(_) => Some(String::new()),
                None => git_dir_piece(tree, target, &rel).map(|w| format!(" ({w})")),
            };
            if let Some(why) = why
                && !real.as_deref().is_some_and(|w| self.held_alike(repo, w, &rel, entry))
            {
                hit.push(format!("{}{why}", rel.to_string_lossy()));
            }
            git2::TreeWalkResult::Ok
        })
        .map_err(GitError::git("worktree add"))?;
        if hit.is_empty() {
            return Ok(());
        }
        Err(GitError::ProtectedChange { what, paths: name_some(hit) })
    }

    /// Whether the repository's work tree holds `rel` as `entry` has it: a symbolic link to
    /// the same target, or a regular file (at that very path, no link on the way) with the
    /// same bytes and executable bit.
    fn held_alike(
        &self,
        repo: &Repository,
        workdir: &Path,
        rel: &Path,
        entry: &git2::TreeEntry<'_>,
    ) -> bool {
        use std::os::unix::fs::PermissionsExt;
        let Ok(blob) = repo.find_blob(entry.id()) else { return false };
        let abs = workdir.join(rel);
        let Ok(meta) = std::fs::symlink_metadata(&abs) else { return false };
        match entry.filemode() {
            0o120000 => {
                meta.file_type().is_symlink()
                    && std::fs::read_link(&abs)
                        .is_ok_and(|l| l.as_os_str().as_bytes() == blob.content())
            }
            mode @ (0o100644 | 0o100755) => {
                let Ok(shown) = path_str(&abs) else { return false };
                let Ok(mut opened) = self.resolver.open_file(shown) else { return false };
                let mut bytes = Vec::new();
                let read = std::io::Read::take(&mut opened.file, MAX_PROTECTED + 1)
                    .read_to_end(&mut bytes);
                read.is_ok()
                    && opened.abs == workdir.join(rel)
                    && (meta.permissions().mode() & 0o100 != 0) == (mode == 0o100755)
                    && bytes == blob.content()
            }
            _ => false,
        }
    }

    /// `git_commit`: commits every change (untracked included, `.gitignore` respected) or only
    /// `paths`, with the configured author; hooks never run (libgit2 has none).
    pub fn commit(&self, p: CommitParams) -> Result<CommitOutput, GitError> {
        if p.message.contains('\0') {
            return Err(GitError::BadArgument {
                arg: "message",
                why: "it contains a NUL byte".into(),
            });
        }
        if p.message.len() > MAX_MESSAGE {
            return Err(GitError::BadArgument {
                arg: "message",
                why: "it is longer than 64 KiB".into(),
            });
        }
        let message = git2::message_prettify(&p.message, None).map_err(GitError::git("commit"))?;
        if message.trim().is_empty() {
            return Err(GitError::BadArgument {
                arg: "message",
                why: "it is empty; say what the commit does".into(),
            });
        }
        let _held = self.hold("git_commit")?;
        let r = self.open(p.repo.as_deref(), Access::Write)?;
        let workdir = r.workdir("git_commit")?.to_path_buf();
        let repo = &r.repo;
        r.check_clean_state()?;
        let sig = self.signature(repo)?;
        let rels = match &p.paths {
            Some(paths) => {
                let mut rels = Vec::with_capacity(paths.len());
                for given in paths {
                    let rel = self.repo_relative(&workdir, given)?;
                    if !rel.as_os_str().is_empty() && self.hidden(&workdir, &rel) {
                        return Err(GitError::HiddenPath { path: given.clone() });
                    }
                    rels.push(rel);
                }
                // The work tree itself among the paths means every change.
                if rels.iter().any(|r| r.as_os_str().is_empty()) { None } else { Some(rels) }
            }
            None => None,
        };

        let mut index = repo.index().map_err(GitError::git("read the index"))?;
        if index.has_conflicts() {
            let paths = index
                .conflicts()
                .map(|it| {
                    it.filter_map(Result::ok)
                        .filter_map(|c| c.our.or(c.their).or(c.ancestor))
                        .map(|e| String::from_utf8_lossy(&e.path).into_owned())
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default();
            return Err(GitError::Conflicts { paths: name_some(paths) });
        }
        let skipped: RefCell<Vec<String>> = RefCell::new(Vec::new());
        let specs: Vec<PathBuf> = match &rels {
            Some(rels) => rels.clone(),
            None => vec![PathBuf::from("*")],
        };
        let flags = if rels.is_some() {
            IndexAddOption::DISABLE_PATHSPEC_MATCH
        } else {
            IndexAddOption::DEFAULT
        };
        {
            let mut skip_hidden = |path: &Path, _: &[u8]| -> i32 {
                if self.hidden(&workdir, path) {
                    skipped.borrow_mut().push(path.to_string_lossy().into_owned());
                    1
                } else {
                    0
                }
            };
            index
                .add_all(specs.iter(), flags, Some(&mut skip_hidden))
                .map_err(GitError::git("stage changes"))?;
            index
                .update_all(specs.iter(), Some(&mut skip_hidden))
                .map_err(GitError::git("stage changes"))?;
        }
        index.write().map_err(GitError::git("write the index"))?;

        let parent = match head_state(repo)?.1 {
            Some(id) => Some(repo.find_commit(id).map_err(GitError::git("commit"))?),
            None => None,
        };
        let parent_tree = match &parent {
            Some(c) => Some(c.tree().map_err(GitError::git("commit"))?),
            None => None,
        };
        let tree_id = match &rels {
            None => index.write_tree().map_err(GitError::git("write the tree"))?,
            Some(rels) => partial_tree(repo, &index, parent_tree.as_ref(), rels)?,
        };
        let tree = repo.find_tree(tree_id).map_err(GitError::git("commit"))?;
        let diff = repo
            .diff_tree_to_tree(parent_tree.as_ref(), Some(&tree), None)
            .map_err(GitError::git("commit"))?;
        let files: Vec<String> = diff
            .deltas()
            .filter_map(|d| {
                d.new_file()
                    .path()
                    .or_else(|| d.old_file().path())
                    .map(|p| p.to_string_lossy().into_owned())
            })
            .collect();
        if files.is_empty() {
            return Err(GitError::NothingToCommit { with_paths: rels.is_some() });
        }
        let parents: Vec<&git2::Commit<'_>> = parent.iter().collect();
        let id = repo
            .commit(Some("HEAD"), &sig, &sig, &message, &tree, &parents)
            .map_err(GitError::git("commit"))?;
        let summary = message.lines().next().unwrap_or_default().to_string();
        let mut skipped = skipped.into_inner();
        skipped.sort();
        skipped.dedup();
        Ok(CommitOutput {
            id: id.to_string(),
            summary,
            branch: head_state(repo)?.0,
            files,
            skipped,
        })
    }

    /// The commit identity: the settings' author, else the repository's user.name/user.email
    /// (global and system config are never read).
    fn signature(&self, repo: &Repository) -> Result<git2::Signature<'static>, GitError> {
        if let Some((name, email)) = &self.author {
            return git2::Signature::now(name, email).map_err(GitError::git("make the signature"));
        }
        let config = repo.config().map_err(GitError::git("read config"))?;
        let name = config.get_string("user.name").ok().filter(|s| !s.trim().is_empty());
        let email = config.get_string("user.email").ok().filter(|s| !s.trim().is_empty());
        match (name, email) {
            (Some(n), Some(e)) => git2::Signature::now(&n, &e).map_err(|_| GitError::NoIdentity),
            _ => Err(GitError::NoIdentity),
        }
    }

    /// `git_worktree_add`: a new worktree at `path` (under a writable root) on `branch`, the
    /// branch made from HEAD if missing (and removed again if the worktree cannot be made).
    pub fn worktree_add(&self, p: WorktreeAddParams) -> Result<WorktreeAddOutput, GitError> {
        let branch = check_branch("branch", &p.branch)?.to_string();
        let _held = self.hold("git_worktree_add")?;
        let r = self.open(p.repo.as_deref(), Access::Write)?;
        let repo = &r.repo;
        let commondir = self.inside(&r.gitdir, "common dir", repo.commondir())?;

        let target = self.resolver.prepare_write(&p.path, true).map_err(|e| match e {
            PathError::NotRegular { path, kind: "directory" }
            | PathError::IsADirectory { path } => GitError::BadArgument {
                arg: "path",
                why: format!(
                    "`{}` already exists; give a new folder for the worktree",
                    path.display()
                ),
            },
            PathError::NotRegular { path, .. } => GitError::BadArgument {
                arg: "path",
                why: format!(
                    "`{}` already exists; give a new folder for the worktree",
                    path.display()
                ),
            },
            other => other.into(),
        })?;
        if target.existing.is_some() {
            return Err(GitError::BadArgument {
                arg: "path",
                why: format!(
                    "`{}` already exists; give a new folder for the worktree",
                    target.abs.display()
                ),
            });
        }
        // The folders made on the way to the worktree go again when it cannot be made.
        let (abs, made) = (target.abs, target.made);
        path_str(&abs)?;
        let wt_name = worktree_name(&commondir, &abs);

        let (reference, created) = match repo.find_branch(&branch, BranchType::Local) {
            Ok(b) => (b.into_reference(), false),
            Err(_) => {
                let head = head_state(repo)?.1.ok_or(GitError::Unborn)?;
                let c = repo.find_commit(head).map_err(GitError::git("branch"))?;
                let b = repo.branch(&branch, &c, false).map_err(GitError::git("branch"))?;
                (b.into_reference(), true)
            }
        };
        let undo = |reference: git2::Reference<'_>| {
            if created {
                let mut b = git2::Branch::wrap(reference);
                let _ = b.delete();
            }
        };
        // Every file of the new worktree is written, the branch made from HEAD included: HEAD,
        // refs and objects are a command's to write, so the work tree on disk is what vouches.
        let tip = reference.peel_to_tree().map_err(GitError::git("worktree add"));
        let checked = tip.and_then(|tip| {
            self.refuse_protected_new(repo, &abs, &tip, format!("a worktree on `{branch}`"))
        });
        if let Err(e) = checked {
            undo(reference);
            return Err(e);
        }
        // The file tools write nothing into it meanwhile (hands_roots::busy).
        let _making = hands_roots::busy::making(abs.clone());
        let added = {
            let mut opts = git2::WorktreeAddOptions::new();
            opts.reference(Some(&reference));
            repo.worktree(&wt_name, &abs, Some(&opts))
        };
        match added {
            Ok(_) => {}
            Err(e) => {
                let msg = e.message().to_string();
                undo(reference);
                if msg.contains("already checked out") {
                    return Err(GitError::CheckedOutElsewhere { name: branch });
                }
                return Err(GitError::Git { op: "worktree add", source: e });
            }
        }
        made.keep();
        let shown = std::fs::canonicalize(&abs).unwrap_or(abs);
        Ok(WorktreeAddOutput {
            path: shown.to_string_lossy().into_owned(),
            branch,
            created_branch: created,
        })
    }
}

/// The tree HEAD points at, `None` before the first commit.
fn head_tree(repo: &Repository) -> Result<Option<Tree<'_>>, GitError> {
    match head_state(repo)?.1 {
        Some(id) => Ok(Some(
            repo.find_commit(id).and_then(|c| c.tree()).map_err(GitError::git("read HEAD"))?,
        )),
        None => Ok(None),
    }
}

/// The tree of HEAD with only `rels` (files or folders) taken from `index`: what
/// `git commit -- PATHS` records.
fn partial_tree(
    repo: &Repository,
    index: &Index,
    head: Option<&Tree<'_>>,
    rels: &[PathBuf],
) -> Result<Oid, GitError> {
    let op = GitError::git("build the commit tree");
    let mut tmp = Index::new().map_err(GitError::git("build the commit tree"))?;
    if let Some(t) = head {
        tmp.read_tree(t).map_err(op)?;
    }
    let under = |path: &[u8], rel: &[u8]| {
        rel.is_empty()
            || path == rel
            || (path.starts_with(rel) && path.get(rel.len()) == Some(&b'/'))
    };
    for rel in rels {
        let rel = rel.as_os_str().as_bytes();
        let stale: Vec<Vec<u8>> = tmp.iter().map(|e| e.path).filter(|p| under(p, rel)).collect();
        for p in stale {
            let p = PathBuf::from(std::ffi::OsStr::from_bytes(&p));
            tmp.remove_path(&p).map_err(GitError::git("build the commit tree"))?;
        }
        for e in index.iter().filter(|e| under(&e.path, rel)) {
            tmp.add(&e).map_err(GitError::git("build the commit tree"))?;
        }
    }
    tmp.write_tree_to(repo).map_err(GitError::git("write the tree"))
}

/// A free name for `.git/worktrees/NAME`, from the folder's name.
fn worktree_name(commondir: &Path, abs: &Path) -> String {
    let base: String = abs
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .map(
            |c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' { c } else { '-' },
        )
        .collect();
    let base = if base.is_empty() || base.starts_with('.') { format!("wt{base}") } else { base };
    let taken = |n: &str| commondir.join("worktrees").join(n).exists();
    if !taken(&base) {
        return base;
    }
    (2..1000).map(|i| format!("{base}-{i}")).find(|n| !taken(n)).unwrap_or(base)
}

/// At most [`NAMED_PATHS`] paths, with a count of the rest.
fn name_some(mut paths: Vec<String>) -> Vec<String> {
    if paths.len() > NAMED_PATHS {
        let more = paths.len() - NAMED_PATHS;
        paths.truncate(NAMED_PATHS);
        paths.push(format!("and {more} more"));
    }
    paths
}
