//! A git dir under another name, as a checkout would write it: a folder that holds `HEAD`
//! beside a `config`, `config.worktree`, `commondir` or `hooks` is one to the git a person runs
//! there (bare-repository discovery), which loads that config and runs those hooks. The file
//! tools refuse the pieces in any order (`hands_roots`' write checks) and a command's run is
//! refused the last one (decision 0046); a tree checked out into the roots is held to the same
//! rule (found by the eighth attack pass: a branch built with git plumbing carried
//! `evil/{HEAD,config,objects,refs}`, and `git_switch` wrote them all). The checks read a
//! tree by name, so a tree whose names are not each once and in git's order is refused first
//! ([`malformed`]).

use crate::GitError;
use git2::{Oid, Repository, Tree};
use hands_roots::PathError;
use hands_roots::trust::GitDirPiece;
use rustix::fs::{Mode, OFlags};
use std::collections::{BTreeSet, HashSet};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

/// Why writing `rel` of `tree` into `workdir` would make or fill a git dir under another name,
/// if it would: counted as there are the tree's entries and what the folder holds on disk.
pub(crate) fn git_dir_piece(tree: &Tree<'_>, workdir: &Path, rel: &Path) -> Option<String> {
    let holds = |dir: &Path, name: &str| {
        let p = dir.join(name);
        tree.get_path(&p).is_ok() || workdir.join(&p).symlink_metadata().is_ok()
    };
    let name = rel.file_name()?.to_str().unwrap_or_default();
    let parent = rel.parent().unwrap_or(Path::new(""));
    match GitDirPiece::of(name, |c| holds(parent, c)) {
        Some(GitDirPiece::Control) => {
            return Some(format!("`{name}` beside a HEAD makes {} a git dir", folder(parent)));
        }
        Some(GitDirPiece::Head) => {
            let f = folder(parent);
            return Some(format!("a HEAD beside a git config or hooks makes {f} a git dir"));
        }
        None => {}
    }
    // Anything below the hooks folder of such a git dir (`evil/hooks/pre-commit`).
    let below_hooks = hands_roots::trust::hooks_owners(parent).any(|g| holds(g, "HEAD"));
    below_hooks.then(|| format!("the hooks of a git dir (a HEAD beside {})", folder(parent)))
}

/// Locks (`hands_roots::trust::lock_folder`), for as long as the result lives, every folder of
/// `workdir` in which the checkout from `old` to `new` writes a git dir's piece — a `HEAD` or a
/// control name, or an entry below a `hooks` (the folder above it) — making those not there
/// yet, as the checkout would. The file tools check and write the other piece under the same
/// lock, so one written beside the checkout waits for it and then sees its pieces; taken before
/// the checks ([`git_dir_piece`] reads the disk), so one written before is seen by them. Found
/// by the eleventh attack pass: `write x/HEAD` while `git_switch` wrote a branch's 300 big
/// files and then `x/config`, and a person's `git branch` in `x` ran the config's pager.
pub(crate) fn lock_pieces(
    repo: &Repository,
    workdir: &Path,
    old: Option<&Tree<'_>>,
    new: &Tree<'_>,
) -> Result<Locked, GitError> {
    use hands_roots::trust::{is_piece_name, lock_folder};
    use std::os::unix::ffi::OsStrExt;
    let diff = repo.diff_tree_to_tree(old, Some(new), None).map_err(GitError::git("diff"))?;
    let mut folders = BTreeSet::new();
    for d in diff.deltas().filter(|d| d.status() != git2::Delta::Deleted) {
        let Some(p) = d.new_file().path() else { continue };
        if p.file_name().is_some_and(|n| is_piece_name(n.as_bytes())) {
            folders.insert(p.parent().unwrap_or(Path::new("")).to_path_buf());
        }
        let parent = p.parent().unwrap_or(Path::new(""));
        folders.extend(hands_roots::trust::hooks_owners(parent).map(Path::to_path_buf));
    }
    let mut locked = Locked::default();
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let top = rustix::fs::open(workdir, flags, Mode::empty()).map_err(|e| PathError::Io {
        path: workdir.into(),
        op: "open",
        source: e.into(),
    })?;
    'folders: for f in folders {
        // One step at a time, no link followed (a command's `l -> /elsewhere` would have the
        // daemon make folders there); where a link or a file stands in the way the checkout
        // refuses (a conflict) or replaces it, and nothing is locked.
        let (mut cur, mut at) =
            (top.try_clone().map_err(|e| io_at(workdir, "open", e))?, workdir.to_path_buf());
        for c in f.components() {
            at.push(c);
            let next = match rustix::fs::openat(&cur, c.as_os_str(), flags, Mode::empty()) {
                Err(rustix::io::Errno::NOENT) => {
                    if rustix::fs::mkdirat(&cur, c.as_os_str(), Mode::from_raw_mode(0o755)).is_ok()
                    {
                        locked.made.push(at.clone());
                    }
                    rustix::fs::openat(&cur, c.as_os_str(), flags, Mode::empty())
                }
                other => other,
            };
            match next {
                Ok(fd) => cur = fd,
                Err(_) => continue 'folders,
            }
        }
        let held = lock_folder(cur.as_fd()).map_err(|e| io_at(&at, "lock", e))?;
        locked.held.push(held);
    }
    Ok(locked)
}

fn io_at(path: &Path, op: &'static str, source: std::io::Error) -> GitError {
    PathError::Io { path: path.into(), op, source }.into()
}

/// What [`lock_pieces`] holds: the locks, and the folders it made, removed again when they are
/// still empty (the checkout was refused) once it is dropped.
#[derive(Default)]
pub(crate) struct Locked {
    held: Vec<OwnedFd>,
    made: Vec<PathBuf>,
}

impl Drop for Locked {
    fn drop(&mut self) {
        for p in self.made.iter().rev() {
            let _ = std::fs::remove_dir(p);
        }
    }
}

fn folder(rel: &Path) -> String {
    if rel.as_os_str().is_empty() {
        "the work tree's top folder".to_string()
    } else {
        format!("`{}`", rel.display())
    }
}

/// Why `new` (to be checked out over `old`, or into an empty folder when `None`) is a tree git
/// itself never writes, if it is: a folder of it names an entry twice, or not in git's order
/// (names compared as bytes, a tree's with a `/` after it) — `git fsck`'s `duplicateEntries`
/// and `treeNotSorted`. libgit2 finds an entry by name with a binary search, so in such a
/// tree it finds one entry of a name, or none, while a checkout writes them all: found by the
/// ninth attack pass, a top tree naming `evil` three times (`HEAD`, `objects`, `refs` in one;
/// `config`, `hooks` in the next) passed the rule of [`git_dir_piece`] one folder at a time,
/// and `git_switch` wrote a whole git dir. Folders `old` holds alike (same object) are not
/// written by the checkout and are not read again.
pub(crate) fn malformed(
    repo: &Repository,
    new: &Tree<'_>,
    old: Option<&Tree<'_>>,
) -> Result<Option<String>, git2::Error> {
    let mut seen = HashSet::new();
    let mut todo: Vec<(PathBuf, Oid, Option<Oid>)> =
        vec![(PathBuf::new(), new.id(), old.map(Tree::id))];
    while let Some((at, id, was)) = todo.pop() {
        if Some(id) == was || !seen.insert(id) {
            continue;
        }
        let tree = repo.find_tree(id)?;
        let before = match was {
            Some(w) => Some(repo.find_tree(w)?),
            None => None,
        };
        let mut names = HashSet::new();
        let mut last: Option<Vec<u8>> = None;
        for e in tree.iter() {
            let name = e.name_bytes();
            let shown = at.join(String::from_utf8_lossy(name).as_ref());
            let is_tree = e.kind() == Some(git2::ObjectType::Tree);
            let mut key = name.to_vec();
            if is_tree {
                key.push(b'/');
            }
            if !names.insert(name.to_vec()) {
                return Ok(Some(format!("`{}` is named twice in one folder", shown.display())));
            }
            if last.as_ref().is_some_and(|l| *l >= key) {
                return Ok(Some(format!("`{}` is out of git's order", shown.display())));
            }
            last = Some(key);
            if is_tree {
                let was = before
                    .as_ref()
                    .and_then(|b| b.get_name_bytes(name))
                    .filter(|o| o.kind() == Some(git2::ObjectType::Tree))
                    .map(|o| o.id());
                todo.push((shown, e.id(), was));
            }
        }
    }
    Ok(None)
}
