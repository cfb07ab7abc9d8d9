//! The dashboard in a real browser: headless Chromium (Debian's `chromium`) driven through
//! `chromedriver` by fantoccini, against the real binary with a real MCP client raising the
//! actions. One browser session walks the whole path a person takes — log in; see a pending
//! approval appear without reloading; approve it and see the client's call complete; reject
//! one and see it refused; a command line holding markup shows as text (asserted on the DOM);
//! allow a `sleep`, stop it and see it gone from the host; revoke a standing permission and see
//! the next call ask again. Another test is the attack of a page on another loopback port of
//! the same host (a "dev server" an agent started) while the person is logged in.
//! `HANDS_DASHBOARD_SCREENSHOT=FILE` also saves a screenshot with a
//! pending approval and a running command (how `docs/dashboard.png` is made).

use super::common::unique_sleep;
use super::common::{Fixture, host_processes, text_of};
use super::dashboard::{TOKEN, config, grant_dir, start, widening_call};
use fantoccini::{Client as Browser, ClientBuilder, Locator};
use serde_json::json;
use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// `chromedriver` on a free loopback port, killed when dropped.
struct Driver {
    _child: tokio::process::Child,
    url: String,
}

async fn driver() -> Driver {
    for bin in ["chromedriver", "chromium"] {
        let found = std::process::Command::new("sh")
            .args(["-c", &format!("command -v {bin}")])
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(
            found,
            "`{bin}` is not installed; the browser tests need Debian's chromium and \
             chromium-driver (`apt-get install chromium chromium-driver`, as .ci/run does)"
        );
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let child = tokio::process::Command::new("chromedriver")
        .arg(format!("--port={port}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let start = Instant::now();
    while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
        assert!(start.elapsed() < Duration::from_secs(20), "chromedriver did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Driver { _child: child, url: format!("http://127.0.0.1:{port}") }
}

async fn browser(d: &Driver, profile: &std::path::Path) -> Browser {
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": "/usr/bin/chromium",
            "args": [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1360,1100", "--no-first-run",
                format!("--user-data-dir={}", profile.display()),
            ],
        }),
    );
    let connector = hyper_util::client::legacy::connect::HttpConnector::new();
    ClientBuilder::new(connector).capabilities(caps).connect(&d.url).await.unwrap()
}

/// Waits (without reloading: the page refreshes itself) until `css` matches; its element.
async fn wait_for(b: &Browser, css: &str) -> fantoccini::elements::Element {
    b.wait()
        .at_most(Duration::from_secs(20))
        .for_element(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("{css} did not appear: {e}"))
}

/// Clicks `css`, retrying while the live refresh replaces the element under the click.
async fn click(b: &Browser, css: &str) {
    let start = Instant::now();
    loop {
        let r = match b.find(Locator::Css(css)).await {
            Ok(e) => e.click().await,
            Err(e) => Err(e),
        };
        match r {
            Ok(()) => return,
            Err(e) if start.elapsed() > Duration::from_secs(10) => {
                panic!("cannot click {css}: {e}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// The id of the first pending approval on the page, once one shows.
/// The id of the first pending approval, retrying while the live refresh replaces the
/// element between the find and the read (a stale element reference).
async fn pending_id(b: &Browser) -> String {
    let start = Instant::now();
    loop {
        let r = match wait_for(b, "article.pending").await.attr("id").await {
            Ok(Some(id)) => return id,
            Ok(None) => "no id attribute".to_string(),
            Err(e) => e.to_string(),
        };
        if start.elapsed() > Duration::from_secs(20) {
            panic!("cannot read the pending approval's id: {r}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn gone(b: &Browser, css: &str) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(20) {
        if b.find_all(Locator::Css(css)).await.unwrap().is_empty() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

#[tokio::test]
#[ignore = "needs Chromium and chromedriver; run with --include-ignored"]
async fn a_person_answers_stops_and_revokes_in_a_real_browser() {
    let fx = Fixture::new();
    let (c, addr) = start(&fx, &config(&fx, "ask")).await;
    let d = driver().await;
    let profile = tempfile::tempdir().unwrap();
    let b = browser(&d, profile.path()).await;
    let base = format!("http://{addr}");

    // Log in: the page sends a person without a session to /login, and back to the entry a
    // link named (as a URL elicitation does).
    b.goto(&format!("{base}/#a-00000000")).await.unwrap();
    assert_eq!(b.current_url().await.unwrap().path(), "/login");
    b.find(Locator::Id("token")).await.unwrap().send_keys(TOKEN).await.unwrap();
    click(&b, "#login").await;
    wait_for(&b, "#pending").await;
    let url = b.current_url().await.unwrap();
    assert!(url.path().starts_with("/s/"), "{url}");
    assert_eq!(url.fragment(), Some("a-00000000"));
    // The session cookie is HttpOnly: the page's script cannot read it.
    let seen = b.execute("return document.cookie", vec![]).await.unwrap();
    assert!(!seen.as_str().unwrap_or("").contains("hands_session"), "{seen}");

    // Markup in a pending command line is text in the DOM, and nothing ran.
    let evil = "echo '<img src=x onerror=alert(1)>'";
    let call = {
        let c = c.clone();
        tokio::spawn(async move { c.call("bash", json!({ "command": evil })).await })
    };
    let id = pending_id(&b).await;
    let shown = wait_for(&b, &format!("article[id='{id}'] code.command")).await;
    assert_eq!(shown.text().await.unwrap(), evil);
    assert!(b.find_all(Locator::Css("#live img")).await.unwrap().is_empty(), "an img was made");
    // Reject it: the client's call is refused.
    click(&b, &format!("article[id='{id}'] button[value='reject']")).await;
    let r = tokio::time::timeout(Duration::from_secs(20), call).await.unwrap().unwrap();
    assert_eq!(r.is_error, Some(true));
    assert!(text_of(&r).contains("denied it on the dashboard"), "{}", text_of(&r));
    assert!(gone(&b, &format!("article[id='{id}']")).await);
    // The same for an argv (`run`, no shell): each argument shows as text.
    let call = {
        let c = c.clone();
        tokio::spawn(async move {
            c.call("run", json!({ "argv": ["echo", "<img src=x onerror=alert(1)>"] })).await
        })
    };
    let id = pending_id(&b).await;
    let argv = wait_for(&b, &format!("article[id='{id}'] code.argv")).await;
    assert_eq!(argv.text().await.unwrap(), "echo \"<img src=x onerror=alert(1)>\"");
    assert!(b.find_all(Locator::Css("#live img")).await.unwrap().is_empty(), "an img was made");
    click(&b, &format!("article[id='{id}'] button[value='reject']")).await;
    let r = tokio::time::timeout(Duration::from_secs(20), call).await.unwrap().unwrap();
    assert_eq!(r.is_error, Some(true), "{}", text_of(&r));

    // A pending write shows up without reloading; allow once: the call completes.
    let call = {
        let c = c.clone();
        tokio::spawn(
            async move { c.call("write", json!({ "path": "ok.txt", "content": "yes" })).await },
        )
    };
    let id = pending_id(&b).await;
    assert_eq!(
        wait_for(&b, &format!("article[id='{id}'] code.path")).await.text().await.unwrap(),
        "ok.txt"
    );
    click(&b, &format!("article[id='{id}'] button[value='once']")).await;
    let r = tokio::time::timeout(Duration::from_secs(20), call).await.unwrap().unwrap();
    assert_ne!(r.is_error, Some(true), "{}", text_of(&r));
    assert_eq!(std::fs::read_to_string(fx.root.join("ok.txt")).unwrap(), "yes");

    // A sleep, allowed once, runs; a write waits beside it (the screenshot's moment).
    let secs = unique_sleep();
    let sleeper = {
        let c = c.clone();
        let command = format!("echo serving on :8080; sleep {secs}");
        tokio::spawn(async move {
            c.call("bash", json!({ "command": command, "timeout_secs": 600 })).await
        })
    };
    let id = pending_id(&b).await;
    click(&b, &format!("article[id='{id}'] button[value='once']")).await;
    let row = wait_for(&b, "tr.command").await;
    let row_id = row.attr("id").await.unwrap().unwrap();
    assert!(!host_processes(&["sleep", &secs]).is_empty(), "the sleep runs on the host");
    let waiting = {
        let c = c.clone();
        tokio::spawn(async move {
            c.call("write", json!({ "path": "src/<notes>.md", "content": "draft" })).await
        })
    };
    let wid = pending_id(&b).await;
    if let Ok(file) = std::env::var("HANDS_DASHBOARD_SCREENSHOT") {
        // Let the output line arrive and the countdown tick, then keep the picture.
        wait_for(&b, "tr.command pre").await;
        tokio::time::sleep(Duration::from_millis(1500)).await;
        std::fs::write(file, b.screenshot().await.unwrap()).unwrap();
    }
    click(&b, &format!("article[id='{wid}'] button[value='reject']")).await;
    assert_eq!(waiting.await.unwrap().is_error, Some(true));

    // Stop it: the call ends, the row goes, and no sleep is left on the host.
    click(&b, &format!("tr[id='{row_id}'] button")).await;
    let r = tokio::time::timeout(Duration::from_secs(20), sleeper).await.unwrap().unwrap();
    assert!(text_of(&r).contains("stopped by a person on the dashboard"), "{}", text_of(&r));
    assert!(gone(&b, &format!("tr[id='{row_id}']")).await);
    assert!(host_processes(&["sleep", &secs]).is_empty(), "the sleep is gone from the host");

    // Always, then Revoke: the next call asks again.
    let call = {
        let c = c.clone();
        tokio::spawn(
            async move { c.call("write", json!({ "path": "a1.txt", "content": "1" })).await },
        )
    };
    let id = pending_id(&b).await;
    click(&b, &format!("article[id='{id}'] button[value='always']")).await;
    assert_ne!(call.await.unwrap().is_error, Some(true));
    let perm = wait_for(&b, "tr.permission").await.attr("id").await.unwrap().unwrap();
    let r = tokio::time::timeout(
        Duration::from_secs(10),
        c.call("write", json!({ "path": "a2.txt", "content": "2" })),
    )
    .await
    .expect("the always permission lets it run without asking");
    assert_ne!(r.is_error, Some(true));
    click(&b, &format!("tr[id='{perm}'] button")).await;
    assert!(gone(&b, "tr.permission").await);
    let call = {
        let c = c.clone();
        tokio::spawn(
            async move { c.call("write", json!({ "path": "a3.txt", "content": "3" })).await },
        )
    };
    let id = pending_id(&b).await;
    assert!(!fx.root.join("a3.txt").exists(), "it waits for a person again");
    click(&b, &format!("article[id='{id}'] button[value='reject']")).await;
    assert_eq!(call.await.unwrap().is_error, Some(true));
    assert!(!fx.root.join("a3.txt").exists());

    // The trail shows the dashboard's decisions, and the chain verifies.
    let chain = wait_for(&b, "#chain").await.text().await.unwrap();
    assert!(chain.contains("verified"), "{chain}");
    b.close().await.unwrap();
    fx.assert_canary();
}

/// Nothing moves under a person about to answer: pending approvals are listed oldest first (a
/// new one lands below), and while the pointer rests on them the live refresh leaves the
/// section alone — else an entry that went away above could slide another action's Allow under
/// the click. Positive control: once the pointer leaves, the page catches up.
#[tokio::test]
#[ignore = "needs Chromium and chromedriver; run with --include-ignored"]
async fn pending_approvals_hold_still_under_the_pointer() {
    use fantoccini::actions::{InputSource, MouseActions, PointerAction};
    let fx = Fixture::new();
    let cfg = config(&fx, "ask");
    let (c, addr) = start(&fx, &cfg).await;
    let d = driver().await;
    let profile = tempfile::tempdir().unwrap();
    let b = browser(&d, profile.path()).await;
    b.goto(&format!("http://{addr}/")).await.unwrap();
    b.find(Locator::Id("token")).await.unwrap().send_keys(TOKEN).await.unwrap();
    click(&b, "#login").await;
    wait_for(&b, "#pending").await;

    let write = |path: &'static str| {
        let c = c.clone();
        tokio::spawn(async move { c.call("write", json!({ "path": path, "content": "x" })).await })
    };
    let first_call = write("first.txt");
    let first = pending_id(&b).await;
    tokio::time::sleep(Duration::from_millis(1100)).await; // a later expiry second
    let second_call = write("second.txt");
    let start = Instant::now();
    let ids = loop {
        let found = b.find_all(Locator::Css("article.pending")).await.unwrap();
        if found.len() == 2 {
            let mut ids = Vec::new();
            for e in found {
                ids.push(e.attr("id").await.unwrap().unwrap());
            }
            break ids;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "the second action did not show");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(ids[0], first, "the older action is listed first: {ids:?}");
    let second = ids[1].clone();

    // The pointer rests on the second's Allow; the first is answered elsewhere (a terminal).
    let css = format!("article[id='{second}'] button[value='once']");
    let button = b.find(Locator::Css(&css)).await.unwrap();
    let over = MouseActions::new("mouse".into()).then(PointerAction::MoveToElement {
        element: button,
        duration: None,
        x: 0.0,
        y: 0.0,
    });
    b.perform_actions(over).await.unwrap();
    let out = fx
        .std_command(&["approvals", "deny", &first, "--config", cfg.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(first_call.await.unwrap().is_error, Some(true));
    tokio::time::sleep(Duration::from_millis(4500)).await; // two refresh periods
    let still = b.find_all(Locator::Css(&format!("article[id='{first}']"))).await.unwrap();
    assert_eq!(still.len(), 1, "the section was replaced under the pointer");

    // The pointer leaves: the page catches up and the answered entry goes.
    let away = MouseActions::new("mouse".into()).then(PointerAction::MoveToElement {
        element: b.find(Locator::Css("h1")).await.unwrap(),
        duration: None,
        x: 0.0,
        y: 0.0,
    });
    b.perform_actions(away).await.unwrap();
    assert!(gone(&b, &format!("article[id='{first}']")).await, "the page did not catch up");
    click(&b, &format!("article[id='{second}'] button[value='reject']")).await;
    assert_eq!(second_call.await.unwrap().is_error, Some(true));
    b.close().await.unwrap();
    fx.assert_canary();
}

/// A "dev server" on another loopback port: every request's head is kept; `GET /` answers an
/// empty page and sets a cookie of its own for the host (cookies do not separate ports, which
/// the test checks as its positive control).
async fn foreign_server() -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let log = log.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&buf).to_string();
                let page = head.starts_with("GET / ");
                log.lock().unwrap().push(head);
                let body =
                    if page { "<!doctype html><title>dev server</title><p>hi</p>" } else { "" };
                let answer = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nSet-Cookie: dev=1; Path=/\r\n\
                     Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = s.write_all(answer.as_bytes()).await;
            });
        }
    });
    (addr, seen)
}

/// What a page of another origin tries against the dashboard, even knowing the session's
/// prefix (which it has no way to learn): read the page and `/live` with the person's
/// credentials, a form-like POST that answers the parked action *always* (no-cors, which a
/// browser sends without asking), a real form POST into a frame, and framing the page.
const ATTACK: &str = r#"
const [dash, base, id, done] = arguments;
const out = {};
const read = async (name, url, init) => {
  try { const r = await fetch(url, init); out[name] = "read " + r.status + ": " + await r.text(); }
  catch (e) { out[name] = "blocked: " + e; }
};
(async () => {
  await read("root", dash + "/", { credentials: "include" });
  await read("page", dash + base, { credentials: "include" });
  await read("live", dash + base + "live", { credentials: "include" });
  await read("live_header", dash + base + "live",
             { credentials: "include", headers: { "X-Hands-Csrf": "x" } });
  const body = "id=" + id + "&choice=always&csrf=guess";
  try {
    await fetch(dash + base + "approve", { method: "POST", mode: "no-cors", credentials: "include",
      headers: { "Content-Type": "application/x-www-form-urlencoded" }, body });
    out.post = "sent";
  } catch (e) { out.post = "blocked: " + e; }
  const frame = document.createElement("iframe");
  frame.name = "sink";
  document.body.appendChild(frame);
  const form = document.createElement("form");
  form.method = "post"; form.action = dash + base + "approve"; form.target = "sink";
  for (const [k, v] of [["id", id], ["choice", "always"], ["csrf", "guess"]]) {
    const i = document.createElement("input"); i.name = k; i.value = v; form.appendChild(i);
  }
  document.body.appendChild(form);
  form.submit();
  await new Promise(r => setTimeout(r, 1500));
  const view = document.createElement("iframe");
  view.src = dash + base;
  document.body.appendChild(view);
  await new Promise(r => setTimeout(r, 1500));
  try { out.frame = "read: " + view.contentDocument.body.innerHTML; }
  catch (e) { out.frame = "blocked: " + e; }
  out.cookies = document.cookie;
  done(JSON.stringify(out));
})();
"#;

/// The person is logged in; a page on another loopback port of the same host (a dev server
/// an agent could start) cannot see or do anything on the dashboard: the session cookie never
/// reaches that server (its `Path` is the session's unguessable prefix), and even knowing the
/// prefix the page reads nothing (no `/live`, no page, no frame) and answers nothing — the
/// parked action stays parked, the file unwritten. Positive controls: the foreign server does
/// get the browser's cookies of its own (cookies do not separate ports), and the person then
/// answers the action on the dashboard.
#[tokio::test]
#[ignore = "needs Chromium and chromedriver; run with --include-ignored"]
async fn a_page_on_another_port_of_the_host_cannot_see_or_answer_the_dashboard() {
    let fx = Fixture::new();
    let (c, addr) = start(&fx, &config(&fx, "ask")).await;
    let d = driver().await;
    let profile = tempfile::tempdir().unwrap();
    let b = browser(&d, profile.path()).await;
    let dash = format!("http://{addr}");
    b.goto(&format!("{dash}/")).await.unwrap();
    b.find(Locator::Id("token")).await.unwrap().send_keys(TOKEN).await.unwrap();
    click(&b, "#login").await;
    wait_for(&b, "#pending").await;
    let base = b.current_url().await.unwrap().path().to_string();
    let session = b.get_named_cookie("hands_session").await.unwrap().value().to_string();
    let call = {
        let c = c.clone();
        tokio::spawn(async move {
            c.call("write", json!({ "path": "evil.txt", "content": "approved by a dev server" }))
                .await
        })
    };
    let id = pending_id(&b).await;

    // The dev server's page, in the person's browser (a link the agent printed, say).
    let (foreign, seen) = foreign_server().await;
    b.goto(&format!("http://{foreign}/")).await.unwrap();
    b.goto(&format!("http://{foreign}/")).await.unwrap(); // now with its own cookie
    let out = b.execute_async(ATTACK, vec![json!(dash), json!(base), json!(id)]).await.unwrap();
    let out: serde_json::Value = serde_json::from_str(out.as_str().unwrap()).unwrap();
    let heads = seen.lock().unwrap().join("\n---\n");
    // Positive control: the browser does send this host's cookies to the other port.
    assert!(heads.contains("dev=1"), "the dev server never got its own cookie back: {heads}");
    assert!(!heads.contains(&session), "the session cookie reached the dev server: {heads}");
    for (k, v) in out.as_object().unwrap() {
        let v = v.as_str().unwrap_or("");
        assert!(!v.contains("id=\"pending\"") && !v.contains(&id), "{k} read the page: {v}");
        assert!(!v.starts_with("read 200"), "{k}: {v}");
    }
    assert!(!out["cookies"].as_str().unwrap().contains(&session), "{out}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!call.is_finished(), "the parked write was answered: {out}");
    assert!(!fx.root.join("evil.txt").exists());

    // The person, back on the dashboard, still sees it waiting and answers it.
    b.goto(&format!("{dash}{base}")).await.unwrap();
    assert_eq!(pending_id(&b).await, id);
    click(&b, &format!("article[id='{id}'] button[value='reject']")).await;
    let r = tokio::time::timeout(Duration::from_secs(20), call).await.unwrap().unwrap();
    assert_eq!(r.is_error, Some(true), "{}", text_of(&r));
    assert!(text_of(&r).contains("denied it on the dashboard"), "{}", text_of(&r));
    assert!(!fx.root.join("evil.txt").exists());
    let always = fx
        .audit_records()
        .into_iter()
        .any(|r| r["decided_by"] == "person-via-dashboard" && r["decision"] == "allow");
    assert!(!always, "something was allowed on the dashboard");
    b.close().await.unwrap();
    fx.assert_canary();
}

/// In the browser, a parked one-run widening (`needs`) has no Always button (once, session,
/// reject), while a plain parked call beside it has one; the widening, allowed once from its
/// button, runs.
#[tokio::test]
#[ignore = "needs Chromium and chromedriver; run with --include-ignored"]
async fn a_widening_has_no_always_button_in_a_real_browser() {
    let fx = Fixture::new();
    let (c, addr) = start(&fx, &config(&fx, "ask")).await;
    let d = driver().await;
    let profile = tempfile::tempdir().unwrap();
    let b = browser(&d, profile.path()).await;
    b.goto(&format!("http://{addr}/")).await.unwrap();
    b.find(Locator::Id("token")).await.unwrap().send_keys(TOKEN).await.unwrap();
    click(&b, "#login").await;
    wait_for(&b, "#pending").await;
    let dir = grant_dir(&fx);
    let widening = widening_call(&c, &dir, "browser.txt");
    let wid = pending_id(&b).await;
    let plain = {
        let c = c.clone();
        tokio::spawn(async move { c.call("bash", json!({ "command": "echo plain" })).await })
    };
    // Read in one script run: the live refresh may replace the section between two reads.
    const BUTTONS: &str = "return [...document.querySelectorAll('article.pending')].map(a => \
        [a.id, [...a.querySelectorAll('button')].map(x => x.value)])";
    let start = Instant::now();
    let (pid, all) = loop {
        let seen = b.execute(BUTTONS, vec![]).await.unwrap();
        let all: Vec<(String, Vec<String>)> = serde_json::from_value(seen).unwrap();
        if let Some((id, _)) = all.iter().find(|(id, _)| *id != wid) {
            break (id.clone(), all.clone());
        }
        assert!(start.elapsed() < Duration::from_secs(20), "the plain call did not show");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let buttons =
        |id: &str| all.iter().find(|(i, _)| i == id).map(|(_, v)| v.clone()).unwrap_or_default();
    assert_eq!(buttons(&wid), ["once", "session", "reject"], "the widening");
    assert_eq!(buttons(&pid), ["once", "session", "always", "reject"], "plain");
    let shown = wait_for(&b, &format!("article[id='{wid}'] code[class='needs.write']")).await;
    let shown = shown.text().await.unwrap();
    let folder = format!("{} (device ", dir.display());
    assert!(shown.starts_with(&folder) && shown.contains(", inode "), "{shown}");
    click(&b, &format!("article[id='{wid}'] button[value='once']")).await;
    let r = tokio::time::timeout(Duration::from_secs(20), widening).await.unwrap().unwrap();
    assert_eq!(r.structured_content.as_ref().unwrap()["exit_code"], 0, "{}", text_of(&r));
    assert_eq!(std::fs::read_to_string(dir.join("browser.txt")).unwrap(), "w\n");
    click(&b, &format!("article[id='{pid}'] button[value='reject']")).await;
    assert_eq!(plain.await.unwrap().is_error, Some(true));
    b.close().await.unwrap();
    fx.assert_canary();
}
