//! `hands` measured against the field, side by side on the same data in one run: round trips
//! over stdio and HTTP against the reference MCP filesystem server
//! (`@modelcontextprotocol/server-filesystem`, installed from npm on first use; over HTTP
//! behind `supergateway`, the usual stdio-to-HTTP bridge, since it has no HTTP), `glob` and
//! `grep` against its `search_files` and against `rg`, `bash` sandboxed against a bare spawn,
//! the daemon's idle and peak memory, and a load test of 50 concurrent HTTP clients.
//!
//! Run: `cargo bench --bench field` (all sections), or name some:
//! `cargo bench --bench field -- rtt search bash load`. Needs `node` (≥ 20), `npm` and `rg` on
//! PATH. Writes the Markdown table to stdout and to `target/bench-field.md`.
//! `HANDS_BENCH_LOAD_CALLS` sets the calls per load client (default 1,000).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]
// Benchmarks spawn the binary and ripgrep, and make their trees by path.
#![allow(clippy::disallowed_methods)]

#[path = "common/mod.rs"]
mod common;
use common::{Client, call, median, ms};
use rmcp::ClientServiceExt;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, ClientRequest, PingRequest, ProtocolVersion};
use rmcp::service::ClientLifecycleMode;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, BufReader};

/// The reference server's npm version, pinned so that runs compare like with like.
const REFERENCE: &str = "@modelcontextprotocol/server-filesystem@2026.8.31";

fn manifest() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The stdio-to-HTTP bridge the reference is served over HTTP with (it has no HTTP transport
/// of its own): the usual way to put a stdio MCP server behind a URL.
const BRIDGE: &str = "supergateway@4.0.0";

/// Installs `package` (npm name@version) into the bench cache on first use; returns `entry`
/// (a path inside `node_modules`).
fn npm_cached(package: &str, entry: &str) -> PathBuf {
    let cache = common::data_dir();
    let entry = cache.join("node_modules").join(entry);
    if !entry.exists() {
        std::fs::create_dir_all(&cache).unwrap();
        let st = std::process::Command::new("npm")
            .args(["install", "--silent", "--no-audit", "--no-fund", "--prefix"])
            .arg(&cache)
            .arg(package)
            .status()
            .expect("npm on PATH");
        assert!(st.success(), "npm install {package} failed");
    }
    entry
}

/// The reference server's entry point (installed on first use).
fn reference_server() -> PathBuf {
    npm_cached(REFERENCE, "@modelcontextprotocol/server-filesystem/dist/index.js")
}

fn tool_version(bin: &str, arg: &str) -> String {
    std::process::Command::new(bin)
        .arg(arg)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).lines().next().unwrap_or("").to_string())
        .unwrap_or_default()
}

fn status_kib(pid: u32, field: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

fn pct(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    v[((v.len() as f64 * p) as usize).min(v.len() - 1)]
}

fn fs_config(root: &Path, state: &Path, shell: bool) -> PathBuf {
    let mut text = format!(
        "[daemon]\nstate_dir = \"{s}\"\n[[builtins]]\nid = \"tools-fs\"\ngrants = [\"filesystem\"]\nfilesystem = [{{ path = \"{r}\", write = true }}]\n",
        s = state.display(),
        r = root.display()
    );
    if shell {
        let _ = write!(
            text,
            "[[builtins]]\nid = \"tools-shell\"\ngrants = [\"filesystem\", \"spawn\"]\nfilesystem = [{{ path = \"{r}\", write = true }}]\nconfig = {{ trust = {{ external = \"allow\" }} }}\n",
            r = root.display()
        );
    }
    let cfg = state.join(if shell { "shell.toml" } else { "daemon.toml" });
    std::fs::write(&cfg, text).unwrap();
    cfg
}

/// The `hands` binary measured: the one `cargo bench` built (the bench profile, which is the
/// release one), or `HANDS_BENCH_BIN` (to compare with another build on the same data in the
/// same hour).
fn hands_bin() -> PathBuf {
    std::env::var_os("HANDS_BENCH_BIN")
        .map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_hands")), PathBuf::from)
}

/// `hands serve` over stdio on `cfg`; the client and the daemon's pid.
async fn hands_stdio(cfg: &Path) -> (Client, u32) {
    let mut cmd = tokio::process::Command::new(hands_bin());
    cmd.args(["serve", "--config", cfg.to_str().unwrap()]).env("RUST_LOG", "warn");
    let (t, _) = TokioChildProcess::builder(cmd).stderr(Stdio::null()).spawn().unwrap();
    let pid = t.id().unwrap();
    (().serve(t).await.unwrap(), pid)
}

/// The reference server over stdio on `root`; the client and node's pid.
async fn reference_stdio(entry: &Path, root: &Path) -> (Client, u32) {
    let mut cmd = tokio::process::Command::new("node");
    cmd.arg(entry).arg(root);
    let (t, _) = TokioChildProcess::builder(cmd).stderr(Stdio::null()).spawn().unwrap();
    let pid = t.id().unwrap();
    (().serve(t).await.unwrap(), pid)
}

/// `hands serve --http 127.0.0.1:0` on `cfg`: the child and the address from its banner.
async fn hands_http(cfg: &Path) -> (tokio::process::Child, SocketAddr) {
    let mut child = tokio::process::Command::new(hands_bin())
        .args(["serve", "--config", cfg.to_str().unwrap(), "--http", "127.0.0.1:0"])
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = loop {
        let line = lines.next_line().await.unwrap().expect("hands exited before its banner");
        if let Some(rest) = line.split_once("http://").map(|(_, r)| r)
            && let Some((addr, _)) = rest.split_once("/mcp")
        {
            break addr.parse::<SocketAddr>().unwrap();
        }
    };
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, addr)
}

/// The reference server on `root` behind the bridge (stateful streamable HTTP, sessions like
/// a 2025-11-25 client expects): the bridge process and its address.
async fn reference_http(entry: &Path, root: &Path) -> (tokio::process::Child, SocketAddr) {
    let bridge = npm_cached(BRIDGE, "supergateway/dist/index.js");
    let addr = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let child = tokio::process::Command::new("node")
        .arg(bridge)
        .args(["--stateful", "--outputTransport", "streamableHttp", "--logLevel", "none"])
        .args(["--port", &addr.port().to_string()])
        .arg("--stdio")
        .arg(format!("node {} {}", entry.display(), root.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while tokio::net::TcpStream::connect(addr).await.is_err() {
        assert!(t0.elapsed() < Duration::from_secs(20), "{BRIDGE} did not listen on {addr}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (child, addr)
}

/// A 2025-11-25 client (`initialize`, a session, answers as SSE streams): what most MCP
/// clients speak today.
async fn http_client(addr: SocketAddr) -> Client {
    let t = StreamableHttpClientTransport::from_uri(format!("http://{addr}/mcp"));
    ().serve(t).await.unwrap()
}

/// A 2026-07-28 client (`server/discover`, stateless calls, plain JSON answers).
async fn http_client_stateless(addr: SocketAddr) -> Client {
    let t = StreamableHttpClientTransport::from_uri(format!("http://{addr}/mcp"));
    let mode =
        ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] };
    ().serve_with_lifecycle(t, mode).await.unwrap()
}

async fn ping(c: &Client) {
    c.peer()
        .send_request(ClientRequest::PingRequest(PingRequest {
            method: Default::default(),
            extensions: Default::default(),
        }))
        .await
        .unwrap();
}

/// The output table: rows of cells, printed and saved at the end.
#[derive(Default)]
struct Table(Vec<String>);

impl Table {
    fn head(&mut self, title: &str, cols: &[&str]) {
        self.0.push(format!("\n### {title}\n"));
        self.0.push(format!("| {} |", cols.join(" | ")));
        self.0.push(format!("|{}", "---|".repeat(cols.len())));
    }
    fn row(&mut self, cells: &[String]) {
        let line = format!("| {} |", cells.join(" | "));
        println!("{line}");
        self.0.push(line);
    }
    fn note(&mut self, text: String) {
        println!("{text}");
        self.0.push(format!("\n{text}"));
    }
}

/// A small folder (10 files) and a small file, shared by the round-trip section.
fn small_data(root: &Path) {
    std::fs::create_dir_all(root.join("small")).unwrap();
    for i in 0..10 {
        std::fs::write(root.join(format!("small/f{i}.txt")), format!("line {i}\n")).unwrap();
    }
    std::fs::write(root.join("small/a.txt"), "hello\nworld\n").unwrap();
}

struct Rtt {
    name: &'static str,
    client: Client,
    list: (&'static str, Value),
    read: (&'static str, Value),
    lat_list: Vec<Duration>,
    lat_read: Vec<Duration>,
    lat_ping: Vec<Duration>,
    /// 2026-07-28 has no `ping` (rmcp answers -32601).
    pings: bool,
}

/// A `list` and a `read` call: tool name and arguments.
type Calls = ((&'static str, Value), (&'static str, Value));

impl Rtt {
    fn new(name: &'static str, client: Client, (list, read): Calls, pings: bool) -> Rtt {
        let (lat_list, lat_read, lat_ping) = (vec![], vec![], vec![]);
        Rtt { name, client, list, read, lat_list, lat_read, lat_ping, pings }
    }
}

/// Rows of the memory table: which process, idle RSS, peak RSS (VmHWM).
type Mem = Vec<[String; 3]>;

async fn section_rtt(t: &mut Table, entry: &Path, mem: &mut Mem) {
    let data = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(data.path()).unwrap().join("root");
    let state = data.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    small_data(&root);
    let cfg = fs_config(&root, &state, false);
    let (stdio, stdio_pid) = hands_stdio(&cfg).await;
    let (http_child, addr) = hands_http(&cfg).await;
    let http_pid = http_child.id().unwrap();
    let http = http_client(addr).await;
    let stateless = http_client_stateless(addr).await;
    let (reference, ref_pid) = reference_stdio(entry, &root).await;
    let (bridge_child, bridge_addr) = reference_http(entry, &root).await;
    let bridged = http_client(bridge_addr).await;
    let pids = [stdio_pid, http_pid, http_pid, ref_pid];
    let idle = pids.map(|p| status_kib(p, "VmRSS:"));
    let hands_calls =
        || (("list_dir", json!({"path": "small"})), ("read", json!({"path": "small/a.txt"})));
    let reference_calls = (
        ("list_directory", json!({"path": root.join("small")})),
        ("read_text_file", json!({"path": root.join("small/a.txt")})),
    );
    let mut servers = vec![
        Rtt::new("hands, stdio", stdio, hands_calls(), true),
        Rtt::new("hands, HTTP 2025-11-25 (session)", http, hands_calls(), true),
        Rtt::new("hands, HTTP 2026-07-28 (stateless)", stateless, hands_calls(), false),
        Rtt::new("reference, stdio", reference, reference_calls.clone(), true),
        Rtt::new("reference, HTTP via supergateway (session)", bridged, reference_calls, true),
    ];
    // Warm-up, then 2,000 calls of each kind per server, interleaved in blocks of 100 so that
    // the machine's noise falls on every server alike.
    for s in &servers {
        for _ in 0..100 {
            call(&s.client, s.list.0, s.list.1.clone()).await;
            call(&s.client, s.read.0, s.read.1.clone()).await;
            if s.pings {
                ping(&s.client).await;
            }
        }
    }
    for _block in 0..20 {
        for s in &mut servers {
            for _ in 0..100 {
                let t0 = Instant::now();
                call(&s.client, s.list.0, s.list.1.clone()).await;
                s.lat_list.push(t0.elapsed());
                let t0 = Instant::now();
                call(&s.client, s.read.0, s.read.1.clone()).await;
                s.lat_read.push(t0.elapsed());
                if s.pings {
                    let t0 = Instant::now();
                    ping(&s.client).await;
                    s.lat_ping.push(t0.elapsed());
                }
            }
        }
    }
    t.head(
        "Round trip, 2,000 calls each (same client: rmcp, Rust)",
        &["server", "list p50", "list p99", "read p50", "read p99", "ping p50"],
    );
    let mut p50 = Vec::new();
    for s in &mut servers {
        let (l50, l99) = (pct(&mut s.lat_list, 0.5), pct(&mut s.lat_list, 0.99));
        let (r50, r99) = (pct(&mut s.lat_read, 0.5), pct(&mut s.lat_read, 0.99));
        let p = if s.pings {
            format!("{:.3} ms", ms(pct(&mut s.lat_ping, 0.5)))
        } else {
            "— (no `ping` in 2026-07-28)".to_string()
        };
        t.row(&[
            format!("{} (`{}` / `{}`)", s.name, s.list.0, s.read.0),
            format!("{:.3} ms", ms(l50)),
            format!("{:.3} ms", ms(l99)),
            format!("{:.3} ms", ms(r50)),
            format!("{:.3} ms", ms(r99)),
            p,
        ]);
        p50.push((l50, r50));
    }
    let ratio = |i: usize, against: usize| {
        let (rl, rr) = p50[against];
        format!("list {:.2}×, read {:.2}×", ms(p50[i].0) / ms(rl), ms(p50[i].1) / ms(rr))
    };
    t.note(format!(
        "p50 ratio hands/reference (target ≤ 0.5×): stdio {}; HTTP against the reference over HTTP (via supergateway): session {}, stateless {}; HTTP against the reference's own stdio: session {}, stateless {}",
        ratio(0, 3),
        ratio(1, 4),
        ratio(2, 4),
        ratio(1, 3),
        ratio(2, 3),
    ));
    // What the shared client spends decoding each server's `list` answer: rmcp decodes a
    // result as an untagged union of 20 result types (CallToolResult is the 16th tried, and
    // each failed try walks the whole answer), so a richer answer costs the client more.
    t.head(
        "The client's own share: rmcp decoding one `list` answer (20,000 decodes)",
        &["server", "answer", "decode (mean)", "list p50 without it"],
    );
    for (i, s) in servers.iter().enumerate().filter(|(i, _)| [0, 3].contains(i)) {
        let Value::Object(m) = s.list.1.clone() else { unreachable!() };
        let params = CallToolRequestParams::new(s.list.0.to_string()).with_arguments(m);
        let answer = s.client.peer().call_tool(params).await.unwrap();
        let line = serde_json::to_string(&rmcp::model::ServerJsonRpcMessage::response(
            rmcp::model::ServerResult::CallToolResult(answer),
            rmcp::model::NumberOrString::Number(7),
        ))
        .unwrap();
        let t0 = Instant::now();
        for _ in 0..20_000 {
            let m: rmcp::model::ServerJsonRpcMessage = serde_json::from_str(&line).unwrap();
            std::hint::black_box(m);
        }
        let decode = t0.elapsed() / 20_000;
        t.row(&[
            s.name.to_string(),
            format!("{} bytes", line.len()),
            format!("{:.1} µs", decode.as_secs_f64() * 1e6),
            format!("{:.3} ms", ms(p50[i].0.saturating_sub(decode))),
        ]);
    }
    // The two HTTP clients share one daemon: one memory row for it. The bridged reference is
    // two processes (bridge and server): left out.
    for (i, s) in servers.iter().enumerate().filter(|(i, _)| *i != 2 && *i != 4) {
        let peak = status_kib(pids[i], "VmHWM:");
        mem.push([format!("{} after the round trips", s.name), mib(idle[i]), mib(peak)]);
    }
    for s in servers {
        let _ = s.client.cancel().await;
    }
    drop(http_child);
    drop(bridge_child);
}

/// 20,000 generated files in 200 folders: 20 named `needle…`, 1 in 100 holding the literal.
fn generated_tree() -> PathBuf {
    let dest = common::data_dir().join("field-tree");
    if common::count_files(&dest) == 20_000 {
        return dest;
    }
    let _ = std::fs::remove_dir_all(&dest);
    for i in 0..20_000 {
        let dir = dest.join(format!("d{:02}/e{}", i % 20, (i / 20) % 10));
        std::fs::create_dir_all(&dir).unwrap();
        let name = if i % 1000 == 7 { format!("needle{i}.txt") } else { format!("file{i}.txt") };
        let mut body = format!("file {i}\nsome text that is not the literal\n");
        if i % 100 == 3 {
            body.push_str("here is HANDS_FIELD_LITERAL in a line\n");
        }
        body.push_str(&"filler line of ordinary text\n".repeat(10));
        std::fs::write(dir.join(name), body).unwrap();
    }
    dest
}

fn rg(args: &[&str], dir: &Path) -> (Duration, String) {
    let t = Instant::now();
    let out = std::process::Command::new("rg").args(args).current_dir(dir).output().unwrap();
    (t.elapsed(), String::from_utf8_lossy(&out.stdout).into_owned())
}

async fn section_search(t: &mut Table, entry: &Path, mem: &mut Mem) {
    t.head(
        "glob and grep (medians; counts checked)",
        &["tree", "what", "hands", "reference `search_files`", "rg", "hands/ref", "hands/rg"],
    );
    let state = tempfile::tempdir().unwrap();
    for (label, tree, literal, ref_runs) in [
        ("generated, 20,000 files", generated_tree(), "HANDS_FIELD_LITERAL", 5),
        ("real (cargo registry copies)", common::real_tree(), "unsafe impl", 3),
    ] {
        let files = common::count_files(&tree);
        let cfg = fs_config(&tree, state.path(), false);
        let (c, pid) = hands_stdio(&cfg).await;
        let (r, rpid) = reference_stdio(entry, &tree).await;
        let idle = (status_kib(pid, "VmRSS:"), status_kib(rpid, "VmRSS:"));
        let what = label;
        let label = format!("{label}: {files} files");

        // glob **/needle*
        let (mut ours, mut refs, mut rgs) = (vec![], vec![], vec![]);
        let (mut n_ours, mut n_ref, mut n_rg) = (0, 0, 0);
        for run in 0..5 {
            let t0 = Instant::now();
            let v =
                call(&c, "glob", json!({"pattern": "**/needle*", "limit": 10_000_000u64})).await;
            ours.push(t0.elapsed());
            n_ours = v["count"].as_u64().unwrap();
            if run < ref_runs {
                let t0 = Instant::now();
                let v =
                    call(&r, "search_files", json!({"path": tree, "pattern": "**/needle*"})).await;
                refs.push(t0.elapsed());
                let text = v["content"].as_str().unwrap_or("");
                n_ref = if text == "No matches found" { 0 } else { text.lines().count() };
            }
            let (d, out) = rg(&["--no-require-git", "--files", "-g", "needle*"], &tree);
            rgs.push(d);
            n_rg = out.lines().count();
        }
        let (o, f, g) = (median(ours), median(refs), median(rgs));
        let glob_row = |t: &mut Table, what: &str, o: Duration| {
            t.row(&[
                label.clone(),
                what.into(),
                format!("{:.1} ms ({n_ours})", ms(o)),
                format!("{:.1} ms ({n_ref})", ms(f)),
                format!("{:.1} ms ({n_rg})", ms(g)),
                format!("{:.3}× ({:.0}× faster)", ms(o) / ms(f), ms(f) / ms(o)),
                format!("{:.2}×", ms(o) / ms(g)),
            ]);
        };
        glob_row(t, "`glob` `**/needle*`", o);
        // A daemon's first `glob` of a tree walks it (later ones answer from the walk it kept,
        // once proved unchanged): five fresh daemons, the first call of each.
        let mut cold = vec![];
        for _ in 0..5 {
            let (fresh, _) = hands_stdio(&cfg).await;
            let t0 = Instant::now();
            let v = call(&fresh, "glob", json!({"pattern": "**/needle*", "limit": 10_000_000u64}))
                .await;
            cold.push(t0.elapsed());
            assert_eq!(v["count"].as_u64(), Some(n_ours));
            let _ = fresh.cancel().await;
        }
        glob_row(t, "`glob` `**/needle*`, a daemon's first (walks; no cache)", median(cold));

        // grep for a literal, every match counted
        let (mut ours, mut rgs) = (vec![], vec![]);
        let (mut n_ours, mut n_rg) = (0, 0);
        for _ in 0..5 {
            let t0 = Instant::now();
            let v = call(
                &c,
                "grep",
                json!({"pattern": literal, "literal": true, "output": "count", "limit": 1_000_000_000u64}),
            )
            .await;
            ours.push(t0.elapsed());
            n_ours = v["total_matches"].as_u64().unwrap();
            let (d, out) = rg(&["--no-require-git", "-F", "-c", "--no-messages", literal], &tree);
            rgs.push(d);
            n_rg =
                out.lines().filter_map(|l| l.rsplit(':').next()?.parse::<u64>().ok()).sum::<u64>();
        }
        let (o, g) = (median(ours), median(rgs));
        t.row(&[
            label,
            format!("`grep` literal `{literal}`"),
            format!("{:.1} ms ({n_ours})", ms(o)),
            "— (no content search)".into(),
            format!("{:.1} ms ({n_rg})", ms(g)),
            "—".into(),
            format!("{:.2}×", ms(o) / ms(g)),
        ]);
        let hwm = (status_kib(pid, "VmHWM:"), status_kib(rpid, "VmHWM:"));
        mem.push([format!("hands, glob and grep over the {what} tree"), mib(idle.0), mib(hwm.0)]);
        mem.push([
            format!("reference, `search_files` over the {what} tree"),
            mib(idle.1),
            mib(hwm.1),
        ]);
        let _ = c.cancel().await;
        let _ = r.cancel().await;
    }
    t.note(
        "Targets: `glob` ≥ 50× faster than the reference's `search_files`; `glob` and `grep` ≤ 1.3× `rg` (`rg --no-require-git`, since hands honours `.gitignore` outside git repositories too). Counts in brackets. `glob` rows: the median of five calls on one daemon (the first walks, the rest answer from the kept walk once it is proved unchanged), then a fresh daemon's first call (a walk), median of five daemons."
            .into(),
    );
}

async fn section_bash(t: &mut Table) {
    let data = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(data.path()).unwrap().join("root");
    let state = data.path().join("state");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&state).unwrap();
    let cfg = fs_config(&root, &state, true);
    let (c, _) = hands_stdio(&cfg).await;
    let (mut tool, mut bare) = (vec![], vec![]);
    for i in 0..220 {
        let t0 = Instant::now();
        call(&c, "bash", json!({"command": "true"})).await;
        let d1 = t0.elapsed();
        let t0 = Instant::now();
        let st = std::process::Command::new("bash")
            .args(["--noprofile", "--norc", "-c", "true"])
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .status()
            .unwrap();
        let d2 = t0.elapsed();
        assert!(st.success());
        if i >= 20 {
            tool.push(d1);
            bare.push(d2);
        }
    }
    let (a, b) = (median(tool), median(bare));
    t.head("`bash` running `true`, 200 runs interleaved", &["what", "median"]);
    t.row(&["`bash` tool over MCP (sandboxed)".into(), format!("{:.1} ms", ms(a))]);
    t.row(&["bare spawn of `bash --noprofile --norc -c true`".into(), format!("{:.1} ms", ms(b))]);
    t.row(&["overhead".into(), format!("{:.1} ms", ms(a) - ms(b))]);
    let _ = c.cancel().await;
}

/// 50 concurrent HTTP clients × N mixed calls (read, grep, list_dir) on one daemon; a fresh
/// client connects and calls while they run.
async fn section_load(t: &mut Table) {
    let calls: usize =
        std::env::var("HANDS_BENCH_LOAD_CALLS").ok().and_then(|s| s.parse().ok()).unwrap_or(1000);
    let data = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(data.path()).unwrap().join("root");
    let state = data.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    for i in 0..200 {
        let dir = root.join(format!("src/m{}", i % 20));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join(format!("f{i}.rs")),
            format!("fn f{i}() {{}}\n// needle {i}\n{}", "let x = 1;\n".repeat(50)),
        )
        .unwrap();
    }
    let cfg = fs_config(&root, &state, false);
    let (child, addr) = hands_http(&cfg).await;
    let pid = child.id().unwrap();
    let idle = status_kib(pid, "VmRSS:");
    let fds0 = std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap().count();
    let started = Instant::now();
    let mut tasks = Vec::new();
    for client in 0..50usize {
        tasks.push(tokio::spawn(async move {
            let s = http_client(addr).await;
            let (mut lat, mut errors) = (Vec::with_capacity(calls), 0usize);
            for i in 0..calls {
                let (tool, args) = match (client + i) % 3 {
                    0 => {
                        ("read", json!({"path": format!("src/m{}/f{}.rs", i % 200 % 20, i % 200)}))
                    }
                    1 => ("grep", json!({"pattern": "needle 1", "literal": true, "limit": 20})),
                    _ => ("list_dir", json!({"path": format!("src/m{}", i % 20)})),
                };
                let Value::Object(m) = args else { unreachable!() };
                let t0 = Instant::now();
                let r = s
                    .peer()
                    .call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(m))
                    .await;
                lat.push(t0.elapsed());
                if !matches!(r, Ok(ref r) if r.is_error != Some(true)) {
                    errors += 1;
                }
            }
            let _ = s.cancel().await;
            (lat, errors)
        }));
    }
    // A fresh client during the load: connect, one call, measured end to end.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let busy = tasks.iter().filter(|t| !t.is_finished()).count();
    let t0 = Instant::now();
    let fresh = http_client(addr).await;
    call(&fresh, "read", json!({"path": "src/m0/f0.rs"})).await;
    let fresh_ms = ms(t0.elapsed());
    let _ = fresh.cancel().await;
    let (mut lat, mut errors) = (Vec::new(), 0);
    for task in tasks {
        let (l, e) = task.await.unwrap();
        lat.extend(l);
        errors += e;
    }
    let wall = started.elapsed();
    let hwm = status_kib(pid, "VmHWM:");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = status_kib(pid, "VmRSS:");
    let fds1 = std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap().count();
    let n = lat.len();
    t.head(
        &format!("Load: 50 concurrent HTTP clients × {calls} mixed calls (read / grep / list_dir)"),
        &["figure", "value"],
    );
    t.row(&["calls, errors".into(), format!("{n}, {errors}")]);
    t.row(&[
        "wall time, throughput".into(),
        format!("{:.1} s, {:.0} calls/s", wall.as_secs_f64(), n as f64 / wall.as_secs_f64()),
    ]);
    t.row(&[
        "latency p50 / p99".into(),
        format!("{:.2} ms / {:.2} ms", ms(pct(&mut lat, 0.5)), ms(pct(&mut lat, 0.99))),
    ]);
    t.row(&[
        format!("fresh client during the load ({busy} clients busy): connect + `read`"),
        format!("{fresh_ms:.1} ms"),
    ]);
    t.row(&[
        "daemon RSS idle → peak (VmHWM) → after".into(),
        format!("{} → {} → {}", mib(idle), mib(hwm), mib(after)),
    ]);
    t.row(&["daemon open descriptors before → after".into(), format!("{fds0} → {fds1}")]);
    assert_eq!(errors, 0, "calls failed under load");
    drop(child);
}

/// The round trips, searches and bash run on a single-threaded runtime: the client's own hops
/// between threads would otherwise add the same tens of microseconds to every call on both
/// sides and hide the servers' difference. The load test's 50 clients get a multi-threaded one.
fn main() {
    let single = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let multi = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let want = |s: &str| args.is_empty() || args.iter().any(|a| a == s);
    let entry = reference_server();
    let mut t = Table::default();
    t.0.push(format!(
        "## Against the field ({}; node {}, {}, {})",
        std::process::Command::new("date")
            .args(["-u", "+%Y-%m-%d"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default(),
        tool_version("node", "--version"),
        REFERENCE,
        tool_version("rg", "--version"),
    ));
    let mut mem: Mem = Vec::new();
    if want("rtt") {
        single.block_on(section_rtt(&mut t, &entry, &mut mem));
    }
    if want("search") {
        single.block_on(section_search(&mut t, &entry, &mut mem));
    }
    if want("bash") {
        single.block_on(section_bash(&mut t));
    }
    if want("load") {
        multi.block_on(section_load(&mut t));
    }
    if !mem.is_empty() {
        t.head(
            "Daemon memory (resident)",
            &["process", "idle (after the handshake)", "peak (VmHWM)"],
        );
        for m in mem {
            t.row(&m);
        }
    }
    let out = t.0.join("\n") + "\n";
    std::fs::write(manifest().join("target/bench-field.md"), &out).unwrap();
    println!("\n{out}");
}
