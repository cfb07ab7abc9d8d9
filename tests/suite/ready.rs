//! A sandbox made ready ahead of the next command (decision 0077, issue 34), through the real
//! binary: after a command the daemon builds the next one's sandbox, whose init waits for the
//! call; the next call runs in it (proved by the host's process tree), it is fresh (nothing of
//! the last run's `/tmp`), and each serves one command; the first call's is made ready at the
//! start (decision 0078). As attacks: a protected file and a secret file replaced on the host
//! while the sandbox waits (the host's rename takes the mask and the read-only bind off in
//! every other mount namespace) stay walled in the next call, with its positive control and
//! the canary outside the roots.

use super::common::{Client, Era, Fixture, host_git, unique_sleep, wait_until};
use super::reports::config;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::time::Duration;

const SECRET: &str = "hunter2-hands-ready-secret";

async fn bash(c: &Client, command: &str) -> Value {
    c.ok("bash", json!({ "command": command })).await
}

fn out(v: &Value) -> &str {
    v["stdout"].as_str().unwrap()
}

/// The parent pid of `pid` on the host.
pub(super) fn ppid(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit(')').next()?.split_whitespace().nth(1)?.parse().ok()
}

/// The launchers of this fixture's daemon whose init waits for a call: their spec (on their
/// descriptor 3) says `ready` and names the fixture's state dir.
pub(super) fn ready_launchers(fx: &Fixture) -> Vec<u32> {
    let state = fx.state.to_string_lossy().into_owned();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            // Only a memfd is read: another process's descriptor 3 may be a pipe (a tmux
            // server's), whose read would wait for ever.
            let fd = format!("/proc/{pid}/fd/3");
            if !std::fs::read_link(&fd).is_ok_and(|l| l.to_string_lossy().starts_with("/memfd:")) {
                return false;
            }
            let Ok(spec) = std::fs::read(&fd) else { return false };
            let Ok(spec) = serde_json::from_slice::<Value>(&spec) else { return false };
            spec["ready"] == true && spec["home"].as_str().is_some_and(|h| h.starts_with(&state))
        })
        .collect()
}

/// The launchers that wait once things have settled: one made ready, then half a second, so
/// that one just used (seen waiting for a moment while it tidies up) is gone and the next is
/// there. A command that runs in one of these ran in a sandbox made ready before its call.
pub(super) async fn waiting(fx: &Fixture, of: impl Fn(&Fixture) -> Vec<u32>) -> Vec<u32> {
    assert!(
        wait_until(Duration::from_secs(10), || !of(fx).is_empty()).await,
        "a sandbox is made ready"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    of(fx)
}

/// Waits until the daemon's next sandbox is made ready and built (a launcher that waits, then
/// half a second for its build), so that a test may change the state dir's home without
/// racing the launcher that builds from it.
pub(super) async fn settled(fx: &Fixture) {
    one_ready(fx).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
}

/// Waits until one launcher is ready, and returns it.
pub(super) async fn one_ready(fx: &Fixture) -> u32 {
    assert!(
        wait_until(Duration::from_secs(10), || ready_launchers(fx).len() == 1).await,
        "a sandbox is made ready after a command: {:?}",
        ready_launchers(fx)
    );
    ready_launchers(fx)[0]
}

#[tokio::test]
async fn the_next_command_runs_in_the_sandbox_made_ready_and_each_serves_one() {
    let fx = Fixture::new();
    let c = Client::start_with_env(&fx, &config(&fx), Era::Legacy, &[]).await;
    let r = bash(&c, "echo first > /tmp/left-by-the-first; echo one > one.txt").await;
    assert_eq!(r["exit_code"], 0, "{r}");
    let ready = waiting(&fx, ready_launchers).await;
    let (ancestors, r) =
        run_watched(&c, "test -e /tmp/left-by-the-first && echo stale-tmp; cat one.txt").await;
    assert!(
        ancestors.iter().any(|p| ready.contains(p)),
        "the command runs in a sandbox made ready: {ancestors:?}, {ready:?}"
    );
    let ready = ready[0];
    assert_eq!(r["exit_code"], 0, "{r}");
    assert!(out(&r).contains("one"), "positive control: the root is there: {r}");
    assert!(!out(&r).contains("stale-tmp"), "a sandbox made ready is fresh: {r}");
    // It served that command and is gone; another waits.
    assert!(
        wait_until(Duration::from_secs(10), || {
            let now = ready_launchers(&fx);
            std::fs::metadata(format!("/proc/{ready}")).is_err() && now.len() == 1
        })
        .await,
        "the used sandbox ended and another was made ready"
    );
    let left = ready_launchers(&fx);
    // The cgroup leaves its init is in (none under an rlimit bound): gone with it. The init
    // enters them once its root is built, so they are waited for.
    let bounded = left.iter().any(|p| cgroup_bound(*p));
    let mut leaves = Vec::new();
    assert!(
        wait_until(Duration::from_secs(10), || {
            leaves = left.iter().flat_map(|p| leaves_of(*p)).collect();
            !bounded || !leaves.is_empty()
        })
        .await,
        "a sandbox bound by a cgroup is in its leaves: {left:?}"
    );
    c.stop().await;
    assert!(
        wait_until(Duration::from_secs(10), || ready_launchers(&fx).is_empty()).await,
        "the sandbox made ready ends with its daemon: {left:?} then {:?}",
        ready_launchers(&fx)
            .iter()
            .map(|p| std::fs::read_to_string(format!("/proc/{p}/status")).unwrap_or_default())
            .collect::<Vec<_>>()
    );
    assert!(
        wait_until(Duration::from_secs(10), || leaves.iter().all(|l| !l.exists())).await,
        "its cgroup leaves are removed: {leaves:?}"
    );
    fx.assert_canary();
}

/// Runs `command` through `bash` with a `sleep` after it, finds the sleep on the host while it
/// runs, and returns its ancestors there (bash may exec its last command: the init, then the
/// launcher) and the call's result.
async fn run_watched(c: &Client, command: &str) -> (Vec<u32>, Value) {
    // Short, and no other test's: `1.` and the digits of a unique duration.
    let sleep = format!("1.{}", unique_sleep().replace('.', ""));
    let call = {
        let peer = c.service.peer().clone();
        let command = format!("{command}; sleep {sleep}");
        let params = rmcp::model::CallToolRequestParams::new("bash")
            .with_arguments(json!({ "command": command }).as_object().cloned().unwrap());
        tokio::spawn(async move { peer.call_tool(params).await.unwrap() })
    };
    let mut found = Vec::new();
    assert!(
        wait_until(Duration::from_secs(10), || {
            found = super::common::host_processes(&["sleep", &sleep]);
            !found.is_empty()
        })
        .await,
        "the command runs"
    );
    let ancestors = std::iter::successors(Some(found[0]), |p| ppid(*p)).skip(1).take(3).collect();
    let r = call.await.unwrap();
    (ancestors, r.structured_content.unwrap())
}

/// Whether the launcher `pid` bounds its command with a cgroup (its spec's `bound`).
fn cgroup_bound(pid: u32) -> bool {
    let spec = std::fs::read(format!("/proc/{pid}/fd/3")).unwrap_or_default();
    serde_json::from_slice::<Value>(&spec)
        .is_ok_and(|s| s["bound"]["kind"].as_str().is_some_and(|k| k.starts_with("cgroup")))
}

/// The first command's sandbox is made ready once the self-test has passed, before any call
/// (decision 0078): the daemon's first call runs in it (the host's process tree), with the
/// root there (positive control), and the next is made ready after it.
#[tokio::test]
async fn the_first_command_runs_in_a_sandbox_made_ready_at_the_start() {
    let fx = Fixture::new();
    fx.write("one.txt", "one\n");
    let c = Client::start_with_env(&fx, &config(&fx), Era::Legacy, &[]).await;
    let ready = waiting(&fx, ready_launchers).await;
    let (ancestors, r) = run_watched(&c, "cat one.txt; echo two > two.txt").await;
    assert!(
        ancestors.iter().any(|p| ready.contains(p)),
        "the first command runs in the sandbox made ready at the start: {ancestors:?}, {ready:?}"
    );
    let ready = ready[0];
    assert_eq!(r["exit_code"], 0, "{r}");
    assert!(out(&r).contains("one"), "positive control: the root is there: {r}");
    assert_eq!(std::fs::read_to_string(fx.root.join("two.txt")).unwrap(), "two\n");
    assert_ne!(one_ready(&fx).await, ready, "the next is made ready after it");
    c.stop().await;
    fx.assert_canary();
}

/// The cgroup folders the init of launcher `pid` is in that this test process is not in: the
/// run's leaves (cgroup v1 `pids`, `memory`; v2's one).
fn leaves_of(pid: u32) -> Vec<PathBuf> {
    let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"));
    let Some(init) = children.ok().and_then(|c| c.split_whitespace().next().map(String::from))
    else {
        return Vec::new();
    };
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let theirs = std::fs::read_to_string(format!("/proc/{init}/cgroup")).unwrap_or_default();
    theirs
        .lines()
        .filter(|l| !own.lines().any(|o| o == *l))
        .filter_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            let base = match controllers {
                "" => PathBuf::from("/sys/fs/cgroup"),
                c => PathBuf::from("/sys/fs/cgroup").join(c.split(',').next()?),
            };
            let dir = base.join(path.trim_start_matches('/'));
            dir.is_dir().then_some(dir)
        })
        .collect()
}

/// While a sandbox waits, the host replaces `.env` (masked) and `.git/config` (read-only to
/// commands) by renaming new files over them, as an editor or git does. The kernel takes the
/// mask and the bind off in the waiting sandbox's namespace; the next call must still see
/// neither the new secret nor a writable config. Positive control: the call runs, reads
/// `.env.example` and writes a plain file.
#[tokio::test]
async fn files_replaced_on_the_host_while_a_sandbox_waits_stay_walled() {
    let fx = Fixture::new();
    host_git(&fx.home, &fx.root, &["init", "-q"]);
    fx.write(".env", "TOKEN=old\n");
    fx.write(".env.example", "TOKEN=example-value\n");
    let c = Client::start_with_env(&fx, &config(&fx), Era::Legacy, &[]).await;
    for round in 0..3 {
        let r = bash(&c, "cat .env; echo x >> .git/config && echo wrote-config").await;
        assert!(!out(&r).contains("TOKEN=old") && !out(&r).contains(SECRET), "{r}");
        assert!(!out(&r).contains("wrote-config"), "{r}");
        let ready = one_ready(&fx).await;
        // Replaced at once, while the daemon's walk of the roots is still the one it reuses.
        let new_env = fx.write(&format!("env-{round}.tmp"), &format!("TOKEN={SECRET}-{round}\n"));
        std::fs::rename(&new_env, fx.root.join(".env")).unwrap();
        let config_text = format!("[core]\n\trepositoryformatversion = 0\n# round {round}\n");
        let new_config = fx.write(&format!("config-{round}.tmp"), &config_text);
        std::fs::rename(&new_config, fx.root.join(".git/config")).unwrap();
        let r = bash(
            &c,
            "cat .env; echo '[alias] x = !touch /tmp/pwned' >> .git/config && echo wrote-config; \
             cat .env.example; echo plain > plain.txt && cat plain.txt",
        )
        .await;
        assert!(
            !out(&r).contains(SECRET),
            "a secret replaced while the sandbox waited leaked: {r}"
        );
        assert!(!out(&r).contains("wrote-config"), "the replaced config was writable: {r}");
        assert!(out(&r).contains("TOKEN=example-value"), "positive control: {r}");
        assert!(out(&r).contains("plain"), "positive control: {r}");
        assert_eq!(
            std::fs::read_to_string(fx.root.join(".git/config")).unwrap(),
            config_text,
            "the host's config is as the host wrote it"
        );
        assert!(
            wait_until(Duration::from_secs(10), || std::fs::metadata(format!("/proc/{ready}"))
                .is_err())
            .await,
            "the sandbox that waited was not kept"
        );
    }
    c.stop().await;
    fx.assert_canary();
}

/// The brake (`hands stop`) ends the sandbox that waits and no other is made while it holds;
/// once it is lifted, a command runs (positive control) and the next is made ready again.
#[tokio::test]
async fn the_brake_ends_the_sandbox_that_waits_and_the_release_brings_it_back() {
    let fx = Fixture::new();
    let config = config(&fx);
    let c = Client::start_with_env(&fx, &config, Era::Legacy, &[]).await;
    assert_eq!(bash(&c, "true").await["exit_code"], 0);
    let ready = one_ready(&fx).await;
    let stop = |release: bool| {
        let mut args = vec!["stop", "--config", config.to_str().unwrap()];
        if release {
            args.push("--release");
        }
        fx.command(&args)
    };
    let out = stop(false).output().await.unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        wait_until(Duration::from_secs(10), || ready_launchers(&fx).is_empty()).await,
        "the brake ended the sandbox that waited ({ready})"
    );
    let refused = c.err("bash", json!({ "command": "echo braked > braked.txt" })).await;
    assert!(refused.contains("hands stop --release"), "{refused}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(ready_launchers(&fx).is_empty(), "none is made while the brake holds");
    let out = stop(true).output().await.unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r = bash(&c, "echo again > again.txt").await;
    assert_eq!(r["exit_code"], 0, "positive control: {r}");
    assert_ne!(one_ready(&fx).await, ready, "another is made ready after the release");
    assert!(!fx.root.join("braked.txt").exists());
    assert!(fx.root.join("again.txt").exists());
    c.stop().await;
    fx.assert_canary();
}

/// The tmux tools' client commands run in a sandbox made ready for the session (decision
/// 0078). The session's tmux server is stopped (SIGSTOP) so that the next `tmux_send`'s client
/// waits for it, found on the host under the launcher that was ready; the text then arrives
/// (positive control), and the session's end ends the sandbox that waited for it.
#[tokio::test]
async fn a_tmux_client_command_runs_in_the_sandbox_made_ready_for_its_session() {
    let fx = Fixture::new();
    let c = Client::start_with_env(&fx, &config(&fx), Era::Legacy, &[]).await;
    // Unique across copies of the suite running at once (their process ids), and short: the
    // socket path under test-as-user's long temporary folders holds the client's tag too. Matched
    // below with the `-` before the tag, so never as a prefix of another's.
    let name = format!("r{}", std::process::id());
    c.ok("tmux_start", json!({ "command": "bash --norc", "name": name })).await;
    c.ok("tmux_read", json!({ "session": name })).await;
    // The one made ready for the session binds its socket folder, named after it (and its
    // client's tag, decision 0091).
    let for_session = |fx: &Fixture| -> Vec<u32> {
        ready_launchers(fx)
            .into_iter()
            .filter(|p| {
                let spec = std::fs::read(format!("/proc/{p}/fd/3")).unwrap_or_default();
                String::from_utf8_lossy(&spec).contains(&format!("/{name}-"))
            })
            .collect()
    };
    let mut ready = Vec::new();
    assert!(
        wait_until(Duration::from_secs(10), || {
            ready = for_session(&fx);
            ready.len() == 1
        })
        .await,
        "a sandbox is made ready for the session's next client command: {ready:?}"
    );
    let ready = waiting(&fx, for_session).await;
    let server = cmdlines()
        .into_iter()
        .find(|(_, c)| c.starts_with("tmux -D ") && c.contains(&format!("/{name}-")))
        .map(|(p, _)| p)
        .expect("the session's tmux server runs");
    let pid = rustix::process::Pid::from_raw(server as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::STOP).unwrap();
    let send = {
        let peer = c.service.peer().clone();
        let args = json!({ "session": name, "text": "echo from-the-ready-one" });
        let params = rmcp::model::CallToolRequestParams::new("tmux_send")
            .with_arguments(args.as_object().cloned().unwrap());
        tokio::spawn(async move { peer.call_tool(params).await.unwrap() })
    };
    let mut client = None;
    let found = wait_until(Duration::from_secs(10), || {
        client = cmdlines()
            .into_iter()
            .find(|(_, c)| c.contains("send-keys") && c.contains(&format!("/{name}-")))
            .map(|(p, _)| p);
        client.is_some()
    })
    .await;
    // Read while the client still waits: once the server goes on, it ends.
    let ancestors: Vec<u32> = std::iter::successors(client, |p| ppid(*p)).skip(1).take(3).collect();
    rustix::process::kill_process(pid, rustix::process::Signal::CONT).unwrap();
    assert!(found, "the tmux client runs while its server is stopped");
    assert!(
        ancestors.iter().any(|p| ready.contains(p)),
        "the client runs in a sandbox made ready for the session: {ancestors:?}, {ready:?}"
    );
    let r = send.await.unwrap();
    assert_ne!(r.is_error, Some(true), "{r:?}");
    let mut typed = Value::Null;
    for _ in 0..40 {
        typed = c.ok("tmux_read", json!({ "session": name })).await;
        if typed.to_string().matches("from-the-ready-one").count() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let seen = typed.to_string().matches("from-the-ready-one").count();
    assert!(seen >= 2, "positive control: the text was typed and ran: {typed}");
    c.ok("tmux_kill", json!({ "session": name })).await;
    assert!(
        wait_until(Duration::from_secs(10), || for_session(&fx).is_empty()).await,
        "the session's end ends the sandbox made ready for it: {:?}",
        for_session(&fx)
    );
    c.stop().await;
    fx.assert_canary();
}

/// Every process on the host with its command line (arguments joined by spaces).
fn cmdlines() -> Vec<(u32, String)> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let c = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            Some((pid, String::from_utf8_lossy(&c).replace('\0', " ")))
        })
        .collect()
}

/// As an attack: a tmux session in the same root keeps trying to put a new secret in place of
/// the masked `.env` (a rename over it, a write into it, a link to it) while sandboxes wait
/// for the next `bash` calls. A session's command cannot: `.env` is a mount point in its own
/// namespace and the in-run walls refuse a secret name, so no waiting sandbox can show it.
/// Positive control: the session writes a plain file (renamed into place, so that no read
/// finds it half written) that every call reads; the host's `.env` is unchanged and the canary
/// outside the roots too.
#[tokio::test]
async fn a_tmux_session_racing_the_sandbox_that_waits_cannot_unmask_a_secret() {
    let fx = Fixture::new();
    fx.write(".env", "TOKEN=kept\n");
    let c = Client::start_with_env(&fx, &config(&fx), Era::Legacy, &[]).await;
    let name = format!("race{}", std::process::id());
    let racer = format!(
        "i=0; while :; do i=$((i+1)); echo TOKEN={SECRET}-$i > new.env; mv -f new.env .env; \
         echo TOKEN={SECRET}-w$i > .env; ln -f new.env .env; \
         echo $i > plain.tmp; mv -f plain.tmp plain.txt; done"
    );
    c.ok("tmux_start", json!({ "command": racer, "name": name })).await;
    for round in 0..8 {
        let r = bash(&c, "cat .env; cat plain.txt").await;
        assert!(!out(&r).contains(SECRET), "round {round}: a secret the session wrote: {r}");
        assert!(!out(&r).contains("TOKEN=kept"), "round {round}: the masked secret: {r}");
        assert!(
            round == 0 || out(&r).lines().any(|l| l.parse::<u64>().is_ok()),
            "positive control: the session runs and writes plain.txt: {r}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    c.ok("tmux_kill", json!({ "session": name })).await;
    assert_eq!(std::fs::read_to_string(fx.root.join(".env")).unwrap(), "TOKEN=kept\n");
    c.stop().await;
    fx.assert_canary();
}
