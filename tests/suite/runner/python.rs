//! The official MCP Python SDK as an agent, over TLS straight to the real relay (trusting only
//! the test CA), in both eras: it sees the runner's tools, runs a command, and its `write` —
//! though its client could be asked — is parked at the runner's machine (`approvals =
//! "local"`) until `hands approvals approve` there.

use super::super::common::Fixture;
use super::super::gate::approvals;
use super::{ALICE, Org, RUNNER_TOKEN, runner_config, start_runner};
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

#[tokio::test]
#[ignore = "needs the Python SDK (pip); run with --include-ignored"]
async fn the_python_sdk_reaches_a_runner_through_the_relay_in_both_eras() {
    let fx = Fixture::new();
    let org = Org::start(&fx).await;
    let config = runner_config(&fx, &org.url(), Some(&org.ca_file()), RUNNER_TOKEN, "local");
    let runner = start_runner(&fx, &config);
    assert!(org.wait_connected(true, Duration::from_secs(20)).await, "{}", runner.text());
    let url = format!("https://localhost:{}/runners/box-1/mcp", org.addr.port());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/relay_client.py");
    for mode in ["legacy", "2026-07-28"] {
        let path = format!("py-{mode}.txt");
        let mut cmd = tokio::process::Command::new(super::super::channels::python_sdk());
        cmd.arg(&script)
            .args([url.as_str(), org.ca_file().to_str().unwrap(), "-", mode, path.as_str()])
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &fx.home)
            .env("RELAY_AGENT_TOKEN", ALICE)
            .stderr(std::process::Stdio::inherit())
            .kill_on_drop(true);
        let pending = tokio::spawn(async move {
            tokio::time::timeout(Duration::from_secs(60), cmd.output()).await.unwrap().unwrap()
        });
        let (id, _) = super::super::channels::parked_id(&fx, &config, &path).await;
        assert!(!fx.root.join(&path).exists(), "{mode}: it ran before the yes");
        assert!(approvals(&fx, &config, &["approve", &id]).0);
        let out = pending.await.unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{mode}: the Python agent failed: {stdout}");
        let v: Value = serde_json::from_str(stdout.lines().last().unwrap_or("")).unwrap();
        assert!(v["tools"].as_array().unwrap().iter().any(|t| t == "bash"), "{v}");
        assert!(v["bash"].as_str().unwrap().contains("py-through-relay"), "{v}");
        assert_eq!(v["is_error"], false, "{mode}: {v}");
        assert_eq!(v["asked"], serde_json::json!([]), "{mode}: asked through the relay: {v}");
        let expect = if mode == "legacy" { "2025-11-25" } else { mode };
        assert_eq!(v["protocol"], expect, "{v}");
        assert_eq!(std::fs::read_to_string(fx.root.join(&path)).unwrap(), "py");
        let last = fx.audit_records().last().cloned().unwrap();
        assert_eq!(last["client"], "runner:alice");
    }
    fx.assert_canary();
}
