//! The filesystem walls fail closed (issue 22, classes 1–3; issue 20.3), as attacks through the
//! real binary: a flood of hard links does not yield an unmasked `.env` or an unchecked git
//! dir; a `.git` file, a separate or bare git dir and a `config.worktree` cannot be turned into
//! a program the host's `git status` runs; a folder the launcher mounts on, removed, comes back.
//! Each attack has a positive control beside it and a canary outside the roots.

use super::common::{Client, Era, Fixture, text_of};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

const SECRET: &str = "hunter2-fail-closed-secret";

/// tools-fs, tools-shell and tools-git on the writable root, every call allowed.
fn config(fx: &Fixture, daemon_extra: &str) -> PathBuf {
    fx.config(&format!(
        "[daemon]\nstate_dir = \"{{state}}\"\n{daemon_extra}\n\
         [[builtins]]\nid = \"tools-fs\"\ngrants = [\"filesystem\"]\n\
         filesystem = [{{ path = \"{{root}}\", write = true }}]\n\
         config = {{ trust = {{ write = \"allow\" }} }}\n\n\
         [[builtins]]\nid = \"tools-shell\"\ngrants = [\"filesystem\", \"spawn\"]\n\
         filesystem = [{{ path = \"{{root}}\", write = true }}]\n\
         config = {{ trust = {{ external = \"allow\" }}, limits = {{ walk_entries = {WALK_ENTRIES} }} }}\n\n\
         [[builtins]]\nid = \"tools-git\"\ngrants = [\"filesystem\", \"spawn\"]\n\
         filesystem = [{{ path = \"{{root}}\", write = true }}]\n\
         config = {{ trust = {{ write = \"allow\" }} }}\n"
    ))
}

async fn start(fx: &Fixture) -> Client {
    Client::start_with_env(fx, &config(fx, ""), Era::Legacy, &[]).await
}

/// The walk's limit for the flood test: lowered so that the flood takes seconds on a slow
/// disk; the default (200,000) behaves the same, only later.
const WALK_ENTRIES: u64 = 20_000;

fn shown(v: &Value) -> String {
    format!(
        "{}{}",
        v["stdout"].as_str().unwrap_or_default(),
        v["stderr"].as_str().unwrap_or_default()
    )
}

/// git on the host, as the person runs it.
fn git(fx: &Fixture, dir: &Path, args: &[&str]) -> String {
    let o = std::process::Command::new("git")
        .args(["-c", "safe.directory=*"])
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(["-c", "protocol.file.allow=always"])
        .args(args)
        .current_dir(dir)
        .env("HOME", &fx.home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(o.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A program the host's git would run if an attack got through (`core.fsmonitor`): it leaves a
/// marker. Kept beside the roots, not in them.
fn monitor(fx: &Fixture) -> (PathBuf, PathBuf) {
    let base = fx.root.parent().unwrap();
    let marker = base.join("PWNED");
    let script = base.join("monitor.sh");
    std::fs::write(&script, format!("#!/bin/sh\ntouch {}\n", marker.display())).unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    (script, marker)
}

/// Hard links are cheap: a command can make a million in seconds. Today's walk stopped at a
/// count and left what lay past it unmasked; now the next command refuses instead, saying why,
/// and runs again (still masked) once the flood is gone. Positive control: the same command
/// ran, masked, before the flood.
#[tokio::test]
#[ignore = "stress (a flood of hard links); run with --include-ignored"]
async fn a_flood_of_hard_links_makes_commands_refuse_never_run_unmasked() {
    let fx = Fixture::new();
    fx.write("sub/.env", &format!("TOKEN={SECRET}\n"));
    fx.write("sub/ok.txt", "visible\n");
    let c = start(&fx).await;
    let probe = "cat sub/ok.txt; cat sub/.env";
    let before = c.ok("bash", json!({ "command": probe })).await;
    assert!(shown(&before).contains("visible"), "positive control: {before}");
    assert!(!shown(&before).contains(SECRET), "{before}");
    // The flood: more links than the walk's limit to a few files (ext4 allows 65,000 links per
    // file), in the root itself, so that a walk stopping at a count never enters `sub`.
    let script = "for (0..$ARGV[0]) { my $f = \"f\" . int($_ / 60000); \
                  if ($_ % 60000 == 0) { open(my $h, \">\", $f) or die } \
                  link($f, \"l$_\") or die \"$!\" }";
    let command = format!("perl -e '{script}' {WALK_ENTRIES} && echo FLOODED");
    let flood = c.ok("bash", json!({ "command": command, "timeout_secs": 120 })).await;
    assert!(shown(&flood).contains("FLOODED"), "{flood}");
    // The next walk (after the cache's two seconds) cannot finish: the command must not start.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let r = c.call("bash", json!({ "command": probe })).await;
    let text = text_of(&r);
    assert!(!text.contains(SECRET), "the flood unmasked the secret: {text}");
    assert_eq!(r.is_error, Some(true), "{text}");
    assert!(text.contains("could not be checked completely") && text.contains("remove"), "{text}");
    // A refusal, said as one: its layer in `denied`, and `refused:` in the audit log.
    let denied = r.structured_content.as_ref().map(|v| v["denied"].to_string());
    assert!(denied.as_deref().is_some_and(|d| d.contains("sandbox (masks)")), "{denied:?}");
    let last = fx.audit_records().into_iter().rev().find(|r| r["tool"] == "bash").unwrap();
    assert!(last["outcome"].as_str().unwrap().starts_with("refused: "), "{last}");
    // A person removes the flood: commands run again, the secret still masked.
    for e in std::fs::read_dir(&fx.root).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().into_string().unwrap();
        let flood = |p: &str| name.strip_prefix(p).is_some_and(|n| n.parse::<u64>().is_ok());
        if flood("l") || flood("f") {
            std::fs::remove_file(e.path()).unwrap();
        }
    }
    let mut again = Value::Null;
    for _ in 0..30 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let r = c.call("bash", json!({ "command": probe })).await;
        if r.is_error != Some(true) {
            again = r.structured_content.clone().unwrap_or_default();
            break;
        }
    }
    assert!(shown(&again).contains("visible") && !shown(&again).contains(SECRET), "{again}");
    c.stop().await;
    fx.assert_canary();
}

/// The git dir's symlink check had the same cap and then proceeded: past a flood of entries, a
/// `refs/heads` and `objects/pack` linked to a repository outside the roots let `git_log` read
/// its history. Now the git tools refuse a git dir they could not check completely. Positive
/// control: `git_log` reads the repository's own history before.
#[tokio::test]
async fn a_git_dir_too_large_to_check_is_refused_not_read_through_its_links() {
    let fx = Fixture::new();
    let base = fx.root.parent().unwrap().to_path_buf();
    let other = base.join("other");
    std::fs::create_dir_all(&other).unwrap();
    git(&fx, &other, &["init", "-q", "-b", "main"]);
    git(&fx, &other, &["commit", "-q", "--allow-empty", "-m", "OUTSIDE-HISTORY"]);
    git(&fx, &other, &["gc", "-q"]);
    git(&fx, &fx.root, &["init", "-q", "-b", "main"]);
    git(&fx, &fx.root, &["commit", "-q", "--allow-empty", "-m", "own history"]);
    git(&fx, &fx.root, &["gc", "-q"]);
    {
        let c = start(&fx).await;
        let log = c.ok("git_log", json!({ "repo": "." })).await.to_string();
        assert!(log.contains("own history"), "positive control: {log}");
        c.stop().await;
    }
    // What a command can do in seconds: 200,001 hard links at the top of `.git`, then the
    // refs and packs linked to the other repository.
    let gd = fx.root.join(".git");
    for i in 0..200_001 {
        let f = gd.join(format!("flood{}", i / 60_000));
        if i % 60_000 == 0 {
            std::fs::write(&f, "").unwrap();
        }
        std::fs::hard_link(&f, gd.join(format!("l{i}"))).unwrap();
    }
    std::fs::remove_dir_all(gd.join("refs/heads")).unwrap();
    std::os::unix::fs::symlink(other.join(".git/refs/heads"), gd.join("refs/heads")).unwrap();
    let _ = std::fs::remove_file(gd.join("packed-refs"));
    std::fs::remove_dir_all(gd.join("objects/pack")).unwrap();
    std::os::unix::fs::symlink(other.join(".git/objects/pack"), gd.join("objects/pack")).unwrap();
    // `other`'s refs are packed too: give it a loose one to be read through the link.
    std::fs::create_dir_all(other.join(".git/refs/heads")).unwrap();
    let head = git(&fx, &other, &["rev-parse", "HEAD"]);
    std::fs::write(other.join(".git/refs/heads/main"), head).unwrap();
    let c = start(&fx).await;
    let r = c.call("git_log", json!({ "repo": "." })).await;
    let text = text_of(&r);
    assert!(!text.contains("OUTSIDE-HISTORY"), "read a repository outside the roots: {text}");
    assert_eq!(r.is_error, Some(true), "{text}");
    assert!(text.contains("could check completely"), "{text}");
    c.stop().await;
    fx.assert_canary();
}

/// A submodule's `.git` file written by the `write` tool to name a git dir the agent made
/// (`core.fsmonitor` in its config) made the person's next `git status` in the parent run that
/// program. Now the write tool refuses the `.git` file, and the git dir's config once `HEAD`
/// is beside it (or `HEAD` once a config is). Positive control: an ordinary file in the
/// submodule is written; the host's `git status` runs and runs nothing.
#[tokio::test]
async fn the_write_tool_cannot_point_a_submodule_at_a_git_dir_of_its_own() {
    let fx = Fixture::new();
    let (script, marker) = monitor(&fx);
    let src = fx.root.parent().unwrap().join("subsrc");
    std::fs::create_dir_all(&src).unwrap();
    git(&fx, &src, &["init", "-q", "-b", "main"]);
    git(&fx, &src, &["commit", "-q", "--allow-empty", "-m", "s"]);
    git(&fx, &fx.root, &["init", "-q", "-b", "main"]);
    git(&fx, &fx.root, &["submodule", "-q", "add", src.to_str().unwrap(), "sub"]);
    git(&fx, &fx.root, &["commit", "-q", "-m", "add sub"]);
    let dotgit = std::fs::read_to_string(fx.root.join("sub/.git")).unwrap();
    let c = start(&fx).await;
    let config =
        format!("[core]\n\trepositoryformatversion = 0\n\tfsmonitor = {}\n", script.display());
    let write = |path: &str, content: &str| {
        let c = &c;
        let (path, content) = (path.to_string(), content.to_string());
        async move { c.call("write", json!({ "path": path, "content": content })).await }
    };
    // Positive control first.
    let ok = write("sub/notes.txt", "fine\n").await;
    assert_ne!(ok.is_error, Some(true), "{}", text_of(&ok));
    for p in ["evil/objects/.keep", "evil/refs/.keep"] {
        assert_ne!(write(p, "").await.is_error, Some(true));
    }
    assert_ne!(write("evil/config", &config).await.is_error, Some(true));
    let head = write("evil/HEAD", "ref: refs/heads/main\n").await;
    assert_eq!(head.is_error, Some(true), "HEAD beside a config: {}", text_of(&head));
    let file = write("sub/.git", "gitdir: ../evil\n").await;
    assert_eq!(file.is_error, Some(true), "a .git file: {}", text_of(&file));
    assert!(text_of(&file).contains("protected"), "{}", text_of(&file));
    let new = write("other/.git", "gitdir: ../evil\n").await;
    assert_eq!(new.is_error, Some(true), "a new .git file: {}", text_of(&new));
    // A real git dir's config, under any name, is refused too.
    let real = write(".git/modules/sub/config", &config).await;
    assert_eq!(real.is_error, Some(true), "{}", text_of(&real));
    // A submodule named `a/b` keeps its git dir in `.git/modules/a/b`: its config is protected
    // before that git dir exists, by the rule alone (no `HEAD` beside it yet), and the folders
    // made on the way go again. Positive control: a file of no consequence in that folder.
    let nested = write(".git/modules/a/b/config", &config).await;
    assert_eq!(nested.is_error, Some(true), "{}", text_of(&nested));
    assert!(text_of(&nested).contains("protected"), "{}", text_of(&nested));
    assert!(!fx.root.join(".git/modules/a").exists(), "a refused write left its folders");
    let ok = write(".git/modules/a/b/description", "nested\n").await;
    assert_ne!(ok.is_error, Some(true), "{}", text_of(&ok));
    c.stop().await;
    assert_eq!(std::fs::read_to_string(fx.root.join("sub/.git")).unwrap(), dotgit);
    git(&fx, &fx.root, &["status", "--short"]);
    assert!(!marker.exists(), "the host's git status ran the agent's program");
    assert_eq!(std::fs::read_to_string(fx.root.join("sub/notes.txt")).unwrap(), "fine\n");
    fx.assert_canary();
}

/// Commands: an existing `.git` file, the separate git dir it names, a bare repository's
/// config and hooks, and a `config.worktree` that does not exist yet (but
/// `extensions.worktreeConfig` makes git read) are all read-only, so a command cannot make the
/// person's `git status` run a program. Positive control: the command writes the work trees and
/// commits with git inside the sandbox.
#[tokio::test]
async fn commands_cannot_make_the_hosts_git_run_a_program_through_any_git_dir() {
    let fx = Fixture::new();
    let (script, marker) = monitor(&fx);
    // A work tree whose git dir lives elsewhere in the root (`--separate-git-dir`).
    git(&fx, &fx.root, &["init", "-q", "-b", "main", "--separate-git-dir=gd", "wt"]);
    git(&fx, &fx.root.join("wt"), &["commit", "-q", "--allow-empty", "-m", "wt"]);
    // A bare repository, and one with per-worktree config on but no config.worktree yet.
    git(&fx, &fx.root, &["init", "-q", "--bare", "x.git"]);
    git(&fx, &fx.root, &["init", "-q", "-b", "main", "wc"]);
    git(&fx, &fx.root.join("wc"), &["config", "core.repositoryformatversion", "1"]);
    git(&fx, &fx.root.join("wc"), &["config", "extensions.worktreeConfig", "true"]);
    git(&fx, &fx.root.join("wc"), &["commit", "-q", "--allow-empty", "-m", "wc"]);
    let dotgit = std::fs::read_to_string(fx.root.join("wt/.git")).unwrap();
    // Commands run as the roots' owner (uid 65534 when the suite is root).
    super::common::own_tree(&fx.root);
    let c = start(&fx).await;
    let mon = script.display();
    let cmd = format!(
        "printf '[core]\\n\\tfsmonitor = {mon}\\n' >> gd/config || echo REFUSED-gd; \
         mkdir -p evil/objects evil/refs; echo 'ref: refs/heads/main' > evil/HEAD; \
         printf '[core]\\n\\tfsmonitor = {mon}\\n' > evil/config; \
         echo 'gitdir: ../evil' > wt/.git || echo REFUSED-dotgit; \
         printf '[core]\\n\\tfsmonitor = {mon}\\n' >> x.git/config || echo REFUSED-bare; \
         printf '#!/bin/sh\\ntouch {mon}.hook\\n' > x.git/hooks/post-update || echo REFUSED-hook; \
         printf '[core]\\n\\tfsmonitor = {mon}\\n' > wc/.git/config.worktree || echo REFUSED-wtc; \
         echo ok > wt/file.txt && git -C wt add file.txt && \
         git -C wt -c user.name=a -c user.email=a@b commit -q -m inside && echo COMMIT-OK"
    );
    let r = c.ok("bash", json!({ "command": cmd })).await;
    let out = shown(&r);
    for word in ["REFUSED-gd", "REFUSED-dotgit", "REFUSED-bare", "REFUSED-hook", "REFUSED-wtc"] {
        assert!(out.contains(word), "{word}: {out}");
    }
    assert!(out.contains("COMMIT-OK"), "positive control: {out}");
    c.stop().await;
    assert_eq!(std::fs::read_to_string(fx.root.join("wt/.git")).unwrap(), dotgit);
    git(&fx, &fx.root.join("wt"), &["status", "--short"]);
    git(&fx, &fx.root.join("wc"), &["status", "--short"]);
    assert!(!marker.exists(), "the host's git status ran the command's program");
    assert_eq!(git(&fx, &fx.root.join("wt"), &["log", "-1", "--format=%s"]).trim(), "inside");
    fx.assert_canary();
}

/// The folder the launcher mounts on — the sandbox home — removed while the daemon runs
/// (commands cannot: inside the sandbox it is a mount point, and the state folder may not lie
/// in a root; a person, or a tool outside the sandbox, can) made every later command fail to
/// start. Now the daemon makes it again for the next command, and a protected folder that
/// does not exist stays uncreatable without one made for it. Positive control: the command
/// before ran.
#[tokio::test]
async fn a_removed_mount_point_is_made_again_for_the_next_command() {
    let fx = Fixture::new();
    let c = start(&fx).await;
    let r = c.ok("bash", json!({ "command": "echo FIRST" })).await;
    assert!(shown(&r).contains("FIRST"), "positive control: {r}");
    assert!(std::fs::symlink_metadata(fx.root.join(".vscode")).is_err(), "serve made .vscode");
    // Not while the next command's sandbox is being built from it (decision 0077).
    super::ready::settled(&fx).await;
    std::fs::remove_dir_all(super::common::sandbox_home(&fx)).unwrap();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let r = c
        .call(
            "bash",
            json!({ "command": "echo AGAIN; mkdir -p .vscode; echo '{}' > .vscode/tasks.json && echo WROTE" }),
        )
        .await;
    let text = text_of(&r);
    assert_ne!(r.is_error, Some(true), "the next command failed to start: {text}");
    assert!(text.contains("AGAIN") && !text.contains("WROTE"), "{text}");
    assert!(std::fs::symlink_metadata(fx.root.join(".vscode")).is_err());
    c.stop().await;
    fx.assert_canary();
}

/// Issue 22's in-run gap: the binds are placed before a command starts, so what the command
/// creates during its own run was unprotected until the next one. One `bash` call made a
/// repository whose config names a program (`git init sub && git -C sub config
/// core.fsmonitor …`), a git dir under another name, a `.git` file, link or renamed folder
/// pointing at a git dir it made, and
/// missing protected files (`.envrc`, `opencode.json`, a subfolder's `.gemini/`): the person's
/// next `git status` there ran the program. Now each create is refused (EACCES, and the result
/// lists it in `denied`). Positive controls: ordinary creates, renames and links in the root,
/// and a repository made in the sandbox's own /tmp.
#[tokio::test]
async fn what_a_command_creates_during_its_run_cannot_be_a_git_dir_or_protected_path() {
    let fx = Fixture::new();
    let (script, marker) = monitor(&fx);
    git(&fx, &fx.root, &["init", "-q", "-b", "main"]);
    git(&fx, &fx.root, &["commit", "-q", "--allow-empty", "-m", "first"]);
    super::common::own_tree(&fx.root);
    let c = start(&fx).await;
    let mon = script.display();
    let cmd = format!(
        "git init -q sub && git -C sub config core.fsmonitor {mon} || echo REFUSED-init; \
         mkdir -p evil/objects evil/refs sub2 sub3 sub4 deep; \
         printf '[core]\\n\\trepositoryformatversion = 0\\n\\tfsmonitor = {mon}\\n' > evil/config; \
         echo 'ref: refs/heads/main' > evil/HEAD || echo REFUSED-head; \
         echo 'gitdir: ../evil' > sub2/.git || echo REFUSED-file; \
         ln -s ../evil sub3/.git || echo REFUSED-symlink; \
         cp -r evil evil2 && mv evil2 sub4/.git || echo REFUSED-rename; \
         echo 'touch {mon}.envrc' > .envrc || echo REFUSED-envrc; \
         echo '{{}}' > opencode.json || echo REFUSED-opencode; \
         mkdir deep/.gemini || echo REFUSED-gemini; \
         mkdir -p src/a && echo ok > src/a/f && mv src/a/f src/a/g && ln -s g src/a/h && \
         ln src/a/g src/a/i && cat src/a/h >/dev/null && echo POS-OK; \
         git init -q /tmp/scratch && git -C /tmp/scratch -c user.name=a -c user.email=a@b \
           commit -q --allow-empty -m t && echo TMP-GIT-OK"
    );
    let r = c.ok("bash", json!({ "command": cmd })).await;
    let out = shown(&r);
    for word in [
        "REFUSED-init",
        "REFUSED-head",
        "REFUSED-file",
        "REFUSED-symlink",
        "REFUSED-rename",
        "REFUSED-envrc",
        "REFUSED-opencode",
        "REFUSED-gemini",
    ] {
        assert!(out.contains(word), "{word}: {out}");
    }
    assert!(out.contains("POS-OK"), "positive control (creates in the root): {out}");
    assert!(out.contains("TMP-GIT-OK"), "positive control (a repository in /tmp): {out}");
    let denied = r["denied"].as_array().cloned().unwrap_or_default();
    let sub_git = fx.root.join("sub/.git");
    assert!(
        denied.iter().any(|d| d["what"].as_str() == sub_git.to_str()),
        "the refused .git is listed in denied: {denied:?}"
    );
    c.stop().await;
    for p in ["sub/.git", "sub2/.git", "sub3/.git", "sub4/.git", ".envrc", "opencode.json"] {
        assert!(std::fs::symlink_metadata(fx.root.join(p)).is_err(), "{p} was created");
    }
    assert!(std::fs::symlink_metadata(fx.root.join("deep/.gemini")).is_err());
    for dir in ["", "sub", "sub2", "sub3", "sub4", "evil"] {
        git(&fx, &fx.root.join(dir), &["status", "--short"]);
    }
    assert!(!marker.exists(), "the host's git status ran the command's program");
    fx.assert_canary();
}

/// A person who wants `git init`, `git clone` and `cargo new` inside the roots sets tools-shell's
/// `new_repositories = "allow"`: the command's new repository is then its own (its config is
/// the person's accepted risk), but an existing repository's walls stay, in the same run — an
/// `mkdir .git` over the existing one does not open it. Positive control: the new repository
/// works; canary: the existing repository's hooks and the file outside the roots.
#[tokio::test]
async fn new_repositories_allowed_leave_existing_repositories_walled() {
    let fx = Fixture::new();
    git(&fx, &fx.root, &["init", "-q", "-b", "main"]);
    git(&fx, &fx.root, &["commit", "-q", "--allow-empty", "-m", "first"]);
    super::common::own_tree(&fx.root);
    let text = std::fs::read_to_string(config(&fx, "")).unwrap().replace(
        "config = { trust = { external = \"allow\" }, limits",
        "config = { new_repositories = \"allow\", trust = { external = \"allow\" }, limits",
    );
    assert!(text.contains("new_repositories"), "{text}");
    let c = Client::start_with_env(&fx, &fx.config(&text), Era::Legacy, &[]).await;
    let cmd = "git init -q -b main sub && cd sub && echo a > a && git add a && \
               git -c user.name=a -c user.email=a@b commit -qm a && echo NEW-REPO-OK; cd ..; \
               mkdir .git 2>/dev/null; echo x > .git/hooks/pre-commit || echo REFUSED-hooks; \
               echo x > .git/config || echo REFUSED-config; \
               mkdir -p .git/modules/m && echo x > .git/modules/m/config || echo REFUSED-mod; \
               mkdir -p .git/modules/a/b && echo x > .git/modules/a/b/config || echo REFUSED-ab; \
               echo x > .git/modules/a/b/description && echo AB-DESCRIPTION-OK; \
               mkdir -p deep && echo '{}' > deep/opencode.json || echo REFUSED-opencode";
    let r = c.ok("bash", json!({ "command": cmd })).await;
    let out = shown(&r);
    for word in [
        "NEW-REPO-OK",
        "REFUSED-hooks",
        "REFUSED-config",
        "REFUSED-mod",
        "REFUSED-ab",
        "AB-DESCRIPTION-OK",
        "REFUSED-opencode",
    ] {
        assert!(out.contains(word), "{word}: {out}");
    }
    assert!(fx.root.join("sub/.git/HEAD").exists());
    assert!(!fx.root.join(".git/hooks/pre-commit").exists(), "the existing repository got a hook");
    assert!(!fx.root.join(".git/modules/m/config").exists(), "a submodule config was made");
    assert!(!fx.root.join(".git/modules/a/b/config").exists(), "a submodule a/b config was made");
    let config = std::fs::read_to_string(fx.root.join(".git/config")).unwrap();
    assert!(!config.starts_with("x"), "the existing repository's config was written");
    assert!(!fx.root.join("deep/opencode.json").exists());
    c.stop().await;
    fx.assert_canary();
}

/// Runs a Python script through `bash` (its output, stdout and stderr).
async fn python(c: &Client, script: &str) -> String {
    let cmd = format!("python3 - <<'PY'\n{script}\nPY");
    shown(&c.ok("bash", json!({ "command": cmd, "timeout_secs": 120 })).await)
}

/// A Python prelude for scripts that try calls: `do(what, f)` prints `what made`, or `what`
/// and the errno's name.
const DO: &str = r#"import errno, os
def do(what, f):
    try:
        f(); print(what, "made")
    except OSError as e:
        print(what, errno.errorcode[e.errno])"#;

/// Runs a Python script bare on the host, in a fresh folder `name` of the fixture (its stdout).
fn bare_python(fx: &Fixture, name: &str, py: &str) -> String {
    let dir = fx.dir.path().join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let out = std::process::Command::new("python3").args(["-c", py]).current_dir(&dir).output();
    String::from_utf8_lossy(&out.unwrap().stdout).into_owned()
}

/// The number printed after `key` in `out`.
fn number_after(out: &str, key: &str) -> Option<u32> {
    out.split(key).nth(1)?.split_whitespace().next()?.parse().ok()
}

/// The path a notified call names lives in the command's memory, which another of its threads
/// can rewrite between the init's check and the kernel's own read (why the kernel warns against
/// `SECCOMP_USER_NOTIF_FLAG_CONTINUE`). The init makes the entry itself from its one copy, so
/// a thread flipping `race/xgit` and `race/.git` under a loop of `mkdir` never gets the second.
/// Positive control: the allowed name is made, many times.
#[tokio::test]
async fn a_path_rewritten_by_another_thread_during_the_check_is_never_created() {
    let fx = Fixture::new();
    // python3: its threads and ctypes make the race in a few lines (CI installs it). The loop
    // runs until the allowed name was made 20 times (the positive control), however rarely
    // the scheduler lets it through (4 in 3,000 tries once under test-as-user -r).
    assert!(
        std::process::Command::new("python3").arg("-c").arg("1").status().is_ok(),
        "this test needs python3"
    );
    super::common::own_tree(&fx.root);
    let c = start(&fx).await;
    let script = r#"
import ctypes, os, threading
libc = ctypes.CDLL(None, use_errno=True)
os.makedirs("race", exist_ok=True)
buf = ctypes.create_string_buffer(b"race/xgit", 16)
stop = False
def flip():
    while not stop:
        ctypes.memmove(buf, b"race/.git", 9)
        ctypes.memmove(buf, b"race/xgit", 9)
t = threading.Thread(target=flip); t.start()
made = 0
for i in range(30000):
    if libc.mkdir(buf, 0o755) == 0:
        made += 1
        if os.path.isdir("race/.git") or made >= 20:
            break
        os.rmdir("race/xgit")
stop = True; t.join()
print("MADE", made, "GIT", os.path.lexists("race/.git"))
"#;
    let out = python(&c, script).await;
    c.stop().await;
    assert!(out.contains("GIT False"), "the flipped name got through: {out}");
    let made = number_after(&out, "MADE ").unwrap_or(0);
    assert!(made > 10, "positive control: the allowed name was made only {made} times: {out}");
    assert!(std::fs::symlink_metadata(fx.root.join("race/.git")).is_err());
    fx.assert_canary();
}

/// The init makes each new entry itself, so it must give it the mode the command's own call
/// would have: `mode & ~umask` with the caller's umask. Until a process of the command calls
/// `umask(2)`, the init uses the umask every process started with (no `/proc` read per
/// create); from the first call on, each caller's own. Files made before and after a change,
/// in the shell and in a child, in a subshell with another umask, and a folder, all get the
/// modes `stat` shows for what the command asked.
#[tokio::test]
async fn what_the_init_creates_gets_the_callers_umask() {
    let fx = Fixture::new();
    super::common::own_tree(&fx.root);
    let c = start(&fx).await;
    let cmd = "touch first; python3 -c 'open(\"child\", \"w\")'; u=$(umask); \
               umask 027; touch a; mkdir d; (umask 077; touch b; mkdir e); touch c; \
               python3 -c 'open(\"g\", \"w\")'; \
               echo \"UMASK $u\"; stat -c 'MODE %n %a' first child a d b e c g";
    let r = c.ok("bash", json!({ "command": cmd })).await;
    let out = shown(&r);
    c.stop().await;
    let umask = out
        .split("UMASK ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|u| u32::from_str_radix(u, 8).ok())
        .unwrap_or_else(|| panic!("no umask printed: {out}"));
    let mode = |name: &str| -> String {
        out.lines()
            .find_map(|l| l.strip_prefix(&format!("MODE {name} ")))
            .unwrap_or_else(|| panic!("no mode for {name}: {out}"))
            .to_string()
    };
    let before = format!("{:o}", 0o666 & !umask);
    assert_eq!(mode("first"), before, "{out}");
    assert_eq!(mode("child"), before, "{out}");
    for (name, want) in [("a", "640"), ("d", "750"), ("b", "600"), ("e", "700"), ("c", "640")] {
        assert_eq!(mode(name), want, "{name}: {out}");
    }
    assert_eq!(mode("g"), "640", "a child after the change: {out}");
    // What the host sees is what the command saw.
    use std::os::unix::fs::PermissionsExt;
    let host = std::fs::metadata(fx.root.join("b")).unwrap().permissions().mode() & 0o777;
    assert_eq!(host, 0o600);
    fx.assert_canary();
}

/// A descriptor the init made is handed over with both threads held on the caller's CPU
/// (decision 0080: the kernel's plain wake-up of `ADDFD` woke an idle CPU twice per create).
/// What the command sees of its own CPUs must not change: after each create its affinity is
/// what it was (all CPUs; one CPU it chose), and a program that pins itself right after a
/// create keeps its pin (the init gives the affinity back before the call returns). The files
/// are made and written (positive control).
#[allow(clippy::print_stderr)] // says what one CPU leaves unchecked
#[tokio::test]
async fn a_create_leaves_the_callers_cpus_as_they_were() {
    let fx = Fixture::new();
    super::common::own_tree(&fx.root);
    let c = start(&fx).await;
    let script = r#"
import ctypes, os
libc = ctypes.CDLL(None)
os.makedirs("aff", exist_ok=True)
cpus = os.sched_getaffinity(0)
print("CPUS", len(cpus))
bad = []
def make(name):
    fd = os.open("aff/" + name, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644)
    os.write(fd, b"x"); os.close(fd)
for i in range(200):
    make(f"a{i}")
    if os.sched_getaffinity(0) != cpus: bad.append(("all", i, os.sched_getaffinity(0))); break
if len(cpus) > 1:
    one = {max(cpus)}
    os.sched_setaffinity(0, one)
    for i in range(100):
        make(f"b{i}")
        if os.sched_getaffinity(0) != one: bad.append(("one", i, os.sched_getaffinity(0))); break
    os.sched_setaffinity(0, cpus)
    for i in range(200):
        make(f"c{i}")
        here = {libc.sched_getcpu()}
        os.sched_setaffinity(0, here)
        for _ in range(2000): pass
        if os.sched_getaffinity(0) != here: bad.append(("pinned", i, os.sched_getaffinity(0))); break
        os.sched_setaffinity(0, cpus)
print("BAD", bad, "MADE", len(os.listdir("aff")))
"#;
    let out = python(&c, script).await;
    c.stop().await;
    assert!(out.contains("BAD []"), "the command's affinity changed: {out}");
    let cpus = number_after(&out, "CPUS ").unwrap_or_else(|| panic!("no CPU count: {out}"));
    let made = if cpus > 1 { 500 } else { 200 };
    assert!(out.contains(&format!("MADE {made}")), "positive control: {out}");
    assert_eq!(std::fs::read(fx.root.join("aff/a199")).unwrap(), b"x");
    if cpus == 1 {
        eprintln!("one CPU here: only the unchanged affinity of the first loop was checked");
    }
    fx.assert_canary();
}

/// Answers to processes calling in parallel are woken where the scheduler likes: the init
/// turns the kernel's same-CPU wake-up off for each such answer and on again after it
/// (decision 0082). Each process still gets its own answers, and the walls hold while the
/// flag is off and after: two processes rename files back and forth and `mkdir` existing
/// folders in parallel (every rename lands, every `mkdir` says EEXIST), try a `.git` between
/// (refused each time), and one process alone afterwards gets the same answers.
#[tokio::test]
async fn parallel_callers_get_their_own_answers_and_the_walls() {
    let fx = Fixture::new();
    super::common::own_tree(&fx.root);
    let c = start(&fx).await;
    let script = r#"
import os, time
os.makedirs("par", exist_ok=True)
def work(k, rounds):
    a, b = f"par/r{k}a", f"par/r{k}b"
    open(a, "w").write(str(k))
    bad = 0
    for i in range(rounds):
        e = time.perf_counter() + 0.0002
        while time.perf_counter() < e: pass
        os.rename(a, b); a, b = b, a
        try:
            os.mkdir("par"); bad += 1
        except FileExistsError:
            pass
        if i % 50 == 0:
            try:
                os.mkdir(f"par/k{k}/.git" if os.path.isdir(f"par/k{k}") else f"par/k{k}")
            except PermissionError:
                pass
    return bad + (open(a).read() != str(k))
kids = []
for k in range(2):
    pid = os.fork()
    if pid == 0:
        os._exit(work(k, 600))
    kids.append(pid)
print("PARALLEL", [os.waitstatus_to_exitcode(os.waitpid(p, 0)[1]) for p in kids])
print("ALONE", work(2, 200))
print("GIT", [os.path.lexists(f"par/k{k}/.git") for k in range(3)], "DIRS", sorted(os.listdir("par")))
"#;
    let out = python(&c, script).await;
    c.stop().await;
    assert!(out.contains("PARALLEL [0, 0]"), "a parallel caller got a wrong answer: {out}");
    assert!(out.contains("ALONE 0"), "a lone caller after them got a wrong answer: {out}");
    assert!(out.contains("GIT [False, False, False]"), "a .git was made: {out}");
    // Positive control: the allowed folders were made, and every file is where its last
    // rename put it (600 and 200 renames: back under its first name).
    for k in 0..3 {
        assert!(fx.root.join(format!("par/k{k}")).is_dir(), "{out}");
        assert_eq!(
            std::fs::read_to_string(fx.root.join(format!("par/r{k}a"))).unwrap(),
            k.to_string()
        );
        assert!(!fx.root.join(format!("par/k{k}/.git")).exists());
    }
    fx.assert_canary();
}

/// A folder whose path is past the kernel's `PATH_MAX` (made by relative steps) cannot be named
/// by the init, so nothing is made in it, rather than everything unchecked (found by the fourth
/// attack pass: `.git` with an fsmonitor, `.vscode` and `.envrc` were made there and the tree
/// moved to a short name in the root). Positive control: the same creates in a shallow folder;
/// canary outside the roots.
#[tokio::test]
async fn nothing_is_made_where_the_path_is_too_long_to_check() {
    let fx = Fixture::new();
    let c = start(&fx).await;
    let cmd = "n=$(printf 'd%.0s' $(seq 1 200)); mkdir deep && cd deep && \
               for i in $(seq 1 24); do mkdir $n 2>/dev/null && cd $n || break; done; \
               mkdir .git 2>/dev/null && echo MADE-git || echo REFUSED-git; \
               mkdir pay 2>/dev/null && echo MADE-pay || echo REFUSED-pay; \
               (echo x > .envrc) 2>/dev/null && echo MADE-envrc || echo REFUSED-envrc";
    let r = c.ok("bash", json!({ "command": cmd })).await;
    let out = shown(&r);
    for word in ["REFUSED-git", "REFUSED-pay", "REFUSED-envrc"] {
        assert!(out.contains(word), "{word}: {out}");
    }
    let denied = r["denied"].to_string();
    assert!(denied.contains("longer than the kernel can name"), "the refusal says why: {denied}");
    let pos = c
        .ok(
            "bash",
            json!({ "command": "mkdir -p shallow/pay && echo x > shallow/f && echo POS-OK" }),
        )
        .await;
    assert!(shown(&pos).contains("POS-OK"), "positive control: {pos}");
    c.stop().await;
    let found = std::process::Command::new("find")
        .arg(&fx.root)
        .args(["-name", ".git", "-o", "-name", "pay", "-o", "-name", ".envrc"])
        .output()
        .unwrap();
    let found = String::from_utf8_lossy(&found.stdout);
    let made: Vec<&str> = found.lines().filter(|l| !l.ends_with("shallow/pay")).collect();
    assert!(made.is_empty(), "made where the walls could not check: {made:?}");
    assert!(fx.root.join("shallow/pay").is_dir(), "positive control left its folder");
    fx.assert_canary();
}

/// A unix socket's path is a new name: sockets named `refs` and `objects` beside a `HEAD` and
/// a `config` made a git dir that the host's git took for a repository and ran its fsmonitor
/// (found by the fourth attack pass: `bind` was not sent to the init). Now the init binds, after
/// the walls' check. Positive controls: a socket by path in the root, by an abstract name,
/// unnamed, and a TCP port all bind; canary outside the roots. (The `config` beside the `HEAD`
/// is refused too since session 32, so the socket completes a config-less shape.)
#[tokio::test]
async fn a_unix_socket_cannot_complete_a_git_dir() {
    let fx = Fixture::new();
    let (script, marker) = monitor(&fx);
    let c = start(&fx).await;
    let py = format!(
        r#"
import os, socket
os.mkdir("bare")
open("bare/HEAD", "w").write("ref: refs/heads/main\n")
try:
    open("bare/config", "w").write("[core]\n\tbare = false\n\tfsmonitor = {mon}\n")
except OSError as e:
    print("REFUSED-config %d" % e.errno)
for n in ("refs", "objects"):
    try:
        socket.socket(socket.AF_UNIX).bind("bare/" + n); print("BOUND-" + n)
    except OSError as e:
        print("REFUSED-%s %d" % (n, e.errno))
s = socket.socket(socket.AF_UNIX); s.bind("ok.sock"); print("POS-path")
s = socket.socket(socket.AF_UNIX); s.bind("\0hands-abstract-test"); print("POS-abstract")
s = socket.socket(socket.AF_UNIX); s.bind(""); print("POS-unnamed", s.getsockname() != "")
t = socket.socket(); t.bind(("127.0.0.1", 0)); t.listen(); print("POS-tcp", t.getsockname()[1] > 0)
"#,
        mon = script.display()
    );
    let r = python(&c, &py).await;
    for word in [
        "REFUSED-config 13",
        "REFUSED-objects 13",
        "POS-path",
        "POS-abstract",
        "POS-unnamed True",
        "POS-tcp True",
    ] {
        assert!(r.contains(word), "{word}: {r}");
    }
    c.stop().await;
    let meta = std::fs::symlink_metadata(fx.root.join("ok.sock")).unwrap();
    assert!(std::os::unix::fs::FileTypeExt::is_socket(&meta.file_type()), "the socket is there");
    assert!(std::fs::symlink_metadata(fx.root.join("bare/objects")).is_err(), "objects was bound");
    // The host's git in the folder: a repository there would run its fsmonitor.
    std::process::Command::new("git")
        .args(["-c", "safe.directory=*", "status", "--short"])
        .current_dir(fx.root.join("bare"))
        .env("HOME", &fx.home)
        .env("GIT_CEILING_DIRECTORIES", &fx.root)
        .output()
        .unwrap();
    assert!(!marker.exists(), "the host's git ran the command's program");
    fx.assert_canary();
}

/// The init's other threads have `/proc` folders of their own (`/proc/3`), hidden from listings
/// but reachable; an open the init performed for the command through one reached the init's
/// own descriptors (found by the fourth attack pass: writing to its pipes ended the run early).
/// Now such a path means the command, as `/proc/1` and `/proc/self` already did: the command's
/// own descriptor 9 (a file it opened) is what the write reaches.
#[tokio::test]
async fn the_inits_threads_proc_folders_mean_the_command() {
    let fx = Fixture::new();
    let c = start(&fx).await;
    let py = r#"
import os
fd = os.open("mine.txt", os.O_WRONLY | os.O_CREAT, 0o644); os.dup2(fd, 9)
tids = [t for t in os.listdir("/proc/1/task") if t != "1"]
print("THREADS", len(tids))
for t in tids:
    try:
        w = os.open("/proc/%s/fd/9" % t, os.O_WRONLY | os.O_APPEND); os.write(w, b"via-%s\n" % t.encode())
    except OSError as e:
        print("ERR", t, e.errno)
"#;
    let r = python(&c, py).await;
    assert!(!r.contains("THREADS 0"), "the init has a thread of its own: {r}");
    c.stop().await;
    let mine = std::fs::read_to_string(fx.root.join("mine.txt")).unwrap_or_default();
    assert!(mine.contains("via-"), "the write reached the command's own descriptor: {mine:?} {r}");
    fx.assert_canary();
}

/// `/dev/fd/N/x` names the command's descriptor N, a folder, as on bare Linux: the kernel met
/// the magic link in `/proc/1/fd` for the init, which created in its own descriptor's folder
/// (or failed with ENOTDIR, or ENOENT where the init has no descriptor 57) until the steps
/// before the link were put back as the command's.
#[tokio::test]
async fn a_folder_through_dev_fd_is_the_commands_own() {
    let fx = Fixture::new();
    std::fs::create_dir_all(fx.root.join("dira")).unwrap();
    std::fs::create_dir_all(fx.root.join("sub")).unwrap();
    super::common::own_tree(&fx.root);
    let c = start(&fx).await;
    let cmd = "exec 3<dira 57<dira; cd sub; echo hi > /dev/fd/3/made3; mkdir /dev/fd/57/nine; \
               python3 -c 'import os; os.rename(\"/dev/fd/3/made3\", \"/proc/self/fd/57/moved\")'; \
               echo done";
    let r = shown(&c.ok("bash", json!({ "command": cmd })).await);
    assert!(r.contains("done") && !r.contains("Not a directory"), "{r}");
    c.stop().await;
    let read = std::fs::read_to_string(fx.root.join("dira/moved")).unwrap_or_default();
    assert_eq!(read, "hi\n", "created and renamed in the command's folder: {r}");
    assert!(fx.root.join("dira/nine").is_dir(), "{r}");
    fx.assert_canary();
}

/// A thread made without `CLONE_FILES` has a descriptor table of its own: the init takes its
/// socket from that thread's table (a pidfd of the thread), not the process's, where the number
/// names nothing (found by attacking the first version: EBADF). Positive control for the bind
/// path through the init.
#[tokio::test]
async fn a_thread_with_its_own_descriptors_binds_its_socket() {
    let fx = Fixture::new();
    compile_c(&fx, "t", THREAD_BIND_C);
    super::common::own_tree(&fx.root);
    let c = start(&fx).await;
    let r = shown(&c.ok("bash", json!({ "command": "./t" })).await);
    // Linux before 6.9 has no pidfd of a thread; there the process's table is the best there is.
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut n = release.trim().split(['.', '-']).map(|p| p.parse::<u32>().unwrap_or(0));
    let thread_pidfd = (n.next().unwrap_or(0), n.next().unwrap_or(0)) >= (6, 9);
    if thread_pidfd {
        assert!(r.contains("POS-thread"), "{r}");
    }
    c.stop().await;
    fx.assert_canary();
}

/// `source` (C) compiled with `cc -O1 -pthread` into the root as `name`.
fn compile_c(fx: &Fixture, name: &str, source: &str) {
    let src = fx.root.parent().unwrap().join(format!("{name}.c"));
    std::fs::write(&src, source).unwrap();
    let cc = std::process::Command::new("cc")
        .args(["-O1", "-pthread", "-o"])
        .arg(fx.root.join(name))
        .arg(&src)
        .output()
        .unwrap();
    assert!(cc.status.success(), "cc: {}", String::from_utf8_lossy(&cc.stderr));
}

const THREAD_BIND_C: &str = r#"
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/syscall.h>
static volatile int done;
static char stack[65536];
static int fn(void *a) {
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un u; memset(&u, 0, sizeof u); u.sun_family = AF_UNIX;
    strcpy(u.sun_path, "thread.sock");
    done = bind(s, (void *)&u, sizeof u) ? -errno : 1;
    syscall(SYS_exit, 0); return 0;
}
int main(void) {
    if (clone(fn, stack + sizeof stack, CLONE_VM | CLONE_SIGHAND | CLONE_THREAD, 0) < 0) {
        perror("clone"); return 1;
    }
    while (!done) usleep(1000);
    if (done == 1) printf("POS-thread\n"); else printf("THREAD-ERR %d\n", -done);
    return 0;
}
"#;

/// `bind` answers as bare Linux where the init's binding could differ (noted by the fourth
/// attack pass): a unix address given to a TCP socket names no file and gets the kernel's own
/// errno (EAFNOSUPPORT), a bad descriptor is EBADF before a bad address is EFAULT, a file is
/// ENOTSOCK. The same script run bare on the host prints the same lines; no file is made.
#[tokio::test]
async fn bind_fails_as_it_does_bare() {
    let fx = Fixture::new();
    let c = start(&fx).await;
    let py = r#"
import ctypes, errno, os, socket
libc = ctypes.CDLL(None, use_errno=True)
def bind(fd, addr, n=None):
    buf = ctypes.create_string_buffer(addr, len(addr)) if addr is not None else None
    r = libc.bind(fd, buf, len(addr) if n is None else n)
    return "ok" if r == 0 else errno.errorcode[ctypes.get_errno()]
un = socket.AF_UNIX.to_bytes(2, "little") + b"no-such-folder-here/x\0"
tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
print("tcp-unix", bind(tcp.fileno(), un))
print("badfd-badaddr", bind(9999, None, 16))
f = os.open(".", os.O_RDONLY)
print("file", bind(f, un))
print("made", sorted(os.listdir(".")))
"#;
    let in_sandbox = python(&c, py).await;
    let bare = bare_python(&fx, "bare-bind", py);
    assert!(
        bare.contains("tcp-unix EAFNOSUPPORT") && bare.contains("badfd-badaddr EBADF"),
        "{bare}"
    );
    for line in bare.lines() {
        assert!(in_sandbox.contains(line), "bare says {line:?}; in the sandbox: {in_sandbox}");
    }
    fx.assert_canary();
}

/// An exclusive create (`O_CREAT | O_EXCL`) is answered by the kernel for whatever is at the
/// name, so the init takes no look there first: a FIFO gives EEXIST at once (no open that waits
/// for a reader), a symbolic link out of the root gives EEXIST and makes nothing where it
/// points, a protected name (`.envrc`) is still refused by the walls. Positive controls: a new
/// name is made and written; the FIFO opened without `O_EXCL` (`O_RDWR`) opens.
#[tokio::test]
async fn an_exclusive_create_gets_the_kernels_answer_for_whatever_is_there() {
    let fx = Fixture::new();
    super::common::own_tree(&fx.root);
    let c = start(&fx).await;
    let out_file = fx.outside.join("made-through-a-link.txt");
    let script = format!(
        r#"
import errno, os
os.makedirs("ex", exist_ok=True)
os.mkfifo("ex/pipe")
os.symlink("{out}", "ex/out")
os.symlink("{canary}", "ex/canary")
def excl(name):
    try:
        fd = os.open("ex/" + name, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644)
        os.write(fd, b"new"); os.close(fd)
        return "made"
    except OSError as e:
        return errno.errorcode[e.errno]
for name in ["pipe", "out", "canary", ".envrc", "new"]:
    print("EXCL", name, excl(name))
fd = os.open("ex/pipe", os.O_CREAT | os.O_RDWR, 0o644); os.close(fd)
print("FIFO opened")
"#,
        out = out_file.display(),
        canary = fx.outside.join("canary.txt").display()
    );
    let out = python(&c, &script).await;
    c.stop().await;
    for want in [
        "EXCL pipe EEXIST",
        "EXCL out EEXIST",
        "EXCL canary EEXIST",
        "EXCL .envrc EACCES",
        "EXCL new made",
        "FIFO opened",
    ] {
        assert!(out.contains(want), "{want} missing: {out}");
    }
    assert_eq!(std::fs::read(fx.root.join("ex/new")).unwrap(), b"new");
    assert!(!fx.root.join("ex/.envrc").exists(), "a protected name was made: {out}");
    assert!(!out_file.exists(), "a file was made through the link out of the root");
    fx.assert_canary();
}

/// A rename or a link within one folder (git's objects, Python's byte code) is located once:
/// both names in the one folder the kernel resolved, checked there. Refused: a protected name
/// (`.envrc`) by rename and by link, from the working folder and through one descriptor named
/// twice, and within a folder reached through a link out of the roots (nothing moved there).
/// A protected file that is there gets no second name (its path named from its folder's, not
/// looked up again); one that is not there fails as bare, ENOENT.
/// Positive controls: the same calls to ordinary names, and between two folders, are made.
#[tokio::test]
async fn a_rename_or_link_within_one_folder_is_checked_in_that_folder() {
    let fx = Fixture::new();
    fx.write("pre/.envrc", "export A=1\n");
    super::common::own_tree(&fx.root);
    let c = start(&fx).await;
    let script = format!(
        r#"{DO}
os.makedirs("one/sub", exist_ok=True)
os.makedirs("two", exist_ok=True)
for n in ["a", "b", "c", "d", "e"]:
    open("one/" + n, "w").write(n)
os.symlink("{outside}", "one/out")
os.chdir("one")
do("rename-envrc", lambda: os.rename("a", ".envrc"))
do("link-envrc", lambda: os.link("b", ".envrc"))
do("rename-ok", lambda: os.rename("a", "a2"))
do("link-ok", lambda: os.link("b", "b2"))
fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
do("fd-rename-envrc", lambda: os.rename("c", ".envrc", src_dir_fd=fd, dst_dir_fd=fd))
do("fd-link-envrc", lambda: os.link("d", ".envrc", src_dir_fd=fd, dst_dir_fd=fd))
do("fd-rename-ok", lambda: os.rename("c", "c2", src_dir_fd=fd, dst_dir_fd=fd))
do("sub-rename-envrc", lambda: os.rename("sub/../e", "sub/../.envrc"))
do("out-rename", lambda: os.rename("out/canary.txt", "out/moved.txt"))
do("out-link", lambda: os.link("out/canary.txt", "out/linked.txt"))
do("across-ok", lambda: os.rename("e", "../two/e"))
do("link-protected", lambda: os.link("../pre/.envrc", "../pre/copy"))
do("link-missing-protected", lambda: os.link(".envrc", "f2"))
"#,
        outside = fx.outside.display()
    );
    let out = python(&c, &script).await;
    c.stop().await;
    for want in [
        "rename-envrc EACCES",
        "link-envrc EACCES",
        "rename-ok made",
        "link-ok made",
        "fd-rename-envrc EACCES",
        "fd-link-envrc EACCES",
        "fd-rename-ok made",
        "sub-rename-envrc EACCES",
        "across-ok made",
        "link-protected EACCES",
        "link-missing-protected ENOENT",
    ] {
        assert!(out.contains(want), "{want} missing: {out}");
    }
    for refused in ["out-rename made", "out-link made"] {
        assert!(!out.contains(refused), "{refused}: {out}");
    }
    let one = fx.root.join("one");
    assert!(!one.join(".envrc").exists(), "a protected name was made: {out}");
    assert!(!fx.root.join("pre/copy").exists(), "a protected file got a second name: {out}");
    assert_eq!(std::fs::read(one.join("a2")).unwrap(), b"a");
    assert_eq!(std::fs::read(one.join("b2")).unwrap(), b"b");
    assert_eq!(std::fs::read(one.join("c2")).unwrap(), b"c");
    assert_eq!(std::fs::read(fx.root.join("two/e")).unwrap(), b"e");
    assert!(!fx.outside.join("moved.txt").exists() && !fx.outside.join("linked.txt").exists());
    fx.assert_canary();
}

/// The init names a folder by moving its own thread there and asking the kernel where it is;
/// a folder it cannot name that way (removed while a command stands in it) is named as before,
/// through its descriptor's link, and a create there fails as it does bare (ENOENT), with no
/// refusal. Positive control: back in a folder that is there, the same calls make their names.
#[tokio::test]
async fn a_create_in_a_removed_folder_fails_as_it_does_bare() {
    let fx = Fixture::new();
    super::common::own_tree(&fx.root);
    let c = start(&fx).await;
    let py = &format!(
        r#"{DO}
home = os.getcwd()
os.mkdir("gone")
os.chdir("gone")
os.rmdir("../gone")
do("excl", lambda: os.close(os.open("x", os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644)))
do("creat", lambda: os.close(os.open("x", os.O_CREAT | os.O_WRONLY, 0o644)))
do("mkdir", lambda: os.mkdir("y"))
do("symlink", lambda: os.symlink("t", "z"))
os.chdir(home)
os.mkdir("here")
os.chdir("here")
do("back-excl", lambda: os.close(os.open("x", os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644)))
do("back-mkdir", lambda: os.mkdir("y"))
"#
    );
    let in_sandbox = python(&c, py).await;
    c.stop().await;
    let bare = bare_python(&fx, "bare-removed", py);
    assert!(bare.contains("excl ENOENT") && bare.contains("back-excl made"), "{bare}");
    for line in bare.lines() {
        assert!(in_sandbox.contains(line), "bare says {line:?}; in the sandbox: {in_sandbox}");
    }
    assert!(!in_sandbox.contains("refused"), "{in_sandbox}");
    assert!(fx.root.join("here/x").is_file() && fx.root.join("here/y").is_dir());
    fx.assert_canary();
}

/// `mkdir` of a name that is there fails with EEXIST, as bare, whatever the rules say of the
/// name: the kernel looks before it asks for write access, so nothing would be made, and no
/// refusal is listed for it (an `mkdir -p .vscode/x` listed a refused `.vscode` that was
/// there). Refused still: the same protected names where they are not there. Positive control:
/// a new ordinary folder is made. Canary outside the roots.
#[tokio::test]
async fn a_folder_made_where_a_name_is_there_says_it_exists_and_refuses_nothing() {
    let fx = Fixture::new();
    git(&fx, &fx.root, &["init", "-q", "-b", "main"]);
    fx.write(".envrc", "export A=1\n");
    std::fs::create_dir_all(fx.root.join("sub")).unwrap();
    std::os::unix::fs::symlink("nowhere", fx.root.join("dangling")).unwrap();
    super::common::own_tree(&fx.root);
    let c = start(&fx).await;
    let py = &format!(
        r#"{DO}
do("git", lambda: os.mkdir(".git"))
do("envrc", lambda: os.mkdir(".envrc"))
do("dangling", lambda: os.mkdir("dangling"))
do("slash", lambda: os.mkdir("sub/"))
do("new", lambda: os.mkdir("new"))
do("again", lambda: os.mkdir("new"))
do("new-git", lambda: os.mkdir("sub/.git"))
do("new-envrc", lambda: os.mkdir("sub/.envrc"))
"#
    );
    let cmd = format!("python3 - <<'PY'\n{py}\nPY");
    let r = c.ok("bash", json!({ "command": cmd })).await;
    c.stop().await;
    let out = shown(&r);
    for want in [
        "git EEXIST",
        "envrc EEXIST",
        "dangling EEXIST",
        "slash EEXIST",
        "new made",
        "again EEXIST",
        "new-git EACCES",
        "new-envrc EACCES",
    ] {
        assert!(out.contains(want), "{want} missing: {out}");
    }
    // Bare, the names that are there say the same.
    let bare_dir = fx.dir.path().join("bare-exists");
    std::fs::create_dir_all(bare_dir.join(".git")).unwrap();
    std::fs::create_dir_all(bare_dir.join("sub")).unwrap();
    std::fs::write(bare_dir.join(".envrc"), "").unwrap();
    std::os::unix::fs::symlink("nowhere", bare_dir.join("dangling")).unwrap();
    let bare = bare_python(&fx, "bare-exists", py);
    for line in ["git EEXIST", "envrc EEXIST", "dangling EEXIST", "slash EEXIST", "again EEXIST"] {
        assert!(bare.contains(line), "bare: {line} missing: {bare}");
    }
    // Only the names that were not there are listed as refused.
    let denied = r["denied"].to_string();
    assert!(denied.contains("sub/.git") && denied.contains("sub/.envrc"), "{denied}");
    let root = fx.root.display().to_string();
    for there in [format!("{root}/.git\""), format!("{root}/.envrc\"")] {
        assert!(!denied.contains(&there), "{there} listed: {denied}");
    }
    assert!(fx.root.join("new").is_dir() && !fx.root.join("sub/.git").exists());
    assert!(fx.root.join(".envrc").is_file(), "the file that was there stays");
    fx.assert_canary();
}

/// A FIFO at a name opened with `O_CREAT` (without `O_EXCL`) is opened on a thread of the init's
/// own (it waits for its other end). That thread must make nothing: the name's check judged the
/// folder as it was, and the command can take the FIFO away meanwhile. Found attacking this: a
/// FIFO at `w/HEAD` beside `w/objects`, `HEAD` checked (no config yet), the FIFO unlinked while
/// the init held the folder's lock, then `w/refs` and `w/config` made before the init's thread
/// created `HEAD` — a git dir whose config the person's git would read (32 of 40 tries armed).
/// Now that thread's open gets ENOENT. Positive control: the window is reached (`refs` and
/// `config` made while the open of the FIFO that went away fails).
#[tokio::test]
async fn a_fifo_taken_away_during_its_check_is_not_replaced_by_a_new_file() {
    let fx = Fixture::new();
    compile_c(&fx, "race", FIFO_RACE_C);
    super::common::own_tree(&fx.root);
    let c = start(&fx).await;
    let r = shown(&c.ok("bash", json!({ "command": "./race 40 | tail -1" })).await);
    c.stop().await;
    let line = r.lines().find(|l| l.starts_with("TRIES 40 ")).unwrap_or_else(|| panic!("{r}"));
    let count = |what: &str| -> u32 {
        let at = line.split_whitespace().skip_while(|w| *w != what).nth(1);
        at.and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("{what} in {line:?}"))
    };
    assert_eq!(count("ARMED"), 0, "a git dir was armed through the FIFO's thread: {r}");
    assert!(count("REACHED") > 0, "the window was never reached (no test): {r}");
    for i in 0..40 {
        let w = fx.root.join(format!("w{i}"));
        let armed =
            w.join("HEAD").is_file() && w.join("config").exists() && w.join("refs").exists();
        assert!(!armed, "{} holds HEAD, config and refs: {r}", w.display());
    }
    fx.assert_canary();
}

const FIFO_RACE_C: &str = r#"
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

static char head[64], cfg[64], refs[64];
static atomic_int go;
static int head_err, cfg_err;

static void *open_head(void *x) {
  (void)x;
  int fd = open(head, O_WRONLY | O_CREAT, 0644);
  head_err = fd < 0 ? errno : 0;
  if (fd >= 0) close(fd);
  return NULL;
}
static void *make_config(void *x) {
  (void)x;
  while (!go) ;
  int fd = open(cfg, O_WRONLY | O_CREAT | O_EXCL, 0644);
  cfg_err = fd < 0 ? errno : 0;
  if (fd >= 0) close(fd);
  return NULL;
}


/* The init's thread that serves the calls, and every thread it starts, on CPU 1; this
   process on CPU 0: the thread it starts for the FIFO waits behind the calls served next. */
static void pin_init(void) {
  DIR *d = opendir("/proc/1/task");
  struct dirent *e;
  cpu_set_t one, zero;
  CPU_ZERO(&one); CPU_SET(1, &one); CPU_ZERO(&zero); CPU_SET(0, &zero);
  while (d && (e = readdir(d))) {
    char p[300], comm[32] = {0};
    snprintf(p, sizeof p, "/proc/1/task/%s/comm", e->d_name);
    FILE *f = fopen(p, "r");
    if (!f) continue;
    if (fgets(comm, sizeof comm, f) && !strncmp(comm, "walls", 5)) sched_setaffinity(atoi(e->d_name), sizeof one, &one);
    fclose(f);
  }
  if (d) closedir(d);
  sched_setaffinity(0, sizeof zero, &zero);
}

int main(int argc, char **argv) {
  int tries = argc > 1 ? atoi(argv[1]) : 40, reached = 0, armed = 0;
  pin_init();
  for (int i = 0; i < tries; i++) {
    char w[32], objects[64];
    snprintf(w, sizeof w, "w%d", i);
    snprintf(objects, sizeof objects, "%s/objects", w);
    snprintf(head, sizeof head, "%s/HEAD", w);
    snprintf(cfg, sizeof cfg, "%s/config", w);
    snprintf(refs, sizeof refs, "%s/refs", w);
    if (mkdir(w, 0755) || mkdir(objects, 0755) || mkfifo(head, 0644)) { perror("setup"); return 1; }
    int reader = open(head, O_RDONLY | O_NONBLOCK);  /* the FIFO opened: never waits */
    int dir = open(w, O_RDONLY | O_DIRECTORY);
    go = 0;
    pthread_t a, c;
    pthread_create(&c, NULL, make_config, NULL);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pthread_create(&a, NULL, open_head, NULL);
    /* The init holds the folder's lock while it checks HEAD (after it saw the FIFO). */
    for (;;) {
      if (flock(dir, LOCK_EX | LOCK_NB) != 0) break;
      flock(dir, LOCK_UN);
      clock_gettime(CLOCK_MONOTONIC, &t);
      if ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) > 300000000L) break;
    }
    unlink(head);
    go = 1;
    int refs_err = mkdir(refs, 0755) ? errno : 0;
    pthread_join(c, NULL);
    pthread_join(a, NULL);
    close(dir);
    if (reader >= 0) close(reader);
    struct stat st;
    int regular = stat(head, &st) == 0 && S_ISREG(st.st_mode);
    if (!refs_err && !cfg_err && head_err == ENOENT) reached++;
    if (regular && !refs_err && !cfg_err) { armed++; printf("ARMED %s\n", w); }
  }
  printf("TRIES %d REACHED %d ARMED %d\n", tries, reached, armed);
  return 0;
}
"#;
