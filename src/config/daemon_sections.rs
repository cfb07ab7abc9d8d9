//! The daemon's own sections of `daemon.toml` — `[daemon]`, `[server]`, `[trust]`,
//! `[sandbox]` — in their raw serde shape, and their validation.

use super::modules::RawBuiltin;
use super::{
    Config, DashboardCfg, HttpCfg, HttpClientCfg, Problems, RawTrust, SandboxMode, Trust,
    default_state_dir, expand_tilde, home_dir,
};
use serde::Deserialize;
use std::path::PathBuf;
use toml::Spanned;

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConfig {
    #[serde(default)]
    daemon: RawDaemon,
    #[serde(default)]
    server: RawServer,
    #[serde(default)]
    trust: RawTrust,
    #[serde(default)]
    sandbox: RawSandbox,
    #[serde(default)]
    builtins: Vec<Spanned<RawBuiltin>>,
    runner: Option<Spanned<super::runner::RawRunner>>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawDaemon {
    state_dir: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawServer {
    http: Option<Spanned<RawHttp>>,
    dashboard: Option<Spanned<RawDashboard>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHttp {
    listen: Spanned<String>,
    #[serde(default)]
    allowed_hosts: Vec<String>,
    #[serde(default)]
    clients: Vec<Spanned<RawHttpClient>>,
    oauth: Option<Spanned<super::oauth::RawOAuth>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHttpClient {
    name: String,
    token_env: Option<String>,
    token_file: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDashboard {
    #[serde(default = "default_dashboard_listen")]
    listen: String,
    token_env: Option<String>,
    token_file: Option<String>,
}

fn default_dashboard_listen() -> String {
    "127.0.0.1:8766".to_string()
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawSandbox {
    mode: Option<SandboxMode>,
    #[serde(default)]
    deny: Vec<Spanned<String>>,
    secret_patterns: Option<Vec<Spanned<String>>>,
    #[serde(default)]
    protected_extra: Vec<Spanned<String>>,
    /// The user a daemon run as root runs commands as (a name or a uid).
    run_as: Option<String>,
}

/// Validates the daemon's own sections, then the `[[builtins]]` blocks (`modules.rs`).
pub(super) fn validate(raw: RawConfig, p: &mut Problems<'_>) -> Option<Config> {
    let home = home_dir();
    let state_dir = match &raw.daemon.state_dir {
        Some(s) if s.get_ref().trim().is_empty() => {
            p.add(Some(s.span()), "[daemon]", "state_dir", "must not be empty", None);
            PathBuf::new()
        }
        Some(s) => expand_tilde(s.get_ref(), home.as_deref()),
        None => default_state_dir(home.as_deref()),
    };
    let trust = Trust::default().overlay(&raw.trust);
    if trust.approval_timeout_secs == 0 || trust.approval_timeout_secs > 3600 {
        p.add(
            None,
            "[trust]",
            "approval_timeout_secs",
            format!("{} is out of range", trust.approval_timeout_secs),
            Some("use 1 to 3600 seconds"),
        );
    }

    let deny: Vec<PathBuf> =
        raw.sandbox.deny.iter().map(|d| expand_tilde(d.get_ref(), home.as_deref())).collect();
    for d in &raw.sandbox.deny {
        if !expand_tilde(d.get_ref(), home.as_deref()).is_absolute() {
            p.add(
                Some(d.span()),
                "[sandbox]",
                "deny",
                format!("`{}` is not an absolute path", d.get_ref()),
                Some("write it as /abs/path or ~/path"),
            );
        }
    }
    let secret_patterns: Vec<String> = match &raw.sandbox.secret_patterns {
        Some(v) => {
            for s in v {
                if let Err(e) = globset::Glob::new(s.get_ref()) {
                    p.add(Some(s.span()), "[sandbox]", "secret_patterns", e.to_string(), None);
                }
            }
            v.iter().map(|s| s.get_ref().clone()).collect()
        }
        None => hands_sandbox::profiles::secret_patterns().map(str::to_string).collect(),
    };

    // Protected rules match relative paths at any depth in every root, component by component.
    for e in &raw.sandbox.protected_extra {
        let rule = e.get_ref().strip_suffix('/').unwrap_or(e.get_ref());
        let bad = rule.is_empty()
            || rule.starts_with('/')
            || rule.starts_with('~')
            || rule.split('/').any(|c| c.is_empty() || c == "." || c == "..")
            || rule.contains('\0');
        if bad {
            p.add(
                Some(e.span()),
                "[sandbox]",
                "protected_extra",
                format!("`{}` is not a relative path of whole components", e.get_ref()),
                Some(
                    "write it as it appears inside a root, e.g. \".tool/settings.json\", or \
                     \".tool/\" for a folder",
                ),
            );
        }
    }
    let protected_extra: Vec<String> =
        raw.sandbox.protected_extra.iter().map(|e| e.get_ref().clone()).collect();

    let http = raw.server.http.as_ref().map(|h| {
        let span = h.span();
        let h = h.get_ref();
        let mut names_seen: Vec<&str> = Vec::new();
        let clients = h
            .clients
            .iter()
            .map(|c| {
                let cs = c.span();
                let c = c.get_ref();
                // The name is the client's identity in approvals and the audit log: it must be
                // unique, and not one of the built-in identities (`stdio`, and `http` for
                // token-less loopback clients).
                let name_ok = !c.name.is_empty()
                    && c.name.len() <= 64
                    && c.name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-@".contains(&b));
                if !name_ok {
                    p.add(
                        Some(cs.clone()),
                        "[[server.http.clients]]",
                        "name",
                        format!(
                            "client name `{}` is not 1-64 letters, digits, `.`, `_`, `-`, `@`",
                            c.name
                        ),
                        Some("the name is the client's identity in approvals and the audit log"),
                    );
                } else if c.name == "stdio" || c.name == "http" {
                    p.add(
                        Some(cs.clone()),
                        "[[server.http.clients]]",
                        "name",
                        format!("client name `{}` is reserved", c.name),
                        Some("`stdio` names the stdio client, `http` a token-less loopback one"),
                    );
                } else if names_seen.contains(&c.name.as_str()) {
                    p.add(
                        Some(cs.clone()),
                        "[[server.http.clients]]",
                        "name",
                        format!("client name `{}` appears twice", c.name),
                        Some("each client needs its own name and token"),
                    );
                }
                names_seen.push(&c.name);
                if c.token_env.is_some() == c.token_file.is_some() {
                    p.add(
                        Some(cs),
                        "[[server.http.clients]]",
                        "token_env",
                        format!(
                            "client `{}` needs exactly one of token_env and token_file",
                            c.name
                        ),
                        Some("token_env = \"HANDS_TOKEN_X\" reads the token from that variable"),
                    );
                }
                HttpClientCfg {
                    name: c.name.clone(),
                    token_env: c.token_env.clone(),
                    token_file: c.token_file.as_deref().map(|f| expand_tilde(f, home.as_deref())),
                }
            })
            .collect();
        if h.listen.get_ref().parse::<std::net::SocketAddr>().is_err() {
            p.add(
                Some(h.listen.span()),
                "[server.http]",
                "listen",
                format!("`{}` is not an address:port", h.listen.get_ref()),
                Some("for example 127.0.0.1:8765"),
            );
        }
        let _ = span;
        let oauth = (h.oauth.as_ref())
            .map(|o| super::oauth::validate(o, "[server.http.oauth]", home.as_deref(), p));
        HttpCfg {
            listen: h.listen.get_ref().clone(),
            allowed_hosts: if h.allowed_hosts.is_empty() {
                vec!["localhost".into(), "127.0.0.1".into(), "[::1]".into()]
            } else {
                h.allowed_hosts.clone()
            },
            clients,
            oauth,
        }
    });
    let dashboard = raw.server.dashboard.as_ref().map(|d| {
        let span = d.span();
        let d = d.get_ref();
        if d.token_env.is_some() == d.token_file.is_some() {
            p.add(
                Some(span),
                "[server.dashboard]",
                "token_env",
                "needs exactly one of token_env and token_file",
                Some("the token is the person's login to the dashboard"),
            );
        }
        DashboardCfg {
            listen: d.listen.clone(),
            token_env: d.token_env.clone(),
            token_file: d.token_file.as_deref().map(|f| expand_tilde(f, home.as_deref())),
        }
    });

    let runner = raw.runner.as_ref().map(|r| super::runner::validate(r, home.as_deref(), p));
    let modules = super::modules::validate(&raw.builtins, &trust, home.as_deref(), p);
    Some(Config {
        source: String::new(),
        file: None,
        state_dir,
        trust,
        sandbox_mode: raw.sandbox.mode.unwrap_or_default(),
        deny,
        secret_patterns,
        protected_extra,
        run_as: raw.sandbox.run_as.clone(),
        http,
        dashboard,
        runner,
        modules,
        read_only: false,
    })
}
