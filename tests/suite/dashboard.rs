//! The person's dashboard (`[server.dashboard]`) through the real binary and hand-written
//! HTTP/1.1: the login and what it refuses (no cookie, an MCP bearer token, a wrong token, a
//! foreign Host), CSRF and Origin on every state-changing request (a refused POST changes
//! nothing: the parked call stays parked, its file unwritten), the four choices wired to the
//! real parked action and audited as `person-via-dashboard`, escaping, standing permissions
//! and revoke, stopping a running command (gone from the host) and the brake.

use super::common::{Client, Fixture, host_processes, text_of, unique_sleep};
use rmcp::ServiceExt;
use rmcp::transport::TokioChildProcess;
use serde_json::json;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

pub const TOKEN: &str = "dashboard-token-0123456789abcdef";
const MCP_TOKEN: &str = "mcp-client-token-0123456789abcdef";

/// tools-fs (writes ask a person) and tools-shell (external: `external`; `run` admits `echo`),
/// a dashboard on a free loopback port.
pub fn config(fx: &Fixture, external: &str) -> PathBuf {
    fx.config(&format!(
        "[daemon]\nstate_dir = \"{{state}}\"\n\n[server.dashboard]\nlisten = \"127.0.0.1:0\"\n\
         token_env = \"HANDS_DASHBOARD_TOKEN\"\n\n[trust]\nwrite = \"ask\"\nexternal = \"{external}\"\n\
         approval_timeout_secs = 60\n\n\
         [[builtins]]\nid = \"tools-fs\"\ngrants = [\"filesystem\"]\n\
         filesystem = [{{ path = \"{{root}}\", write = true }}]\n\n\
         [[builtins]]\nid = \"tools-shell\"\ngrants = [\"filesystem\", \"spawn\"]\n\
         filesystem = [{{ path = \"{{root}}\", write = true }}]\n\
         config = {{ commands = {{ allow = [\"echo\"] }} }}\n"
    ))
}

/// A stdio client (2025-era, no elicitation: its asks park) and the dashboard's address, read
/// from the daemon's stderr.
pub async fn start(fx: &Fixture, config: &Path) -> (Arc<Client>, SocketAddr) {
    let mut cmd = fx.command(&["serve", "--config", config.to_str().unwrap()]);
    cmd.env("HANDS_DASHBOARD_TOKEN", TOKEN);
    let (transport, stderr) =
        TokioChildProcess::builder(cmd).stderr(Stdio::piped()).spawn().unwrap();
    let addr = dashboard_addr(stderr.unwrap()).await;
    let service = ().serve(transport).await.unwrap();
    (Arc::new(Client { service }), addr)
}

/// Reads stderr until the `dashboard at http://ADDR/` line, then keeps draining it.
async fn dashboard_addr(stderr: impl tokio::io::AsyncRead + Unpin + Send + 'static) -> SocketAddr {
    let mut lines = BufReader::new(stderr).lines();
    let addr = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let Some(line) = lines.next_line().await.unwrap() else {
                panic!("hands exited before serving the dashboard");
            };
            relay(&line);
            if let Some(rest) = line.split_once("dashboard at http://").map(|(_, r)| r) {
                return rest.trim_end_matches('/').parse::<SocketAddr>().unwrap();
            }
        }
    })
    .await
    .expect("no dashboard line within 30 s");
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            relay(&line);
        }
    });
    addr
}

#[allow(clippy::print_stderr)]
fn relay(line: &str) {
    eprintln!("hands: {line}");
}

/// A hand-written HTTP/1.1 exchange: status, head, body.
pub struct Raw {
    pub status: u16,
    pub head: String,
    pub body: String,
}

impl Raw {
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers(name).into_iter().next()
    }

    pub fn headers(&self, name: &str) -> Vec<String> {
        self.head
            .lines()
            .filter_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
            })
            .collect()
    }

    /// The value a `Set-Cookie` gives `name`.
    pub fn cookie(&self, name: &str) -> Option<String> {
        self.headers("set-cookie").iter().find_map(|c| {
            let first = c.split(';').next()?;
            let (k, v) = first.split_once('=')?;
            (k == name).then(|| v.to_string())
        })
    }
}

pub async fn raw(addr: SocketAddr, head: &str, body: &str) -> Raw {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("{head}\r\nConnection: close\r\n\r\n{body}");
    s.write_all(request.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), s.read_to_end(&mut buf))
        .await
        .expect("the dashboard did not answer within 30 s")
        .unwrap();
    let text = String::from_utf8_lossy(&buf).to_string();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    Raw { status, head: head.to_string(), body: body.to_string() }
}

async fn get(addr: SocketAddr, path: &str, extra: &[String]) -> Raw {
    let mut head = format!("GET {path} HTTP/1.1\r\nHost: {addr}");
    for h in extra {
        head.push_str("\r\n");
        head.push_str(h);
    }
    raw(addr, &head, "").await
}

async fn post(addr: SocketAddr, path: &str, extra: &[String], body: &str) -> Raw {
    let mut head = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/x-www-form-urlencoded\r\n\
         Content-Length: {}",
        body.len()
    );
    for h in extra {
        head.push_str("\r\n");
        head.push_str(h);
    }
    raw(addr, &head, body).await
}

fn origin(addr: SocketAddr) -> String {
    format!("Origin: http://{addr}")
}

/// The value of the first hidden `csrf` field in a page.
fn csrf_in(html: &str) -> String {
    let at = html.find("name=\"csrf\" value=\"").expect("the page has a csrf field") + 19;
    html[at..].split('"').next().unwrap().to_string()
}

/// A logged-in browser, as far as the server can tell: its pages' prefix (`/s/PREFIX/`), its
/// cookie header and CSRF token.
pub struct Session {
    addr: SocketAddr,
    base: String,
    cookie: String,
    csrf: String,
}

/// Fetches the login form and submits `token` with its nonce cookie and CSRF field.
async fn try_login(addr: SocketAddr, token: &str) -> Raw {
    let page = get(addr, "/login", &[]).await;
    assert_eq!(page.status, 200, "{}", page.head);
    let nonce = page.cookie("hands_login").unwrap();
    post(
        addr,
        "/login",
        &[origin(addr), format!("Cookie: hands_login={nonce}")],
        &format!("csrf={}&token={token}", csrf_in(&page.body)),
    )
    .await
}

pub async fn login(addr: SocketAddr) -> Session {
    let r = try_login(addr, TOKEN).await;
    assert_eq!(r.status, 303, "{}{}", r.head, r.body);
    let set = r.headers("set-cookie");
    let session_cookie = set.iter().find(|c| c.starts_with("hands_session=")).unwrap();
    assert!(session_cookie.contains("HttpOnly"), "{session_cookie}");
    assert!(session_cookie.contains("SameSite=Strict"), "{session_cookie}");
    let base = r.header("location").unwrap();
    assert!(base.starts_with("/s/") && base.ends_with('/'), "{base}");
    // The cookie goes to the session's own prefix only, not to every path of the host.
    assert!(session_cookie.contains(&format!("Path={base};")), "{session_cookie}");
    let cookie = format!("Cookie: hands_session={}", r.cookie("hands_session").unwrap());
    let page = get(addr, &base, std::slice::from_ref(&cookie)).await;
    assert_eq!(page.status, 200, "{}", page.head);
    Session { addr, base, cookie, csrf: csrf_in(&page.body) }
}

impl Session {
    /// The dashboard's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The session's URL path for `path` (`/approve` → `/s/PREFIX/approve`).
    fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path.trim_start_matches('/'))
    }

    /// `/live` as the page's script asks for it (the CSRF token in its header).
    async fn get_live(&self) -> Raw {
        let csrf = format!("X-Hands-Csrf: {}", self.csrf);
        get(self.addr, &self.url("/live"), &[self.cookie.clone(), csrf]).await
    }

    /// The whole page, as a browser loads it.
    pub async fn page(&self) -> String {
        let r = get(self.addr, &self.base, std::slice::from_ref(&self.cookie)).await;
        assert_eq!(r.status, 200, "{}{}", r.head, r.body);
        r.body
    }

    pub async fn live(&self) -> String {
        let r = self.get_live().await;
        assert_eq!(r.status, 200, "{}{}", r.head, r.body);
        r.body
    }

    /// A form POST from the page itself (Origin and CSRF as a browser sends them).
    pub async fn post(&self, path: &str, fields: &str) -> Raw {
        let body = format!("csrf={}&{fields}", self.csrf);
        post(self.addr, &self.url(path), &[origin(self.addr), self.cookie.clone()], &body).await
    }

    /// Waits until a pending approval shows on the page; returns its id.
    pub async fn pending_id(&self) -> String {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(20) {
            let page = self.live().await;
            if let Some(at) = page.find("class=\"pending\" id=\"") {
                return page[at + 20..].split('"').next().unwrap().to_string();
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("no pending approval appeared on the dashboard");
    }
}

fn write_call(c: &Arc<Client>, path: &str) -> tokio::task::JoinHandle<rmcp::model::CallToolResult> {
    let c = c.clone();
    let path = path.to_string();
    tokio::spawn(async move { c.call("write", json!({ "path": path, "content": "x" })).await })
}

#[tokio::test]
async fn dashboard_needs_its_own_login_and_sets_a_strict_csp() {
    let fx = Fixture::new();
    let (c, addr) = start(&fx, &config(&fx, "ask")).await;
    // No session: the page redirects to the login, the live part and actions are 401.
    let r = get(addr, "/", &[]).await;
    assert_eq!((r.status, r.header("location").as_deref()), (303, Some("/login")), "{}", r.head);
    assert_eq!(get(addr, "/s/0123456789abcdef0123456789abcdef/live", &[]).await.status, 401);
    let r =
        post(addr, "/s/0123456789abcdef0123456789abcdef/brake", &[origin(addr)], "csrf=x").await;
    assert_eq!(r.status, 401, "{}", r.head);
    // A bearer token (the dashboard's own, or an MCP one) opens nothing; nor does a made-up
    // session cookie.
    for h in [
        format!("Authorization: Bearer {TOKEN}"),
        format!("Authorization: Bearer {MCP_TOKEN}"),
        "Cookie: hands_session=0123456789abcdef0123456789abcdef".to_string(),
    ] {
        let r = get(addr, "/", std::slice::from_ref(&h)).await;
        assert_eq!(r.status, 303, "{h}: {}", r.head);
    }
    // A wrong token is refused with the form again; no session cookie is set.
    let wrong = try_login(addr, "not-the-token-0123456789").await;
    assert_eq!(wrong.status, 401, "{}", wrong.head);
    assert!(wrong.cookie("hands_session").is_none());
    // Wrong tokens are answered one at a time, door-wide (found by session 41's attack pass:
    // 48 connections guessed 158 tokens a second): eight at once take eight pauses, however
    // many connections they come on. The right token waits for none of them (it logs in while
    // they queue; checked below, after the CSRF cases).
    let began = std::time::Instant::now();
    let guesses: Vec<_> = (0..8)
        .map(|i| {
            tokio::spawn(async move { try_login(addr, &format!("wrong-token-{i:018}")).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let during = login(addr).await;
    let logged_in_at = began.elapsed();
    for g in guesses {
        assert_eq!(g.await.unwrap().status, 401);
    }
    let all = began.elapsed();
    assert!(all >= Duration::from_millis(8 * 300), "8 wrong logins in {all:?}");
    assert!(logged_in_at < all, "the right token waited behind the wrong ones");
    assert!(!during.cookie.is_empty());
    // The login form's own CSRF token is required too.
    let r = post(addr, "/login", &[origin(addr)], &format!("token={TOKEN}")).await;
    assert_eq!(r.status, 403, "{}", r.head);
    // A foreign Host (DNS rebinding) is refused before anything else.
    let r = raw(addr, "GET /login HTTP/1.1\r\nHost: evil.example.com", "").await;
    assert_eq!(r.status, 403, "{}", r.head);
    // The positive control: the right token logs in; every response carries the CSP.
    let s = login(addr).await;
    // The cookie alone opens nothing: not at `/`, not under another prefix; nor does the
    // prefix without the cookie. A browser request made by another origin's page (another
    // port of this host: `same-site`) is refused even with both, and `/live` (which carries
    // the CSRF token) answers only with the token in the header the page's script sets.
    let r = get(addr, "/", std::slice::from_ref(&s.cookie)).await;
    assert_eq!((r.status, r.header("location").as_deref()), (303, Some("/login")), "{}", r.head);
    let other = "/s/0123456789abcdef0123456789abcdef/";
    assert_eq!(get(addr, other, std::slice::from_ref(&s.cookie)).await.status, 303);
    assert_eq!(get(addr, &s.url("/live"), std::slice::from_ref(&s.cookie)).await.status, 403);
    let csrf = format!("X-Hands-Csrf: {}", s.csrf);
    assert_eq!(get(addr, &s.url("/live"), std::slice::from_ref(&csrf)).await.status, 401);
    let wrong = "X-Hands-Csrf: deadbeef".to_string();
    assert_eq!(get(addr, &s.url("/live"), &[s.cookie.clone(), wrong]).await.status, 403);
    for site in ["same-site", "cross-site"] {
        let h = [s.cookie.clone(), csrf.clone(), format!("Sec-Fetch-Site: {site}")];
        let r = get(addr, &s.url("/live"), &h).await;
        assert_eq!(r.status, 403, "{site}: {}", r.head);
        assert!(!r.body.contains(&s.csrf));
        assert_eq!(get(addr, &s.base, &h).await.status, 403, "{site}");
    }
    // Positive controls: the page's own requests, as a browser marks them.
    let own = [s.cookie.clone(), csrf.clone(), "Sec-Fetch-Site: same-origin".into()];
    assert_eq!(get(addr, &s.url("/live"), &own).await.status, 200);
    let typed = [s.cookie.clone(), "Sec-Fetch-Site: none".into()];
    assert_eq!(get(addr, &s.base, &typed).await.status, 200);
    let page = get(addr, &s.base, std::slice::from_ref(&s.cookie)).await;
    assert_eq!(
        page.header("cross-origin-resource-policy").as_deref(),
        Some("same-origin"),
        "{}",
        page.head
    );
    let csp = page.header("content-security-policy").unwrap();
    assert!(csp.contains("default-src 'none'") && csp.contains("script-src 'self'"), "{csp}");
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    assert_eq!(page.header("x-content-type-options").as_deref(), Some("nosniff"));
    assert!(get(addr, "/login", &[]).await.header("content-security-policy").is_some());
    for section in [
        "id=\"pending\"",
        "id=\"running\"",
        "id=\"permissions\"",
        "id=\"audit\"",
        "id=\"containment\"",
    ] {
        assert!(page.body.contains(section), "{section} missing");
    }
    // Log out: the session ends on the server, so the old cookie opens nothing.
    let r = s.post("/logout", "").await;
    assert_eq!((r.status, r.header("location").as_deref()), (303, Some("/login")));
    assert_eq!(s.get_live().await.status, 401);
    drop(c);
}

#[tokio::test]
async fn a_post_without_csrf_or_from_another_origin_changes_nothing() {
    let fx = Fixture::new();
    let (c, addr) = start(&fx, &config(&fx, "ask")).await;
    let s = login(addr).await;
    let call = write_call(&c, "guarded.txt");
    let id = s.pending_id().await;
    let fields = format!("id={id}&choice=once");
    let cookie = s.cookie.clone();
    let approve = s.url("/approve");
    let refused = [
        // No CSRF token.
        post(addr, &approve, &[origin(addr), cookie.clone()], &fields).await,
        // Another session's (or a made-up) token.
        post(addr, &approve, &[origin(addr), cookie.clone()], &format!("csrf=deadbeef&{fields}"))
            .await,
        // The right token from a foreign page.
        post(
            addr,
            &approve,
            &["Origin: http://evil.example.com".into(), cookie.clone()],
            &format!("csrf={}&{fields}", s.csrf),
        )
        .await,
        // No Origin at all.
        post(addr, &approve, std::slice::from_ref(&cookie), &format!("csrf={}&{fields}", s.csrf))
            .await,
        // `Origin: null` (a sandboxed frame, a file: page).
        post(
            addr,
            &approve,
            &["Origin: null".into(), cookie.clone()],
            &format!("csrf={}&{fields}", s.csrf),
        )
        .await,
        // Everything right, but made by another origin's page (another port of this host is
        // same-site, not same-origin).
        post(
            addr,
            &approve,
            &[origin(addr), cookie.clone(), "Sec-Fetch-Site: same-site".into()],
            &format!("csrf={}&{fields}", s.csrf),
        )
        .await,
    ];
    for r in &refused {
        assert_eq!(r.status, 403, "{}{}", r.head, r.body);
    }
    // Nothing changed: still waiting, nothing written, no brake.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!call.is_finished());
    assert!(!fx.root.join("guarded.txt").exists());
    assert!(s.live().await.contains(&format!("class=\"pending\" id=\"{id}\"")));
    let r = post(addr, &s.url("/brake"), &[origin(addr), cookie.clone()], "csrf=nope").await;
    assert_eq!(r.status, 403);
    assert!(!s.live().await.contains("Release the brake"));
    // The positive control: the same request from the page is served, and the call runs.
    let r = s.post("/approve", &fields).await;
    assert_eq!(r.status, 303, "{}{}", r.head, r.body);
    let done = call.await.unwrap();
    assert_ne!(done.is_error, Some(true), "{}", text_of(&done));
    assert_eq!(std::fs::read_to_string(fx.root.join("guarded.txt")).unwrap(), "x");
    let rec = fx.audit_records();
    let last = rec.iter().rev().find(|r| r["tool"] == "write").unwrap();
    assert_eq!(last["decided_by"], "person-via-dashboard", "{last}");
    assert_eq!(last["decision"], "allow");
    fx.assert_canary();
}

#[tokio::test]
async fn the_four_choices_reach_the_parked_call_and_revoke_asks_again() {
    let fx = Fixture::new();
    let (c, addr) = start(&fx, &config(&fx, "ask")).await;
    let s = login(addr).await;
    // Reject: refused, nothing written, audited as the dashboard's decision.
    let call = write_call(&c, "rejected.txt");
    let id = s.pending_id().await;
    assert_eq!(s.post("/approve", &format!("id={id}&choice=reject")).await.status, 303);
    let r = call.await.unwrap();
    assert_eq!(r.is_error, Some(true));
    assert!(text_of(&r).contains("denied it on the dashboard"), "{}", text_of(&r));
    assert!(!fx.root.join("rejected.txt").exists());
    let last = fx.audit_records().into_iter().rev().find(|r| r["tool"] == "write").unwrap();
    assert_eq!(
        (last["decision"].as_str(), last["decided_by"].as_str()),
        (Some("deny"), Some("person-via-dashboard"))
    );
    // Answering it again: nothing waits under that id.
    let again = s.post("/approve", &format!("id={id}&choice=once")).await;
    assert_eq!(again.status, 409, "{}", again.body);

    // Session: this connection's next write does not ask.
    let call = write_call(&c, "s1.txt");
    let id = s.pending_id().await;
    assert_eq!(s.post("/approve", &format!("id={id}&choice=session")).await.status, 303);
    assert_ne!(call.await.unwrap().is_error, Some(true));
    let r = tokio::time::timeout(Duration::from_secs(10), write_call(&c, "s2.txt")).await;
    assert_ne!(r.expect("a session permission lets it run at once").unwrap().is_error, Some(true));

    // Revoke all ends the session permission: the next write asks again.
    assert_eq!(s.post("/revoke-all", "").await.status, 303);
    let call = write_call(&c, "s3.txt");
    let id = s.pending_id().await;
    // Always: recorded, listed, and the next write runs without asking.
    assert_eq!(s.post("/approve", &format!("id={id}&choice=always")).await.status, 303);
    assert_ne!(call.await.unwrap().is_error, Some(true));
    let page = s.live().await;
    let at = page.find("class=\"permission\" id=\"").expect("the permission is listed") + 23;
    let pid = page[at..].split('"').next().unwrap().to_string();
    let r = tokio::time::timeout(Duration::from_secs(10), write_call(&c, "s4.txt")).await;
    assert_ne!(r.expect("an always permission lets it run at once").unwrap().is_error, Some(true));
    // Revoke it: gone from the file and the page, and the next write asks again.
    assert_eq!(s.post("/revoke", &format!("id={pid}")).await.status, 303);
    assert!(!s.live().await.contains(&format!("class=\"permission\" id=\"{pid}\"")));
    let call = write_call(&c, "s5.txt");
    let id = s.pending_id().await;
    assert_eq!(s.post("/approve", &format!("id={id}&choice=reject")).await.status, 303);
    assert_eq!(call.await.unwrap().is_error, Some(true));
    assert!(!fx.root.join("s5.txt").exists());
    let revoked = fx.audit_records().into_iter().filter(|r| r["tool"] == "revoke").count();
    assert_eq!(revoked, 2);
    fx.assert_canary();
}

#[tokio::test]
async fn markup_in_a_pending_command_is_shown_as_text() {
    let fx = Fixture::new();
    let (c, addr) = start(&fx, &config(&fx, "ask")).await;
    let s = login(addr).await;
    let evil = "echo '<img src=x onerror=alert(1)>' \"<script>alert(2)</script>\"";
    let call = {
        let c = c.clone();
        tokio::spawn(async move { c.call("bash", json!({ "command": evil })).await })
    };
    let id = s.pending_id().await;
    let page = s.live().await;
    assert!(!page.contains("<img src=x"), "raw markup reached the page");
    assert!(!page.contains("<script>alert"), "raw markup reached the page");
    assert!(page.contains("&lt;img src=x onerror=alert(1)&gt;"), "{page}");
    assert!(page.contains("&lt;script&gt;alert(2)&lt;/script&gt;"));
    assert_eq!(s.post("/approve", &format!("id={id}&choice=reject")).await.status, 303);
    assert_eq!(call.await.unwrap().is_error, Some(true));
}

#[tokio::test]
async fn stop_ends_a_running_command_and_the_brake_holds_until_release() {
    let fx = Fixture::new();
    let (c, addr) = start(&fx, &config(&fx, "allow")).await;
    let s = login(addr).await;
    let secs = unique_sleep();
    let command = format!("echo started-{secs}; sleep {secs}");
    let call = {
        let c = c.clone();
        let command = command.clone();
        tokio::spawn(async move {
            c.call("bash", json!({ "command": command, "timeout_secs": 600 })).await
        })
    };
    // It shows, with its client and its output so far.
    let start = Instant::now();
    let page = loop {
        let page = s.live().await;
        if page.contains(&format!("started-{secs}\n"))
            || page.contains(&format!("<pre>started-{secs}"))
        {
            break page;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "the command did not show: {page}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(!host_processes(&["sleep", &secs]).is_empty(), "the sleep runs on the host");
    let at = page.find("class=\"command\" id=\"c-").unwrap() + 22;
    let id = page[at..].split('"').next().unwrap().to_string();
    let row = &page[at..];
    assert!(row[..row.find("</tr>").unwrap()].contains("<td>stdio</td>"), "{row}");
    assert_eq!(s.post("/stop-command", &format!("id={id}")).await.status, 303);
    let r = tokio::time::timeout(Duration::from_secs(10), call).await.unwrap().unwrap();
    assert_eq!(r.is_error, Some(true));
    assert!(text_of(&r).contains("stopped by a person on the dashboard"), "{}", text_of(&r));
    assert!(host_processes(&["sleep", &secs]).is_empty(), "the sleep is gone from the host");
    assert!(!s.live().await.contains(&format!("id=\"c-{id}\"")));

    // The brake: a running command ends, new ones are refused, release lets them run.
    let call = {
        let c = c.clone();
        let command = format!("sleep {secs}");
        tokio::spawn(async move {
            c.call("bash", json!({ "command": command, "timeout_secs": 600 })).await
        })
    };
    let start = Instant::now();
    while !s.live().await.contains("class=\"command\"") {
        assert!(start.elapsed() < Duration::from_secs(20));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(s.post("/brake", "").await.status, 303);
    assert_eq!(call.await.unwrap().is_error, Some(true));
    assert!(host_processes(&["sleep", &secs]).is_empty());
    assert!(s.live().await.contains("Release the brake"));
    let refused = c.call("bash", json!({ "command": "true" })).await;
    assert!(text_of(&refused).contains("hands stop"), "{}", text_of(&refused));
    assert_eq!(s.post("/release", "").await.status, 303);
    let ok = c.call("bash", json!({ "command": "echo again" })).await;
    assert_ne!(ok.is_error, Some(true), "{}", text_of(&ok));
    let tools: Vec<String> = fx
        .audit_records()
        .iter()
        .filter(|r| r["decided_by"] == "person-via-dashboard")
        .map(|r| r["tool"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(tools, ["stop_command", "stop", "release"], "{tools:?}");
    let _ = c;
    fx.assert_canary();
}

#[tokio::test]
async fn over_http_an_mcp_token_does_not_open_the_dashboard_nor_the_reverse() {
    let fx = Fixture::new();
    let config = fx.config(
        "[daemon]\nstate_dir = \"{state}\"\n\n[server.http]\nlisten = \"127.0.0.1:0\"\n\n\
         [[server.http.clients]]\nname = \"bot\"\ntoken_env = \"HANDS_TEST_MCP\"\n\n\
         [server.dashboard]\nlisten = \"127.0.0.1:0\"\ntoken_env = \"HANDS_DASHBOARD_TOKEN\"\n\n\
         [[builtins]]\nid = \"tools-fs\"\ngrants = [\"filesystem\"]\n\
         filesystem = [{ path = \"{root}\", write = true }]\n",
    );
    let mut cmd = fx.command(&["serve", "--config", config.to_str().unwrap()]);
    cmd.env("HANDS_DASHBOARD_TOKEN", TOKEN)
        .env("HANDS_TEST_MCP", MCP_TOKEN)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd.spawn().unwrap();
    let addr = dashboard_addr(child.stderr.take().unwrap()).await;
    let bearer = format!("Authorization: Bearer {MCP_TOKEN}");
    let r = get(addr, "/", std::slice::from_ref(&bearer)).await;
    assert_eq!(r.status, 303, "{}", r.head);
    let live = "/s/0123456789abcdef0123456789abcdef/live";
    assert_eq!(get(addr, live, std::slice::from_ref(&bearer)).await.status, 401);
    // The MCP token is not the person's login either.
    let r = try_login(addr, MCP_TOKEN).await;
    assert_eq!(r.status, 401, "{}", r.head);
    // The dashboard serves nothing of MCP.
    let r = post(addr, "/mcp", std::slice::from_ref(&bearer), "{}").await;
    assert!(matches!(r.status, 401 | 403 | 404), "{}", r.head);
    // The positive control: the dashboard token logs in.
    login(addr).await;
    drop(child);
}

#[tokio::test]
async fn serve_refuses_a_missing_token_and_doctor_warns_of_a_network_listener() {
    let fx = Fixture::new();
    let config = fx.config(
        "[daemon]\nstate_dir = \"{state}\"\n\n[server.dashboard]\nlisten = \"0.0.0.0:0\"\n\
         token_env = \"HANDS_DASHBOARD_TOKEN\"\n\n[[builtins]]\nid = \"tools-fs\"\n\
         grants = [\"filesystem\"]\nfilesystem = [{ path = \"{root}\", write = true }]\n",
    );
    let c = config.to_str().unwrap();
    // No token in the environment: serve stops before serving, naming the variable.
    let out = fx.std_command(&["serve", "--config", c]).stdin(Stdio::null()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("HANDS_DASHBOARD_TOKEN"), "{err}");
    // A short one is refused too.
    let out = fx
        .std_command(&["serve", "--config", c])
        .env("HANDS_DASHBOARD_TOKEN", "short")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("at least 16"));
    // The doctor says both, and exits 1: it is not safe to serve.
    let out = fx.std_command(&["doctor", "--config", c]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("[server.dashboard] listens on 0.0.0.0:0"), "{text}");
    assert!(text.contains("would refuse to start"), "{text}");
    assert_eq!(out.status.code(), Some(1), "{text}");
    // The paired control: with the token in its environment it still warns of the listener,
    // but serve would start, and it exits 0.
    let out = fx
        .std_command(&["doctor", "--config", c])
        .env("HANDS_DASHBOARD_TOKEN", TOKEN)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("[server.dashboard] listens on 0.0.0.0:0"), "{text}");
    assert!(!text.contains("would refuse to start"), "{text}");
    assert_eq!(out.status.code(), Some(0), "{text}");
    // A token file inside a root (commands and file tools could read it) is refused, and so is
    // a token an MCP client also holds.
    let inside = fx.write("dashboard.token", TOKEN);
    let config = fx.config(&format!(
        "[daemon]\nstate_dir = \"{{state}}\"\n\n[server.dashboard]\ntoken_file = \"{}\"\n\n\
         [[builtins]]\nid = \"tools-fs\"\ngrants = [\"filesystem\"]\n\
         filesystem = [{{ path = \"{{root}}\", write = true }}]\n",
        inside.display()
    ));
    let out = fx
        .std_command(&["serve", "--config", config.to_str().unwrap()])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("inside the root"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let config = fx.config(
        "[daemon]\nstate_dir = \"{state}\"\n\n[server.http]\nlisten = \"127.0.0.1:0\"\n\n\
         [[server.http.clients]]\nname = \"bot\"\ntoken_env = \"HANDS_DASHBOARD_TOKEN\"\n\n\
         [server.dashboard]\ntoken_env = \"HANDS_DASHBOARD_TOKEN\"\n\n[[builtins]]\n\
         id = \"tools-fs\"\ngrants = [\"filesystem\"]\nfilesystem = [{ path = \"{root}\", write = true }]\n",
    );
    let out = fx
        .std_command(&["serve", "--config", config.to_str().unwrap()])
        .env("HANDS_DASHBOARD_TOKEN", TOKEN)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("also the token of the MCP client `bot`"), "{err}");
    // The dashboard cannot share /mcp's listener.
    let config = fx.config(
        "[daemon]\nstate_dir = \"{state}\"\n\n[server.http]\nlisten = \"127.0.0.1:8799\"\n\n\
         [server.dashboard]\nlisten = \"127.0.0.1:8799\"\ntoken_env = \"HANDS_DASHBOARD_TOKEN\"\n\n\
         [[builtins]]\nid = \"tools-fs\"\ngrants = [\"filesystem\"]\n\
         filesystem = [{ path = \"{root}\", write = true }]\n",
    );
    let out = fx
        .std_command(&["serve", "--config", config.to_str().unwrap()])
        .env("HANDS_DASHBOARD_TOKEN", TOKEN)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("a listener of its own"), "{err}");
}

/// A client that can only open URLs (URL-mode elicitation): it records what it is sent and
/// says it opened it.
#[derive(Clone, Default)]
struct Opener {
    urls: Arc<std::sync::Mutex<Vec<(String, String)>>>,
}

impl rmcp::ClientHandler for Opener {
    async fn create_elicitation(
        &self,
        request: rmcp::model::ElicitRequestParams,
        _context: rmcp::service::RequestContext<rmcp::RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        let rmcp::model::ElicitRequestParams::UrlElicitationParams { url, message, .. } = request
        else {
            panic!("a URL-only client was sent a form");
        };
        self.urls.lock().unwrap().push((url, message));
        Ok(rmcp::model::ElicitResult::new(rmcp::model::ElicitationAction::Accept))
    }

    fn get_info(&self) -> rmcp::model::ClientConfig {
        let elicitation = rmcp::model::ElicitationCapability::new()
            .with_url(rmcp::model::UrlElicitationCapability::default());
        let mut caps = rmcp::model::ClientCapabilities::default();
        caps.elicitation = Some(elicitation);
        rmcp::model::ClientConfig::new(caps, rmcp::model::Implementation::new("opener", "0"))
    }
}

#[tokio::test]
async fn a_url_mode_client_is_pointed_at_the_actions_entry_on_the_dashboard() {
    let fx = Fixture::new();
    let config = config(&fx, "ask");
    let mut cmd = fx.command(&["serve", "--config", config.to_str().unwrap()]);
    cmd.env("HANDS_DASHBOARD_TOKEN", TOKEN);
    let (transport, stderr) =
        TokioChildProcess::builder(cmd).stderr(Stdio::piped()).spawn().unwrap();
    let addr = dashboard_addr(stderr.unwrap()).await;
    let opener = Opener::default();
    let c = Arc::new(opener.clone().serve(transport).await.unwrap());
    let call = {
        let c = c.clone();
        tokio::spawn(async move {
            let args = json!({ "path": "via-url.txt", "content": "u" });
            let params = rmcp::model::CallToolRequestParams::new("write")
                .with_arguments(args.as_object().unwrap().clone());
            c.call_tool(params).await.unwrap()
        })
    };
    let s = login(addr).await;
    let id = s.pending_id().await;
    // The client was sent the action's own entry on the page; opening it decided nothing.
    let start = Instant::now();
    while opener.urls.lock().unwrap().is_empty() {
        assert!(start.elapsed() < Duration::from_secs(10), "no URL elicitation arrived");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (url, message) = opener.urls.lock().unwrap()[0].clone();
    assert_eq!(url, format!("http://{addr}/#{id}"));
    assert!(message.contains("via-url.txt"), "{message}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!call.is_finished() && !fx.root.join("via-url.txt").exists());
    // The person decides on the page.
    assert_eq!(s.post("/approve", &format!("id={id}&choice=once")).await.status, 303);
    let r = call.await.unwrap();
    assert_ne!(r.is_error, Some(true), "{}", text_of(&r));
    assert_eq!(std::fs::read_to_string(fx.root.join("via-url.txt")).unwrap(), "u");
}

#[tokio::test]
async fn a_tmux_session_shows_with_its_client_and_output_and_stop_ends_it() {
    let fx = Fixture::new();
    let (c, addr) = start(&fx, &config(&fx, "allow")).await;
    let s = login(addr).await;
    let mark = unique_sleep();
    let started = c
        .ok("tmux_start", json!({ "command": format!("echo up-{mark}; sleep 600"), "name": "web" }))
        .await;
    assert_eq!(started["session"], "web");
    let start = Instant::now();
    let row = loop {
        let page = s.live().await;
        // The person knows a session by its record's name: the client's and its tag.
        if let Some(at) = page.find("class=\"tmux\" id=\"t-web-") {
            let row = page[at..page[at..].find("</tr>").unwrap() + at].to_string();
            if row.contains(&format!("up-{mark}")) {
                break row;
            }
        }
        assert!(start.elapsed() < Duration::from_secs(20), "the session did not show: {page}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(row.contains("<td>stdio</td>"), "{row}");
    assert!(row.contains("sleep 600"), "{row}");
    let value = row.split("name=\"session\" value=\"").nth(1).unwrap();
    let stored = &value[..value.find('"').unwrap()];
    assert!(stored.starts_with("web-") && stored.len() == "web-".len() + 8, "{row}");
    assert_eq!(s.post("/stop-session", &format!("session={stored}")).await.status, 303);
    assert!(!s.live().await.contains("id=\"t-web-"));
    let list = c.ok("tmux_list", json!({})).await;
    assert_eq!(list["sessions"], json!([]), "{list}");
    let last = fx.audit_records().into_iter().rev().find(|r| r["client"] == "dashboard").unwrap();
    assert_eq!((last["tool"].as_str(), last["outcome"].as_str()), (Some("tmux_kill"), Some("ok")));
    fx.assert_canary();
}

#[tokio::test]
async fn the_dashboard_answers_the_parked_actions_of_every_daemon_of_the_state_dir() {
    let fx = Fixture::new();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let text = std::fs::read_to_string(config(&fx, "ask")).unwrap();
    let config = fx.config(&text.replace("127.0.0.1:0", &format!("127.0.0.1:{port}")));
    let (_first, addr) = start(&fx, &config).await;
    // A second stdio daemon on the same state dir: the port is taken, it says so and serves on.
    let mut cmd = fx.command(&["serve", "--config", config.to_str().unwrap()]);
    cmd.env("HANDS_DASHBOARD_TOKEN", TOKEN);
    let (transport, stderr) =
        TokioChildProcess::builder(cmd).stderr(Stdio::piped()).spawn().unwrap();
    let mut lines = BufReader::new(stderr.unwrap()).lines();
    let warned = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            relay(&line);
            if line.contains("no dashboard here") {
                return true;
            }
        }
        false
    })
    .await
    .unwrap();
    assert!(warned);
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            relay(&line);
        }
    });
    let second = Arc::new(Client { service: ().serve(transport).await.unwrap() });
    let s = login(addr).await;
    // Its parked action shows on the first daemon's page, with its parts; every choice works.
    let call = write_call(&second, "second.txt");
    let id = s.pending_id().await;
    let page = s.live().await;
    assert!(page.contains("<code class=\"path\">second.txt</code>"), "{page}");
    assert!(page.contains("value=\"session\""), "{page}");
    assert_eq!(s.post("/approve", &format!("id={id}&choice=session")).await.status, 303);
    let r = call.await.unwrap();
    assert_ne!(r.is_error, Some(true), "{}", text_of(&r));
    assert_eq!(std::fs::read_to_string(fx.root.join("second.txt")).unwrap(), "x");
    // The session choice holds for that client: its next write runs without asking.
    let r = tokio::time::timeout(Duration::from_secs(10), write_call(&second, "again.txt")).await;
    assert_ne!(r.expect("the session permission lets it run").unwrap().is_error, Some(true));
    let last =
        fx.audit_records().into_iter().rev().find(|r| r["arguments"]["path"] == "second.txt");
    assert_eq!(last.unwrap()["decided_by"], "person-via-dashboard");
    // An id nobody holds is a conflict, and changes nothing.
    assert_eq!(s.post("/approve", "id=a-00000000&choice=once").await.status, 409);

    // The brake reaches the other daemon too, as `hands stop` does; so does the release.
    assert_eq!(s.post("/brake", "").await.status, 303);
    let refused = second.call("bash", json!({ "command": "echo braked" })).await;
    assert_eq!(refused.is_error, Some(true));
    assert!(text_of(&refused).contains("hands stop"), "{}", text_of(&refused));
    assert_eq!(s.post("/release", "").await.status, 303);
    let call = {
        let second = second.clone();
        tokio::spawn(async move { second.call("bash", json!({ "command": "echo free" })).await })
    };
    let id = s.pending_id().await;
    assert_eq!(s.post("/approve", &format!("id={id}&choice=once")).await.status, 303);
    let r = call.await.unwrap();
    assert_ne!(r.is_error, Some(true), "{}", text_of(&r));
    assert_eq!(r.structured_content.unwrap()["stdout"], "free\n");
    let stops = fx.audit_records().iter().filter(|r| r["tool"] == "stop").count();
    assert_eq!(stops, 2, "one record per daemon, none twice");
}

/// What the person reads cannot be forged: a parked `bash` command that rewrites its own line
/// on a terminal (`\r`, `ESC[2K`) and reorders text (U+202E) is shown escaped, with a note, by
/// `hands approvals list` and on the dashboard — never raw. Positive control: a plain command
/// parked beside it shows as it is, without the note; nothing runs until a person answers.
#[tokio::test]
async fn control_characters_in_a_parked_command_are_shown_escaped_everywhere() {
    let fx = Fixture::new();
    let cfg = config(&fx, "ask");
    let (c, addr) = start(&fx, &cfg).await;
    let s = login(addr).await;
    let forged = "touch pwned.txt\r\x1b[2Knpm test \u{202e}tset";
    let call = {
        let c = c.clone();
        tokio::spawn(async move { c.call("bash", json!({ "command": forged })).await })
    };
    let id = s.pending_id().await;
    let plain = {
        let c = c.clone();
        tokio::spawn(async move { c.call("bash", json!({ "command": "echo plain" })).await })
    };
    let start = Instant::now();
    let listed = loop {
        let out = fx
            .std_command(&["approvals", "list", "--config", cfg.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8(out.stdout).unwrap();
        if text.matches("waiting a-").count() == 2 {
            break text;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "not both listed: {text}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(!listed.contains('\r') && !listed.contains('\x1b') && !listed.contains('\u{202e}'));
    assert!(listed.contains("touch pwned.txt\\r\\x1b[2Knpm test \\u{202e}tset"), "{listed}");
    let ours = listed.split("waiting ").find(|w| w.starts_with(&id)).unwrap();
    assert!(
        ours.contains("(text contained control or invisible characters, shown escaped)"),
        "{listed}"
    );
    let other = listed.split("waiting ").find(|w| w.contains("echo plain")).unwrap();
    assert!(!other.contains("control characters"), "{listed}");
    // The dashboard: the same escapes, the same note.
    let page = s.live().await;
    assert!(!page.contains('\r') && !page.contains('\x1b') && !page.contains('\u{202e}'));
    assert!(page.contains("touch pwned.txt\\r\\x1b[2Knpm test \\u{202e}tset"), "{page}");
    assert!(page.contains("(text contained control or invisible characters, shown escaped)"));
    assert!(!fx.root.join("pwned.txt").exists());
    let ids: Vec<String> = listed
        .lines()
        .filter_map(|l| l.strip_prefix("waiting "))
        .map(|l| l.split(' ').next().unwrap().to_string())
        .collect();
    for id in ids {
        assert_eq!(s.post("/approve", &format!("id={id}&choice=reject")).await.status, 303);
    }
    assert_eq!(call.await.unwrap().is_error, Some(true));
    assert_eq!(plain.await.unwrap().is_error, Some(true));
    assert!(!fx.root.join("pwned.txt").exists());
    drop(c);
    fx.assert_canary();
}

/// What a person is shown is what runs (SPEC §6): every invisible character in a parked
/// command — soft hyphen, Hangul fillers, a tag character, U+206A, variation selectors, a
/// Mongolian one, a no-break space, a zero-width space — is shown escaped, with the note, in
/// the dashboard's HTML and by `hands approvals list`; and a `run` argv keeps its argument
/// boundaries: `echo "a b"` (one argument) and `echo a b` (two), parked side by side, read
/// differently. Nothing runs until a person answers, and the answer is no.
#[tokio::test]
async fn invisible_characters_and_argv_boundaries_are_shown_exactly() {
    let fx = Fixture::new();
    let cfg = config(&fx, "ask");
    let (c, addr) = start(&fx, &cfg).await;
    let s = login(addr).await;
    let hidden = [
        '\u{AD}',
        '\u{115F}',
        '\u{1160}',
        '\u{3164}',
        '\u{FFA0}',
        '\u{E0041}',
        '\u{206A}',
        '\u{FE0F}',
        '\u{E0100}',
        '\u{180B}',
        '\u{A0}',
        '\u{200B}',
    ];
    let command: String =
        hidden.iter().enumerate().map(|(i, h)| format!("{i}{h}")).collect::<Vec<_>>().concat();
    let command = format!("touch x{command}.txt");
    let escaped: String = hidden
        .iter()
        .enumerate()
        .map(|(i, h)| format!("{i}\\u{{{:04x}}}", *h as u32))
        .collect::<Vec<_>>()
        .concat();
    let escaped = format!("touch x{escaped}.txt");
    let calls: Vec<_> = [
        json!(["bash", { "command": command, "timeout_secs": 7 }]),
        json!(["run", { "argv": ["echo", "a b"] }]),
        json!(["run", { "argv": ["echo", "a", "b"] }]),
    ]
    .into_iter()
    .map(|call| {
        let c = c.clone();
        let tool = call[0].as_str().unwrap().to_string();
        tokio::spawn(async move { c.call(&tool, call[1].clone()).await })
    })
    .collect();
    let start = Instant::now();
    let page = loop {
        let page = s.live().await;
        if page.matches("class=\"pending\" id=").count() == 3 {
            break page;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "not all three parked: {page}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    for h in hidden {
        assert!(!page.contains(h), "U+{:04X} reached the page as itself", h as u32);
    }
    assert!(page.contains(&escaped), "{escaped} not on the page: {page}");
    // Each argument once: the command on its row, the rest beside it (the whole arguments
    // used to follow, the command a second time).
    assert_eq!(page.matches(&escaped).count(), 1, "{page}");
    assert!(page.contains("{&quot;timeout_secs&quot;:7}"), "{page}");
    assert!(page.contains("(text contained control or invisible characters, shown escaped)"));
    assert!(page.contains("<code class=\"argv\">echo &quot;a b&quot;</code>"), "{page}");
    assert!(page.contains("<code class=\"argv\">echo a b</code>"), "{page}");
    // The terminal's list: the same escapes and boundaries.
    let out = fx.std_command(&["approvals", "list", "--config", cfg.to_str().unwrap()]).output();
    let listed = String::from_utf8(out.unwrap().stdout).unwrap();
    assert!(hidden.iter().all(|h| !listed.contains(*h)), "{listed}");
    assert!(listed.contains(&escaped), "{listed}");
    assert_eq!(listed.matches(&escaped).count(), 1, "{listed}");
    assert!(listed.contains("other arguments: {\"timeout_secs\":7}\n"), "{listed}");
    assert!(
        listed.contains("argv: echo \"a b\"\n") && listed.contains("argv: echo a b\n"),
        "{listed}"
    );
    let ids: Vec<String> = listed
        .lines()
        .filter_map(|l| l.strip_prefix("waiting "))
        .map(|l| l.split(' ').next().unwrap().to_string())
        .collect();
    assert_eq!(ids.len(), 3, "{listed}");
    for id in ids {
        assert_eq!(s.post("/approve", &format!("id={id}&choice=reject")).await.status, 303);
    }
    for call in calls {
        assert_eq!(call.await.unwrap().is_error, Some(true));
    }
    let made: Vec<_> = std::fs::read_dir(&fx.root)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().starts_with('x'))
        .collect();
    assert!(made.is_empty(), "the command ran: {made:?}");
    fx.assert_canary();
}

/// The three front ends of a person — the dashboard, the control socket spoken by hand, and
/// the command line — all hand their request to one `Daemon::act`: the brake, its release
/// and a revoke-all each leave records of one shape, which differ only in who the person
/// acted through (client and `decided_by`). Written after the three copies of these actions
/// (`control.rs`, `dashboard/page.rs`, `main.rs`) became one; a front end that wrote its own
/// record again would show here as an extra or differently shaped record.
#[tokio::test]
async fn a_persons_action_is_recorded_alike_from_the_dashboard_the_socket_and_the_cli() {
    let fx = Fixture::new();
    let cfg = config(&fx, "allow");
    let (c, addr) = start(&fx, &cfg).await;
    let s = login(addr).await;
    let cli = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--config", cfg.to_str().unwrap()]);
        let out = fx.std_command(&all).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let socket = |line: &str| {
        use std::io::{BufRead, Write};
        let mut sock = std::os::unix::net::UnixStream::connect(fx.state.join("control.sock"))
            .expect("the control socket");
        sock.write_all(format!("{line}\n").as_bytes()).unwrap();
        let mut answer = String::new();
        std::io::BufReader::new(sock).read_line(&mut answer).unwrap();
        assert!(answer.contains("\"ok\":true"), "{answer}");
    };
    // Dashboard.
    assert_eq!(s.post("/brake", "").await.status, 303);
    assert_eq!(s.post("/release", "").await.status, 303);
    assert_eq!(s.post("/revoke-all", "").await.status, 303);
    // The control socket by hand.
    socket("{\"op\":\"stop\"}");
    socket("{\"op\":\"release\"}");
    socket("{\"op\":\"revoke\",\"standing\":\"all\"}");
    // The command line (through the socket).
    assert!(cli(&["stop"]).contains("stopped: ended 0"));
    assert!(cli(&["stop", "--release"]).contains("released"));
    assert!(cli(&["approvals", "revoke", "--all"]).contains("revoked every standing"));
    // Positive control: commands run again after the last release.
    let r = c.ok("run", json!({ "argv": ["echo", "free"] })).await;
    assert_eq!(r["stdout"], "free\n");

    let records: Vec<serde_json::Value> =
        fx.audit_records().into_iter().filter(|r| r["module"] == "hands").collect();
    let ops: Vec<&str> = records.iter().map(|r| r["tool"].as_str().unwrap()).collect();
    assert_eq!(
        ops,
        ["stop", "release", "revoke", "stop", "release", "revoke", "stop", "release", "revoke"],
        "one record per action, none twice: {records:?}"
    );
    let via: Vec<(&str, &str)> = records
        .iter()
        .map(|r| (r["client"].as_str().unwrap(), r["decided_by"].as_str().unwrap()))
        .collect();
    let (dash, term) = (("dashboard", "person-via-dashboard"), ("terminal", "person-via-terminal"));
    assert_eq!(via, [dash, dash, dash, term, term, term, term, term, term]);
    // The same shape: every key and value alike but those saying who the person acted
    // through, and those of the chain (seq, time, hashes).
    let shape = |r: &serde_json::Value| {
        let mut r = r.clone();
        let m = r.as_object_mut().unwrap();
        for k in ["client", "decided_by", "seq", "time", "prev", "hash"] {
            m.remove(k);
        }
        r
    };
    for (i, r) in records.iter().enumerate() {
        assert_eq!(shape(r), shape(&records[i % 3]), "record {i} differs: {r}");
    }
    assert_eq!(records[0]["outcome"], "ok: ended 0 commands and sessions");
    assert_eq!(records[2]["arguments"], json!({ "all": true }));
    fx.assert_canary();
}

/// A folder outside the roots that commands may write once a person grants it (`needs`).
pub fn grant_dir(fx: &Fixture) -> PathBuf {
    let dir = fx.dir.path().canonicalize().unwrap().join("grant");
    std::fs::create_dir_all(&dir).unwrap();
    if super::common::is_root() {
        super::common::own(&dir);
    }
    dir
}

/// A `bash` call asking for a one-run widening (`needs.write` of `dir`).
pub fn widening_call(
    c: &Arc<Client>,
    dir: &Path,
    file: &str,
) -> tokio::task::JoinHandle<rmcp::model::CallToolResult> {
    let c = c.clone();
    let command = format!("echo w > {}/{file}", dir.display());
    let needs = json!({ "write": [dir] });
    tokio::spawn(async move { c.call("bash", json!({ "command": command, "needs": needs })).await })
}

/// A one-run widening (`needs`) is allowed once or for the session, never *always* (SPEC §6):
/// the page offers no Always for it (shows the widening and says so), and an *always* answer
/// — POSTed from the page, or a control-socket line written by hand — is refused with what,
/// why and what to do, the action left waiting, nothing written, no standing permission.
/// Positive controls: a plain parked call beside it is offered Always; the widening, answered
/// once, runs.
#[tokio::test]
async fn a_widening_is_never_offered_nor_answered_always() {
    let fx = Fixture::new();
    let cfg = config(&fx, "ask");
    let (c, addr) = start(&fx, &cfg).await;
    let s = login(addr).await;
    let dir = grant_dir(&fx);
    let widening = widening_call(&c, &dir, "w.txt");
    let id = s.pending_id().await;
    let plain = {
        let c = c.clone();
        tokio::spawn(async move { c.call("bash", json!({ "command": "echo plain" })).await })
    };
    let start = Instant::now();
    let page = loop {
        let page = s.live().await;
        if page.matches("class=\"pending\" id=\"").count() == 2 {
            break page;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "not both parked: {page}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let article = |id: &str| {
        let at = page.find(&format!("class=\"pending\" id=\"{id}\"")).unwrap();
        page[at..at + page[at..].find("</article>").unwrap()].to_string()
    };
    let ours = article(&id);
    assert!(!ours.contains("value=\"always\""), "always offered for a widening: {ours}");
    assert!(ours.contains("value=\"once\"") && ours.contains("value=\"session\""), "{ours}");
    assert!(ours.contains("never always"), "{ours}");
    // The folder with the identity its check saw: the run gets that one.
    let row = format!("<code class=\"needs.write\">{} (device ", dir.display());
    assert!(ours.contains(&row) && ours.contains(", inode "), "{ours}");
    let other_at = page.match_indices("class=\"pending\" id=\"").map(|(i, _)| i + 20);
    let other = other_at.map(|i| page[i..].split('"').next().unwrap()).find(|o| *o != id);
    let other = article(other.unwrap());
    assert!(other.contains("echo plain") && other.contains("value=\"always\""), "{other}");

    // *always* anyway, from the page: refused, said why; still waiting.
    let r = s.post("/approve", &format!("id={id}&choice=always")).await;
    assert_eq!(r.status, 400, "{}{}", r.head, r.body);
    assert!(r.body.contains("never") && r.body.contains("once"), "{}", r.body);
    // …and by hand on the control socket.
    let line = json!({ "op": "answer", "id": id, "choice": "always" }).to_string();
    let answer = {
        use std::io::{BufRead, Write};
        let mut sock =
            std::os::unix::net::UnixStream::connect(fx.state.join("control.sock")).unwrap();
        sock.write_all(format!("{line}\n").as_bytes()).unwrap();
        let mut answer = String::new();
        std::io::BufReader::new(sock).read_line(&mut answer).unwrap();
        answer
    };
    assert!(answer.contains("\"ok\":false") && answer.contains("never always"), "{answer}");
    assert!(answer.contains(&format!("hands approvals approve {id}")), "{answer}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!widening.is_finished(), "an always answer let the widening through");
    assert!(!dir.join("w.txt").exists());
    assert!(s.live().await.contains(&format!("class=\"pending\" id=\"{id}\"")));
    assert!(!fx.state.join("approvals.json").exists(), "a standing permission was recorded");

    // Once: it runs. The plain one is rejected.
    assert_eq!(s.post("/approve", &format!("id={id}&choice=once")).await.status, 303);
    let r = widening.await.unwrap();
    assert_eq!(r.structured_content.as_ref().unwrap()["exit_code"], 0, "{}", text_of(&r));
    assert_eq!(std::fs::read_to_string(dir.join("w.txt")).unwrap(), "w\n");
    let pid = s.pending_id().await;
    assert_eq!(s.post("/approve", &format!("id={pid}&choice=reject")).await.status, 303);
    assert_eq!(plain.await.unwrap().is_error, Some(true));
    fx.assert_canary();
}

/// A confirm-listed program (`rm`) is allowed one run at a time (SPEC §4.4): the page offers
/// Allow once and Reject only, and a *session* or *always* answer — from the page or a
/// control-socket line by hand — is refused with why, the action left waiting and the file
/// kept. Positive control: allowed once, it runs.
#[tokio::test]
async fn a_confirm_listed_program_is_answered_once_or_not_at_all() {
    let fx = Fixture::new();
    let text = std::fs::read_to_string(config(&fx, "allow")).unwrap();
    let cfg = fx.config(&text.replace("allow = [\"echo\"]", "allow = [\"echo\", \"rm\"]"));
    let (c, addr) = start(&fx, &cfg).await;
    let s = login(addr).await;
    let victim = fx.write("victim.txt", "v");
    let call = {
        let c = c.clone();
        tokio::spawn(async move { c.call("run", json!({ "argv": ["rm", "victim.txt"] })).await })
    };
    let id = s.pending_id().await;
    let page = s.live().await;
    let at = page.find(&format!("class=\"pending\" id=\"{id}\"")).unwrap();
    let ours = &page[at..at + page[at..].find("</article>").unwrap()];
    assert!(ours.contains("value=\"once\"") && ours.contains("value=\"reject\""), "{ours}");
    assert!(!ours.contains("value=\"session\"") && !ours.contains("value=\"always\""), "{ours}");
    for choice in ["session", "always"] {
        let r = s.post("/approve", &format!("id={id}&choice={choice}")).await;
        assert_eq!(r.status, 400, "{choice}: {}{}", r.head, r.body);
        assert!(r.body.contains("confirm-listed"), "{}", r.body);
        let line = json!({ "op": "answer", "id": id, "choice": choice }).to_string();
        let answer = {
            use std::io::{BufRead, Write};
            let mut sock =
                std::os::unix::net::UnixStream::connect(fx.state.join("control.sock")).unwrap();
            sock.write_all(format!("{line}\n").as_bytes()).unwrap();
            let mut answer = String::new();
            std::io::BufReader::new(sock).read_line(&mut answer).unwrap();
            answer
        };
        assert!(
            answer.contains("\"ok\":false") && answer.contains("one run at a time"),
            "{answer}"
        );
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!call.is_finished() && victim.exists(), "an unoffered answer let rm run");
    assert_eq!(s.post("/approve", &format!("id={id}&choice=once")).await.status, 303);
    let r = call.await.unwrap();
    assert_ne!(r.is_error, Some(true), "{}", text_of(&r));
    assert!(!victim.exists());
    fx.assert_canary();
}

/// The dashboard offers *for this session* in the words of what it means (SPEC §6): a parked
/// action of a 2026-07-28 client (which has no session) offers "Allow for this client until the
/// daemon restarts"; a 2025-era client's keeps "Allow for this session".
#[tokio::test]
async fn the_session_button_says_what_it_means_for_each_era() {
    use super::common::{Era, handshake};
    for (era, label, other) in [
        (Era::Modern, "Allow for this client until the daemon restarts", "Allow for this session"),
        (Era::Legacy, "Allow for this session", "until the daemon restarts"),
    ] {
        let fx = Fixture::new();
        let cfg = config(&fx, "ask");
        let mut cmd = fx.command(&["serve", "--config", cfg.to_str().unwrap()]);
        cmd.env("HANDS_DASHBOARD_TOKEN", TOKEN);
        let (transport, stderr) =
            TokioChildProcess::builder(cmd).stderr(Stdio::piped()).spawn().unwrap();
        let addr = dashboard_addr(stderr.unwrap()).await;
        let c = Arc::new(Client { service: handshake((), transport, era).await });
        let s = login(addr).await;
        let call = write_call(&c, "asked.txt");
        let id = s.pending_id().await;
        let page = s.live().await;
        let at = page.find(&format!("class=\"pending\" id=\"{id}\"")).unwrap();
        let ours = &page[at..at + page[at..].find("</article>").unwrap()];
        assert!(ours.contains(&format!("value=\"session\" class=\"allow\">{label}<")), "{ours}");
        assert!(!ours.contains(other), "{era:?}: {ours}");
        assert_eq!(s.post("/approve", &format!("id={id}&choice=reject")).await.status, 303);
        assert_eq!(call.await.unwrap().is_error, Some(true));
        assert!(!fx.root.join("asked.txt").exists());
    }
}
