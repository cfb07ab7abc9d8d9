//! What the host trusts is out of reach (SPEC §1 and §3, issue 30's first class): the agent
//! cannot write a policy the next daemon follows, the daemon's own binary and launcher, or the
//! home's start-up files — through the real binary, as root (commands as `nobody`) and as an
//! ordinary user (`scripts/test-as-user -- suite::trusted::`). Each refusal is paired with
//! its allowed neighbour, and the canary outside the roots is checked.

use super::common::{Client, Era, Fixture, hands_bin, needs_root, own_tree, text_of};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Stdio;

/// Runs a `hands` subcommand to its end; its exit code and its stdout and stderr together.
pub(super) fn run(mut cmd: std::process::Command) -> (i32, String) {
    let out = cmd.stdin(Stdio::null()).output().unwrap();
    let text =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code().unwrap_or(-1), text)
}

/// `hands SUB --config FILE` for each of `check`, `doctor` and `serve`: each must refuse
/// (exit 1) naming what `needles` say.
pub(super) fn all_refuse(fx: &Fixture, file: &Path, needles: &[&str]) {
    for sub in ["check", "doctor", "serve"] {
        let (code, text) = run(fx.std_command(&[sub, "--config", file.to_str().unwrap()]));
        assert_eq!(code, 1, "`hands {sub}` did not refuse {}: {text}", file.display());
        for n in needles {
            assert!(text.contains(n), "`hands {sub}`: no {n:?} in {text}");
        }
        assert!(text.contains("hint:"), "`hands {sub}` gave no remedy: {text}");
    }
}

/// A config of tools-fs and tools-shell on `root` (writable), external calls allowed; `entry`
/// replaces the root entry when given (`{ path = "...", write = true, allow_home = true }`).
pub(super) fn config_text(root: &str, entry: Option<&str>) -> String {
    let entry =
        entry.map(str::to_string).unwrap_or(format!("{{ path = \"{root}\", write = true }}"));
    format!(
        "[daemon]\nstate_dir = \"{{state}}\"\n\n\
         [[builtins]]\nid = \"tools-fs\"\ngrants = [\"filesystem\"]\nfilesystem = [{entry}]\n\n\
         [[builtins]]\nid = \"tools-shell\"\ngrants = [\"filesystem\", \"spawn\"]\n\
         filesystem = [{entry}]\nconfig = {{ trust = {{ external = \"allow\" }} }}\n"
    )
}

/// Writes `text` (with the fixture's `{root}`… replaced) at `at`, outside `Fixture::config`'s
/// one place.
pub(super) fn config_at(fx: &Fixture, at: &Path, text: &str) -> PathBuf {
    let made = fx.config(text);
    std::fs::create_dir_all(at.parent().unwrap()).unwrap();
    std::fs::rename(&made, at).unwrap();
    at.to_path_buf()
}

/// The refusal in a file tool's result: layer, what, and a remedy; the denial.
fn refused(r: &rmcp::model::CallToolResult, layer: &str, what: &str) -> Value {
    assert_eq!(r.is_error, Some(true), "not refused: {}", text_of(r));
    let d = r.structured_content.clone().unwrap_or(Value::Null)["denied"][0].clone();
    assert_eq!(d["layer"], layer, "{d}");
    assert!(d["what"].as_str().unwrap_or("").contains(what), "{d}");
    assert!(d["remedy"].as_str().unwrap_or("").len() > 10, "{d}");
    d
}

/// The attack: with no config, one `write` (no person asked) plants `daemon.toml` in
/// the project with `external = "allow"` and a root outside it; the next `hands serve`, `check`
/// and `stop` in that folder must not follow it. The current folder is never a config location.
#[tokio::test]
async fn a_daemon_toml_the_agent_writes_in_the_project_is_never_loaded() {
    let fx = Fixture::new();
    let c = Client::start_cmd(fx.command(&["serve"]), Era::Legacy).await;
    let hostile = format!(
        "[trust]\nexternal = \"allow\"\n\n[[builtins]]\nid = \"tools-fs\"\n\
         grants = [\"filesystem\"]\nfilesystem = [{{ path = \"{}\", write = true }}]\n",
        fx.outside.display()
    );
    // Positive control: the write itself lands (the project is the agent's to write).
    c.ok("write", json!({ "path": "daemon.toml", "content": hostile })).await;
    c.stop().await;
    assert_eq!(std::fs::read_to_string(fx.root.join("daemon.toml")).unwrap(), hostile);
    let (code, text) = run(fx.std_command(&["check"]));
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("config: embedded default"), "{text}");
    assert!(text.contains("external = ask") && !text.contains("external = allow"), "{text}");
    assert!(text.contains(&format!("root: {} (read-write)", fx.root.display())), "{text}");
    assert!(!text.contains(&fx.outside.display().to_string()), "{text}");
    // A fresh daemon there serves the embedded default: its banner says so, and the planted
    // root outside the project is not one.
    let (_, banner) = run(fx.std_command(&["serve"]));
    assert!(banner.contains("config: embedded default"), "{banner}");
    assert!(!banner.contains(&fx.outside.display().to_string()), "{banner}");
    let c = Client::start_cmd(fx.command(&["serve"]), Era::Legacy).await;
    let aim = fx.outside.join("planted.txt");
    let r = c.call("write", json!({ "path": aim.to_str().unwrap(), "content": "x" })).await;
    refused(&r, "roots", "planted.txt");
    c.stop().await;
    fx.assert_canary();
}

/// Variables of one run of a subcommand.
type Env<'a> = [(&'a str, &'a Path)];

/// Every subcommand finds the file as `--config F`, else `$HANDS_CONFIG`, else
/// `$XDG_CONFIG_HOME/hands/daemon.toml` (or `~/.config/hands/daemon.toml`), else the embedded
/// default — whatever `./daemon.toml` says.
#[test]
fn the_config_is_found_by_flag_then_variable_then_user_file_never_the_current_folder() {
    let fx = Fixture::new();
    let with = |write: &str| {
        format!(
            "[daemon]\nstate_dir = \"{{state}}\"\n[trust]\nwrite = \"{write}\"\n\n[[builtins]]\n\
             id = \"tools-fs\"\ngrants = [\"filesystem\"]\n\
             filesystem = [{{ path = \"{{root}}\", write = true }}]\n"
        )
    };
    let base = fx.root.parent().unwrap().to_path_buf();
    // The current folder's file is the hostile one: it must never show.
    std::fs::write(fx.root.join("daemon.toml"), "[trust]\nread = \"deny\"\n").unwrap();
    let flag = config_at(&fx, &base.join("flag.toml"), &with("deny"));
    let variable = config_at(&fx, &base.join("variable.toml"), &with("ask"));
    let user = config_at(&fx, &fx.home.join(".config/hands/daemon.toml"), &with("allow"));
    let xdg = config_at(&fx, &base.join("xdg/hands/daemon.toml"), &with("ask"));
    let check = |env: &[(&str, &Path)], args: &[&str]| {
        let mut cmd = fx.std_command(&[&["check"], args].concat());
        cmd.envs(env.iter().map(|(k, v)| (k, v.as_os_str())));
        run(cmd)
    };
    let xdg_home = base.join("xdg");
    let flagged = ["--config", flag.to_str().unwrap()];
    let var = [("HANDS_CONFIG", variable.as_path())];
    let xdg_var = [("XDG_CONFIG_HOME", xdg_home.as_path())];
    let cases: [(&Env, &[&str], &Path); 4] =
        [(&var, &flagged, &flag), (&var, &[], &variable), (&[], &[], &user), (&xdg_var, &[], &xdg)];
    for (env, args, expected) in cases {
        let (code, text) = check(env, args);
        assert_eq!(code, 0, "{text}");
        assert!(text.contains(&format!("config: {}", expected.display())), "{env:?}: {text}");
        assert!(!text.contains("read = deny"), "the current folder's file was read: {text}");
    }
    // A variable naming a missing file is an error that says where the name came from.
    let missing = base.join("missing.toml");
    let (code, text) = check(&[("HANDS_CONFIG", missing.as_path())], &[]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("$HANDS_CONFIG") && text.contains("missing.toml"), "{text}");
    // Without any of them: the embedded default (the current folder's file still unread).
    std::fs::remove_file(&user).unwrap();
    let (code, text) = check(&[], &[]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("config: embedded default") && !text.contains("read = deny"), "{text}");
}

/// `serve` refuses a config file a command or file tool of that same config could write:
/// inside a writable root (by name, through a link, through a bind mount by identity), inside
/// the commands' sandbox home, or a per-user config folder inside a writable root. `check`
/// and `doctor` refuse what `serve` refuses, and so does every other subcommand that would
/// follow the file. Positive controls: beside the roots, and inside a read-only root.
#[test]
fn a_config_its_own_commands_or_file_tools_could_write_is_refused() {
    let fx = Fixture::new();
    let root = fx.root.display().to_string();
    let text = config_text("{root}", None);
    let inside = config_at(&fx, &fx.root.join("daemon.toml"), &text);
    all_refuse(&fx, &inside, &["daemon.toml", &format!("inside the root {root}"), "rewrite"]);
    let (code, out) = run(fx.std_command(&["stop", "--config", inside.to_str().unwrap()]));
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("could rewrite"), "`hands stop` followed the file: {out}");
    // Through a link from outside the roots to the same folder.
    let alias = fx.dir.path().join("alias");
    std::os::unix::fs::symlink(&fx.root, &alias).unwrap();
    all_refuse(&fx, &alias.join("daemon.toml"), &[&format!("inside the root {root}")]);
    // In the sandbox home every command of tools-shell writes.
    let home = fx.state.join("sandbox-home/tools-shell");
    let in_home = config_at(&fx, &home.join("daemon.toml"), &text);
    all_refuse(&fx, &in_home, &["their home"]);
    // The folder hands looks in without --config, inside a writable root: a command could
    // make the daemon.toml every later `hands serve` follows.
    let conf = fx.home.join(".config");
    std::fs::create_dir_all(&conf).unwrap();
    let beside = fx.root.parent().unwrap().join("beside.toml");
    let looks = config_at(&fx, &beside, &config_text(conf.to_str().unwrap(), None));
    all_refuse(&fx, &looks, &["takes its configuration from", "hands"]);
    // Positive controls: the same config beside the roots, and in a read-only root.
    let ok = config_at(&fx, &beside, &text);
    let (code, out) = run(fx.std_command(&["check", "--config", ok.to_str().unwrap()]));
    assert_eq!(code, 0, "{out}");
    let ro = config_text("{root}", Some("{ path = \"{root}\" }"));
    let ro = config_at(&fx, &fx.root.join("ro.toml"), &ro);
    let (code, out) = run(fx.std_command(&["check", "--config", ro.to_str().unwrap()]));
    assert_eq!(code, 0, "a config in a read-only root is the person's: {out}");
    fx.assert_canary();
}

/// The same, resolved by identity: a bind mount of the root elsewhere is the root.
#[test]
#[ignore = "needs root (mount --bind); run with --include-ignored"]
fn a_config_reached_through_a_bind_mount_of_a_root_is_refused() {
    if !needs_root("a_config_reached_through_a_bind_mount_of_a_root_is_refused", "mount --bind") {
        return;
    }
    let fx = Fixture::new();
    let mount = fx.dir.path().join("mounted");
    std::fs::create_dir(&mount).unwrap();
    let st = std::process::Command::new("mount").arg("--bind").arg(&fx.root).arg(&mount).status();
    assert!(st.unwrap().success(), "mount --bind");
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(mount.clone());
    config_at(&fx, &fx.root.join("daemon.toml"), &config_text("{root}", None));
    let seen = mount.join("daemon.toml");
    assert!(seen.is_file());
    all_refuse(&fx, &seen, &[&format!("inside the root {}", fx.root.display())]);
    fx.assert_canary();
}

/// `hands` and (with `launcher`) `hands-sandbox` copied into `dir`; as root, given to the
/// commands' user with their folder, so that only the protection stops a command's write.
/// The copy of `hands`.
fn install(dir: &Path, launcher: bool) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let copy = dir.join("hands");
    std::fs::copy(hands_bin(), &copy).unwrap();
    if launcher {
        std::fs::copy(hands_bin().with_file_name("hands-sandbox"), dir.join("hands-sandbox"))
            .unwrap();
    }
    own_tree(dir);
    copy
}

/// The README's `cargo run` from a checkout, as an attack: `hands` and its launcher lie in a
/// writable root (with cargo's hard link of the binary beside them). A command cannot remove,
/// rename over, relink or rewrite either, nor carry their folder aside; the file tools refuse
/// them, also through a hard link and a symbolic link; doctor warns. Positive control: a
/// sibling file in the same folder is written, renamed and removed.
#[tokio::test]
async fn the_daemons_binary_and_launcher_in_a_writable_root_are_read_only() {
    let fx = Fixture::new();
    let bin = fx.root.join("bin");
    let hands = install(&bin, true);
    std::fs::hard_link(&hands, bin.join("hands-link")).unwrap();
    std::os::unix::fs::symlink("bin/hands", fx.root.join("alias")).unwrap();
    let before = |p: &str| std::fs::read(bin.join(p)).unwrap();
    let (h0, l0) = (before("hands"), before("hands-sandbox"));
    let config = fx.config(&config_text("{root}", None));
    let c = Client::start_bin(&fx, &hands, &config, Era::Legacy, &[]).await;
    // Paths from the root (the command's folder), as the walls' report resolves them.
    let script = "echo ok > bin/sibling && mv bin/sibling bin/sibling2 && rm bin/sibling2 && \
                  echo ok > bin/sibling && echo CONTROL; echo new > new.bin; \
                  mv -f new.bin bin/hands-sandbox && echo REPLACED; rm -f bin/hands && \
                  echo REMOVED; ln -f new.bin bin/hands && echo RELINKED; \
                  (echo x > bin/hands-link) && echo WROTE; cp new.bin bin/hands-sandbox && \
                  echo COPIED; mv bin bin.old && echo MOVED";
    let r = c.ok("bash", json!({ "command": script })).await;
    let said = format!("{}{}", r["stdout"], r["stderr"]);
    assert!(said.contains("CONTROL"), "the sibling was not writable: {r}");
    for m in ["REPLACED", "REMOVED", "RELINKED", "WROTE", "COPIED", "MOVED"] {
        assert!(!said.contains(m), "{m}: {r}");
    }
    assert_eq!(before("hands"), h0, "the binary changed");
    assert_eq!(before("hands-sandbox"), l0, "the launcher changed");
    assert!(bin.join("sibling").is_file() && !fx.root.join("bin.old").exists());
    // The result names the wall and what it protects.
    let denied = r["denied"].as_array().cloned().unwrap_or_default();
    assert!(
        denied.iter().any(|d| d["why"].as_str().unwrap_or("").contains("the host trusts it")
            && d["remedy"].as_str().unwrap_or("").contains("cargo install")),
        "{r}"
    );
    // The file tools: by name, by another name of the same file, through a link.
    for (path, what) in [
        ("bin/hands-sandbox", "hands-sandbox"),
        ("bin/hands-link", "hands-link"),
        ("alias", "hands"),
    ] {
        let r = c.call("write", json!({ "path": path, "content": "x" })).await;
        let d = refused(&r, "host-trusted paths", what);
        assert!(d["why"].as_str().unwrap().contains("the daemon's"), "{d}");
    }
    c.ok("write", json!({ "path": "bin/sibling3", "content": "x" })).await;
    // Each refusal is in the audit log, saying what the file is.
    let audit = fx.audit_records();
    let refusals = audit.iter().filter(|r| {
        let o = r["outcome"].as_str().unwrap_or("");
        r["tool"] == "write" && o.starts_with("refused: ") && o.contains("the host trusts it")
    });
    assert_eq!(refusals.count(), 3, "{audit:?}");
    assert_eq!(before("hands"), h0);
    assert_eq!(before("hands-sandbox"), l0);
    c.stop().await;
    // doctor warns (and does not fail for it).
    let mut doctor = fx.command_of(&hands, &["doctor", "--config", config.to_str().unwrap()]);
    let said = String::from_utf8_lossy(&doctor.output().await.unwrap().stdout).into_owned();
    assert!(said.contains("warning: the daemon's own binary"), "{said}");
    assert!(said.contains("warning: the daemon's launcher"), "{said}");
    fx.assert_canary();
}

/// With `hands` alone in a writable root, its launcher's name is kept free: the file tools
/// refuse to create `hands-sandbox` beside it (a command's create: the next test).
#[tokio::test]
async fn no_file_tool_can_create_the_launcher_beside_hands() {
    let fx = Fixture::new();
    let hands = install(&fx.root.join("bin"), false);
    let config = fx.config(&config_text("{root}", None));
    let c = Client::start_bin(&fx, &hands, &config, Era::Legacy, &[]).await;
    let r = c.call("write", json!({ "path": "bin/hands-sandbox", "content": "#!/bin/sh\n" })).await;
    refused(&r, "host-trusted paths", "hands-sandbox");
    assert!(!fx.root.join("bin/hands-sandbox").exists());
    c.ok("write", json!({ "path": "bin/other", "content": "x" })).await;
    c.stop().await;
    fx.assert_canary();
}

/// A command cannot create `hands-sandbox` beside a `hands` that lies in a writable root (the
/// next daemon would run it as its launcher, outside every wall). Positive control: a sibling.
///
/// DEPENDENCY: a missing protected path is kept from being created by the in-run walls, which
/// branch `i30-git` makes refuse absolute protected paths that do not exist yet; this fails
/// until that branch is merged (the daemon already puts the path in the spec's `protected`).
#[tokio::test]
async fn a_command_cannot_create_the_launcher_beside_hands() {
    let fx = Fixture::new();
    let hands = install(&fx.root.join("bin"), false);
    let config = fx.config(&config_text("{root}", None));
    let c = Client::start_bin(&fx, &hands, &config, Era::Legacy, &[]).await;
    let script = "echo ok > bin/sibling && echo CONTROL; printf '#!/bin/sh\\n' > bin/hands-sandbox \
                  && echo PLANTED; echo x > new && mv new bin/hands-sandbox && echo MOVED";
    let r = c.ok("bash", json!({ "command": script })).await;
    let said = r["stdout"].as_str().unwrap();
    assert!(said.contains("CONTROL"), "{r}");
    assert!(!said.contains("PLANTED") && !said.contains("MOVED"), "{r}");
    assert!(!fx.root.join("bin/hands-sandbox").exists(), "{r}");
    c.stop().await;
    fx.assert_canary();
}

/// Defence in depth for a root daemon: a `hands-sandbox` beside `hands` that is not its owner's
/// (one a command running as `run_as` made) is never run; the daemon starts commands through
/// `hands __sandbox` itself. The planted one would write beside the canary.
#[tokio::test]
#[ignore = "needs root (files of another owner); run with --include-ignored"]
async fn a_launcher_another_user_owns_is_passed_over() {
    if !needs_root("a_launcher_another_user_owns_is_passed_over", "files of another owner") {
        return;
    }
    let fx = Fixture::new();
    let bin = fx.root.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let hands = bin.join("hands");
    std::fs::copy(hands_bin(), &hands).unwrap();
    let planted = bin.join("hands-sandbox");
    let aim = fx.outside.join("pwned");
    std::fs::write(&planted, format!("#!/bin/sh\ntouch {}\n", aim.display())).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o755)).unwrap();
    // Another owner than the daemon's in every run (own() gives nothing away over root-owned
    // roots).
    let id = super::common::COMMAND_UID;
    std::os::unix::fs::lchown(&planted, Some(id), Some(id)).unwrap();
    let config = fx.config(&config_text("{root}", None));
    let c = Client::start_bin(&fx, &hands, &config, Era::Legacy, &[]).await;
    let r = c.ok("bash", json!({ "command": "tr '\\0' ' ' < /proc/1/cmdline" })).await;
    assert_eq!(r["stdout"].as_str().unwrap().trim_end(), format!("{} __sandbox", hands.display()));
    c.stop().await;
    assert!(!aim.exists(), "the planted launcher ran");
    fx.assert_canary();
}

/// A writable root that is or holds the daemon user's home is refused (by `check`, `doctor`
/// and `serve`) unless its entry says `allow_home = true`; so is the embedded default run from
/// the home, whose remedy is a project folder. Positive controls: the home read-only, the home
/// with `allow_home`, the embedded default from the project; the brake still works from home.
#[test]
fn a_writable_root_holding_the_home_needs_allow_home() {
    let fx = Fixture::new();
    let home = fx.home.display().to_string();
    let cfg = fx.config(&config_text(&home, None));
    all_refuse(&fx, &cfg, &["filesystem[0].path", &home, "allow_home = true", "project folders"]);
    let above = fx.dir.path().display().to_string();
    let cfg = fx.config(&config_text(&above, None));
    all_refuse(&fx, &cfg, &["(or holds) your home", "allow_home"]);
    let read_only = format!("{{ path = \"{home}\" }}");
    let cfg = fx.config(&config_text(&home, Some(&read_only)));
    let (code, out) = run(fx.std_command(&["check", "--config", cfg.to_str().unwrap()]));
    assert_eq!(code, 0, "{out}");
    let allowed = format!("{{ path = \"{home}\", write = true, allow_home = true }}");
    let cfg = fx.config(&config_text(&home, Some(&allowed)));
    let (code, out) = run(fx.std_command(&["check", "--config", cfg.to_str().unwrap()]));
    assert_eq!(code, 0, "{out}");
    // No config, run from the home.
    for sub in ["check", "serve"] {
        let mut cmd = fx.std_command(&[sub]);
        cmd.current_dir(&fx.home);
        let (code, out) = run(cmd);
        assert_eq!(code, 1, "`hands {sub}` from the home: {out}");
        assert!(out.contains("run it from a project folder"), "{out}");
    }
    let (code, out) = run(fx.std_command(&["check"]));
    assert_eq!(code, 0, "from the project: {out}");
    let mut stop = fx.std_command(&["stop"]);
    stop.current_dir(&fx.home);
    let (_, out) = run(stop);
    assert!(out.contains("no running daemon") && !out.contains("your home"), "{out}");
    fx.assert_canary();
}

/// The fixture's home with a start-up surface (as root, given to the commands' user, so only
/// the protection stops a write), and a config of both modules on the home with `allow_home`.
fn home_with_surface(fx: &Fixture) -> PathBuf {
    let h = &fx.home;
    for (rel, text) in [
        (".bashrc", "orig-bashrc\n"),
        (".gitconfig", "[user]\n\tname = Person\n"),
        (".local/bin/tool", "#!/bin/sh\necho tool\n"),
        (".config/git/ignore", "*.orig\n"),
        ("dotfiles/zshrc", "orig-zshrc\n"),
        ("tools/bin/.keep", ""),
        ("project/README", "project\n"),
    ] {
        std::fs::create_dir_all(h.join(rel).parent().unwrap()).unwrap();
        std::fs::write(h.join(rel), text).unwrap();
    }
    std::os::unix::fs::symlink("dotfiles/zshrc", h.join(".zshrc")).unwrap();
    own_tree(h);
    let entry = format!("{{ path = \"{}\", write = true, allow_home = true }}", h.display());
    fx.config(&config_text("", Some(&entry)))
}

/// The files a test of the home's surface checks, with their content now.
fn surface_now(fx: &Fixture) -> Vec<(String, Option<String>)> {
    let files = [
        ".bashrc",
        ".gitconfig",
        ".local/bin/tool",
        ".local/bin/git",
        ".config/git/ignore",
        ".config/git/config",
        "dotfiles/zshrc",
        "tools/bin/git",
    ];
    files.iter().map(|f| (f.to_string(), std::fs::read_to_string(fx.home.join(f)).ok())).collect()
}

/// With `allow_home = true` the home's start-up surface that exists is read-only to commands
/// and to file tools: shell rc files, `~/.gitconfig`, `~/.config/git`, `~/.local/bin`, a folder
/// of the person's PATH inside the home, and a dotfile that is a link (its target). Positive
/// controls: a note in the home and a file in a project there are written.
#[tokio::test]
async fn with_allow_home_the_start_up_surface_is_read_only() {
    let fx = Fixture::new();
    let config = home_with_surface(&fx);
    let h = fx.home.display().to_string();
    let path = format!("{h}/tools/bin:{}", std::env::var("PATH").unwrap_or_default());
    let c = Client::start_with_env(&fx, &config, Era::Legacy, &[("PATH", &path)]).await;
    let before = surface_now(&fx);
    let script = format!(
        "H={h}; echo ok > $H/notes.txt && echo ok > $H/project/x.txt && echo CONTROL; \
         echo evil >> $H/.bashrc && echo W1; echo evil > $H/.gitconfig && echo W2; \
         mv $H/.bashrc $H/bashrc.old && echo W3; rm -f $H/.gitconfig && echo W4; \
         echo evil > $H/.local/bin/tool && echo W5; echo evil > $H/.local/bin/git && echo W6; \
         echo evil > $H/.config/git/config && echo W7; echo evil > $H/dotfiles/zshrc && echo W8; \
         echo evil > $H/tools/bin/git && echo W9; mv $H/.local $H/local.old && echo W10"
    );
    let r = c.ok("bash", json!({ "command": script })).await;
    let said = r["stdout"].as_str().unwrap();
    assert!(said.contains("CONTROL"), "{r}");
    assert!(!said.contains('W'), "a start-up file was changed: {r}");
    assert_eq!(surface_now(&fx), before, "{r}");
    let denied = r["denied"].as_array().cloned().unwrap_or_default();
    assert!(
        denied.iter().any(|d| d["remedy"].as_str().unwrap_or("").contains("allow_home")),
        "{r}"
    );
    for p in [
        ".bashrc",
        ".gitconfig",
        ".local/bin/git",
        ".config/git/config",
        ".config/systemd/user/evil.service",
        ".config/autostart/evil.desktop",
        ".profile",
        ".zshrc",
        "dotfiles/zshrc",
        "tools/bin/git",
        ".config/hands/daemon.toml",
    ] {
        let at = fx.home.join(p);
        let r = c.call("write", json!({ "path": at.to_str().unwrap(), "content": "evil" })).await;
        // `~/.gitconfig` and `~/.config/git` are also what the host's git reads (protected
        // paths, once git's config is followed as git resolves it): either layer may speak.
        let layer = r.structured_content.clone().unwrap_or(Value::Null)["denied"][0]["layer"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_default();
        let layer =
            if layer == "protected paths" { "protected paths" } else { "host-trusted paths" };
        refused(&r, layer, p.rsplit('/').next().unwrap());
    }
    assert_eq!(surface_now(&fx), before);
    assert!(!fx.home.join(".config/systemd").exists() && !fx.home.join(".profile").exists());
    c.ok("write", json!({ "path": format!("{h}/project/y.txt"), "content": "y" })).await;
    c.stop().await;
    fx.assert_canary();
}

/// Start-up files that do not exist yet cannot be created by a command either (a systemd user
/// unit, `~/.profile`), nor under a name a case-folding folder hands over as theirs
/// (`~/.PROFILE`, by a command or the file tools: decision 0094). Positive control: a new file
/// beside them.
///
/// DEPENDENCY: kept from being created by the in-run walls, which branch `i30-git` makes refuse
/// absolute protected paths that do not exist yet (this branch puts them in the spec's
/// `protected` list); this fails until that branch is merged.
#[tokio::test]
async fn with_allow_home_a_missing_start_up_file_cannot_be_created() {
    let fx = Fixture::new();
    let config = home_with_surface(&fx);
    let c = Client::start(&fx, &config).await;
    let h = fx.home.display().to_string();
    let script = format!(
        "H={h}; echo ok > $H/fresh.txt && echo CONTROL; mkdir -p $H/.config/systemd/user && \
         echo evil > $H/.config/systemd/user/evil.service && echo UNIT; \
         echo evil > $H/.profile && echo PROFILE; echo evil > $H/.PROFILE && echo UPPER; \
         mkdir -p $H/.SSH && echo evil > $H/.SSH/authorized_keys && echo SSH"
    );
    let r = c.ok("bash", json!({ "command": script })).await;
    let said = r["stdout"].as_str().unwrap();
    assert!(said.contains("CONTROL"), "{r}");
    for word in ["UNIT", "PROFILE", "UPPER", "SSH"] {
        assert!(!said.contains(word), "{word}: {r}");
    }
    assert!(!fx.home.join(".config/systemd/user/evil.service").exists(), "{r}");
    assert!(!fx.home.join(".profile").exists(), "{r}");
    for p in [".PROFILE", ".Config/Systemd/User/evil.service", ".SSH/authorized_keys"] {
        let r = c.call("write", json!({ "path": format!("{h}/{p}"), "content": "evil" })).await;
        assert_eq!(r.is_error, Some(true), "{p}: {}", text_of(&r));
        assert!(std::fs::symlink_metadata(fx.home.join(p)).is_err(), "{p} was made");
    }
    c.ok("write", json!({ "path": format!("{h}/fresh2.txt"), "content": "ok" })).await;
    c.stop().await;
    fx.assert_canary();
}

/// With `allow_home = true`, the state dir hands defaults to (`~/.local/state/hands`, where every
/// daemon of the person's without a `state_dir` keeps its standing permissions and audit log)
/// is read-only to commands and file tools, existing or not, though this daemon's state dir is
/// elsewhere. Found by session 40's attack pass: a command wrote `approvals.json` there and
/// the person's other daemon then ran `bash` unasked. Positive control: a folder beside it.
#[tokio::test]
async fn with_allow_home_the_default_state_dir_is_read_only() {
    let fx = Fixture::new();
    let config = home_with_surface(&fx);
    let state = fx.home.join(".local/state/hands");
    std::fs::create_dir_all(&state).unwrap();
    std::fs::write(state.join("audit.jsonl"), "").unwrap();
    own_tree(&fx.home);
    // Started with another $XDG_STATE_HOME (a systemd unit's, an editor's): the person's plain
    // daemons still keep theirs in the home (found by the attack pass on 0103).
    let xdg = fx.dir.path().join("xdg-state");
    let env = [("XDG_STATE_HOME", xdg.to_str().unwrap())];
    let c = Client::start_with_env(&fx, &config, Era::Legacy, &env).await;
    let s = state.display().to_string();
    let script = format!(
        "mkdir -p {s}/../other && echo ok > {s}/../other/x && echo CONTROL; \
         echo '[]' > {s}/approvals.json && echo NEW; echo x >> {s}/audit.jsonl && echo OLD; \
         mv {s} {s}.old && echo MOVED"
    );
    let r = c.ok("bash", json!({ "command": script })).await;
    let said = r["stdout"].as_str().unwrap();
    assert!(said.contains("CONTROL"), "{r}");
    for word in ["NEW", "OLD", "MOVED"] {
        assert!(!said.contains(word), "{word}: {r}");
    }
    let at = state.join("approvals.json");
    let w = c.call("write", json!({ "path": at.to_str().unwrap(), "content": "[]" })).await;
    refused(&w, "host-trusted paths", "approvals.json");
    assert!(!at.exists(), "{r}");
    assert_eq!(std::fs::read_to_string(state.join("audit.jsonl")).unwrap(), "");
    c.stop().await;
    fx.assert_canary();
}

/// `check` refuses what `serve` refuses for the state dir and the token files as well: a
/// token file a command or file tool could read, a state dir inside a root.
#[test]
fn check_refuses_a_token_file_or_state_dir_that_serve_refuses() {
    let fx = Fixture::new();
    let token = fx.write("agent.token", "0123456789abcdef0123456789\n");
    let http = format!(
        "[server.http]\nlisten = \"127.0.0.1:0\"\n[[server.http.clients]]\nname = \"agent\"\n\
         token_file = \"{}\"\n\n",
        token.display()
    );
    let cfg = fx.config(&format!("{http}{}", config_text("{root}", None)));
    all_refuse(&fx, &cfg, &["token_file", "call the tools as `agent`", "inside the root"]);
    let dash = format!("[server.dashboard]\ntoken_file = \"{}\"\n\n", token.display());
    let cfg = fx.config(&format!("{dash}{}", config_text("{root}", None)));
    all_refuse(&fx, &cfg, &["[server.dashboard]", "token_file"]);
    let state = config_text("{root}", None).replace("\"{state}\"", "\"{root}/state\"");
    let cfg = fx.config(&state);
    all_refuse(&fx, &cfg, &["state dir", "lies inside the root"]);
    // Positive control: the token beside the roots.
    let beside = fx.root.parent().unwrap().join("agent.token");
    std::fs::write(&beside, "0123456789abcdef0123456789\n").unwrap();
    let cfg = fx.config(&format!(
        "{}{}",
        http.replace(&token.display().to_string(), &beside.display().to_string()),
        config_text("{root}", None)
    ));
    let (code, out) = run(fx.std_command(&["check", "--config", cfg.to_str().unwrap()]));
    assert_eq!(code, 0, "{out}");
    assert!(!fx.root.join("state").exists());
    fx.assert_canary();
}
