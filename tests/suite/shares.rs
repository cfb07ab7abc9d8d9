//! One token holder's share (decision 0087), through the real binary: on `hands serve --http`
//! a client's SSE streams hold at most its share of the listener's connections, and its
//! sessions at most its share of the daemon's; in each case another client still gets in. The
//! relay's side is `runner::shares`. Found by the seventh attack pass: one client's 256 GET
//! streams locked every other client out, and one client's 20,000 sessions grew the daemon to
//! 1.5 GB.

use super::common::{Fixture, serve_http};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const ALPHA: &str = "alpha-token-0123456789abcdef";
const BETA: &str = "beta-token-fedcba9876543210";
const GAMMA: &str = "gamma-token-0123456789abcdef";
const DELTA: &str = "delta-token-fedcba9876543210";
const EPSILON: &str = "epsilon-token-0123456789abcdef";

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

/// One answer: its status, head and (the start of its) body.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub head: String,
    pub body: String,
}

/// Sends `request` on a new connection and reads until the head and `Content-Length`'s body
/// have come (or 5 s passed, or the server closed); the connection stays open for a stream.
pub async fn send(addr: SocketAddr, request: &str) -> (Answer, Option<TcpStream>) {
    let Ok(mut s) = TcpStream::connect(addr).await else {
        return (Answer { status: 0, head: "no connection".into(), body: String::new() }, None);
    };
    let _ = s.write_all(request.as_bytes()).await;
    let mut buf = Vec::new();
    let read = async {
        let mut chunk = [0u8; 4096];
        loop {
            let text = String::from_utf8_lossy(&buf);
            if let Some((head, body)) = text.split_once("\r\n\r\n") {
                let len = (head.lines()).find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                });
                // A stream (no length) is answered once its head has come.
                if len.is_none_or(|n| body.len() >= n) {
                    return;
                }
            }
            match s.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(5), read).await;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (Answer { status, head: head.to_string(), body: body.to_string() }, Some(s))
}

/// The request of a POST of `body` to `path` as `token` (in session `session`, if any).
pub fn post(path: &str, token: &str, session: Option<&str>, body: &str) -> String {
    let session = session.map(|s| format!("Mcp-Session-Id: {s}\r\n")).unwrap_or_default();
    format!(
        "POST {path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         MCP-Protocol-Version: 2025-11-25\r\n{session}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// Opens a session at `path` as `token`: the initialize's answer, and the session's id.
pub async fn open_session(addr: SocketAddr, path: &str, token: &str) -> (Answer, Option<String>) {
    let (answer, _) = send(addr, &post(path, token, None, INITIALIZE)).await;
    let id = (answer.head.lines())
        .find(|l| l.to_ascii_lowercase().starts_with("mcp-session-id:"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string());
    if let Some(id) = &id {
        send(addr, &post(path, token, Some(id), INITIALIZED)).await;
    }
    (answer, id)
}

/// Opens `n` standalone SSE streams (`GET path`) as `token`, round the `sessions`, one after
/// another as the attack did; the streams still open, and how many answers had each status
/// (with one body of each).
pub async fn open_streams(
    addr: SocketAddr,
    path: &str,
    token: &str,
    sessions: &[String],
    n: usize,
) -> (Vec<TcpStream>, BTreeMap<u16, (usize, String)>) {
    let (mut open, mut statuses) = (Vec::new(), BTreeMap::new());
    for i in 0..n {
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {token}\r\n\
             Accept: text/event-stream\r\nMcp-Session-Id: {}\r\n\
             MCP-Protocol-Version: 2025-11-25\r\n\r\n",
            sessions[i % sessions.len()]
        );
        let (answer, stream) = send(addr, &request).await;
        let entry = statuses.entry(answer.status).or_insert((0, answer.body.clone()));
        entry.0 += 1;
        if answer.status == 200 {
            open.extend(stream);
        }
    }
    (open, statuses)
}

/// `[server.http]` with five clients, alpha to epsilon, and tools-fs.
fn five_clients(fx: &Fixture) -> std::path::PathBuf {
    let clients: String = ["alpha", "beta", "gamma", "delta", "epsilon"]
        .iter()
        .map(|n| {
            let var = format!("HANDS_TEST_TOKEN_{}", n.to_uppercase());
            format!("[[server.http.clients]]\nname = \"{n}\"\ntoken_env = \"{var}\"\n\n")
        })
        .collect();
    fx.config(&format!(
        "[daemon]\nstate_dir = \"{{state}}\"\n\n[server.http]\nlisten = \"127.0.0.1:1\"\n\n\
         {clients}[[builtins]]\nid = \"tools-fs\"\ngrants = [\"filesystem\"]\n\
         filesystem = [{{ path = \"{{root}}\", write = true }}]\n"
    ))
}

async fn start(fx: &Fixture) -> (tokio::process::Child, SocketAddr) {
    let env = [
        ("HANDS_TEST_TOKEN_ALPHA", ALPHA),
        ("HANDS_TEST_TOKEN_BETA", BETA),
        ("HANDS_TEST_TOKEN_GAMMA", GAMMA),
        ("HANDS_TEST_TOKEN_DELTA", DELTA),
        ("HANDS_TEST_TOKEN_EPSILON", EPSILON),
    ];
    serve_http(fx, &five_clients(fx), &env).await
}

#[tokio::test]
async fn one_clients_sse_streams_hold_only_its_share_and_another_client_gets_in() {
    super::load::raise_own_limit();
    let fx = Fixture::new();
    let (_child, addr) = start(&fx).await;
    let mut sessions = Vec::new();
    for _ in 0..10 {
        sessions.extend(open_session(addr, "/mcp", ALPHA).await.1);
    }
    assert_eq!(sessions.len(), 10);
    // More streams than the listener's 256 connections; before, every one was held for good.
    let (streams, statuses) = open_streams(addr, "/mcp", ALPHA, &sessions, 270).await;
    let report = format!("alpha's streams: {statuses:?}");
    assert_eq!(statuses.get(&200).map(|s| s.0), Some(128), "{report}");
    let (refused, body) = statuses.get(&429).cloned().unwrap_or_default();
    assert_eq!(refused, 270 - 128, "{report}");
    assert!(body.contains("`alpha` has 128 requests in flight") && body.contains("close a stream"));
    // Beta gets in and is served while alpha holds its streams.
    let (answer, id) = open_session(addr, "/mcp", BETA).await;
    assert_eq!(answer.status, 200, "beta was kept out: {answer:?}; {report}");
    let call = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
    let (listed, _) = send(addr, &post("/mcp", BETA, id.as_deref(), call)).await;
    assert_eq!(listed.status, 200, "{listed:?}");
    // Alpha's streams were not cut to make room: they are its share.
    drop(streams);
    fx.assert_canary();
}

#[tokio::test]
async fn one_client_holds_only_its_share_of_sessions_and_all_clients_their_total() {
    let fx = Fixture::new();
    let (_child, addr) = start(&fx).await;
    let mut alpha = Vec::new();
    for _ in 0..64 {
        let (answer, id) = open_session(addr, "/mcp", ALPHA).await;
        assert_eq!(answer.status, 200, "{answer:?}");
        alpha.extend(id);
    }
    // The 65th of alpha's is refused, saying the bound and the remedy.
    let (refused, id) = open_session(addr, "/mcp", ALPHA).await;
    assert_eq!(refused.status, 429, "{refused:?}");
    assert!(id.is_none());
    assert!(refused.body.contains("client `alpha` holds 64 MCP sessions already"), "{refused:?}");
    assert!(refused.body.contains("HTTP DELETE"), "{refused:?}");
    // Another client gets in; alpha does again once it ended one of its own.
    assert_eq!(open_session(addr, "/mcp", BETA).await.0.status, 200);
    let delete = format!(
        "DELETE /mcp HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {ALPHA}\r\n\
         Mcp-Session-Id: {}\r\nMCP-Protocol-Version: 2025-11-25\r\nContent-Length: 0\r\n\r\n",
        alpha[0]
    );
    let (deleted, _) = send(addr, &delete).await;
    assert!(deleted.status < 300, "{deleted:?}");
    assert_eq!(open_session(addr, "/mcp", ALPHA).await.0.status, 200);
    // The daemon's total: 256, whoever holds them.
    for token in [BETA, GAMMA, DELTA] {
        let held = if token == BETA { 1 } else { 0 };
        for _ in held..64 {
            assert_eq!(open_session(addr, "/mcp", token).await.0.status, 200);
        }
    }
    let (full, _) = open_session(addr, "/mcp", EPSILON).await;
    assert_eq!(full.status, 503, "{full:?}");
    assert!(full.body.contains("holds 256 MCP sessions already"), "{full:?}");
    fx.assert_canary();
}

/// Found by the last session's notes (the relay's was mended in decision 0086): rmcp answers 202
/// to a `DELETE` of any id, so beta's `DELETE` of alpha's session id seemed to close it while
/// nothing was. Sessions are per client: another's id is 404, and that session goes on.
#[tokio::test]
async fn a_delete_of_another_clients_session_is_404_and_that_session_goes_on() {
    let fx = Fixture::new();
    let (_child, addr) = start(&fx).await;
    let (_, alpha) = open_session(addr, "/mcp", ALPHA).await;
    let alpha = alpha.expect("alpha's session id");
    let delete = |token: &str, id: &str| {
        format!(
            "DELETE /mcp HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {token}\r\n\
             Mcp-Session-Id: {id}\r\nMCP-Protocol-Version: 2025-11-25\r\nContent-Length: 0\r\n\r\n"
        )
    };
    let (foreign, _) = send(addr, &delete(BETA, &alpha)).await;
    assert_eq!(foreign.status, 404, "beta's DELETE of alpha's session: {foreign:?}");
    assert!(foreign.body.contains("client beta holds no session with this id"), "{foreign:?}");
    assert!(foreign.body.contains("nothing was closed"), "{foreign:?}");
    let (made_up, _) = send(addr, &delete(ALPHA, "no-such-session")).await;
    assert_eq!(made_up.status, 404, "{made_up:?}");
    // Alpha's session goes on: a call in it is served.
    let call = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
    let (listed, _) = send(addr, &post("/mcp", ALPHA, Some(&alpha), call)).await;
    assert_eq!(listed.status, 200, "alpha's session was closed: {listed:?}");
    // The positive control: alpha's own DELETE ends it, and it is unknown from then on.
    let (own, _) = send(addr, &delete(ALPHA, &alpha)).await;
    assert!(own.status < 300, "{own:?}");
    let (after, _) = send(addr, &post("/mcp", ALPHA, Some(&alpha), call)).await;
    assert_eq!(after.status, 404, "a deleted session still served: {after:?}");
    fx.assert_canary();
}

/// Found by the last session's notes: the share was checked before rmcp made the session, so
/// initializes sent at once all passed a share with room for one. Now a client's opens are
/// checked one at a time: 100 at once leave it at its 64.
#[tokio::test]
async fn initializes_sent_at_once_do_not_pass_a_clients_share() {
    super::load::raise_own_limit();
    let fx = Fixture::new();
    let (_child, addr) = start(&fx).await;
    let mut opens = tokio::task::JoinSet::new();
    for _ in 0..100 {
        opens.spawn(async move { open_session(addr, "/mcp", ALPHA).await.0.status });
    }
    let mut statuses = BTreeMap::new();
    while let Some(status) = opens.join_next().await {
        *statuses.entry(status.unwrap()).or_insert(0) += 1;
    }
    assert_eq!(statuses.get(&200), Some(&64), "alpha's sessions opened at once: {statuses:?}");
    assert_eq!(statuses.get(&429), Some(&36), "{statuses:?}");
    // Another client still gets in.
    assert_eq!(open_session(addr, "/mcp", BETA).await.0.status, 200);
    fx.assert_canary();
}

/// `[server.http]` with alpha and beta, tools-fs whose writes a person is asked about.
fn two_asked(fx: &Fixture) -> std::path::PathBuf {
    fx.config(
        "[daemon]\nstate_dir = \"{state}\"\n\n[trust]\nwrite = \"ask\"\n\
         approval_timeout_secs = 60\n\n[server.http]\nlisten = \"127.0.0.1:1\"\n\n\
         [[server.http.clients]]\nname = \"alpha\"\ntoken_env = \"HANDS_TEST_TOKEN_ALPHA\"\n\n\
         [[server.http.clients]]\nname = \"beta\"\ntoken_env = \"HANDS_TEST_TOKEN_BETA\"\n\n\
         [[builtins]]\nid = \"tools-fs\"\ngrants = [\"filesystem\"]\n\
         filesystem = [{ path = \"{root}\", write = true }]\n",
    )
}

/// How many actions `hands approvals list` shows waiting, once it shows `n` (or 10 s passed).
async fn waiting_until(fx: &Fixture, cfg: &std::path::Path, n: usize) -> usize {
    let mut seen = usize::MAX;
    for _ in 0..100 {
        let (_, out) = super::gate::approvals(fx, cfg, &["list"]);
        seen = out.lines().filter(|l| l.starts_with("waiting ")).count();
        if seen == n {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    seen
}

/// A `write` of `path` in `session` as `token`, sent on a connection of its own and left to
/// wait: the connection, and what the server answered before it held the call.
///
/// Each call has a request id of its own, as the protocol asks of a client: rmcp keeps a
/// call's cancellation (and its answer stream) by its id, and a newer call with the same id
/// takes the older one's place, so a dropped call's late refusal cancelled the newest parked
/// call with its id, whose question was taken back (seen once under load: 13 of 16 listed).
async fn parked_write(addr: SocketAddr, token: &str, session: &str, path: &str) -> TcpStream {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(100);
    let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let call = format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"write","arguments":{{"path":"{path}","content":"P"}}}}}}"#
    );
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(post("/mcp", token, Some(session), &call).as_bytes()).await.unwrap();
    s
}

/// Found by the eighth attack pass: one client's calls, parked and dropped, held all 32 places
/// for a person's questions (other clients' calls were refused at once), and stayed parked after
/// their calls were gone — a person could approve what nobody waited for. A call that no longer
/// waits takes its question back, and one client holds at most 16 of the 32.
#[tokio::test]
async fn a_dropped_call_takes_its_question_back_and_one_client_parks_half() {
    let fx = Fixture::new();
    let cfg = two_asked(&fx);
    let env = [("HANDS_TEST_TOKEN_ALPHA", ALPHA), ("HANDS_TEST_TOKEN_BETA", BETA)];
    let (_child, addr) = serve_http(&fx, &cfg, &env).await;
    let alpha = open_session(addr, "/mcp", ALPHA).await.1.expect("alpha's session");
    let beta = open_session(addr, "/mcp", BETA).await.1.expect("beta's session");
    // Parked while its call waits (the control), taken back once the call is gone.
    let held = parked_write(addr, ALPHA, &alpha, "dropped.txt").await;
    assert_eq!(waiting_until(&fx, &cfg, 1).await, 1, "the call was not parked");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(waiting_until(&fx, &cfg, 1).await, 1, "unparked while its call waited");
    drop(held);
    assert_eq!(waiting_until(&fx, &cfg, 0).await, 0, "still parked after its call was dropped");
    assert!(!fx.root.join("dropped.txt").exists());
    // Alpha's share: 16 wait; its 17th is refused at once, saying why; beta is still asked.
    let mut streams = Vec::new();
    for i in 0..16 {
        streams.push(parked_write(addr, ALPHA, &alpha, &format!("a{i}.txt")).await);
    }
    assert_eq!(waiting_until(&fx, &cfg, 16).await, 16);
    let mut refused = parked_write(addr, ALPHA, &alpha, "a16.txt").await;
    let mut answer = Vec::new();
    let read = async {
        let mut chunk = [0u8; 4096];
        while !String::from_utf8_lossy(&answer).contains("actions waiting") {
            match refused.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => answer.extend_from_slice(&chunk[..n]),
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(10), read).await;
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.contains("client `alpha` has 16 actions waiting"), "{answer}");
    streams.push(parked_write(addr, BETA, &beta, "b.txt").await);
    assert_eq!(waiting_until(&fx, &cfg, 17).await, 17, "beta's question was kept out");
    drop(streams);
    assert_eq!(waiting_until(&fx, &cfg, 0).await, 0);
    for f in ["a0.txt", "a16.txt", "b.txt"] {
        assert!(!fx.root.join(f).exists(), "{f}");
    }
    fx.assert_canary();
}
