//! Allowlisted binaries (SPEC §4.4) through the real binary and rmcp's client: `run` and the
//! published `os-*` tools, whole-token prefix entries, names never paths, `deny` over `*`,
//! confirm-listed programs that ask a person on every run even under `trust.external =
//! "allow"`, the output cap, `bash = false`, `hands doctor`'s warnings, and `hands exec` from a
//! terminal. Every refusal is paired with an allowed neighbour and checked against the world:
//! the file is still there, the stand-in's log lacks the call, the canary is unchanged.

use super::common::{Fixture, Person, text_of};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

type Conn = RunningService<RoleClient, Person>;

/// A folder beside the root, on the module's PATH, holding a `kubectl` stand-in that logs its
/// arguments to `root/kubectl.log` and fails for anything but `get` of a known kind.
fn stand_in(fx: &Fixture) -> PathBuf {
    let bin = fx.root.parent().unwrap().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    // Perl, not sh: `sh` is confirm-listed by default, so a run no person confirmed has no
    // `/bin/sh` to interpret a script with (decision 0067).
    let script = format!(
        "#!/usr/bin/perl\nopen(my $l, '>>', '{}/kubectl.log') or die; print $l \"@ARGV\\n\";\n\
         print \"kubectl @ARGV\\n\";\nmy $k = \"$ARGV[0] \" . ($ARGV[1] // '');\n\
         exit 0 if $k eq 'get pods' || $k eq 'get nodes';\n\
         if (($ARGV[0] // '') eq 'get') {{ print STDERR \"error: the server doesn't have a resource \
         type \\\"$ARGV[1]\\\"\\n\"; exit 1 }}\n\
         print STDERR \"error: unknown command \\\"$ARGV[0]\\\"\\n\"; exit 1;\n",
        fx.root.display()
    );
    let k = bin.join("kubectl");
    std::fs::write(&k, script).unwrap();
    std::fs::set_permissions(&k, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

/// tools-shell with `bash = false`, external calls allowed by policy, the stand-in's folder on
/// PATH; `commands` and `extra` go inside its `config` table.
fn config(fx: &Fixture, commands: &str, extra: &str) -> PathBuf {
    config_trust(fx, "allow", commands, extra)
}

/// As [`config`], with `trust.external` set to `external`.
fn config_trust(fx: &Fixture, external: &str, commands: &str, extra: &str) -> PathBuf {
    let bin = stand_in(fx);
    fx.config(&format!(
        "[daemon]\nstate_dir = \"{{state}}\"\n\n[[builtins]]\nid = \"tools-shell\"\n\
         grants = [\"filesystem\", \"spawn\"]\nfilesystem = [{{ path = \"{{root}}\", write = true }}]\n\
         config = {{ path = \"{}:/usr/bin:/bin\", bash = false, trust = {{ external = \"{external}\" }}, \
         commands = {{ {commands} }}{extra} }}\n",
        bin.display()
    ))
}

async fn connect(fx: &Fixture, config: &Path, person: Person) -> Conn {
    let mut cmd = fx.command(&["serve", "--config", config.to_str().unwrap()]);
    cmd.stderr(std::process::Stdio::inherit());
    person.serve(TokioChildProcess::new(cmd).unwrap()).await.unwrap()
}

/// A 2026-07-28 client: the person answers input-required results through the handler.
async fn connect_modern(fx: &Fixture, config: &Path, person: Person) -> Conn {
    use rmcp::ClientServiceExt;
    let mut cmd = fx.command(&["serve", "--config", config.to_str().unwrap()]);
    cmd.stderr(std::process::Stdio::inherit());
    person
        .serve_with_lifecycle(
            TokioChildProcess::new(cmd).unwrap(),
            rmcp::ClientLifecycleMode::Discover {
                preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .unwrap()
}

async fn call(c: &Conn, tool: &str, args: Value) -> CallToolResult {
    let Value::Object(args) = args else { panic!("arguments must be an object") };
    c.call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(args)).await.unwrap()
}

async fn run(c: &Conn, argv: &[&str]) -> CallToolResult {
    call(c, "run", json!({ "argv": argv })).await
}

/// A run that must succeed as a call (whatever the program's exit code).
async fn ran(c: &Conn, argv: &[&str]) -> Value {
    let r = run(c, argv).await;
    assert_ne!(r.is_error, Some(true), "{argv:?} failed: {}", text_of(&r));
    r.structured_content.unwrap()
}

/// A run that must be refused; returns the message.
async fn refused(c: &Conn, argv: &[&str]) -> String {
    let r = run(c, argv).await;
    assert_eq!(r.is_error, Some(true), "{argv:?} should be refused: {}", text_of(&r));
    text_of(&r)
}

fn log(fx: &Fixture) -> String {
    std::fs::read_to_string(fx.root.join("kubectl.log")).unwrap_or_default()
}

#[tokio::test]
async fn prefix_entries_admit_whole_tokens_only() {
    let fx = Fixture::new();
    let config = config(&fx, "allow = [\"kubectl get\"]", "");
    let person = Person::new(None, true);
    let c = connect(&fx, &config, person.clone()).await;
    // bash = false: no bash and no tmux tool that runs text; run and the read-side tmux stay.
    let names: Vec<String> =
        c.peer().list_all_tools().await.unwrap().iter().map(|t| t.name.to_string()).collect();
    assert_eq!(names, ["tmux_read", "tmux_list", "tmux_kill", "run"], "{names:?}");
    let out = ran(&c, &["kubectl", "get", "pods"]).await;
    assert_eq!(out["exit_code"], 0, "{out}");
    assert_eq!(out["stdout"], "kubectl get pods\n");
    for argv in [&["kubectl", "delete", "pods"][..], &["kubectl", "getsecrets"], &["kubectl"]] {
        let msg = refused(&c, argv).await;
        assert!(msg.contains("no entry of commands.allow admits it"), "{msg}");
    }
    assert_eq!(log(&fx), "get pods\n", "only the admitted call reached the program");
    assert_eq!(person.times_asked(), 0);
    // The record holds the binary and the full argv, refusals included.
    let records = fx.audit_records();
    let ok = records.iter().find(|r| r["outcome"] == "ok").unwrap();
    assert_eq!(ok["arguments"]["argv"], json!(["kubectl", "get", "pods"]));
    assert!(ok["arguments"]["binary"].as_str().unwrap().ends_with("/bin/kubectl"), "{ok}");
    assert_eq!(ok["class"], "external");
    let denied: Vec<_> = records.iter().filter(|r| r["decision"] == "deny").collect();
    assert_eq!(denied.len(), 3);
    assert_eq!(denied[0]["arguments"]["argv"], json!(["kubectl", "delete", "pods"]));
    fx.assert_canary();
    let _ = c.cancel().await;
}

#[tokio::test]
async fn a_published_tool_only_appends_to_its_fixed_arguments() {
    let fx = Fixture::new();
    let config = config(
        &fx,
        "allow = [\"kubectl get\"]",
        ", tools = [{ bin = \"kubectl\", args = [\"get\"], description = \"Read Kubernetes \
         objects. Read-only.\" }]",
    );
    let c = connect(&fx, &config, Person::new(None, true)).await;
    let tools = c.peer().list_all_tools().await.unwrap();
    let t = tools.iter().find(|t| t.name == "os-kubectl-get").expect("os-kubectl-get is published");
    assert!(t.description.as_deref().unwrap().starts_with("Read Kubernetes objects."), "{t:?}");
    // Every published description reads as prose: no run of spaces left by a broken line
    // continuation in the source.
    for t in &tools {
        let d = t.description.as_deref().unwrap_or_default();
        assert!(!d.contains("   "), "{}: {d:?}", t.name);
    }
    assert!(tools.iter().any(|t| t.name == "run"), "run is published with an allowlist");
    // Positive control: it reads.
    let r = call(&c, "os-kubectl-get", json!({ "args": ["nodes"] })).await;
    assert_ne!(r.is_error, Some(true), "{}", text_of(&r));
    assert_eq!(r.structured_content.unwrap()["stdout"], "kubectl get nodes\n");
    // Asked for `delete pods`, it runs `kubectl get delete pods`, which fails as it should.
    let r = call(&c, "os-kubectl-get", json!({ "args": ["delete", "pods"] })).await;
    assert_ne!(r.is_error, Some(true), "{}", text_of(&r));
    let out = r.structured_content.unwrap();
    assert_eq!(out["exit_code"], 1, "{out}");
    assert_eq!(out["stdout"], "kubectl get delete pods\n");
    assert!(out["stderr"].as_str().unwrap().contains("resource type \"delete\""), "{out}");
    assert_eq!(log(&fx), "get nodes\nget delete pods\n");
    let records = fx.audit_records();
    assert_eq!(records[1]["tool"], "os-kubectl-get");
    assert_eq!(records[1]["arguments"]["argv"], json!(["kubectl", "get", "delete", "pods"]));
    fx.assert_canary();
    let _ = c.cancel().await;
}

#[tokio::test]
async fn every_spelling_of_rm_asks_a_person_even_when_trust_allows() {
    let fx = Fixture::new();
    let config = config(&fx, "allow = [\"rm\", \"touch\"]", "");
    let person = Person::new(None, true);
    let c = connect(&fx, &config, person.clone()).await;
    // Positive control: touch is not confirm-listed and trust allows it without asking.
    ran(&c, &["touch", "x"]).await;
    assert!(fx.root.join("x").exists());
    assert_eq!(person.times_asked(), 0);
    let spellings: [&[&str]; 4] = [
        &["rm", "-rf", "x"],
        &["rm", "-r", "-f", "x"],
        &["rm", "-fr", "x"],
        &["rm", "--recursive", "--force", "x"],
    ];
    // Declined: refused, the file is still there.
    for (i, argv) in spellings.iter().enumerate() {
        let msg = refused(&c, argv).await;
        assert!(msg.contains("commands.confirm"), "{msg}");
        assert_eq!(person.times_asked(), i + 1, "{argv:?} must ask");
        assert!(person.last_question().contains("confirm-listed"), "{}", person.last_question());
        assert!(fx.root.join("x").exists(), "{argv:?} ran without a yes");
    }
    // Confirmed by the person: gone — each spelling, each asked.
    for (i, argv) in spellings.iter().enumerate() {
        let _ = std::fs::remove_file(fx.root.join("x"));
        std::fs::create_dir_all(fx.root.join("x/sub")).unwrap();
        // Commands of a root daemon run as the root's owner (see `Fixture`).
        if rustix::process::geteuid().is_root() {
            super::common::own(&fx.root.join("x"));
            super::common::own(&fx.root.join("x/sub"));
        }
        person.set(Some("allow_once"));
        let out = ran(&c, argv).await;
        assert_eq!(out["exit_code"], 0, "{out}");
        assert!(!fx.root.join("x").exists(), "{argv:?}");
        assert_eq!(person.times_asked(), 5 + i);
    }
    // "Always" (or "session") does not stand for the next confirm-listed run.
    for answer in ["allow_always", "allow_session"] {
        std::fs::write(fx.root.join("y"), "Y").unwrap();
        person.set(Some(answer));
        ran(&c, &["rm", "y"]).await;
        assert!(!fx.root.join("y").exists());
        std::fs::write(fx.root.join("y"), "Y").unwrap();
        person.set(None);
        let before = person.times_asked();
        refused(&c, &["rm", "y"]).await;
        assert_eq!(person.times_asked(), before + 1, "{answer} must not stand");
        assert!(fx.root.join("y").exists());
    }
    assert!(!fx.state.join("approvals.json").exists(), "no standing permission was recorded");
    let by: Vec<_> =
        fx.audit_records().iter().map(|r| r["decided_by"].as_str().unwrap().to_string()).collect();
    assert!(by.iter().filter(|b| *b == "person-via-client").count() >= 12, "{by:?}");
    fx.assert_canary();
    let _ = c.cancel().await;
}

#[tokio::test]
async fn a_standing_permission_never_covers_a_confirm_listed_program() {
    let fx = Fixture::new();
    let config = config_trust(&fx, "ask", "allow = [\"rm\", \"touch\"]", "");
    let person = Person::new(Some("allow_always"), true);
    let c = connect_modern(&fx, &config, person.clone()).await;
    // `touch` under trust "ask": the person answers "always" for `run`, and it is recorded.
    ran(&c, &["touch", "y"]).await;
    assert_eq!(person.times_asked(), 1);
    assert!(fx.state.join("approvals.json").exists());
    ran(&c, &["touch", "z"]).await;
    assert_eq!(person.times_asked(), 1, "the always permission covers touch");
    // It does not cover rm: asked, declined, the file stays.
    person.set(None);
    let msg = refused(&c, &["rm", "y"]).await;
    assert!(msg.contains("commands.confirm"), "{msg}");
    assert_eq!(person.times_asked(), 2);
    assert!(fx.root.join("y").exists());
    // Allowed by the person through the 2026-07-28 round trip: gone.
    person.set(Some("allow_once"));
    ran(&c, &["rm", "y"]).await;
    assert_eq!(person.times_asked(), 3);
    assert!(!fx.root.join("y").exists());
    let _ = c.cancel().await;
    // trust.external = "deny" still refuses a confirm-listed program, and asks no one.
    let fx = Fixture::new();
    let config = config_trust(&fx, "deny", "allow = [\"rm\"]", "");
    let person = Person::new(Some("allow_once"), true);
    let c = connect(&fx, &config, person.clone()).await;
    std::fs::write(fx.root.join("y"), "Y").unwrap();
    let msg = refused(&c, &["rm", "y"]).await;
    assert!(msg.contains("refused by policy"), "{msg}");
    assert_eq!(person.times_asked(), 0);
    assert!(fx.root.join("y").exists());
    fx.assert_canary();
    let _ = c.cancel().await;
}

#[tokio::test]
async fn binaries_are_names_and_arguments_are_literal() {
    let fx = Fixture::new();
    let config = config(&fx, "allow = [\"sh\", \"ls\", \"echo\"]", "");
    let person = Person::new(Some("allow_once"), true);
    let c = connect(&fx, &config, person.clone()).await;
    std::fs::write(fx.root.join("victim"), "V").unwrap();
    for argv in [&["/bin/sh", "-c", "rm victim"][..], &["./sh"], &["../bin/sh"], &["/bin/ls"]] {
        let msg = refused(&c, argv).await;
        assert!(msg.contains("never by path"), "{msg}");
    }
    assert_eq!(person.times_asked(), 0, "a pathed binary is refused before anyone is asked");
    // One argv element with shell syntax is a name no list admits, not a command line.
    let msg = refused(&c, &["ls; rm victim"]).await;
    assert!(msg.contains("refused"), "{msg}");
    // As an argument it is literal: ls looks for a file of that name; echo prints it.
    let out = ran(&c, &["ls", "victim; rm victim"]).await;
    assert_ne!(out["exit_code"], 0, "{out}");
    assert!(out["stderr"].as_str().unwrap().contains("victim; rm victim"), "{out}");
    let out = ran(&c, &["echo", "$(rm victim)", "|", "rm", "victim", ";", "`rm victim`"]).await;
    assert_eq!(out["stdout"], "$(rm victim) | rm victim ; `rm victim`\n");
    assert!(fx.root.join("victim").exists());
    assert_eq!(person.times_asked(), 0);
    // `sh` by name is admitted but confirm-listed (every shell is): declined, then allowed.
    person.set(None);
    refused(&c, &["sh", "-c", "rm victim"]).await;
    assert_eq!(person.times_asked(), 1);
    assert!(fx.root.join("victim").exists());
    person.set(Some("allow_once"));
    let out = ran(&c, &["sh", "-c", "rm victim && echo removed"]).await;
    assert_eq!(out["stdout"], "removed\n", "{out}");
    assert_eq!(person.times_asked(), 2);
    assert!(!fx.root.join("victim").exists());
    fx.assert_canary();
    let _ = c.cancel().await;
}

#[tokio::test]
async fn deny_beats_star_and_star_admits_anything_on_path() {
    let fx = Fixture::new();
    let config = config(&fx, "allow = [\"*\"], deny = [\"touch\", \"kubectl delete\"]", "");
    let c = connect(&fx, &config, Person::new(None, true)).await;
    let msg = refused(&c, &["touch", "t"]).await;
    assert!(msg.contains("commands.deny lists `touch`"), "{msg}");
    assert!(!fx.root.join("t").exists());
    let msg = refused(&c, &["kubectl", "delete", "pods"]).await;
    assert!(msg.contains("commands.deny"), "{msg}");
    // `*` admits what is on PATH: mkdir, the stand-in's `get`.
    ran(&c, &["mkdir", "d"]).await;
    assert!(fx.root.join("d").is_dir());
    assert_eq!(ran(&c, &["kubectl", "get", "pods"]).await["exit_code"], 0);
    assert_eq!(log(&fx), "get pods\n");
    // ...and nothing that is not on PATH.
    let msg = refused(&c, &["no-such-program-here"]).await;
    assert!(msg.contains("not found in the module's PATH"), "{msg}");
    fx.assert_canary();
    let _ = c.cancel().await;
}

/// Runs `hands doctor --config CONFIG`; returns its stdout.
fn doctor(fx: &Fixture, config: &Path) -> String {
    let out = fx.std_command(&["doctor", "--config", config.to_str().unwrap()]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test]
async fn doctor_warns_about_star_and_about_published_tools_that_cannot_work() {
    let fx = Fixture::new();
    let config = config(&fx, "allow = [\"*\"]", "");
    let out = doctor(&fx, &config);
    assert!(out.contains("commands.allow = [\"*\"]"), "{out}");
    // Positive control: a narrow allowlist with sound tools draws none of these warnings.
    let config =
        config_tools(&fx, "{ bin = \"kubectl\", args = [\"get\"], description = \"Read.\" }");
    let out = doctor(&fx, &config);
    assert!(!out.contains("commands.allow = [\"*\"]") && !out.contains("tools["), "{out}");
    // Not admitted, empty description, one name twice.
    let config = config_tools(
        &fx,
        "{ bin = \"kubectl\", args = [\"delete\"], description = \"\" }, \
         { bin = \"kubectl\", args = [\"get\"], description = \"Read.\" }, \
         { bin = \"kubectl\", args = [\"get\"], description = \"Again.\" }",
    );
    let out = doctor(&fx, &config);
    assert!(
        out.contains("tools[0] publishes `os-kubectl-delete`, but commands.allow does not admit"),
        "{out}"
    );
    assert!(out.contains("tools[0] (`os-kubectl-delete`) has an empty description"), "{out}");
    assert!(out.contains("tools[1] and tools[2] would both publish `os-kubectl-get`"), "{out}");
    // A name MCP would refuse, or a pathed binary, is a config error.
    for bad in ["{ bin = \"kubectl\", args = [\"--context=x\"] }", "{ bin = \"/bin/kubectl\" }"] {
        let config = config_tools(&fx, bad);
        let out =
            fx.std_command(&["check", "--config", config.to_str().unwrap()]).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(!out.status.success() && text.contains("config.tools[0]"), "{text}");
    }
}

fn config_tools(fx: &Fixture, tools: &str) -> PathBuf {
    config(fx, "allow = [\"kubectl get\"]", &format!(", tools = [{tools}]"))
}

#[tokio::test]
async fn output_over_8_kb_is_capped_with_truncated() {
    let fx = Fixture::new();
    let config = config(&fx, "allow = [\"seq\"]", "");
    let c = connect(&fx, &config, Person::new(None, true)).await;
    let small = ran(&c, &["seq", "1", "10"]).await;
    assert_eq!(small["truncated"], false);
    let big = ran(&c, &["seq", "1", "5000"]).await;
    assert_eq!(big["truncated"], true, "{big}");
    let stdout = big["stdout"].as_str().unwrap();
    assert!(stdout.chars().count() <= 8192, "{}", stdout.len());
    assert!(stdout.ends_with("4999\n5000\n"));
    assert!(big["dropped_bytes"].as_u64().unwrap() > 10_000, "{big}");
    let _ = c.cancel().await;
}

/// Runs `hands exec --config CONFIG -- ARGV` with `stdin`; returns (status, stdout, stderr).
fn exec(fx: &Fixture, config: &Path, argv: &[&str], stdin: &str) -> (i32, String, String) {
    let mut args = vec!["exec", "--config", config.to_str().unwrap(), "--"];
    args.extend_from_slice(argv);
    let mut child = fx
        .std_command(&args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn hands_exec_runs_a_persons_command_through_the_daemon() {
    let fx = Fixture::new();
    let config =
        config(&fx, "allow = [\"kubectl get\", \"rm\", \"touch\"], deny = [\"touch\"]", "");
    // Nothing to reach yet: no daemon is serving.
    let (code, _, err) = exec(&fx, &config, &["kubectl", "get", "pods"], "");
    assert_eq!(code, 125, "{err}");
    let c = connect(&fx, &config, Person::new(Some("allow_once"), true)).await;
    // Allowed: the output and exit status exactly.
    let (code, out, err) = exec(&fx, &config, &["kubectl", "get", "pods"], "");
    assert_eq!((code, out.as_str(), err.as_str()), (0, "kubectl get pods\n", ""));
    let (code, out, err) = exec(&fx, &config, &["kubectl", "get", "secretz"], "");
    assert_eq!(code, 1);
    assert_eq!(out, "kubectl get secretz\n");
    assert_eq!(err, "error: the server doesn't have a resource type \"secretz\"\n");
    // Denied, and not admitted: refused, nothing ran.
    let (code, _, err) = exec(&fx, &config, &["touch", "t"], "");
    assert_eq!(code, 126, "{err}");
    assert!(err.contains("commands.deny"), "{err}");
    assert!(!fx.root.join("t").exists());
    let (code, _, err) = exec(&fx, &config, &["kubectl", "delete", "pods"], "");
    assert_eq!(code, 126, "{err}");
    assert_eq!(log(&fx), "get pods\nget secretz\n");
    // Confirm-listed: `n` keeps the file, `y` removes it.
    std::fs::write(fx.root.join("victim"), "V").unwrap();
    let (code, _, err) = exec(&fx, &config, &["rm", "victim"], "n\n");
    assert_eq!(code, 126, "{err}");
    assert!(err.contains("[y/N]") && err.contains("declined"), "{err}");
    assert!(fx.root.join("victim").exists());
    let (code, _, err) = exec(&fx, &config, &["rm", "victim"], "");
    assert_eq!(code, 126, "no answer is a no: {err}");
    assert!(fx.root.join("victim").exists());
    let (code, out, err) = exec(&fx, &config, &["rm", "-v", "victim"], "y\n");
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "removed 'victim'\n");
    assert!(!fx.root.join("victim").exists());
    // Each is in the audit log as the terminal's, with the full argv.
    let records: Vec<Value> =
        fx.audit_records().into_iter().filter(|r| r["tool"] == "exec").collect();
    let summary: Vec<(String, String, Value)> = records
        .iter()
        .map(|r| {
            assert_eq!(r["client"], "terminal");
            assert_eq!(r["class"], "external");
            (
                r["decision"].as_str().unwrap().to_string(),
                r["decided_by"].as_str().unwrap().to_string(),
                r["arguments"]["argv"].clone(),
            )
        })
        .collect();
    let want = [
        ("allow", "policy", json!(["kubectl", "get", "pods"])),
        ("allow", "policy", json!(["kubectl", "get", "secretz"])),
        ("deny", "policy", json!(["touch", "t"])),
        ("deny", "policy", json!(["kubectl", "delete", "pods"])),
        ("deny", "person-via-terminal", json!(["rm", "victim"])),
        ("deny", "person-via-terminal", json!(["rm", "victim"])),
        ("allow", "person-via-terminal", json!(["rm", "-v", "victim"])),
    ];
    let want: Vec<(String, String, Value)> =
        want.into_iter().map(|(a, b, c)| (a.to_string(), b.to_string(), c)).collect();
    assert_eq!(summary, want);
    assert_eq!(records[0]["result"]["exit_code"], 0);
    fx.assert_canary();
    let _ = c.cancel().await;
}

#[tokio::test]
async fn closing_hands_exec_stops_the_command() {
    let fx = Fixture::new();
    let config = config(&fx, "allow = [\"sleep\"]", "");
    let c = connect(&fx, &config, Person::new(None, true)).await;
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    let secs = format!("{}.{}", 7000 + std::process::id() % 1000, nanos.subsec_nanos());
    let mut child = fx
        .std_command(&["exec", "--config", config.to_str().unwrap(), "--", "sleep", &secs])
        .stdin(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // The sandboxed sleep, seen from the host (its argv[0] is the resolved path).
    let found = || {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .any(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| c.ends_with(format!("sleep\0{secs}\0").as_bytes()))
            })
    };
    let mut started = false;
    for _ in 0..200 {
        if found() {
            started = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert!(started, "the sleep never started");
    child.kill().unwrap();
    child.wait().unwrap();
    let mut gone = false;
    for _ in 0..400 {
        if !found() {
            gone = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert!(gone, "the command outlived its terminal");
    let _ = c.cancel().await;
}

#[tokio::test]
async fn the_brake_refuses_hands_exec_and_run_until_released() {
    let fx = Fixture::new();
    let config = config(&fx, "allow = [\"touch\"]", "");
    let c = connect(&fx, &config, Person::new(None, true)).await;
    let stop = |release: bool| {
        let mut args = vec!["stop", "--config", config.to_str().unwrap()];
        if release {
            args.push("--release");
        }
        assert!(fx.std_command(&args).output().unwrap().status.success());
    };
    stop(false);
    let (code, _, err) = exec(&fx, &config, &["touch", "a"], "");
    assert_eq!(code, 126, "{err}");
    assert!(err.contains("hands stop"), "{err}");
    let msg = refused(&c, &["touch", "b"]).await;
    assert!(msg.contains("hands stop"), "{msg}");
    assert!(!fx.root.join("a").exists() && !fx.root.join("b").exists());
    // Released: both run again.
    stop(true);
    assert_eq!(exec(&fx, &config, &["touch", "a"], "").0, 0);
    ran(&c, &["touch", "b"]).await;
    assert!(fx.root.join("a").exists() && fx.root.join("b").exists());
    let stopped = fx.audit_records().iter().filter(|r| r["decided_by"] == "stop").count();
    assert_eq!(stopped, 2);
    let _ = c.cancel().await;
}

/// Issue 22, class 5: `deny` and `confirm` apply to the program that actually runs, not only to
/// `argv[0]`. With `env` and `timeout` allowed and `rm` denied, `env rm x` used to delete the
/// file and `timeout 10 bash -c …` ran a confirm-listed shell with no person asked.
#[tokio::test]
async fn deny_and_confirm_reach_the_program_a_wrapper_runs() {
    let fx = Fixture::new();
    let config = config(
        &fx,
        "allow = [\"env\", \"timeout\", \"nice\", \"bash\", \"ls\"], deny = [\"rm\"]",
        "",
    );
    let person = Person::new(None, true);
    let c = connect(&fx, &config, person.clone()).await;
    let victim = fx.write("x", "keep\n");
    // Positive control: a wrapper around an allowed program runs it.
    let out = ran(&c, &["env", "ls"]).await;
    assert_eq!(out["exit_code"], 0, "{out}");
    assert!(out["stdout"].as_str().unwrap().contains('x'), "{out}");
    for argv in [
        &["env", "rm", "x"][..],
        &["env", "-i", "A=1", "rm", "x"],
        &["timeout", "10", "env", "rm", "x"],
        &["nice", "-n", "5", "rm", "-f", "x"],
    ] {
        let msg = refused(&c, argv).await;
        assert!(msg.contains("commands.deny lists `rm`") && msg.contains("(run by `"), "{msg}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep\n", "{argv:?} ran");
    }
    // A program inside must be admitted too, and a form that hides it is refused.
    let msg = refused(&c, &["env", "cat", "x"]).await;
    assert!(msg.contains("no entry of commands.allow admits it"), "{msg}");
    for argv in [&["env", "-S", "rm x"][..], &["env", "PATH=/tmp", "ls"], &["env", "--frob", "rm"]]
    {
        let msg = refused(&c, argv).await;
        assert!(msg.contains("hands cannot tell which"), "{msg}");
    }
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep\n");
    assert_eq!(person.times_asked(), 0, "refusals by the policy ask no one");
    // A confirm-listed shell inside `timeout` asks a person; declined, it does not run.
    let argv = ["timeout", "10", "bash", "-c", "echo pwned > pwned"];
    let msg = refused(&c, &argv).await;
    assert!(msg.contains("commands.confirm"), "{msg}");
    assert_eq!(person.times_asked(), 1, "the shell inside timeout must ask");
    assert!(person.last_question().contains("bash"), "{}", person.last_question());
    assert!(!fx.root.join("pwned").exists(), "the shell ran without a yes");
    // Confirmed by the person, it runs.
    person.set(Some("allow_once"));
    let out = ran(&c, &argv).await;
    assert_eq!(out["exit_code"], 0, "{out}");
    assert!(fx.root.join("pwned").exists());
    fx.assert_canary();
    let _ = c.cancel().await;
}

/// `hands check` and `hands doctor` say when `allow` admits a program that runs other programs:
/// a wrapper (checked inside) or an opaque one (a shell, make: not checked inside).
#[tokio::test]
async fn check_and_doctor_warn_when_allow_admits_a_program_that_runs_programs() {
    let fx = Fixture::new();
    let config = config(&fx, "allow = [\"env\", \"make\", \"ls\"]", "");
    let out = fx.std_command(&["check", "--config", config.to_str().unwrap()]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("warning: tools-shell: commands.allow admits `env`, which runs"),
        "{text}"
    );
    assert!(text.contains("admits `make`, which runs commands it reads as text"), "{text}");
    assert!(!text.contains("admits `ls`"), "{text}");
    let out = doctor(&fx, &config);
    assert!(out.contains("admits `env`") && out.contains("admits `make`"), "{out}");
    // Positive control: plain programs draw no such warning.
    let config = config_trust(&fx, "allow", "allow = [\"ls\", \"kubectl get\"]", "");
    let out = fx.std_command(&["check", "--config", config.to_str().unwrap()]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && !text.contains("warning:"), "{text}");
}
