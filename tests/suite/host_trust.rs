//! What the host trusts is out of reach (SPEC §3, issue 30 class 1 "Where git is told to
//! look"; issue 31 point 3), as attacks through the real binary: for each place git's config
//! sends the host's git — a hooks folder `core.hooksPath` names (husky's `.husky/_`, a global
//! `.githooks`), an included config, a `.git/hooks` or `.vscode` that is a link, a git dir made
//! of `HEAD` + `commondir` and the config it takes from its common dir, a repository a command
//! made — a command (`bash`, a tmux session, a background loop) and the `write` tool try to
//! plant an fsmonitor or a hook, and the host's own `git status` and `git commit` must run
//! nothing of theirs (the canary: a marker outside the roots). Each has its positive control:
//! an ordinary file beside it is written. And `hands serve` with a few commands leaves the
//! project's listing as it was.

use super::common::{Client, Era, Fixture, host_git_output, own_tree, text_of};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// tools-fs, tools-shell (with `shell_extra` in its config table) and tools-git on the root,
/// every call allowed.
fn config(fx: &Fixture, shell_extra: &str) -> PathBuf {
    fx.config(&format!(
        "[daemon]\nstate_dir = \"{{state}}\"\n\n\
         [[builtins]]\nid = \"tools-fs\"\ngrants = [\"filesystem\"]\n\
         filesystem = [{{ path = \"{{root}}\", write = true }}]\n\
         config = {{ trust = {{ write = \"allow\" }} }}\n\n\
         [[builtins]]\nid = \"tools-shell\"\ngrants = [\"filesystem\", \"spawn\"]\n\
         filesystem = [{{ path = \"{{root}}\", write = true }}]\n\
         config = {{ {shell_extra}trust = {{ external = \"allow\" }} }}\n\n\
         [[builtins]]\nid = \"tools-git\"\ngrants = [\"filesystem\", \"spawn\"]\n\
         filesystem = [{{ path = \"{{root}}\", write = true }}]\n\
         config = {{ trust = {{ write = \"allow\" }} }}\n"
    ))
}

async fn start(fx: &Fixture) -> Client {
    Client::start_with_env(fx, &config(fx, ""), Era::Legacy, &[]).await
}

/// The canary: a program that leaves a marker beside the roots when the host's git runs it,
/// as `core.fsmonitor` or as a hook.
struct Canary {
    script: PathBuf,
    marker: PathBuf,
}

impl Canary {
    fn new(fx: &Fixture) -> Canary {
        let base = fx.root.parent().unwrap();
        let (script, marker) = (base.join("monitor.sh"), base.join("PWNED"));
        std::fs::write(&script, format!("#!/bin/sh\ntouch {}\n", marker.display())).unwrap();
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        Canary { script, marker }
    }

    /// A config that runs the canary on every `git status`.
    fn fsmonitor(&self) -> String {
        format!("[core]\n\tfsmonitor = {}\n", self.script.display())
    }

    /// A hook that runs the canary.
    fn hook(&self) -> String {
        format!("#!/bin/sh\n{}\n", self.script.display())
    }

    fn assert_unrun(&self, fx: &Fixture) {
        assert!(!self.marker.exists(), "the host's git ran a program the agent planted");
        fx.assert_canary();
    }
}

/// git on the host, as the person runs it (requiring success).
fn git(fx: &Fixture, dir: &Path, args: &[&str]) -> String {
    let out = host_git_output(&fx.home, dir, args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "git {args:?} in {}: {err}", dir.display());
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The person's `git status` and `git commit` in `dir`: what must run nothing of the agent's.
fn person_uses(fx: &Fixture, dir: &Path) {
    git(fx, dir, &["status", "--short"]);
    git(fx, dir, &["commit", "-q", "--allow-empty", "-m", "by the person"]);
}

async fn bash(c: &Client, cmd: &str) -> Value {
    c.ok("bash", json!({ "command": cmd })).await
}

fn shown(v: &Value) -> String {
    format!(
        "{}{}",
        v["stdout"].as_str().unwrap_or_default(),
        v["stderr"].as_str().unwrap_or_default()
    )
}

/// The `write` tool refuses `path` as a protected path, and nothing is there after.
async fn write_refused(c: &Client, fx: &Fixture, path: &str, content: &str) {
    let before = std::fs::read(fx.root.join(path)).ok();
    let r = c.call("write", json!({ "path": path, "content": content })).await;
    let text = text_of(&r);
    assert_eq!(r.is_error, Some(true), "write {path} was not refused: {text}");
    assert!(text.contains("protected"), "write {path}: {text}");
    assert_eq!(std::fs::read(fx.root.join(path)).ok(), before, "{path} changed");
}

/// The `write` tool writes `path` (a positive control).
async fn write_ok(c: &Client, fx: &Fixture, path: &str) {
    let r = c.call("write", json!({ "path": path, "content": "ok\n" })).await;
    assert_ne!(r.is_error, Some(true), "write {path}: {}", text_of(&r));
    assert_eq!(std::fs::read_to_string(fx.root.join(path)).unwrap(), "ok\n");
}

/// A repository at `dir` with one commit, made by the person on the host.
fn repo(fx: &Fixture, dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    git(fx, dir, &["init", "-q", "-b", "main"]);
    git(fx, dir, &["commit", "-q", "--allow-empty", "-m", "first"]);
}

/// `core.hooksPath` as husky sets it (`.husky/_`, before husky made the folder), and as a
/// person's global config sets it (`.githooks` in every repository): the folder is refused to
/// commands and to the `write` tool, made plainly or carried in by a rename; the person's
/// commit runs nothing. Positive control: `.husky` itself and a file in it are written.
#[tokio::test]
async fn a_hooks_folder_named_by_core_hooks_path_cannot_be_planted() {
    let fx = Fixture::new();
    let canary = Canary::new(&fx);
    repo(&fx, &fx.root);
    git(&fx, &fx.root, &["config", "core.hooksPath", ".husky/_"]);
    repo(&fx, &fx.root.join("other"));
    std::fs::write(fx.home.join(".gitconfig"), "[core]\n\thooksPath = .githooks\n").unwrap();
    // The second repository overrides nothing: the global `.githooks` is its hooks folder.
    own_tree(&fx.root);
    let c = start(&fx).await;
    let hook = canary.hook();
    let r = bash(
        &c,
        &format!(
            "mkdir -p .husky/_ && echo MADE; printf '{hook}' > .husky/_/pre-commit && echo WROTE; \
             mkdir -p aside && printf '{hook}' > aside/pre-commit && chmod +x aside/pre-commit && \
             mv aside .husky/_ && echo MOVED; \
             mkdir -p other/.githooks && echo MADE2; printf '{hook}' > other/.githooks/pre-commit && echo WROTE2; \
             echo ok > .husky/readme && echo POS-OK"
        ),
    )
    .await;
    let out = shown(&r);
    for word in ["MADE\n", "WROTE", "MOVED", "MADE2", "WROTE2"] {
        assert!(!out.contains(word), "{word}: {out}");
    }
    assert!(out.contains("POS-OK"), "positive control: {out}");
    let denied = r["denied"].as_array().cloned().unwrap_or_default();
    assert!(!denied.is_empty(), "the refusals are listed in denied: {r}");
    write_refused(&c, &fx, ".husky/_/pre-commit", &hook).await;
    write_refused(&c, &fx, "other/.githooks/pre-commit", &hook).await;
    write_ok(&c, &fx, ".husky/pre-commit.txt").await;
    c.stop().await;
    assert!(std::fs::symlink_metadata(fx.root.join(".husky/_")).is_err());
    assert!(std::fs::symlink_metadata(fx.root.join("other/.githooks")).is_err());
    person_uses(&fx, &fx.root);
    person_uses(&fx, &fx.root.join("other"));
    canary.assert_unrun(&fx);
}

/// Includes: `include.path` relative to the including file, a file that includes another, and
/// `includeIf` (whatever its condition): each target is read-only or uncreatable, to commands
/// and to the `write` tool. Positive control: a file beside them.
#[tokio::test]
async fn included_configs_cannot_be_written() {
    let fx = Fixture::new();
    let canary = Canary::new(&fx);
    repo(&fx, &fx.root);
    // Relative to `.git/config`'s folder: `../shared/git.cfg` is `{root}/shared/git.cfg`.
    git(&fx, &fx.root, &["config", "include.path", "../shared/git.cfg"]);
    git(&fx, &fx.root, &["config", "includeIf.onbranch:never.path", "../cond.cfg"]);
    fx.write("shared/git.cfg", "[include]\n\tpath = more.cfg\n");
    own_tree(&fx.root);
    let c = start(&fx).await;
    let bad = canary.fsmonitor();
    let r = bash(
        &c,
        &format!(
            "printf '{bad}' >> shared/git.cfg && echo WROTE1; printf '{bad}' > shared/more.cfg && echo WROTE2; \
             printf '{bad}' > cond.cfg && echo WROTE3; echo x > shared/notes.txt && echo POS-OK"
        ),
    )
    .await;
    let out = shown(&r);
    for word in ["WROTE1", "WROTE2", "WROTE3"] {
        assert!(!out.contains(word), "{word}: {out}");
    }
    assert!(out.contains("POS-OK"), "positive control: {out}");
    for p in ["shared/git.cfg", "shared/more.cfg", "cond.cfg"] {
        write_refused(&c, &fx, p, &bad).await;
    }
    write_ok(&c, &fx, "shared/other.txt").await;
    c.stop().await;
    assert_eq!(
        std::fs::read_to_string(fx.root.join("shared/git.cfg")).unwrap(),
        "[include]\n\tpath = more.cfg\n"
    );
    person_uses(&fx, &fx.root);
    canary.assert_unrun(&fx);
}

/// A protected name that is a link protects what it points at: `.git/hooks -> ../hooks-in-tree`
/// and `.vscode -> tools/vscode`. A link into the sandbox's home, which commands write, makes
/// commands refuse, saying why. Positive controls: the targets' neighbours are written.
#[tokio::test]
async fn protected_names_that_are_links_protect_their_targets() {
    let fx = Fixture::new();
    let canary = Canary::new(&fx);
    repo(&fx, &fx.root);
    std::fs::remove_dir_all(fx.root.join(".git/hooks")).unwrap();
    std::fs::create_dir_all(fx.root.join("hooks-in-tree")).unwrap();
    std::os::unix::fs::symlink("../hooks-in-tree", fx.root.join(".git/hooks")).unwrap();
    std::fs::create_dir_all(fx.root.join("tools/vscode")).unwrap();
    std::os::unix::fs::symlink("tools/vscode", fx.root.join(".vscode")).unwrap();
    own_tree(&fx.root);
    let c = start(&fx).await;
    let hook = canary.hook();
    let r = bash(
        &c,
        &format!(
            "printf '{hook}' > hooks-in-tree/pre-commit && chmod +x hooks-in-tree/pre-commit && echo WROTE1; \
             echo '{{}}' > tools/vscode/tasks.json && echo WROTE2; \
             echo '{{}}' > .vscode/tasks.json && echo WROTE3; \
             echo ok > tools/other.json && mkdir -p hooks-out && echo ok > hooks-out/x && echo POS-OK"
        ),
    )
    .await;
    let out = shown(&r);
    for word in ["WROTE1", "WROTE2", "WROTE3"] {
        assert!(!out.contains(word), "{word}: {out}");
    }
    assert!(out.contains("POS-OK"), "positive control: {out}");
    write_refused(&c, &fx, "hooks-in-tree/pre-commit", &hook).await;
    write_refused(&c, &fx, "tools/vscode/tasks.json", "{}").await;
    write_ok(&c, &fx, "tools/other2.json").await;
    assert!(!fx.root.join("tools/vscode/tasks.json").exists());
    person_uses(&fx, &fx.root);
    // A protected name linking into the sandbox home: the person's editor would read what any
    // command writes there.
    let home = super::common::sandbox_home(&fx);
    std::fs::create_dir_all(fx.root.join("sub")).unwrap();
    std::os::unix::fs::symlink(&home, fx.root.join("sub/.vscode")).unwrap();
    tokio::time::sleep(Duration::from_millis(2200)).await;
    let r = c.call("bash", json!({ "command": "echo RAN" })).await;
    let text = text_of(&r);
    assert_eq!(r.is_error, Some(true), "{text}");
    assert!(text.contains("sandbox's home") && !text.contains("RAN\n"), "{text}");
    std::fs::remove_file(fx.root.join("sub/.vscode")).unwrap();
    tokio::time::sleep(Duration::from_millis(2200)).await;
    assert!(shown(&bash(&c, "echo RAN").await).contains("RAN"), "positive control");
    c.stop().await;
    canary.assert_unrun(&fx);
}

/// A git dir made of `HEAD` + `commondir` (no `refs`), used by a work tree's `.git` file, takes
/// its config and hooks from the common dir, which holds no `HEAD`: that config and those hooks
/// are read-only, the git dir's own control files uncreatable. Positive control: the work
/// tree's files are written, and git works there inside the sandbox.
#[tokio::test]
async fn a_commondir_git_dir_protects_its_common_config() {
    let fx = Fixture::new();
    let canary = Canary::new(&fx);
    let r = &fx.root;
    git(&fx, r, &["init", "-q", "--bare", "common"]);
    std::fs::remove_file(r.join("common/HEAD")).unwrap();
    git(&fx, r, &["config", "-f", "common/config", "core.bare", "false"]);
    std::fs::create_dir_all(r.join("wtgd")).unwrap();
    std::fs::write(r.join("wtgd/HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::write(r.join("wtgd/commondir"), "../common\n").unwrap();
    std::fs::create_dir_all(r.join("wt")).unwrap();
    std::fs::write(r.join("wt/.git"), "gitdir: ../wtgd\n").unwrap();
    git(&fx, &r.join("wt"), &["status", "--short"]);
    own_tree(r);
    let c = start(&fx).await;
    let (bad, hook) = (canary.fsmonitor(), canary.hook());
    let res = bash(
        &c,
        &format!(
            "printf '{bad}' >> common/config && echo WROTE1; \
             mkdir -p common/hooks; printf '{hook}' > common/hooks/pre-commit && echo WROTE2; \
             printf '{bad}' > wtgd/config && echo WROTE3; echo ../elsewhere > wtgd/commondir && echo WROTE4; \
             echo ok > wt/file.txt && git -C wt status --short && echo POS-OK"
        ),
    )
    .await;
    let out = shown(&res);
    for word in ["WROTE1", "WROTE2", "WROTE3", "WROTE4"] {
        assert!(!out.contains(word), "{word}: {out}");
    }
    assert!(out.contains("POS-OK"), "positive control: {out}");
    write_refused(&c, &fx, "common/config", &bad).await;
    write_refused(&c, &fx, "common/hooks/pre-commit", &hook).await;
    write_ok(&c, &fx, "wt/other.txt").await;
    c.stop().await;
    assert_eq!(std::fs::read_to_string(r.join("wtgd/commondir")).unwrap(), "../common\n");
    person_uses(&fx, &r.join("wt"));
    canary.assert_unrun(&fx);
}

/// With `new_repositories = "allow"`, a command's new repository keeps a config only git's
/// safe keys: `git config core.fsmonitor`, a config written in place or through a descriptor
/// kept from git's lock file, a hook — each refused; so `git add` of that repository into the
/// person's (a submodule entry, whose `git status` the host's runs) runs nothing. Positive
/// control: the new repository works — commits, `user.name`, a remote.
#[tokio::test]
async fn a_new_repository_cannot_carry_a_program_into_the_persons() {
    let fx = Fixture::new();
    let canary = Canary::new(&fx);
    repo(&fx, &fx.root);
    own_tree(&fx.root);
    let cfg = config(&fx, "new_repositories = \"allow\", ");
    let c = Client::start_with_env(&fx, &cfg, Era::Legacy, &[]).await;
    let (mon, hook) = (canary.script.display(), canary.hook());
    let id = "-c user.name=a -c user.email=a@b";
    let r = bash(
        &c,
        &format!(
            "git init -q -b main sub && echo INIT-OK; \
             git -C sub config core.fsmonitor {mon} && echo SET1; \
             printf '[core]\\n\\tfsmonitor = {mon}\\n' > sub/.git/config && echo SET2; \
             python3 -c 'import os; f=os.open(\"sub/.git/config\", os.O_WRONLY|os.O_APPEND); os.write(f, b\"[core]\\n\\tfsmonitor = {mon}\\n\")' && echo SET3; \
             exec 3>sub/.git/config.lock; printf '[user]\\n\\tname = a\\n' >&3; \
             mv sub/.git/config.lock sub/.git/config && echo LOCK-MOVED; \
             printf '[core]\\n\\tfsmonitor = {mon}\\n' >&3; exec 3>&-; \
             printf '{hook}' > sub/.git/hooks/post-index-change && echo HOOK; \
             git -C sub config user.name someone && git -C sub remote add origin /tmp/nowhere && \
             echo a > sub/a && git -C sub add a && git -C sub {id} commit -qm a && echo POS-OK; \
             git add sub && git {id} commit -qm sub && echo ADDED"
        ),
    )
    .await;
    let out = shown(&r);
    for word in ["SET1", "SET2", "SET3", "HOOK"] {
        assert!(!out.contains(word), "{word}: {out}");
    }
    for word in ["INIT-OK", "LOCK-MOVED", "POS-OK", "ADDED"] {
        assert!(out.contains(word), "positive control {word}: {out}");
    }
    write_refused(&c, &fx, "sub/.git/config", &canary.fsmonitor()).await;
    c.stop().await;
    let config = std::fs::read_to_string(fx.root.join("sub/.git/config")).unwrap();
    assert!(!config.contains("fsmonitor") && config.contains("someone"), "{config}");
    assert!(!fx.root.join("sub/.git/hooks/post-index-change").exists());
    // The person's `git status` recurses into the new submodule with the host's git.
    std::fs::write(fx.root.join("sub/a"), "changed\n").unwrap();
    let status = git(&fx, &fx.root, &["status", "--short"]);
    assert!(status.contains("sub"), "the submodule is seen: {status}");
    person_uses(&fx, &fx.root);
    git(&fx, &fx.root.join("sub"), &["status", "--short"]);
    canary.assert_unrun(&fx);
}

/// In-run: after the walk ran and the command started, a tmux session and a background loop
/// in `bash` try to make the hooks folder `core.hooksPath` names, or to point `core.hooksPath`
/// elsewhere; each is refused while they run. Positive control: the session writes a file.
#[tokio::test]
async fn a_tmux_session_and_a_background_loop_cannot_plant_hooks_later() {
    let fx = Fixture::new();
    let canary = Canary::new(&fx);
    repo(&fx, &fx.root);
    git(&fx, &fx.root, &["config", "core.hooksPath", ".husky/_"]);
    own_tree(&fx.root);
    let c = start(&fx).await;
    let hook = canary.hook();
    let loop_cmd = format!(
        "( for i in 1 2 3 4 5; do sleep 0.2; mkdir -p .husky/_ 2>/dev/null && echo MADE; \
           printf '{hook}' > .husky/_/pre-commit 2>/dev/null && echo WROTE; done ) & \
         sleep 0.1; git config core.hooksPath elsewhere 2>/dev/null && echo SET; wait; echo LOOP-DONE"
    );
    let out = shown(&bash(&c, &loop_cmd).await);
    assert!(out.contains("LOOP-DONE") && !out.contains("MADE") && !out.contains("WROTE"), "{out}");
    assert!(!out.contains("SET"), "{out}");
    c.ok("tmux_start", json!({ "command": "sh", "name": "later" })).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The pane shows the typed line too: the markers are computed, so only their output
    // matches.
    let typed = format!(
        "mkdir -p .husky/_ || echo REFUSED-$((1+1)); printf '{hook}' > .husky/_/pre-commit || \
         echo REFUSED-$((2+2)); echo ok > session.txt && echo SESSION-$((3+3))"
    );
    c.ok("tmux_send", json!({ "session": "later", "text": typed })).await;
    let mut text = String::new();
    for _ in 0..50 {
        let r = c.ok("tmux_read", json!({ "session": "later" })).await;
        text = r["text"].as_str().unwrap_or_default().to_string();
        if text.contains("SESSION-6") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(text.contains("REFUSED-2") && text.contains("SESSION-6"), "{text}");
    c.ok("tmux_kill", json!({ "session": "later" })).await;
    c.stop().await;
    assert!(std::fs::symlink_metadata(fx.root.join(".husky/_")).is_err());
    assert_eq!(std::fs::read_to_string(fx.root.join("session.txt")).unwrap(), "ok\n");
    person_uses(&fx, &fx.root);
    canary.assert_unrun(&fx);
}

/// Every entry below `dir` (not following links): its path and kind.
fn listing(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let t = e.file_type().unwrap();
            let rel = e.path().strip_prefix(dir).unwrap().to_path_buf();
            out.push((rel, format!("{t:?}")));
            if t.is_dir() {
                stack.push(e.path());
            }
        }
    }
    out.sort();
    out
}

/// Issue 31 point 3: `hands serve` makes nothing in the roots — no placeholder folders
/// (`.vscode`, `.claude`, …), no placeholder for a missing denied path, no `.git/commondir`, no
/// `.git/hooks` — and commands that read, list and are refused change nothing either.
#[tokio::test]
async fn serve_and_commands_leave_the_project_as_found() {
    let fx = Fixture::new();
    repo(&fx, &fx.root);
    fx.write("src/main.rs", "fn main() {}\n");
    git(&fx, &fx.root, &["add", "src/main.rs"]);
    git(&fx, &fx.root, &["commit", "-q", "-m", "main"]);
    std::fs::remove_dir_all(fx.root.join(".git/hooks")).unwrap();
    git(&fx, &fx.root, &["config", "extensions.worktreeConfig", "true"]);
    own_tree(&fx.root);
    let before = listing(&fx.root);
    let text = std::fs::read_to_string(config(&fx, "")).unwrap().replace(
        "[daemon]\n",
        &format!("[sandbox]\ndeny = [\"{}/private/\"]\n\n[daemon]\n", fx.root.display()),
    );
    let c = Client::start_with_env(&fx, &fx.config(&text), Era::Legacy, &[]).await;
    let r = bash(
        &c,
        "ls -la; cat src/main.rs; git status --short; mkdir .vscode 2>/dev/null; \
         mkdir -p private 2>/dev/null; echo done",
    )
    .await;
    assert!(shown(&r).contains("done"), "{r}");
    c.ok("list_dir", json!({ "path": "." })).await;
    c.ok("git_status", json!({})).await;
    c.stop().await;
    assert_eq!(listing(&fx.root), before, "serve or its commands made something in the root");
    fx.assert_canary();
}

/// The names a folding folder hands over for what the host trusts: vfat and exFAT ignore a
/// name's trailing dots (`config.` is `config` there) and fold case, so `.git/config.`,
/// `.envrc.`, `.GITHOOKS/pre-commit` for a `core.hooksPath` of `.githooks` and
/// `SHARED.gitconfig` for an `include.path` of `shared.gitconfig` would reach them. Found
/// attacking this session: `write` made each of them (the protected rules did not drop
/// trailing dots; the walk's paths were compared byte for byte), and a command made `.envrc.`.
/// Refused to `write` and to a command now. Positive control: `notes.` and `shared.txt` are
/// written by both; the person's git runs nothing of theirs.
#[tokio::test]
async fn what_the_host_trusts_is_refused_under_the_names_a_folding_folder_gives_it() {
    let fx = Fixture::new();
    let canary = Canary::new(&fx);
    repo(&fx, &fx.root);
    git(&fx, &fx.root, &["config", "core.hooksPath", ".githooks"]);
    git(&fx, &fx.root, &["config", "include.path", "../shared.gitconfig"]);
    fx.write("shared.gitconfig", "[user]\n\tname = person\n");
    own_tree(&fx.root);
    let c = start(&fx).await;
    let (hook, bad) = (canary.hook(), canary.fsmonitor());
    for p in [".git/config.", ".git./config", ".envrc.", ".git/hooks./pre-commit"] {
        write_refused(&c, &fx, p, &bad).await;
    }
    for p in [".GITHOOKS/pre-commit", ".githooks./pre-commit"] {
        write_refused(&c, &fx, p, &hook).await;
    }
    for p in ["SHARED.gitconfig", "shared.gitconfig."] {
        write_refused(&c, &fx, p, &bad).await;
    }
    write_ok(&c, &fx, "notes.").await;
    let r = bash(
        &c,
        "echo evil > .envrc. 2>/dev/null && echo WROTE1; mkdir .GITHOOKS. 2>/dev/null && echo MADE2; \
         echo x >> SHARED.gitconfig. 2>/dev/null && echo WROTE3; echo ok > shared.txt && echo POS-OK",
    )
    .await;
    let out = shown(&r);
    for word in ["WROTE1", "MADE2", "WROTE3"] {
        assert!(!out.contains(word), "{word}: {out}");
    }
    assert!(out.contains("POS-OK"), "positive control: {out}");
    c.stop().await;
    for p in [".git/config.", ".git.", ".envrc.", ".GITHOOKS", ".githooks.", "SHARED.gitconfig"] {
        assert!(std::fs::symlink_metadata(fx.root.join(p)).is_err(), "{p} was made");
    }
    let kept = std::fs::read_to_string(fx.root.join("shared.gitconfig")).unwrap();
    assert_eq!(kept, "[user]\n\tname = person\n");
    person_uses(&fx, &fx.root);
    canary.assert_unrun(&fx);
}
