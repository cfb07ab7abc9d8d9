//! A pane's refusals reach the results: what a tmux session's walls refused (a `.git` or a
//! protected path its command tried to create) is listed in the next `tmux_send` or `tmux_read`
//! result's `denied`, once, with its layer — as `bash`'s results list theirs — so an agent
//! working in a session can tell a wall from a broken tool.

use super::super::common::{Client, Era, Fixture};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

fn denied_paths(r: &Value) -> Vec<(String, String)> {
    r["denied"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|d| {
                    (d["what"].as_str().unwrap().to_string(), d["layer"].as_str().unwrap().into())
                })
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn a_pane_s_refused_create_is_listed_in_the_next_result_once() {
    let fx = Fixture::new();
    let c = Client::start_era(&fx, &super::shell_config(&fx), Era::Legacy).await;
    c.ok("tmux_start", json!({ "command": "bash", "name": "walls" })).await;
    let send = |text: &str| json!({ "session": "walls", "text": text, "wait": { "exit": true } });
    // Positive control: an ordinary folder is made, and nothing is listed.
    let r = c.ok("tmux_send", send("mkdir made-ok")).await;
    assert!(fx.root.join("made-ok").is_dir(), "{r}");
    assert!(denied_paths(&r).is_empty(), "{r}");
    // The attack: a `.git` made in a writable root, which a host `git status` would obey.
    let r = c.ok("tmux_send", send("mkdir .git")).await;
    assert!(!fx.root.join(".git").exists(), "{r}");
    let git = fx.root.join(".git").display().to_string();
    assert!(
        denied_paths(&r).contains(&(git.clone(), "sandbox (in-run walls)".to_string())),
        "the refused create is listed with its layer: {r}"
    );
    // Said once: the next read lists nothing it already said.
    let r = c.ok("tmux_read", json!({ "session": "walls" })).await;
    assert!(denied_paths(&r).is_empty(), "{r}");
    // Refused while no call waited: the send's own result, or the next read, lists it.
    let r = c.ok("tmux_send", json!({ "session": "walls", "text": "touch .envrc" })).await;
    let envrc = fx.root.join(".envrc").display().to_string();
    let start = Instant::now();
    let (mut listed, mut last) = (denied_paths(&r), r);
    while listed.is_empty() && start.elapsed() < Duration::from_secs(15) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        last = c.ok("tmux_read", json!({ "session": "walls" })).await;
        listed = denied_paths(&last);
    }
    assert!(listed.iter().any(|(what, _)| *what == envrc), "{listed:?} {last}");
    assert!(!fx.root.join(".envrc").exists());
    fx.assert_canary();
    c.ok("tmux_kill", json!({ "session": "walls" })).await;
}
