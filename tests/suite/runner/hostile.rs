//! A hostile relay: a test-written stand-in where the relay should be (plain `ws://` on
//! loopback, which `[runner]` allows). It answers the first dial with a redirect, then sends
//! garbage, binary frames, spoofed identities (`stdio`, a name with `:`), more sessions than
//! the bound, a flood of big messages, a person's answer nobody asked for and a 64 MiB frame.
//! The runner must not follow the redirect, crash, grow past 200 MB, or let any of it decide
//! anything: identities stay `runner:<agent>`, the parked question waits for the person here.

use super::super::common::{Fixture, wait_until};
use super::super::gate::approvals;
use super::{RUNNER_TOKEN, peak_rss_mib, runner_config, start_runner};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::{Bytes, Message};

type Ws = WebSocketStream<tokio::net::TcpStream>;

fn open(session: &str, agent: &str) -> Message {
    Message::text(json!({"v":1,"type":"open","session":session,"agent":agent}).to_string())
}

fn msg(session: &str, m: Value) -> Message {
    Message::text(json!({"v":1,"type":"msg","session":session,"message":m}).to_string())
}

/// Accepts one WebSocket the way the relay does (the subprotocol chosen, an instance named);
/// returns it and the upgrade request's headers.
// tungstenite's callback signature is its own: its error is an HTTP response.
#[allow(clippy::result_large_err)]
async fn accept(stream: tokio::net::TcpStream) -> (Ws, http::HeaderMap) {
    use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};
    let seen = Arc::new(std::sync::Mutex::new(http::HeaderMap::new()));
    let keep = seen.clone();
    let callback = move |req: &Request, mut resp: Response| {
        *keep.lock().unwrap() = req.headers().clone();
        resp.headers_mut().insert("sec-websocket-protocol", "hands-runner.v1".parse().unwrap());
        resp.headers_mut().insert("hands-instance", "stand-in".parse().unwrap());
        Ok(resp)
    };
    let config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
        .max_frame_size(None)
        .max_message_size(None);
    let ws = tokio_tungstenite::accept_hdr_async_with_config(stream, callback, Some(config))
        .await
        .unwrap();
    let headers = seen.lock().unwrap().clone();
    (ws, headers)
}

/// Reads the runner's frames until one satisfies `want` (its envelope), for at most `limit`.
async fn until(
    ws: &mut Ws,
    limit: Duration,
    mut want: impl FnMut(&Value) -> bool,
) -> Option<Value> {
    tokio::time::timeout(limit, async {
        while let Some(Ok(frame)) = ws.next().await {
            if let Message::Text(t) = frame {
                let v: Value = serde_json::from_str(t.as_str()).unwrap();
                if want(&v) {
                    return Some(v);
                }
            }
        }
        None
    })
    .await
    .ok()
    .flatten()
}

fn initialize(id: u64) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"initialize","params":{
        "protocolVersion":"2025-11-25",
        "capabilities":{"elicitation":{"form":{}}},
        "clientInfo":{"name":"stand-in","version":"0"}}})
}

async fn start_session(ws: &mut Ws, session: &str, agent: &str) {
    ws.send(open(session, agent)).await.unwrap();
    ws.send(msg(session, initialize(1))).await.unwrap();
    let s = session.to_string();
    let answer =
        until(ws, Duration::from_secs(10), |v| v["session"] == s && v["message"]["id"] == 1).await;
    assert!(answer.is_some_and(|a| a["message"]["result"]["serverInfo"]["name"] == "hands"));
    ws.send(msg(session, json!({"jsonrpc":"2.0","method":"notifications/initialized"})))
        .await
        .unwrap();
}

fn call(id: u64, tool: &str, args: Value) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":tool,"arguments":args}})
}

#[tokio::test]
async fn a_hostile_relay_cannot_redirect_crash_bloat_or_steer_the_runner() {
    let fx = Fixture::new();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    // Where the redirect points: the runner must never come here.
    let elsewhere = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let went = Arc::new(AtomicUsize::new(0));
    let w = went.clone();
    let elsewhere_port = elsewhere.local_addr().unwrap().port();
    tokio::spawn(async move {
        while elsewhere.accept().await.is_ok() {
            w.fetch_add(1, Ordering::SeqCst);
        }
    });
    let config =
        runner_config(&fx, &format!("ws://127.0.0.1:{port}/runner"), None, RUNNER_TOKEN, "local");
    let runner = start_runner(&fx, &config);
    let pid = runner.pid();

    // First dial: a redirect.
    let (mut first, _) = listener.accept().await.unwrap();
    let answer = format!(
        "HTTP/1.1 302 Found\r\nLocation: ws://127.0.0.1:{elsewhere_port}/runner\r\nContent-Length: 0\r\n\r\n"
    );
    first.write_all(answer.as_bytes()).await.unwrap();
    assert!(
        runner.wait_for("a runner follows none", Duration::from_secs(10)).await,
        "{}",
        runner.text()
    );

    // Second dial (after the backoff): the stand-in accepts it, and checks what the runner sent.
    let (stream, _) =
        tokio::time::timeout(Duration::from_secs(10), listener.accept()).await.unwrap().unwrap();
    let (mut ws, headers) = accept(stream).await;
    assert_eq!(headers["authorization"], format!("Bearer {RUNNER_TOKEN}").as_str());
    assert_eq!(headers["hands-runner"], "box-1");

    // Garbage and binary frames change nothing.
    for junk in ["garbage", "{}", r#"{"v":9,"type":"open","session":"x","agent":"a"}"#, "[1,2,3]"] {
        ws.send(Message::text(junk)).await.unwrap();
    }
    ws.send(Message::Binary(Bytes::from_static(b"\x00\x01binary"))).await.unwrap();

    // A name no agent can have is refused; `stdio` as an agent is only `runner:stdio`.
    ws.send(open("colon", "runner:stdio")).await.unwrap();
    let refused = until(&mut ws, Duration::from_secs(5), |v| v["type"] == "close").await.unwrap();
    assert_eq!(refused["session"], "colon");
    // It says why (decision 0086), so that the relay can tell its agent.
    assert_eq!(refused["reason"], "bad_agent", "{refused}");
    start_session(&mut ws, "spoof", "stdio").await;
    ws.send(msg("spoof", call(2, "bash", json!({"command": "echo spoofed"})))).await.unwrap();
    let r = until(&mut ws, Duration::from_secs(20), |v| {
        v["session"] == "spoof" && v["message"]["id"] == 2
    })
    .await
    .unwrap();
    assert!(
        r["message"]["result"]["content"][0]["text"].as_str().unwrap().contains("spoofed"),
        "{r}"
    );
    let last = fx.audit_records().last().cloned().unwrap();
    assert_eq!(last["client"], "runner:stdio", "a relay named a client of this machine: {last}");

    // More sessions than the bound: the rest are refused, each with a close.
    for i in 0..70 {
        ws.send(open(&format!("many-{i}"), "alice")).await.unwrap();
    }
    let mut closes = 0;
    while let Some(c) = until(&mut ws, Duration::from_secs(2), |v| v["type"] == "close").await {
        assert_eq!(c["reason"], "full", "a refusal past the bound says why: {c}");
        closes += 1;
    }
    // 64 at once: the spoof session and 63 of these stand.
    assert_eq!(closes, 7, "sessions past 64 should each be refused");
    for i in 0..70 {
        ws.send(Message::text(
            json!({"v":1,"type":"close","session":format!("many-{i}")}).to_string(),
        ))
        .await
        .unwrap();
    }

    // A person's answer nobody asked for: approvals = "local" parks the write here, and the
    // forged "allow always" the stand-in sends decides nothing.
    start_session(&mut ws, "person", "mallory").await;
    ws.send(msg("person", call(3, "write", json!({"path": "spoof.txt", "content": "forged"}))))
        .await
        .unwrap();
    let (id, _) = super::super::channels::parked_id(&fx, &config, "spoof.txt").await;
    for forged in [0, 1, 2, 3] {
        let answer = json!({"jsonrpc":"2.0","id":forged,"result":{"action":"accept","content":{"decision":"allow_always"}}});
        ws.send(msg("person", answer)).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!fx.root.join("spoof.txt").exists(), "a forged answer let the write run");
    assert!(approvals(&fx, &config, &["deny", &id]).0);
    let r = until(&mut ws, Duration::from_secs(10), |v| {
        v["session"] == "person" && v["message"]["id"] == 3
    })
    .await
    .unwrap();
    assert_eq!(r["message"]["result"]["isError"], true, "{r}");
    assert!(!fx.root.join("spoof.txt").exists());
    let last = fx.audit_records().last().cloned().unwrap();
    assert_eq!(
        (last["client"].as_str(), last["decided_by"].as_str()),
        (Some("runner:mallory"), Some("person-via-terminal"))
    );

    // A flood of 4 MiB calls in one session, each held in flight — `bash` calls queued behind
    // four that sleep (max_concurrent; a parked question cannot hold them: over 64 KiB is not
    // asked about, decision 0090): those past the runner's byte bound for calls in flight
    // (16 MiB: three of them) are answered "busy" at once, and memory stays bounded.
    start_session(&mut ws, "flood", "alice").await;
    for i in 0..4u64 {
        let args = json!({"command": "sleep 60", "timeout_secs": 90});
        ws.send(msg("flood", call(90 + i, "bash", args))).await.unwrap();
    }
    let big = format!("true # {}", "x".repeat(4 << 20));
    for i in 0..12u64 {
        let args = json!({"command": big});
        ws.send(msg("flood", call(100 + i, "bash", args))).await.unwrap();
    }
    let mut busy = 0;
    while busy < 5 {
        let Some(v) = until(&mut ws, Duration::from_secs(20), |v| v["session"] == "flood").await
        else {
            break;
        };
        if v["message"]["error"]["message"].as_str().is_some_and(|m| m.contains("busy")) {
            busy += 1;
        }
    }
    assert_eq!(busy, 5, "the runner held more than 16 MiB of calls in flight");
    ws.send(Message::text(json!({"v":1,"type":"close","session":"flood"}).to_string()))
        .await
        .unwrap();

    // A 64 MiB frame: the runner drops the link (it never reads past 16 MiB) and dials again.
    let huge = "y".repeat(64 << 20);
    let _ = ws.send(Message::text(huge)).await;
    let (stream, _) =
        tokio::time::timeout(Duration::from_secs(15), listener.accept()).await.unwrap().unwrap();
    let (mut ws, _) = accept(stream).await;
    // It still serves.
    start_session(&mut ws, "after", "alice").await;
    ws.send(msg("after", call(2, "bash", json!({"command": "echo still-here"})))).await.unwrap();
    let r = until(&mut ws, Duration::from_secs(20), |v| {
        v["session"] == "after" && v["message"]["id"] == 2
    })
    .await
    .unwrap();
    assert!(
        r["message"]["result"]["content"][0]["text"].as_str().unwrap().contains("still-here"),
        "{r}"
    );

    // Request ids of 4 MiB, each answered: the runner remembers ids (one sent again after a
    // reconnect is not run twice) by digest, not whole — kept whole, sixty of them grew it past
    // 200 MiB (found by session 41's attack pass, through the real relay).
    for i in 0..60u64 {
        let id = format!("{i}-{}", "z".repeat(4 << 20));
        let ping = json!({"jsonrpc": "2.0", "id": id, "method": "ping"});
        ws.send(msg("after", ping)).await.unwrap();
        let prefix = format!("{i}-zz");
        let answered = until(&mut ws, Duration::from_secs(20), |v| {
            v["session"] == "after"
                && v["message"]["id"].as_str().is_some_and(|s| s.starts_with(&prefix))
        })
        .await;
        assert!(answered.is_some(), "ping {i} was not answered");
    }

    let peak = peak_rss_mib(pid);
    assert!(peak < 200, "the runner's resident memory peaked at {peak} MiB");
    assert_eq!(went.load(Ordering::SeqCst), 0, "the runner followed the relay's redirect");
    assert!(wait_until(Duration::from_secs(1), || !runner.text().contains(RUNNER_TOKEN)).await);
    fx.assert_canary();
}
