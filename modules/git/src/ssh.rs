//! Push over SSH: parsing SSH remote URLs, the ssh-agent the key stays in, and the host key
//! check — against a configured `known_hosts` file, or trust on first use recorded in the
//! daemon's state dir. The check runs in libgit2's `certificate_check` callback, right after
//! the SSH key exchange and before authentication, so a refused host receives nothing.
//! The URLs are `ssh/url.rs`, the `known_hosts` format and verdicts `ssh/known_hosts.rs`.

use crate::GitError;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD_NO_PAD;
use git2::cert::Cert;
use git2::{CertificateCheckStatus, Cred, CredentialType, RemoteCallbacks};
use known_hosts::{Entry, Marker, Verdict, host_matches, parse_known_hosts, record, verdict};
use std::cell::{Cell, RefCell};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

mod known_hosts;
mod url;
pub(crate) use url::{SshUrl, has_ssh_scheme, parse_scp, parse_ssh_url};

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
    #[expect(
        clippy::disallowed_methods,
        reason = "the known_hosts the person configured, or the state dir's trust-on-first-use file"
    )]
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

#[cfg(test)]
mod tests {
    use super::*;
    use base64::engine::general_purpose::STANDARD;

    fn url(user: Option<&str>, host: &str, port: u16) -> SshUrl {
        SshUrl { user: user.map(str::to_string), host: host.to_string(), port }
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
}
