//! Side-by-side benchmarks of the git tools through the real binary over stdio, against the
//! `git` CLI in the same run: `git_status` and `git_log` (limit 500) on a generated repository
//! with 100,000 files and 10,000 commits.
//!
//! Run: `cargo bench --bench git` (needs `git` on PATH). The repository is generated once with
//! `git fast-import` into `target/bench-git-repo` and reused; delete it to regenerate.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]
// Benchmarks spawn the binary and ripgrep, and make their trees by path.
#![allow(clippy::disallowed_methods)]

#[path = "common/mod.rs"]
mod common;
use common::{call, median, ms};
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt, service::RunningService};
use serde_json::{Value, json};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

type Client = RunningService<RoleClient, ()>;

const DIRS: usize = 1_000;
const FILES_PER_DIR: usize = 100;
const COMMITS: usize = 10_000;
/// Files each commit after the first modifies.
const TOUCHED: usize = 3;
const RUNS: usize = 5;
const LOG_FORMAT: &str = "--format=%H%x00%an%x00%ae%x00%aI%x00%s";

/// `git` with no system or global config (so the machine's settings cannot help or hurt it)
/// and a fixed identity.
fn git(dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.arg("-C")
        .arg(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "Bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.com")
        .env("GIT_COMMITTER_NAME", "Bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.com")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE");
    cmd
}

fn run(dir: &Path, args: &[&str]) -> Output {
    let out = git(dir).args(args).output().expect("git on PATH");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out
}

fn file_path(i: usize) -> String {
    format!("d{:03}/f{:02}.txt", i / FILES_PER_DIR, i % FILES_PER_DIR)
}

/// Writes one `M` command with inline data to the fast-import stream.
fn modify(w: &mut impl Write, path: &str, data: &str) {
    write!(w, "M 100644 inline {path}\ndata {}\n{data}\n", data.len()).unwrap();
}

/// The fast-import stream: a first commit adding every file, then commits each changing a
/// few files picked by a fixed LCG.
fn write_history(w: &mut impl Write) {
    let files = DIRS * FILES_PER_DIR;
    let t0 = 1_700_000_000u64;
    let mut seed = 12_345u64;
    for n in 0..COMMITS {
        let msg = if n == 0 { "initial import".to_string() } else { format!("change {n}") };
        write!(
            w,
            "commit refs/heads/main\nmark :{}\nauthor Bench <bench@example.com> {} +0000\n\
             committer Bench <bench@example.com> {} +0000\ndata {}\n{msg}\n",
            n + 1,
            t0 + 60 * n as u64,
            t0 + 60 * n as u64,
            msg.len()
        )
        .unwrap();
        if n == 0 {
            for i in 0..files {
                modify(w, &file_path(i), &format!("file {i}\nsecond line\n"));
            }
        } else {
            writeln!(w, "from :{n}").unwrap();
            for _ in 0..TOUCHED {
                seed = seed
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                let i = (seed >> 33) as usize % files;
                modify(w, &file_path(i), &format!("file {i}\nchanged in commit {n}\n"));
            }
        }
        writeln!(w).unwrap();
    }
    writeln!(w, "done").unwrap();
}

/// The benchmark repository: generated once into `target/bench-git-repo`, with a few staged,
/// modified and untracked entries so status has something to report.
fn repository() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/bench-git-repo");
    let marker = dir.join(".git/bench-generated");
    if marker.exists() {
        return dir;
    }
    if dir.exists() {
        std::fs::remove_dir_all(&dir).unwrap();
    }
    std::fs::create_dir_all(&dir).unwrap();
    let t = Instant::now();
    run(&dir, &["init", "-q", "-b", "main"]);
    let mut fi =
        git(&dir).args(["fast-import", "--quiet", "--done"]).stdin(Stdio::piped()).spawn().unwrap();
    {
        let mut w = std::io::BufWriter::with_capacity(1 << 20, fi.stdin.take().unwrap());
        write_history(&mut w);
        w.flush().unwrap();
    }
    assert!(fi.wait().unwrap().success());
    run(&dir, &["reset", "-q", "--hard", "main"]);

    // Work-tree changes: 5 modified, 1 staged new file, 1 staged rename, 3 untracked files and
    // 1 untracked folder (reported as one entry by both sides).
    for i in [7, 20_011, 45_678, 70_001, 99_999] {
        let p = dir.join(file_path(i));
        let mut text = std::fs::read_to_string(&p).unwrap();
        text.push_str("edited in the work tree\n");
        std::fs::write(&p, text).unwrap();
    }
    std::fs::write(dir.join("d500/staged.txt"), "staged\n").unwrap();
    run(&dir, &["add", "d500/staged.txt"]);
    run(&dir, &["mv", &file_path(31_337), "d313/renamed.txt"]);
    for name in ["untracked-1.txt", "d100/untracked-2.txt", "d900/untracked-3.txt"] {
        std::fs::write(dir.join(name), "untracked\n").unwrap();
    }
    std::fs::create_dir_all(dir.join("newdir/sub")).unwrap();
    for name in ["newdir/a.txt", "newdir/sub/b.txt"] {
        std::fs::write(dir.join(name), "untracked\n").unwrap();
    }
    // Let the index's mtime pass the files' so no entry stays racily clean, then refresh it.
    std::thread::sleep(Duration::from_millis(1100));
    run(&dir, &["update-index", "-q", "--refresh"]);
    run(&dir, &["status", "-s"]);
    std::fs::write(&marker, "").unwrap();
    println!("generated {} in {:.1} s", dir.display(), t.elapsed().as_secs_f64());
    dir
}

async fn start(root: &Path, state: &Path) -> Client {
    let cfg = state.join("daemon.toml");
    std::fs::write(
        &cfg,
        format!(
            "[daemon]\nstate_dir = \"{}\"\n[[builtins]]\nid = \"tools-git\"\ngrants = [\"filesystem\", \"spawn\"]\nfilesystem = [{{ path = \"{}\", write = true }}]\n",
            state.display(),
            root.display()
        ),
    )
    .unwrap();
    // Built by `cargo bench` (the bench profile, which is the release one).
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_hands"));
    let mut cmd = tokio::process::Command::new(&bin);
    cmd.args(["serve", "--config", cfg.to_str().unwrap()]);
    ().serve(TokioChildProcess::new(cmd).unwrap()).await.unwrap()
}

fn git_time(dir: &Path, args: &[&str]) -> (Duration, String) {
    let t = Instant::now();
    let out = run(dir, args);
    (t.elapsed(), String::from_utf8(out.stdout).unwrap())
}

#[tokio::main]
async fn main() {
    let version = String::from_utf8(run(Path::new("."), &["--version"]).stdout).unwrap();
    let repo = repository();
    let tracked = run(&repo, &["ls-files"]).stdout.iter().filter(|b| **b == b'\n').count();
    let commits = String::from_utf8(run(&repo, &["rev-list", "--count", "HEAD"]).stdout).unwrap();
    println!(
        "repo: {} ({tracked} tracked files, {} commits) · {}",
        repo.display(),
        commits.trim(),
        version.trim()
    );
    let state = tempfile::tempdir().unwrap();
    let c = start(&repo, state.path()).await;

    // status: the same entries on both sides (porcelain v2 prints one line per changed path,
    // `# ` lines are the branch headers).
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    let mut status = Value::Null;
    let mut git_entries = 0;
    for _ in 0..RUNS {
        let t = Instant::now();
        status = call(&c, "git_status", json!({"repo": repo})).await;
        ours.push(t.elapsed());
        let (d, out) = git_time(&repo, &["status", "--porcelain=v2", "--branch"]);
        theirs.push(d);
        git_entries = out.lines().filter(|l| !l.starts_with("# ")).count();
    }
    let (h, g) = (median(ours), median(theirs));
    let lists: Vec<String> = ["staged", "unstaged", "untracked", "conflicted"]
        .iter()
        .map(|k| format!("{} {k}", status[k].as_array().unwrap().len()))
        .collect();
    println!(
        "git_status: hands {:.1} ms ({} entries: {}; truncated {}) · git status --porcelain=v2 --branch {:.1} ms ({git_entries} entries) · ratio {:.2}",
        ms(h),
        status["total"],
        lists.join(", "),
        status["truncated"],
        ms(g),
        ms(h) / ms(g)
    );

    // log: the newest 500 commits of a linear history, the same ids on both sides.
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    let mut log = Value::Null;
    let mut git_ids = Vec::new();
    for _ in 0..RUNS {
        let t = Instant::now();
        log = call(&c, "git_log", json!({"repo": repo, "limit": 500})).await;
        ours.push(t.elapsed());
        let (d, out) = git_time(&repo, &["log", "-n", "500", LOG_FORMAT]);
        theirs.push(d);
        git_ids = out.lines().map(|l| l.split('\0').next().unwrap().to_string()).collect();
    }
    let ids: Vec<&str> =
        log["commits"].as_array().unwrap().iter().map(|c| c["id"].as_str().unwrap()).collect();
    assert_eq!(ids, git_ids, "hands and git list the same commits");
    let (h, g) = (median(ours), median(theirs));
    println!(
        "git_log limit 500: hands {:.1} ms ({} commits, truncated {}) · git log -n 500 --format=… {:.1} ms ({} commits) · ratio {:.2}",
        ms(h),
        ids.len(),
        log["truncated"],
        ms(g),
        git_ids.len(),
        ms(h) / ms(g)
    );
    c.cancel().await.unwrap();
}
