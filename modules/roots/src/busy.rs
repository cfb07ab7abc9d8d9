//! The folders a git tool is making now (a new worktree's), which the file tools do not write
//! into meanwhile: libgit2 checks out by name after the tool's checks, so a file written there
//! in between lands beside what the checkout writes next (found by the eleventh attack pass: a
//! `write wt/x/HEAD` while `git_worktree_add` wrote a branch's big files and then `wt/x/config`
//! armed a git dir whose pager a person's `git branch` ran). Within one daemon.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

static MAKING: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// A folder being made, until dropped.
#[derive(Debug)]
pub struct Making(PathBuf);

/// Records that a git tool makes `folder` (a real path) until the result is dropped.
pub fn making(folder: PathBuf) -> Making {
    crate::lock(&MAKING).push(folder.clone());
    Making(folder)
}

impl Drop for Making {
    fn drop(&mut self) {
        let mut m = crate::lock(&MAKING);
        if let Some(i) = m.iter().position(|p| *p == self.0) {
            m.remove(i);
        }
    }
}

/// The folder being made that `abs` lies in, if any.
pub(crate) fn being_made(abs: &Path) -> Option<PathBuf> {
    crate::lock(&MAKING).iter().find(|p| abs.starts_with(p)).cloned()
}
