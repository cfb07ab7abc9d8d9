//! One-run expansions (SPEC §6, `src/needs.rs`) through the real binary: `bash` with
//! `needs.write` naming a folder outside the roots is parked for a person (a client that
//! declared no elicitation), runs with that folder writable only after a yes at `hands
//! approvals`, and asks again the next time; without `needs` the write is refused by the walls.
//! A `needs` naming a credential path, a secret file or a folder holding one is refused before
//! anyone is asked, with `structuredContent.denied`. Canaries outside the roots stay unchanged.

use super::channels::parked_id;
use super::common::{Era, Fixture, Person, handshake, own, text_of};
use super::gate::approvals;
use rmcp::RoleClient;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

type Client = Arc<RunningService<RoleClient, Person>>;

/// tools-shell, external calls allowed by policy: only the widening needs a person.
fn config(fx: &Fixture) -> PathBuf {
    fx.config(
        "[daemon]\nstate_dir = \"{state}\"\n\n[trust]\napproval_timeout_secs = 30\n\n\
         [[builtins]]\nid = \"tools-shell\"\ngrants = [\"filesystem\", \"spawn\"]\n\
         filesystem = [{ path = \"{root}\", write = true }]\n\
         config = { trust = { external = \"allow\" } }\n",
    )
}

async fn connect(fx: &Fixture, config: &Path) -> Client {
    let mut cmd = fx.command(&["serve", "--config", config.to_str().unwrap()]);
    cmd.stderr(std::process::Stdio::inherit());
    let transport = TokioChildProcess::new(cmd).unwrap();
    Arc::new(handshake(Person::new(None, false), transport, Era::Legacy).await)
}

fn bash(c: &Client, args: Value) -> tokio::task::JoinHandle<CallToolResult> {
    let c = c.clone();
    let Value::Object(args) = args else { panic!("arguments must be an object") };
    tokio::spawn(async move {
        c.call_tool(CallToolRequestParams::new("bash").with_arguments(args)).await.unwrap()
    })
}

/// A folder outside the roots (and outside `outside/`, whose listing the canary check pins),
/// writable by the commands' user.
fn grant_dir(fx: &Fixture) -> PathBuf {
    let dir = std::fs::canonicalize(fx.dir.path()).unwrap().join("grant");
    std::fs::create_dir_all(&dir).unwrap();
    if rustix::process::geteuid().is_root() {
        own(&dir);
    }
    dir
}

#[tokio::test]
async fn an_expansion_approved_once_works_once_and_asks_again() {
    let fx = Fixture::new();
    let config = config(&fx);
    let c = connect(&fx, &config).await;
    let dir = grant_dir(&fx);
    let d = dir.display();

    // Without `needs`: the folder is outside the roots, the walls refuse the write.
    let r = bash(&c, json!({ "command": format!("echo no > {d}/plain.txt") })).await.unwrap();
    assert_ne!(r.structured_content.as_ref().unwrap()["exit_code"], 0, "{}", text_of(&r));
    assert!(!dir.join("plain.txt").exists(), "a write outside the roots ran without needs");

    // With `needs.write`: parked for a person even though the policy allows bash.
    let needs = json!({ "write": [dir] });
    let once = bash(&c, json!({ "command": format!("echo yes > {d}/once.txt"), "needs": needs }));
    let (id, listing) = parked_id(&fx, &config, "once.txt").await;
    assert!(listing.contains("needs"), "the person is shown the widening: {listing}");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!once.is_finished(), "the widened run must wait for the person");
    assert!(!dir.join("once.txt").exists());
    let (ok, out) = approvals(&fx, &config, &["approve", &id]);
    assert!(ok, "{out}");
    let r = once.await.unwrap();
    assert_eq!(r.structured_content.as_ref().unwrap()["exit_code"], 0, "{}", text_of(&r));
    assert_eq!(std::fs::read_to_string(dir.join("once.txt")).unwrap(), "yes\n");

    // Approved once: the next run with the same widening asks again; a no refuses it.
    let again = bash(
        &c,
        json!({ "command": format!("echo again > {d}/again.txt"),
        "needs": { "write": [dir] } }),
    );
    let (id, _) = parked_id(&fx, &config, "again.txt").await;
    assert!(approvals(&fx, &config, &["deny", &id]).0);
    let r = again.await.unwrap();
    assert_eq!(r.is_error, Some(true), "{}", text_of(&r));
    assert!(!dir.join("again.txt").exists());
    // And the grant did not outlive its run: a plain run still cannot write there.
    let r = bash(&c, json!({ "command": format!("echo late > {d}/late.txt") })).await.unwrap();
    assert_ne!(r.structured_content.as_ref().unwrap()["exit_code"], 0, "{}", text_of(&r));
    assert!(!dir.join("late.txt").exists());
    fx.assert_canary();
}

#[tokio::test]
async fn needs_cannot_name_credential_or_secret_paths() {
    let fx = Fixture::new();
    let config = config(&fx);
    let c = connect(&fx, &config).await;
    let ssh = fx.home.join(".ssh");
    std::fs::create_dir_all(&ssh).unwrap();
    std::fs::write(ssh.join("id_ed25519"), "KEY\n").unwrap();
    let dir = grant_dir(&fx);
    let secret_dir = dir.join("app");
    std::fs::create_dir_all(&secret_dir).unwrap();
    std::fs::write(secret_dir.join(".env"), "TOKEN=1\n").unwrap();
    let cases = [
        (json!([ssh]), "denied paths"),
        (json!([ssh.join("id_ed25519")]), "denied paths"),
        (json!([fx.home]), "denied paths"),
        (json!([secret_dir.join(".env")]), "secret files"),
        (json!([secret_dir]), "needs"),
        (json!(["relative/path"]), "needs"),
    ];
    for (write, layer) in cases {
        let args = json!({ "command": "echo x > /dev/null", "needs": { "write": write } });
        let r = tokio::time::timeout(Duration::from_secs(20), bash(&c, args)).await;
        let r = r.expect("refused at once, without asking anyone").unwrap();
        assert_eq!(r.is_error, Some(true), "{write}: {}", text_of(&r));
        let denied = &r.structured_content.as_ref().unwrap()["denied"][0];
        assert_eq!(denied["layer"], layer, "{write}: {denied}");
        assert!(text_of(&r).len() < 2000, "{}", text_of(&r));
        let (_, listing) = approvals(&fx, &config, &["list"]);
        let asked = listing.lines().any(|l| l.starts_with("waiting "));
        assert!(!asked, "{write}: a person was asked: {listing}");
    }
    assert_eq!(std::fs::read_to_string(ssh.join("id_ed25519")).unwrap(), "KEY\n");
    assert_eq!(std::fs::read_to_string(secret_dir.join(".env")).unwrap(), "TOKEN=1\n");
    // Positive control: a clean folder is put to a person (denied here).
    let clean = dir.join("clean");
    std::fs::create_dir_all(&clean).unwrap();
    let pending =
        bash(&c, json!({ "command": "touch clean-marker", "needs": { "write": [clean] } }));
    let (id, _) = parked_id(&fx, &config, "clean-marker").await;
    assert!(approvals(&fx, &config, &["deny", &id]).0);
    assert_eq!(pending.await.unwrap().is_error, Some(true));
    fx.assert_canary();
}
