//! Push over SSH: parsing SSH remote URLs, the ssh-agent the key stays in, and the host key
//! check — against a configured `known_hosts` file, or trust on first use recorded in the
//! daemon's state dir. The check runs in libgit2's `certificate_check` callback, right after
//! the SSH key exchange and before authentication, so a refused host receives nothing.

use crate::GitError;
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
use git2::cert::Cert;
use git2::{CertificateCheckStatus, Cred, CredentialType, RemoteCallbacks};
use hmac::{Hmac, KeyInit, Mac};
use std::cell::{Cell, RefCell};
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The host part of an SSH remote URL, as libssh2 will reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SshUrl {
    /// The user named in the URL, if any.
    pub(crate) user: Option<String>,
    /// The host name or address (an IPv6 address without its brackets).
    pub(crate) host: String,
    /// The TCP port (22 unless the URL names another).
    pub(crate) port: u16,
}

impl SshUrl {
    /// The name `known_hosts` lists the host under: `host` on port 22, `[host]:port`
    /// otherwise, lower-cased as OpenSSH does.
    pub(crate) fn known_hosts_name(&self) -> String {
        let host = self.host.to_ascii_lowercase();
        if self.port == 22 { host } else { format!("[{host}]:{}", self.port) }
    }
}

impl fmt::Display for SshUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let host =
            if self.host.contains(':') { format!("[{}]", self.host) } else { self.host.clone() };
        if self.port == 22 { write!(f, "{host}") } else { write!(f, "{host}:{}", self.port) }
    }
}

/// Whether `url` starts with one of the SSH schemes libgit2 knows.
pub(crate) fn has_ssh_scheme(url: &str) -> bool {
    let lower = url.to_ascii_lowercase();
    ["ssh://", "git+ssh://", "ssh+git://"].iter().any(|s| lower.starts_with(s))
}

/// Parses `ssh://[user@]host[:port]/path` (and the `git+ssh://`, `ssh+git://` spellings).
pub(crate) fn parse_ssh_url(url: &str) -> Result<SshUrl, &'static str> {
    let rest = url.split_once("://").map(|(_, r)| r).ok_or("not an ssh:// URL")?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => return Err("the URL names no repository path (ssh://host/path)"),
    };
    check_path(path.trim_start_matches('/'))?;
    let (user, hostport) = split_user(authority)?;
    let (host, port) = if let Some(inner) = hostport.strip_prefix('[') {
        let (host, after) = inner.split_once(']').ok_or("an IPv6 host lacks its `]`")?;
        check_ipv6(host)?;
        let port = match after {
            "" => 22,
            p => parse_port(p.strip_prefix(':').ok_or("unexpected text after `]`")?)?,
        };
        (host, port)
    } else {
        match hostport.split_once(':') {
            Some((h, p)) => (h, parse_port(p)?),
            None => (hostport, 22),
        }
    };
    if !host.contains(':') {
        check_host(host)?;
    }
    Ok(SshUrl { user, host: host.to_string(), port })
}

/// Parses the scp-like form `[user@]host:path` (port 22; `ssh://` is needed for another port).
pub(crate) fn parse_scp(url: &str) -> Result<SshUrl, &'static str> {
    let (authority, path) = url.split_once(':').ok_or("not an scp-like URL")?;
    if authority.contains(['[', ']']) {
        return Err("use the ssh://[host]:port/path form for IPv6 hosts and ports");
    }
    check_path(path)?;
    let (user, host) = split_user(authority)?;
    check_host(host)?;
    Ok(SshUrl { user, host: host.to_string(), port: 22 })
}

fn split_user(authority: &str) -> Result<(Option<String>, &str), &'static str> {
    let Some((user, host)) = authority.split_once('@') else { return Ok((None, authority)) };
    if host.contains('@') {
        return Err("the URL has more than one `@`");
    }
    if user.contains(':') {
        return Err("the URL carries a password; hands authenticates only with the ssh-agent");
    }
    if user.is_empty()
        || user.starts_with('-')
        || user.chars().any(|c| c.is_control() || c.is_whitespace() || matches!(c, '%' | '/'))
    {
        return Err("the user name in the URL is empty or has characters hands does not accept");
    }
    Ok((Some(user.to_string()), host))
}

fn check_host(host: &str) -> Result<(), &'static str> {
    if host.is_empty()
        || host.starts_with(['-', '.'])
        || !host.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
    {
        return Err("the host name is empty or has characters hands does not accept");
    }
    Ok(())
}

fn check_ipv6(host: &str) -> Result<(), &'static str> {
    if host.is_empty() || !host.chars().all(|c| c.is_ascii_hexdigit() || matches!(c, ':' | '.')) {
        return Err("the bracketed host is not an IPv6 address");
    }
    Ok(())
}

fn parse_port(p: &str) -> Result<u16, &'static str> {
    match p.parse::<u16>() {
        Ok(n) if n > 0 && p.bytes().all(|b| b.is_ascii_digit()) => Ok(n),
        _ => Err("the port is not a number from 1 to 65535"),
    }
}

fn check_path(path: &str) -> Result<(), &'static str> {
    if path.is_empty() {
        return Err("the URL names no repository path");
    }
    if path.starts_with('-') {
        return Err("the repository path starts with `-`");
    }
    if path.chars().any(char::is_control) {
        return Err("the repository path has control characters");
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// known_hosts

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Marker {
    None,
    Revoked,
    CertAuthority,
}

/// One line of a known_hosts file.
#[derive(Debug)]
struct Entry {
    line: usize,
    marker: Marker,
    patterns: String,
    key_type: String,
    blob: Vec<u8>,
}

/// Parses OpenSSH's known_hosts format; malformed lines are skipped, as OpenSSH does.
fn parse_known_hosts(text: &str) -> Vec<Entry> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut fields = line.split_ascii_whitespace();
        let mut first = fields.next();
        let marker = match first {
            Some("@revoked") => Marker::Revoked,
            Some("@cert-authority") => Marker::CertAuthority,
            Some(m) if m.starts_with('@') => continue,
            _ => Marker::None,
        };
        if marker != Marker::None {
            first = fields.next();
        }
        let (Some(patterns), Some(key_type), Some(key)) = (first, fields.next(), fields.next())
        else {
            continue;
        };
        let Ok(blob) = STANDARD.decode(key) else { continue };
        out.push(Entry {
            line: i + 1,
            marker,
            patterns: patterns.to_string(),
            key_type: key_type.to_string(),
            blob,
        });
    }
    out
}

/// Whether a comma-separated pattern list (plain names, `*`/`?` wildcards, `!` negations,
/// `[host]:port`, or one hashed `|1|salt|hash`) matches `name` (already lower-cased).
fn host_matches(patterns: &str, name: &str) -> bool {
    if patterns.starts_with("|1|") {
        return hashed_matches(patterns, name);
    }
    let mut matched = false;
    for pat in patterns.split(',') {
        let (negated, pat) = match pat.strip_prefix('!') {
            Some(p) => (true, p),
            None => (false, pat),
        };
        if wildcard(pat.to_ascii_lowercase().as_bytes(), name.as_bytes()) {
            if negated {
                return false;
            }
            matched = true;
        }
    }
    matched
}

/// `|1|base64(salt)|base64(HMAC-SHA1(salt, name))`, as `ssh-keygen -H` writes.
fn hashed_matches(pattern: &str, name: &str) -> bool {
    let mut parts = pattern["|1|".len()..].split('|');
    let (Some(salt), Some(hash), None) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    let (Ok(salt), Ok(hash)) = (STANDARD.decode(salt), STANDARD.decode(hash)) else {
        return false;
    };
    let Ok(mut mac) = Hmac::<sha1::Sha1>::new_from_slice(&salt) else { return false };
    mac.update(name.as_bytes());
    mac.verify_slice(&hash).is_ok()
}

/// Glob match with `*` (any run) and `?` (one byte).
fn wildcard(pat: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pat.len() && (pat[p] == b'?' || pat[p] == text[t]) {
            p += 1;
            t += 1;
        } else if p < pat.len() && pat[p] == b'*' {
            star = Some((p, t));
            p += 1;
        } else if let Some((sp, st)) = star {
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    pat[p..].iter().all(|&c| c == b'*')
}

/// What a known_hosts file says about a host's offered key.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    /// A line for this host has exactly this key.
    Known,
    /// The key is marked `@revoked` (line).
    Revoked(usize),
    /// The host is listed with a different key of the same type (line).
    Changed(usize),
    /// The host is listed only with keys of other types (first line, the types).
    OtherTypes(usize, Vec<String>),
    /// The host is not listed.
    Unknown,
}

fn verdict(entries: &[Entry], name: &str, key_type: &str, blob: &[u8]) -> Verdict {
    if let Some(e) = entries.iter().find(|e| e.marker == Marker::Revoked && e.blob == blob) {
        return Verdict::Revoked(e.line);
    }
    let listed: Vec<&Entry> = entries
        .iter()
        .filter(|e| e.marker == Marker::None && host_matches(&e.patterns, name))
        .collect();
    if listed.iter().any(|e| e.blob == blob) {
        return Verdict::Known;
    }
    if let Some(e) = listed.iter().find(|e| e.key_type == key_type) {
        return Verdict::Changed(e.line);
    }
    match listed.first() {
        Some(first) => {
            let mut types: Vec<String> = listed.iter().map(|e| e.key_type.clone()).collect();
            types.dedup();
            Verdict::OtherTypes(first.line, types)
        }
        None => Verdict::Unknown,
    }
}

/// Where the expected host keys come from.
#[derive(Debug, Clone)]
pub(crate) enum KeySource {
    /// The person's `push.known_hosts`.
    Configured(PathBuf),
    /// Trust on first use: the file hands records first-seen keys in (in the state dir).
    Tofu(PathBuf),
}

impl KeySource {
    fn describe(&self) -> String {
        match self {
            KeySource::Configured(p) => format!("push.known_hosts `{}`", p.display()),
            KeySource::Tofu(p) => {
                format!(
                    "`{}` (recorded by hands on first use; push.known_hosts is not set)",
                    p.display()
                )
            }
        }
    }

    fn path(&self) -> &Path {
        match self {
            KeySource::Configured(p) | KeySource::Tofu(p) => p,
        }
    }

    /// The file's entries; a missing trust-on-first-use file is empty, a missing configured
    /// file is an error.
    // known_hosts: the file the person configured, or the state dir's trust-on-first-use file.
    #[allow(clippy::disallowed_methods)]
    fn entries(&self, host: &str) -> Result<Vec<Entry>, GitError> {
        match std::fs::read_to_string(self.path()) {
            Ok(text) => Ok(parse_known_hosts(&text)),
            Err(e)
                if e.kind() == std::io::ErrorKind::NotFound
                    && matches!(self, KeySource::Tofu(_)) =>
            {
                Ok(Vec::new())
            }
            Err(e) => Err(GitError::PushHostKey {
                host: host.to_string(),
                why: format!("cannot read {}: {e}", self.describe()),
            }),
        }
    }
}

/// How hands reaches the ssh-agent (for messages).
#[derive(Debug, Clone)]
pub(crate) struct Agent {
    pub(crate) socket: PathBuf,
    /// Whether the socket is `push.ssh_auth_sock` (else the daemon's own `SSH_AUTH_SOCK`).
    pub(crate) configured: bool,
}

impl fmt::Display for Agent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.configured {
            write!(f, "the ssh-agent at `{}` (push.ssh_auth_sock)", self.socket.display())
        } else {
            write!(
                f,
                "the ssh-agent at `{}` (the daemon's own SSH_AUTH_SOCK, since push.ssh_auth_sock is not set)",
                self.socket.display()
            )
        }
    }
}

/// One SSH push attempt: the host, the host key policy, the agent, and what the callbacks
/// saw (to turn libgit2's generic failures into precise messages).
pub(crate) struct Session<'a> {
    pub(crate) url: SshUrl,
    pub(crate) user: String,
    pub(crate) agent: Agent,
    pub(crate) keys: KeySource,
    /// Serialises trust-on-first-use read-check-append within the daemon.
    pub(crate) tofu_lock: &'a Mutex<()>,
    refused: RefCell<Option<GitError>>,
    agent_tries: Cell<u32>,
    no_publickey: Cell<bool>,
}

impl<'a> Session<'a> {
    pub(crate) fn new(
        url: SshUrl,
        user: String,
        agent: Agent,
        keys: KeySource,
        tofu_lock: &'a Mutex<()>,
    ) -> Session<'a> {
        Session {
            url,
            user,
            agent,
            keys,
            tofu_lock,
            refused: RefCell::new(None),
            agent_tries: Cell::new(0),
            no_publickey: Cell::new(false),
        }
    }

    fn host_key_error(&self, why: String) -> GitError {
        GitError::PushHostKey { host: self.url.to_string(), why }
    }

    /// Before any connection: with a configured known_hosts, the host must be listed in it.
    pub(crate) fn precheck(&self) -> Result<(), GitError> {
        let KeySource::Configured(_) = &self.keys else { return Ok(()) };
        let name = self.url.known_hosts_name();
        let entries = self.keys.entries(&name)?;
        let listed =
            entries.iter().any(|e| e.marker == Marker::None && host_matches(&e.patterns, &name));
        if listed {
            return Ok(());
        }
        Err(self.host_key_error(format!(
            "`{name}` is not listed in {}; a person adds its key (e.g. `ssh-keyscan -p {} {} >> {}`) after checking the fingerprint",
            self.keys.describe(),
            self.url.port,
            self.url.host,
            self.keys.path().display()
        )))
    }

    /// Checks the offered host key; `Err` refuses the connection before authentication.
    fn check_key(&self, cert: &Cert<'_>, host: &str) -> Result<(), GitError> {
        let bare = |h: &str| h.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
        if bare(host) != bare(&self.url.host) {
            return Err(self
                .host_key_error(format!("libgit2 reached `{host}`, not the URL's host; refused")));
        }
        let hk = cert
            .as_hostkey()
            .ok_or_else(|| self.host_key_error("the server offered no SSH host key".into()))?;
        let (Some(blob), Some(kind)) = (hk.hostkey(), hk.hostkey_type()) else {
            return Err(self.host_key_error("the server's host key could not be read".into()));
        };
        let key_type = kind.name();
        let fp = hk
            .hash_sha256()
            .map(|h| format!("SHA256:{}", STANDARD_NO_PAD.encode(h)))
            .unwrap_or_else(|| "(no fingerprint)".to_string());
        let name = self.url.known_hosts_name();
        let _guard = match &self.keys {
            KeySource::Tofu(_) => Some(hands_roots::lock(self.tofu_lock)),
            KeySource::Configured(_) => None,
        };
        let entries = self.keys.entries(&name)?;
        let src = self.keys.describe();
        match verdict(&entries, &name, key_type, blob) {
            Verdict::Known => Ok(()),
            Verdict::Unknown => match &self.keys {
                KeySource::Tofu(path) => record(path, &name, key_type, blob)
                    .map_err(|e| self.host_key_error(format!("cannot record its key in {src}: {e}"))),
                KeySource::Configured(_) => Err(self.host_key_error(format!(
                    "`{name}` is not listed in {src}; the server offered {key_type} {fp}"
                ))),
            },
            Verdict::Revoked(line) => Err(self.host_key_error(format!(
                "the server offered {key_type} {fp}, which {src} line {line} marks @revoked"
            ))),
            Verdict::Changed(line) => Err(self.host_key_error(format!(
                "the server offered {key_type} {fp}, but {src} line {line} has a different {key_type} key for `{name}` — the host key changed or someone is in between; if the change is expected, a person updates that line"
            ))),
            Verdict::OtherTypes(line, types) => Err(self.host_key_error(format!(
                "the server offered a {key_type} key ({fp}), but {src} lists only {} for `{name}` (line {line}); a person adds the host's {key_type} key after checking its fingerprint",
                types.join(", ")
            ))),
        }
    }

    /// Callbacks that check the host key and authenticate through the agent only.
    pub(crate) fn callbacks<'s>(&'s self) -> RemoteCallbacks<'s> {
        let mut cb = RemoteCallbacks::new();
        cb.certificate_check(move |cert, host| match self.check_key(cert, host) {
            Ok(()) => {
                // Each connection checks the host key first, then authenticates afresh.
                self.agent_tries.set(0);
                Ok(CertificateCheckStatus::CertificateOk)
            }
            Err(e) => {
                let msg = e.to_string();
                *self.refused.borrow_mut() = Some(e);
                Err(git2::Error::from_str(&msg))
            }
        });
        cb.credentials(move |_url, _user_from_url, allowed| {
            if allowed.contains(CredentialType::USERNAME) {
                return Cred::username(&self.user);
            }
            if !allowed.contains(CredentialType::SSH_KEY) {
                self.no_publickey.set(true);
                return Err(git2::Error::from_str(
                    "the server does not offer public-key authentication",
                ));
            }
            let tries = self.agent_tries.get() + 1;
            self.agent_tries.set(tries);
            if tries > 1 {
                // libgit2 already offered every key the agent holds; it would ask forever.
                return Err(git2::Error::from_str("the server accepted none of the agent's keys"));
            }
            Cred::ssh_key_from_agent(&self.user)
        });
        cb
    }

    /// Turns a libgit2 failure of a connection or push into the precise refusal or failure.
    pub(crate) fn map_error(&self, e: git2::Error) -> GitError {
        if let Some(refused) = self.refused.borrow_mut().take() {
            return refused;
        }
        if self.no_publickey.get() {
            return GitError::PushSshAuth {
                url: self.url.to_string(),
                why: format!(
                    "the server does not offer public-key authentication for `{}`; hands authenticates only with {}",
                    self.user, self.agent
                ),
            };
        }
        let tries = self.agent_tries.get();
        if tries > 1 {
            // libgit2 asked again after offering every key the agent holds.
            return GitError::PushSshAuth {
                url: self.url.to_string(),
                why: format!(
                    "the server accepted none of the keys {} holds for user `{}` (or that agent could not be reached); a person loads the right key into that agent (`ssh-add -L` lists what it holds) or authorises one on the server",
                    self.agent, self.user
                ),
            };
        }
        if tries == 1
            && e.class() == git2::ErrorClass::Ssh
            && e.message().contains("authenticating")
        {
            // The agent itself failed (libssh2's "error authenticating: …").
            return GitError::PushSshAuth {
                url: self.url.to_string(),
                why: format!(
                    "authentication as `{}` through {} failed: {}",
                    self.user,
                    self.agent,
                    e.message()
                ),
            };
        }
        GitError::PushNetwork { url: self.url.to_string(), message: e.message().to_string() }
    }
}

/// Appends `name type key` to the trust-on-first-use file (made `0600`, its folder `0700`).
// The state dir's trust-on-first-use file (`<state_dir>/known_hosts`).
#[allow(clippy::disallowed_methods)]
fn record(path: &Path, name: &str, key_type: &str, blob: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    if let Some(dir) = path.parent() {
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    }
    let mut f = std::fs::OpenOptions::new().append(true).create(true).mode(0o600).open(path)?;
    let line = format!("{name} {key_type} {}\n", STANDARD.encode(blob));
    f.write_all(line.as_bytes())?;
    f.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(user: Option<&str>, host: &str, port: u16) -> SshUrl {
        SshUrl { user: user.map(str::to_string), host: host.to_string(), port }
    }

    #[test]
    fn ssh_urls_parse() {
        assert_eq!(
            parse_ssh_url("ssh://git@h.example/o/r.git"),
            Ok(url(Some("git"), "h.example", 22))
        );
        assert_eq!(parse_ssh_url("ssh://h:2222/r"), Ok(url(None, "h", 2222)));
        assert_eq!(parse_ssh_url("git+ssh://u@[::1]:2222/r"), Ok(url(Some("u"), "::1", 2222)));
        assert_eq!(parse_ssh_url("ssh+git://[::1]/r"), Ok(url(None, "::1", 22)));
        assert_eq!(parse_scp("git@github.com:o/r.git"), Ok(url(Some("git"), "github.com", 22)));
        assert_eq!(parse_scp("host:r.git"), Ok(url(None, "host", 22)));
        for bad in [
            "ssh://h",
            "ssh://u:pw@h/r",
            "ssh://a@b@h/r",
            "ssh://h:0/r",
            "ssh://h:x/r",
            "ssh://-oProxyCommand=x/r",
            "ssh://h/-r",
            "ssh://h%2f/r",
            "ssh://[zz]/r",
            "ssh://@h/r",
        ] {
            assert!(parse_ssh_url(bad).is_err(), "{bad}");
        }
        for bad in ["[::1]:r", "-h:r", "u@:r", "h:", "h:-r"] {
            assert!(parse_scp(bad).is_err(), "{bad}");
        }
        assert_eq!(url(None, "H.example", 22).known_hosts_name(), "h.example");
        assert_eq!(url(None, "h", 2222).known_hosts_name(), "[h]:2222");
        assert_eq!(url(None, "::1", 2222).to_string(), "[::1]:2222");
    }

    #[test]
    fn patterns_match_like_openssh() {
        assert!(host_matches("h.example,other", "h.example"));
        assert!(host_matches("H.Example", "h.example"));
        assert!(host_matches("*.example", "h.example"));
        assert!(host_matches("h?example", "h.example"));
        assert!(!host_matches("*.example,!h.example", "h.example"));
        assert!(!host_matches("h.example", "[h.example]:2222"));
        assert!(host_matches("[h.example]:2222", "[h.example]:2222"));
        assert!(host_matches("[*.example]:*", "[h.example]:2222"));
        assert!(!host_matches("h.exampl", "h.example"));
        assert!(wildcard(b"a*b*c", b"aXXbYYc"));
        assert!(!wildcard(b"a*b*c", b"aXXbYY"));
    }

    #[test]
    fn hashed_entries_match_openssh_output() {
        // Written by `ssh-keygen -H` for `example.com` and `[127.0.0.1]:2222`.
        let example = "|1|+ir5YdAcg/wKGu5oW7IaBEZ3Pmc=|PX9eTCW7rgMkKuMxKw8Cli8LnwA=";
        let local = "|1|7/bqbeTuvetVNlsFt5pZ8bCpOg0=|ZEX+bgG0wQ4aUpOV3Xkw6syxZ/I=";
        assert!(host_matches(example, "example.com"));
        assert!(!host_matches(example, "example.org"));
        assert!(host_matches(local, "[127.0.0.1]:2222"));
        assert!(!host_matches(local, "127.0.0.1"));
        assert!(!host_matches("|1|bad|bad", "example.com"));
    }

    #[test]
    fn verdicts() {
        let a = STANDARD.encode(b"key-a");
        let b = STANDARD.encode(b"key-b");
        let text = format!(
            "# comment\n\nh1 ssh-ed25519 {a}\nh2 ssh-ed25519 {b} c\n@revoked * ssh-ed25519 {b}\n\
             @cert-authority h3 ssh-ed25519 {a}\nh4 ecdsa-sha2-nistp256 {a}\ngarbage\nh5 ssh-rsa !!!\n"
        );
        let e = parse_known_hosts(&text);
        assert_eq!(e.len(), 5);
        assert_eq!(verdict(&e, "h1", "ssh-ed25519", b"key-a"), Verdict::Known);
        assert_eq!(verdict(&e, "h1", "ssh-ed25519", b"key-c"), Verdict::Changed(3));
        assert_eq!(verdict(&e, "h2", "ssh-ed25519", b"key-b"), Verdict::Revoked(5));
        assert_eq!(verdict(&e, "h3", "ssh-ed25519", b"key-a"), Verdict::Unknown);
        assert_eq!(
            verdict(&e, "h4", "ssh-ed25519", b"key-a"),
            Verdict::Known,
            "the same blob is the same key"
        );
        assert_eq!(
            verdict(&e, "h4", "ssh-ed25519", b"key-x"),
            Verdict::OtherTypes(7, vec!["ecdsa-sha2-nistp256".into()])
        );
        assert_eq!(verdict(&e, "nope", "ssh-ed25519", b"key-a"), Verdict::Unknown);
    }

    #[test]
    fn a_host_missing_from_configured_known_hosts_is_refused_before_connecting() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("known_hosts");
        let hashed = "|1|7/bqbeTuvetVNlsFt5pZ8bCpOg0=|ZEX+bgG0wQ4aUpOV3Xkw6syxZ/I=";
        let key = STANDARD.encode(b"key-a");
        std::fs::write(
            &file,
            format!(
                "other ssh-ed25519 {key}
"
            ),
        )
        .unwrap();
        let lock = Mutex::new(());
        let agent = Agent { socket: dir.path().join("agent"), configured: true };
        let session = |host: &str, port, keys: KeySource| {
            Session::new(url(Some("u"), host, port), "u".into(), agent.clone(), keys, &lock)
        };
        let configured = KeySource::Configured(file.clone());
        let e = session("127.0.0.1", 2222, configured.clone()).precheck().unwrap_err();
        assert!(matches!(e, GitError::PushHostKey { .. }), "{e}");
        let msg = e.to_string();
        assert!(msg.contains("[127.0.0.1]:2222") && msg.contains("push.known_hosts"), "{msg}");
        assert!(msg.contains("Nothing was sent"), "{msg}");
        std::fs::write(
            &file,
            format!(
                "{hashed} ssh-ed25519 {key}
"
            ),
        )
        .unwrap();
        session("127.0.0.1", 2222, configured.clone()).precheck().unwrap();
        assert!(
            session("127.0.0.1", 22, configured).precheck().is_err(),
            "port 22 is another name"
        );
        let missing = KeySource::Configured(dir.path().join("nope"));
        let e = session("h", 22, missing).precheck().unwrap_err();
        assert!(e.to_string().contains("cannot read push.known_hosts"), "{e}");
        // Trust on first use connects first; nothing to check beforehand.
        session("h", 22, KeySource::Tofu(dir.path().join("nope"))).precheck().unwrap();
    }

    #[test]
    fn first_use_records_a_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/known_hosts");
        record(&path, "[h]:2222", "ssh-ed25519", b"key-a").unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let e = parse_known_hosts(&text);
        assert_eq!(verdict(&e, "[h]:2222", "ssh-ed25519", b"key-a"), Verdict::Known);
        assert_eq!(verdict(&e, "[h]:2222", "ssh-ed25519", b"key-b"), Verdict::Changed(1));
    }
}
