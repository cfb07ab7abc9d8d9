//! The cost of the sandbox: the `bash` tool running `true` through the real binary over stdio,
//! against a bare spawn of the same command, a direct run of the sandbox launcher with the
//! spec the daemon builds, and the same command under bubblewrap (`bwrap --unshare-all`, the
//! peer of issue 34), all in the same run, interleaved call by call. Each round pauses after
//! the tool's call, as an agent reads the answer, while the daemon makes the next call's
//! sandbox ready (decision 0077); the peers are timed after the pause.
//!
//! Run: `cargo bench --bench bash`. The spec is taken from the daemon itself: while a
//! `sleep` runs through the tool, the launcher's spec descriptor (`/proc/<launcher>/fd/3`, a
//! sealed memfd the launcher keeps open) is read, and its `argv` swapped for `true`.
//!
//! By default it times the `hands` and `hands-sandbox` that `cargo bench` builds;
//! `HANDS_BENCH_BIN=/path/to/hands` times that binary instead (so the bench binary can run as an
//! ordinary user, or in a VM). `HANDS_BENCH_RUNS=N` changes the 200 runs. Without `bwrap` on
//! `PATH` its column is left out, with a note.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]
// Benchmarks spawn the binary and ripgrep, and make their trees by path.
#![allow(clippy::disallowed_methods)]

#[path = "common/mod.rs"]
mod common;
use common::ms;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt, service::RunningService};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

type Client = RunningService<RoleClient, ()>;

const SLEEP: &str = "sleep 2.71828";

/// How long after each `bash` call the peers wait: the daemon makes the next call's sandbox
/// ready meanwhile (decision 0077), which would otherwise run beside their timing.
const PAUSE: Duration = Duration::from_millis(25);

/// bubblewrap running bash: every namespace, the host's root read-only, its
/// own `/dev`, `/proc` and `/tmp` (issue 34's peer).
const BWRAP: [&str; 14] = [
    "bwrap",
    "--unshare-all",
    "--die-with-parent",
    "--new-session",
    "--ro-bind",
    "/",
    "/",
    "--dev",
    "/dev",
    "--proc",
    "/proc",
    "--tmpfs",
    "/tmp",
    "bash",
];

fn bin() -> PathBuf {
    std::env::var_os("HANDS_BENCH_BIN").map_or_else(
        // Built by `cargo bench` itself (the bench profile, which is the release one): a
        // `cargo build --release` here would link it again under the other profile's name.
        || PathBuf::from(env!("CARGO_BIN_EXE_hands")),
        PathBuf::from,
    )
}

async fn start(root: &Path, state: &Path) -> (Client, u32) {
    let cfg = state.join("daemon.toml");
    std::fs::write(
        &cfg,
        format!(
            "[daemon]\nstate_dir = \"{}\"\n[[builtins]]\nid = \"tools-shell\"\n\
             grants = [\"filesystem\", \"spawn\"]\n\
             filesystem = [{{ path = \"{}\", write = true }}]\n\
             config = {{ trust = {{ external = \"allow\" }} }}\n",
            state.display(),
            root.display()
        ),
    )
    .unwrap();
    let mut cmd = tokio::process::Command::new(bin());
    cmd.args(["serve", "--config", cfg.to_str().unwrap()]);
    let t = TokioChildProcess::new(cmd).unwrap();
    let pid = t.id().unwrap();
    (().serve(t).await.unwrap(), pid)
}

async fn bash(peer: &rmcp::Peer<RoleClient>, command: &str) -> Value {
    let Value::Object(m) = json!({ "command": command }) else { unreachable!() };
    let r = peer
        .call_tool(CallToolRequestParams::new("bash".to_string()).with_arguments(m))
        .await
        .unwrap();
    assert_ne!(r.is_error, Some(true), "bash: {:?}", r.content);
    r.structured_content.unwrap()
}

/// The spec of a child of `daemon` that is the launcher running [`SLEEP`].
fn launcher_spec(daemon: u32) -> Option<Value> {
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let ppid = stat.rsplit(')').next().and_then(|s| s.split_whitespace().nth(1));
        if ppid != Some(daemon.to_string().as_str()) {
            continue;
        }
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        if args.get(1) != Some(&&b"__sandbox"[..]) {
            continue;
        }
        let fd3 = std::fs::read(format!("/proc/{pid}/fd/3")).unwrap_or_default();
        let Ok(spec) = serde_json::from_slice::<Value>(&fd3) else { continue };
        if spec["argv"] == json!(["bash", "--noprofile", "--norc", "-c", SLEEP]) {
            return Some(spec);
        }
    }
    None
}

async fn timed(cmd: &mut tokio::process::Command) -> Duration {
    let t = Instant::now();
    let out = cmd.output().await.unwrap();
    let d = t.elapsed();
    assert!(out.status.success(), "{:?}: {}", cmd, String::from_utf8_lossy(&out.stderr));
    d
}

/// Median and p90.
fn stats(mut v: Vec<Duration>) -> (f64, f64) {
    v.sort();
    (ms(v[v.len() / 2]), ms(v[v.len() * 9 / 10]))
}

#[tokio::main]
async fn main() {
    #[allow(non_snake_case)]
    let RUNS: usize =
        std::env::var("HANDS_BENCH_RUNS").ok().and_then(|n| n.parse().ok()).unwrap_or(200);
    let root = tempfile::tempdir().unwrap();
    let root_path = std::fs::canonicalize(root.path()).unwrap();
    let state = tempfile::tempdir().unwrap();
    let (c, daemon) = start(&root_path, state.path()).await;
    let peer = c.peer().clone();

    // The spec the daemon builds, read off the launcher's command line while it runs.
    let sleeper = {
        let peer = peer.clone();
        tokio::spawn(async move { bash(&peer, SLEEP).await })
    };
    let mut spec = None;
    let t = Instant::now();
    while spec.is_none() && t.elapsed() < Duration::from_secs(30) {
        spec = launcher_spec(daemon);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut spec = spec.expect("the launcher of the sleep was seen in /proc");
    sleeper.await.unwrap();
    spec["argv"] = json!(["bash", "--noprofile", "--norc", "-c", "true"]);
    // The launcher dies with the daemon that started it (`parent`); the bench starts these.
    spec.as_object_mut().unwrap().remove("parent");
    let spec_value = spec.clone();
    let spec = spec.to_string();

    // What the daemon starts its commands through: `hands-sandbox` beside the binary.
    let launcher_bin = hands_sandbox::launcher::launcher_binary(&bin());
    let launcher = || {
        // Its stdin is the spec and the report channel, whose reports no one reads here.
        let (mut cmd, _reports) =
            hands_sandbox::launcher::launcher_command(&launcher_bin, spec.as_bytes()).unwrap();
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        tokio::process::Command::from(cmd)
    };
    // bubblewrap, when this machine has it, with the same environment and folder as the bare
    // spawn (the folder is under the `/tmp` its tmpfs hides: bwrap falls back to `/`).
    let has_bwrap = std::process::Command::new("bwrap")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    // `words`: the program and its arguments before bash's own.
    let spawn_in = |words: &[&str]| {
        let mut cmd = tokio::process::Command::new(words[0]);
        cmd.args(&words[1..])
            .args(["--noprofile", "--norc", "-c", "true"])
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .current_dir(&root_path)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    };
    let bare = || spawn_in(&["bash"]);
    let bwrap = || spawn_in(&BWRAP);

    // Warm-up: page cache, the daemon's first call.
    for _ in 0..10 {
        assert_eq!(bash(&peer, "true").await["exit_code"], 0);
        timed(&mut launcher()).await;
        timed(&mut bare()).await;
        if has_bwrap {
            timed(&mut bwrap()).await;
        }
    }

    let mut tool = Vec::with_capacity(RUNS);
    let mut direct = Vec::with_capacity(RUNS);
    let mut spawn = Vec::with_capacity(RUNS);
    let mut bubble = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let t = Instant::now();
        let r = bash(&peer, "true").await;
        tool.push(t.elapsed());
        assert_eq!(r["exit_code"], 0, "{r}");
        // The daemon builds the next call's sandbox once a call has ended (decision 0077), as
        // an agent reads the answer: the peers are timed after it, not beside it.
        tokio::time::sleep(PAUSE).await;
        // The bare spawn first: what runs first after an idle pause is the slowest (the
        // launcher, timed there, took 12.9-14.5 ms against 4.2 ms back to back), and a slower
        // bare spawn only makes every overhead, and so bwrap's, smaller.
        spawn.push(timed(&mut bare()).await);
        if has_bwrap {
            bubble.push(timed(&mut bwrap()).await);
        }
        direct.push(timed(&mut launcher()).await);
    }

    // The launcher with each process bound this machine offers (SPEC §5.2 item 4): the daemon's
    // choice, and RLIMIT_NPROC (what an ordinary user without a cgroup of its own gets).
    let mut variants =
        vec![(spec_value["bound"]["kind"].as_str().unwrap_or("none").to_string(), spec.clone())];
    let mut rlimit = spec_value.clone();
    rlimit["bound"] = json!({ "kind": "rlimit" });
    if variants[0].0 != "rlimit" {
        variants.push(("rlimit".to_string(), rlimit.to_string()));
    }
    let mut per_bound = Vec::new();
    for (name, spec) in &variants {
        let run = || {
            let (mut cmd, _reports) =
                hands_sandbox::launcher::launcher_command(&launcher_bin, spec.as_bytes()).unwrap();
            cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
            tokio::process::Command::from(cmd)
        };
        let mut times = Vec::with_capacity(RUNS);
        let mut bare_times = Vec::with_capacity(RUNS);
        for _ in 0..RUNS {
            times.push(timed(&mut run()).await);
            bare_times.push(timed(&mut bare()).await);
        }
        per_bound.push((name.clone(), stats(times), stats(bare_times)));
    }
    // Only now: the spec joins the module's network namespace, whose holder ends within 2 s of
    // its last daemon.
    c.cancel().await.unwrap();

    let (tool, tool90) = stats(tool);
    let (direct, direct90) = stats(direct);
    let (spawn, spawn90) = stats(spawn);
    // The owner of /proc/self is this process's effective uid.
    let euid = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata("/proc/self").unwrap());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    println!(
        "{RUNS} runs each of `bash --noprofile --norc -c true`, interleaved, as uid {euid}, \
         kernel {}, bound {}:",
        kernel.trim(),
        variants[0].0
    );
    println!("  bash tool over MCP         median {tool:.2} ms · p90 {tool90:.2} ms");
    println!("  bare spawn                 median {spawn:.2} ms · p90 {spawn90:.2} ms");
    let bwrap_median = has_bwrap.then(|| {
        let (bw, bw90) = stats(bubble);
        println!("  bwrap --unshare-all        median {bw:.2} ms · p90 {bw90:.2} ms");
        bw
    });
    if !has_bwrap {
        println!("  bwrap: not on PATH, its column is left out");
    }
    // The launcher with the daemon's spec, each round after the pause: a fresh sandbox's cost,
    // what a call pays when none was made ready (the first, or after the roots changed).
    println!("  launcher (direct), fresh   median {direct:.2} ms · p90 {direct90:.2} ms");
    println!("  overhead (tool − bare)     {:.2} ms (goal ≤ 15 ms)", tool - spawn);
    println!("  a fresh launcher (direct − bare) {:.2} ms", direct - spawn);
    if let Some(bw) = bwrap_median {
        let over = bw - spawn;
        let (b2b, _) = per_bound[0].1;
        let b2b_bare = per_bound[0].2.0;
        println!("  bwrap overhead (bwrap − bare) {over:.2} ms");
        println!(
            "  hands over bwrap: tool {:.2}× (issue 34: ≤ 1.0×) · a fresh launcher {:.2}× after \
             the pause, {:.2}× back to back (below) bwrap's overhead",
            (tool - spawn) / over,
            (direct - spawn) / over,
            (b2b - b2b_bare) / over
        );
    }
    for (name, (median, p90), (bare, _)) in per_bound {
        println!(
            "  launcher, bound {name}: median {median:.2} ms · p90 {p90:.2} ms · \
             launcher only {:.2} ms",
            median - bare
        );
    }
}
