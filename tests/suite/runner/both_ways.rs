//! What travels both ways over the link, through the real relay (plain HTTP, as behind the
//! organization's TLS proxy) to the real runner (its token from `token_env`), in both eras: a
//! long command's progress notifications come back to the agent, and the agent's cancellation
//! goes to the runner, which stops the command (gone from the host); the session then goes on.

use super::super::common::{Era, Fixture, host_processes, text_of, unique_sleep, wait_until};
use super::{ALICE, Org, Proc, RUNNER_TOKEN, agent_at, call, runner_config};
use rmcp::model::{CallToolRequestParams, ProgressNotificationParam};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// An agent's client that records the progress notifications it receives.
#[derive(Clone, Default)]
struct ProgressLog(Arc<Mutex<Vec<ProgressNotificationParam>>>);

impl rmcp::ClientHandler for ProgressLog {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: rmcp::service::NotificationContext<rmcp::RoleClient>,
    ) {
        self.0.lock().unwrap().push(params);
    }
}

#[tokio::test]
async fn progress_comes_back_and_cancellation_goes_through_to_the_command() {
    let fx = Fixture::new();
    let org = Org::start_plain(&fx).await;
    // The token from the environment this time (`token_env`), never from a file.
    let config = runner_config(&fx, &org.url(), None, RUNNER_TOKEN, "local");
    let text = std::fs::read_to_string(&config).unwrap();
    let token_file = fx.home.join("runner.token");
    std::fs::remove_file(&token_file).unwrap();
    let line = format!("token_file = \"{}\"", token_file.display());
    std::fs::write(&config, text.replace(&line, "token_env = \"HANDS_RUNNER_TOKEN\"")).unwrap();
    let mut cmd = fx.command(&["serve", "--config", config.to_str().unwrap()]);
    cmd.env("HANDS_RUNNER_TOKEN", RUNNER_TOKEN).env("RUST_LOG", "info");
    let runner = Proc::spawn(cmd, "runner");
    assert!(org.wait_connected(true, Duration::from_secs(20)).await, "{}", runner.text());
    for era in [Era::Legacy, Era::Modern] {
        let log = ProgressLog::default();
        let c = agent_at(org.endpoint("box-1"), ALICE, era, log.clone()).await;
        // Progress: the runner's notifications reach the agent, in order, during the call.
        let r = call(&c, "bash", json!({"command": "echo tick; sleep 2.5; echo tock"})).await;
        assert_eq!(r.structured_content.as_ref().unwrap()["stdout"], "tick\ntock\n", "{era:?}");
        let seen = log.0.lock().unwrap().clone();
        assert!(seen.len() >= 2, "{era:?}: {seen:?}");
        assert!(seen.windows(2).all(|w| w[0].progress < w[1].progress), "{seen:?}");
        // Cancellation: dropping the call's future cancels it; the runner kills the command.
        let secs = unique_sleep();
        let peer = c.peer().clone();
        let Value::Object(args) = json!({"command": format!("sleep {secs}")}) else {
            unreachable!()
        };
        let pending = tokio::spawn(async move {
            peer.call_tool(CallToolRequestParams::new("bash").with_arguments(args)).await
        });
        assert!(
            wait_until(Duration::from_secs(10), || !host_processes(&["sleep", &secs]).is_empty())
                .await,
            "{era:?}: the command never started"
        );
        pending.abort();
        assert!(
            wait_until(Duration::from_secs(10), || host_processes(&["sleep", &secs]).is_empty())
                .await,
            "{era:?}: the command survived the agent's cancellation"
        );
        // The session goes on.
        let r = call(&c, "bash", json!({"command": "echo still-here"})).await;
        assert!(text_of(&r).contains("still-here"), "{era:?}: {}", text_of(&r));
        let _ = c.cancel().await;
    }
    assert!(!runner.text().contains(RUNNER_TOKEN), "the token leaked: {}", runner.text());
    fx.assert_canary();
}
