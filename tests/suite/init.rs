//! `hands init` (issue 36 point 2): a Rust user's toolchain is there. With the embedded
//! default, rustup's `cargo` was "command not found" in `bash`; `hands init` writes the
//! person's `daemon.toml` with the toolchains it finds, read-only, and never a folder that
//! holds `hands` itself or a credential.

use super::common::{Client, Fixture, text_of};
use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// An executable shell script at `path` that prints `line`.
fn program(path: &Path, line: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, format!("#!/bin/sh\necho '{line}'\n")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Every folder from `dir` up to the fixture's base readable by everyone (a root daemon's
/// commands run as `nobody`).
fn open_up(fx: &Fixture, dir: &Path) {
    let base = fx.root.parent().unwrap();
    for a in dir.ancestors().take_while(|a| a.starts_with(base)) {
        std::fs::set_permissions(a, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

#[tokio::test]
async fn init_writes_a_config_whose_commands_find_rustup_and_node() {
    let fx = Fixture::new();
    // rustup as it installs itself: toolchains in ~/.rustup, proxies in ~/.cargo/bin, and a
    // credential beside them in ~/.cargo (which must never become a root).
    let tc = fx.home.join(".rustup/toolchains/stable-x86_64-unknown-linux-gnu");
    program(&tc.join("bin/cargo"), "cargo 9.9.9 (fixture)");
    std::fs::write(
        fx.home.join(".rustup/settings.toml"),
        "default_toolchain = \"stable-x86_64-unknown-linux-gnu\"\n",
    )
    .unwrap();
    program(&fx.home.join(".cargo/bin/rustup"), "rustup (fixture)");
    // rustup's proxy: runs the default toolchain's cargo from RUSTUP_HOME, as the real one does.
    let proxy = fx.home.join(".cargo/bin/cargo");
    std::fs::write(
        &proxy,
        "#!/bin/sh
exec \"$RUSTUP_HOME/toolchains/stable-x86_64-unknown-linux-gnu/bin/cargo\" \"$@\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&proxy, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(fx.home.join(".cargo/credentials.toml"), "token = \"secret\"\n").unwrap();
    // nvm's default Node.
    program(&fx.home.join(".nvm/versions/node/v20.11.1/bin/node"), "v20.11.1 (fixture)");
    std::fs::create_dir_all(fx.home.join(".nvm/alias")).unwrap();
    std::fs::write(fx.home.join(".nvm/alias/default"), "20\n").unwrap();
    open_up(&fx, &tc.join("bin"));
    open_up(&fx, &fx.home.join(".cargo/bin"));
    open_up(&fx, &fx.home.join(".nvm/versions/node/v20.11.1/bin"));

    // The embedded default first: the toolchain is out of the sandbox's view (the problem).
    let out = fx.std_command(&["init"]).env("PATH", "/usr/bin:/bin").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    let written = fx.home.join(".config/hands/daemon.toml");
    let file = std::fs::read_to_string(&written).unwrap();
    let mode = std::fs::metadata(&written).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the person's config is theirs alone");
    let home = fx.home.display().to_string();
    assert!(file.contains(&format!("{{ path = \"{home}/.rustup\" }}")), "{file}");
    assert!(file.contains(&format!("{home}/.nvm/versions/node/v20.11.1")), "{file}");
    assert!(file.contains(&format!("RUSTUP_HOME = \"{home}/.rustup\"")), "{file}");
    assert!(!file.contains(&format!("\"{home}/.cargo\"")), "~/.cargo holds a credential: {file}");
    assert!(!file.contains(&format!("\"{home}\"")), "the home itself: {file}");
    // A second init does not replace it.
    let again = fx.std_command(&["init"]).output().unwrap();
    assert!(!again.status.success(), "init replaced an existing config");
    assert_eq!(std::fs::read_to_string(&written).unwrap(), file);

    // The written file is valid and its commands find the toolchain (positive control: the
    // same `bash` under a config without it is "command not found").
    let state = fx.state.display().to_string();
    let cfg = fx.config(&format!(
        "[daemon]\nstate_dir = \"{state}\"\n{}",
        file.replace("external = \"ask\"", "external = \"allow\"")
    ));
    let c = Client::start(&fx, &cfg).await;
    let r = c.ok("bash", json!({ "command": "cargo --version; node --version" })).await;
    let stdout = r["stdout"].as_str().unwrap_or_default();
    assert!(stdout.contains("cargo 9.9.9 (fixture)"), "{r}");
    assert!(stdout.contains("v20.11.1 (fixture)"), "{r}");
    // What stays hidden: the credential beside the proxies.
    let r =
        c.call("bash", json!({ "command": format!("cat {home}/.cargo/credentials.toml") })).await;
    assert!(!text_of(&r).contains("token = \"secret\""), "{}", text_of(&r));
    c.stop().await;
    fx.assert_canary();
}

#[test]
fn init_refuses_the_home_as_the_project() {
    let fx = Fixture::new();
    let out = fx.std_command(&["init"]).current_dir(&fx.home).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("project folder"), "{text}");
    assert!(!fx.home.join(".config/hands/daemon.toml").exists());
}

/// Without `init`, a program the person has but commands cannot see fails as "command not
/// found", and the result's `denied` says where it is and what to add.
#[tokio::test]
async fn command_not_found_names_the_program_the_person_has() {
    use super::common::Era;
    let fx = Fixture::new();
    let bin = fx.home.join(".local/fixture-tool/bin");
    program(&bin.join("fixture-tool"), "fixture-tool 1.0");
    open_up(&fx, &bin);
    let cfg = fx.fs_shell_config();
    let person_path = format!("/usr/bin:/bin:{}", bin.display());
    let c = Client::start_with_env(&fx, &cfg, Era::Legacy, &[("PATH", &person_path)]).await;
    let r = c.ok("bash", json!({ "command": "fixture-tool --version" })).await;
    assert_eq!(r["exit_code"], 127, "{r}");
    let denied = r["denied"].as_array().cloned().unwrap_or_default();
    let node = denied.iter().find(|d| d["what"] == "fixture-tool").unwrap_or_else(|| panic!("{r}"));
    let remedy = node["remedy"].as_str().unwrap();
    assert!(remedy.contains(&bin.display().to_string()), "{remedy}");
    assert!(remedy.contains("hands init"), "{remedy}");
    // Positive control: a program missing everywhere is not named (nothing to add).
    let r = c.ok("bash", json!({ "command": "no-such-program-anywhere" })).await;
    assert_eq!(r["exit_code"], 127, "{r}");
    assert!(r.get("denied").is_none_or(|d| d.as_array().is_some_and(|a| a.is_empty())), "{r}");
    c.stop().await;
    fx.assert_canary();
}
