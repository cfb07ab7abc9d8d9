//! Helpers shared by the benches: one tool call over an rmcp client, medians, milliseconds,
//! counting files and the large real tree.
#![allow(dead_code, clippy::unwrap_used)]

use rmcp::model::CallToolRequestParams;
use rmcp::{RoleClient, service::RunningService};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub type Client = RunningService<RoleClient, ()>;

/// Calls `tool` and returns its structured content (`null` when it has none); a tool error
/// fails the bench.
pub async fn call(c: &Client, tool: &str, args: Value) -> Value {
    let Value::Object(m) = args else { unreachable!() };
    let r = c
        .peer()
        .call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(m))
        .await
        .unwrap();
    assert_ne!(r.is_error, Some(true), "{tool}: {:?}", r.content);
    r.structured_content.unwrap_or(Value::Null)
}

pub fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Files below `dir`, hidden and ignored ones included (counted by `rg --files`).
pub fn count_files(dir: &Path) -> usize {
    let out = std::process::Command::new("rg")
        .args(["--files", "--hidden", "--no-ignore", "--no-messages"])
        .arg(dir)
        .output()
        .expect("rg on PATH");
    out.stdout.iter().filter(|b| **b == b'\n').count()
}

/// Where the benches keep their data (trees, the npm packages): `$XDG_CACHE_HOME/hands-bench`
/// or `~/.cache/hands-bench` — outside this repository on purpose: `cargo clean` does not
/// delete it, and no `.gitignore` of this repository applies to the walks as a parent ignore
/// file (a cost of where the bench put its data, not of a user's project; measured within the
/// noise, benches/README.md).
pub fn data_dir() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache"))
        .join("hands-bench")
}

/// The large real tree: `HANDS_BENCH_TREE`, or copies of the cargo registry sources in
/// `<data_dir>/tree` until it holds at least 62,000 files (issue 34's figures are on 62k; one
/// copy of a registry holds about 19,000).
pub fn real_tree() -> PathBuf {
    if let Some(t) = std::env::var_os("HANDS_BENCH_TREE") {
        return PathBuf::from(t);
    }
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap();
    let src = std::fs::read_dir(home.join(".cargo/registry/src"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let dest = data_dir().join("tree");
    std::fs::create_dir_all(&dest).unwrap();
    let mut n = count_files(&dest);
    let mut i = 0;
    while n < 62_000 {
        let copy = dest.join(format!("copy{i}"));
        if !copy.exists() {
            let st =
                std::process::Command::new("cp").arg("-r").arg(&src).arg(&copy).status().unwrap();
            assert!(st.success());
        }
        i += 1;
        n = count_files(&dest);
    }
    dest
}
