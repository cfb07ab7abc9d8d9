//! Unit tests of `glob`'s walk cache (`walk_cache`): a settled tree is kept and answered from the
//! cache exactly as a walk answers, and every kind of change since — a file added deep in the
//! tree, one removed, an ignore file edited in place, an exclude file created inside `.git`, a
//! `.gitignore` in an ancestor, a folder time put back by hand — is seen at once.

// A failed unwrap is a failed test, which is what these assertions want.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::glob::{GlobParams, glob};
use crate::walk_cache::{self, Key};
use hands_roots::{Policy, PolicyLists, Resolver, RootSpec};
use std::fs::{self, File, FileTimes, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tempfile::TempDir;

/// A tree in a fresh folder, with a resolver over it; not yet settled.
fn tree(files: &[&str]) -> (TempDir, PathBuf, Resolver) {
    let tmp = TempDir::new().unwrap();
    let base = fs::canonicalize(tmp.path()).unwrap();
    for rel in files {
        put(&base, rel, "x\n");
    }
    let lists = PolicyLists { secret_patterns: vec![".env".into()], ..PolicyLists::default() };
    let r = Resolver::new(
        &[RootSpec { path: base.clone(), writable: true }],
        Policy::new(&lists).unwrap(),
    )
    .unwrap();
    (tmp, base, r)
}

/// A tree of `files` files `f<i><ext>` spread over `folders` folders `d<n>`.
fn spread(files: usize, folders: usize, ext: &str) -> (TempDir, PathBuf, Resolver) {
    let names: Vec<String> = (0..files).map(|i| format!("d{}/f{i}{ext}", i % folders)).collect();
    tree(&names.iter().map(String::as_str).collect::<Vec<_>>())
}

fn put(base: &Path, rel: &str, content: &str) {
    let p = base.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, content).unwrap();
}

/// Waits until everything made so far is older than the cache's same-tick margin.
fn settle() {
    std::thread::sleep(Duration::from_millis(1200));
}

fn key(base: &Path, hidden: bool) -> Key {
    Key { base: base.to_path_buf(), hidden, ignored: false, denied: Vec::new() }
}

fn files(r: &Resolver, path: Option<&str>, hidden: bool) -> Vec<String> {
    let p = GlobParams {
        pattern: "**/*".into(),
        path: path.map(String::from),
        limit: None,
        hidden: Some(hidden),
        ignored: None,
    };
    glob(r, p).unwrap().files
}

/// Globs a settled tree twice: the first walk is kept, the second answers from it; both the same.
fn kept_twice(r: &Resolver, base: &Path) -> Vec<String> {
    let first = files(r, None, false);
    assert!(walk_cache::is_kept(&key(base, false)), "a settled tree's walk is kept");
    let second = files(r, None, false);
    assert_eq!(first, second, "the cached answer is the walk's");
    second
}

const START: &[&str] = &[
    "a.rs",
    "src/b.rs",
    "src/deep/er/c.rs",
    "src/deep/er/notes.log",
    ".hidden/h.rs",
    ".env",
    ".gitignore",
    "target/out.rs",
];

fn start() -> (TempDir, PathBuf, Resolver) {
    let (tmp, base, r) = tree(START);
    fs::write(base.join(".gitignore"), "target/\n").unwrap();
    (tmp, base, r)
}

#[test]
fn a_settled_tree_is_kept_and_answered_like_a_walk() {
    let (_tmp, base, r) = start();
    settle();
    let got = kept_twice(&r, &base);
    // Hidden, ignored and secret files stay out, from the cache as from the walk.
    assert_eq!(got, ["a.rs", "src/b.rs", "src/deep/er/c.rs", "src/deep/er/notes.log"]);
    // The switches are part of what a listing answers for.
    let hidden = files(&r, None, true);
    assert!(hidden.contains(&".hidden/h.rs".to_string()), "{hidden:?}");
    assert!(!hidden.iter().any(|f| f == ".env"), "a secret stays hidden: {hidden:?}");
    assert_eq!(files(&r, None, false), got, "the plain listing is still the same");
}

#[test]
fn a_tree_changed_within_the_margin_is_not_kept() {
    let (_tmp, base, r) = start();
    let got = files(&r, None, false);
    assert!(!walk_cache::is_kept(&key(&base, false)), "a tree made just now is walked, not kept");
    assert_eq!(got, ["a.rs", "src/b.rs", "src/deep/er/c.rs", "src/deep/er/notes.log"]);
    // Positive control: the same tree, settled, is kept.
    settle();
    kept_twice(&r, &base);
}

#[test]
fn a_file_added_deep_in_the_tree_shows_at_once() {
    let (_tmp, base, r) = start();
    settle();
    kept_twice(&r, &base);
    put(&base, "src/deep/er/new.rs", "new\n");
    let got = files(&r, None, false);
    assert!(got.contains(&"src/deep/er/new.rs".to_string()), "{got:?}");
}

#[test]
fn a_removed_file_and_a_renamed_folder_show_at_once() {
    let (_tmp, base, r) = start();
    settle();
    kept_twice(&r, &base);
    fs::remove_file(base.join("src/b.rs")).unwrap();
    fs::rename(base.join("src/deep/er"), base.join("src/deep/moved")).unwrap();
    assert_eq!(files(&r, None, false), ["a.rs", "src/deep/moved/c.rs", "src/deep/moved/notes.log"]);
}

#[test]
fn an_ignore_file_edited_in_place_applies_at_once() {
    let (_tmp, base, r) = start();
    put(&base, "src/.gitignore", "");
    settle();
    kept_twice(&r, &base);
    // Appending changes the file, not its folder.
    let src = fs::metadata(base.join("src")).unwrap().modified().unwrap();
    OpenOptions::new()
        .append(true)
        .open(base.join("src/.gitignore"))
        .unwrap()
        .write_all(b"*.log\n")
        .unwrap();
    assert_eq!(fs::metadata(base.join("src")).unwrap().modified().unwrap(), src);
    assert_eq!(files(&r, None, false), ["a.rs", "src/b.rs", "src/deep/er/c.rs"]);
}

#[test]
fn an_exclude_file_created_or_edited_inside_git_applies_at_once() {
    let (_tmp, base, r) = start();
    fs::create_dir_all(base.join(".git/info")).unwrap();
    settle();
    kept_twice(&r, &base);
    fs::write(base.join(".git/info/exclude"), "*.log\n").unwrap();
    assert_eq!(files(&r, None, false), ["a.rs", "src/b.rs", "src/deep/er/c.rs"]);
    // And one edited in place, which changes no folder.
    settle();
    kept_twice(&r, &base);
    let exclude = base.join(".git/info/exclude");
    OpenOptions::new().append(true).open(exclude).unwrap().write_all(b"a.rs\n").unwrap();
    assert_eq!(files(&r, None, false), ["src/b.rs", "src/deep/er/c.rs"]);
}

#[test]
fn a_gitignore_created_in_an_ancestor_applies_at_once() {
    let (_tmp, base, r) = start();
    settle();
    let first = files(&r, Some("src"), false);
    let sub = key(&base.join("src"), false);
    assert!(walk_cache::is_kept(&sub));
    assert_eq!(first, ["src/b.rs", "src/deep/er/c.rs", "src/deep/er/notes.log"]);
    fs::write(base.join(".ignore"), "*.log\n").unwrap();
    assert_eq!(files(&r, Some("src"), false), ["src/b.rs", "src/deep/er/c.rs"]);
}

#[test]
fn a_folder_time_put_back_by_hand_does_not_hide_a_new_file() {
    let (_tmp, base, r) = start();
    settle();
    kept_twice(&r, &base);
    let dir = base.join("src/deep/er");
    let before = fs::metadata(&dir).unwrap().modified().unwrap();
    put(&base, "src/deep/er/sneaky.rs", "x\n");
    File::open(&dir).unwrap().set_times(FileTimes::new().set_modified(before)).unwrap();
    assert_eq!(fs::metadata(&dir).unwrap().modified().unwrap(), before, "the time was put back");
    let got = files(&r, None, false);
    assert!(got.contains(&"src/deep/er/sneaky.rs".to_string()), "{got:?}");
}

#[test]
fn a_linked_ignore_file_is_not_trusted() {
    let (_tmp, base, r) = start();
    put(&base, "rules/ignore", "");
    std::os::unix::fs::symlink(base.join("rules/ignore"), base.join("src/.gitignore")).unwrap();
    settle();
    files(&r, None, false);
    assert!(
        !walk_cache::is_kept(&key(&base, false)),
        "a linked .gitignore's target can change unseen"
    );
    // Positive control: without the link the same tree is kept.
    fs::remove_file(base.join("src/.gitignore")).unwrap();
    settle();
    kept_twice(&r, &base);
}

#[test]
fn a_walk_stopped_by_its_cap_is_not_kept() {
    let (_tmp, base, r) = spread(10_050, 7, "");
    settle();
    let p = |limit| GlobParams {
        pattern: "**/*".into(),
        path: None,
        limit: Some(limit),
        hidden: None,
        ignored: None,
    };
    // 10 × 100 = 1,000 < the 10,000 floor of the cap: the walk stops at 10,000 matches.
    let out = glob(&r, p(10)).unwrap();
    assert!(out.truncated);
    assert!(!walk_cache::is_kept(&key(&base, false)), "a walk that stopped early is incomplete");
    let all = glob(&r, p(20_000)).unwrap();
    assert_eq!(all.total, 10_050);
    assert!(walk_cache::is_kept(&key(&base, false)));
    // From the cache, the cap still applies.
    let capped = glob(&r, p(10)).unwrap();
    assert!(capped.truncated);
    assert_eq!(capped.count, 10);
    assert_eq!(glob(&r, p(20_000)).unwrap().files, all.files);
}

#[test]
fn a_large_walk_is_kept_after_the_answer_and_then_used() {
    // 300 folders: over the size stamped at once, so a thread of its own keeps it.
    let (_tmp, base, r) = spread(600, 300, ".rs");
    settle();
    let first = files(&r, None, false);
    assert_eq!(first.len(), 600);
    walk_cache::wait_for_keeper();
    assert!(walk_cache::is_kept(&key(&base, false)));
    assert_eq!(files(&r, None, false), first);
    put(&base, "d7/new.rs", "");
    let got = files(&r, None, false);
    assert_eq!(got.len(), 601);
    assert!(got.contains(&"d7/new.rs".to_string()));
}

/// The regular files a fresh walk finds (no cache), relative to `base`, sorted: the truth a
/// cached answer must equal.
fn walked(r: &Resolver, base: &Path) -> Vec<String> {
    let hider = r.hider(base);
    let found = std::sync::Mutex::new(Vec::new());
    crate::parallel_walk::walker(&hider, base, false, false).0.run(|| {
        Box::new(|entry| {
            if let Ok(e) = entry
                && e.file_type().is_some_and(|t| t.is_file())
            {
                let rel = e.path().strip_prefix(base).unwrap().to_string_lossy().into_owned();
                found.lock().unwrap().push(rel);
            }
            ignore::WalkState::Continue
        })
    });
    let mut found = found.into_inner().unwrap();
    found.sort();
    found
}

/// Changes between settled globs, one a round, in random folders — files and folders made,
/// removed and renamed, ignore rules written in place, folder times put back, contents changed
/// — and after each round the cached answer equals a fresh walk (and before it, from the cache
/// too).
#[test]
fn after_random_changes_the_cached_answer_is_always_a_fresh_walk() {
    let (_tmp, base, r) = spread(60, 6, ".txt");
    // Empty ignore files everywhere, so that writing rules into one changes no folder.
    for d in ["", "d0", "d1", "d2", "d3", "d4", "d5"] {
        fs::write(base.join(d).join(".gitignore"), "").unwrap();
    }
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        usize::try_from(seed % n as u64).unwrap()
    };
    let dirs = |base: &Path| -> Vec<PathBuf> {
        let mut all = vec![base.to_path_buf()];
        let mut i = 0;
        while i < all.len() {
            for e in fs::read_dir(&all[i]).unwrap().flatten() {
                if e.file_type().unwrap().is_dir() {
                    all.push(e.path());
                }
            }
            i += 1;
        }
        all
    };
    let mut kept_rounds = 0;
    for round in 0..14 {
        settle();
        let truth = walked(&r, &base);
        assert_eq!(files(&r, None, false), truth, "round {round}, before changes");
        kept_rounds += usize::from(walk_cache::is_kept(&key(&base, false)));
        assert_eq!(files(&r, None, false), truth, "round {round}, from the cache");
        // One change a round, so that one that moves no folder's time is met alone.
        let all = dirs(&base);
        let dir = &all[next(all.len())];
        let entries: Vec<PathBuf> =
            fs::read_dir(dir).unwrap().flatten().map(|e| e.path()).collect();
        let name = format!("n{round}");
        // Every kind of change in turn, in a random folder; ignore rules written in place
        // (4) most often: only their own stamps show them.
        match [4, 0, 4, 2, 5, 3, 4, 6, 1, 4, 7, 4, 3, 4][round] {
            0 => fs::write(dir.join(format!("{name}.txt")), "x").unwrap(),
            1 => fs::create_dir_all(dir.join(&name).join("inner")).unwrap(),
            2 => {
                if let Some(f) = entries.iter().find(|p| p.is_file()) {
                    fs::remove_file(f).unwrap();
                }
            }
            3 => {
                if let Some(f) = entries.iter().find(|p| p.is_file()) {
                    let to = &all[next(all.len())];
                    fs::rename(f, to.join(format!("{name}.moved"))).unwrap();
                }
            }
            4 => {
                let patterns =
                    ["*.moved\n", "f1*\n", "n*\n", "!f12.txt\n", "inner/\n", "f*\n", "*.txt\n"];
                let mut g = OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(dir.join(".gitignore"))
                    .unwrap();
                g.write_all(patterns[next(patterns.len())].as_bytes()).unwrap();
            }
            5 => {
                // A change, then the folder's time put back.
                let before = fs::metadata(dir).unwrap().modified().unwrap();
                fs::write(dir.join(format!("{name}.hid")), "x").unwrap();
                File::open(dir).unwrap().set_times(FileTimes::new().set_modified(before)).unwrap();
            }
            6 => {
                if let Some(d) = entries.iter().find(|p| p.is_dir()) {
                    fs::remove_dir_all(d).unwrap();
                }
            }
            _ => {
                if let Some(f) = entries.iter().find(|p| p.is_file()) {
                    fs::write(f, "changed content, same name").unwrap();
                }
            }
        }
        assert_eq!(files(&r, None, false), walked(&r, &base), "round {round}, after changes");
    }
    assert!(kept_rounds >= 12, "the cache was used in {kept_rounds} of 14 rounds only");
}
