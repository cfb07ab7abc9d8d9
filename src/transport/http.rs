//! The streamable HTTP transport: `hands serve --http ADDR` or `[server.http]`, MCP at `/mcp`.
//!
//! rmcp's `StreamableHttpService` speaks the protocol (2025-11-25 sessions and the stateless
//! 2026-07-28 era); this file is the door in front of it, made of `mcp_door.rs`'s checks (which the
//! relay's door shares). Every request passes, in order:
//!
//! 1. the path: `/mcp`, else 404;
//! 2. `Host` (DNS-rebinding protection): a loopback name or address, the listen address's own
//!    IP, or an entry of `[server.http].allowed_hosts` (an entry with a port matches only that
//!    port), else 403 — the same status rmcp and the MCP spec use for this check;
//! 3. `Origin`, when present: an `http`/`https` origin whose host passes the same rule, else
//!    403 (`Origin: null` included);
//! 4. the bearer token, when `[[server.http.clients]]` or `[server.http.oauth]` are configured:
//!    compared in constant time with every client's token, else checked as an OAuth access token
//!    (`oauth/`); none, no match or an invalid token is 401 with `WWW-Authenticate: Bearer`
//!    (naming the Protected Resource Metadata with OAuth), too little scope 403;
//! 5. the body: a `Content-Length` over [`MAX_BODY`] is 413 at once, and rmcp enforces the same
//!    cap while it reads a chunked body.
//!
//! Beneath the door, `conns.rs` holds every connection to the listener's cap and to the head
//! and body timeouts; a request past the token check vouches for its connection, which is then
//! not closed to make room for another while the request is served.
//!
//! The client's identity is decided by *which service* serves the request, not by anything the
//! request carries past the token: each configured client gets its own `StreamableHttpService`,
//! whose factory builds every session's `HandsServer` with that client's `name`, and its own
//! session manager. A session id minted for one client is unknown to every other client's
//! service (404), so a token can never act inside another client's session, and a handler never
//! reads the identity from headers or request extensions. An OAuth client's service is made
//! the first time its identity claim is seen (`oauth:<claim>`) and kept, so its sessions stay
//! its own the same way. With neither clients nor OAuth (allowed only on a loopback address)
//! every request is served as the identity [`ANONYMOUS`]. With OAuth, the Protected Resource
//! Metadata is served at `/.well-known/oauth-protected-resource` (and `…/mcp`), after the
//! `Host` check.

use super::conns::{self, Timed};
use super::hangups::Sessions;
use super::http_setup::{ANONYMOUS, ClientKey, Setup, mac};
use super::mcp_door::{self, Body, Hosts, McpDoor, bearer, plain, unauthorized};
use super::shares::{Over, Shares};
use crate::server::{Daemon, HandsServer};
use anyhow::Context as _;
use hmac::Mac;
use http::{HeaderMap, Request, Response, StatusCode};
use rmcp::transport::StreamableHttpService;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

pub use mcp_door::MAX_BODY;

/// The header naming an MCP session (2025-11-25 era).
const SESSION_ID: &str = "mcp-session-id";

/// The most OAuth identities served (each keeps a service and its sessions); past it a new one
/// is refused with 503 until a restart.
const MAX_OAUTH_IDENTITIES: usize = 4096;

/// MCP sessions: 256 in all, a quarter of them for any one client (the shape of a relay
/// runner's, decision 0085). Each holds ~72 KB and, idle, lives 5 minutes: before this bound one
/// client's 20,000 grew the daemon to 1.5 GB (seventh attack pass).
pub const SESSIONS: Shares = Shares { total: 256, each: 64 };

type Service = StreamableHttpService<HandsServer, LocalSessionManager>;

/// One client's service, and what the door counts of it.
#[derive(Clone)]
struct Client {
    /// Its index in `Sessions` (hangups).
    index: usize,
    /// The identity its sessions are served as, and its name in refusals.
    name: Arc<str>,
    service: Service,
    /// Its sessions, as rmcp holds them (an expired one leaves this table).
    sessions: Arc<LocalSessionManager>,
    /// Held from the share's check until rmcp has made the session, so that two requests of
    /// this client opening at once cannot both pass a share with room for one.
    opening: Arc<tokio::sync::Mutex<()>>,
}

/// OAuth identities (the claim's value) and each one's client.
type Identities = Mutex<HashMap<String, Client>>;

/// The state every connection shares.
struct Door {
    hosts: Hosts,
    /// One service per configured client (same order as the clients), or one anonymous one.
    services: Vec<(Option<ClientKey>, Client)>,
    /// The sessions calls were made in, for clients that vanish mid-call.
    sessions: Arc<Sessions>,
    /// `[server.http.oauth]`, and a service per identity seen (indices after `services`').
    oauth: Option<(super::oauth::ResourceServer, Identities)>,
    make_client: Box<dyn Fn(usize, String) -> Client + Send + Sync>,
}

/// Binds the address, tells `bound` what it serves (for the banner), and serves until SIGINT
/// or SIGTERM.
pub async fn serve(
    daemon: Arc<Daemon>,
    setup: Setup,
    bound: impl FnOnce(&str),
) -> anyhow::Result<()> {
    let listener =
        conns::bind(setup.addr).with_context(|| format!("cannot listen on {}", setup.addr))?;
    let addr = listener.local_addr().with_context(|| format!("cannot listen on {}", setup.addr))?;
    bound(&setup.describe(addr));

    let shutdown = CancellationToken::new();
    let rmcp_config = mcp_door::rmcp_config(&shutdown);
    let make_client = move |index: usize, name: String| -> Client {
        let (daemon, sessions) = (daemon.clone(), Arc::new(LocalSessionManager::default()));
        let name = Arc::<str>::from(name);
        let served_as = name.clone();
        let service = StreamableHttpService::new(
            move || Ok(HandsServer::new(daemon.clone(), &served_as)),
            sessions.clone(),
            rmcp_config.clone(),
        );
        Client { index, name, service, sessions, opening: Arc::default() }
    };
    let services = if setup.clients.is_empty() && setup.oauth.is_none() {
        vec![(None, make_client(0, ANONYMOUS.to_string()))]
    } else {
        (setup.clients.into_iter().enumerate())
            .map(|(i, c)| {
                let client = make_client(i, c.name.clone());
                (Some(c), client)
            })
            .collect()
    };
    let hosts = Hosts { rules: setup.hosts, remedy: "[server.http].allowed_hosts in daemon.toml" };
    let oauth = setup.oauth.map(|o| (o, Mutex::default()));
    let make_client = Box::new(make_client);
    let door = Arc::new(Door { hosts, services, sessions: Arc::default(), oauth, make_client });

    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("cannot install the SIGTERM handler")?;
    let serving = conns::serve(listener, conns::MCP, shutdown.clone(), move |req| {
        let door = door.clone();
        async move { door.handle(req).await }
    });
    tokio::select! {
        () = serving => {}
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    shutdown.cancel();
    Ok(())
}

impl Door {
    async fn handle(&self, mut req: Request<Timed>) -> Response<Body> {
        if let Some((oauth, _)) = &self.oauth
            && oauth.is_metadata_path(req.uri().path())
        {
            if let Err(r) = self.hosts.check_host(&req) {
                return *r;
            }
            if req.method() != http::Method::GET {
                return plain(StatusCode::METHOD_NOT_ALLOWED, "GET the resource metadata");
            }
            return oauth.metadata();
        }
        if req.uri().path() != "/mcp" {
            return plain(StatusCode::NOT_FOUND, "hands serves MCP at /mcp");
        }
        if let Err(r) = self.hosts.check_host(&req) {
            return *r;
        }
        if let Err(r) = self.hosts.check_origin(req.headers()) {
            return *r;
        }
        let client = match self.pick_client(req.headers()).await {
            Ok(c) => c,
            Err(r) => return *r,
        };
        // A client's token (or loopback without tokens): this connection is not closed to make
        // room for another while the request is served, within the client's share.
        if let Err(r) = conns::vouch(&mut req, conns::Holder::Token(&client.name)) {
            return *r;
        }
        let opens = req.method() == http::Method::POST && !req.headers().contains_key(SESSION_ID);
        let _opening = if opens { Some(client.opening.clone().lock_owned().await) } else { None };
        if opens && let Some(refused) = self.crowded(&client).await {
            return refused;
        }
        let holder = format!("client {}", client.name);
        let door = McpDoor {
            service: &client.service,
            manager: &client.sessions,
            index: client.index,
            holder: &holder,
        };
        mcp_door::serve_mcp(door, &self.sessions, req).await
    }

    /// Why `client` may not open another session now ([`SESSIONS`]), if it may not: as on the
    /// relay, any request without a session id is refused then, since only its body says whether
    /// it would open one.
    async fn crowded(&self, client: &Client) -> Option<Response<Body>> {
        let mut tables: Vec<Arc<LocalSessionManager>> =
            self.services.iter().map(|(_, c)| c.sessions.clone()).collect();
        if let Some((_, identities)) = &self.oauth {
            tables.extend(hands_roots::lock(identities).values().map(|c| c.sessions.clone()));
        }
        let mut all = 0;
        for t in &tables {
            all += t.sessions.read().await.len();
        }
        let mine = client.sessions.sessions.read().await.len();
        let Shares { total, each } = SESSIONS;
        let who = hands_roots::shown(&*client.name);
        let (status, text) = match SESSIONS.over(all, mine)? {
            Over::Total => (
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "this daemon holds {total} MCP sessions already, the most it serves at once; \
                     try again when one ends (an idle one expires after 5 minutes)"
                ),
            ),
            Over::Share => (
                StatusCode::TOO_MANY_REQUESTS,
                format!(
                    "client `{who}` holds {each} MCP sessions already, the most one client may \
                     (so that no client keeps the others out); end one (an HTTP DELETE of its \
                     session) or let an idle one expire (5 minutes), then try again"
                ),
            ),
        };
        tracing::warn!("http: refused a new session of client `{who}`: {all} held, {mine} its own");
        Some(plain(status, &text))
    }

    /// The client whose token the request carries: a static client's, else the
    /// OAuth identity's; 401 without a token or with one no client has and OAuth refuses.
    /// Every static client's tag is compared, in constant time, whatever matched.
    async fn pick_client(&self, headers: &HeaderMap) -> Result<Client, Box<Response<Body>>> {
        if let [(None, client)] = self.services.as_slice() {
            return Ok(client.clone());
        }
        let presented = bearer(headers);
        let mut found = None;
        if let Some(presented) = presented {
            let mut m = mac();
            m.update(presented.as_bytes());
            for (key, client) in &self.services {
                if let Some(k) = key
                    && m.clone().verify_slice(&k.tag).is_ok()
                {
                    found = Some(client.clone());
                }
            }
        }
        if let Some(f) = found {
            return Ok(f);
        }
        if let Some((oauth, identities)) = &self.oauth {
            let claim = match oauth.identify(presented).await {
                Ok(c) => c,
                Err(refusal) => return Err(Box::new(oauth.refuse(refusal, "http"))),
            };
            return self.oauth_client(identities, claim);
        }
        let Some(_) = presented else {
            return Err(unauthorized(
                "Bearer realm=\"hands\"",
                "missing bearer token: send `Authorization: Bearer <token>` with the token of \
                 your [[server.http.clients]] entry",
            ));
        };
        tracing::warn!("http: refused a request with a bearer token no client has");
        Err(unauthorized(
            "Bearer realm=\"hands\", error=\"invalid_token\"",
            "the bearer token matches no [[server.http.clients]] entry",
        ))
    }

    /// The client of OAuth identity `claim`, made the first time it is seen.
    fn oauth_client(
        &self,
        identities: &Identities,
        claim: String,
    ) -> Result<Client, Box<Response<Body>>> {
        let mut table = hands_roots::lock(identities);
        if let Some(client) = table.get(&claim) {
            return Ok(client.clone());
        }
        if table.len() >= MAX_OAUTH_IDENTITIES {
            tracing::warn!(
                "http: {MAX_OAUTH_IDENTITIES} OAuth identities served; one more refused"
            );
            return Err(mcp_door::bad(
                StatusCode::SERVICE_UNAVAILABLE,
                &format!(
                    "this daemon serves {MAX_OAUTH_IDENTITIES} OAuth identities already; a person \
                     restarts it to serve new ones"
                ),
            ));
        }
        let index = self.services.len() + table.len();
        let identity = format!("{}{claim}", super::oauth::PREFIX);
        tracing::info!("http: first request of OAuth client `{}`", hands_roots::shown(&identity));
        let client = (self.make_client)(index, identity);
        table.insert(claim, client.clone());
        Ok(client)
    }
}
