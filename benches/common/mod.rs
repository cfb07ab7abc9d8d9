//! Helpers shared by the benches: one tool call over an rmcp client, medians, milliseconds.
#![allow(dead_code, clippy::unwrap_used)]

use rmcp::model::CallToolRequestParams;
use rmcp::{RoleClient, service::RunningService};
use serde_json::Value;
use std::time::Duration;

pub type Client = RunningService<RoleClient, ()>;

/// Calls `tool` and returns its structured content; a tool error fails the bench.
pub async fn call(c: &Client, tool: &str, args: Value) -> Value {
    let Value::Object(m) = args else { unreachable!() };
    let r = c
        .peer()
        .call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(m))
        .await
        .unwrap();
    assert_ne!(r.is_error, Some(true), "{tool}: {:?}", r.content);
    r.structured_content.unwrap()
}

pub fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
