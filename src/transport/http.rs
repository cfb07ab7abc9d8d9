//! The streamable HTTP transport: `hands serve --http ADDR` or `[server.http]`, MCP at `/mcp`.
//!
//! rmcp's `StreamableHttpService` speaks the protocol (2025-11-25 sessions and the stateless
//! 2026-07-28 era); this file is the door in front of it, made of `door.rs`'s checks (which the
//! relay's door shares). Every request passes, in order:
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
//! Beneath the door, `conns.rs` holds every connection to the listener's cap and to the head
//! and body timeouts; a request past the token check vouches for its connection, which is then
//! not closed to make room for another while the request is served.
//!
//! The client's identity is decided by *which service* serves the request, not by anything the
//! request carries past the token: each configured client gets its own `StreamableHttpService`,
//! whose factory builds every session's `HandsServer` with that client's `name`, and its own
//! session manager. A session id minted for one client is unknown to every other client's
//! service (404), so a token can never act inside another client's session, and a handler never
//! reads the identity from headers or request extensions. With no clients configured (allowed
//! only on a loopback address) every request is served as the identity [`ANONYMOUS`].

use super::conns::{self, Timed};
use super::door::{self, Body, Hosts, bearer, plain, unauthorized};
use super::hangups::Sessions;
use super::http_setup::{ANONYMOUS, ClientKey, Setup, mac};
use crate::server::{Daemon, HandsServer};
use anyhow::Context as _;
use hmac::Mac;
use http::{HeaderMap, Request, Response, StatusCode};
use rmcp::transport::StreamableHttpService;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

pub use door::MAX_BODY;

type Service = StreamableHttpService<HandsServer, LocalSessionManager>;

/// The state every connection shares.
struct Door {
    hosts: Hosts,
    /// One service per configured client (same order as the clients), or one anonymous one.
    services: Vec<(Option<ClientKey>, Service)>,
    /// The sessions calls were made in, for clients that vanish mid-call.
    sessions: Arc<Sessions>,
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
    let rmcp_config = door::rmcp_config(&shutdown);
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
    let hosts = Hosts { rules: setup.hosts, remedy: "[server.http].allowed_hosts in daemon.toml" };
    let door = Arc::new(Door { hosts, services, sessions: Arc::default() });

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
        if req.uri().path() != "/mcp" {
            return plain(StatusCode::NOT_FOUND, "hands serves MCP at /mcp");
        }
        if let Err(r) = self.hosts.check_host(&req) {
            return *r;
        }
        if let Err(r) = self.hosts.check_origin(req.headers()) {
            return *r;
        }
        let (index, service) = match self.pick_service(req.headers()) {
            Ok(s) => s,
            Err(r) => return *r,
        };
        // A client's token (or loopback without tokens): this connection is not closed to make
        // room for another while the request is served.
        conns::vouch(&mut req);
        door::serve_mcp(service, &self.sessions, index, req).await
    }

    /// The service of the client whose token the request carries; 401 without a token or with
    /// a token no client has. Every client's tag is compared, in constant time, whatever matched.
    fn pick_service(&self, headers: &HeaderMap) -> Result<(usize, &Service), Box<Response<Body>>> {
        if let [(None, service)] = self.services.as_slice() {
            return Ok((0, service));
        }
        let Some(presented) = bearer(headers) else {
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
