//! One agent's share of the relay's connections (decision 0087), through the real binary: agent
//! alice opens 32 sessions on box-1 and more SSE streams on them than the relay has connections
//! (found by the seventh attack pass: 1,040 streams held all 1,024 slots, and every other agent
//! and every runner reconnecting got 503 for as long as alice liked). Now her streams hold at
//! most her share, the rest are refused saying so, and carol and a runner still get in.

use super::super::common::Fixture;
use super::super::load::raise_own_limit;
use super::super::shares::{open_session, open_streams};
use super::{ALICE, CAROL, Org, RUNNER_TOKEN, runner_config, start_runner};
use std::time::Duration;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_agents_sse_streams_hold_only_its_share_and_others_and_runners_get_in() {
    raise_own_limit();
    let fx = Fixture::new();
    let org = Org::start_plain(&fx).await;
    let config = runner_config(&fx, &org.url(), None, RUNNER_TOKEN, "local");
    let runner = start_runner(&fx, &config);
    assert!(org.wait_connected(true, Duration::from_secs(20)).await, "{}", runner.text());
    let path = "/runners/box-1/mcp";
    let mut sessions = Vec::new();
    for _ in 0..32 {
        sessions.extend(open_session(org.addr, path, ALICE).await.1);
    }
    assert_eq!(sessions.len(), 32, "{}", org.relay.as_ref().unwrap().text());
    let (streams, statuses) = open_streams(org.addr, path, ALICE, &sessions, 1040).await;
    let report = format!("alice's streams: {statuses:?}");
    assert_eq!(statuses.get(&200).map(|s| s.0), Some(128), "{report}");
    let (refused, body) = statuses.get(&429).cloned().unwrap_or_default();
    assert_eq!(refused, 1040 - 128, "{report}");
    assert!(body.contains("`alice` has 128 requests in flight"), "{report}");

    // Carol opens a session on the same runner while alice holds her streams.
    let (answer, id) = open_session(org.addr, path, CAROL).await;
    assert!(answer.status == 200 && id.is_some(), "carol was kept out: {answer:?}; {report}");
    // And box-2 connects, as a runner coming back would.
    let url = format!("ws://127.0.0.1:{}/runner", org.addr.port());
    let mut req = url.into_client_request().unwrap();
    let h = req.headers_mut();
    h.insert("authorization", "Bearer box-2-token-0123456789abcdef".parse().unwrap());
    h.insert("hands-runner", "box-2".parse().unwrap());
    h.insert("sec-websocket-protocol", "hands-runner.v1".parse().unwrap());
    h.insert("hands-instance", "shares".parse().unwrap());
    let dial = async {
        let tcp = tokio::net::TcpStream::connect(org.addr).await.map_err(|e| e.to_string())?;
        tokio_tungstenite::client_async(req, tcp).await.map_err(|e| e.to_string())
    };
    let ws =
        tokio::time::timeout(Duration::from_secs(5), dial).await.unwrap_or(Err("no answer".into()));
    assert!(ws.is_ok(), "box-2 was kept out: {:?}; {report}", ws.err());
    drop(streams);
    fx.assert_canary();
}
