//! `[server.http.oauth]` and `[relay.oauth]` (SPEC §14): the endpoint as an OAuth 2.1 resource
//! server — the issuer whose JWT access tokens it accepts, the audience it is (RFC 8707), the
//! scopes a token must carry, the claim that names the client. Parsed strictly by the tables
//! that hold it; validated here, the same way for both (`section` names the table in errors).

use super::{Problems, expand_tilde};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use toml::Spanned;

/// The claims a token's identity cannot come from: they say what the token is, not who holds it.
const NOT_IDENTITIES: &[&str] = &["iss", "aud", "exp", "nbf", "iat", "jti", "scope", "scp"];

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawOAuth {
    issuer: Spanned<String>,
    audience: Spanned<String>,
    #[serde(default)]
    scopes: Vec<Spanned<String>>,
    identity_claim: Option<Spanned<String>>,
    ca_file: Option<String>,
}

/// An OAuth table, validated.
#[derive(Debug, Clone)]
pub struct OAuthCfg {
    /// The issuer identifier exactly as tokens carry it in `iss`.
    pub issuer: String,
    /// This resource (RFC 8707): tokens must name it in `aud`.
    pub audience: String,
    /// Scopes a token must all carry; may be empty.
    pub scopes: Vec<String>,
    /// The claim whose value is the client's identity (`sub` by default).
    pub identity_claim: String,
    /// Extra trust roots (PEM) for the issuer's TLS, beside the system's.
    pub ca_file: Option<PathBuf>,
}

impl OAuthCfg {
    /// Whether the issuer is plain `http` (which validation allows on loopback only).
    pub fn issuer_is_plain_http(&self) -> bool {
        self.issuer.starts_with("http://")
    }

    /// One line for `hands check`: the settings, no secret among them.
    pub fn describe(&self) -> String {
        let ca = self.ca_file.as_ref().map_or("the system's roots".to_string(), |f| {
            format!("the system's roots and {}", f.display())
        });
        format!(
            "issuer {}, audience {}, scopes [{}], identity claim `{}` (client `oauth:<{}>`), \
             trusting {ca}",
            self.issuer,
            self.audience,
            self.scopes.join(", "),
            self.identity_claim,
            self.identity_claim
        )
    }
}

/// Whether `host` (no brackets) is `localhost` or a loopback address.
pub fn is_loopback_host(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Why `url` may not be fetched from or named as an issuer: not an absolute http(s) URL, plain
/// `http` off loopback, a fragment or query, user info.
pub fn url_problem(url: &str) -> Option<&'static str> {
    let Ok(uri) = url.parse::<http::Uri>() else { return Some("not a URL") };
    let Some(host) = uri.host() else { return Some("not an absolute URL with a host") };
    if url.contains('#') || uri.query().is_some() {
        return Some("an issuer URL has no query or fragment");
    }
    if uri.authority().is_some_and(|a| a.as_str().contains('@')) {
        return Some("user info in the URL is not allowed");
    }
    match uri.scheme_str() {
        Some("https") => None,
        Some("http") if is_loopback_host(host) => None,
        Some("http") => Some("plain http is allowed on loopback only (https issuers otherwise)"),
        _ => Some("not an http(s) URL"),
    }
}

/// A scope token of RFC 6749 §3.3: printable ASCII without space, `"` and `\`.
fn is_scope_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes().all(|b| b == 0x21 || (0x23..=0x5b).contains(&b) || (0x5d..=0x7e).contains(&b))
}

/// Validates an OAuth table of `section` (`[server.http.oauth]`, `[relay.oauth]`).
pub(crate) fn validate(
    raw: &Spanned<RawOAuth>,
    section: &str,
    home: Option<&Path>,
    p: &mut Problems<'_>,
) -> OAuthCfg {
    let r = raw.get_ref();
    let issuer = r.issuer.get_ref().trim().to_string();
    if let Some(why) = url_problem(&issuer) {
        p.add(
            Some(r.issuer.span()),
            section,
            "issuer",
            format!("`{}`: {why}", hands_roots::shown(&issuer)),
            Some(
                "the issuer identifier of your identity provider, exactly as its tokens carry it \
                 in `iss`, e.g. \"https://login.example.org\"",
            ),
        );
    }
    let audience = r.audience.get_ref().trim().to_string();
    let aud_ok = audience
        .parse::<http::Uri>()
        .is_ok_and(|u| matches!(u.scheme_str(), Some("http" | "https")) && u.host().is_some())
        && !audience.contains('#');
    if !aud_ok {
        p.add(
            Some(r.audience.span()),
            section,
            "audience",
            format!(
                "`{}` is not an absolute http(s) URL without a fragment",
                hands_roots::shown(&audience)
            ),
            Some(
                "this endpoint's public URL (RFC 8707 resource), e.g. \
                 \"https://build.example.org/mcp\"",
            ),
        );
    }
    let mut scopes: Vec<String> = Vec::new();
    for s in &r.scopes {
        let v = s.get_ref();
        if !is_scope_token(v) {
            let m = format!(
                "`{}` is not a scope (printable, no spaces or quotes)",
                hands_roots::shown(v)
            );
            p.add(Some(s.span()), section, "scopes", m, None);
        } else if scopes.contains(v) {
            p.add(Some(s.span()), section, "scopes", format!("`{v}` appears twice"), None);
        } else {
            scopes.push(v.clone());
        }
    }
    let identity_claim = match &r.identity_claim {
        None => "sub".to_string(),
        Some(c) => {
            let v = c.get_ref();
            let shape = !v.is_empty()
                && v.len() <= 64
                && v.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.:-".contains(&b));
            if !shape || NOT_IDENTITIES.contains(&v.as_str()) {
                p.add(
                    Some(c.span()),
                    section,
                    "identity_claim",
                    format!("`{}` cannot name a client", hands_roots::shown(v)),
                    Some("a claim that names who holds the token: \"sub\" (default) or \"email\""),
                );
            }
            v.clone()
        }
    };
    OAuthCfg {
        issuer,
        audience,
        scopes,
        identity_claim,
        ca_file: r.ca_file.as_deref().map(|f| expand_tilde(f, home)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issuers_are_https_or_loopback_http() {
        assert_eq!(url_problem("https://login.example.org"), None);
        assert_eq!(url_problem("https://login.example.org/realms/dev"), None);
        assert_eq!(url_problem("http://127.0.0.1:9000"), None);
        assert_eq!(url_problem("http://localhost:9000/x"), None);
        assert_eq!(url_problem("http://[::1]:9000"), None);
        assert!(url_problem("http://login.example.org").is_some());
        assert!(url_problem("http://127.0.0.1.example.org").is_some());
        assert!(url_problem("ftp://login.example.org").is_some());
        assert!(url_problem("https://login.example.org/?x=1").is_some());
        assert!(url_problem("https://u@login.example.org").is_some());
        assert!(url_problem("login.example.org").is_some());
    }

    #[test]
    fn scope_tokens() {
        assert!(is_scope_token("hands") && is_scope_token("mcp:tools.write"));
        assert!(!is_scope_token("") && !is_scope_token("a b") && !is_scope_token("a\"b"));
    }
}
