//! Sessions ended on purpose, through the real relay and a real runner: an agent's `DELETE`
//! ends only its own session (another agent's id is unknown to it: 404, and that session keeps
//! working), and a runner shutting down closes its sessions saying so, so that a waiting agent
//! reads why at once (decision 0086) rather than a call lost after the relay's linger.

use super::super::common::{Era, Fixture, host_processes, text_of, unique_sleep, wait_until};
use super::{ALICE, CAROL, Org, RUNNER_TOKEN, agent_at, runner_config, start_runner};
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::time::Duration;

/// One plain HTTP/1.1 exchange with the relay: `method` on box-1's endpoint as `token`, in
/// `session` when given, with `body`; (status, head, body).
async fn at_box1(
    addr: SocketAddr,
    method: &str,
    token: &str,
    session: Option<&str>,
    body: &str,
) -> (u16, String, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let session = session.map(|s| format!("Mcp-Session-Id: {s}\r\n")).unwrap_or_default();
    let request = format!(
        "{method} /runners/box-1/mcp HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer \
         {token}\r\nContent-Type: application/json\r\nAccept: application/json, \
         text/event-stream\r\nMCP-Protocol-Version: 2025-11-25\r\n{session}Content-Length: \
         {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(request.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), s.read_to_end(&mut out)).await.unwrap().unwrap();
    let text = String::from_utf8_lossy(&out).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, head.to_string(), body.to_string())
}

fn session_of(head: &str) -> String {
    head.lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("mcp-session-id").then(|| v.trim().to_string())
        })
        .expect("a 2025-era session id")
}

/// Found by the previous session's notes: rmcp answers 202 to a `DELETE` of any id, so carol's
/// `DELETE` carrying alice's session id seemed to close it while nothing was closed.
#[tokio::test]
async fn a_delete_with_another_agents_session_id_is_404_and_that_session_goes_on() {
    let fx = Fixture::new();
    let org = Org::start_plain(&fx).await;
    let config = runner_config(&fx, &org.url(), None, RUNNER_TOKEN, "local");
    let runner = start_runner(&fx, &config);
    assert!(org.wait_connected(true, Duration::from_secs(20)).await, "{}", runner.text());
    let a = org.addr;
    let init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
        "protocolVersion":"2025-11-25","capabilities":{},
        "clientInfo":{"name":"raw","version":"0"}}})
    .to_string();
    let (status, head, body) = at_box1(a, "POST", ALICE, None, &init).await;
    assert_eq!(status, 200, "{head}\n{body}");
    let alice = session_of(&head);
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    assert_eq!(at_box1(a, "POST", ALICE, Some(&alice), initialized).await.0, 202);
    let echo = |id: u64, word: &str| {
        json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
            "params":{"name":"bash","arguments":{"command":format!("echo {word}")}}})
        .to_string()
    };

    // Carol may reach box-1 too, but alice's session is not hers: unknown, and nothing closes.
    let (status, head, body) = at_box1(a, "DELETE", CAROL, Some(&alice), "").await;
    assert_eq!(status, 404, "a DELETE of another agent's session was accepted: {head}\n{body}");
    assert!(body.contains("session not found") && body.contains("nothing was closed"), "{body}");
    assert!(!body.contains(&alice), "the id is not echoed: {body}");
    let made_up = "0123456789abcdef0123456789abcdef";
    assert_eq!(at_box1(a, "DELETE", CAROL, Some(made_up), "").await.0, 404);
    let (status, _, body) = at_box1(a, "POST", ALICE, Some(&alice), &echo(2, "still-alice")).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("still-alice"), "alice's session stopped working: {body}");

    // The positive control: alice's own DELETE ends it, and it is unknown from then on.
    let (status, head, _) = at_box1(a, "DELETE", ALICE, Some(&alice), "").await;
    assert!((200..300).contains(&status), "{head}");
    assert_eq!(at_box1(a, "POST", ALICE, Some(&alice), &echo(3, "after")).await.0, 404);
    fx.assert_canary();
}

/// Found by the previous session's notes: a runner that stopped left its agents' calls waiting
/// for the relay's linger (60 s), then reading "a call still waiting was lost". It closes each
/// session saying it is shutting down, and the agent reads that, why, and what to do, at once.
#[tokio::test]
async fn a_runner_shutting_down_tells_its_waiting_agents_why() {
    let fx = Fixture::new();
    let org = Org::start_plain(&fx).await;
    let config = runner_config(&fx, &org.url(), None, RUNNER_TOKEN, "local");
    let mut runner = start_runner(&fx, &config);
    assert!(org.wait_connected(true, Duration::from_secs(20)).await, "{}", runner.text());
    let c = std::sync::Arc::new(agent_at(org.endpoint("box-1"), ALICE, Era::Legacy, ()).await);
    let secs = unique_sleep();
    let pending = {
        let c = c.clone();
        let command = format!("sleep {secs}; echo ran >> stopped.txt");
        let Value::Object(args) = json!({"command": command}) else { unreachable!() };
        tokio::spawn(async move {
            c.call_tool(CallToolRequestParams::new("bash").with_arguments(args)).await
        })
    };
    assert!(
        wait_until(Duration::from_secs(10), || !host_processes(&["sleep", &secs]).is_empty()).await,
        "the command never started"
    );
    let pid = rustix::process::Pid::from_raw(runner.pid() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let r = tokio::time::timeout(Duration::from_secs(15), pending)
        .await
        .expect("the agent's call waited on after its runner stopped")
        .unwrap();
    let e = r.expect_err("a call whose runner stopped was answered").to_string();
    assert!(e.contains("runner box-1 is shutting down"), "{e}");
    assert!(e.contains("at most once") && e.contains("try again once it is back"), "{e}");
    let exited = tokio::time::timeout(Duration::from_secs(15), runner.child.wait()).await;
    assert!(exited.is_ok(), "the runner did not exit: {}", runner.text());
    assert!(!fx.root.join("stopped.txt").exists(), "a stopped call's command ran on");
    // The positive control: the runner back, the agent's next session reaches it.
    assert!(org.wait_connected(false, Duration::from_secs(10)).await);
    let again = start_runner(&fx, &config);
    assert!(org.wait_connected(true, Duration::from_secs(20)).await, "{}", again.text());
    let c = agent_at(org.endpoint("box-1"), ALICE, Era::Legacy, ()).await;
    let r = super::call(&c, "bash", json!({"command": "echo back"})).await;
    assert!(text_of(&r).contains("back"), "{}", text_of(&r));
    fx.assert_canary();
}
