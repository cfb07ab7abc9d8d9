//! The in-run walls' rules, tested on paths (no sandbox needed).

use super::*;

fn root(p: &str, writable: bool) -> super::super::super::Root {
    super::super::super::Root { path: p.into(), writable }
}

fn walls() -> Walls {
    let roots = vec![root("/w", true), root("/w/ro", false)];
    let rules: Vec<String> =
        [".git/hooks", ".git/modules/**/config", ".envrc", ".gemini", ".kiro/settings/mcp.json"]
            .iter()
            .map(|s| s.to_string())
            .collect();
    let absolute = vec![
        PathBuf::from("/w/repo/.husky/_"),
        PathBuf::from("/w/home/.ssh"),
        PathBuf::from("/w/ro/x"),
        PathBuf::from("/elsewhere/y"),
    ];
    Walls::new(&roots, &rules, &[&absolute], false)
}

fn refused(v: Verdict) -> bool {
    matches!(v, Verdict::Refuse(_))
}

#[test]
fn a_name_a_case_folding_folder_would_hand_over_as_protected_is_refused() {
    let (w, d) = (walls(), Path::new("/w/a"));
    for name in [".ENVRC", ".env\u{200B}rc", ".Gemini"] {
        assert!(refused(w.verdict(d, name.as_bytes(), Kind::File)), "{name:?}");
    }
    let kelvin = Path::new("/w/a/.\u{212A}iro/settings");
    assert!(refused(w.verdict(kelvin, b"MCP.json", Kind::File)));
    assert_eq!(w.verdict(d, b".envrc.example", Kind::File), Verdict::Allow);
}

#[test]
fn new_repositories_allowed_open_only_the_new_git_dir_and_not_its_config_or_hooks() {
    let base = std::env::temp_dir().join(format!("hands-walls-{}", std::process::id()));
    std::fs::create_dir_all(base.join(".git")).unwrap();
    let roots = vec![root(base.to_str().unwrap(), true)];
    let rules = vec![".git/modules/*/config".to_string(), ".envrc".to_string()];
    let w = Walls::new(&roots, &rules, &[], true);
    // The existing repository's `.git` may be asked for (it fails with EEXIST) but stays
    // walled; a new one is the run's own.
    assert_eq!(w.verdict(&base, b".git", Kind::Dir), Verdict::Allow);
    assert!(refused(w.verdict(&base.join(".git/modules/m"), b"config", Kind::File)));
    assert_eq!(w.verdict(&base.join("new"), b".git", Kind::Dir), Verdict::Allow);
    let new = base.join("new/.git");
    assert_eq!(w.verdict(&new, b"HEAD", Kind::File), Verdict::Allow);
    assert_eq!(w.verdict(&new, b"config.lock", Kind::File), Verdict::Allow);
    assert_eq!(w.verdict(&new, b"config", Kind::Rename), Verdict::CheckConfig);
    assert_eq!(w.verdict(&new.join("modules/m"), b"config", Kind::Rename), Verdict::CheckConfig);
    for (dir, name, kind) in [
        (new.clone(), &b"config"[..], Kind::File),
        (new.clone(), b"config", Kind::Link),
        (new.clone(), b"commondir", Kind::File),
        (new.clone(), b"config.worktree", Kind::Rename),
        (new.join("hooks"), b"pre-commit", Kind::File),
        (new.join("hooks"), b"pre-commit", Kind::Rename),
        (new.join("hooks"), b"x.sample", Kind::Symlink),
        (new.clone(), b"hooks", Kind::Symlink),
        (new.clone(), b"hooks", Kind::Rename),
    ] {
        assert!(
            refused(w.verdict(&dir, name, kind)),
            "{}/{}",
            dir.display(),
            String::from_utf8_lossy(name)
        );
    }
    assert_eq!(w.verdict(&new, b"hooks", Kind::Dir), Verdict::Allow);
    assert_eq!(w.verdict(&new.join("hooks"), b"pre-commit.sample", Kind::File), Verdict::Allow);
    // A branch named `config` is a ref, not a config.
    assert_eq!(w.verdict(&new.join("refs/heads"), b"config", Kind::Rename), Verdict::Allow);
    // Only a folder: a `.git` file or link is refused even when new repositories are allowed.
    assert!(refused(w.verdict(&base.join("n3"), b".git", Kind::File)));
    assert!(refused(w.verdict(&base.join("n3"), b".git", Kind::Symlink)));
    assert!(refused(w.verdict(&base.join("new"), b".envrc", Kind::File)));
    assert!(refused(Walls::new(&roots, &rules, &[], false).verdict(
        &base.join("n2"),
        b".git",
        Kind::Dir
    )));
    std::fs::remove_dir_all(&base).unwrap();
}

#[test]
fn existing_protected_files_and_their_git_lock_files_are_not_written() {
    let w = walls();
    let no = |p: &str| w.written(Path::new(p)).is_some();
    assert!(no("/w/a/.git/hooks/pre-commit"));
    assert!(no("/w/a/.envrc"));
    assert!(no("/w/a/.envrc.lock"), "the lock git renames onto a protected name");
    assert!(no("/w/a/.ENVRC.LOCK"));
    assert!(no("/w/a/.git"), "a gitdir link file");
    assert!(no("/w/home/.ssh/id"), "below an absolute path of the spec");
    // Positive controls: ordinary files, a lone `.lock`, outside the writable roots.
    assert!(!no("/w/a/src/main.rs"));
    assert!(!no("/w/a/.lock"));
    assert!(!no("/w/a/.git/index.lock"));
    assert!(no("/w/ro/.envrc"), "reached only when the read-only root's bind is gone");
    assert!(no("/w/ro/sub/file"));
    assert!(w.in_read_only_root(Path::new("/w/ro/sub")) && !w.in_read_only_root(Path::new("/w/a")));
    assert!(!no("/tmp/.envrc"));
    let why = w.written(Path::new("/w/a/.envrc.lock")).unwrap_or_default();
    assert!(why.contains("lock file") && why.contains(".envrc"), "{why}");
}

#[test]
fn names_refused_under_writable_roots_only() {
    let w = walls();
    assert!(refused(w.verdict(Path::new("/w/sub"), b".git", Kind::Dir)));
    assert!(refused(w.verdict(Path::new("/w"), b".GIT/", Kind::Dir)));
    assert!(refused(w.verdict(Path::new("/w/a"), b".envrc", Kind::File)));
    assert!(refused(w.verdict(Path::new("/w/.git/modules/x"), b"config", Kind::File)));
    // A submodule named `a/b` (its git dir `.git/modules/a/b`), and one inside another.
    assert!(refused(w.verdict(Path::new("/w/.git/modules/a/b"), b"config", Kind::File)));
    assert!(refused(w.verdict(Path::new("/w/.git/modules/a/modules/b"), b"config", Kind::File)));
    assert!(refused(w.verdict(Path::new("/w/.git/modules/a"), b"b", Kind::Rename)));
    assert_eq!(w.verdict(Path::new("/w/.git/modules"), b"config", Kind::File), Verdict::Allow);
    assert_eq!(w.verdict(Path::new("/w/.git/modules/a"), b"b", Kind::Dir), Verdict::Allow);
    assert!(refused(w.verdict(Path::new("/w/.gemini"), b"settings.json", Kind::File)));
    assert_eq!(w.verdict(Path::new("/w/.git"), b"index.lock", Kind::File), Verdict::Allow);
    assert_eq!(w.verdict(Path::new("/w/ro"), b".git", Kind::Dir), Verdict::Allow);
    assert_eq!(w.verdict(Path::new("/tmp"), b".git", Kind::Dir), Verdict::Allow);
    assert_eq!(w.verdict(Path::new("/w/src"), b"main.rs", Kind::File), Verdict::Allow);
    assert_eq!(w.verdict(Path::new("/wx"), b".git", Kind::Dir), Verdict::Allow);
}

#[test]
fn absolute_paths_are_refused_with_what_is_below_them_and_the_names_leading_there() {
    let w = walls();
    assert!(refused(w.verdict(Path::new("/w/repo/.husky"), b"_", Kind::Dir)));
    assert!(refused(w.verdict(Path::new("/w/repo/.husky/_"), b"pre-commit", Kind::File)));
    assert!(refused(w.verdict(Path::new("/w/home"), b".SSH", Kind::Dir)));
    assert!(refused(w.verdict(Path::new("/w/home/.ssh"), b"authorized_keys", Kind::File)));
    // Carried to a name on the way: refused; made plainly: allowed (a person's `.husky`).
    assert!(refused(w.verdict(Path::new("/w/repo"), b".husky", Kind::Rename)));
    assert!(refused(w.verdict(Path::new("/w"), b"home", Kind::Symlink)));
    assert_eq!(w.verdict(Path::new("/w/repo"), b".husky", Kind::Dir), Verdict::Allow);
    assert_eq!(w.verdict(Path::new("/w/repo/.husky"), b"pre-commit", Kind::File), Verdict::Allow);
    // In a read-only root or outside the roots: nothing to check.
    assert_eq!(w.verdict(Path::new("/w/ro"), b"x", Kind::File), Verdict::Allow);
    assert_eq!(w.verdict(Path::new("/elsewhere"), b"y", Kind::File), Verdict::Allow);
    assert_eq!(w.verdict(Path::new("/w/home"), b".sshx", Kind::Dir), Verdict::Allow);
}

#[test]
fn the_last_piece_of_a_git_dir_is_refused_outside_dot_git() {
    let w = walls();
    let has =
        |names: &'static [&'static str]| move |n: &[u8]| names.iter().any(|x| x.as_bytes() == n);
    let all = has(&["HEAD", "refs", "objects"]);
    assert!(w.makes_git_dir(Path::new("/w/evil"), b"config", all).is_some());
    // A control file beside a HEAD, or a HEAD beside one, with no refs or objects yet
    // (the file tools could add those), in either case.
    for (name, there) in [
        (&b"config"[..], &["HEAD"][..]),
        (b"hooks", &["HEAD"]),
        (b"Config.Worktree", &["HEAD"]),
        (b"HEAD", &["config"]),
        (b"head", &["hooks"]),
    ] {
        assert!(w.makes_git_dir(Path::new("/w/evil"), name, has(there)).is_some());
    }
    assert!(w.makes_git_dir(Path::new("/w/evil"), b"config", has(&["refs"])).is_none());
    assert!(w.makes_git_dir(Path::new("/w/evil"), b"hooks", has(&["objects"])).is_none());
    assert!(
        w.makes_git_dir(Path::new("/w/evil"), b"HEAD", has(&["HEAD", "refs", "objects"])).is_some()
    );
    // HEAD and commondir make a git dir without refs (its common dir has them).
    assert!(
        w.makes_git_dir(Path::new("/w/evil"), b"commondir", has(&["HEAD", "commondir"])).is_some()
    );
    assert!(w.makes_git_dir(Path::new("/w/evil"), b"HEAD", has(&["HEAD", "refs"])).is_none());
    assert!(w.makes_git_dir(Path::new("/w/.git"), b"HEAD", all).is_none());
    assert!(w.makes_git_dir(Path::new("/w/.git/modules/m"), b"HEAD", all).is_none());
    assert!(w.makes_git_dir(Path::new("/tmp/x"), b"HEAD", all).is_none());
    assert!(w.makes_git_dir(Path::new("/w/evil"), b"notes", all).is_none());
}

#[test]
fn carried_names_refused_on_the_way_to_a_rule() {
    let w = walls();
    assert!(refused(w.verdict(Path::new("/w"), b".kiro", Kind::Rename)));
    assert!(refused(w.verdict(Path::new("/w/.kiro"), b"settings", Kind::Link)));
    assert_eq!(w.verdict(Path::new("/w"), b".kiro", Kind::Dir), Verdict::Allow);
    assert_eq!(w.verdict(Path::new("/w"), b"kiro", Kind::Rename), Verdict::Allow);
}
