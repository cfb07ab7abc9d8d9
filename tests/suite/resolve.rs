//! One resolution (SPEC §3, decision 0055) as attacks through the real binary: a path a check
//! admitted is never resolved again by name. A tmux session the agent started earlier swaps a
//! folder on the way of an approved `needs.write` path while the person reads the question; a
//! command moves a read-only root's parent aside; a session moves a protected path's folder
//! between the daemon's walk and the next launch. Each time the next command is refused (or
//! gets exactly what was checked), never the folder the name points at now; a canary outside
//! the roots stays unchanged. And `needs.write` can never name what the host trusts (the
//! daemon's config file, its state dir, its binary): refused before anyone is asked.

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

/// tools-shell on the fixture's root (and `extra` roots), external calls as `external` says.
fn config(fx: &Fixture, extra: &str, external: &str) -> PathBuf {
    config_with(fx, extra, external, "")
}

/// [`config`], with `more` added to tools-shell's `config` table (`, keep_sessions = true`).
fn config_with(fx: &Fixture, extra: &str, external: &str, more: &str) -> PathBuf {
    fx.config(&format!(
        "[daemon]\nstate_dir = \"{{state}}\"\n\n[trust]\napproval_timeout_secs = 60\n\n\
         [[builtins]]\nid = \"tools-shell\"\ngrants = [\"filesystem\", \"spawn\"]\n\
         filesystem = [{{ path = \"{{root}}\", write = true }}{extra}]\n\
         config = {{ trust = {{ external = \"{external}\" }}{more} }}\n"
    ))
}

/// A client that declared no elicitation: every question is parked for `hands approvals`.
async fn connect(fx: &Fixture, config: &Path) -> Client {
    let mut cmd = fx.command(&["serve", "--config", config.to_str().unwrap()]);
    cmd.stderr(std::process::Stdio::inherit());
    let transport = TokioChildProcess::new(cmd).unwrap();
    Arc::new(handshake(Person::new(None, false), transport, Era::Legacy).await)
}

fn call(c: &Client, tool: &str, args: Value) -> tokio::task::JoinHandle<CallToolResult> {
    let (c, tool) = (c.clone(), tool.to_string());
    let Value::Object(args) = args else { panic!("arguments must be an object") };
    tokio::spawn(async move {
        c.call_tool(CallToolRequestParams::new(tool).with_arguments(args)).await.unwrap()
    })
}

/// Waits for the parked action whose listing mentions `needle`, approves it, and returns the
/// listing a person saw.
async fn approve(fx: &Fixture, config: &Path, needle: &str) -> String {
    let (id, listing) = super::channels::parked_id(fx, config, needle).await;
    let (ok, out) = approvals(fx, config, &["approve", &id]);
    assert!(ok, "{out}");
    listing
}

/// Makes `rel` in the root a folder the commands' user owns.
fn folder(fx: &Fixture, rel: &str) -> PathBuf {
    let p = fx.root.join(rel);
    std::fs::create_dir_all(&p).unwrap();
    if rustix::process::geteuid().is_root() {
        for a in p.ancestors().take_while(|a| a.starts_with(&fx.root)) {
            own(a);
        }
    }
    p
}

/// Creates `name` in the root (what the session waits for) and waits until the session made
/// `done`.
async fn trigger(fx: &Fixture, name: &str, done: &str) {
    std::fs::write(fx.root.join(name), "").unwrap();
    let done = fx.root.join(done);
    let seen = super::common::wait_until(Duration::from_secs(20), || done.exists()).await;
    assert!(seen, "the session did not make {}", done.display());
}

fn exit_code(r: &CallToolResult) -> Option<i64> {
    r.structured_content.as_ref().and_then(|s| s["exit_code"].as_i64())
}

/// The attack of issue 30 class 2: `needs.write` names a folder in the project; a tmux session
/// the agent started earlier swaps it for a link (to a folder outside the roots, to `/`) or
/// for another folder while the question waits; the person approves what they were shown.
/// The approved run is refused: nothing lands where the name points now. Positive control: the
/// same widening, not swapped, is usable.
#[tokio::test]
async fn a_needs_path_swapped_while_the_person_reads_is_never_bound() {
    let fx = Fixture::new();
    let config = config(&fx, "", "ask");
    let c = connect(&fx, &config).await;
    // The root's sibling, outside the roots.
    let victim = fx.root.parent().unwrap().join("victim");
    std::fs::create_dir_all(&victim).unwrap();
    std::fs::write(victim.join("keep.txt"), "keep\n").unwrap();
    if rustix::process::geteuid().is_root() {
        own(&victim);
    }
    // Each widening names a folder below the one the session swaps: a link on the way, which
    // the launcher of today's build followed while it bound the name.
    let (cache, slash, fresh) =
        (folder(&fx, "cache/victim"), folder(&fx, "slash/tmp"), folder(&fx, "fresh"));
    // `..` up to the host's `/` from the root's folders (the fixture's depth varies with
    // TMPDIR).
    let up = "../".repeat(fx.root.components().count() - 1);
    let host_file = format!("hands-resolve-{}-{}", std::process::id(), up.len());
    let script = "w() { while [ ! -e $1 ]; do sleep 0.05; done; }\n\
         w go1; mv cache cache.seen && ln -s .. cache && touch swapped1\n\
         w go2; mv slash slash.seen && ln -s UP slash && touch swapped2\n\
         w go3; mv fresh fresh.seen && mkdir fresh && touch swapped3\n\
         sleep 600\n"
        .replace("UP", &up);
    fx.write("swap.sh", &script);
    // The agent's session, started earlier (approved like any command).
    let started = call(&c, "tmux_start", json!({ "command": "bash swap.sh", "name": "swapper" }));
    approve(&fx, &config, "swap.sh").await;
    let started = started.await.unwrap();
    assert_ne!(started.is_error, Some(true), "{}", text_of(&started));

    // Positive control: the widening, approved and not swapped, is what the run gets.
    let ok = call(
        &c,
        "bash",
        json!({ "command": format!("echo ok > {}/ok.txt", cache.display()),
                "needs": { "write": [cache] } }),
    );
    let shown = approve(&fx, &config, "ok.txt").await;
    assert!(shown.contains("inode"), "the person is shown the folder's identity: {shown}");
    let ok = ok.await.unwrap();
    assert_eq!(exit_code(&ok), Some(0), "{}", text_of(&ok));
    assert_eq!(std::fs::read_to_string(cache.join("ok.txt")).unwrap(), "ok\n");

    // Swapped for a link to a folder outside the roots while the question waits.
    let attack = call(
        &c,
        "bash",
        json!({ "command": format!("echo pwned > {}/pwned.txt", cache.display()),
                "needs": { "write": [cache] } }),
    );
    let (id, _) = super::channels::parked_id(&fx, &config, "pwned.txt").await;
    trigger(&fx, "go1", "swapped1").await;
    assert!(approvals(&fx, &config, &["approve", &id]).0);
    let r = attack.await.unwrap();
    let wrote = victim.join("pwned.txt").exists();
    assert!(!wrote, "the run wrote through the swapped link: {}", text_of(&r));
    assert_eq!(r.is_error, Some(true), "{}", text_of(&r));
    // Found by the walk again once the person answered (decision 0093), or by the launcher.
    let said = text_of(&r);
    assert!(
        said.contains("changed since") || said.contains("while the person read the question"),
        "{said}"
    );
    assert!(!fx.root.join("cache.seen/victim/pwned.txt").exists());

    // Swapped for a link to the host's `/`.
    let attack = call(
        &c,
        "bash",
        json!({ "command": format!("echo pwned > {}/{host_file}", slash.display()),
                "needs": { "write": [slash] } }),
    );
    let (id, _) = super::channels::parked_id(&fx, &config, &host_file).await;
    trigger(&fx, "go2", "swapped2").await;
    assert!(approvals(&fx, &config, &["approve", &id]).0);
    let r = attack.await.unwrap();
    let planted = Path::new("/tmp").join(&host_file);
    let bound = planted.exists();
    let _ = std::fs::remove_file(&planted);
    assert!(!bound, "the run got the host's / through the swapped link");
    assert_eq!(r.is_error, Some(true), "{}", text_of(&r));

    // Renamed aside and replaced by another folder: not the folder the person saw.
    let attack = call(
        &c,
        "bash",
        json!({ "command": format!("echo pwned > {}/pwned.txt", fresh.display()),
                "needs": { "write": [fresh] } }),
    );
    let (id, _) = super::channels::parked_id(&fx, &config, "fresh/pwned.txt").await;
    trigger(&fx, "go3", "swapped3").await;
    assert!(approvals(&fx, &config, &["approve", &id]).0);
    let r = attack.await.unwrap();
    let landed = fx.root.join("fresh/pwned.txt").exists();
    let seen = fx.root.join("fresh.seen/pwned.txt").exists();
    assert!(!landed, "the run got another folder than the one the person saw");
    assert!(r.is_error == Some(true) || seen, "{}", text_of(&r));

    assert_eq!(std::fs::read_dir(&victim).unwrap().count(), 1, "the folder outside changed");
    assert_eq!(std::fs::read_to_string(victim.join("keep.txt")).unwrap(), "keep\n");
    fx.assert_canary();
}

/// A configured read-only root nested in a writable one: a command moves its parent aside and
/// puts a new folder where the root was. The next command is refused (the root is not the
/// folder pinned at startup); the read-only root's file stays unchanged. Positive control:
/// before the move the root is read-only and the writable root writable.
#[tokio::test]
async fn a_read_only_root_moved_aside_is_not_bound_by_its_old_name() {
    let fx = Fixture::new();
    let ro = folder(&fx, "lib/ro");
    fx.write("lib/ro/file.txt", "original\n");
    let extra = format!(", {{ path = \"{}\" }}", ro.display());
    let config = config(&fx, &extra, "allow");
    let c = connect(&fx, &config).await;
    let bash = |command: &str| call(&c, "bash", json!({ "command": command }));

    let r = bash("echo pwned > lib/ro/file.txt; echo ok > ok.txt").await.unwrap();
    assert!(text_of(&r).contains("Read-only"), "{}", text_of(&r));
    assert_eq!(std::fs::read_to_string(fx.root.join("ok.txt")).unwrap(), "ok\n");

    let r = bash("mv lib lib.moved && mkdir -p lib/ro && echo moved").await.unwrap();
    assert_eq!(exit_code(&r), Some(0), "{}", text_of(&r));
    let r = bash("echo pwned > lib.moved/ro/file.txt").await.unwrap();
    let file = fx.root.join("lib.moved/ro/file.txt");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "original\n", "{}", text_of(&r));
    assert_eq!(r.is_error, Some(true), "{}", text_of(&r));
    assert!(text_of(&r).contains("changed since"), "{}", text_of(&r));
    fx.assert_canary();
}

/// The file tools' side of the same attack: a command moves a read-only root (nested in a
/// writable one) aside; a `write` under its new name is still refused, since a root is the
/// folder pinned at startup, not its name (decision 0070). Positive control: `write` beside
/// it lands; the moved root's file and the canary outside stay unchanged.
#[tokio::test]
async fn a_read_only_root_moved_aside_stays_read_only_to_the_file_tools() {
    let fx = Fixture::new();
    let ro = folder(&fx, "lib/ro");
    fx.write("lib/ro/file.txt", "original\n");
    let roots =
        format!("[{{ path = \"{{root}}\", write = true }}, {{ path = \"{}\" }}]", ro.display());
    let config = fx.config(&format!(
        "[daemon]\nstate_dir = \"{{state}}\"\n\n[[builtins]]\nid = \"tools-fs\"\n\
         grants = [\"filesystem\"]\nfilesystem = {roots}\n\n[[builtins]]\nid = \"tools-shell\"\n\
         grants = [\"filesystem\", \"spawn\"]\nfilesystem = {roots}\n\
         config = {{ trust = {{ external = \"allow\" }} }}\n"
    ));
    let c = connect(&fx, &config).await;
    let write = |path: &str| call(&c, "write", json!({ "path": path, "content": "pwned\n" }));

    let r = write("lib/ro/file.txt").await.unwrap();
    assert_eq!(r.is_error, Some(true), "control: read-only before the move: {}", text_of(&r));
    let r = call(&c, "bash", json!({ "command": "mv lib lib.moved && echo moved" })).await.unwrap();
    assert_eq!(exit_code(&r), Some(0), "{}", text_of(&r));
    for path in ["lib.moved/ro/file.txt", "lib.moved/ro/new.txt"] {
        let r = write(path).await.unwrap();
        assert_eq!(r.is_error, Some(true), "{path}: {}", text_of(&r));
        assert!(text_of(&r).contains("read-only root"), "{path}: {}", text_of(&r));
    }
    let file = fx.root.join("lib.moved/ro/file.txt");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "original\n");
    assert!(!fx.root.join("lib.moved/ro/new.txt").exists());
    let r = write("lib.moved/beside.txt").await.unwrap();
    assert_ne!(r.is_error, Some(true), "positive control: {}", text_of(&r));
    assert_eq!(std::fs::read_to_string(fx.root.join("lib.moved/beside.txt")).unwrap(), "pwned\n");
    fx.assert_canary();
}

/// A protected path that appeared after a tmux session started: the daemon's walk finds it;
/// the session moves its folder aside before the next command starts (within the 2 s the
/// walk's result is reused). That command's launcher finds the path gone, the daemon walks
/// again, and the command gets the protection at the path's new name — never a sandbox built
/// from the stale walk with the file writable.
#[tokio::test]
async fn a_protected_path_moved_after_the_walk_is_not_left_writable() {
    let fx = Fixture::new();
    let config = config(&fx, "", "allow");
    let c = connect(&fx, &config).await;
    folder(&fx, "sub");
    fx.write("swap.sh", "while [ ! -e go ]; do sleep 0.02; done\nmv sub sub.moved && mkdir sub && touch swapped\nsleep 600\n");
    let r = call(&c, "tmux_start", json!({ "command": "bash swap.sh" })).await.unwrap();
    assert_ne!(r.is_error, Some(true), "{}", text_of(&r));
    // Made after the session started: the session's own sandbox did not pin it. The next walk
    // (past the 2 s its result is reused) finds it: read-only to the command after it.
    fx.write("sub/.vscode/tasks.json", "{}\n");
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let write =
        |at: &str| format!("python3 -c \"open('{at}/.vscode/tasks.json', 'r+').write('pwned')\"");
    let r = call(&c, "bash", json!({ "command": write("sub") })).await.unwrap();
    assert_ne!(exit_code(&r), Some(0), "protected: {}", text_of(&r));
    std::fs::write(fx.root.join("go"), "").unwrap();
    let swapped = fx.root.join("swapped");
    assert!(super::common::wait_until(Duration::from_secs(10), || swapped.exists()).await);
    // Opened for writing without O_CREAT (the in-run walls judge creations only), while the
    // walk's result that saw it under its old name is still reused.
    let r = call(&c, "bash", json!({ "command": write("sub.moved") }));
    let r = r.await.unwrap();
    let tasks = std::fs::read_to_string(fx.root.join("sub.moved/.vscode/tasks.json")).unwrap();
    assert_eq!(tasks, "{}\n", "a protected file was written: {}", text_of(&r));
    fx.assert_canary();
}

/// `needs.write` can never name, hold or lie in what the host trusts: the daemon's config
/// file and its folder, its state dir, its binary's folder. A run that would set `external =
/// "allow"` in the config (outside the roots) is refused before anyone is asked, with the
/// reason, whichever of them it names; the config is unchanged. Positive control: a plain
/// folder beside the config is put to a person.
#[tokio::test]
async fn needs_never_reaches_what_the_host_trusts() {
    let fx = Fixture::new();
    // In a folder of its own: the fixture's folder holds the home (with credentials), which
    // the denied paths refuse first.
    let written = config(&fx, "", "ask");
    let base = written.parent().unwrap().join("conf");
    std::fs::create_dir_all(&base).unwrap();
    let config = base.join("daemon.toml");
    std::fs::rename(&written, &config).unwrap();
    let c = connect(&fx, &config).await;
    let before = std::fs::read_to_string(&config).unwrap();
    let binary = super::common::hands_bin().canonicalize().unwrap();
    let set = format!("sed -i 's/\"ask\"/\"allow\"/' {}", config.display());
    let cases = [
        (json!([config]), "the daemon's configuration"),
        (json!([base]), "the daemon's configuration"),
        (json!([fx.state]), "state dir"),
        (json!([fx.state.join("audit.jsonl")]), "state dir"),
        (json!([binary.parent().unwrap()]), "binary"),
    ];
    for (write, why) in cases {
        let args = json!({ "command": set, "needs": { "write": write } });
        let r = tokio::time::timeout(Duration::from_secs(20), call(&c, "bash", args)).await;
        let r = r.expect("refused at once, without asking anyone").unwrap();
        assert_eq!(r.is_error, Some(true), "{write}: {}", text_of(&r));
        let denied = &r.structured_content.as_ref().unwrap()["denied"][0];
        assert_eq!(denied["layer"], "host-trusted paths", "{write}: {denied}");
        assert!(text_of(&r).contains(why), "{write}: {}", text_of(&r));
        let (_, listing) = approvals(&fx, &config, &["list"]);
        assert!(!listing.lines().any(|l| l.starts_with("waiting ")), "asked: {listing}");
    }
    assert_eq!(std::fs::read_to_string(&config).unwrap(), before);
    // Positive control: a folder beside the config, holding nothing the host trusts.
    let grant = base.join("grant");
    std::fs::create_dir_all(&grant).unwrap();
    let pending =
        call(&c, "bash", json!({ "command": "true # grant", "needs": { "write": [grant] } }));
    let (id, _) = super::channels::parked_id(&fx, &config, "# grant").await;
    assert!(approvals(&fx, &config, &["deny", &id]).0);
    assert_eq!(pending.await.unwrap().is_error, Some(true));
    fx.assert_canary();
}

/// A widening given to `tmux_start` (SPEC §6): the person is told it lasts for the session's
/// life; `tmux_list` and `tmux_read` show it; every `tmux_send` into the session is asked as its
/// own action naming the widening — though `external = "allow"` lets a plain send run — and
/// audited with it; a daemon restarted on the same state dir, adopting the session, asks too.
/// A refused send types nothing.
#[tokio::test]
async fn a_widened_tmux_session_asks_before_every_send() {
    let fx = Fixture::new();
    // Kept past its daemon, so that a restarted daemon adopts it.
    let config = config_with(&fx, "", "allow", ", keep_sessions = true");
    let c = connect(&fx, &config).await;
    let grant = fx.dir.path().canonicalize().unwrap().join("grant");
    std::fs::create_dir_all(&grant).unwrap();
    if rustix::process::geteuid().is_root() {
        own(&grant);
    }
    let g = grant.display().to_string();
    let start = json!({ "command": "bash", "name": "wide", "needs": { "write": [grant] } });
    let started = call(&c, "tmux_start", start);
    let shown = approve(&fx, &config, "wide").await;
    assert!(shown.contains("session's life"), "the person is told how long: {shown}");
    let r = started.await.unwrap();
    assert_ne!(r.is_error, Some(true), "{}", text_of(&r));

    let listed = c.call_tool(CallToolRequestParams::new("tmux_list")).await.unwrap();
    let listed = listed.structured_content.unwrap();
    assert_eq!(listed["sessions"][0]["needs"]["write"][0]["path"], g.as_str(), "{listed}");
    let read = call(&c, "tmux_read", json!({ "session": "wide" })).await.unwrap();
    let read = read.structured_content.unwrap();
    assert_eq!(read["needs"]["write"][0]["path"], g.as_str(), "{read}");

    // A send is asked, naming the widening, though a plain send would run at once.
    let send = |c: &Client, file: &str| {
        let text = format!("echo sent > {g}/{file}");
        call(c, "tmux_send", json!({ "session": "wide", "text": text, "wait": { "exit": true } }))
    };
    let sent = send(&c, "one.txt");
    let shown = approve(&fx, &config, "one.txt").await;
    assert!(shown.contains("needs") && shown.contains(&g), "{shown}");
    let r = sent.await.unwrap();
    assert_ne!(r.is_error, Some(true), "{}", text_of(&r));
    assert_eq!(std::fs::read_to_string(grant.join("one.txt")).unwrap(), "sent\n");
    let record = fx.audit_records().into_iter().rfind(|r| r["tool"] == "tmux_send").unwrap();
    assert_eq!(record["arguments"]["needs"]["write"][0]["path"], g.as_str(), "{record}");

    // After a restart that adopts the session: still asked; a no types nothing.
    let _ = Arc::try_unwrap(c).ok().unwrap().cancel().await;
    let c = connect(&fx, &config).await;
    let sent = send(&c, "two.txt");
    let (id, _) = super::channels::parked_id(&fx, &config, "two.txt").await;
    assert!(approvals(&fx, &config, &["deny", &id]).0);
    let r = sent.await.unwrap();
    assert_eq!(r.is_error, Some(true), "{}", text_of(&r));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!grant.join("two.txt").exists(), "a refused send was typed");
    // Positive control: a plain session's send runs without a question.
    let r = call(&c, "tmux_start", json!({ "command": "bash", "name": "plain" })).await.unwrap();
    assert_ne!(r.is_error, Some(true), "{}", text_of(&r));
    let r = tokio::time::timeout(
        Duration::from_secs(30),
        call(&c, "tmux_send", json!({ "session": "plain", "text": "true" })),
    );
    let r = r.await.expect("a plain send is not asked").unwrap();
    assert_ne!(r.is_error, Some(true), "{}", text_of(&r));
    let _ = call(&c, "tmux_kill", json!({ "session": "wide" })).await;
    let _ = call(&c, "tmux_kill", json!({ "session": "plain" })).await;
    fx.assert_canary();
}
