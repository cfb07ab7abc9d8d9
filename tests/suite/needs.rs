//! One-run expansions (SPEC §6, `hands_shell::needs`) through the real binary: `bash` with
//! `needs.write` naming a folder outside the roots is parked for a person (a client that
//! declared no elicitation), runs with that folder writable only after a yes at `hands
//! approvals`, and asks again the next time; without `needs` the write is refused by the walls.
//! A `needs` naming a credential path, a secret file or a folder holding one is refused before
//! anyone is asked, with `structuredContent.denied`. `needs.network` runs inside the network
//! test harness (`suite::network`): approved once, that run reaches that host and no other, the
//! next asks again, and a denied host stays unreached. A form-elicitation client is never
//! offered *always* for a widening. Canaries outside the roots stay unchanged.

use super::channels::parked_id;
use super::common::{Era, Fixture, Person, handshake, own, text_of};
use super::gate::approvals;
use super::network::{
    PORT, TestNet, Who, approvals as net_approvals, assert_ran_as as net_ran_as,
    config as net_config, denied_hosts as net_denied, pending as net_pending,
};
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
    tool(c, "bash", args)
}

fn tool(c: &Client, name: &'static str, args: Value) -> tokio::task::JoinHandle<CallToolResult> {
    let c = c.clone();
    let Value::Object(args) = args else { panic!("arguments must be an object") };
    tokio::spawn(async move {
        c.call_tool(CallToolRequestParams::new(name).with_arguments(args)).await.unwrap()
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

/// After a call a person widened, the next ordinary call's sandbox is made ready (decision
/// 0078), not one like the widened call's: the next plain call runs in it (the host's process
/// tree) and still cannot write where only the widening could. Positive control: the widened
/// call wrote there.
#[tokio::test]
async fn after_a_widened_call_the_next_plain_call_runs_in_a_sandbox_made_ready() {
    use super::common::{host_processes, unique_sleep, wait_until};
    use super::ready::{ppid, ready_launchers, waiting};
    let fx = Fixture::new();
    let config = config(&fx);
    let c = connect(&fx, &config).await;
    let dir = grant_dir(&fx);
    let d = dir.display();
    let once = bash(
        &c,
        json!({ "command": format!("echo yes > {d}/once.txt"), "needs": { "write": [dir] } }),
    );
    let (id, _) = parked_id(&fx, &config, "once.txt").await;
    assert!(approvals(&fx, &config, &["approve", &id]).0);
    let r = once.await.unwrap();
    assert_eq!(r.structured_content.as_ref().unwrap()["exit_code"], 0, "{}", text_of(&r));
    assert_eq!(std::fs::read_to_string(dir.join("once.txt")).unwrap(), "yes\n");
    // One waits, and it is not the widened call's: its spec does not name the folder.
    let named = |p: &u32| {
        let spec = std::fs::read(format!("/proc/{p}/fd/3")).unwrap_or_default();
        String::from_utf8_lossy(&spec).contains(&d.to_string())
    };
    let mut ready = Vec::new();
    assert!(
        wait_until(Duration::from_secs(10), || {
            ready = ready_launchers(&fx);
            ready.len() == 1 && !ready.iter().any(named)
        })
        .await,
        "an ordinary call's sandbox is made ready after the widened one: {ready:?}"
    );
    let ready = waiting(&fx, ready_launchers).await;
    let sleep = format!("1.{}", unique_sleep().replace('.', ""));
    let late = bash(&c, json!({ "command": format!("echo late > {d}/late.txt; sleep {sleep}") }));
    let mut found = Vec::new();
    assert!(
        wait_until(Duration::from_secs(10), || {
            found = host_processes(&["sleep", &sleep]);
            !found.is_empty()
        })
        .await,
        "the plain call runs"
    );
    let ancestors: Vec<u32> =
        std::iter::successors(Some(found[0]), |p| ppid(*p)).skip(1).take(3).collect();
    assert!(
        ancestors.iter().any(|p| ready.contains(p)),
        "it runs in one made ready: {ancestors:?}, {ready:?}"
    );
    let r = late.await.unwrap();
    assert_ne!(r.is_error, Some(true), "{}", text_of(&r));
    assert!(!dir.join("late.txt").exists(), "the grant did not outlive its run");
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
    // The same in another case (decision 0094: a case-folding folder hands them over as
    // `.env` and `.envrc`).
    let (upper_secret, upper_protected) = (dir.join("app2"), dir.join("app3"));
    std::fs::create_dir_all(&upper_secret).unwrap();
    std::fs::write(upper_secret.join(".Env"), "TOKEN=1\n").unwrap();
    std::fs::create_dir_all(&upper_protected).unwrap();
    std::fs::write(upper_protected.join(".ENVRC"), "echo hi\n").unwrap();
    // What the host trusts: the daemon's own config file, and the folder hands takes its
    // configuration from (one approved run would set `external = "allow"` for every later
    // daemon).
    let user_config = fx.home.join(".config/hands");
    std::fs::create_dir_all(&user_config).unwrap();
    let cases = [
        (json!([config]), "host-trusted paths"),
        (json!([user_config]), "host-trusted paths"),
        (json!([ssh]), "denied paths"),
        (json!([ssh.join("id_ed25519")]), "denied paths"),
        (json!([fx.home]), "denied paths"),
        (json!([secret_dir.join(".env")]), "secret files"),
        (json!([secret_dir]), "needs"),
        (json!([upper_secret]), "needs"),
        (json!([upper_protected]), "needs"),
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
    // A loopback address spelled as a number is not put to a person as a host name (the
    // eighth attack pass: `0x7f000001:28866` was asked about as if it were one).
    for host in ["0x7f000001:28866", "2130706433:28866", "127.1"] {
        let args = json!({ "command": "true", "needs": { "network": [host] } });
        let r = tokio::time::timeout(Duration::from_secs(20), bash(&c, args)).await;
        let r = r.expect("refused at once, without asking anyone").unwrap();
        assert_eq!(r.is_error, Some(true), "{host}: {}", text_of(&r));
        assert!(text_of(&r).contains("127.0.0.1 spelled another way"), "{}", text_of(&r));
        let (_, listing) = approvals(&fx, &config, &["list"]);
        assert!(!listing.lines().any(|l| l.starts_with("waiting ")), "{host}: {listing}");
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

/// What a person approved is what the run gets: a `needs.write` folder is walked again just
/// before the run starts, so a secret file the host put there while the person read the
/// question (a `.env` written by another program) is not handed to the run. Noticed in
/// session 31 (masks were computed when the question was made). The refusal says what
/// changed and what to do; the command did not run; the secret is unchanged. Positive control:
/// once the secret is gone, the same call asked again runs.
#[tokio::test]
async fn a_secret_that_appears_during_the_question_is_not_handed_to_the_run() {
    let fx = Fixture::new();
    let config = config(&fx);
    let c = connect(&fx, &config).await;
    let dir = grant_dir(&fx);
    let d = dir.display();
    let cmd = format!("cat {d}/.env > {d}/copied.txt 2>&1; echo ran > {d}/ran.txt");
    let call = bash(&c, json!({ "command": cmd, "needs": { "write": [dir] } }));
    let (id, _) = parked_id(&fx, &config, "ran.txt").await;
    std::fs::write(dir.join(".env"), "TOKEN=appeared\n").unwrap();
    assert!(approvals(&fx, &config, &["approve", &id]).0);
    let r = call.await.unwrap();
    let text = text_of(&r);
    assert_eq!(r.is_error, Some(true), "{text}");
    for part in ["changed while the person read the question", ".env", "call again"] {
        assert!(text.contains(part), "{part}: {text}");
    }
    assert!(!dir.join("ran.txt").exists() && !dir.join("copied.txt").exists(), "the run ran");
    assert_eq!(std::fs::read_to_string(dir.join(".env")).unwrap(), "TOKEN=appeared\n");
    // A tmux session's widening the same way: the session does not start.
    std::fs::remove_file(dir.join(".env")).unwrap();
    let cmd = format!("echo ran > {d}/session.txt; sleep 60");
    let call = tool(&c, "tmux_start", json!({ "command": cmd, "needs": { "write": [dir] } }));
    let (id, _) = parked_id(&fx, &config, "session.txt").await;
    std::fs::write(dir.join(".env"), "TOKEN=appeared\n").unwrap();
    assert!(approvals(&fx, &config, &["approve", &id]).0);
    let r = call.await.unwrap();
    assert_eq!(r.is_error, Some(true), "{}", text_of(&r));
    assert!(text_of(&r).contains("changed while the person read"), "{}", text_of(&r));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!dir.join("session.txt").exists(), "the session started");

    // Positive control: the secret taken out, the same call is asked about again and runs.
    std::fs::remove_file(dir.join(".env")).unwrap();
    let cmd = format!("echo ran > {d}/ran.txt");
    let call = bash(&c, json!({ "command": cmd, "needs": { "write": [dir] } }));
    let (id, _) = parked_id(&fx, &config, "ran.txt").await;
    assert!(approvals(&fx, &config, &["approve", &id]).0);
    let r = call.await.unwrap();
    assert_eq!(r.is_error, Some(false), "{}", text_of(&r));
    assert_eq!(std::fs::read_to_string(dir.join("ran.txt")).unwrap(), "ran\n");
    fx.assert_canary();
}

/// `needs.network` end to end, inside the network test harness (`suite::network`: the daemon
/// in a namespace of its own with a private `/etc/hosts`, the test host behind a veth). The
/// module's rules deny every host (`unknown = "deny"`, and a deny entry for `denied.test`).
/// Refused without `needs`; with `needs: { network: ["asked.test:8080"] }` the call is parked,
/// a person approves it once at `hands approvals`, and that run reaches that host and no other;
/// the next run without `needs` is refused again, and the same `needs` asks again. Canary: a
/// `needs` naming the denied host, even approved, never reaches the test host (its request
/// counter does not move), and nothing lands on the daemon's own host.
#[tokio::test]
async fn a_network_expansion_approved_once_reaches_that_host_once() {
    network_once(Who::Root).await;
}

#[tokio::test]
#[ignore = "needs root (test hosts in network namespaces); run with --include-ignored"]
async fn as_an_ordinary_user_a_network_expansion_approved_once_reaches_that_host_once() {
    network_once(Who::User).await;
}

async fn network_once(who: Who) {
    let fx = Fixture::new();
    let Some(net) = TestNet::new(&fx) else { return };
    let cfg = net_config(&fx, "{ allow = [], deny = [\"denied.test\"], unknown = \"deny\" }", 30);
    let c = Arc::new(net.daemon_as(&fx, &cfg, who).await);
    let fetch = |host: &str| format!("curl -sS -m 10 http://{host}:{PORT}/file.txt; echo");
    let call = |command: String, needs: Option<Value>| {
        let c = c.clone();
        let mut args = json!({ "command": command, "timeout_secs": 60 });
        if let Some(n) = needs {
            args["needs"] = n;
        }
        tokio::spawn(async move { c.call("bash", args).await })
    };
    let asked = format!("asked.test:{PORT}");
    let structured = |r: &CallToolResult| {
        assert_ne!(r.is_error, Some(true), "{}", text_of(r));
        r.structured_content.clone().unwrap()
    };

    // Without `needs`: the proxy refuses the host, nothing reaches it.
    let out = structured(&call(fetch("asked.test"), None).await.unwrap());
    assert!(!out["stdout"].as_str().unwrap().contains("from the test host"), "{out}");
    assert_eq!(net_denied(&out), std::slice::from_ref(&asked), "{out}");
    assert_eq!(net.served(), 0);

    // With `needs.network`: parked for a person (the policy allows bash; the widening asks),
    // shown plainly; nothing runs before the yes.
    let needs = json!({ "network": [asked] });
    let command = format!("{}; {}", fetch("asked.test"), fetch("other.test"));
    let once = call(command.clone(), Some(needs.clone()));
    let (id, shown) = net_pending(&fx, &cfg, who).await.expect("the widening was put to a person");
    assert!(shown.contains("needs") && shown.contains(&asked), "{shown}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!once.is_finished(), "the widened run must wait for the person");
    assert_eq!(net.served(), 0);
    let out = net_approvals(&fx, &cfg, who, &["approve", &id]).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    // Positive control: the approved host is reached; exactly that one (other.test, on the
    // same test host, stays refused in the same run).
    let out = structured(&once.await.unwrap());
    assert!(out["stdout"].as_str().unwrap().starts_with("from the test host\n"), "{out}");
    assert_eq!(net_denied(&out), [format!("other.test:{PORT}")], "{out}");
    assert_eq!(net.served(), 1, "one request reached the test host");

    // The grant ended with its run: the next run without `needs` is refused.
    let out = structured(&call(fetch("asked.test"), None).await.unwrap());
    assert_eq!(net_denied(&out), std::slice::from_ref(&asked), "{out}");
    assert_eq!(net.served(), 1);

    // Once means once: the same `needs` asks again; a person's no refuses the call.
    let again = call(command, Some(needs));
    let (id, _) = net_pending(&fx, &cfg, who).await.expect("asked again after an allow-once");
    assert!(net_approvals(&fx, &cfg, who, &["deny", &id]).await.status.success());
    let r = again.await.unwrap();
    assert_eq!(r.is_error, Some(true), "{}", text_of(&r));
    assert_eq!(net.served(), 1);

    // Canary: a `needs` naming a denied host, approved, still does not reach it (deny wins).
    let denied = call(fetch("denied.test"), Some(json!({ "network": ["denied.test"] })));
    let (id, _) = net_pending(&fx, &cfg, who).await.expect("asked for the denied host");
    assert!(net_approvals(&fx, &cfg, who, &["approve", &id]).await.status.success());
    let out = structured(&denied.await.unwrap());
    assert!(out["stdout"].as_str().unwrap().contains("deny entry"), "{out}");
    assert_eq!(net_denied(&out), [format!("denied.test:{PORT}")], "{out}");
    assert_eq!(net.served(), 1, "a denied host was reached through `needs`");
    assert_eq!(net.canary_hits(), 0, "a refused name reached the daemon's own host");
    let records = fx.audit_records();
    assert!(
        records.iter().any(|r| r["tool"] == "network"
            && r["arguments"]["host"] == "asked.test"
            && r["outcome"] == "closed"),
        "the approved connection is audited"
    );
    net_ran_as(&fx, who);
    fx.assert_canary();
}

/// A client that declared form elicitation: it records each form's choices and answers
/// `answer` (what a client may send whatever it was offered).
#[derive(Clone)]
struct FormReader {
    answer: &'static str,
    forms: Arc<std::sync::Mutex<Vec<Vec<String>>>>,
}

impl rmcp::ClientHandler for FormReader {
    async fn create_elicitation(
        &self,
        request: rmcp::model::ElicitRequestParams,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction};
        let ElicitRequestParams::FormElicitationParams { requested_schema, .. } = request else {
            panic!("hands asks this client with a form");
        };
        let schema = serde_json::to_value(&requested_schema).unwrap();
        let choices = schema["properties"]["decision"]["enum"]
            .as_array()
            .map(|a| a.iter().map(|c| c.as_str().unwrap().to_string()).collect())
            .unwrap_or_else(|| panic!("the form has no decision enum: {schema}"));
        self.forms.lock().unwrap().push(choices);
        Ok(ElicitResult::new(ElicitationAction::Accept)
            .with_content(json!({ "decision": self.answer })))
    }

    fn get_info(&self) -> rmcp::model::ClientConfig {
        use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
        let caps = ClientCapabilities::builder().enable_elicitation().build();
        ClientConfig::new(caps, Implementation::new("hands-test-form-reader", "0"))
    }
}

/// The form a client is sent for a widening offers once, session and reject — never
/// *always* — and an `allow_always` the client sends anyway grants no standing permission:
/// the same widening asks again. Positive control: a plain `bash` (external = ask) is offered
/// *always*.
#[tokio::test]
async fn the_form_for_a_widening_offers_no_always() {
    let fx = Fixture::new();
    let config = fx.config(
        "[daemon]\nstate_dir = \"{state}\"\n\n[trust]\napproval_timeout_secs = 30\n\n\
         [[builtins]]\nid = \"tools-shell\"\ngrants = [\"filesystem\", \"spawn\"]\n\
         filesystem = [{ path = \"{root}\", write = true }]\n\
         config = { trust = { external = \"ask\" } }\n",
    );
    let reader =
        FormReader { answer: "allow_always", forms: Arc::new(std::sync::Mutex::new(Vec::new())) };
    let mut cmd = fx.command(&["serve", "--config", config.to_str().unwrap()]);
    cmd.stderr(std::process::Stdio::inherit());
    let service =
        handshake(reader.clone(), TokioChildProcess::new(cmd).unwrap(), Era::Legacy).await;
    let dir = grant_dir(&fx);
    let call = |command: String, needs: Option<Value>| {
        let mut args = json!({ "command": command });
        if let Some(n) = needs {
            args["needs"] = n;
        }
        let Value::Object(args) = args else { unreachable!() };
        let peer = service.peer().clone();
        async move {
            peer.call_tool(CallToolRequestParams::new("bash").with_arguments(args)).await.unwrap()
        }
    };
    let d = dir.display();
    let r = call(format!("echo 1 > {d}/one.txt"), Some(json!({ "write": [dir] }))).await;
    assert_eq!(r.structured_content.as_ref().unwrap()["exit_code"], 0, "{}", text_of(&r));
    assert_eq!(
        reader.forms.lock().unwrap()[0],
        ["allow_once", "allow_session", "reject"],
        "a widening's form offers no always"
    );
    // The `allow_always` sent anyway counted once: no standing permission, the same widening
    // asks again.
    let r = call(format!("echo 2 > {d}/two.txt"), Some(json!({ "write": [dir] }))).await;
    assert_eq!(r.structured_content.as_ref().unwrap()["exit_code"], 0, "{}", text_of(&r));
    assert_eq!(reader.forms.lock().unwrap().len(), 2, "the widening was asked again");
    let standing = hands::gate::approvals::read_always(&fx.state.join("approvals.json")).unwrap();
    assert!(standing.is_empty(), "a widening left a standing permission: {standing:?}");
    // Positive control: a plain call's form offers always.
    let r = call("echo plain".into(), None).await;
    assert_ne!(r.is_error, Some(true), "{}", text_of(&r));
    assert_eq!(
        reader.forms.lock().unwrap()[2],
        ["allow_once", "allow_session", "allow_always", "reject"]
    );
    let _ = service.cancel().await;
    fx.assert_canary();
}

/// A root daemon (commands as `nobody`) widened to a root-owned folder: on a file system with
/// id-mapped mounts the approved run writes it, and what it makes belongs to root (the
/// folder's owner); on a ramfs, which has none, the call is refused before anyone is asked,
/// saying why and naming `sandbox.run_as`, and nothing is made there.
#[tokio::test]
#[ignore = "needs root (mount); run with --include-ignored"]
async fn a_root_owned_write_path_is_id_mapped_or_refused_before_asking() {
    use std::os::unix::fs::MetadataExt;
    if !super::common::needs_root("a_root_owned_write_path_is_id_mapped_or_refused", "mount") {
        return;
    }
    let fx = Fixture::new();
    let config = config(&fx);
    let c = connect(&fx, &config).await;
    let base = std::fs::canonicalize(fx.dir.path()).unwrap();
    let (mapped, ram) = (base.join("mapped"), base.join("ram"));
    std::fs::create_dir_all(&mapped).unwrap();
    std::fs::create_dir_all(&ram).unwrap();
    let mounted =
        std::process::Command::new("mount").args(["-t", "ramfs", "ramfs"]).arg(&ram).status();
    assert!(mounted.unwrap().success(), "mount -t ramfs");
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(ram.clone());
    std::os::unix::fs::lchown(&ram, Some(0), Some(0)).unwrap();

    // Positive control: the root-owned folder on the fixture's file system, approved.
    let m = mapped.display();
    let run = bash(
        &c,
        json!({ "command": format!("echo yes > {m}/made.txt"), "needs": { "write": [mapped] } }),
    );
    let (id, _) = parked_id(&fx, &config, "made.txt").await;
    assert!(approvals(&fx, &config, &["approve", &id]).0);
    let r = run.await.unwrap();
    assert_eq!(r.structured_content.as_ref().unwrap()["exit_code"], 0, "{}", text_of(&r));
    let made = std::fs::metadata(mapped.join("made.txt")).unwrap();
    assert_eq!((made.uid(), made.gid()), (0, 0), "made as the folder's owner");

    // The ramfs: refused at once, nobody asked.
    let d = ram.display();
    let r = bash(
        &c,
        json!({ "command": format!("echo no > {d}/no.txt"), "needs": { "write": [ram] } }),
    );
    let r = tokio::time::timeout(Duration::from_secs(20), r).await.unwrap().unwrap();
    let msg = text_of(&r);
    assert_eq!(r.is_error, Some(true), "{msg}");
    assert!(msg.contains("refused before asking anyone"), "{msg}");
    assert!(msg.contains("does not support id-mapped mounts"), "{msg}");
    assert!(msg.contains("sandbox.run_as"), "{msg}");
    assert_eq!(std::fs::read_dir(&ram).unwrap().count(), 0, "nothing was made there");
    fx.assert_canary();
}

/// A command a person let write a folder beside the roots (`needs.write`) can move that
/// folder's tree while it runs: tools-git, whose work tree holds it, refuses its tools meanwhile,
/// though no root of tools-shell overlaps it (decision 0084, found attacking it: the hold saw
/// only the shell's roots). Positive controls: before the run and after it, the tool works.
#[tokio::test]
async fn a_widened_command_holds_the_tree_it_may_write_still() {
    let fx = Fixture::new();
    let dir = grant_dir(&fx);
    super::common::host_git(&fx.home, &dir, &["init", "-q", "-b", "main"]);
    std::fs::write(dir.join("a.txt"), "a\n").unwrap();
    super::common::host_git(&fx.home, &dir, &["add", "."]);
    super::common::host_git(&fx.home, &dir, &["commit", "-qm", "first"]);
    super::common::own_tree(&dir);
    let config = fx.config(&format!(
        "[daemon]\nstate_dir = \"{{state}}\"\n\n[trust]\napproval_timeout_secs = 30\n\n\
         [[builtins]]\nid = \"tools-shell\"\ngrants = [\"filesystem\", \"spawn\"]\n\
         filesystem = [{{ path = \"{{root}}\", write = true }}]\n\
         config = {{ trust = {{ external = \"allow\" }} }}\n\n\
         [[builtins]]\nid = \"tools-git\"\ngrants = [\"filesystem\", \"spawn\"]\n\
         filesystem = [{{ path = \"{}\", write = true }}]\n\
         config = {{ trust = {{ write = \"allow\" }} }}\n",
        dir.display()
    ));
    let c = connect(&fx, &config).await;
    let status = |c: &Client| {
        let c = c.clone();
        async move { c.call_tool(CallToolRequestParams::new("git_status")).await.unwrap() }
    };
    assert_ne!(status(&c).await.is_error, Some(true), "nothing runs yet");
    // A folder of the work tree (the repository's own `.git` cannot be granted).
    let sub = dir.join("sub");
    std::fs::create_dir(&sub).unwrap();
    own(&sub);
    let d = sub.display();
    let run = bash(
        &c,
        json!({ "command": format!("touch {d}/w.txt; sleep 3"), "needs": { "write": [sub] } }),
    );
    let (id, _) = parked_id(&fx, &config, "w.txt").await;
    assert!(approvals(&fx, &config, &["approve", &id]).0);
    let mut refused = String::new();
    for _ in 0..100 {
        let r = status(&c).await;
        if r.is_error == Some(true) {
            refused = text_of(&r);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(refused.contains("a command runs"), "while the widened run runs: {refused}");
    let r = run.await.unwrap();
    assert_eq!(r.structured_content.as_ref().unwrap()["exit_code"], 0, "{}", text_of(&r));
    assert!(sub.join("w.txt").exists(), "the widened run wrote its folder");
    assert_ne!(status(&c).await.is_error, Some(true), "the run ended: {}", text_of(&r));
    fx.assert_canary();
}

/// A widening may name a file: approved, the run writes it (found by the sixth attack pass:
/// after decision 0084 marked widened paths, a file's could not be opened as a folder and the
/// run was refused after the person's yes). The file's folder carries its marks.
#[tokio::test]
async fn a_widening_that_names_a_file_runs_once_approved() {
    let fx = Fixture::new();
    let config = config(&fx);
    let c = connect(&fx, &config).await;
    let file = grant_dir(&fx).join("one.txt");
    std::fs::write(&file, "before\n").unwrap();
    own(&file);
    let f = file.display();
    let run =
        bash(&c, json!({ "command": format!("echo after > {f}"), "needs": { "write": [file] } }));
    let (id, _) = parked_id(&fx, &config, "one.txt").await;
    assert!(approvals(&fx, &config, &["approve", &id]).0);
    let r = run.await.unwrap();
    assert_eq!(r.structured_content.as_ref().unwrap()["exit_code"], 0, "{}", text_of(&r));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "after\n");
    fx.assert_canary();
}

/// A session-life widening is walked again at each `tmux_send`: a secret file another program
/// put in the widened folder after the session started is masked in the session before the
/// text is typed (decision 0101), as one in the roots is. Noticed in session 39 (0093's "What
/// is left": the session saw it unmasked). Positive control: a plain file put there at the
/// same moment is read by the session. The secret is unchanged; canary.
#[tokio::test]
async fn a_secret_put_in_a_session_widening_after_its_start_is_hidden_from_it() {
    let fx = Fixture::new();
    let config = config(&fx);
    let c = connect(&fx, &config).await;
    let dir = grant_dir(&fx);
    let d = dir.display();
    let cmd = format!("cd {d} && exec bash --norc");
    let args = json!({ "command": cmd, "name": "wide", "needs": { "write": [dir] } });
    let start = tool(&c, "tmux_start", args);
    let (id, _) = parked_id(&fx, &config, "exec bash --norc").await;
    assert!(approvals(&fx, &config, &["approve", &id]).0);
    let r = start.await.unwrap();
    assert_eq!(r.is_error, Some(false), "{}", text_of(&r));

    std::fs::write(dir.join(".env"), "TOKEN=late-secret\n").unwrap();
    std::fs::write(dir.join("plain.txt"), "plain\n").unwrap();
    // A host program's socket put there too (decision 0104): masked like a secret.
    let listener = std::os::unix::net::UnixListener::bind(dir.join("late.sock")).unwrap();
    listener.set_nonblocking(true).unwrap();
    use std::os::unix::fs::PermissionsExt;
    let open_to_all = std::fs::Permissions::from_mode(0o777);
    std::fs::set_permissions(dir.join("late.sock"), open_to_all).unwrap();
    let text = "cat .env > leak.txt 2>&1; cat plain.txt > copy.txt 2>&1; python3 -c \
                'import socket; socket.socket(socket.AF_UNIX).connect(\"late.sock\")' 2> sock.txt; \
                echo done > sent.txt";
    let send = tool(&c, "tmux_send", json!({ "session": "wide", "text": text }));
    let (id, listing) = parked_id(&fx, &config, "sent.txt").await;
    assert!(listing.contains(&d.to_string()), "the send names the widening: {listing}");
    assert!(approvals(&fx, &config, &["approve", &id]).0);
    let r = send.await.unwrap();
    assert_eq!(r.is_error, Some(false), "{}", text_of(&r));
    for _ in 0..100 {
        if dir.join("sent.txt").exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(std::fs::read_to_string(dir.join("sent.txt")).unwrap(), "done\n");
    // Positive control: what is not a secret is the session's to read.
    assert_eq!(std::fs::read_to_string(dir.join("copy.txt")).unwrap(), "plain\n");
    let leak = std::fs::read_to_string(dir.join("leak.txt")).unwrap();
    assert!(!leak.contains("late-secret"), "the session read the secret: {leak}");
    assert!(leak.contains("Permission denied"), "the mask answers: {leak}");
    let sock = std::fs::read_to_string(dir.join("sock.txt")).unwrap();
    assert!(listener.accept().is_err() && sock.contains("Error"), "the socket was reached: {sock}");
    assert_eq!(std::fs::read_to_string(dir.join(".env")).unwrap(), "TOKEN=late-secret\n");

    // The folder moved away and another put under its name: what the session holds can no
    // longer be found by name, so nothing is typed, and the refusal says what to do.
    let moved = dir.with_file_name("grant-moved");
    std::fs::rename(&dir, &moved).unwrap();
    std::fs::create_dir(&dir).unwrap();
    let text = "echo typed > typed.txt";
    let send = tool(&c, "tmux_send", json!({ "session": "wide", "text": text }));
    let (id, _) = parked_id(&fx, &config, "typed.txt").await;
    assert!(approvals(&fx, &config, &["approve", &id]).0);
    let r = send.await.unwrap();
    let said = text_of(&r);
    assert_eq!(r.is_error, Some(true), "{said}");
    for part in ["not the folder granted", "nothing was typed", "tmux_kill"] {
        assert!(said.contains(part), "{part}: {said}");
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!moved.join("typed.txt").exists(), "the text was typed");
    let kill = tool(&c, "tmux_kill", json!({ "session": "wide" }));
    if let Ok((id, _)) =
        tokio::time::timeout(Duration::from_secs(5), parked_id(&fx, &config, "wide")).await
    {
        approvals(&fx, &config, &["approve", &id]);
    }
    let _ = kill.await;
    fx.assert_canary();
}

/// A `needs.write` path is refused before anyone is asked when it reaches what the host runs
/// though it lies outside the roots and holds nothing of its own (session 40's attack pass,
/// decision 0104; each was approved and ran the planted program on the host): the folder the
/// roots' repository includes a config from and takes its hooks from (`include.path`,
/// `core.hooksPath` outside the roots), the hooks folder the person's global git config names,
/// a bare repository's `hooks`, a start-up folder of the home although no root holds the home,
/// and a folder holding a unix socket (a host program's, which would take orders from the
/// sandbox). Positive control: a plain folder beside them is put to a person.
#[tokio::test]
async fn needs_cannot_reach_what_the_host_runs_outside_the_roots() {
    let fx = Fixture::new();
    let config = config(&fx);
    let dir = grant_dir(&fx);
    let team = dir.join("team");
    std::fs::create_dir_all(team.join("hooks")).unwrap();
    std::fs::write(team.join("shared.gitconfig"), "[user]\n\tname = Team\n").unwrap();
    super::common::host_git(&fx.home, &fx.root, &["init", "-q"]);
    let git_config = fx.root.join(".git/config");
    let mut text = std::fs::read_to_string(&git_config).unwrap();
    text.push_str(&format!(
        "[include]\n\tpath = {}\n[core]\n\thooksPath = {}\n",
        team.join("shared.gitconfig").display(),
        team.join("hooks").display()
    ));
    std::fs::write(&git_config, text).unwrap();
    let global_hooks = dir.join("person-hooks");
    std::fs::create_dir_all(&global_hooks).unwrap();
    std::fs::write(
        fx.home.join(".gitconfig"),
        format!("[core]\n\thooksPath = {}\n", global_hooks.display()),
    )
    .unwrap();
    let bare = dir.join("shared.git");
    super::common::host_git(&fx.home, &dir, &["init", "-q", "--bare", "shared.git"]);
    let cargo_bin = fx.home.join(".cargo/bin");
    std::fs::create_dir_all(&cargo_bin).unwrap();
    let with_socket = dir.join("sockets");
    std::fs::create_dir_all(with_socket.join("tmux-0")).unwrap();
    let _listener =
        std::os::unix::net::UnixListener::bind(with_socket.join("tmux-0/default")).unwrap();
    // A second name of the project's `.git/config`, and (as root) a bind of the state dir.
    std::fs::hard_link(&git_config, dir.join("cfg-link")).unwrap();
    let holder = dir.join("holder");
    std::fs::create_dir_all(holder.join("m")).unwrap();
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(&self.0).status();
        }
    }
    let bound = super::common::is_root()
        && std::process::Command::new("mount")
            .args(["--bind", fx.state.to_str().unwrap(), holder.join("m").to_str().unwrap()])
            .status()
            .is_ok_and(|s| s.success());
    let _unmount = bound.then(|| Unmount(holder.join("m")));
    let c = connect(&fx, &config).await;
    let mut cases = vec![
        (dir.join("cfg-link"), "hard links"),
        (team.clone(), "shared.gitconfig"),
        (team.join("hooks"), "hooks"),
        (global_hooks.clone(), "person-hooks, "),
        (bare.join("hooks"), "the git dir"),
        (cargo_bin.clone(), "start-up"),
        (with_socket.clone(), "unix socket"),
        (with_socket.join("tmux-0/default"), "unix socket"),
    ];
    if bound {
        cases.push((holder.clone(), "state dir, mounted at"));
    }
    for (path, says) in cases {
        let args = json!({ "command": "echo x > /dev/null", "needs": { "write": [path] } });
        let r = tokio::time::timeout(Duration::from_secs(20), bash(&c, args)).await;
        let r = r.expect("refused at once, without asking anyone").unwrap();
        let text = text_of(&r);
        assert_eq!(r.is_error, Some(true), "{}: {text}", path.display());
        assert!(text.contains(says), "{says}: {text}");
        let denied = &r.structured_content.as_ref().unwrap()["denied"][0];
        assert!(denied["remedy"].as_str().unwrap().contains("nobody can approve"), "{denied}");
        let (_, listing) = approvals(&fx, &config, &["list"]);
        assert!(!listing.lines().any(|l| l.starts_with("waiting ")), "asked: {listing}");
    }
    // Positive control: a plain folder beside them is put to a person (denied here).
    let clean = dir.join("clean");
    std::fs::create_dir_all(&clean).unwrap();
    let pending =
        bash(&c, json!({ "command": "touch reach-marker", "needs": { "write": [clean] } }));
    let (id, _) = parked_id(&fx, &config, "reach-marker").await;
    assert!(approvals(&fx, &config, &["deny", &id]).0);
    assert_eq!(pending.await.unwrap().is_error, Some(true));
    assert!(std::fs::read_dir(team.join("hooks")).unwrap().next().is_none());
    fx.assert_canary();
}
