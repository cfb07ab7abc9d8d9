//! What another daemon sees of this one's commands and git tools: marks on the folders
//! themselves (decision 0084).
//!
//! [`super::Still`] counts the commands of one daemon. A second daemon over the same project —
//! another client's `hands serve`, with a state dir of its own or not — runs its own commands
//! and its own git tools, and neither would see the other's. So each leaves a mark where any
//! daemon can read it: a shared byte lock on the folder (an open-file-description lock, held
//! while the descriptor lives, released by the kernel when its holder dies). A running command
//! marks each of its writable roots, and each folder above them; a git tool that holds its
//! trees still marks them and each folder above. Each side marks first and then looks for the
//! other's marks, so of two that start together at least one sees the other.
//!
//! One byte each, so that a folder tells what lies at it from what lies below it:
//! - a command's root ([`COMMAND_AT`]) and a folder above one ([`COMMAND_BELOW`]);
//! - a git tool's tree ([`GIT_AT`]) and a folder above one ([`GIT_BELOW`]).
//!
//! A command can change a tree when its root is the tree, lies above it or lies below it: the
//! git tool looks for [`COMMAND_AT`] on its tree and every folder above, and [`COMMAND_BELOW`]
//! on its tree; a command looks for the same the other way round.
//!
//! A command in a sandbox can open its roots read-only and take such locks too: it can make
//! git tools refuse and other commands wait (its own person's tools), never hide a mark (a
//! lock of another open file description cannot be released from here).

use crate::sys::marks;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

const COMMAND_AT: i64 = 0;
const COMMAND_BELOW: i64 = 1;
const GIT_AT: i64 = 2;
const GIT_BELOW: i64 = 3;

/// Marks held until dropped (or, for a tmux session's, until its launcher ends too).
#[derive(Default)]
pub struct Marks(Vec<OwnedFd>);

impl std::fmt::Debug for Marks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Marks").field(&self.0.len()).finish()
    }
}

impl Marks {
    /// A running command's marks: on each of its writable `roots` and each folder above.
    pub(crate) fn command(roots: &[PathBuf]) -> Result<Marks, Unmarked> {
        Marks::take(roots, COMMAND_AT, COMMAND_BELOW)
    }

    /// A git tool's marks: on each of its `trees` and each folder above.
    pub(crate) fn git(trees: &[&Path]) -> Result<Marks, Unmarked> {
        Marks::take(trees, GIT_AT, GIT_BELOW)
    }

    /// Marks byte `at` on each of `trees` and byte `below` on each folder above them. A folder
    /// above that this process may not open (no read permission) is left unmarked: a daemon
    /// that could not open it could not look there either. Any other failure — a tree itself
    /// that cannot be marked, no descriptor left — is an error: unmarked, another daemon would
    /// not see what runs (found attacking this: every failure was skipped).
    fn take(trees: &[impl AsRef<Path>], at: i64, below: i64) -> Result<Marks, Unmarked> {
        let mut held = Vec::new();
        for tree in trees {
            for (i, folder) in tree.as_ref().ancestors().enumerate() {
                let byte = if i == 0 { at } else { below };
                let Some(fd) = open(folder, i == 0)? else { continue };
                marks::mark(fd.as_fd(), byte).map_err(|e| unmarked(folder, e))?;
                held.push(fd);
            }
        }
        Ok(Marks(held))
    }

    /// The descriptors that hold the marks, for a launcher to inherit (a tmux session's server
    /// outlives the call and the daemon).
    pub fn descriptors(&self) -> impl Iterator<Item = BorrowedFd<'_>> {
        self.0.iter().map(AsFd::as_fd)
    }
}

/// A folder that could not be marked or looked at, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unmarked(pub String);

fn unmarked(folder: &Path, e: impl std::fmt::Display) -> Unmarked {
    Unmarked(format!("`{}` could not be marked or checked ({e})", hands_roots::shown(folder)))
}

/// `folder` opened to be marked or looked at; `None` for a folder above the trees that this
/// process may not read, and for a tree that is a file (a `needs.write` file: the folders above
/// it carry its marks; found by the sixth attack pass, such a run refused after a person's yes).
fn open(folder: &Path, tree: bool) -> Result<Option<OwnedFd>, Unmarked> {
    match marks::open_folder(folder) {
        Ok(fd) => Ok(Some(fd)),
        Err(e) if tree && crate::sys::errno_of(&e) == Some(libc::ENOTDIR) => Ok(None),
        // Above a tree: a folder this process may not read, or a name that is no folder now
        // (a widened path's folder swapped for a link: its run is refused when its launcher
        // finds the path changed, which a refusal here would only hide; `suite::resolve`).
        Err(e)
            if !tree
                && matches!(
                    crate::sys::errno_of(&e),
                    Some(libc::EACCES | libc::EPERM | libc::ENOTDIR | libc::ELOOP | libc::ENOENT)
                ) =>
        {
            Ok(None)
        }
        Err(e) => Err(unmarked(folder, e)),
    }
}

/// Where a command of another daemon (or one holding such a mark) can change one of `trees`:
/// the first marked folder (or one that could not be looked at: `Err`).
pub(crate) fn command_at(trees: &[&Path]) -> Result<Option<PathBuf>, Unmarked> {
    look(trees, COMMAND_AT, COMMAND_BELOW)
}

/// Where a git tool of another daemon holds a tree that a command with `roots` can change.
pub(crate) fn git_at(roots: &[PathBuf]) -> Result<Option<PathBuf>, Unmarked> {
    look(roots, GIT_AT, GIT_BELOW)
}

/// The first folder with byte `at` marked on one of `trees` or a folder above, or byte
/// `below` on one of `trees`.
fn look(trees: &[impl AsRef<Path>], at: i64, below: i64) -> Result<Option<PathBuf>, Unmarked> {
    for tree in trees {
        for (i, folder) in tree.as_ref().ancestors().enumerate() {
            let Some(fd) = open(folder, i == 0)? else { continue };
            let bytes: &[i64] = if i == 0 { &[at, below] } else { &[at] };
            for &b in bytes {
                if marks::marked(fd.as_fd(), b).map_err(|e| unmarked(folder, e))? {
                    return Ok(Some(folder.to_path_buf()));
                }
            }
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_is_seen_at_above_and_below_and_not_beside() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("p");
        for d in ["p/sub/deep", "q"] {
            std::fs::create_dir_all(dir.path().join(d)).unwrap();
        }
        let (sub, q) = (p.join("sub"), dir.path().join("q"));
        assert_eq!(command_at(&[&sub]).unwrap(), None, "nothing runs yet");
        let running = Marks::command(std::slice::from_ref(&sub)).unwrap();
        // A git tool at the command's root, above it, below it: each sees it.
        assert_eq!(command_at(&[&sub]).unwrap(), Some(sub.clone()));
        assert_eq!(command_at(&[&p]).unwrap(), Some(p.clone()), "a command below the tree");
        assert_eq!(command_at(&[&sub.join("deep")]).unwrap(), Some(sub.clone()), "a command above");
        // Beside it, or a sibling's: nothing to see.
        assert_eq!(command_at(&[&q]).unwrap(), None);
        assert_eq!(
            git_at(std::slice::from_ref(&sub)).unwrap(),
            None,
            "commands do not see commands"
        );
        drop(running);
        assert_eq!(command_at(&[&p]).unwrap(), None, "the mark ends with its descriptor");

        let held = Marks::git(&[&p]).unwrap();
        assert_eq!(
            git_at(std::slice::from_ref(&sub)).unwrap(),
            Some(p.clone()),
            "a tree above the root"
        );
        assert_eq!(git_at(std::slice::from_ref(&p)).unwrap(), Some(p.clone()));
        assert_eq!(git_at(&[dir.path().to_path_buf()]).unwrap().as_deref(), Some(dir.path()));
        assert_eq!(git_at(std::slice::from_ref(&q)).unwrap(), None);
        drop(held);
        assert_eq!(git_at(std::slice::from_ref(&sub)).unwrap(), None);
    }

    #[test]
    fn an_inherited_copy_keeps_the_mark() {
        let dir = tempfile::tempdir().unwrap();
        let marks = Marks::command(&[dir.path().to_path_buf()]).unwrap();
        let copies: Vec<OwnedFd> =
            marks.descriptors().map(|fd| fd.try_clone_to_owned().unwrap()).collect();
        drop(marks);
        assert!(command_at(&[dir.path()]).unwrap().is_some(), "a copy of the descriptor keeps it");
        drop(copies);
        assert!(command_at(&[dir.path()]).unwrap().is_none());
    }

    #[test]
    fn a_tree_that_cannot_be_marked_or_looked_at_fails_closed() {
        let dir = tempfile::tempdir().unwrap();
        let gone = dir.path().join("gone");
        let e = Marks::command(std::slice::from_ref(&gone)).map(drop).unwrap_err();
        assert!(e.0.contains("gone") && e.0.contains("could not be marked"), "{e:?}");
        assert!(git_at(std::slice::from_ref(&gone)).is_err());
        assert!(command_at(&[&gone]).is_err());
    }

    #[test]
    fn a_file_is_marked_on_the_folders_above_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f.txt");
        std::fs::write(&file, "x").unwrap();
        let running = Marks::command(std::slice::from_ref(&file)).unwrap();
        assert_eq!(command_at(&[dir.path()]).unwrap().as_deref(), Some(dir.path()));
        assert_eq!(git_at(std::slice::from_ref(&file)).unwrap(), None);
        drop(running);
        assert_eq!(command_at(&[dir.path()]).unwrap(), None);
    }
}
