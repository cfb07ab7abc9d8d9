//! Runner mode (SPEC §13) with real parts: the real `hands relay` on loopback with TLS from a
//! CA each test makes (rcgen), the real `hands serve` with `[runner]` dialling it, driven
//! through the relay by rmcp's streamable HTTP client and the official Python SDK
//! (`python.rs`): the door, identities, approvals, restarts and lost calls (`through.rs`),
//! every tool (`every.rs`), progress and cancellation (`both_ways.rs`), standing permissions
//! per agent and the dashboard (`scopes.rs`), `bash`'s files fitted under a link frame
//! (`outputs.rs`), sessions an agent deletes or a stopping runner closes (`closes.rs`).
//! `hostile.rs` puts a test-written relay stand-in in the relay's place,
//! `rogue.rs` a runner stand-in in a runner's.

mod both_ways;
mod closes;
mod crowd;
mod every;
mod hostile;
mod outputs;
mod python;
mod rogue;
mod scopes;
mod shares;
mod through;

use super::common::{Era, Fixture, handshake, wait_until};
use rmcp::RoleClient;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::Value;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Child;

pub const RUNNER_TOKEN: &str = "runner-token-0123456789abcdef";
pub const ALICE: &str = "alice-token-0123456789abcdef";
pub const BOB: &str = "bob-token-fedcba9876543210";
pub const CAROL: &str = "carol-token-0123456789abcdef";

/// A test CA, and a certificate it signed for `localhost` and 127.0.0.1.
pub struct Pki {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

impl Pki {
    pub fn new() -> Pki {
        use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name.push(rcgen::DnType::CommonName, "hands test CA");
        let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
            .unwrap()
            .signed_by(&key, &ca)
            .unwrap();
        Pki { ca_pem: ca.pem(), cert_pem: cert.pem(), key_pem: key.serialize_pem() }
    }
}

/// A child process whose stderr is echoed into the test's output, with the lines kept.
pub struct Proc {
    pub child: Child,
    pub lines: Arc<std::sync::Mutex<Vec<String>>>,
}

impl Proc {
    #[allow(clippy::print_stderr)]
    pub fn spawn(mut cmd: tokio::process::Command, label: &'static str) -> Proc {
        cmd.stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().unwrap();
        let lines: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
        let keep = lines.clone();
        let mut reader = BufReader::new(child.stderr.take().unwrap()).lines();
        tokio::spawn(async move {
            while let Ok(Some(line)) = reader.next_line().await {
                eprintln!("{label}: {line}");
                keep.lock().unwrap().push(line);
            }
        });
        Proc { child, lines }
    }

    pub fn pid(&self) -> u32 {
        self.child.id().unwrap()
    }

    pub fn said(&self, needle: &str) -> bool {
        self.lines.lock().unwrap().iter().any(|l| l.contains(needle))
    }

    pub fn text(&self) -> String {
        self.lines.lock().unwrap().join("\n")
    }

    pub async fn wait_for(&self, needle: &str, limit: Duration) -> bool {
        wait_until(limit, || self.said(needle)).await
    }
}

/// The organization's side: the PKI, `relay.toml` and the running relay.
pub struct Org {
    pub pki: Pki,
    pub dir: PathBuf,
    pub addr: SocketAddr,
    pub relay: Option<Proc>,
    /// TLS with the test CA's certificate, or plain HTTP (behind the organization's TLS proxy).
    pub tls: bool,
    /// Started at a desktop's descriptor soft limit (1,024), through `sh`'s `ulimit -S`.
    pub desktop_limit: bool,
}

pub fn sha256_hex(s: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(s.as_bytes()))
}

impl Org {
    /// Starts `hands relay` with TLS on a free loopback port, runners `box-1` and `box-2`,
    /// agents alice (`box-*`), bob (`other-*`) and carol (`box-1`).
    pub async fn start(fx: &Fixture) -> Org {
        Org::start_with(fx, true, false).await
    }

    /// The same relay speaking plain HTTP, as it does behind the organization's TLS proxy.
    pub async fn start_plain(fx: &Fixture) -> Org {
        Org::start_with(fx, false, false).await
    }

    /// [`Org::start`] at a desktop's descriptor soft limit (1,024; the hard limit stays).
    pub async fn start_at_desktop_limit(fx: &Fixture) -> Org {
        Org::start_with(fx, true, true).await
    }

    async fn start_with(fx: &Fixture, tls: bool, desktop_limit: bool) -> Org {
        let dir = fx.dir.path().join("org");
        std::fs::create_dir_all(&dir).unwrap();
        let pki = Pki::new();
        std::fs::write(dir.join("ca.pem"), &pki.ca_pem).unwrap();
        std::fs::write(dir.join("relay.crt"), &pki.cert_pem).unwrap();
        std::fs::write(dir.join("relay.key"), &pki.key_pem).unwrap();
        std::fs::write(dir.join("bob.token"), format!("{BOB}\n")).unwrap();
        let addr = "127.0.0.1:0".parse().unwrap();
        let mut org = Org { pki, dir, addr, relay: None, tls, desktop_limit };
        org.run(fx).await;
        org
    }

    fn toml(&self) -> String {
        let tls = if self.tls {
            format!(
                "cert_file = \"{dir}/relay.crt\"\nkey_file = \"{dir}/relay.key\"\n",
                dir = self.dir.display()
            )
        } else {
            String::new()
        };
        format!(
            "[relay]\nlisten = \"{addr}\"\npublic_url = \"https://relay.example.com\"\n{tls}\n\
             [[relay.runners]]\nname = \"box-1\"\ntoken_sha256 = \"{sha}\"\n\n\
             [[relay.runners]]\nname = \"box-2\"\ntoken_sha256 = \"{sha2}\"\n\n\
             [[relay.agents]]\nname = \"alice\"\ntoken_env = \"RELAY_TOKEN_ALICE\"\nrunners = [\"box-*\"]\n\n\
             [[relay.agents]]\nname = \"bob\"\ntoken_file = \"{dir}/bob.token\"\nrunners = [\"other-*\"]\n\n\
             [[relay.agents]]\nname = \"carol\"\ntoken_env = \"RELAY_TOKEN_CAROL\"\nrunners = [\"box-1\"]\n",
            addr = self.addr,
            dir = self.dir.display(),
            sha = sha256_hex(RUNNER_TOKEN),
            sha2 = sha256_hex("box-2-token-0123456789abcdef"),
        )
    }

    /// (Re)starts the relay on `self.addr` (a free port the first time).
    pub async fn run(&mut self, fx: &Fixture) {
        let file = self.dir.join("relay.toml");
        std::fs::write(&file, self.toml()).unwrap();
        let args = ["relay", "--config", file.to_str().unwrap()];
        let mut cmd = if self.desktop_limit {
            let limited = ["-c", "ulimit -S -n 1024 && exec \"$0\" \"$@\""];
            let mut cmd = fx.command_of(Path::new("/bin/sh"), &limited);
            cmd.arg(super::common::hands_bin()).args(args);
            cmd
        } else {
            fx.command(&args)
        };
        cmd.env("RELAY_TOKEN_ALICE", ALICE).env("RELAY_TOKEN_CAROL", CAROL).env("RUST_LOG", "info");
        let relay = Proc::spawn(cmd, "relay");
        let scheme = if self.tls { "https://" } else { "http://" };
        let banner = format!("listening on {scheme}");
        assert!(relay.wait_for(&banner, Duration::from_secs(20)).await, "no relay banner");
        let line =
            relay.lines.lock().unwrap().iter().find(|l| l.contains(&banner)).cloned().unwrap();
        let addr = line.split(scheme).nth(1).unwrap().split_whitespace().next().unwrap();
        self.addr = addr.parse().unwrap();
        self.relay = Some(relay);
    }

    pub async fn stop(&mut self) {
        if let Some(mut r) = self.relay.take() {
            r.child.kill().await.unwrap();
        }
    }

    pub fn ca_file(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    /// Where runners dial: `wss://` to the TLS relay, `ws://` to loopback to the plain one.
    pub fn url(&self) -> String {
        match self.tls {
            true => format!("wss://localhost:{}/runner", self.addr.port()),
            false => format!("ws://127.0.0.1:{}/runner", self.addr.port()),
        }
    }

    /// An agent's MCP endpoint for runner `name` over plain HTTP (the plain relay's own).
    pub fn endpoint(&self, name: &str) -> String {
        assert!(!self.tls, "the TLS relay is reached through a Forwarder");
        format!("http://{}/runners/{name}/mcp", self.addr)
    }

    /// One HTTPS request to the relay with `token`; (status, body).
    pub async fn get(&self, path: &str, token: &str) -> (u16, String) {
        let head =
            format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {token}");
        self.raw(&head, "").await
    }

    /// One hand-written request (`head` without its final blank line) and `body`; (status,
    /// body). `Content-Length` and `Connection: close` are added.
    pub async fn raw(&self, head: &str, body: &str) -> (u16, String) {
        let request =
            format!("{head}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
        let ca = self.tls.then_some(self.pki.ca_pem.as_str());
        exchange(self.addr, ca, request.as_bytes()).await
    }

    /// `GET /runners` as alice: `box-1`'s entry.
    pub async fn box1(&self) -> Value {
        let (status, body) = self.get("/runners", ALICE).await;
        assert_eq!(status, 200, "{body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        v["runners"].as_array().unwrap().iter().find(|r| r["name"] == "box-1").cloned().unwrap()
    }

    pub async fn wait_connected(&self, connected: bool, limit: Duration) -> bool {
        let start = std::time::Instant::now();
        while start.elapsed() < limit {
            if self.box1().await["connected"] == connected {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        false
    }
}

/// A TLS client trusting only `ca_pem`.
pub fn tls_connector(ca_pem: &str) -> tokio_rustls::TlsConnector {
    use rustls::pki_types::{CertificateDer, pem::PemObject};
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

/// One HTTP/1.1 exchange over TLS trusting only `ca_pem` (or plain TCP when `None`); (status,
/// body).
pub async fn exchange(addr: SocketAddr, ca_pem: Option<&str>, request: &[u8]) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut out = Vec::new();
    match ca_pem {
        Some(ca) => {
            let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
            let mut s = tls_connector(ca).connect(name, tcp).await.unwrap();
            let _ = s.write_all(request).await;
            let _ = s.read_to_end(&mut out).await;
        }
        None => {
            let mut s = tcp;
            let _ = s.write_all(request).await;
            let _ = s.read_to_end(&mut out).await;
        }
    }
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (status, body)
}

/// A plain-TCP port on loopback that carries each connection over TLS to the relay (the
/// agents' HTTP client here has no TLS of its own), or over plain TCP when `ca_pem` is `None`;
/// `cut` drops every carried connection at once (a link that dies in the middle of a call).
pub struct Forwarder {
    pub addr: SocketAddr,
    cut: Arc<tokio::sync::Notify>,
}

impl Forwarder {
    pub async fn start(to: SocketAddr, ca_pem: Option<String>) -> Forwarder {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let cut = Arc::new(tokio::sync::Notify::new());
        let c = cut.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else { return };
                let (ca, cut) = (ca_pem.clone(), c.clone());
                tokio::spawn(async move {
                    let tcp = tokio::net::TcpStream::connect(to).await.unwrap();
                    let _ = tcp.set_nodelay(true);
                    let _ = inbound.set_nodelay(true);
                    match ca {
                        Some(ca) => {
                            let name =
                                rustls::pki_types::ServerName::try_from("localhost").unwrap();
                            let Ok(mut tls) = tls_connector(&ca).connect(name, tcp).await else {
                                return;
                            };
                            tokio::select! {
                                _ = tokio::io::copy_bidirectional(&mut inbound, &mut tls) => {}
                                () = cut.notified() => {}
                            }
                        }
                        None => {
                            let mut tcp = tcp;
                            tokio::select! {
                                _ = tokio::io::copy_bidirectional(&mut inbound, &mut tcp) => {}
                                () = cut.notified() => {}
                            }
                        }
                    }
                });
            }
        });
        Forwarder { addr, cut }
    }

    /// Drops every connection carried now.
    pub fn cut(&self) {
        self.cut.notify_waiters();
    }
}

/// `daemon.toml` of a runner: tools-fs and tools-shell on the root (external allowed), write
/// class `ask`, `[runner]` with `url`, the token in a file, `ca_file` and `approvals`.
pub fn runner_config(
    fx: &Fixture,
    url: &str,
    ca: Option<&Path>,
    token: &str,
    approvals: &str,
) -> PathBuf {
    runner_config_with(fx, url, ca, token, approvals, DEFAULT_POLICY)
}

/// What a runner's machine declares in `runner_config`: the trust and the modules.
pub const DEFAULT_POLICY: &str = "[trust]\nwrite = \"ask\"\napproval_timeout_secs = 30\n\n\
    [[builtins]]\nid = \"tools-fs\"\ngrants = [\"filesystem\"]\n\
    filesystem = [{ path = \"{root}\", write = true }]\n\n\
    [[builtins]]\nid = \"tools-shell\"\ngrants = [\"filesystem\", \"spawn\"]\n\
    filesystem = [{ path = \"{root}\", write = true }]\n\
    config = { trust = { external = \"allow\" } }\n";

/// `runner_config` with `policy` (the rest of `daemon.toml`: `[trust]`, `[server.dashboard]`,
/// the modules; `{root}` and the like as `Fixture::config` takes them) in place of the default.
pub fn runner_config_with(
    fx: &Fixture,
    url: &str,
    ca: Option<&Path>,
    token: &str,
    approvals: &str,
    policy: &str,
) -> PathBuf {
    let token_file = fx.home.join("runner.token");
    std::fs::write(&token_file, format!("{token}\n")).unwrap();
    let ca = ca.map(|c| format!("ca_file = \"{}\"\n", c.display())).unwrap_or_default();
    fx.config(&format!(
        "[daemon]\nstate_dir = \"{{state}}\"\n\n\
         [runner]\nurl = \"{url}\"\nname = \"box-1\"\ntoken_file = \"{tf}\"\n{ca}approvals = \"{approvals}\"\n\n\
         {policy}",
        tf = token_file.display(),
    ))
}

/// An rmcp streamable HTTP client as the agent whose bearer token is `token`, at `url` (a
/// runner's endpoint at the relay, over plain HTTP), in `era`.
pub async fn agent_at<H: rmcp::ClientHandler>(
    url: String,
    token: &str,
    era: Era,
    handler: H,
) -> RunningService<RoleClient, H> {
    let config = StreamableHttpClientTransportConfig::with_uri(url).auth_header(token.to_string());
    handshake(handler, StreamableHttpClientTransport::from_config(config), era).await
}

/// One tool call that must reach the runner and come back (its result may still be an error).
pub async fn call<H: rmcp::ClientHandler>(
    c: &RunningService<RoleClient, H>,
    tool: &str,
    args: Value,
) -> CallToolResult {
    let Value::Object(args) = args else { panic!("arguments must be an object") };
    c.call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(args)).await.unwrap()
}

/// Starts `hands serve --config CONFIG` (stdin closed: a service) as a runner.
pub fn start_runner(fx: &Fixture, config: &Path) -> Proc {
    let mut cmd = fx.command(&["serve", "--config", config.to_str().unwrap()]);
    cmd.env("RUST_LOG", "info");
    Proc::spawn(cmd, "runner")
}

/// The peak resident memory of `pid` in MiB (`VmHWM`).
pub fn peak_rss_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap();
    kb / 1024
}
