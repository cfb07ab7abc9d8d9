//! `hands check`: one test per configuration error class, and the example config loading.
//! All on the binary: they read `hands check`'s output and exit code, or what `serve` takes
//! from its own folder (the embedded default) and stdin.

use super::common::Fixture;

/// Runs `hands check --config CONFIG`; returns (exit code, stdout + stderr).
fn check(fx: &Fixture, config: &std::path::Path) -> (i32, String) {
    let out = fx.std_command(&["check", "--config", config.to_str().unwrap()]).output().unwrap();
    let text =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code().unwrap_or(-1), text)
}

fn fs_block(extra: &str) -> String {
    format!(
        "[[builtins]]\nid = \"tools-fs\"\ngrants = [\"filesystem\"]\nfilesystem = [{{ path = \"{{root}}\", write = true }}]\n{extra}"
    )
}

#[test]
fn example_config_loads_and_lists_every_module() {
    let fx = Fixture::new();
    std::fs::create_dir_all(fx.home.join("project")).unwrap();
    std::fs::create_dir_all(fx.home.join("docs")).unwrap();
    let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("daemon.toml.example");
    let (code, text) = check(&fx, &example);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("module tools-fs"), "{text}");
    assert!(
        text.contains(&format!("root: {} (read-write)", fx.home.join("project").display())),
        "{text}"
    );
    assert!(
        text.contains(&format!("root: {} (read-only)", fx.home.join("docs").display())),
        "{text}"
    );
    assert!(text.contains("tools: read, write, edit, list_dir, glob, grep"), "{text}");
    assert!(text.contains("module tools-git"), "{text}");
    // The runner's settings, and where its token comes from (never the token).
    assert!(
        text.contains("runner: wss://relay.example.com/runner as `build-box-1`, token from ")
            && text.contains("approvals = \"local\""),
        "{text}"
    );
}

#[test]
fn valid_config_prints_the_resolved_policy() {
    let fx = Fixture::new();
    let cfg = fx.config(&format!("[trust]\nwrite = \"deny\"\n\n{}", fs_block("")));
    let (code, text) = check(&fx, &cfg);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("write = deny"), "{text}");
    assert!(text.contains(&format!("root: {} (read-write)", fx.root.display())), "{text}");
}

#[test]
fn unknown_key_names_file_line_builtin_and_key() {
    let fx = Fixture::new();
    let cfg = fx.config(&fs_block("colour = \"blue\"\n"));
    let (code, text) = check(&fx, &cfg);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("daemon.toml:5"), "{text}");
    assert!(text.contains("[[builtins]] id \"tools-fs\""), "{text}");
    assert!(text.contains("colour"), "{text}");
    assert!(text.contains("hint:"), "{text}");
}

#[test]
fn unknown_top_level_key_is_an_error() {
    let fx = Fixture::new();
    let cfg = fx.config(&format!("[trust]\nreed = \"allow\"\n\n{}", fs_block("")));
    let (code, text) = check(&fx, &cfg);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("daemon.toml:2") && text.contains("reed"), "{text}");
}

#[test]
fn unknown_key_in_module_config_names_the_key() {
    let fx = Fixture::new();
    let cfg = fx.config(&fs_block("config = { trsut = {} }\n"));
    let (code, text) = check(&fx, &cfg);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("tools-fs") && text.contains("trsut"), "{text}");
}

#[test]
fn unknown_module_id_is_refused_with_a_hint() {
    let fx = Fixture::new();
    let cfg = fx.config(
        "[[builtins]]\nid = \"tools-web\"\ngrants = [\"filesystem\"]\nfilesystem = [{ path = \"{root}\" }]\n",
    );
    let (code, text) = check(&fx, &cfg);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("daemon.toml:2") && text.contains("tools-web"), "{text}");
    assert!(text.contains("hint: the modules are tools-fs, tools-shell and tools-git"), "{text}");
}

#[test]
fn duplicate_module_id_is_refused() {
    let fx = Fixture::new();
    let cfg = fx.config(&format!("{}\n{}", fs_block(""), fs_block("")));
    let (code, text) = check(&fx, &cfg);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("declared twice") && text.contains("daemon.toml:7"), "{text}");
}

#[test]
fn missing_grant_names_the_grant() {
    let fx = Fixture::new();
    let cfg = fx.config(
        "[[builtins]]\nid = \"tools-shell\"\ngrants = [\"filesystem\"]\nfilesystem = [{ path = \"{root}\" }]\n",
    );
    let (code, text) = check(&fx, &cfg);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("tools-shell needs the `spawn` grant"), "{text}");
    assert!(text.contains("hint: add \"spawn\" to grants"), "{text}");
}

#[test]
fn shell_numbers_out_of_range_are_refused_not_clamped() {
    let fx = Fixture::new();
    let shell = |config: &str| {
        fx.config(&format!(
            "[[builtins]]\nid = \"tools-shell\"\ngrants = [\"filesystem\", \"spawn\"]\n\
             filesystem = [{{ path = \"{{root}}\" }}]\nconfig = {{ {config} }}\n"
        ))
    };
    let (code, text) =
        check(&fx, &shell("max_concurrent = 0, output_chars = 50, run_output_chars = 2000000"));
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("daemon.toml:5: [[builtins]] id \"tools-shell\""), "{text}");
    assert!(text.contains("config.max_concurrent: must be between 1 and 1024; got 0"), "{text}");
    assert!(
        text.contains("config.output_chars: must be between 100 and 1000000; got 50"),
        "{text}"
    );
    assert!(
        text.contains("config.run_output_chars: must be between 1 and 1000000; got 2000000"),
        "{text}"
    );
    // The positive control: the bounds themselves load, and check shows them as written.
    let (code, text) =
        check(&fx, &shell("max_concurrent = 1024, output_chars = 100, run_output_chars = 1"));
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("output_chars = 100, max_concurrent = 1024"), "{text}");
}

/// `limits` was taken as written: `walk_entries = 0` was raised to 1 at use, `memory_mb = 0` to
/// a 1 MiB `/tmp`, and a process count past any kernel's `pid_max` passed. Each is now a config
/// error naming its key and range.
#[test]
fn shell_limits_out_of_range_are_refused_with_their_range() {
    let fx = Fixture::new();
    let shell = |config: &str| {
        fx.config(&format!(
            "[[builtins]]\nid = \"tools-shell\"\ngrants = [\"filesystem\", \"spawn\"]\n\
             filesystem = [{{ path = \"{{root}}\" }}]\nconfig = {{ {config} }}\n"
        ))
    };
    let (code, text) = check(
        &fx,
        &shell("limits = { processes = 9223372036854775807, memory_mb = 0, walk_entries = 0 }"),
    );
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("daemon.toml:5: [[builtins]] id \"tools-shell\""), "{text}");
    assert!(
        text.contains(
            "config.limits.processes: must be between 0 and 4194304; got 9223372036854775807"
        ),
        "{text}"
    );
    assert!(
        text.contains("config.limits.memory_mb: must be between 1 and 16777216; got 0"),
        "{text}"
    );
    assert!(
        text.contains("config.limits.walk_entries: must be between 1 and 100000000; got 0"),
        "{text}"
    );
    assert!(text.contains("hint: the default is 512 processes and threads"), "{text}");
    // The positive control: the bounds load.
    let (code, text) =
        check(&fx, &shell("limits = { processes = 4194304, memory_mb = 1, walk_entries = 1 }"));
    assert_eq!(code, 0, "{text}");
}

#[test]
fn missing_root_is_refused_with_its_line() {
    let fx = Fixture::new();
    let cfg = fx.config(
        "[[builtins]]\nid = \"tools-fs\"\ngrants = [\"filesystem\"]\nfilesystem = [\n  { path = \"{root}\" },\n  { path = \"{outside}/nope\" },\n]\n",
    );
    let (code, text) = check(&fx, &cfg);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("daemon.toml:6") && text.contains("filesystem[1].path"), "{text}");
    assert!(text.contains("nope"), "{text}");
}

#[test]
fn root_that_is_a_file_is_refused_and_write_is_named() {
    let fx = Fixture::new();
    let cfg = fx.config(
        "[[builtins]]\nid = \"tools-fs\"\ngrants = [\"filesystem\"]\nfilesystem = [{ path = \"{outside}/canary.txt\", write = true }]\n",
    );
    let (code, text) = check(&fx, &cfg);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("is not a directory (write = true needs a folder)"), "{text}");
}

#[test]
fn relative_root_is_refused() {
    let fx = Fixture::new();
    let cfg = fx.config(
        "[[builtins]]\nid = \"tools-fs\"\ngrants = [\"filesystem\"]\nfilesystem = [{ path = \"project\" }]\n",
    );
    let (code, text) = check(&fx, &cfg);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("not an absolute path"), "{text}");
}

#[test]
fn bad_trust_value_is_refused_with_a_hint() {
    let fx = Fixture::new();
    let cfg = fx.config(&format!("[trust]\nexternal = \"maybe\"\n\n{}", fs_block("")));
    let (code, text) = check(&fx, &cfg);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("daemon.toml:2") && text.contains("maybe"), "{text}");
}

/// A module's `config.trust` overrides how classes are decided, not how long a person is
/// waited for (one daemon-wide queue): a module-level `approval_timeout_secs` is refused, not
/// silently ignored. Positive control: the module's class override alone is accepted.
#[test]
fn a_module_level_approval_timeout_is_refused() {
    let fx = Fixture::new();
    let module = |trust: &str| {
        format!(
            "[[builtins]]\nid = \"tools-fs\"\ngrants = [\"filesystem\"]\n\
             filesystem = [{{ path = \"{{root}}\" }}]\nconfig = {{ trust = {{ {trust} }} }}\n"
        )
    };
    let cfg = fx.config(&module("write = \"ask\", approval_timeout_secs = 5"));
    let (code, text) = check(&fx, &cfg);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("config.trust.approval_timeout_secs"), "{text}");
    assert!(text.contains("top-level [trust]"), "{text}");
    let cfg = fx.config(&module("write = \"ask\""));
    let (code, text) = check(&fx, &cfg);
    assert_eq!(code, 0, "{text}");
}

#[test]
fn several_problems_are_all_reported() {
    let fx = Fixture::new();
    let cfg = fx.config(
        "[[builtins]]\nid = \"tools-git\"\ngrants = []\nfilesystem = [{ path = \"{outside}/missing\" }]\nconfig = { author_name = \"A\" }\n",
    );
    let (code, text) = check(&fx, &cfg);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("`filesystem` grant"), "{text}");
    assert!(text.contains("`spawn` grant"), "{text}");
    assert!(text.contains("missing"), "{text}");
    assert!(text.contains("author_name and author_email go together"), "{text}");
}

#[test]
fn no_config_uses_the_embedded_default_with_cwd_as_root() {
    let fx = Fixture::new();
    let out = fx.std_command(&["check"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("config: embedded default"), "{text}");
    assert!(text.contains(&format!("root: {} (read-write)", fx.root.display())), "{text}");
    assert!(text.contains("external = ask"), "{text}");
}

/// The names directly in `dir`, sorted.
fn names(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

/// `check` and `doctor` make nothing in the roots, and no longer list placeholders for `serve`
/// to make: it makes none either (`suite::host_trust::serve_and_commands_leave_the_project_as_found`).
#[test]
fn check_and_doctor_make_nothing_in_the_roots() {
    let fx = Fixture::new();
    std::fs::create_dir(fx.root.join(".git")).unwrap();
    let cfg = fx.config(
        "[daemon]\nstate_dir = \"{state}\"\n[sandbox]\ndeny = [\"{root}/private/\"]\n\n\
         [[builtins]]\nid = \"tools-shell\"\ngrants = [\"filesystem\", \"spawn\"]\n\
         filesystem = [{ path = \"{root}\", write = true }]\n",
    );
    let before = names(&fx.root);
    for sub in ["check", "doctor"] {
        let out = fx.std_command(&[sub, "--config", cfg.to_str().unwrap()]).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(names(&fx.root), before, "`hands {sub}` made something in the root: {text}");
        assert!(!fx.root.join(".git/hooks").exists(), "`hands {sub}` made .git/hooks");
        assert!(!text.contains("placeholders"), "{text}");
    }
}

/// `hands serve --read-only` (SPEC §1): the embedded default's folder, read-only — the file and
/// git read tools only; nothing can write the folder, not even through a tool it lists.
#[tokio::test]
async fn serve_read_only_publishes_the_read_tools_and_writes_nothing() {
    use super::common::{Era, handshake};
    let fx = Fixture::new();
    fx.write("kept.txt", "kept\n");
    let mut cmd = fx.command_of(&super::common::hands_bin(), &["serve", "--read-only"]);
    cmd.stderr(std::process::Stdio::inherit());
    let transport = rmcp::transport::TokioChildProcess::new(cmd).unwrap();
    let service = handshake((), transport, Era::Legacy).await;
    let tools = service.peer().list_all_tools().await.unwrap();
    let mut names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
    names.sort();
    let want = [
        "git_branch_commits",
        "git_branches",
        "git_diff",
        "git_log",
        "git_status",
        "glob",
        "grep",
        "list_dir",
        "read",
    ];
    assert_eq!(names, want, "only the read tools are published");
    for t in &tools {
        let hint = t.annotations.as_ref().and_then(|a| a.read_only_hint);
        assert_eq!(hint, Some(true), "{} is not read-only", t.name);
    }
    // Positive control: reading works.
    let read = rmcp::model::CallToolRequestParams::new("read")
        .with_arguments(serde_json::json!({ "path": "kept.txt" }).as_object().unwrap().clone());
    let r = service.peer().call_tool(read).await.unwrap();
    assert_ne!(r.is_error, Some(true), "{}", super::common::text_of(&r));
    // A write tool is not there to call.
    let write = rmcp::model::CallToolRequestParams::new("write").with_arguments(
        serde_json::json!({ "path": "new.txt", "content": "x" }).as_object().unwrap().clone(),
    );
    assert!(service.peer().call_tool(write).await.is_err(), "write answered under --read-only");
    let _ = service.cancel().await;
    assert!(!fx.root.join("new.txt").exists());
    assert_eq!(std::fs::read_to_string(fx.root.join("kept.txt")).unwrap(), "kept\n");
    fx.assert_canary();
}

/// `hands serve` whose stdin ends before any message (`< /dev/null`, a client that connected
/// and left) exits 0 and prints nothing: nothing was asked, so nothing failed.
#[test]
fn serve_with_stdin_at_eof_exits_quietly() {
    let fx = Fixture::new();
    let cfg = fx.config(
        "[daemon]\nstate_dir = \"{state}\"\n\n[[builtins]]\nid = \"tools-fs\"\n\
         grants = [\"filesystem\"]\nfilesystem = [{ path = \"{root}\", write = true }]\n",
    );
    let out = fx
        .std_command(&["serve", "--config", cfg.to_str().unwrap()])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit {:?}: {err}", out.status);
    assert!(out.stdout.is_empty(), "stdout: {}", String::from_utf8_lossy(&out.stdout));
    // The banner is the one line a start prints; no error follows it.
    assert!(!err.contains("error") && !err.contains("closed"), "{err}");
    assert!(!err.contains('\u{1b}'), "escape codes on a stderr that is not a terminal: {err:?}");
}
