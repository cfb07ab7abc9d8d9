//! The `bash` tool through the real binary and rmcp's client: results, limits, cwd, env,
//! containment, queueing, timeout and cancellation killing the whole tree.

use super::common::{Client, Era, Fixture, host_processes, text_of, unique_sleep, wait_until};
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::time::{Duration, Instant};

const SECRET: &str = "hunter2-hands-test-secret";

/// tools-shell with `root` writable and the fake home read-only, external calls allowed;
/// `extra` is appended inside its `config` table.
fn shell_config(fx: &Fixture, extra: &str) -> PathBuf {
    fx.config(&format!(
        "[daemon]\nstate_dir = \"{{state}}\"\n\n[[builtins]]\nid = \"tools-shell\"\n\
         grants = [\"filesystem\", \"spawn\"]\n\
         filesystem = [{{ path = \"{{root}}\", write = true }}, {{ path = \"{{home}}\" }}]\n\
         config = {{ trust = {{ external = \"allow\" }}, env = {{ HANDS_TOOL_DIR = \"~/tool\" }}{extra} }}\n"
    ))
}

async fn start(fx: &Fixture, extra: &str) -> Client {
    let config = shell_config(fx, extra);
    Client::start_with_env(fx, &config, Era::Legacy, &[("HANDS_TEST_SECRET", SECRET)]).await
}

async fn bash(c: &Client, command: &str) -> Value {
    c.ok("bash", json!({ "command": command })).await
}

fn out(v: &Value) -> &str {
    v["stdout"].as_str().unwrap()
}

/// The daemon starts its commands through `hands-sandbox` when it lies beside `hands` (as
/// cargo builds and installs them), and through `hands __sandbox` when `hands` is alone; both
/// are the same launcher, and the command is contained either way (the secret in the daemon's
/// environment stays out, the write outside the roots is refused).
#[tokio::test]
async fn commands_start_through_the_launcher_binary_beside_hands_or_hands_alone() {
    let fx = Fixture::new();
    let config = shell_config(&fx, "");
    // The init's command line; the daemon's secret (absent); a write inside the roots (the
    // positive control) and one outside them, beside the fixture's canary (refused).
    let outside = fx.outside.join("launched.txt");
    let script = format!(
        "tr '\\0' ' ' < /proc/1/cmdline; echo; echo \"[$HANDS_TEST_SECRET]\"; \
         echo in > inside.txt && echo wrote; echo x > {} || echo refused",
        outside.display()
    );
    let alone = fx.state.join("alone");
    std::fs::create_dir_all(&alone).unwrap();
    let copy = alone.join("hands");
    std::fs::copy(super::common::hands_bin(), &copy).unwrap();
    let beside = super::common::hands_bin().with_file_name("hands-sandbox");
    assert!(beside.is_file(), "cargo builds hands-sandbox beside hands: {}", beside.display());
    let cases = [
        (super::common::hands_bin(), beside.display().to_string()),
        (copy.clone(), format!("{} __sandbox", copy.display())),
    ];
    for (bin, launcher) in cases {
        let env = [("HANDS_TEST_SECRET", SECRET)];
        let c = Client::start_bin(&fx, &bin, &config, Era::Legacy, &env).await;
        let r = bash(&c, &script).await;
        let text = out(&r);
        let init = text.lines().next().unwrap_or_default().trim_end();
        let expected = match launcher.ends_with("__sandbox") {
            true => launcher.clone(),
            false => format!("{launcher} __sandbox"),
        };
        assert_eq!(init, expected, "{} runs its commands through {init:?}: {r}", bin.display());
        assert!(text.contains("[]\n") && !text.contains(SECRET), "{r}");
        assert!(text.contains("wrote") && text.contains("refused"), "{r}");
        assert_eq!(std::fs::read_to_string(fx.root.join("inside.txt")).unwrap(), "in\n");
        assert!(!outside.exists(), "a write outside the roots landed: {r}");
        std::fs::remove_file(fx.root.join("inside.txt")).unwrap();
        c.stop().await;
        // `hands doctor` names the launcher it runs, with the remedy when it is `hands` alone.
        let mut doctor = fx.command_of(&bin, &["doctor", "--config", config.to_str().unwrap()]);
        let said = String::from_utf8_lossy(&doctor.output().await.unwrap().stdout).into_owned();
        let line = said.lines().find(|l| l.trim_start().starts_with("launcher: ")).unwrap_or("");
        assert!(line.trim_start().starts_with(&format!("launcher: {launcher}")), "{said}");
        assert_eq!(line.contains("is not beside it"), bin == copy, "{said}");
    }
    fx.assert_canary();
}

#[tokio::test]
async fn bash_is_listed_as_external_and_destructive_and_refused_while_trust_asks() {
    let fx = Fixture::new();
    let c = start(&fx, "").await;
    let tools = c.service.peer().list_all_tools().await.unwrap();
    let t = tools.iter().find(|t| t.name == "bash").expect("bash is published");
    let a = t.annotations.as_ref().unwrap();
    assert_eq!(a.read_only_hint, Some(false));
    assert_eq!(a.destructive_hint, Some(true));
    assert_eq!(a.idempotent_hint, Some(false));
    assert_eq!(a.open_world_hint, Some(false));
    c.stop().await;
    // Default trust: external = "ask"; this client can be asked nothing, so the call waits for
    // a person at a terminal (1 s here), then fails closed.
    let config = fx.config(
        "[daemon]\nstate_dir = \"{state}\"\n\n[trust]\napproval_timeout_secs = 1\n\n[[builtins]]\nid = \"tools-shell\"\n\
         grants = [\"filesystem\", \"spawn\"]\nfilesystem = [{ path = \"{root}\", write = true }]\n",
    );
    let c = Client::start(&fx, &config).await;
    let msg = c.err("bash", json!({ "command": "touch {root}/x" })).await;
    assert!(msg.contains("ask"), "{msg}");
    c.stop().await;
}

#[tokio::test]
async fn exit_codes_and_signals_are_normal_results() {
    let fx = Fixture::new();
    let c = start(&fx, "").await;
    let r = bash(&c, "echo hello; echo oops >&2").await;
    assert_eq!(r["exit_code"], 0);
    assert_eq!(out(&r), "hello\n");
    assert_eq!(r["stderr"], "oops\n");
    assert_eq!(r["timed_out"], false);
    assert_eq!(r["truncated"], false);
    assert!(r["containment"].as_str().unwrap().starts_with("full ("), "{r}");
    let r = bash(&c, "exit 3").await;
    assert_eq!(r["exit_code"], 3);
    // A child killed by a signal is reported as that signal (the shell's 128 + N).
    let r = bash(&c, "bash -c 'kill -9 $$'; exit $?").await;
    assert_eq!(r["signal"], 9, "{r}");
    assert!(r.get("exit_code").is_none(), "{r}");
    c.stop().await;
}

/// The command is an ordinary process, not PID 1 of its namespace (the launcher's init is):
/// `kill $$`, `kill -TERM $$` and `kill -KILL $$` end it with that signal, as anywhere.
/// Positive control: what it printed before is in the result.
#[tokio::test]
async fn kill_dollar_dollar_ends_the_command_with_that_signal() {
    let fx = Fixture::new();
    let c = start(&fx, "").await;
    for (kill, sig) in [("kill $$", 15), ("kill -TERM $$", 15), ("kill -KILL $$", 9)] {
        let r = bash(&c, &format!("echo before; {kill}; echo after")).await;
        assert_eq!(r["signal"], sig, "{kill}: {r}");
        assert_eq!(out(&r), "before\n", "{kill}: {r}");
    }
    c.stop().await;
    fx.assert_canary();
}

/// A daemon run as root runs commands as the roots' owner (here `nobody`, see `Fixture`):
/// what they create belongs to that user on the host, and a file readable only by root (mode
/// 0600, not masked) stays unreadable. Positive control: a world-readable file reads.
#[allow(clippy::print_stderr)] // says why it skips
#[tokio::test]
async fn a_root_daemon_runs_commands_as_the_roots_owner() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let fx = Fixture::new();
    let only_root = fx.root.join("root-only.txt");
    std::fs::write(&only_root, "ROOT ONLY\n").unwrap();
    std::fs::set_permissions(&only_root, std::fs::Permissions::from_mode(0o600)).unwrap();
    fx.write("public.txt", "public\n");
    let c = start(&fx, "").await;
    let r =
        bash(&c, "id -u; echo made > made.txt; cat public.txt; cat root-only.txt; echo end").await;
    if super::common::root_owned() {
        // The roots are root's and bound id-mapped: the command is their owner there, so the
        // project's own 0600 file reads (a root-only file outside the roots: suite::idmap).
        assert_eq!(out(&r), "65534\npublic\nROOT ONLY\nend\n", "{r}");
    } else {
        assert_eq!(out(&r), "65534\npublic\nend\n", "{r}");
        assert!(r["stderr"].as_str().unwrap().contains("Permission denied"), "{r}");
    }
    assert!(r["containment"].as_str().unwrap().contains("as uid 65534"), "{r}");
    assert_eq!(
        std::fs::metadata(fx.root.join("made.txt")).unwrap().uid(),
        super::common::made_by_commands_uid()
    );
    c.stop().await;
    fx.assert_canary();
}

/// Where a cgroup gives a memory bound (v2: a delegated cgroup, or root on a v2 host — the VMs
/// of `../shared/vm`; v1: a root daemon with the memory hierarchy, as in CI), a command tree
/// that outgrows `limits.memory_mb` is killed by the OOM killer, the result's `denied` names
/// the memory bound, and the daemon keeps answering. Each process alone stays under the limit;
/// only the cgroup sees the sum. Skipped (and says so) elsewhere.
#[allow(clippy::print_stderr)] // says why it skips
#[tokio::test]
async fn out_of_memory_kills_the_command_not_the_daemon() {
    let fx = Fixture::new();
    let config = shell_config(&fx, ", limits = { memory_mb = 96 }");
    let o = fx.std_command(&["doctor", "--config", config.to_str().unwrap()]).output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    if !text.contains("pids+memory") {
        eprintln!("skipped: no cgroup memory controller for the daemon here");
        return;
    }
    let c = Client::start_with_env(&fx, &config, Era::Legacy, &[]).await;
    let r = c
        .ok(
            "bash",
            // Each `tail` holds 40 MiB (one line) and then blocks writing it to a `sleep` that
            // does not read, so all four hold theirs at once however the machine schedules
            // them (found by CI under load: run one after another, none went over).
            json!({ "command": "for i in 1 2 3 4; do head -c 40M /dev/zero | tail | sleep 3 & done; wait; echo survived" }),
        )
        .await;
    assert!(
        r.get("signal").is_some() || r["stderr"].as_str().unwrap().contains("out of memory"),
        "{r}"
    );
    // cgroup v2's memory.oom.group kills the whole tree at once; v1 kills process by process.
    if text.contains("cgroup v2 pids+memory") {
        assert!(!out(&r).contains("survived"), "{r}");
    }
    if r["stderr"].as_str().unwrap().contains("out of memory") {
        let denied = r["denied"].as_array().cloned().unwrap_or_default();
        assert!(denied.iter().any(|d| d["what"] == "memory"), "{r}");
    }
    // The daemon answers, and the next command runs.
    let r = bash(&c, "echo alive").await;
    assert_eq!(out(&r), "alive\n", "{r}");
    c.stop().await;
}

/// Memory is bounded the way builds expect (issue 36 point 7): where a cgroup bounds the
/// command's resident memory, `RLIMIT_AS` is not set, so a program may reserve far more
/// address space than `limits.memory_mb` (wasm runtimes, JITs and sanitizers reserve tens of
/// GiB and use little); only where no cgroup bounds memory does `RLIMIT_AS` stay, and doctor
/// says what that costs.
#[tokio::test]
async fn a_large_reservation_works_where_a_cgroup_bounds_memory() {
    let fx = Fixture::new();
    let config = shell_config(&fx, ", limits = { memory_mb = 256 }");
    let o = fx.std_command(&["doctor", "--config", config.to_str().unwrap()]).output().unwrap();
    let doctor = String::from_utf8_lossy(&o.stdout).into_owned();
    let c = Client::start_with_env(&fx, &config, Era::Legacy, &[]).await;
    // 10 GiB reserved with no access (PROT_NONE: not counted against overcommit), one page
    // then made usable and written, as a wasm runtime or a JIT does.
    let script = "import ctypes\n\
                  libc = ctypes.CDLL(None)\n\
                  libc.mmap.restype = ctypes.c_void_p\n\
                  libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, \
                  ctypes.c_int, ctypes.c_int, ctypes.c_long]\n\
                  p = libc.mmap(None, 10 << 30, 0, 0x22, -1, 0)\n\
                  print('reserved', 10 << 30) if p not in (None, 2**64 - 1) else print('failed')";
    let r = bash(&c, &format!("python3 -c \"{script}\"")).await;
    if doctor.contains("pids+memory") {
        assert!(out(&r).contains(&format!("reserved {}", 10u64 << 30)), "{r}\n{doctor}");
        assert!(!doctor.contains("RLIMIT_AS per process only"), "{doctor}");
    } else {
        // Only RLIMIT_AS bounds memory here: the reservation fails, and doctor says why.
        assert!(!out(&r).contains("reserved"), "{r}");
        assert!(doctor.contains("RLIMIT_AS per process only"), "{doctor}");
    }
    c.stop().await;
    fx.assert_canary();
}

#[tokio::test]
async fn a_timeout_kills_the_whole_tree_and_is_a_normal_result() {
    let fx = Fixture::new();
    let c = start(&fx, "").await;
    let secs = unique_sleep();
    let started = Instant::now();
    let r = c
        .ok(
            "bash",
            json!({
                "command": format!("setsid sleep {secs} >/dev/null 2>&1 </dev/null & sleep {secs}"),
                "timeout_secs": 1,
            }),
        )
        .await;
    assert_eq!(r["timed_out"], true, "{r}");
    assert!(started.elapsed() < Duration::from_secs(8), "took {:?}", started.elapsed());
    assert!(
        wait_until(Duration::from_secs(3), || host_processes(&["sleep", &secs]).is_empty()).await,
        "a sleep outlived the timeout"
    );
    let msg = c.err("bash", json!({ "command": "true", "timeout_secs": 601 })).await;
    assert!(msg.contains("600"), "{msg}");
    c.stop().await;
}

/// A timeout's SIGTERM reaches the command as it would anywhere (the command is not PID 1 of
/// its namespace; the launcher's init is): `bash -c 'sleep N'` execs `sleep`, which the TERM
/// ends, and the result says SIGTERM. A command that ignores SIGTERM still gets the grace
/// period (then SIGKILL), and one that handles it runs its handler.
#[tokio::test]
async fn a_timeout_reaches_a_command_that_runs_as_pid_1_as_sigterm() {
    let fx = Fixture::new();
    let c = start(&fx, "").await;
    let secs = unique_sleep();
    let cases = [
        (format!("sleep {secs}"), json!(15), Value::Null, ""),
        // The shell ends by the TERM; what ignored it is killed by the init as the command
        // ends, not left for the grace period.
        (format!("(trap '' TERM; sleep {secs}) & wait"), json!(15), Value::Null, ""),
        // A command that ignores TERM itself gets the grace period, then SIGKILL.
        (format!("trap '' TERM; sleep {secs} & wait"), json!(9), Value::Null, ""),
        (
            format!("trap 'echo got; exit 3' TERM; sleep {secs} & wait"),
            Value::Null,
            json!(3),
            "got\n",
        ),
    ];
    for (command, signal, exit_code, stdout) in cases {
        let r = c.ok("bash", json!({ "command": command, "timeout_secs": 1 })).await;
        assert_eq!(r["timed_out"], true, "{command}: {r}");
        assert_eq!((&r["signal"], &r["exit_code"]), (&signal, &exit_code), "{command}: {r}");
        assert_eq!(out(&r), stdout, "{command}: {r}");
        assert!(
            wait_until(Duration::from_secs(3), || host_processes(&["sleep", &secs]).is_empty())
                .await,
            "{command}: a sleep outlived the timeout"
        );
    }
    c.stop().await;
}

#[tokio::test]
async fn output_is_capped_keeping_the_end_with_escapes_and_utf8_flags() {
    let fx = Fixture::new();
    let c = start(&fx, "").await;
    let r = bash(&c, "yes | head -c 10000000; echo END-MARK").await;
    assert_eq!(r["exit_code"], 0);
    assert_eq!(r["truncated"], true);
    assert!(r["dropped_bytes"].as_u64().unwrap() > 9_000_000, "{}", r["dropped_bytes"]);
    assert!(out(&r).ends_with("END-MARK\n"), "the end of the output was not kept");
    assert!(out(&r).chars().count() <= 30_000);
    // Control characters are shown escaped (`\u{0}` is five characters for one byte), and the
    // escapes count against the cap: stdout and stderr together stay within 30,000 characters.
    let r = bash(&c, "head -c 100000 /dev/zero; head -c 100000 /dev/zero >&2").await;
    let shown = out(&r).chars().count() + r["stderr"].as_str().unwrap().chars().count();
    assert!(shown <= 30_000, "{shown} characters shown");
    assert!(shown > 29_000, "the cap was not used: {shown}");
    assert!(out(&r).ends_with("\\u{0}"), "{}", &out(&r)[..40]);
    assert_eq!(r["truncated"], true);
    let r = bash(&c, r"printf 'a\033[31mb\r\n'; printf 'bad \377\n' >&2").await;
    assert_eq!(out(&r), "a\\u{1b}[31mb\\r\n");
    assert_eq!(r["invalid_utf8"], true);
    assert!(r["stderr"].as_str().unwrap().contains('\u{fffd}'));
    c.stop().await;
}

#[tokio::test]
async fn cwd_defaults_to_the_first_root_and_must_be_a_folder_in_a_root() {
    let fx = Fixture::new();
    fx.write("sub/f.txt", "x");
    let c = start(&fx, "").await;
    let r = bash(&c, "pwd").await;
    assert_eq!(out(&r).trim_end(), fx.root.to_str().unwrap());
    let r = c.ok("bash", json!({ "command": "pwd; ls", "cwd": "sub" })).await;
    assert_eq!(out(&r), format!("{}\nf.txt\n", fx.root.join("sub").display()));
    let r = c.ok("bash", json!({ "command": "pwd", "cwd": fx.home })).await;
    assert_eq!(out(&r).trim_end(), fx.home.to_str().unwrap());
    let msg = c.err("bash", json!({ "command": "pwd", "cwd": fx.outside })).await;
    assert!(msg.contains("cwd"), "{msg}");
    c.err("bash", json!({ "command": "pwd", "cwd": "../outside" })).await;
    c.err("bash", json!({ "command": "pwd", "cwd": "sub/f.txt" })).await;
    c.err("bash", json!({ "command": "pwd", "cwd": "missing" })).await;
    c.stop().await;
}

#[tokio::test]
async fn the_environment_is_minimal_and_nothing_of_the_daemon_leaks() {
    let fx = Fixture::new();
    let c = start(&fx, ", path = \"/usr/bin:/bin\"").await;
    let r = bash(&c, "env; cat /proc/1/environ /proc/self/environ | tr '\\0' '\\n'").await;
    let text = out(&r);
    assert!(!text.contains(SECRET), "the daemon's secret leaked: {text}");
    assert!(!text.contains("XDG_STATE_HOME"), "{text}");
    assert!(!text.contains("RUST_LOG"), "{text}");
    for want in [
        "PATH=/usr/bin:/bin\n".to_string(),
        format!("HANDS_TOOL_DIR={}/tool\n", fx.home.display()),
        format!("HOME={}\n", super::common::sandbox_home(&fx).display()),
        "TMPDIR=/tmp\n".into(),
        "LANG=C.UTF-8\n".into(),
        "TERM=dumb\n".into(),
        "PAGER=cat\n".into(),
        "GIT_PAGER=cat\n".into(),
        "GIT_EDITOR=true\n".into(),
        "GIT_TERMINAL_PROMPT=0\n".into(),
    ] {
        assert!(text.contains(&want), "missing {want:?} in {text}");
    }
    c.stop().await;
}

#[tokio::test]
async fn writes_land_in_the_root_only_and_credentials_are_masked() {
    let fx = Fixture::new();
    std::fs::create_dir_all(fx.home.join(".ssh")).unwrap();
    std::fs::write(fx.home.join(".ssh/id_rsa"), "PRIVATE KEY\n").unwrap();
    std::fs::write(fx.home.join("notes.txt"), "plain notes\n").unwrap();
    let c = start(&fx, "").await;
    let outside = fx.outside.display();
    let home = fx.home.display();
    let r = bash(
        &c,
        &format!(
            "echo made > inside.txt; echo evil > {outside}/canary.txt; touch {outside}/new; \
             echo evil > {home}/notes.txt; cat {home}/.ssh/id_rsa; cat {home}/notes.txt"
        ),
    )
    .await;
    assert_eq!(std::fs::read_to_string(fx.root.join("inside.txt")).unwrap(), "made\n");
    fx.assert_canary();
    assert!(!out(&r).contains("PRIVATE"), "{r}");
    assert!(out(&r).contains("plain notes"), "{r}");
    assert_eq!(std::fs::read_to_string(fx.home.join("notes.txt")).unwrap(), "plain notes\n");
    assert_eq!(std::fs::read_to_string(fx.home.join(".ssh/id_rsa")).unwrap(), "PRIVATE KEY\n");
    c.stop().await;
}

#[tokio::test]
async fn host_loopback_is_unreachable_but_the_private_loopback_works() {
    let fx = Fixture::new();
    let c = start(&fx, "").await;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let r = bash(&c, &format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected")).await;
    assert!(!out(&r).contains("connected"), "{r}");
    assert_ne!(r["exit_code"], 0);
    listener.set_nonblocking(true).unwrap();
    assert!(listener.accept().is_err(), "the host listener was reached");
    if std::path::Path::new("/usr/bin/python3").exists()
        && std::path::Path::new("/usr/bin/curl").exists()
    {
        let r = bash(
            &c,
            "echo served > page.txt; /usr/bin/python3 -m http.server 8000 --bind 127.0.0.1 \
             >/dev/null 2>&1 & for i in $(seq 50); do curl -s localhost:8000/page.txt && break; \
             sleep 0.1; done",
        )
        .await;
        assert_eq!(out(&r), "served\n", "{r}");
    }
    c.stop().await;
}

#[tokio::test]
async fn calls_beyond_max_concurrent_wait_instead_of_failing() {
    let fx = Fixture::new();
    let c = start(&fx, ", max_concurrent = 2").await;
    let started = Instant::now();
    let calls = (0..5).map(|_| bash(&c, "sleep 1; echo done"));
    let results = futures_join_all(calls).await;
    for r in &results {
        assert_eq!(out(r), "done\n", "{r}");
    }
    assert!(started.elapsed() >= Duration::from_millis(2500), "{:?}", started.elapsed());
    c.stop().await;
}

/// Awaits every future concurrently (no extra crate needed).
async fn futures_join_all<F: std::future::Future<Output = Value>>(
    fs: impl Iterator<Item = F>,
) -> Vec<Value> {
    let mut set = Vec::new();
    for f in fs {
        set.push(Box::pin(f));
    }
    let mut out = vec![Value::Null; set.len()];
    let mut pending: Vec<usize> = (0..set.len()).collect();
    std::future::poll_fn(|cx| {
        pending.retain(|&i| match set[i].as_mut().poll(cx) {
            std::task::Poll::Ready(v) => {
                out[i] = v.clone();
                false
            }
            std::task::Poll::Pending => true,
        });
        if pending.is_empty() { std::task::Poll::Ready(()) } else { std::task::Poll::Pending }
    })
    .await;
    out
}

#[tokio::test]
async fn cancelling_the_request_kills_the_command() {
    let fx = Fixture::new();
    let c = start(&fx, "").await;
    let secs = unique_sleep();
    let peer = c.service.peer().clone();
    let params = CallToolRequestParams::new("bash")
        .with_arguments(json!({ "command": format!("sleep {secs}") }).as_object().unwrap().clone());
    let call = tokio::spawn(async move { peer.call_tool(params).await });
    assert!(
        wait_until(Duration::from_secs(10), || !host_processes(&["sleep", &secs]).is_empty()).await,
        "the command never started"
    );
    // Dropping the request's future sends notifications/cancelled.
    call.abort();
    assert!(
        wait_until(Duration::from_secs(5), || host_processes(&["sleep", &secs]).is_empty()).await,
        "the sleep survived the cancellation"
    );
    // The server keeps serving.
    assert_eq!(out(&bash(&c, "echo still").await), "still\n");
    c.stop().await;
}

#[tokio::test]
async fn the_server_answers_while_a_fork_bomb_runs() {
    let fx = Fixture::new();
    let c = start(&fx, ", limits = { processes = 64 }").await;
    let peer = c.service.peer().clone();
    let params = CallToolRequestParams::new("bash").with_arguments(
        json!({ "command": "b() { b | b & }; b; while :; do :; done", "timeout_secs": 4 })
            .as_object()
            .unwrap()
            .clone(),
    );
    let bomb = tokio::spawn(async move { peer.call_tool(params).await });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let started = Instant::now();
    let r = bash(&c, "echo alive").await;
    assert_eq!(out(&r), "alive\n");
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    let r = tokio::time::timeout(Duration::from_secs(20), bomb).await.unwrap().unwrap().unwrap();
    assert_ne!(r.is_error, Some(true), "{}", text_of(&r));
    c.stop().await;
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

#[tokio::test]
async fn long_commands_send_progress_every_second() {
    use rmcp::ServiceExt;
    let fx = Fixture::new();
    let config = shell_config(&fx, "");
    let mut cmd = fx.command(&["serve", "--config", config.to_str().unwrap()]);
    cmd.stderr(std::process::Stdio::inherit());
    let log = ProgressLog::default();
    let service =
        log.clone().serve(rmcp::transport::TokioChildProcess::new(cmd).unwrap()).await.unwrap();
    let params = CallToolRequestParams::new("bash").with_arguments(
        json!({ "command": "echo tick; sleep 2.5; echo tock" }).as_object().unwrap().clone(),
    );
    let r = service.peer().call_tool(params).await.unwrap();
    assert_eq!(r.structured_content.unwrap()["stdout"], "tick\ntock\n");
    let seen = log.0.lock().unwrap().clone();
    assert!(seen.len() >= 2, "{seen:?}");
    assert!(seen.windows(2).all(|w| w[0].progress < w[1].progress), "{seen:?}");
    assert!(seen[0].message.as_deref().unwrap_or("").contains("bytes"), "{seen:?}");
    let _ = service.cancel().await;
}

#[test]
fn doctor_runs_the_sandbox_self_test_and_prints_each_guarantee() {
    let fx = Fixture::new();
    let config = shell_config(&fx, "");
    let o = fx.std_command(&["doctor", "--config", config.to_str().unwrap()]).output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{text}");
    assert!(text.contains("sandbox self-test: full"), "{text}");
    for line in [
        "write outside the roots",
        "read a masked path",
        "host loopback TCP",
        "UDP to the host",
        "read the daemon's environ",
    ] {
        let row = text.lines().find(|l| l.contains(line)).unwrap_or_else(|| panic!("{text}"));
        assert!(row.contains("holds"), "{row}");
    }
    assert!(!text.contains("MISSING"), "{text}");
}

#[tokio::test]
async fn a_sandbox_that_cannot_be_built_refuses_in_both_modes() {
    // One process in all: the launcher cannot even fork the command.
    let fx = Fixture::new();
    let c = start(&fx, ", limits = { processes = 0 }").await;
    let msg = c.err("bash", json!({ "command": "touch made" })).await;
    assert!(msg.contains("enforce") && msg.contains("sandbox can be built"), "{msg}");
    c.stop().await;
    let config = shell_config(&fx, ", limits = { processes = 0 }");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text.replace("[daemon]", "[sandbox]\nmode = \"best-effort\"\n\n[daemon]"),
    )
    .unwrap();
    let c = Client::start(&fx, &config).await;
    let r = c.call("bash", json!({ "command": "touch made" })).await;
    if r.is_error == Some(true) {
        // As root the cgroup's pids.max stops the launcher's own fork.
        assert!(text_of(&r).contains("hands sandbox:"), "{}", text_of(&r));
        assert!(!fx.root.join("made").exists());
    } else {
        // An ordinary user's bound is RLIMIT_NPROC in the user namespace, which the probe
        // found missing: best-effort runs the command and says it was not fully contained.
        let s = r.structured_content.clone().unwrap_or_default();
        let tier = s["containment"].as_str().unwrap_or_default();
        assert!(tier.starts_with("partial") && tier.contains("missing"), "{s}");
        assert!(!rustix::process::geteuid().is_root(), "as root this must refuse: {s}");
    }
    c.stop().await;
}

#[tokio::test]
async fn host_system_secrets_are_masked_while_the_rest_of_etc_reads() {
    assert!(std::path::Path::new("/etc/shadow").exists(), "this test needs a host /etc/shadow");
    let fx = Fixture::new();
    let c = start(&fx, "").await;
    let r =
        bash(&c, "head -c 200 /etc/shadow; echo; echo passwd-lines=$(wc -l < /etc/passwd)").await;
    let text = out(&r);
    assert!(!text.contains("root:"), "/etc/shadow must read as masked: {r}");
    assert!(text.contains("passwd-lines="), "{r}");
    assert!(!text.contains("passwd-lines=0"), "/etc/passwd stays readable: {r}");
    c.stop().await;
}

#[tokio::test]
async fn dns_and_raw_sockets_fail_while_local_names_and_udp_sockets_work() {
    let fx = Fixture::new();
    let c = start(&fx, "").await;
    let r = bash(
        &c,
        "getent hosts localhost >/dev/null && echo local-ok; \
         getent hosts example.com >/dev/null && echo dns-LEAK || echo dns-refused; \
         /usr/bin/python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM); print(\"udp-ok\")'; \
         /usr/bin/python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP); print(\"raw-LEAK\")' 2>/dev/null || echo raw-refused",
    )
    .await;
    let text = out(&r);
    for want in ["local-ok", "dns-refused", "udp-ok", "raw-refused"] {
        assert!(text.contains(want), "missing {want}: {r}");
    }
    assert!(!text.contains("LEAK"), "{r}");
    c.stop().await;
}

#[tokio::test]
async fn a_host_unix_socket_outside_the_roots_is_unreachable() {
    let fx = Fixture::new();
    // A stand-in for docker.sock or an ssh-agent, in a folder outside every root.
    let host = tempfile::tempdir().unwrap();
    let sock = host.path().join("agent.sock");
    let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    listener.set_nonblocking(true).unwrap();
    let c = start(&fx, "").await;
    let connect = |path: &str| {
        format!(
            "/usr/bin/python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); print(\"connected\")' {path} 2>/dev/null || echo refused"
        )
    };
    let r = bash(&c, &connect(sock.to_str().unwrap())).await;
    assert_eq!(out(&r), "refused\n", "{r}");
    assert!(listener.accept().is_err(), "nothing reached the host socket");
    // Positive control: a unix socket made inside the root by the command itself works.
    let inside = "/usr/bin/python3 -c 'import socket; l=socket.socket(socket.AF_UNIX); l.bind(\"in.sock\"); l.listen(1); s=socket.socket(socket.AF_UNIX); s.connect(\"in.sock\"); print(\"connected\")'";
    let r = bash(&c, inside).await;
    assert_eq!(out(&r), "connected\n", "{r}");
    c.stop().await;
    fx.assert_canary();
}

#[tokio::test]
async fn a_hard_link_to_a_credential_file_inside_a_root_reads_as_masked() {
    let fx = Fixture::new();
    std::fs::create_dir_all(fx.home.join(".ssh")).unwrap();
    std::fs::write(fx.home.join(".ssh/id_ed25519"), "PRIVATE KEY\n").unwrap();
    std::fs::hard_link(fx.home.join(".ssh/id_ed25519"), fx.root.join("innocent.txt")).unwrap();
    std::fs::write(fx.root.join("plain.txt"), "plain\n").unwrap();
    let c = start(&fx, "").await;
    let r = bash(&c, "cat innocent.txt; cat plain.txt").await;
    assert!(!out(&r).contains("PRIVATE"), "{r}");
    assert!(out(&r).contains("plain"), "{r}");
    assert_eq!(std::fs::read_to_string(fx.root.join("innocent.txt")).unwrap(), "PRIVATE KEY\n");
    c.stop().await;
    fx.assert_canary();
}

/// A `path` entry under `~` is taken from the daemon's HOME (no shell expands `~` in PATH), and
/// its folder is bound read-only into the sandbox like the system folders: a toolchain in
/// `~/tools/bin` runs and cannot be changed from inside; the rest of HOME stays unseen.
#[tokio::test]
async fn a_path_folder_under_home_is_expanded_and_bound_read_only() {
    use std::os::unix::fs::PermissionsExt;
    let fx = Fixture::new();
    let tool = fx.home.join("tools/bin/hello-tool");
    std::fs::create_dir_all(tool.parent().unwrap()).unwrap();
    std::fs::write(&tool, "#!/bin/sh\necho hello from the toolchain\n").unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(fx.home.join("notes.txt"), "private notes\n").unwrap();
    let config = fx.config(
        "[daemon]\nstate_dir = \"{state}\"\n\n[[builtins]]\nid = \"tools-shell\"\n\
         grants = [\"filesystem\", \"spawn\"]\nfilesystem = [{ path = \"{root}\", write = true }]\n\
         config = { trust = { external = \"allow\" }, path = \"~/tools/bin:/usr/bin:/bin\" }\n",
    );
    let c = Client::start_with_env(&fx, &config, Era::Legacy, &[]).await;
    let home = fx.home.display();
    let r = bash(
        &c,
        &format!(
            "hello-tool; echo \"PATH=$PATH\"; echo evil > {home}/tools/bin/hello-tool; \
             cat {home}/notes.txt; echo done"
        ),
    )
    .await;
    let shown = format!("{}{}", out(&r), r["stderr"].as_str().unwrap_or_default());
    assert!(out(&r).contains("hello from the toolchain"), "{shown}");
    assert!(out(&r).contains(&format!("PATH={home}/tools/bin:/usr/bin:/bin")), "{shown}");
    assert!(!shown.contains("private notes"), "the rest of HOME was seen: {shown}");
    assert_eq!(
        std::fs::read_to_string(&tool).unwrap(),
        "#!/bin/sh\necho hello from the toolchain\n",
        "the toolchain was changed from inside"
    );
    c.stop().await;
    fx.assert_canary();
}

/// `env` naming a folder commands cannot see (CARGO_HOME = "~/.cargo" with no root for it) is a
/// doctor warning that says how to make it visible; declared as a read-only root, it is not.
#[test]
fn doctor_warns_of_an_env_folder_commands_cannot_see() {
    let fx = Fixture::new();
    std::fs::create_dir_all(fx.home.join(".cargo")).unwrap();
    let doctor = |extra_root: &str| {
        let config = fx.config(&format!(
            "[daemon]\nstate_dir = \"{{state}}\"\n\n[[builtins]]\nid = \"tools-shell\"\n\
             grants = [\"filesystem\", \"spawn\"]\n\
             filesystem = [{{ path = \"{{root}}\", write = true }}{extra_root}]\n\
             config = {{ trust = {{ external = \"allow\" }}, \
             env = {{ CARGO_HOME = \"~/.cargo\", RUST_LOG = \"info\" }} }}\n"
        ));
        let o = fx.std_command(&["doctor", "--config", config.to_str().unwrap()]).output().unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let warning = format!("env CARGO_HOME names the folder {}", fx.home.join(".cargo").display());
    let out = doctor("");
    assert!(out.contains(&warning), "{out}");
    assert!(out.contains("declare it as a root of tools-shell"), "{out}");
    assert!(!out.contains("env RUST_LOG"), "{out}");
    let out = doctor(", { path = \"{home}/.cargo\" }");
    assert!(!out.contains(&warning), "{out}");
}

/// The sandbox self-test runs beside serving (so `initialize` answers at once, issue 36 point
/// 4), and a command called the moment the client is in waits for it: its result states the
/// tier the self-test found, never "not probed", and the command ran contained (the secret in
/// the daemon's environment stays out).
#[tokio::test]
async fn a_command_called_at_once_waits_for_the_self_test() {
    let fx = Fixture::new();
    let c = start(&fx, "").await;
    let r = bash(&c, "echo \"[$HANDS_TEST_SECRET]\"").await;
    let tier = r["containment"].as_str().unwrap();
    assert!(!tier.contains("not probed"), "{r}");
    assert!(tier.contains('('), "a tier names its mechanisms: {r}");
    assert_eq!(out(&r), "[]\n", "{r}");
}

/// `SHELL` names the sandbox's bash: a program that starts the user's shell — tmux above all —
/// gets a shell, not the run-as user's login shell, which for `nobody` is `nologin` (found by
/// the fourth attack pass: a `tmux` started in `bash` ended at once). `env` may name another.
#[tokio::test]
async fn a_tmux_started_in_bash_gets_a_shell() {
    let fx = Fixture::new();
    let c = start(&fx, "").await;
    let r = bash(
        &c,
        "echo \"shell=$SHELL\"; s=/tmp/t.sock; tmux -S $s new-session -d -s in 'sleep 30' && \
         sleep 0.3 && tmux -S $s list-sessions -F 'alive #{session_name}'; \
         tmux -S $s kill-server 2>/dev/null; true",
    )
    .await;
    let text = out(&r);
    let shell = text.lines().find_map(|l| l.strip_prefix("shell=")).unwrap_or_default();
    assert!(shell.ends_with("/bash"), "SHELL is the sandbox's bash: {r}");
    assert!(text.contains("alive in"), "the session lives: {r}");
    c.stop().await;
    // A person's `env` still decides.
    let config = fx.config(
        "[daemon]\nstate_dir = \"{state}\"\n\n[[builtins]]\nid = \"tools-shell\"\n\
         grants = [\"filesystem\", \"spawn\"]\nfilesystem = [{ path = \"{root}\", write = true }]\n\
         config = { trust = { external = \"allow\" }, env = { SHELL = \"/bin/sh\" } }\n",
    );
    let c = Client::start(&fx, &config).await;
    assert!(out(&bash(&c, "echo \"shell=$SHELL\"").await).contains("shell=/bin/sh\n"));
    fx.assert_canary();
}
