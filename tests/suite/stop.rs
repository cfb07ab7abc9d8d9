//! `hands stop` through the real binary: a running command and a tmux session die (no process
//! left on the host), later calls are refused naming `hands stop --release` while reads still
//! work, the release lets commands run again, every daemon of a state dir is reached, a late
//! approval does not get past the brake, and the control socket is private (mode 0600, and
//! refused to a sandboxed command).

use super::common::{Client, Fixture, host_processes, text_of, unique_sleep, wait_until};
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

/// `hands stop [--release] --config CONFIG`: exit code and stdout.
async fn hands_stop(fx: &Fixture, config: &Path, release: bool) -> (i32, String) {
    let mut args = vec!["stop", "--config", config.to_str().unwrap()];
    if release {
        args.push("--release");
    }
    let out = fx.command(&args).output().await.unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned())
}

#[tokio::test]
async fn stop_kills_running_commands_and_refuses_new_ones_until_release() {
    let fx = Fixture::new();
    fx.write("a.txt", "readable\n");
    let config = fx.fs_shell_config();
    let c = Client::start(&fx, &config).await;

    // The control socket: private to its owner.
    let sock = fx.state.join("control.sock");
    let mode = std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);

    // A long command, running.
    let secs = unique_sleep();
    let peer = c.service.peer().clone();
    let params = CallToolRequestParams::new("bash").with_arguments(
        json!({ "command": format!("sleep {secs}"), "timeout_secs": 600 })
            .as_object()
            .unwrap()
            .clone(),
    );
    let call = tokio::spawn(async move { peer.call_tool(params).await });
    assert!(
        wait_until(Duration::from_secs(10), || !host_processes(&["sleep", &secs]).is_empty()).await,
        "the command never started"
    );

    // The brake.
    let started = Instant::now();
    let (code, out) = hands_stop(&fx, &config, false).await;
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("ended 1 running commands and tmux sessions"), "{out}");
    let r = tokio::time::timeout(Duration::from_secs(10), call).await.unwrap().unwrap().unwrap();
    assert_eq!(r.is_error, Some(true), "{}", text_of(&r));
    assert!(text_of(&r).contains("hands stop --release"), "{}", text_of(&r));
    // A refusal by the brake, typed as such (not sorted by its text): its layer and the tool.
    let denied = &r.structured_content.as_ref().expect("denial feedback")["denied"][0];
    assert_eq!((denied["layer"].as_str(), denied["what"].as_str()), (Some("brake"), Some("bash")));
    assert!(started.elapsed() < Duration::from_secs(8), "took {:?}", started.elapsed());
    assert!(
        wait_until(Duration::from_secs(3), || host_processes(&["sleep", &secs]).is_empty()).await,
        "a sleep outlived `hands stop`"
    );

    // New commands are refused, naming the way out; reads still work.
    let msg = c.err("bash", json!({ "command": "echo should-not-run" })).await;
    assert!(msg.contains("hands stop --release"), "{msg}");
    let read = c.ok("read", json!({ "path": "a.txt" })).await;
    assert!(read.to_string().contains("readable"), "{read}");

    // Released: commands run again.
    let (code, out) = hands_stop(&fx, &config, true).await;
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("released"), "{out}");
    let r = c.ok("bash", json!({ "command": "echo again" })).await;
    assert_eq!(r["stdout"], "again\n");

    // The log tells the story: the killed call, the person's stop, the refusal, the release.
    // The killed call is a refusal too (it was audited `error:` while refusals were sorted by
    // their text).
    let r = fx.audit_records();
    let summary: Vec<(String, String, String)> = r
        .iter()
        .map(|x| {
            let s = |k: &str| x[k].as_str().unwrap_or_default().to_string();
            (s("tool"), s("decided_by"), s("outcome").chars().take(8).collect())
        })
        .collect();
    let want = [
        ("bash", "policy", "refused:"),
        ("stop", "person-via-terminal", "ok: ende"),
        ("bash", "stop", "refused:"),
        ("release", "person-via-terminal", "ok"),
        ("bash", "policy", "ok"),
    ];
    let want: Vec<(String, String, String)> =
        want.iter().map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string())).collect();
    // The killed call's record is written when its result returns, which may be after the
    // stop's own record.
    let mut got = summary.clone();
    got[..2].sort();
    let mut first_two = want[..2].to_vec();
    first_two.sort();
    assert_eq!(got[..2], first_two[..], "{summary:?}");
    assert_eq!(got[2..], want[2..], "{summary:?}");

    // The socket goes with the daemon; then there is nothing to stop.
    c.stop().await;
    assert!(wait_until(Duration::from_secs(5), || !sock.exists()).await, "socket left behind");
    let (code, out) = hands_stop(&fx, &config, false).await;
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("no running daemon"), "{out}");
}

#[tokio::test]
async fn stop_reaches_every_daemon_of_the_state_dir() {
    let fx = Fixture::new();
    let config = fx.fs_shell_config();
    let a = Client::start(&fx, &config).await;
    let b = Client::start(&fx, &config).await;
    // The second daemon listens beside the first, which keeps `control.sock`.
    let mut socks: Vec<String> = std::fs::read_dir(&fx.state)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("control") && n.ends_with(".sock"))
        .collect();
    socks.sort();
    assert_eq!(socks.len(), 2, "{socks:?}");
    assert_eq!(socks[0], "control-".to_string() + &socks[0][8..], "{socks:?}");
    assert!(socks.contains(&"control.sock".to_string()), "{socks:?}");

    let (code, out) = hands_stop(&fx, &config, false).await;
    assert_eq!(code, 0, "{out}");
    assert_eq!(out.lines().filter(|l| l.contains(" stopped: ")).count(), 2, "{out}");
    for c in [&a, &b] {
        let msg = c.err("bash", json!({ "command": "echo should-not-run" })).await;
        assert!(msg.contains("hands stop --release"), "{msg}");
    }
    let (code, out) = hands_stop(&fx, &config, true).await;
    assert_eq!(code, 0, "{out}");
    for c in [&a, &b] {
        let r = c.ok("bash", json!({ "command": "echo again" })).await;
        assert_eq!(r["stdout"], "again\n");
    }
    // Two writers, one chain.
    let out = fx
        .command(&["audit", "--verify", "--config", config.to_str().unwrap()])
        .output()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("8 records, chain intact"), "{text}");
    a.stop().await;
    b.stop().await;
}

#[tokio::test]
async fn an_action_approved_after_stop_is_still_refused() {
    let fx = Fixture::new();
    // tools-shell with the default external = "ask": this client cannot be asked, so the call
    // parks for `hands approvals`.
    let config = fx.config(
        "[daemon]\nstate_dir = \"{state}\"\n\n\
         [[builtins]]\nid = \"tools-shell\"\ngrants = [\"filesystem\", \"spawn\"]\n\
         filesystem = [{ path = \"{root}\", write = true }]\n",
    );
    let c = Client::start(&fx, &config).await;
    let peer = c.service.peer().clone();
    let marker = fx.root.join("ran.txt");
    let params = CallToolRequestParams::new("bash").with_arguments(
        json!({ "command": format!("echo ran > {}", marker.display()) })
            .as_object()
            .unwrap()
            .clone(),
    );
    let call = tokio::spawn(async move { peer.call_tool(params).await });
    let approvals = |args: &[&str]| {
        let mut all = vec!["approvals"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--config", config.to_str().unwrap()]);
        let out = fx.std_command(&all).output().unwrap();
        (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let mut id = None;
    for _ in 0..200 {
        let (_, out) = approvals(&["list"]);
        if let Some(line) = out.lines().find(|l| l.starts_with("waiting ")) {
            id = line.split_whitespace().nth(1).map(str::to_string);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let id = id.expect("the bash call never parked");
    let (code, out) = hands_stop(&fx, &config, false).await;
    assert_eq!(code, 0, "{out}");
    let (ok, out) = approvals(&["approve", &id]);
    assert!(ok, "{out}");
    let r = tokio::time::timeout(Duration::from_secs(10), call).await.unwrap().unwrap().unwrap();
    assert_eq!(r.is_error, Some(true), "{}", text_of(&r));
    assert!(text_of(&r).contains("hands stop --release"), "{}", text_of(&r));
    assert!(!marker.exists(), "the command ran after `hands stop`");
    let last = fx.audit_records().pop().unwrap();
    assert_eq!((last["tool"].as_str(), last["decided_by"].as_str()), (Some("bash"), Some("stop")));
    c.stop().await;
}

#[tokio::test]
async fn a_sandboxed_command_cannot_use_the_control_socket() {
    let fx = Fixture::new();
    // A state dir inside a root is refused outright: the audit log, the standing permissions
    // and the control socket would be in the reach of commands and file tools.
    let inside = fx.config(
        "[daemon]\nstate_dir = \"{root}/state\"\n\n\
         [[builtins]]\nid = \"tools-shell\"\ngrants = [\"filesystem\", \"spawn\"]\n\
         filesystem = [{ path = \"{root}\", write = true }]\n",
    );
    let out = fx.std_command(&["check", "--config", inside.to_str().unwrap()]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success() && text.contains("lies inside the root"), "{text}");
    assert!(!fx.root.join("state").exists(), "nothing was created in the root");
    // Defense in depth: even a sandboxed command that reaches the socket (here the launcher is
    // run by hand with the state dir bound in) is refused, though it has the daemon's uid. A
    // root launcher never gives a command root's uid (`run_as`), but binds a root-owned root
    // id-mapped (decision 0061), so the command reaches the socket as its owner: the daemon's
    // check of the peer's uid refuses it then.
    let root = rustix::process::geteuid().is_root();
    let config = fx.fs_shell_config();
    let c = Client::start(&fx, &config).await;
    let sock = fx.state.join("control.sock");
    assert!(sock.exists());
    let probe = format!(
        "import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect({:?})\n\
         s.sendall(b'{{\"op\": \"stop\"}}\\n')\nprint(s.recv(4096).decode())\n",
        sock.to_str().unwrap()
    );
    // A home of its own: a home that is also a root is a mount point inside a bound folder,
    // which the launcher refuses since one resolution. Open to `run_as` as the root is.
    let launcher_home = fx.dir.path().join("launcher-home");
    std::fs::create_dir(&launcher_home).unwrap();
    if root {
        std::os::unix::fs::chown(&launcher_home, Some(65534), Some(65534)).unwrap();
    }
    let spec = json!({
        "argv": ["python3", "-c", probe],
        "cwd": fx.root,
        "env": { "PATH": "/usr/bin:/bin", "HOME": fx.root, "LANG": "C.UTF-8" },
        "roots": [{ "path": fx.root, "writable": true }, { "path": fx.state, "writable": true }],
        "protected": [],
        "masked": [],
        "system": ["/usr", "/bin", "/lib", "/lib64", "/etc"],
        "home": launcher_home,
        "run_as": if root { json!({ "uid": 65534, "gid": 65534 }) } else { Value::Null },
    });
    let mut launcher = fx.std_command(&["__sandbox"]);
    hands_sandbox::launcher::attach_spec(&mut launcher, spec.to_string().as_bytes()).unwrap();
    let out = launcher.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Over root-owned roots the state folder, a root here, is bound id-mapped, so the command
    // reaches the socket as the folder's owner would and the daemon refuses it by its uid.
    let by_uid = root && stdout.contains("is neither this daemon's uid");
    assert!(
        stdout.contains("another user namespace")
            || (root && stderr.contains("PermissionError"))
            || by_uid,
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!stdout.contains("\"ok\":true"), "{stdout}");
    // The brake was not pulled: commands still run.
    let r = c.ok("bash", json!({ "command": "echo still-running" })).await;
    assert_eq!(r["stdout"], "still-running\n");
    // Positive control: the person's own request, from the host, is answered.
    let out = fx
        .command(&["stop", "--release", "--config", config.to_str().unwrap()])
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    c.stop().await;
}

#[tokio::test]
async fn stop_ends_tmux_sessions_and_refuses_new_ones_until_release() {
    let fx = Fixture::new();
    let config = fx.fs_shell_config();
    let c = Client::start(&fx, &config).await;
    let secs = unique_sleep();
    c.ok("tmux_start", json!({ "command": format!("sleep {secs}"), "name": "srv" })).await;
    assert!(
        wait_until(Duration::from_secs(10), || !host_processes(&["sleep", &secs]).is_empty()).await,
        "the session's command never started"
    );
    let (code, out) = hands_stop(&fx, &config, false).await;
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("ended 1 running commands and tmux sessions"), "{out}");
    assert!(
        wait_until(Duration::from_secs(5), || host_processes(&["sleep", &secs]).is_empty()).await,
        "a tmux session's command outlived `hands stop`"
    );
    let msg = c.err("tmux_start", json!({ "command": "sleep 1", "name": "again" })).await;
    assert!(msg.contains("hands stop --release"), "{msg}");
    let (code, out) = hands_stop(&fx, &config, true).await;
    assert_eq!(code, 0, "{out}");
    c.ok("tmux_start", json!({ "command": "true", "name": "after" })).await;
    c.ok("tmux_kill", json!({ "session": "after" })).await;
    c.stop().await;
}

/// The brake is atomic with a start in flight: a `tmux_start` that passed the gate and is
/// still preparing (walking a large tree for secret files) when `hands stop` comes either
/// sees the brake and refuses, or is recorded in time and ended by the stop — it never runs
/// on under the brake. `tmux_kill` works under the brake. Positive control: the same start
/// with no stop runs. The stop is sent once the start's session marker exists (made just
/// before the walk), so it lands inside the walk; without the re-check after registration the
/// session was recorded after the stop and ran on (`"ended":0` and a live `sleep`).
#[tokio::test]
async fn a_tmux_start_in_flight_when_the_brake_is_pulled_does_not_run_under_it() {
    let fx = Fixture::new();
    // A tree whose walk takes a while: the start's preparation is slow.
    for d in 0..300 {
        let dir = fx.root.join(format!("d{d}"));
        std::fs::create_dir(&dir).unwrap();
        for f in 0..250 {
            std::fs::write(dir.join(format!("f{f}")), b"").unwrap();
        }
    }
    let config = fx.fs_shell_config();
    let c = std::sync::Arc::new(Client::start(&fx, &config).await);
    let secs = unique_sleep();
    let command = format!("sleep {secs}");
    // The positive control: a start with no stop runs.
    c.ok("tmux_start", json!({ "command": command, "name": "control" })).await;
    assert!(
        wait_until(Duration::from_secs(10), || !host_processes(&["sleep", &secs]).is_empty()).await,
        "the control session's command never started"
    );
    c.ok("tmux_kill", json!({ "session": "control" })).await;
    assert!(
        wait_until(Duration::from_secs(5), || host_processes(&["sleep", &secs]).is_empty()).await
    );
    tokio::time::sleep(Duration::from_millis(2500)).await; // the walk is not reused

    // The race: the stop lands while the start walks.
    let start = {
        let c = c.clone();
        let command = command.clone();
        tokio::spawn(async move {
            c.call("tmux_start", json!({ "command": command, "name": "racer" })).await
        })
    };
    // The start has begun preparing once its session marker exists (made before the walk; its
    // record's name is the session's and its client's tag, `racer-TAG`); the stop goes straight
    // to the control socket then, as `hands stop` sends it.
    let records = fx.state.join("tmux/tools-shell");
    let marked = || {
        let names = std::fs::read_dir(&records).into_iter().flatten().flatten();
        names
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .any(|n| n.starts_with("racer-") && n.ends_with(".alive"))
    };
    assert!(wait_until(Duration::from_secs(30), marked).await, "the start never began preparing");
    let out = {
        use std::io::{BufRead, Write};
        let mut sock =
            std::os::unix::net::UnixStream::connect(fx.state.join("control.sock")).unwrap();
        sock.write_all(b"{\"op\":\"stop\"}\n").unwrap();
        let mut line = String::new();
        std::io::BufReader::new(sock).read_line(&mut line).unwrap();
        line
    };
    assert!(out.contains("\"stopped\":true"), "{out}");
    let r = tokio::time::timeout(Duration::from_secs(60), start).await.unwrap().unwrap();
    let said = text_of(&r);
    if r.is_error == Some(true) {
        assert!(said.contains("hands stop"), "{said}");
    } else {
        assert!(out.contains("\"ended\":1"), "the start ran but the stop did not end it: {out}");
    }
    // Whatever the order, nothing of it runs under the brake.
    assert!(
        wait_until(Duration::from_secs(5), || host_processes(&["sleep", &secs]).is_empty()).await,
        "a session started in flight runs on under the brake (start said: {said}; stop said: \
         {out})"
    );
    let listed = c.ok("tmux_list", json!({})).await;
    assert!(listed["sessions"].as_array().unwrap().is_empty(), "{listed}");
    // `tmux_kill` is not refused by the brake (here: no such session, not "hands stop").
    let msg = c.err("tmux_kill", json!({ "session": "racer" })).await;
    assert!(!msg.contains("hands stop"), "{msg}");
    hands_stop(&fx, &config, true).await;
    fx.assert_canary();
}

/// Issue 23.2 for `bash`: a start that passed the brake check and is still preparing (a slow
/// walk of the roots) when `hands stop` lands either finishes before the stop and is ended by
/// it, or sees the brake and refuses — never runs on under it. Several starts are sent a
/// little apart and the stop lands among them, so some are in their walk when it arrives.
/// Positive control: a command with no stop runs.
#[tokio::test]
async fn bash_starts_in_flight_when_the_brake_is_pulled_do_not_run_under_it() {
    let fx = Fixture::new();
    for d in 0..300 {
        let dir = fx.root.join(format!("d{d}"));
        std::fs::create_dir(&dir).unwrap();
        for f in 0..250 {
            std::fs::write(dir.join(format!("f{f}")), b"").unwrap();
        }
    }
    let config = fx.fs_shell_config();
    let c = std::sync::Arc::new(Client::start(&fx, &config).await);
    let r = c.ok("bash", json!({ "command": "echo control-ran" })).await;
    assert!(r["stdout"].as_str().unwrap_or_default().contains("control-ran"), "{r}");
    tokio::time::sleep(Duration::from_millis(2500)).await; // the walk is not reused
    let secs = unique_sleep();
    let starts: Vec<_> = (0..4u64)
        .map(|i| {
            let c = c.clone();
            let command = format!("sleep {secs}");
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(120 * i)).await;
                c.call("bash", json!({ "command": command, "timeout_secs": 600 })).await
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let out = {
        use std::io::{BufRead, Write};
        let mut sock =
            std::os::unix::net::UnixStream::connect(fx.state.join("control.sock")).unwrap();
        sock.write_all(b"{\"op\":\"stop\"}\n").unwrap();
        let mut line = String::new();
        std::io::BufReader::new(sock).read_line(&mut line).unwrap();
        line
    };
    assert!(out.contains("\"stopped\":true"), "{out}");
    for s in starts {
        let r = tokio::time::timeout(Duration::from_secs(60), s)
            .await
            .expect("a bash start in flight when the brake was pulled ran on under it")
            .unwrap();
        if r.is_error == Some(true) {
            assert!(text_of(&r).contains("hands stop"), "{}", text_of(&r));
        }
    }
    assert!(
        wait_until(Duration::from_secs(5), || host_processes(&["sleep", &secs]).is_empty()).await,
        "a command started in flight runs on under the brake (stop said: {out})"
    );
    let e = c.err("bash", json!({ "command": "echo after" })).await;
    assert!(e.contains("hands stop"), "{e}");
    hands_stop(&fx, &config, true).await;
    c.ok("bash", json!({ "command": "true" })).await;
    fx.assert_canary();
}
