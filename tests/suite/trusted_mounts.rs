//! What the host trusts, reachable from a root under another name the path does not show (the
//! tenth attack pass): the state dir bind-mounted into a root let one `write` of
//! `bst/approvals.json` grant standing permissions, so every later `bash` ran without a person;
//! `approvals.json` hard-linked into a root was rewritten in place by one command; a token
//! file linked or mounted into a root was read by `read`. `check`, `doctor` and `serve`
//! refuse a state dir, config or token file seen through a mount in a root, and a trusted file
//! with a second name; the standing permissions are checked again each time they are read.
//! Through the real binary; each refusal with its positive control, and the canary.

use super::common::{Client, Era, Fixture, Person, needs_root, text_of};
use super::trusted::{all_refuse, config_at, config_text, run};
use serde_json::json;
use std::path::{Path, PathBuf};

/// `hands check --config FILE` exits 0.
fn checks(fx: &Fixture, file: &Path) {
    let (code, out) = run(fx.std_command(&["check", "--config", file.to_str().unwrap()]));
    assert_eq!(code, 0, "{}: {out}", file.display());
}

/// A bind mount, taken down (lazily) when dropped, a failed assertion included.
struct Bind(PathBuf);

impl Bind {
    fn new(from: &Path, at: &Path) -> Bind {
        std::fs::create_dir_all(at).unwrap();
        let st = std::process::Command::new("mount").arg("--bind").arg(from).arg(at).status();
        assert!(st.unwrap().success(), "mount --bind {} {}", from.display(), at.display());
        Bind(at.to_path_buf())
    }
}

impl Drop for Bind {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

#[test]
fn a_state_dir_config_or_token_mounted_into_a_root_is_refused() {
    if !needs_root("trusted_mounts", "bind mounts need root") {
        return;
    }
    let fx = Fixture::new();
    let base = fx.dir.path().canonicalize().unwrap();
    // The state dir, bound into the writable root.
    let cfg = fx.config(&config_text("{root}", None));
    let bind = Bind::new(&fx.state, &fx.root.join("bst"));
    all_refuse(&fx, &cfg, &["the state dir", "through the mount at", "bst"]);
    drop(bind);
    checks(&fx, &cfg);
    // The folder of the config, bound into the writable root.
    let real = config_at(&fx, &base.join("cfgs/daemon.toml"), &config_text("{root}", None));
    let bind = Bind::new(&base.join("cfgs"), &fx.root.join("bcfg"));
    all_refuse(
        &fx,
        &real,
        &["this configuration lies inside the root", "through the mount at", "bcfg"],
    );
    drop(bind);
    checks(&fx, &real);
    // A token file's folder, bound into a read-only root: reading is the leak.
    let (tok, lib) = (base.join("tok"), base.join("lib"));
    std::fs::create_dir_all(&tok).unwrap();
    std::fs::create_dir_all(&lib).unwrap();
    std::fs::write(tok.join("agent.token"), "0123456789abcdef0123456789\n").unwrap();
    let entry =
        format!("{{ path = \"{{root}}\", write = true }}, {{ path = \"{}\" }}", lib.display());
    let http = format!(
        "[server.http]\nlisten = \"127.0.0.1:0\"\n[[server.http.clients]]\nname = \"agent\"\n\
         token_file = \"{}\"\n\n",
        tok.join("agent.token").display()
    );
    let cfg = fx.config(&format!("{http}{}", config_text("{root}", Some(&entry))));
    let bind = Bind::new(&tok, &lib.join("tk"));
    all_refuse(&fx, &cfg, &["token_file", "through the mount at", "tk", "read-only"]);
    drop(bind);
    checks(&fx, &cfg);
    fx.assert_canary();
}

#[test]
fn a_token_file_or_config_with_a_second_name_is_refused() {
    let fx = Fixture::new();
    let base = fx.dir.path().canonicalize().unwrap();
    let tok = base.join("tok/agent.token");
    std::fs::create_dir_all(tok.parent().unwrap()).unwrap();
    std::fs::write(&tok, "0123456789abcdef0123456789\n").unwrap();
    let http = format!(
        "[server.http]\nlisten = \"127.0.0.1:0\"\n[[server.http.clients]]\nname = \"agent\"\n\
         token_file = \"{}\"\n\n",
        tok.display()
    );
    let cfg = config_at(
        &fx,
        &base.join("cfgs/daemon.toml"),
        &format!("{http}{}", config_text("{root}", None)),
    );
    // Positive control: one name each.
    checks(&fx, &cfg);
    std::fs::hard_link(&tok, fx.root.join("ag.token")).unwrap();
    all_refuse(&fx, &cfg, &["token_file", "has 2 names", "-samefile", "agent.token"]);
    std::fs::remove_file(fx.root.join("ag.token")).unwrap();
    checks(&fx, &cfg);
    std::fs::hard_link(&cfg, fx.root.join("d.toml")).unwrap();
    all_refuse(&fx, &cfg, &["the daemon's configuration", "has 2 names", "-samefile"]);
    std::fs::remove_file(fx.root.join("d.toml")).unwrap();
    checks(&fx, &cfg);
    fx.assert_canary();
}

/// A standing permission for `bash` honoured while `approvals.json` has one name; once a
/// second name is made (after start, where a command could write it), `bash` asks the person
/// again (who declines here), and `hands approvals list` and `hands check` name the problem.
#[tokio::test]
async fn standing_permissions_with_a_second_name_made_after_start_are_not_honoured() {
    let fx = Fixture::new();
    let text = config_text("{root}", None).replace("external = \"allow\"", "external = \"ask\"");
    let cfg = fx.config(&text);
    let always = fx.state.join("approvals.json");
    let granted = json!([{ "id": "p-000000000001", "client": "stdio", "module": "tools-shell",
        "tool": "bash", "version": env!("CARGO_PKG_VERSION"), "granted": 1 }]);
    std::fs::write(&always, granted.to_string()).unwrap();
    let person = Person::new(None, true);
    let c = Client::start_as(&fx, &cfg, Era::Legacy, person.clone()).await;
    let bash = |f: &str| json!({ "command": format!("echo ran > {f}") });
    // Positive control: the standing permission runs it without a question.
    c.ok("bash", bash("one.txt")).await;
    assert_eq!(person.times_asked(), 0);
    assert!(fx.root.join("one.txt").exists());
    // A second name, made after start.
    std::fs::hard_link(&always, fx.root.join("ap.json")).unwrap();
    let r = c.call("bash", bash("two.txt")).await;
    assert_eq!(r.is_error, Some(true), "ran without a person: {}", text_of(&r));
    assert_eq!(person.times_asked(), 1, "the person was not asked");
    assert!(!fx.root.join("two.txt").exists());
    let (code, out) =
        run(fx.std_command(&["approvals", "list", "--config", cfg.to_str().unwrap()]));
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("approvals.json has 2 names") && out.contains("-samefile"), "{out}");
    let (code, out) = run(fx.std_command(&["check", "--config", cfg.to_str().unwrap()]));
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("the standing permissions") && out.contains("2 names"), "{out}");
    // The second name removed: honoured again, without a question.
    std::fs::remove_file(fx.root.join("ap.json")).unwrap();
    c.ok("bash", bash("three.txt")).await;
    assert_eq!(person.times_asked(), 1);
    c.stop().await;
    checks(&fx, &cfg);
    fx.assert_canary();
}
