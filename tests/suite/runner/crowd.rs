//! The relay under a flood of idle connections, through the real binary on loopback: the door of
//! `hands serve --http` (decision 0057), which SPEC §13 promises the relay too. 2,000 TCP
//! connections that send nothing and need no token must not keep an agent with a token, or a
//! runner (re)connecting with its own, out; each is cut within the head timeout.

use super::super::common::{Era, Fixture, text_of};
use super::super::load::{open_files_limit, raise_own_limit};
use super::{
    ALICE, Forwarder, Org, RUNNER_TOKEN, agent_at, call, runner_config, start_runner, tls_connector,
};
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

/// Idle connections opened at once: more than the relay's cap (1,024).
const FLOOD: usize = 2000;

/// Every flood connection must have been cut by then (the relay's head and handshake timeout
/// is 10 s; the rest is room for a shared, noisy machine; before, 30 s).
const FLOOD_BOUND: Duration = Duration::from_secs(25);

/// How long one request of an agent or a runner may take while flooded.
const ANSWER_BOUND: Duration = Duration::from_secs(5);

/// Connects and sends nothing; when the relay closed it (from `start`), if it did in time.
async fn idle(addr: SocketAddr, start: Instant, connected: Arc<AtomicUsize>) -> Option<Duration> {
    let end = tokio::time::Instant::from_std(start + FLOOD_BOUND);
    let stream = tokio::time::timeout_at(end, tokio::net::TcpStream::connect(addr)).await;
    connected.fetch_add(1, Ordering::Relaxed);
    let mut s = match stream {
        Ok(Ok(s)) => s,
        Ok(Err(_)) => return Some(start.elapsed()),
        Err(_) => return None,
    };
    let mut buf = [0u8; 256];
    loop {
        match tokio::time::timeout_at(end, s.read(&mut buf)).await {
            Ok(Ok(0) | Err(_)) => return Some(start.elapsed()),
            Ok(Ok(_)) => {}
            Err(_) => return None,
        }
    }
}

/// `GET path` over TLS as `token`'s agent; (status, body), or why it failed.
async fn get(org: &Org, path: &str, token: &str) -> Result<(u16, String), String> {
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {token}\r\n\
         Connection: close\r\n\r\n"
    );
    let exchange = async {
        let tcp = tokio::net::TcpStream::connect(org.addr).await.map_err(|e| e.to_string())?;
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let connector = tls_connector(&org.pki.ca_pem);
        let mut s = connector.connect(name, tcp).await.map_err(|e| format!("TLS: {e}"))?;
        s.write_all(request.as_bytes()).await.map_err(|e| e.to_string())?;
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out).await;
        let text = String::from_utf8_lossy(&out).into_owned();
        let status = text.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
        let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
        Ok((status, body))
    };
    tokio::time::timeout(ANSWER_BOUND, exchange).await.map_err(|_| "no answer".to_string())?
}

/// A runner's upgrade as box-2 with its own token, over TLS, as a runner reconnecting does.
async fn runner_upgrade(
    org: &Org,
) -> Result<
    impl futures_util::Stream + futures_util::Sink<tokio_tungstenite::tungstenite::Message>,
    String,
> {
    let dial = async {
        let url = format!("wss://localhost:{}/runner", org.addr.port());
        let mut req = url.into_client_request().unwrap();
        let h = req.headers_mut();
        h.insert("authorization", "Bearer box-2-token-0123456789abcdef".parse().unwrap());
        h.insert("hands-runner", "box-2".parse().unwrap());
        h.insert("sec-websocket-protocol", "hands-runner.v1".parse().unwrap());
        h.insert("hands-instance", "crowd".parse().unwrap());
        let tcp = tokio::net::TcpStream::connect(org.addr).await.map_err(|e| e.to_string())?;
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let connector = tls_connector(&org.pki.ca_pem);
        let tls = connector.connect(name, tcp).await.map_err(|e| format!("TLS: {e}"))?;
        let (ws, _) =
            tokio_tungstenite::client_async(req, tls).await.map_err(|e| format!("upgrade: {e}"))?;
        Ok(ws)
    };
    tokio::time::timeout(ANSWER_BOUND, dial).await.map_err(|_| "no answer".to_string())?
}

/// Whether `GET /runners` shows runner `name` connected.
fn connected(listing: &str, name: &str) -> bool {
    let v: Value = serde_json::from_str(listing).unwrap_or_default();
    (v["runners"].as_array().into_iter().flatten())
        .any(|r| r["name"] == name && r["connected"] == true)
}

#[allow(clippy::print_stderr)]
fn say(report: &str) {
    eprintln!("{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_and_a_reconnecting_runner_get_in_while_idle_connections_flood_the_relay() {
    let hard = raise_own_limit();
    assert!(hard as usize > FLOOD + 200, "the test's descriptor hard limit {hard} is too low");
    let fx = Fixture::new();
    fx.write("crowd.txt", "served through the crowd\n");
    let org = Org::start_at_desktop_limit(&fx).await;
    let pid = org.relay.as_ref().unwrap().pid();
    let config = runner_config(&fx, &org.url(), Some(&org.ca_file()), RUNNER_TOKEN, "local");
    let runner = start_runner(&fx, &config);
    assert!(org.wait_connected(true, Duration::from_secs(20)).await, "{}", runner.text());
    let fwd = Forwarder::start(org.addr, Some(org.pki.ca_pem.clone())).await;
    // The relay raised its descriptor soft limit to the hard one.
    let (soft, max) = open_files_limit(pid);

    // The flood: idle connections, no token, no byte, no TLS handshake.
    let start = Instant::now();
    let count = Arc::new(AtomicUsize::new(0));
    let flood: Vec<_> =
        (0..FLOOD).map(|_| tokio::spawn(idle(org.addr, start, count.clone()))).collect();
    let settled = tokio::time::timeout(Duration::from_secs(5), async {
        while count.load(Ordering::Relaxed) < FLOOD {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    })
    .await
    .is_ok();
    let peak = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count());

    // While flooded: alice lists her runners, box-2 connects, and alice calls box-1's tool.
    let listed = get(&org, "/runners", ALICE).await;
    // Held open until the end: box-2 stays connected while alice looks.
    let ws = runner_upgrade(&org).await;
    let after = get(&org, "/runners", ALICE).await;
    let called = tokio::time::timeout(Duration::from_secs(15), async {
        let url = format!("http://{}/runners/box-1/mcp", fwd.addr);
        let c = agent_at(url, ALICE, Era::Legacy, ()).await;
        let text = text_of(&call(&c, "read", json!({"path": "crowd.txt"})).await);
        let _ = c.cancel().await;
        text
    })
    .await;
    let during = start.elapsed();

    let mut closed = Vec::new();
    for f in flood {
        closed.push(f.await.unwrap());
    }
    let open = closed.iter().filter(|c| c.is_none()).count();
    let latest = closed.iter().flatten().max().copied().unwrap_or_default();
    let report = format!(
        "relay descriptor limit: soft {soft}, hard {max}; {FLOOD} idle connections, all \
         connected within 5 s: {settled}; the relay held {peak} descriptors; checks done at \
         {during:?}; GET /runners: {listed:?}; box-2's upgrade: {:?}; GET /runners after: \
         {after:?}; alice's call: {called:?}; {open} flood connections still open after \
         {FLOOD_BOUND:?}, the last cut at {latest:?}\nrelay log:\n{}",
        ws.as_ref().err(),
        org.relay.as_ref().unwrap().text()
    );
    say(&report);
    assert_eq!(soft, max, "{report}");
    assert!(settled && peak < 1200, "{report}");
    assert!(matches!(&listed, Ok((200, _))), "{report}");
    assert!(ws.is_ok(), "{report}");
    assert!(after.as_ref().is_ok_and(|(s, b)| *s == 200 && connected(b, "box-2")), "{report}");
    assert!(called.as_ref().is_ok_and(|t| t.contains("through the crowd")), "{report}");
    assert_eq!(open, 0, "{report}");
    fx.assert_canary();
}
