//! Which channel the gate asks a person through follows what the client declared (SPEC §6),
//! in either era: rmcp's client over stdio and HTTP, 2025-11-25 and 2026-07-28, with form
//! elicitation, URL elicitation only, or none. A client that declared nothing is never sent an
//! elicitation or an input-required result: its action is parked for `hands approvals` (and
//! the dashboard), and runs only after a person's yes there. A confirm-listed `rm` through
//! such a client is parked too. Each refusal is checked against the world.

use super::common::{Era, Fixture, Person, handshake, text_of};
use super::gate::{approvals, ask_config};
use rmcp::RoleClient;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

async fn call<H: rmcp::ClientHandler>(
    c: &RunningService<RoleClient, H>,
    tool: &str,
    args: Value,
) -> CallToolResult {
    let Value::Object(args) = args else { panic!("arguments must be an object") };
    c.call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(args)).await.unwrap()
}

async fn stdio<H: rmcp::ClientHandler>(
    fx: &Fixture,
    config: &Path,
    era: Era,
    handler: H,
) -> RunningService<RoleClient, H> {
    let mut cmd = fx.command(&["serve", "--config", config.to_str().unwrap()]);
    cmd.stderr(std::process::Stdio::inherit());
    handshake(handler, TokioChildProcess::new(cmd).unwrap(), era).await
}

/// Waits until `hands approvals list` shows an action whose text contains `needle`; returns
/// its id and the listing.
pub(super) async fn parked_id(fx: &Fixture, config: &Path, needle: &str) -> (String, String) {
    for _ in 0..300 {
        let (_, out) = approvals(fx, config, &["list"]);
        // The id of the waiting entry whose lines mention `needle`.
        let mut id = None;
        for line in out.lines() {
            if line.starts_with("waiting ") {
                id = line.split_whitespace().nth(1).map(str::to_string);
            }
            if let (Some(id), true) = (&id, line.contains(needle)) {
                return (id.clone(), out.clone());
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no action with {needle:?} was parked");
}

/// One write through a client that declared no elicitation: parked (the client is sent
/// nothing), approved at a terminal, it runs; a second one denied there does not.
async fn park_approve_and_deny<H: rmcp::ClientHandler + Clone>(
    fx: &Fixture,
    config: &Path,
    c: Arc<RunningService<RoleClient, H>>,
    label: &str,
) {
    let go = |name: &str| {
        let c = c.clone();
        let name = name.to_string();
        tokio::spawn(
            async move { call(&c, "write", json!({ "path": name, "content": "P" })).await },
        )
    };
    let yes = format!("{label}-yes.txt");
    let pending = go(&yes);
    let (id, listing) = parked_id(fx, config, &yes).await;
    assert!(listing.contains("`write`"), "{listing}");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!pending.is_finished(), "{label}: the call must wait for the person");
    assert!(!fx.root.join(&yes).exists(), "{label}: nothing runs before the answer");
    let (ok, out) = approvals(fx, config, &["approve", &id]);
    assert!(ok, "{out}");
    let r = pending.await.unwrap();
    assert_ne!(r.is_error, Some(true), "{label}: {}", text_of(&r));
    assert_eq!(std::fs::read_to_string(fx.root.join(&yes)).unwrap(), "P");
    assert_eq!(fx.audit_records().last().unwrap()["decided_by"], "person-via-terminal");
    let no = format!("{label}-no.txt");
    let pending = go(&no);
    let (id, _) = parked_id(fx, config, &no).await;
    assert!(approvals(fx, config, &["deny", &id]).0);
    let r = pending.await.unwrap();
    assert_eq!(r.is_error, Some(true), "{label}: {}", text_of(&r));
    assert!(text_of(&r).contains("denied"), "{}", text_of(&r));
    assert!(!fx.root.join(&no).exists());
    fx.assert_canary();
}

/// The bug of issue 18: a 2026-07-28 client that declared no elicitation was sent an
/// input-required result it could not answer, and nothing was parked. Now it parks, over
/// stdio and stateless HTTP, exactly as a 2025-era client does.
#[tokio::test]
async fn a_client_without_elicitation_is_parked_for_a_person_in_either_era() {
    for era in [Era::Modern, Era::Legacy] {
        let fx = Fixture::new();
        let config = ask_config(&fx, 30);
        let person = Person::new(Some("allow_once"), false);
        let c = Arc::new(stdio(&fx, &config, era, person.clone()).await);
        park_approve_and_deny(&fx, &config, c.clone(), &format!("{era:?}")).await;
        assert_eq!(person.times_asked(), 0, "{era:?}: a client that declared nothing was asked");
    }
    // A stateless 2026-07-28 HTTP client: every call is its own request.
    use rmcp::transport::StreamableHttpClientTransport;
    let fx = Fixture::new();
    let config = ask_config(&fx, 30);
    let (_child, addr) = super::common::serve_http(&fx, &config, &[]).await;
    let person = Person::new(Some("allow_once"), false);
    let transport = StreamableHttpClientTransport::from_uri(format!("http://{addr}/mcp"));
    let c = Arc::new(handshake(person.clone(), transport, Era::Modern).await);
    park_approve_and_deny(&fx, &config, c, "http").await;
    assert_eq!(person.times_asked(), 0);
}

/// Form elicitation declared: the person is asked through the client and nothing is parked.
#[tokio::test]
async fn a_client_with_form_elicitation_is_asked_through_the_client_in_either_era() {
    for era in [Era::Modern, Era::Legacy] {
        let fx = Fixture::new();
        let config = ask_config(&fx, 30);
        let person = Person::new(Some("allow_once"), true);
        let c = stdio(&fx, &config, era, person.clone()).await;
        let r = call(&c, "write", json!({ "path": "f.txt", "content": "F" })).await;
        assert_ne!(r.is_error, Some(true), "{era:?}: {}", text_of(&r));
        assert_eq!(person.times_asked(), 1, "{era:?}");
        assert_eq!(fx.audit_records().last().unwrap()["decided_by"], "person-via-client");
        let (_, out) = approvals(&fx, &config, &["list"]);
        assert!(!out.lines().any(|l| l.starts_with("waiting ")), "{out}");
        let _ = c.cancel().await;
    }
}

/// A client that can only open URLs (URL-mode elicitation): records what it is sent, says
/// it opened it. It is never sent a form.
#[derive(Clone, Default)]
struct Opener {
    urls: Arc<std::sync::Mutex<Vec<(String, String)>>>,
}

impl rmcp::ClientHandler for Opener {
    async fn create_elicitation(
        &self,
        request: rmcp::model::ElicitRequestParams,
        _context: rmcp::service::RequestContext<RoleClient>,
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

/// Reads the daemon's stderr until the `dashboard at http://ADDR/` line, then keeps draining.
async fn dashboard_base(stderr: tokio::process::ChildStderr) -> String {
    use tokio::io::{AsyncBufReadExt, BufReader};
    #[allow(clippy::print_stderr)]
    fn relay(line: &str) {
        eprintln!("hands: {line}");
    }
    let mut lines = BufReader::new(stderr).lines();
    let base = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let line = lines.next_line().await.unwrap().expect("hands exited early");
            relay(&line);
            if let Some((_, rest)) = line.split_once("dashboard at ") {
                return rest.trim().to_string();
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
    base
}

/// 2026-07-28 and URL elicitation only: the action is parked and the client's input-required
/// round points it at the action's dashboard entry; its retry waits for the person, whose yes
/// (here from a terminal) runs it. Opening the URL decides nothing.
#[tokio::test]
async fn a_url_only_modern_client_is_pointed_at_the_dashboard_entry() {
    use rmcp::ClientServiceExt;
    let fx = Fixture::new();
    let config = fx.config(
        "[daemon]\nstate_dir = \"{state}\"\n\n[server.dashboard]\nlisten = \"127.0.0.1:0\"\n\
         token_env = \"HANDS_DASHBOARD_TOKEN\"\n\n[trust]\nwrite = \"ask\"\n\
         approval_timeout_secs = 30\n\n[[builtins]]\nid = \"tools-fs\"\n\
         grants = [\"filesystem\"]\nfilesystem = [{ path = \"{root}\", write = true }]\n",
    );
    let mut cmd = fx.command(&["serve", "--config", config.to_str().unwrap()]);
    cmd.env("HANDS_DASHBOARD_TOKEN", "dashboard-token-0123456789abcdef");
    let (transport, stderr) =
        TokioChildProcess::builder(cmd).stderr(std::process::Stdio::piped()).spawn().unwrap();
    let base = dashboard_base(stderr.unwrap()).await;
    let opener = Opener::default();
    let c = Arc::new(
        opener
            .clone()
            .serve_with_lifecycle(
                transport,
                rmcp::ClientLifecycleMode::Discover {
                    preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
                },
            )
            .await
            .unwrap(),
    );
    let pending = {
        let c = c.clone();
        tokio::spawn(
            async move { call(&c, "write", json!({ "path": "u.txt", "content": "U" })).await },
        )
    };
    let (id, _) = parked_id(&fx, &config, "u.txt").await;
    let start = std::time::Instant::now();
    while opener.urls.lock().unwrap().is_empty() {
        assert!(start.elapsed() < Duration::from_secs(10), "no URL elicitation arrived");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (url, message) = opener.urls.lock().unwrap()[0].clone();
    assert_eq!(url, format!("{base}#{id}"));
    assert!(message.contains("u.txt"), "{message}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!pending.is_finished(), "opening the URL decided something");
    assert!(!fx.root.join("u.txt").exists());
    let (ok, out) = approvals(&fx, &config, &["approve", &id]);
    assert!(ok, "{out}");
    let r = pending.await.unwrap();
    assert_ne!(r.is_error, Some(true), "{}", text_of(&r));
    assert_eq!(std::fs::read_to_string(fx.root.join("u.txt")).unwrap(), "U");
    assert_eq!(fx.audit_records().last().unwrap()["decided_by"], "person-via-terminal");
    // Denied on the next one: refused, nothing written.
    let pending = {
        let c = c.clone();
        tokio::spawn(
            async move { call(&c, "write", json!({ "path": "u2.txt", "content": "U" })).await },
        )
    };
    let (id, _) = parked_id(&fx, &config, "u2.txt").await;
    assert!(approvals(&fx, &config, &["deny", &id]).0);
    let r = pending.await.unwrap();
    assert_eq!(r.is_error, Some(true), "{}", text_of(&r));
    assert!(!fx.root.join("u2.txt").exists());
    fx.assert_canary();
}

/// `commands.confirm` lists `rm`: even with trust.external = "allow", a client that cannot
/// ask parks it, and it runs only after a person's yes at a terminal.
#[tokio::test]
#[ignore = "needs the Python SDK (pip); run with --include-ignored"]
async fn a_confirm_listed_rm_through_a_client_that_cannot_ask_waits_for_a_yes() {
    for era in [Era::Modern, Era::Legacy] {
        let fx = Fixture::new();
        let config = fx.config(
            "[daemon]\nstate_dir = \"{state}\"\n\n[trust]\napproval_timeout_secs = 30\n\n\
             [[builtins]]\nid = \"tools-shell\"\ngrants = [\"filesystem\", \"spawn\"]\n\
             filesystem = [{ path = \"{root}\", write = true }]\n\
             config = { bash = false, trust = { external = \"allow\" }, \
             commands = { allow = [\"rm\", \"touch\"] } }\n",
        );
        let person = Person::new(Some("allow_once"), false);
        let c = Arc::new(stdio(&fx, &config, era, person.clone()).await);
        // Positive control: touch is not confirm-listed and runs without asking.
        let r = call(&c, "run", json!({ "argv": ["touch", "victim"] })).await;
        assert_ne!(r.is_error, Some(true), "{}", text_of(&r));
        assert!(fx.root.join("victim").exists());
        let rm = || {
            let c = c.clone();
            tokio::spawn(async move { call(&c, "run", json!({ "argv": ["rm", "victim"] })).await })
        };
        // Denied by the person: still there.
        let pending = rm();
        let (id, listing) = parked_id(&fx, &config, "confirm-listed").await;
        assert!(listing.contains("rm"), "{listing}");
        assert!(approvals(&fx, &config, &["deny", &id]).0);
        let r = pending.await.unwrap();
        assert_eq!(r.is_error, Some(true), "{}", text_of(&r));
        assert!(fx.root.join("victim").exists(), "{era:?}: rm ran without a yes");
        // Approved: gone.
        let pending = rm();
        let (id, _) = parked_id(&fx, &config, "confirm-listed").await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(fx.root.join("victim").exists(), "{era:?}: rm ran before the yes");
        assert!(approvals(&fx, &config, &["approve", &id]).0);
        let r = pending.await.unwrap();
        assert_ne!(r.is_error, Some(true), "{}", text_of(&r));
        assert!(!fx.root.join("victim").exists());
        assert_eq!(person.times_asked(), 0, "{era:?}: a client that declared nothing was asked");
        fx.assert_canary();
    }
}

/// The pinned release of the official MCP Python SDK the tests drive (the newest on PyPI when
/// written; it speaks 2026-07-28).
const PYTHON_SDK: &str = "mcp==2.3.0";

/// A Python interpreter with [`PYTHON_SDK`]: `HANDS_PYTHON_SDK` (a venv folder), else a venv
/// made once under `~/.cache/hands-python-sdk` with pip from the registry.
pub(super) fn python_sdk() -> std::path::PathBuf {
    let venv =
        std::env::var_os("HANDS_PYTHON_SDK").map(std::path::PathBuf::from).unwrap_or_else(|| {
            let home = std::env::var_os("HOME").expect("HOME");
            Path::new(&home).join(".cache/hands-python-sdk")
        });
    let python = venv.join("bin/python");
    let version = PYTHON_SDK.trim_start_matches("mcp==");
    let has = |p: &Path| {
        std::process::Command::new(p)
            .args([
                "-c",
                &format!("import importlib.metadata as m; assert m.version('mcp') == '{version}'"),
            ])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !has(&python) {
        let made = std::process::Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .status()
            .is_ok_and(|s| s.success());
        assert!(made, "cannot make a venv at {} (python3 -m venv)", venv.display());
        let installed = std::process::Command::new(venv.join("bin/pip"))
            .args(["install", "-q", PYTHON_SDK])
            .status()
            .is_ok_and(|s| s.success());
        assert!(installed, "cannot install {PYTHON_SDK} into {}", venv.display());
    }
    assert!(has(&python), "{} lacks {PYTHON_SDK}", python.display());
    python
}

/// Runs `tests/python/sdk_client.py` (one `write` of `path`); its JSON line.
fn python_client(
    fx: &Fixture,
    target: &str,
    mode: &str,
    elicitation: &str,
    path: &str,
) -> tokio::task::JoinHandle<Value> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/sdk_client.py");
    let mut cmd = tokio::process::Command::new(python_sdk());
    cmd.arg(script)
        .args([env!("CARGO_BIN_EXE_hands"), target, mode, elicitation, path])
        .current_dir(&fx.root)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &fx.home)
        .env("XDG_STATE_HOME", &fx.state)
        .env("RUST_LOG", "warn")
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true);
    tokio::spawn(async move {
        let out = tokio::time::timeout(Duration::from_secs(60), cmd.output())
            .await
            .expect("the Python client did not finish within 60 s")
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "the Python client failed: {stdout}");
        serde_json::from_str(stdout.lines().last().unwrap_or("")).unwrap()
    })
}

/// The official Python SDK in both eras, over stdio and (2026-07-28) stateless HTTP: with an
/// elicitation callback the person is asked through it; without one (the SDK then declares no
/// elicitation) nothing is sent to it, the action is parked and runs after `hands approvals
/// approve` — the bug of issue 18 was an input-required result this client could not answer.
#[tokio::test]
async fn the_python_sdk_is_asked_by_what_it_declared_in_either_era() {
    let fx = Fixture::new();
    let config = ask_config(&fx, 30);
    let stdio = config.to_str().unwrap().to_string();
    let (_child, addr) = super::common::serve_http(&fx, &config, &[]).await;
    let http = format!("http://{addr}/mcp");
    for (target, mode) in
        [(&stdio, "legacy"), (&stdio, "2026-07-28"), (&http, "2026-07-28"), (&http, "legacy")]
    {
        let label = format!("{}-{mode}", if target.starts_with("http") { "http" } else { "stdio" });
        // Form: asked through the callback, nothing parked.
        let path = format!("{label}-form.txt");
        let out = python_client(&fx, target, mode, "form", &path).await.unwrap();
        assert_eq!(out["is_error"], false, "{label}: {out}");
        assert_eq!(out["asked"].as_array().unwrap().len(), 1, "{label}: {out}");
        assert!(out["asked"][0].as_str().unwrap().contains(&path), "{out}");
        assert_eq!(fx.audit_records().last().unwrap()["decided_by"], "person-via-client");
        // None: parked, and the person's yes at a terminal runs it.
        let path = format!("{label}-none.txt");
        let pending = python_client(&fx, target, mode, "none", &path);
        let (id, _) = parked_id(&fx, &config, &path).await;
        assert!(!fx.root.join(&path).exists(), "{label}: it ran before the yes");
        assert!(approvals(&fx, &config, &["approve", &id]).0);
        let out = pending.await.unwrap();
        assert_eq!(out["is_error"], false, "{label}: {out}");
        assert_eq!(out["asked"], json!([]), "{label}: {out}");
        let expect = if mode == "legacy" { "2025-11-25" } else { mode };
        assert_eq!(out["protocol"], expect, "{label}: {out}");
        assert_eq!(std::fs::read_to_string(fx.root.join(&path)).unwrap(), "py");
        assert_eq!(fx.audit_records().last().unwrap()["decided_by"], "person-via-terminal");
    }
    fx.assert_canary();
}
