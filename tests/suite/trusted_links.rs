//! What the host trusts, named through a link a command could re-point (the eighth attack
//! pass): `--config root/lnk/daemon.toml` with `lnk` pointing out of the root passed, and one
//! command re-pointed `lnk` at a daemon.toml it wrote, which the next `hands serve` followed
//! (its own roots, its own trust); a state dir reached the same way let a command write the
//! standing approvals, so the next `bash` ran without a question. Every path the daemon trusts
//! — its config, state dir, token files, roots — is refused by `check`, `doctor` and `serve`
//! when a link on its way (or a folder left again by `..`) lies in a writable root. Through the
//! real binary; each refusal with its positive control (the same file named by its real path),
//! and the canary.

use super::common::Fixture;
use super::trusted::{all_refuse, config_at, config_text, run};
use std::os::unix::fs::symlink;

/// `hands check --config FILE` exits 0.
fn checks(fx: &Fixture, file: &std::path::Path) {
    let (code, out) = run(fx.std_command(&["check", "--config", file.to_str().unwrap()]));
    assert_eq!(code, 0, "{}: {out}", file.display());
}

#[test]
fn a_config_behind_a_link_in_a_writable_root_is_refused() {
    let fx = Fixture::new();
    let cfgs = fx.dir.path().join("cfgs");
    let real = config_at(&fx, &cfgs.join("daemon.toml"), &config_text("{root}", None));
    symlink(&cfgs, fx.root.join("lnk")).unwrap();
    let via = fx.root.join("lnk/daemon.toml");
    let link = fx.root.join("lnk").display().to_string();
    all_refuse(&fx, &via, &["this configuration lies behind the link", &link, "inside the root"]);
    // Positive control: the same file by its own name.
    checks(&fx, &real);
    fx.assert_canary();
}

#[test]
fn a_state_dir_behind_a_link_in_a_writable_root_is_refused() {
    let fx = Fixture::new();
    let st = fx.dir.path().join("st");
    std::fs::create_dir_all(st.join("state")).unwrap();
    symlink(&st, fx.root.join("slnk")).unwrap();
    std::fs::create_dir(fx.root.join("sub")).unwrap();
    let beside = fx.dir.path().join("beside");
    let with_state = |state: &str| {
        let text = config_text("{root}", None).replace("\"{state}\"", &format!("\"{state}\""));
        config_at(&fx, &beside.join("daemon.toml"), &text)
    };
    let cfg = with_state("{root}/slnk/state");
    all_refuse(&fx, &cfg, &["the state dir", "is reached through the link", "slnk"]);
    // Into a folder of the root and out again: the folder could become a link.
    let cfg = with_state("{root}/sub/../../st/state");
    all_refuse(&fx, &cfg, &["the state dir", "is reached through the link", "sub"]);
    // Positive control: the same folder by its real path.
    checks(&fx, &with_state(st.join("state").to_str().unwrap()));
    fx.assert_canary();
}

#[test]
fn a_token_file_behind_a_link_in_a_writable_root_is_refused() {
    let fx = Fixture::new();
    let tok = fx.dir.path().join("tok");
    std::fs::create_dir(&tok).unwrap();
    std::fs::write(tok.join("agent.token"), "0123456789abcdef0123456789\n").unwrap();
    symlink(&tok, fx.root.join("tlnk")).unwrap();
    let with_token = |file: &std::path::Path| {
        let http = format!(
            "[server.http]\nlisten = \"127.0.0.1:0\"\n[[server.http.clients]]\nname = \
             \"agent\"\ntoken_file = \"{}\"\n\n",
            file.display()
        );
        fx.config(&format!("{http}{}", config_text("{root}", None)))
    };
    let cfg = with_token(&fx.root.join("tlnk/agent.token"));
    all_refuse(&fx, &cfg, &["token_file", "behind the link", "tlnk"]);
    checks(&fx, &with_token(&tok.join("agent.token")));
    fx.assert_canary();
}

/// A root named through a link in a writable root: a command could point it at `/etc`, and
/// the next daemon would serve that (with write, if the entry says so).
#[test]
fn a_root_named_through_a_link_in_a_writable_root_is_refused() {
    let fx = Fixture::new();
    let lib = fx.dir.path().join("lib");
    std::fs::create_dir(&lib).unwrap();
    symlink(&lib, fx.root.join("rlnk")).unwrap();
    let with_root = |second: &str| {
        let entry = format!("{{ path = \"{{root}}\", write = true }}, {{ path = \"{second}\" }}");
        fx.config(&config_text("{root}", Some(&entry)))
    };
    let cfg = with_root("{root}/rlnk");
    all_refuse(&fx, &cfg, &["the root `", "is reached through the link", "rlnk", "writable root"]);
    checks(&fx, &with_root(lib.to_str().unwrap()));
    fx.assert_canary();
}
