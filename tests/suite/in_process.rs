//! The daemon's MCP layer in process (`Client::in_process`, tests/suite/common.rs): the tool
//! catalogue and error texts models read (snapshots), the registry, and the error map's
//! refusals in the audit. The gate, denials, audit and protocol suites run in process too
//! where nothing but the real binary gives what they test (the sandbox, stdio framing,
//! signals, the control socket, the daemon's own environment).

use super::common::{Client, Era, Fixture, Person, text_of};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use serde_json::{Value, json};

/// The daemon of `config` (the fixture's placeholders replaced) in this process, with a
/// 2025-11-25 client that cannot be asked.
async fn connect(fx: &Fixture, config: &str) -> Client<Person> {
    Client::in_process_as(fx, &fx.config(config), Era::Legacy, Person::new(None, false)).await
}

/// tools-fs, tools-git and tools-shell (bash on, an allowlist and one `os-*` tool) on the
/// fixture's root: every tool the daemon can publish.
const EVERY_TOOL: &str = "[daemon]\nstate_dir = \"{state}\"\n\n\
    [[builtins]]\nid = \"tools-fs\"\ngrants = [\"filesystem\"]\n\
    filesystem = [{ path = \"{root}\", write = true }]\n\n\
    [[builtins]]\nid = \"tools-git\"\ngrants = [\"filesystem\", \"spawn\"]\n\
    filesystem = [{ path = \"{root}\", write = true }]\n\
    config = { push = { branches = [\"task/*\"] } }\n\n\
    [[builtins]]\nid = \"tools-shell\"\ngrants = [\"filesystem\", \"spawn\"]\n\
    filesystem = [{ path = \"{root}\", write = true }]\n\
    config = { commands = { allow = [\"kubectl get\"] }, tools = [{ bin = \"kubectl\", \
    args = [\"get\"], description = \"Read Kubernetes objects.\" }] }\n";

/// What models read on every conversation: each tool's name, title, description, schemas and
/// annotations exactly as `tools/list` returns them. A change here is a change to every
/// client's context; review it as such.
#[tokio::test]
async fn the_tool_catalogue_is_what_models_read() {
    let fx = Fixture::new();
    let c = connect(&fx, EVERY_TOOL).await;
    let tools = c.service.peer().list_all_tools().await.unwrap();
    let listed = serde_json::to_value(&tools).unwrap();
    insta::assert_json_snapshot!("tool_catalogue", listed);
    c.stop().await;
}

/// tools-fs (a writable root and a read-only one) and tools-git, whose read class is denied
/// by the module's trust and whose push is off.
const FS_GIT: &str = "[daemon]\nstate_dir = \"{state}\"\n\n[trust]\napproval_timeout_secs = 1\n\n\
    [[builtins]]\nid = \"tools-fs\"\ngrants = [\"filesystem\"]\n\
    filesystem = [{ path = \"{root}\", write = true }, { path = \"{root}/ro\" }]\n\n\
    [[builtins]]\nid = \"tools-git\"\ngrants = [\"filesystem\", \"spawn\"]\n\
    filesystem = [{ path = \"{root}\", write = true }]\n\
    config = { trust = { read = \"deny\", write = \"ask\" } }\n";

/// One call's result as a model reads it: the error flag, the text, the structured content.
fn as_read(r: &CallToolResult) -> Value {
    json!({
        "is_error": r.is_error,
        "text": text_of(r),
        "structured": r.structured_content,
    })
}

/// The texts models read when a call fails or is refused, one per kind of failure, with the
/// fixture's temp path and the random approval ids made stable.
#[tokio::test]
async fn the_error_texts_are_what_models_read() {
    let fx = Fixture::new();
    std::fs::create_dir_all(fx.root.join("ro")).unwrap();
    fx.write("ro/kept.txt", "kept\n");
    fx.write("a.txt", "one\ntwo\n");
    fx.write(".env", "TOKEN=x\n");
    let c = connect(&fx, FS_GIT).await;
    let outside = fx.outside.join("canary.txt");
    let calls = [
        ("read", json!({ "path": 5 })),
        ("read", json!({ "path": "missing.txt" })),
        ("read", json!({ "path": outside })),
        ("read", json!({ "path": "../outside/canary.txt" })),
        ("read", json!({ "path": ".env" })),
        ("write", json!({ "path": "ro/kept.txt", "content": "no" })),
        ("edit", json!({ "path": "a.txt", "old_string": "three", "new_string": "3" })),
        ("edit", json!({ "path": "a.txt", "old_string": "o", "new_string": "0" })),
        ("git_status", json!({})),
        ("git_commit", json!({ "message": "m" })),
    ];
    let mut seen = Vec::new();
    for (tool, args) in calls {
        let r = c.call(tool, args.clone()).await;
        seen.push(json!({ "call": [tool, args], "result": as_read(&r) }));
    }
    let unknown = c
        .service
        .peer()
        .call_tool(CallToolRequestParams::new("no_such_tool".to_string()))
        .await
        .unwrap_err();
    seen.push(json!({ "call": ["no_such_tool", {}], "protocol_error": unknown.to_string() }));
    let base = fx.root.parent().unwrap().display().to_string();
    insta::with_settings!({ filters => vec![
        (regex_escape(&base).as_str(), "[FIXTURE]"),
        (r"a-[0-9a-f]{8}", "a-[ID]"),
    ]}, {
        insta::assert_json_snapshot!("error_texts", seen);
    });
    fx.assert_canary();
    c.stop().await;
}

/// `s` as a regex that matches it literally.
fn regex_escape(s: &str) -> String {
    s.chars()
        .map(
            |c| {
                if c.is_ascii_alphanumeric() || c == '/' { c.to_string() } else { format!("\\{c}") }
            },
        )
        .collect()
}

/// The audit asks each module error whether it is a refusal (`PathError::is_refusal`,
/// `GitError::is_refusal`): a write outside the roots, into a read-only root or a secret file is
/// recorded as `refused: …`; a file that does not exist, a failed edit and a repository that is
/// not there are plain `error: …` outcomes. (Before the error map every module failure was an
/// `error`, refusals included.)
#[tokio::test]
async fn the_audit_tells_a_refusal_from_a_plain_failure() {
    let fx = Fixture::new();
    std::fs::create_dir_all(fx.root.join("ro")).unwrap();
    fx.write("ro/kept.txt", "kept\n");
    fx.write("a.txt", "one\n");
    let config = FS_GIT.replace("read = \"deny\", write = \"ask\"", "write = \"allow\"");
    let c = connect(&fx, &config).await;
    let outside = fx.outside.join("canary.txt");
    let calls = [
        ("write", json!({ "path": outside, "content": "no" }), "refused: "),
        ("write", json!({ "path": "ro/kept.txt", "content": "no" }), "refused: "),
        ("edit", json!({ "path": ".env", "old_string": "a", "new_string": "b" }), "refused: "),
        ("read", json!({ "path": "missing.txt" }), "error: "),
        ("edit", json!({ "path": "missing.txt", "old_string": "a", "new_string": "b" }), "error: "),
        ("edit", json!({ "path": "a.txt", "old_string": "zzz", "new_string": "b" }), "error: "),
        ("git_commit", json!({ "repo": outside.parent().unwrap(), "message": "m" }), "refused: "),
        ("git_commit", json!({ "message": "m" }), "error: "),
    ];
    for (i, (tool, args, outcome)) in calls.iter().enumerate() {
        let r = c.call(tool, args.clone()).await;
        assert_eq!(r.is_error, Some(true), "{tool} {args}: {}", text_of(&r));
        let records = fx.audit_records();
        let last = records.last().unwrap();
        assert_eq!(records.len(), i + 1, "every failure is recorded: {records:?}");
        assert_eq!(last["decision"], "allow", "the gate allowed {tool} {args}");
        let got = last["outcome"].as_str().unwrap();
        assert!(got.starts_with(outcome), "{tool} {args}: {got}");
    }
    // Positive control: the allowed neighbour succeeds and is recorded as `ok`.
    let r = c.call("write", json!({ "path": "b.txt", "content": "fine" })).await;
    assert_ne!(r.is_error, Some(true), "{}", text_of(&r));
    assert_eq!(fx.audit_records().last().unwrap()["outcome"], "ok");
    assert_eq!(std::fs::read_to_string(fx.root.join("ro/kept.txt")).unwrap(), "kept\n");
    fx.assert_canary();
    c.stop().await;
}

/// The registry: every tool is listed once under a unique name, and a call of each reaches
/// that tool's own handler — arguments of the wrong type come back as that tool's "invalid
/// arguments" error (nothing runs), never as an unknown tool or another tool's answer.
#[tokio::test]
async fn every_listed_tool_is_unique_and_reaches_its_own_handler() {
    let fx = Fixture::new();
    // Nothing waits for a person: every class is allowed, so each call reaches its handler.
    let config = EVERY_TOOL.replace(
        "state_dir = \"{state}\"\n",
        "state_dir = \"{state}\"\n\n[trust]\nexternal = \"allow\"\n",
    );
    let c = connect(&fx, &config).await;
    let tools = c.service.peer().list_all_tools().await.unwrap();
    let names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
    let mut unique = names.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), names.len(), "a name is listed twice: {names:?}");
    assert_eq!(names.len(), 24, "{names:?}");
    // Every field any tool takes, each of a type no tool accepts there.
    let wrong = json!({
        "path": 5, "command": 5, "session": 5, "argv": 5, "args": 5, "message": 5,
        "name": 5, "branch": 5, "repo": 5, "pattern": 5, "content": 5, "old_string": 5,
        "text": 5, "lines": "many", "limit": "many",
    });
    for name in &names {
        let r = c.call(name, wrong.clone()).await;
        let text = text_of(&r);
        assert_eq!(r.is_error, Some(true), "{name}: {text}");
        assert!(
            text.starts_with(&format!("invalid arguments for `{name}`:")),
            "{name} did not reach its own handler: {text}"
        );
    }
    fx.assert_canary();
    c.stop().await;
}
