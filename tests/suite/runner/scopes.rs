//! Each agent is its own client on the runner: a person's *session* yes (for a 2026-07-28
//! agent: that agent until the daemon restarts) and *always* yes cover the agent they were
//! given to, never another agent that reaches the same runner through the same relay. The
//! questions wait for the person at the runner's machine — on its dashboard as in `hands
//! approvals` — naming `runner:<agent>`; the dashboard never shows the runner's token.

use super::super::common::{Era, Fixture, text_of};
use super::super::dashboard::{self, login};
use super::super::gate::approvals;
use super::{
    ALICE, CAROL, DEFAULT_POLICY, Org, Proc, RUNNER_TOKEN, agent_at, call, runner_config_with,
};
use serde_json::json;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

#[tokio::test]
async fn a_standing_permission_never_crosses_agents_and_questions_wait_on_the_dashboard() {
    let fx = Fixture::new();
    let org = Org::start_plain(&fx).await;
    let policy = format!(
        "[server.dashboard]\nlisten = \"127.0.0.1:0\"\ntoken_env = \"HANDS_DASHBOARD_TOKEN\"\n\n\
         {DEFAULT_POLICY}"
    );
    let config = runner_config_with(&fx, &org.url(), None, RUNNER_TOKEN, "local", &policy);
    let mut cmd = fx.command(&["serve", "--config", config.to_str().unwrap()]);
    cmd.env("HANDS_DASHBOARD_TOKEN", dashboard::TOKEN).env("RUST_LOG", "info");
    let runner = Proc::spawn(cmd, "runner");
    assert!(runner.wait_for("dashboard at http://", Duration::from_secs(20)).await);
    let line = runner.lines.lock().unwrap().iter().find(|l| l.contains("dashboard at")).cloned();
    let addr: SocketAddr =
        line.unwrap().split("http://").nth(1).unwrap().trim_end_matches('/').parse().unwrap();
    assert!(org.wait_connected(true, Duration::from_secs(20)).await, "{}", runner.text());
    let person = login(addr).await;
    let write = |c: &Arc<_>, path: String| {
        let c: Arc<rmcp::service::RunningService<rmcp::RoleClient, ()>> = Arc::clone(c);
        tokio::spawn(async move { call(&c, "write", json!({"path": path, "content": "x"})).await })
    };
    let last = |fx: &Fixture| fx.audit_records().last().cloned().unwrap();
    for (era, scope) in [(Era::Modern, "session"), (Era::Legacy, "always")] {
        let alice = Arc::new(agent_at(org.endpoint("box-1"), ALICE, era, ()).await);
        let carol = Arc::new(agent_at(org.endpoint("box-1"), CAROL, era, ()).await);
        // alice's first write waits on the runner's dashboard, named as the relay's agent.
        let first = format!("alice-{era:?}-1.txt");
        let pending = write(&alice, first.clone());
        let id = person.pending_id().await;
        let page = person.live().await;
        assert!(page.contains("runner:alice") && page.contains(&first), "{page}");
        let r = person.post("/approve", &format!("id={id}&choice={scope}")).await;
        assert_eq!(r.status, 303, "{}", r.body);
        let r = pending.await.unwrap();
        assert_ne!(r.is_error, Some(true), "{era:?}: {}", text_of(&r));
        assert_eq!(last(&fx)["decided_by"], "person-via-dashboard");
        // Positive control: alice's next write runs on the person's yes, unasked.
        let second = format!("alice-{era:?}-2.txt");
        let r = tokio::time::timeout(Duration::from_secs(20), write(&alice, second.clone()))
            .await
            .expect("alice was asked again")
            .unwrap();
        assert_ne!(r.is_error, Some(true), "{era:?}: {}", text_of(&r));
        assert!(fx.root.join(&second).exists());
        assert_eq!(
            (last(&fx)["client"].as_str(), last(&fx)["decided_by"].as_str()),
            (Some("runner:alice"), Some("standing-permission"))
        );
        // carol reaches the same runner: alice's yes is not hers; she is asked, and refused.
        let hers = format!("carol-{era:?}.txt");
        let pending = write(&carol, hers.clone());
        let (id, listing) = super::super::channels::parked_id(&fx, &config, &hers).await;
        assert!(listing.contains("runner:carol"), "{listing}");
        assert!(approvals(&fx, &config, &["deny", &id]).0);
        let r = pending.await.unwrap();
        assert_eq!(r.is_error, Some(true), "{era:?}: carol's write ran on alice's yes");
        assert!(!fx.root.join(&hers).exists());
        assert_eq!(
            (last(&fx)["client"].as_str(), last(&fx)["decided_by"].as_str()),
            (Some("runner:carol"), Some("person-via-terminal"))
        );
    }
    // The always permission names alice's identity on this runner.
    let (_, listing) = approvals(&fx, &config, &["list"]);
    assert!(listing.contains("client runner:alice may run `write`"), "{listing}");
    assert!(!listing.contains("runner:carol may"), "{listing}");
    // The dashboard shows the relay's agents by name, never the runner's token.
    let page = person.page().await;
    assert!(page.contains("runner:alice") && page.contains("runner:carol"), "{page}");
    for text in [page, person.live().await, listing, runner.text()] {
        assert!(!text.contains(RUNNER_TOKEN), "the runner's token leaked: {text}");
    }
    fx.assert_canary();
}
