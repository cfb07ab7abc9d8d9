//! Runner mode, the daemon's side (SPEC §13): with `[runner]`, `hands serve` keeps one outbound
//! WebSocket to the organization's relay, beside its stdio or HTTP transport, and serves each
//! agent session the relay opens on it as a client of its own (`agent_sessions.rs`). `dial.rs` makes
//! one attempt; this file keeps trying, with jittered exponential backoff from 1 s to 60 s,
//! and writes what happened where `hands doctor` reads it (`runner-status.json` in the state
//! dir). The relay can open and close sessions and carry their messages; nothing it sends
//! changes where the daemon connects, its roots, grants, trust or any policy.

pub mod agent_sessions;
pub mod dial;
pub(crate) mod seen;

use crate::config::{Config, RunnerApprovals, RunnerCfg, TokenSource};
use crate::link::drive::{Outbox, drive};
use crate::link::{CloseReason, LINGER};
use crate::server::Daemon;
use agent_sessions::Sessions;
use dial::{Dialer, Linked, Secret};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime};
use tokio_util::sync::CancellationToken;

/// The first wait before a reconnect, and the longest.
const FIRST_WAIT: Duration = Duration::from_secs(1);
const LONGEST_WAIT: Duration = Duration::from_secs(60);

/// How long a runner shutting down waits for the relay to confirm its sessions' closes.
const FAREWELL: Duration = Duration::from_secs(2);

/// The file in the state dir that says how the runner's link stands, for `hands doctor`.
pub const STATUS_FILE: &str = "runner-status.json";

/// `[runner]` settled before serving: the dialer (URL, name, token, TLS) and who answers.
pub struct Setup {
    dialer: Dialer,
    approvals: RunnerApprovals,
    url: String,
    status: PathBuf,
}

impl Setup {
    /// Reads the token and the CA file (a token file commands or file tools could read is
    /// refused earlier, with the rest of what the host trusts: `config::trusted::refuse`).
    pub fn new(cfg: &RunnerCfg, config: &Config) -> anyhow::Result<Setup> {
        let (env, file) = match &cfg.token {
            TokenSource::Env(v) => (Some(v.as_str()), None),
            TokenSource::File(f) => (None, Some(f.as_path())),
        };
        let token = crate::transport::http_setup::read_secret("[runner]", env, file)?;
        let uri: http::Uri = cfg.url.parse()?;
        let tls = match uri.scheme_str() {
            Some("wss") => {
                let config = dial::tls_config(cfg.ca_file.as_deref())?;
                Some(tokio_rustls::TlsConnector::from(Arc::new(config)))
            }
            _ => None,
        };
        Ok(Setup {
            dialer: Dialer {
                uri,
                name: cfg.name.clone(),
                token: Secret(token),
                tls,
                instance: crate::link::random_id(),
            },
            approvals: cfg.approvals,
            url: cfg.url.clone(),
            status: crate::server::absolute(&config.state_dir).join(STATUS_FILE),
        })
    }

    /// What the banner says.
    pub fn describe(&self) -> String {
        format!("runner `{}` of {} (approvals: {})", self.dialer.name, self.url, self.approvals)
    }
}

/// The link kept up beside the daemon's transport, until [`Link::shut`].
pub struct Link {
    sessions: Arc<Sessions>,
    outbox: Arc<Outbox>,
    /// Whether a connection is up now.
    up: Arc<AtomicBool>,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

/// Keeps the link up; runs on the daemon's runtime beside its transport.
pub fn start(daemon: Arc<Daemon>, setup: Setup) -> Link {
    let outbox = Arc::new(Outbox::default());
    let asks_client = setup.approvals == RunnerApprovals::Client;
    let sessions = Sessions::new(daemon, asks_client, outbox.clone());
    let (up, stop) = (Arc::new(AtomicBool::new(false)), CancellationToken::new());
    let task = tokio::spawn(run(setup, sessions.clone(), outbox.clone(), up.clone(), stop.clone()));
    Link { sessions, outbox, up, stop, task }
}

impl Link {
    /// The daemon is shutting down: every session is closed, the relay told why (so that a
    /// waiting agent reads "shutting down" at once, not a call lost a minute later), and the
    /// link closed once the relay confirmed it, or after [`FAREWELL`].
    pub async fn shut(self) {
        let why = "the runner is shutting down";
        self.sessions.close_all(CloseReason::ShuttingDown, why);
        if self.up.load(Ordering::SeqCst) {
            let confirmed = async {
                while !self.outbox.is_empty() {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            };
            let _ = tokio::time::timeout(FAREWELL, confirmed).await;
        }
        self.stop.cancel();
        let _ = tokio::time::timeout(FAREWELL, self.task).await;
    }
}

async fn run(
    setup: Setup,
    sessions: Arc<Sessions>,
    outbox: Arc<Outbox>,
    up: Arc<AtomicBool>,
    stop: CancellationToken,
) {
    // Bumped on every connection; a linger timer that finds it unchanged ends the sessions.
    let generation = Arc::new(AtomicU64::new(0));
    let mut relay: Option<String> = None;
    let mut attempt: u32 = 0;
    loop {
        let linked = tokio::select! {
            r = setup.dialer.dial() => r,
            () = stop.cancelled() => return,
        };
        match linked {
            Ok(link) => {
                attempt = 0;
                let instance = match &link {
                    Linked::Plain(_, i) | Linked::Tls(_, i) => i.clone(),
                };
                generation.fetch_add(1, Ordering::SeqCst);
                if relay.as_ref().is_some_and(|r| *r != instance) {
                    // Another relay process: the old one's agents and calls are gone with it.
                    sessions.end_all("the relay restarted");
                    outbox.clear();
                }
                relay = Some(instance);
                tracing::info!("runner: connected to {} as `{}`", setup.url, setup.dialer.name);
                write_status(&setup, "connected", None);
                let on_text = |t: &str| sessions.on_frame(t);
                up.store(true, Ordering::SeqCst);
                let ended = match link {
                    Linked::Plain(ws, _) => drive(ws, &outbox, on_text, &stop).await,
                    Linked::Tls(ws, _) => drive(ws, &outbox, on_text, &stop).await,
                };
                up.store(false, Ordering::SeqCst);
                if stop.is_cancelled() {
                    return;
                }
                tracing::warn!("runner: the link to {} {ended}; reconnecting", setup.url);
                write_status(&setup, "reconnecting", Some(&format!("the link {ended}")));
                linger(&sessions, &generation);
            }
            Err(e) => {
                let wait = backoff(attempt);
                tracing::warn!(
                    "runner: cannot reach the relay at {}: {e}; retrying in {:.1} s",
                    setup.url,
                    wait.as_secs_f64()
                );
                write_status(&setup, "retrying", Some(&e.to_string()));
                attempt = attempt.saturating_add(1);
                tokio::select! {
                    () = tokio::time::sleep(wait) => {}
                    () = stop.cancelled() => return,
                }
                continue;
            }
        }
        // After a link that ended, the first retry waits too (a relay that closes at once is
        // not hammered).
        let wait = backoff(attempt);
        attempt = attempt.saturating_add(1);
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = stop.cancelled() => return,
        }
    }
}

/// Sessions outlive a dropped link for [`LINGER`]: a result meanwhile waits in the outbox;
/// if no connection came by then, they end.
fn linger(sessions: &Arc<Sessions>, generation: &Arc<AtomicU64>) {
    let seen = generation.load(Ordering::SeqCst);
    let (sessions, generation) = (sessions.clone(), generation.clone());
    tokio::spawn(async move {
        tokio::time::sleep(LINGER).await;
        if generation.load(Ordering::SeqCst) == seen && !sessions.is_empty() {
            sessions.end_all(&format!("the link was down for {} s", LINGER.as_secs()));
        }
    });
}

/// The wait before attempt `n` (0-based): 1 s doubling up to 60 s, each drawn uniformly from
/// its upper half so that runners a relay restart dropped together do not return together.
pub fn backoff(attempt: u32) -> Duration {
    let ceiling = FIRST_WAIT.saturating_mul(1 << attempt.min(6)).min(LONGEST_WAIT);
    let half = ceiling / 2;
    let jitter =
        u64::from_le_bytes(crate::link::random_id().as_bytes()[..8].try_into().unwrap_or_default());
    let extra = half.as_millis() as u64;
    half + Duration::from_millis(if extra == 0 { 0 } else { jitter % (extra + 1) })
}

/// How the link stands, for `hands doctor` (never the token: it is in no field).
fn write_status(setup: &Setup, state: &str, why: Option<&str>) {
    let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let body = serde_json::json!({
        "url": setup.url,
        "name": setup.dialer.name,
        "state": state,
        "since": now,
        "why": why,
    });
    let tmp = setup.status.with_extension("json.tmp");
    #[expect(clippy::disallowed_methods, reason = "the state dir is the daemon's own")]
    let written =
        std::fs::write(&tmp, body.to_string()).and_then(|()| std::fs::rename(&tmp, &setup.status));
    if let Err(e) = written {
        tracing::debug!("runner: cannot write {}: {e}", setup.status.display());
    }
}

/// What `hands doctor` says about the runner's link: the last state a running daemon wrote.
#[expect(clippy::disallowed_methods, reason = "the state dir is the daemon's own")]
pub fn last_status(config: &Config) -> Option<String> {
    let file = crate::server::absolute(&config.state_dir).join(STATUS_FILE);
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(file).ok()?).ok()?;
    let state = v.get("state")?.as_str()?;
    let since = v.get("since").and_then(|s| s.as_u64()).unwrap_or(0);
    let ago = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
        .saturating_sub(since);
    Some(match v.get("why").and_then(|w| w.as_str()) {
        Some(why) => format!("{state} ({ago} s ago): {why}"),
        None => format!("{state} ({ago} s ago)"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_from_one_second_to_a_minute_with_jitter() {
        for _ in 0..50 {
            let first = backoff(0);
            assert!(first >= Duration::from_millis(500) && first <= FIRST_WAIT, "{first:?}");
            let later = backoff(20);
            assert!(later >= Duration::from_secs(30) && later <= LONGEST_WAIT, "{later:?}");
        }
        assert!(backoff(3) <= Duration::from_secs(8));
    }
}
