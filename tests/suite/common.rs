//! Shared test fixture: a temp folder with a root, an outside folder holding a canary, a fake
//! home (so the credential denylist points at files the test controls), and an rmcp client
//! that drives the real `hands` binary over stdio, or the same daemon in process over
//! `tokio::io::duplex`, in either protocol era.
#![allow(dead_code)]

use rmcp::model::{CallToolRequestParams, CallToolResult, ProtocolVersion};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientLifecycleMode, ClientServiceExt, RoleClient, ServiceExt};
use serde_json::Value;
use std::path::{Path, PathBuf};
use tokio::process::Command;

pub const CANARY: &str = "canary: must stay unchanged\n";

/// The `hands` binary the tests drive: `HANDS_BIN` when set (scripts/test-as-user runs a copy
/// that an unprivileged user can reach when the checkout's parents are closed to it), else the
/// one cargo built.
pub fn hands_bin() -> PathBuf {
    std::env::var_os("HANDS_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_hands")))
}

/// Whether the tests run as root (CI runs them twice: as root, then as an ordinary user).
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// For a test whose point needs root (planting a device node, say): true as root; as an
/// ordinary user it writes `SKIPPED test: why` past libtest's capture (scripts/test-as-user
/// lists these lines) and returns false, so the test returns without asserting anything.
pub fn needs_root(test: &str, why: &str) -> bool {
    if is_root() {
        return true;
    }
    use std::io::Write;
    let uid = rustix::process::geteuid().as_raw();
    let _ = writeln!(std::io::stderr(), "SKIPPED {test} as uid {uid}: {why}");
    false
}

/// A temp tree: `root/` (the writable root), `outside/` (with `canary.txt`), `home/` (HOME).
pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub root: PathBuf,
    pub outside: PathBuf,
    pub home: PathBuf,
    pub state: PathBuf,
}

/// The uid and gid commands of a root daemon run as in the suite (`nobody`).
pub const COMMAND_UID: u32 = 65534;

/// Whether this run is a root daemon over a root-owned project (issue 31 point 4: a build box,
/// a container): `HANDS_TEST_ROOT_OWNED=1` as root (`scripts/test-as-user -r`). Then nothing is
/// given to [`COMMAND_UID`]: the roots stay root's, and commands (still run as `nobody`) write
/// them through id-mapped binds, their files landing as root's.
pub fn root_owned() -> bool {
    is_root() && std::env::var_os("HANDS_TEST_ROOT_OWNED").is_some_and(|v| v == "1")
}

/// The owner on the host of what a root daemon's command creates in a root: the roots' owner,
/// [`COMMAND_UID`] as the suite gives them, or root in a [`root_owned`] run.
pub fn made_by_commands_uid() -> u32 {
    if root_owned() { 0 } else { COMMAND_UID }
}

/// Gives `path` to [`COMMAND_UID`] (not following a symlink); nothing in a [`root_owned`] run
/// or as an ordinary user (whose commands run as that user).
pub fn own(path: &Path) {
    if root_owned() || !is_root() {
        return;
    }
    std::os::unix::fs::lchown(path, Some(COMMAND_UID), Some(COMMAND_UID)).unwrap();
}

/// Runs the host's `git` CLI in `dir` (as the person would) with a fixed identity and `HOME`, so
/// no machine config and no `GIT_DIR`, `GIT_WORK_TREE` or `GIT_INDEX_FILE` of the test's own
/// environment counts; its output, whatever the exit status.
pub fn host_git_output(home: &Path, dir: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new("git")
        .args(["-c", "safe.directory=*", "-C"])
        .arg(dir)
        .args(args)
        .env("HOME", home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "Fixture")
        .env("GIT_AUTHOR_EMAIL", "fixture@example.com")
        .env("GIT_COMMITTER_NAME", "Fixture")
        .env("GIT_COMMITTER_EMAIL", "fixture@example.com")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .output()
        .unwrap()
}

/// [`host_git_output`], requiring success; its trimmed stdout.
pub fn host_git(home: &Path, dir: &Path, args: &[&str]) -> String {
    let out = host_git_output(home, dir, args);
    assert!(
        out.status.success(),
        "git {args:?} in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim_end().to_string()
}

/// Gives `path` and everything below it to the commands' user ([`give_tree`]) — a tree the test
/// made on the host that commands must write, such as a repository from `git init` — unless
/// the run is [`root_owned`], where projects stay root's as on a build box.
pub fn own_tree(path: &Path) {
    if !root_owned() {
        give_tree(path);
    }
}

/// Gives the tree at `path` to [`COMMAND_UID`] (as root; not following links) whatever the run:
/// for a daemon the test runs as that user, whose fixture is its own also in a [`root_owned`]
/// run (found by `scripts/test-as-user -r`: the user's daemon could not make its state).
pub fn give_tree(path: &Path) {
    if !is_root() {
        return;
    }
    std::os::unix::fs::lchown(path, Some(COMMAND_UID), Some(COMMAND_UID)).unwrap();
    if path.is_dir() && !path.is_symlink() {
        for e in std::fs::read_dir(path).unwrap() {
            give_tree(&e.unwrap().path());
        }
    }
}

impl Fixture {
    pub fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let root = base.join("root");
        let outside = base.join("outside");
        let home = base.join("home");
        let state = base.join("state");
        for d in [&root, &outside, &home, &state] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(outside.join("canary.txt"), CANARY).unwrap();
        // A daemon run as root runs commands as the root's owner, or `nobody` when that is
        // root (SPEC §5.2 item 6): the root belongs to `nobody`, so commands can write it.
        if rustix::process::geteuid().is_root() {
            own(&root);
        }
        Fixture { dir, root, outside, home, state }
    }

    /// Writes `daemon.toml` in the temp folder with `{root}`, `{outside}`, `{home}`, `{state}`
    /// replaced, and returns its path.
    pub fn config(&self, text: &str) -> PathBuf {
        let text = text
            .replace("{root}", self.root.to_str().unwrap())
            .replace("{outside}", self.outside.to_str().unwrap())
            .replace("{home}", self.home.to_str().unwrap())
            .replace("{state}", self.state.to_str().unwrap());
        let p = self.root.parent().unwrap().join("daemon.toml");
        std::fs::write(&p, text).unwrap();
        p
    }

    /// The usual config: tools-fs with `root` writable.
    pub fn fs_config(&self) -> PathBuf {
        self.config(
            "[daemon]\nstate_dir = \"{state}\"\n\n[[builtins]]\nid = \"tools-fs\"\ngrants = [\"filesystem\"]\nfilesystem = [{ path = \"{root}\", write = true }]\n",
        )
    }

    /// tools-fs and tools-shell on the root, external calls allowed.
    pub fn fs_shell_config(&self) -> PathBuf {
        self.config(
            "[daemon]\nstate_dir = \"{state}\"\n\n\
             [[builtins]]\nid = \"tools-fs\"\ngrants = [\"filesystem\"]\n\
             filesystem = [{ path = \"{root}\", write = true }]\n\n\
             [[builtins]]\nid = \"tools-shell\"\ngrants = [\"filesystem\", \"spawn\"]\n\
             filesystem = [{ path = \"{root}\", write = true }]\n\
             config = { trust = { external = \"allow\" } }\n",
        )
    }

    /// Every record of the audit log now, parsed (none while there is no log).
    pub fn audit_records(&self) -> Vec<Value> {
        match std::fs::read_to_string(self.state.join("audit.jsonl")) {
            Ok(text) => text.lines().map(|l| serde_json::from_str(l).unwrap()).collect(),
            Err(_) => Vec::new(),
        }
    }

    /// Asserts every canary outside the roots is unchanged and nothing new appeared there.
    pub fn assert_canary(&self) {
        let c = std::fs::read_to_string(self.outside.join("canary.txt")).unwrap();
        assert_eq!(c, CANARY, "the canary outside the roots changed");
        let names: Vec<_> = std::fs::read_dir(&self.outside)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(
            names,
            vec!["canary.txt".to_string()],
            "something was created outside the roots"
        );
    }

    pub fn write(&self, rel: &str, content: &str) -> PathBuf {
        let p = self.root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, content).unwrap();
        if rustix::process::geteuid().is_root() {
            for a in p.ancestors().take_while(|a| a.starts_with(&self.root)) {
                own(a);
            }
        }
        p
    }

    /// A command that runs the real binary with this fixture's environment.
    pub fn command(&self, args: &[&str]) -> Command {
        self.command_of(&hands_bin(), args)
    }

    /// [`Fixture::command`] of the `hands` binary at `bin` (a copy elsewhere).
    pub fn command_of(&self, bin: &Path, args: &[&str]) -> Command {
        let mut c = Command::new(bin);
        c.args(args)
            .current_dir(&self.root)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("XDG_STATE_HOME", &self.state)
            .env("RUST_LOG", "warn");
        c
    }

    pub fn std_command(&self, args: &[&str]) -> std::process::Command {
        let mut c = std::process::Command::new(hands_bin());
        c.args(args)
            .current_dir(&self.root)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("XDG_STATE_HOME", &self.state);
        c
    }
}

/// Which handshake the client opens with.
#[derive(Clone, Copy, Debug)]
pub enum Era {
    /// 2025-11-25: `initialize`.
    Legacy,
    /// 2026-07-28: `server/discover`, stateless per-request metadata.
    Modern,
}

/// Connects `handler` over `transport` with the handshake of `era`.
pub async fn handshake<H, T, E, A>(
    handler: H,
    transport: T,
    era: Era,
) -> RunningService<RoleClient, H>
where
    H: rmcp::ClientHandler,
    T: rmcp::transport::IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    match era {
        Era::Legacy => handler.serve(transport).await.unwrap(),
        Era::Modern => handler
            .serve_with_lifecycle(
                transport,
                ClientLifecycleMode::Discover {
                    preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                },
            )
            .await
            .unwrap(),
    }
}

/// A client of one daemon: `hands serve` as a process ([`Client::start`] and its kin), or a
/// [`Daemon`](hands::server::Daemon) built in this process from the same config file and served
/// over an in-memory duplex ([`Client::in_process`]: no process start, no sandbox self-test).
/// `H` answers what the daemon asks the client (a [`Person`] for the gate's questions).
pub struct Client<H: rmcp::ClientHandler = ()> {
    pub service: RunningService<RoleClient, H>,
}

impl Client {
    /// Starts `hands serve --config CONFIG` and connects with a 2025-11-25 client.
    pub async fn start(fx: &Fixture, config: &Path) -> Client {
        Client::start_era(fx, config, Era::Legacy).await
    }

    pub async fn start_era(fx: &Fixture, config: &Path, era: Era) -> Client {
        Client::start_with_env(fx, config, era, &[]).await
    }

    /// Starts the server with extra variables in its own environment (e.g. a secret-looking
    /// one that no command may see).
    pub async fn start_with_env(
        fx: &Fixture,
        config: &Path,
        era: Era,
        env: &[(&str, &str)],
    ) -> Client {
        Client::start_bin(fx, &hands_bin(), config, era, env).await
    }

    /// [`Client::start_with_env`] of the `hands` binary at `bin`.
    pub async fn start_bin(
        fx: &Fixture,
        bin: &Path,
        config: &Path,
        era: Era,
        env: &[(&str, &str)],
    ) -> Client {
        let mut cmd = fx.command_of(bin, &["serve", "--config", config.to_str().unwrap()]);
        cmd.envs(env.iter().copied());
        Client::start_cmd(cmd, era).await
    }

    /// Connects to the `hands serve` that `cmd` starts (any arguments, folder, environment).
    pub async fn start_cmd(cmd: Command, era: Era) -> Client {
        Client::start_cmd_as(cmd, era, ()).await
    }

    /// The daemon of `config` in this process, with a 2025-11-25 or 2026-07-28 client.
    pub async fn in_process(fx: &Fixture, config: &Path, era: Era) -> Client {
        Client::in_process_as(fx, config, era, ()).await
    }
}

impl<H: rmcp::ClientHandler> Client<H> {
    /// [`Client::start_era`] with `handler` answering the daemon's questions.
    pub async fn start_as(fx: &Fixture, config: &Path, era: Era, handler: H) -> Client<H> {
        let cmd = fx.command(&["serve", "--config", config.to_str().unwrap()]);
        Client::start_cmd_as(cmd, era, handler).await
    }

    /// [`Client::start_cmd`] with `handler` answering the daemon's questions.
    pub async fn start_cmd_as(mut cmd: Command, era: Era, handler: H) -> Client<H> {
        cmd.stderr(std::process::Stdio::inherit());
        let transport = TokioChildProcess::new(cmd).unwrap();
        Client { service: handshake(handler, transport, era).await }
    }

    /// The daemon `hands serve --config CONFIG` would build (the same loading, the same
    /// `HandsServer` for a client named `stdio`), served in this process over
    /// `tokio::io::duplex`; `handler` answers its questions. What `serve` adds around the
    /// daemon is not here: no control socket (`hands stop`, `hands approvals`), no dashboard,
    /// no sandbox self-test. The daemon reads this process's environment (HOME, XDG_*, PATH)
    /// and folder, not the fixture's: tests that depend on those start the binary.
    pub async fn in_process_as(fx: &Fixture, config: &Path, era: Era, handler: H) -> Client<H> {
        use hands::server::{Daemon, HandsServer};
        let cfg = hands::config::load(Some(config)).unwrap_or_else(|e| panic!("{e}"));
        // A config without a state dir would put this daemon's audit log and approvals in the
        // tester's own state folder (the binary's comes from the fixture's XDG_STATE_HOME).
        let base = fx.root.parent().unwrap();
        let state = hands::server::absolute(&cfg.state_dir);
        assert!(state.starts_with(base), "in process, a config names a state_dir in the fixture");
        let daemon = std::sync::Arc::new(Daemon::new(cfg).unwrap());
        let (server_end, client_end) = tokio::io::duplex(1 << 20);
        let server = HandsServer::new(daemon.clone(), "stdio");
        // The daemon ends when the client does (its end of the duplex closes), as `hands serve`
        // does; like the process, `stop` does not wait for it.
        tokio::spawn(async move {
            if let Ok(running) = server.serve(server_end).await {
                let _ = running.waiting().await;
            }
            // As a stdio daemon does when its client has gone.
            daemon.shutdown().await;
        });
        Client { service: handshake(handler, client_end, era).await }
    }

    pub async fn call(&self, tool: &str, args: Value) -> CallToolResult {
        let Value::Object(map) = args else { panic!("arguments must be an object") };
        let params = CallToolRequestParams::new(tool.to_string()).with_arguments(map);
        self.service.peer().call_tool(params).await.unwrap()
    }

    /// Calls a tool that must succeed; returns its structured content.
    pub async fn ok(&self, tool: &str, args: Value) -> Value {
        let r = self.call(tool, args.clone()).await;
        assert_ne!(r.is_error, Some(true), "{tool} {args} failed: {}", text_of(&r));
        r.structured_content.clone().unwrap_or(Value::Null)
    }

    /// Calls a tool that must fail with a tool error; returns its message.
    pub async fn err(&self, tool: &str, args: Value) -> String {
        let r = self.call(tool, args.clone()).await;
        assert_eq!(r.is_error, Some(true), "{tool} {args} should have failed: {}", text_of(&r));
        text_of(&r)
    }

    pub async fn stop(self) {
        let _ = self.service.cancel().await;
    }
}

pub fn text_of(r: &CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Host pids whose command line is exactly `argv` (to prove a process is gone from the host).
pub fn host_processes(argv: &[&str]) -> Vec<u32> {
    let want: Vec<u8> = argv.iter().flat_map(|a| a.bytes().chain([0])).collect();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == want))
        .collect()
}

/// Polls `f` every 25 ms until it holds or `limit` passes; returns its last answer.
pub async fn wait_until(limit: std::time::Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = std::time::Instant::now();
    while start.elapsed() < limit {
        if f() {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    f()
}

/// A `sleep` duration no other test uses, to find that process in the host's /proc.
pub fn unique_sleep() -> String {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    format!("{}.{}{:03}", 5000 + std::process::id() % 4000, nanos.subsec_nanos(), n % 1000)
}

/// How the test's person answers: `None` declines; `Some("cancel")` cancels; otherwise the
/// choice is sent with `accept`.
#[derive(Clone)]
pub struct Person {
    pub answer: std::sync::Arc<std::sync::Mutex<Option<&'static str>>>,
    pub asked: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    pub elicitation: bool,
}

impl Person {
    pub fn new(answer: Option<&'static str>, elicitation: bool) -> Person {
        Person {
            answer: std::sync::Arc::new(std::sync::Mutex::new(answer)),
            asked: Default::default(),
            elicitation,
        }
    }

    pub fn set(&self, answer: Option<&'static str>) {
        *self.answer.lock().unwrap() = answer;
    }

    pub fn times_asked(&self) -> usize {
        self.asked.lock().unwrap().len()
    }

    pub fn last_question(&self) -> String {
        self.asked.lock().unwrap().last().cloned().unwrap_or_default()
    }
}

impl rmcp::ClientHandler for Person {
    async fn create_elicitation(
        &self,
        request: rmcp::model::ElicitRequestParams,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction};
        let ElicitRequestParams::FormElicitationParams { message, .. } = request else {
            panic!("hands asks with a form");
        };
        self.asked.lock().unwrap().push(message);
        let answer = *self.answer.lock().unwrap();
        if answer == Some("slow") {
            // A person who never answers in time.
            tokio::time::sleep(std::time::Duration::from_secs(5)).await;
        }
        Ok(match answer {
            None => ElicitResult::new(ElicitationAction::Decline),
            Some("cancel") => ElicitResult::new(ElicitationAction::Cancel),
            Some(choice) => ElicitResult::new(ElicitationAction::Accept)
                .with_content(serde_json::json!({ "decision": choice })),
        })
    }

    fn get_info(&self) -> rmcp::model::ClientConfig {
        use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
        let caps = if self.elicitation {
            ClientCapabilities::builder().enable_elicitation().build()
        } else {
            ClientCapabilities::default()
        };
        ClientConfig::new(caps, Implementation::new("hands-test-person", "0"))
    }
}

/// Starts `hands serve --http 127.0.0.1:0` (overriding the config's listen) with `env` added,
/// and reads the bound address from its banner. Its stderr keeps draining into the test's
/// output afterwards (cargo shows it when a test fails), so logging never blocks the daemon.
pub async fn serve_http(
    fx: &Fixture,
    config: &Path,
    env: &[(&str, &str)],
) -> (tokio::process::Child, std::net::SocketAddr) {
    use tokio::io::{AsyncBufReadExt, BufReader};
    #[allow(clippy::print_stderr)]
    fn relay(line: &str) {
        eprintln!("hands: {line}");
    }
    let mut cmd = fx.command(&["serve", "--config", config.to_str().unwrap(), "--http"]);
    cmd.arg("127.0.0.1:0")
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd.spawn().unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = tokio::time::timeout(std::time::Duration::from_secs(30), async {
        loop {
            let Some(line) = lines.next_line().await.unwrap() else {
                panic!("hands exited before its banner");
            };
            relay(&line);
            if let Some(rest) = line.split_once("http://").map(|(_, r)| r)
                && let Some((addr, _)) = rest.split_once("/mcp")
            {
                return addr.parse::<std::net::SocketAddr>().unwrap();
            }
        }
    })
    .await
    .expect("no banner with the address within 30 s");
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            relay(&line);
        }
    });
    (child, addr)
}

/// The commands' home of tools-shell on the host: one folder per set of roots below
/// `<state>/sandbox-home/tools-shell` (decision 0105), made when the daemon starts.
pub fn sandbox_home(fx: &Fixture) -> PathBuf {
    let all = fx.state.join("sandbox-home/tools-shell");
    let homes: Vec<PathBuf> = std::fs::read_dir(&all)
        .unwrap_or_else(|e| panic!("{}: {e}", all.display()))
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(homes.len(), 1, "one set of roots, one home: {homes:?}");
    homes.into_iter().next().unwrap()
}
