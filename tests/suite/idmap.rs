//! A daemon run as root over a root-owned project, with no `sandbox.run_as` (SPEC §5.2 item 6,
//! decision 0061): commands run as `nobody`, the roots are bound id-mapped, so `touch`,
//! `mkdir`, `git commit` in the project succeed and what they make belongs to root on the
//! host, while a root-only file outside the roots stays unreadable. Where the file system
//! cannot be id-mapped (a ramfs here), the refusal comes before anyone is asked and names
//! `sandbox.run_as`. Every test needs root (it is the point); as an ordinary user they skip.

use super::common::{COMMAND_UID, Client, Era, Fixture, host_git, needs_root, text_of};
use serde_json::{Value, json};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

const ROOT_ONLY: &str = "root-only: must stay unreadable\n";

/// The fixture with its root given back to root (the usual fixture gives it to `nobody`), and a
/// folder outside the roots that commands see (on the module's PATH, so bound read-only as a
/// system folder) holding a file only root may read and, as the positive control, one anyone
/// may read.
struct RootOwned {
    fx: Fixture,
    sys: PathBuf,
}

impl RootOwned {
    fn new() -> RootOwned {
        let fx = Fixture::new();
        std::os::unix::fs::lchown(&fx.root, Some(0), Some(0)).unwrap();
        let sys = fx.root.parent().unwrap().join("sys");
        std::fs::create_dir(&sys).unwrap();
        std::fs::write(sys.join("root-only.txt"), ROOT_ONLY).unwrap();
        std::fs::set_permissions(sys.join("root-only.txt"), PermissionsExt::from_mode(0o600))
            .unwrap();
        std::fs::write(sys.join("public.txt"), "public\n").unwrap();
        // Its parents are closed to other users on the host (the temp folder is 0700); in the
        // sandbox only `sys` itself is bound.
        RootOwned { fx, sys }
    }

    /// tools-shell on the root (and `extra` folded into its `config`), the PATH with `sys`.
    fn config(&self, extra: &str) -> PathBuf {
        self.fx.config(&format!(
            "[daemon]\nstate_dir = \"{{state}}\"\n\n[[builtins]]\nid = \"tools-shell\"\n\
             grants = [\"filesystem\", \"spawn\"]\n\
             filesystem = [{{ path = \"{{root}}\", write = true }}]\n\
             config = {{ trust = {{ external = \"allow\" }}, path = \"/usr/local/bin:/usr/bin:/bin:{}\"{extra} }}\n",
            self.sys.display()
        ))
    }

    async fn start(&self) -> Client {
        Client::start_era(&self.fx, &self.config(""), Era::Legacy).await
    }

    fn doctor(&self, config: &Path) -> (Option<i32>, String) {
        let o = self.fx.std_command(&["doctor", "--config", config.to_str().unwrap()]).output();
        let o = o.unwrap();
        (o.status.code(), String::from_utf8_lossy(&o.stdout).into_owned())
    }

    /// The root-only file is as it was, and nothing new appeared beside it.
    fn assert_canaries(&self) {
        self.fx.assert_canary();
        assert_eq!(std::fs::read_to_string(self.sys.join("root-only.txt")).unwrap(), ROOT_ONLY);
        let mut names: Vec<_> = std::fs::read_dir(&self.sys)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["public.txt", "root-only.txt"], "something was made beside them");
    }
}

fn owner(p: &Path) -> (u32, u32) {
    let m = std::fs::symlink_metadata(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    (m.uid(), m.gid())
}

fn out(v: &Value) -> &str {
    v["stdout"].as_str().unwrap()
}

/// `touch`, `mkdir`, `git add && git commit` in a root-owned checkout succeed as `nobody`; the
/// files they make belong to root on the host; the command's uid is not 0 and sees the project
/// as its own; the root-only file outside the roots stays unreadable (its public neighbour, the
/// positive control, reads); the canary outside the roots is unchanged.
#[tokio::test]
#[ignore = "needs root (a root daemon over a root-owned project); run with --include-ignored"]
async fn a_root_daemon_writes_a_root_owned_project_as_its_owner() {
    if !needs_root("a_root_daemon_writes_a_root_owned_project_as_its_owner", "a root daemon") {
        return;
    }
    let t = RootOwned::new();
    let root = &t.fx.root;
    host_git(&t.fx.home, root, &["init", "-q", "-b", "main"]);
    std::fs::write(root.join("old.txt"), "from the host\n").unwrap();
    std::fs::set_permissions(root.join("old.txt"), PermissionsExt::from_mode(0o600)).unwrap();
    assert_eq!(owner(&root.join(".git/HEAD")), (0, 0));
    let c = t.start().await;
    let sys = t.sys.display();
    let script = format!(
        "id -u; stat -c %u .git/HEAD; touch made.txt && mkdir dir && echo in > dir/f && \
         echo more >> old.txt && git -c user.name=a -c user.email=a@example.org add -A && \
         git -c user.name=a -c user.email=a@example.org commit -qm one && git log --format=%s; \
         cat {sys}/public.txt; cat {sys}/root-only.txt; echo end"
    );
    let r = c.ok("bash", json!({ "command": script })).await;
    let uid = COMMAND_UID;
    assert_eq!(out(&r), format!("{uid}\n{uid}\none\npublic\nend\n"), "{r}");
    assert!(r["stderr"].as_str().unwrap().contains("root-only.txt: Permission denied"), "{r}");
    assert!(r["containment"].as_str().unwrap().contains(&format!("as uid {uid}")), "{r}");
    for made in ["made.txt", "dir", "dir/f", ".git/index", ".git/COMMIT_EDITMSG"] {
        assert_eq!(owner(&root.join(made)), (0, 0), "{made} belongs to the root's owner");
    }
    assert_eq!(std::fs::read_to_string(root.join("old.txt")).unwrap(), "from the host\nmore\n");
    assert_eq!(host_git(&t.fx.home, root, &["log", "--format=%s"]), "one");
    c.stop().await;
    t.assert_canaries();
}

/// A tmux session writes the root-owned project the same way: what it makes belongs to root.
#[tokio::test]
#[ignore = "needs root (a root daemon over a root-owned project); run with --include-ignored"]
async fn a_tmux_session_writes_a_root_owned_project_too() {
    if !needs_root("a_tmux_session_writes_a_root_owned_project_too", "a root daemon") {
        return;
    }
    let t = RootOwned::new();
    let c = t.start().await;
    let sys = t.sys.display();
    let cmd = format!(
        "id -u > uid.txt; mkdir from-tmux && echo hi > from-tmux/f; \
         cat {sys}/root-only.txt > leak.txt 2>&1; sleep 30"
    );
    c.ok("tmux_start", json!({ "command": cmd, "name": "idm" })).await;
    let f = t.fx.root.join("from-tmux/f");
    let leak = t.fx.root.join("leak.txt");
    let done = || std::fs::read_to_string(&leak).is_ok_and(|s| !s.is_empty());
    assert!(super::common::wait_until(std::time::Duration::from_secs(20), done).await);
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "hi\n");
    assert_eq!(owner(&f), (0, 0));
    assert_eq!(owner(&t.fx.root.join("from-tmux")), (0, 0));
    assert_eq!(std::fs::read_to_string(t.fx.root.join("uid.txt")).unwrap().trim(), "65534");
    let leaked = std::fs::read_to_string(&leak).unwrap();
    assert!(leaked.contains("Permission denied") && !leaked.contains("root-only:"), "{leaked}");
    c.ok("tmux_kill", json!({ "session": "idm" })).await;
    c.stop().await;
    t.assert_canaries();
}

/// `hands doctor` over a root-owned project exits 0, says the root is bound id-mapped, and
/// warns of nothing; the self-test's check holds.
#[test]
#[ignore = "needs root (a root daemon over a root-owned project); run with --include-ignored"]
fn doctor_passes_a_root_owned_project_without_an_owner_warning() {
    if !needs_root("doctor_passes_a_root_owned_project_without_an_owner_warning", "root") {
        return;
    }
    let t = RootOwned::new();
    let (code, text) = t.doctor(&t.config(""));
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("warnings: none"), "{text}");
    assert!(text.contains("bound id-mapped"), "{text}");
    assert!(text.contains("roots writable as owner      holds"), "{text}");
    assert!(!text.contains("belongs to uid"), "{text}");
}

/// A ramfs cannot be id-mapped: over a root-owned project there, `hands doctor` exits 1 and
/// says why, naming `sandbox.run_as`; `bash` is refused before anyone is asked (nothing is
/// made in the project, the canaries stay). Positive controls: the same project on the
/// fixture's own file system (the first test), and here the ramfs given to the user commands
/// run as (what a person does with `sandbox.run_as` and `chown`): nothing needs mapping, and
/// the command writes it.
#[tokio::test]
#[ignore = "needs root (a root daemon over a root-owned project); run with --include-ignored"]
async fn a_root_owned_project_that_cannot_be_id_mapped_is_refused_before_asking() {
    if !needs_root(
        "a_root_owned_project_that_cannot_be_id_mapped_is_refused_before_asking",
        "mount",
    ) {
        return;
    }
    let t = RootOwned::new();
    let root = &t.fx.root;
    let mounted = std::process::Command::new("mount")
        .args(["-t", "ramfs", "ramfs"])
        .arg(root)
        .status()
        .unwrap();
    assert!(mounted.success(), "mount -t ramfs");
    struct Unmount<'a>(&'a Path);
    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg("-l").arg(self.0).status();
        }
    }
    let _unmount = Unmount(root);
    std::os::unix::fs::lchown(root, Some(0), Some(0)).unwrap();
    std::fs::set_permissions(root, PermissionsExt::from_mode(0o755)).unwrap();
    let config = t.config("");
    let (code, text) = t.doctor(&config);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("roots writable as owner      MISSING"), "{text}");
    assert!(text.contains("does not support id-mapped mounts"), "{text}");
    assert!(text.contains("warning: tools-shell: commands run as uid 65534"), "{text}");
    assert!(text.contains("sandbox.run_as"), "{text}");

    let c = Client::start_era(&t.fx, &config, Era::Legacy).await;
    let r = c.call("bash", json!({ "command": "touch refused.txt" })).await;
    let msg = text_of(&r);
    assert_eq!(r.is_error, Some(true), "{msg}");
    assert!(msg.contains("before anyone was asked"), "{msg}");
    assert!(msg.contains("does not support id-mapped mounts"), "{msg}");
    assert!(msg.contains("sandbox.run_as"), "{msg}");
    c.stop().await;
    assert_eq!(std::fs::read_dir(root).unwrap().count(), 0, "nothing was made in the project");

    // Positive control: the same ramfs project given to the user commands run as needs no
    // mapping, and the command writes it.
    std::os::unix::fs::lchown(root, Some(COMMAND_UID), Some(COMMAND_UID)).unwrap();
    let (code, text) = t.doctor(&config);
    assert_eq!(code, Some(0), "{text}");
    let c = Client::start_era(&t.fx, &config, Era::Legacy).await;
    let r = c.ok("bash", json!({ "command": "touch made.txt && echo ok" })).await;
    assert_eq!(out(&r), "ok\n", "{r}");
    assert_eq!(owner(&root.join("made.txt")).0, COMMAND_UID);
    c.stop().await;
    t.assert_canaries();
}

/// `cargo build` of a crate in a root-owned checkout, with the toolchain that builds this suite
/// (its sysroot, often in root's home, given as a read-only root: root-owned too, so id-mapped
/// and readable): `target/` and `Cargo.lock` are made, belong to root, and the program runs.
/// Skipped (and says so) where no `rustc` is on the PATH.
#[tokio::test]
#[ignore = "needs root (a root daemon over a root-owned project); run with --include-ignored"]
async fn cargo_builds_a_root_owned_crate() {
    if !needs_root("cargo_builds_a_root_owned_crate", "a root daemon") {
        return;
    }
    let sysroot = std::process::Command::new("rustc").args(["--print", "sysroot"]).output();
    let Some(sysroot) = sysroot.ok().filter(|o| o.status.success()) else {
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "SKIPPED cargo_builds_a_root_owned_crate: no rustc");
        return;
    };
    let sysroot = String::from_utf8(sysroot.stdout).unwrap().trim().to_string();
    let t = RootOwned::new();
    let root = &t.fx.root;
    std::fs::create_dir(root.join("src")).unwrap();
    std::fs::write(
        root.join("Cargo.toml"),
        "[package]\nname = \"demo\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .unwrap();
    std::fs::write(root.join("src/main.rs"), "fn main() { println!(\"built\"); }\n").unwrap();
    let config = t.fx.config(&format!(
        "[daemon]\nstate_dir = \"{{state}}\"\n\n[[builtins]]\nid = \"tools-shell\"\n\
         grants = [\"filesystem\", \"spawn\"]\n\
         filesystem = [{{ path = \"{{root}}\", write = true }}, {{ path = \"{sysroot}\" }}]\n\
         config = {{ trust = {{ external = \"allow\" }}, path = \"{sysroot}/bin:/usr/local/bin:/usr/bin:/bin\" }}\n",
    ));
    let c = Client::start_era(&t.fx, &config, Era::Legacy).await;
    let r =
        c.ok("bash", json!({ "command": "cargo build -q --offline && ./target/debug/demo" })).await;
    assert_eq!(out(&r), "built\n", "{r}");
    for made in ["Cargo.lock", "target", "target/debug/demo"] {
        assert_eq!(owner(&root.join(made)), (0, 0), "{made} belongs to the root's owner");
    }
    c.stop().await;
    t.assert_canaries();
}

/// A build box's project given to another group (`chown nobody:root` of a `nobody:nogroup`
/// checkout) after a root daemon ran commands there: the commands now run as the new owner,
/// and the launcher — root only in their user namespace, which maps the new group and not the
/// old — could not open the caches carried in their home (`.cargo/registry`, made by the first
/// run), so the self-test failed and every command was refused. The daemon now gives those
/// folders to the commands' user at start: the cache a first run left is there for the next,
/// the folders on its way belong to the new owner, and the command runs with the new group.
#[tokio::test]
#[ignore = "needs root (a root daemon over a project it hands to another group); run with --include-ignored"]
async fn a_project_given_to_another_group_keeps_its_commands_caches() {
    if !needs_root("a_project_given_to_another_group_keeps_its_commands_caches", "chown") {
        return;
    }
    let fx = Fixture::new();
    std::os::unix::fs::lchown(&fx.root, Some(COMMAND_UID), Some(COMMAND_UID)).unwrap();
    let config = fx.config(
        "[daemon]\nstate_dir = \"{state}\"\n\n[[builtins]]\nid = \"tools-shell\"\n\
         grants = [\"filesystem\", \"spawn\"]\n\
         filesystem = [{ path = \"{root}\", write = true }]\n\
         config = { trust = { external = \"allow\" } }\n",
    );
    let c = Client::start_era(&fx, &config, Era::Legacy).await;
    let fill = "mkdir -p ~/.cargo/registry/cache && echo kept > ~/.cargo/registry/cache/f && id -g";
    let r = c.ok("bash", json!({ "command": fill })).await;
    assert_eq!(out(&r), format!("{COMMAND_UID}\n"), "{r}");
    c.stop().await;
    let store = super::common::sandbox_home(&fx);
    assert_eq!(owner(&store.join(".cargo/registry")), (COMMAND_UID, COMMAND_UID));

    std::os::unix::fs::lchown(&fx.root, Some(COMMAND_UID), Some(0)).unwrap();
    let c = Client::start_era(&fx, &config, Era::Legacy).await;
    let r = c.ok("bash", json!({ "command": "cat ~/.cargo/registry/cache/f && id -g" })).await;
    assert_eq!(out(&r), "kept\n0\n", "{r}");
    c.stop().await;
    for dir in [".cargo", ".cargo/registry"] {
        assert_eq!(owner(&store.join(dir)), (COMMAND_UID, 0), "{dir}");
    }
    fx.assert_canary();
}

/// No file the command makes or changes carries the set-user-id or set-group-id bit: in a
/// root-owned project its files are root's on the host, and a set-uid copy of a program would
/// give root to whoever runs it outside the sandbox (found by session 40's attack pass: `cp
/// /usr/bin/env e && chmod 4755 e` left a root set-uid `env`; decision 0102). `chmod`, `install
/// -m`, an `open` that creates with the bit and `mknod` are refused (EPERM). Positive controls:
/// `chmod 755` and `chmod +t` on the same file, a create with mode 0755.
#[tokio::test]
#[ignore = "needs root (a root daemon over a root-owned project); run with --include-ignored"]
async fn no_file_a_command_makes_is_set_uid() {
    if !needs_root("no_file_a_command_makes_is_set_uid", "a root daemon") {
        return;
    }
    let t = RootOwned::new();
    let root = &t.fx.root;
    let c = t.start().await;
    let script = "cp /bin/true e && chmod 755 e && echo CONTROL; chmod 4755 e && echo SUID; \
         chmod u+s e && echo U; chmod g+s e && echo G; chmod 2755 e && echo SGID; \
         install -m 4755 /bin/true i && echo INSTALL; \
         python3 -c 'import os; os.close(os.open(\"o\", os.O_CREAT|os.O_WRONLY, 0o4755))' && echo OPEN; \
         python3 -c 'import os; os.close(os.open(\"p\", os.O_CREAT|os.O_WRONLY, 0o755))' && echo PLAIN; \
         python3 -c 'import os,stat; os.mknod(\"n\", stat.S_IFREG|0o6755)' && echo MKNOD; \
         mkdir d && chmod 1777 d && echo STICKY; chmod g+s d && echo DIRSGID; echo end";
    let r = c.ok("bash", json!({ "command": script })).await;
    let said = out(&r);
    assert!(said.contains("CONTROL") && said.contains("PLAIN") && said.contains("STICKY"), "{r}");
    for word in ["SUID", "\nU\n", "\nG\n", "SGID", "INSTALL", "OPEN", "MKNOD", "DIRSGID"] {
        assert!(!said.contains(word), "{word}: {r}");
    }
    assert!(r["stderr"].as_str().unwrap().contains("Operation not permitted"), "{r}");
    for name in ["e", "i", "o", "p", "n", "d"] {
        let Ok(m) = std::fs::symlink_metadata(root.join(name)) else { continue };
        assert_eq!(m.mode() & 0o6000, 0, "{name} has mode {:o}: {r}", m.mode());
    }
    assert_eq!(std::fs::symlink_metadata(root.join("e")).unwrap().mode() & 0o7777, 0o755);
    assert_eq!(owner(&root.join("e")), (0, 0));
    c.stop().await;
    t.assert_canaries();
}
