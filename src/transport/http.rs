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
use super::hangups::Sessions;
use super::http_setup::{
    ANONYMOUS, ClientKey, HostRule, Setup, is_loopback_name, mac, normalize_host,
};
use crate::server::{Daemon, HandsServer};
use anyhow::Context as _;
use bytes::Bytes;
use hmac::Mac;
use http::{HeaderMap, Request, Response, StatusCode, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use std::convert::Infallible;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The largest request body served (4 MiB): a `write` of the biggest file a model should send in
/// one call fits; anything larger is 413.
pub const MAX_BODY: usize = 4 * 1024 * 1024;

type Body = BoxBody<Bytes, Infallible>;
type Service = StreamableHttpService<HandsServer, LocalSessionManager>;

/// The state every connection shares.
struct Door {
    hosts: Vec<HostRule>,
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
        // A client's token (or loopback without tokens): this connection is not closed to make
        // room for another while the request is served.
        conns::vouch(&mut req);
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

    fn check_host<B>(&self, req: &Request<B>) -> Result<(), Box<Response<Body>>> {
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
    use crate::transport::http_setup::parse_host_rule;

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
}
