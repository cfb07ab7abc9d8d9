//! The tmux tools through the real binary, real tmux and rmcp's client: sessions in the module's
//! sandbox and shared loopback, literal typing, exit status, kill leaving nothing behind, a
//! daemon restart, the user's own tmux server untouched, escapes from inside a pane, and the
//! one private loopback every command of a module shares.

use super::common::{Client, Era, Fixture, host_processes};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::time::{Duration, Instant};

fn shell_config(fx: &Fixture) -> PathBuf {
    fx.config(
        "[daemon]\nstate_dir = \"{state}\"\n\n[[builtins]]\nid = \"tools-shell\"\n\
         grants = [\"filesystem\", \"spawn\"]\n\
         filesystem = [{ path = \"{root}\", write = true }, { path = \"{home}\" }]\n\
         config = { trust = { external = \"allow\" } }\n",
    )
}

async fn start(fx: &Fixture) -> Client {
    Client::start_era(fx, &shell_config(fx), Era::Legacy).await
}

/// Reads a session until `pred` holds on its result (or a deadline passes); returns the last.
async fn read_until(c: &Client, session: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let start = Instant::now();
    loop {
        let r = c.ok("tmux_read", json!({ "session": session })).await;
        if pred(&r) || start.elapsed() > Duration::from_secs(15) {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn text(v: &Value) -> &str {
    v["text"].as_str().unwrap()
}

/// A number no other test uses, to find processes in the host's /proc.
fn unique() -> u32 {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    7000 + (std::process::id() % 500) * 1000 + nanos.subsec_micros() % 1000
}

/// A TCP port free on the host's loopback right now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[tokio::test]
async fn a_web_server_in_tmux_is_reachable_from_bash_and_not_from_the_host() {
    let fx = Fixture::new();
    fx.write("site/index.html", "hello from the sandbox\n");
    let c = start(&fx).await;
    let port = free_port();
    let started = c
        .ok(
            "tmux_start",
            json!({ "command": format!("python3 -m http.server {port} --bind 127.0.0.1"),
                    "cwd": "site", "name": "web" }),
        )
        .await;
    assert_eq!(started["session"], "web");
    // SPEC §5.6: the tier in every result of a command.
    assert!(started["containment"].as_str().unwrap().starts_with("full ("), "{started}");
    assert_eq!(started["state"], "running");
    let probe = format!(
        "for i in $(seq 50); do python3 -c 'import urllib.request,sys; \
         sys.stdout.write(urllib.request.urlopen(\"http://127.0.0.1:{port}/index.html\").read().decode())' \
         2>/dev/null && exit 0; sleep 0.1; done; exit 1"
    );
    let got = c.ok("bash", json!({ "command": probe })).await;
    assert_eq!(got["exit_code"], 0, "bash could not reach the tmux server: {got}");
    assert_eq!(got["stdout"], "hello from the sandbox\n");
    // The host's loopback does not have it.
    let host = std::net::TcpStream::connect_timeout(
        &format!("127.0.0.1:{port}").parse().unwrap(),
        Duration::from_millis(500),
    );
    assert!(host.is_err(), "the sandboxed server must not be reachable from the host");
    c.ok("tmux_kill", json!({ "session": "web" })).await;
}

#[tokio::test]
async fn an_ended_command_shows_its_output_and_exit_status() {
    let fx = Fixture::new();
    let c = start(&fx).await;
    c.ok("tmux_start", json!({ "command": "echo first; echo second; exit 3", "name": "e3" })).await;
    let r = read_until(&c, "e3", |r| r["ended"] == true).await;
    assert_eq!(r["ended"], true, "{r}");
    assert_eq!(r["exit_status"], 3, "{r}");
    assert_eq!(text(&r), "first\nsecond");
    let one = c.ok("tmux_read", json!({ "session": "e3", "lines": 1 })).await;
    assert_eq!(text(&one), "second");
    let listed = c.ok("tmux_list", json!({})).await;
    let s = &listed["sessions"][0];
    assert_eq!((s["name"].as_str(), s["state"].as_str()), (Some("e3"), Some("ended")));
    assert_eq!(s["exit_status"], 3);
    assert_eq!(s["cwd"], fx.root.to_str().unwrap());
    assert_eq!(s["command"], "echo first; echo second; exit 3");
    assert!(s["started"].as_u64().unwrap() > 1_700_000_000);
    for bad in [0, 5001] {
        let e = c.err("tmux_read", json!({ "session": "e3", "lines": bad })).await;
        assert!(e.contains("between 1 and 5000"), "{e}");
    }
    c.ok("tmux_kill", json!({ "session": "e3" })).await;
    assert_eq!(c.ok("tmux_list", json!({})).await["sessions"], json!([]));
}

#[tokio::test]
async fn a_command_that_reads_a_line_then_exits_shows_it_all_and_its_status() {
    // The pane's shell asks tmux for the cursor position on exit (so that tmux has drawn the
    // output before the pane dies): the question and its answer must not show, and input the
    // command already read must not be taken.
    let fx = Fixture::new();
    let c = start(&fx).await;
    c.ok("tmux_start", json!({ "command": "read x; echo \"got:$x\"; exit 4", "name": "rl" })).await;
    c.ok("tmux_send", json!({ "session": "rl", "text": "hello" })).await;
    let r = read_until(&c, "rl", |r| r["ended"] == true).await;
    assert_eq!((r["ended"].as_bool(), r["exit_status"].as_u64()), (Some(true), Some(4)), "{r}");
    assert_eq!(text(&r), "hello\ngot:hello", "{r}");
    c.ok("tmux_kill", json!({ "session": "rl" })).await;
}

#[tokio::test]
async fn a_command_that_execs_and_ends_at_once_shows_its_output_and_status() {
    // The pane's shell runs the command in a subshell, so an `exec` replaces that and the
    // shell's drain-on-exit still runs; its status is the command's.
    let fx = Fixture::new();
    let c = start(&fx).await;
    for (i, (cmd, out, status)) in
        [("exec printf 'fast\\n'", "fast", 0), ("exec sh -c 'echo gone; exit 6'", "gone", 6)]
            .into_iter()
            .enumerate()
    {
        let name = format!("ex{i}");
        c.ok("tmux_start", json!({ "command": cmd, "name": name })).await;
        let r = read_until(&c, &name, |r| r["ended"] == true).await;
        assert_eq!(r["exit_status"], status, "{cmd}: {r}");
        assert_eq!(text(&r), out, "{cmd}: {r}");
        c.ok("tmux_kill", json!({ "session": name })).await;
    }
}

#[tokio::test]
async fn send_types_text_literally_including_tmux_syntax() {
    let fx = Fixture::new();
    let c = start(&fx).await;
    c.ok("tmux_start", json!({ "command": "cat", "name": "cat" })).await;
    let tricky = "C-c ; #{pane_id} $HOME 'q' \"d\" \\; end;";
    let sent = c.ok("tmux_send", json!({ "session": "cat", "text": tricky })).await;
    assert!(sent["containment"].as_str().unwrap().starts_with("full ("), "{sent}");
    assert_eq!(sent["sent_chars"], tricky.chars().count());
    // The terminal echoes the line, then cat prints it again.
    let r = read_until(&c, "cat", |r| text(r).matches(tricky).count() >= 2).await;
    assert_eq!(text(&r).matches(tricky).count(), 2, "{}", text(&r));
    assert_eq!(r["ended"], false, "C-c must not have been sent as a key: {r}");
    // Without Enter the text waits on the line.
    c.ok("tmux_send", json!({ "session": "cat", "text": "-n partial", "enter": false })).await;
    let r = read_until(&c, "cat", |r| text(r).ends_with("-n partial")).await;
    assert!(text(&r).ends_with("-n partial"), "{}", text(&r));
    assert_eq!(text(&r).matches("-n partial").count(), 1);
    c.ok("tmux_kill", json!({ "session": "cat" })).await;
}

#[tokio::test]
async fn names_are_validated_and_bad_commands_are_reported() {
    let fx = Fixture::new();
    let c = start(&fx).await;
    for bad in ["a:b", "a.b", "-t", "x y", "=s", ""] {
        let e = c.err("tmux_start", json!({ "command": "true", "name": bad })).await;
        assert!(e.contains("invalid session name"), "{bad:?}: {e}");
        let e = c.err("tmux_read", json!({ "session": bad })).await;
        assert!(e.contains("invalid session name"), "{bad:?}: {e}");
    }
    let e =
        c.err("tmux_start", json!({ "command": "no-such-program-hands --x", "name": "bad" })).await;
    assert!(e.contains("did not start") && e.contains("127"), "{e}");
    assert!(e.contains("no such command"), "the reason is given: {e}");
    assert_eq!(c.ok("tmux_list", json!({})).await["sessions"], json!([]));
    let e = c.err("tmux_read", json!({ "session": "nothing" })).await;
    assert!(e.contains("no tmux session"), "{e}");
    let e = c.err("tmux_start", json!({ "command": "true", "cwd": "/etc" })).await;
    assert!(e.contains("bad cwd"), "{e}");
    // Default names, and a duplicate refused.
    let a = c.ok("tmux_start", json!({ "command": "sleep 30" })).await;
    assert_eq!(a["session"], "s1");
    let b = c.ok("tmux_start", json!({ "command": "sleep 30" })).await;
    assert_eq!(b["session"], "s2");
    let e = c.err("tmux_start", json!({ "command": "true", "name": "s1" })).await;
    assert!(e.contains("already exists"), "{e}");
    for s in ["s1", "s2"] {
        c.ok("tmux_kill", json!({ "session": s })).await;
    }
}

#[tokio::test]
async fn kill_leaves_no_process_behind_including_a_setsid_child() {
    let fx = Fixture::new();
    let c = start(&fx).await;
    let pane = format!("{}.5", unique());
    let child = format!("{}.25", unique());
    let cmd = format!("setsid sleep {child} & disown; sleep {pane}");
    c.ok("tmux_start", json!({ "command": cmd, "name": "tree" })).await;
    let seen = async {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            if !host_processes(&["sleep", &child]).is_empty()
                && !host_processes(&["sleep", &pane]).is_empty()
            {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    };
    assert!(seen.await, "both sleeps should be running on the host");
    let k = c.ok("tmux_kill", json!({ "session": "tree" })).await;
    assert_eq!(k["killed"], true);
    assert!(host_processes(&["sleep", &pane]).is_empty(), "the pane's command survived");
    assert!(host_processes(&["sleep", &child]).is_empty(), "the setsid child survived");
    let e = c.err("tmux_read", json!({ "session": "tree" })).await;
    assert!(e.contains("no tmux session"), "{e}");
}

#[tokio::test]
async fn sessions_survive_a_daemon_restart() {
    let fx = Fixture::new();
    let c = start(&fx).await;
    c.ok("tmux_start", json!({ "command": "echo before-restart; cat", "name": "keep" })).await;
    read_until(&c, "keep", |r| text(r).contains("before-restart")).await;
    fx.write("site/index.html", "still here\n");
    let port = free_port();
    let serve = format!("python3 -m http.server {port} --bind 127.0.0.1");
    c.ok("tmux_start", json!({ "command": serve, "cwd": "site", "name": "web" })).await;
    c.stop().await;
    // Wait until the daemon process is gone.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let c = start(&fx).await;
    let listed = c.ok("tmux_list", json!({})).await;
    assert_eq!(listed["sessions"][0]["name"], "keep", "{listed}");
    assert_eq!(listed["sessions"][0]["state"], "running");
    assert_eq!(listed["sessions"][1]["name"], "web", "{listed}");
    // The private loopback survived with the server: a new bash call reaches it.
    let probe = format!(
        "for i in $(seq 50); do python3 -c 'import urllib.request,sys; \
         sys.stdout.write(urllib.request.urlopen(\"http://127.0.0.1:{port}/\").read().decode())' \
         2>/dev/null && exit 0; sleep 0.1; done; exit 1"
    );
    let got = c.ok("bash", json!({ "command": probe })).await;
    assert_eq!(got["stdout"], "still here\n", "{got}");
    c.ok("tmux_kill", json!({ "session": "web" })).await;
    c.ok("tmux_send", json!({ "session": "keep", "text": "after-restart" })).await;
    let r = read_until(&c, "keep", |r| text(r).matches("after-restart").count() >= 2).await;
    assert!(text(&r).contains("before-restart"), "{}", text(&r));
    assert_eq!(text(&r).matches("after-restart").count(), 2, "{}", text(&r));
    c.ok("tmux_kill", json!({ "session": "keep" })).await;
}

#[tokio::test]
async fn the_users_own_tmux_server_is_not_seen_or_touched() {
    let fx = Fixture::new();
    // The user's server on the default socket of its own TMUX_TMPDIR.
    let user_tmp = fx.dir.path().join("user-tmux");
    std::fs::create_dir_all(&user_tmp).unwrap();
    let user_tmux = |args: &[&str]| {
        std::process::Command::new("tmux")
            .args(args)
            .env("TMUX_TMPDIR", &user_tmp)
            .env_remove("TMUX")
            .output()
            .unwrap()
    };
    let made = user_tmux(&["-f", "/dev/null", "new-session", "-d", "-s", "mine", "sleep 120"]);
    assert!(made.status.success(), "{made:?}");
    let c = Client::start_with_env(
        &fx,
        &shell_config(&fx),
        Era::Legacy,
        &[("TMUX_TMPDIR", user_tmp.to_str().unwrap())],
    )
    .await;
    c.ok("tmux_start", json!({ "command": "sleep 60", "name": "ours" })).await;
    let listed = c.ok("tmux_list", json!({})).await;
    let names: Vec<&str> = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["ours"]);
    let e = c.err("tmux_read", json!({ "session": "mine" })).await;
    assert!(e.contains("no tmux session"), "{e}");
    let e = c.err("tmux_kill", json!({ "session": "mine" })).await;
    assert!(e.contains("no tmux session"), "{e}");
    // Nor from inside the sandbox: the user's socket folder is not there.
    let inside = c
        .ok("bash", json!({ "command": format!("ls {} 2>&1; tmux ls 2>&1", user_tmp.display()) }))
        .await;
    assert!(!inside["stdout"].as_str().unwrap().contains("mine"), "{inside}");
    c.ok("tmux_kill", json!({ "session": "ours" })).await;
    let still = user_tmux(&["list-sessions", "-F", "#{session_name}"]);
    assert_eq!(String::from_utf8_lossy(&still.stdout).trim(), "mine");
    // `hands stop` ends this daemon's sessions, and only those.
    let marker = format!("{}.75", unique());
    c.ok("tmux_start", json!({ "command": format!("sleep {marker}"), "name": "braked" })).await;
    let start = Instant::now();
    while host_processes(&["sleep", &marker]).is_empty() && start.elapsed().as_secs() < 10 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!host_processes(&["sleep", &marker]).is_empty(), "the session's command runs");
    let config = shell_config(&fx);
    let stop = fx.std_command(&["stop", "--config", config.to_str().unwrap()]).output().unwrap();
    assert!(stop.status.success(), "{stop:?}");
    assert!(host_processes(&["sleep", &marker]).is_empty(), "the session survived hands stop");
    assert_eq!(c.ok("tmux_list", json!({})).await["sessions"], json!([]));
    let e = c.err("tmux_start", json!({ "command": "true" })).await;
    assert!(e.contains("hands stop"), "{e}");
    let still = user_tmux(&["list-sessions", "-F", "#{session_name}"]);
    assert_eq!(String::from_utf8_lossy(&still.stdout).trim(), "mine", "the user's session");
    let release =
        fx.std_command(&["stop", "--release", "--config", config.to_str().unwrap()]).output();
    assert!(release.unwrap().status.success());
    c.ok("tmux_start", json!({ "command": "true", "name": "after" })).await;
    c.ok("tmux_kill", json!({ "session": "after" })).await;
    user_tmux(&["kill-server"]);
}

#[tokio::test]
async fn escapes_from_inside_a_pane_fail() {
    let fx = Fixture::new();
    let c = start(&fx).await;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    std::fs::write(fx.home.join(".netrc"), "machine x password hunter2\n").unwrap();
    let outside = fx.outside.join("pwned");
    let script = format!(
        "echo inside > ok.txt && echo root-write-ok; \
         (echo x > {out}) 2>/dev/null && echo OUTSIDE-WRITTEN || echo outside-refused; \
         (cat {home}/.netrc 2>/dev/null | grep -q hunter2) && echo SECRET-READ || echo secret-masked; \
         python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 1)' \
           2>/dev/null && echo HOST-LOOPBACK || echo loopback-refused; \
         echo done",
        out = outside.display(),
        home = fx.home.display(),
    );
    c.ok("tmux_start", json!({ "command": script, "name": "esc" })).await;
    let r = read_until(&c, "esc", |r| r["ended"] == true).await;
    let t = text(&r);
    assert!(t.contains("done"), "{t}");
    // Positive control: the root is writable from the pane.
    assert!(t.contains("root-write-ok"), "{t}");
    assert_eq!(std::fs::read_to_string(fx.root.join("ok.txt")).unwrap(), "inside\n");
    assert!(t.contains("outside-refused") && !t.contains("OUTSIDE-WRITTEN"), "{t}");
    assert!(t.contains("secret-masked") && !t.contains("SECRET-READ"), "{t}");
    assert!(t.contains("loopback-refused") && !t.contains("HOST-LOOPBACK"), "{t}");
    assert!(listener.accept().is_err(), "nothing reached the host listener");
    assert!(!outside.exists());
    fx.assert_canary();
    c.ok("tmux_kill", json!({ "session": "esc" })).await;
}

#[tokio::test]
async fn two_bash_calls_share_one_loopback() {
    let fx = Fixture::new();
    let c = std::sync::Arc::new(start(&fx).await);
    let port = free_port();
    // One call listens (and answers once); a second, concurrent call connects to it.
    let server = format!(
        "python3 -c 'import socket; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, \
         socket.SO_REUSEADDR, 1); s.bind((\"127.0.0.1\", {port})); s.listen(); s.settimeout(20); \
         c,_=s.accept(); c.sendall(b\"shared-loopback\"); c.close()'"
    );
    let listening = {
        let c = c.clone();
        tokio::spawn(async move { c.ok("bash", json!({ "command": server })).await })
    };
    let client = format!(
        "for i in $(seq 100); do python3 -c 'import socket,sys; \
         sys.stdout.write(socket.create_connection((\"127.0.0.1\", {port}), 1).recv(64).decode())' \
         2>/dev/null && exit 0; sleep 0.1; done; exit 1"
    );
    let got = c.ok("bash", json!({ "command": client })).await;
    assert_eq!(got["stdout"], "shared-loopback", "{got}");
    assert_eq!(listening.await.unwrap()["exit_code"], 0);
    // That the host cannot reach this loopback is shown with a long-lived listener in
    // a_web_server_in_tmux_is_reachable_from_bash_and_not_from_the_host.
}

#[tokio::test]
async fn a_killed_daemon_takes_its_commands_along_but_not_its_sessions() {
    let fx = Fixture::new();
    let config = shell_config(&fx);
    let c = std::sync::Arc::new(start(&fx).await);
    let session_marker = format!("{}.125", unique());
    c.ok("tmux_start", json!({ "command": format!("sleep {session_marker}"), "name": "lives" }))
        .await;
    let bash_marker = format!("{}.625", unique());
    let running = {
        let c = c.clone();
        let cmd = format!("setsid sleep {bash_marker} & sleep {bash_marker}");
        tokio::spawn(async move { c.call("bash", json!({ "command": cmd })).await })
    };
    let start_t = Instant::now();
    while host_processes(&["sleep", &bash_marker]).len() < 2 && start_t.elapsed().as_secs() < 10 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(host_processes(&["sleep", &bash_marker]).len(), 2, "both sleeps run");
    let daemon = host_processes(&[
        env!("CARGO_BIN_EXE_hands"),
        "serve",
        "--config",
        config.to_str().unwrap(),
    ]);
    assert_eq!(daemon.len(), 1, "one daemon");
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(daemon[0] as i32).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    let start_t = Instant::now();
    while !host_processes(&["sleep", &bash_marker]).is_empty() && start_t.elapsed().as_secs() < 10 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(host_processes(&["sleep", &bash_marker]).is_empty(), "a command outlived its daemon");
    running.abort();
    // The session is meant to outlive the daemon, and a new daemon finds it.
    assert!(!host_processes(&["sleep", &session_marker]).is_empty(), "the session died");
    let c = start(&fx).await;
    assert_eq!(c.ok("tmux_list", json!({})).await["sessions"][0]["name"], "lives");
    c.ok("tmux_kill", json!({ "session": "lives" })).await;
    assert!(host_processes(&["sleep", &session_marker]).is_empty());
}

/// A secret file created after a session started is masked in the running session before the
/// next `tmux_send` types anything (src/sandbox/remask.rs), in the session's working folder and
/// below it, and stays masked through the attacks a pane can try (chmod, rm, umount, renaming
/// its folder). Positive control: an ordinary file created at the same time is read; the
/// secret on the host is untouched; the canary outside the roots too.
#[tokio::test]
async fn a_secret_file_created_after_a_session_started_is_masked_before_the_next_send() {
    let fx = Fixture::new();
    fx.write("app/early.txt", "early\n");
    let c = start(&fx).await;
    c.ok("tmux_start", json!({ "command": "bash --norc", "cwd": "app", "name": "sec" })).await;
    let secret = format!("SECRET=canary-{}", unique());
    fx.write("app/.env", &format!("{secret}\n"));
    fx.write("app/conf/.env", &format!("{secret}-deep\n"));
    fx.write("app/later.txt", "visible later\n");
    // The walk of the roots is reused for 2 s (README): past that, the next send sees them.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let sent = c
        .ok(
            "tmux_send",
            json!({ "session": "sec", "text": "cat .env conf/.env later.txt; echo first-$?" }),
        )
        .await;
    assert_eq!(sent["session"], "sec");
    let r = read_until(&c, "sec", |r| text(r).contains("first-")).await;
    let shown = text(&r);
    assert!(shown.contains("first-1"), "{shown}");
    assert!(shown.contains("visible later"), "the ordinary file was not read: {shown}");
    assert!(shown.contains(".env: Permission denied"), "{shown}");
    assert!(shown.contains("conf/.env: Permission denied"), "{shown}");
    assert!(!shown.contains("canary-"), "a secret created after the start was read: {shown}");

    // What a pane can try against the mask.
    let attacks = "chmod 644 .env; rm -f .env; umount .env; mv conf conf2; \
                   cat .env conf2/.env; echo second-$?";
    c.ok("tmux_send", json!({ "session": "sec", "text": attacks })).await;
    let r = read_until(&c, "sec", |r| text(r).contains("second-")).await;
    let shown = text(&r);
    assert!(shown.contains("second-1"), "{shown}");
    assert!(!shown.contains("canary-"), "the mask was got round: {shown}");
    assert_eq!(std::fs::read_to_string(fx.root.join("app/.env")).unwrap(), format!("{secret}\n"));
    assert!(fx.root.join("app/conf2/.env").exists(), "the rename is the pane's to make");
    c.ok("tmux_kill", json!({ "session": "sec" })).await;
    fx.assert_canary();
}

/// `hands doctor` looks for tmux where tools-shell's sandbox does (the module's `path`) and for
/// git on its own PATH, and warns, saying which package to install or upgrade, when either is
/// missing, older than hands can use (tmux 3.2, git 2.30) or of a version it cannot read. A
/// tmux inside a writable root is not run at all.
#[test]
fn doctor_warns_of_a_tmux_or_git_that_is_missing_too_old_or_unreadable() {
    use std::os::unix::fs::PermissionsExt;
    let fx = Fixture::new();
    let bin = fx.root.parent().unwrap().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let system = "/usr/local/bin:/usr/bin:/bin";
    // A stand-in in `dir` that prints `line` for any flag, and leaves a mark when it runs.
    let fake = |dir: &std::path::Path, name: &str, line: &str| {
        let p = dir.join(name);
        let mark = fx.root.parent().unwrap().join(format!("{name}-ran"));
        std::fs::write(&p, format!("#!/bin/sh\n: > '{}'\necho '{line}'\n", mark.display()))
            .unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    // tools-shell with `path`, tools-git; doctor run with `env_path` as its PATH.
    let doctor = |path: &str, env_path: &str| {
        let config = fx.config(&format!(
            "[daemon]\nstate_dir = \"{{state}}\"\n\n\
             [[builtins]]\nid = \"tools-shell\"\ngrants = [\"filesystem\", \"spawn\"]\n\
             filesystem = [{{ path = \"{{root}}\", write = true }}]\n\
             config = {{ path = \"{path}\" }}\n\n\
             [[builtins]]\nid = \"tools-git\"\ngrants = [\"filesystem\", \"spawn\"]\n\
             filesystem = [{{ path = \"{{root}}\", write = true }}]\n"
        ));
        let out = fx
            .std_command(&["doctor", "--config", config.to_str().unwrap()])
            .env("PATH", env_path)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let warning = |text: &str, needle: &str| -> String {
        text.lines()
            .find(|l| l.starts_with("warning: ") && l.contains(needle))
            .unwrap_or_else(|| panic!("no warning with {needle:?}:\n{text}"))
            .to_string()
    };
    let with_fakes = format!("{}:{system}", bin.display());

    // Too old: tmux 2.9 first on the module's path, git 2.20 first on doctor's PATH.
    fake(&bin, "tmux", "tmux 2.9");
    fake(&bin, "git", "git version 2.20.1");
    let text = doctor(&with_fakes, &with_fakes);
    let w = warning(&text, "\"tmux 2.9\"");
    assert!(w.starts_with("warning: tools-shell: "), "{w}");
    assert!(w.contains("older than 3.2: upgrade the `tmux` package"), "{w}");
    let w = warning(&text, "\"git version 2.20.1\"");
    assert!(w.starts_with("warning: tools-git: "), "{w}");
    assert!(w.contains("older than 2.30: upgrade the `git` package"), "{w}");

    // Versions it cannot read are warnings too.
    fake(&bin, "tmux", "tmux master");
    fake(&bin, "git", "");
    let text = doctor(&with_fakes, &with_fakes);
    let w = warning(&text, "\"tmux master\"");
    assert!(w.starts_with("warning: tools-shell: cannot tell the version of "), "{w}");
    assert!(w.contains("the `tmux` package"), "{w}");
    assert!(
        text.lines().any(|l| l.starts_with("warning: tools-git: cannot tell the version")
            && l.contains("the `git` package")),
        "{text}"
    );

    // Missing: a PATH holding only what the sandbox self-test runs.
    for name in ["tmux", "git"] {
        std::fs::remove_file(bin.join(name)).unwrap();
    }
    for name in ["bash", "grep", "touch", "chmod"] {
        let real = system.split(':').map(|d| PathBuf::from(d).join(name)).find(|p| p.exists());
        std::os::unix::fs::symlink(real.unwrap(), bin.join(name)).unwrap();
    }
    let only = bin.display().to_string();
    let text = doctor(&only, &only);
    let w = warning(&text, "tmux is not on tools-shell's PATH");
    assert!(w.contains("install the `tmux` package (3.2 or newer)"), "{w}");
    let w = warning(&text, "git is not on PATH");
    assert!(w.starts_with("warning: tools-git: "), "{w}");
    assert!(w.contains("install the `git` package (2.30 or newer)"), "{w}");
    assert!(text.contains("  tmux: not found on tools-shell's PATH"), "{text}");

    // A tmux in a writable root (where a command could have put it) is not run.
    let planted = fx.root.join("bin");
    std::fs::create_dir(&planted).unwrap();
    let ran = fx.root.parent().unwrap().join("tmux-ran");
    std::fs::remove_file(&ran).unwrap();
    fake(&planted, "tmux", "tmux 3.9");
    let text = doctor(&format!("{}:{system}", planted.display()), system);
    let w = warning(&text, "doctor does not run it");
    assert!(w.starts_with("warning: tools-shell: cannot tell the version of "), "{w}");
    assert!(w.contains("`tmux` package"), "{w}");
    assert!(!ran.exists(), "doctor ran a tmux from a writable root");

    // The paired control: the machine's own tmux and git draw no such warning, and their
    // versions are shown.
    let real_path = std::env::var("PATH").unwrap();
    let text = doctor(system, &real_path);
    assert!(
        !text.lines().any(|l| l.starts_with("warning: ")
            && (l.contains("`tmux` package") || l.contains("`git` package"))),
        "{text}"
    );
    assert!(text.contains("  tmux: tmux ") && text.contains("  git: git version "), "{text}");
    fx.assert_canary();
}
