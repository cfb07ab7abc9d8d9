//! `hands serve --http`: the real binary on a loopback port, driven by rmcp's streamable HTTP
//! client in both protocol eras and by hand-written HTTP/1.1 for the door's refusals (tokens,
//! Host, Origin, body cap, sessions that belong to another client, startup refusals).

use super::common::{
    Client, Era, Fixture, Person, handshake, host_processes, serve_http, text_of, unique_sleep,
    wait_until,
};
use rmcp::ServiceExt;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::json;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Child;

const TOKEN_A: &str = "alpha-token-0123456789abcdef";
const TOKEN_B: &str = "beta-token-fedcba9876543210";

/// A running `hands serve --http 127.0.0.1:0` and the address its banner reported.
struct Server {
    _child: Child,
    addr: SocketAddr,
}

impl Server {
    fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }
}

/// tools-fs on the fixture's root, and `[server.http]` with two clients: `alpha` (token from a
/// variable) and `beta` (token from a file, with a trailing newline).
fn two_clients(fx: &Fixture) -> PathBuf {
    let token_file = fx.root.parent().unwrap().join("beta.token");
    std::fs::write(&token_file, format!("{TOKEN_B}\n")).unwrap();
    fx.config(&format!(
        "[daemon]\nstate_dir = \"{{state}}\"\n\n[server.http]\nlisten = \"127.0.0.1:1\"\n\n\
         [[server.http.clients]]\nname = \"alpha\"\ntoken_env = \"HANDS_TEST_TOKEN_A\"\n\n\
         [[server.http.clients]]\nname = \"beta\"\ntoken_file = \"{}\"\n\n\
         [[builtins]]\nid = \"tools-fs\"\ngrants = [\"filesystem\"]\n\
         filesystem = [{{ path = \"{{root}}\", write = true }}]\n",
        token_file.display()
    ))
}

/// Starts the server over HTTP on a free loopback port, alpha's token in its environment.
async fn start(fx: &Fixture, config: &std::path::Path) -> Server {
    let (child, addr) = serve_http(fx, config, &[("HANDS_TEST_TOKEN_A", TOKEN_A)]).await;
    Server { _child: child, addr }
}

/// rmcp's streamable HTTP client with this bearer token (or none), in the given era.
async fn connect(server: &Server, token: Option<&str>, era: Era) -> Client {
    connect_as(server, token, era, ()).await
}

/// [`connect`] with `handler` answering the daemon's questions (a [`Person`]).
async fn connect_as<H: rmcp::ClientHandler>(
    server: &Server,
    token: Option<&str>,
    era: Era,
    handler: H,
) -> Client<H> {
    let mut cfg = StreamableHttpClientTransportConfig::with_uri(server.url());
    if let Some(t) = token {
        cfg = cfg.auth_header(t);
    }
    let transport = StreamableHttpClientTransport::from_config(cfg);
    Client { service: handshake(handler, transport, era).await }
}

/// A hand-written HTTP/1.1 exchange: status, lowercased head, body.
struct Raw {
    status: u16,
    head: String,
    body: String,
}

impl Raw {
    fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
        })
    }
}

/// Sends `head` (request line and headers, without the blank line), then `body`, and reads the
/// response until the server closes (every request says `Connection: close`). A body the server
/// refuses early may not be read in full; the write error is ignored and the response still read.
async fn raw(addr: SocketAddr, head: &str, body: &[u8]) -> Raw {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut rd, mut wr) = s.split();
    let request = format!("{head}\r\nConnection: close\r\n\r\n");
    let send = async {
        let _ = wr.write_all(request.as_bytes()).await;
        let _ = wr.write_all(body).await;
    };
    let mut buf = Vec::new();
    let read = async {
        let _ = rd.read_to_end(&mut buf).await;
    };
    tokio::time::timeout(Duration::from_secs(20), async { tokio::join!(send, read) })
        .await
        .expect("the server did not answer within 20 s");
    let text = String::from_utf8_lossy(&buf).to_string();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    Raw { status, head: head.to_string(), body: body.to_string() }
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;

/// The head of a POST to /mcp of a `len`-byte JSON body, with the given extra header lines
/// (without the blank line that ends it).
fn post_head(addr: SocketAddr, extra: &[String], len: usize) -> String {
    let mut head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {len}"
    );
    for h in extra {
        head.push_str("\r\n");
        head.push_str(h);
    }
    head
}

/// A POST of `body` to /mcp with the given extra header lines.
async fn post(addr: SocketAddr, extra: &[String], body: &str) -> Raw {
    raw(addr, &post_head(addr, extra, body.len()), body.as_bytes()).await
}

fn bearer(token: &str) -> String {
    format!("Authorization: Bearer {token}")
}

#[tokio::test]
async fn http_without_or_with_a_wrong_token_is_401_with_a_bearer_challenge() {
    let fx = Fixture::new();
    let server = start(&fx, &two_clients(&fx)).await;
    let none = post(server.addr, &[], INITIALIZE).await;
    assert_eq!(none.status, 401, "{}{}", none.head, none.body);
    assert!(none.header("www-authenticate").unwrap().starts_with("Bearer"), "{}", none.head);
    let wrong = post(server.addr, &[bearer("alpha-token-0123456789abcdeX")], INITIALIZE).await;
    assert_eq!(wrong.status, 401, "{}", wrong.head);
    assert!(wrong.header("www-authenticate").unwrap().contains("invalid_token"));
    // A prefix of a real token, and a real token under another scheme, are no tokens.
    let prefix = post(server.addr, &[bearer(&TOKEN_A[..20])], INITIALIZE).await;
    assert_eq!(prefix.status, 401);
    let basic = post(server.addr, &[format!("Authorization: Basic {TOKEN_A}")], INITIALIZE).await;
    assert_eq!(basic.status, 401);
    // The paired positive control: the same request with alpha's token is served.
    let ok = post(server.addr, &[bearer(TOKEN_A)], INITIALIZE).await;
    assert_eq!(ok.status, 200, "{}{}", ok.head, ok.body);
    assert!(ok.body.contains("\"protocolVersion\""), "{}", ok.body);
    // rmcp's client without a token cannot even initialize.
    let transport = StreamableHttpClientTransport::from_uri(server.url());
    assert!(().serve(transport).await.is_err(), "a client without a token was served");
    drop(server);
}

#[tokio::test]
async fn http_refuses_foreign_host_and_origin_and_serves_loopback_ones() {
    let fx = Fixture::new();
    let server = start(&fx, &two_clients(&fx)).await;
    let a = server.addr;
    let auth = bearer(TOKEN_A);
    // DNS rebinding: a page on evil.example.com whose name now resolves to 127.0.0.1. Refused
    // before the token is even looked at.
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: evil.example.com:{}\r\n{auth}\r\nContent-Type: \
         application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}",
        a.port(),
        INITIALIZE.len()
    );
    let r = raw(a, &head, INITIALIZE.as_bytes()).await;
    assert_eq!(r.status, 403, "{}{}", r.head, r.body);
    assert!(r.body.contains("allowed_hosts"), "{}", r.body);
    for origin in ["http://evil.example.com", "https://evil.example.com:8443", "null"] {
        let r = post(a, &[auth.clone(), format!("Origin: {origin}")], INITIALIZE).await;
        assert_eq!(r.status, 403, "Origin {origin}: {}{}", r.head, r.body);
    }
    // Positive controls: loopback Host spellings and a loopback Origin are served.
    for host in [format!("localhost:{}", a.port()), format!("127.0.0.1:{}", a.port())] {
        let head = format!(
            "POST /mcp HTTP/1.1\r\nHost: {host}\r\n{auth}\r\nOrigin: http://{host}\r\n\
             Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
             Content-Length: {}",
            INITIALIZE.len()
        );
        let r = raw(a, &head, INITIALIZE.as_bytes()).await;
        assert_eq!(r.status, 200, "Host {host}: {}{}", r.head, r.body);
    }
    // Only /mcp is served.
    let r = raw(a, &format!("GET / HTTP/1.1\r\nHost: {a}\r\n{auth}"), b"").await;
    assert_eq!(r.status, 404);
    drop(server);
}

#[tokio::test]
async fn http_caps_request_bodies_at_4_mib() {
    let fx = Fixture::new();
    let server = start(&fx, &two_clients(&fx)).await;
    let a = server.addr;
    let auth = bearer(TOKEN_A);
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"pad":"{}"}}}}"#,
        "x".repeat(4 * 1024 * 1024 + 1)
    );
    // Declared length over the cap: refused on the headers alone, before any body is sent
    // (sending none also keeps the refused bytes from turning the close into a reset).
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {a}\r\n{auth}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}",
        big.len()
    );
    let r = raw(a, &head, b"").await;
    assert_eq!(r.status, 413, "{}{}", r.head, r.body);
    // Chunked, so no length is declared: refused while reading, at the same cap.
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {a}\r\n{auth}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nTransfer-Encoding: chunked"
    );
    let mut body = Vec::new();
    for chunk in big.as_bytes().chunks(64 * 1024) {
        body.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        body.extend_from_slice(chunk);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(b"0\r\n\r\n");
    let r = raw(a, &head, &body).await;
    assert_eq!(r.status, 413, "{}{}", r.head, r.body);
    // The paired positive control: a large body under the cap is read (and served).
    let under = INITIALIZE.replace("\"raw\"", &format!("\"{}\"", "r".repeat(3 * 1024 * 1024)));
    let r = post(a, &[auth], &under).await;
    assert_eq!(r.status, 200, "{}", r.head);
    drop(server);
}

#[tokio::test]
async fn http_clients_use_tools_in_both_eras_under_their_own_names() {
    let fx = Fixture::new();
    fx.write("notes/hello.txt", "hello over http\n");
    let server = start(&fx, &two_clients(&fx)).await;
    for (token, era) in [(TOKEN_A, Era::Legacy), (TOKEN_B, Era::Modern), (TOKEN_A, Era::Modern)] {
        let c = connect(&server, Some(token), era).await;
        let r = c.ok("list_dir", json!({"path": "notes"})).await;
        assert!(r.to_string().contains("hello.txt"), "{era:?}: {r}");
        let r = c.ok("read", json!({"path": "notes/hello.txt"})).await;
        assert!(r["content"].as_str().unwrap().contains("hello over http"), "{era:?}: {r}");
        // Paths outside the roots stay refused over HTTP too.
        let outside = fx.outside.join("canary.txt");
        let e = c.err("read", json!({"path": outside.to_str().unwrap()})).await;
        assert!(!e.contains("canary: must stay"), "{e}");
        c.stop().await;
    }
    // The identity: each client's write is recorded under its configured name.
    let alpha = connect(&server, Some(TOKEN_A), Era::Legacy).await;
    alpha.ok("write", json!({"path": "by-alpha.txt", "content": "a\n"})).await;
    alpha.stop().await;
    let beta = connect(&server, Some(TOKEN_B), Era::Modern).await;
    let r = beta.call("write", json!({"path": "by-beta.txt", "content": "b\n"})).await;
    assert_ne!(r.is_error, Some(true), "{}", text_of(&r));
    beta.stop().await;
    assert_eq!(std::fs::read_to_string(fx.root.join("by-alpha.txt")).unwrap(), "a\n");
    assert_eq!(std::fs::read_to_string(fx.root.join("by-beta.txt")).unwrap(), "b\n");
    let audit = std::fs::read_to_string(fx.state.join("audit.jsonl")).unwrap();
    let client_of = |path: &str| {
        audit
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .find(|v| v["tool"] == "write" && v["arguments"]["path"] == path)
            .map(|v| v["client"].clone())
    };
    assert_eq!(client_of("by-alpha.txt"), Some(json!("alpha")), "{audit}");
    assert_eq!(client_of("by-beta.txt"), Some(json!("beta")), "{audit}");
    fx.assert_canary();
    drop(server);
}

#[tokio::test]
async fn http_session_of_one_client_is_unknown_to_another() {
    let fx = Fixture::new();
    let server = start(&fx, &two_clients(&fx)).await;
    let a = server.addr;
    let init = post(a, &[bearer(TOKEN_A)], INITIALIZE).await;
    assert_eq!(init.status, 200, "{}", init.head);
    let session = init.header("mcp-session-id").expect("a 2025-era session id");
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    let list = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
    let with = |token: &str| {
        vec![
            bearer(token),
            format!("Mcp-Session-Id: {session}"),
            "MCP-Protocol-Version: 2025-11-25".to_string(),
        ]
    };
    assert_eq!(post(a, &with(TOKEN_A), initialized).await.status, 202);
    // beta's token with alpha's session: beta's service has never seen that session.
    let stolen = post(a, &with(TOKEN_B), list).await;
    assert_eq!(stolen.status, 404, "{}{}", stolen.head, stolen.body);
    assert!(!stolen.body.contains("list_dir"), "{}", stolen.body);
    // Positive control: alpha's own session lists the tools.
    let own = post(a, &with(TOKEN_A), list).await;
    assert_eq!(own.status, 200, "{}", own.head);
    assert!(own.body.contains("list_dir"), "{}", own.body);
    drop(server);
}

#[tokio::test]
async fn http_without_clients_serves_loopback_only_as_http() {
    let fx = Fixture::new();
    let server = start(&fx, &fx.fs_config()).await;
    fx.write("x.txt", "x\n");
    let c = connect(&server, None, Era::Modern).await;
    c.ok("write", json!({"path": "y.txt", "content": "y\n"})).await;
    c.stop().await;
    let audit = std::fs::read_to_string(fx.state.join("audit.jsonl")).unwrap();
    assert!(audit.lines().any(|l| l.contains("\"client\":\"http\"")), "{audit}");
    // Host checks hold without tokens too.
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: evil.example.com\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}",
        INITIALIZE.len()
    );
    assert_eq!(raw(server.addr, &head, INITIALIZE.as_bytes()).await.status, 403);
    drop(server);
}

/// Runs `hands serve` expecting it to refuse to start; returns its stderr.
fn refused(fx: &Fixture, config: &std::path::Path, http: &str, env: &[(&str, &str)]) -> String {
    let out = fx
        .std_command(&["serve", "--config", config.to_str().unwrap(), "--http", http])
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(out.stdout.is_empty());
    err
}

#[test]
fn http_on_a_non_loopback_address_without_clients_refuses_to_start() {
    let fx = Fixture::new();
    let err = refused(&fx, &fx.fs_config(), "0.0.0.0:0", &[]);
    assert!(err.contains("0.0.0.0:0") && err.contains("without bearer tokens"), "{err}");
    assert!(err.contains("[[server.http.clients]]") && err.contains("token_env"), "{err}");
}

#[test]
fn http_client_whose_token_is_missing_or_weak_refuses_to_start() {
    let fx = Fixture::new();
    let config = two_clients(&fx);
    let err = refused(&fx, &config, "127.0.0.1:0", &[]);
    assert!(err.contains("`alpha`") && err.contains("HANDS_TEST_TOKEN_A"), "{err}");
    let err = refused(&fx, &config, "127.0.0.1:0", &[("HANDS_TEST_TOKEN_A", "  \n")]);
    assert!(err.contains("`alpha`") && err.contains("empty"), "{err}");
    let err = refused(&fx, &config, "127.0.0.1:0", &[("HANDS_TEST_TOKEN_A", "short")]);
    assert!(err.contains("`alpha`") && err.contains("at least 16"), "{err}");
    let err = refused(&fx, &config, "127.0.0.1:0", &[("HANDS_TEST_TOKEN_A", TOKEN_B)]);
    assert!(err.contains("same token"), "{err}");
    std::fs::remove_file(fx.root.parent().unwrap().join("beta.token")).unwrap();
    let err = refused(&fx, &config, "127.0.0.1:0", &[("HANDS_TEST_TOKEN_A", TOKEN_A)]);
    assert!(err.contains("`beta`") && err.contains("beta.token"), "{err}");
}

#[test]
fn http_client_names_must_be_unique_and_not_a_built_in_identity() {
    let fx = Fixture::new();
    let config = fx.config(
        "[server.http]\nlisten = \"127.0.0.1:8765\"\n\
         [[server.http.clients]]\nname = \"stdio\"\ntoken_env = \"A\"\n\
         [[server.http.clients]]\nname = \"ci\"\ntoken_env = \"B\"\n\
         [[server.http.clients]]\nname = \"ci\"\ntoken_env = \"C\"\n\
         [[server.http.clients]]\nname = \"has space\"\ntoken_env = \"D\"\n\
         [[builtins]]\nid = \"tools-fs\"\ngrants = [\"filesystem\"]\n\
         filesystem = [{ path = \"{root}\" }]\n",
    );
    let out = fx.std_command(&["check", "--config", config.to_str().unwrap()]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("`stdio` is reserved"), "{text}");
    assert!(text.contains("`ci` appears twice"), "{text}");
    assert!(text.contains("`has space` is not"), "{text}");
}

#[test]
fn doctor_warns_of_a_non_loopback_listener_and_a_token_serve_would_refuse() {
    use std::os::unix::fs::PermissionsExt;
    let fx = Fixture::new();
    let token_file = fx.root.parent().unwrap().join("ops.token");
    std::fs::write(&token_file, format!("{TOKEN_B}\n")).unwrap();
    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let config = fx.config(&format!(
        "[server.http]\nlisten = \"0.0.0.0:8765\"\n\
         [[server.http.clients]]\nname = \"ci\"\ntoken_env = \"HANDS_TEST_UNSET_TOKEN\"\n\
         [[server.http.clients]]\nname = \"ops\"\ntoken_file = \"{}\"\n\
         [[builtins]]\nid = \"tools-fs\"\ngrants = [\"filesystem\"]\n\
         filesystem = [{{ path = \"{{root}}\" }}]\n",
        token_file.display()
    ));
    // `ci`'s token, in doctor's environment or not.
    let doctor = |token: Option<&str>| {
        let mut cmd = fx.std_command(&["doctor", "--config", config.to_str().unwrap()]);
        if let Some(t) = token {
            cmd.env("HANDS_TEST_UNSET_TOKEN", t);
        }
        let out = cmd.output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stdout).to_string())
    };
    let (code, text) = doctor(None);
    assert!(text.contains("0.0.0.0:8765, not a loopback address"), "{text}");
    assert!(text.contains("would refuse to start") && text.contains("`ci`"), "{text}");
    assert!(text.contains("`ops`: token_file") && text.contains("chmod 600"), "{text}");
    // Not safe to serve: `serve` would not start.
    assert_eq!(code, Some(1), "{text}");
    // The paired control: a private token file draws no such warning.
    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert!(!doctor(None).1.contains("chmod 600"));
    // With `ci`'s token present, serve would start: doctor still warns of the listener but
    // exits 0 (warnings do not fail it).
    let (code, text) = doctor(Some(TOKEN_A));
    assert!(text.contains("0.0.0.0:8765, not a loopback address"), "{text}");
    assert!(!text.contains("would refuse to start"), "{text}");
    assert_eq!(code, Some(0), "{text}");
}

/// The daemon's socket for the connection from local port `client_port` to `server_port`,
/// fetched out of the daemon with pidfd_getfd (the tests run as root).
fn daemon_socket(pid: u32, server_port: u16, client_port: u16) -> std::os::fd::OwnedFd {
    let tcp = std::fs::read_to_string(format!("/proc/{pid}/net/tcp")).unwrap();
    let port_of = |addr: &str| u16::from_str_radix(addr.rsplit(':').next().unwrap(), 16).unwrap();
    let inode = tcp
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| port_of(f[1]) == server_port && port_of(f[2]) == client_port)
        .map(|f| f[9].to_string())
        .unwrap_or_else(|| panic!("no daemon socket for port {client_port} in\n{tcp}"));
    let want = format!("socket:[{inode}]");
    let fd = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
        .find(|e| std::fs::read_link(e.path()).is_ok_and(|t| t.to_string_lossy() == want))
        .map(|e| e.file_name().to_string_lossy().parse::<i32>().unwrap())
        .unwrap_or_else(|| panic!("the daemon holds no descriptor for {want}"));
    let pidfd = rustix::process::pidfd_open(
        rustix::process::Pid::from_raw(pid.try_into().unwrap()).unwrap(),
        rustix::process::PidfdFlags::empty(),
    )
    .unwrap();
    rustix::process::pidfd_getfd(&pidfd, fd, rustix::process::PidfdGetfdFlags::empty()).unwrap()
}

/// Answers go out in several small writes (the head, then SSE events): without TCP_NODELAY on
/// the daemon's end, Nagle's algorithm holds each next write until the client's delayed ACK —
/// 44 ms a call measured from Python's `http.client` in the 2025-11-25 session mode, 0.22 ms
/// with it. Read off the daemon's own socket; the client's socket (tokio's default, Nagle on) is
/// the positive control that the check can see the difference.
#[tokio::test]
async fn http_connections_are_served_without_nagle_delays() {
    let fx = Fixture::new();
    let (child, addr) = serve_http(&fx, &fx.fs_config(), &[]).await;
    let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
    conn.write_all(b"GET /nowhere HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").await.unwrap();
    let mut buf = [0u8; 512];
    let n = conn.read(&mut buf).await.unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 "), "an answer first");
    assert!(!rustix::net::sockopt::tcp_nodelay(&conn).unwrap(), "control: Nagle on here");
    let port = conn.local_addr().unwrap().port();
    let theirs = daemon_socket(child.id().unwrap(), addr.port(), port);
    assert!(rustix::net::sockopt::tcp_nodelay(&theirs).unwrap(), "the daemon's end has Nagle on");
    drop(child);
}

/// Sends a session-era `bash` call on a connection of its own and, once its `sleep` runs on the
/// host, drops the connection without reading the answer: a client that vanished mid-call.
async fn call_and_vanish(addr: SocketAddr, headers: &[String], secs: &str) {
    // Each call its own JSON-RPC id: a cancelled call's id may still be in rmcp's books for a
    // moment after its command ended.
    static ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(100);
    let id = ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let body = json!({
        "jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": { "name": "bash", "arguments": { "command": format!("sleep {secs}") } }
    })
    .to_string();
    let head = post_head(addr, headers, body.len());
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("{head}\r\n\r\n{body}").as_bytes()).await.unwrap();
    assert!(
        wait_until(Duration::from_secs(15), || !host_processes(&["sleep", secs]).is_empty()).await,
        "the command never started"
    );
    drop(s);
}

/// A session-era client (2025-11-25) whose connection closes mid-`bash` and that is never heard
/// from again has its command stopped after the grace (src/hangups.rs); one that comes back
/// within the grace keeps it (a disconnect is not a cancellation); a DELETE of the session
/// stops what still runs in it at once; another client's DELETE of the session id stops
/// nothing.
#[tokio::test]
#[allow(clippy::print_stderr)] // the figures, for the record
async fn http_a_client_that_vanishes_mid_bash_has_its_command_stopped_after_a_grace() {
    let fx = Fixture::new();
    let config = fx.config(
        "[daemon]\nstate_dir = \"{state}\"\n\n[server.http]\nlisten = \"127.0.0.1:1\"\n\n\
         [[server.http.clients]]\nname = \"alpha\"\ntoken_env = \"HANDS_TEST_TOKEN_A\"\n\n\
         [[server.http.clients]]\nname = \"beta\"\ntoken_env = \"HANDS_TEST_TOKEN_B\"\n\n\
         [[builtins]]\nid = \"tools-shell\"\ngrants = [\"filesystem\", \"spawn\"]\n\
         filesystem = [{ path = \"{root}\", write = true }]\n\
         config = { trust = { external = \"allow\" } }\n",
    );
    let (_child, a) = serve_http(
        &fx,
        &config,
        &[("HANDS_TEST_TOKEN_A", TOKEN_A), ("HANDS_TEST_TOKEN_B", TOKEN_B)],
    )
    .await;
    let init = post(a, &[bearer(TOKEN_A)], INITIALIZE).await;
    assert_eq!(init.status, 200, "{}", init.head);
    let session = init.header("mcp-session-id").expect("a 2025-era session id");
    let with = |token: &str| {
        vec![
            bearer(token),
            format!("Mcp-Session-Id: {session}"),
            "MCP-Protocol-Version: 2025-11-25".to_string(),
        ]
    };
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    assert_eq!(post(a, &with(TOKEN_A), initialized).await.status, 202);
    let ping = r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#;

    // Vanished: nothing more from the session; the sleep goes after the 10 s grace.
    let secs = unique_sleep();
    call_and_vanish(a, &with(TOKEN_A), &secs).await;
    let t = std::time::Instant::now();
    assert!(
        wait_until(Duration::from_secs(25), || host_processes(&["sleep", &secs]).is_empty()).await,
        "the command outlived its vanished client by 25 s"
    );
    eprintln!("vanished: the command ended {:?} after its connection closed", t.elapsed());

    // Back within the grace: pings from the session keep the command; so does another
    // client's DELETE of this session id (rmcp answers 202 to any id; beta's service has no
    // such session, and the door keys sessions by the service that made them).
    let secs = unique_sleep();
    call_and_vanish(a, &with(TOKEN_A), &secs).await;
    let delete =
        |token: &str| format!("DELETE /mcp HTTP/1.1\r\nHost: {a}\r\n{}", with(token).join("\r\n"));
    let stolen = raw(a, &delete(TOKEN_B), b"").await;
    assert!(stolen.status < 500, "{}", stolen.head);
    let t = std::time::Instant::now();
    while t.elapsed() < Duration::from_secs(14) {
        assert_eq!(post(a, &with(TOKEN_A), ping).await.status, 200);
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    assert_eq!(
        host_processes(&["sleep", &secs]).len(),
        1,
        "the command of a client that came back was stopped"
    );

    // A DELETE of the session by its own client stops the command at once.
    let gone = raw(a, &delete(TOKEN_A), b"").await;
    assert!(gone.status < 300, "{}", gone.head);
    let t = std::time::Instant::now();
    assert!(
        wait_until(Duration::from_secs(20), || host_processes(&["sleep", &secs]).is_empty()).await,
        "the command outlived the DELETE of its session"
    );
    let ended = t.elapsed();
    eprintln!("deleted: the command ended {ended:?} after the DELETE");
    assert!(
        ended < Duration::from_secs(4),
        "the command outlived its deleted session by {ended:?}"
    );
    fx.assert_canary();
}

/// As [`refused`], but a daemon that serves instead of refusing fails the test within 20 s
/// (it is killed) rather than holding it up.
fn refused_soon(fx: &Fixture, config: &std::path::Path, http: &str) -> String {
    let mut child = fx
        .std_command(&["serve", "--config", config.to_str().unwrap(), "--http", http])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let until = std::time::Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > until {
            let _ = child.kill();
            let _ = child.wait();
            panic!("hands serve started instead of refusing");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(out.stdout.is_empty());
    err
}

/// tools-fs and tools-shell (with `grants`) on the root; `extra` goes before the modules.
fn shell_over_http(fx: &Fixture, grants: &str, extra: &str) -> PathBuf {
    // The host's network: the network by domain keeps commands off the host's loopback.
    let network = if grants.contains("network") { ", network = { mode = \"host\" }" } else { "" };
    fx.config(&format!(
        "[daemon]\nstate_dir = \"{{state}}\"\n\n{extra}\n\
         [[builtins]]\nid = \"tools-fs\"\ngrants = [\"filesystem\"]\n\
         filesystem = [{{ path = \"{{root}}\", write = true }}]\n\n\
         [[builtins]]\nid = \"tools-shell\"\ngrants = [{grants}]\n\
         filesystem = [{{ path = \"{{root}}\", write = true }}]\n\
         config = {{ trust = {{ external = \"allow\" }}{network} }}\n"
    ))
}

/// Issue 22, class 4: with the `network` grant, commands share the host's loopback, so HTTP on
/// loopback without per-client tokens would make any command a client of its own daemon (every
/// module's tools, its own approvals answered). `serve`, `check` and `doctor` refuse it, saying
/// what, why and what to do; without the grant, or with tokens, it serves.
#[tokio::test]
async fn tokenless_loopback_http_is_refused_while_commands_share_the_host_network() {
    let fx = Fixture::new();
    let grants = "\"filesystem\", \"spawn\", \"network\"";
    let config = shell_over_http(&fx, grants, "");
    let err = refused_soon(&fx, &config, "127.0.0.1:0");
    assert!(err.contains("refusing to serve HTTP on 127.0.0.1:0 without bearer tokens"), "{err}");
    assert!(err.contains("tools-shell holds the `network` grant"), "{err}");
    assert!(err.contains("[[server.http.clients]]") && err.contains("take `network` off"), "{err}");
    // The same from the file alone: check and doctor say so and exit 1.
    let config = shell_over_http(&fx, grants, "[server.http]\nlisten = \"127.0.0.1:8765\"\n");
    for cmd in ["check", "doctor"] {
        let out = fx.std_command(&[cmd, "--config", config.to_str().unwrap()]).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{cmd}: {text}");
        assert!(
            text.contains("would refuse to start") && text.contains("`network` grant"),
            "{text}"
        );
    }
    // Positive controls: without the grant it serves tokenless loopback (commands have a network
    // of their own), and with the grant it serves once clients have tokens.
    let (_child, addr) =
        serve_http(&fx, &shell_over_http(&fx, "\"filesystem\", \"spawn\"", ""), &[]).await;
    assert!(addr.ip().is_loopback());
    drop(_child);
    let clients = "[server.http]\nlisten = \"127.0.0.1:1\"\n[[server.http.clients]]\n\
                   name = \"alpha\"\ntoken_env = \"HANDS_TEST_TOKEN_A\"\n";
    let config = shell_over_http(&fx, grants, clients);
    let (_child, _addr) = serve_http(&fx, &config, &[("HANDS_TEST_TOKEN_A", TOKEN_A)]).await;
    let out = fx
        .std_command(&["doctor", "--config", config.to_str().unwrap()])
        .env("HANDS_TEST_TOKEN_A", TOKEN_A)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("the `network` grant puts its commands on the host's network"), "{text}");
    fx.assert_canary();
}

/// A client's token file where a command or a file tool can read it would hand the agent that
/// client's identity: inside a root, or in a folder every command sees (the sandbox home here).
#[test]
fn an_http_token_file_that_commands_can_read_is_refused_at_startup() {
    let fx = Fixture::new();
    let home = fx.state.join("sandbox-home");
    std::fs::create_dir_all(&home).unwrap();
    for (file, why) in [
        (fx.root.join("agent.token"), "inside the root"),
        (home.join("agent.token"), "a folder every command of tools-shell sees"),
    ] {
        std::fs::write(&file, format!("{TOKEN_A}\n")).unwrap();
        let extra = format!(
            "[server.http]\nlisten = \"127.0.0.1:1\"\n[[server.http.clients]]\nname = \"agent\"\n\
             token_file = \"{}\"\n",
            file.display()
        );
        let config = shell_over_http(&fx, "\"filesystem\", \"spawn\"", &extra);
        let err = refused_soon(&fx, &config, "127.0.0.1:0");
        assert!(err.contains("token_file") && err.contains(why), "{err}");
        assert!(err.contains("call the tools as `agent`") && err.contains("hint:"), "{err}");
    }
    // Positive control: the same token beside the roots, where nothing of the sandbox reaches.
    let file = fx.root.parent().unwrap().join("agent.token");
    std::fs::write(&file, format!("{TOKEN_A}\n")).unwrap();
    let extra = format!(
        "[server.http]\nlisten = \"127.0.0.1:1\"\n[[server.http.clients]]\nname = \"agent\"\n\
         token_file = \"{}\"\n",
        file.display()
    );
    let config = shell_over_http(&fx, "\"filesystem\", \"spawn\"", &extra);
    let out = fx.std_command(&["doctor", "--config", config.to_str().unwrap()]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("would refuse to start"), "{text}");
    fx.assert_canary();
}

/// With tokens and the `network` grant, a command reaches the port but gets nothing: `/mcp`
/// answers it 401 (it cannot call a tool or become a client that answers approvals), and the
/// person's channels are not in its world — the control socket and the rest of the state dir
/// are absent inside the sandbox — so a write parked for a person expires refused while the
/// command tries. Positive control: the real client with its token works.
#[tokio::test]
async fn with_tokens_a_command_cannot_call_tools_or_answer_an_approval() {
    let fx = Fixture::new();
    let clients = "[trust]\nwrite = \"ask\"\napproval_timeout_secs = 4\n\n[server.http]\n\
                   listen = \"127.0.0.1:1\"\n[[server.http.clients]]\nname = \"alpha\"\n\
                   token_env = \"HANDS_TEST_TOKEN_A\"\n";
    let config = shell_over_http(&fx, "\"filesystem\", \"spawn\", \"network\"", clients);
    let server = start(&fx, &config).await;
    let c = connect(&server, Some(TOKEN_A), Era::Legacy).await;
    let r = c.ok("bash", json!({"command": "echo client-works"})).await;
    assert!(r["stdout"].as_str().unwrap().contains("client-works"), "{r}");
    assert!(fx.state.join("control.sock").exists(), "the daemon's control socket is on the host");
    let state = fx.state.display();
    let url = server.url();
    let script = format!(
        "post() {{ curl -s -o /dev/null -w '%{{http_code}}' -X POST -H 'Content-Type: \
         application/json' -H 'Accept: application/json, text/event-stream' {} --data \"$1\" {url}; }}\n\
         echo \"init=$(post '{INITIALIZE}')\"\n\
         echo \"call=$(post '{{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":\
         {{\"name\":\"write\",\"arguments\":{{\"path\":\"by-command.txt\",\"content\":\"x\"}}}}}}')\"\n\
         echo \"state=$(ls -A {state} | tr '\\n' ' ')\"\n\
         test -e {state}/control.sock && echo control-visible || echo control-absent\n\
         curl -s --max-time 3 --unix-socket {state}/control.sock http://hands/ >/dev/null; \
         echo \"unix=$?\"\n",
        "-H 'MCP-Protocol-Version: 2025-11-25'"
    );
    let parked = c.call("write", json!({"path": "parked.txt", "content": "needs a person\n"}));
    let attack = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        c.ok("bash", json!({"command": script})).await
    };
    let (parked, attack) = tokio::join!(parked, attack);
    let out = attack["stdout"].as_str().unwrap().to_string();
    assert!(out.contains("init=401") && out.contains("call=401"), "{attack}");
    assert!(out.contains("state=sandbox-home \n") || out.contains("state=sandbox-home\n"), "{out}");
    assert!(out.contains("control-absent") && !out.contains("unix=0"), "{out}");
    assert_eq!(parked.is_error, Some(true), "nobody answered: {}", text_of(&parked));
    assert!(!fx.root.join("parked.txt").exists() && !fx.root.join("by-command.txt").exists());
    let audit = std::fs::read_to_string(fx.state.join("audit.jsonl")).unwrap();
    assert!(!audit.contains("person-via"), "{audit}");
    c.stop().await;
    fx.assert_canary();
}

/// Found by the eighth attack pass: a tmux session was the module's, not its client's — beta
/// listed alpha's session, read its output, typed into it (once a person allowed `tmux_send`
/// for beta's own) and could end it; a relay agent the same with another agent's. A client now
/// reads, types into and ends only the sessions it started; the person sees all of them.
#[tokio::test]
async fn a_client_reads_types_into_and_ends_only_its_own_tmux_sessions() {
    let fx = Fixture::new();
    let token_file = fx.root.parent().unwrap().join("beta.token");
    std::fs::write(&token_file, format!("{TOKEN_B}\n")).unwrap();
    let config = fx.config(&format!(
        "[daemon]\nstate_dir = \"{{state}}\"\n\n[server.http]\nlisten = \"127.0.0.1:1\"\n\n\
         [[server.http.clients]]\nname = \"alpha\"\ntoken_env = \"HANDS_TEST_TOKEN_A\"\n\n\
         [[server.http.clients]]\nname = \"beta\"\ntoken_file = \"{}\"\n\n\
         [[builtins]]\nid = \"tools-shell\"\ngrants = [\"filesystem\", \"spawn\"]\n\
         filesystem = [{{ path = \"{{root}}\", write = true }}]\n\
         config = {{ trust = {{ external = \"allow\" }} }}\n",
        token_file.display()
    ));
    let server = start(&fx, &config).await;
    let alpha = connect(&server, Some(TOKEN_A), Era::Legacy).await;
    let beta = connect(&server, Some(TOKEN_B), Era::Legacy).await;
    let start_args = json!({ "command": "echo SECRET-OF-A; sleep 300", "name": "a-work" });
    alpha.ok("tmux_start", start_args).await;
    let seen = super::tmux::read_until(&alpha, "a-work", |r| {
        r["text"].as_str().unwrap_or("").contains("SECRET-OF-A")
    })
    .await;
    assert!(seen["text"].as_str().unwrap().contains("SECRET-OF-A"), "{seen}");

    let listed = beta.ok("tmux_list", json!({})).await;
    assert!(!listed.to_string().contains("a-work"), "beta lists alpha's session: {listed}");
    let session = json!({ "session": "a-work" });
    let typed = json!({ "session": "a-work", "text": "echo INJECTED-BY-BETA" });
    // Names are each client's own: beta has no `a-work`, and is told so before anyone is asked.
    for (tool, args) in [("tmux_read", &session), ("tmux_send", &typed), ("tmux_kill", &session)] {
        let e = beta.err(tool, args.clone()).await;
        assert!(e.contains("no tmux session named \"a-work\" is yours"), "{tool}: {e}");
        assert!(!e.contains("SECRET-OF-A"), "{tool}: {e}");
    }
    // Alpha's session goes on, untouched; beta's own session is its own to read (the positive
    // controls).
    let r = alpha.ok("tmux_read", session.clone()).await;
    assert_eq!(r["ended"], false, "{r}");
    assert!(!r["text"].as_str().unwrap().contains("INJECTED"), "{r}");
    assert!(alpha.ok("tmux_list", json!({})).await.to_string().contains("a-work"));
    beta.ok("tmux_start", json!({ "command": "echo OF-B; sleep 300", "name": "b-work" })).await;
    let b = super::tmux::read_until(&beta, "b-work", |r| {
        r["text"].as_str().unwrap_or("").contains("OF-B")
    })
    .await;
    assert!(b["text"].as_str().unwrap().contains("OF-B"), "{b}");
    beta.ok("tmux_kill", json!({ "session": "b-work" })).await;
    alpha.ok("tmux_kill", session).await;
    fx.assert_canary();
}

/// Found by session 40's attack pass: the clients of a daemon shared one loopback, so beta's
/// `bash` reached a `node --inspect` port alpha's tmux session kept on 127.0.0.1 and ran code in
/// it — with whatever a person had granted alpha's session. Each client's commands now have a
/// network namespace of their own (decision 0106). Positive controls: alpha's own `bash`
/// reaches its session's server, and beta's reaches beta's.
#[tokio::test]
async fn a_clients_commands_do_not_reach_another_clients_loopback() {
    let fx = Fixture::new();
    let config = shell_for_two(&fx, "allow");
    let server = start(&fx, &config).await;
    let alpha = connect(&server, Some(TOKEN_A), Era::Legacy).await;
    let beta = connect(&server, Some(TOKEN_B), Era::Legacy).await;
    let serve = |who: &str, port: u16| {
        format!(
            "mkdir -p {who} && echo only-{who} > {who}/served.txt && \
             exec python3 -m http.server {port} --bind 127.0.0.1 --directory {who}"
        )
    };
    let get = |port: u16, tries: u32| {
        format!(
            "for i in $(seq {tries}); do python3 -c 'import urllib.request as u; \
             print(u.urlopen(\"http://127.0.0.1:{port}/served.txt\").read().decode())' \
             2>/dev/null && break; sleep 0.2; done; echo end"
        )
    };
    alpha.ok("tmux_start", json!({ "command": serve("alpha", 8771), "name": "srv" })).await;
    let r = alpha.ok("bash", json!({ "command": get(8771, 50) })).await;
    assert_eq!(r["stdout"], "only-alpha\n\nend\n", "positive control: {r}");
    let r = beta.ok("bash", json!({ "command": get(8771, 3) })).await;
    assert_eq!(r["stdout"], "end\n", "beta reached alpha's session's server: {r}");
    // Beta's own session's server is beta's to reach, on a port alpha's loopback leaves free.
    beta.ok("tmux_start", json!({ "command": serve("beta", 8771), "name": "srv" })).await;
    let r = beta.ok("bash", json!({ "command": get(8771, 50) })).await;
    assert_eq!(r["stdout"], "only-beta\n\nend\n", "positive control: {r}");
    let r = alpha.ok("bash", json!({ "command": get(8771, 50) })).await;
    assert_eq!(r["stdout"], "only-alpha\n\nend\n", "alpha's own server, still: {r}");
    // Nor its unix sockets in the shared root (decision 0107): alpha's session serves one,
    // which alpha's `bash` reaches and beta's finds masked.
    let unix = "exec python3 -c 'import socket; l=socket.socket(socket.AF_UNIX); \
                l.bind(\"alpha.sock\"); l.listen(8)\nwhile True: l.accept()[0].close()'";
    alpha.ok("tmux_start", json!({ "command": unix, "name": "unix" })).await;
    let connect = "for i in $(seq 50); do [ -S alpha.sock ] && break; sleep 0.1; done; \
                   python3 -c 'import socket; socket.socket(socket.AF_UNIX).connect(\"alpha.sock\"); \
                   print(\"connected\")' 2>/dev/null || echo refused";
    let r = alpha.ok("bash", json!({ "command": connect })).await;
    assert_eq!(r["stdout"], "connected\n", "positive control: {r}");
    // Past the two seconds the walk of the roots is reused (decision 0107's "What is left").
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let r = beta.ok("bash", json!({ "command": connect })).await;
    assert_eq!(r["stdout"], "refused\n", "beta reached alpha's unix socket: {r}");
    alpha.ok("tmux_kill", json!({ "session": "unix" })).await;
    alpha.ok("tmux_kill", json!({ "session": "srv" })).await;
    beta.ok("tmux_kill", json!({ "session": "srv" })).await;
    fx.assert_canary();
}

/// tools-shell over HTTP for alpha and beta, with `trust.external` as given.
fn shell_for_two(fx: &Fixture, external: &str) -> PathBuf {
    let token_file = fx.root.parent().unwrap().join("beta.token");
    std::fs::write(&token_file, format!("{TOKEN_B}\n")).unwrap();
    fx.config(&format!(
        "[daemon]\nstate_dir = \"{{state}}\"\n\n[trust]\napproval_timeout_secs = 20\n\n\
         [server.http]\nlisten = \"127.0.0.1:1\"\n\n\
         [[server.http.clients]]\nname = \"alpha\"\ntoken_env = \"HANDS_TEST_TOKEN_A\"\n\n\
         [[server.http.clients]]\nname = \"beta\"\ntoken_file = \"{}\"\n\n\
         [[builtins]]\nid = \"tools-shell\"\ngrants = [\"filesystem\", \"spawn\"]\n\
         filesystem = [{{ path = \"{{root}}\", write = true }}]\n\
         config = {{ trust = {{ external = \"{external}\" }} }}\n",
        token_file.display()
    ))
}

/// The names of the sessions a `tmux_list` result shows.
fn listed(r: &serde_json::Value) -> Vec<String> {
    let all = r["sessions"].as_array().cloned().unwrap_or_default();
    all.iter().map(|s| s["name"].as_str().unwrap_or_default().to_string()).collect()
}

/// Found by the eighth attack pass: a tmux session's name was the module's, so beta's
/// `tmux_start` of `build` while alpha's ran was told to "read it, tmux_kill it" (which beta
/// cannot), and one of alpha's whose server had ended was forgotten for beta's. A name is now
/// its client's own: each has a `build` (and an `s1`) of its own, reads its own output, and
/// ending one leaves the other running. Positive control: a client's second `build` is still
/// refused as existing.
#[tokio::test]
async fn two_clients_each_have_their_own_tmux_session_named_build() {
    let fx = Fixture::new();
    let server = start(&fx, &shell_for_two(&fx, "allow")).await;
    let alpha = connect(&server, Some(TOKEN_A), Era::Legacy).await;
    let beta = connect(&server, Some(TOKEN_B), Era::Legacy).await;
    let build =
        |mark: &str| json!({ "command": format!("echo {mark}; sleep 300"), "name": "build" });
    assert_eq!(alpha.ok("tmux_start", build("OF-ALPHA")).await["session"], "build");
    assert_eq!(beta.ok("tmux_start", build("OF-BETA")).await["session"], "build");
    for (c, mine, theirs) in [(&alpha, "OF-ALPHA", "OF-BETA"), (&beta, "OF-BETA", "OF-ALPHA")] {
        let r = super::tmux::read_until(c, "build", |r| {
            r["text"].as_str().unwrap_or("").contains(mine)
        })
        .await;
        let text = r["text"].as_str().unwrap_or_default();
        assert!(text.contains(mine) && !text.contains(theirs), "{r}");
        assert_eq!(r["session"], "build");
        let s = c.ok("tmux_start", json!({ "command": "sleep 300" })).await;
        assert_eq!(s["session"], "s1", "a client's first unnamed session: {s}");
        assert_eq!(listed(&c.ok("tmux_list", json!({})).await), ["build", "s1"]);
    }
    let again = alpha.err("tmux_start", build("AGAIN")).await;
    assert!(again.contains("already exists"), "{again}");
    beta.ok("tmux_kill", json!({ "session": "build" })).await;
    let e = beta.err("tmux_read", json!({ "session": "build" })).await;
    assert!(e.contains("no tmux session named \"build\" is yours"), "{e}");
    let r = alpha.ok("tmux_read", json!({ "session": "build" })).await;
    assert_eq!(r["ended"], false, "beta's kill ended alpha's build: {r}");
    assert!(r["text"].as_str().unwrap().contains("OF-ALPHA"), "{r}");
    for (c, names) in [(&alpha, &["build", "s1"][..]), (&beta, &["s1"][..])] {
        for name in names {
            c.ok("tmux_kill", json!({ "session": name })).await;
        }
    }
    fx.assert_canary();
}

/// Found by an attack on per-client names: beta named its session after alpha's record
/// (`build-<alpha's tag>`), the person's view showed beta's row by that name with alpha's
/// output, and its Stop ended alpha's `build`. The person now sees and names every session by
/// its record (`suite::dashboard::a_tmux_session_shows_…` finds the row so named): beta's is
/// `build-<alpha's tag>-<beta's tag>`, and stopping it ends beta's and leaves alpha's running;
/// the positive control, stopping alpha's by its record, ends it.
#[tokio::test]
async fn the_persons_stop_ends_the_session_its_record_names_whatever_a_client_calls_it() {
    let fx = Fixture::new();
    let server = start(&fx, &shell_for_two(&fx, "allow")).await;
    let alpha = connect(&server, Some(TOKEN_A), Era::Legacy).await;
    let beta = connect(&server, Some(TOKEN_B), Era::Legacy).await;
    // One letter: beta's socket path holds two tags, under test-as-user's long temporary folders.
    alpha.ok("tmux_start", json!({ "command": "echo OF-ALPHA; sleep 300", "name": "b" })).await;
    let records = fx.state.join("tmux/tools-shell");
    let record = |starts: &str| {
        std::fs::read_dir(&records)
            .unwrap()
            .filter_map(|e| {
                e.unwrap().file_name().into_string().ok()?.strip_suffix(".json").map(String::from)
            })
            .filter(|n| n.starts_with(starts))
            .min_by_key(String::len)
    };
    let alphas = record("b-").expect("alpha's record");
    beta.ok("tmux_start", json!({ "command": "echo OF-BETA; sleep 300", "name": alphas })).await;
    let betas = record(&format!("{alphas}-")).expect("beta's record");
    let stop = |session: &str| {
        let req = json!({ "op": "stop_session", "session": session, "via": "dashboard" });
        let script = "import socket, sys\n\
                      s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])\n\
                      s.sendall(sys.argv[2].encode() + b'\\n'); print(s.makefile().readline())\n";
        let out = std::process::Command::new("python3")
            .args(["-c", script])
            .arg(fx.state.join("control.sock"))
            .arg(req.to_string())
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let said = stop(&betas);
    assert!(said.contains("\"ok\":true") || said.contains("\"ok\": true"), "{said}");
    let r = alpha.ok("tmux_read", json!({ "session": "b" })).await;
    assert_eq!(r["ended"], false, "the person's stop of beta's ended alpha's: {r}");
    assert!(listed(&beta.ok("tmux_list", json!({})).await).is_empty());
    let said = stop(&alphas);
    assert!(said.contains("\"ok\":true") || said.contains("\"ok\": true"), "{said}");
    assert!(listed(&alpha.ok("tmux_list", json!({})).await).is_empty());
    fx.assert_canary();
}

/// Found by the eighth attack pass: under `trust.external = "ask"` beta's `tmux_kill` and
/// `tmux_send` of alpha's session asked beta's person first (without saying whose session it
/// was), and only then did the tool refuse. A session that is not the caller's is refused before
/// the gate: nobody is asked, and the refusal says what to do. Positive control: beta's own
/// session is asked about, and alpha's goes on untouched.
#[tokio::test]
async fn nobody_is_asked_about_a_tmux_session_that_is_not_the_callers() {
    let fx = Fixture::new();
    let server = start(&fx, &shell_for_two(&fx, "ask")).await;
    let (alice, bob) =
        (Person::new(Some("allow_once"), true), Person::new(Some("allow_once"), true));
    let alpha = connect_as(&server, Some(TOKEN_A), Era::Legacy, alice.clone()).await;
    let beta = connect_as(&server, Some(TOKEN_B), Era::Legacy, bob.clone()).await;
    let start_args = json!({ "command": "echo OF-ALPHA; sleep 300", "name": "a-work" });
    alpha.ok("tmux_start", start_args).await;
    assert_eq!(alice.times_asked(), 1);
    let session = json!({ "session": "a-work" });
    let typed = json!({ "session": "a-work", "text": "echo INJECTED-BY-BETA" });
    for (tool, args) in [("tmux_send", &typed), ("tmux_kill", &session), ("tmux_read", &session)] {
        let e = beta.err(tool, args.clone()).await;
        assert!(e.contains(&format!("`{tool}` is refused before asking anyone")), "{tool}: {e}");
        assert!(e.contains("no tmux session named \"a-work\" is yours"), "{tool}: {e}");
        assert!(e.contains("tmux_start starts one"), "{tool}: what to do: {e}");
    }
    assert_eq!(bob.times_asked(), 0, "beta's person was asked: {}", bob.last_question());
    // Positive control: beta's own session is beta's person's to allow.
    beta.ok("tmux_start", json!({ "command": "sleep 300", "name": "b-work" })).await;
    beta.ok("tmux_kill", json!({ "session": "b-work" })).await;
    assert_eq!(bob.times_asked(), 2);
    assert!(bob.last_question().contains("tmux_kill"), "{}", bob.last_question());
    let r = alpha.ok("tmux_read", session.clone()).await;
    assert_eq!(r["ended"], false, "{r}");
    assert!(!r["text"].as_str().unwrap().contains("INJECTED"), "{r}");
    alpha.ok("tmux_kill", session).await;
    fx.assert_canary();
}

/// An `MCP-Protocol-Version` header longer than any version gets a short 400 that names it cut,
/// and serving continues (found by session 40's attack pass: rmcp's 400 echoed a 60 KB header
/// whole). Positive control: the same request with a real version is served.
#[tokio::test]
async fn a_huge_protocol_version_header_gets_a_short_answer() {
    let fx = Fixture::new();
    let server = start(&fx, &two_clients(&fx)).await;
    let a = server.addr;
    let huge = format!("MCP-Protocol-Version: 2025-{}", "9".repeat(60_000));
    let r = post(a, &[bearer(TOKEN_A), huge], INITIALIZE).await;
    assert_eq!(r.status, 400, "{}", &r.head[..r.head.len().min(300)]);
    assert!(r.body.len() < 2000 && r.body.contains("MCP-Protocol-Version"), "{}", r.body.len());
    let real = [bearer(TOKEN_A), "MCP-Protocol-Version: 2025-11-25".into()];
    let ok = post(a, &real, INITIALIZE).await;
    assert_eq!(ok.status, 200, "{}{}", ok.head, ok.body);
    drop(server);
}
