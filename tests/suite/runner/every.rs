//! Every tool a runner publishes answers through the relay: the real `hands relay` (TLS from
//! the test CA) and the real runner with tools-fs, tools-git and tools-shell (`run` and an
//! `os-*` tool included), driven by rmcp's client over streamable HTTP. The list is read from
//! the runner through the relay, and a tool this test has no call for fails it, so a tool added
//! later is covered or noticed.

use super::super::common::{Era, Fixture, host_git, text_of};
use super::{
    ALICE, Forwarder, Org, RUNNER_TOKEN, agent_at, call, runner_config_with, start_runner,
};
use serde_json::{Value, json};
use std::time::Duration;

/// Everything allowed (the gate's questions have their own tests), a git repository's author.
const EVERY_TOOL: &str = "[trust]\nread = \"allow\"\nwrite = \"allow\"\nexternal = \"allow\"\n\n\
    [[builtins]]\nid = \"tools-fs\"\ngrants = [\"filesystem\"]\n\
    filesystem = [{ path = \"{root}\", write = true }]\n\n\
    [[builtins]]\nid = \"tools-git\"\ngrants = [\"filesystem\", \"spawn\"]\n\
    filesystem = [{ path = \"{root}\", write = true }]\n\
    config = { author_name = \"Agent\", author_email = \"agent@example.com\" }\n\n\
    [[builtins]]\nid = \"tools-shell\"\ngrants = [\"filesystem\", \"spawn\"]\n\
    filesystem = [{ path = \"{root}\", write = true }]\n\
    config = { commands = { allow = [\"echo\", \"uname\"] }, tools = [{ bin = \"uname\", \
    description = \"The kernel's name.\" }] }\n";

/// The calls, in an order where each finds what the ones before made; a `needle` each result's
/// text must hold.
fn calls() -> Vec<(&'static str, Value, &'static str)> {
    vec![
        ("list_dir", json!({}), "notes.txt"),
        ("read", json!({"path": "notes.txt"}), "relay notes"),
        ("write", json!({"path": "made.txt", "content": "made via relay\n"}), "made.txt"),
        ("edit", json!({"path": "made.txt", "old_string": "made", "new_string": "edited"}), ""),
        ("glob", json!({"pattern": "*.txt"}), "made.txt"),
        ("grep", json!({"pattern": "edited via"}), "made.txt"),
        ("bash", json!({"command": "echo from-bash"}), "from-bash"),
        ("run", json!({"argv": ["echo", "from-run"]}), "from-run"),
        ("os-uname", json!({}), "Linux"),
        ("tmux_start", json!({"command": "cat", "name": "relayed"}), "relayed"),
        ("tmux_send", json!({"session": "relayed", "text": "typed-through"}), ""),
        ("tmux_read", json!({"session": "relayed"}), "typed-through"),
        ("tmux_list", json!({}), "relayed"),
        ("tmux_kill", json!({"session": "relayed"}), ""),
        ("git_status", json!({"repo": "repo"}), "main"),
        ("git_log", json!({"repo": "repo"}), "first"),
        ("git_diff", json!({"repo": "repo"}), "a.txt"),
        ("git_branches", json!({"repo": "repo"}), "main"),
        ("git_branch", json!({"repo": "repo", "name": "task/relay"}), "task/relay"),
        ("git_switch", json!({"repo": "repo", "branch": "task/relay"}), "task/relay"),
        ("git_commit", json!({"repo": "repo", "message": "through the relay"}), ""),
        (
            "git_branch_commits",
            json!({"repo": "repo", "branch": "task/relay", "base": "main"}),
            "through the relay",
        ),
        ("git_worktree_add", json!({"repo": "repo", "path": "wt", "branch": "task/wt"}), "task/wt"),
    ]
}

#[tokio::test]
async fn every_published_tool_answers_through_the_relay() {
    let fx = Fixture::new();
    fx.write("notes.txt", "relay notes\n");
    let repo = fx.root.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    host_git(&fx.home, &repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("a.txt"), "one\n").unwrap();
    host_git(&fx.home, &repo, &["add", "-A"]);
    host_git(&fx.home, &repo, &["commit", "-q", "-m", "first"]);
    std::fs::write(repo.join("a.txt"), "one\ntwo\n").unwrap();
    let org = Org::start(&fx).await;
    let config = runner_config_with(
        &fx,
        &org.url(),
        Some(&org.ca_file()),
        RUNNER_TOKEN,
        "local",
        EVERY_TOOL,
    );
    let runner = start_runner(&fx, &config);
    assert!(org.wait_connected(true, Duration::from_secs(20)).await, "{}", runner.text());
    let fwd = Forwarder::start(org.addr, Some(org.pki.ca_pem.clone())).await;
    let url = format!("http://{}/runners/box-1/mcp", fwd.addr);
    let c = agent_at(url, ALICE, Era::Legacy, ()).await;
    let listed: Vec<String> =
        c.list_all_tools().await.unwrap().into_iter().map(|t| t.name.to_string()).collect();
    let calls = calls();
    let missing: Vec<&String> =
        listed.iter().filter(|t| !calls.iter().any(|(n, _, _)| n == t)).collect();
    assert!(missing.is_empty(), "published tools this test does not call: {missing:?}");
    for (tool, args, needle) in calls {
        assert!(listed.iter().any(|t| t == tool), "{tool} is not published: {listed:?}");
        let r = call(&c, tool, args).await;
        let text = format!("{} {}", text_of(&r), r.structured_content.clone().unwrap_or_default());
        assert_ne!(r.is_error, Some(true), "{tool}: {text}");
        assert!(text.contains(needle), "{tool}: no {needle:?} in {text}");
    }
    assert_eq!(std::fs::read_to_string(fx.root.join("made.txt")).unwrap(), "edited via relay\n");
    assert!(fx.root.join("wt").join("a.txt").exists());
    // Each call is in the runner's audit log as the relay's agent.
    assert!(fx.audit_records().iter().all(|r| r["client"] == "runner:alice"));
    fx.assert_canary();
}
