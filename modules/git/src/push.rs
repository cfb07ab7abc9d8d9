//! `push`: one branch to the configured remote (a local repository under the roots, or an SSH
//! server), only when configured, granted and matching the patterns, and never forced (a
//! non-fast-forward is refused before anything is sent).

use crate::confine::{Access, lexical, local_url_path, open_repository, path_str};
use crate::names::check_branch;
use crate::read::short;
use crate::ssh::{self, Agent, KeySource, SshUrl};
use crate::{Git, GitError};
use git2::{BranchType, Direction, Oid, PushOptions, RemoteCallbacks, Repository};
use hands_roots::PathError;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::fmt;
use std::path::{Path, PathBuf};

/// Parameters of `git_push`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PushParams {
    /// Repository folder (the one holding `.git`): absolute, or relative to the first root.
    /// Default: the first root.
    pub repo: Option<String>,
    /// Local branch to push to the same name on the configured remote; it must match the
    /// configured push patterns (default `task/*`).
    pub branch: String,
}

/// What `git_push` returns.
#[derive(Debug, Serialize, JsonSchema)]
pub struct PushOutput {
    /// The remote pushed to.
    pub remote: String,
    /// The branch pushed.
    pub branch: String,
    /// The URL pushed to.
    pub url: String,
    /// The remote branch's commit before the push; absent when the push made it.
    pub old: Option<String>,
    /// The remote branch's commit now.
    pub new: String,
    /// Whether the remote already had this commit (nothing was sent).
    pub up_to_date: bool,
}

impl fmt::Display for PushOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.up_to_date {
            return writeln!(
                f,
                "{}/{} is already at {}",
                self.remote,
                self.branch,
                short(&self.new)
            );
        }
        match &self.old {
            Some(old) => writeln!(
                f,
                "pushed {} to {} ({}): {}..{}",
                self.branch,
                self.remote,
                self.url,
                short(old),
                short(&self.new)
            ),
            None => writeln!(
                f,
                "pushed {} to {} ({}): new branch at {}",
                self.branch,
                self.remote,
                self.url,
                short(&self.new)
            ),
        }
    }
}

/// Where a remote URL leads.
#[derive(Debug, PartialEq, Eq)]
enum Target {
    /// A local repository at this absolute path (as written, not yet resolved).
    Local(PathBuf),
    /// An SSH server.
    Ssh(SshUrl),
}

/// One entry of `push.urls`, normalised for comparison with a remote's URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Listed {
    /// A local repository: an absolute, lexically clean path (canonicalised when compared, so
    /// a symlink and its target, `file:///x` and `/x`, `/x/` and `/x` are one remote).
    Local(PathBuf),
    /// An SSH repository: the user as written, the host lower-cased, the port (22 by default)
    /// and the repository path as git reads it (`host:r.git` is `~/r.git`, like
    /// `ssh://host/~/r.git`; `ssh://host/r.git` is `/r.git`).
    Ssh { user: Option<String>, host: String, port: u16, path: String },
}

/// Why a `push.urls` entry is refused when the settings are loaded ([`Listed::parse`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ListedError {
    /// An SSH URL with `%`-escapes: libgit2 decodes them, and a listed URL is compared as
    /// written.
    #[error("push.urls entry `{entry}` cannot be pushed to: write it without `%`-escapes")]
    Escaped { entry: String },
    /// The URL is one hands never pushes to (the push check's reason).
    #[error("push.urls entry `{entry}` cannot be pushed to: {why}")]
    Refused { entry: String, why: String },
}

impl Listed {
    /// Parses one `push.urls` entry (`~` already expanded); the error names the entry.
    pub(crate) fn parse(entry: &str) -> Result<Listed, ListedError> {
        let refused = |why: String| ListedError::Refused { entry: entry.to_string(), why };
        match classify("push.urls", entry, None) {
            Ok(Target::Local(p)) => Ok(Listed::Local(lexical(&p))),
            Ok(Target::Ssh(_)) if entry.contains('%') => {
                Err(ListedError::Escaped { entry: entry.to_string() })
            }
            Ok(Target::Ssh(ssh)) => Ok(Listed::ssh(&ssh, entry)),
            Err(GitError::PushUrl { why, .. }) => Err(refused(why.to_string())),
            Err(e) => Err(refused(e.to_string())),
        }
    }

    /// The comparable form of an SSH remote URL already parsed as `ssh`.
    fn ssh(ssh: &SshUrl, url: &str) -> Listed {
        Listed::Ssh {
            user: ssh.user.clone(),
            host: ssh.host.to_ascii_lowercase(),
            port: ssh.port,
            path: ssh_repo_path(url),
        }
    }
}

/// The repository path of an SSH URL as git reads it: home-relative paths spelt `~/…`
/// (scp-like `host:r.git`, `ssh://host/~/r.git`), absolute ones `/…`; no trailing `/`.
fn ssh_repo_path(url: &str) -> String {
    let path = if ssh::has_ssh_scheme(url) {
        let rest = url.split_once("://").map_or(url, |(_, r)| r);
        let path = rest.find('/').map_or("/", |i| &rest[i..]);
        match path.strip_prefix("/~") {
            Some(home) => format!("~{home}"),
            None => path.to_string(),
        }
    } else {
        let path = url.split_once(':').map_or("", |(_, p)| p);
        if path.starts_with(['/', '~']) { path.to_string() } else { format!("~/{path}") }
    };
    match path.trim_end_matches('/') {
        "" => "/".to_string(),
        p => p.to_string(),
    }
}

/// The real path of a local remote: canonical when it exists, else lexically clean.
fn real_path(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| lexical(p))
}

/// What both transports need to know about one push.
struct Job {
    remote: String,
    branch: String,
    url: String,
    refname: String,
    local_tip: Oid,
    /// The ref and message of an update the remote rejected.
    rejected: RefCell<Option<(String, String)>>,
}

impl Job {
    /// The result; `new` defaults to the local tip.
    fn output(self, old: Option<Oid>, new: Option<Oid>) -> PushOutput {
        let new = new.unwrap_or(self.local_tip);
        PushOutput {
            remote: self.remote,
            branch: self.branch,
            url: self.url,
            old: old.map(|o| o.to_string()),
            new: new.to_string(),
            up_to_date: old == Some(new),
        }
    }

    /// Refuses unless the remote's `old` tip is the local tip or one of its ancestors;
    /// `true` when they are equal (nothing to send).
    fn fast_forward(&self, repo: &Repository, old: Option<Oid>) -> Result<bool, GitError> {
        match old {
            Some(old) if old == self.local_tip => Ok(true),
            Some(old) if !is_ancestor(repo, old, self.local_tip) => Err(GitError::NonFastForward {
                remote: self.remote.clone(),
                branch: self.branch.clone(),
            }),
            _ => Ok(false),
        }
    }

    /// Pushes `refname:refname` (no `+`: the transport itself refuses a non-fast-forward
    /// too), turning a server's rejection of the update into an error.
    fn send<'a>(
        &'a self,
        remote: &mut git2::Remote<'_>,
        mut callbacks: RemoteCallbacks<'a>,
        brake: Option<&'a std::sync::atomic::AtomicBool>,
        map: impl Fn(git2::Error) -> GitError,
    ) -> Result<(), GitError> {
        let result = {
            // The last moment before anything is sent: a brake pulled since the gate let this
            // push through (while it connected) refuses it here.
            callbacks.push_negotiation(move |_| match brake {
                Some(b) if b.load(std::sync::atomic::Ordering::SeqCst) => {
                    Err(git2::Error::from_str(
                        "refused: a person stopped this daemon's commands with `hands stop`; \
                         nothing was pushed; it runs again after `hands stop --release`",
                    ))
                }
                _ => Ok(()),
            });
            callbacks.push_update_reference(|name, status| match status {
                Some(msg) => {
                    *self.rejected.borrow_mut() = Some((name.to_string(), msg.to_string()));
                    Err(git2::Error::from_str(&format!("the remote rejected {name}: {msg}")))
                }
                None => Ok(()),
            });
            let mut opts = PushOptions::new();
            opts.remote_callbacks(callbacks);
            let spec = format!("{}:{}", self.refname, self.refname);
            remote.push(&[spec.as_str()], Some(&mut opts))
        };
        if let Some((refname, message)) = self.rejected.borrow_mut().take() {
            return Err(GitError::PushRejected { refname, message });
        }
        result.map_err(|e| match e.code() {
            git2::ErrorCode::NotFastForward => GitError::NonFastForward {
                remote: self.remote.clone(),
                branch: self.branch.clone(),
            },
            _ => map(e),
        })
    }
}

/// Callbacks for a local push: any network transport libgit2 might pick instead is refused
/// (no host key is trusted, no credential is given).
fn local_callbacks<'a>() -> RemoteCallbacks<'a> {
    let mut cb = RemoteCallbacks::new();
    cb.certificate_check(|_, host| {
        Err(git2::Error::from_str(&format!(
            "a local push reached the network host `{host}`; refused"
        )))
    });
    cb.credentials(|_, _, _| Err(git2::Error::from_str("a local push needs no credentials")));
    cb
}

impl Git {
    /// `git_push`: pushes `refs/heads/B` to the same ref on the configured remote (a local
    /// path or `file://` URL, or an SSH server), refusing a non-fast-forward and anything the
    /// policy does not allow.
    pub fn push(&self, p: PushParams) -> Result<PushOutput, GitError> {
        let policy = self.push.as_ref().ok_or(GitError::PushOff)?;
        if !self.network {
            return Err(GitError::PushNoNetwork);
        }
        let branch = check_branch("branch", &p.branch)?.to_string();
        if !policy.set.is_match(&branch) {
            return Err(GitError::PushBranchRefused {
                branch,
                patterns: policy.patterns.join(", "),
            });
        }
        let _held = self.hold("git_push")?;
        let r = self.open(p.repo.as_deref(), Access::Write)?;
        let repo = &r.repo;
        let remote_name = policy.remote.clone();
        let mut remote = repo
            .find_remote(&remote_name)
            .map_err(|_| GitError::PushNoRemote { remote: remote_name.clone() })?;
        // libgit2 has applied insteadOf/pushInsteadOf to these already.
        let url = remote
            .pushurl()
            .or_else(|| remote.url())
            .ok_or_else(|| GitError::PushNoRemote { remote: remote_name.clone() })?
            .to_string();
        // Only with push.urls is a relative path resolved — here, the way git reads it (from
        // the work tree's top, or the git dir of a bare repository), and then checked against
        // the list; libgit2 would resolve it against the daemon's own folder.
        let base =
            policy.urls.as_ref().map(|_| r.workdir.clone().unwrap_or_else(|| r.gitdir.clone()));
        let target = classify(&remote_name, &url, base.as_deref())?;
        if let (Target::Ssh(ssh), Some(list)) = (&target, &policy.urls)
            && !list.contains(&Listed::ssh(ssh, &url))
        {
            return Err(GitError::PushNotListed { remote: remote_name, url });
        }

        let local = repo
            .find_branch(&branch, BranchType::Local)
            .map_err(|_| GitError::BranchNotFound { name: branch.clone() })?;
        let local_tip = local
            .get()
            .target()
            .ok_or_else(|| GitError::BranchNotFound { name: branch.clone() })?;
        let refname = format!("refs/heads/{branch}");
        let job = Job {
            remote: remote_name,
            branch,
            url: url.clone(),
            refname,
            local_tip,
            rejected: RefCell::new(None),
        };
        match target {
            Target::Local(path) => self.push_local(repo, &remote, job, &path),
            Target::Ssh(ssh) => self.push_ssh(repo, &mut remote, job, ssh),
        }
    }

    /// Push to a local repository: under a writable root (the repository checks of every
    /// tool apply), or outside the roots when `push.urls` lists it. The push goes through an
    /// anonymous remote on the checked real path, so what libgit2 writes to is what was
    /// checked: a `pushurl` that differs from the `url` (libgit2's local transport writes to
    /// the `url`), a symlink named in the URL re-pointed after the check, a relative path or
    /// a `%`-escape cannot lead it elsewhere.
    fn push_local(
        &self,
        repo: &Repository,
        named: &git2::Remote<'_>,
        job: Job,
        path: &Path,
    ) -> Result<PushOutput, GitError> {
        let urls = self.push.as_ref().and_then(|p| p.urls.as_deref());
        let real = real_path(path);
        if let Some(list) = urls
            && !list.iter().any(|l| matches!(l, Listed::Local(p) if real_path(p) == real))
        {
            return Err(GitError::PushNotListed { remote: job.remote, url: job.url });
        }
        if let Some(why) = self.resolver.policy().denied(&real, None) {
            return Err(PathError::Denied { path: real, why }.into());
        }
        let shown = path_str(&real)?.to_string();
        let inside = self.resolver.root_of(&real).is_some();
        let open_dest = |access| -> Result<Repository, GitError> {
            if inside {
                // The remote must itself be a repository wholly under a writable root.
                Ok(self.open(Some(&shown), access)?.repo)
            } else {
                open_repository(&real)
            }
        };
        if !inside && urls.is_none() {
            return Err(GitError::PushOutsideRoots { remote: job.remote, url: job.url });
        }
        let dest = open_dest(Access::Write)?;
        if !dest.is_bare() {
            let (checked_out, _) = crate::read::head_state(&dest)?;
            if checked_out.as_deref() == Some(job.branch.as_str()) {
                return Err(GitError::PushCheckedOut { remote: job.remote, branch: job.branch });
            }
        }
        let old = remote_tip(&dest, &job.refname)?;
        drop(dest);
        if job.fast_forward(repo, old)? {
            return Ok(job.output(old, None));
        }
        let mut anon = repo.remote_anonymous(&shown).map_err(GitError::git("push"))?;
        // The repository's `url.*.insteadOf` applies to anonymous remotes too.
        if anon.url() != Some(shown.as_str()) || anon.pushurl().is_some_and(|u| u != shown) {
            return Err(GitError::PushUrl {
                remote: job.remote,
                url: job.url,
                why: "the repository's url.*.insteadOf or pushInsteadOf rewrites the remote's path; remove that rewrite from its config",
            });
        }
        // Counted before the brake check, until the destination's refs are written.
        let _sending = self.in_flight.enter();
        let brake = self.brake.get().map(|b| &**b);
        job.send(&mut anon, local_callbacks(), brake, |e| GitError::Git { op: "push", source: e })?;
        track(repo, named, &job);
        let new = remote_tip(&open_dest(Access::Read)?, &job.refname)?;
        Ok(job.output(old, new))
    }

    /// Push over SSH: the agent and host key policy are checked before any connection; one
    /// connection reads the remote's tip (host key checked, agent authentication) for the
    /// fast-forward check, a second one sends.
    fn push_ssh(
        &self,
        repo: &Repository,
        remote: &mut git2::Remote<'_>,
        job: Job,
        ssh: SshUrl,
    ) -> Result<PushOutput, GitError> {
        // `self.push` is Some: `push` checked it.
        let (configured_sock, known_hosts) = match &self.push {
            Some(p) => (p.ssh_auth_sock.clone(), p.known_hosts.clone()),
            None => return Err(GitError::PushOff),
        };
        let setup = |why: String| GitError::PushSshSetup {
            remote: job.remote.clone(),
            url: job.url.clone(),
            why,
        };
        let agent = agent(configured_sock.as_deref()).map_err(|e| setup(e.to_string()))?;
        let user = match &ssh.user {
            Some(u) => u.clone(),
            None => ["USER", "LOGNAME"]
                .iter()
                .find_map(|v| std::env::var(v).ok().filter(|u| !u.is_empty()))
                .ok_or_else(|| {
                    setup("the URL names no user and the daemon has no USER; write the user into the remote URL (user@host)".into())
                })?,
        };
        let keys = match (known_hosts, &self.state_dir) {
            (Some(file), _) => KeySource::Configured(file),
            (None, Some(state)) => KeySource::Tofu(state.join("known_hosts")),
            (None, None) => {
                return Err(setup(
                    "push.known_hosts is not set and the daemon gave no state dir to record host keys in; set push.known_hosts".into(),
                ));
            }
        };
        let session = ssh::Session::new(ssh, user, agent, keys, &self.tofu_lock);
        session.precheck()?;

        let old = {
            let conn = remote
                .connect_auth(Direction::Push, Some(session.callbacks()), None)
                .map_err(|e| session.map_error(e))?;
            let heads = conn.list().map_err(|e| session.map_error(e))?;
            heads.iter().find(|h| h.name() == job.refname).map(|h| h.oid())
        };
        if job.fast_forward(repo, old)? {
            return Ok(job.output(old, None));
        }
        // Counted before the brake check, until the remote answered.
        let _sending = self.in_flight.enter();
        let brake = self.brake.get().map(|b| &**b);
        job.send(remote, session.callbacks(), brake, |e| session.map_error(e))?;
        Ok(job.output(old, None))
    }
}

/// Why SSH push has no agent to authenticate through ([`agent`]); the push fails before any
/// connection, with [`GitError::PushSshSetup`].
#[derive(Debug, thiserror::Error)]
enum AgentError {
    /// `push.ssh_auth_sock` is set, and the daemon's `SSH_AUTH_SOCK` (`env`, as shown) is not it.
    #[error(
        "push.ssh_auth_sock is `{}` but the daemon's SSH_AUTH_SOCK is {env}; libssh2 finds the agent only through SSH_AUTH_SOCK, which the daemon sets at startup — restart it",
        configured.display()
    )]
    Mismatch { configured: PathBuf, env: String },
    #[error(
        "push over SSH authenticates only through an ssh-agent, and neither push.ssh_auth_sock nor the daemon's SSH_AUTH_SOCK names one; a person sets push.ssh_auth_sock"
    )]
    None,
    #[error("{0} is not a socket")]
    NotASocket(Agent),
    #[error("{agent} cannot be used ({source}); is the agent running?")]
    Unusable { agent: Agent, source: std::io::Error },
}

/// The agent socket SSH push will use: `push.ssh_auth_sock`, else the process's own
/// `SSH_AUTH_SOCK`. libssh2 reads only `SSH_AUTH_SOCK`, so a configured socket must be what
/// the daemon exported at startup. Checked to exist and be a socket, so a missing agent is
/// reported before any connection.
fn agent(configured: Option<&std::path::Path>) -> Result<Agent, AgentError> {
    use std::os::unix::fs::FileTypeExt;
    let env = std::env::var_os("SSH_AUTH_SOCK").filter(|s| !s.is_empty()).map(PathBuf::from);
    let agent = match (configured, env) {
        (Some(sock), env) => {
            if env.as_deref() != Some(sock) {
                return Err(AgentError::Mismatch {
                    configured: sock.to_path_buf(),
                    env: env
                        .map(|e| format!("`{}`", e.display()))
                        .unwrap_or_else(|| "unset".into()),
                });
            }
            Agent { socket: sock.to_path_buf(), configured: true }
        }
        (None, Some(env)) => Agent { socket: env, configured: false },
        (None, None) => return Err(AgentError::None),
    };
    match std::fs::metadata(&agent.socket) {
        Ok(m) if m.file_type().is_socket() => Ok(agent),
        Ok(_) => Err(AgentError::NotASocket(agent)),
        Err(source) => Err(AgentError::Unusable { agent, source }),
    }
}

/// Where the URL leads, or why hands will not push to it. A relative path is resolved against
/// `base` when one is given, and refused otherwise.
fn classify(remote: &str, url: &str, base: Option<&Path>) -> Result<Target, GitError> {
    let lower = url.to_ascii_lowercase();
    let refuse = |why| GitError::PushUrl { remote: remote.to_string(), url: url.to_string(), why };
    if let Some(p) = local_url_path(url) {
        path_str(std::path::Path::new(p))?;
        if !lower.starts_with("file://") && url.contains(':') {
            // libgit2 would read `/a:b` as scp-like SSH (host `/a`).
            return Err(refuse(
                "a local path with `:` is ambiguous with SSH; write it as a file:/// URL",
            ));
        }
        if lower.starts_with("file://") && url.contains('%') {
            // libgit2 decodes `%`-escapes in file:// URLs; the path checked must be the one
            // written to.
            return Err(refuse("write the file:// URL without `%`-escapes"));
        }
        return Ok(Target::Local(PathBuf::from(p)));
    }
    if ssh::has_ssh_scheme(url) {
        return ssh::parse_ssh_url(url).map(Target::Ssh).map_err(refuse);
    }
    if lower.starts_with("ext::") {
        return Err(refuse("`ext::` URLs run a program; refused"));
    }
    if lower.starts_with("file://") {
        return Err(refuse("a file:// URL must name an absolute path (file:///path)"));
    }
    if lower.contains("://") {
        return Err(refuse(
            "hands pushes only over SSH and to local paths and file:// URLs; HTTP(S) and git:// are not supported",
        ));
    }
    // scp-like `user@host:path`: a colon before any slash.
    if let Some(colon) = url.find(':')
        && url.find('/').is_none_or(|slash| colon < slash)
    {
        return ssh::parse_scp(url).map(Target::Ssh).map_err(refuse);
    }
    match base {
        Some(base) => Ok(Target::Local(lexical(&base.join(url)))),
        None => Err(refuse(
            "a relative path is ambiguous; set the remote to an absolute path or a file:/// URL",
        )),
    }
}

/// The commit `refname` points at in the remote repository, if it exists.
fn remote_tip(dest: &Repository, refname: &str) -> Result<Option<Oid>, GitError> {
    match dest.find_reference(refname) {
        Ok(r) => Ok(r.resolve().ok().and_then(|r| r.target())),
        Err(e) if e.code() == git2::ErrorCode::NotFound => Ok(None),
        Err(e) => Err(GitError::Git { op: "read the remote", source: e }),
    }
}

/// Moves the named remote's tracking ref of the pushed branch (`refs/remotes/R/B` under the
/// usual fetch refspec) to the pushed commit, as git does after a push; the anonymous remote
/// the push went through has no name to do it by. Only refs under `refs/remotes/` are
/// touched; a failure leaves the tracking ref stale, which the next fetch fixes.
fn track(repo: &Repository, named: &git2::Remote<'_>, job: &Job) {
    for spec in named.refspecs() {
        if spec.direction() != Direction::Fetch || !spec.src_matches(&job.refname) {
            continue;
        }
        let Ok(dst) = spec.transform(&job.refname) else { continue };
        let Some(dst) = dst.as_str() else { continue };
        if dst.starts_with("refs/remotes/") {
            let _ = repo.reference(dst, job.local_tip, true, "push");
        }
    }
}

/// Whether `old` is `new` or an ancestor of it, in the local repository (a commit the local
/// repository lacks is not).
fn is_ancestor(repo: &Repository, old: Oid, new: Oid) -> bool {
    if repo.find_commit(old).is_err() {
        return false;
    }
    old == new || repo.graph_descendant_of(new, old).unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local(p: &str) -> Option<Target> {
        Some(Target::Local(PathBuf::from(p)))
    }

    #[test]
    fn urls_are_classified() {
        let c = |u| classify("o", u, None).ok();
        assert_eq!(c("/srv/x.git"), local("/srv/x.git"));
        assert_eq!(c("file:///srv/x.git"), local("/srv/x.git"));
        assert_eq!(c("file://localhost/srv/x.git"), local("/srv/x.git"));
        assert_eq!(c("file:///srv/a:b.git"), local("/srv/a:b.git"));
        for ssh in ["ssh://git@h/x.git", "git@github.com:o/r.git", "host:r.git", "SSH://h:2/x"] {
            assert!(matches!(classify("o", ssh, None), Ok(Target::Ssh(_))), "{ssh}");
        }
        for other in [
            "https://h/x.git",
            "git://h/x",
            "ext::sh -c x",
            "../x.git",
            "file://x",
            "/srv/a:b.git",
            "ssh://u:pw@h/x",
            "[::1]:x",
            "file:///srv/x%2fy.git",
        ] {
            assert!(matches!(classify("o", other, None), Err(GitError::PushUrl { .. })), "{other}");
        }
        // With a base (push.urls set), a relative path is read from it, `..` folded.
        let base = Path::new("/w/repo");
        assert_eq!(classify("o", "../x.git", Some(base)).ok(), local("/w/x.git"));
        assert_eq!(classify("o", "x", Some(base)).ok(), local("/w/repo/x"));
    }

    #[test]
    fn listed_urls_are_normalised_as_git_reads_them() {
        let p = |u: &str| Listed::parse(u);
        assert_eq!(p("file:///srv/x.git/"), Ok(Listed::Local(PathBuf::from("/srv/x.git"))));
        assert_eq!(p("/srv/a/../x.git"), Ok(Listed::Local(PathBuf::from("/srv/x.git"))));
        // scp-like and ssh://host/~/ are one home-relative path; ssh://host/ is absolute.
        assert_eq!(p("git@H.example:o/r.git"), p("ssh://git@h.example/~/o/r.git"));
        assert_eq!(p("git@h.example:o/r.git"), p("ssh://git@h.example:22/~/o/r.git/"));
        assert_ne!(p("git@h.example:o/r.git"), p("ssh://git@h.example/o/r.git"));
        assert_ne!(p("git@h.example:o/r.git"), p("h.example:o/r.git"));
        assert_ne!(p("ssh://h.example:2222/r.git"), p("ssh://h.example/r.git"));
        assert_eq!(p("h:/abs/r.git"), p("ssh://h/abs/r.git"));
        for bad in ["https://h/x.git", "x.git", "../x.git", "ssh://h/r%2e.git", "ext::sh"] {
            let e = p(bad).unwrap_err().to_string();
            assert!(e.contains("push.urls entry") && e.contains(bad), "{e}");
        }
    }
}
