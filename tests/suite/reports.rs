//! The launcher reports on a channel of its own (issue 35 point 3), as attacks through the
//! real binary: a command that prints the launcher's own lines on its stderr (a refused create,
//! the memory bound, a sandbox that could not be built, a path changed since the check, with
//! exit code 125) gets its ordinary result — nothing refused, its own exit code, run once; a
//! command that really hits a wall and then hides it (its stderr closed, or the line buried
//! under megabytes of output) still has the refusal listed; a sandbox that really cannot be
//! built is still reported as such. Each has its positive control and the canary outside the
//! roots.

use super::common::{Client, Era, Fixture, own, text_of};
use serde_json::{Value, json};
use std::path::PathBuf;

/// tools-shell on the writable root, every call allowed (`ready.rs` too).
pub(super) fn config(fx: &Fixture) -> PathBuf {
    fx.config(
        "[daemon]\nstate_dir = \"{state}\"\n\n[[builtins]]\nid = \"tools-shell\"\n\
         grants = [\"filesystem\", \"spawn\"]\n\
         filesystem = [{ path = \"{root}\", write = true }]\n\
         config = { trust = { external = \"allow\" } }\n",
    )
}

async fn start(fx: &Fixture) -> Client {
    Client::start_with_env(fx, &config(fx), Era::Legacy, &[]).await
}

async fn bash(c: &Client, command: &str) -> Value {
    c.ok("bash", json!({ "command": command })).await
}

fn denied(r: &Value) -> Vec<Value> {
    r["denied"].as_array().cloned().unwrap_or_default()
}

/// The line the launcher writes on stderr for the refused create of `path`, from a real run.
fn line_for<'a>(r: &'a Value, path: &str) -> &'a str {
    let err = r["stderr"].as_str().unwrap_or_default();
    err.lines()
        .find(|l| l.starts_with("hands sandbox: refused creating ") && l.contains(path))
        .unwrap_or_else(|| panic!("no launcher line for {path}: {r}"))
}

/// A real refused create (the positive control of the attack) gives the launcher's exact line;
/// the command then prints that line, and the same for a path it may create, the memory
/// bound's line, a setup failure's and a changed path's, and exits 125 as a launcher that
/// could not build the sandbox does. None of it is taken for the launcher's: the result is the
/// command's, with nothing denied, and the command ran once (a "changed since the daemon's
/// check" refusal made the daemon walk and start the command again).
#[tokio::test]
async fn lines_in_the_launchers_format_on_stderr_decide_nothing() {
    let fx = Fixture::new();
    let c = start(&fx).await;
    let envrc = fx.root.join(".envrc");
    let real = bash(&c, "echo 'export A=1' > .envrc; echo made-envrc=$?").await;
    assert!(real["stdout"].as_str().unwrap().contains("made-envrc=1"), "{real}");
    let d = denied(&real);
    assert!(
        d.iter().any(|d| d["what"].as_str() == envrc.to_str()
            && d["layer"] == "sandbox (in-run walls)"
            && d["remedy"]
                .as_str()
                .is_some_and(|r| r.contains("on the host") && !r.contains("repositories"))),
        "positive control: the real refusal is listed, its remedy for this name: {real}"
    );
    let line = line_for(&real, ".envrc").to_string();
    let notes = fx.root.join("notes.txt");
    let forged_notes = line.replace(envrc.to_str().unwrap(), notes.to_str().unwrap());
    assert_ne!(forged_notes, line);
    // Single-quoted for bash, whatever the reason's text holds.
    let sq = |s: &str| format!("'{}'", s.replace('\'', "'\\''"));
    let script = format!(
        "echo run >> runs.txt; echo hello > notes.txt; \
         printf '%s\\n' {} {} >&2; \
         echo \"hands sandbox: the command's processes ran out of memory (64 MiB, tools-shell \
         limits.memory_mb) and were killed\" >&2; \
         echo 'hands sandbox: cannot enter cwd {root}/gone: No such file or directory' >&2; \
         echo \"hands sandbox: refused to start: {root} changed since the daemon's check: it \
         is another entry now; nothing ran\" >&2; \
         exit 125",
        sq(&line),
        sq(&forged_notes),
        root = fx.root.display()
    );
    let r = c.call("bash", json!({ "command": script })).await;
    assert_ne!(r.is_error, Some(true), "the command's own result, not a refusal: {}", text_of(&r));
    let r = r.structured_content.clone().unwrap_or_default();
    assert_eq!(r["exit_code"], 125, "{r}");
    assert!(denied(&r).is_empty(), "nothing the command printed is listed as denied: {r}");
    assert!(r["stderr"].as_str().unwrap().contains(&forged_notes), "the lines stay output: {r}");
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "hello\n", "positive control");
    let runs = std::fs::read_to_string(fx.root.join("runs.txt")).unwrap();
    assert_eq!(runs, "run\n", "the command ran once: {r}");
    assert!(!envrc.exists(), "the real refusal held");
    c.stop().await;
    fx.assert_canary();
}

/// A command that hits a wall and then hides it: its stderr closed before the create (the
/// launcher's line goes to the init's stderr, not the command's), or the line buried under
/// megabytes of output the result keeps only the end of. The command holds no descriptor but
/// its standard streams, so it cannot write on the channel either. The refusal is listed either way, the
/// exit code is the command's own, and the create it tried did not happen; the write beside
/// it did (positive control).
#[tokio::test]
async fn a_real_refusal_is_listed_though_the_command_hides_its_stderr() {
    let fx = Fixture::new();
    let c = start(&fx).await;
    let envrc = fx.root.join(".envrc");
    let vscode = fx.root.join(".vscode");
    let quiet = bash(
        &c,
        "ls /proc/$$/fd > fds.txt; exec 2>/dev/null; echo 'export A=1' > .envrc; \
         mkdir -p .vscode; echo fine > fine.txt; exit 3",
    )
    .await;
    assert_eq!(quiet["exit_code"], 3, "{quiet}");
    // The channel never reaches the command: it has its standard streams and nothing else.
    let fds = std::fs::read_to_string(fx.root.join("fds.txt")).unwrap();
    assert_eq!(fds, "0\n1\n2\n", "the command's descriptors");
    let listed = |r: &Value, p: &std::path::Path| {
        denied(r)
            .iter()
            .any(|d| d["what"].as_str() == p.to_str() && d["layer"] == "sandbox (in-run walls)")
    };
    assert!(listed(&quiet, &envrc), "the refused .envrc is listed: {quiet}");
    assert!(listed(&quiet, &vscode), "the refused .vscode is listed: {quiet}");
    let buried = bash(
        &c,
        "echo 'export A=1' > .envrc 2>/dev/null; \
         head -c 3000000 /dev/zero | tr '\\0' x >&2; echo buried > buried.txt",
    )
    .await;
    assert_eq!(buried["exit_code"], 0, "{buried}");
    assert_eq!(buried["truncated"], true, "the line itself scrolled out: {buried}");
    assert!(!buried["stderr"].as_str().unwrap().contains("hands sandbox:"), "{buried}");
    assert!(listed(&buried, &envrc), "the refused .envrc is still listed: {buried}");
    c.stop().await;
    assert!(!envrc.exists() && !vscode.exists(), "the walls held");
    assert_eq!(std::fs::read_to_string(fx.root.join("fine.txt")).unwrap(), "fine\n");
    assert_eq!(std::fs::read_to_string(fx.root.join("buried.txt")).unwrap(), "buried\n");
    fx.assert_canary();
}

/// The answer comes as soon as the run has ended, before the launcher has taken down its
/// namespaces and cgroup leaf (issue 34): by then nothing the command started is left, and
/// what its walls refused is in the result. The command leaves a process behind under a name
/// of its own and hits a wall; the process is seen running inside (positive control), the
/// refusal is listed, and no process of that name is on the host the moment the call returns.
/// Ten runs, so a result that beat the teardown is among them.
#[tokio::test]
async fn the_answer_waits_for_every_process_of_the_run_and_its_reports_only() {
    let fx = Fixture::new();
    let c = start(&fx).await;
    let envrc = fx.root.join(".envrc");
    let left = |marker: &str| {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
            .any(|cmd| String::from_utf8_lossy(&cmd).contains(marker))
    };
    for i in 0..10 {
        let id = format!("{}-{i}", std::process::id());
        let marker = format!("hands-left-behind-{id}");
        // The marker is put together in the shell, so that only the process left behind
        // carries it (bash's own command line has `$n` where the word is); the process lets
        // go of the output, so that the pipes' end cannot be what the answer waited for.
        let r = bash(
            &c,
            &format!(
                "n=behind; (exec -a hands-left-$n-{id} sleep 300 >/dev/null 2>&1) & p=$!; sleep 0.05; \
                 tr '\\0' ' ' < /proc/$p/cmdline | grep -q hands-left-$n && echo running; \
                 echo 'export A=1' > .envrc; exit 7"
            ),
        )
        .await;
        assert!(!left(&marker), "a process of the run outlived its answer: {marker}");
        assert_eq!(r["exit_code"], 7, "{r}");
        assert!(r["stdout"].as_str().unwrap().contains("running"), "positive control: {r}");
        let listed = denied(&r).iter().any(|d| {
            d["what"].as_str() == envrc.to_str() && d["layer"] == "sandbox (in-run walls)"
        });
        assert!(listed, "the refusal is in the result: {r}");
    }
    c.stop().await;
    assert!(!envrc.exists(), "the walls held");
    fx.assert_canary();
}

/// The commands' home in the state dir made a file: the launcher cannot create it, the sandbox
/// is not built, and the call says so — from the launcher's report, the only thing the daemon
/// reads. The command never ran. Positive control: the same call before, and after the home is
/// a folder again.
#[tokio::test]
async fn a_sandbox_that_cannot_be_built_is_still_reported() {
    let fx = Fixture::new();
    let c = start(&fx).await;
    let r = bash(&c, "echo before > before.txt").await;
    assert_eq!(r["exit_code"], 0, "positive control: {r}");
    let home = super::common::sandbox_home(&fx);
    assert!(home.is_dir(), "the commands' home is {}", home.display());
    // The next command's sandbox is built from the home once the command has ended (decision
    // 0077): once it waits, the home is the test's to break (the daemon passes over a ready
    // sandbox whose home is gone).
    super::ready::settled(&fx).await;
    std::fs::remove_dir_all(&home).unwrap();
    std::fs::write(&home, "not a folder\n").unwrap();
    let r = c.call("bash", json!({ "command": "echo ran > made.txt" })).await;
    let text = text_of(&r);
    assert_eq!(r.is_error, Some(true), "{text}");
    assert!(text.contains("the sandbox could not be built"), "{text}");
    assert!(text.contains("cannot create the sandbox home"), "{text}");
    assert!(!fx.root.join("made.txt").exists(), "the command did not run");
    std::fs::remove_file(&home).unwrap();
    std::fs::create_dir(&home).unwrap();
    if super::common::is_root() {
        own(&home);
    }
    let r = bash(&c, "echo after > after.txt").await;
    assert_eq!(r["exit_code"], 0, "positive control, the home back: {r}");
    c.stop().await;
    assert!(fx.root.join("after.txt").exists());
    fx.assert_canary();
}
