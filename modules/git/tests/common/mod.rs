//! Fixtures for the git tool tests: temporary roots (writable, read-only, a remote root and a
//! folder outside every root) and repositories built with the `git` command line.

use hands_git::{Git, GitSettings, PushSettings};
use hands_roots::{Policy, PolicyLists, Resolver, RootSpec};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use tempfile::TempDir;

/// A temporary tree: `work/` (writable root), `ro/` (read-only root), `remote/` (writable
/// root for bare remotes) and `out/` (outside every root, where canaries would land).
pub struct Fx {
    _tmp: TempDir,
    pub base: PathBuf,
    pub work: PathBuf,
    pub ro: PathBuf,
    pub remote: PathBuf,
    pub out: PathBuf,
}

impl Fx {
    /// The tree with an empty `work/`.
    pub fn empty() -> Fx {
        let tmp = TempDir::new().unwrap();
        let base = std::fs::canonicalize(tmp.path()).unwrap();
        let [work, ro, remote, out] = ["work", "ro", "remote", "out"].map(|n| base.join(n));
        for d in [&work, &ro, &remote, &out] {
            std::fs::create_dir_all(d).unwrap();
        }
        Fx { _tmp: tmp, base, work, ro, remote, out }
    }

    /// The tree with a repository in `work/` on `main`, one commit of `a.txt` ("one\n"), and a
    /// repo-local identity.
    pub fn repo() -> Fx {
        let fx = Fx::empty();
        init(&fx.work);
        write(&fx.work, "a.txt", "one\n");
        git(&fx.work, &["add", "a.txt"]);
        git(&fx.work, &["commit", "-q", "-m", "first"]);
        fx
    }

    pub fn resolver(&self) -> Arc<Resolver> {
        let lists = PolicyLists {
            secret_patterns: vec![".env".into(), "*.pem".into()],
            protected: vec![
                ".git/hooks".into(),
                ".git/config".into(),
                ".envrc".into(),
                ".vscode".into(),
            ],
            ..PolicyLists::default()
        };
        let roots = [
            RootSpec { path: self.work.clone(), writable: true },
            RootSpec { path: self.ro.clone(), writable: false },
            RootSpec { path: self.remote.clone(), writable: true },
        ];
        Arc::new(Resolver::new(&roots, Policy::new(&lists).unwrap()).unwrap())
    }

    /// The tools with no author, no push.
    pub fn git(&self) -> Git {
        self.git_with(GitSettings::default())
    }

    /// The tools with push to `origin` for `task/*` and the network grant.
    pub fn git_push(&self) -> Git {
        self.git_with(GitSettings {
            author: None,
            push: Some(PushSettings::default()),
            network: true,
            ..GitSettings::default()
        })
    }

    pub fn git_with(&self, settings: GitSettings) -> Git {
        Git::new(self.resolver(), settings).unwrap()
    }

    /// A bare repository `remote/NAME.git` set as `origin` of `work/`, with `main` pushed.
    pub fn add_bare_remote(&self, name: &str) -> PathBuf {
        let bare = self.remote.join(format!("{name}.git"));
        git(&self.base, &["init", "-q", "--bare", "-b", "main", bare.to_str().unwrap()]);
        git(&self.work, &["remote", "add", "origin", bare.to_str().unwrap()]);
        git(&self.work, &["push", "-q", "origin", "main"]);
        bare
    }

    /// Files in `out/` (anything there is a canary that fired).
    pub fn canaries(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&self.out)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }
}

/// `git init` on `main` with a repo-local identity.
pub fn init(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q", "-b", "main"]);
    git(dir, &["config", "user.name", "Repo Person"]);
    git(dir, &["config", "user.email", "repo@example.com"]);
}

/// Runs the `git` command line in `dir`, isolated from the machine's config; panics on failure.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("HOME", dir)
        .env("GIT_AUTHOR_NAME", "Fixture")
        .env("GIT_AUTHOR_EMAIL", "fixture@example.com")
        .env("GIT_COMMITTER_NAME", "Fixture")
        .env("GIT_COMMITTER_EMAIL", "fixture@example.com")
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?} in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Writes `rel` under `dir`, making folders.
pub fn write(dir: &Path, rel: &str, content: &str) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, content).unwrap();
}

pub fn read(dir: &Path, rel: &str) -> String {
    std::fs::read_to_string(dir.join(rel)).unwrap()
}

/// Every ref and HEAD, with git2 (no `git` process, so no hostile config can fire).
pub fn refs(repo: &Path) -> Vec<String> {
    let r = git2::Repository::open(repo).unwrap();
    let mut out: Vec<String> = r
        .references()
        .unwrap()
        .map(|x| {
            let x = x.unwrap();
            format!("{} {:?}", x.name().unwrap_or(""), x.target())
        })
        .collect();
    let head = r.find_reference("HEAD").unwrap();
    out.push(format!("HEAD {:?} {:?}", head.symbolic_target(), head.target()));
    out.sort();
    out
}

/// The commit a ref points at, with git2.
pub fn tip(repo: &Path, refname: &str) -> Option<String> {
    let r = git2::Repository::open(repo).unwrap();
    r.find_reference(refname).ok().and_then(|x| x.target()).map(|o| o.to_string())
}
