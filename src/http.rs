//! The streamable HTTP transport: `hands serve --http ADDR` or `[server.http]`, MCP at `/mcp`.
//!
//! rmcp's `StreamableHttpService` speaks the protocol (2025-11-25 sessions and the stateless
//! 2026-07-28 era); this file is the door in front of it. Every request passes, in order:
//!
//! 1. the path: `/mcp`, else 404;
//! 2. `Host` (DNS-rebinding protection): a loopback name or address, the listen address's own
//!    IP, or an entry of `[server.http].allowed_hosts` (an entry with a port matches only that
//!    port), else 403 — the same status rmcp and the MCP spec use for this check;
//! 3. `Origin`, when present: an `http`/`https` origin whose host passes the same rule, else
//!    403 (`Origin: null` included);
//! 4. the bearer token, when `[[server.http.clients]]` are configured: compared in constant time
//!    with every client's token; none or no match is 401 with `WWW-Authenticate: Bearer`;
//! 5. the body: a `Content-Length` over [`MAX_BODY`] is 413 at once, and rmcp enforces the same
//!    cap while it reads a chunked body.
//!
//! The client's identity is decided by *which service* serves the request, not by anything the
//! request carries past the token: each configured client gets its own `StreamableHttpService`,
//! whose factory builds every session's `HandsServer` with that client's `name`, and its own
//! session manager. A session id minted for one client is unknown to every other client's
//! service (404), so a token can never act inside another client's session, and a handler never
//! reads the identity from headers or request extensions. With no clients configured (allowed
//! only on a loopback address) every request is served as the identity [`ANONYMOUS`].

use crate::config::{Config, Grant, HttpCfg, ModuleCfg, ModuleId, ModuleSettings};
use crate::hangups::Sessions;
use crate::server::{Daemon, HandsServer};
use anyhow::{Context as _, anyhow, bail};
use bytes::Bytes;
use hmac::digest::KeyInit;
use hmac::{Hmac, Mac};
use http::{HeaderMap, Request, Response, StatusCode, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use sha2::Sha256;
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The largest request body served (4 MiB): a `write` of the biggest file a model should send in
/// one call fits; anything larger is 413.
pub const MAX_BODY: usize = 4 * 1024 * 1024;

/// The identity of every HTTP client when no `[[server.http.clients]]` are configured (loopback
/// only). `stdio` is the identity on stdio; config validation reserves both names.
pub const ANONYMOUS: &str = "http";

/// Tokens shorter than this are refused at startup: a bearer token is the only lock on a
/// non-loopback listener.
const MIN_TOKEN_LEN: usize = 16;

/// A slow client gets this long to send its request headers.
const HEADER_TIMEOUT: Duration = Duration::from_secs(30);

/// The HMAC key that turns tokens into equal-length tags before the constant-time comparison;
/// it is not a secret (the tokens are), only a domain separator.
const TAG_KEY: [u8; 64] = *b"hands: bearer-token tags for a constant-time comparison, v1.....";

type Body = BoxBody<Bytes, Infallible>;
type Service = StreamableHttpService<HandsServer, LocalSessionManager>;

/// A host rule from `allowed_hosts`: the host (lowercase, no brackets) and, optionally, a port.
#[derive(Debug, Clone, PartialEq, Eq)]
struct HostRule {
    host: String,
    port: Option<u16>,
}

/// One configured client after startup: its name and the HMAC tag of its token.
struct ClientKey {
    name: String,
    tag: Vec<u8>,
}

/// Everything `serve` needs, checked before the runtime starts: the address, the host rules and
/// the clients' token tags (tokens read from their variables or files).
pub struct Setup {
    addr: SocketAddr,
    hosts: Vec<HostRule>,
    clients: Vec<ClientKey>,
}

impl Setup {
    /// The HTTP setup, or `None` when neither `--http` nor `[server.http]` asks for HTTP.
    /// `listen` (from `--http ADDR`) overrides `[server.http].listen`. Refuses a non-loopback
    /// address without clients, a loopback one without clients while commands share the host's
    /// network ([`loopback_refusal`]), a token file that commands or file tools could read, and
    /// any client whose token is missing, empty or too short.
    pub fn new(config: &Config, listen: Option<&str>) -> anyhow::Result<Option<Setup>> {
        let default_cfg;
        let cfg = match (config.http.as_ref(), listen) {
            (Some(c), _) => c,
            (None, Some(_)) => {
                default_cfg = HttpCfg {
                    listen: String::new(),
                    allowed_hosts: Vec::new(),
                    clients: Vec::new(),
                };
                &default_cfg
            }
            (None, None) => return Ok(None),
        };
        let (listen, from) = match listen {
            Some(l) => (l, "--http"),
            None => (cfg.listen.as_str(), "[server.http].listen"),
        };
        let addr: SocketAddr = listen.parse().map_err(|_| {
            anyhow!("{from} `{listen}` is not an address:port\nhint: for example 127.0.0.1:8765")
        })?;
        if !addr.ip().is_loopback() && cfg.clients.is_empty() {
            bail!(
                "refusing to serve HTTP on {addr} without bearer tokens: a non-loopback address is \
                 reachable from other machines, and anyone reaching it would get the tools\n\
                 hint: add a client to daemon.toml —\n  \
                 [[server.http.clients]]\n  name = \"ci-bot\"\n  token_env = \"HANDS_TOKEN_CI\"   \
                 # or token_file = \"~/.config/hands/ci-bot.token\"\n\
                 or listen on a loopback address such as 127.0.0.1:8765"
            );
        }
        if cfg.clients.is_empty()
            && let Some(why) = loopback_refusal(config, &addr.to_string())
        {
            bail!("{why}");
        }
        for c in &cfg.clients {
            if let Some(file) = &c.token_file
                && let Some(seen) = readable_by_modules(config, file)
            {
                bail!(
                    "[[server.http.clients]] `{}`: token_file {} lies {seen}, where a command \
                     or file tool could read the token and call the tools as `{}`\nhint: keep it \
                     outside every root and every folder commands see, e.g. \
                     ~/.config/hands/{}.token (chmod 600)",
                    c.name,
                    file.display(),
                    c.name,
                    c.name
                );
            }
        }
        let mut hosts = Vec::new();
        for entry in &cfg.allowed_hosts {
            hosts.push(parse_host_rule(entry).ok_or_else(|| {
                anyhow!(
                    "[server.http].allowed_hosts: `{entry}` is not a host or host:port\nhint: for \
                     example \"build.example.com\" or \"build.example.com:8765\""
                )
            })?);
        }
        // The listen address's own IP is a Host a client may use; an IP literal cannot be a
        // rebinding name.
        if !addr.ip().is_unspecified() {
            hosts.push(HostRule { host: normalize_host(&addr.ip().to_string()), port: None });
        }
        let mut clients: Vec<ClientKey> = Vec::new();
        for c in &cfg.clients {
            let token = read_token(c)?;
            let tag = tag_of(token.as_bytes());
            if let Some(other) = clients.iter().find(|o| o.tag == tag) {
                bail!(
                    "[[server.http.clients]] `{}` and `{}` have the same token, so a request could \
                     not say which of them it is\nhint: give each client its own token",
                    other.name,
                    c.name
                );
            }
            clients.push(ClientKey { name: c.name.clone(), tag });
        }
        Ok(Some(Setup { addr, hosts, clients }))
    }

    /// What the banner says for the transport, given the bound address.
    fn describe(&self, bound: SocketAddr) -> String {
        if self.clients.is_empty() {
            format!("http://{bound}/mcp (no bearer tokens: loopback only, identity `{ANONYMOUS}`)")
        } else {
            let names: Vec<&str> = self.clients.iter().map(|c| c.name.as_str()).collect();
            format!("http://{bound}/mcp (bearer tokens: {})", names.join(", "))
        }
    }
}

/// The module whose commands reach the host's loopback: tools-shell with the `network` grant,
/// whose commands share the host's network namespace (without it they get a private one).
pub fn loopback_reacher(config: &Config) -> Option<&ModuleCfg> {
    config.modules.iter().find(|m| {
        m.id == ModuleId::Shell
            && m.has(Grant::Network)
            && match &m.settings {
                // The network by domain reaches the host's loopback only where an allow entry
                // names a loopback address; `mode = "host"` always does. An invalid table is a
                // config error elsewhere; here it counts as reaching (fails closed).
                crate::config::ModuleSettings::Shell(sh) => match sh.network_mode() {
                    Ok(crate::config::NetworkMode::Domains(rules)) => rules.names_loopback(),
                    _ => true,
                },
                _ => true,
            }
    })
}

/// Why HTTP at `listen` without `[[server.http.clients]]` is refused, when it is: the address is
/// loopback (a non-loopback one needs tokens anyway) and commands reach the host's loopback, so
/// a command could connect as a client — use every module's tools, answer an approval put to
/// "its" client with *always* — and nothing a command can reach may grant anything.
pub fn loopback_refusal(config: &Config, listen: &str) -> Option<String> {
    let addr: SocketAddr = listen.parse().ok()?;
    let m = loopback_reacher(config)?;
    addr.ip().is_loopback().then(|| {
        format!(
            "refusing to serve HTTP on {addr} without bearer tokens: {} holds the `network` grant, \
             so its commands share the host's network and can connect to {addr} themselves — as a \
             client they would get every module's tools and could answer their own approvals\n\
             hint: give each MCP client a token of its own in daemon.toml —\n  \
             [[server.http.clients]]\n  name = \"my-agent\"\n  token_env = \"HANDS_TOKEN_AGENT\"   \
             # or token_file = \"~/.config/hands/my-agent.token\"\n\
             or take `network` off {}'s grants (its commands then get a private network)",
            m.id.name(),
            m.id.name()
        )
    })
}

/// Where commands or file tools could read `file`, when they could: inside a module's root, or
/// for tools-shell inside a folder every command sees (the system folders, the folders of its
/// `path`, its sandbox home), unless a credential or `sandbox.deny` entry masks it there. A
/// token or login kept there could be used by the agent itself.
pub fn readable_by_modules(config: &Config, file: &Path) -> Option<String> {
    let real = std::fs::canonicalize(file).unwrap_or_else(|_| file.to_path_buf());
    let lists = crate::server::policy_lists(config);
    if lists.credentials.iter().chain(&lists.deny).any(|d| real.starts_with(d)) {
        return None;
    }
    for m in &config.modules {
        if let Some(r) = m.roots.iter().find(|r| real.starts_with(&r.path)) {
            return Some(format!("inside the root {} of {}", r.path.display(), m.id.name()));
        }
        let ModuleSettings::Shell(sh) = &m.settings else { continue };
        let home = crate::server::absolute(&config.state_dir).join("sandbox-home");
        let path = sh.command_path();
        let seen = crate::shell::SYSTEM
            .iter()
            .map(PathBuf::from)
            .chain(path.split(':').filter(|d| Path::new(d).is_absolute()).map(PathBuf::from))
            .chain(std::iter::once(home))
            .find(|dir| {
                let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.clone());
                real.starts_with(&dir)
            });
        if let Some(dir) = seen {
            return Some(format!(
                "inside {}, a folder every command of {} sees",
                dir.display(),
                m.id.name()
            ));
        }
    }
    None
}

/// Reads one client's token from its variable or file, trimmed; refuses a missing, empty,
/// short or non-printable one, naming the client.
// The token file the person configured.
#[allow(clippy::disallowed_methods)]
pub(crate) fn read_token(c: &crate::config::HttpClientCfg) -> anyhow::Result<String> {
    let (raw, source) = match (&c.token_env, &c.token_file) {
        (Some(var), _) => {
            let v = std::env::var(var).map_err(|e| {
                anyhow!(
                    "[[server.http.clients]] `{}`: token_env = \"{var}\": {}\nhint: export \
                     {var} in the environment of `hands serve`, or use token_file",
                    c.name,
                    match e {
                        std::env::VarError::NotPresent => "the variable is not set",
                        std::env::VarError::NotUnicode(_) => "the variable is not UTF-8",
                    }
                )
            })?;
            (v, format!("${var}"))
        }
        (None, Some(file)) => {
            let v = std::fs::read_to_string(file).with_context(|| {
                format!(
                    "[[server.http.clients]] `{}`: cannot read token_file {}",
                    c.name,
                    file.display()
                )
            })?;
            (v, file.display().to_string())
        }
        (None, None) => bail!(
            "[[server.http.clients]] `{}` has neither token_env nor token_file\nhint: token_env = \
             \"HANDS_TOKEN_X\" reads the token from that variable",
            c.name
        ),
    };
    let token = raw.trim();
    if token.is_empty() {
        bail!(
            "[[server.http.clients]] `{}`: the token in {source} is empty\nhint: put a random \
             token there, e.g. the output of `openssl rand -hex 32`",
            c.name
        );
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        bail!(
            "[[server.http.clients]] `{}`: the token in {source} has spaces or characters that \
             cannot travel in an Authorization header\nhint: use printable ASCII, e.g. the output \
             of `openssl rand -hex 32`",
            c.name
        );
    }
    if token.len() < MIN_TOKEN_LEN {
        bail!(
            "[[server.http.clients]] `{}`: the token in {source} is {} characters; at least \
             {MIN_TOKEN_LEN} are required\nhint: `openssl rand -hex 32` makes a good one",
            c.name,
            token.len()
        );
    }
    Ok(token.to_string())
}

fn mac() -> Hmac<Sha256> {
    // A key of exactly SHA-256's block size: the infallible constructor.
    <Hmac<Sha256> as KeyInit>::new(&TAG_KEY.into())
}

fn tag_of(token: &[u8]) -> Vec<u8> {
    let mut m = mac();
    m.update(token);
    m.finalize().into_bytes().to_vec()
}

/// The state every connection shares.
struct Door {
    hosts: Vec<HostRule>,
    /// One service per configured client (same order as the clients), or one anonymous one.
    services: Vec<(Option<ClientKey>, Service)>,
    /// The sessions calls were made in, for clients that vanish mid-call.
    sessions: Arc<Sessions>,
}

/// Sets TCP_NODELAY on an accepted connection (`who` names the listener in the log). Answers
/// go out in several small writes (the head, SSE events): with Nagle's algorithm each next
/// write waited for the client's delayed ACK, 40 ms a call. The dashboard uses it too.
pub fn no_nagle(stream: &tokio::net::TcpStream, who: &str) {
    if let Err(e) = stream.set_nodelay(true) {
        tracing::debug!("{who}: cannot set TCP_NODELAY: {e}");
    }
}

/// Binds the address, prints the banner, and serves until SIGINT or SIGTERM.
pub async fn serve(daemon: Arc<Daemon>, setup: Setup) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(setup.addr)
        .await
        .with_context(|| format!("cannot listen on {}", setup.addr))?;
    let bound =
        listener.local_addr().with_context(|| format!("cannot listen on {}", setup.addr))?;
    crate::cli::eprint_line(&crate::report::banner(&daemon, &setup.describe(bound)));

    let shutdown = CancellationToken::new();
    let rmcp_config = StreamableHttpServerConfig::default()
        // The door checks Host itself (loopback always allowed, which rmcp's list cannot say for
        // all of 127.0.0.0/8), before the token, so a rebinding request learns nothing.
        .disable_allowed_hosts()
        .with_max_request_body_bytes(MAX_BODY)
        // A plain JSON answer when the handler has nothing to say before its result (most
        // calls); rmcp falls back to an SSE stream when it does (an elicitation, a progress
        // notification), so nothing is lost and the common call skips the SSE framing.
        .with_json_response(true)
        .with_cancellation_token(shutdown.child_token());
    let make_service = |name: String| -> Service {
        let daemon = daemon.clone();
        StreamableHttpService::new(
            move || Ok(HandsServer::new(daemon.clone(), &name)),
            Arc::new(LocalSessionManager::default()),
            rmcp_config.clone(),
        )
    };
    let services = if setup.clients.is_empty() {
        vec![(None, make_service(ANONYMOUS.to_string()))]
    } else {
        setup
            .clients
            .into_iter()
            .map(|c| {
                let svc = make_service(c.name.clone());
                (Some(c), svc)
            })
            .collect()
    };
    let door = Arc::new(Door { hosts: setup.hosts, services, sessions: Arc::default() });

    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("cannot install the SIGTERM handler")?;
    loop {
        let (stream, _peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(s) => s,
                Err(e) => {
                    // Out of descriptors and the like: say so, breathe, keep serving.
                    tracing::warn!("http: accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = tokio::signal::ctrl_c() => break,
            _ = term.recv() => break,
        };
        no_nagle(&stream, "http");
        let door = door.clone();
        let stop = shutdown.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req| {
                let door = door.clone();
                async move { Ok::<_, Infallible>(door.handle(req).await) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(stream), svc);
            tokio::select! {
                r = conn => if let Err(e) = r {
                    tracing::debug!("http: connection ended: {e}");
                },
                _ = stop.cancelled() => {}
            }
        });
    }
    shutdown.cancel();
    Ok(())
}

impl Door {
    async fn handle(&self, mut req: Request<Incoming>) -> Response<Body> {
        if req.uri().path() != "/mcp" {
            return plain(StatusCode::NOT_FOUND, "hands serves MCP at /mcp");
        }
        if let Err(r) = self.check_host(&req) {
            return *r;
        }
        if let Err(r) = self.check_origin(req.headers()) {
            return *r;
        }
        let (index, service) = match self.pick_service(req.headers()) {
            Ok(s) => s,
            Err(r) => return *r,
        };
        let too_long = req
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .is_some_and(|n| n > MAX_BODY as u64);
        if too_long {
            return plain(
                StatusCode::PAYLOAD_TOO_LARGE,
                &format!("request body over {MAX_BODY} bytes; send less in one call"),
            );
        }
        // The token has done its work; it goes no further (rmcp hands the request's headers to
        // handlers as `http::request::Parts`).
        req.headers_mut().remove(header::AUTHORIZATION);
        // A session's requests are signs of life for calls whose answer streams were cut
        // (src/hangups.rs); a POST is watched, a DELETE stops what still runs in the session.
        let session = req.headers().get("mcp-session-id").and_then(|v| v.to_str().ok());
        let Some(id) = session.map(str::to_string) else { return service.handle(req).await };
        self.sessions.touch(index, &id);
        match *req.method() {
            http::Method::POST => {
                let pending = self.sessions.prepare(index, &mut req);
                let answer = service.handle(req).await;
                match pending {
                    Some(p) => p.watch(answer),
                    None => answer,
                }
            }
            http::Method::DELETE => {
                let answer = service.handle(req).await;
                if answer.status().is_success() {
                    self.sessions.deleted(index, &id);
                }
                answer
            }
            _ => service.handle(req).await,
        }
    }

    fn host_allowed(&self, host: &str, port: Option<u16>) -> bool {
        let host = normalize_host(host);
        is_loopback_name(&host)
            || self.hosts.iter().any(|r| r.host == host && r.port.is_none_or(|p| Some(p) == port))
    }

    fn check_host(&self, req: &Request<Incoming>) -> Result<(), Box<Response<Body>>> {
        let mut values = req.headers().get_all(header::HOST).iter();
        let authority = match (values.next(), values.next()) {
            (Some(v), None) => v
                .to_str()
                .ok()
                .and_then(|s| s.parse::<http::uri::Authority>().ok())
                .ok_or_else(|| bad(StatusCode::BAD_REQUEST, "malformed Host header"))?,
            (Some(_), Some(_)) => return Err(bad(StatusCode::BAD_REQUEST, "more than one Host")),
            (None, _) => req
                .uri()
                .authority()
                .cloned()
                .ok_or_else(|| bad(StatusCode::BAD_REQUEST, "missing Host header"))?,
        };
        if self.host_allowed(authority.host(), authority.port_u16()) {
            return Ok(());
        }
        tracing::warn!(host = %authority, "http: refused a request for a Host that is not allowed");
        Err(bad(
            StatusCode::FORBIDDEN,
            &format!(
                "Host `{authority}` is not allowed (DNS-rebinding protection); a person can add it \
                 to [server.http].allowed_hosts in daemon.toml"
            ),
        ))
    }

    fn check_origin(&self, headers: &HeaderMap) -> Result<(), Box<Response<Body>>> {
        let mut values = headers.get_all(header::ORIGIN).iter();
        let Some(value) = values.next() else { return Ok(()) };
        let refuse = |why: &str| {
            tracing::warn!(origin = ?value, "http: refused a request from an Origin: {why}");
            bad(
                StatusCode::FORBIDDEN,
                &format!(
                    "Origin `{}` is not allowed: {why}; a person can add its host to \
                     [server.http].allowed_hosts in daemon.toml",
                    String::from_utf8_lossy(value.as_bytes())
                ),
            )
        };
        if values.next().is_some() {
            return Err(refuse("more than one Origin header"));
        }
        let uri = value
            .to_str()
            .ok()
            .and_then(|s| s.parse::<http::Uri>().ok())
            .ok_or_else(|| refuse("not an origin"))?;
        let (Some(scheme), Some(authority)) = (uri.scheme_str(), uri.authority()) else {
            return Err(refuse("not a scheme://host origin"));
        };
        let default_port = match scheme.to_ascii_lowercase().as_str() {
            "http" => 80,
            "https" => 443,
            _ => return Err(refuse("only http and https origins are served")),
        };
        let port = authority.port_u16().unwrap_or(default_port);
        if self.host_allowed(authority.host(), Some(port)) {
            Ok(())
        } else {
            Err(refuse("its host is not an allowed host"))
        }
    }

    /// The service of the client whose token the request carries; 401 without a token or with
    /// a token no client has. Every client's tag is compared, in constant time, whatever matched.
    fn pick_service(&self, headers: &HeaderMap) -> Result<(usize, &Service), Box<Response<Body>>> {
        if let [(None, service)] = self.services.as_slice() {
            return Ok((0, service));
        }
        let mut values = headers.get_all(header::AUTHORIZATION).iter();
        let presented = match (values.next(), values.next()) {
            (Some(v), None) => v
                .to_str()
                .ok()
                .and_then(|s| s.split_once(' '))
                .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
                .map(|(_, t)| t.trim()),
            _ => None,
        };
        let Some(presented) = presented else {
            return Err(unauthorized(
                "Bearer realm=\"hands\"",
                "missing bearer token: send `Authorization: Bearer <token>` with the token of \
                 your [[server.http.clients]] entry",
            ));
        };
        let mut m = mac();
        m.update(presented.as_bytes());
        let mut found = None;
        for (index, (client, service)) in self.services.iter().enumerate() {
            if let Some(c) = client
                && m.clone().verify_slice(&c.tag).is_ok()
            {
                found = Some((index, service));
            }
        }
        found.ok_or_else(|| {
            tracing::warn!("http: refused a request with a bearer token no client has");
            unauthorized(
                "Bearer realm=\"hands\", error=\"invalid_token\"",
                "the bearer token matches no [[server.http.clients]] entry",
            )
        })
    }
}

fn normalize_host(host: &str) -> String {
    host.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase()
}

/// `localhost` or a loopback IP literal (127.0.0.0/8, ::1): a browser only sends these for a
/// page that is itself on this machine, so they cannot be a rebinding name.
fn is_loopback_name(host: &str) -> bool {
    host == "localhost" || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

fn parse_host_rule(entry: &str) -> Option<HostRule> {
    let a = entry.trim().parse::<http::uri::Authority>().ok()?;
    if a.as_str().contains('@') || a.host().is_empty() {
        return None;
    }
    Some(HostRule { host: normalize_host(a.host()), port: a.port_u16() })
}

fn plain(status: StatusCode, text: &str) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from(format!("{text}\n"))).boxed());
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, http::HeaderValue::from_static("text/plain; charset=utf-8"));
    r
}

fn bad(status: StatusCode, text: &str) -> Box<Response<Body>> {
    Box::new(plain(status, text))
}

fn unauthorized(challenge: &'static str, text: &str) -> Box<Response<Body>> {
    let mut r = plain(StatusCode::UNAUTHORIZED, text);
    r.headers_mut().insert(header::WWW_AUTHENTICATE, http::HeaderValue::from_static(challenge));
    Box::new(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn door(hosts: &[&str]) -> Door {
        Door {
            hosts: hosts.iter().map(|h| parse_host_rule(h).unwrap()).collect(),
            services: vec![],
            sessions: Arc::default(),
        }
    }

    #[test]
    fn loopback_hosts_are_always_allowed_and_others_only_when_listed() {
        let d = door(&["build.example.com", "ci.example.com:8443"]);
        for (h, p) in [("localhost", None), ("127.0.0.1", Some(1)), ("127.9.9.9", None)] {
            assert!(d.host_allowed(h, p), "{h}");
        }
        assert!(d.host_allowed("[::1]", Some(8765)));
        assert!(d.host_allowed("BUILD.example.com", Some(1)));
        assert!(d.host_allowed("ci.example.com", Some(8443)));
        assert!(!d.host_allowed("ci.example.com", Some(80)));
        assert!(!d.host_allowed("evil.example.com", None));
        assert!(!d.host_allowed("localhost.evil.example.com", None));
        assert!(!d.host_allowed("10.0.0.1", None));
    }

    #[test]
    fn origins_must_be_http_on_an_allowed_host() {
        let d = door(&["app.example.com:443"]);
        let check = |o: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::ORIGIN, o.parse().unwrap());
            d.check_origin(&h).is_ok()
        };
        assert!(check("http://localhost:3000"));
        assert!(check("https://app.example.com"));
        assert!(!check("http://app.example.com"));
        assert!(!check("http://evil.example.com"));
        assert!(!check("null"));
        assert!(!check("file://localhost"));
        assert!(d.check_origin(&HeaderMap::new()).is_ok());
    }

    #[test]
    fn tags_compare_tokens_not_prefixes() {
        assert_eq!(tag_of(b"0123456789abcdef"), tag_of(b"0123456789abcdef"));
        assert_ne!(tag_of(b"0123456789abcdef"), tag_of(b"0123456789abcde"));
    }
}
