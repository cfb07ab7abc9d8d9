//! The tmux tools through the real binary, real tmux and rmcp's client: sessions in the module's
//! sandbox and shared loopback, literal typing, exit status, kill leaving nothing behind, a
//! daemon restart, the user's own tmux server untouched, escapes from inside a pane, and the
//! one private loopback every command of a module shares.

mod lifetime;
mod sockets;
mod walls;

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

/// [`shell_config`] with `keep_sessions = true`: sessions outlive the daemon.
fn kept_config(fx: &Fixture) -> PathBuf {
    fx.config(
        "[daemon]\nstate_dir = \"{state}\"\n\n[[builtins]]\nid = \"tools-shell\"\n\
         grants = [\"filesystem\", \"spawn\"]\n\
         filesystem = [{ path = \"{root}\", write = true }, { path = \"{home}\" }]\n\
         config = { trust = { external = \"allow\" }, keep_sessions = true }\n",
    )
}

async fn start_kept(fx: &Fixture) -> Client {
    Client::start_era(fx, &kept_config(fx), Era::Legacy).await
}

/// Reads a session until `pred` holds on its result (or a deadline passes); returns the last.
pub(super) async fn read_until<H: rmcp::ClientHandler>(
    c: &Client<H>,
    session: &str,
    pred: impl Fn(&Value) -> bool,
) -> Value {
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
async fn kept_sessions_survive_a_daemon_restart() {
    let fx = Fixture::new();
    let c = start_kept(&fx).await;
    c.ok("tmux_start", json!({ "command": "echo before-restart; cat", "name": "keep" })).await;
    read_until(&c, "keep", |r| text(r).contains("before-restart")).await;
    fx.write("site/index.html", "still here\n");
    let port = free_port();
    let serve = format!("python3 -m http.server {port} --bind 127.0.0.1");
    c.ok("tmux_start", json!({ "command": serve, "cwd": "site", "name": "web" })).await;
    c.stop().await;
    // Wait until the daemon process is gone.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let c = start_kept(&fx).await;
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
async fn a_killed_daemon_takes_its_commands_along_but_not_its_kept_sessions() {
    let fx = Fixture::new();
    let config = kept_config(&fx);
    let c = std::sync::Arc::new(start_kept(&fx).await);
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
        super::common::hands_bin().to_str().unwrap(),
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
    // The session is kept (`keep_sessions`): it outlives the daemon, and a new daemon finds it.
    assert!(!host_processes(&["sleep", &session_marker]).is_empty(), "the session died");
    let c = start_kept(&fx).await;
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
    // The typed line itself holds `first-$?`: wait for the output line, not the echo.
    let r = read_until(&c, "sec", |r| text(r).lines().any(|l| l.starts_with("first-"))).await;
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
    let r = read_until(&c, "sec", |r| text(r).lines().any(|l| l.starts_with("second-"))).await;
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
/// missing, older than hands can use (tmux 3.2, git 2.30), of a version it cannot read, or
/// does not answer. The version flag runs in a sandbox: a stand-in that tries to write outside
/// it is read but leaves no mark. A tmux inside a writable root is not run at all.
#[test]
fn doctor_warns_of_a_tmux_or_git_that_is_missing_too_old_or_unreadable() {
    use std::os::unix::fs::PermissionsExt;
    let fx = Fixture::new();
    let bin = fx.root.parent().unwrap().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let system = "/usr/local/bin:/usr/bin:/bin";
    // A stand-in in `dir` that tries to leave a mark beside the roots (outside the sandbox
    // its version flag runs in) and prints `line` for any flag.
    let marks = |name: &str| fx.root.parent().unwrap().join(format!("{name}-ran"));
    let fake = |dir: &std::path::Path, name: &str, line: &str| {
        let p = dir.join(name);
        let script =
            format!("#!/bin/sh\ntouch '{}' 2>/dev/null\necho '{line}'\n", marks(name).display());
        std::fs::write(&p, script).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    let no_marks = || {
        for name in ["tmux", "git"] {
            assert!(!marks(name).exists(), "a version flag wrote outside its sandbox: {name}");
        }
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
    // Both ran (their lines were read) and neither could write beside the roots.
    no_marks();

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

    // A program that does not answer is killed, and said so.
    // A sleep of its own length (over the 30 s limit): another run of this test on the machine
    // has another, so each looks for its own.
    let secs = super::common::unique_sleep();
    std::fs::write(bin.join("git"), format!("#!/bin/sh\nexec sleep {secs}\n")).unwrap();
    let text = doctor(&with_fakes, &with_fakes);
    let w = warning(&text, "`git --version` did not answer within 30 s and was killed");
    assert!(w.starts_with("warning: tools-git: cannot tell the version of "), "{w}");
    assert!(text.contains("  git: version not read: `git --version` did not answer"), "{text}");
    // Its sandbox dies with the killed launcher (the init's parent-death signal), soon after.
    let gone = (0..40).any(|_| {
        let own = format!("^sleep {}$", secs.replace('.', "\\."));
        let left = std::process::Command::new("pgrep").args(["-f", &own]).output();
        std::thread::sleep(std::time::Duration::from_millis(50));
        left.unwrap().stdout.is_empty()
    });
    assert!(gone, "the hung version flag outlived doctor");
    no_marks();

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
    fake(&planted, "tmux", "tmux 3.9");
    let text = doctor(&format!("{}:{system}", planted.display()), system);
    let w = warning(&text, "doctor does not run it");
    assert!(w.starts_with("warning: tools-shell: cannot tell the version of "), "{w}");
    assert!(w.contains("`tmux` package"), "{w}");
    assert!(!text.contains("tmux 3.9"), "doctor ran a tmux from a writable root:\n{text}");
    assert!(text.contains("(not run: in a writable root)"), "{text}");

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

/// Lines of `text` that are numbers, in order.
fn numbers(text: &str) -> Vec<u64> {
    text.lines().filter_map(|l| l.trim().parse().ok()).collect()
}

/// The curl call that fetches `path` from the shared loopback, inside the sandbox.
fn curl(port: u16, path: &str) -> Value {
    json!({ "command": format!("curl -sS --max-time 5 http://127.0.0.1:{port}/{path}") })
}

/// Issue 21: a server is known to be up in one call — by its port, or by what it prints — and
/// is then reached with `bash curl` on the module's shared loopback; `ports` names the
/// session's own listeners only (the other session's port is not among them).
#[tokio::test]
async fn a_server_started_with_ready_is_up_when_tmux_start_returns() {
    let fx = Fixture::new();
    fx.write("site/index.html", "ready and serving\n");
    let c = start(&fx).await;
    let (p1, p2) = (free_port(), free_port());
    let serve = |port: u16| format!("python3 -m http.server {port} --bind 127.0.0.1");
    let by_port = c
        .ok(
            "tmux_start",
            json!({ "command": serve(p1), "cwd": "site", "name": "byport",
                    "ready": { "port": p1 }, "timeout_secs": 30 }),
        )
        .await;
    assert_eq!((by_port["ready"].as_bool(), by_port["ended"].as_bool()), (Some(true), Some(false)));
    assert_eq!(by_port["timed_out"], false, "{by_port}");
    assert_eq!(by_port["ports"], json!([p1]), "{by_port}");
    assert!(by_port["cursor"].is_u64(), "{by_port}");
    // No retry loop: it is up now.
    let got = c.ok("bash", curl(p1, "index.html")).await;
    assert_eq!(got["stdout"], "ready and serving\n", "{got}");

    let by_pattern = c
        .ok(
            "tmux_start",
            json!({ "command": serve(p2), "cwd": "site", "name": "bypattern",
                    "ready": { "pattern": format!("^Serving HTTP on .* port {p2}") } }),
        )
        .await;
    assert_eq!(by_pattern["ready"], true, "{by_pattern}");
    assert!(by_pattern["text"].as_str().unwrap().contains("Serving HTTP"), "{by_pattern}");
    assert_eq!(by_pattern["ports"], json!([p2]), "only this session's listener: {by_pattern}");
    let got = c.ok("bash", curl(p2, "index.html")).await;
    assert_eq!(got["stdout"], "ready and serving\n", "{got}");
    // The request shows in the server's log, after the cursor tmux_start returned.
    let r = read_until(&c, "bypattern", |r| text(r).contains("GET /index.html")).await;
    assert!(text(&r).contains("GET /index.html"), "{r}");
    let since =
        c.ok("tmux_read", json!({ "session": "bypattern", "since": by_pattern["cursor"] })).await;
    assert!(text(&since).contains("\"GET /index.html HTTP/1.1\" 200"), "{since}");
    assert!(!text(&since).contains("Serving HTTP"), "only what came after the cursor: {since}");
    for s in ["byport", "bypattern"] {
        c.ok("tmux_kill", json!({ "session": s })).await;
    }
}

/// A server that dies on start is reported as such — `ended`, its exit status and its last
/// lines, not an error and not "ready" — whether it dies at once or after a moment.
#[tokio::test]
async fn a_server_that_exits_on_start_is_reported_as_ended() {
    let fx = Fixture::new();
    let c = start(&fx).await;
    for (name, cmd) in [
        ("now", "python3 -c 'import sys; print(\"starting\"); sys.exit(\"bad config: no port\")'"),
        ("later", "echo starting; sleep 1.5; echo 'bad config: no port' >&2; exit 1"),
    ] {
        let r = c
            .ok(
                "tmux_start",
                json!({ "command": cmd, "name": name, "ready": { "port": free_port() } }),
            )
            .await;
        assert_eq!((r["ready"].as_bool(), r["ended"].as_bool()), (Some(false), Some(true)), "{r}");
        assert_eq!((r["timed_out"].as_bool(), r["exit_status"].as_i64()), (Some(false), Some(1)));
        assert_eq!(r["state"], "ended", "{r}");
        let t = r["text"].as_str().unwrap();
        assert!(t.contains("starting") && t.contains("bad config: no port"), "{name}: {r}");
        assert!(r["waited_ms"].as_u64().unwrap() < 10_000, "{r}");
        c.ok("tmux_kill", json!({ "session": name })).await;
    }
}

/// A REPL in one call per question: `wait` returns what the pane printed after the typed
/// line — the answer — without the echo of the question or the screen before it.
#[tokio::test]
async fn a_repl_is_driven_with_wait_and_returns_just_the_answer() {
    let fx = Fixture::new();
    let c = start(&fx).await;
    let py = c
        .ok(
            "tmux_start",
            json!({ "command": "PYTHON_BASIC_REPL=1 python3 -q -i", "name": "py",
                    "ready": { "pattern": ">>> $" } }),
        )
        .await;
    assert_eq!(py["ready"], true, "{py}");
    let r = c
        .ok(
            "tmux_send",
            json!({ "session": "py", "text": "print(6 * 7)", "wait": { "pattern": ">>> $" } }),
        )
        .await;
    assert_eq!((r["ready"].as_bool(), r["timed_out"].as_bool()), (Some(true), Some(false)));
    assert_eq!(r["text"], "42\n>>>", "{r}");
    assert!(r["cursor"].as_u64() > r["sent_at"].as_u64(), "{r}");
    // The pattern is not found in the echo of the typed text itself.
    let r = c
        .ok(
            "tmux_send",
            json!({ "session": "py", "text": "import time; time.sleep(0.5); print('d' + 'one')",
                    "wait": { "pattern": "done" } }),
        )
        .await;
    assert_eq!(r["text"].as_str().unwrap().lines().next(), Some("done"), "{r}");
    assert!(r["waited_ms"].as_u64().unwrap() >= 400, "the echo does not match: {r}");

    c.ok("tmux_start", json!({ "command": "bc -q", "name": "bc" })).await;
    let r = c
        .ok("tmux_send", json!({ "session": "bc", "text": "6*7", "wait": { "quiet_ms": 1000 } }))
        .await;
    assert_eq!((r["text"].as_str(), r["ready"].as_bool()), (Some("42"), Some(true)), "{r}");
    let r = c
        .ok(
            "tmux_send",
            json!({ "session": "bc", "text": "2^64", "wait": { "pattern": "^[0-9]+$" } }),
        )
        .await;
    assert_eq!(r["text"], "18446744073709551616", "{r}");
    // The session's command ending is seen too: `quit` ends bc.
    let r = c
        .ok("tmux_send", json!({ "session": "bc", "text": "quit", "wait": { "exit": true } }))
        .await;
    assert_eq!((r["ended"].as_bool(), r["exit_status"].as_i64()), (Some(true), Some(0)), "{r}");
    for s in ["py", "bc"] {
        c.ok("tmux_kill", json!({ "session": s })).await;
    }
}

/// `wait: {exit: true}` in a pane running bash: returns when the typed command ends (known by
/// the marks bash prints through PS0/PROMPT_COMMAND), with its exit status and its output
/// only — not the echo, not the next prompt.
#[tokio::test]
async fn a_typed_command_is_waited_for_until_it_exits() {
    let fx = Fixture::new();
    let c = start(&fx).await;
    c.ok(
        "tmux_start",
        json!({ "command": "bash --norc -i", "name": "sh", "ready": { "quiet_ms": 300 } }),
    )
    .await;
    let r = c
        .ok(
            "tmux_send",
            json!({ "session": "sh", "text": "sleep 1; echo slow; (exit 3)", "wait": { "exit": true } }),
        )
        .await;
    assert_eq!((r["ready"].as_bool(), r["exit_status"].as_i64()), (Some(true), Some(3)), "{r}");
    assert_eq!(r["text"], "slow", "{r}");
    assert!(r["waited_ms"].as_u64().unwrap() >= 900, "{r}");
    assert_eq!(r["ended"], false, "the shell goes on: {r}");
    let r = c
        .ok(
            "tmux_send",
            json!({ "session": "sh", "text": "echo a; echo b", "wait": { "exit": true } }),
        )
        .await;
    assert_eq!((r["text"].as_str(), r["exit_status"].as_i64()), (Some("a\nb"), Some(0)), "{r}");
    // Without wait: nothing to show yet, and the cursor is where the typed text begins.
    let r = c.ok("tmux_send", json!({ "session": "sh", "text": "echo later" })).await;
    assert_eq!((r["text"].as_str(), r.get("ready")), (Some(""), None), "{r}");
    assert_eq!(r["cursor"], r["sent_at"]);
    let got = read_until(&c, "sh", |r| text(r).matches("later").count() >= 2).await;
    let since = c.ok("tmux_read", json!({ "session": "sh", "since": r["cursor"] })).await;
    assert!(text(&since).starts_with("echo later\nlater"), "{since} / {got}");
    c.ok("tmux_kill", json!({ "session": "sh" })).await;
}

/// `since` returns only what came after a cursor, page by page, over far more lines than
/// tmux's history keeps (6000): every one of 10,000 lines exactly once, nothing resent.
#[tokio::test]
async fn since_pages_through_ten_thousand_lines_without_loss_or_repeats() {
    let fx = Fixture::new();
    let c = start(&fx).await;
    let s = c
        .ok(
            "tmux_start",
            json!({ "command": "bash --norc -i", "name": "many", "ready": { "quiet_ms": 300 } }),
        )
        .await;
    let before = s["cursor"].as_u64().unwrap();
    let r = c
        .ok(
            "tmux_send",
            json!({ "session": "many", "text": "seq 1 10000", "wait": { "exit": true } }),
        )
        .await;
    assert_eq!(r["exit_status"], 0, "{r}");
    assert_eq!(r["truncated"], true, "30,000 characters cannot hold it all: {r}");
    assert!(numbers(r["text"].as_str().unwrap()).ends_with(&[9999, 10000]), "its end is kept");
    // The whole of it, from the cursor before the send.
    let mut cursor = before;
    let mut all = Vec::new();
    let mut pages = 0;
    loop {
        let p =
            c.ok("tmux_read", json!({ "session": "many", "since": cursor, "lines": 5000 })).await;
        assert_eq!(p["lost_lines"], 0, "{p}");
        assert!(p["cursor"].as_u64().unwrap() >= cursor);
        cursor = p["cursor"].as_u64().unwrap();
        all.extend(numbers(text(&p)));
        pages += 1;
        if p["more"] == false {
            break;
        }
        assert!(pages < 50, "paging does not end");
    }
    assert!(pages >= 2, "{pages} pages");
    assert_eq!(all, (1..=10000).collect::<Vec<u64>>());
    // Nothing is resent: read again from the last cursor.
    let again = c.ok("tmux_read", json!({ "session": "many", "since": cursor })).await;
    assert!(numbers(text(&again)).is_empty(), "{again}");
    // tmux's own screen and history lost the start long ago.
    let screen = c.ok("tmux_read", json!({ "session": "many", "lines": 5000 })).await;
    assert!(!numbers(text(&screen)).contains(&1), "tmux's history kept line 1?");
    // A cursor from nowhere is refused, saying what to do.
    let e = c.err("tmux_read", json!({ "session": "many", "since": cursor + 1_000_000 })).await;
    assert!(e.contains("past the end") && e.contains("without `since`"), "{e}");
    c.ok("tmux_kill", json!({ "session": "many" })).await;
}

/// Output beyond what the log keeps (8 MiB) is counted as lost, not silently skipped.
#[tokio::test]
async fn lines_no_longer_kept_are_counted_as_lost() {
    let fx = Fixture::new();
    let c = start(&fx).await;
    let s = c
        .ok(
            "tmux_start",
            json!({ "command": "bash --norc -i", "name": "flood", "ready": { "quiet_ms": 300 } }),
        )
        .await;
    // 12 MiB in 16-byte lines.
    let r = c
        .ok(
            "tmux_send",
            json!({ "session": "flood", "text": "yes 0123456789abcde | head -n 786432",
                    "wait": { "exit": true }, "timeout_secs": 300 }),
        )
        .await;
    assert_eq!(r["exit_status"], 0, "{r}");
    // The pruning loop runs each second.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let p =
        c.ok("tmux_read", json!({ "session": "flood", "since": s["cursor"], "lines": 10 })).await;
    let lost = p["lost_lines"].as_u64().unwrap();
    assert!((200_000..=400_000).contains(&lost), "about 5 MiB of 17-byte lines: {lost}");
    assert_eq!(text(&p).lines().next(), Some("0123456789abcde"), "{p}");
    c.ok("tmux_kill", json!({ "session": "flood" })).await;
}

/// Every wait is bounded: `timed_out` when the condition never holds, and bad input is refused
/// before anything starts or is typed, saying what is allowed.
#[tokio::test]
async fn waits_time_out_and_bad_conditions_are_refused() {
    let fx = Fixture::new();
    let c = start(&fx).await;
    let t0 = Instant::now();
    let r = c
        .ok(
            "tmux_start",
            json!({ "command": "echo waiting; cat", "name": "slow",
                    "ready": { "pattern": "never-printed" }, "timeout_secs": 1 }),
        )
        .await;
    assert_eq!((r["ready"].as_bool(), r["timed_out"].as_bool()), (Some(false), Some(true)), "{r}");
    assert_eq!((r["ended"].as_bool(), r["state"].as_str()), (Some(false), Some("running")));
    assert_eq!(r["text"], "waiting", "{r}");
    assert!(t0.elapsed() < Duration::from_secs(20), "{:?}", t0.elapsed());
    let r = c
        .ok(
            "tmux_send",
            json!({ "session": "slow", "text": "x", "wait": { "pattern": "^y$" }, "timeout_secs": 1 }),
        )
        .await;
    assert_eq!((r["ready"].as_bool(), r["timed_out"].as_bool()), (Some(false), Some(true)), "{r}");
    assert_eq!(r["text"], "x", "cat's answer (the echo left out): {r}");
    assert!(r["waited_ms"].as_u64().unwrap() >= 1000, "{r}");

    for (args, needle) in [
        (json!({ "ready": { "pattern": "(" } }), "not a valid regular expression"),
        (json!({ "ready": { "pattern": "" } }), "pattern is empty"),
        (
            json!({ "ready": { "port": 80, "quiet_ms": 100 } }),
            "exactly one of port, pattern or quiet_ms",
        ),
        (json!({ "ready": {} }), "exactly one of"),
        (json!({ "ready": { "exit": true } }), "exit is for tmux_send"),
        (json!({ "ready": { "port": 0 } }), "between 1 and 65535"),
        (json!({ "ready": { "quiet_ms": 10 } }), "between 50 and 600000"),
        (json!({ "ready": { "quiet_ms": 5000 }, "timeout_secs": 2 }), "shorter than timeout_secs"),
        (json!({ "ready": { "port": 80 }, "timeout_secs": 0 }), "between 1 and 600"),
        (json!({ "ready": { "port": 80 }, "timeout_secs": 601 }), "between 1 and 600"),
    ] {
        let mut a = args.clone();
        a["command"] = json!("echo should-not-run > ran.txt");
        a["name"] = json!("bad");
        let e = c.err("tmux_start", a).await;
        assert!(e.contains(needle), "{args}: {e}");
    }
    assert!(!fx.root.join("ran.txt").exists(), "a refused tmux_start started its command");
    let listed = c.ok("tmux_list", json!({})).await;
    assert_eq!(listed["sessions"].as_array().unwrap().len(), 1, "{listed}");
    let before = c.ok("tmux_read", json!({ "session": "slow" })).await;
    for (wait, needle) in [
        (json!({ "port": 80 }), "port is for tmux_start"),
        (json!({ "exit": false }), "exit can only be true"),
        (json!({ "pattern": "a(" }), "not a valid regular expression"),
        (json!({ "pattern": "x".repeat(1001) }), "at most 1000"),
    ] {
        let e = c
            .err("tmux_send", json!({ "session": "slow", "text": "typed-anyway", "wait": wait }))
            .await;
        assert!(e.contains(needle), "{wait}: {e}");
        assert!(e.len() < 1500, "no huge echo: {e}");
    }
    // The positive control: a good wait on the same session works, and nothing was typed
    // by the refused ones.
    let ok = c
        .ok("tmux_send", json!({ "session": "slow", "text": "fine", "wait": { "quiet_ms": 300 } }))
        .await;
    assert_eq!(ok["text"], "fine", "{ok}");
    let after = c.ok("tmux_read", json!({ "session": "slow", "since": before["cursor"] })).await;
    assert!(!text(&after).contains("typed-anyway"), "{after}");
    c.ok("tmux_kill", json!({ "session": "slow" })).await;
}

/// Cancelling a waiting call ends the wait, not the session; a waiting call sends progress
/// (elapsed time, lines seen) when the client asked for it.
#[tokio::test]
async fn a_cancelled_wait_leaves_the_session_running_and_waits_report_progress() {
    use rmcp::ServiceExt;
    use rmcp::model::CallToolRequestParams;
    let fx = Fixture::new();
    let config = shell_config(&fx);
    let mut cmd = fx.command(&["serve", "--config", config.to_str().unwrap()]);
    cmd.stderr(std::process::Stdio::inherit());
    let log = ProgressLog::default();
    let service =
        log.clone().serve(rmcp::transport::TokioChildProcess::new(cmd).unwrap()).await.unwrap();
    let call = |args: Value| {
        let peer = service.peer().clone();
        async move {
            let params = CallToolRequestParams::new("tmux_start")
                .with_arguments(args.as_object().unwrap().clone());
            peer.call_tool(params).await.unwrap()
        }
    };
    let marker = format!("{}.5", unique());
    let r = call(json!({
        "command": format!("echo one; echo two; sleep 3.5; echo up; sleep {marker}"),
        "name": "prog", "ready": { "pattern": "^up$" } }))
    .await;
    let r = r.structured_content.unwrap();
    assert_eq!(r["ready"], true, "{r}");
    let seen = log.0.lock().unwrap().clone();
    assert!(seen.len() >= 2, "{seen:?}");
    assert!(seen.windows(2).all(|w| w[0].progress < w[1].progress), "{seen:?}");
    let msg = seen[0].message.clone().unwrap_or_default();
    assert!(msg.contains("waiting") && msg.contains("2 lines of output"), "{seen:?}");

    // A wait that would take a minute, cancelled after a second.
    let peer = service.peer().clone();
    let params = CallToolRequestParams::new("tmux_send").with_arguments(
        json!({ "session": "prog", "text": "", "wait": { "pattern": "never" }, "timeout_secs": 60 })
            .as_object()
            .unwrap()
            .clone(),
    );
    let t0 = Instant::now();
    let waiting = tokio::spawn(async move { peer.call_tool(params).await });
    let first = seen.len();
    let reported =
        super::common::wait_until(Duration::from_secs(15), || log.0.lock().unwrap().len() > first)
            .await;
    assert!(reported, "the second wait reports progress too");
    assert!(!waiting.is_finished(), "the wait returned early");
    let notes = log.0.lock().unwrap().len();
    waiting.abort();
    // The wait has ended: it sends no more progress.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let after = log.0.lock().unwrap().len();
    assert!(after <= notes + 1, "the wait went on after its cancellation ({notes} -> {after})");
    // The session is untouched: its command runs, and it answers the next call at once.
    assert!(
        !host_processes(&["sleep", &marker]).is_empty(),
        "the cancelled wait ended the session"
    );
    let peer = service.peer().clone();
    let params = CallToolRequestParams::new("tmux_read")
        .with_arguments(json!({ "session": "prog" }).as_object().unwrap().clone());
    let r = peer.call_tool(params).await.unwrap().structured_content.unwrap();
    assert_eq!(r["ended"], false, "{r}");
    assert!(t0.elapsed() < Duration::from_secs(20), "{:?}", t0.elapsed());
    let params = CallToolRequestParams::new("tmux_kill")
        .with_arguments(json!({ "session": "prog" }).as_object().unwrap().clone());
    peer.call_tool(params).await.unwrap();
    assert!(host_processes(&["sleep", &marker]).is_empty());
    let _ = service.cancel().await;
}

/// A client that records the progress notifications it receives.
#[derive(Clone, Default)]
struct ProgressLog(std::sync::Arc<std::sync::Mutex<Vec<rmcp::model::ProgressNotificationParam>>>);

impl rmcp::ClientHandler for ProgressLog {
    async fn on_progress(
        &self,
        params: rmcp::model::ProgressNotificationParam,
        _context: rmcp::service::NotificationContext<rmcp::RoleClient>,
    ) {
        self.0.lock().unwrap().push(params);
    }
}

/// `hands stop` during a wait: the waiting call returns at once, refused by the brake, and
/// the session is gone with the others.
#[tokio::test]
async fn the_brake_ends_a_pending_wait() {
    let fx = Fixture::new();
    let c = std::sync::Arc::new(start(&fx).await);
    let marker = format!("{}.25", unique());
    let waiting = {
        let c = c.clone();
        let cmd = format!("sleep {marker}");
        tokio::spawn(async move {
            c.call(
                "tmux_start",
                json!({ "command": cmd, "name": "held", "ready": { "pattern": "never" },
                        "timeout_secs": 120 }),
            )
            .await
        })
    };
    let t0 = Instant::now();
    while host_processes(&["sleep", &marker]).is_empty() && t0.elapsed().as_secs() < 10 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!host_processes(&["sleep", &marker]).is_empty(), "the session's command runs");
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(!waiting.is_finished(), "the wait returned early");
    let config = shell_config(&fx);
    let stop = fx.std_command(&["stop", "--config", config.to_str().unwrap()]).output().unwrap();
    assert!(stop.status.success(), "{stop:?}");
    let r = tokio::time::timeout(Duration::from_secs(10), waiting).await.unwrap().unwrap();
    assert_eq!(r.is_error, Some(true));
    assert!(super::common::text_of(&r).contains("hands stop"), "{}", super::common::text_of(&r));
    assert!(host_processes(&["sleep", &marker]).is_empty(), "the session survived the brake");
}

/// A program in a pane opens `/dev/tty` for writing (ssh's and git's prompts, sudo do): every
/// open for writing goes to the sandbox's init (decision 0079), which has no terminal of its
/// own, so it opens the caller's controlling terminal in the sandbox's devpts. The text appears
/// in the pane; the same open from a `bash` call, which controls no terminal, fails as the
/// kernel would (ENXIO).
#[tokio::test]
async fn a_pane_program_writes_to_its_terminal_through_dev_tty() {
    let fx = Fixture::new();
    let c = start(&fx).await;
    c.ok("tmux_start", json!({ "command": "bash --norc", "name": "tty" })).await;
    let typed = "python3 -c \"import os; os.write(os.open('/dev/tty', os.O_RDWR), b'from-the'+b'-tty\\n')\"; echo done-$?";
    c.ok("tmux_send", json!({ "session": "tty", "text": typed })).await;
    let r = read_until(&c, "tty", |r| text(r).lines().any(|l| l.starts_with("done-"))).await;
    let shown = text(&r);
    assert!(shown.lines().any(|l| l == "from-the-tty"), "{shown}");
    assert!(shown.lines().any(|l| l == "done-0"), "{shown}");
    c.ok("tmux_kill", json!({ "session": "tty" })).await;
    let probe = "python3 -c \"import os; os.open('/dev/tty', os.O_RDWR)\" 2>&1 | tail -1";
    let r = c.ok("bash", json!({ "command": probe })).await;
    assert!(r["stdout"].as_str().unwrap_or_default().contains("No such device or address"), "{r}");
    fx.assert_canary();
}
