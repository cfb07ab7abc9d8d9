//! `push`: one branch to the configured remote, only when configured, granted and matching
//! the patterns, and never forced (a non-fast-forward is refused before anything is sent).

use crate::confine::{Access, local_url_path, path_str};
use crate::names::check_branch;
use crate::read::short;
use crate::{Git, GitError};
use git2::{BranchType, Oid, PushOptions, RemoteCallbacks, Repository};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::fmt;

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

impl Git {
    /// `git_push`: pushes `refs/heads/B` to the same ref on the configured remote (local path
    /// or `file://` URL), refusing a non-fast-forward and anything the policy does not allow.
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
        let path = classify(&remote_name, &url)?;

        let local = repo
            .find_branch(&branch, BranchType::Local)
            .map_err(|_| GitError::BranchNotFound { name: branch.clone() })?;
        let local_tip = local
            .get()
            .target()
            .ok_or_else(|| GitError::BranchNotFound { name: branch.clone() })?;

        // The remote must itself be a repository wholly under a writable root.
        let dest = self.open(Some(path), Access::Write).map_err(|e| match e {
            GitError::Path(hands_roots::PathError::Outside { .. }) => GitError::PushUrl {
                remote: remote_name.clone(),
                url: url.clone(),
                why: "the remote's path is outside the roots of tools-git; a person can add it as a writable root",
            },
            other => other,
        })?;
        let refname = format!("refs/heads/{branch}");
        if dest.workdir.is_some() {
            let (checked_out, _) = crate::read::head_state(&dest.repo)?;
            if checked_out.as_deref() == Some(branch.as_str()) {
                return Err(GitError::PushCheckedOut { remote: remote_name, branch });
            }
        }
        let old = remote_tip(&dest.repo, &refname)?;
        if let Some(old) = old {
            if old == local_tip {
                return Ok(PushOutput {
                    remote: remote_name,
                    branch,
                    url,
                    old: Some(old.to_string()),
                    new: old.to_string(),
                    up_to_date: true,
                });
            }
            if !is_ancestor(repo, old, local_tip) {
                return Err(GitError::NonFastForward { remote: remote_name, branch });
            }
        }
        drop(dest);

        let rejected: std::cell::RefCell<Option<(String, String)>> = std::cell::RefCell::new(None);
        let result = {
            let mut callbacks = RemoteCallbacks::new();
            callbacks.push_update_reference(|name, status| match status {
                Some(msg) => {
                    *rejected.borrow_mut() = Some((name.to_string(), msg.to_string()));
                    Err(git2::Error::from_str(&format!("the remote rejected {name}: {msg}")))
                }
                None => Ok(()),
            });
            let mut opts = PushOptions::new();
            opts.remote_callbacks(callbacks);
            // No `+`: the transport itself refuses a non-fast-forward too.
            let spec = format!("{refname}:{refname}");
            remote.push(&[spec.as_str()], Some(&mut opts))
        };
        if let Some((refname, message)) = rejected.into_inner() {
            return Err(GitError::PushRejected { refname, message });
        }
        result.map_err(|e| match e.code() {
            git2::ErrorCode::NotFastForward => {
                GitError::NonFastForward { remote: remote_name.clone(), branch: branch.clone() }
            }
            _ => GitError::Git { op: "push", source: e },
        })?;

        let dest = self.open(Some(path), Access::Read)?;
        let new = remote_tip(&dest.repo, &refname)?.unwrap_or(local_tip);
        Ok(PushOutput {
            remote: remote_name,
            branch,
            url,
            old: old.map(|o| o.to_string()),
            new: new.to_string(),
            up_to_date: false,
        })
    }
}

/// The filesystem path of a local remote, or why hands will not push to this URL.
fn classify<'u>(remote: &str, url: &'u str) -> Result<&'u str, GitError> {
    let lower = url.to_ascii_lowercase();
    let refuse = |why| GitError::PushUrl { remote: remote.to_string(), url: url.to_string(), why };
    if let Some(p) = local_url_path(url) {
        path_str(std::path::Path::new(p))?;
        return Ok(p);
    }
    if lower.starts_with("ssh://")
        || lower.starts_with("git+ssh://")
        || lower.starts_with("ssh+git://")
    {
        return Err(GitError::PushSsh { remote: remote.to_string(), url: url.to_string() });
    }
    if lower.starts_with("ext::") {
        return Err(refuse("`ext::` URLs run a program; refused"));
    }
    if lower.starts_with("file://") {
        return Err(refuse("a file:// URL must name an absolute path (file:///path)"));
    }
    if lower.contains("://") {
        return Err(refuse(
            "hands pushes only to local paths and file:// URLs (SSH comes later); HTTP(S) and git:// are not supported",
        ));
    }
    // scp-like `user@host:path`: a colon before any slash.
    if let Some(colon) = url.find(':')
        && url.find('/').is_none_or(|slash| colon < slash)
    {
        return Err(GitError::PushSsh { remote: remote.to_string(), url: url.to_string() });
    }
    Err(refuse(
        "a relative path is ambiguous; set the remote to an absolute path or a file:/// URL",
    ))
}

/// The commit `refname` points at in the remote repository, if it exists.
fn remote_tip(dest: &Repository, refname: &str) -> Result<Option<Oid>, GitError> {
    match dest.find_reference(refname) {
        Ok(r) => Ok(r.resolve().ok().and_then(|r| r.target())),
        Err(e) if e.code() == git2::ErrorCode::NotFound => Ok(None),
        Err(e) => Err(GitError::Git { op: "read the remote", source: e }),
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

    #[test]
    fn urls_are_classified() {
        assert_eq!(classify("o", "/srv/x.git").ok(), Some("/srv/x.git"));
        assert_eq!(classify("o", "file:///srv/x.git").ok(), Some("/srv/x.git"));
        assert_eq!(classify("o", "file://localhost/srv/x.git").ok(), Some("/srv/x.git"));
        for ssh in ["ssh://git@h/x.git", "git@github.com:o/r.git", "host:r.git"] {
            assert!(matches!(classify("o", ssh), Err(GitError::PushSsh { .. })), "{ssh}");
        }
        for other in ["https://h/x.git", "git://h/x", "ext::sh -c x", "../x.git", "file://x"] {
            assert!(matches!(classify("o", other), Err(GitError::PushUrl { .. })), "{other}");
        }
    }
}
