//! The brake raced against `git_push` (issue 23.2), through the real binary: `hands stop` lands
//! while many pushes to a local bare repository are in flight. Each push either finishes (its
//! branch is on the remote, as the local one) or is refused naming the brake (its branch is not
//! on the remote); none started after the stop gets through, and nothing lands on the remote
//! once the calls have answered. Positive control: a push before the brake lands.

use super::common::{Client, Fixture, host_git, text_of};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Pushes raced against the stop.
const PUSHES: usize = 24;

/// tools-git with `root` writable, pushing `task/*` to `origin`, external calls allowed.
const CONFIG: &str = "[daemon]\nstate_dir = \"{state}\"\n\n\
    [[builtins]]\nid = \"tools-git\"\ngrants = [\"filesystem\", \"spawn\", \"network\"]\n\
    filesystem = [{ path = \"{root}\", write = true }]\n\n\
    [builtins.config]\nauthor_name = \"Agent\"\nauthor_email = \"agent@example.com\"\n\
    trust = { external = \"allow\" }\n\n\
    [builtins.config.push]\nremote = \"origin\"\nbranches = [\"task/*\"]\n";

/// Every ref of the bare repository `remote`, by name.
fn remote_refs(home: &Path, remote: &Path) -> BTreeMap<String, String> {
    host_git(home, remote, &["for-each-ref", "--format=%(refname) %(objectname)"])
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(name, id)| (name.to_string(), id.to_string()))
        .collect()
}

#[tokio::test]
async fn a_push_in_flight_when_the_brake_is_pulled_lands_before_it_or_not_at_all() {
    let fx = Fixture::new();
    let h = &fx.home;
    let (repo, remote) = (fx.root.join("repo"), fx.root.join("remote.git"));
    std::fs::create_dir_all(&repo).unwrap();
    host_git(h, &repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("a.txt"), "a\n").unwrap();
    host_git(h, &repo, &["add", "-A"]);
    host_git(h, &repo, &["commit", "-q", "-m", "first"]);
    host_git(h, &fx.root, &["init", "-q", "--bare", "-b", "main", remote.to_str().unwrap()]);
    host_git(h, &repo, &["remote", "add", "origin", remote.to_str().unwrap()]);
    host_git(h, &repo, &["push", "-q", "origin", "main"]);
    // A branch of its own commit for every push, so that each one has something to send.
    let mut local = BTreeMap::new();
    for i in 0..=PUSHES {
        let name = format!("task/b{i}");
        host_git(h, &repo, &["switch", "-q", "-c", &name, "main"]);
        std::fs::write(repo.join("b.txt"), format!("{i}\n")).unwrap();
        host_git(h, &repo, &["add", "-A"]);
        host_git(h, &repo, &["commit", "-q", "-m", &name]);
        local.insert(format!("refs/heads/{name}"), host_git(h, &repo, &["rev-parse", "HEAD"]));
    }
    host_git(h, &repo, &["switch", "-q", "main"]);
    let config = fx.config(CONFIG);
    let c = Arc::new(Client::start(&fx, &config).await);

    // The positive control: a push before the brake lands.
    let p = c.ok("git_push", json!({"repo": "repo", "branch": "task/b0"})).await;
    assert_eq!(p["new"], local["refs/heads/task/b0"].as_str(), "{p}");
    assert_eq!(remote_refs(h, &remote).get("refs/heads/task/b0"), local.get("refs/heads/task/b0"));

    // The race: pushes started one after another, the stop in the middle of them.
    let mut calls = Vec::new();
    for i in 1..=PUSHES {
        let c = c.clone();
        calls.push(tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(15 * i as u64)).await;
            let started = Instant::now();
            let r = c.call("git_push", json!({"repo": "repo", "branch": format!("task/b{i}")}));
            let r = tokio::time::timeout(Duration::from_secs(60), r).await;
            (i, started, r.unwrap_or_else(|_| panic!("push {i} hung")))
        }));
    }
    tokio::time::sleep(Duration::from_millis(15 * PUSHES as u64 / 2)).await;
    let out = fx.command(&["stop", "--config", config.to_str().unwrap()]).output().await.unwrap();
    let braked = Instant::now();
    // What the remote holds once the brake is on: nothing may land after this.
    let at_brake = remote_refs(h, &remote);
    assert!(out.status.success(), "hands stop: {}", String::from_utf8_lossy(&out.stderr));

    let mut answers = Vec::new();
    for call in calls {
        answers.push(call.await.unwrap());
    }
    // What the remote holds once every call has answered, and a moment later: nothing lands
    // after the answers (no push goes on behind a refusal).
    let landed = remote_refs(h, &remote);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(remote_refs(h, &remote), landed, "the remote changed after every push answered");
    assert_eq!(landed, at_brake, "a push landed after `hands stop` answered");

    let (mut done, mut refused) = (0, 0);
    for (i, started, r) in &answers {
        let name = format!("refs/heads/task/b{i}");
        let said = text_of(r);
        if r.is_error == Some(true) {
            refused += 1;
            assert!(said.contains("hands stop"), "push {i} failed, not for the brake: {said}");
            assert_eq!(landed.get(&name), None, "push {i} was refused, yet it landed: {said}");
        } else {
            done += 1;
            assert_eq!(landed.get(&name), local.get(&name), "push {i} said it pushed: {said}");
            assert!(*started < braked, "push {i} started after the stop and got through: {said}");
        }
    }
    assert!(refused > 0, "no push met the brake: the race did not race");
    // Only what was answered as pushed is on the remote (besides `main` and the control).
    let pushed: usize = landed.keys().filter(|k| k.starts_with("refs/heads/task/")).count();
    assert_eq!(pushed, done + 1, "{landed:?}");

    // Under the brake every push is refused; the release lets one through again.
    let e = c.err("git_push", json!({"repo": "repo", "branch": "task/b1"})).await;
    assert!(e.contains("hands stop"), "{e}");
    let mut out = fx.command(&["stop", "--release", "--config", config.to_str().unwrap()]);
    assert!(out.output().await.unwrap().status.success());
    // The last branch may have gone through in the race: then it is up to date, still no error.
    let last = format!("task/b{PUSHES}");
    c.ok("git_push", json!({"repo": "repo", "branch": last})).await;
    let name = format!("refs/heads/{last}");
    assert_eq!(remote_refs(h, &remote).get(&name), local.get(&name));
    Arc::try_unwrap(c).ok().unwrap().stop().await;
    fx.assert_canary();
}
