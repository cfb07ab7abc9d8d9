//! `[runner]` of `daemon.toml` (SPEC §13): where this daemon connects out to an organization's
//! relay, under which name, with which credential and trust roots, and who answers the gate's
//! questions of the relay's agents. Validated here; `src/runner` dials with the result.

use super::{Problems, expand_tilde};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use toml::Spanned;

/// The largest frame either end of a runner's link reads (and so the largest message): a
/// `write` of the biggest file the HTTP door takes, with room for its JSON escaping. Here, below
/// the link (`crate::link::MAX_FRAME`), so that what fills an answer (`bash`'s `outputs`) can
/// be fitted under it.
pub const LINK_FRAME: usize = 16 * 1024 * 1024;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRunner {
    url: Spanned<String>,
    name: Spanned<String>,
    token_file: Option<String>,
    token_env: Option<String>,
    ca_file: Option<String>,
    #[serde(default)]
    approvals: RunnerApprovals,
}

/// Who answers the gate's questions of the relay's agents.
#[derive(Debug, Deserialize, Clone, Copy, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum RunnerApprovals {
    /// Every question is parked for the person at this machine (dashboard, `hands approvals`):
    /// an answer that came through the relay could have been written by the relay.
    #[default]
    Local,
    /// What the agent's client declared chooses the channel, as for any client (SPEC §6): the
    /// machine's owner trusts the relay to carry a person's answer.
    Client,
}

impl std::fmt::Display for RunnerApprovals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RunnerApprovals::Local => "local",
            RunnerApprovals::Client => "client",
        })
    }
}

/// Where the runner's credential is read from at startup (never stored in the config).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenSource {
    Env(String),
    File(PathBuf),
}

impl std::fmt::Display for TokenSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TokenSource::Env(v) => write!(f, "${v}"),
            TokenSource::File(p) => write!(f, "{}", p.display()),
        }
    }
}

/// `[runner]`, validated.
#[derive(Debug, Clone)]
pub struct RunnerCfg {
    /// `wss://…` (or `ws://` to a loopback address), as written.
    pub url: String,
    pub name: String,
    pub token: TokenSource,
    pub ca_file: Option<PathBuf>,
    pub approvals: RunnerApprovals,
}

/// A runner's or an agent's name at the relay: 1-64 of `A-Z a-z 0-9 . _ @ -` (SPEC §13).
pub fn is_link_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._@-".contains(&b))
}

/// Why a runner's `url` may not be dialled ([`check_url`]); the config problem quotes the URL
/// before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    #[error("not a URL")]
    NotAUrl,
    #[error("the URL has no host")]
    NoHost,
    /// `user:password@` in the URL: a secret in the config, and sent where it should not be.
    #[error("the URL carries user info; the token goes in token_file or token_env")]
    UserInfo,
    /// `ws://` to a host that is not a loopback address: the token would cross in plain text.
    #[error("ws:// (no TLS) is allowed to a loopback address only")]
    PlainText,
    #[error("the scheme must be wss:// (or ws:// to a loopback address)")]
    Scheme,
}

/// Whether `url` may be dialled: `wss://HOST[:PORT]/…`, or `ws://` to a loopback address only
/// (plain text leaves this machine never); no user info, no fragment. `Err` says why not.
pub fn check_url(url: &str) -> Result<(), UrlError> {
    let uri: http::Uri = url.parse().map_err(|_| UrlError::NotAUrl)?;
    let host = uri.host().ok_or(UrlError::NoHost)?;
    if uri.authority().is_some_and(|a| a.as_str().contains('@')) {
        return Err(UrlError::UserInfo);
    }
    match uri.scheme_str() {
        Some("wss") => Ok(()),
        Some("ws") => {
            let bare = host.trim_start_matches('[').trim_end_matches(']');
            if bare.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback()) {
                Ok(())
            } else {
                Err(UrlError::PlainText)
            }
        }
        _ => Err(UrlError::Scheme),
    }
}

pub(super) fn validate(
    raw: &Spanned<RawRunner>,
    home: Option<&Path>,
    p: &mut Problems<'_>,
) -> RunnerCfg {
    let span = raw.span();
    let r = raw.get_ref();
    if let Err(why) = check_url(r.url.get_ref()) {
        p.add(
            Some(r.url.span()),
            "[runner]",
            "url",
            format!("`{}`: {why}", hands_roots::shown(r.url.get_ref())),
            Some("for example url = \"wss://relay.example.com/runner\""),
        );
    }
    if !is_link_name(r.name.get_ref()) {
        p.add(
            Some(r.name.span()),
            "[runner]",
            "name",
            format!(
                "`{}` is not 1-64 letters, digits, `.`, `_`, `-`, `@`",
                hands_roots::shown(r.name.get_ref())
            ),
            Some("the name this runner has in the relay's [[relay.runners]]"),
        );
    }
    let token = match (&r.token_env, &r.token_file) {
        (Some(v), None) => TokenSource::Env(v.clone()),
        (None, Some(f)) => TokenSource::File(expand_tilde(f, home)),
        _ => {
            p.add(
                Some(span),
                "[runner]",
                "token_file",
                "needs exactly one of token_file and token_env",
                Some("token_file = \"~/.config/hands/runner.token\" (chmod 600)"),
            );
            TokenSource::Env(String::new())
        }
    };
    RunnerCfg {
        url: r.url.get_ref().clone(),
        name: r.name.get_ref().clone(),
        token,
        ca_file: r.ca_file.as_deref().map(|f| expand_tilde(f, home)),
        approvals: r.approvals,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_tls_or_loopback_urls_are_dialled() {
        assert!(check_url("wss://relay.example.com/runner").is_ok());
        assert!(check_url("ws://127.0.0.1:9/runner").is_ok());
        assert!(check_url("ws://[::1]:9/runner").is_ok());
        assert_eq!(check_url("ws://relay.example.com/runner"), Err(UrlError::PlainText));
        assert_eq!(check_url("ws://localhost.example.com/runner"), Err(UrlError::PlainText));
        assert_eq!(check_url("https://relay.example.com/runner"), Err(UrlError::Scheme));
        assert_eq!(check_url("wss://user:pw@relay.example.com/runner"), Err(UrlError::UserInfo));
    }

    #[test]
    fn link_names_are_short_and_plain() {
        assert!(is_link_name("alice@example.com") && is_link_name("build-box_1.a"));
        for bad in ["", "a:b", "a b", "runner/x", &"x".repeat(65), "é"] {
            assert!(!is_link_name(bad), "{bad}");
        }
    }
}
