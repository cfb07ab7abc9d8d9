//! What `hands serve --http` settles before it serves: the listen address, the hosts a request
//! may name (`allowed_hosts`), and each client's token (read from its variable or file, refused
//! when weak or on a listener the rule forbids; one inside a root is refused earlier, with the
//! rest of what the host trusts, `config::trusted`); plus the loopback rule the
//! doctor and the dashboard share. `http.rs` serves with the result.

use crate::config::{Config, Grant, HttpCfg, ModuleCfg, ModuleId};
use anyhow::{Context as _, anyhow, bail};
use hmac::digest::KeyInit;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;

/// The identity of every HTTP client when no `[[server.http.clients]]` are configured (loopback
/// only). `stdio` is the identity on stdio; config validation reserves both names.
pub const ANONYMOUS: &str = "http";

/// Tokens shorter than this are refused at startup: a bearer token is the only lock on a
/// non-loopback listener.
const MIN_TOKEN_LEN: usize = 16;

/// The HMAC key that turns tokens into equal-length tags before the constant-time comparison;
/// it is not a secret (the tokens are), only a domain separator.
const TAG_KEY: [u8; 64] = *b"hands: bearer-token tags for a constant-time comparison, v1.....";

/// A host rule from `allowed_hosts`: the host (lowercase, no brackets) and, optionally, a port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HostRule {
    pub(crate) host: String,
    pub(crate) port: Option<u16>,
}

/// One configured client after startup: its name and the HMAC tag of its token.
pub(super) struct ClientKey {
    pub(super) name: String,
    pub(super) tag: Vec<u8>,
}

/// Everything `serve` needs, checked before the runtime starts: the address, the host rules and
/// the clients' token tags (tokens read from their variables or files).
pub struct Setup {
    pub(super) addr: SocketAddr,
    pub(super) hosts: Vec<HostRule>,
    pub(super) clients: Vec<ClientKey>,
    /// `[server.http.oauth]`: OAuth access tokens too (or instead).
    pub(super) oauth: Option<super::oauth::ResourceServer>,
}

impl Setup {
    /// The HTTP setup, or `None` when neither `--http` nor `[server.http]` asks for HTTP.
    /// `listen` (from `--http ADDR`) overrides `[server.http].listen`. Refuses a non-loopback
    /// address without clients, a loopback one without clients while commands share the host's
    /// network ([`loopback_refusal`]), and any client whose token is missing, empty or too
    /// short. (A token file that commands or file tools could read is refused with the rest of
    /// what the host trusts, `config::trusted::refuse`.)
    pub fn new(config: &Config, listen: Option<&str>) -> anyhow::Result<Option<Setup>> {
        let default_cfg;
        let cfg = match (config.http.as_ref(), listen) {
            (Some(c), _) => c,
            (None, Some(_)) => {
                default_cfg = HttpCfg {
                    listen: String::new(),
                    allowed_hosts: Vec::new(),
                    clients: Vec::new(),
                    oauth: None,
                };
                &default_cfg
            }
            (None, None) => return Ok(None),
        };
        let (listen, from) = match listen {
            Some(l) => (l, "--http"),
            None => (cfg.listen.as_str(), "[server.http].listen"),
        };
        let addr: SocketAddr = listen.parse().map_err(|_| {
            anyhow!("{from} `{listen}` is not an address:port\nhint: for example 127.0.0.1:8765")
        })?;
        let oauth = (cfg.oauth.as_ref())
            .map(|o| super::oauth::ResourceServer::new(o, "[server.http.oauth]"))
            .transpose()?;
        let tokenless = cfg.clients.is_empty() && oauth.is_none();
        if !addr.ip().is_loopback() && tokenless {
            bail!(
                "refusing to serve HTTP on {addr} without bearer tokens: a non-loopback address is \
                 reachable from other machines, and anyone reaching it would get the tools\n\
                 hint: add a client to daemon.toml —\n  \
                 [[server.http.clients]]\n  name = \"ci-bot\"\n  token_env = \"HANDS_TOKEN_CI\"   \
                 # or token_file = \"~/.config/hands/ci-bot.token\"\n\
                 or OAuth access tokens ([server.http.oauth], README \"OAuth\"), or listen on \
                 a loopback address such as 127.0.0.1:8765"
            );
        }
        if tokenless && let Some(why) = loopback_refusal(config, &addr.to_string()) {
            bail!("{why}");
        }
        let mut hosts = Vec::new();
        for entry in &cfg.allowed_hosts {
            hosts.push(parse_host_rule(entry).ok_or_else(|| {
                anyhow!(
                    "[server.http].allowed_hosts: `{entry}` is not a host or host:port\nhint: for \
                     example \"build.example.com\" or \"build.example.com:8765\""
                )
            })?);
        }
        // The listen address's own IP is a Host a client may use; an IP literal cannot be a
        // rebinding name.
        if !addr.ip().is_unspecified() {
            hosts.push(HostRule { host: normalize_host(&addr.ip().to_string()), port: None });
        }
        let mut clients: Vec<ClientKey> = Vec::new();
        for c in &cfg.clients {
            let token = read_token(c)?;
            let tag = tag_of(token.as_bytes());
            if let Some(other) = clients.iter().find(|o| o.tag == tag) {
                bail!(
                    "[[server.http.clients]] `{}` and `{}` have the same token, so a request could \
                     not say which of them it is\nhint: give each client its own token",
                    other.name,
                    c.name
                );
            }
            clients.push(ClientKey { name: c.name.clone(), tag });
        }
        Ok(Some(Setup { addr, hosts, clients, oauth }))
    }

    /// What the banner says for the transport, given the bound address.
    pub(super) fn describe(&self, bound: SocketAddr) -> String {
        let names: Vec<&str> = self.clients.iter().map(|c| c.name.as_str()).collect();
        match (&self.oauth, names.is_empty()) {
            (None, true) => format!(
                "http://{bound}/mcp (no bearer tokens: loopback only, identity `{ANONYMOUS}`)"
            ),
            (None, false) => format!("http://{bound}/mcp (bearer tokens: {})", names.join(", ")),
            (Some(o), _) => format!(
                "http://{bound}/mcp (OAuth access tokens of {} for {}{})",
                o.cfg().issuer,
                o.cfg().audience,
                if names.is_empty() {
                    String::new()
                } else {
                    format!("; bearer tokens: {}", names.join(", "))
                }
            ),
        }
    }
}

/// The module whose commands reach the host's loopback: tools-shell with the `network` grant,
/// whose commands share the host's network namespace (without it they get a private one).
pub fn loopback_reacher(config: &Config) -> Option<&ModuleCfg> {
    config.modules.iter().find(|m| {
        m.id == ModuleId::Shell
            && m.has(Grant::Network)
            && match &m.settings {
                // The network by domain reaches the host's loopback only where an allow entry
                // names a loopback address; `mode = "host"` always does.
                crate::config::ModuleSettings::Shell(sh) => match &sh.network {
                    crate::config::NetworkMode::Domains(rules) => rules.names_loopback(),
                    crate::config::NetworkMode::Host => true,
                },
                _ => true,
            }
    })
}

/// Why HTTP at `listen` without `[[server.http.clients]]` is refused, when it is: the address is
/// loopback (a non-loopback one needs tokens anyway) and commands reach the host's loopback, so
/// a command could connect as a client — use every module's tools, answer an approval put to
/// "its" client with *always* — and nothing a command can reach may grant anything.
pub fn loopback_refusal(config: &Config, listen: &str) -> Option<String> {
    let addr: SocketAddr = listen.parse().ok()?;
    let m = loopback_reacher(config)?;
    addr.ip().is_loopback().then(|| {
        format!(
            "refusing to serve HTTP on {addr} without bearer tokens: {} holds the `network` grant, \
             so its commands share the host's network and can connect to {addr} themselves — as a \
             client they would get every module's tools and could answer their own approvals\n\
             hint: give each MCP client a token of its own in daemon.toml —\n  \
             [[server.http.clients]]\n  name = \"my-agent\"\n  token_env = \"HANDS_TOKEN_AGENT\"   \
             # or token_file = \"~/.config/hands/my-agent.token\"\n\
             or take `network` off {}'s grants (its commands then get a private network)",
            m.id.name(),
            m.id.name()
        )
    })
}

/// Reads one client's token from its variable or file, trimmed; refuses a missing, empty,
/// short or non-printable one, naming the client.
pub(crate) fn read_token(c: &crate::config::HttpClientCfg) -> anyhow::Result<String> {
    let what = format!("[[server.http.clients]] `{}`", c.name);
    read_secret(&what, c.token_env.as_deref(), c.token_file.as_deref())
}

/// Reads a credential from `env` or `file` (exactly one is given), trimmed; refuses a missing,
/// empty, short or non-printable one. `what` names its owner in errors (`[runner]`,
/// `[[relay.agents]] `alice``); no error ever quotes the credential.
pub(crate) fn read_secret(
    what: &str,
    env: Option<&str>,
    file: Option<&Path>,
) -> anyhow::Result<String> {
    let (raw, source) = match (env, file) {
        (Some(var), _) => {
            let v = std::env::var(var).map_err(|e| {
                anyhow!(
                    "{what}: token_env = \"{var}\": {}\nhint: export {var} in the environment of \
                     `hands`, or use token_file",
                    match e {
                        std::env::VarError::NotPresent => "the variable is not set",
                        std::env::VarError::NotUnicode(_) => "the variable is not UTF-8",
                    }
                )
            })?;
            (v, format!("${var}"))
        }
        (None, Some(file)) => {
            let v = crate::config::trusted::one_name::read_one_name(file, "token_file")
                .with_context(|| format!("{what}: cannot read token_file {}", file.display()))?;
            (v, file.display().to_string())
        }
        (None, None) => bail!(
            "{what} has neither token_env nor token_file\nhint: token_env = \"HANDS_TOKEN_X\" \
             reads the token from that variable"
        ),
    };
    let token = raw.trim();
    if token.is_empty() {
        bail!(
            "{what}: the token in {source} is empty\nhint: put a random token there, e.g. the \
             output of `openssl rand -hex 32`"
        );
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        bail!(
            "{what}: the token in {source} has spaces or characters that cannot travel in an \
             Authorization header\nhint: use printable ASCII, e.g. the output of `openssl rand \
             -hex 32`"
        );
    }
    if token.len() < MIN_TOKEN_LEN {
        bail!(
            "{what}: the token in {source} is {} characters; at least {MIN_TOKEN_LEN} are \
             required\nhint: `openssl rand -hex 32` makes a good one",
            token.len()
        );
    }
    Ok(token.to_string())
}

pub(crate) fn mac() -> Hmac<Sha256> {
    // A key of exactly SHA-256's block size: the infallible constructor.
    <Hmac<Sha256> as KeyInit>::new(&TAG_KEY.into())
}

pub(crate) fn tag_of(token: &[u8]) -> Vec<u8> {
    let mut m = mac();
    m.update(token);
    m.finalize().into_bytes().to_vec()
}

pub(crate) fn normalize_host(host: &str) -> String {
    host.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase()
}

/// `localhost` or a loopback IP literal (127.0.0.0/8, ::1): a browser only sends these for a
/// page that is itself on this machine, so they cannot be a rebinding name.
pub(crate) fn is_loopback_name(host: &str) -> bool {
    host == "localhost" || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

pub(crate) fn parse_host_rule(entry: &str) -> Option<HostRule> {
    let a = entry.trim().parse::<http::uri::Authority>().ok()?;
    if a.as_str().contains('@') || a.host().is_empty() {
        return None;
    }
    Some(HostRule { host: normalize_host(a.host()), port: a.port_u16() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_compare_tokens_not_prefixes() {
        assert_eq!(tag_of(b"0123456789abcdef"), tag_of(b"0123456789abcdef"));
        assert_ne!(tag_of(b"0123456789abcdef"), tag_of(b"0123456789abcde"));
    }
}
