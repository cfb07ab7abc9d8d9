//! `relay.toml` (SPEC §13): where the relay listens and how it is reached, the runners that may
//! connect (each by the sha256 of its token) and the agents that may call them (each by its
//! bearer token, and the runner names its `runners` patterns match). Parsed strictly, then
//! validated; problems are placed at the file's line like `daemon.toml`'s.

use crate::config::{ConfigError, ConfigProblem, Problems, expand_tilde, home_dir, is_link_name};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use toml::Spanned;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    relay: RawRelay,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRelay {
    listen: Spanned<String>,
    public_url: Spanned<String>,
    cert_file: Option<Spanned<String>>,
    key_file: Option<Spanned<String>>,
    #[serde(default)]
    runners: Vec<Spanned<RawRunner>>,
    #[serde(default)]
    agents: Vec<Spanned<RawAgent>>,
    oauth: Option<Spanned<crate::config::oauth::RawOAuth>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRunner {
    name: Spanned<String>,
    token_sha256: Spanned<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAgent {
    name: Spanned<String>,
    token_env: Option<String>,
    token_file: Option<String>,
    oauth_subject: Option<Spanned<String>>,
    runners: Vec<Spanned<String>>,
}

/// `relay.toml`, validated.
#[derive(Debug, Clone)]
pub struct RelayCfg {
    pub source: String,
    pub listen: std::net::SocketAddr,
    pub public_url: String,
    /// The host of `public_url`: with loopback, the only `Host`/`Origin` served.
    pub public_host: String,
    /// TLS: (certificate chain, key), PEM; `None` behind the organization's TLS proxy.
    pub tls: Option<(PathBuf, PathBuf)>,
    pub runners: Vec<RunnerEntry>,
    pub agents: Vec<AgentEntry>,
    /// `[relay.oauth]`: agents known by an OAuth access token's identity claim (SPEC §14).
    pub oauth: Option<crate::config::OAuthCfg>,
}

#[derive(Debug, Clone)]
pub struct RunnerEntry {
    pub name: String,
    /// The SHA-256 of its token.
    pub token_sha256: [u8; 32],
}

#[derive(Debug, Clone)]
pub struct AgentEntry {
    pub name: String,
    pub token_env: Option<String>,
    pub token_file: Option<PathBuf>,
    /// With `[relay.oauth]`: the identity claim's value that makes a token this agent's.
    pub oauth_subject: Option<String>,
    /// The runner names it may reach.
    pub runners: globset::GlobSet,
    pub patterns: Vec<String>,
}

/// Reads and validates `file`.
#[expect(clippy::disallowed_methods, reason = "the relay's config file, named on its command line")]
pub fn load(file: &Path) -> Result<RelayCfg, ConfigError> {
    let shown = file.display().to_string();
    let src = std::fs::read_to_string(file).map_err(|e| ConfigError {
        file: shown.clone(),
        problems: vec![ConfigProblem {
            line: None,
            section: String::new(),
            key: String::new(),
            message: format!("cannot read the file: {e}"),
            hint: Some("pass an existing file with --config".into()),
        }],
    })?;
    parse(&src, &shown)
}

/// Parses and validates a `relay.toml` text; `file` names it in errors.
pub fn parse(src: &str, file: &str) -> Result<RelayCfg, ConfigError> {
    let raw: RawFile = toml::from_str(src).map_err(|e| {
        let line = e.span().map(|s| src[..s.start.min(src.len())].matches('\n').count() + 1);
        let msg = e.message().to_string();
        let hint = msg
            .contains("unknown field")
            .then(|| "relay.toml.example lists every key this version accepts".to_string());
        ConfigError {
            file: file.to_string(),
            problems: vec![ConfigProblem {
                line,
                section: String::new(),
                key: String::new(),
                message: msg,
                hint,
            }],
        }
    })?;
    let mut p = Problems::new(src);
    let cfg = validate(raw.relay, &mut p);
    p.finish(file)?;
    Ok(RelayCfg { source: file.to_string(), ..cfg })
}

fn validate(r: RawRelay, p: &mut Problems<'_>) -> RelayCfg {
    let home = home_dir();
    let listen = r.listen.get_ref().parse().unwrap_or_else(|_| {
        p.add(
            Some(r.listen.span()),
            "[relay]",
            "listen",
            format!("`{}` is not an address:port", hands_roots::shown(r.listen.get_ref())),
            Some("for example 127.0.0.1:8443"),
        );
        std::net::SocketAddr::from(([127, 0, 0, 1], 0))
    });
    let public_host = public_host(r.public_url.get_ref()).unwrap_or_else(|| {
        p.add(
            Some(r.public_url.span()),
            "[relay]",
            "public_url",
            format!("`{}` is not an http(s) URL", hands_roots::shown(r.public_url.get_ref())),
            Some("the address agents and runners use, e.g. \"https://relay.example.com\""),
        );
        String::new()
    });
    let path = |s: &Spanned<String>| expand_tilde(s.get_ref(), home.as_deref());
    let tls = match (&r.cert_file, &r.key_file) {
        (Some(c), Some(k)) => Some((path(c), path(k))),
        (None, None) => None,
        (Some(s), None) | (None, Some(s)) => {
            p.add(
                Some(s.span()),
                "[relay]",
                "cert_file",
                "cert_file and key_file go together",
                Some("both PEM files for TLS here, or neither behind a TLS proxy"),
            );
            None
        }
    };
    let mut runners: Vec<RunnerEntry> = Vec::new();
    for s in &r.runners {
        let e = s.get_ref();
        let (name, name_at) = (e.name.get_ref(), Some(e.name.span()));
        if !is_link_name(name) {
            let m = format!(
                "`{}` is not 1-64 letters, digits, `.`, `_`, `-`, `@`",
                hands_roots::shown(name)
            );
            p.add(name_at, "[[relay.runners]]", "name", m, None);
        } else if runners.iter().any(|o| o.name == *name) {
            let m = format!("runner `{name}` appears twice");
            p.add(name_at, "[[relay.runners]]", "name", m, None);
        } else if let Some(o) = runners.iter().find(|o| o.name.eq_ignore_ascii_case(name)) {
            // Patterns match case-sensitively, and `GET /runners` would list two names a
            // person reads as one.
            let m = format!("runner `{name}` differs from runner `{}` only in case", o.name);
            let hint = "give each machine a name that differs in more than case";
            p.add(name_at, "[[relay.runners]]", "name", m, Some(hint));
        }
        let hex = e.token_sha256.get_ref();
        let digest = hex::decode(hex).ok().and_then(|d| <[u8; 32]>::try_from(d).ok());
        let lower = hex.bytes().all(|b| !b.is_ascii_uppercase());
        let token_sha256 = match digest {
            Some(d) if lower => d,
            _ => {
                p.add(
                    Some(e.token_sha256.span()),
                    "[[relay.runners]]",
                    "token_sha256",
                    format!("runner `{}`: not 64 lowercase hex digits", hands_roots::shown(name)),
                    Some("`printf %s \"$TOKEN\" | sha256sum` prints it; the token stays with the runner"),
                );
                [0; 32]
            }
        };
        if let Some(o) = runners.iter().find(|o| digest.is_some() && o.token_sha256 == token_sha256)
        {
            // The holder of one runner's token could connect as the other and answer its agents.
            let m = format!(
                "runner `{}` has the same token_sha256 as runner `{}`",
                hands_roots::shown(name),
                o.name
            );
            let hint = "give each runner its own token (in its daemon.toml's [runner] token_file \
                        or token_env) and put its `printf %s \"$TOKEN\" | sha256sum` here";
            p.add(Some(e.token_sha256.span()), "[[relay.runners]]", "token_sha256", m, Some(hint));
        }
        runners.push(RunnerEntry { name: name.clone(), token_sha256 });
    }
    let mut agents: Vec<AgentEntry> = Vec::new();
    for s in &r.agents {
        let e = s.get_ref();
        let (name, name_at) = (e.name.get_ref(), Some(e.name.span()));
        if !is_link_name(name) {
            let m = format!(
                "`{}` is not 1-64 letters, digits, `.`, `_`, `-`, `@`",
                hands_roots::shown(name)
            );
            p.add(name_at.clone(), "[[relay.agents]]", "name", m, None);
        } else if agents.iter().any(|o| o.name == *name) {
            let m = format!("agent `{name}` appears twice");
            p.add(name_at.clone(), "[[relay.agents]]", "name", m, None);
        }
        let ways = [e.token_env.is_some(), e.token_file.is_some(), e.oauth_subject.is_some()];
        if ways.iter().filter(|w| **w).count() != 1 {
            p.add(
                Some(s.span()),
                "[[relay.agents]]",
                "token_env",
                format!(
                    "agent `{}` needs exactly one of token_env, token_file and oauth_subject",
                    hands_roots::shown(name)
                ),
                Some("token_env = \"RELAY_TOKEN_ALICE\" reads the token from that variable"),
            );
        }
        if let Some(sub) = &e.oauth_subject {
            let v = sub.get_ref();
            let (section, key) = ("[[relay.agents]]", "oauth_subject");
            if r.oauth.is_none() {
                let m = format!(
                    "agent `{}` names an oauth_subject without [relay.oauth]",
                    hands_roots::shown(name)
                );
                p.add(
                    Some(sub.span()),
                    section,
                    key,
                    m,
                    Some("add [relay.oauth] (issuer, audience, scopes, identity_claim)"),
                );
            } else if v.is_empty() || v.chars().any(|c| c.is_control() || c.is_whitespace()) {
                p.add(
                    Some(sub.span()),
                    section,
                    key,
                    "not a claim value (empty, spaces or control characters)",
                    None,
                );
            } else if agents.iter().any(|o| o.oauth_subject.as_deref() == Some(v.as_str())) {
                let m = format!("oauth_subject `{}` names two agents", hands_roots::shown(v));
                p.add(Some(sub.span()), section, key, m, None);
            }
        }
        let mut set = globset::GlobSetBuilder::new();
        for pat in &e.runners {
            match globset::Glob::new(pat.get_ref()) {
                Ok(g) => {
                    set.add(g);
                }
                Err(err) => {
                    p.add(Some(pat.span()), "[[relay.agents]]", "runners", err.to_string(), None)
                }
            }
        }
        agents.push(AgentEntry {
            name: name.clone(),
            token_env: e.token_env.clone(),
            token_file: e.token_file.as_deref().map(|f| expand_tilde(f, home.as_deref())),
            oauth_subject: e.oauth_subject.as_ref().map(|s| s.get_ref().clone()),
            runners: set.build().unwrap_or_else(|_| globset::GlobSet::empty()),
            patterns: e.runners.iter().map(|s| s.get_ref().clone()).collect(),
        });
    }
    RelayCfg {
        source: String::new(),
        listen,
        public_url: r.public_url.get_ref().clone(),
        public_host,
        tls,
        runners,
        agents,
        oauth: (r.oauth.as_ref())
            .map(|o| crate::config::oauth::validate(o, "[relay.oauth]", home.as_deref(), p)),
    }
}

/// The lowercase host of an `http(s)://HOST[:PORT]` URL.
fn public_host(url: &str) -> Option<String> {
    let uri: http::Uri = url.parse().ok()?;
    matches!(uri.scheme_str(), Some("http" | "https")).then_some(())?;
    let host = uri.host()?;
    Some(host.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[relay]
listen = "127.0.0.1:8443"
public_url = "https://relay.example.com"
[[relay.runners]]
name = "build-box-1"
token_sha256 = "5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8"
[[relay.agents]]
name = "alice"
token_env = "RELAY_TOKEN_ALICE"
runners = ["build-box-*"]
"#;

    #[test]
    fn the_example_file_parses() {
        let c = parse(include_str!("../../relay.toml.example"), "relay.toml.example").unwrap();
        assert_eq!((c.runners.len(), c.agents.len()), (2, 2));
        assert_eq!(c.agents[1].oauth_subject.as_deref(), Some("ci-pipeline-client"));
        assert_eq!(c.oauth.as_ref().map(|o| o.identity_claim.as_str()), Some("sub"));
        assert!(c.tls.is_some() && c.agents[0].runners.is_match("build-box-2"));
    }

    #[test]
    fn a_good_file_parses_and_each_problem_is_placed() {
        let c = parse(GOOD, "relay.toml").unwrap();
        assert_eq!(c.public_host, "relay.example.com");
        assert!(c.agents[0].runners.is_match("build-box-7"));
        assert!(!c.agents[0].runners.is_match("prod-1"));
        let bad = GOOD.replace("5e88", "5E88").replace("\"alice\"", "\"al ice\"");
        let e = parse(&bad, "relay.toml").unwrap_err().to_string();
        assert!(e.contains("relay.toml:7: [[relay.runners]]: token_sha256"), "{e}");
        assert!(e.contains("relay.toml:9: [[relay.agents]]: name"), "{e}");
        let e = parse(&GOOD.replace("listen", "lissen"), "relay.toml").unwrap_err().to_string();
        assert!(e.contains("relay.toml:3") && e.contains("unknown field"), "{e}");
    }
}
