//! Each tool's normal path: status, diff, log, branches, branch, switch, commit,
//! branch_commits and worktree_add.

use crate::common::{Fx, git, read, tip, write};
use hands_git::*;

#[test]
fn status_reports_branch_and_each_kind_of_change() {
    let fx = Fx::repo();
    write(&fx.work, "a.txt", "two\n");
    write(&fx.work, "b.txt", "b\n");
    git(&fx.work, &["add", "b.txt"]);
    write(&fx.work, "c.txt", "c\n");
    write(&fx.work, "newdir/x.txt", "x\n");
    let s = fx.git().status(StatusParams::default()).unwrap();
    assert_eq!(s.branch.as_deref(), Some("main"));
    assert!(s.head.is_some());
    assert_eq!(s.upstream, None);
    assert_eq!(s.staged, vec![FileStatus { path: "b.txt".into(), status: "added".into() }]);
    assert_eq!(s.unstaged, vec![FileStatus { path: "a.txt".into(), status: "modified".into() }]);
    let untracked: Vec<&str> = s.untracked.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(untracked, ["c.txt", "newdir/"]);
    assert_eq!(s.total, 4);
    assert!(!s.truncated);
    let text = s.to_string();
    assert!(text.starts_with("on branch main"), "{text}");
    assert!(text.contains("modified   a.txt"), "{text}");
}

#[test]
fn status_shows_upstream_ahead_and_behind() {
    let fx = Fx::repo();
    fx.add_bare_remote("up");
    git(&fx.work, &["branch", "-u", "origin/main"]);
    write(&fx.work, "a.txt", "two\n");
    git(&fx.work, &["commit", "-qam", "second"]);
    let s = fx.git().status(StatusParams::default()).unwrap();
    assert_eq!(s.upstream.as_deref(), Some("origin/main"));
    assert_eq!((s.ahead, s.behind), (Some(1), Some(0)));
}

#[test]
fn status_caps_entries_at_1000() {
    let fx = Fx::repo();
    for i in 0..1100 {
        write(&fx.work, &format!("u{i:04}.txt"), "x");
    }
    let s = fx.git().status(StatusParams::default()).unwrap();
    assert_eq!(s.untracked.len(), 1000);
    assert_eq!(s.total, 1100);
    assert!(s.truncated);
}

#[test]
fn status_of_a_fresh_repository_has_no_head() {
    let fx = Fx::empty();
    crate::common::init(&fx.work);
    let s = fx.git().status(StatusParams::default()).unwrap();
    assert_eq!(s.branch.as_deref(), Some("main"));
    assert_eq!(s.head, None);
}

#[test]
fn diff_shows_unstaged_staged_and_one_path() {
    let fx = Fx::repo();
    write(&fx.work, "a.txt", "two\n");
    write(&fx.work, "b.txt", "bee\n");
    git(&fx.work, &["add", "b.txt"]);
    let g = fx.git();
    let d = g.diff(DiffParams::default()).unwrap();
    assert_eq!(d.files_changed, 1);
    assert!(d.patch.contains("-one\n+two\n"), "{}", d.patch);
    assert!(!d.patch.contains("bee"));
    let d = g.diff(DiffParams { staged: Some(true), ..DiffParams::default() }).unwrap();
    assert!(d.patch.contains("+bee\n"), "{}", d.patch);
    assert!(!d.patch.contains("+two"));

    git(&fx.work, &["add", "a.txt"]);
    let d = g
        .diff(DiffParams {
            staged: Some(true),
            path: Some("a.txt".into()),
            ..DiffParams::default()
        })
        .unwrap();
    assert_eq!(d.files_changed, 1);
    assert!(d.patch.contains("+two") && !d.patch.contains("bee"), "{}", d.patch);
    let abs = fx.work.join("b.txt").to_string_lossy().into_owned();
    let d = g
        .diff(DiffParams { staged: Some(true), path: Some(abs), ..DiffParams::default() })
        .unwrap();
    assert!(d.patch.contains("+bee") && !d.patch.contains("+two"), "{}", d.patch);
    assert_eq!(g.diff(DiffParams::default()).unwrap().to_string(), "no changes\n");
}

#[test]
fn diff_context_and_cap() {
    let fx = Fx::repo();
    let lines: String = (0..20).map(|i| format!("line {i}\n")).collect();
    write(&fx.work, "c.txt", &lines);
    git(&fx.work, &["add", "c.txt"]);
    git(&fx.work, &["commit", "-qm", "c"]);
    write(&fx.work, "c.txt", &lines.replace("line 10\n", "changed\n"));
    let g = fx.git();
    let d = g.diff(DiffParams { context: Some(0), ..DiffParams::default() }).unwrap();
    assert!(!d.patch.contains("\n line 9\n"), "{}", d.patch);
    let d = g.diff(DiffParams::default()).unwrap();
    assert!(d.patch.contains("\n line 9\n") && !d.patch.contains("\n line 6\n"), "{}", d.patch);

    // 400 KiB of changed lines: the patch stops at 256 KiB.
    let big: String = (0..8000).map(|i| format!("{i:048}\n")).collect();
    write(&fx.work, "big.txt", &big);
    git(&fx.work, &["add", "big.txt"]);
    let d = g.diff(DiffParams { staged: Some(true), ..DiffParams::default() }).unwrap();
    assert!(d.truncated);
    assert!(d.patch.len() <= 256 * 1024 && d.patch.len() > 200 * 1024, "{}", d.patch.len());
    assert!(d.to_string().contains("cut at 256 KiB"));
}

#[test]
fn diff_never_shows_secret_file_content() {
    let fx = Fx::repo();
    write(&fx.work, ".env", "TOKEN=old\n");
    git(&fx.work, &["add", "-f", ".env"]);
    git(&fx.work, &["commit", "-qm", "env"]);
    write(&fx.work, ".env", "TOKEN=hunter2\n");
    write(&fx.work, "a.txt", "visible\n");
    let d = fx.git().diff(DiffParams::default()).unwrap();
    assert_eq!(d.files_changed, 2);
    assert!(!d.patch.contains("hunter2") && !d.patch.contains("TOKEN"), "{}", d.patch);
    assert!(d.patch.contains("content not shown"), "{}", d.patch);
    assert!(d.patch.contains("+visible"), "{}", d.patch);
}

#[test]
fn log_lists_newest_first_with_limit_rev_and_path() {
    let fx = Fx::repo();
    write(&fx.work, "b.txt", "b\n");
    git(&fx.work, &["add", "b.txt"]);
    git(&fx.work, &["commit", "-qm", "second: b"]);
    write(&fx.work, "a.txt", "two\n");
    git(&fx.work, &["commit", "-qam", "third: a"]);
    git(&fx.work, &["tag", "v1", "HEAD~1"]);
    let g = fx.git();
    let l = g.log(LogParams::default()).unwrap();
    let sums: Vec<&str> = l.commits.iter().map(|c| c.summary.as_str()).collect();
    assert_eq!(sums, ["third: a", "second: b", "first"]);
    assert!(!l.truncated);
    let c = &l.commits[0];
    assert_eq!((c.author.as_str(), c.email.as_str()), ("Fixture", "fixture@example.com"));
    assert_eq!(c.id.len(), 40);
    assert!(c.date.len() == 25 && c.date.as_bytes()[10] == b'T', "{}", c.date);

    let l = g.log(LogParams { limit: Some(1), ..LogParams::default() }).unwrap();
    assert_eq!(l.commits.len(), 1);
    assert!(l.truncated);
    let l = g.log(LogParams { rev: Some("v1".into()), ..LogParams::default() }).unwrap();
    assert_eq!(l.commits[0].summary, "second: b");
    let first = l.commits[1].id.clone();
    let l = g.log(LogParams { rev: Some(first), ..LogParams::default() }).unwrap();
    assert_eq!(l.commits.len(), 1);
    let l = g.log(LogParams { path: Some("a.txt".into()), ..LogParams::default() }).unwrap();
    let sums: Vec<&str> = l.commits.iter().map(|c| c.summary.as_str()).collect();
    assert_eq!(sums, ["third: a", "first"]);
    let e = g.log(LogParams { rev: Some("nope".into()), ..LogParams::default() }).unwrap_err();
    assert!(e.to_string().contains("rev `nope` names no commit"), "{e}");
    assert!(g.log(LogParams::default()).unwrap().to_string().contains("third: a"));
}

#[test]
fn branches_marks_the_current_one() {
    let fx = Fx::repo();
    git(&fx.work, &["branch", "task/b"]);
    let b = fx.git().branches(BranchesParams::default()).unwrap();
    let names: Vec<(&str, bool)> =
        b.branches.iter().map(|b| (b.name.as_str(), b.current)).collect();
    assert_eq!(names, [("main", true), ("task/b", false)]);
    assert_eq!(b.branches[0].summary, "first");
    assert!(b.to_string().starts_with("* main"));
}

#[test]
fn branch_makes_and_checks_out_or_not() {
    let fx = Fx::repo();
    let g = fx.git();
    let out = g
        .branch(BranchParams { repo: None, name: "task/one".into(), start: None, checkout: None })
        .unwrap();
    assert!(out.checked_out);
    assert_eq!(read(&fx.work.join(".git"), "HEAD"), "ref: refs/heads/task/one\n");
    let out = g
        .branch(BranchParams {
            repo: None,
            name: "task/two".into(),
            start: Some("main".into()),
            checkout: Some(false),
        })
        .unwrap();
    assert!(!out.checked_out);
    assert_eq!(read(&fx.work.join(".git"), "HEAD"), "ref: refs/heads/task/one\n");
    let e = g
        .branch(BranchParams { repo: None, name: "task/two".into(), start: None, checkout: None })
        .unwrap_err();
    assert!(e.to_string().contains("already exists"), "{e}");
}

#[test]
fn switch_changes_branch_and_refuses_to_overwrite_local_changes() {
    let fx = Fx::repo();
    git(&fx.work, &["switch", "-q", "-c", "other"]);
    write(&fx.work, "a.txt", "other\n");
    git(&fx.work, &["commit", "-qam", "other"]);
    git(&fx.work, &["switch", "-q", "main"]);
    let g = fx.git();

    write(&fx.work, "a.txt", "local edit\n");
    let e = g.switch(SwitchParams { repo: None, branch: "other".into() }).unwrap_err();
    assert!(matches!(&e, GitError::WouldOverwrite { paths, .. } if paths == &["a.txt"]), "{e}");
    assert!(e.to_string().contains("would overwrite local changes in: a.txt"), "{e}");
    assert_eq!(read(&fx.work, "a.txt"), "local edit\n");
    assert_eq!(read(&fx.work.join(".git"), "HEAD"), "ref: refs/heads/main\n");

    // An untracked file in the way is a local change too.
    write(&fx.work, "a.txt", "one\n");
    git(&fx.work, &["switch", "-q", "-c", "withnew"]);
    write(&fx.work, "n.txt", "tracked\n");
    git(&fx.work, &["add", "n.txt"]);
    git(&fx.work, &["commit", "-qm", "n"]);
    git(&fx.work, &["switch", "-q", "main"]);
    write(&fx.work, "n.txt", "mine\n");
    let e = g.switch(SwitchParams { repo: None, branch: "withnew".into() }).unwrap_err();
    assert!(e.to_string().contains("n.txt"), "{e}");
    assert_eq!(read(&fx.work, "n.txt"), "mine\n");
    std::fs::remove_file(fx.work.join("n.txt")).unwrap();

    // The allowed neighbour: a clean tree switches.
    let s = g.switch(SwitchParams { repo: None, branch: "other".into() }).unwrap();
    assert!(!s.already);
    assert_eq!(read(&fx.work, "a.txt"), "other\n");
    assert_eq!(read(&fx.work.join(".git"), "HEAD"), "ref: refs/heads/other\n");
    let s = g.switch(SwitchParams { repo: None, branch: "other".into() }).unwrap();
    assert!(s.already);
    let e = g.switch(SwitchParams { repo: None, branch: "missing".into() }).unwrap_err();
    assert!(e.to_string().contains("no local branch `missing`"), "{e}");
}

#[test]
fn commit_takes_every_change_including_untracked_and_respects_gitignore() {
    let fx = Fx::repo();
    write(&fx.work, ".gitignore", "*.log\n");
    write(&fx.work, "a.txt", "two\n");
    write(&fx.work, "new/x.txt", "x\n");
    write(&fx.work, "debug.log", "noise\n");
    write(&fx.work, ".env", "TOKEN=1\n");
    let g = fx.git();
    let c = g
        .commit(CommitParams { repo: None, message: "all of it\n\nbody".into(), paths: None })
        .unwrap();
    assert_eq!(c.summary, "all of it");
    assert_eq!(c.branch.as_deref(), Some("main"));
    assert_eq!(c.files, [".gitignore", "a.txt", "new/x.txt"]);
    assert_eq!(c.skipped, [".env"]);
    assert_eq!(tip(&fx.work, "refs/heads/main").as_deref(), Some(c.id.as_str()));
    let log = git(&fx.work, &["log", "-1", "--format=%an <%ae>|%B"]);
    assert_eq!(log.trim_end(), "Repo Person <repo@example.com>|all of it\n\nbody");
    let s = g.status(StatusParams::default()).unwrap();
    assert_eq!(s.untracked.len(), 1, "only .env is left: {s}");

    // Deletions are committed too.
    std::fs::remove_file(fx.work.join("new/x.txt")).unwrap();
    let c = g.commit(CommitParams { repo: None, message: "rm".into(), paths: None }).unwrap();
    assert_eq!(c.files, ["new/x.txt"]);
    let e =
        g.commit(CommitParams { repo: None, message: "again".into(), paths: None }).unwrap_err();
    assert!(matches!(e, GitError::NothingToCommit { .. }), "{e}");
}

#[test]
fn commit_with_paths_takes_only_those() {
    let fx = Fx::repo();
    write(&fx.work, "b.txt", "b\n");
    git(&fx.work, &["add", "b.txt"]);
    git(&fx.work, &["commit", "-qm", "b"]);
    write(&fx.work, "a.txt", "two\n");
    write(&fx.work, "b.txt", "bee\n");
    write(&fx.work, "c.txt", "staged\n");
    git(&fx.work, &["add", "c.txt"]);
    write(&fx.work, "dir/d.txt", "untracked in dir\n");
    let g = fx.git();
    let c = g
        .commit(CommitParams {
            repo: None,
            message: "only a and dir".into(),
            paths: Some(vec!["a.txt".into(), "dir".into()]),
        })
        .unwrap();
    assert_eq!(c.files, ["a.txt", "dir/d.txt"]);
    let s = g.status(StatusParams::default()).unwrap();
    assert_eq!(s.staged, vec![FileStatus { path: "c.txt".into(), status: "added".into() }]);
    assert_eq!(s.unstaged, vec![FileStatus { path: "b.txt".into(), status: "modified".into() }]);
    assert!(s.untracked.is_empty());
    let e = g
        .commit(CommitParams { repo: None, message: "x".into(), paths: Some(vec!["a.txt".into()]) })
        .unwrap_err();
    assert!(e.to_string().contains("nothing to commit in the given paths"), "{e}");
    write(&fx.work, ".env", "S=1\n");
    let e = g
        .commit(CommitParams { repo: None, message: "x".into(), paths: Some(vec![".env".into()]) })
        .unwrap_err();
    assert!(e.to_string().contains("secret"), "{e}");
}

#[test]
fn commit_identity_from_settings_then_repo_else_a_clear_error() {
    let fx = Fx::repo();
    let g = fx.git_with(GitSettings {
        author: Some(("Agent".into(), "agent@example.com".into())),
        ..GitSettings::default()
    });
    write(&fx.work, "a.txt", "two\n");
    g.commit(CommitParams { repo: None, message: "by agent".into(), paths: None }).unwrap();
    let who = git(&fx.work, &["log", "-1", "--format=%an <%ae> / %cn <%ce>"]);
    assert_eq!(who.trim(), "Agent <agent@example.com> / Agent <agent@example.com>");

    git(&fx.work, &["config", "--unset", "user.name"]);
    write(&fx.work, "a.txt", "three\n");
    let e = fx
        .git()
        .commit(CommitParams { repo: None, message: "nobody".into(), paths: None })
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "no commit identity: set author_name/author_email in tools-git's config or user.name/user.email in the repo"
    );
    let e = fx
        .git()
        .commit(CommitParams { repo: None, message: " \n\n  \n".into(), paths: None })
        .unwrap_err();
    assert!(e.to_string().contains("argument `message`"), "{e}");
}

#[test]
fn commit_makes_the_first_commit_of_a_fresh_repository() {
    let fx = Fx::empty();
    crate::common::init(&fx.work);
    write(&fx.work, "f.txt", "f\n");
    let c =
        fx.git().commit(CommitParams { repo: None, message: "root".into(), paths: None }).unwrap();
    assert_eq!(c.files, ["f.txt"]);
    assert_eq!(git(&fx.work, &["rev-list", "--count", "HEAD"]).trim(), "1");
}

#[test]
fn branch_commits_lists_what_the_base_lacks() {
    let fx = Fx::repo();
    git(&fx.work, &["switch", "-q", "-c", "task/x"]);
    for n in ["x1", "x2"] {
        write(&fx.work, &format!("{n}.txt"), n);
        git(&fx.work, &["add", "."]);
        git(&fx.work, &["commit", "-qm", n]);
    }
    git(&fx.work, &["switch", "-q", "main"]);
    write(&fx.work, "m.txt", "m");
    git(&fx.work, &["add", "."]);
    git(&fx.work, &["commit", "-qm", "m1"]);
    let g = fx.git();
    let out = g
        .branch_commits(BranchCommitsParams { repo: None, branch: "task/x".into(), base: None })
        .unwrap();
    assert_eq!(out.base, "main");
    let sums: Vec<&str> = out.commits.iter().map(|c| c.summary.as_str()).collect();
    assert_eq!(sums, ["x2", "x1"]);
    let out = g
        .branch_commits(BranchCommitsParams {
            repo: None,
            branch: "main".into(),
            base: Some("task/x".into()),
        })
        .unwrap();
    assert_eq!(out.commits.len(), 1);
    assert!(out.to_string().contains("m1"));

    // origin/HEAD, when there is one, is the default base.
    fx.add_bare_remote("bc");
    git(&fx.work, &["remote", "set-head", "origin", "main"]);
    let out = g
        .branch_commits(BranchCommitsParams { repo: None, branch: "task/x".into(), base: None })
        .unwrap();
    assert_eq!(out.base, "origin/main");
    assert_eq!(out.commits.len(), 2);
}

#[test]
fn worktree_add_into_a_writable_root() {
    let fx = Fx::repo();
    let g = fx.git();
    let out = g
        .worktree_add(WorktreeAddParams {
            repo: None,
            path: "wt/one".into(),
            branch: "task/wt".into(),
        })
        .unwrap();
    assert!(out.created_branch);
    assert_eq!(out.path, fx.work.join("wt/one").to_string_lossy());
    assert_eq!(read(&fx.work, "wt/one/a.txt"), "one\n");
    assert!(fx.work.join("wt/one/.git").is_file());
    // The new worktree is itself a repository the tools can use.
    let s = g.status(StatusParams { repo: Some("wt/one".into()) }).unwrap();
    assert_eq!(s.branch.as_deref(), Some("task/wt"));

    // An existing branch is checked out as it is.
    git(&fx.work, &["branch", "task/old"]);
    let path = fx.remote.join("wt2").to_string_lossy().into_owned();
    let out =
        g.worktree_add(WorktreeAddParams { repo: None, path, branch: "task/old".into() }).unwrap();
    assert!(!out.created_branch);
    let e = g
        .worktree_add(WorktreeAddParams {
            repo: None,
            path: "wt/three".into(),
            branch: "task/old".into(),
        })
        .unwrap_err();
    assert!(e.to_string().contains("already checked out"), "{e}");
    assert!(!fx.work.join("wt/three").exists());
}

#[test]
fn libgit2_reads_no_config_outside_the_repository() {
    let fx = Fx::empty();
    let _g = fx.git();
    let paths = hands_sandbox::libgit2::search_paths();
    assert_eq!(paths.len(), 4);
    for (level, path) in paths {
        let path = path.unwrap();
        assert!(path.as_bytes().is_empty(), "{level:?}: {path:?}");
    }
}

/// Every parameter struct refuses unknown fields and describes each field (the descriptions
/// are what a model reads).
#[test]
fn parameter_schemas_are_strict_and_described() {
    let schemas = [
        schemars::schema_for!(StatusParams),
        schemars::schema_for!(DiffParams),
        schemars::schema_for!(LogParams),
        schemars::schema_for!(BranchesParams),
        schemars::schema_for!(BranchParams),
        schemars::schema_for!(SwitchParams),
        schemars::schema_for!(CommitParams),
        schemars::schema_for!(BranchCommitsParams),
        schemars::schema_for!(WorktreeAddParams),
        schemars::schema_for!(PushParams),
    ];
    for s in schemas {
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["additionalProperties"], serde_json::json!(false), "{v}");
        for (name, prop) in v["properties"].as_object().unwrap() {
            assert!(prop["description"].as_str().is_some_and(|d| !d.is_empty()), "{name}: {v}");
        }
    }
    let p: Result<StatusParams, _> =
        serde_json::from_value(serde_json::json!({"repo": "x", "evil": 1}));
    assert!(p.is_err());
}
