//! `hands relay --config relay.toml`: the organization's side of runner mode (SPEC §13). Reads
//! and checks the file, the agents' tokens and the TLS identity before it listens; then serves
//! until SIGINT or SIGTERM (`src/relay`).

use super::printout::eprint_line;
use std::path::Path;
use std::process::ExitCode;

pub(super) fn relay(config: &Path) -> ExitCode {
    let cfg = match crate::relay::config::load(config) {
        Ok(c) => c,
        Err(e) => {
            eprint_line(&e.to_string());
            return ExitCode::from(1);
        }
    };
    if cfg.tls.is_none() && !cfg.listen.ip().is_loopback() {
        eprint_line(&format!(
            "hands relay: warning: {} is plain HTTP on a non-loopback address; tokens cross the \
             network in the clear unless the organization's TLS proxy is the only way in",
            cfg.listen
        ));
    }
    if let Some(o) = &cfg.oauth {
        eprint_line(&format!("hands relay: oauth: {}", o.describe()));
        if let Some(w) = super::printout::oauth_warning(o, &cfg.listen.to_string(), "[relay.oauth]")
        {
            eprint_line(&format!("hands relay: warning: {w}"));
        }
    }
    let scheme = if cfg.tls.is_some() { "https" } else { "http" };
    let summary = format!(
        "{} runners, {} agents, public_url {}",
        cfg.runners.len(),
        cfg.agents.len(),
        cfg.public_url
    );
    let oauth = cfg.oauth.clone();
    let setup = match crate::relay::Setup::new(cfg) {
        Ok(s) => s,
        Err(e) => {
            eprint_line(&format!("hands relay: {e:#}"));
            return ExitCode::from(1);
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprint_line(&format!("hands relay: cannot start the async runtime: {e}"));
            return ExitCode::from(1);
        }
    };
    // Whether the issuer answers, asked beside serving as `hands doctor` asks for serve --http:
    // a relay whose issuer cannot be reached says so at once, not at an agent's first 503.
    if let Some(o) = oauth {
        rt.spawn(async move {
            let line = super::check::oauth_probe_async(&o, "[relay.oauth]").await;
            eprint_line(&format!("hands relay: {line}"));
        });
    }
    let bound = |addr| {
        eprint_line(&format!(
            "hands relay {}: listening on {scheme}://{addr} ({summary})",
            env!("CARGO_PKG_VERSION")
        ))
    };
    match rt.block_on(crate::relay::serve(setup, bound)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprint_line(&format!("hands relay: {e:#}"));
            ExitCode::from(1)
        }
    }
}
