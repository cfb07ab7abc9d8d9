//! Side-by-side benchmarks of the file tools through the real binary over stdio, against
//! ripgrep in the same run: grep and glob over a large real tree, a 1-line window at the end of
//! a 2 GB file (time and the daemon's peak memory), and the round-trip latency of a cheap call.
//!
//! Run: `cargo bench --bench fs` (needs `rg` on PATH). `HANDS_BENCH_TREE=/path` picks the tree;
//! by default the cargo registry sources are copied until the tree holds ≥ 62,000 files.
//! `glob` is timed three ways: warm (the daemon's later calls, answered from its walk cache,
//! against `rg` on a warm page cache), a fresh daemon's first call (a walk) on a warm page
//! cache, and cold — a fresh daemon's first call and `rg` each after the page cache is dropped
//! (`/proc/sys/vm/drop_caches`: root only, left out with a note otherwise; it slows whatever
//! else runs on the machine for a while).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]
// Benchmarks spawn the binary and ripgrep, and make their trees by path.
#![allow(clippy::disallowed_methods)]

#[path = "common/mod.rs"]
mod common;
use common::{call, median, ms};
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt, service::RunningService};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

type Client = RunningService<RoleClient, ()>;

async fn start(root: &Path, state: &Path) -> (Client, u32) {
    let cfg = state.join("daemon.toml");
    std::fs::write(
        &cfg,
        format!(
            "[daemon]\nstate_dir = \"{}\"\n[[builtins]]\nid = \"tools-fs\"\ngrants = [\"filesystem\"]\nfilesystem = [{{ path = \"{}\", write = true }}]\n",
            state.display(),
            root.display()
        ),
    )
    .unwrap();
    // Built by `cargo bench` (the bench profile, which is the release one).
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_hands"));
    let mut cmd = tokio::process::Command::new(&bin);
    cmd.args(["serve", "--config", cfg.to_str().unwrap()]);
    let t = TokioChildProcess::new(cmd).unwrap();
    let pid = t.id().unwrap();
    (().serve(t).await.unwrap(), pid)
}

fn rg_time(args: &[&str], dir: &Path) -> (Duration, String) {
    let t = Instant::now();
    let out = std::process::Command::new("rg").args(args).current_dir(dir).output().unwrap();
    (t.elapsed(), String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Drops the page cache, dentries and inodes (root only); false when this process may not.
fn drop_caches() -> bool {
    let _ = std::process::Command::new("sync").status();
    std::fs::write("/proc/sys/vm/drop_caches", "3").is_ok()
}

fn vm_hwm_kib(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[tokio::main]
async fn main() {
    let runs = 5;
    let tree = common::real_tree();
    let files = common::count_files(&tree);
    let state = tempfile::tempdir().unwrap();
    let (c, _pid) = start(&tree, state.path()).await;
    println!("tree: {} ({files} files)", tree.display());

    // grep: the same search, counted in full, side by side with rg.
    let pattern = r"fn\s+[a-z_]+_test\(";
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    let mut our_count = 0;
    let mut rg_count = 0;
    for _ in 0..runs {
        let t = Instant::now();
        let v = call(
            &c,
            "grep",
            json!({"pattern": pattern, "output": "count", "limit": 1_000_000_000u64}),
        )
        .await;
        ours.push(t.elapsed());
        our_count = v["total_matches"].as_u64().unwrap();
        let (d, out) = rg_time(&["--no-require-git", "-c", "--no-messages", pattern], &tree);
        theirs.push(d);
        rg_count = out.lines().filter_map(|l| l.rsplit(':').next()?.parse::<u64>().ok()).sum();
    }
    let (g, r) = (median(ours), median(theirs));
    println!(
        "grep  {pattern:?}: hands {:.1} ms ({our_count} matches) · rg {:.1} ms ({rg_count} matches) · ratio {:.2}",
        ms(g),
        ms(r),
        ms(g) / ms(r)
    );

    // glob: every Rust file, side by side with `rg --files -g`.
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    let mut our_count = 0;
    let mut rg_count = 0;
    for _ in 0..runs {
        let t = Instant::now();
        let v = call(&c, "glob", json!({"pattern": "**/*.rs", "limit": 10_000_000u64})).await;
        ours.push(t.elapsed());
        our_count = v["count"].as_u64().unwrap();
        let (d, out) = rg_time(&["--no-require-git", "--files", "-g", "*.rs"], &tree);
        theirs.push(d);
        rg_count = out.lines().count() as u64;
    }
    let (g, r) = (median(ours), median(theirs));
    println!(
        "glob  **/*.rs: hands {:.1} ms ({our_count} files) · rg --files -g {:.1} ms ({rg_count} files) · ratio {:.2} (issue 34 warm: ≤ 1.0)",
        ms(g),
        ms(r),
        ms(g) / ms(r)
    );
    c.cancel().await.unwrap();

    // glob, a fresh daemon's first call (a walk, nothing cached), on a warm page cache and on a
    // cold one; `rg` in the same state each time, alternating.
    let rg_glob = ["--no-require-git", "--files", "-g", "*.rs"];
    let mut can_drop = true;
    for cold in [false, true] {
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for _ in 0..3 {
            let (c, _pid) = start(&tree, state.path()).await;
            if cold && !drop_caches() {
                can_drop = false;
                c.cancel().await.unwrap();
                break;
            }
            let t = Instant::now();
            let v = call(&c, "glob", json!({"pattern": "**/*.rs", "limit": 10_000_000u64})).await;
            ours.push(t.elapsed());
            assert_eq!(v["count"].as_u64().unwrap(), rg_count);
            c.cancel().await.unwrap();
            if cold {
                drop_caches();
                // rg's own binary back in the cache, as the daemon's was already running.
                let _ = std::process::Command::new("rg").arg("--version").output();
            }
            let (d, out) = rg_time(&rg_glob, &tree);
            theirs.push(d);
            assert_eq!(out.lines().count() as u64, rg_count);
        }
        if !can_drop {
            println!("glob  cold: left out, the page cache can be dropped only as root");
            break;
        }
        let (g, r) = (median(ours), median(theirs));
        println!(
            "glob  **/*.rs, a fresh daemon's first call, {} page cache, median of 3: hands {:.1} ms · rg {:.1} ms · ratio {:.2}{}",
            if cold { "cold" } else { "warm" },
            ms(g),
            ms(r),
            ms(g) / ms(r),
            if cold { " (issue 34 cold: ≤ 1.3)" } else { "" }
        );
    }

    // read: a 1-line window at the end of a 2 GB sparse file.
    let big = tempfile::tempdir().unwrap();
    {
        use std::io::{Seek, SeekFrom, Write};
        let mut f = std::fs::File::create(big.path().join("big.txt")).unwrap();
        // Lines of text up front so the file is text, then a hole, then the last line.
        f.write_all(&b"0123456789abcdef0123456789abcdef0123456789abcdef012345678\n".repeat(1000))
            .unwrap();
        f.seek(SeekFrom::Start(2 * 1024 * 1024 * 1024 - 10)).unwrap();
        f.write_all(b"\nthe end\n").unwrap();
    }
    let (c, pid) = start(big.path(), state.path()).await;
    let before = vm_hwm_kib(pid);
    let t = Instant::now();
    let v = call(&c, "read", json!({"path": "big.txt", "offset": 1002, "limit": 1})).await;
    let d = t.elapsed();
    let after = vm_hwm_kib(pid);
    println!(
        "read  1-line window at the end of a 2 GiB file: {:.0} ms · daemon peak RSS {} KiB before, {} KiB after · total_lines {}",
        ms(d),
        before,
        after,
        v["total_lines"]
    );

    // Round-trip latency of a cheap call.
    std::fs::write(big.path().join("small.txt"), "x\n").unwrap();
    let mut lat = Vec::with_capacity(1000);
    for _ in 0..1000 {
        let t = Instant::now();
        call(&c, "read", json!({"path": "small.txt"})).await;
        lat.push(t.elapsed());
    }
    lat.sort();
    println!(
        "round trip (read of a 2-byte file, 1000 calls): p50 {:.3} ms · p99 {:.3} ms",
        ms(lat[500]),
        ms(lat[990])
    );
    c.cancel().await.unwrap();
}
