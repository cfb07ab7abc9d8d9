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
//! 7. Connections are held to `transport/conns.rs`: at most 64, heads and bodies read within
//!    bounds; a request of a live session vouches for its connection, so a flood from anyone who
//!    can merely connect to the port cannot keep a logged-in person out.
//!
//! No MCP client can reach these endpoints: they live on another listener, and none of the
//! tools reads or answers approvals. Decisions made here are audited as `person-via-dashboard`.

mod actions;
mod door;
mod form;
mod views;

use door::{Door, secured, tag_of};

use crate::config::{Config, DashboardCfg};
use crate::server::Daemon;
use crate::transport::conns;
use anyhow::{Context as _, anyhow, bail};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

/// The default listen address (SPEC §12).
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8766";
/// Tokens shorter than this are refused at startup.
const MIN_TOKEN_LEN: usize = 16;
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
    /// token that is also an MCP client's (the person's login must be separate from every
    /// client's). A token file commands could read is refused earlier, with what the host
    /// trusts (`config::trusted::refuse`).
    pub fn new(config: &Config) -> anyhow::Result<Option<Setup>> {
        let Some(cfg) = config.dashboard.as_ref() else { return Ok(None) };
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
            let v = crate::config::trusted::one_name::read_one_name(file, "token_file")
                .with_context(|| {
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

/// Binds the listener and serves the dashboard on the current runtime until it ends;
/// `doctor` gives the doctor's report, whose warnings the page shows. A port
/// already taken (another daemon of this state dir serves the dashboard) is an error the
/// caller reports as a warning: serving MCP goes on.
pub async fn start(
    daemon: Arc<Daemon>,
    setup: Setup,
    doctor: fn(&Daemon) -> String,
) -> anyhow::Result<SocketAddr> {
    let listener = conns::bind(setup.addr).with_context(|| {
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
        wrong_logins: tokio::sync::Mutex::new(()),
    });
    {
        let door = door.clone();
        tokio::spawn(async move { views::warm(door.daemon.clone(), &door.cache, doctor).await });
    }
    // Never stopped: the dashboard lives as long as the daemon's runtime.
    let serving = conns::serve(listener, conns::DASHBOARD, CancellationToken::new(), move |req| {
        let door = door.clone();
        async move { secured(door.handle(req).await) }
    });
    tokio::spawn(serving);
    Ok(bound)
}
