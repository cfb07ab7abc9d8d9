//! tools-git reads and writes a work tree only while no command can move it (decision 0083).
//! libgit2 works by name, on the host, with no wall behind it: a tmux session's loop swapping a
//! folder for a link while `git_switch` checked out planted a hook in `.git/hooks`, while
//! `git_worktree_add` wrote into the state dir, while `git_commit` read a file outside the
//! roots (the fourth attack pass). Now those tools refuse, saying what runs and what to do,
//! while a command runs or a session lives; a command waits while one works. Attacks through
//! the real binary, with positive controls and the canary.

use super::common::{Client, Era, Fixture, host_git, own_tree};
use serde_json::json;
use std::time::Duration;

/// tools-shell and tools-git on one writable root (also `suite::git_planted`'s).
pub(super) fn config(fx: &Fixture) -> std::path::PathBuf {
    fx.config(
        "[daemon]\nstate_dir = \"{state}\"\n\
         [[builtins]]\nid = \"tools-shell\"\ngrants = [\"filesystem\", \"spawn\"]\n\
         filesystem = [{ path = \"{root}\", write = true }]\n\
         config = { trust = { external = \"allow\" } }\n\n\
         [[builtins]]\nid = \"tools-git\"\ngrants = [\"filesystem\", \"spawn\"]\n\
         filesystem = [{ path = \"{root}\", write = true }]\n\
         config = { trust = { write = \"allow\" } }\n",
    )
}

/// A repository with a branch `evil` whose tree holds `h/pre-commit` (the file the attack
/// steered into `.git/hooks`) beside `main`.
fn repo(fx: &Fixture) {
    host_git(&fx.home, &fx.root, &["init", "-q", "-b", "main"]);
    std::fs::write(fx.root.join("a.txt"), "a\n").unwrap();
    host_git(&fx.home, &fx.root, &["add", "."]);
    host_git(&fx.home, &fx.root, &["commit", "-qm", "first"]);
    host_git(&fx.home, &fx.root, &["checkout", "-qb", "evil"]);
    std::fs::create_dir(fx.root.join("h")).unwrap();
    std::fs::write(fx.root.join("h/pre-commit"), "#!/bin/sh\ntouch /tmp/hook-ran\n").unwrap();
    host_git(&fx.home, &fx.root, &["add", "."]);
    host_git(&fx.home, &fx.root, &["commit", "-qm", "evil"]);
    host_git(&fx.home, &fx.root, &["checkout", "-q", "main"]);
    own_tree(&fx.root);
}

/// `git_status`'s first refusal while a `bash` call started just before runs (polled for up to
/// two seconds; empty when it never refused).
async fn refusal_while_running(c: &Client) -> String {
    for _ in 0..100 {
        let r = c.call("git_status", json!({})).await;
        if r.is_error == Some(true) {
            return super::common::text_of(&r);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    String::new()
}

#[tokio::test]
async fn git_tools_refuse_while_a_session_lives_or_a_command_runs_and_commands_wait() {
    let fx = Fixture::new();
    repo(&fx);
    let c = Client::start_era(&fx, &config(&fx), Era::Legacy).await;
    // Positive control first: nothing runs, the tools work.
    let st = c.ok("git_status", json!({})).await;
    assert_eq!(st["branch"], "main", "{st}");

    // A session whose loop swaps `h` for a link to `.git/hooks` as soon as it appears.
    let swap = "while true; do if [ -d h ] && [ ! -L h ]; then mv h h.old; \
                ln -s .git/hooks h; fi; sleep 0.01; done";
    c.ok("tmux_start", json!({ "command": swap, "name": "swapper" })).await;
    for (tool, args) in [
        ("git_switch", json!({ "branch": "evil" })),
        ("git_status", json!({})),
        ("git_diff", json!({})),
        ("git_commit", json!({ "message": "m" })),
        ("git_worktree_add", json!({ "branch": "evil", "path": "wt" })),
        ("git_branch", json!({ "name": "other" })),
        // Those that read or write only `.git` too: refs and objects are files there, by name
        // (the fifth attack pass swapped `.git/refs/heads` for a link out of the roots).
        ("git_branch", json!({ "name": "other", "checkout": false })),
        ("git_log", json!({})),
        ("git_branches", json!({})),
        ("git_branch_commits", json!({ "branch": "evil" })),
    ] {
        let e = c.err(tool, args).await;
        assert!(
            e.contains("refused now: tmux session `swapper` lives") && e.contains("tmux_kill"),
            "{tool} says what runs and what to do: {e}"
        );
    }
    c.ok("tmux_kill", json!({ "session": "swapper" })).await;
    assert!(!fx.root.join(".git/hooks/pre-commit").exists(), "a hook was planted");
    assert!(!fx.root.join("wt").exists(), "a worktree was made while the session lived");

    // A command running: refused while it runs, and a command waits while a tool works.
    let c = std::sync::Arc::new(c);
    let bg = {
        let c = c.clone();
        tokio::spawn(async move { c.ok("bash", json!({ "command": "sleep 3; echo SLEPT" })).await })
    };
    let refused = refusal_while_running(&c).await;
    assert!(refused.contains("a command runs"), "while `bash` runs: {refused}");
    let out = bg.await.unwrap();
    assert!(out["stdout"].as_str().unwrap_or_default().contains("SLEPT"), "{out}");

    // Nothing runs now: the switch is made, as a person asked, and no hook came with it.
    let sw = c.ok("git_switch", json!({ "branch": "evil" })).await;
    assert_eq!(sw["branch"], "evil", "{sw}");
    assert!(fx.root.join("h/pre-commit").is_file(), "the branch's own file is in the work tree");
    assert!(!fx.root.join(".git/hooks/pre-commit").exists(), "a hook was planted");
    let log = host_git(&fx.home, &fx.root, &["status", "--short"]);
    assert!(log.trim().is_empty(), "the work tree is the branch's: {log}");
    fx.assert_canary();
}

/// Another daemon over the same project — another client's `hands serve` with a state dir of
/// its own, which shares neither this daemon's count of commands nor its session records —
/// sees its running commands and its live sessions by their marks on the folders (decision
/// 0084), a kept session's even after its daemon ended. The attack of the test above across
/// two daemons: A's session swaps `h` for a link to `.git/hooks` while B's `git_switch`
/// checks out; B refuses, naming what runs, and works again once nothing of A's runs.
#[tokio::test]
async fn another_daemons_commands_and_sessions_hold_the_tree_still() {
    let fx = Fixture::new();
    repo(&fx);
    let shell = fx.config(
        "[daemon]\nstate_dir = \"{state}\"\n\
         [[builtins]]\nid = \"tools-shell\"\ngrants = [\"filesystem\", \"spawn\"]\n\
         filesystem = [{ path = \"{root}\", write = true }]\n\
         config = { trust = { external = \"allow\" }, keep_sessions = true }\n",
    );
    let base = fx.root.parent().unwrap();
    let state_b = base.join("state-b");
    std::fs::create_dir_all(&state_b).unwrap();
    let git = base.join("daemon-b.toml");
    std::fs::write(
        &git,
        format!(
            "[daemon]\nstate_dir = \"{}\"\n\
             [[builtins]]\nid = \"tools-git\"\ngrants = [\"filesystem\", \"spawn\"]\n\
             filesystem = [{{ path = \"{}\", write = true }}]\n\
             config = {{ trust = {{ write = \"allow\" }} }}\n",
            state_b.display(),
            fx.root.display()
        ),
    )
    .unwrap();
    let a = std::sync::Arc::new(Client::start_era(&fx, &shell, Era::Legacy).await);
    let b = Client::start_era(&fx, &git, Era::Legacy).await;
    // Positive control: nothing of A's runs, B's tools work.
    assert_eq!(b.ok("git_status", json!({})).await["branch"], "main");

    // A's command running: B refuses while it runs, and works once it has ended.
    let bg = {
        let a = a.clone();
        tokio::spawn(async move { a.ok("bash", json!({ "command": "sleep 3; echo SLEPT" })).await })
    };
    let refused = refusal_while_running(&b).await;
    let root = fx.root.display().to_string();
    assert!(
        refused.contains("another hands daemon") && refused.contains(&root),
        "while A's `bash` runs, B says what runs and where: {refused}"
    );
    let out = bg.await.unwrap();
    assert!(out["stdout"].as_str().unwrap_or_default().contains("SLEPT"), "{out}");
    assert_eq!(b.ok("git_status", json!({})).await["branch"], "main", "A's command ended");

    // A's session, kept past A's daemon, swapping `h` for a link to `.git/hooks`.
    let swap = "while true; do if [ -d h ] && [ ! -L h ]; then mv h h.old; \
                ln -s .git/hooks h; fi; sleep 0.01; done";
    a.ok("tmux_start", json!({ "command": swap, "name": "swapper" })).await;
    std::sync::Arc::into_inner(a).unwrap().stop().await;
    for (tool, args) in [
        ("git_switch", json!({ "branch": "evil" })),
        ("git_worktree_add", json!({ "branch": "evil", "path": "wt" })),
        ("git_commit", json!({ "message": "m" })),
    ] {
        let e = b.err(tool, args).await;
        assert!(
            e.contains("refused now: a command that can change") && e.contains(&root),
            "{tool} is refused while A's kept session lives: {e}"
        );
    }
    assert!(!fx.root.join(".git/hooks/pre-commit").exists(), "a hook was planted");
    assert!(!fx.root.join("wt").exists(), "a worktree was made while the session lived");

    // A daemon on A's state dir adopts the session and ends it: B works again.
    let a = Client::start_era(&fx, &shell, Era::Legacy).await;
    a.ok("tmux_kill", json!({ "session": "swapper" })).await;
    let mut status = json!(null);
    for _ in 0..100 {
        let r = b.call("git_status", json!({})).await;
        if r.is_error != Some(true) {
            status = r.structured_content.unwrap_or_default();
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(status["branch"], "main", "the session ended: {status}");
    let sw = b.ok("git_switch", json!({ "branch": "evil" })).await;
    assert_eq!(sw["branch"], "evil", "{sw}");
    assert!(fx.root.join("h/pre-commit").is_file(), "the branch's own file is in the work tree");
    assert!(!fx.root.join(".git/hooks/pre-commit").exists(), "a hook was planted");
    fx.assert_canary();
}
