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
    pub(crate) fn command(roots: &[PathBuf]) -> Marks {
        Marks::take(roots, COMMAND_AT, COMMAND_BELOW)
    }

    /// A git tool's marks: on each of its `trees` and each folder above.
    pub(crate) fn git(trees: &[&Path]) -> Marks {
        Marks::take(trees, GIT_AT, GIT_BELOW)
    }

    /// Marks byte `at` on each of `trees` and byte `below` on each folder above them. A folder
    /// that cannot be opened (no read permission) is left unmarked: a daemon that could not
    /// open it could not look there either.
    fn take(trees: &[impl AsRef<Path>], at: i64, below: i64) -> Marks {
        let mut held = Vec::new();
        for tree in trees {
            for (i, folder) in tree.as_ref().ancestors().enumerate() {
                let byte = if i == 0 { at } else { below };
                if let Ok(fd) = marks::open_folder(folder)
                    && marks::mark(fd.as_fd(), byte).is_ok()
                {
                    held.push(fd);
                }
            }
        }
        Marks(held)
    }

    /// The descriptors that hold the marks, for a launcher to inherit (a tmux session's server
    /// outlives the call and the daemon).
    pub fn descriptors(&self) -> impl Iterator<Item = BorrowedFd<'_>> {
        self.0.iter().map(AsFd::as_fd)
    }
}

/// Where a command of another daemon (or one holding such a mark) can change one of `trees`:
/// the first marked folder.
pub(crate) fn command_at(trees: &[&Path]) -> Option<PathBuf> {
    look(trees, COMMAND_AT, COMMAND_BELOW)
}

/// Where a git tool of another daemon holds a tree that a command with `roots` can change.
pub(crate) fn git_at(roots: &[PathBuf]) -> Option<PathBuf> {
    look(roots, GIT_AT, GIT_BELOW)
}

/// The first folder with byte `at` marked on one of `trees` or a folder above, or byte
/// `below` on one of `trees`.
fn look(trees: &[impl AsRef<Path>], at: i64, below: i64) -> Option<PathBuf> {
    for tree in trees {
        for (i, folder) in tree.as_ref().ancestors().enumerate() {
            let Ok(fd) = marks::open_folder(folder) else { continue };
            let bytes: &[i64] = if i == 0 { &[at, below] } else { &[at] };
            if bytes.iter().any(|&b| marks::marked(fd.as_fd(), b).unwrap_or(false)) {
                return Some(folder.to_path_buf());
            }
        }
    }
    None
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
        assert_eq!(command_at(&[&sub]), None, "nothing runs yet");
        let running = Marks::command(std::slice::from_ref(&sub));
        // A git tool at the command's root, above it, below it: each sees it.
        assert_eq!(command_at(&[&sub]), Some(sub.clone()));
        assert_eq!(command_at(&[&p]), Some(p.clone()), "a command below the tree");
        assert_eq!(command_at(&[&sub.join("deep")]), Some(sub.clone()), "a command above");
        // Beside it, or a sibling's: nothing to see.
        assert_eq!(command_at(&[&q]), None);
        assert_eq!(git_at(std::slice::from_ref(&sub)), None, "commands do not see commands");
        drop(running);
        assert_eq!(command_at(&[&p]), None, "the mark ends with its descriptor");

        let held = Marks::git(&[&p]);
        assert_eq!(git_at(std::slice::from_ref(&sub)), Some(p.clone()), "a tree above the root");
        assert_eq!(git_at(std::slice::from_ref(&p)), Some(p.clone()));
        assert_eq!(git_at(&[dir.path().to_path_buf()]).as_deref(), Some(dir.path()));
        assert_eq!(git_at(std::slice::from_ref(&q)), None);
        drop(held);
        assert_eq!(git_at(std::slice::from_ref(&sub)), None);
    }

    #[test]
    fn an_inherited_copy_keeps_the_mark() {
        let dir = tempfile::tempdir().unwrap();
        let marks = Marks::command(&[dir.path().to_path_buf()]);
        let copies: Vec<OwnedFd> =
            marks.descriptors().map(|fd| fd.try_clone_to_owned().unwrap()).collect();
        drop(marks);
        assert!(command_at(&[dir.path()]).is_some(), "a copy of the descriptor keeps it");
        drop(copies);
        assert!(command_at(&[dir.path()]).is_none());
    }
}
