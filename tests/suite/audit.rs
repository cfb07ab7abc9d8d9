//! The audit log: which calls leave a record and what it says, that the record is on disk when
//! the result arrives, `hands audit --verify` on an intact and on an edited log, and the chain
//! across a restart. The daemon runs in process but for the two tests that run commands (the
//! sandbox); `hands audit` is always the binary.

use super::common::{Client, Era, Fixture};
use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::Duration;
use tokio::io::AsyncBufReadExt;

/// tools-fs (read and write allowed) and tools-git with read and write denied by policy;
/// on Linux also tools-shell with external calls allowed.
fn config(fx: &Fixture) -> PathBuf {
    let mut text = String::from(
        "[daemon]\nstate_dir = \"{state}\"\n\n\
         [[builtins]]\nid = \"tools-fs\"\ngrants = [\"filesystem\"]\n\
         filesystem = [{ path = \"{root}\", write = true }]\n\n\
         [[builtins]]\nid = \"tools-git\"\ngrants = [\"filesystem\", \"spawn\"]\n\
         filesystem = [{ path = \"{root}\", write = true }]\n\
         config = { trust = { read = \"deny\", write = \"deny\" } }\n",
    );
    if cfg!(target_os = "linux") {
        text.push_str(
            "\n[[builtins]]\nid = \"tools-shell\"\ngrants = [\"filesystem\", \"spawn\"]\n\
             filesystem = [{ path = \"{root}\", write = true }]\n\
             config = { trust = { external = \"allow\" } }\n",
        );
    }
    fx.config(&text)
}

fn log_path(fx: &Fixture) -> PathBuf {
    fx.state.join("audit.jsonl")
}

/// `hands audit ARGS --config CONFIG`: exit code and stdout.
async fn hands_audit(fx: &Fixture, config: &std::path::Path, args: &[&str]) -> (i32, String) {
    let mut all = vec!["audit", "--config", config.to_str().unwrap()];
    all.extend_from_slice(args);
    let out = fx.command(&all).output().await.unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned())
}

#[tokio::test]
async fn writes_and_refusals_are_recorded_before_their_result_and_read_successes_are_not() {
    let fx = Fixture::new();
    let config = config(&fx);
    let c = Client::in_process(&fx, &config, Era::Legacy).await;

    // A write: the record is there as soon as the result is.
    c.ok("write", json!({ "path": "a.txt", "content": "hello" })).await;
    let r = fx.audit_records();
    assert_eq!(r.len(), 1, "{r:?}");
    let w = &r[0];
    assert_eq!(w["seq"], 1);
    assert_eq!(w["client"], "stdio");
    assert_eq!(w["module"], "tools-fs");
    assert_eq!(w["tool"], "write");
    assert_eq!(w["class"], "write");
    assert_eq!(w["arguments"], json!({ "path": "a.txt", "content": "hello" }));
    assert_eq!(w["decision"], "allow");
    assert_eq!(w["decided_by"], "policy");
    assert_eq!(w["outcome"], "ok");
    assert_eq!(w["result"]["bytes"], 5);
    assert_eq!(w["prev"], "0".repeat(64));
    assert!(w["time"].as_str().unwrap().ends_with('Z'), "{w}");
    let mode = std::fs::metadata(log_path(&fx)).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the log holds full arguments: private to its owner");

    // Read-class successes leave no record (positive control for the refusals below).
    c.ok("read", json!({ "path": "a.txt" })).await;
    c.ok("list_dir", json!({ "path": "." })).await;
    assert_eq!(fx.audit_records().len(), 1);

    // A write the module refuses (outside the roots) is a `refused` outcome of an allowed call:
    // the error's own `is_refusal` says so (a plain failure is `error`, see in_process.rs).
    let outside = fx.outside.join("x.txt");
    c.err("write", json!({ "path": outside, "content": "no" })).await;
    let r = fx.audit_records();
    assert_eq!(r.len(), 2);
    assert_eq!(r[1]["decision"], "allow");
    assert!(r[1]["outcome"].as_str().unwrap().starts_with("refused: "), "{}", r[1]);
    assert!(r[1]["outcome"].as_str().unwrap().contains("outside every root"), "{}", r[1]);

    // Policy refusals, of a read-class and a write-class tool.
    c.err("git_status", json!({})).await;
    c.err("git_commit", json!({ "message": "m" })).await;
    let r = fx.audit_records();
    assert_eq!(r.len(), 4);
    for (rec, tool, class) in [(&r[2], "git_status", "read"), (&r[3], "git_commit", "write")] {
        assert_eq!(rec["tool"], tool);
        assert_eq!(rec["class"], class);
        assert_eq!(rec["module"], "tools-git");
        assert_eq!(rec["decision"], "deny");
        assert_eq!(rec["decided_by"], "policy");
        assert!(rec["outcome"].as_str().unwrap().starts_with("refused: "), "{rec}");
    }
    assert_eq!(r[3]["arguments"], json!({ "message": "m" }));
    for pair in r.windows(2) {
        assert_eq!(pair[1]["prev"], pair[0]["hash"]);
        assert_eq!(pair[1]["seq"].as_u64().unwrap(), pair[0]["seq"].as_u64().unwrap() + 1);
    }
    c.stop().await;
    fx.assert_canary();

    // `hands audit` prints one readable line per record.
    let (code, out) = hands_audit(&fx, &config, &[]).await;
    assert_eq!(code, 0, "{out}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    assert!(lines[0].starts_with("#1 ") && lines[0].contains("stdio tools-fs/write"), "{out}");
    assert!(lines[3].contains("gate: deny (policy); outcome: refused"), "{out}");

    // Intact: --verify passes and counts.
    let (code, out) = hands_audit(&fx, &config, &["--verify"]).await;
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("4 records, chain intact"), "{out}");

    // One byte of an older record changed: --verify fails and names that record.
    let text = std::fs::read_to_string(log_path(&fx)).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let edited = lines[1].replacen("outside every root", "outside every rooT", 1);
    assert_ne!(edited, lines[1]);
    let mut all: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    all[1] = edited;
    std::fs::write(log_path(&fx), all.join("\n") + "\n").unwrap();
    let (code, out) = hands_audit(&fx, &config, &["--verify"]).await;
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("seq 2 (line 2)"), "{out}");
    assert!(out.contains("1 records before it are intact"), "{out}");
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_bash_call_is_recorded_with_its_command_and_exit() {
    let fx = Fixture::new();
    let config = config(&fx);
    let c = Client::start(&fx, &config).await;
    let cmd = "echo hi; exit 3";
    let out = c.ok("bash", json!({ "command": cmd })).await;
    assert_eq!(out["exit_code"], 3);
    let r = fx.audit_records();
    assert_eq!(r.len(), 1, "{r:?}");
    let b = &r[0];
    assert_eq!(b["module"], "tools-shell");
    assert_eq!(b["tool"], "bash");
    assert_eq!(b["class"], "external");
    assert_eq!(b["client"], "stdio");
    assert_eq!(b["decided_by"], "policy");
    assert_eq!(b["arguments"], json!({ "command": cmd }));
    assert_eq!(b["outcome"], "ok");
    assert_eq!(b["result"]["exit_code"], 3);
    assert_eq!(b["result"]["output_bytes"], 3);
    assert!(b["result"]["duration_ms"].is_u64(), "{b}");
    assert!(b["result"].get("stdout").is_none(), "output stays out of the log: {b}");
    c.stop().await;
}

#[tokio::test]
async fn the_chain_continues_across_a_restart() {
    let fx = Fixture::new();
    let config = config(&fx);
    let c = Client::in_process(&fx, &config, Era::Legacy).await;
    c.ok("write", json!({ "path": "a.txt", "content": "1" })).await;
    c.stop().await;
    let c = Client::in_process(&fx, &config, Era::Legacy).await;
    c.ok("edit", json!({ "path": "a.txt", "old_string": "1", "new_string": "2" })).await;
    c.stop().await;
    let r = fx.audit_records();
    assert_eq!(r.len(), 2, "{r:?}");
    assert_eq!(r[1]["seq"], 2);
    assert_eq!(r[1]["tool"], "edit");
    assert_eq!(r[1]["prev"], r[0]["hash"]);
    let (code, out) = hands_audit(&fx, &config, &["--verify"]).await;
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("2 records, chain intact"), "{out}");
}

/// A log cut short is found (SPEC §8): the daemon keeps the last record's seq and hash apart
/// from the log (`audit.head`), so deleting the newest records makes `--verify` fail naming how
/// many, and a daemon started on the cut log numbers its next record past the gap, so it stays
/// found. Positive control: the intact log verifies, across a restart too, its head following.
#[tokio::test]
async fn deleting_the_newest_records_is_found_by_verify() {
    let fx = Fixture::new();
    let config = config(&fx);
    let c = Client::in_process(&fx, &config, Era::Legacy).await;
    for i in 0..4 {
        c.ok("write", json!({ "path": format!("{i}.txt"), "content": "x" })).await;
    }
    c.stop().await;
    // The head file holds two slots (one line each, padded): the newest is the head.
    let head = || -> serde_json::Value {
        let text = std::fs::read_to_string(fx.state.join("audit.head")).unwrap();
        let slots: Vec<serde_json::Value> =
            text.lines().filter_map(|l| serde_json::from_str(l.trim()).ok()).collect();
        assert!(!slots.is_empty(), "no slot in the head file: {text:?}");
        slots.into_iter().max_by_key(|s| s["seq"].as_u64()).unwrap()
    };
    assert_eq!(head()["seq"], 4);
    let (code, out) = hands_audit(&fx, &config, &["--verify"]).await;
    assert_eq!((code, out.contains("4 records, chain intact")), (0, true), "{out}");
    // A restart continues the chain and the head.
    let c = Client::in_process(&fx, &config, Era::Legacy).await;
    c.ok("write", json!({ "path": "5.txt", "content": "x" })).await;
    c.stop().await;
    assert_eq!(head()["seq"], 5);
    assert_eq!(head()["hash"], fx.audit_records()[4]["hash"]);
    let (code, out) = hands_audit(&fx, &config, &["--verify"]).await;
    assert_eq!((code, out.contains("5 records, chain intact")), (0, true), "{out}");
    // The newest two deleted: what is left is a chain intact as far as it goes.
    let text = std::fs::read_to_string(log_path(&fx)).unwrap();
    let kept: String = text.lines().take(3).map(|l| format!("{l}\n")).collect();
    std::fs::write(log_path(&fx), kept).unwrap();
    let (code, out) = hands_audit(&fx, &config, &["--verify"]).await;
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("cut short") && out.contains("the newest 2 records were deleted"),
        "{out}"
    );
    assert!(out.contains("3 records before it are intact"), "{out}");
    // A daemon started on the cut log does not hide it.
    let c = Client::in_process(&fx, &config, Era::Legacy).await;
    c.ok("write", json!({ "path": "6.txt", "content": "x" })).await;
    c.stop().await;
    assert_eq!(fx.audit_records().last().unwrap()["seq"], 6);
    let (code, out) = hands_audit(&fx, &config, &["--verify"]).await;
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("records 4 to 5 are missing"), "{out}");
}

#[tokio::test]
async fn follow_prints_records_as_they_are_written() {
    let fx = Fixture::new();
    let config = config(&fx);
    let c = Client::in_process(&fx, &config, Era::Legacy).await;
    c.ok("write", json!({ "path": "a.txt", "content": "1" })).await;
    let mut follow = fx.command(&["audit", "--follow", "--config", config.to_str().unwrap()]);
    follow.stdout(std::process::Stdio::piped()).kill_on_drop(true);
    let mut child = follow.spawn().unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let next = async |lines: &mut tokio::io::Lines<_>| {
        tokio::time::timeout(Duration::from_secs(5), lines.next_line()).await.unwrap().unwrap()
    };
    let first: String = next(&mut lines).await.unwrap();
    assert!(first.starts_with("#1 ") && first.contains("tools-fs/write"), "{first}");
    c.ok("write", json!({ "path": "b.txt", "content": "2" })).await;
    let second: String = next(&mut lines).await.unwrap();
    assert!(second.starts_with("#2 ") && second.contains("b.txt"), "{second}");
    child.kill().await.unwrap();
    c.stop().await;
}

/// A large argument is recorded as its sha256 and size, not its content: a 4 MiB `write`
/// leaves a record of a few hundred bytes, and the file itself is written whole. Positive
/// control: a short argument is recorded as it is.
#[tokio::test]
async fn a_large_argument_is_recorded_by_digest_and_size() {
    use sha2::Digest;
    let fx = Fixture::new();
    let c = Client::in_process(&fx, &config(&fx), Era::Legacy).await;
    let big = "x".repeat(4 * 1024 * 1024);
    c.ok("write", json!({ "path": "big.txt", "content": big })).await;
    c.ok("write", json!({ "path": "small.txt", "content": "short" })).await;
    assert_eq!(std::fs::metadata(fx.root.join("big.txt")).unwrap().len(), 4 * 1024 * 1024);
    let log = std::fs::metadata(fx.state.join("audit.jsonl")).unwrap().len();
    assert!(log < 16 * 1024, "the audit log is {log} bytes");
    let records = fx.audit_records();
    let rec = records.iter().find(|r| r["arguments"]["path"] == "big.txt").unwrap();
    let content = &rec["arguments"]["content"];
    assert_eq!(content["bytes"], 4 * 1024 * 1024, "{rec}");
    assert_eq!(content["sha256"], hex::encode(sha2::Sha256::digest(big.as_bytes())), "{rec}");
    let small = records.iter().find(|r| r["arguments"]["path"] == "small.txt").unwrap();
    assert_eq!(small["arguments"]["content"], "short");
    let out = fx
        .std_command(&["audit", "--verify", "--config", config(&fx).to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    c.stop().await;
}

/// A tmpfs mounted as the state dir, unmounted when dropped.
struct Tmpfs(PathBuf);

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// A full disk under the audit log stops write- and external-class calls with a clear error
/// before they run (nothing runs unaudited); reads go on; once there is space again, calls
/// run and are recorded. Positive control: the same command runs before the disk fills.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_full_audit_disk_stops_external_actions_before_they_run() {
    let fx = Fixture::new();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=2m", "tmpfs"])
        .arg(&fx.state)
        .status()
        .unwrap();
    if !mounted.success() {
        // Not root, or no mount namespace to do it in: nothing to test here.
        return;
    }
    let _tmpfs = Tmpfs(fx.state.clone());
    let cfg = config(&fx);
    let c = Client::start(&fx, &cfg).await;
    fx.write("a.txt", "readable\n");
    let r = c.ok("bash", json!({ "command": "echo ran > before.txt" })).await;
    assert_eq!(r["exit_code"], 0, "{r}");
    assert!(fx.root.join("before.txt").exists());

    // Fill the state dir's file system.
    let fill = fx.state.join("fill");
    let _ = std::process::Command::new("dd")
        .args(["if=/dev/zero", "bs=64k", "count=100"])
        .arg(format!("of={}", fill.display()))
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    let msg = c.err("bash", json!({ "command": "echo ran > during.txt" })).await;
    assert!(msg.contains("audit log") && msg.contains("free"), "{msg}");
    assert!(!fx.root.join("during.txt").exists(), "a command ran unaudited");
    let msg = c.err("write", json!({ "path": "w.txt", "content": "x" })).await;
    assert!(msg.contains("audit log"), "{msg}");
    assert!(!fx.root.join("w.txt").exists());
    let read = c.ok("read", json!({ "path": "a.txt" })).await;
    assert!(read.to_string().contains("readable"), "{read}");

    // Space again: calls run and are recorded.
    std::fs::remove_file(&fill).unwrap();
    let r = c.ok("bash", json!({ "command": "echo ran > after.txt" })).await;
    assert_eq!(r["exit_code"], 0, "{r}");
    assert!(fx.root.join("after.txt").exists());
    let recorded = fx
        .audit_records()
        .iter()
        .any(|r| r["arguments"]["command"].as_str().is_some_and(|c| c.contains("after.txt")));
    assert!(recorded, "the call after the disk had space again was not recorded");
    c.stop().await;
    fx.assert_canary();
}
