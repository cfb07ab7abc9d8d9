//! The tools-git logic of `hands`: status, diff, log, branches, commit, worktrees and push,
//! in process on `git2`, over repositories that lie wholly under the roots a
//! [`hands_roots::Resolver`] confines. Knows nothing of MCP: each tool is a method of [`Git`]
//! from a parameter struct to an output struct (both with JSON schemas, the output also a
//! `Display` text mirror) or a [`GitError`].

// The lib target itself is checked without this (clippy.toml, SPEC §11).
#![cfg_attr(
    test,
    allow(
        clippy::disallowed_methods,
        reason = "unit tests make and read their fixtures by path and spawn what they test against"
    )
)]

pub mod catalogue;
mod confine;
mod error;
mod names;
mod pieces;
mod push;
mod read;
pub mod settings;
mod ssh;
mod write;

pub use error::GitError;
pub use push::{PushOutput, PushParams};
pub use read::{
    BranchCommitsOutput, BranchCommitsParams, BranchInfo, BranchesOutput, BranchesParams,
    CommitInfo, DiffOutput, DiffParams, FileStatus, LogOutput, LogParams, StatusOutput,
    StatusParams,
};
pub use settings::{GitSettings, PushSettings};
pub use write::{
    BranchOutput, BranchParams, CommitOutput, CommitParams, SwitchOutput, SwitchParams,
    WorktreeAddOutput, WorktreeAddParams,
};

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use hands_roots::Resolver;
use settings::Problem;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// Push settings once compiled.
#[derive(Debug)]
pub(crate) struct PushPolicy {
    pub(crate) remote: String,
    pub(crate) patterns: Vec<String>,
    pub(crate) set: GlobSet,
    pub(crate) ssh_auth_sock: Option<PathBuf>,
    pub(crate) known_hosts: Option<PathBuf>,
    /// `push.urls`, parsed; `None` when unset.
    pub(crate) urls: Option<Vec<push::Listed>>,
}

/// The git tools over one module's roots. Cheap to share: every call checks the repository
/// before use; read-class tools reuse an opened repository (re-checked every call), write-class
/// tools open it afresh.
#[derive(Debug)]
pub struct Git {
    pub(crate) resolver: Arc<Resolver>,
    pub(crate) author: Option<(String, String)>,
    pub(crate) push: Option<PushPolicy>,
    pub(crate) network: bool,
    pub(crate) state_dir: Option<PathBuf>,
    /// Serialises trust-on-first-use host key records.
    pub(crate) tofu_lock: Mutex<()>,
    /// Opened repositories kept for read-class tools, most recently used last.
    pub(crate) repos: Mutex<Vec<confine::CachedRepo>>,
    /// The embedding daemon's brake (`hands stop`), read by `push` at the last moment before
    /// it sends anything (see [`Git::set_brake`]).
    pub(crate) brake: std::sync::OnceLock<Arc<std::sync::atomic::AtomicBool>>,
    /// The pushes sending now, which the brake waits for ([`Git::pushes`]).
    pub(crate) in_flight: Arc<InFlight>,
    /// What commands may move, shared with tools-shell: a tool that reads or writes a work
    /// tree by name holds it still ([`Git::set_still`], decision 0083).
    pub(crate) still: std::sync::OnceLock<Arc<hands_sandbox::still::Still>>,
}

/// The pushes that are sending: each one counted from before its brake check (at its
/// negotiation) to its end. The brake sets its flag, then waits until none is counted: with
/// both sides sequentially consistent, a push either sees the flag and refuses, or is counted
/// and the brake waits for it to finish — none lands after the brake has answered.
#[derive(Debug, Default)]
pub struct InFlight(std::sync::atomic::AtomicUsize);

impl InFlight {
    /// Whether no push is sending now.
    pub fn is_idle(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::SeqCst) == 0
    }

    /// Counts one push until the pass is dropped.
    pub(crate) fn enter(&self) -> Sending<'_> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Sending(self)
    }
}

/// One push counted in [`InFlight`] while it lives.
pub(crate) struct Sending<'a>(&'a InFlight);

impl Drop for Sending<'_> {
    fn drop(&mut self) {
        self.0.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Git {
    /// Validates the settings (author, push remote and patterns) and isolates libgit2 from
    /// config outside the repositories.
    pub fn new(resolver: Arc<Resolver>, settings: GitSettings) -> Result<Git, GitError> {
        hands_sandbox::libgit2::set_process_options();
        // The daemon's config validation ran these checks already (settings.rs); they run again
        // because a library caller may build `GitSettings` by hand.
        if let Some((name, email)) = &settings.author {
            check_author(name, email).map_err(|p| GitError::Settings(p.message))?;
        }
        let push = match settings.push {
            None => None,
            Some(p) => Some(compile_push(p).map_err(|p| GitError::Settings(p.message))?),
        };
        if let Some(dir) = &settings.state_dir
            && !dir.is_absolute()
        {
            return Err(GitError::Settings(format!(
                "the state dir `{}` is not an absolute path",
                dir.display()
            )));
        }
        Ok(Git {
            resolver,
            author: settings.author,
            push,
            network: settings.network,
            state_dir: settings.state_dir,
            tofu_lock: Mutex::new(()),
            repos: Mutex::new(Vec::new()),
            brake: std::sync::OnceLock::new(),
            in_flight: Arc::default(),
            still: std::sync::OnceLock::new(),
        })
    }

    /// Shares the daemon's record of what commands may move (decision 0083). Set once.
    pub fn set_still(&self, still: Arc<hands_sandbox::still::Still>) {
        let _ = self.still.set(still);
    }

    /// Holds the module's roots still for `tool`, which reads or writes a work tree or `.git`
    /// by name (every git tool):
    /// refused while a command runs or a tmux session lives where it could swap a folder
    /// under the tool (decision 0083). Taken before the repository is opened and checked, so
    /// what is checked is what the tool then uses.
    pub(crate) fn hold(
        &self,
        tool: &'static str,
    ) -> Result<Option<hands_sandbox::still::Held<'_>>, GitError> {
        let Some(still) = self.still.get() else { return Ok(None) };
        let trees: Vec<&std::path::Path> = self.resolver.roots().iter().map(|r| r.path()).collect();
        let trees = &trees;
        still
            .hold(trees)
            .map(Some)
            .map_err(|busy| GitError::Moving { tool, busy: busy.to_string() })
    }

    /// Ties `push` to a brake: while `brake` is `true`, a push that has not sent yet refuses at
    /// its negotiation (after connecting, before the pack goes out), so a brake pulled while a
    /// push connects stops it. Set once; later calls change nothing.
    pub fn set_brake(&self, brake: Arc<std::sync::atomic::AtomicBool>) {
        let _ = self.brake.set(brake);
    }

    /// The pushes sending now: the brake, once set, waits until [`InFlight::is_idle`], so that
    /// a push that passed its brake check finishes before `hands stop` answers.
    pub fn pushes(&self) -> Arc<InFlight> {
        self.in_flight.clone()
    }

    /// Whether `push` is configured (without it `git_push` is not published).
    pub fn push_configured(&self) -> bool {
        self.push.is_some()
    }

    /// The resolver the tools confine paths with.
    pub fn resolver(&self) -> &Resolver {
        &self.resolver
    }
}

/// Whether git accepts `name <email>` as an identity.
pub(crate) fn check_author(name: &str, email: &str) -> Result<(), Problem> {
    git2::Signature::now(name, email).map(|_| ()).map_err(|e| {
        Problem::new(
            "author_name",
            format!(
                "author_name/author_email are unusable ({}); use a plain name and address",
                e.message()
            ),
            None,
        )
    })
}

/// Compiles the push settings; the problem names the key under the module's `config` table.
pub(crate) fn compile_push(p: PushSettings) -> Result<PushPolicy, Problem> {
    if !git2::Remote::is_valid_name(&p.remote) || p.remote.starts_with('-') {
        return Err(Problem::new(
            "push.remote",
            format!("push.remote `{}` is not a valid remote name", p.remote),
            Some("the name of a remote the repositories have, e.g. \"origin\""),
        ));
    }
    if p.branches.is_empty() {
        return Err(Problem::new(
            "push.branches",
            "push.branches is empty, so no branch could be pushed; remove `push` to turn pushing off",
            None,
        ));
    }
    let mut b = GlobSetBuilder::new();
    for (i, pat) in p.branches.iter().enumerate() {
        let glob = GlobBuilder::new(pat).literal_separator(true).build().map_err(|e| {
            Problem::new(
                format!("push.branches[{i}]"),
                format!("push.branches pattern `{pat}` is not a glob: {e}"),
                None,
            )
        })?;
        b.add(glob);
    }
    let set = b
        .build()
        .map_err(|e| Problem::new("push.branches", format!("push.branches: {e}"), None))?;
    for (key, path) in [("ssh_auth_sock", &p.ssh_auth_sock), ("known_hosts", &p.known_hosts)] {
        if let Some(path) = path
            && !path.is_absolute()
        {
            return Err(Problem::new(
                format!("push.{key}"),
                format!(
                    "push.{key} `{}` is not an absolute path (`~/` is expanded; nothing else is)",
                    path.display()
                ),
                None,
            ));
        }
    }
    let urls = match &p.urls {
        None => None,
        Some(list) if list.is_empty() => {
            return Err(Problem::new(
                "push.urls",
                "push.urls is empty, so no remote could be pushed to; list the remotes, or remove push.urls to push to the repository's configured remote",
                None,
            ));
        }
        Some(list) => Some(
            list.iter()
                .enumerate()
                .map(|(i, u)| {
                    push::Listed::parse(u)
                        .map_err(|e| Problem::new(format!("push.urls[{i}]"), e.to_string(), None))
                })
                .collect::<Result<Vec<_>, _>>()?,
        ),
    };
    Ok(PushPolicy {
        remote: p.remote,
        patterns: p.branches,
        set,
        ssh_auth_sock: p.ssh_auth_sock,
        known_hosts: p.known_hosts,
        urls,
    })
}

/// Formats a commit time as RFC 3339 in the committer's own offset (UTC where the offset or
/// the time is out of range).
pub(crate) fn rfc3339(t: git2::Time) -> String {
    use chrono::{DateTime, FixedOffset, SecondsFormat};
    let utc = DateTime::from_timestamp(t.seconds(), 0).unwrap_or_default();
    match FixedOffset::east_opt(t.offset_minutes().saturating_mul(60)) {
        Some(off) => utc.with_timezone(&off).to_rfc3339_opts(SecondsFormat::Secs, false),
        None => utc.to_rfc3339_opts(SecondsFormat::Secs, false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_is_shareable_across_threads() {
        fn shareable<T: Send + Sync>() {}
        shareable::<Git>();
    }

    #[test]
    fn rfc3339_formats_offsets() {
        assert_eq!(rfc3339(git2::Time::new(0, 0)), "1970-01-01T00:00:00+00:00");
        assert_eq!(rfc3339(git2::Time::new(1_700_000_000, 120)), "2023-11-15T00:13:20+02:00");
        assert_eq!(rfc3339(git2::Time::new(1_700_000_000, -330)), "2023-11-14T16:43:20-05:30");
        assert_eq!(rfc3339(git2::Time::new(951_782_400, 0)), "2000-02-29T00:00:00+00:00");
    }

    #[test]
    fn push_patterns_stop_at_slash() {
        let p = compile_push(PushSettings::default());
        let Ok(p) = p else { panic!("default push settings rejected") };
        assert!(p.set.is_match("task/x"));
        assert!(!p.set.is_match("task/x/y"));
        assert!(!p.set.is_match("main"));
        let d = PushSettings::default;
        assert!(compile_push(PushSettings { remote: "-x".into(), ..d() }).is_err());
        assert!(compile_push(PushSettings { branches: vec![], ..d() }).is_err());
        let rel = Some(PathBuf::from("known_hosts"));
        assert!(compile_push(PushSettings { known_hosts: rel.clone(), ..d() }).is_err());
        assert!(compile_push(PushSettings { ssh_auth_sock: rel, ..d() }).is_err());
        let urls = |u: &[&str]| Some(u.iter().map(|s| s.to_string()).collect());
        assert!(
            compile_push(PushSettings { urls: urls(&["/srv/r.git", "h:r.git"]), ..d() }).is_ok()
        );
        for bad in [&[][..], &["https://h/r.git"], &["r.git"], &["/srv/a:b"]] {
            let e = compile_push(PushSettings { urls: urls(bad), ..d() }).unwrap_err();
            assert!(e.to_string().contains("push.urls"), "{bad:?}: {e}");
        }
    }
}
