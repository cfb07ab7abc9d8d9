//! A new worktree writes a protected file only as the person's work tree holds it (decision
//! 0017, amended). A command can move HEAD and write any commit — `.git/HEAD`, refs and
//! objects are its to write — so "HEAD holds it" vouched for nothing: one `bash` call built a
//! commit adding `.envrc` and `.vscode/tasks.json`, pointed HEAD at it, and `git_worktree_add`
//! (an existing branch, or one it made from HEAD) wrote both into the roots, where direnv and
//! VS Code run them (the seventh attack pass). Through the real binary, with a positive
//! control and the canary.

use super::common::{Client, Era, Fixture, host_git, own_tree, text_of};
use super::git_still::config;
use serde_json::json;

/// One `bash` call: a commit adding `.envrc` and `.vscode/tasks.json` to HEAD's tree, built
/// with git's plumbing (no protected name is ever made in the work tree), on `evil` and
/// `evil2`, with HEAD moved to `evil`.
const PLANT: &str = r#"set -e
export GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@example.org GIT_COMMITTER_NAME=a GIT_COMMITTER_EMAIL=a@example.org
export GIT_INDEX_FILE=/tmp/planted-index
envrc=$(printf 'touch /tmp/direnv-ran\n' | git hash-object -w --stdin)
tasks=$(printf '{"tasks":[{"runOptions":{"runOn":"folderOpen"}}]}\n' | git hash-object -w --stdin)
git read-tree HEAD
git update-index --add --cacheinfo "100644,$envrc,.envrc"
git update-index --add --cacheinfo "100644,$tasks,.vscode/tasks.json"
commit=$(git commit-tree "$(git write-tree)" -p HEAD -m planted)
git update-ref refs/heads/evil "$commit"
git update-ref refs/heads/evil2 "$commit"
git symbolic-ref HEAD refs/heads/evil
echo planted"#;

#[tokio::test]
async fn a_new_worktree_writes_protected_files_only_as_the_work_tree_holds_them() {
    let fx = Fixture::new();
    let (h, root) = (&fx.home, &fx.root);
    // The person's repository, with a committed `.vscode/settings.json` on disk as committed.
    host_git(h, root, &["init", "-q", "-b", "main"]);
    std::fs::create_dir(root.join(".vscode")).unwrap();
    std::fs::write(root.join(".vscode/settings.json"), "{}\n").unwrap();
    std::fs::write(root.join("a.txt"), "a\n").unwrap();
    host_git(h, root, &["add", "."]);
    host_git(h, root, &["commit", "-qm", "first"]);
    own_tree(root);
    let c = Client::start_era(&fx, &config(&fx), Era::Legacy).await;

    // Positive control first: the person's own protected file is checked out.
    c.ok("git_worktree_add", json!({ "path": "wt-ok", "branch": "task/ok" })).await;
    let settings = std::fs::read_to_string(root.join("wt-ok/.vscode/settings.json")).unwrap();
    assert_eq!(settings, "{}\n");

    let r = c.ok("bash", json!({ "command": PLANT })).await;
    assert_eq!(r["stdout"], "planted\n", "{r}");
    assert_eq!(host_git(h, root, &["symbolic-ref", "--short", "HEAD"]), "evil");
    for (path, branch) in [("wt", "evil2"), ("wt2", "fresh")] {
        let e = c.err("git_worktree_add", json!({ "path": path, "branch": branch })).await;
        assert!(
            e.contains("protected files") && e.contains(".envrc") && e.contains("tasks.json"),
            "{branch}: {e}"
        );
        assert!(!e.contains("settings.json"), "the person's own file is not in question: {e}");
        assert!(!root.join(path).join(".envrc").exists(), "{path}/.envrc was written");
        assert!(!root.join(path).join(".vscode/tasks.json").exists());
    }
    // The branch the refused call made is gone again.
    let branches = host_git(h, root, &["branch", "--list", "fresh"]);
    assert!(branches.is_empty(), "{branches}");
    assert!(!std::path::Path::new("/tmp/direnv-ran").exists());
    c.stop().await;
    fx.assert_canary();
}

/// One `bash` call: branches built with git's plumbing, as `PLANT`: `bare` and `bare2` add a
/// git dir under another name (`evil/HEAD`, `evil/config` running a program, `objects`,
/// `refs`) and `evil/hooks/pre-commit`; `fine` adds a `HEAD` alone and a `config` alone.
const PLANT_BARE: &str = r#"set -e
export GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@example.org GIT_COMMITTER_NAME=a GIT_COMMITTER_EMAIL=a@example.org
export GIT_INDEX_FILE=/tmp/planted-index
blob() { printf "$1" | git hash-object -w --stdin; }
head=$(blob 'ref: refs/heads/main\n')
cfg=$(blob '[core]\n\tfsmonitor = "touch /tmp/fsmonitor-ran; false"\n\tworktree = ..\n')
keep=$(blob '')
git read-tree HEAD
git update-index --add --cacheinfo "100644,$head,plain/HEAD"
git update-index --add --cacheinfo "100644,$cfg,cfg/config"
fine=$(git commit-tree "$(git write-tree)" -p HEAD -m fine)
git read-tree HEAD
git update-index --add --cacheinfo "100644,$head,evil/HEAD"
git update-index --add --cacheinfo "100644,$cfg,evil/config"
git update-index --add --cacheinfo "100644,$keep,evil/objects/.keep"
git update-index --add --cacheinfo "100644,$keep,evil/refs/.keep"
git update-index --add --cacheinfo "100755,$keep,evil/hooks/pre-commit"
bare=$(git commit-tree "$(git write-tree)" -p HEAD -m bare)
git update-ref refs/heads/fine "$fine"
git update-ref refs/heads/bare "$bare"
git update-ref refs/heads/bare2 "$bare"
echo planted"#;

/// A command builds trees git itself never writes, with its plumbing: `dup`'s top folder names
/// `evil` three times (`HEAD`, `objects`, `refs` in one; a config with `core.fsmonitor` and a
/// hook in the next; a decoy), `unsorted`'s lists `zz` before `aa`, `fine` is well formed.
const PLANT_MALFORMED: &str = r##"set -e
python3 - <<'PY'
import subprocess
def obj(data, kind="blob"):
    return subprocess.run(["git", "hash-object", "-t", kind, "--literally", "-w", "--stdin"],
                          input=data, capture_output=True, check=True).stdout.strip().decode()
def tree(entries):
    return obj(b"".join(m.encode() + b" " + n.encode() + b"\0" + bytes.fromhex(i)
                        for m, n, i in entries), "tree")
def branch(name, top):
    c = subprocess.run(["git", "-c", "user.name=a", "-c", "user.email=a@example.org",
                        "commit-tree", top, "-p", "HEAD", "-m", name],
                       capture_output=True, check=True).stdout.strip().decode()
    subprocess.run(["git", "update-ref", "refs/heads/" + name, c], check=True)
x = obj(b"x\n")
cfg = obj(b'[core]\n\tfsmonitor = "touch /tmp/fsmonitor-dup-ran; false"\n\tworktree = ..\n')
head = obj(b"ref: refs/heads/main\n")
hook = tree([("100755", "post-checkout", obj(b"#!/bin/sh\ntouch /tmp/hook-dup-ran\n"))])
one = tree([("100644", "HEAD", head), ("40000", "objects", tree([("100644", "x", x)])),
            ("40000", "refs", tree([("100644", "x", x)]))])
two = tree([("100644", "config", cfg), ("40000", "hooks", hook)])
three = tree([("100644", "zz", x)])
a = ("100644", "a.txt", obj(b"a\n"))
for name in ["dup", "dup2"]:
    branch(name, tree([("40000", "evil", one), ("40000", "evil", two), ("40000", "evil", three),
                       ("100644", "f", x)]))
branch("unsorted", tree([a, ("40000", "dir", tree([("100644", "zz", x), ("100644", "aa", x)]))]))
branch("fine", tree([a, ("40000", "dir", tree([("100644", "aa", x), ("100644", "zz", x)]))]))
PY
echo planted"##;

/// Found by the ninth attack pass: a tree naming one folder more than once passed the checks
/// of a checkout (libgit2 finds one entry of a name by a binary search: each `evil` alone is no
/// git dir) while `git_switch` and `git_worktree_add` wrote them all into one `evil` — HEAD,
/// objects, refs, a config with `core.fsmonitor` and a hook — and the person's `git status`
/// there ran the program. Such a tree, and one out of git's order, is now refused, named.
#[tokio::test]
async fn a_tree_that_names_a_folder_twice_is_not_checked_out() {
    let (fx, c) = planted(PLANT_MALFORMED).await;
    let (h, root) = (&fx.home, &fx.root);

    let e = c.err("git_switch", json!({ "branch": "dup" })).await;
    for part in ["never writes", "`evil` is named twice", "git fsck"] {
        assert!(e.contains(part), "{part}: {e}");
    }
    assert!(!root.join("evil").exists(), "git_switch wrote the duplicated folder");
    assert_eq!(host_git(h, root, &["symbolic-ref", "--short", "HEAD"]), "main");
    let e = c.err("git_worktree_add", json!({ "path": "wt", "branch": "dup2" })).await;
    assert!(e.contains("`evil` is named twice"), "{e}");
    assert!(!root.join("wt/evil").exists(), "git_worktree_add wrote the duplicated folder");
    let e = c.err("git_switch", json!({ "branch": "unsorted" })).await;
    assert!(e.contains("`dir/aa` is out of git's order"), "{e}");
    assert!(!root.join("dir").exists());

    // The positive control: the same files in a tree git would write are checked out.
    c.ok("git_switch", json!({ "branch": "fine" })).await;
    assert!(root.join("dir/aa").is_file() && root.join("dir/zz").is_file());
    host_git(h, root, &["status", "--short"]);
    assert!(!std::path::Path::new("/tmp/fsmonitor-dup-ran").exists());
    assert!(!std::path::Path::new("/tmp/hook-dup-ran").exists());
    c.stop().await;
    fx.assert_canary();
}

/// Found by the eighth attack pass: `git_switch` and `git_worktree_add` wrote a branch's
/// `evil/{HEAD,config,objects,refs}` — a git dir under another name, whose config the git a
/// person runs in `evil` loads (its `core.fsmonitor` ran). The file tools and a command's run
/// refuse those pieces; a checkout now does too, naming why.
#[tokio::test]
async fn a_checkout_makes_no_git_dir_under_another_name() {
    let (fx, c) = planted(PLANT_BARE).await;
    let (h, root) = (&fx.home, &fx.root);

    let e = c.err("git_switch", json!({ "branch": "bare" })).await;
    for part in ["protected files", "evil/config", "evil/HEAD", "makes `evil` a git dir"] {
        assert!(e.contains(part), "{part}: {e}");
    }
    assert!(e.contains("evil/hooks/pre-commit"), "{e}");
    assert!(!root.join("evil").exists(), "git_switch wrote the git dir");
    assert_eq!(host_git(h, root, &["symbolic-ref", "--short", "HEAD"]), "main");
    let e = c.err("git_worktree_add", json!({ "path": "wt", "branch": "bare2" })).await;
    assert!(e.contains("evil/config") && e.contains("a git dir"), "{e}");
    assert!(!root.join("wt/evil").exists(), "git_worktree_add wrote the git dir");

    // The positive control: a HEAD alone and a config alone are plain files, checked out.
    c.ok("git_switch", json!({ "branch": "fine" })).await;
    assert!(root.join("plain/HEAD").is_file() && root.join("cfg/config").is_file());
    c.ok("git_worktree_add", json!({ "path": "wt-fine", "branch": "fine2" })).await;
    assert!(root.join("wt-fine/cfg/config").is_file());
    // Nothing ran the planted config.
    host_git(h, root, &["status", "--short"]);
    assert!(!std::path::Path::new("/tmp/fsmonitor-ran").exists());
    c.stop().await;
    fx.assert_canary();
}

/// A repository with one commit (`a.txt`) in the fixture's root, and a client that has run
/// `plant` there through `bash`.
async fn planted(plant: &str) -> (Fixture, Client) {
    let fx = Fixture::new();
    let (h, root) = (&fx.home, &fx.root);
    host_git(h, root, &["init", "-q", "-b", "main"]);
    std::fs::write(root.join("a.txt"), "a\n").unwrap();
    host_git(h, root, &["add", "."]);
    host_git(h, root, &["commit", "-qm", "first"]);
    own_tree(root);
    let c = Client::start_era(&fx, &config(&fx), Era::Legacy).await;
    let r = c.ok("bash", json!({ "command": plant })).await;
    assert_eq!(r["stdout"], "planted\n", "{r}");
    (fx, c)
}

/// Found by session 32's attack pass: a command's run refused only the piece that completed a
/// git dir's shape (`HEAD` with `refs` and `objects`), the file tools only a control file beside
/// a `HEAD` — so together they armed one. A command made `x/HEAD` and `x/config` (a pager), the
/// file tools then wrote `x/objects/` and `x/refs/`, and a person's `git branch` in `x` ran the
/// pager; the file tools' `z/{HEAD,objects,refs}` took a command's `z/hooks/`; a folder the
/// host holds with `HEAD` and `hooks/` took a command's hook. A command's run now keeps the file
/// tools' rule as well, in any order. Positive control: a `HEAD` alone, a `config` alone and a
/// `hooks` folder without a `HEAD` are made; canary: outside the roots.
#[tokio::test]
async fn a_command_and_the_file_tools_never_arm_a_git_dir_together() {
    let fx = Fixture::new();
    let root = &fx.root;
    std::fs::create_dir_all(root.join("w/hooks")).unwrap();
    std::fs::write(root.join("w/HEAD"), "ref: refs/heads/main\n").unwrap();
    own_tree(root);
    let ran = fx.dir.path().join("pager-ran");
    let c = Client::start_era(&fx, &fx.fs_shell_config(), Era::Legacy).await;
    for p in ["z/HEAD", "z/objects/info/keep", "z/refs/heads/keep"] {
        c.ok("write", json!({ "path": p, "content": "ref: refs/heads/main\n" })).await;
    }
    let cmd = format!(
        "mkdir x y plain cfg nohead; echo 'ref: refs/heads/main' > x/HEAD; \
         printf '[core]\\n\\tpager = \"touch {ran}; cat\"\\n' > x/config || echo REFUSED-config; \
         touch y/config.worktree; echo 'ref: refs/heads/main' > y/HEAD || echo REFUSED-head; \
         mkdir z/hooks || echo REFUSED-hooks; \
         printf '#!/bin/sh\\ntouch {ran}\\n' > w/hooks/pre-commit || echo REFUSED-hook; \
         echo 'ref: refs/heads/main' > plain/HEAD && echo '[core]' > cfg/config && \
         mkdir nohead/hooks && echo x > nohead/hooks/pre-commit && echo POS-OK",
        ran = ran.display()
    );
    let r = c.ok("bash", json!({ "command": cmd })).await;
    let out = format!("{}{}", r["stdout"].as_str().unwrap(), r["stderr"].as_str().unwrap());
    for word in ["REFUSED-config", "REFUSED-head", "REFUSED-hooks", "REFUSED-hook\n", "POS-OK"] {
        assert!(out.contains(word), "{word}: {out}");
    }
    for made in
        ["x/HEAD", "y/config.worktree", "plain/HEAD", "cfg/config", "nohead/hooks/pre-commit"]
    {
        assert!(root.join(made).exists(), "{made} (a control of the refusals) is missing: {out}");
    }
    for refused in ["x/config", "y/HEAD", "z/hooks", "w/hooks/pre-commit"] {
        assert!(!root.join(refused).exists(), "{refused} was made: {out}");
        let line = format!("hands sandbox: refused creating {}", root.join(refused).display());
        assert!(out.contains(&line), "the walls refused {refused}, saying so: {out}");
    }
    // The file tools complete `x`'s shape (a HEAD, objects and refs: no config, no hooks)...
    for p in ["x/objects/info/keep", "x/refs/heads/keep"] {
        c.ok("write", json!({ "path": p, "content": "" })).await;
    }
    // The file tools keep the hooks rule in any case, as the run does (a case-folding folder
    // answers git's `hooks` to `Hooks`): one place decides it for both.
    for p in ["w/hooks/post-checkout", "w/Hooks/post-checkout"] {
        let e = c.err("write", json!({ "path": p, "content": "#!/bin/sh\n" })).await;
        assert!(e.contains("the hooks of a git dir"), "{p}: {e}");
        assert!(!root.join(p).exists(), "{p} was written");
    }
    c.ok("write", json!({ "path": "nohead/Hooks/post-checkout", "content": "x" })).await;
    c.stop().await;
    // ...and the person's `git branch` there, at a terminal, runs no pager of the command's.
    let out = persons_git_branch(fx.home.as_path(), &root.join("x"));
    assert!(out.status.success(), "git branch in x: {out:?}");
    assert!(!ran.exists(), "the person's git ran the command's pager or hook");
    fx.assert_canary();
}

/// A session's loop: for each folder `d0`…, make its `HEAD` and take it away again, a
/// millisecond each, until a `config` is there; then say whether the `HEAD` stayed beside it.
const FLICKER: &str = r#"import os, sys, time
for i in range(int(sys.argv[1])):
    d = f"d{i}"
    os.mkdir(d)
    while True:
        try:
            fd = os.open(f"{d}/HEAD", os.O_WRONLY | os.O_CREAT | os.O_EXCL)
            os.write(fd, b"ref: refs/heads/main\n")
            os.close(fd)
        except OSError:
            pass
        time.sleep(0.001)
        if os.path.exists(f"{d}/config"):
            break
        try:
            os.unlink(f"{d}/HEAD")
        except OSError:
            pass
        time.sleep(0.001)
    print(f"{d}:" + ("armed" if os.path.exists(f"{d}/HEAD") else "safe"), flush=True)
open("plain/HEAD", "w").write("ref: refs/heads/main\n")
print("POS-OK", flush=True)
time.sleep(600)
"#;

/// Found by the eleventh attack pass: the file tools and a sandbox's init each checked a
/// folder for the other git dir piece and then made theirs, in separate processes, so both
/// checks passed while the file tools filled a `config`: a tmux session made `x/HEAD` in that
/// window, the file tools wrote `x/objects/` and `x/refs/`, and a person's `git branch` in `x`
/// ran the config's pager. Both now check and make such a name under the folder's lock.
/// Positive control: a `HEAD` alone and a `config` alone are made; canary: outside the roots.
#[tokio::test]
async fn a_session_racing_the_file_tools_never_arms_a_git_dir() {
    let fx = Fixture::new();
    let root = &fx.root;
    const TRIES: usize = 16;
    std::fs::create_dir(root.join("plain")).unwrap();
    std::fs::write(root.join("flicker.py"), FLICKER).unwrap();
    own_tree(root);
    let ran = fx.dir.path().join("pager-ran");
    let c = Client::start_era(&fx, &fx.fs_shell_config(), Era::Legacy).await;
    let cmd = format!("python3 flicker.py {TRIES}");
    c.ok("tmux_start", json!({ "command": cmd, "name": "flicker" })).await;
    // A config of a few MiB (comments), so that its write takes a while.
    let pad = "# a comment that makes the file long, and its write slow\n".repeat(60_000);
    let config = format!("[core]\n\tpager = \"touch {}; cat\"\n{pad}", ran.display());
    let mut pane = String::new();
    for i in 0..TRIES {
        let d = format!("d{i}");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !root.join(&d).is_dir() {
            assert!(std::time::Instant::now() < deadline, "{d} was not made");
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        // Refused or written, as the folder held a HEAD or not when it was checked.
        for _ in 0..100 {
            if root.join(&d).join("config").exists() {
                break;
            }
            let path = format!("{d}/config");
            let _ = c.call("write", json!({ "path": path, "content": config })).await;
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !pane.contains(&format!("{d}:")) {
            assert!(std::time::Instant::now() < deadline, "no answer for {d}: {pane}");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            let r = c.ok("tmux_read", json!({ "session": "flicker" })).await;
            pane.push_str(r["text"].as_str().unwrap_or_default());
        }
    }
    c.ok("write", json!({ "path": "cfg/config", "content": "[core]\n" })).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !pane.contains("POS-OK") {
        assert!(std::time::Instant::now() < deadline, "no positive control: {pane}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        let r = c.ok("tmux_read", json!({ "session": "flicker" })).await;
        pane.push_str(r["text"].as_str().unwrap_or_default());
    }
    c.ok("tmux_kill", json!({ "session": "flicker" })).await;
    assert!(root.join("plain/HEAD").is_file() && root.join("cfg/config").is_file(), "{pane}");
    let armed: Vec<usize> = (0..TRIES)
        .filter(|i| root.join(format!("d{i}/HEAD")).exists())
        .filter(|i| root.join(format!("d{i}/config")).exists())
        .collect();
    assert!(armed.is_empty(), "a HEAD and a config side by side in {armed:?}: {pane}");
    assert!(!pane.contains(":armed"), "{pane}");
    // The wall the race went past: a HEAD beside a config, refused, saying so.
    let r = c.ok("bash", json!({ "command": "echo 'ref: refs/heads/main' > d0/HEAD" })).await;
    let line = format!("hands sandbox: refused creating {}", root.join("d0/HEAD").display());
    assert!(r["stderr"].as_str().unwrap_or_default().contains(&line), "{r}");
    // The file tools complete `d0`'s shape; the person's `git branch` there runs no pager.
    for p in ["d0/objects/info/keep", "d0/refs/heads/keep"] {
        c.ok("write", json!({ "path": p, "content": "" })).await;
    }
    c.stop().await;
    let out = persons_git_branch(fx.home.as_path(), &root.join("d0"));
    assert!(!ran.exists(), "the person's git ran the session's pager: {out:?}");
    fx.assert_canary();
}

/// Found by the eleventh attack pass: `git_switch` checked a branch's `x/config` against the
/// disk (no `HEAD` in `x`) and then wrote the branch's many files, the config last, while the
/// file tools' `write x/HEAD` checked `x` (no config yet) and wrote it: both pieces side by
/// side, and with `objects/` and `refs/` written next a person's `git branch` in `x` ran the
/// config's pager. The checkout now holds the lock of each folder it writes such a piece into
/// (the file tools' own, `hands_roots::trust::lock_folder`), from before its checks. Positive
/// control: the switch is made, with `x/config`; canary: outside the roots. `git_worktree_add`
/// the same, into its new folder.
#[tokio::test]
async fn a_write_beside_a_checkout_never_arms_a_git_dir() {
    let fx = Fixture::new();
    let (h, root) = (&fx.home, &fx.root);
    host_git(h, root, &["init", "-q", "-b", "main"]);
    std::fs::write(root.join("a.txt"), "a\n").unwrap();
    host_git(h, root, &["add", "."]);
    host_git(h, root, &["commit", "-qm", "first"]);
    host_git(h, root, &["checkout", "-qb", "evil"]);
    std::fs::create_dir_all(root.join("a")).unwrap();
    for i in 0..150 {
        let big: String =
            (0..200_000).map(|j| char::from(b'a' + ((i * 7 + j) % 26) as u8)).collect();
        std::fs::write(root.join(format!("a/f{i}")), big).unwrap();
    }
    std::fs::create_dir(root.join("x")).unwrap();
    std::fs::write(root.join("x/config"), "[core]\n\tpager = \"touch /tmp/pager-ran; cat\"\n")
        .unwrap();
    host_git(h, root, &["add", "."]);
    host_git(h, root, &["commit", "-qm", "evil"]);
    host_git(h, root, &["branch", "evil2"]);
    // A branch with `l/x/config`, and `l` a link out of the roots in the work tree (as a
    // command could leave it): the checkout's locking makes no folder through it.
    host_git(h, root, &["checkout", "-q", "main"]);
    host_git(h, root, &["checkout", "-qb", "linked"]);
    std::fs::create_dir_all(root.join("l/x")).unwrap();
    std::fs::write(root.join("l/x/config"), "[core]\n").unwrap();
    host_git(h, root, &["add", "."]);
    host_git(h, root, &["commit", "-qm", "linked"]);
    host_git(h, root, &["checkout", "-q", "main"]);
    std::os::unix::fs::symlink(&fx.outside, root.join("l")).unwrap();
    own_tree(root);
    let cfg = fx.config(
        "[daemon]\nstate_dir = \"{state}\"\n\
         [[builtins]]\nid = \"tools-fs\"\ngrants = [\"filesystem\"]\n\
         filesystem = [{ path = \"{root}\", write = true }]\n\n\
         [[builtins]]\nid = \"tools-git\"\ngrants = [\"filesystem\", \"spawn\"]\n\
         filesystem = [{ path = \"{root}\", write = true }]\n\
         config = { trust = { write = \"allow\" } }\n",
    );
    let c = Client::start_era(&fx, &cfg, Era::Legacy).await;
    let switch = c.call("git_switch", json!({ "branch": "evil" }));
    let write = async {
        tokio::time::sleep(std::time::Duration::from_millis(150)).await;
        c.call("write", json!({ "path": "x/HEAD", "content": "ref: refs/heads/main\n" })).await
    };
    let (sw, w) = tokio::join!(switch, write);
    assert_ne!(sw.is_error, Some(true), "the switch (positive control): {}", text_of(&sw));
    assert!(root.join("x/config").is_file() && root.join("a/f149").is_file());
    assert_eq!(w.is_error, Some(true), "x/HEAD was written beside x/config: {}", text_of(&w));
    assert!(!root.join("x/HEAD").exists(), "a HEAD beside the branch's config");
    let e = c.err("git_switch", json!({ "branch": "linked" })).await;
    assert!(!fx.outside.join("x").exists(), "a folder made through the link: {e}");
    // A new worktree the same way.
    let add = c.call("git_worktree_add", json!({ "branch": "evil2", "path": "wt" }));
    let write = async {
        tokio::time::sleep(std::time::Duration::from_millis(150)).await;
        c.call("write", json!({ "path": "wt/x/HEAD", "content": "ref: refs/heads/main\n" })).await
    };
    let (wt, w) = tokio::join!(add, write);
    assert_ne!(wt.is_error, Some(true), "the worktree (positive control): {}", text_of(&wt));
    assert!(root.join("wt/x/config").is_file() && root.join("wt/a/f149").is_file());
    assert_eq!(w.is_error, Some(true), "wt/x/HEAD was written beside its config: {}", text_of(&w));
    assert!(!root.join("wt/x/HEAD").exists(), "a HEAD beside the worktree's config");
    c.stop().await;
    fx.assert_canary();
}

/// Each of two sessions makes its piece in `d` and takes it away again, for eight seconds,
/// and stops once it made its own while the other's was there.
const PAIR: &str = r#"import os, sys, time
mine, other = sys.argv[1], sys.argv[2]
os.makedirs("d", exist_ok=True)
end = time.time() + 8
while time.time() < end:
    try:
        fd = os.open("d/" + mine, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        os.write(fd, b"ref: refs/heads/main\n")
        os.close(fd)
    except OSError:
        continue
    if os.path.exists("d/" + other):
        print("BOTH", flush=True)
        time.sleep(600)
    os.unlink("d/" + mine)
print("DONE", flush=True)
time.sleep(600)
"#;

/// Found by the eleventh attack pass: two sandboxes' inits each checked `d` for the other's
/// piece and then made theirs — one session's `d/HEAD` and another's `d/config` side by side
/// within a second or two of trying. The inits now check and make such names under the
/// folder's lock. Positive control: each session makes its piece thousands of times; canary.
#[tokio::test]
async fn two_sessions_never_make_a_head_and_a_config_together() {
    let fx = Fixture::new();
    std::fs::write(fx.root.join("pair.py"), PAIR).unwrap();
    own_tree(&fx.root);
    let c = Client::start_era(&fx, &fx.fs_shell_config(), Era::Legacy).await;
    for (name, args) in [("a", "HEAD config"), ("b", "config HEAD")] {
        let cmd = format!("python3 pair.py {args}");
        c.ok("tmux_start", json!({ "command": cmd, "name": name })).await;
    }
    let mut said = Vec::new();
    for name in ["a", "b"] {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let r = c.ok("tmux_read", json!({ "session": name })).await;
            let text = r["text"].as_str().unwrap_or_default().to_string();
            if text.lines().any(|l| l == "BOTH" || l == "DONE") {
                said.push(text);
                break;
            }
            assert!(std::time::Instant::now() < deadline, "{name} did not finish: {text}");
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    }
    for name in ["a", "b"] {
        c.ok("tmux_kill", json!({ "session": name })).await;
    }
    assert!(said.iter().all(|t| !t.lines().any(|l| l == "BOTH")), "{said:?}");
    let both = fx.root.join("d/HEAD").exists() && fx.root.join("d/config").exists();
    assert!(!both, "a HEAD and a config side by side: {said:?}");
    // The wall each raced: a HEAD beside a config, refused, saying so.
    let cmd = "echo '[core]' > d/config && echo 'ref: refs/heads/main' > d/HEAD";
    let r = c.ok("bash", json!({ "command": cmd })).await;
    let line = format!("hands sandbox: refused creating {}", fx.root.join("d/HEAD").display());
    assert!(r["stderr"].as_str().unwrap_or_default().contains(&line), "{r}");
    c.stop().await;
    fx.assert_canary();
}

/// The person's `git branch` in `dir`, at a terminal (`script`), so that git starts a pager:
/// the config's `core.pager` when the folder is a git dir with one, else `cat`.
fn persons_git_branch(home: &std::path::Path, dir: &std::path::Path) -> std::process::Output {
    std::process::Command::new("script")
        .args(["-qec", "git -c safe.directory='*' branch", "/dev/null"])
        .current_dir(dir)
        .env("HOME", home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("PAGER", "cat")
        .output()
        .unwrap()
}
