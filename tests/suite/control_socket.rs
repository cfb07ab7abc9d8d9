//! Who the control socket answers (`src/control/socket.rs`), with the daemon run as an
//! ordinary user (uid [`COMMAND_UID`], as people run it): the machine's root at a terminal
//! (`sudo hands approvals …`) lists and answers its parked actions, though such a daemon cannot
//! read root's `/proc/PID/ns/user`; a process that is root only inside a user namespace of its
//! own (`unshare -r`: the kernel reports it as the uid it is mapped to), and a command in the
//! real sandbox, both reaching the socket, are refused and answer nothing. Needs root (to be
//! both the person and the other user).

use super::common::*;
use serde_json::json;
use std::path::Path;
use std::process::{Output, Stdio};
use std::sync::Arc;
use std::time::Duration;

/// tools-shell on the root, external calls asking a person.
fn config(fx: &Fixture) -> std::path::PathBuf {
    fx.config(
        "[daemon]\nstate_dir = \"{state}\"\n\n[trust]\napproval_timeout_secs = 60\n\n\
         [[builtins]]\nid = \"tools-shell\"\ngrants = [\"filesystem\", \"spawn\"]\n\
         filesystem = [{ path = \"{root}\", write = true }]\n\
         config = { trust = { external = \"ask\" } }\n",
    )
}

/// `setpriv` down to [`COMMAND_UID`], then `argv`.
fn as_user(fx: &Fixture, exe: &Path, argv: &[&str]) -> std::process::Command {
    let id = COMMAND_UID.to_string();
    let mut c = std::process::Command::new("setpriv");
    c.args([&format!("--reuid={id}"), &format!("--regid={id}"), "--clear-groups", "--"])
        .arg(exe)
        .args(argv)
        .current_dir(&fx.root)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &fx.home)
        .env("XDG_STATE_HOME", &fx.state);
    c
}

/// `hands approvals ARGS` as root (the person with `sudo`).
fn root_approvals(fx: &Fixture, cfg: &Path, args: &[&str]) -> (bool, String) {
    let mut all = vec!["approvals", "--config", cfg.to_str().unwrap()];
    all.extend_from_slice(args);
    let out = fx.std_command(&all).output().unwrap();
    let text =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

/// The first waiting id `hands approvals list` (as root) shows beside `marker`.
async fn waiting(fx: &Fixture, cfg: &Path, marker: &str) -> String {
    for _ in 0..400 {
        let (_, text) = root_approvals(fx, cfg, &["list"]);
        // One entry a `waiting ID …` line and the indented lines under it.
        if let Some(entry) = text.split("waiting ").skip(1).find(|e| e.contains(marker)) {
            return entry.split(' ').next().unwrap().to_string();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no action with {marker} was listed: {}", root_approvals(fx, cfg, &["list"]).1);
}

/// A Python probe that connects to the socket and answers `id` once; prints its uid as it
/// sees itself, then the daemon's reply.
fn probe(sock: &Path, id: &str) -> String {
    let line = json!({ "op": "answer", "id": id, "choice": "once" }).to_string();
    format!(
        "import os, socket\nprint('uid', os.getuid())\ns = socket.socket(socket.AF_UNIX)\n\
         s.connect({:?})\ns.sendall({:?}.encode() + b'\\n')\nprint(s.makefile().readline())\n",
        sock.to_str().unwrap(),
        line
    )
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

#[tokio::test]
#[ignore = "needs root (a daemon as another user); run with --include-ignored"]
async fn an_unprivileged_daemon_answers_root_and_refuses_a_namespaced_root() {
    if !needs_root("control_socket", "being root and another user at once needs root") {
        return;
    }
    let fx = Fixture::new();
    let cfg = config(&fx);
    // The launcher run by hand below gets a home of its own (since one resolution, a home that
    // is also a root is a mount point inside a bound folder, and the launcher refuses it).
    let launcher_home = fx.dir.path().join("launcher-home");
    std::fs::create_dir(&launcher_home).unwrap();
    // The daemon runs a copy of `hands` the user can reach (the checkout may be closed to it).
    let exe = fx.dir.path().join("hands");
    // Owned before the link is made: chowning a hard link chowns the build's own binary, and
    // then the launcher beside it (not of the binary's owner) is passed over.
    own_tree(fx.dir.path());
    if std::fs::hard_link(hands_bin(), &exe).is_err() {
        std::fs::copy(hands_bin(), &exe).unwrap();
    }
    let mut cmd = tokio::process::Command::from(as_user(
        &fx,
        &exe,
        &["serve", "--config", cfg.to_str().unwrap()],
    ));
    cmd.env("RUST_LOG", "warn").stderr(Stdio::inherit());
    let transport = rmcp::transport::TokioChildProcess::new(cmd).unwrap();
    let c = Arc::new(Client { service: handshake((), transport, Era::Legacy).await });
    let sock = fx.state.join("control.sock");
    assert!(wait_until(Duration::from_secs(10), || sock.exists()).await);
    let owner = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(&sock).unwrap());
    assert_eq!(owner, COMMAND_UID, "the daemon does not run as the ordinary user");
    let bash = |command: &'static str| {
        let c = c.clone();
        tokio::spawn(async move { c.call("bash", json!({ "command": command })).await })
    };

    // Root at a terminal lists the parked call and approves it: it runs.
    let first = bash("echo by-root > approved-by-root.txt");
    let id = waiting(&fx, &cfg, "approved-by-root.txt").await;
    let (ok, said) = root_approvals(&fx, &cfg, &["approve", &id]);
    assert!(ok, "root was refused: {said}");
    let r = first.await.unwrap();
    assert_ne!(r.is_error, Some(true), "{}", text_of(&r));
    assert_eq!(std::fs::read_to_string(fx.root.join("approved-by-root.txt")).unwrap(), "by-root\n");

    // A parked call that no namespaced process may answer.
    let second = bash("echo pwned > pwned.txt");
    let id = waiting(&fx, &cfg, "pwned.txt").await;
    // Root inside a user namespace the user made: it sees itself as uid 0, the daemon sees the
    // user's uid in another namespace, and refuses.
    let py = probe(&sock, &id);
    let out = as_user(&fx, Path::new("unshare"), &["-r", "python3", "-c", &py]).output().unwrap();
    let said = text(&out);
    assert!(said.contains("uid 0"), "the probe was not root in its namespace: {said}");
    assert!(said.contains("another user namespace") && !said.contains("\"ok\":true"), "{said}");
    // `hands approvals list` from such a namespace says it was refused (not "nothing waits").
    let cfg_s = cfg.to_str().unwrap();
    let exe_s = exe.to_str().unwrap();
    let out =
        as_user(&fx, Path::new("unshare"), &["-r", exe_s, "approvals", "list", "--config", cfg_s])
            .output()
            .unwrap();
    let said = text(&out);
    assert!(!out.status.success() && said.contains("a daemon refused"), "{said}");
    assert!(!said.contains("no action is waiting"), "{said}");
    // A command in the real sandbox (the launcher run by hand, the state dir bound in so the
    // socket is in its reach), as the daemon's user: refused alike.
    let spec = json!({
        "argv": ["python3", "-c", py],
        "cwd": fx.root,
        "env": { "PATH": "/usr/bin:/bin", "HOME": fx.root, "LANG": "C.UTF-8" },
        "roots": [{ "path": fx.root, "writable": true }, { "path": fx.state, "writable": true }],
        "protected": [],
        "masked": [],
        "system": ["/usr", "/bin", "/lib", "/lib64", "/etc"],
        "home": launcher_home,
    });
    let mut launcher = as_user(&fx, &exe, &["__sandbox"]);
    hands_sandbox::launcher::attach_spec(&mut launcher, spec.to_string().as_bytes()).unwrap();
    let out = launcher.output().unwrap();
    let said = text(&out);
    assert!(said.contains("another user namespace") && !said.contains("\"ok\":true"), "{said}");
    // Still waiting, nothing ran; root's own answer (the positive control) decides it.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!second.is_finished(), "a namespaced process answered the parked call");
    assert!(!fx.root.join("pwned.txt").exists());
    let (ok, said) = root_approvals(&fx, &cfg, &["deny", &id]);
    assert!(ok, "{said}");
    let r = second.await.unwrap();
    assert_eq!(r.is_error, Some(true), "{}", text_of(&r));
    assert!(!fx.root.join("pwned.txt").exists());
    let records = fx.audit_records();
    let decided: Vec<&str> = records
        .iter()
        .filter(|r| r["tool"] == "bash")
        .map(|r| r["decided_by"].as_str().unwrap())
        .collect();
    assert_eq!(decided, ["person-via-terminal", "person-via-terminal"], "{records:?}");
    fx.assert_canary();
}
