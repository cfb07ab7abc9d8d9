//! The issuer's signing keys: its metadata (RFC 8414 `/.well-known/oauth-authorization-server`,
//! else OpenID Connect discovery), whose `issuer` must be the configured one exactly, names its
//! `jwks_uri`; the JWKS there is cached. A token whose `kid` the cache lacks refetches it — at
//! most once a minute (a flood of made-up `kid`s costs the issuer one request a minute), and
//! every few seconds while no JWKS was ever fetched (an issuer that was down at startup).
//!
//! Only signature keys of the algorithms SPEC §14 accepts are kept: RSA (RS256), EC P-256
//! (ES256), OKP Ed25519 (EdDSA). A key that names its `alg` serves only that one; a key for
//! encryption (`use` other than `sig`) serves none. HMAC (`oct`) keys are never kept.

use super::fetch::{FetchError, Fetcher};
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A refetch for an unknown `kid` waits this long after the last fetch.
const REFETCH_AFTER: Duration = Duration::from_secs(60);
/// How long a fetched JWKS is trusted: a key the issuer removed (rotated out, or leaked) stops
/// verifying within this, even when nobody sends an unknown `kid` (found by session 41's
/// attack pass: a removed key was accepted until the next unknown `kid`).
const KEYS_MAX_AGE: Duration = Duration::from_secs(600);

/// While no JWKS was ever fetched, attempts are this far apart.
const RETRY_EMPTY_AFTER: Duration = Duration::from_secs(5);

/// The most keys kept from one JWKS.
const MAX_KEYS: usize = 64;

/// The algorithms a token may be signed with (SPEC §14): never `none`, never HMAC.
pub const ACCEPTED: &[Algorithm] = &[Algorithm::RS256, Algorithm::ES256, Algorithm::EdDSA];

struct Key {
    kid: Option<String>,
    /// The one algorithm it verifies.
    alg: Algorithm,
    key: DecodingKey,
}

/// What only a fetch touches (one fetch at a time).
#[derive(Default)]
struct State {
    jwks_uri: Option<String>,
    /// When a fetch was last tried, and whether a JWKS was ever fetched.
    tried: Option<Instant>,
    fetched: bool,
}

/// Why no key was found.
pub enum Missing {
    /// The JWKS has no key of this `kid` and algorithm (after a refetch, or too soon for one).
    Unknown(String),
    /// The issuer's keys could not be fetched at all.
    Unavailable(String),
}

/// Why the issuer's keys could not be fetched ([`Keys::probe`]; a token's check says
/// "unavailable" with it).
#[derive(Debug, thiserror::Error)]
pub enum KeysError {
    /// The JWKS could not be fetched.
    #[error(transparent)]
    Fetch(FetchError),
    /// The document at `uri` has no `keys` array.
    #[error("{uri} is not a JWKS (no `keys`)")]
    NotJwks { uri: String },
    /// The metadata at `url` names another issuer (`stated`) than the configured one.
    #[error(
        "the metadata at {url} is for issuer `{}`, not `{expected}`; set `issuer` to the \
         identifier the provider itself states",
        hands_roots::shown(stated)
    )]
    OtherIssuer { url: String, stated: String, expected: String },
    #[error("the metadata at {url} names no jwks_uri")]
    NoJwksUri { url: String },
    /// Neither metadata URL could be fetched (each one's error).
    #[error(
        "cannot fetch the issuer's metadata: {}",
        .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
    )]
    NoMetadata(Vec<FetchError>),
}

/// The issuer's keys, fetched on demand.
pub struct Keys {
    issuer: String,
    fetcher: Fetcher,
    /// The keys of the last JWKS fetched: read without waiting for a fetch in progress, so a
    /// slow issuer stalls only the tokens whose key is not known yet.
    keys: std::sync::RwLock<Arc<Vec<Key>>>,
    /// When `keys` were fetched.
    fetched_at: std::sync::Mutex<Option<Instant>>,
    state: tokio::sync::Mutex<State>,
}

impl Keys {
    pub fn new(issuer: &str, fetcher: Fetcher) -> Keys {
        Keys {
            issuer: issuer.to_string(),
            fetcher,
            keys: Default::default(),
            fetched_at: Default::default(),
            state: Default::default(),
        }
    }

    /// Whether the keys are older than [`KEYS_MAX_AGE`] (or were never fetched).
    fn stale(&self) -> bool {
        let at = *hands_roots::lock(&self.fetched_at);
        at.is_none_or(|t| t.elapsed() >= KEYS_MAX_AGE)
    }

    fn known(&self, kid: Option<&str>, alg: Algorithm) -> Option<DecodingKey> {
        let keys = self.keys.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        pick(&keys, kid, alg)
    }

    /// The key for a token signed with `alg` under `kid` (a token without `kid`: the one key of
    /// that algorithm, when there is exactly one).
    pub async fn find(&self, kid: Option<&str>, alg: Algorithm) -> Result<DecodingKey, Missing> {
        if !self.stale()
            && let Some(k) = self.known(kid, alg)
        {
            return Ok(k);
        }
        let mut state = self.state.lock().await;
        // A fetch that ended while this one waited may have brought the key.
        if !self.stale()
            && let Some(k) = self.known(kid, alg)
        {
            return Ok(k);
        }
        let wait = if state.fetched { REFETCH_AFTER } else { RETRY_EMPTY_AFTER };
        let due = state.tried.is_none_or(|t| t.elapsed() >= wait);
        if due {
            state.tried = Some(Instant::now());
            match self.fetch(&mut state).await {
                Ok(()) => state.fetched = true,
                Err(e) if !state.fetched => return Err(Missing::Unavailable(e.to_string())),
                // Stale keys stay in use while the issuer cannot be reached: it is asked again
                // a minute later.
                Err(e) => tracing::warn!("oauth: cannot refetch the issuer's JWKS: {e}"),
            }
        }
        if let Some(k) = self.known(kid, alg) {
            return Ok(k);
        }
        if !due && !state.fetched {
            return Err(Missing::Unavailable(format!(
                "the keys of {} could not be fetched a moment ago; the next try is within {} s",
                self.issuer,
                wait.as_secs()
            )));
        }
        Err(Missing::Unknown(match kid {
            Some(kid) => format!(
                "the issuer's JWKS has no {alg:?} key `{}`",
                hands_roots::shown(&kid.chars().take(64).collect::<String>())
            ),
            None => format!("the token names no `kid` and the JWKS has no single {alg:?} key"),
        }))
    }

    /// Fetches the metadata and the JWKS now (`hands doctor`): how many usable keys it holds.
    pub async fn probe(&self) -> Result<usize, KeysError> {
        let mut state = self.state.lock().await;
        state.tried = Some(Instant::now());
        self.fetch(&mut state).await?;
        state.fetched = true;
        Ok(self.keys.read().unwrap_or_else(std::sync::PoisonError::into_inner).len())
    }

    /// Fetches the metadata (once) and the JWKS into `state`.
    async fn fetch(&self, state: &mut State) -> Result<(), KeysError> {
        let uri = match &state.jwks_uri {
            Some(u) => u.clone(),
            None => {
                let u = self.jwks_uri().await?;
                state.jwks_uri = Some(u.clone());
                u
            }
        };
        let doc = self.fetcher.json(&uri).await.map_err(KeysError::Fetch)?;
        let keys = parse_jwks(&doc).ok_or_else(|| KeysError::NotJwks { uri: uri.clone() })?;
        tracing::info!("oauth: fetched {} signing keys of {} from {uri}", keys.len(), self.issuer);
        *self.keys.write().unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(keys);
        *hands_roots::lock(&self.fetched_at) = Some(Instant::now());
        Ok(())
    }

    /// The issuer's `jwks_uri`, from its RFC 8414 metadata, else its OpenID configuration.
    async fn jwks_uri(&self) -> Result<String, KeysError> {
        let mut errors = Vec::new();
        for url in metadata_urls(&self.issuer) {
            let doc = match self.fetcher.json(&url).await {
                Ok(d) => d,
                Err(e) => {
                    errors.push(e);
                    continue;
                }
            };
            let issuer = doc.get("issuer").and_then(|v| v.as_str()).unwrap_or_default();
            if issuer != self.issuer {
                return Err(KeysError::OtherIssuer {
                    url,
                    stated: issuer.to_string(),
                    expected: self.issuer.clone(),
                });
            }
            return match doc.get("jwks_uri").and_then(|v| v.as_str()) {
                Some(u) => Ok(u.to_string()),
                None => Err(KeysError::NoJwksUri { url }),
            };
        }
        Err(KeysError::NoMetadata(errors))
    }
}

/// RFC 8414 §3.1 (the well-known segment between host and path), then OpenID Connect
/// discovery (appended to the issuer).
fn metadata_urls(issuer: &str) -> Vec<String> {
    let trimmed = issuer.trim_end_matches('/');
    let (origin, path) = match trimmed.find("://").map(|i| i + 3) {
        Some(start) => match trimmed[start..].find('/') {
            Some(slash) => trimmed.split_at(start + slash),
            None => (trimmed, ""),
        },
        None => (trimmed, ""),
    };
    vec![
        format!("{origin}/.well-known/oauth-authorization-server{path}"),
        format!("{trimmed}/.well-known/openid-configuration"),
    ]
}

/// The usable signature keys of a JWKS document; `None` when it has no `keys` array. Each key
/// is parsed alone, so one of a kind this crate does not know does not hide the others.
fn parse_jwks(doc: &serde_json::Value) -> Option<Vec<Key>> {
    let list = doc.get("keys")?.as_array()?;
    let mut out = Vec::new();
    for v in list.iter().take(MAX_KEYS) {
        let Ok(jwk) = serde_json::from_value::<Jwk>(v.clone()) else { continue };
        if let Some(k) = usable(jwk) {
            out.push(k);
        }
    }
    Some(out)
}

/// The key of `jwk` and the algorithm it verifies, when SPEC §14 accepts it.
fn usable(jwk: Jwk) -> Option<Key> {
    if jwk.common.public_key_use.as_ref().is_some_and(|u| *u != PublicKeyUse::Signature) {
        return None;
    }
    let alg = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => Algorithm::RS256,
        AlgorithmParameters::EllipticCurve(p) if p.curve == EllipticCurve::P256 => Algorithm::ES256,
        AlgorithmParameters::OctetKeyPair(p) if p.curve == EllipticCurve::Ed25519 => {
            Algorithm::EdDSA
        }
        _ => return None,
    };
    // A key that names its algorithm serves that one only.
    if let Some(named) = jwk.common.key_algorithm
        && format!("{named:?}") != format!("{alg:?}")
    {
        return None;
    }
    let key = DecodingKey::from_jwk(&jwk).ok()?;
    Some(Key { kid: jwk.common.key_id.clone(), alg, key })
}

fn pick(keys: &[Key], kid: Option<&str>, alg: Algorithm) -> Option<DecodingKey> {
    match kid {
        Some(kid) => keys.iter().find(|k| k.alg == alg && k.kid.as_deref() == Some(kid)),
        None => {
            let mut of_alg = keys.iter().filter(|k| k.alg == alg);
            match (of_alg.next(), of_alg.next()) {
                (Some(k), None) => Some(k),
                _ => None,
            }
        }
    }
    .map(|k| k.key.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_is_looked_for_where_rfc_8414_and_oidc_say() {
        assert_eq!(
            metadata_urls("https://login.example.org"),
            [
                "https://login.example.org/.well-known/oauth-authorization-server",
                "https://login.example.org/.well-known/openid-configuration"
            ]
        );
        assert_eq!(
            metadata_urls("https://login.example.org/realms/dev/"),
            [
                "https://login.example.org/.well-known/oauth-authorization-server/realms/dev",
                "https://login.example.org/realms/dev/.well-known/openid-configuration"
            ]
        );
    }

    /// A JWKS older than [`KEYS_MAX_AGE`] is fetched again before a key of it verifies, so a
    /// key the issuer removed stops working though nobody sends an unknown `kid`. Control:
    /// keys fetched a moment ago are used without asking the issuer.
    #[tokio::test]
    async fn a_key_the_issuer_removed_stops_verifying_once_the_keys_are_old() {
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let issuer = format!("http://{}", listener.local_addr().unwrap());
        let (with_key, fetches) = (Arc::new(AtomicBool::new(true)), Arc::new(AtomicUsize::new(0)));
        let (w, f, iss) = (with_key.clone(), fetches.clone(), issuer.clone());
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let mut req = Vec::new();
                let mut buf = [0u8; 1024];
                while !req.windows(4).any(|x| x == b"\r\n\r\n") {
                    let Ok(n) = conn.read(&mut buf).await else { break };
                    if n == 0 {
                        break;
                    }
                    req.extend_from_slice(&buf[..n]);
                }
                let body = if req.starts_with(b"GET /jwks ") {
                    f.fetch_add(1, Ordering::SeqCst);
                    let key = serde_json::json!({"kty": "EC", "crv": "P-256", "kid": "e",
                        "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
                        "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"});
                    let keys = if w.load(Ordering::SeqCst) { vec![key] } else { vec![] };
                    serde_json::json!({ "keys": keys })
                } else {
                    serde_json::json!({ "issuer": iss, "jwks_uri": format!("{iss}/jwks") })
                }
                .to_string();
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
                     Content-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = conn.write_all(format!("{head}{body}").as_bytes()).await;
            }
        });
        let tls = crate::transport::tls::client_config(None, "test").unwrap();
        let keys = Keys::new(&issuer, Fetcher::new(tls));
        assert!(keys.find(Some("e"), Algorithm::ES256).await.is_ok());
        with_key.store(false, Ordering::SeqCst);
        assert!(keys.find(Some("e"), Algorithm::ES256).await.is_ok(), "the control");
        assert_eq!(fetches.load(Ordering::SeqCst), 1);
        // Ten minutes on (set back here): the issuer is asked again, and the key is gone.
        *keys.fetched_at.lock().unwrap() = Instant::now().checked_sub(KEYS_MAX_AGE);
        keys.state.lock().await.tried = Instant::now().checked_sub(REFETCH_AFTER);
        let found = keys.find(Some("e"), Algorithm::ES256).await;
        assert!(matches!(found, Err(Missing::Unknown(_))), "a removed key still verifies");
        assert_eq!(fetches.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn only_signature_keys_of_accepted_kinds_are_kept() {
        let doc = serde_json::json!({"keys": [
            {"kty": "oct", "k": "c2VjcmV0", "kid": "h"},
            {"kty": "EC", "crv": "P-256", "kid": "e", "use": "sig",
             "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
             "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"},
            {"kty": "EC", "crv": "P-256", "kid": "enc", "use": "enc",
             "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
             "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"},
            {"kty": "EC", "crv": "P-256", "kid": "named", "alg": "ES384",
             "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
             "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"},
            {"kty": "future", "kid": "x"}
        ]});
        let keys = parse_jwks(&doc).unwrap();
        let kids: Vec<_> = keys.iter().map(|k| k.kid.clone().unwrap()).collect();
        assert_eq!(kids, ["e"]);
        assert!(pick(&keys, Some("e"), Algorithm::ES256).is_some());
        assert!(pick(&keys, None, Algorithm::ES256).is_some());
        assert!(pick(&keys, Some("e"), Algorithm::RS256).is_none());
        assert!(pick(&keys, Some("h"), Algorithm::ES256).is_none());
    }
}
