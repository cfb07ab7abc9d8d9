//! `hands check` and `hands doctor`: the resolved policy, and (doctor) tool versions and
//! warnings; exit 1 when it is not safe to serve.

use super::{doctor, printout};
use crate::{config, server};
use std::path::PathBuf;
use std::process::ExitCode;

pub(super) fn check(config: Option<PathBuf>, doctor: bool) -> ExitCode {
    let cfg = match config::load(config.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            printout::out(&e.to_string());
            return ExitCode::from(1);
        }
    };
    let daemon = match server::Daemon::new(cfg) {
        Ok(d) => d,
        Err(e) => {
            printout::out(&format!("hands: {e:#}"));
            return ExitCode::from(1);
        }
    };
    printout::out(&printout::policy(&daemon));
    if !doctor {
        // What the file alone shows; `doctor` reports the same among its warnings.
        let found = printout::check_findings(&daemon);
        for w in &found.warnings {
            printout::out(&format!("warning: {w}"));
        }
        if found.serve_refuses {
            return ExitCode::from(1);
        }
    }
    if doctor {
        // Exit 1 when it is not safe to serve: `serve` would refuse to start, or in enforce
        // mode a missing guarantee would refuse every command. (`check` validates the file
        // alone: the tokens it names are read at startup, from wherever `serve` runs.)
        let found = doctor::doctor_report(&daemon);
        printout::out(&found.text);
        if let Some(o) = daemon.config.http.as_ref().and_then(|h| h.oauth.as_ref()) {
            printout::out(&oauth_probe(o, "[server.http.oauth]"));
        }
        let enforce = daemon.config.sandbox_mode == config::SandboxMode::Enforce;
        if found.serve_refuses
            || (enforce && daemon.self_test().is_some_and(|p| !p.missing().is_empty()))
        {
            return ExitCode::from(1);
        }
    }
    ExitCode::SUCCESS
}

/// Whether the OAuth issuer's metadata and keys can be fetched from this machine now: one line,
/// `oauth: …` or `warning: …`.
pub fn oauth_probe(o: &crate::config::OAuthCfg, table: &str) -> String {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build();
    match rt {
        Ok(rt) => rt.block_on(oauth_probe_async(o, table)),
        Err(e) => {
            format!("warning: {table}: cannot start the async runtime to ask the issuer: {e}")
        }
    }
}

/// `oauth_probe` on a running runtime (the relay asks at start, beside serving).
pub async fn oauth_probe_async(o: &crate::config::OAuthCfg, table: &str) -> String {
    match crate::transport::oauth::ResourceServer::new(o, table) {
        Ok(rs) => match rs.probe().await {
            Ok(line) => format!("oauth: {line}"),
            Err(why) => format!("warning: {table}: {why}"),
        },
        Err(e) => format!("warning: {table}: {e:#}"),
    }
}
