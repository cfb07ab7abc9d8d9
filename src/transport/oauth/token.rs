//! One JWT access token checked with `jsonwebtoken` (SPEC §14): the header first (an accepted
//! algorithm — never `none`, never HMAC — and `typ` `at+jwt` or `JWT`), then the signature with
//! the issuer's key for that `kid` and algorithm, `iss`, `aud` (this resource, RFC 8707),
//! `exp`/`nbf` with 60 s of leeway; then the scopes (`scope`, space-separated, or `scp`, an
//! array) and the identity claim. Nothing here keeps or prints the token.

use super::keys::{ACCEPTED, Keys, Missing};
use crate::config::OAuthCfg;
use jsonwebtoken::{Algorithm, Validation};

/// Seconds of clock skew allowed on `exp` and `nbf`.
const LEEWAY_SECS: u64 = 60;

/// A token longer than this is refused unread (real access tokens are 1-2 KiB).
const MAX_TOKEN: usize = 16 * 1024;

/// The longest identity claim value accepted.
const MAX_IDENTITY: usize = 128;

/// Why a request's token does not let it in.
#[derive(Debug)]
pub enum Refusal {
    /// No bearer token.
    Missing,
    /// Not a valid token for this resource (401 `invalid_token`): why.
    Invalid(String),
    /// Valid, without every configured scope (403 `insufficient_scope`): the ones missing.
    Scope(Vec<String>),
    /// The issuer's keys cannot be had just now (503): why.
    Unavailable(String),
}

/// The identity claim's value of a valid `token` with every configured scope.
pub async fn check(token: &str, cfg: &OAuthCfg, keys: &Keys) -> Result<String, Refusal> {
    if token.len() > MAX_TOKEN {
        return Err(Refusal::Invalid(format!("the token is over {MAX_TOKEN} bytes")));
    }
    let raw_header = header_json(token);
    // RFC 7515 §4.1.11: extensions a verifier must understand; hands understands none.
    if raw_header.as_ref().is_some_and(|h| h.get("crit").is_some()) {
        return Err(Refusal::Invalid("the header names `crit` extensions".into()));
    }
    let alg = raw_header.as_ref().and_then(|h| h.get("alg")?.as_str().map(str::to_string));
    let header = jsonwebtoken::decode_header(token).map_err(|e| {
        Refusal::Invalid(match alg.map(|a| a.chars().take(32).collect::<String>()).as_deref() {
            Some(a) if a.eq_ignore_ascii_case("none") => {
                "an unsigned token (`alg: none`) is never accepted".to_string()
            }
            // jsonwebtoken's error may quote the header whole (a 12,000-character `alg`).
            Some(a) => format!(
                "algorithm `{}` is not accepted ({})",
                hands_roots::shown(a),
                hands_roots::shown(&e.to_string())
            ),
            None => format!("not a JWT: {}", hands_roots::shown(&e.to_string())),
        })
    })?;
    if !ACCEPTED.contains(&header.alg) {
        return Err(Refusal::Invalid(format!(
            "algorithm {:?} is not accepted: RS256, ES256 or EdDSA, as the issuer's JWKS names them",
            header.alg
        )));
    }
    let typ_ok = header.typ.as_deref().is_some_and(|t| {
        let t = t.strip_prefix("application/").unwrap_or(t);
        t.eq_ignore_ascii_case("at+jwt") || t.eq_ignore_ascii_case("jwt")
    });
    if !typ_ok {
        return Err(Refusal::Invalid(format!(
            "header typ {} is not `at+jwt` or `JWT`",
            header
                .typ
                .as_deref()
                .map_or("(none)".into(), |t| format!("`{}`", hands_roots::shown(t)))
        )));
    }
    let key = keys.find(header.kid.as_deref(), header.alg).await.map_err(|m| match m {
        Missing::Unknown(why) => Refusal::Invalid(why),
        Missing::Unavailable(why) => Refusal::Unavailable(why),
    })?;
    let data = jsonwebtoken::decode::<serde_json::Map<String, serde_json::Value>>(
        token,
        &key,
        &validation(cfg, header.alg),
    )
    .map_err(|e| Refusal::Invalid(explain(&e)))?;
    let claims = data.claims;
    let held = scopes_of(&claims);
    let missing: Vec<String> = cfg.scopes.iter().filter(|s| !held.contains(s)).cloned().collect();
    if !missing.is_empty() {
        return Err(Refusal::Scope(missing));
    }
    let claim = &cfg.identity_claim;
    let value = match claims.get(claim) {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(_) => return Err(Refusal::Invalid(format!("claim `{claim}` is not a string"))),
        None => return Err(Refusal::Invalid(format!("the token has no `{claim}` claim"))),
    };
    let printable = value.chars().all(|c| !c.is_control() && !c.is_whitespace());
    if value.is_empty() || value.chars().count() > MAX_IDENTITY || !printable {
        return Err(Refusal::Invalid(format!(
            "claim `{claim}` is empty, over {MAX_IDENTITY} characters or has spaces or control \
             characters, so it cannot name a client"
        )));
    }
    Ok(value)
}

fn validation(cfg: &OAuthCfg, alg: Algorithm) -> Validation {
    let mut v = Validation::new(alg);
    v.leeway = LEEWAY_SECS;
    v.validate_exp = true;
    v.validate_nbf = true;
    v.validate_aud = true;
    v.set_issuer(&[cfg.issuer.as_str()]);
    v.set_audience(&[cfg.audience.as_str()]);
    v.set_required_spec_claims(&["exp", "iss", "aud"]);
    v
}

/// The header as JSON, read leniently (for `crit`, and the message about a refused `alg`).
fn header_json(token: &str) -> Option<serde_json::Map<String, serde_json::Value>> {
    use base64::Engine as _;
    let head = token.split('.').next()?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(head).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// The scopes a token carries: `scope` (space-separated, RFC 9068) or `scp` (an array, or a
/// space-separated string).
fn scopes_of(claims: &serde_json::Map<String, serde_json::Value>) -> Vec<String> {
    let mut out = Vec::new();
    for name in ["scope", "scp"] {
        match claims.get(name) {
            Some(serde_json::Value::String(s)) => {
                out.extend(s.split_ascii_whitespace().map(str::to_string))
            }
            Some(serde_json::Value::Array(a)) => {
                out.extend(a.iter().filter_map(|v| v.as_str().map(str::to_string)))
            }
            _ => {}
        }
    }
    out
}

/// What a person reads for a refused token.
fn explain(e: &jsonwebtoken::errors::Error) -> String {
    use jsonwebtoken::errors::ErrorKind as K;
    match e.kind() {
        K::InvalidSignature => "the signature does not verify with the issuer's key".into(),
        K::ExpiredSignature => "the token has expired; get a fresh one from the issuer".into(),
        K::ImmatureSignature => "the token is not valid yet (nbf)".into(),
        K::InvalidIssuer => "the token is from another issuer".into(),
        K::InvalidAudience => {
            "the token is for another audience (RFC 8707 resource), not this endpoint".into()
        }
        K::MissingRequiredClaim(c) => format!("the token has no `{c}` claim"),
        K::InvalidAlgorithm => "the token's algorithm does not match the issuer's key".into(),
        _ => format!("the token is malformed: {}", hands_roots::shown(&e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_come_from_scope_or_scp() {
        let c = |v: serde_json::Value| v.as_object().unwrap().clone();
        assert_eq!(scopes_of(&c(serde_json::json!({"scope": "a  b"}))), ["a", "b"]);
        assert_eq!(scopes_of(&c(serde_json::json!({"scp": ["a", 1, "c"]}))), ["a", "c"]);
        assert!(scopes_of(&c(serde_json::json!({"scope": 3}))).is_empty());
    }

    #[test]
    fn the_header_is_read_leniently() {
        let h = header_json("eyJhbGciOiJub25lIn0.e30.").unwrap();
        assert_eq!(h["alg"], "none");
        assert!(header_json("not-a-token").is_none());
    }
}
