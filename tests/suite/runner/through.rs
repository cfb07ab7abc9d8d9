//! Agents through the real relay to a real runner: every tool class in both eras, identities,
//! refusals at the relay's door, the gate's questions parked at the runner's machine (or, with
//! `approvals = "client"`, put to the agent's client), the relay restarted, the runner killed,
//! a link cut in the middle of a call.

use super::super::common::{
    Era, Fixture, Person, host_processes, text_of, unique_sleep, wait_until,
};
use super::super::gate::approvals;
use super::{
    ALICE, BOB, Forwarder, Org, RUNNER_TOKEN, agent_at, call, exchange, runner_config, start_runner,
};
use rmcp::RoleClient;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use serde_json::{Value, json};
use std::time::Duration;

/// An rmcp client as `token`'s agent at runner `box-1`, through `fwd` (TLS to the relay).
async fn agent<H: rmcp::ClientHandler>(
    fwd: &Forwarder,
    token: &str,
    era: Era,
    handler: H,
) -> RunningService<RoleClient, H> {
    agent_at(format!("http://{}/runners/box-1/mcp", fwd.addr), token, era, handler).await
}

/// Waits until the runner's daemon has an action parked whose listing mentions `needle`.
async fn parked(fx: &Fixture, config: &std::path::Path, needle: &str) -> String {
    super::super::channels::parked_id(fx, config, needle).await.0
}

#[tokio::test]
async fn agents_reach_a_runner_through_the_relay_with_every_tool_class_in_both_eras() {
    let fx = Fixture::new();
    let org = Org::start(&fx).await;
    let config = runner_config(&fx, &org.url(), Some(&org.ca_file()), RUNNER_TOKEN, "local");
    let runner = start_runner(&fx, &config);
    assert!(org.wait_connected(true, Duration::from_secs(20)).await, "{}", runner.text());
    let fwd = Forwarder::start(org.addr, Some(org.pki.ca_pem.clone())).await;
    fx.write("seen.txt", "hello from the runner\n");
    for era in [Era::Legacy, Era::Modern] {
        let c = agent(&fwd, ALICE, era, ()).await;
        let tools = c.list_all_tools().await.unwrap();
        assert!(tools.iter().any(|t| t.name == "bash") && tools.iter().any(|t| t.name == "write"));
        // Read class.
        let r = call(&c, "read", json!({"path": "seen.txt"})).await;
        assert!(text_of(&r).contains("hello from the runner"), "{era:?}: {}", text_of(&r));
        // External class (allowed by the module's trust).
        let r = call(&c, "bash", json!({"command": "echo from-bash-$((6*7))"})).await;
        assert!(text_of(&r).contains("from-bash-42"), "{era:?}: {}", text_of(&r));
        // Write class (`ask`): parked at the runner's machine, approved there.
        let path = format!("{era:?}.txt");
        let c = std::sync::Arc::new(c);
        let pending = {
            let (c, path) = (c.clone(), path.clone());
            tokio::spawn(async move {
                call(&c, "write", json!({"path": path, "content": "via relay"})).await
            })
        };
        let id = parked(&fx, &config, &path).await;
        assert!(!fx.root.join(&path).exists(), "{era:?}: it ran before the yes");
        assert!(approvals(&fx, &config, &["approve", &id]).0);
        let r = pending.await.unwrap();
        assert_ne!(r.is_error, Some(true), "{era:?}: {}", text_of(&r));
        assert_eq!(std::fs::read_to_string(fx.root.join(&path)).unwrap(), "via relay");
        let last = fx.audit_records().last().cloned().unwrap();
        assert_eq!(last["client"], "runner:alice", "{last}");
        assert_eq!(last["decided_by"], "person-via-terminal", "{last}");
    }
    // Every record names the relay's agent, none the machine's own channels.
    assert!(fx.audit_records().iter().all(|r| r["client"] == "runner:alice"));
    // The relay's door: bob may not reach box-1 and does not see it; a wrong token is 401.
    let (status, body) = org.get("/runners", BOB).await;
    assert_eq!((status, body.trim()), (200, r#"{"runners":[]}"#));
    let (status, body) = org.get("/runners/box-1/mcp", BOB).await;
    assert_eq!(status, 403, "{body}");
    let (status, _) = org.get("/runners", "not-a-token-of-anyone-at-all").await;
    assert_eq!(status, 401);
    // alice sees both of her runners; box-2 never connected: 503 saying so.
    let (status, body) = org.get("/runners", ALICE).await;
    assert_eq!(status, 200);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["runners"][0]["name"], "box-1");
    assert_eq!(v["runners"][0]["connected"], true);
    assert!(v["runners"][0]["since"].as_str().is_some_and(|s| s.ends_with('Z')), "{v}");
    assert_eq!(v["runners"][1], json!({"name": "box-2", "connected": false, "since": null}));
    let (status, body) = org.get("/runners/box-2/mcp", ALICE).await;
    assert_eq!((status, body.as_str()), (503, r#"{"error":"runner box-2 is not connected"}"#));
    // The door is `hands serve --http`'s: a Host or Origin other than public_url's host (or
    // loopback) is 403 before the token is looked at; those are served.
    let listing = |host: &str, origin: &str| {
        format!("GET /runners HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {ALICE}{origin}")
    };
    assert_eq!(org.raw(&listing("evil.example.com", ""), "").await.0, 403);
    assert_eq!(org.raw(&listing("relay.example.com", ""), "").await.0, 200);
    let foreign = "\r\nOrigin: http://evil.example.com";
    assert_eq!(org.raw(&listing("localhost", foreign), "").await.0, 403);
    let own = "\r\nOrigin: https://relay.example.com";
    assert_eq!(org.raw(&listing("localhost", own), "").await.0, 200);
    // A body over the door's 4 MiB cap is 413 at once, before anything reaches the runner.
    let before = fx.audit_records().len();
    let over = format!(
        "POST /runners/box-1/mcp HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {ALICE}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        4 * 1024 * 1024 + 1
    );
    let (status, body) = exchange(org.addr, Some(&org.pki.ca_pem), over.as_bytes()).await;
    assert_eq!(status, 413, "{body}");
    assert!(body.contains("request body over 4194304 bytes"), "{body}");
    assert_eq!(fx.audit_records().len(), before);
    // The token is nowhere: not in the runner's log, the relay's, the audit log or check.
    let check = fx.std_command(&["check", "--config", config.to_str().unwrap()]).output().unwrap();
    let check = String::from_utf8_lossy(&check.stdout).into_owned();
    assert!(check.contains("runner: wss://localhost") && check.contains("runner.token"), "{check}");
    let audit = std::fs::read_to_string(fx.state.join("audit.jsonl")).unwrap();
    for text in [runner.text(), org.relay.as_ref().unwrap().text(), audit, check] {
        assert!(!text.contains(RUNNER_TOKEN) && !text.contains(ALICE), "a token leaked: {text}");
    }
    fx.assert_canary();
}

#[tokio::test]
async fn approvals_local_parks_even_for_a_client_that_can_ask_and_client_asks_it() {
    let fx = Fixture::new();
    let org = Org::start(&fx).await;
    let fwd = Forwarder::start(org.addr, Some(org.pki.ca_pem.clone())).await;
    for approvals_mode in ["local", "client"] {
        let config =
            runner_config(&fx, &org.url(), Some(&org.ca_file()), RUNNER_TOKEN, approvals_mode);
        let mut runner = start_runner(&fx, &config);
        assert!(org.wait_connected(true, Duration::from_secs(20)).await, "{}", runner.text());
        // `hands doctor` says what "client" trusts the relay with, and says nothing of "local"
        // (it takes seconds: read once the calls are done).
        let doctor = fx.std_command(&["doctor", "--config", config.to_str().unwrap()]);
        let doctor = tokio::task::spawn_blocking(move || {
            let mut doctor = doctor;
            doctor.output().unwrap()
        });
        for era in [Era::Legacy, Era::Modern] {
            let person = Person::new(Some("allow_once"), true);
            let c = std::sync::Arc::new(agent(&fwd, ALICE, era, person.clone()).await);
            let path = format!("{approvals_mode}-{era:?}.txt");
            let pending = {
                let (c, path) = (c.clone(), path.clone());
                tokio::spawn(async move {
                    call(&c, "write", json!({"path": path, "content": "x"})).await
                })
            };
            if approvals_mode == "local" {
                let id = parked(&fx, &config, &path).await;
                assert!(approvals(&fx, &config, &["approve", &id]).0);
            }
            let r = pending.await.unwrap();
            assert_ne!(r.is_error, Some(true), "{approvals_mode} {era:?}: {}", text_of(&r));
            assert!(fx.root.join(&path).exists());
            let last = fx.audit_records().last().cloned().unwrap();
            if approvals_mode == "local" {
                // The agent's client declared form elicitation, and was never asked.
                assert_eq!(
                    person.times_asked(),
                    0,
                    "{era:?}: a local runner asked through the relay"
                );
                assert_eq!(last["decided_by"], "person-via-terminal");
            } else {
                assert_eq!(person.times_asked(), 1, "{era:?}");
                assert!(person.last_question().contains(&path), "{}", person.last_question());
                assert_eq!(last["decided_by"], "person-via-client");
            }
            assert_eq!(last["client"], "runner:alice");
        }
        let doctor = doctor.await.unwrap();
        let doctor = String::from_utf8_lossy(&doctor.stdout).into_owned();
        let warned = doctor.contains("approvals = \"client\": the relay at")
            && doctor.contains("could answer them");
        assert_eq!(warned, approvals_mode == "client", "{approvals_mode}: {doctor}");
        runner.child.kill().await.unwrap();
        assert!(org.wait_connected(false, Duration::from_secs(20)).await);
        let _ = &mut runner;
    }
    fx.assert_canary();
}

#[tokio::test]
async fn the_relay_restarted_and_the_runner_killed() {
    let fx = Fixture::new();
    let mut org = Org::start(&fx).await;
    let config = runner_config(&fx, &org.url(), Some(&org.ca_file()), RUNNER_TOKEN, "local");
    let mut runner = start_runner(&fx, &config);
    assert!(org.wait_connected(true, Duration::from_secs(20)).await, "{}", runner.text());
    // The relay goes away and comes back on the same port: the runner reconnects and works.
    org.stop().await;
    org.run(&fx).await;
    assert!(org.wait_connected(true, Duration::from_secs(30)).await, "{}", runner.text());
    let fwd = Forwarder::start(org.addr, Some(org.pki.ca_pem.clone())).await;
    let c = agent(&fwd, ALICE, Era::Modern, ()).await;
    let r = call(&c, "bash", json!({"command": "echo back-again"})).await;
    assert!(text_of(&r).contains("back-again"), "{}", text_of(&r));
    // The runner dies: its endpoint answers 503 well within 60 s.
    runner.child.kill().await.unwrap();
    let start = std::time::Instant::now();
    let mut unavailable = false;
    while start.elapsed() < Duration::from_secs(60) && !unavailable {
        unavailable = org.get("/runners/box-1/mcp", ALICE).await.0 == 503;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(unavailable, "box-1 still served 60 s after its runner died");
    assert_eq!(org.box1().await["connected"], false);
}

#[tokio::test]
async fn a_wrong_token_or_an_untrusted_ca_is_refused_and_never_disturbs_the_live_runner() {
    let fx = Fixture::new();
    let org = Org::start(&fx).await;
    let config = runner_config(&fx, &org.url(), Some(&org.ca_file()), RUNNER_TOKEN, "local");
    let good = start_runner(&fx, &config);
    assert!(org.wait_connected(true, Duration::from_secs(20)).await, "{}", good.text());
    let since = org.box1().await["since"].clone();
    // A second daemon claiming box-1 with a wrong token: 401 before the upgrade.
    let fx2 = Fixture::new();
    let wrong = runner_config(
        &fx2,
        &org.url(),
        Some(&org.ca_file()),
        "wrong-token-0123456789abcdef",
        "local",
    );
    let bad = start_runner(&fx2, &wrong);
    assert!(
        bad.wait_for("refused this runner (HTTP 401)", Duration::from_secs(20)).await,
        "{}",
        bad.text()
    );
    assert!(
        org.relay
            .as_ref()
            .unwrap()
            .wait_for("refused a runner connection as `box-1`", Duration::from_secs(5))
            .await
    );
    // A daemon whose ca_file is another CA: the TLS handshake fails, it says so and retries.
    let fx3 = Fixture::new();
    let other_ca = fx3.home.join("other-ca.pem");
    std::fs::write(&other_ca, super::Pki::new().ca_pem).unwrap();
    let untrusting = runner_config(&fx3, &org.url(), Some(&other_ca), RUNNER_TOKEN, "local");
    let lost = start_runner(&fx3, &untrusting);
    assert!(lost.wait_for("TLS with localhost", Duration::from_secs(20)).await, "{}", lost.text());
    assert!(lost.wait_for("retrying in", Duration::from_secs(5)).await);
    // `hands doctor` of that daemon's config says why.
    assert!(
        wait_until(Duration::from_secs(10), || fx3.state.join("runner-status.json").exists()).await
    );
    let doctor =
        fx3.std_command(&["doctor", "--config", untrusting.to_str().unwrap()]).output().unwrap();
    let doctor = String::from_utf8_lossy(&doctor.stdout).into_owned();
    assert!(doctor.contains("retrying") && doctor.contains("TLS"), "{doctor}");
    // The live runner kept its link throughout.
    let now = org.box1().await;
    assert_eq!((now["connected"].clone(), now["since"].clone()), (json!(true), since));
    for text in [good.text(), bad.text(), lost.text(), org.relay.as_ref().unwrap().text(), doctor] {
        assert!(!text.contains(RUNNER_TOKEN), "a token leaked: {text}");
    }
}

#[tokio::test]
async fn a_link_cut_mid_call_delivers_the_result_once_it_is_back_and_runs_it_once() {
    let fx = Fixture::new();
    let org = Org::start(&fx).await;
    // The runner reaches the relay through a TCP hop the test can cut.
    let hop = Forwarder::start(org.addr, None).await;
    let url = format!("wss://localhost:{}/runner", hop.addr.port());
    let config = runner_config(&fx, &url, Some(&org.ca_file()), RUNNER_TOKEN, "local");
    let runner = start_runner(&fx, &config);
    assert!(org.wait_connected(true, Duration::from_secs(20)).await, "{}", runner.text());
    let fwd = Forwarder::start(org.addr, Some(org.pki.ca_pem.clone())).await;
    let c = std::sync::Arc::new(agent(&fwd, ALICE, Era::Legacy, ()).await);
    let pending = {
        let c = c.clone();
        tokio::spawn(async move {
            call(&c, "bash", json!({"command": "sleep 2; echo ran >> once.txt; echo finished"}))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(800)).await;
    hop.cut();
    assert!(runner.wait_for("reconnecting", Duration::from_secs(10)).await, "{}", runner.text());
    let r = tokio::time::timeout(Duration::from_secs(30), pending).await.unwrap().unwrap();
    assert!(text_of(&r).contains("finished"), "{}", text_of(&r));
    assert_eq!(
        std::fs::read_to_string(fx.root.join("once.txt")).unwrap(),
        "ran\n",
        "ran twice or never"
    );
}

#[tokio::test]
async fn a_runner_restarted_mid_call_tells_the_agent_its_result_was_lost() {
    let fx = Fixture::new();
    let org = Org::start_plain(&fx).await;
    let config = runner_config(&fx, &org.url(), None, RUNNER_TOKEN, "local");
    let mut runner = start_runner(&fx, &config);
    assert!(org.wait_connected(true, Duration::from_secs(20)).await, "{}", runner.text());
    let c = std::sync::Arc::new(agent_at(org.endpoint("box-1"), ALICE, Era::Legacy, ()).await);
    let secs = unique_sleep();
    let pending = {
        let c = c.clone();
        let command = format!("sleep {secs}; echo ran >> lost.txt");
        let Value::Object(args) = json!({"command": command}) else { unreachable!() };
        tokio::spawn(async move {
            c.call_tool(CallToolRequestParams::new("bash").with_arguments(args)).await
        })
    };
    assert!(
        wait_until(Duration::from_secs(10), || !host_processes(&["sleep", &secs]).is_empty()).await,
        "the command never started"
    );
    // The runner's process dies mid-call and another takes its place: the call cannot be
    // answered any more, and the agent is told so at once, not after the link's linger.
    runner.child.kill().await.unwrap();
    let started = std::time::Instant::now();
    let again = start_runner(&fx, &config);
    let r = tokio::time::timeout(Duration::from_secs(30), pending).await.unwrap().unwrap();
    let e = r.expect_err("a call whose runner restarted was answered");
    let e = e.to_string();
    assert!(e.contains("result was lost") && e.contains("at most once"), "{e}");
    assert!(started.elapsed() < Duration::from_secs(30), "{:?}", started.elapsed());
    // The command died with its daemon and was never run again.
    assert!(
        wait_until(Duration::from_secs(10), || host_processes(&["sleep", &secs]).is_empty()).await
    );
    assert!(!fx.root.join("lost.txt").exists(), "a lost call's command ran on");
    // Positive control: the agent's next session reaches the new runner.
    let c = agent_at(org.endpoint("box-1"), ALICE, Era::Legacy, ()).await;
    let r = call(&c, "bash", json!({"command": "echo new-runner"})).await;
    assert!(text_of(&r).contains("new-runner"), "{}: {}", text_of(&r), again.text());
    fx.assert_canary();
}
