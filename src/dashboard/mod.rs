//! The person's dashboard (SPEC §12): a small web page the daemon serves on its own listener
//! when `[server.dashboard]` is configured, on stdio and HTTP alike. It shows what waits for a
//! person and what runs, and offers the same actions as `hands approvals` and `hands stop`.
//!
//! The page is a door for a *person*, so it is locked differently from `/mcp`:
//!
//! 1. `Host` must be a loopback name or address, or the listen address's own IP (any IP when
//!    it listens on every address): a name could be a DNS-rebinding one; anything else is 403.
//! 2. A session is two secrets, made by `POST /login` with the dashboard token (from
//!    `token_env` or `token_file`, compared in constant time; not an MCP client token): a
//!    random *prefix* every page of the session lives under (`/s/PREFIX/`), and a session
//!    cookie (`HttpOnly`, `SameSite=Strict`) whose `Path` is that prefix. Browsers send a
//!    cookie to every port of a host, so a cookie alone would reach any server on the same
//!    host (a "dev server" an agent started on another loopback port); with its `Path` under
//!    the prefix it is sent only to URLs that already name the prefix, which nothing outside
//!    the person's tab knows (`Referrer-Policy: same-origin`). Both must match. An
//!    `Authorization` header is never read, so an MCP bearer token opens nothing here.
//! 3. A browser's `Sec-Fetch-Site` must be `same-origin` (or `none`, a typed URL, for a page
//!    load): a request another port's page makes is `same-site` and is refused before it reads
//!    or changes anything. `/live` (which carries the CSRF token) also needs the token in the
//!    `X-Hands-Csrf` header, which only the page's own script can set (a custom header from
//!    another origin needs a CORS preflight this server never grants).
//! 4. Every `POST` must carry an `Origin` equal to the page's own (`http://` + its `Host`) and
//!    the session's CSRF token in the form (`csrf`); the login form carries a pre-session token
//!    bound to a cookie the same way. A refused request changes nothing.
//! 5. Every response sets a strict Content-Security-Policy (scripts and styles from this
//!    server only, no inline script, no frames), `nosniff`, `same-origin` referrers, `no-store`,
//!    and `Cross-Origin-Opener-Policy`/`-Resource-Policy: same-origin` (no other origin keeps a
//!    handle on the window or embeds a response).
//! 6. Everything shown is escaped (`page::esc`): a command line holding `<script>` is text.
//!
//! No MCP client can reach these endpoints: they live on another listener, and none of the
//! tools reads or answers approvals. Decisions made here are audited as `person-via-dashboard`.

mod actions;
mod page;

use crate::config::{Config, DashboardCfg};
use crate::lock::lock;
use crate::server::Daemon;
use anyhow::{Context as _, anyhow, bail};
use bytes::Bytes;
use hmac::digest::KeyInit;
use hmac::{Hmac, Mac};
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use sha2::Sha256;
use std::collections::HashMap;
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

type Body = BoxBody<Bytes, Infallible>;

/// The default listen address (SPEC §12).
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8766";
/// The session cookie's name.
const SESSION_COOKIE: &str = "hands_session";
/// The pre-session cookie that binds the login form's CSRF token.
const LOGIN_COOKIE: &str = "hands_login";
/// A login lasts this long.
const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);
/// Tokens shorter than this are refused at startup.
const MIN_TOKEN_LEN: usize = 16;
/// The largest form accepted.
const MAX_FORM: usize = 16 * 1024;
/// A slow client gets this long to send its request headers.
const HEADER_TIMEOUT: Duration = Duration::from_secs(30);
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

/// Everything `start` needs, checked before the runtime starts.
pub struct Setup {
    addr: SocketAddr,
    tag: Vec<u8>,
    /// Listening on 0.0.0.0 or `::`: any IP literal is a Host this page answers to.
    any_ip: bool,
}

impl Setup {
    /// The dashboard's setup, or `None` when `[server.dashboard]` is absent. Reads the token
    /// now, so a missing or weak one stops `hands serve` before it serves anything; refuses a
    /// token file inside a root (a command or a file tool could read it) and a token that is
    /// also an MCP client's (the person's login must be separate from every client's).
    pub fn new(config: &Config) -> anyhow::Result<Option<Setup>> {
        let Some(cfg) = config.dashboard.as_ref() else { return Ok(None) };
        if let Some(file) = &cfg.token_file
            && let Some(seen) = crate::http::readable_by_modules(config, file)
        {
            bail!(
                "[server.dashboard]: token_file {} lies {seen}, where commands and file tools \
                 could read the person's login\nhint: keep it outside every root and every \
                 folder commands see, e.g. ~/.config/hands/dashboard.token (chmod 600)",
                file.display()
            );
        }
        let addr: SocketAddr = cfg.listen.parse().map_err(|_| {
            anyhow!(
                "[server.dashboard].listen `{}` is not an address:port\nhint: for example {}",
                cfg.listen,
                DEFAULT_LISTEN
            )
        })?;
        let mcp = config.http.as_ref().and_then(|h| h.listen.parse::<SocketAddr>().ok());
        if let Some(mcp) = mcp
            && mcp.port() != 0
            && mcp.port() == addr.port()
            && (mcp.ip() == addr.ip() || mcp.ip().is_unspecified() || addr.ip().is_unspecified())
        {
            bail!(
                "[server.dashboard].listen {addr} is [server.http].listen's address too; the \
                 dashboard needs a listener of its own\nhint: for example {DEFAULT_LISTEN}"
            );
        }
        let token = read_token(cfg)?;
        for c in config.http.iter().flat_map(|h| &h.clients) {
            if crate::http::read_token(c).is_ok_and(|t| t == token) {
                bail!(
                    "[server.dashboard]: the login token is also the token of the MCP client \
                     `{}`; that client could log in as the person\nhint: give the dashboard a \
                     token of its own (`openssl rand -hex 32`)",
                    c.name
                );
            }
        }
        let any_ip = addr.ip().is_unspecified();
        Ok(Some(Setup { addr, tag: tag_of(token.as_bytes()), any_ip }))
    }
}

fn read_token(cfg: &DashboardCfg) -> anyhow::Result<String> {
    let (raw, source) = match (&cfg.token_env, &cfg.token_file) {
        (Some(var), _) => {
            let v = std::env::var(var).map_err(|_| {
                anyhow!(
                    "[server.dashboard]: token_env = \"{var}\": the variable is not set (or not \
                     UTF-8)\nhint: export {var} in the environment of `hands serve`, or use \
                     token_file"
                )
            })?;
            (v, format!("${var}"))
        }
        (None, Some(file)) => {
            let v = std::fs::read_to_string(file).with_context(|| {
                format!("[server.dashboard]: cannot read token_file {}", file.display())
            })?;
            (v, file.display().to_string())
        }
        (None, None) => bail!(
            "[server.dashboard] has neither token_env nor token_file\nhint: token_env = \
             \"HANDS_DASHBOARD_TOKEN\" reads the person's login token from that variable"
        ),
    };
    let token = raw.trim();
    if token.len() < MIN_TOKEN_LEN || !token.bytes().all(|b| b.is_ascii_graphic()) {
        bail!(
            "[server.dashboard]: the token in {source} must be at least {MIN_TOKEN_LEN} printable \
             characters without spaces\nhint: `openssl rand -hex 32` makes a good one"
        );
    }
    Ok(token.to_string())
}

fn tag_of(token: &[u8]) -> Vec<u8> {
    let mut m = <Hmac<Sha256> as KeyInit>::new(&TAG_KEY.into());
    m.update(token);
    m.finalize().into_bytes().to_vec()
}

/// Random bytes from the kernel, hex-encoded.
fn random_hex(n: usize) -> std::io::Result<String> {
    use std::io::Read;
    let mut buf = vec![0u8; n];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut buf)?;
    Ok(hex::encode(buf))
}

/// One logged-in browser, found by its prefix (`/s/PREFIX/`).
struct Session {
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
pub(crate) struct Door {
    daemon: Arc<Daemon>,
    addr: SocketAddr,
    tag: Vec<u8>,
    any_ip: bool,
    sessions: Mutex<HashMap<String, Session>>,
    /// The doctor's warnings and the audit chain's last check, computed off the request path.
    pub(crate) cache: page::Cache,
}

/// Binds the listener and serves the dashboard on the current runtime until it ends. A port
/// already taken (another daemon of this state dir serves the dashboard) is an error the
/// caller reports as a warning: serving MCP goes on.
pub async fn start(daemon: Arc<Daemon>, setup: Setup) -> anyhow::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(setup.addr).await.with_context(|| {
        format!(
            "cannot listen on {} for the dashboard (another hands serve may hold it)",
            setup.addr
        )
    })?;
    let bound = listener.local_addr().context("cannot read the dashboard's address")?;
    daemon.approvals.set_dashboard(format!("http://{bound}/"));
    let door = Arc::new(Door {
        daemon,
        addr: bound,
        tag: setup.tag,
        any_ip: setup.any_ip,
        sessions: Mutex::new(HashMap::new()),
        cache: page::Cache::default(),
    });
    {
        let door = door.clone();
        tokio::spawn(async move { page::warm(&door).await });
    }
    tokio::spawn(async move {
        loop {
            let stream = match listener.accept().await {
                Ok((s, _)) => s,
                Err(e) => {
                    tracing::warn!("dashboard: accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            crate::http::no_nagle(&stream, "dashboard");
            let door = door.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req| {
                    let door = door.clone();
                    async move { Ok::<_, Infallible>(secured(door.handle(req).await)) }
                });
                let conn = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(HEADER_TIMEOUT)
                    .serve_connection(TokioIo::new(stream), svc);
                if let Err(e) = conn.await {
                    tracing::debug!("dashboard: connection ended: {e}");
                }
            });
        }
    });
    Ok(bound)
}

/// The headers every response carries.
fn secured(mut r: Response<Body>) -> Response<Body> {
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

/// `application/x-www-form-urlencoded` (or a query string) into pairs.
pub(crate) fn form_pairs(text: &str) -> Vec<(String, String)> {
    text.split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let hex = |b: u8| (b as char).to_digit(16);
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push((h * 16 + l) as u8);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn field<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
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
    fn host(&self, req: &Request<Incoming>) -> Result<String, Box<Response<Body>>> {
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

    async fn handle(&self, req: Request<Incoming>) -> Response<Body> {
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
        match method {
            Method::GET => match rest.as_str() {
                "/" => html(StatusCode::OK, page::full(self, &csrf, &query).await),
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
                    html(StatusCode::OK, page::live(self, &csrf, &query).await)
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
                match actions::act(self, &rest, &pairs).await {
                    Ok(()) => redirect(&base_of(&prefix)),
                    Err((status, msg)) => html(status, page::message(&msg)),
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
        let mut r = html(status, page::login(&nonce, error));
        set_cookie(&mut r, LOGIN_COOKIE, &nonce, "/login", 600);
        r
    }

    async fn login(&self, req: Request<Incoming>) -> Response<Body> {
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
            tracing::warn!("dashboard: a login with a wrong token");
            // A little friction for guessing.
            tokio::time::sleep(Duration::from_millis(300)).await;
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

async fn read_form(req: Request<Incoming>) -> Result<Vec<(String, String)>, Box<Response<Body>>> {
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
    fn forms_decode_percent_and_plus() {
        let p = form_pairs("a=1+2&b=%3Cscript%3E&c=%zz&d=%4&e");
        assert_eq!(field(&p, "a"), Some("1 2"));
        assert_eq!(field(&p, "b"), Some("<script>"));
        assert_eq!(field(&p, "c"), Some("%zz"));
        assert_eq!(field(&p, "d"), Some("%4"));
        assert_eq!(field(&p, "e"), Some(""));
    }

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
