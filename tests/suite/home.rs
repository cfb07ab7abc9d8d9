//! The commands' home remembers nothing that runs (issue 37 point 2, decision 0068), through the
//! real binary: an auto-allowed `bash` plants `~/.gitconfig` (a `core.fsmonitor`) and
//! `~/.bashrc`; neither a later `git status` a person approved with a `needs` widening, nor the
//! person's own `hands exec -- git status`, nor an interactive bash in a new tmux session runs
//! what they name. The positive controls: a run sees the config it wrote itself, and what it
//! leaves in a cache (`~/.cache`) is there for the next run. The canary outside the roots and
//! the widened folder stay as they were.

use super::channels::parked_id;
use super::common::{Era, Fixture, Person, handshake, own, own_tree, text_of};
use super::gate::approvals;
use rmcp::RoleClient;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::Arc;

type Client = Arc<RunningService<RoleClient, Person>>;

/// Other start-up and config files of issue 37 point 2 the plant writes too; none may be in the
/// next run (the home's allow list of carried caches is `sandbox-profiles/home-carried.txt`).
const OTHERS: &[&str] = &[
    ".profile",
    ".config/git/config",
    ".ssh/config",
    ".npmrc",
    ".cargo/config.toml",
    ".pip/pip.conf",
];

fn call(c: &Client, tool: &'static str, args: Value) -> tokio::task::JoinHandle<CallToolResult> {
    let c = c.clone();
    let Value::Object(args) = args else { panic!("arguments must be an object") };
    tokio::spawn(async move {
        c.call_tool(CallToolRequestParams::new(tool).with_arguments(args)).await.unwrap()
    })
}

fn structured(r: &CallToolResult) -> &Value {
    r.structured_content.as_ref().unwrap_or_else(|| panic!("no result: {}", text_of(r)))
}

#[tokio::test]
async fn what_a_run_leaves_in_the_home_runs_in_no_later_run() {
    let fx = Fixture::new();
    let config = fx.config(
        "[daemon]\nstate_dir = \"{state}\"\n\n[trust]\napproval_timeout_secs = 30\n\n\
         [[builtins]]\nid = \"tools-shell\"\ngrants = [\"filesystem\", \"spawn\"]\n\
         filesystem = [{ path = \"{root}\", write = true }]\n\
         config = { trust = { external = \"allow\" }, commands = { allow = [\"git status\"] } }\n",
    );
    // A repository with a commit (git status reads its index), and the program a planted
    // config names: it leaves a mark in the root and one in whatever folder it is told.
    let repo = fx.root.join("repo");
    std::fs::create_dir(&repo).unwrap();
    super::common::host_git(&fx.home, &repo, &["init", "-q"]);
    std::fs::write(repo.join("a"), "a").unwrap();
    super::common::host_git(&fx.home, &repo, &["add", "a"]);
    super::common::host_git(&fx.home, &repo, &["commit", "-qm", "a"]);
    own_tree(&repo);
    let grant = fx.dir.path().canonicalize().unwrap().join("grant");
    std::fs::create_dir(&grant).unwrap();
    if super::common::is_root() {
        own(&grant);
    }
    let evil = fx.root.join("evil.sh");
    let marks = format!(
        "#!/bin/sh\ntouch {root}/ran-$1 2>/dev/null\ntouch {grant}/ran 2>/dev/null\nexit 0\n",
        root = fx.root.display(),
        grant = grant.display()
    );
    std::fs::write(&evil, marks).unwrap();
    std::fs::set_permissions(&evil, std::fs::Permissions::from_mode(0o755)).unwrap();
    if super::common::is_root() {
        own(&evil);
    }
    let ran = || -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&fx.root)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.starts_with("ran-"))
            .collect();
        v.sort();
        v
    };

    let mut cmd = fx.command(&["serve", "--config", config.to_str().unwrap()]);
    cmd.stderr(std::process::Stdio::inherit());
    let transport = TokioChildProcess::new(cmd).unwrap();
    let c: Client = Arc::new(handshake(Person::new(None, false), transport, Era::Legacy).await);

    // The plant, by an auto-allowed bash. In its own run the config counts (a build that
    // writes its own config works), and a cache keeps what it is given.
    let plant = format!(
        "printf '[core]\\n\\tfsmonitor = {evil} fsmonitor\\n' > ~/.gitconfig && \
         printf 'touch {root}/ran-bashrc\\n' > ~/.bashrc && mkdir -p ~/.cache && \
         echo kept > ~/.cache/hands-test && {others} && \
         git config --global --get core.fsmonitor",
        others = OTHERS
            .iter()
            .map(|f| format!("mkdir -p \"$(dirname ~/{f})\" && echo x > ~/{f}"))
            .collect::<Vec<_>>()
            .join(" && "),
        evil = evil.display(),
        root = fx.root.display()
    );
    let r = call(&c, "bash", json!({ "command": plant })).await.unwrap();
    let s = structured(&r);
    assert_eq!(s["exit_code"], 0, "{}", text_of(&r));
    assert!(s["stdout"].as_str().unwrap().contains("evil.sh"), "{}", text_of(&r));

    // A `git status` a person approved with a widening: the widening, and nothing planted.
    let cmd = format!("cd {} && git status --short && echo status-ran", repo.display());
    let widened = call(&c, "bash", json!({ "command": cmd, "needs": { "write": [grant] } }));
    let (id, _) = parked_id(&fx, &config, "status-ran").await;
    assert!(approvals(&fx, &config, &["approve", &id]).0);
    let r = widened.await.unwrap();
    assert!(structured(&r)["stdout"].as_str().unwrap().contains("status-ran"), "{}", text_of(&r));

    // The person's own `hands exec -- git status`.
    let out = fx
        .std_command(&["exec", "--config", config.to_str().unwrap(), "--", "git", "status"])
        .current_dir(&repo)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    // An interactive bash in a new tmux session.
    let r = call(
        &c,
        "tmux_start",
        json!({ "command": "bash -i -c 'echo rc-done'", "ready": { "pattern": "rc-done" } }),
    )
    .await
    .unwrap();
    assert_ne!(r.is_error, Some(true), "{}", text_of(&r));

    assert_eq!(ran(), Vec::<String>::new(), "a planted start-up file ran in a later run");
    assert_eq!(std::fs::read_dir(&grant).unwrap().count(), 0, "the widened folder was written");
    // The next run starts clean: no config, no rc file; the cache is there.
    let look = format!(
        "cat ~/.cache/hands-test; ls -A ~ | sort | tr '\\n' ' '; \
         git config --global --get core.fsmonitor || echo no-config; {}",
        OTHERS
            .iter()
            .map(|f| format!("test -e ~/{f} && echo kept-{f}"))
            .collect::<Vec<_>>()
            .join("; ")
    );
    let r = call(&c, "bash", json!({ "command": look })).await.unwrap();
    let out = structured(&r)["stdout"].as_str().unwrap().to_string();
    assert!(out.starts_with("kept\n"), "the cache was not carried: {out}");
    assert!(
        out.contains("no-config") && !out.contains(".gitconfig") && !out.contains(".bashrc"),
        "{out}"
    );
    assert!(!out.contains("kept-"), "a start-up or config file was carried: {out}");

    // And the positive control for the marks themselves: the same program, run by the person's
    // approved run directly, does leave them.
    let r =
        call(&c, "bash", json!({ "command": format!("{} direct", evil.display()) })).await.unwrap();
    assert_eq!(structured(&r)["exit_code"], 0, "{}", text_of(&r));
    assert_eq!(ran(), vec!["ran-direct".to_string()]);
    fx.assert_canary();
    let home = super::common::sandbox_home(&fx);
    let kept: Vec<PathBuf> = std::fs::read_dir(&home).unwrap().map(|e| e.unwrap().path()).collect();
    assert!(!home.join(".gitconfig").exists() && !home.join(".bashrc").exists(), "{kept:?}");
}

/// Two daemons of one person share the default state dir but not their roots: what one
/// project's commands leave in the carried caches (`~/.cache`) is not in the other's home
/// (found by session 40's attack pass: a planted `corepack` cache ran in the other project,
/// which could then be written; decision 0105). Positive control: the first project's next
/// run finds what it left there.
#[tokio::test]
async fn one_projects_caches_are_not_another_projects() {
    let fx = Fixture::new();
    let other = fx.dir.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    own(&other);
    let text = |root: &std::path::Path| {
        format!(
            "[daemon]\nstate_dir = \"{}\"\n\n[[builtins]]\nid = \"tools-shell\"\n\
             grants = [\"filesystem\", \"spawn\"]\nfilesystem = [{{ path = \"{}\", write = true }}]\n\
             config = {{ trust = {{ external = \"allow\" }} }}\n",
            fx.state.display(),
            root.display()
        )
    };
    let first = fx.config(&text(&fx.root));
    let second = fx.dir.path().join("second.toml");
    std::fs::write(&second, text(&other)).unwrap();
    let a = super::common::Client::start_era(&fx, &first, Era::Legacy).await;
    let plant = "mkdir -p ~/.cache/planted && echo from-a > ~/.cache/planted/run.js && echo ok";
    let r = a.ok("bash", json!({ "command": plant })).await;
    assert_eq!(r["stdout"], "ok\n", "{r}");
    let b = super::common::Client::start_era(&fx, &second, Era::Legacy).await;
    let look = "cat ~/.cache/planted/run.js 2>&1; echo end";
    let r = b.ok("bash", json!({ "command": look })).await;
    assert!(!r["stdout"].as_str().unwrap().contains("from-a"), "the other project's cache: {r}");
    let r = a.ok("bash", json!({ "command": look })).await;
    assert_eq!(r["stdout"], "from-a\nend\n", "positive control: {r}");
    // Nor one loopback: a server the second project's session keeps is not the first's to
    // reach (found by the attack pass on 0105: another project's files read over HTTP).
    let serve = "echo only-b > served.txt && exec python3 -m http.server 8765 --bind 127.0.0.1";
    b.ok("tmux_start", json!({ "command": serve, "name": "srv" })).await;
    let get = "for i in $(seq 50); do python3 -c 'import urllib.request as u; \
               print(u.urlopen(\"http://127.0.0.1:8765/served.txt\").read().decode())' \
               2>/dev/null && break; sleep 0.2; done; echo end";
    let r = b.ok("bash", json!({ "command": get })).await;
    assert_eq!(r["stdout"], "only-b\n\nend\n", "positive control: {r}");
    let r = a.ok("bash", json!({ "command": get.replace("seq 50", "seq 3") })).await;
    assert_eq!(r["stdout"], "end\n", "the other project's server was reached: {r}");
    b.ok("tmux_kill", json!({ "session": "srv" })).await;
    a.stop().await;
    b.stop().await;
    fx.assert_canary();
}
