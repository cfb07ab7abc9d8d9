//! An error never echoes an input whole (SPEC §10): a path longer than the kernel's
//! `PATH_MAX` is refused as too long, and every path, pattern, name or command an error quotes
//! is cut to a few hundred characters with its length (`hands_roots::shown`) — file, git and
//! shell tools, argument parsing, unknown tools — and the server keeps serving after each.
//! The 10 MB path test runs in process; the other runs commands (`run`: the binary).

use super::common::{Client, Era, Fixture, text_of};
use serde_json::json;

/// An error that quotes an input stays this short (the cut keeps 240 characters).
const SHORT: usize = 1500;

fn config(fx: &Fixture) -> std::path::PathBuf {
    let repo = fx.root.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let ok = std::process::Command::new("git")
        .args(["-c", "safe.directory=*"])
        .arg("init")
        .arg("-q")
        .arg(&repo)
        .status()
        .unwrap();
    assert!(ok.success());
    fx.config(
        "[daemon]\nstate_dir = \"{state}\"\n\n\
         [[builtins]]\nid = \"tools-fs\"\ngrants = [\"filesystem\"]\n\
         filesystem = [{ path = \"{root}\", write = true }]\n\n\
         [[builtins]]\nid = \"tools-git\"\ngrants = [\"filesystem\", \"spawn\"]\n\
         filesystem = [{ path = \"{root}\", write = true }]\n\n\
         [[builtins]]\nid = \"tools-shell\"\ngrants = [\"filesystem\", \"spawn\"]\n\
         filesystem = [{ path = \"{root}\", write = true }]\n\
         config = { bash = false, trust = { external = \"allow\" }, commands = { allow = [\"echo\"] } }\n",
    )
}

#[tokio::test]
async fn a_ten_megabyte_path_gets_a_short_error_and_the_server_keeps_serving() {
    let fx = Fixture::new();
    let c = Client::in_process(&fx, &config(&fx), Era::Legacy).await;
    fx.write("ok.txt", "fine\n");
    let huge = "a".repeat(10 << 20);
    for (tool, args) in [
        ("read", json!({ "path": huge })),
        ("write", json!({ "path": huge, "content": "x" })),
        ("list_dir", json!({ "path": huge })),
        ("git_status", json!({ "repo": huge })),
    ] {
        let msg = c.err(tool, args).await;
        assert!(msg.len() < SHORT, "{tool}: a {} byte error", msg.len());
        assert!(msg.contains("PATH_MAX") && msg.contains("10485760"), "{tool}: {msg}");
        // Still serving: the allowed neighbour works.
        let out = c.ok("read", json!({ "path": "ok.txt" })).await;
        assert!(out["content"].as_str().unwrap().contains("fine"), "{out}");
    }
    assert!(!fx.root.join(&huge[..200]).exists());
    fx.assert_canary();
    c.stop().await;
}

#[tokio::test]
async fn every_error_that_quotes_an_input_cuts_it_and_gives_its_length() {
    let fx = Fixture::new();
    let c = Client::start(&fx, &config(&fx)).await;
    // Under PATH_MAX (200-byte names, each under NAME_MAX) but long: not found, quoted cut.
    let long = vec!["n".repeat(200); 15].join("/");
    let cut = |msg: &str, what: &str| {
        assert!(msg.len() < SHORT, "{what}: a {} byte error: {}", msg.len(), &msg[..300]);
        assert!(msg.contains("bytes in all"), "{what}: {msg}");
    };
    cut(&c.err("read", json!({ "path": long })).await, "read");
    cut(&c.err("git_log", json!({ "repo": long })).await, "git_log");
    // A pattern glob cannot compile, and a revision that names nothing.
    let bad_glob = format!("[{}", "g".repeat(5000));
    cut(&c.err("glob", json!({ "pattern": bad_glob })).await, "glob");
    let bad_re = format!("({}", "r".repeat(5000));
    cut(&c.err("grep", json!({ "pattern": bad_re })).await, "grep");
    let rev = "v".repeat(5000);
    cut(&c.err("git_log", json!({ "repo": "repo", "rev": rev })).await, "git_log rev");
    // A command the allowlist does not admit, and a binary that is no plain name.
    let argv = vec!["x".repeat(5000)];
    cut(&c.err("run", json!({ "argv": argv })).await, "run");
    let argv = vec![format!("/{}", "p".repeat(5000))];
    cut(&c.err("run", json!({ "argv": argv })).await, "run path");
    // A 10 MB string where a number belongs: serde quotes it, the error cuts it.
    let big = "9".repeat(10 << 20);
    let msg = c.err("read", json!({ "path": "x", "offset": big })).await;
    cut(&msg, "offset");
    // An unknown tool with a 10 MB name: a protocol error, short.
    let name = "t".repeat(10 << 20);
    let params = rmcp::model::CallToolRequestParams::new(name);
    let e = c.service.peer().call_tool(params).await.unwrap_err().to_string();
    assert!(e.len() < SHORT, "unknown tool: a {} byte error", e.len());
    // The allowed neighbour: an ordinary call still works, and its result is not cut.
    let out = c.ok("run", json!({ "argv": ["echo", "y".repeat(3000)] })).await;
    assert_eq!(out["stdout"].as_str().unwrap().trim_end().len(), 3000, "{out}");
    let r = c.call("list_dir", json!({ "path": "." })).await;
    assert_ne!(r.is_error, Some(true), "{}", text_of(&r));
    fx.assert_canary();
    c.stop().await;
}
