//! The dashboard's door: every request's checks before anything is read or changed — the
//! Host (DNS rebinding), `Sec-Fetch-Site`, the session's prefix and cookie, `Origin` and the
//! CSRF token on every POST — then the login and the routing to `views` and `actions`.

use super::form::{field, form_pairs};
use super::{actions, views};
use crate::gate::approvals::random_hex;
use crate::server::Daemon;
use crate::transport::conns::{self, Timed};
use bytes::Bytes;
use hands_roots::lock;
use hmac::digest::KeyInit;
use hmac::{Hmac, Mac};
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};
use sha2::Sha256;
use std::collections::HashMap;
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

type Body = BoxBody<Bytes, Infallible>;

/// The session cookie's name.
const SESSION_COOKIE: &str = "hands_session";
/// The pre-session cookie that binds the login form's CSRF token.
const LOGIN_COOKIE: &str = "hands_login";
/// A login lasts this long.
const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);
/// The largest form accepted.
const MAX_FORM: usize = 16 * 1024;
/// How many sessions may exist at once; the oldest goes first.
const MAX_SESSIONS: usize = 64;
/// The Content-Security-Policy of every response.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   connect-src 'self'; form-action 'self'; frame-ancestors 'none'; \
                   base-uri 'none'";
const SCRIPT: &str = include_str!("dashboard.js");
const STYLE: &str = include_str!("dashboard.css");
/// Domain separator for the token's constant-time comparison (not a secret).
const TAG_KEY: [u8; 64] = *b"hands: dashboard-token tags for a constant-time comparison, v1..";

pub(super) fn tag_of(token: &[u8]) -> Vec<u8> {
    let mut m = <Hmac<Sha256> as KeyInit>::new(&TAG_KEY.into());
    m.update(token);
    m.finalize().into_bytes().to_vec()
}

/// One logged-in browser, found by its prefix (`/s/PREFIX/`).
pub(super) struct Session {
    /// The session cookie's value.
    sid: String,
    csrf: String,
    expires: Instant,
}

/// Where a session's pages live.
fn base_of(prefix: &str) -> String {
    format!("/s/{prefix}/")
}

/// The state every connection shares.
pub(super) struct Door {
    pub(super) daemon: Arc<Daemon>,
    pub(super) addr: SocketAddr,
    pub(super) tag: Vec<u8>,
    pub(super) any_ip: bool,
    pub(super) sessions: Mutex<HashMap<String, Session>>,
    /// The doctor's warnings and the audit chain's last check, computed off the request path.
    pub(super) cache: views::Cache,
    /// Held through each wrong login's pause: wrong tokens are answered one at a time, so no
    /// number of connections guesses faster than one in [`WRONG_LOGIN_PAUSE`].
    pub(super) wrong_logins: tokio::sync::Mutex<()>,
}

/// How long a wrong login is answered after, door-wide (found by session 41's attack pass:
/// a pause per connection let 48 connections try 158 tokens a second).
const WRONG_LOGIN_PAUSE: Duration = Duration::from_millis(300);

/// The headers every response carries.
pub(super) fn secured(mut r: Response<Body>) -> Response<Body> {
    let h = r.headers_mut();
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    // Not `no-referrer`: under it a browser sends `Origin: null` with a form POST, and the
    // Origin check needs the page's real origin. `same-origin` still leaks nothing elsewhere.
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        http::HeaderName::from_static("cross-origin-opener-policy"),
        HeaderValue::from_static("same-origin"),
    );
    h.insert(
        http::HeaderName::from_static("cross-origin-resource-policy"),
        HeaderValue::from_static("same-origin"),
    );
    r
}

fn respond(status: StatusCode, content_type: &'static str, body: String) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from(body)).boxed());
    *r.status_mut() = status;
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

fn plain(status: StatusCode, text: &str) -> Response<Body> {
    respond(status, "text/plain; charset=utf-8", format!("{text}\n"))
}

fn html(status: StatusCode, body: String) -> Response<Body> {
    respond(status, "text/html; charset=utf-8", body)
}

fn redirect(to: &str) -> Response<Body> {
    let mut r = plain(StatusCode::SEE_OTHER, "see other");
    if let Ok(v) = HeaderValue::from_str(to) {
        r.headers_mut().insert(header::LOCATION, v);
    }
    r
}

fn set_cookie(r: &mut Response<Body>, name: &str, value: &str, path: &str, max_age: u64) {
    let text = format!("{name}={value}; Path={path}; HttpOnly; SameSite=Strict; Max-Age={max_age}");
    if let Ok(v) = HeaderValue::from_str(&text) {
        r.headers_mut().append(header::SET_COOKIE, v);
    }
}

/// A cookie's value from the request's `Cookie` headers.
fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    cookies(headers, name).into_iter().next()
}

/// Every value the request's `Cookie` headers give `name`: another port's server can set a
/// cookie of the same name for this host (with a shorter `Path`), and it must not hide ours.
fn cookies(headers: &HeaderMap, name: &str) -> Vec<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|line| line.split(';'))
        .filter_map(|kv| {
            let (k, v) = kv.trim().split_once('=')?;
            (k == name).then(|| v.to_string())
        })
        .collect()
}

/// What a browser says about who made the request (`Sec-Fetch-Site`), when it says.
fn fetch_site(headers: &HeaderMap) -> Option<&str> {
    headers.get("sec-fetch-site").map(|v| v.to_str().unwrap_or("invalid"))
}

/// A request a browser made for a page of another origin — another port of this host is
/// `same-site`, not `same-origin` — is refused whatever it carries. `none` is a person typing
/// the URL or following a bookmark; allowed only where `navigation` says so. A client that
/// sends no `Sec-Fetch-Site` is not a browser that could be tricked (or is an old one; the
/// prefix, cookie, Origin and CSRF checks still hold).
fn refuse_cross_origin(headers: &HeaderMap, navigation: bool) -> Result<(), Box<Response<Body>>> {
    match fetch_site(headers) {
        None | Some("same-origin") => Ok(()),
        Some("none") if navigation => Ok(()),
        Some(other) => {
            tracing::warn!(
                sec_fetch_site = other,
                "dashboard: refused a request made by another origin's page"
            );
            Err(Box::new(plain(
                StatusCode::FORBIDDEN,
                "refused: this request was made by a page of another origin (Sec-Fetch-Site); \
                 the dashboard answers its own page only, and nothing was read or changed",
            )))
        }
    }
}

/// Constant-time equality of two strings (CSRF tokens).
fn same(a: &str, b: &str) -> bool {
    let mut m = <Hmac<Sha256> as KeyInit>::new(&TAG_KEY.into());
    m.update(a.as_bytes());
    m.verify_slice(&tag_of(b.as_bytes())).is_ok()
}

fn is_loopback_name(host: &str) -> bool {
    let h = host.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
    h == "localhost" || h.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

impl Door {
    /// The request's `Host`, when it is one this page answers to.
    fn host<B>(&self, req: &Request<B>) -> Result<String, Box<Response<Body>>> {
        let mut values = req.headers().get_all(header::HOST).iter();
        let (Some(v), None) = (values.next(), values.next()) else {
            return Err(Box::new(plain(StatusCode::BAD_REQUEST, "one Host header is required")));
        };
        let authority = v
            .to_str()
            .ok()
            .and_then(|s| s.parse::<http::uri::Authority>().ok())
            .ok_or_else(|| Box::new(plain(StatusCode::BAD_REQUEST, "malformed Host header")))?;
        let host = authority.host();
        let own = host.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>().ok();
        // An IP literal cannot be a rebinding name: the listen address's own, or any when it
        // listens on every address.
        if is_loopback_name(host) || own == Some(self.addr.ip()) || (self.any_ip && own.is_some()) {
            Ok(authority.as_str().to_ascii_lowercase())
        } else {
            tracing::warn!(host = %authority, "dashboard: refused a request for another Host");
            Err(Box::new(plain(
                StatusCode::FORBIDDEN,
                &format!(
                    "Host `{authority}` is not this dashboard's (DNS-rebinding protection); open \
                     it at http://{}/",
                    self.addr
                ),
            )))
        }
    }

    /// A state-changing request must come from this page: `Origin` is `http://` + its Host.
    fn check_origin(&self, headers: &HeaderMap, host: &str) -> Result<(), Box<Response<Body>>> {
        let mut values = headers.get_all(header::ORIGIN).iter();
        let ok = match (values.next(), values.next()) {
            (Some(v), None) => {
                v.to_str().is_ok_and(|o| o.eq_ignore_ascii_case(&format!("http://{host}")))
            }
            _ => false,
        };
        if ok {
            return Ok(());
        }
        tracing::warn!("dashboard: refused a POST whose Origin is not the dashboard's");
        Err(Box::new(plain(
            StatusCode::FORBIDDEN,
            "refused: this request does not come from the dashboard's own page (Origin); nothing \
             was changed",
        )))
    }

    /// The live session of `prefix` when the request also carries its cookie: its CSRF token.
    fn session(&self, prefix: &str, headers: &HeaderMap) -> Option<String> {
        let presented = cookies(headers, SESSION_COOKIE);
        let mut all = lock(&self.sessions);
        let now = Instant::now();
        all.retain(|_, s| s.expires > now);
        let s = all.get(prefix)?;
        presented.iter().any(|c| same(c, &s.sid)).then(|| s.csrf.clone())
    }

    fn token_matches(&self, presented: &str) -> bool {
        let mut m = <Hmac<Sha256> as KeyInit>::new(&TAG_KEY.into());
        m.update(presented.trim().as_bytes());
        m.verify_slice(&self.tag).is_ok()
    }

    /// A new session: its prefix and cookie value.
    fn new_session(&self) -> std::io::Result<(String, String)> {
        let prefix = random_hex(16)?;
        let sid = random_hex(32)?;
        let csrf = random_hex(32)?;
        let mut all = lock(&self.sessions);
        if all.len() >= MAX_SESSIONS
            && let Some(oldest) = all.iter().min_by_key(|(_, s)| s.expires).map(|(k, _)| k.clone())
        {
            all.remove(&oldest);
        }
        all.insert(
            prefix.clone(),
            Session { sid: sid.clone(), csrf, expires: Instant::now() + SESSION_TTL },
        );
        Ok((prefix, sid))
    }

    pub(super) async fn handle(&self, mut req: Request<Timed>) -> Response<Body> {
        let host = match self.host(&req) {
            Ok(h) => h,
            Err(r) => return *r,
        };
        let path = req.uri().path().to_string();
        let query = req.uri().query().unwrap_or("").to_string();
        let method = req.method().clone();
        match (&method, path.as_str()) {
            (&Method::GET, "/dashboard.js") => {
                return respond(StatusCode::OK, "text/javascript; charset=utf-8", SCRIPT.into());
            }
            (&Method::GET, "/dashboard.css") => {
                return respond(StatusCode::OK, "text/css; charset=utf-8", STYLE.into());
            }
            (&Method::GET, "/login") => return self.login_page(None),
            (&Method::POST, "/login") => {
                if let Err(r) = refuse_cross_origin(req.headers(), false) {
                    return *r;
                }
                if let Err(r) = self.check_origin(req.headers(), &host) {
                    return *r;
                }
                return self.login(req).await;
            }
            // No session lives at `/`: its cookie is sent under its prefix only.
            (&Method::GET, "/") => return redirect("/login"),
            _ => {}
        }
        // `/s/PREFIX/REST`: the session's own pages.
        let (prefix, rest) = match path.strip_prefix("/s/").and_then(|p| p.split_once('/')) {
            Some((p, r)) => (p.to_string(), format!("/{r}")),
            None => {
                return plain(StatusCode::NOT_FOUND, "no such page; the dashboard is at /login");
            }
        };
        if let Err(r) = refuse_cross_origin(req.headers(), method == Method::GET && rest == "/") {
            return *r;
        }
        let Some(csrf) = self.session(&prefix, req.headers()) else {
            return match (&method, rest.as_str()) {
                (&Method::GET, "/") => redirect("/login"),
                _ => plain(
                    StatusCode::UNAUTHORIZED,
                    "log in to the dashboard first (GET /login); no session cookie, or it expired",
                ),
            };
        };
        // The person's own session: this connection is not closed to make room for another
        // while the request is served.
        if let Err(r) = conns::vouch(&mut req, conns::Holder::Token("the person")) {
            return *r;
        }
        match method {
            Method::GET => match rest.as_str() {
                "/" => html(
                    StatusCode::OK,
                    views::full(&self.daemon, &self.cache, &csrf, &query).await,
                ),
                "/live" => {
                    // Only the page's own script sets this header (the token is in the page).
                    let header = req.headers().get("x-hands-csrf").and_then(|v| v.to_str().ok());
                    if !header.is_some_and(|h| same(h, &csrf)) {
                        tracing::warn!("dashboard: refused /live without the X-Hands-Csrf header");
                        return plain(
                            StatusCode::FORBIDDEN,
                            "refused: /live answers the dashboard's own script only (the \
                             X-Hands-Csrf header is missing or wrong); reload the page",
                        );
                    }
                    html(
                        StatusCode::OK,
                        views::live(&self.daemon, &self.cache, &csrf, &query).await,
                    )
                }
                _ => plain(StatusCode::NOT_FOUND, "no such page; the dashboard is at /login"),
            },
            Method::POST => {
                if let Err(r) = self.check_origin(req.headers(), &host) {
                    return *r;
                }
                let pairs = match read_form(req).await {
                    Ok(p) => p,
                    Err(r) => return *r,
                };
                let presented = field(&pairs, "csrf").unwrap_or("");
                if presented.is_empty() || !same(presented, &csrf) {
                    tracing::warn!("dashboard: refused a POST without this session's CSRF token");
                    return plain(
                        StatusCode::FORBIDDEN,
                        "refused: the form does not carry this session's CSRF token; reload the \
                         dashboard and try again (nothing was changed)",
                    );
                }
                if rest == "/logout" {
                    lock(&self.sessions).remove(&prefix);
                    let mut r = redirect("/login");
                    set_cookie(&mut r, SESSION_COOKIE, "", &base_of(&prefix), 0);
                    return r;
                }
                match actions::act(&self.daemon, &rest, &pairs).await {
                    Ok(()) => redirect(&base_of(&prefix)),
                    Err((status, msg)) => html(status, views::message(&msg)),
                }
            }
            _ => plain(StatusCode::METHOD_NOT_ALLOWED, "the dashboard serves GET and POST"),
        }
    }

    /// The login form, with a fresh pre-session CSRF token bound to a cookie.
    fn login_page(&self, error: Option<&str>) -> Response<Body> {
        let nonce = match random_hex(32) {
            Ok(n) => n,
            Err(e) => {
                return plain(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    &format!("cannot read /dev/urandom: {e}"),
                );
            }
        };
        let status = if error.is_some() { StatusCode::UNAUTHORIZED } else { StatusCode::OK };
        let mut r = html(status, views::login(&nonce, error));
        set_cookie(&mut r, LOGIN_COOKIE, &nonce, "/login", 600);
        r
    }

    async fn login(&self, req: Request<Timed>) -> Response<Body> {
        let bound = cookie(req.headers(), LOGIN_COOKIE);
        let pairs = match read_form(req).await {
            Ok(p) => p,
            Err(r) => return *r,
        };
        let presented = field(&pairs, "csrf").unwrap_or("");
        let csrf_ok = bound.as_deref().is_some_and(|b| !b.is_empty() && same(presented, b));
        if !csrf_ok {
            tracing::warn!("dashboard: refused a login without the login form's CSRF token");
            return plain(
                StatusCode::FORBIDDEN,
                "refused: the login form's CSRF token is missing or stale; open /login again",
            );
        }
        if !self.token_matches(field(&pairs, "token").unwrap_or("")) {
            // Friction for guessing, shared by every connection; the right token waits for none.
            let _one_at_a_time = self.wrong_logins.lock().await;
            tracing::warn!("dashboard: a login with a wrong token");
            tokio::time::sleep(WRONG_LOGIN_PAUSE).await;
            return self.login_page(Some("That is not the dashboard token."));
        }
        // Back to the entry a link pointed at, when it is one (`#` and an id, nothing else).
        let next = field(&pairs, "next")
            .and_then(|n| n.strip_prefix('#'))
            .filter(|n| {
                !n.is_empty()
                    && n.len() <= 64
                    && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            })
            .map(|n| format!("#{n}"))
            .unwrap_or_default();
        match self.new_session() {
            Ok((prefix, sid)) => {
                let base = base_of(&prefix);
                let mut r = redirect(&format!("{base}{next}"));
                set_cookie(&mut r, SESSION_COOKIE, &sid, &base, SESSION_TTL.as_secs());
                set_cookie(&mut r, LOGIN_COOKIE, "", "/login", 0);
                r
            }
            Err(e) => plain(
                StatusCode::INTERNAL_SERVER_ERROR,
                &format!("cannot make a session (reading /dev/urandom failed: {e})"),
            ),
        }
    }
}

async fn read_form(req: Request<Timed>) -> Result<Vec<(String, String)>, Box<Response<Body>>> {
    let body = Limited::new(req.into_body(), MAX_FORM).collect().await.map_err(|_| {
        Box::new(plain(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!("the form is over {MAX_FORM} bytes or was cut off"),
        ))
    })?;
    let bytes = body.to_bytes();
    Ok(form_pairs(&String::from_utf8_lossy(&bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_are_found_by_exact_name() {
        let mut h = HeaderMap::new();
        h.insert(header::COOKIE, "x_hands_session=bad; hands_session=good".parse().unwrap());
        assert_eq!(cookie(&h, SESSION_COOKIE).as_deref(), Some("good"));
        assert_eq!(cookie(&h, LOGIN_COOKIE), None);
    }

    #[test]
    fn csrf_comparison_is_exact() {
        assert!(same("abc123", "abc123"));
        assert!(!same("abc123", "abc12"));
        assert!(!same("", "abc"));
    }
}
