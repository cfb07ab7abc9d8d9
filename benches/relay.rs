//! Runner mode measured (SPEC §13): a cheap call's median through `hands relay` against the
//! same call straight to `hands serve --http`, then 1,000 calls from 20 agents spread over 5
//! runners at once (errors, and each process's peak resident memory).
//!
//! Run: `cargo bench --bench relay` (a release build). The relay listens on loopback without
//! TLS (the agents' rmcp client here has none); each runner dials it over `ws://` to loopback.
//! Writes the Markdown table to stdout.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]
// Benchmarks spawn the binary and make their trees by path.
#![allow(clippy::disallowed_methods)]

#[path = "common/mod.rs"]
mod common;
use common::{Client, call, median, ms};
use rmcp::ServiceExt;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::json;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const RUNNERS: usize = 5;
const AGENTS: usize = 20;
const CALLS: usize = 1000;
const RTT_CALLS: usize = 300;

fn hands() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_hands"))
}

fn sha256_hex(s: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(s.as_bytes()))
}

/// Spawns `cmd` and waits for a stderr line containing `marker`; returns the child and the
/// line. The rest of its stderr is drained.
async fn spawn(mut cmd: Command, marker: &str) -> (Child, String) {
    cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped()).kill_on_drop(true);
    let mut child = cmd.spawn().unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let line = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let l = lines.next_line().await.unwrap().expect("exited before its banner");
            if l.contains(marker) {
                return l;
            }
        }
    })
    .await
    .expect("no banner");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, line)
}

fn daemon_toml(dir: &Path, extra: &str) -> PathBuf {
    let root = dir.join("root");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("small.txt"), "a cheap read\n").unwrap();
    let text = format!(
        "[daemon]\nstate_dir = \"{state}\"\n\n{extra}\n[[builtins]]\nid = \"tools-fs\"\n\
         grants = [\"filesystem\"]\nfilesystem = [{{ path = \"{root}\", write = true }}]\n",
        state = dir.join("state").display(),
        root = root.display(),
    );
    let file = dir.join("daemon.toml");
    std::fs::write(&file, text).unwrap();
    file
}

async fn client(url: String, token: Option<&str>) -> Client {
    let mut config = StreamableHttpClientTransportConfig::with_uri(url);
    if let Some(t) = token {
        config = config.auth_header(t.to_string());
    }
    ().serve(StreamableHttpClientTransport::from_config(config)).await.unwrap()
}

async fn p50(c: &Client) -> Duration {
    let args = json!({"path": "small.txt"});
    for _ in 0..20 {
        call(c, "read", args.clone()).await;
    }
    let mut times = Vec::new();
    for _ in 0..RTT_CALLS {
        let t = Instant::now();
        call(c, "read", args.clone()).await;
        times.push(t.elapsed());
    }
    median(times)
}

fn peak_mib(child: &Child) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id().unwrap())).unwrap();
    let kb: f64 = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap();
    kb / 1024.0
}

#[tokio::main]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path();
    // The relay: 5 runners, 20 agents (agent i reaches runner i % 5).
    let runner_token = |i: usize| format!("runner-{i}-token-0123456789abcdef");
    let agent_token = |i: usize| format!("agent-{i}-token-0123456789abcdef");
    let mut relay_toml =
        "[relay]\nlisten = \"127.0.0.1:0\"\npublic_url = \"http://127.0.0.1\"\n".to_string();
    for i in 0..RUNNERS {
        relay_toml += &format!(
            "\n[[relay.runners]]\nname = \"box-{i}\"\ntoken_sha256 = \"{}\"\n",
            sha256_hex(&runner_token(i))
        );
    }
    let mut relay_cmd = Command::new(hands());
    for i in 0..AGENTS {
        relay_toml += &format!(
            "\n[[relay.agents]]\nname = \"agent-{i}\"\ntoken_env = \"AGENT_{i}\"\nrunners = [\"box-{}\"]\n",
            i % RUNNERS
        );
        relay_cmd.env(format!("AGENT_{i}"), agent_token(i));
    }
    std::fs::write(base.join("relay.toml"), relay_toml).unwrap();
    relay_cmd.args(["relay", "--config"]).arg(base.join("relay.toml"));
    let (relay, banner) = spawn(relay_cmd, "listening on http://").await;
    let relay_addr: SocketAddr =
        banner.split("http://").nth(1).unwrap().split_whitespace().next().unwrap().parse().unwrap();

    let mut runners = Vec::new();
    for i in 0..RUNNERS {
        let d = base.join(format!("runner-{i}"));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("token"), runner_token(i)).unwrap();
        let runner = format!(
            "[runner]\nurl = \"ws://{relay_addr}/runner\"\nname = \"box-{i}\"\ntoken_file = \"{}\"\n",
            d.join("token").display()
        );
        let config = daemon_toml(&d, &runner);
        let mut cmd = Command::new(hands());
        cmd.args(["serve", "--config"]).arg(&config).env("RUST_LOG", "info");
        runners.push(spawn(cmd, "runner: connected").await.0);
    }

    // Direct HTTP, for comparison.
    let d = base.join("direct");
    std::fs::create_dir_all(&d).unwrap();
    let config = daemon_toml(&d, "");
    let mut cmd = Command::new(hands());
    cmd.args(["serve", "--config"]).arg(&config).args(["--http", "127.0.0.1:0"]);
    let (_direct, banner) = spawn(cmd, "/mcp").await;
    let direct_addr =
        banner.split("http://").nth(1).unwrap().split("/mcp").next().unwrap().to_string();
    let direct = client(format!("http://{direct_addr}/mcp"), None).await;
    let direct_p50 = p50(&direct).await;
    let through =
        client(format!("http://{relay_addr}/runners/box-0/mcp"), Some(&agent_token(0))).await;
    let relay_p50 = p50(&through).await;

    // 1,000 calls: 20 agents, each its own session, 50 calls each, all at once.
    let start = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..AGENTS {
        let url = format!("http://{relay_addr}/runners/box-{}/mcp", i % RUNNERS);
        let token = agent_token(i);
        tasks.push(tokio::spawn(async move {
            let c = client(url, Some(&token)).await;
            let mut errors = 0;
            let mut times = Vec::new();
            for _ in 0..CALLS / AGENTS {
                let t = Instant::now();
                let Ok(serde_json::Value::Object(m)) =
                    serde_json::to_value(json!({"path": "small.txt"}))
                else {
                    unreachable!()
                };
                let r = c
                    .peer()
                    .call_tool(rmcp::model::CallToolRequestParams::new("read").with_arguments(m))
                    .await;
                if !matches!(&r, Ok(r) if r.is_error != Some(true)) {
                    errors += 1;
                }
                times.push(t.elapsed());
            }
            (errors, times)
        }));
    }
    let mut errors = 0;
    let mut all = Vec::new();
    for t in tasks {
        let (e, times) = t.await.unwrap();
        errors += e;
        all.extend(times);
    }
    let wall = start.elapsed();
    all.sort();
    let p99 = all[all.len() * 99 / 100];
    let med = all[all.len() / 2];
    let runner_rss: Vec<String> = runners.iter().map(|r| format!("{:.0}", peak_mib(r))).collect();
    println!("| measure | value |\n|---|---|");
    println!(
        "| `read` p50, direct `hands serve --http` ({RTT_CALLS} calls) | {:.2} ms |",
        ms(direct_p50)
    );
    println!(
        "| `read` p50, through `hands relay` to a runner ({RTT_CALLS} calls) | {:.2} ms |",
        ms(relay_p50)
    );
    println!(
        "| {CALLS} calls, {AGENTS} agents over {RUNNERS} runners, at once: wall | {:.2} s |",
        wall.as_secs_f64()
    );
    println!("| … p50 / p99 per call | {:.2} / {:.2} ms |", ms(med), ms(p99));
    println!("| … errors | {errors} |");
    println!("| peak RSS, relay | {:.0} MiB |", peak_mib(&relay));
    println!("| peak RSS, each runner | {} MiB |", runner_rss.join(", "));
}
