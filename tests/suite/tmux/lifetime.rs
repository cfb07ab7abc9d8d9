//! Nothing runs unsupervised (SPEC §4.2, issue 36.3): a stdio daemon's tmux sessions, its
//! network namespace holder and every helper end with it — its client closing stdin, or the
//! daemon killed outright — unless `keep_sessions = true`; kept sessions outlive it, the next
//! daemon adopts them (`tmux_list` says `kept`, its commands share their loopback), and
//! `hands stop` ends them with no daemon running, leaving nothing behind.
//!
//! "Its processes" are found two ways, so that neither can hide one: every descendant of the
//! daemon while it runs (the holder, each launcher, each sandbox's init and everything under
//! it), and afterwards every process of the host whose command line, working folder or open
//! files name this test's temp folder.

use super::super::common::{Client, Fixture, hands_bin, host_processes, text_of, wait_until};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long everything may take to end once the daemon has gone: the holder looks every 2 s.
const ENDS_WITHIN: Duration = Duration::from_secs(8);

fn config(fx: &Fixture, keep: bool) -> PathBuf {
    fx.config(&format!(
        "[daemon]\nstate_dir = \"{{state}}\"\n\n[[builtins]]\nid = \"tools-shell\"\n\
         grants = [\"filesystem\", \"spawn\"]\n\
         filesystem = [{{ path = \"{{root}}\", write = true }}]\n\
         config = {{ trust = {{ external = \"allow\" }}, keep_sessions = {keep} }}\n",
    ))
}

/// A process named for good: pid and start time (field 22 of its stat).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Proc {
    pid: u32,
    start: u64,
    cmdline: String,
}

/// `(ppid, start)` of `pid`, from `/proc/PID/stat`.
fn stat(pid: u32) -> Option<(u32, u64)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest: Vec<&str> = s.get(s.rfind(')')? + 2..)?.split(' ').collect();
    Some((rest.get(1)?.parse().ok()?, rest.get(19)?.parse().ok()?))
}

fn cmdline(pid: u32) -> String {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    String::from_utf8_lossy(&raw).replace('\0', " ").trim_end().to_string()
}

fn pids() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect()
}

/// `root` and every process descended from it now.
fn tree(root: u32) -> Vec<Proc> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for pid in pids() {
        if let Some((ppid, _)) = stat(pid) {
            children.entry(ppid).or_default().push(pid);
        }
    }
    let mut out = Vec::new();
    let mut todo = vec![root];
    while let Some(pid) = todo.pop() {
        if let Some((_, start)) = stat(pid) {
            out.push(Proc { pid, start, cmdline: cmdline(pid) });
        }
        todo.extend(children.get(&pid).into_iter().flatten());
    }
    out
}

fn alive(p: &Proc) -> bool {
    stat(p.pid).is_some_and(|(_, start)| start == p.start)
}

/// Processes of the host whose command line, working folder or open files name `dir`.
fn naming(dir: &Path) -> Vec<Proc> {
    let dir = dir.to_string_lossy().into_owned();
    let me = std::process::id();
    pids()
        .into_iter()
        .filter(|&pid| pid != me)
        .filter(|&pid| {
            let links = std::fs::read_dir(format!("/proc/{pid}/fd"))
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path())
                .chain([PathBuf::from(format!("/proc/{pid}/cwd"))]);
            cmdline(pid).contains(&dir)
                || links
                    .filter_map(|l| std::fs::read_link(l).ok())
                    .any(|t| t.to_string_lossy().contains(&dir))
        })
        .filter_map(|pid| Some(Proc { pid, start: stat(pid)?.1, cmdline: cmdline(pid) }))
        .collect()
}

/// The one daemon serving `config` now.
fn daemon_pid(config: &Path) -> u32 {
    let bin = hands_bin();
    let found =
        host_processes(&[bin.to_str().unwrap(), "serve", "--config", config.to_str().unwrap()]);
    assert_eq!(found.len(), 1, "one daemon serves {}: {found:?}", config.display());
    found[0]
}

/// What of `before` is still alive, and what still names the fixture's folder.
fn left(fx: &Fixture, before: &[Proc]) -> Vec<Proc> {
    let mut left: Vec<Proc> = before.iter().filter(|p| alive(p)).cloned().collect();
    for p in naming(fx.dir.path()) {
        if !left.contains(&p) {
            left.push(p);
        }
    }
    left
}

/// Asserts that within [`ENDS_WITHIN`] nothing of `before` and nothing naming the fixture runs.
async fn assert_nothing_left(fx: &Fixture, before: &[Proc], what: &str) {
    let gone = wait_until(ENDS_WITHIN, || left(fx, before).is_empty()).await;
    assert!(gone, "{what}: still running: {:#?}", left(fx, before));
}

/// A session running `sleep MARKER` and a `bash` call; the daemon's process tree then, which
/// must hold the holder, the session's tmux server and its sleep (else the test proves nothing).
async fn busy_daemon(fx: &Fixture, c: &Client, config: &Path, marker: &str) -> Vec<Proc> {
    let r = c.ok("bash", json!({ "command": "echo ran" })).await;
    assert_eq!(r["stdout"], "ran\n", "{r}");
    c.ok("tmux_start", json!({ "command": format!("sleep {marker}"), "name": "job" })).await;
    let before = tree(daemon_pid(config));
    let has = |needle: &str| before.iter().any(|p| p.cmdline.contains(needle));
    assert!(has("__netns"), "the holder runs under the daemon: {before:#?}");
    assert!(has(&format!("sleep {marker}")), "the session's command runs: {before:#?}");
    assert!(has("tmux"), "the session's tmux server runs: {before:#?}");
    assert!(naming(fx.dir.path()).len() >= 2, "the holder and tmux name the state dir");
    before
}

fn marker() -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    format!("{}.{:09}", 4000 + std::process::id() % 1000, nanos.subsec_nanos())
}

/// The client closes stdin: the daemon ends, and with it every session, the holder and every
/// helper. Run as root and as an ordinary user (scripts/test-as-user).
#[tokio::test]
async fn a_stdio_daemon_leaves_nothing_behind_when_its_client_closes_stdin() {
    let fx = Fixture::new();
    let config = config(&fx, false);
    let c = Client::start(&fx, &config).await;
    let m = marker();
    let before = busy_daemon(&fx, &c, &config, &m).await;
    let listed = c.ok("tmux_list", json!({})).await;
    assert_eq!(listed["sessions"][0]["kept"], false, "{listed}");
    c.stop().await;
    assert_nothing_left(&fx, &before, "after stdin closed").await;
    assert!(host_processes(&["sleep", &m]).is_empty());
    // The records went with the sessions: a new daemon finds none.
    let c = Client::start(&fx, &config).await;
    assert_eq!(c.ok("tmux_list", json!({})).await["sessions"], json!([]));
    c.stop().await;
    fx.assert_canary();
}

/// The daemon is killed outright (SIGKILL: no code of its own runs): its sessions and the
/// holder end all the same (the launchers' parent-death signal, the holder's look at its users).
#[tokio::test]
async fn a_killed_daemon_leaves_no_session_and_no_holder() {
    let fx = Fixture::new();
    let config = config(&fx, false);
    let c = Client::start(&fx, &config).await;
    let m = marker();
    let before = busy_daemon(&fx, &c, &config, &m).await;
    let daemon = daemon_pid(&config);
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(daemon as i32).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    assert_nothing_left(&fx, &before, "after SIGKILL").await;
    drop(c);
}

/// `keep_sessions = true`: the session and its loopback outlive the daemon, the next daemon
/// adopts it (listed as kept, its `bash` reaches the session's server), and with no daemon
/// running `hands stop` ends it — and then nothing of either daemon is left.
#[tokio::test]
async fn kept_sessions_outlive_the_daemon_are_adopted_and_hands_stop_ends_them() {
    let fx = Fixture::new();
    let config = config(&fx, true);
    let c = Client::start(&fx, &config).await;
    let m = marker();
    let mut before = busy_daemon(&fx, &c, &config, &m).await;
    // A server in a kept session, on the module's private loopback.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    fx.write("site/index.html", "kept\n");
    let serve = format!("python3 -m http.server {port} --bind 127.0.0.1");
    let ready = json!({ "port": port });
    let r = c
        .ok("tmux_start", json!({ "command": serve, "cwd": "site", "name": "web", "ready": ready }))
        .await;
    assert_eq!(r["ready"], true, "{r}");
    let listed = c.ok("tmux_list", json!({})).await;
    assert_eq!(listed["sessions"][0]["kept"], true, "{listed}");
    c.stop().await;
    // Still running with no daemon: the sessions, and the holder that keeps their loopback.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!host_processes(&["sleep", &m]).is_empty(), "the kept session ended");
    assert!(
        naming(fx.dir.path()).iter().any(|p| p.cmdline.contains("__netns")),
        "the holder ended while kept sessions need it"
    );
    // The next daemon adopts them and shares their loopback.
    let c = Client::start(&fx, &config).await;
    let listed = c.ok("tmux_list", json!({})).await;
    let names: Vec<&Value> =
        listed["sessions"].as_array().unwrap().iter().map(|s| &s["name"]).collect();
    assert_eq!(names, [&json!("job"), &json!("web")], "{listed}");
    assert!(listed["sessions"].as_array().unwrap().iter().all(|s| s["kept"] == true), "{listed}");
    let probe = format!(
        "python3 -c 'import urllib.request,sys; \
         sys.stdout.write(urllib.request.urlopen(\"http://127.0.0.1:{port}/\").read().decode())'"
    );
    let got = c.ok("bash", json!({ "command": probe })).await;
    assert_eq!(got["stdout"], "kept\n", "{got}");
    before.extend(tree(daemon_pid(&config)));
    c.stop().await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!host_processes(&["sleep", &m]).is_empty(), "the adopted kept session ended");
    // `hands stop` with no daemon: the kept sessions end, and nothing is left.
    let out = fx.command(&["stop", "--config", config.to_str().unwrap()]).output().await.unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("ended 2 kept tmux sessions"), "{said}");
    assert!(said.contains("tools-shell/job") && said.contains("tools-shell/web"), "{said}");
    assert_nothing_left(&fx, &before, "after hands stop").await;
    // Positive control of the message: nothing more to stop says so.
    let out = fx.command(&["stop", "--config", config.to_str().unwrap()]).output().await.unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("nothing to stop"));
    fx.assert_canary();
}

/// A daemon that does not keep sessions adopts kept ones and ends them with itself: its
/// setting decides what happens to the sessions it holds.
#[tokio::test]
async fn a_daemon_that_does_not_keep_sessions_ends_the_kept_ones_it_adopted() {
    let fx = Fixture::new();
    let c = Client::start(&fx, &config(&fx, true)).await;
    let m = marker();
    c.ok("tmux_start", json!({ "command": format!("sleep {m}"), "name": "kept" })).await;
    c.stop().await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!host_processes(&["sleep", &m]).is_empty(), "the kept session ended");
    let config = config(&fx, false);
    let c = Client::start(&fx, &config).await;
    let listed = c.ok("tmux_list", json!({})).await;
    assert_eq!(listed["sessions"][0]["name"], "kept", "{listed}");
    assert_eq!(listed["sessions"][0]["kept"], false, "it ends with this daemon: {listed}");
    let before = tree(daemon_pid(&config));
    c.stop().await;
    assert!(
        wait_until(ENDS_WITHIN, || host_processes(&["sleep", &m]).is_empty()).await,
        "the adopted session outlived a daemon that does not keep sessions"
    );
    assert_nothing_left(&fx, &before, "after the second daemon").await;
    let r = Client::start(&fx, &config).await;
    let none = r.call("tmux_read", json!({ "session": "kept" })).await;
    assert_eq!(none.is_error, Some(true), "{}", text_of(&none));
    r.stop().await;
}
