//! `hands relay --config relay.toml`: the organization's side of runner mode (SPEC §13), one
//! process. Runners connect in at `/runner` (a WebSocket; `upgrade.rs`), agents reach runner
//! NAME at `/runners/NAME/mcp` as a streamable HTTP MCP endpoint served by the same door as
//! `hands serve --http` (`src/transport/mcp_door.rs`: Host/Origin, body cap, both eras, hangups),
//! and `GET /runners` lists the runners an agent may reach. The relay authenticates both ends,
//! routes and caps (`hub.rs`, `proxy.rs`); it holds none of a runner's policy. An agent proves
//! who it is with its bearer token, or with `[relay.oauth]` an OAuth access token whose identity
//! claim is its entry's `oauth_subject` (SPEC §14; the same check as `hands serve --http`'s,
//! `src/transport/oauth`, whose Protected Resource Metadata the relay serves too).

mod closed;
pub mod config;
mod hub;
mod proxy;
mod upgrade;

use crate::transport::conns::{self, Timed};
use crate::transport::hangups::Sessions;
use crate::transport::http_setup::{HostRule, mac, tag_of};
use crate::transport::mcp_door::{self, Body, Hosts, McpDoor, bad, bearer, plain, unauthorized};
use anyhow::Context as _;
use bytes::Bytes;
use config::RelayCfg;
use hmac::Mac;
use http::{Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hub::Runner;
use proxy::Proxy;
use rmcp::transport::StreamableHttpService;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use std::collections::HashMap;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

type Service = StreamableHttpService<Proxy, LocalSessionManager>;

struct Agent {
    name: String,
    /// The HMAC tag of its bearer token; `None` for an agent known by OAuth.
    tag: Option<Vec<u8>>,
    /// The identity claim's value of its OAuth tokens.
    subject: Option<String>,
    /// Indices into `Relay::runners` of the runners it may reach.
    reaches: Vec<usize>,
}

/// The state every connection shares.
pub struct Relay {
    hosts: Hosts,
    runners: Vec<Arc<Runner>>,
    agents: Vec<Agent>,
    /// (agent, runner) → its door: the agent's identity is the service's.
    services: HashMap<(usize, usize), Door>,
    sessions: Arc<Sessions>,
    /// This process, told to each runner in the upgrade's answer.
    instance: String,
    oauth: Option<crate::transport::oauth::ResourceServer>,
}

/// An agent's door to one runner: its rmcp service and the sessions it holds.
struct Door {
    /// Its index in `Relay::sessions`.
    index: usize,
    service: Service,
    /// The service's sessions, which are this agent's alone on this runner.
    manager: Arc<LocalSessionManager>,
}

/// Everything `relay` needs, checked before the runtime starts: the tokens read, the TLS
/// certificate and key loaded.
pub struct Setup {
    cfg: RelayCfg,
    agent_tags: Vec<Option<Vec<u8>>>,
    tls: Option<tokio_rustls::TlsAcceptor>,
    oauth: Option<crate::transport::oauth::ResourceServer>,
}

impl Setup {
    pub fn new(cfg: RelayCfg) -> anyhow::Result<Setup> {
        let mut agent_tags: Vec<Option<Vec<u8>>> = Vec::new();
        for a in &cfg.agents {
            if a.oauth_subject.is_some() {
                agent_tags.push(None);
                continue;
            }
            let what = format!("[[relay.agents]] `{}`", a.name);
            let token = crate::transport::http_setup::read_secret(
                &what,
                a.token_env.as_deref(),
                a.token_file.as_deref(),
            )?;
            let tag = tag_of(token.as_bytes());
            if agent_tags.iter().any(|t| t.as_ref() == Some(&tag)) {
                anyhow::bail!(
                    "{what} has the same token as another agent\nhint: give each agent its own token"
                );
            }
            agent_tags.push(Some(tag));
        }
        let oauth = (cfg.oauth.as_ref())
            .map(|o| crate::transport::oauth::ResourceServer::new(o, "[relay.oauth]"))
            .transpose()?;
        let tls = match &cfg.tls {
            Some((cert, key)) => {
                Some(tokio_rustls::TlsAcceptor::from(Arc::new(server_tls(cert, key)?)))
            }
            None => None,
        };
        Ok(Setup { cfg, agent_tags, tls, oauth })
    }
}

/// The relay's TLS: the chain of `cert` and the key of `key` (PEM; PKCS#8, SEC1 or RSA).
fn server_tls(
    cert: &std::path::Path,
    key: &std::path::Path,
) -> anyhow::Result<rustls::ServerConfig> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .and_then(|i| i.collect())
        .map_err(|e| anyhow::anyhow!("[relay] cert_file {}: {e}", cert.display()))?;
    if chain.is_empty() {
        anyhow::bail!("[relay] cert_file {} holds no PEM certificate", cert.display());
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| {
        anyhow::anyhow!(
            "[relay] key_file {}: {e}\nhint: a PEM key: PKCS#8, SEC1 (EC) or RSA",
            key.display()
        )
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .context("[relay] cert_file and key_file do not make a TLS identity")?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// Binds, tells `bound` the address, and serves until SIGINT or SIGTERM.
pub async fn serve(setup: Setup, bound: impl FnOnce(std::net::SocketAddr)) -> anyhow::Result<()> {
    let Setup { cfg, agent_tags, tls, oauth } = setup;
    let listener =
        conns::bind(cfg.listen).with_context(|| format!("cannot listen on {}", cfg.listen))?;
    let addr = listener.local_addr()?;
    bound(addr);
    let shutdown = CancellationToken::new();
    let runners: Vec<Arc<Runner>> =
        cfg.runners.iter().map(|r| Runner::new(r.name.clone(), r.token_sha256)).collect();
    let agents: Vec<Agent> = (cfg.agents.iter().zip(agent_tags))
        .map(|(a, tag)| Agent {
            name: a.name.clone(),
            tag,
            subject: a.oauth_subject.clone(),
            reaches: (runners.iter().enumerate())
                .filter(|(_, r)| a.runners.is_match(&r.name))
                .map(|(i, _)| i)
                .collect(),
        })
        .collect();
    let rmcp_config = mcp_door::rmcp_config(&shutdown);
    let mut services = HashMap::new();
    for (ai, a) in agents.iter().enumerate() {
        for &ri in &a.reaches {
            let (runner, agent) = (runners[ri].clone(), Arc::<str>::from(a.name.as_str()));
            let manager = Arc::new(LocalSessionManager::default());
            let service = StreamableHttpService::new(
                move || Ok(Proxy::new(runner.clone(), agent.clone())),
                manager.clone(),
                rmcp_config.clone(),
            );
            let index = services.len();
            services.insert((ai, ri), Door { index, service, manager });
        }
    }
    let mut rules = vec![HostRule { host: cfg.public_host.clone(), port: None }];
    if !cfg.listen.ip().is_unspecified() {
        rules.push(HostRule { host: cfg.listen.ip().to_string(), port: None });
    }
    let hosts = Hosts { rules, remedy: "[relay].public_url in relay.toml" };
    let relay = Arc::new(Relay {
        hosts,
        runners,
        agents,
        services,
        sessions: Arc::default(),
        instance: crate::link::random_id(),
        oauth,
    });
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("cannot install the SIGTERM handler")?;
    // The door of `hands serve --http` (decision 0057): at the cap, the connection longest
    // without an agent's or a runner's valid token makes room; heads and TLS handshakes within
    // 10 s, bodies timed.
    let serving = conns::serve_tls(listener, conns::RELAY, tls, shutdown.clone(), move |req| {
        let relay = relay.clone();
        async move { relay.handle(req).await }
    });
    tokio::select! {
        () = serving => {}
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    shutdown.cancel();
    Ok(())
}

fn json(status: StatusCode, v: serde_json::Value) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from(v.to_string())).boxed());
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
    r
}

impl Relay {
    async fn handle(self: &Arc<Self>, mut req: Request<Timed>) -> Response<Body> {
        if let Err(r) = self.hosts.check_host(&req) {
            return *r;
        }
        if let Err(r) = self.hosts.check_origin(req.headers()) {
            return *r;
        }
        let path = req.uri().path().to_string();
        if let Some(oauth) = self.oauth.as_ref().filter(|o| o.is_metadata_path(&path)) {
            if req.method() != http::Method::GET {
                return plain(StatusCode::METHOD_NOT_ALLOWED, "GET the resource metadata");
            }
            return oauth.metadata();
        }
        if path == "/runner" {
            return upgrade::runner(self, req);
        }
        if path != "/runners" && !path.starts_with("/runners/") {
            return plain(
                StatusCode::NOT_FOUND,
                "hands relay serves /runners, /runners/NAME/mcp and /runner",
            );
        }
        let agent = match self.agent(req.headers()).await {
            Ok(a) => a,
            Err(r) => return *r,
        };
        // An agent's token: this connection is not closed to make room while it is served.
        if let Err(r) = conns::vouch(&mut req, conns::Holder::Token(&self.agents[agent].name)) {
            return *r;
        }
        if path == "/runners" {
            if req.method() != http::Method::GET {
                return plain(StatusCode::METHOD_NOT_ALLOWED, "GET /runners lists your runners");
            }
            return self.list(agent);
        }
        let Some(name) = path.strip_prefix("/runners/").and_then(|p| p.strip_suffix("/mcp")) else {
            return plain(StatusCode::NOT_FOUND, "a runner's MCP endpoint is /runners/NAME/mcp");
        };
        let found = self.runners.iter().position(|r| r.name == name);
        let Some(door) = found.and_then(|ri| self.services.get(&(agent, ri))) else {
            tracing::warn!(
                "relay: agent `{}` asked for runner `{}`, which it may not reach",
                self.agents[agent].name,
                hands_roots::shown(name)
            );
            return json(
                StatusCode::FORBIDDEN,
                serde_json::json!({"error": format!(
                    "agent {} may not reach runner {} (or there is no such runner); GET /runners \
                     lists those it may, and a person can add the name to the agent's `runners` \
                     patterns in relay.toml",
                    self.agents[agent].name,
                    hands_roots::shown(name)
                )}),
            );
        };
        let runner = found.map(|ri| &self.runners[ri]);
        if runner.is_some_and(|r| r.since().is_none()) {
            return json(
                StatusCode::SERVICE_UNAVAILABLE,
                serde_json::json!({"error": format!("runner {name} is not connected")}),
            );
        }
        let opens = !req.headers().contains_key("mcp-session-id");
        if opens && let Some(full) = runner.and_then(|r| r.busy_for(&self.agents[agent].name)) {
            return json(
                StatusCode::SERVICE_UNAVAILABLE,
                serde_json::json!({"error": full.to_string()}),
            );
        }
        let holder =
            format!("agent {} on runner {}", self.agents[agent].name, hands_roots::shown(name));
        let door = McpDoor {
            service: &door.service,
            manager: &door.manager,
            index: door.index,
            holder: &holder,
        };
        mcp_door::serve_mcp(door, &self.sessions, req).await
    }

    /// The agent whose token the request carries (an index): a bearer token compared in
    /// constant time with every agent's, else an OAuth access token whose identity claim is an
    /// agent's `oauth_subject`; else 401 (403 for a valid token no agent names).
    async fn agent(&self, headers: &http::HeaderMap) -> Result<usize, Box<Response<Body>>> {
        let presented = bearer(headers);
        let mut found = None;
        if let Some(presented) = presented {
            let mut m = mac();
            m.update(presented.as_bytes());
            for (i, a) in self.agents.iter().enumerate() {
                if a.tag.as_ref().is_some_and(|t| m.clone().verify_slice(t).is_ok()) {
                    found = Some(i);
                }
            }
        }
        if let Some(i) = found {
            return Ok(i);
        }
        if let Some(oauth) = &self.oauth {
            let claim = match oauth.identify(presented).await {
                Ok(c) => c,
                Err(refusal) => return Err(Box::new(oauth.refuse(refusal, "relay"))),
            };
            let entry = self.agents.iter().position(|a| a.subject.as_deref() == Some(&claim));
            return entry.ok_or_else(|| {
                let shown = hands_roots::shown(&claim);
                tracing::warn!("relay: no agent has oauth_subject `{shown}`; refused");
                Box::new(json(
                    StatusCode::FORBIDDEN,
                    serde_json::json!({"error": format!(
                        "the access token is valid, but no [[relay.agents]] entry has \
                         oauth_subject = \"{shown}\"; a person adds one to relay.toml"
                    )}),
                ))
            });
        }
        let Some(_) = presented else {
            return Err(unauthorized(
                "Bearer realm=\"hands-relay\"",
                "missing bearer token: send `Authorization: Bearer <token>` with your agent's token",
            ));
        };
        tracing::warn!("relay: refused a request with a bearer token no agent has");
        Err(unauthorized(
            "Bearer realm=\"hands-relay\", error=\"invalid_token\"",
            "the bearer token matches no [[relay.agents]] entry",
        ))
    }

    fn list(&self, agent: usize) -> Response<Body> {
        let runners: Vec<serde_json::Value> = (self.agents[agent].reaches.iter())
            .map(|&ri| {
                let r = &self.runners[ri];
                let since = r.since();
                serde_json::json!({
                    "name": r.name,
                    "connected": since.is_some(),
                    "since": since.map(crate::audit::rfc3339),
                })
            })
            .collect();
        json(StatusCode::OK, serde_json::json!({ "runners": runners }))
    }

    fn runner_named(&self, name: &str) -> Option<&Arc<Runner>> {
        self.runners.iter().find(|r| r.name == name)
    }
}

/// `bad` for the upgrade's refusals (shared with `upgrade.rs`).
fn refuse(status: StatusCode, text: &str) -> Response<Body> {
    *bad(status, text)
}
