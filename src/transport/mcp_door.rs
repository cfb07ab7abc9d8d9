//! The checks every MCP door makes before rmcp sees a request — `hands serve --http`'s `/mcp`
//! (`http.rs`) and the relay's `/runners/NAME/mcp` (`src/relay`) alike: `Host` and `Origin`
//! against the allowed hosts (DNS-rebinding protection), the bearer token's presence, the body
//! cap; then [`serve_mcp`] hands the request to the client's rmcp service with the watch on
//! clients that vanish mid-call (`hangups.rs`). One implementation, so the relay serves
//! "exactly as `hands serve --http` serves".

use super::hangups::Sessions;
use super::http_setup::{HostRule, is_loopback_name, normalize_host};
use bytes::Bytes;
use http::{HeaderMap, Request, Response, StatusCode, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use rmcp::ServerHandler;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use std::convert::Infallible;
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The largest request body served (4 MiB): a `write` of the biggest file a model should send in
/// one call fits; anything larger is 413.
pub const MAX_BODY: usize = 4 * 1024 * 1024;

pub type Body = BoxBody<Bytes, Infallible>;

/// rmcp's settings for every MCP door; `shutdown` ends its sessions.
pub fn rmcp_config(shutdown: &CancellationToken) -> StreamableHttpServerConfig {
    StreamableHttpServerConfig::default()
        // The door checks Host itself (loopback always allowed, which rmcp's list cannot say for
        // all of 127.0.0.0/8), before the token, so a rebinding request learns nothing.
        .disable_allowed_hosts()
        .with_max_request_body_bytes(MAX_BODY)
        // A plain JSON answer when the handler has nothing to say before its result (most
        // calls); rmcp falls back to an SSE stream when it does (an elicitation, a progress
        // notification), so nothing is lost and the common call skips the SSE framing.
        .with_json_response(true)
        .with_cancellation_token(shutdown.child_token())
}

/// The hosts a request may name, and what a person can do about a refused one.
pub struct Hosts {
    pub(crate) rules: Vec<HostRule>,
    /// Where a person adds a host (`[server.http].allowed_hosts in daemon.toml`).
    pub remedy: &'static str,
}

impl Hosts {
    pub fn allowed(&self, host: &str, port: Option<u16>) -> bool {
        let host = normalize_host(host);
        is_loopback_name(&host)
            || self.rules.iter().any(|r| r.host == host && r.port.is_none_or(|p| Some(p) == port))
    }

    pub fn check_host<B>(&self, req: &Request<B>) -> Result<(), Box<Response<Body>>> {
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
        if self.allowed(authority.host(), authority.port_u16()) {
            return Ok(());
        }
        // Cut, as every quoted input is (SPEC §10): a Host may be tens of kilobytes.
        let shown = hands_roots::shown(authority.as_str());
        tracing::warn!(host = %shown, "http: refused a request for a Host that is not allowed");
        Err(bad(
            StatusCode::FORBIDDEN,
            &format!(
                "Host `{shown}` is not allowed (DNS-rebinding protection); a person can add it \
                 to {}",
                self.remedy
            ),
        ))
    }

    pub fn check_origin(&self, headers: &HeaderMap) -> Result<(), Box<Response<Body>>> {
        let mut values = headers.get_all(header::ORIGIN).iter();
        let Some(value) = values.next() else { return Ok(()) };
        let refuse = |why: &str| {
            let origin = String::from_utf8_lossy(value.as_bytes());
            let shown = hands_roots::shown(origin.as_ref());
            tracing::warn!(origin = %shown, "http: refused a request from an Origin: {why}");
            bad(
                StatusCode::FORBIDDEN,
                &format!(
                    "Origin `{shown}` is not allowed: {why}; a person can add its host to {}",
                    self.remedy
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
        if self.allowed(authority.host(), Some(port)) {
            Ok(())
        } else {
            Err(refuse("its host is not an allowed host"))
        }
    }
}

/// The bearer token of `Authorization` (exactly one header, scheme `Bearer`), if any.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    let mut values = headers.get_all(header::AUTHORIZATION).iter();
    match (values.next(), values.next()) {
        (Some(v), None) => v
            .to_str()
            .ok()
            .and_then(|s| s.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, t)| t.trim()),
        _ => None,
    }
}

/// Serves an MCP request that passed its door's checks through the client's `service`
/// (`index` names the service in `sessions`): a body over [`MAX_BODY`] is 413 at once, the
/// token goes no further, a session's calls are watched for a client that vanishes.
pub async fn serve_mcp<S, B>(
    door: McpDoor<'_, S>,
    sessions: &Arc<Sessions>,
    mut req: Request<B>,
) -> Response<Body>
where
    S: ServerHandler + Send + 'static,
    B: hyper::body::Body + Send + 'static,
    B::Error: std::fmt::Display,
{
    let McpDoor { service, manager, index, holder } = door;
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
    // rmcp names an unsupported protocol version whole in its 400 (found by session 40's attack
    // pass: a 60 KB header came back): a value longer than any version is refused here, cut.
    let version = req.headers().get("mcp-protocol-version").map(|v| v.as_bytes());
    if let Some(v) = version.filter(|v| v.len() > 32) {
        let shown = hands_roots::shown(std::ffi::OsStr::from_bytes(v)).to_string();
        return plain(
            StatusCode::BAD_REQUEST,
            &format!("unsupported MCP-Protocol-Version {shown}; send a version the server lists"),
        );
    }
    // The token has done its work; it goes no further (rmcp hands the request's headers to
    // handlers as `http::request::Parts`).
    req.headers_mut().remove(header::AUTHORIZATION);
    // A session's requests are signs of life for calls whose answer streams were cut
    // (hangups.rs); a POST is watched, a DELETE stops what still runs in the session.
    let session = req.headers().get("mcp-session-id").and_then(|v| v.to_str().ok());
    let Some(id) = session.map(str::to_string) else { return service.handle(req).await };
    sessions.touch(index, &id);
    match *req.method() {
        http::Method::POST => {
            let pending = sessions.prepare(index, &mut req);
            let answer = service.handle(req).await;
            match pending {
                Some(p) => p.watch(answer),
                None => answer,
            }
        }
        http::Method::DELETE => {
            if let Some(unknown) = not_held(manager, &id, holder).await {
                return unknown;
            }
            let answer = service.handle(req).await;
            if answer.status().is_success() {
                sessions.deleted(index, &id);
            }
            answer
        }
        _ => service.handle(req).await,
    }
}

/// One client's (or one agent's on one runner) MCP service, as [`serve_mcp`] serves it.
pub struct McpDoor<'a, S: ServerHandler + Send + 'static> {
    pub service: &'a StreamableHttpService<S, LocalSessionManager>,
    /// The service's sessions: this client's alone.
    pub manager: &'a LocalSessionManager,
    /// Its index in `Sessions` (hangups).
    pub index: usize,
    /// Who holds the sessions, for a refusal: "client alice", "agent carol on runner box1".
    pub holder: &'a str,
}

/// 404 for a `DELETE` of a session this door does not hold: rmcp answers 202 to any id, so
/// another client's session id (or a made-up one) seemed closed while nothing was. Sessions
/// are per client (per agent and runner on the relay); another's is unknown here, and stays
/// open.
async fn not_held(manager: &LocalSessionManager, id: &str, holder: &str) -> Option<Response<Body>> {
    use rmcp::transport::streamable_http_server::session::SessionManager as _;
    if manager.has_session(&id.into()).await.unwrap_or(false) {
        return None;
    }
    tracing::info!("mcp: {holder} deleted a session it does not hold");
    Some(plain(
        StatusCode::NOT_FOUND,
        &format!(
            "session not found: {holder} holds no session with this id (it ended, expired, or \
             is not this client's); nothing was closed"
        ),
    ))
}

pub fn plain(status: StatusCode, text: &str) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from(format!("{text}\n"))).boxed());
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, http::HeaderValue::from_static("text/plain; charset=utf-8"));
    r
}

pub fn bad(status: StatusCode, text: &str) -> Box<Response<Body>> {
    Box::new(plain(status, text))
}

pub fn unauthorized(challenge: &'static str, text: &str) -> Box<Response<Body>> {
    let mut r = plain(StatusCode::UNAUTHORIZED, text);
    r.headers_mut().insert(header::WWW_AUTHENTICATE, http::HeaderValue::from_static(challenge));
    Box::new(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::http_setup::parse_host_rule;

    fn hosts(list: &[&str]) -> Hosts {
        Hosts { rules: list.iter().map(|h| parse_host_rule(h).unwrap()).collect(), remedy: "x" }
    }

    #[test]
    fn loopback_hosts_are_always_allowed_and_others_only_when_listed() {
        let d = hosts(&["build.example.com", "ci.example.com:8443"]);
        for (h, p) in [("localhost", None), ("127.0.0.1", Some(1)), ("127.9.9.9", None)] {
            assert!(d.allowed(h, p), "{h}");
        }
        assert!(d.allowed("[::1]", Some(8765)));
        assert!(d.allowed("BUILD.example.com", Some(1)));
        assert!(d.allowed("ci.example.com", Some(8443)));
        assert!(!d.allowed("ci.example.com", Some(80)));
        assert!(!d.allowed("evil.example.com", None));
        assert!(!d.allowed("localhost.evil.example.com", None));
        assert!(!d.allowed("10.0.0.1", None));
    }

    #[test]
    fn origins_must_be_http_on_an_allowed_host() {
        let d = hosts(&["app.example.com:443"]);
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
