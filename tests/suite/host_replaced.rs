//! What the host replaces while a command runs (decision 0079): a host rename over a
//! protected file takes its read-only bind off in every sandbox (the kernel detaches mounts on
//! an entry renamed over), and an ordinary `git config` on the host commits `.git/config` that
//! way. A command that outlived the bind — a long `bash` call, a tmux session — must still
//! not write the new file, by any name or link: the init checks every open for writing by the
//! real path of the file it opened. Attacks through the real binary, with a positive control
//! and the canary.

use super::common::{Client, Fixture, own, own_tree};
use serde_json::json;
use std::path::Path;
use std::time::Duration;

/// git on the host, as the person runs it.
fn git(fx: &Fixture, args: &[&str]) {
    let o = super::common::host_git_output(&fx.home, &fx.root, args);
    assert!(o.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&o.stderr));
}

/// Every way the command tries to write a file, printed as `TAG:WROTE` or `TAG:refused ERRNO`.
const ATTEMPTS: &str = r#"
import os, sys
mon = sys.argv[1]
line = "[core]\n\tfsmonitor = %s\n" % mon
def attempt(tag, f):
    try:
        f(); print(tag + ":WROTE")
    except OSError as e:
        print(tag + ":refused %d" % e.errno)
def rplus(p):
    with open(p, "r+") as h:
        h.seek(0, 2); h.write(line)
def proc():
    fd = os.open(".git/config", os.O_PATH)
    w = os.open("/proc/self/fd/%d" % fd, os.O_RDWR | os.O_APPEND)
    os.write(w, line.encode())
def link(src, dst):
    os.link(src, dst); rplus(dst)
attempt("rplus", lambda: rplus(".git/config"))
attempt("trunc", lambda: os.close(os.open(".git/config", os.O_WRONLY | os.O_TRUNC)))
attempt("append", lambda: os.close(os.open(".git/config", os.O_WRONLY | os.O_CREAT | os.O_APPEND)))
attempt("proc", proc)
attempt("link", lambda: link(".git/config", "cfg-link"))
attempt("lock", lambda: rplus(".git/config.lock"))
attempt("locklink", lambda: link(".git/config.lock", "lock-link"))
attempt("newrepo", lambda: rplus("sub/.git/config"))
attempt("truncpath", lambda: os.truncate(".git/config", 0))
attempt("truncro", lambda: os.close(os.open(".git/config", os.O_RDONLY | os.O_TRUNC)))
attempt("plainro", lambda: os.close(os.open("plain4.txt", os.O_RDONLY | os.O_TRUNC)))
attempt("plaincut", lambda: os.truncate("plain3.txt", 2))
attempt("plain", lambda: rplus("plain.txt"))
attempt("plaintrunc", lambda: os.close(os.open("plain2.txt", os.O_WRONLY | os.O_TRUNC)))
"#;

/// Waits until the command running in the root has written its `started` marker.
async fn started(fx: &Fixture) {
    let started = fx.root.join("started");
    for _ in 0..600 {
        if started.exists() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the command never started");
}

/// How often `.git/config` is a mount point in the command's view.
const MOUNTED: &str = "grep -c ' '\"$PWD\"'/.git/config ' /proc/self/mountinfo";

#[tokio::test]
async fn a_protected_file_the_host_replaces_during_a_run_stays_unwritable() {
    let fx = Fixture::new();
    let base = fx.root.parent().unwrap();
    let marker = base.join("PWNED");
    let mon = base.join("monitor.sh");
    std::fs::write(&mon, format!("#!/bin/sh\ntouch {}\n", marker.display())).unwrap();
    std::fs::set_permissions(&mon, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    git(&fx, &["init", "-q", "-b", "main"]);
    fx.write("plain.txt", "plain\n");
    fx.write("plain2.txt", "plain2\n");
    fx.write("plain3.txt", "plain3\n");
    fx.write("plain4.txt", "plain4\n");
    std::fs::write(fx.root.join("attempts.py"), ATTEMPTS).unwrap();
    own_tree(&fx.root);
    let c = Client::start(&fx, &fx.fs_shell_config()).await;
    let cmd = format!(
        "echo before:$({MOUNTED}); touch started; \
         for i in $(seq 600); do [ -e go ] && break; sleep 0.05; done; \
         echo after:$({MOUNTED}); python3 attempts.py {}",
        mon.display()
    );
    let run = c.ok("bash", json!({ "command": cmd, "timeout_secs": 60 }));
    let host = async {
        started(&fx).await;
        // The person's ordinary `git config`: git writes `.git/config.lock` and renames it
        // over `.git/config`. Then a lock of another `git config` caught in flight.
        git(&fx, &["config", "remote.origin.url", "https://example.org/x.git"]);
        own(&fx.root.join(".git/config"));
        std::fs::write(fx.root.join(".git/config.lock"), "[core]\n").unwrap();
        own(&fx.root.join(".git/config.lock"));
        // A repository the person makes while the command runs: no bind was ever placed.
        std::fs::create_dir(fx.root.join("sub")).unwrap();
        let o = super::common::host_git_output(&fx.home, &fx.root.join("sub"), &["init", "-q"]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        own_tree(&fx.root.join("sub"));
        std::fs::write(fx.root.join("go"), "").unwrap();
    };
    let (r, ()) = tokio::join!(run, host);
    let out = r["stdout"].as_str().unwrap_or_default().to_string();
    // The scenario is real: the host's rename took the read-only bind off.
    assert!(out.contains("before:1") && out.contains("after:0"), "{out}\n{r}");
    let refused = ["rplus", "trunc", "append", "proc", "link", "lock", "locklink", "newrepo"];
    for tag in refused.iter().chain(&["truncpath", "truncro"]) {
        assert!(out.contains(&format!("{tag}:refused 13")), "{tag}: {out}\n{r}");
    }
    // Positive controls: an ordinary file is written, and truncated, as before.
    assert!(out.contains("plain:WROTE") && out.contains("plaintrunc:WROTE"), "{out}");
    assert!(std::fs::read_to_string(fx.root.join("plain.txt")).unwrap().contains("fsmonitor"));
    assert_eq!(std::fs::read_to_string(fx.root.join("plain2.txt")).unwrap(), "");
    assert!(out.contains("plaincut:WROTE"), "{out}");
    assert_eq!(std::fs::read_to_string(fx.root.join("plain3.txt")).unwrap(), "pl");
    assert!(out.contains("plainro:WROTE"), "{out}");
    assert_eq!(
        std::fs::read_to_string(fx.root.join("plain4.txt")).unwrap(),
        "",
        "O_RDONLY|O_TRUNC"
    );
    // The refusal says what and why, and what a person can do.
    let denied = r["denied"].to_string();
    assert!(denied.contains(".git/config") && denied.contains("change it on the host"), "{r}");
    let err = r["stderr"].as_str().unwrap_or_default();
    assert!(err.contains("hands sandbox: refused writing"), "{err}");
    // An open with O_CREAT of the file that is there (a shell's `>>`) is told as a write.
    let cfg_line = format!("{}/.git/config: ", fx.root.display());
    assert!(err.contains(&format!("refused writing {cfg_line}")), "{err}");
    assert!(!err.contains(&format!("refused creating {cfg_line}")), "{err}");
    c.stop().await;
    // The host's config is the person's, whole; its lock is untouched.
    let sub = std::fs::read_to_string(fx.root.join("sub/.git/config")).unwrap();
    assert!(!sub.contains("fsmonitor"), "{sub}");
    let cfg = std::fs::read_to_string(fx.root.join(".git/config")).unwrap();
    assert!(cfg.contains("example.org/x.git") && !cfg.contains("fsmonitor"), "{cfg}");
    let lock = fx.root.join(".git/config.lock");
    assert_eq!(std::fs::read_to_string(&lock).unwrap(), "[core]\n");
    std::fs::remove_file(&lock).unwrap();
    for name in ["cfg-link", "lock-link"] {
        assert!(!Path::new(&fx.root.join(name)).exists(), "{name} was made");
    }
    git(&fx, &["status", "--short"]);
    assert!(!marker.exists(), "the host's git ran the command's program");
    fx.assert_canary();
}

/// Reads the session until a line starts with `mark`.
async fn read_until(c: &Client, session: &str, mark: &str) -> String {
    for _ in 0..150 {
        let r = c.ok("tmux_read", json!({ "session": session })).await;
        let text = r["text"].as_str().unwrap_or_default().to_string();
        if text.lines().any(|l| l.starts_with(mark)) {
            return text;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no line starting with {mark} in session {session}");
}

/// Saves `rel` on the host as an editor does: a new file renamed over the old one.
fn save_atomically(fx: &Fixture, rel: &str, text: &str) {
    let (at, tmp) = (fx.root.join(rel), fx.root.join(format!("{rel}.swp")));
    std::fs::write(&tmp, text).unwrap();
    own(&tmp);
    std::fs::rename(&tmp, &at).unwrap();
}

/// An editor's save of `.env` on the host (a new file renamed over it) takes the tmux
/// session's mask off in its sandbox; the next `tmux_send` masks the new file before it types.
/// Positive control: an ordinary file saved the same way is read, new; the canary.
#[tokio::test]
async fn a_secret_the_host_replaces_under_a_tmux_session_is_masked_before_the_next_send() {
    let fx = Fixture::new();
    fx.write("app/.env", "SECRET=first\n");
    fx.write("app/plain.txt", "plain-one\n");
    own_tree(&fx.root);
    let c = Client::start(&fx, &fx.fs_shell_config()).await;
    c.ok("tmux_start", json!({ "command": "bash --norc", "cwd": "app", "name": "rep" })).await;
    c.ok("tmux_send", json!({ "session": "rep", "text": "cat .env plain.txt; echo one-$?" })).await;
    let shown = read_until(&c, "rep", "one-").await;
    assert!(shown.contains("plain-one") && !shown.contains("SECRET=first"), "{shown}");
    // A mask that holds is left alone: a send with nothing replaced stacks no second one.
    let mounts = |n: u32| format!("echo mounts{n}-$(grep -c \" $PWD/.env \" /proc/self/mountinfo)");
    tokio::time::sleep(Duration::from_millis(2500)).await;
    c.ok("tmux_send", json!({ "session": "rep", "text": mounts(1) })).await;
    let shown = read_until(&c, "rep", "mounts1-").await;
    assert!(shown.lines().any(|l| l == "mounts1-1"), "{shown}");
    let unique = format!("second-{}", std::process::id());
    save_atomically(&fx, "app/.env", &format!("SECRET={unique}\n"));
    save_atomically(&fx, "app/plain.txt", "plain-two\n");
    // The walk of the roots is reused for 2 s: past that, the next send walks again.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let typed = "cat .env plain.txt; echo two-$?";
    c.ok("tmux_send", json!({ "session": "rep", "text": typed })).await;
    let shown = read_until(&c, "rep", "two-").await;
    assert!(shown.contains("plain-two"), "positive control: {shown}");
    assert!(shown.contains(".env: Permission denied"), "{shown}");
    assert!(!shown.contains(&unique), "the host's new secret was read: {shown}");
    // The new file's mask is the one mount there: the old one went with the old file.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    c.ok("tmux_send", json!({ "session": "rep", "text": mounts(2) })).await;
    let shown = read_until(&c, "rep", "mounts2-").await;
    assert!(shown.lines().any(|l| l == "mounts2-1"), "{shown}");
    c.ok("tmux_kill", json!({ "session": "rep" })).await;
    c.stop().await;
    let env = std::fs::read_to_string(fx.root.join("app/.env")).unwrap();
    assert_eq!(env, format!("SECRET={unique}\n"), "the host's file is the person's");
    fx.assert_canary();
}

/// A read-only root nested in a writable one is bound on the host's folder: the host moving
/// that folder aside and putting a new one in its place (a checkout, a tool's rebuild) carries
/// the read-only bind away, and the new folder would be writable through the writable root
/// around it. The init refuses writes and creates there itself; before the move the kernel's
/// `Read-only file system` does. Positive control: the writable root is written; the canary.
#[tokio::test]
async fn a_read_only_root_the_host_moves_aside_during_a_run_stays_unwritable() {
    let fx = Fixture::new();
    fx.write("ro/kept.txt", "kept\n");
    fx.write("plain.txt", "plain\n");
    own_tree(&fx.root);
    let config = fx.config(
        "[daemon]\nstate_dir = \"{state}\"\n\n[[builtins]]\nid = \"tools-shell\"\n\
         grants = [\"filesystem\", \"spawn\"]\n\
         filesystem = [{ path = \"{root}\", write = true }, { path = \"{root}/ro\" }]\n\
         config = { trust = { external = \"allow\" } }\n",
    );
    let c = Client::start(&fx, &config).await;
    let cmd = "echo x >> ro/kept.txt && echo BEFORE-WROTE || echo before-refused; touch started; \
               for i in $(seq 600); do [ -e go ] && break; sleep 0.05; done; \
               echo x >> ro/kept.txt && echo KEPT-WROTE || echo kept-refused; \
               python3 -c 'open(\"ro/kept.txt\", \"r+\").write(\"x\")' && echo RPLUS-WROTE \
                 || echo rplus-refused; \
               echo n > ro/new.txt && echo NEW-WROTE || echo new-refused; \
               mkdir ro/d && echo DIR-MADE || echo dir-refused; \
               echo y >> plain.txt && echo plain-wrote";
    let run = c.ok("bash", json!({ "command": cmd, "timeout_secs": 60 }));
    let host = async {
        started(&fx).await;
        std::fs::rename(fx.root.join("ro"), fx.root.join("ro.old")).unwrap();
        fx.write("ro.new/kept.txt", "host\n");
        own_tree(&fx.root.join("ro.new"));
        std::fs::rename(fx.root.join("ro.new"), fx.root.join("ro")).unwrap();
        std::fs::write(fx.root.join("go"), "").unwrap();
    };
    let (r, ()) = tokio::join!(run, host);
    let out = r["stdout"].as_str().unwrap_or_default().to_string();
    let err = r["stderr"].as_str().unwrap_or_default();
    assert!(out.contains("before-refused") && err.contains("Read-only file system"), "{r}");
    for word in ["kept-refused", "rplus-refused", "new-refused", "dir-refused"] {
        assert!(out.contains(word), "{word}: {r}");
    }
    assert!(out.contains("plain-wrote"), "positive control: {r}");
    assert!(err.contains("read-only root whose read-only bind is gone"), "{err}");
    c.stop().await;
    assert_eq!(std::fs::read_to_string(fx.root.join("ro/kept.txt")).unwrap(), "host\n");
    assert_eq!(std::fs::read_to_string(fx.root.join("ro.old/kept.txt")).unwrap(), "kept\n");
    assert!(!fx.root.join("ro/new.txt").exists() && !fx.root.join("ro/d").exists());
    fx.assert_canary();
}
