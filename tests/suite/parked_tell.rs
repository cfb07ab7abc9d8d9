//! A person who is asked can tell (issue 36 point 5). A client that cannot ask (it declared no
//! elicitation) used to show nothing while its call was parked: only a line on the daemon's
//! stderr said why. Now the call sends progress notifications naming the action's id and how
//! to answer it, and where the person has a desktop session, the freedesktop notification
//! service shows it. The bus here is a real `dbus-daemon` the test starts, and the notification
//! service a real D-Bus object on it (zbus), standing in for the desktop's.

use super::common::{Era, Fixture, handshake};
use super::gate::{approvals, ask_config};
use rmcp::model::{CallToolRequestParams, ProgressNotificationParam};
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A client that declares nothing and records the progress notifications it receives.
#[derive(Clone, Default)]
struct Watcher(Arc<Mutex<Vec<ProgressNotificationParam>>>);

impl rmcp::ClientHandler for Watcher {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: rmcp::service::NotificationContext<rmcp::RoleClient>,
    ) {
        self.0.lock().unwrap().push(params);
    }
}

/// The desktop's notification service, as far as `Notify` goes: records summary and body.
#[derive(Clone, Default)]
struct Notifications(Arc<Mutex<Vec<(String, String)>>>);

#[zbus::interface(name = "org.freedesktop.Notifications")]
impl Notifications {
    #[allow(clippy::too_many_arguments)]
    fn notify(
        &self,
        _app: String,
        _replaces: u32,
        _icon: String,
        summary: String,
        body: String,
        _actions: Vec<String>,
        _hints: std::collections::HashMap<String, zbus::zvariant::OwnedValue>,
        _timeout: i32,
    ) -> u32 {
        self.0.lock().unwrap().push((summary, body));
        1
    }
}

/// A private session bus: `dbus-daemon --session` on a socket in `dir`; killed on drop.
struct Bus {
    child: std::process::Child,
    address: String,
}

impl Drop for Bus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn session_bus(dir: &std::path::Path) -> Bus {
    let address = format!("unix:path={}", dir.join("bus").display());
    let child = std::process::Command::new("dbus-daemon")
        .args(["--session", "--nofork", "--nopidfile", "--address", &address])
        .spawn()
        .expect("dbus-daemon (apt package dbus-daemon) must be installed for this test");
    for _ in 0..100 {
        if dir.join("bus").exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Bus { child, address }
}

#[tokio::test]
#[ignore = "needs dbus-daemon (a private session bus); run with --include-ignored"]
async fn a_parked_call_says_how_to_answer_it_in_progress_and_on_the_desktop() {
    let fx = Fixture::new();
    let bus = session_bus(fx.root.parent().unwrap());
    let shown = Notifications::default();
    let _service = zbus::connection::Builder::address(bus.address.as_str())
        .unwrap()
        .name("org.freedesktop.Notifications")
        .unwrap()
        .serve_at("/org/freedesktop/Notifications", shown.clone())
        .unwrap()
        .build()
        .await
        .unwrap();

    let config = ask_config(&fx, 30);
    let mut cmd = fx.command(&["serve", "--config", config.to_str().unwrap()]);
    cmd.env("DBUS_SESSION_BUS_ADDRESS", &bus.address).stderr(std::process::Stdio::inherit());
    let watcher = Watcher::default();
    let c = handshake(
        watcher.clone(),
        rmcp::transport::TokioChildProcess::new(cmd).unwrap(),
        Era::Legacy,
    )
    .await;
    let c = Arc::new(c);
    let call = {
        let c = c.clone();
        tokio::spawn(async move {
            let args = json!({ "path": "parked.txt", "content": "x" });
            c.call_tool(
                CallToolRequestParams::new("write")
                    .with_arguments(args.as_object().unwrap().clone()),
            )
            .await
        })
    };
    let id = super::channels::parked_id(&fx, &config, "parked.txt").await.0;
    // While it waits: progress names the id and the command that answers it.
    let mut said = String::new();
    for _ in 0..100 {
        if let Some(p) = watcher.0.lock().unwrap().last() {
            said = p.message.clone().unwrap_or_default();
        }
        if said.contains(&id) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(said.contains(&format!("hands approvals approve {id}")), "progress said: {said:?}");
    assert!(said.contains("waiting for a person"), "{said:?}");
    // The desktop was told too, with the action and how to answer.
    let mut notes = Vec::new();
    for _ in 0..50 {
        notes = shown.0.lock().unwrap().clone();
        if !notes.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(notes[0].0.contains(&id), "{notes:?}");
    assert!(
        notes[0].1.contains("parked.txt") && notes[0].1.contains("hands approvals"),
        "{notes:?}"
    );
    // Still parked: nothing written until a person says yes.
    assert!(!fx.root.join("parked.txt").exists());
    assert!(approvals(&fx, &config, &["approve", &id]).0);
    let r = tokio::time::timeout(Duration::from_secs(30), call).await.unwrap().unwrap().unwrap();
    assert_ne!(r.is_error, Some(true), "{r:?}");
    assert!(fx.root.join("parked.txt").exists());
    // The answer stops the progress: nothing more arrives after the result.
    let count = watcher.0.lock().unwrap().len();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(watcher.0.lock().unwrap().len(), count, "progress after the call ended");
    fx.assert_canary();
}
