//! The network by domain (SPEC §5.4) through the real binary. Everything stays inside network
//! namespaces the test makes: the daemon runs in a "client" namespace (nothing routes out of
//! it), the test host — a Python HTTP server holding a file and a git repository — in a
//! "server" namespace joined to it by a veth pair, and the daemon reads a private `/etc/hosts`
//! (bound over the real one in a mount namespace of its own; the machine's file is never
//! touched). Canary listeners on the client namespace's loopback and its own interface address
//! must see no connection: a refused name never reaches the host.

mod asking;
mod reached;

use super::common::*;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

pub(super) const SERVER_IP: &str = "203.0.113.2";
const CLIENT_IP: &str = "203.0.113.1";
pub(super) const PORT: u16 = 8080;

/// Fails unless the daemon ran as `who`: the owner of the audit log it wrote says.
pub(super) fn assert_ran_as(fx: &Fixture, who: Who) {
    use std::os::unix::fs::MetadataExt;
    let owner = std::fs::metadata(fx.state.join("audit.jsonl")).unwrap().uid();
    assert_eq!(owner, if who == Who::User { COMMAND_UID } else { 0 }, "the daemon ran as {owner}");
}

/// Who the daemon runs as: root, as the suite runs it, or an ordinary user (uid
/// [`COMMAND_UID`]), as people run it — its sandbox is then made without privilege.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Who {
    Root,
    User,
}

/// Two namespaces, the veth between them, the test host and the canaries; removed on drop.
pub(super) struct TestNet {
    client: String,
    server: String,
    hosts: PathBuf,
    log: PathBuf,
    canary_log: PathBuf,
    children: Vec<Child>,
}

fn run(argv: &[&str]) {
    let out = Command::new(argv[0]).args(&argv[1..]).output().unwrap();
    assert!(out.status.success(), "{argv:?}: {}", String::from_utf8_lossy(&out.stderr));
}

impl TestNet {
    /// `None` (with a line saying so) where the test cannot make namespaces: not root.
    pub(super) fn new(fx: &Fixture) -> Option<TestNet> {
        if !needs_root("network", "making test hosts in network namespaces needs root") {
            return None;
        }
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::SeqCst);
        let tag = format!("{}{n}", std::process::id() % 100_000);
        let (client, server) = (format!("hc{tag}"), format!("hs{tag}"));
        run(&["ip", "netns", "add", &client]);
        run(&["ip", "netns", "add", &server]);
        let mut net = TestNet {
            client: client.clone(),
            server: server.clone(),
            hosts: fx.dir.path().join("hosts"),
            log: fx.dir.path().join("server.log"),
            canary_log: fx.dir.path().join("canary.log"),
            children: Vec::new(),
        };
        run(&[
            "ip", "link", "add", "vc", "netns", &client, "type", "veth", "peer", "name", "vs",
            "netns", &server,
        ]);
        for (ns, dev, ip) in [(&client, "vc", CLIENT_IP), (&server, "vs", SERVER_IP)] {
            run(&["ip", "-n", ns, "addr", "add", &format!("{ip}/24"), "dev", dev]);
            run(&["ip", "-n", ns, "link", "set", dev, "up"]);
            run(&["ip", "-n", ns, "link", "set", "lo", "up"]);
        }
        std::fs::write(
            &net.hosts,
            format!(
                "127.0.0.1 localhost\n{SERVER_IP} allowed.test denied.test other.test \
                 asked.test\n127.0.0.1 loop.test\n169.254.169.254 meta.test\n{CLIENT_IP} \
                 self.test\n"
            ),
        )
        .unwrap();
        // The test host: a file and a git repository served over dumb HTTP.
        let www = fx.dir.path().join("www");
        std::fs::create_dir_all(&www).unwrap();
        std::fs::write(www.join("file.txt"), "from the test host\n").unwrap();
        let repo = fx.dir.path().join("src-repo");
        std::fs::create_dir_all(&repo).unwrap();
        let git = |args: &[&str], dir: &Path| {
            let ok = Command::new("git")
                .args(["-c", "safe.directory=*"])
                .args(args)
                .current_dir(dir)
                .output()
                .unwrap();
            assert!(ok.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&ok.stderr));
        };
        git(&["init", "-q", "-b", "main"], &repo);
        std::fs::write(repo.join("README"), "cloned through the proxy\n").unwrap();
        git(&["add", "README"], &repo);
        git(&["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one"], &repo);
        git(
            &[
                "clone",
                "-q",
                "--bare",
                repo.to_str().unwrap(),
                www.join("repo.git").to_str().unwrap(),
            ],
            fx.dir.path(),
        );
        git(&["update-server-info"], &www.join("repo.git"));
        // A Python package index of one wheel (PEP 503's simple layout), for pip.
        let wheel = "import sys, zipfile, os\n\
             www = sys.argv[1]\n\
             os.makedirs(www + '/simple/handsprobe'); os.makedirs(www + '/packages')\n\
             files = {'handsprobe/__init__.py': 'VALUE = 1\\n',\n\
             \x20 'handsprobe-1.0.dist-info/METADATA': 'Metadata-Version: 2.1\\nName: handsprobe\\nVersion: 1.0\\n',\n\
             \x20 'handsprobe-1.0.dist-info/WHEEL': 'Wheel-Version: 1.0\\nGenerator: hands-test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n'}\n\
             with zipfile.ZipFile(www + '/packages/handsprobe-1.0-py3-none-any.whl', 'w') as z:\n\
             \x20   for n, t in files.items(): z.writestr(n, t)\n\
             \x20   z.writestr('handsprobe-1.0.dist-info/RECORD', ''.join(n + ',,\\n' for n in files) + 'handsprobe-1.0.dist-info/RECORD,,\\n')\n\
             open(www + '/simple/handsprobe/index.html', 'w').write('<html><body><a href=\"../../packages/handsprobe-1.0-py3-none-any.whl\">handsprobe-1.0-py3-none-any.whl</a></body></html>\\n')\n";
        run(&["python3", "-c", wheel, www.to_str().unwrap()]);
        let log = std::fs::File::create(&net.log).unwrap();
        let server_child = Command::new("nsenter")
            .args([&format!("--net=/run/netns/{server}"), "--", "python3", "-m", "http.server"])
            .args(["--bind", SERVER_IP, &PORT.to_string(), "--directory", www.to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        net.children.push(server_child);
        // Canaries where a refused name would land: the client namespace's loopback and its
        // own address.
        let canary = format!(
            "import socket, threading\n\
             def serve(addr):\n\
             \x20   s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n\
             \x20   s.bind((addr, {PORT})); s.listen(16)\n\
             \x20   while True:\n\
             \x20       c, _ = s.accept()\n\
             \x20       with open({log:?}, 'a') as f: f.write(addr + '\\n')\n\
             \x20       c.close()\n\
             for a in ['127.0.0.1', '{CLIENT_IP}']:\n\
             \x20   threading.Thread(target=serve, args=(a,), daemon=False).start()\n",
            log = net.canary_log.to_str().unwrap()
        );
        std::fs::write(&net.canary_log, "").unwrap();
        let canary_child = Command::new("nsenter")
            .args([&format!("--net=/run/netns/{client}"), "--", "python3", "-c", &canary])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        net.children.push(canary_child);
        // Both listening before the test goes on.
        for (ns, addr) in [(&server, SERVER_IP), (&client, "127.0.0.1"), (&client, CLIENT_IP)] {
            let probe = format!(
                "import socket,time\nfor i in range(200):\n  try:\n    socket.create_connection(('{addr}', {PORT}), 1).close(); break\n  except OSError: time.sleep(0.05)\n"
            );
            run(&["nsenter", &format!("--net=/run/netns/{ns}"), "--", "python3", "-c", &probe]);
        }
        // The readiness probes above counted; start the canaries' count afresh.
        std::thread::sleep(Duration::from_millis(100));
        std::fs::write(&net.canary_log, "").unwrap();
        Some(net)
    }

    /// Requests the test host served (one log line each).
    pub(super) fn served(&self) -> usize {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("\"GET ") || l.contains("\"HEAD "))
            .count()
    }

    /// Connections the canaries accepted.
    pub(super) fn canary_hits(&self) -> usize {
        std::fs::read_to_string(&self.canary_log).unwrap_or_default().lines().count()
    }

    /// The daemon in the client namespace, reading the test's hosts file, as root (as the rest
    /// of the suite runs it) or as an ordinary user. For the user, root makes the
    /// namespaces and the hosts file's mount, then `setpriv` drops to [`COMMAND_UID`] for the
    /// daemon: the fixture becomes that user's, and the daemon runs a copy (a hard link) of
    /// `hands` in it, since the checkout's folders may be closed to the user.
    pub(super) async fn daemon_as(&self, fx: &Fixture, config: &Path, who: Who) -> Client {
        Client { service: self.serve(fx, config, who, ()).await }
    }

    /// [`TestNet::daemon_as`] with a client of the test's choosing (a person who answers
    /// elicitations, say), in the 2025-11-25 era.
    async fn serve<H: rmcp::ClientHandler>(
        &self,
        fx: &Fixture,
        config: &Path,
        who: Who,
        handler: H,
    ) -> rmcp::service::RunningService<rmcp::RoleClient, H> {
        let (exe, drop_to) = match who {
            Who::Root => (hands_bin(), String::new()),
            Who::User => {
                let exe = fx.dir.path().join("hands");
                // Owned before the link is made: chowning a hard link chowns the build's own
                // binary, and then the launcher beside it is passed over.
                super::common::give_tree(fx.dir.path());
                if std::fs::hard_link(hands_bin(), &exe).is_err() {
                    std::fs::copy(hands_bin(), &exe).unwrap();
                }
                let id = COMMAND_UID;
                (exe, format!("setpriv --reuid={id} --regid={id} --clear-groups -- "))
            }
        };
        let mut cmd = tokio::process::Command::new("nsenter");
        cmd.args([&format!("--net=/run/netns/{}", self.client), "--"])
            .args(["unshare", "--mount", "--propagation", "private", "--", "sh", "-c"])
            .arg(format!("mount --bind \"$0\" /etc/hosts && exec {drop_to}\"$@\""))
            .arg(&self.hosts)
            .arg(exe)
            .args(["serve", "--config", config.to_str().unwrap()])
            .current_dir(&fx.root)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &fx.home)
            .env("XDG_STATE_HOME", &fx.state)
            .env("RUST_LOG", "warn")
            .stderr(Stdio::inherit());
        let transport = rmcp::transport::TokioChildProcess::new(cmd).unwrap();
        handshake(handler, transport, Era::Legacy).await
    }
}

impl Drop for TestNet {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        for ns in [&self.client, &self.server] {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

pub(super) fn config(fx: &Fixture, network: &str, timeout: u64) -> PathBuf {
    fx.config(&format!(
        "[daemon]\nstate_dir = \"{{state}}\"\n\n[trust]\napproval_timeout_secs = {timeout}\n\n\
         [[builtins]]\nid = \"tools-shell\"\ngrants = [\"filesystem\", \"spawn\", \"network\"]\n\
         filesystem = [{{ path = \"{{root}}\", write = true }}]\n\
         config = {{ trust = {{ external = \"allow\" }}, network = {network} }}\n"
    ))
}

async fn bash(c: &Client, command: &str) -> Value {
    c.ok("bash", json!({ "command": command, "timeout_secs": 60 })).await
}

pub(super) fn denied_hosts(out: &Value) -> Vec<String> {
    out["denied"]
        .as_array()
        .map(|a| a.iter().map(|d| d["what"].as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

#[tokio::test]
#[ignore = "needs root (test hosts in network namespaces); run with --include-ignored"]
async fn allowed_names_reach_the_test_host_and_nothing_else_leaves() {
    allowed_and_refused(Who::Root).await;
}

#[tokio::test]
#[ignore = "needs root (test hosts in network namespaces); run with --include-ignored"]
async fn as_an_ordinary_user_allowed_names_reach_the_test_host_and_nothing_else_leaves() {
    allowed_and_refused(Who::User).await;
}

async fn allowed_and_refused(who: Who) {
    let fx = Fixture::new();
    let Some(net) = TestNet::new(&fx) else { return };
    let cfg = config(
        &fx,
        "{ allow = [\"allowed.test\", \"loop.test\", \"meta.test\", \"self.test\"], deny = [\"denied.test\"], unknown = \"deny\" }",
        5,
    );
    let c = net.daemon_as(&fx, &cfg, who).await;

    // Positive controls first: plain HTTP, a CONNECT tunnel, SOCKS5 by name, and git clone.
    let url = format!("http://allowed.test:{PORT}/file.txt");
    let out = bash(&c, &format!("curl -sS {url}")).await;
    assert_eq!(out["stdout"], "from the test host\n", "{out}");
    let out = bash(&c, &format!("curl -sS --proxytunnel {url}")).await;
    assert_eq!(out["stdout"], "from the test host\n", "{out}");
    let out = bash(&c, &format!("curl -sS --proxy \"$ALL_PROXY\" {url}")).await;
    assert_eq!(out["stdout"], "from the test host\n", "{out}");
    let out = bash(
        &c,
        &format!("cd /tmp && git clone -q http://allowed.test:{PORT}/repo.git r && cat r/README"),
    )
    .await;
    assert_eq!(out["stdout"], "cloned through the proxy\n", "{out}");
    assert!(denied_hosts(&out).is_empty(), "{out}");
    // A package manager: pip downloads a wheel from the test host's simple index (plain HTTP,
    // which pip trusts only when told: the test hosts have no TLS).
    let out = bash(
        &c,
        &format!(
            "pip3 download --no-deps --no-cache-dir --disable-pip-version-check -q -d /tmp/dl \
             --trusted-host allowed.test --index-url http://allowed.test:{PORT}/simple/ \
             handsprobe && ls /tmp/dl"
        ),
    )
    .await;
    assert_eq!(out["stdout"], "handsprobe-1.0-py3-none-any.whl\n", "{out}");
    assert!(denied_hosts(&out).is_empty(), "{out}");
    let served_by_allowed = net.served();
    assert!(served_by_allowed >= 6, "the test host served {served_by_allowed} requests");

    // Refused: a deny entry, a name no rule covers, an IP literal, and allowed names whose
    // address is the client's loopback, the metadata service or its own interface.
    for (target, why) in [
        (format!("denied.test:{PORT}"), "deny entry"),
        (format!("other.test:{PORT}"), "network.allow"),
        (format!("{SERVER_IP}:{PORT}"), "IP address"),
        (format!("loop.test:{PORT}"), "loopback"),
        (format!("meta.test:{PORT}"), "link-local"),
        (format!("self.test:{PORT}"), "this host"),
    ] {
        let out = bash(&c, &format!("curl -sS http://{target}/file.txt")).await;
        assert!(out["stdout"].as_str().unwrap().contains("hands: "), "{target}: {out}");
        assert!(out["stdout"].as_str().unwrap().contains(why), "{target}: {out}");
        assert_eq!(denied_hosts(&out), vec![target.clone()], "{out}");
        // What a person can do: a deny entry is removed (adding an allow would change
        // nothing); anything else is allowed or approved.
        let remedy = out["denied"][0]["remedy"].as_str().unwrap_or_default().to_string();
        let wants = if why == "deny entry" { "network.deny" } else { "network.allow" };
        assert!(remedy.contains(wants), "{target}: {remedy}");
        let out = bash(&c, &format!("curl -sS --proxy \"$ALL_PROXY\" http://{target}/")).await;
        assert_ne!(out["exit_code"], 0, "{target} over SOCKS5: {out}");
    }
    // A tool that ignores the proxy variables has no route at all.
    let out =
        bash(&c, &format!("curl -sS --noproxy '*' -m 5 http://{SERVER_IP}:{PORT}/file.txt")).await;
    assert_ne!(out["exit_code"], 0, "{out}");
    assert_eq!(net.served(), served_by_allowed, "a refused connection reached the test host");
    assert_eq!(net.canary_hits(), 0, "a refused name reached the daemon's own host");

    // Every decision is in the audit log, refusals with their reason and allowed connections
    // with their bytes on close.
    c.stop().await;
    let records = fx.audit_records();
    let network: Vec<&Value> = records.iter().filter(|r| r["tool"] == "network").collect();
    assert!(network.iter().any(|r| r["decision"] == "deny"
        && r["arguments"]["host"] == "denied.test"
        && r["outcome"].as_str().unwrap().contains("deny entry")));
    assert!(network.iter().any(|r| r["outcome"] == "closed"
        && r["arguments"]["host"] == "allowed.test"
        && r["result"]["bytes_down"].as_u64().unwrap() > 0
        && r["result"]["address"] == format!("{SERVER_IP}:{PORT}")));
    assert_ran_as(&fx, who);
    fx.assert_canary();
}

/// The pending network question, polled from the daemon's control socket.
pub(super) async fn pending(fx: &Fixture, cfg: &Path, who: Who) -> Option<(String, String)> {
    for _ in 0..200 {
        let out = approvals(fx, cfg, who, &["list"]).await;
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        if let Some(line) = text.lines().find(|l| l.contains("a-")) {
            let id = line
                .split_whitespace()
                .find(|w| w.starts_with("a-"))
                .unwrap()
                .trim_matches(|c: char| !c.is_alphanumeric() && c != '-')
                .to_string();
            return Some((id, text));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    None
}

/// `hands approvals ARGS`, run by the daemon's own user (the person at its terminal).
pub(super) async fn approvals(
    fx: &Fixture,
    cfg: &Path,
    who: Who,
    args: &[&str],
) -> std::process::Output {
    let mut all = vec!["approvals", "--config", cfg.to_str().unwrap()];
    all.extend_from_slice(args);
    let mut cmd = fx.command(&all);
    if who == Who::User {
        cmd.uid(COMMAND_UID).gid(COMMAND_UID);
    }
    cmd.output().await.unwrap()
}

/// Answers a parked question through the control socket, as the dashboard would (from a
/// process of the daemon's own user).
async fn answer(fx: &Fixture, id: &str, choice: &str, who: Who) {
    let req = json!({ "op": "answer", "id": id, "choice": choice, "via": "dashboard" });
    let script = "import socket, sys\n\
                  s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])\n\
                  s.sendall(sys.argv[2].encode() + b'\\n'); print(s.makefile().readline())\n";
    let mut cmd = tokio::process::Command::new("python3");
    cmd.args(["-c", script]).arg(fx.state.join("control.sock")).arg(req.to_string());
    if who == Who::User {
        cmd.uid(COMMAND_UID).gid(COMMAND_UID);
    }
    let out = cmd.output().await.unwrap();
    let line = String::from_utf8_lossy(&out.stdout);
    assert!(line.contains("\"ok\":true") || line.contains("\"ok\": true"), "{line}");
}

#[tokio::test]
#[ignore = "needs root (test hosts in network namespaces); run with --include-ignored"]
async fn an_unknown_host_asks_a_person_once_for_the_session_and_again_after_revoke() {
    asked(Who::Root).await;
}

#[tokio::test]
#[ignore = "needs root (test hosts in network namespaces); run with --include-ignored"]
async fn as_an_ordinary_user_an_unknown_host_asks_a_person() {
    asked(Who::User).await;
}

async fn asked(who: Who) {
    let fx = Fixture::new();
    let Some(net) = TestNet::new(&fx) else { return };
    let cfg = config(&fx, "{ allow = [], unknown = \"ask\" }", 20);
    let c = std::sync::Arc::new(net.daemon_as(&fx, &cfg, who).await);
    let fetch = format!("curl -sS http://asked.test:{PORT}/file.txt");
    let call = |c: &std::sync::Arc<Client>| {
        let c = c.clone();
        let fetch = fetch.clone();
        tokio::spawn(async move { bash(&c, &fetch).await })
    };

    // Asked, approved once: it runs, and the question showed host, port and the command.
    let running = call(&c);
    let (id, shown) = pending(&fx, &cfg, who).await.expect("the connection was put to a person");
    assert!(shown.contains("asked.test:8080"), "{shown}");
    assert!(shown.contains("curl"), "{shown}");
    approvals(&fx, &cfg, who, &["approve", &id]).await;
    let out = running.await.unwrap();
    assert_eq!(out["stdout"], "from the test host\n", "{out}");
    let served = net.served();

    // Once means once: the next command is asked again; a person's no is a refused connection.
    let running = call(&c);
    let (id, _) = pending(&fx, &cfg, who).await.expect("asked again after an allow-once");
    approvals(&fx, &cfg, who, &["deny", &id]).await;
    let out = running.await.unwrap();
    assert!(
        out["stdout"].as_str().unwrap().contains("403")
            || out["stdout"].as_str().unwrap().contains("hands: "),
        "{out}"
    );
    assert_eq!(denied_hosts(&out), vec![format!("asked.test:{PORT}")]);
    assert_eq!(net.served(), served);

    // For the session: the next commands pass without a question...
    let running = call(&c);
    let (id, _) = pending(&fx, &cfg, who).await.expect("asked");
    answer(&fx, &id, "session", who).await;
    assert_eq!(running.await.unwrap()["stdout"], "from the test host\n");
    let out = bash(&c, &fetch).await;
    assert_eq!(out["stdout"], "from the test host\n", "the session permission held: {out}");

    // ...until a person revokes it: then it asks again (and nobody answers in time here
    // would be a refusal; a person denies it at once).
    approvals(&fx, &cfg, who, &["revoke", "--all"]).await;
    let running = call(&c);
    let (id, _) = pending(&fx, &cfg, who).await.expect("asked again after revoke");
    approvals(&fx, &cfg, who, &["deny", &id]).await;
    let out = running.await.unwrap();
    assert_eq!(denied_hosts(&out), vec![format!("asked.test:{PORT}")], "{out}");
    assert_eq!(net.canary_hits(), 0);
    let records = fx.audit_records();
    assert!(records.iter().any(|r| r["tool"] == "network"
        && r["decided_by"] == "person-via-terminal"
        && r["outcome"] == "allowed"));
    assert_ran_as(&fx, who);
    fx.assert_canary();
}

/// Found by the tenth attack pass: a connection made without the command's proxy credentials
/// (`curl -x` the proxy's bare address) is asked about as "an unidentified command", one
/// client for every agent: beta's person answered *for the session*, and alpha's commands then
/// reached the host unasked. Such a question is now once only: *session* is refused with why,
/// *once* lets that one connection through, and the next is asked again. Positive control: the
/// same host fetched with the credentials is allowed for the session and then passes unasked.
#[tokio::test]
#[ignore = "needs root (test hosts in network namespaces); run with --include-ignored"]
async fn a_connection_without_its_commands_credentials_is_allowed_once_at_most() {
    let who = Who::Root;
    let fx = Fixture::new();
    let Some(net) = TestNet::new(&fx) else { return };
    let cfg = config(&fx, "{ allow = [], unknown = \"ask\" }", 20);
    let c = std::sync::Arc::new(net.daemon_as(&fx, &cfg, who).await);
    let bare =
        format!("curl -sS -x \"http://${{HTTP_PROXY##*@}}\" http://asked.test:{PORT}/file.txt");
    let call = |command: String| {
        let c = c.clone();
        tokio::spawn(async move { bash(&c, &command).await })
    };

    let running = call(bare.clone());
    let (id, shown) = pending(&fx, &cfg, who).await.expect("the connection was put to a person");
    assert!(shown.contains("an unidentified command") && shown.contains("once only"), "{shown}");
    let out = approvals(&fx, &cfg, who, &["approve", &id, "--for", "session"]).await;
    let said =
        String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success() && said.contains("cannot be answered"), "{said}");
    approvals(&fx, &cfg, who, &["approve", &id]).await;
    assert_eq!(running.await.unwrap()["stdout"], "from the test host\n");
    let served = net.served();
    let running = call(bare.clone());
    let (id, _) = pending(&fx, &cfg, who).await.expect("asked again: a yes was for one connection");
    approvals(&fx, &cfg, who, &["deny", &id]).await;
    // (Not listed in the call's `denied`: without its credentials the connection is no call's.)
    let out = running.await.unwrap();
    assert!(out["stdout"].as_str().unwrap().contains("a person denied it"), "{out}");
    assert_eq!(net.served(), served, "a denied connection reached the test host");

    // The positive control: with its credentials, a session answer stands for the client.
    let fetch = format!("curl -sS http://asked.test:{PORT}/file.txt");
    let running = call(fetch.clone());
    let (id, _) = pending(&fx, &cfg, who).await.expect("asked");
    answer(&fx, &id, "session", who).await;
    assert_eq!(running.await.unwrap()["stdout"], "from the test host\n");
    assert_eq!(bash(&c, &fetch).await["stdout"], "from the test host\n");
    // ...which an unidentified connection still does not share.
    let running = call(bare);
    let (id, _) = pending(&fx, &cfg, who).await.expect("the unidentified one is asked");
    approvals(&fx, &cfg, who, &["deny", &id]).await;
    let out = running.await.unwrap();
    assert!(out["stdout"].as_str().unwrap().contains("a person denied it"), "{out}");
    assert_eq!(net.canary_hits(), 0);
    fx.assert_canary();
}

#[tokio::test]
async fn network_entries_are_checked_strictly() {
    let fx = Fixture::new();
    for (network, key) in [
        ("{ allow = [\"http://pkg.example.org\"] }", "config.network.allow[0]"),
        ("{ deny = [\"10.0.0.0/40\"] }", "config.network.deny[0]"),
        ("{ unknown = \"maybe\" }", "config.network.unknown"),
        ("{ mode = \"host\", allow = [\"pkg.example.org\"] }", "config.network.mode"),
    ] {
        let cfg = config(&fx, network, 5);
        let out = fx.command(&["check", "--config", cfg.to_str().unwrap()]).output().await.unwrap();
        let err = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!out.status.success(), "{network} was accepted");
        assert!(err.contains(key) && err.contains("hint:"), "{network}: {err}");
    }
    let cfg = config(
        &fx,
        "{ allow = [\"pkg.example.org\", \"*.pkg.example.org\", \"git.example.net:443\"] }",
        5,
    );
    let out = fx.command(&["check", "--config", cfg.to_str().unwrap()]).output().await.unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // `allow = ["*"]` is accepted (SPEC §5.4), and both check and doctor warn about it.
    let cfg = config(&fx, "{ allow = [\"*\"] }", 5);
    for sub in ["check", "doctor"] {
        let out = fx.command(&[sub, "--config", cfg.to_str().unwrap()]).output().await.unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("network.allow = [\"*\"]"), "{sub} did not warn: {text}");
    }
    // A `network` table without the grant is a config error naming the grant.
    let cfg = fx.config(
        "[daemon]\nstate_dir = \"{state}\"\n\n[[builtins]]\nid = \"tools-shell\"\n\
         grants = [\"filesystem\", \"spawn\"]\nfilesystem = [{ path = \"{root}\", write = true }]\n\
         config = { network = { allow = [\"pkg.example.org\"] } }\n",
    );
    let out = fx.command(&["check", "--config", cfg.to_str().unwrap()]).output().await.unwrap();
    let err = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "a network table without the grant was accepted: {err}");
    assert!(err.contains("config.network") && err.contains("`network` grant"), "{err}");
}

/// Reads a tmux session until its text holds `marker` (or 30 s pass); returns the text and
/// every `denied` entry the reads listed, added to `denied`.
async fn pane_until(c: &Client, session: &str, marker: &str, denied: &mut Vec<Value>) -> String {
    let start = std::time::Instant::now();
    loop {
        let r = c.ok("tmux_read", json!({ "session": session, "lines": 200 })).await;
        denied.extend(r["denied"].as_array().cloned().unwrap_or_default());
        let text = r["text"].as_str().unwrap_or_default().to_string();
        if text.contains(marker) || start.elapsed() > Duration::from_secs(30) {
            return text;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
#[ignore = "needs root (test hosts in network namespaces); run with --include-ignored"]
async fn a_tmux_pane_gets_the_proxy_and_its_rules() {
    tmux_pane(Who::Root).await;
}

#[tokio::test]
#[ignore = "needs root (test hosts in network namespaces); run with --include-ignored"]
async fn as_an_ordinary_user_a_tmux_pane_gets_the_proxy_and_its_rules() {
    tmux_pane(Who::User).await;
}

async fn tmux_pane(who: Who) {
    let fx = Fixture::new();
    let Some(net) = TestNet::new(&fx) else { return };
    let cfg = config(
        &fx,
        "{ allow = [\"allowed.test\"], deny = [\"denied.test\"], unknown = \"deny\" }",
        5,
    );
    let c = net.daemon_as(&fx, &cfg, who).await;
    // Positive control first: the allowed name through the pane's HTTP_PROXY, then the denied
    // one, which the proxy refuses with its reason; then a tool that ignores the variables.
    let command = format!(
        "curl -sS http://allowed.test:{PORT}/file.txt; \
         curl -sS http://denied.test:{PORT}/file.txt; echo; \
         curl -sS --noproxy '*' -m 5 http://{SERVER_IP}:{PORT}/file.txt || echo no-route; \
         echo pane-done"
    );
    let started = c.ok("tmux_start", json!({ "command": command, "name": "net" })).await;
    let mut denied = started["denied"].as_array().cloned().unwrap_or_default();
    let text = pane_until(&c, "net", "pane-done", &mut denied).await;
    // The session's results list the refused connection, as `bash`'s do.
    assert!(
        denied.iter().any(|d| d["layer"] == "network"
            && d["what"].as_str().is_some_and(|w| w.starts_with("denied.test:"))),
        "{denied:?}"
    );
    assert!(text.contains("from the test host"), "the allowed host was not reached: {text}");
    assert!(text.contains("hands: ") && text.contains("deny entry"), "{text}");
    assert!(text.contains("no-route"), "{text}");
    assert_eq!(net.served(), 1, "only the allowed request reached the test host");
    assert_eq!(net.canary_hits(), 0);
    c.ok("tmux_kill", json!({ "session": "net" })).await;
    c.stop().await;
    // The session's ticket named it: the proxy's records show the session, not an
    // unidentified command.
    let records = fx.audit_records();
    let network: Vec<&Value> = records.iter().filter(|r| r["tool"] == "network").collect();
    assert!(
        network.iter().any(|r| r["decision"] == "deny"
            && r["arguments"]["host"] == "denied.test"
            && r["arguments"]["command"].as_str().unwrap().starts_with("tmux session net")),
        "{network:?}"
    );
    assert_ran_as(&fx, who);
    fx.assert_canary();
}

#[tokio::test]
#[ignore = "needs root (test hosts in network namespaces); run with --include-ignored"]
async fn a_client_that_declared_elicitation_is_asked_during_the_bash_call() {
    let fx = Fixture::new();
    let Some(net) = TestNet::new(&fx) else { return };
    let cfg = config(&fx, "{ allow = [], unknown = \"ask\" }", 20);
    let person = Person::new(Some("allow_once"), true);
    let service = net.serve(&fx, &cfg, Who::Root, person.clone()).await;
    let fetch = format!("curl -sS http://asked.test:{PORT}/file.txt");
    let bash = |command: String| {
        let peer = service.peer().clone();
        async move {
            let args = json!({ "command": command, "timeout_secs": 60 });
            let Value::Object(args) = args else { unreachable!() };
            let params = rmcp::model::CallToolRequestParams::new("bash").with_arguments(args);
            let r = peer.call_tool(params).await.unwrap();
            assert_ne!(r.is_error, Some(true), "{}", text_of(&r));
            r.structured_content.unwrap()
        }
    };

    // Positive control first: the person allows once, through the client, while the call
    // waits; the question shows the host, the port and the command.
    let out = bash(fetch.clone()).await;
    assert_eq!(out["stdout"], "from the test host\n", "{out}");
    assert_eq!(person.times_asked(), 1);
    let question = person.last_question();
    assert!(question.contains("asked.test:8080") && question.contains("curl"), "{question}");
    let served = net.served();
    // Nothing was parked for a terminal: the client's person was the channel.
    let listed = approvals(&fx, &cfg, Who::Root, &["list"]).await;
    assert!(!String::from_utf8_lossy(&listed.stdout).contains("a-"), "{listed:?}");

    // Once is once; the person declines the next: a refused connection, listed in the result.
    person.set(None);
    let out = bash(fetch.clone()).await;
    assert_eq!(person.times_asked(), 2);
    assert_eq!(denied_hosts(&out), vec![format!("asked.test:{PORT}")], "{out}");
    assert_eq!(net.served(), served, "a declined connection reached the test host");
    assert_eq!(net.canary_hits(), 0);
    let _ = service.cancel().await;
    let records = fx.audit_records();
    assert!(records.iter().any(|r| r["tool"] == "network"
        && r["decided_by"] == "person-via-client"
        && r["outcome"] == "allowed"));
    fx.assert_canary();
}
