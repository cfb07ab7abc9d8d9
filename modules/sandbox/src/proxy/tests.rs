//! The proxy on loopback: real sockets, a real upstream server, canary listeners that must see
//! no connection when a refusal is the point. (The daemon's gate is stood in for by a recorder
//! here; the end-to-end tests through `hands` use the real one.)

use super::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A gate that answers with a fixed answer and keeps what it was asked and told.
struct TestGate {
    answer: Answer,
    /// Never answers: the question waits as one parked for an absent person does.
    hang: bool,
    asked: Mutex<Vec<Question>>,
    records: Mutex<Vec<Record>>,
}

impl Gate for TestGate {
    fn ask(&self, question: Question) -> Asking {
        self.asked.lock().unwrap().push(question);
        let answer = self.answer.clone();
        if self.hang {
            return Box::pin(std::future::pending());
        }
        Box::pin(async move { answer })
    }
    fn record(&self, record: Record) {
        self.records.lock().unwrap().push(record);
    }
}

fn gate(answer: Answer) -> Arc<TestGate> {
    Arc::new(TestGate {
        answer,
        hang: false,
        asked: Mutex::new(Vec::new()),
        records: Mutex::new(Vec::new()),
    })
}

fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

struct Setup {
    http: SocketAddr,
    socks: SocketAddr,
    proxy: Arc<Proxy>,
    gate: Arc<TestGate>,
}

async fn setup(allow: &[&str], deny: &[&str], unknown: Unknown, answer: Answer) -> Setup {
    setup_with(allow, deny, unknown, answer, Limits::default()).await
}

async fn setup_with(
    allow: &[&str],
    deny: &[&str],
    unknown: Unknown,
    answer: Answer,
    limits: Limits,
) -> Setup {
    setup_gate(allow, deny, unknown, gate(answer), limits).await
}

async fn setup_gate(
    allow: &[&str],
    deny: &[&str],
    unknown: Unknown,
    gate: Arc<TestGate>,
    limits: Limits,
) -> Setup {
    let rules = Rules::new(&strings(allow), &strings(deny), unknown).unwrap();
    let proxy = Proxy::new(rules, gate.clone(), limits);
    let h = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let s = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (http, socks) = (h.local_addr().unwrap(), s.local_addr().unwrap());
    tokio::spawn(Arc::clone(&proxy).serve_http(h, "c".into()));
    tokio::spawn(Arc::clone(&proxy).serve_socks(s, "c".into()));
    Setup { http, socks, proxy, gate }
}

/// An upstream HTTP server answering every request with `hello <request line>`, and counting
/// its connections.
async fn upstream() -> (u16, Arc<AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = l.accept().await else { return };
            seen.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                let mut got = Vec::new();
                while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                    }
                }
                let text = String::from_utf8_lossy(&got).to_string();
                let body = format!("hello {}", text.replace("\r\n", "|"));
                let answer = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = s.write_all(answer.as_bytes()).await;
            });
        }
    });
    (port, count)
}

async fn roundtrip(addr: SocketAddr, bytes: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(bytes).await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).to_string()
}

#[tokio::test]
async fn a_named_address_is_reached_and_a_name_resolving_to_loopback_is_not() {
    let (port, count) = upstream().await;
    // Positive control: the entry names 127.0.0.1, so the tunnel opens.
    let s = setup(&["127.0.0.1"], &[], Unknown::Deny, Answer::Refuse { why: "no".into() }).await;
    let mut c = TcpStream::connect(s.http).await.unwrap();
    c.write_all(format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut buf = [0u8; 39];
    c.read_exact(&mut buf).await.unwrap();
    assert!(buf.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&buf));
    // Plain HTTP in the tunnel is served as one plain request (`tunnel.rs`), its Host checked.
    c.write_all(format!("GET /x HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut out = Vec::new();
    c.read_to_end(&mut out).await.unwrap();
    let out = String::from_utf8_lossy(&out);
    assert!(out.contains("hello GET /x") && out.contains("Connection: close"), "{out}");
    assert_eq!(count.load(Ordering::SeqCst), 1);
    // Plain HTTP in the tunnel naming another Host: refused in it, and not a byte reaches the
    // host (a host of its own, so the count above stays the canary below).
    let (other, _) = upstream().await;
    let mut c = TcpStream::connect(s.http).await.unwrap();
    c.write_all(format!("CONNECT 127.0.0.1:{other} HTTP/1.1\r\n\r\n").as_bytes()).await.unwrap();
    c.read_exact(&mut buf).await.unwrap();
    c.write_all(b"GET /x HTTP/1.1\r\nHost: other.example\r\n\r\n").await.unwrap();
    let mut out = Vec::new();
    c.read_to_end(&mut out).await.unwrap();
    let out = String::from_utf8_lossy(&out);
    assert!(
        out.starts_with("HTTP/1.1 403") && out.contains("Host header names other.example"),
        "{out}"
    );
    assert!(!out.contains("hello"), "{out}");

    // `localhost` is allowed by name, but it resolves to loopback, which no entry names.
    let s = setup(&["localhost"], &[], Unknown::Deny, Answer::Refuse { why: "no".into() }).await;
    let out =
        roundtrip(s.http, format!("CONNECT localhost:{port} HTTP/1.1\r\n\r\n").as_bytes()).await;
    assert!(out.starts_with("HTTP/1.1 403"), "{out}");
    assert!(out.contains("loopback"), "{out}");
    let out =
        roundtrip(s.http, format!("GET http://localhost:{port}/ HTTP/1.1\r\n\r\n").as_bytes())
            .await;
    assert!(out.starts_with("HTTP/1.1 403"), "{out}");
    assert_eq!(count.load(Ordering::SeqCst), 1, "a refused connection reached the canary");
    let records = s.gate.records.lock().unwrap();
    assert!(records.iter().all(|r| r.event == "refused" && r.by == "address check"));
}

#[tokio::test]
async fn ip_literals_deny_entries_and_unknown_hosts_are_refused() {
    let (port, count) = upstream().await;
    let s =
        setup(&["localhost"], &["127.0.0.0/8"], Unknown::Deny, Answer::Refuse { why: "no".into() })
            .await;
    for target in [
        format!("127.0.0.1:{port}"),
        format!("[::ffff:127.0.0.1]:{port}"),
        format!("unlisted.test:{port}"),
    ] {
        let out = roundtrip(s.http, format!("CONNECT {target} HTTP/1.1\r\n\r\n").as_bytes()).await;
        assert!(out.starts_with("HTTP/1.1 403"), "{target}: {out}");
        assert!(out.contains("hands: "), "{out}");
    }
    assert_eq!(count.load(Ordering::SeqCst), 0);
    assert!(s.gate.asked.lock().unwrap().is_empty(), "unknown = deny asked a person");
}

#[tokio::test]
async fn an_unknown_host_asks_the_gate_and_only_an_allow_opens_it() {
    let (port, count) = upstream().await;
    // The gate refuses: 403, and the ticket lists the refusal for the command's result.
    let s =
        setup(&["127.0.0.1"], &[], Unknown::Ask, Answer::Refuse { why: "a person said no".into() })
            .await;
    let ticket = s.proxy.ticket(Asker { command: "curl x".into(), client: "c".into() }).unwrap();
    let auth =
        base64::engine::general_purpose::STANDARD.encode(format!("hands:{}", ticket.token()));
    use base64::Engine;
    let req = format!(
        "GET http://localhost:{port}/a HTTP/1.1\r\nProxy-Authorization: Basic {auth}\r\n\r\n"
    );
    let out = roundtrip(s.http, req.as_bytes()).await;
    assert!(out.starts_with("HTTP/1.1 403"), "{out}");
    let asked = s.gate.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].host, "localhost");
    assert_eq!(asked[0].asker.as_ref().unwrap().command, "curl x");
    // The same host spelled otherwise is listed once, by the name the rules compare.
    for spelled in ["LocalHost", "localhost."] {
        let req = format!(
            "GET http://{spelled}:{port}/a HTTP/1.1\r\nProxy-Authorization: Basic {auth}\r\n\r\n"
        );
        assert!(roundtrip(s.http, req.as_bytes()).await.starts_with("HTTP/1.1 403"));
    }
    let denied = ticket.denied();
    assert_eq!(denied.len(), 1, "{denied:?}");
    assert_eq!((denied[0].host.as_str(), denied[0].port), ("localhost", port));
    assert_eq!(count.load(Ordering::SeqCst), 0);

    // The gate allows, and the address is named: the request goes through in origin form,
    // without the proxy's credentials.
    let s = setup(&["127.0.0.1"], &[], Unknown::Ask, Answer::Allow { by: "person".into() }).await;
    let out = roundtrip(s.http, req.as_bytes()).await;
    assert!(out.contains("hello GET /a HTTP/1.1"), "{out}");
    assert!(!out.to_ascii_lowercase().contains("proxy-authorization"), "{out}");
    assert!(out.contains("Connection: close"), "{out}");
    assert_eq!(count.load(Ordering::SeqCst), 1);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let records = s.gate.records.lock().unwrap();
    assert_eq!(records.iter().map(|r| r.event).collect::<Vec<_>>(), ["allowed", "closed"]);
    assert!(records[1].bytes_down > 0 && records[1].bytes_up > 0, "{records:?}");
}

#[tokio::test]
async fn socks5_connects_by_name_and_refuses_by_ruleset() {
    let (port, count) = upstream().await;
    let s = setup(
        &["localhost", "127.0.0.1"],
        &["denied.test"],
        Unknown::Deny,
        Answer::Refuse { why: "no".into() },
    )
    .await;
    let socks = |host: &'static str| async move {
        let mut c = TcpStream::connect(s.socks).await.unwrap();
        c.write_all(&[5, 1, 0]).await.unwrap();
        let mut m = [0u8; 2];
        c.read_exact(&mut m).await.unwrap();
        assert_eq!(m, [5, 0]);
        let mut req = vec![5, 1, 0, 3, host.len() as u8];
        req.extend_from_slice(host.as_bytes());
        req.extend_from_slice(&port.to_be_bytes());
        c.write_all(&req).await.unwrap();
        let mut r = [0u8; 10];
        c.read_exact(&mut r).await.unwrap();
        (r[1], c)
    };
    let (code, mut c) = socks("localhost").await;
    assert_eq!(code, 0);
    c.write_all(b"GET /s HTTP/1.1\r\n\r\n").await.unwrap();
    let mut out = Vec::new();
    c.read_to_end(&mut out).await.unwrap();
    assert!(String::from_utf8_lossy(&out).contains("hello GET /s"));
    let (code, _) = socks("denied.test").await;
    assert_eq!(code, 2, "connection not allowed by ruleset");
    assert_eq!(count.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn malformed_and_oversized_heads_get_a_clear_error_and_the_proxy_keeps_serving() {
    let (port, _) = upstream().await;
    let s = setup(&["127.0.0.1"], &[], Unknown::Deny, Answer::Refuse { why: "no".into() }).await;
    let out = roundtrip(s.http, b"\x00\x01garbage\r\n\r\n").await;
    assert!(out.starts_with("HTTP/1.1 400"), "{out}");
    let out = roundtrip(s.http, b"GET /relative HTTP/1.1\r\n\r\n").await;
    assert!(out.starts_with("HTTP/1.1 400") && out.contains("absolute URL"), "{out}");
    let big = format!("GET http://127.0.0.1:{port}/ HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(40_000));
    let out = roundtrip(s.http, big.as_bytes()).await;
    assert!(out.starts_with("HTTP/1.1 431"), "{}", &out[..out.len().min(200)]);
    assert!(out.len() < 1000, "the error echoed the head");
    let out =
        roundtrip(s.http, format!("CONNECT {}:1 HTTP/1.1\r\n\r\n", "h".repeat(5000)).as_bytes())
            .await;
    assert!(out.len() < 1000, "the error echoed a 5000-character host: {} bytes", out.len());
    // Still serving.
    let out =
        roundtrip(s.http, format!("GET http://127.0.0.1:{port}/ok HTTP/1.1\r\n\r\n").as_bytes())
            .await;
    assert!(out.contains("hello GET /ok"), "{out}");
}

#[tokio::test]
async fn a_command_has_a_bounded_number_of_connections() {
    let (port, _) = upstream().await;
    let limits = Limits { per_command: 2, ..Limits::default() };
    let s =
        setup_with(&["127.0.0.1"], &[], Unknown::Deny, Answer::Refuse { why: "no".into() }, limits)
            .await;
    let mut open = Vec::new();
    for _ in 0..2 {
        let mut c = TcpStream::connect(s.http).await.unwrap();
        c.write_all(format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n").as_bytes()).await.unwrap();
        let mut buf = [0u8; 39];
        c.read_exact(&mut buf).await.unwrap();
        assert!(buf.starts_with(b"HTTP/1.1 200"));
        open.push(c);
    }
    let out =
        roundtrip(s.http, format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n").as_bytes()).await;
    assert!(out.starts_with("HTTP/1.1 403") && out.contains("connections open"), "{out}");
    drop(open);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let out =
        roundtrip(s.http, format!("GET http://127.0.0.1:{port}/again HTTP/1.1\r\n\r\n").as_bytes())
            .await;
    assert!(out.contains("hello GET /again"), "a closed connection gave its slot back: {out}");
}

/// Opens `n` CONNECTs at once to hosts no rule covers, to a gate that never answers; the
/// answers that came back within a second, and how many questions the gate was asked.
async fn flood(limits: Limits, n: usize) -> (Vec<String>, usize) {
    let hanging = Arc::new(TestGate {
        hang: true,
        ..Arc::into_inner(gate(Answer::Refuse { why: "no".into() })).unwrap()
    });
    let s = setup_gate(&[], &[], Unknown::Ask, hanging, limits).await;
    let mut held = Vec::new();
    for i in 0..n {
        let mut c = TcpStream::connect(s.http).await.unwrap();
        c.write_all(format!("CONNECT q{i}.flood.test:443 HTTP/1.1\r\n\r\n").as_bytes())
            .await
            .unwrap();
        held.push(c);
    }
    let mut answers = Vec::new();
    for mut c in held {
        let mut out = Vec::new();
        let _ = tokio::time::timeout(Duration::from_millis(300), c.read_to_end(&mut out)).await;
        if !out.is_empty() {
            answers.push(String::from_utf8_lossy(&out).to_string());
        }
    }
    let asked = s.gate.asked.lock().unwrap().len();
    (answers, asked)
}

#[tokio::test]
async fn a_command_puts_a_bounded_number_of_questions_to_a_person() {
    // Positive control: within the bound, every connection is asked about.
    let limits = Limits { questions_per_command: 4, ..Limits::default() };
    let (answers, asked) = flood(limits, 4).await;
    assert_eq!((asked, answers.len()), (4, 0), "{answers:?}");
    // Past it, the rest are refused at once, saying why and what to do.
    let (answers, asked) = flood(limits, 30).await;
    assert_eq!(asked, 4, "the gate was asked {asked} questions");
    assert_eq!(answers.len(), 26);
    assert!(
        answers.iter().all(|a| a.starts_with("HTTP/1.1 403")
            && a.contains("was not put to a person")
            && a.contains("4 questions waiting")
            && a.contains("needs.network")),
        "{answers:?}"
    );
}

#[tokio::test]
async fn the_connection_bound_is_taken_before_a_person_is_asked() {
    let limits = Limits { per_command: 3, questions_per_command: 100, ..Limits::default() };
    let (answers, asked) = flood(limits, 10).await;
    assert_eq!(asked, 3, "the gate was asked {asked} questions past the connection bound");
    assert_eq!(answers.len(), 7);
    assert!(answers.iter().all(|a| a.contains("3 connections open or waiting")), "{answers:?}");
}

/// Found by the attack pass on decision 0106: every client's listeners shared one token table,
/// so beta used a token alpha's command left in the root on beta's own listener, and the
/// refusal (a question, a `needs.network` grant) was alpha's. A ticket is now no ticket on
/// another client's listener. Positive control: on its own client's, it names its command.
#[tokio::test]
async fn a_ticket_is_no_ticket_on_another_clients_listener() {
    let s = setup(&[], &[], Unknown::Ask, Answer::Refuse { why: "no".into() }).await;
    let other = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let other_addr = other.local_addr().unwrap();
    tokio::spawn(Arc::clone(&s.proxy).serve_http(other, "d".into()));
    let ticket = s.proxy.ticket(Asker { command: "curl x".into(), client: "c".into() }).unwrap();
    use base64::Engine;
    let auth =
        base64::engine::general_purpose::STANDARD.encode(format!("hands:{}", ticket.token()));
    let req = format!(
        "GET http://stolen.example:80/ HTTP/1.1\r\nProxy-Authorization: Basic {auth}\r\n\r\n"
    );
    assert!(roundtrip(other_addr, req.as_bytes()).await.starts_with("HTTP/1.1 4"));
    assert!(ticket.denied().is_empty(), "the refusal went to the ticket's own command");
    let asked = s.gate.asked.lock().unwrap().clone();
    assert!(asked.iter().all(|a| a.asker.is_none()), "{asked:?}");
    assert!(roundtrip(s.http, req.as_bytes()).await.starts_with("HTTP/1.1 403"));
    assert_eq!(ticket.denied().len(), 1, "positive control");
}

#[tokio::test]
async fn the_proxy_variables_carry_the_token() {
    let s = setup(&[], &[], Unknown::Deny, Answer::Refuse { why: "no".into() }).await;
    let t = s.proxy.ticket(Asker::default()).unwrap();
    let env: HashMap<_, _> = t.env(3128, 1080).into_iter().collect();
    assert_eq!(env["HTTPS_PROXY"], format!("http://hands:{}@127.0.0.1:3128", t.token()));
    assert_eq!(env["all_proxy"], format!("socks5h://hands:{}@127.0.0.1:1080", t.token()));
    assert_eq!(env["NO_PROXY"], "localhost,127.0.0.1,::1");
    assert_eq!(t.token().len(), 32);
}
