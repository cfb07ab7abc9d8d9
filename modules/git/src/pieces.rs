//! A git dir under another name, as a checkout would write it: a folder that holds `HEAD`
//! beside a `config`, `config.worktree`, `commondir` or `hooks` is one to the git a person runs
//! there (bare-repository discovery), which loads that config and runs those hooks. The file
//! tools refuse the pieces in any order (`hands_roots`' write checks) and a command's run is
//! refused the last one (decision 0046); a tree checked out into the roots is held to the same
//! rule (found by the eighth attack pass: a branch built with git plumbing carried
//! `evil/{HEAD,config,objects,refs}`, and `git_switch` wrote them all).

use git2::Tree;
use hands_roots::trust::GitDirPiece;
use std::path::Path;

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
    let below_hooks = rel.ancestors().skip(1).any(|a| {
        a.file_name().is_some_and(|n| n == "hooks")
            && holds(a.parent().unwrap_or(Path::new("")), "HEAD")
    });
    below_hooks.then(|| format!("the hooks of a git dir (a HEAD beside {})", folder(parent)))
}

fn folder(rel: &Path) -> String {
    if rel.as_os_str().is_empty() {
        "the work tree's top folder".to_string()
    } else {
        format!("`{}`", rel.display())
    }
}
