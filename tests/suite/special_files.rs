//! Special files in a root never hang the file tools (issue 23.4): a
//! FIFO where an ignore file would be (`.gitignore`, `.ignore`, `.git/info/exclude`, a `.git`
//! file's `commondir`), a FIFO among the walked files or as `.git` itself, and a `.gitignore`
//! swapped for a FIFO over and over while `glob` and `grep` run, and a folder swapped for a link
//! out of the root under `glob` and `grep`. Every call answers at once with
//! the right files (the FIFO skipped and named), and the daemon goes on serving.
//! Only the folder swap runs in process: a daemon hung on a FIFO in process would hang the test
//! (tokio waits for its blocking threads) where a process's only fails it; and libgit2 reads
//! the global git config of the daemon's HOME, the fixture's only in a process of its own.

use super::common::{Client, Era, Fixture, host_git, text_of};
use rmcp::model::CallToolResult;
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

fn mkfifo(path: &Path) {
    rustix::fs::mkfifoat(rustix::fs::CWD, path, rustix::fs::Mode::from_raw_mode(0o644))
        .unwrap_or_else(|e| panic!("mkfifo {}: {e}", path.display()));
}

/// A call that must answer within a few seconds (a walk blocked on a FIFO never would).
async fn soon(c: &Client, tool: &str, args: Value) -> CallToolResult {
    tokio::time::timeout(Duration::from_secs(10), c.call(tool, args))
        .await
        .unwrap_or_else(|_| panic!("{tool} hung"))
}

/// `soon`, which must succeed; its structured content.
async fn soon_ok(c: &Client, tool: &str, args: Value) -> Value {
    let r = soon(c, tool, args.clone()).await;
    assert_ne!(r.is_error, Some(true), "{tool} {args}: {}", text_of(&r));
    r.structured_content.unwrap_or_default()
}

fn glob_files(v: &Value) -> Vec<String> {
    v["files"].as_array().unwrap().iter().map(|f| f.as_str().unwrap().to_string()).collect()
}

fn grep_files(v: &Value) -> Vec<String> {
    let mut f: Vec<String> = v["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["path"].as_str().unwrap().into())
        .collect();
    f.dedup();
    f
}

/// A FIFO where the walk reads an ignore file — `.gitignore` at the base, `.ignore` below it,
/// `.git/info/exclude` of a repository in the tree, the `commondir` a linked worktree's `.git`
/// file leads to — is skipped and named, and `glob` and `grep` answer at once with the right
/// files: the other ignore files' rules still hold (positive control: `src/x.log`, ignored by
/// a normal `src/.gitignore`, stays out; `src/a.txt` is found), and a FIFO among the walked
/// files and one named `.git` are passed over. The daemon answers other calls throughout; the
/// canary outside the roots is unchanged.
#[tokio::test]
async fn a_fifo_ignore_file_is_skipped_and_the_walk_answers() {
    let fx = Fixture::new();
    let c = Client::start(&fx, &fx.fs_config()).await;
    fx.write("src/a.txt", "needle\n");
    fx.write("src/x.log", "needle\n");
    fx.write("src/.gitignore", "*.log\n");
    fx.write("sub/b.txt", "needle\n");
    fx.write("repo/c.txt", "needle\n");
    std::fs::create_dir_all(fx.root.join("repo/.git/info")).unwrap();
    let wt = tempfile::tempdir().unwrap();
    fx.write("wt/d.txt", "needle\n");
    fx.write("wt/.git", &format!("gitdir: {}\n", wt.path().display()));
    let want = ["repo/c.txt", "src/a.txt", "sub/b.txt", "wt/d.txt"];
    // The control: no FIFO anywhere.
    let g = soon_ok(&c, "glob", json!({ "pattern": "**/*.txt" })).await;
    assert_eq!(glob_files(&g), want, "{g}");
    let g = soon_ok(&c, "glob", json!({ "pattern": "**/*" })).await;
    assert!(!glob_files(&g).contains(&"src/x.log".to_string()), "{g}");

    // A FIFO among the walked files and one as `sub/.git`: passed over.
    mkfifo(&fx.root.join("src/pipe.txt"));
    mkfifo(&fx.root.join("sub/.git"));
    let root = fx.root.canonicalize().unwrap();
    for (fifo, shown) in [
        (fx.root.join(".gitignore"), root.join(".gitignore")),
        (fx.root.join("sub/.ignore"), root.join("sub/.ignore")),
        (fx.root.join("repo/.git/info/exclude"), root.join("repo/.git/info/exclude")),
        (wt.path().join("commondir"), wt.path().join("commondir")),
    ] {
        mkfifo(&fifo);
        let started = Instant::now();
        let named = format!("{} (FIFO)", shown.display());
        let g = soon_ok(&c, "glob", json!({ "pattern": "**/*" })).await;
        let files = glob_files(&g);
        for f in want {
            assert!(files.contains(&f.to_string()), "{f} missing past {}: {g}", fifo.display());
        }
        assert!(!files.contains(&"src/x.log".to_string()), "the control rule lost: {g}");
        assert!(!files.contains(&"src/pipe.txt".to_string()), "a FIFO listed as a file: {g}");
        let skipped = g["skipped"].as_array().map(|a| a.to_vec()).unwrap_or_default();
        assert!(skipped.iter().any(|s| s == named.as_str()), "{named} not named: {g}");
        let r = soon(&c, "grep", json!({ "pattern": "needle" })).await;
        assert_ne!(r.is_error, Some(true), "{}", text_of(&r));
        let said = text_of(&r);
        assert!(said.contains("ignore files not read") && said.contains(&named), "{said}");
        let v = r.structured_content.unwrap();
        assert_eq!(grep_files(&v), want, "{v}");
        assert!(started.elapsed() < Duration::from_secs(10));
        // The server still answers everything else.
        let r = soon_ok(&c, "read", json!({ "path": "src/a.txt" })).await;
        assert!(r["content"].as_str().unwrap_or_default().contains("needle"), "{r}");
        soon_ok(&c, "list_dir", json!({ "path": "src" })).await;
        std::fs::remove_file(&fifo).unwrap();
    }
    let r = soon(&c, "read", json!({ "path": "src/pipe.txt" })).await;
    assert_eq!(r.is_error, Some(true), "{}", text_of(&r));
    c.stop().await;
    fx.assert_canary();
}

/// A `.gitignore` swapped for a FIFO and back, as fast as a thread can, at the base and in a
/// folder below it, while `glob` and `grep` run again and again: every call answers within its
/// bound, none is an error, each finds the file no rule ignores (`src/a.txt`), and the daemon
/// then answers a plain `read`. Before the walk read ignore files itself this hung: a check
/// that found a regular file, then the `ignore` crate's blocking open of the FIFO swapped in.
#[tokio::test]
async fn a_gitignore_swapped_for_a_fifo_under_the_walk_never_hangs_it() {
    let fx = Fixture::new();
    let c = Client::start(&fx, &fx.fs_config()).await;
    fx.write("src/a.txt", "needle\n");
    fx.write("src/x.log", "needle\n");
    for d in 0..20 {
        fx.write(&format!("d{d}/f.txt"), "hay\n");
    }
    let stop = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(AtomicUsize::new(0));
    let swapper = {
        let (stop, swaps) = (stop.clone(), swaps.clone());
        let dirs = [fx.root.clone(), fx.root.join("src")];
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                for dir in &dirs {
                    let (gi, tmp) = (dir.join(".gitignore"), dir.join(".gitignore.new"));
                    // Errors are the test's end (the fixture gone), not the swapper's.
                    let _ = std::fs::write(&tmp, "*.log\n");
                    let _ = std::fs::rename(&tmp, &gi);
                    let _ = std::fs::remove_file(&gi);
                    let mode = rustix::fs::Mode::from_raw_mode(0o644);
                    let _ = rustix::fs::mkfifoat(rustix::fs::CWD, &gi, mode);
                    let _ = std::fs::remove_file(&gi);
                }
                swaps.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    let mut fifo_seen = 0;
    for i in 0..60 {
        let (tool, args) = if i % 2 == 0 {
            ("glob", json!({ "pattern": "**/*.txt" }))
        } else {
            ("grep", json!({ "pattern": "needle", "output": "files" }))
        };
        let r = soon(&c, tool, args).await;
        let said = text_of(&r);
        assert_ne!(r.is_error, Some(true), "{tool} call {i}: {said}");
        assert!(said.contains("src/a.txt"), "{tool} call {i}: {said}");
        if said.contains("(FIFO)") {
            fifo_seen += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    assert!(swaps.load(Ordering::Relaxed) > 60, "the swaps did not race the calls");
    assert!(fifo_seen > 0, "no call met the FIFO: the swaps did not race the walks");
    let r = soon_ok(&c, "read", json!({ "path": "src/a.txt" })).await;
    assert!(r["content"].as_str().unwrap_or_default().contains("needle"), "{r}");
    c.stop().await;
    fx.assert_canary();
}

/// A FIFO where git keeps a regular file — `HEAD` (read while libgit2 opens the repository), a
/// loose ref (read later) — would block the git tools for ever (libgit2 opens by path,
/// blocking). Every git tool now answers at once, refusing the repository and naming the
/// FIFO; with the file restored the same call works again (positive control, before and
/// after). The canary outside the roots is unchanged.
#[tokio::test]
async fn a_fifo_in_a_git_dir_is_refused_at_once_never_read() {
    let fx = Fixture::new();
    let repo = fx.root.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    host_git(&fx.home, &repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("a.txt"), "a\n").unwrap();
    host_git(&fx.home, &repo, &["add", "a.txt"]);
    host_git(&fx.home, &repo, &["commit", "-q", "-m", "first"]);
    host_git(&fx.home, &repo, &["branch", "side"]);
    let c = Client::start(
        &fx,
        &fx.config(
            "[daemon]\nstate_dir = \"{state}\"\n\n[[builtins]]\nid = \"tools-git\"\n\
             grants = [\"filesystem\", \"spawn\"]\nfilesystem = [{ path = \"{root}\", write = true }]\n",
        ),
    )
    .await;
    let status = json!({ "repo": "repo" });
    soon_ok(&c, "git_status", status.clone()).await;
    for rel in [".git/refs/heads/side", ".git/HEAD"] {
        let p = repo.join(rel);
        let kept = std::fs::read(&p).unwrap();
        std::fs::remove_file(&p).unwrap();
        mkfifo(&p);
        for (tool, args) in [("git_status", status.clone()), ("git_log", json!({"repo": "repo"}))] {
            let r = soon(&c, tool, args).await;
            assert_eq!(r.is_error, Some(true), "{tool} with a FIFO at {rel}: {}", text_of(&r));
            let text = text_of(&r);
            assert!(
                text.contains(rel.rsplit('/').next().unwrap()) && text.contains("FIFO"),
                "{text}"
            );
        }
        std::fs::remove_file(&p).unwrap();
        std::fs::write(&p, kept).unwrap();
        soon_ok(&c, "git_status", status.clone()).await;
    }
    c.stop().await;
    fx.assert_canary();
}

/// `glob`'s walk reads folders by path: a folder swapped for a symlink to a host folder between
/// two of its reads led it out of the root, and the host folder's names came back as files of
/// the root (issue 22.3, names only: `grep` reads contents through descriptors). Now a name is
/// shown only when its folder is still a real folder beneath the root. A thread flips `sub`
/// between a real folder and a link to a folder outside holding uniquely named files while
/// `glob` runs again and again: no call shows an outside name; every call shows the root's own
/// file (positive control); the outside folder (the canary) is unchanged.
#[tokio::test]
async fn a_folder_swapped_for_a_link_never_shows_outside_names() {
    folder_swapped_for_a_link("glob", json!({ "pattern": "**/*.txt", "limit": 1000 })).await;
}

/// The same swap under `grep`, which opens each file in its folder as resolved once beneath
/// the root for all the folder's files (`Resolver::open_walked_in`): no call shows an outside
/// file's name or its line; every call finds the root's own file (positive control).
#[tokio::test]
async fn a_folder_swapped_for_a_link_never_lets_grep_read_outside() {
    let args = json!({ "pattern": "x-marks", "output": "content", "limit": 1000 });
    folder_swapped_for_a_link("grep", args).await;
}

/// `tool` with `args` 80 times while a thread flips `sub` between a real folder and a link to
/// a folder outside the root; every file holds `x-marks` and a `.txt` name.
async fn folder_swapped_for_a_link(tool: &str, args: Value) {
    let fx = Fixture::new();
    let c = Client::in_process(&fx, &fx.fs_config(), Era::Legacy).await;
    fx.write("keep/a.txt", "x-marks a\n");
    let outside = fx.root.parent().unwrap().join("outside-folder");
    std::fs::create_dir_all(&outside).unwrap();
    for i in 0..200 {
        let text = format!("x-marks host-secret-line-{i}\n");
        std::fs::write(outside.join(format!("host-secret-name-{i}.txt")), text).unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(AtomicUsize::new(0));
    let swapper = {
        let (stop, swaps) = (stop.clone(), swaps.clone());
        let (sub, real, link) =
            (fx.root.join("sub"), fx.root.join("sub.real"), fx.root.join("sub.link"));
        std::fs::create_dir_all(&real).unwrap();
        for i in 0..200 {
            std::fs::write(real.join(format!("own-{i}.txt")), "x-marks own\n").unwrap();
        }
        let target = outside.clone();
        std::thread::spawn(move || {
            let _ = std::os::unix::fs::symlink(&target, &link);
            while !stop.load(Ordering::Relaxed) {
                // Errors are the test's end (the fixture gone), not the swapper's.
                let _ = std::fs::rename(&real, &sub);
                std::thread::yield_now();
                let _ = std::fs::rename(&sub, &real);
                let _ = std::fs::rename(&link, &sub);
                std::thread::yield_now();
                let _ = std::fs::rename(&sub, &link);
                swaps.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    for i in 0..80 {
        let r = soon(&c, tool, args.clone()).await;
        let said = text_of(&r);
        assert_ne!(r.is_error, Some(true), "{tool} call {i}: {said}");
        assert!(said.contains("keep/a.txt"), "{tool} call {i}: {said}");
        assert!(!said.contains("host-secret"), "{tool} call {i} showed outside files: {said}");
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    assert!(swaps.load(Ordering::Relaxed) > 80, "the swaps did not race the calls");
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 200);
    c.stop().await;
    fx.assert_canary();
}
