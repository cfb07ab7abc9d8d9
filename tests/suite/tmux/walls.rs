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

/// Whether `path` is listed in `first`'s `denied` or, within 15 s, in a later `tmux_read` of
/// `session` (a refusal made while no call waited reaches the next result); the last result.
async fn listed_soon(c: &Client, session: &str, first: Value, path: &str) -> (bool, Value) {
    let start = Instant::now();
    let mut last = first;
    loop {
        if denied_paths(&last).iter().any(|(what, _)| what == path) {
            return (true, last);
        }
        if start.elapsed() > Duration::from_secs(15) {
            return (false, last);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        last = c.ok("tmux_read", json!({ "session": session })).await;
    }
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
    let (listed, last) = listed_soon(&c, "walls", r, &envrc).await;
    assert!(listed, "{last}");
    assert!(!fx.root.join(".envrc").exists());
    fx.assert_canary();
    c.ok("tmux_kill", json!({ "session": "walls" })).await;
}

/// A session lives for hours: after a burst of refusals (more than the init lists at once), a
/// refusal made later is still listed — the init's budget of listed refusals refills over time
/// (once a second) instead of ending for the session's life at the twentieth.
#[tokio::test]
async fn a_refusal_after_a_burst_is_still_listed() {
    let fx = Fixture::new();
    let c = Client::start_era(&fx, &super::shell_config(&fx), Era::Legacy).await;
    c.ok("tmux_start", json!({ "command": "bash", "name": "burst" })).await;
    let send = |text: &str| json!({ "session": "burst", "text": text, "wait": { "exit": true } });
    // The burst: thirty refused creates of distinct protected names at once.
    let r = c
        .ok(
            "tmux_send",
            send("for i in $(seq 30); do mkdir d$i; touch d$i/.envrc; done 2>/dev/null"),
        )
        .await;
    let burst = denied_paths(&r).len();
    assert!((1..=20).contains(&burst), "the burst is listed, bounded: {burst}: {r}");
    assert!(fx.root.join("d30").is_dir(), "positive control: the folders were made: {r}");
    tokio::time::sleep(Duration::from_millis(2500)).await;
    // Later: one more refusal, which the result must still name.
    let r = c.ok("tmux_send", send("mkdir later && touch later/.envrc")).await;
    let later = fx.root.join("later/.envrc").display().to_string();
    let (listed, last) = listed_soon(&c, "burst", r, &later).await;
    assert!(listed, "{last}");
    assert!(!fx.root.join("later/.envrc").exists());
    assert!(!fx.root.join("d1/.envrc").exists());
    fx.assert_canary();
    c.ok("tmux_kill", json!({ "session": "burst" })).await;
}

/// A tmux client writes nothing in the roots (found by the fifth attack pass): a session's
/// command put a fake server on its own socket, which told the next `tmux_read`'s client to
/// exec a shell command — in the client's sandbox, which had the roots writable and was counted
/// by nothing, so it could swap a folder under tools-git. Now the client's roots are
/// read-only. Positive control: the client did run the command (it wrote the socket folder,
/// the one place a client may write); the write into the root was refused; the canary holds.
#[tokio::test]
async fn a_fake_server_cannot_make_a_client_write_the_roots() {
    let fx = Fixture::new();
    let c = Client::start_era(&fx, &super::shell_config(&fx), Era::Legacy).await;
    let wrote = fx.root.join("client-wrote.txt");
    let fake = format!(
        r#"
import os, socket, struct, time
sock = os.environ["TMUX"].split(",")[0]
here = os.path.dirname(sock)
open("sockdir.txt", "w").write(here)
cmd = "echo ran > {{}}/client-ran; echo pwned > {wrote}".format(here)
def msg(t, data=b""):
    return struct.pack("=IHHII", t, 16 + len(data), 0, 8, os.getpid()) + data
os.unlink(sock)
s = socket.socket(socket.AF_UNIX); s.bind(sock); s.listen(8)
while True:
    c, _ = s.accept()
    c.settimeout(1.0)
    try:
        c.recv(65536)
    except OSError:
        pass
    c.sendall(msg(207) + msg(217, cmd.encode() + b"\0/bin/sh\0") + msg(204))
    time.sleep(0.2)
    c.close()
"#,
        wrote = wrote.display()
    );
    std::fs::write(fx.root.join("fake.py"), fake).unwrap();
    c.ok("tmux_start", json!({ "command": "python3 fake.py", "name": "fake" })).await;
    let ran = |fx: &Fixture| {
        let here = std::fs::read_to_string(fx.root.join("sockdir.txt")).unwrap_or_default();
        !here.is_empty() && std::path::Path::new(&here).join("client-ran").exists()
    };
    let until = Instant::now() + Duration::from_secs(20);
    while !ran(&fx) && Instant::now() < until {
        let _ = c.call("tmux_read", json!({ "session": "fake" })).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(ran(&fx), "the fake server's command never ran in a client (the control)");
    assert!(!wrote.exists(), "a tmux client wrote into the root");
    let _ = c.call("tmux_kill", json!({ "session": "fake" })).await;
    fx.assert_canary();
}
