//! `git_push` over real SSH through the real binary: the test starts its own `sshd` on a
//! loopback port (its own host key, config and authorized key) and its own `ssh-agent` holding
//! the client key, and pushes to a bare repository in a temp folder of its own (outside the
//! daemon's roots: an SSH remote is reached over the network, not through the roots).
//!
//! Covered: success with the host in `known_hosts` (plain and `ssh-keygen -H` hashed); a
//! wrong host key, and a host missing from `known_hosts`, refused before authentication (the
//! sshd log shows no login, the remote ref is untouched); trust on first use recording the key
//! in the state dir and refusing the key of a re-keyed sshd; the branch patterns, the
//! fast-forward check and an agent without the key; with `push.urls`, only a listed SSH URL
//! is pushed to. Skipped, saying so, only when `sshd` is not installed.

use super::common::{Client, Fixture, host_git};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Where `sshd` is, if installed (it must be run by absolute path).
fn sshd_path() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = vec!["/usr/sbin".into(), "/usr/local/sbin".into(), "/sbin".into()];
    if let Some(path) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&path));
    }
    dirs.into_iter().map(|d| d.join("sshd")).find(|p| p.is_file())
}

#[allow(clippy::print_stderr)]
fn skip(test: &str) {
    eprintln!(
        "SKIPPED {test}: `sshd` is not installed (apt-get install openssh-server); push over SSH \
         was NOT tested"
    );
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// What `refname` points at in the bare repository `gitdir`, read with `git --git-dir`.
fn ref_of(gitdir: &Path, refname: &str) -> Option<String> {
    let out = Command::new("git")
        .args(["-c", "safe.directory=*"])
        .arg("--git-dir")
        .arg(gitdir)
        .args(["rev-parse", "--verify", "-q", refname])
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    out.status.success().then(|| String::from_utf8(out.stdout).unwrap().trim().to_string())
}

fn keygen(path: &Path) {
    run(Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", ""])
        .arg("-f")
        .arg(path));
}

/// `type base64` of a public key file.
fn public_key(path: &Path) -> String {
    let text = std::fs::read_to_string(path.with_extension("pub")).unwrap();
    text.split_whitespace().take(2).collect::<Vec<_>>().join(" ")
}

fn wait_for(what: &str, mut ready: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ready() {
        assert!(start.elapsed() < Duration::from_secs(20), "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// An sshd and an ssh-agent of the test's own, killed (by their own ids) when dropped.
struct SshServer {
    dir: tempfile::TempDir,
    sshd_bin: PathBuf,
    port: u16,
    sshd: Option<Child>,
    agent: Child,
    /// Which sshd log is current (a restart starts a new one).
    generation: u32,
}

impl SshServer {
    fn start(sshd_bin: PathBuf) -> SshServer {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        // sshd refuses to start without its privilege separation folder.
        let _ = std::fs::create_dir_all("/run/sshd");
        keygen(&base.join("host_key"));
        keygen(&base.join("client_key"));
        std::fs::copy(base.join("client_key.pub"), base.join("authorized_keys")).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();

        let sock = base.join("agent.sock");
        let agent = Command::new("ssh-agent")
            .arg("-D")
            .arg("-a")
            .arg(&sock)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        wait_for("ssh-agent's socket", || sock.exists());
        let mut s = SshServer { dir, sshd_bin, port, sshd: None, agent, generation: 0 };
        s.add_client_key();
        s.start_sshd();
        s
    }

    fn base(&self) -> PathBuf {
        std::fs::canonicalize(self.dir.path()).unwrap()
    }

    fn agent_sock(&self) -> PathBuf {
        self.base().join("agent.sock")
    }

    fn add_client_key(&self) {
        run(Command::new("ssh-add")
            .arg(self.base().join("client_key"))
            .env("SSH_AUTH_SOCK", self.agent_sock())
            .stderr(Stdio::null()));
    }

    fn remove_client_keys(&self) {
        run(Command::new("ssh-add").arg("-D").env("SSH_AUTH_SOCK", self.agent_sock()));
    }

    fn log_path(&self) -> PathBuf {
        self.base().join(format!("sshd-{}.log", self.generation))
    }

    /// The current sshd's log.
    fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    fn logins(&self) -> usize {
        self.log().matches("Accepted publickey for").count()
    }

    fn connections(&self) -> usize {
        self.log().matches("Connection from").count()
    }

    fn start_sshd(&mut self) {
        let base = self.base();
        let cfg = base.join("sshd_config");
        std::fs::write(
            &cfg,
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {base}/host_key\n\
                 AuthorizedKeysFile {base}/authorized_keys\nPidFile {base}/sshd.pid\n\
                 StrictModes no\nUsePAM no\nPasswordAuthentication no\n\
                 KbdInteractiveAuthentication no\nPubkeyAuthentication yes\n\
                 PermitRootLogin yes\nLogLevel VERBOSE\n",
                port = self.port,
                base = base.display()
            ),
        )
        .unwrap();
        self.generation += 1;
        let log = std::fs::File::create(self.log_path()).unwrap();
        let mut child = Command::new(&self.sshd_bin)
            .arg("-D")
            .arg("-e")
            .arg("-f")
            .arg(&cfg)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        wait_for("sshd to listen", || {
            if let Some(status) = child.try_wait().unwrap() {
                panic!("sshd exited ({status}): {}", self.log());
            }
            self.log().contains("Server listening")
        });
        self.sshd = Some(child);
    }

    fn stop_sshd(&mut self) {
        if let Some(mut c) = self.sshd.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Restarts sshd on the same port with a newly generated host key.
    fn rekey(&mut self) {
        self.stop_sshd();
        let key = self.base().join("host_key");
        std::fs::remove_file(&key).unwrap();
        std::fs::remove_file(key.with_extension("pub")).unwrap();
        keygen(&key);
        self.start_sshd();
    }

    fn host_key(&self) -> String {
        public_key(&self.base().join("host_key"))
    }

    /// A bare repository on the SSH side with `main` at `main_commit` of `local`.
    fn bare_repo(&self, home: &Path, local: &Path) -> PathBuf {
        let bare = self.base().join("remote.git");
        host_git(
            home,
            &self.base(),
            &["init", "-q", "--bare", "-b", "main", bare.to_str().unwrap()],
        );
        host_git(home, local, &["push", "-q", bare.to_str().unwrap(), "main"]);
        bare
    }

    fn url(&self, bare: &Path) -> String {
        let user = String::from_utf8(run(Command::new("id").arg("-un")).stdout).unwrap();
        format!("ssh://{}@127.0.0.1:{}{}", user.trim(), self.port, bare.display())
    }
}

impl Drop for SshServer {
    fn drop(&mut self) {
        self.stop_sshd();
        let _ = self.agent.kill();
        let _ = self.agent.wait();
    }
}

/// tools-git with push over SSH through the test's agent; `known_hosts` optional.
fn ssh_config(fx: &Fixture, ssh: &SshServer, known_hosts: Option<&Path>) -> PathBuf {
    let kh = match known_hosts {
        Some(p) => format!("known_hosts = \"{}\"\n", p.display()),
        None => String::new(),
    };
    fx.config(&format!(
        "[daemon]\nstate_dir = \"{{state}}\"\n\n\
         [[builtins]]\nid = \"tools-git\"\ngrants = [\"filesystem\", \"spawn\", \"network\"]\n\
         filesystem = [{{ path = \"{{root}}\", write = true }}]\n\n\
         [builtins.config]\nauthor_name = \"Agent\"\nauthor_email = \"agent@example.com\"\n\
         trust = {{ external = \"allow\" }}\n\n\
         [builtins.config.push]\nremote = \"origin\"\nbranches = [\"task/*\"]\n\
         ssh_auth_sock = \"{}\"\n{kh}",
        ssh.agent_sock().display()
    ))
}

/// A repository `root/repo` on `main` (one commit) with `origin` at the SSH URL of a bare
/// repository holding `main`; then `task/x` with one more commit. Returns (repo, bare, task/x).
fn repos(fx: &Fixture, ssh: &SshServer) -> (PathBuf, PathBuf, String) {
    let h = &fx.home;
    let repo = fx.root.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    host_git(h, &repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("a.txt"), "a\n").unwrap();
    host_git(h, &repo, &["add", "-A"]);
    host_git(h, &repo, &["commit", "-q", "-m", "first"]);
    let bare = ssh.bare_repo(h, &repo);
    host_git(h, &repo, &["remote", "add", "origin", &ssh.url(&bare)]);
    host_git(h, &repo, &["switch", "-q", "-c", "task/x"]);
    let x = commit(fx, &repo, "x.txt", "x\n");
    (repo, bare, x)
}

fn commit(fx: &Fixture, repo: &Path, file: &str, content: &str) -> String {
    std::fs::write(repo.join(file), content).unwrap();
    host_git(&fx.home, repo, &["add", "-A"]);
    host_git(&fx.home, repo, &["commit", "-q", "-m", file]);
    host_git(&fx.home, repo, &["rev-parse", "HEAD"])
}

fn task_x() -> Value {
    json!({"repo": "repo", "branch": "task/x"})
}

#[tokio::test]
#[ignore = "needs sshd (a real SSH server on loopback); run with --include-ignored"]
async fn push_over_ssh_checks_the_host_key_against_known_hosts() {
    let Some(sshd) = sshd_path() else {
        return skip("push_over_ssh_checks_the_host_key_against_known_hosts");
    };
    let fx = Fixture::new();
    let mut ssh = SshServer::start(sshd);
    let (repo, bare, x1) = repos(&fx, &ssh);
    let remote_main = ref_of(&bare, "refs/heads/main").unwrap();
    let kh = ssh.base().join("known_hosts");
    let name = format!("[127.0.0.1]:{}", ssh.port);
    let c = Client::start(&fx, &ssh_config(&fx, &ssh, Some(&kh))).await;

    // A wrong key for the host: refused after the key exchange, before authentication.
    let impostor = ssh.base().join("impostor");
    keygen(&impostor);
    std::fs::write(&kh, format!("{name} {}\n", public_key(&impostor))).unwrap();
    let e = c.err("git_push", task_x()).await;
    assert!(e.contains("host key") && e.contains(&name), "{e}");
    assert!(e.contains(kh.to_str().unwrap()) && e.contains("line 1"), "{e}");
    assert!(e.contains("Nothing was sent"), "{e}");
    assert!(ssh.connections() >= 1, "the daemon did connect: {}", ssh.log());
    assert_eq!(ssh.logins(), 0, "no login happened: {}", ssh.log());
    assert_eq!(ref_of(&bare, "refs/heads/task/x"), None, "nothing reached the remote");

    // The host not listed at all (another port, another host): refused without connecting.
    let before = ssh.connections();
    let key = ssh.host_key();
    std::fs::write(&kh, format!("127.0.0.1 {key}\n[127.0.0.2]:{} {key}\n", ssh.port)).unwrap();
    let e = c.err("git_push", task_x()).await;
    assert!(e.contains("not listed") && e.contains(&name), "{e}");
    assert_eq!(ssh.connections(), before, "no connection was made: {}", ssh.log());
    assert_eq!(ref_of(&bare, "refs/heads/task/x"), None);

    // The right key: the branch goes through, and the remote ref equals the local one.
    std::fs::write(&kh, format!("# the test's sshd\n{name} {key}\n")).unwrap();
    let p = c.ok("git_push", task_x()).await;
    assert_eq!(p["url"], ssh.url(&bare).as_str(), "{p}");
    assert!(p["old"].is_null(), "{p}");
    assert_eq!(p["new"], x1.as_str(), "{p}");
    assert_eq!(p["up_to_date"], false, "{p}");
    assert_eq!(
        ref_of(&bare, "refs/heads/task/x").unwrap(),
        host_git(&fx.home, &repo, &["rev-parse", "task/x"])
    );
    assert_eq!(ssh.logins(), 2, "one login to read the tip, one to send: {}", ssh.log());

    // The same entry hashed by ssh-keygen -H is recognised too.
    run(Command::new("ssh-keygen")
        .arg("-H")
        .arg("-f")
        .arg(&kh)
        .stdout(Stdio::null())
        .stderr(Stdio::null()));
    let hashed = std::fs::read_to_string(&kh).unwrap();
    assert!(hashed.contains("|1|") && !hashed.contains(&name), "{hashed}");
    let p = c.ok("git_push", task_x()).await;
    assert_eq!(p["up_to_date"], true, "{p}");

    // `main` is outside the patterns over SSH too, even when ahead.
    host_git(&fx.home, &repo, &["branch", "-f", "main", "task/x"]);
    let e = c.err("git_push", json!({"repo": "repo", "branch": "main"})).await;
    assert!(e.contains("does not match the push patterns task/*"), "{e}");
    assert_eq!(ref_of(&bare, "refs/heads/main").unwrap(), remote_main, "remote main unchanged");

    // A fast-forward goes; the old tip is reported.
    let x2 = commit(&fx, &repo, "x2.txt", "x2\n");
    let p = c.ok("git_push", task_x()).await;
    assert_eq!((p["old"].as_str(), p["new"].as_str()), (Some(x1.as_str()), Some(x2.as_str())));
    assert_eq!(ref_of(&bare, "refs/heads/task/x").unwrap(), x2);

    // Someone else moves the remote branch: a diverging local commit is a non-fast-forward.
    let base = fx.root.parent().unwrap();
    let other = base.join("other");
    host_git(
        &fx.home,
        base,
        &["clone", "-q", "-b", "task/x", bare.to_str().unwrap(), other.to_str().unwrap()],
    );
    let theirs = commit(&fx, &other, "theirs.txt", "theirs\n");
    host_git(&fx.home, &other, &["push", "-q", "origin", "task/x"]);
    commit(&fx, &repo, "mine.txt", "mine\n");
    let e = c.err("git_push", task_x()).await;
    assert!(e.contains("non-fast-forward") && e.contains("never force-pushes"), "{e}");
    assert_eq!(ref_of(&bare, "refs/heads/task/x").unwrap(), theirs, "remote unchanged");

    // An agent that holds no accepted key: an authentication error naming the agent's socket.
    host_git(&fx.home, &repo, &["switch", "-q", "-c", "task/y"]);
    ssh.remove_client_keys();
    let e = c.err("git_push", json!({"repo": "repo", "branch": "task/y"})).await;
    assert!(e.contains("could not authenticate"), "{e}");
    assert!(
        e.contains(ssh.agent_sock().to_str().unwrap()) && e.contains("push.ssh_auth_sock"),
        "{e}"
    );
    assert_eq!(ref_of(&bare, "refs/heads/task/y"), None);
    ssh.add_client_key();
    let p = c.ok("git_push", json!({"repo": "repo", "branch": "task/y"})).await;
    assert_eq!(ref_of(&bare, "refs/heads/task/y").unwrap(), p["new"].as_str().unwrap());

    // The server refuses an update (its own pre-receive hook): an error, not a success.
    let hook = bare.join("hooks/pre-receive");
    std::fs::write(
        &hook,
        "#!/bin/sh\nwhile read old new ref; do\n  [ \"$ref\" = refs/heads/task/deny ] && exit 1\ndone\nexit 0\n",
    )
    .unwrap();
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    host_git(&fx.home, &repo, &["switch", "-q", "-c", "task/deny"]);
    let e = c.err("git_push", json!({"repo": "repo", "branch": "task/deny"})).await;
    assert!(e.contains("the remote rejected refs/heads/task/deny"), "{e}");
    assert_eq!(ref_of(&bare, "refs/heads/task/deny"), None);

    c.stop().await;
    ssh.stop_sshd();
    fx.assert_canary();
}

#[tokio::test]
#[ignore = "needs sshd (a real SSH server on loopback); run with --include-ignored"]
async fn push_over_ssh_trusts_the_first_host_key_and_refuses_a_changed_one() {
    let Some(sshd) = sshd_path() else {
        return skip("push_over_ssh_trusts_the_first_host_key_and_refuses_a_changed_one");
    };
    let fx = Fixture::new();
    let mut ssh = SshServer::start(sshd);
    let (repo, bare, x1) = repos(&fx, &ssh);
    let recorded = fx.state.join("known_hosts");
    let name = format!("[127.0.0.1]:{}", ssh.port);
    assert!(!recorded.exists());
    let c = Client::start(&fx, &ssh_config(&fx, &ssh, None)).await;

    // First use: accepted, and the key recorded in the state dir.
    let r = c.call("git_push", task_x()).await;
    assert_ne!(r.is_error, Some(true), "{}\n{}", super::common::text_of(&r), ssh.log());
    let p = r.structured_content.unwrap();
    assert_eq!(p["new"], x1.as_str(), "{p}");
    assert_eq!(ref_of(&bare, "refs/heads/task/x").unwrap(), x1);
    let text = std::fs::read_to_string(&recorded).unwrap();
    assert_eq!(text, format!("{name} {}\n", ssh.host_key()), "one line for the host");
    // Later uses with the same key go through and record nothing more.
    let x2 = commit(&fx, &repo, "x2.txt", "x2\n");
    c.ok("git_push", task_x()).await;
    assert_eq!(ref_of(&bare, "refs/heads/task/x").unwrap(), x2);
    assert_eq!(std::fs::read_to_string(&recorded).unwrap(), text);

    // The sshd comes back with another host key: refused before authentication.
    ssh.rekey();
    let x3 = commit(&fx, &repo, "x3.txt", "x3\n");
    let e = c.err("git_push", task_x()).await;
    assert!(e.contains("host key") && e.contains(&name), "{e}");
    assert!(e.contains("first use") && e.contains(recorded.to_str().unwrap()), "{e}");
    assert!(e.contains("Nothing was sent"), "{e}");
    assert_eq!(ssh.logins(), 0, "no login on the re-keyed sshd: {}", ssh.log());
    assert_eq!(ref_of(&bare, "refs/heads/task/x").unwrap(), x2, "remote unchanged");
    assert_ne!(x3, x2);
    assert_eq!(std::fs::read_to_string(&recorded).unwrap(), text, "the record is not replaced");

    c.stop().await;
    ssh.stop_sshd();
    fx.assert_canary();
}

/// With `push.urls`, the SSH path checks the URL too: the listed repository (also spelt with
/// a trailing `/`) receives the branch; the same server's other repository, another user or
/// another port — what a command could point `origin` at — is refused before any connection,
/// that repository unchanged.
#[tokio::test]
#[ignore = "needs sshd (a real SSH server on loopback); run with --include-ignored"]
async fn push_over_ssh_goes_only_to_a_listed_url() {
    let Some(sshd) = sshd_path() else {
        return skip("push_over_ssh_goes_only_to_a_listed_url");
    };
    let fx = Fixture::new();
    let mut ssh = SshServer::start(sshd);
    let (repo, bare, x1) = repos(&fx, &ssh);
    let listed = ssh.url(&bare);
    let cfg = ssh_config(&fx, &ssh, None);
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    text.push_str(&format!("urls = [\"{listed}\"]\n"));
    std::fs::write(&cfg, text).unwrap();
    let c = Client::start(&fx, &cfg).await;

    // Positive control: the listed URL.
    let p = c.ok("git_push", task_x()).await;
    assert_eq!(p["new"], x1.as_str(), "{p}");
    assert_eq!(ref_of(&bare, "refs/heads/task/x").unwrap(), x1);

    // The same server, another repository (or user, or port): refused without connecting.
    let other = ssh.base().join("other.git");
    host_git(
        &fx.home,
        &ssh.base(),
        &["init", "-q", "--bare", "-b", "main", other.to_str().unwrap()],
    );
    let x2 = commit(&fx, &repo, "x2.txt", "x2\n");
    let before = ssh.connections();
    let other_user = listed.replacen("ssh://", "ssh://nobody-else-", 1);
    let other_port = format!("ssh://127.0.0.1:{}{}", ssh.port + 1, bare.display());
    for url in [ssh.url(&other), other_user, other_port] {
        host_git(&fx.home, &repo, &["remote", "set-url", "origin", &url]);
        let e = c.err("git_push", task_x()).await;
        assert!(e.contains("push.urls does not list") && e.contains(&url), "{url}: {e}");
    }
    assert_eq!(ssh.connections(), before, "no connection was made: {}", ssh.log());
    assert_eq!(ref_of(&other, "refs/heads/task/x"), None, "the unlisted repository is unchanged");
    assert_eq!(ref_of(&bare, "refs/heads/task/x").unwrap(), x1);

    // The listed URL written with a trailing `/` is the same remote.
    host_git(&fx.home, &repo, &["remote", "set-url", "origin", &format!("{listed}/")]);
    c.ok("git_push", task_x()).await;
    assert_eq!(ref_of(&bare, "refs/heads/task/x").unwrap(), x2);

    c.stop().await;
    ssh.stop_sshd();
    fx.assert_canary();
}
