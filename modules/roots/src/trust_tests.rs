//! The walk of what the host trusts, on trees made here: each indirection git resolves, and
//! the ordinary files beside it that stay writable.

use super::*;
use std::os::unix::fs::symlink;

struct Tree {
    _dir: tempfile::TempDir,
    base: PathBuf,
    root: PathBuf,
}

fn tree() -> Tree {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let root = base.join("root");
    std::fs::create_dir_all(&root).unwrap();
    Tree { _dir: dir, base, root }
}

fn write(p: &Path, text: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// A repository's git dir at `gd` (HEAD, objects, refs) with `config`.
fn gitdir(gd: &Path, config: &str) {
    std::fs::create_dir_all(gd.join("objects")).unwrap();
    std::fs::create_dir_all(gd.join("refs")).unwrap();
    write(&gd.join("HEAD"), "ref: refs/heads/main\n");
    write(&gd.join("config"), config);
}

fn known(roots: &[PathBuf], home: Option<PathBuf>) -> Arc<Trusted> {
    let lists = PolicyLists {
        protected: vec![".vscode".into(), ".git/hooks".into(), ".git/config".into()],
        ..PolicyLists::default()
    };
    Trust::new(roots, &lists, home, 10_000).current().unwrap()
}

#[test]
fn hooks_path_includes_and_their_targets_are_covered_wherever_they_lie() {
    let t = tree();
    let r = &t.root;
    let home = t.base.join("home");
    gitdir(
        &r.join("repo/.git"),
        "[core]\n\thooksPath = .husky/_\n[include]\n\tpath = ../../shared/inc.cfg\n\
         [includeIf \"gitdir:~/\"]\n\tpath = ~/work.cfg\n",
    );
    write(&r.join("shared/inc.cfg"), "[include]\n\tpath = deeper.cfg\n");
    write(&r.join("repo/src/main.rs"), "fn main() {}\n");
    let k = known(std::slice::from_ref(r), Some(home.clone()));
    for p in [
        r.join("repo/.husky/_/pre-commit"),
        r.join("repo/.husky/_"),
        r.join("repo/.git/config"),
        r.join("repo/.git/hooks/pre-commit"),
        r.join("repo/.git/commondir"),
        r.join("repo/.git/config.worktree"),
        r.join("shared/inc.cfg"),
        r.join("shared/deeper.cfg"),
    ] {
        assert!(k.covers(&p).is_some(), "{} is not covered", p.display());
    }
    for p in [r.join("repo/src/main.rs"), r.join("repo/.husky/pre-commit"), r.join("shared/x")] {
        assert!(k.covers(&p).is_none(), "{} is covered: {:?}", p.display(), k.covers(&p));
    }
    // Outside every root: named, for the sandbox to judge, never covered.
    assert!(k.outside.iter().any(|(_, o)| *o == home.join("work.cfg")), "{:?}", k.outside);
}

#[test]
fn protected_names_that_are_links_cover_their_targets() {
    let t = tree();
    let r = &t.root;
    gitdir(&r.join(".git"), "[core]\n\tbare = false\n");
    std::fs::remove_dir_all(r.join(".git/hooks")).ok();
    std::fs::create_dir_all(r.join("hooks-in-tree")).unwrap();
    symlink("../hooks-in-tree", r.join(".git/hooks")).unwrap();
    std::fs::create_dir_all(r.join("tools/vscode")).unwrap();
    symlink("tools/vscode", r.join(".vscode")).unwrap();
    // A link inside a protected folder, through a second link.
    std::fs::create_dir_all(r.join("cfg")).unwrap();
    std::fs::create_dir_all(r.join("real")).unwrap();
    write(&r.join("real/tasks.json"), "{}");
    symlink("../real", r.join("cfg/mid")).unwrap();
    symlink("../../cfg/mid/tasks.json", r.join("tools/vscode/tasks.json")).unwrap();
    // A link out of every root.
    std::fs::create_dir_all(t.base.join("out")).unwrap();
    std::fs::create_dir_all(r.join("sub")).unwrap();
    symlink(t.base.join("out"), r.join("sub/.vscode")).unwrap();
    let k = known(std::slice::from_ref(r), None);
    for p in [
        r.join("hooks-in-tree/pre-commit"),
        r.join("tools/vscode/tasks.json"),
        r.join("cfg/mid"),
        r.join("real/tasks.json"),
    ] {
        assert!(k.covers(&p).is_some(), "{} is not covered", p.display());
    }
    assert!(k.covers(&r.join("tools/other")).is_none() && k.covers(&r.join("real/x")).is_none());
    assert!(k.outside.iter().any(|(_, o)| *o == t.base.join("out")), "{:?}", k.outside);
}

#[test]
fn git_dirs_named_by_files_and_commondir_without_refs_are_followed() {
    let t = tree();
    let r = &t.root;
    // HEAD + commondir and nothing else is a git dir; its common dir's config counts.
    write(&r.join("wtgd/HEAD"), "ref: refs/heads/main\n");
    write(&r.join("wtgd/commondir"), "../common\n");
    write(&r.join("common/config"), "[core]\n\thooksPath = ../chooks\n");
    write(&r.join("wt/.git"), "gitdir: ../wtgd\n");
    write(&r.join("wt/file"), "x");
    let k = known(std::slice::from_ref(r), None);
    for p in [
        r.join("wt/.git"),
        r.join("wtgd/config"),
        r.join("wtgd/commondir"),
        r.join("common/config"),
        r.join("common/hooks/pre-commit"),
        // Relative to the work tree and to the git dirs: each place git may take it from.
        r.join("chooks"),
    ] {
        assert!(k.covers(&p).is_some(), "{} is not covered", p.display());
    }
    assert!(k.covers(&r.join("wt/file")).is_none() && k.covers(&r.join("common/x")).is_none());
}

#[test]
fn the_repository_holding_a_root_counts() {
    let t = tree();
    let repo = t.base.join("repo");
    gitdir(&repo.join(".git"), "[core]\n\thooksPath = src/hooks\n");
    std::fs::create_dir_all(repo.join("src/code")).unwrap();
    let k = known(&[repo.join("src")], None);
    assert!(k.covers(&repo.join("src/hooks/pre-commit")).is_some());
    assert!(k.covers(&repo.join("src/code/x")).is_none());
}

#[test]
fn follow_records_each_link_and_keeps_a_missing_tail() {
    let t = tree();
    let r = &t.root;
    std::fs::create_dir_all(r.join("a/b")).unwrap();
    symlink("a/b", r.join("l1")).unwrap();
    symlink("../l1/../b", r.join("a/l2")).unwrap();
    let (links, real) = follow(&r.join("l1/x/y"));
    assert_eq!(links, [r.join("l1")]);
    assert_eq!(real, r.join("a/b/x/y"));
    // `..` after a link is taken from where the link led (the kernel's rule).
    let (links, real) = follow(&r.join("a/l2/q"));
    assert_eq!(links, [r.join("a/l2"), r.join("l1")]);
    assert_eq!(real, r.join("a/b/q"));
}

/// The walk's cost on a real tree (`HANDS_TRUST_ROOT=DIR cargo test -p hands-roots --
/// --ignored trust_walk_cost --nocapture`).
#[test]
#[ignore = "a cost probe: HANDS_TRUST_ROOT=DIR, --ignored --nocapture"]
#[allow(clippy::print_stderr)] // the figures, for the record
fn trust_walk_cost() {
    let Some(dir) = std::env::var_os("HANDS_TRUST_ROOT") else { return };
    let root = std::fs::canonicalize(dir).unwrap();
    for _ in 0..3 {
        let t = Trust::new(std::slice::from_ref(&root), &PolicyLists::default(), None, 5_000_000);
        let started = std::time::Instant::now();
        let k = t.current().unwrap();
        eprintln!("{} entries, {} paths, {:?}", k.seen, k.paths().count(), started.elapsed());
    }
}

#[test]
fn hooks_owners_are_the_folders_above_each_hooks_in_any_case() {
    let owners = |p: &str| hooks_owners(Path::new(p)).map(Path::to_path_buf).collect::<Vec<_>>();
    assert_eq!(owners("a/hooks/x/HOOKS/y"), [PathBuf::from("a/hooks/x"), PathBuf::from("a")]);
    assert_eq!(owners("hooks"), [PathBuf::from("")]);
    assert_eq!(owners("/r/evil/Hooks"), [PathBuf::from("/r/evil")]);
    // Names that only contain the word are not git's hooks folder.
    assert!(owners("a/githooks/pre-hooks/hooks.d").is_empty());
}
