//! An MCP door as an OAuth 2.1 resource server (SPEC §14), shared by `hands serve --http` and
//! the relay: the Protected Resource Metadata (RFC 9728) at
//! `/.well-known/oauth-protected-resource` and its path-suffixed form; the check of a request's
//! bearer token as a JWT access token of the configured issuer (`token.rs`, with the issuer's
//! keys from `keys.rs`, fetched by `fetch.rs`); and the answers to a refused one — 401 with
//! `WWW-Authenticate: Bearer resource_metadata="…", scope="…"` (and `error="invalid_token"`
//! when a token was sent), 403 `insufficient_scope`, 503 when the issuer's keys cannot be had.
//!
//! The token is read from the request's `Authorization` header only, never logged, and goes no
//! further: `mcp_door::serve_mcp` removes the header before rmcp sees the request.

mod fetch;
mod keys;
mod token;

pub use token::Refusal;

/// Why doctor (and `hands relay` at start) warns about the issuer ([`ResourceServer::probe`]).
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// The JWKS holds no key of an algorithm hands checks.
    #[error(
        "the JWKS of {issuer} holds no RS256, ES256 or EdDSA signature key; no token could be \
         checked"
    )]
    NoKeys { issuer: String },
    #[error("cannot fetch the keys of {issuer}: {source}; tokens are answered 503 until it can")]
    Keys { issuer: String, source: keys::KeysError },
}

use super::mcp_door::{Body, plain};
use crate::config::OAuthCfg;
use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::{BodyExt, Full};

/// Where RFC 9728 puts the metadata.
const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

/// The identity prefix of a client known by its OAuth token (`oauth:<claim>`): a static
/// client's name has no `:`, so the two never meet.
pub const PREFIX: &str = "oauth:";

/// One endpoint's OAuth settings and its issuer's keys.
pub struct ResourceServer {
    cfg: OAuthCfg,
    /// The metadata's URL, as the challenge names it.
    metadata_url: String,
    /// The paths the metadata is served at.
    metadata_paths: [String; 2],
    keys: keys::Keys,
}

impl ResourceServer {
    /// Settles `cfg` for serving; `what` names its table in errors (`[server.http.oauth]`).
    pub fn new(cfg: &OAuthCfg, what: &str) -> anyhow::Result<ResourceServer> {
        let tls = super::tls::client_config(cfg.ca_file.as_deref(), &format!("{what} ca_file"))?;
        let (origin, path) = split_url(&cfg.audience);
        let suffixed = format!("{WELL_KNOWN}{path}");
        Ok(ResourceServer {
            metadata_url: format!("{origin}{suffixed}"),
            metadata_paths: [WELL_KNOWN.to_string(), suffixed],
            keys: keys::Keys::new(&cfg.issuer, fetch::Fetcher::new(tls)),
            cfg: cfg.clone(),
        })
    }

    pub fn cfg(&self) -> &OAuthCfg {
        &self.cfg
    }

    /// Whether `path` is where this endpoint's metadata is served.
    pub fn is_metadata_path(&self, path: &str) -> bool {
        self.metadata_paths.iter().any(|p| p == path)
    }

    /// The Protected Resource Metadata document (RFC 9728 §2).
    pub fn metadata(&self) -> Response<Body> {
        let doc = serde_json::json!({
            "resource": self.cfg.audience,
            "authorization_servers": [self.cfg.issuer],
            "scopes_supported": self.cfg.scopes,
            "bearer_methods_supported": ["header"],
            "resource_name": "hands",
        });
        let mut r = Response::new(Full::new(Bytes::from(doc.to_string())).boxed());
        r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        r
    }

    /// `hands doctor`'s line: whether the issuer's metadata and keys can be fetched from here.
    pub async fn probe(&self) -> Result<String, ProbeError> {
        let issuer = self.cfg.issuer.clone();
        match self.keys.probe().await {
            Ok(0) => Err(ProbeError::NoKeys { issuer }),
            Ok(n) => Ok(format!("the issuer {issuer} answers: {n} signing keys")),
            Err(source) => Err(ProbeError::Keys { issuer, source }),
        }
    }

    /// The identity claim's value of the request's bearer token, or why it is refused.
    pub async fn identify(&self, token: Option<&str>) -> Result<String, Refusal> {
        let Some(token) = token else { return Err(Refusal::Missing) };
        token::check(token, &self.cfg, &self.keys).await
    }

    /// The answer to a refused request; `who` names the door in the log (`http`, `relay`).
    pub fn refuse(&self, refusal: Refusal, who: &str) -> Response<Body> {
        let scope = self.cfg.scopes.join(" ");
        let mut challenge = format!("Bearer resource_metadata=\"{}\"", self.metadata_url);
        if !scope.is_empty() {
            challenge.push_str(&format!(", scope=\"{scope}\""));
        }
        let (status, text) = match &refusal {
            Refusal::Missing => (
                StatusCode::UNAUTHORIZED,
                format!(
                    "missing bearer token: send `Authorization: Bearer <access token>` with an \
                     access token of {} for {} (its metadata: {})",
                    self.cfg.issuer, self.cfg.audience, self.metadata_url
                ),
            ),
            Refusal::Invalid(why) => {
                tracing::warn!("{who}: refused an OAuth access token: {why}");
                challenge = format!("Bearer error=\"invalid_token\", {}", &challenge[7..]);
                (
                    StatusCode::UNAUTHORIZED,
                    format!(
                        "the access token was refused: {why}\nhint: get a token of {} for the \
                         resource {}",
                        self.cfg.issuer, self.cfg.audience
                    ),
                )
            }
            Refusal::Scope(missing) => {
                tracing::warn!(
                    "{who}: refused an OAuth access token without scope {}",
                    missing.join(" ")
                );
                challenge = format!("Bearer error=\"insufficient_scope\", {}", &challenge[7..]);
                (
                    StatusCode::FORBIDDEN,
                    format!(
                        "the access token lacks scope {}\nhint: ask {} for a token with scope \
                         \"{scope}\"",
                        missing.join(" "),
                        self.cfg.issuer
                    ),
                )
            }
            Refusal::Unavailable(why) => {
                tracing::warn!("{who}: cannot check OAuth access tokens: {why}");
                let mut r = plain(
                    StatusCode::SERVICE_UNAVAILABLE,
                    &format!(
                        "cannot check the access token just now: {why}\nhint: a person checks \
                         that {} is reachable from this machine; try again in a moment",
                        self.cfg.issuer
                    ),
                );
                r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
                return r;
            }
        };
        let mut r = plain(status, &text);
        if let Ok(v) = HeaderValue::from_str(&challenge) {
            r.headers_mut().insert(header::WWW_AUTHENTICATE, v);
        }
        r
    }
}

/// `https://host:port` and the path (without a trailing `/`) of a URL.
fn split_url(url: &str) -> (&str, &str) {
    let start = url.find("://").map_or(0, |i| i + 3);
    let trimmed = url.trim_end_matches('/');
    match trimmed.get(start..).and_then(|rest| rest.find('/')) {
        Some(slash) => trimmed.split_at(start + slash),
        None => (trimmed, ""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_metadata_url_inserts_the_well_known_segment() {
        assert_eq!(
            split_url("https://build.example.org/mcp"),
            ("https://build.example.org", "/mcp")
        );
        assert_eq!(split_url("https://relay.example.org/"), ("https://relay.example.org", ""));
        assert_eq!(split_url("http://127.0.0.1:80"), ("http://127.0.0.1:80", ""));
    }
}
