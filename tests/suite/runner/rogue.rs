//! A runner gone wrong, against the real relay: a test-written stand-in connects with box-1's
//! real token and answers like a server, then sends garbage, binary frames, an `open` of its
//! own, messages for sessions it was never given and a second answer to a call; a second
//! connection of the same name replaces the first; then a 64 MiB frame. The relay passes on
//! exactly one answer, keeps a quiet log, drops the link at the oversized frame, stays small,
//! and serves the real runner that connects next. A stand-in's `close` with a reason, or an
//! older one's without, reaches the agent as what happened, why and what to do.

use super::super::common::{Era, Fixture, text_of};
use super::{ALICE, Org, RUNNER_TOKEN, agent_at, call, peak_rss_mib, runner_config, start_runner};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::{Bytes, Message};

type Ws = tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>;

fn msg(session: &str, m: Value) -> Message {
    Message::text(json!({"v":1,"type":"msg","session":session,"message":m}).to_string())
}

/// Reads the relay's frames until one satisfies `want` (its envelope).
async fn until(ws: &mut Ws, mut want: impl FnMut(&Value) -> bool) -> Value {
    tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(Ok(frame)) = ws.next().await {
            if let Message::Text(t) = frame {
                let v: Value = serde_json::from_str(t.as_str()).unwrap();
                if want(&v) {
                    return v;
                }
            }
        }
        panic!("the relay closed the link");
    })
    .await
    .expect("the relay sent nothing of the kind within 10 s")
}

/// Dials the relay as box-1, with its real token, taking no frame size limit of its own.
async fn dial(org: &Org) -> Ws {
    let mut req = format!("ws://{}/runner", org.addr).into_client_request().unwrap();
    let h = req.headers_mut();
    h.insert("authorization", format!("Bearer {RUNNER_TOKEN}").parse().unwrap());
    h.insert("hands-runner", "box-1".parse().unwrap());
    h.insert("sec-websocket-protocol", "hands-runner.v1".parse().unwrap());
    h.insert("hands-instance", "rogue".parse().unwrap());
    let unlimited = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
        .max_frame_size(None)
        .max_message_size(None);
    let tcp = tokio::net::TcpStream::connect(org.addr).await.unwrap();
    tokio_tungstenite::client_async_with_config(req, tcp, Some(unlimited)).await.unwrap().0
}

#[tokio::test]
async fn a_runner_gone_wrong_cannot_crash_bloat_or_confuse_the_relay() {
    let fx = Fixture::new();
    let mut org = Org::start_plain(&fx).await;
    let mut ws = dial(&org).await;
    assert!(org.wait_connected(true, Duration::from_secs(10)).await);

    // An agent's session: the stand-in answers `initialize` as a server would.
    let agent = tokio::spawn(agent_at(org.endpoint("box-1"), ALICE, Era::Legacy, ()));
    let open = until(&mut ws, |v| v["type"] == "open").await;
    assert_eq!(open["agent"], "alice");
    let session = open["session"].as_str().unwrap().to_string();
    let init = until(&mut ws, |v| v["message"]["method"] == "initialize").await;
    let result = json!({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
        "serverInfo": {"name": "rogue", "version": "0"}});
    let answer = json!({"jsonrpc": "2.0", "id": init["message"]["id"], "result": result});
    ws.send(msg(&session, answer)).await.unwrap();
    let alice = Arc::new(agent.await.unwrap());

    // A call; before answering it, the stand-in sends everything that means nothing.
    let pending = {
        let alice = alice.clone();
        tokio::spawn(async move { call(&alice, "read", json!({"path": "x"})).await })
    };
    let asked = until(&mut ws, |v| v["message"]["method"] == "tools/call").await;
    let id = asked["message"]["id"].clone();
    for _ in 0..2000 {
        ws.feed(Message::text("garbage")).await.unwrap();
    }
    ws.feed(Message::Binary(Bytes::from_static(b"\x00binary"))).await.unwrap();
    let own_open = json!({"v":1,"type":"open","session":"mine","agent":"mallory"});
    ws.feed(Message::text(own_open.to_string())).await.unwrap();
    let stray =
        json!({"jsonrpc":"2.0","id":id,"result":{"content":[{"type":"text","text":"stray"}]}});
    ws.feed(msg("never-given", stray)).await.unwrap();
    let said = |text: &str| json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": text}]}});
    // A 1 MiB notification is not forwarded: once handed on it would wait for the agent outside
    // what the relay counts (found by the fifth attack pass: ~280 MiB a session).
    let big = json!({"jsonrpc": "2.0", "method": "notifications/message",
        "params": {"level": "info", "data": "p".repeat(1 << 20)}});
    ws.feed(msg(&session, big)).await.unwrap();
    ws.feed(msg(&session, said("the one answer"))).await.unwrap();
    ws.feed(msg(&session, said("a second answer"))).await.unwrap();
    ws.flush().await.unwrap();
    let r = tokio::time::timeout(Duration::from_secs(10), pending).await.unwrap().unwrap();
    assert_eq!(text_of(&r), "the one answer");
    let relay = org.relay.as_ref().unwrap();
    let noted = relay.lines.lock().unwrap().iter().filter(|l| l.contains("dropped (")).count();
    assert!((1..=6).contains(&noted), "{noted} log lines for 2,003 odd frames:\n{}", relay.text());
    assert!(!relay.text().contains(RUNNER_TOKEN) && !relay.text().contains(ALICE));
    assert!(relay.text().contains("notification of 10"), "{}", relay.text());

    // A new authenticated connection for the name replaces the old one (a reconnect after a
    // half-open link): the relay closes the first.
    let mut ws2 = dial(&org).await;
    let closed = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match ws.next().await {
                None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return,
                Some(Ok(_)) => {}
            }
        }
    });
    assert!(closed.await.is_ok(), "the older link stayed open");
    assert_eq!(org.box1().await["connected"], true, "the newer link is box-1's");

    // A 64 MiB frame: the relay reads no frame past 16 MiB and drops the link.
    let _ = ws2.send(Message::text("z".repeat(64 << 20))).await;
    assert!(org.wait_connected(false, Duration::from_secs(10)).await);
    let pid = org.relay.as_ref().unwrap().pid();
    let peak = peak_rss_mib(pid);
    assert!(peak < 200, "the relay's resident memory peaked at {peak} MiB");

    // The relay still serves: the real runner connects (another instance: the stand-in's
    // sessions end), and an agent's new session reaches it.
    let config = runner_config(&fx, &org.url(), None, RUNNER_TOKEN, "local");
    let runner = start_runner(&fx, &config);
    assert!(org.wait_connected(true, Duration::from_secs(20)).await, "{}", runner.text());
    let c = agent_at(org.endpoint("box-1"), ALICE, Era::Legacy, ()).await;
    let r = call(&c, "bash", json!({"command": "echo real-runner"})).await;
    assert!(text_of(&r).contains("real-runner"), "{}", text_of(&r));
    let relay = org.relay.as_mut().unwrap();
    assert!(relay.child.try_wait().unwrap().is_none(), "the relay exited");
    fx.assert_canary();
}

/// A runner that refuses a session says why in its `close`, and the agent reads what happened,
/// why and what to do (found by the previous session's notes: a refused agent read "a call
/// still waiting was lost"). A `close` without a reason (an older runner's) still ends the
/// session, and its agent's waiting call is told at once.
#[tokio::test]
async fn an_agent_reads_why_its_runner_closed_its_session() {
    let fx = Fixture::new();
    let org = Org::start_plain(&fx).await;
    let mut ws = dial(&org).await;
    assert!(org.wait_connected(true, Duration::from_secs(10)).await);
    let close = |session: &str, reason: Option<&str>| {
        let mut v = json!({"v": 1, "type": "close", "session": session});
        if let Some(r) = reason {
            v["reason"] = json!(r);
        }
        Message::text(v.to_string())
    };

    // Refused as full: the agent's `initialize` fails saying so.
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;
    let head = format!(
        "POST /runners/box-1/mcp HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {ALICE}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream"
    );
    let addr = org.addr;
    let refused = tokio::spawn(async move { org_raw(addr, &head, body).await });
    let open = until(&mut ws, |v| v["type"] == "open").await;
    let session = open["session"].as_str().unwrap().to_string();
    ws.send(close(&session, Some("full"))).await.unwrap();
    let (_, said) = tokio::time::timeout(Duration::from_secs(10), refused).await.unwrap().unwrap();
    assert!(said.contains("runner box-1 refused the session"), "{said}");
    assert!(said.contains("64 sessions already") && said.contains("try again"), "{said}");

    // An older runner's close, without a reason: the waiting call ends at once.
    let agent = tokio::spawn(agent_at(org.endpoint("box-1"), ALICE, Era::Legacy, ()));
    let open = until(&mut ws, |v| v["type"] == "open").await;
    let session = open["session"].as_str().unwrap().to_string();
    let init = until(&mut ws, |v| v["message"]["method"] == "initialize").await;
    let result = json!({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
        "serverInfo": {"name": "rogue", "version": "0"}});
    let answer = json!({"jsonrpc": "2.0", "id": init["message"]["id"], "result": result});
    ws.send(msg(&session, answer)).await.unwrap();
    let alice = Arc::new(agent.await.unwrap());
    let pending = {
        let alice = alice.clone();
        tokio::spawn(async move {
            let p = rmcp::model::CallToolRequestParams::new("read");
            alice
                .call_tool(p.with_arguments(json!({"path": "x"}).as_object().unwrap().clone()))
                .await
        })
    };
    until(&mut ws, |v| v["message"]["method"] == "tools/call").await;
    ws.send(close(&session, None)).await.unwrap();
    let r = tokio::time::timeout(Duration::from_secs(10), pending).await.unwrap().unwrap();
    let e = r.expect_err("a call in a closed session was answered").to_string();
    assert!(e.contains("runner box-1 ended the session without a reason"), "{e}");
    assert!(e.contains("start a new session"), "{e}");
}

/// One request to the plain relay at `addr` (`head` without its final blank line); (status,
/// body).
async fn org_raw(addr: std::net::SocketAddr, head: &str, body: &str) -> (u16, String) {
    let request =
        format!("{head}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
    super::exchange(addr, None, request.as_bytes()).await
}

/// An agent whose request body trickles in is cut as on `hands serve --http`: 408 and the
/// connection closed within the body timeout (10 s plus a second a 64 KiB), so it cannot hold a
/// connection and a runner's session open for ever. The same request sent at once reaches the
/// runner (the positive control).
#[tokio::test]
async fn an_agent_whose_body_trickles_in_gets_408_from_the_relay() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let fx = Fixture::new();
    let org = Org::start_plain(&fx).await;
    let mut ws = dial(&org).await;
    assert!(org.wait_connected(true, Duration::from_secs(10)).await);
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"slow","version":"0"}}}"#;
    let head = format!(
        "POST /runners/box-1/mcp HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {ALICE}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Content-Length: {}\r\n\r\n",
        body.len()
    );
    let mut slow = tokio::net::TcpStream::connect(org.addr).await.unwrap();
    slow.write_all(head.as_bytes()).await.unwrap();
    slow.write_all(&body.as_bytes()[..20]).await.unwrap();
    let started = std::time::Instant::now();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), slow.read_to_end(&mut answer))
        .await
        .expect("the relay kept a trickling body's connection open for 30 s")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(started.elapsed() >= Duration::from_secs(9), "{:?}", started.elapsed());
    // The control: the same request at once is passed on to the runner.
    let mut quick = tokio::net::TcpStream::connect(org.addr).await.unwrap();
    quick.write_all(format!("{head}{body}").as_bytes()).await.unwrap();
    let init = until(&mut ws, |v| v["message"]["method"] == "initialize").await;
    assert_eq!(init["message"]["params"]["clientInfo"]["name"], "slow");
}

/// Two runners with one token (the holder of one could connect as the other and answer its
/// agents), or two names a person reads as one: `hands relay` refuses to start, saying which
/// entries and what to do; the same file with distinct tokens and names starts.
#[test]
fn a_relay_toml_whose_runners_share_a_token_or_differ_only_in_case_is_refused() {
    let fx = Fixture::new();
    let file = fx.dir.path().join("relay.toml");
    // A port taken: a relay whose file passes its checks stops there, unable to listen.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let start = |second: &str, token: &str| {
        let toml = format!(
            "[relay]\nlisten = \"127.0.0.1:{port}\"\npublic_url = \"https://relay.example.com\"\n\n\
             [[relay.runners]]\nname = \"box-1\"\ntoken_sha256 = \"{}\"\n\n\
             [[relay.runners]]\nname = \"{second}\"\ntoken_sha256 = \"{}\"\n\n\
             [[relay.agents]]\nname = \"alice\"\ntoken_env = \"RELAY_TOKEN_ALICE\"\n\
             runners = [\"box-*\"]\n",
            super::sha256_hex(RUNNER_TOKEN),
            super::sha256_hex(token),
        );
        std::fs::write(&file, toml).unwrap();
        let out = fx
            .std_command(&["relay", "--config", file.to_str().unwrap()])
            .env("RELAY_TOKEN_ALICE", ALICE)
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (code, said) = start("box-2", RUNNER_TOKEN);
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("relay.toml:11: [[relay.runners]]: token_sha256"), "{said}");
    assert!(said.contains("runner `box-2` has the same token_sha256 as runner `box-1`"), "{said}");
    assert!(said.contains("hint: give each runner its own token"), "{said}");
    let (code, said) = start("Box-1", "box-2-token-0123456789abcdef");
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("relay.toml:10: [[relay.runners]]: name"), "{said}");
    assert!(said.contains("runner `Box-1` differs from runner `box-1` only in case"), "{said}");
    // The positive control: distinct names and tokens pass the file's checks (the taken port
    // is then what fails).
    let (code, said) = start("box-2", "box-2-token-0123456789abcdef");
    assert!(!said.contains("[[relay.runners]]"), "{code:?}: {said}");
    assert!(said.contains(&format!("cannot listen on 127.0.0.1:{port}")), "{code:?}: {said}");
}
