//! Unit tests of lexical placement, policy matching and the descriptor-based opens.

use super::*;
use crate::openat::walk_nofollow;
use std::os::unix::fs::symlink;

fn resolver(roots: &[(&Path, bool)], lists: PolicyLists) -> Resolver {
    let specs: Vec<RootSpec> =
        roots.iter().map(|(p, w)| RootSpec { path: p.to_path_buf(), writable: *w }).collect();
    Resolver::new(&specs, Policy::new(&lists).unwrap()).unwrap()
}

fn tree() -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(t.path()).unwrap();
    std::fs::create_dir_all(base.join("proj/ro")).unwrap();
    std::fs::create_dir_all(base.join("proj-secrets")).unwrap();
    std::fs::write(base.join("proj/a.txt"), "a").unwrap();
    (t, base)
}

#[test]
fn locate_refuses_dotdot_nul_and_sibling_prefixes() {
    let (_t, base) = tree();
    let r = resolver(&[(&base.join("proj"), true)], PolicyLists::default());
    assert!(matches!(r.locate("../x"), Err(PathError::DotDot { .. })));
    assert!(matches!(r.locate("a/../../x"), Err(PathError::DotDot { .. })));
    // `~` is not expanded: refused with a hint, never a folder named `~` under the root.
    assert!(matches!(r.locate("~/notes.txt"), Err(PathError::Tilde { .. })));
    assert!(matches!(r.locate("~"), Err(PathError::Tilde { .. })));
    assert!(r.locate("a/~/b").is_ok(), "a `~` further down is an ordinary name");
    assert!(r.locate("~x").is_ok(), "only `~` itself is refused");
    assert!(matches!(r.locate("a\0b"), Err(PathError::Nul)));
    let sibling = base.join("proj-secrets/k");
    assert!(matches!(r.locate(sibling.to_str().unwrap()), Err(PathError::Outside { .. })));
    let loc = r.locate("./sub/./f.txt").unwrap();
    assert_eq!(loc.rel, PathBuf::from("sub/f.txt"));
    assert_eq!(loc.abs, base.join("proj/sub/f.txt"));
    assert_eq!(r.locate("").unwrap().rel, PathBuf::new());
}

#[test]
fn the_most_specific_root_decides() {
    let (_t, base) = tree();
    let r = resolver(
        &[(&base.join("proj"), true), (&base.join("proj/ro"), false)],
        PolicyLists::default(),
    );
    assert_eq!(r.locate("ro/x").unwrap().root, 1);
    assert_eq!(r.locate("x").unwrap().root, 0);
    assert!(matches!(r.prepare_write("ro/x", true), Err(PathError::ReadOnlyRoot { .. })));
    assert!(r.prepare_write("x", true).is_ok());
}

/// A read-only root is the folder pinned at startup, not its name: moved aside inside the
/// writable root (as a command can do), it stays read-only under its new name, while a folder
/// beside it stays writable (the positive control) and a new folder at the old name belongs to
/// the writable root (the launcher refuses commands there until the daemon restarts).
#[test]
fn a_read_only_root_moved_aside_stays_read_only_under_its_new_name() {
    let (_t, base) = tree();
    std::fs::create_dir_all(base.join("proj/ro")).unwrap();
    std::fs::write(base.join("proj/ro/kept.txt"), "original").unwrap();
    let r = resolver(
        &[(&base.join("proj"), true), (&base.join("proj/ro"), false)],
        PolicyLists::default(),
    );
    std::fs::rename(base.join("proj/ro"), base.join("proj/aside")).unwrap();
    for path in ["aside/kept.txt", "aside/new.txt", "aside/deeper/new.txt"] {
        let got = r.prepare_write(path, true);
        assert!(matches!(got, Err(PathError::ReadOnlyRoot { .. })), "{path}: {got:?}");
    }
    assert!(!base.join("proj/aside/deeper").exists(), "no folder was made in the moved root");
    assert_eq!(std::fs::read_to_string(base.join("proj/aside/kept.txt")).unwrap(), "original");
    std::fs::create_dir_all(base.join("proj/other")).unwrap();
    assert!(r.prepare_write("other/x", true).is_ok(), "a folder beside it stays writable");
    assert!(r.prepare_write("asidex/y", true).is_ok(), "a name that only starts alike too");
}

#[test]
fn protected_rules_match_at_any_depth_but_only_whole_components() {
    let lists =
        PolicyLists { protected: vec![".git/hooks".into(), ".envrc".into()], ..Default::default() };
    let p = Policy::new(&lists).unwrap();
    assert!(p.protected(Path::new(".git/hooks/pre-commit")).is_some());
    assert!(p.protected(Path::new("sub/.git/hooks")).is_some());
    assert!(p.protected(Path::new("a/.envrc")).is_some());
    assert!(p.protected(Path::new("src/hooks/x")).is_none());
    assert!(p.protected(Path::new(".git/hooksy")).is_none());
    assert!(p.protected(Path::new(".envrc.bak")).is_none());
}

/// As a command's run matches them (decision 0046's walls, lowercased): a case-folding folder
/// gives `.ENVRC` to direnv as `.envrc` and `.GIT/Hooks` to git as its hooks.
#[test]
fn protected_rules_match_in_any_ascii_case_and_name_the_rule_as_written() {
    let lists =
        PolicyLists { protected: vec![".git/Hooks".into(), ".envrc".into()], ..Default::default() };
    let p = Policy::new(&lists).unwrap();
    assert_eq!(p.protected(Path::new("a/.ENVRC")).as_deref(), Some(".envrc"));
    assert_eq!(p.protected(Path::new(".GIT/hooks/x")).as_deref(), Some(".git/Hooks"));
    assert!(p.protected_leaf(std::ffi::OsStr::new(".EnvRC")));
    assert!(p.protected(Path::new(".envrcs")).is_none());
    assert!(!p.protected_leaf(std::ffi::OsStr::new("envrc")));
}

#[test]
fn a_star_in_a_protected_rule_matches_one_whole_component() {
    let lists = PolicyLists {
        protected: vec![".git/worktrees/*/commondir".into(), ".git/commondir".into()],
        ..Default::default()
    };
    let p = Policy::new(&lists).unwrap();
    assert!(p.protected(Path::new(".git/worktrees/wt/commondir")).is_some());
    assert!(p.protected(Path::new("app/.git/worktrees/x/commondir")).is_some());
    assert!(p.protected(Path::new(".git/commondir")).is_some());
    // One component only, and only under `.git/worktrees`.
    assert!(p.protected(Path::new(".git/worktrees/a/b/commondir")).is_none());
    assert!(p.protected(Path::new("src/worktrees/x/commondir")).is_none());
    assert!(p.protected(Path::new(".git/worktrees/commondir")).is_none());
    assert!(p.protected_leaf(std::ffi::OsStr::new("commondir")));
    assert!(!p.protected_leaf(std::ffi::OsStr::new("objects")));
}

/// Found by the eighth attack pass: `.git/modules/*/config` missed the git dir of a submodule
/// named `a/b` (`.git/modules/a/b`) and of one inside another (`.git/modules/a/modules/b`).
#[test]
fn a_double_star_in_a_protected_rule_matches_one_or_more_components() {
    let lists = PolicyLists {
        protected: vec![".git/modules/**/hooks".into(), ".git/modules/**/config".into()],
        ..Default::default()
    };
    let p = Policy::new(&lists).unwrap();
    for rel in [
        ".git/modules/lib/hooks/post-checkout",
        "app/.git/modules/x/hooks",
        ".git/modules/a/b/hooks",
        ".git/modules/a/b/config",
        ".git/modules/a/modules/b/config",
    ] {
        assert!(p.protected(Path::new(rel)).is_some(), "{rel}");
    }
    // At least one component, and only under `.git/modules`.
    for rel in [".git/modules/hooks", ".git/modules/config", "src/modules/x/config", ".git/config"]
    {
        assert!(p.protected(Path::new(rel)).is_none(), "{rel}");
    }
    assert!(p.protected_leaf(std::ffi::OsStr::new("config")));
}

/// The rules' matchers agree with trying every start, end and split of the path (what they did
/// before the ninth attack pass's deep `write` made that take seconds), over every rule of up to
/// four components and path of up to six drawn from a few names.
#[test]
fn the_rule_matchers_agree_with_trying_every_way() {
    fn fits(rule: &[&str], comps: &[&str]) -> bool {
        match rule.split_first() {
            None => comps.is_empty(),
            Some((&"**", rest)) => (1..=comps.len()).any(|n| fits(rest, &comps[n..])),
            Some((r, rest)) => comps
                .split_first()
                .is_some_and(|(c, more)| (*r == "*" || r == c) && fits(rest, more)),
        }
    }
    let within = |rule: &[&str], comps: &[&str]| {
        (0..comps.len()).any(|s| (s + 1..=comps.len()).any(|e| fits(rule, &comps[s..e])))
    };
    let ends = |rule: &[&str], comps: &[&str]| (0..comps.len()).any(|s| fits(rule, &comps[s..]));
    let words = ["a", "b", "*", "**"];
    let names = ["a", "b", "c"];
    // Every sequence of `len` items of `of`, by counting in base `of.len()`.
    fn all<'a>(of: &[&'a str], len: usize) -> Vec<Vec<&'a str>> {
        (0..of.len().pow(len as u32))
            .map(|mut n| {
                (0..len)
                    .map(|_| {
                        let w = of[n % of.len()];
                        n /= of.len();
                        w
                    })
                    .collect()
            })
            .collect()
    }
    let mut checked = 0;
    for rule in (0..=4).flat_map(|n| all(&words, n)) {
        for comps in (0..=6).flat_map(|n| all(&names, n)) {
            assert_eq!(rule_fits(&rule, &comps), fits(&rule, &comps), "{rule:?} {comps:?}");
            let w = !rule.is_empty() && within(&rule, &comps);
            assert_eq!(rule_within(&rule, &comps), w, "within {rule:?} {comps:?}");
            assert_eq!(rule_ends(&rule, &comps), ends(&rule, &comps), "ends {rule:?} {comps:?}");
            checked += 1;
        }
    }
    assert!(checked > 300_000, "{checked}");
    // Deep paths answer at once (the brute force took seconds at 185 components).
    let deep: Vec<&str> = [".git", "modules"].repeat(2_000);
    let rule = [".git", "modules", "**", "config"];
    assert!(!rule_within(&rule, &deep) && !rule_ends(&rule, &deep));
}

#[test]
fn secret_patterns_have_exceptions() {
    let lists = PolicyLists {
        secret_patterns: vec![".env".into(), ".env.*".into(), "*.pem".into()],
        secret_exceptions: vec![".env.example".into()],
        ..Default::default()
    };
    let p = Policy::new(&lists).unwrap();
    assert!(p.is_secret(Path::new("/r/.env")));
    assert!(p.is_secret(Path::new("/r/.env.local")));
    assert!(p.is_secret(Path::new("/r/k/server.pem")));
    assert!(!p.is_secret(Path::new("/r/.env.example")));
    assert!(!p.is_secret(Path::new("/r/env.txt")));
}

#[test]
fn denied_by_name_and_by_identity() {
    let (_t, base) = tree();
    std::fs::create_dir_all(base.join("home/.ssh")).unwrap();
    std::fs::write(base.join("home/.ssh/id_rsa"), "key").unwrap();
    std::fs::hard_link(base.join("home/.ssh/id_rsa"), base.join("proj/copy")).unwrap();
    let lists = PolicyLists { credentials: vec![base.join("home/.ssh")], ..Default::default() };
    let r = resolver(&[(&base.join("proj"), true)], lists);
    assert!(matches!(r.open_file("copy"), Err(PathError::Denied { .. })));
    assert!(matches!(r.open_walked(&base.join("proj/copy")), Err(PathError::Denied { .. })));
    assert!(r.policy().denied(&base.join("home/.ssh/config"), None).is_some());
    assert!(r.open_file("a.txt").is_ok());
}

/// A trusted path is read-only to every write: under its own name, missing or not (and what
/// would be made beneath a trusted folder), under its real name when it is a link, and under
/// another name of the same file (a hard link, found by identity).
#[test]
fn trusted_paths_are_refused_by_name_real_name_and_identity() {
    let (_t, base) = tree();
    let proj = base.join("proj");
    std::fs::create_dir_all(proj.join("dotfiles")).unwrap();
    std::fs::create_dir_all(proj.join("bin")).unwrap();
    std::fs::write(proj.join("dotfiles/rc"), "rc").unwrap();
    symlink("dotfiles/rc", proj.join(".rc")).unwrap();
    std::fs::write(proj.join("bin/hands"), "binary").unwrap();
    std::fs::hard_link(proj.join("bin/hands"), proj.join("bin/hands-HASH")).unwrap();
    let t = |p: &str| HostPath { path: proj.join(p), what: format!("`{p}`"), remedy: "r".into() };
    let lists = PolicyLists {
        host_paths: vec![t(".rc"), t("bin/hands"), t("bin/launcher"), t(".config/unit")],
        ..Default::default()
    };
    let r = resolver(&[(&proj, true)], lists);
    for p in [".rc", "dotfiles/rc", "bin/hands", "bin/hands-HASH", "bin/launcher", ".config/unit/x"]
    {
        match r.prepare_write(p, true) {
            Err(PathError::Trusted { .. }) => {}
            other => panic!("{p}: {:?}", other.map(|_| ())),
        }
    }
    assert!(!proj.join(".config").exists(), "a refused write made its folders");
    // Positive controls: a neighbour of each is written.
    for p in ["dotfiles/other", "bin/other", ".config/other"] {
        assert!(r.prepare_write(p, true).is_ok(), "{p}");
    }
}

#[test]
fn open_walked_follows_no_symlink_at_all() {
    let (_t, base) = tree();
    symlink("a.txt", base.join("proj/link")).unwrap();
    let r = resolver(&[(&base.join("proj"), true)], PolicyLists::default());
    assert!(r.open_walked(&base.join("proj/link")).is_err());
    assert!(r.open_walked(&base.join("proj/a.txt")).is_ok());
    // open_file follows a link that stays beneath the root, and reports the real path.
    assert_eq!(r.open_file("link").unwrap().abs, base.join("proj/a.txt"));
}

#[test]
fn opens_report_the_real_path_with_or_without_links_on_the_way() {
    let (_t, base) = tree();
    std::fs::create_dir_all(base.join("proj/real/deny")).unwrap();
    std::fs::write(base.join("proj/real/f.txt"), "f").unwrap();
    std::fs::write(base.join("proj/real/deny/k"), "k").unwrap();
    symlink("real", base.join("proj/alias")).unwrap();
    let lists = PolicyLists { deny: vec![base.join("proj/real/deny")], ..PolicyLists::default() };
    let r = resolver(&[(&base.join("proj"), true)], lists);
    // No link on the way: the located path is the real one, spelt as the kernel spells it
    // (compared as strings: `Path` equality would let a trailing `/` through).
    let shown = |p: PathBuf| p.into_os_string().into_string().unwrap();
    let want = |rel: &str| shown(base.join(rel));
    assert_eq!(shown(r.open_file("real/f.txt").unwrap().abs), want("proj/real/f.txt"));
    assert_eq!(shown(r.open_dir("real/").unwrap().abs), want("proj/real"));
    for root in ["", ".", "./"] {
        assert_eq!(shown(r.open_dir(root).unwrap().abs), want("proj"), "{root:?}");
    }
    let abs_root = format!("{}/", base.join("proj").display());
    assert_eq!(shown(r.open_dir(&abs_root).unwrap().abs), want("proj"));
    // A folder link on the way: the kernel's name for what was opened.
    assert_eq!(r.open_file("alias/f.txt").unwrap().abs, base.join("proj/real/f.txt"));
    assert_eq!(r.open_dir("alias").unwrap().abs, base.join("proj/real"));
    // The policy sees the real path either way.
    assert!(matches!(r.open_file("real/deny/k"), Err(PathError::Denied { .. })));
    assert!(matches!(r.open_file("alias/deny/k"), Err(PathError::Denied { .. })));
    assert!(matches!(r.open_dir("alias/deny"), Err(PathError::Denied { .. })));
}

#[test]
fn prepare_write_makes_parents_beneath_the_root_only() {
    let (_t, base) = tree();
    symlink(base.join("proj-secrets"), base.join("proj/out")).unwrap();
    let r = resolver(&[(&base.join("proj"), true)], PolicyLists::default());
    let t = r.prepare_write("new/deeper/f.txt", true).unwrap();
    assert_eq!(t.abs, base.join("proj/new/deeper/f.txt"));
    assert!(t.existing.is_none());
    assert!(matches!(r.prepare_write("out/x/f.txt", true), Err(PathError::Escapes { .. })));
    assert!(!base.join("proj-secrets/x").exists());
}

#[test]
fn walk_fallback_refuses_every_symlink() {
    let (_t, base) = tree();
    symlink("a.txt", base.join("proj/link")).unwrap();
    let root = Root::pin(&RootSpec { path: base.join("proj"), writable: true }).unwrap();
    assert!(walk_nofollow(root.fd(), Path::new("link"), OFlags::RDONLY).is_err());
    assert!(walk_nofollow(root.fd(), Path::new("a.txt"), OFlags::RDONLY).is_ok());
}

/// Found by the resolver fuzz check: folders for a write were made on the lexical path, so a
/// link inside the root (`l -> denied`) let `prepare_write("l/c/x", true)` make `denied/c`
/// before the real-path check refused the write.
#[test]
fn prepare_write_makes_no_folder_inside_a_denied_or_protected_folder_through_a_link() {
    let (_t, base) = tree();
    let proj = base.join("proj");
    std::fs::create_dir_all(proj.join("denied")).unwrap();
    std::fs::create_dir_all(proj.join(".git/hooks")).unwrap();
    symlink("denied", proj.join("l")).unwrap();
    symlink(".git/hooks", proj.join("h")).unwrap();
    let lists = PolicyLists {
        deny: vec![proj.join("denied")],
        protected: vec![".git/hooks".into()],
        ..Default::default()
    };
    let r = resolver(&[(&proj, true)], lists);
    assert!(matches!(r.prepare_write("l/c/x", true), Err(PathError::Denied { .. })));
    assert!(matches!(r.prepare_write("h/c/x", true), Err(PathError::Protected { .. })));
    assert_eq!(std::fs::read_dir(proj.join("denied")).unwrap().count(), 0);
    assert_eq!(std::fs::read_dir(proj.join(".git/hooks")).unwrap().count(), 0);
    // The paired positive control: a new folder beside them is made, and stays once the write
    // keeps it.
    r.prepare_write("new/c/x", true).unwrap().made.keep();
    assert!(proj.join("new/c").is_dir());
}

/// A write that fails after its checks drops its target without keeping the folders made for
/// it: they go again, innermost first, each only while it is empty.
#[test]
fn a_target_dropped_unkept_takes_back_only_the_empty_folders_it_made() {
    let (_t, base) = tree();
    let proj = base.join("proj");
    let r = resolver(&[(&proj, true)], PolicyLists::default());
    let t = r.prepare_write("gone/a/b/f.txt", true).unwrap();
    assert!(proj.join("gone/a/b").is_dir());
    drop(t);
    assert!(!proj.join("gone").exists(), "an unkept target left its folders");
    let t = r.prepare_write("full/a/b/f.txt", true).unwrap();
    std::fs::write(proj.join("full/a/other.txt"), "x").unwrap();
    drop(t);
    assert!(!proj.join("full/a/b").exists());
    assert!(proj.join("full/a/other.txt").exists(), "a folder filled meanwhile stays");
}

/// The byte-wise prefix test of the deny list agrees with `Path::starts_with` on clean and
/// unclean paths alike.
#[test]
fn denied_by_name_matches_whole_components_however_the_path_is_spelt() {
    let lists = PolicyLists {
        deny: vec![PathBuf::from("/srv//secrets/"), PathBuf::from("/")],
        ..Default::default()
    };
    let p = Policy::new(&lists).unwrap();
    let only = PolicyLists { deny: vec![PathBuf::from("/srv//secrets/")], ..Default::default() };
    let q = Policy::new(&only).unwrap();
    for (path, denied) in [
        ("/srv/secrets", true),
        ("/srv/secrets/k", true),
        ("/srv//secrets/./k", true),
        ("/srv/secrets/", true),
        ("/srv/secretsx/k", false),
        ("/srv/secret", false),
        ("/srv", false),
        ("/srv/./secretsx", false),
    ] {
        assert_eq!(q.denied(Path::new(path), None).is_some(), denied, "{path}");
        assert_eq!(Path::new(path).starts_with("/srv/secrets"), denied, "{path}");
        assert!(p.denied(Path::new(path), None).is_some(), "{path} is under /");
    }
}

/// `denied_near` keeps exactly the denied paths inside a base or above it, however the
/// configured path and the base are spelt.
#[test]
fn denied_near_keeps_the_paths_inside_or_above_the_base() {
    let lists = PolicyLists {
        deny: vec![PathBuf::from("/srv//secrets/"), PathBuf::from("/opt/x")],
        ..Default::default()
    };
    let p = Policy::new(&lists).unwrap();
    for (base, want) in [
        ("/srv", vec!["/srv/secrets"]),
        ("/srv/", vec!["/srv/secrets"]),
        ("/srv/./", vec!["/srv/secrets"]),
        ("/srv/secrets/k", vec!["/srv/secrets"]),
        ("/srv/secretsx", vec![]),
        ("/sr", vec![]),
        ("/", vec!["/srv/secrets", "/opt/x"]),
        ("/opt/x", vec!["/opt/x"]),
    ] {
        let got = p.denied_near(Path::new(base));
        let want: Vec<PathBuf> = want.into_iter().map(PathBuf::from).collect();
        assert_eq!(got, want, "{base}");
    }
}

/// `walk_beneath` descends only where the visitor says, never through a symlinked folder
/// (the entry's own type is a link), and past its limit fails instead of returning part.
#[test]
fn walk_beneath_follows_no_link_and_fails_past_its_limit() {
    let t = tempfile::tempdir().unwrap();
    let (inside, outside) = (t.path().join("in"), t.path().join("out"));
    std::fs::create_dir_all(inside.join("a/b")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(inside.join("a/b/f"), "").unwrap();
    std::fs::write(outside.join("canary"), "").unwrap();
    std::os::unix::fs::symlink(&outside, inside.join("link")).unwrap();
    let start = |p: &Path| vec![(p.to_path_buf(), crate::open_start(p).unwrap())];
    let mut names = Vec::new();
    let walked = crate::walk_beneath::<std::convert::Infallible>(start(&inside), 100, |l| {
        for i in l.entries.iter_mut() {
            names.push(l.folder.path.join(&i.name));
            i.descend = true;
        }
        Ok(())
    });
    names.sort();
    let want: Vec<PathBuf> = ["a", "a/b", "a/b/f", "link"].iter().map(|n| inside.join(n)).collect();
    assert_eq!(names, want);
    assert!(matches!(walked, Ok(4)));
    let stopped = crate::walk_beneath::<std::convert::Infallible>(start(&inside), 3, |l| {
        l.entries.iter_mut().for_each(|i| i.descend = true);
        Ok(())
    });
    assert!(matches!(stopped, Err(crate::WalkError::Limit { limit: 3 })), "{stopped:?}");
}

/// A file created as the daemon creates what it makes beneath a root: in the folder
/// [`Resolver::open_parent_nofollow`] opened, never replacing anything (`Ok(false)`).
fn create_file_nofollow(r: &Resolver, abs: &Path, contents: &[u8]) -> std::io::Result<bool> {
    use rustix::fs::{Mode, OFlags};
    let (dir, name) = r.open_parent_nofollow(abs)?;
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    match rustix::fs::openat(&dir, &name, flags, Mode::from_raw_mode(0o644)) {
        Ok(fd) => {
            std::io::Write::write_all(&mut std::fs::File::from(fd), contents)?;
            Ok(true)
        }
        Err(rustix::io::Errno::EXIST) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// The host-side creates go through descriptors with no symlink followed: a folder on the way
/// that is a symlink (out of the root, or even inside it) makes them fail, and nothing appears
/// at the link's target.
#[test]
fn creates_beneath_a_root_never_follow_a_symlinked_folder() {
    let t = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(t.path()).unwrap();
    let (root, out) = (base.join("root"), base.join("out"));
    std::fs::create_dir_all(root.join("real")).unwrap();
    std::fs::create_dir_all(&out).unwrap();
    std::os::unix::fs::symlink(&out, root.join("swapped")).unwrap();
    std::os::unix::fs::symlink(root.join("real"), root.join("inner")).unwrap();
    let r = Resolver::new(
        &[RootSpec { path: root.clone(), writable: true }],
        Policy::new(&PolicyLists::default()).unwrap(),
    )
    .unwrap();
    assert!(create_file_nofollow(&r, &root.join("swapped/commondir"), b"./\n").is_err());
    assert!(r.create_dir_nofollow(&root.join("swapped/.ssh"), 0o700).is_err());
    assert!(create_file_nofollow(&r, &root.join("inner/x"), b"").is_err());
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 0, "created outside the root");
    assert_eq!(std::fs::read_dir(root.join("real")).unwrap().count(), 0);
    // The positive control: a plain folder takes the file, once.
    assert!(create_file_nofollow(&r, &root.join("real/commondir"), b"./\n").unwrap());
    assert!(!create_file_nofollow(&r, &root.join("real/commondir"), b"x").unwrap());
    assert_eq!(std::fs::read(root.join("real/commondir")).unwrap(), b"./\n");
    assert!(r.create_dir_nofollow(&root.join("real/d"), 0o700).unwrap());
    assert!(create_file_nofollow(&r, &out.join("x"), b"").is_err(), "outside every root");
}

/// The file tools cannot steer what git on the host reads or runs, in any repository shape
/// and in either order of writes: no `.git` file, no config/hooks/commondir in a folder that
/// holds `HEAD`, no `HEAD` beside them; the same names elsewhere stay writable.
#[test]
fn writes_that_would_steer_git_are_refused_wherever_the_git_dir_is() {
    let t = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(t.path()).unwrap();
    for g in ["x.git", "gd"] {
        std::fs::create_dir_all(root.join(g).join("hooks")).unwrap();
        std::fs::write(root.join(g).join("HEAD"), "ref: refs/heads/main\n").unwrap();
    }
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::fs::create_dir_all(root.join("evil")).unwrap();
    std::fs::write(root.join("evil/config"), "[core]\n").unwrap();
    let r = Resolver::new(
        &[RootSpec { path: root.clone(), writable: true }],
        Policy::new(&PolicyLists::default()).unwrap(),
    )
    .unwrap();
    for refused in [
        "sub/.git",
        ".git",
        "x.git/config",
        "x.git/config.worktree",
        "x.git/commondir",
        "x.git/hooks/post-checkout",
        "gd/hooks/deeper/x",
        "evil/HEAD",
    ] {
        let got = r.prepare_write(refused, true);
        assert!(matches!(got, Err(PathError::Protected { .. })), "{refused}: {got:?}");
    }
    // Positive controls: the same names where no git dir is, and plain files in a git dir.
    for allowed in ["sub/config", "sub/hooks/x", "plain/HEAD", "x.git/description", "evil/x"] {
        assert!(r.prepare_write(allowed, true).is_ok(), "{allowed}");
    }
}
