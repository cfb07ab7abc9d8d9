//! `push` to a local bare repository: allowed branches go, everything else is refused with the
//! remote left as it was.

use crate::common::{Fx, git, refs, tip, write};
use hands_git::*;

fn task_branch(fx: &Fx) {
    git(&fx.work, &["switch", "-q", "-c", "task/x"]);
    write(&fx.work, "t.txt", "t\n");
    git(&fx.work, &["add", "t.txt"]);
    git(&fx.work, &["commit", "-qm", "task work"]);
}

fn push(g: &Git, branch: &str) -> Result<PushOutput, GitError> {
    g.push(PushParams { repo: None, branch: branch.into() })
}

#[test]
fn push_sends_a_matching_branch() {
    let fx = Fx::repo();
    let bare = fx.add_bare_remote("ok");
    task_branch(&fx);
    let g = fx.git_push();
    let out = push(&g, "task/x").unwrap();
    let local = tip(&fx.work, "refs/heads/task/x").unwrap();
    assert_eq!(tip(&bare, "refs/heads/task/x").as_deref(), Some(local.as_str()));
    assert_eq!((out.old.as_deref(), out.new.as_str()), (None, local.as_str()));
    assert_eq!(out.remote, "origin");
    assert_eq!(out.url, bare.to_string_lossy());
    assert_eq!(tip(&fx.work, "refs/remotes/origin/task/x").as_deref(), Some(local.as_str()));

    // A fast-forward on top, then nothing to do.
    write(&fx.work, "t.txt", "t2\n");
    git(&fx.work, &["commit", "-qam", "more"]);
    let out = push(&g, "task/x").unwrap();
    assert_eq!(out.old.as_deref(), Some(local.as_str()));
    let out = push(&g, "task/x").unwrap();
    assert!(out.up_to_date);
    assert!(out.to_string().contains("already at"));
}

#[test]
fn push_works_with_a_file_url() {
    let fx = Fx::repo();
    let bare = fx.add_bare_remote("fileurl");
    git(&fx.work, &["remote", "set-url", "origin", &format!("file://{}", bare.display())]);
    task_branch(&fx);
    push(&fx.git_push(), "task/x").unwrap();
    assert_eq!(tip(&bare, "refs/heads/task/x"), tip(&fx.work, "refs/heads/task/x"));
}

#[test]
fn push_refuses_a_branch_outside_the_patterns() {
    let fx = Fx::repo();
    let bare = fx.add_bare_remote("pat");
    let before = tip(&bare, "refs/heads/main");
    write(&fx.work, "a.txt", "two\n");
    git(&fx.work, &["commit", "-qam", "to main"]);
    let e = push(&fx.git_push(), "main").unwrap_err();
    assert_eq!(e.to_string(), "branch `main` does not match the push patterns task/*");
    assert_eq!(tip(&bare, "refs/heads/main"), before);
}

#[test]
fn push_refuses_a_non_fast_forward_and_leaves_the_remote_alone() {
    let fx = Fx::repo();
    let bare = fx.add_bare_remote("nff");
    task_branch(&fx);
    let g = fx.git_push();
    push(&g, "task/x").unwrap();

    // Someone else pushes to task/x from another clone.
    let other = fx.base.join("other");
    git(
        &fx.base,
        &["clone", "-q", "-b", "task/x", bare.to_str().unwrap(), other.to_str().unwrap()],
    );
    write(&other, "o.txt", "theirs\n");
    git(&other, &["add", "o.txt"]);
    git(&other, &["commit", "-qm", "theirs"]);
    git(&other, &["push", "-q", "origin", "task/x"]);
    let remote_before = tip(&bare, "refs/heads/task/x");

    write(&fx.work, "t.txt", "mine\n");
    git(&fx.work, &["commit", "-qam", "mine"]);
    let e = push(&g, "task/x").unwrap_err();
    assert_eq!(
        e.to_string(),
        "non-fast-forward: origin/task/x has commits that task/x lacks; pull/rebase first — hands never force-pushes"
    );
    assert_eq!(tip(&bare, "refs/heads/task/x"), remote_before);

    // Even when the local repository has the remote's commit (fetched), a rewrite is refused.
    git(&fx.work, &["fetch", "-q", "origin"]);
    let e = push(&g, "task/x").unwrap_err();
    assert!(matches!(e, GitError::NonFastForward { .. }), "{e}");
    assert_eq!(tip(&bare, "refs/heads/task/x"), remote_before);
}

#[test]
fn push_is_off_unless_configured_and_needs_the_network_grant() {
    let fx = Fx::repo();
    let bare = fx.add_bare_remote("off");
    task_branch(&fx);
    let e = push(&fx.git(), "task/x").unwrap_err();
    assert_eq!(e.to_string(), "pushing is off: tools-git has no push configured");
    let no_net = fx.git_with(GitSettings {
        author: None,
        push: Some(PushSettings::default()),
        network: false,
        ..GitSettings::default()
    });
    let e = push(&no_net, "task/x").unwrap_err();
    assert_eq!(e.to_string(), "push needs the `network` grant for tools-git");
    assert_eq!(tip(&bare, "refs/heads/task/x"), None);
}

#[test]
fn push_refuses_ssh_without_a_usable_agent_and_remote_paths_outside_the_roots() {
    let fx = Fx::repo();
    task_branch(&fx);
    git(&fx.work, &["remote", "add", "origin", "git@example.com:o/r.git"]);
    // An agent socket that is not there (and not this process's SSH_AUTH_SOCK): refused before
    // any connection, naming the remote's URL.
    let sock = fx.base.join("no-agent.sock");
    let g = fx.git_with(GitSettings {
        push: Some(PushSettings { ssh_auth_sock: Some(sock), ..PushSettings::default() }),
        network: true,
        ..GitSettings::default()
    });
    let e = push(&g, "task/x").unwrap_err();
    assert!(matches!(e, GitError::PushSshSetup { .. }), "{e}");
    assert!(e.to_string().contains("git@example.com:o/r.git"), "{e}");
    assert!(e.to_string().contains("push.ssh_auth_sock"), "{e}");
    git(&fx.work, &["remote", "set-url", "origin", "ssh://git@example.com/o/r.git"]);
    assert!(matches!(push(&g, "task/x"), Err(GitError::PushSshSetup { .. })));
    // Malformed SSH URLs are refused by form.
    for url in ["ssh://u:pw@example.com/r.git", "ssh://example.com", "[::1]:r.git"] {
        git(&fx.work, &["remote", "set-url", "origin", url]);
        let e = push(&g, "task/x").unwrap_err();
        assert!(matches!(e, GitError::PushUrl { .. }), "{url}: {e}");
    }
    let g = fx.git_push();

    let outside = fx.out.join("bare.git");
    git(&fx.base, &["init", "-q", "--bare", outside.to_str().unwrap()]);
    git(&fx.work, &["remote", "set-url", "origin", outside.to_str().unwrap()]);
    let e = push(&g, "task/x").unwrap_err();
    assert!(e.to_string().contains("outside the roots"), "{e}");
    assert_eq!(tip(&outside, "refs/heads/task/x"), None);

    // A remote in a read-only root is refused too.
    let ro = fx.ro.join("bare.git");
    git(&fx.base, &["init", "-q", "--bare", ro.to_str().unwrap()]);
    git(&fx.work, &["remote", "set-url", "origin", ro.to_str().unwrap()]);
    let e = push(&g, "task/x").unwrap_err();
    assert!(e.to_string().contains("read-only root"), "{e}");
    assert_eq!(tip(&ro, "refs/heads/task/x"), None);

    git(&fx.work, &["remote", "remove", "origin"]);
    let e = push(&g, "task/x").unwrap_err();
    assert!(e.to_string().contains("no remote `origin`"), "{e}");
}

/// libgit2's local transport writes to a remote's `url` even when a `pushurl` is set, while
/// the push URL is the one checked: a `pushurl` in a writable root must not carry the write to
/// a `url` outside the roots.
#[test]
fn a_pushurl_cannot_carry_the_write_to_the_url() {
    let fx = Fx::repo();
    let ok = fx.add_bare_remote("ok");
    let victim = fx.out.join("victim.git");
    git(&fx.base, &["init", "-q", "--bare", "-b", "main", victim.to_str().unwrap()]);
    git(&fx.work, &["push", "-q", victim.to_str().unwrap(), "main"]);
    let before = refs(&victim);
    git(&fx.work, &["remote", "set-url", "origin", victim.to_str().unwrap()]);
    git(&fx.work, &["config", "remote.origin.pushurl", ok.to_str().unwrap()]);
    task_branch(&fx);
    push(&fx.git_push(), "task/x").unwrap();
    assert_eq!(tip(&ok, "refs/heads/task/x"), tip(&fx.work, "refs/heads/task/x"));
    assert_eq!(refs(&victim), before, "the push wrote to the url outside the roots");
}

/// libgit2 decodes `%`-escapes in a file:// URL, so the path it writes to is not the one
/// checked: `p%2ex.git` (a bare repository in a writable root, which passes every check) would
/// be written as `p.x.git` — a symlink to a repository outside the roots. Refused, neither
/// changed (the plain file:// URL works, above).
#[test]
fn a_percent_escaped_file_url_is_refused() {
    let fx = Fx::repo();
    let decoy = fx.remote.join("p%2ex.git");
    git(&fx.base, &["init", "-q", "--bare", "-b", "main", decoy.to_str().unwrap()]);
    let victim = fx.out.join("victim.git");
    git(&fx.base, &["init", "-q", "--bare", "-b", "main", victim.to_str().unwrap()]);
    git(&fx.work, &["push", "-q", victim.to_str().unwrap(), "main"]);
    let before = refs(&victim);
    std::os::unix::fs::symlink(&victim, fx.remote.join("p.x.git")).unwrap();
    git(&fx.work, &["remote", "add", "origin", &format!("file://{}", decoy.display())]);
    task_branch(&fx);
    let e = push(&fx.git_push(), "task/x").unwrap_err();
    assert!(e.to_string().contains("`%`-escapes"), "{e}");
    assert_eq!(refs(&victim), before, "the push wrote through the decoded path");
    assert!(tip(&decoy, "refs/heads/task/x").is_none());
}
