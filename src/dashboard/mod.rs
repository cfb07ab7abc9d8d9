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
//! 6. Everything shown is escaped (`views::esc`): a command line holding `<script>` is text.
//!
//! No MCP client can reach these endpoints: they live on another listener, and none of the
//! tools reads or answers approvals. Decisions made here are audited as `person-via-dashboard`.

mod actions;
mod door;
mod views;

use door::{field, form_pairs};

use crate::config::{Config, DashboardCfg};
use crate::server::Daemon;
use anyhow::{Context as _, anyhow, bail};
use bytes::Bytes;
use hmac::digest::KeyInit;
use hmac::{Hmac, Mac};
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioIo, TokioTimer};
use sha2::Sha256;
use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
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
            && let Some(seen) = crate::transport::http_setup::readable_by_modules(config, file)
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
            if crate::transport::http_setup::read_token(c).is_ok_and(|t| t == token) {
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
    pub(crate) cache: views::Cache,
}

/// Binds the listener and serves the dashboard on the current runtime until it ends;
/// `doctor` gives the doctor's report, whose warnings the page shows. A port
/// already taken (another daemon of this state dir serves the dashboard) is an error the
/// caller reports as a warning: serving MCP goes on.
pub async fn start(
    daemon: Arc<Daemon>,
    setup: Setup,
    doctor: fn(&Daemon) -> String,
) -> anyhow::Result<SocketAddr> {
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
        cache: views::Cache::default(),
    });
    {
        let door = door.clone();
        tokio::spawn(async move { views::warm(&door, doctor).await });
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
            crate::transport::http::no_nagle(&stream, "dashboard");
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
