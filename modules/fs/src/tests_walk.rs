//! Unit tests of `list_dir`, `glob` and `grep` over temporary roots.

// A failed unwrap is a failed test, which is what these assertions want.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::glob::{GlobParams, glob};
use crate::grep::{GrepMode, GrepParams, LineKind, grep};
use crate::list_dir::{ListDirParams, list_dir};
use crate::{FsError, ToolText};
use hands_roots::{Policy, PolicyLists, Resolver, RootSpec};
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use tempfile::TempDir;

fn resolver_with(dir: &Path, deny: Vec<PathBuf>) -> Resolver {
    let lists =
        PolicyLists { secret_patterns: vec![".env".into()], deny, ..PolicyLists::default() };
    Resolver::new(
        &[RootSpec { path: dir.to_path_buf(), writable: true }],
        Policy::new(&lists).unwrap(),
    )
    .unwrap()
}

fn setup(files: &[(&str, &str)]) -> (TempDir, Resolver) {
    let tmp = TempDir::new().unwrap();
    for (rel, content) in files {
        put(tmp.path(), rel, content.as_bytes());
    }
    let r = resolver_with(tmp.path(), Vec::new());
    (tmp, r)
}

fn put(dir: &Path, rel: &str, content: &[u8]) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, content).unwrap();
}

fn ls(r: &Resolver, path: Option<&str>, limit: Option<u64>) -> crate::list_dir::ListDirOutput {
    list_dir(r, ListDirParams { path: path.map(String::from), limit }).unwrap()
}

fn globp(pattern: &str) -> GlobParams {
    GlobParams { pattern: pattern.into(), path: None, limit: None, hidden: None, ignored: None }
}

fn grepp(pattern: &str) -> GrepParams {
    GrepParams {
        pattern: pattern.into(),
        literal: None,
        path: None,
        glob: None,
        case_insensitive: None,
        context: None,
        before: None,
        after: None,
        limit: None,
        output: None,
        hidden: None,
        ignored: None,
    }
}

/// (path, line) of every matching line.
fn hits(out: &crate::grep::GrepOutput) -> Vec<(String, u64)> {
    out.matches
        .iter()
        .filter(|l| l.kind == LineKind::Match)
        .map(|l| (l.path.clone(), l.line))
        .collect()
}

fn h(path: &str, line: u64) -> (String, u64) {
    (path.to_string(), line)
}

// ---- list_dir ----

#[test]
fn a_capped_list_dir_stops_when_the_folder_is_larger_than_the_cap() {
    let (tmp, r) = setup(&[("a.txt", "a"), ("b/c", "")]);
    let size = std::fs::metadata(tmp.path()).unwrap().len();
    let p = || ListDirParams { path: None, limit: None };
    let capped = crate::list_dir::list_dir_within(&r, p(), Some(size)).unwrap().unwrap();
    assert_eq!(capped, ls(&r, None, None));
    assert!(crate::list_dir::list_dir_within(&r, p(), Some(size - 1)).unwrap().is_none());
}

#[test]
fn list_dir_puts_folders_first_then_files_sorted_with_sizes_and_link_targets() {
    let (tmp, r) =
        setup(&[("z.txt", "abc"), ("c.txt", ""), ("b/x", ""), ("a/y", ""), (".env", "K=1")]);
    symlink("z.txt", tmp.path().join("link")).unwrap();
    symlink("/", tmp.path().join("out")).unwrap();
    let out = ls(&r, None, None);
    assert_eq!(out.folders, ["a", "b"]);
    let files: Vec<_> = out.files.iter().map(|(n, s)| (n.as_str(), *s)).collect();
    assert_eq!(files, [("c.txt", Some(0)), ("z.txt", Some(3))]);
    let links: Vec<_> = out.links.iter().map(|(n, t)| (n.as_str(), t.as_deref())).collect();
    assert_eq!(links, [("link", Some("z.txt")), ("out", Some("/"))]);
    assert!(out.other.is_empty());
    // The structured form: names mapped to sizes and targets, in order.
    let json = serde_json::to_string(&out).unwrap();
    assert!(
        json.contains(r#""folders":["a","b"],"files":{"c.txt":0,"z.txt":3},"links":{"link":"z.txt","out":"/"}"#),
        "{json}"
    );
    assert_eq!(out.total, 6);
    assert!(!out.truncated);
    assert_eq!(out.path, std::fs::canonicalize(tmp.path()).unwrap().to_string_lossy());
    let text = out.text();
    assert!(text.contains("a/\n"), "{text}");
    assert!(text.contains("out -> /\n"), "{text}");
    assert!(text.contains("z.txt  3 bytes\n"), "{text}");
    assert!(!text.contains(".env"), "{text}");
}

#[test]
fn list_dir_truncates_at_limit_and_reports_total() {
    let (_tmp, r) = setup(&[("e", ""), ("d", ""), ("c", ""), ("b", ""), ("a", ""), ("z/f", "")]);
    let out = ls(&r, None, Some(3));
    // Folders are kept first, then files by name.
    assert_eq!(out.folders, ["z"]);
    let names: Vec<_> = out.files.keys().map(String::as_str).collect();
    assert_eq!(names, ["a", "b"]);
    assert_eq!(out.total, 6);
    assert!(out.truncated);
    assert!(out.text().contains("3 of 6"), "{}", out.text());
    assert!(out.text().starts_with(&format!("{}:\nz/\na  0 bytes\n", out.path)));
}

#[test]
fn list_dir_refuses_paths_outside_the_root_and_links_out() {
    let (tmp, r) = setup(&[("sub/f", "1")]);
    symlink("/etc", tmp.path().join("etc")).unwrap();
    let sub = ls(&r, Some("sub"), None);
    assert_eq!(sub.shown(), 1);
    for bad in ["/etc", "etc", "../x"] {
        let err = list_dir(&r, ListDirParams { path: Some(bad.into()), limit: None });
        assert!(matches!(err, Err(FsError::Path(_))), "{bad}: {err:?}");
    }
}

#[test]
fn list_dir_and_walks_hide_denied_folders() {
    let tmp = TempDir::new().unwrap();
    put(tmp.path(), "keys/secret.txt", b"needle");
    put(tmp.path(), "open/ok.txt", b"needle");
    let r = resolver_with(tmp.path(), vec![tmp.path().join("keys")]);
    assert_eq!(ls(&r, None, None).folders, ["open"]);
    assert_eq!(glob(&r, globp("**/*.txt")).unwrap().files, ["open/ok.txt"]);
    assert_eq!(hits(&grep(&r, grepp("needle")).unwrap()), [h("open/ok.txt", 1)]);
}

// ---- glob ----

#[test]
fn glob_double_star_matches_at_any_depth_and_star_stays_in_one_folder() {
    let (_tmp, r) = setup(&[("a.rs", ""), ("src/b.rs", ""), ("src/x/c.rs", ""), ("src/d.txt", "")]);
    assert_eq!(glob(&r, globp("**/*.rs")).unwrap().files, ["a.rs", "src/b.rs", "src/x/c.rs"]);
    assert_eq!(glob(&r, globp("*.rs")).unwrap().files, ["a.rs"]);
    assert_eq!(glob(&r, globp("src/*")).unwrap().files, ["src/b.rs", "src/d.txt"]);
    assert_eq!(glob(&r, globp("./src/*.rs")).unwrap().files, ["src/b.rs"]);
    let under = glob(&r, GlobParams { path: Some("src".into()), ..globp("*.rs") }).unwrap();
    assert_eq!(under.files, ["src/b.rs"]);
    assert!(under.base.ends_with("/src"));
}

#[test]
fn glob_sorts_and_truncates_at_limit() {
    let names: Vec<String> = (0..20).map(|i| format!("d{}/f{i:02}.txt", i % 3)).collect();
    let files: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "")).collect();
    let (_tmp, r) = setup(&files);
    let all = glob(&r, globp("**/*.txt")).unwrap();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(all.files, sorted);
    assert!(!all.truncated);
    let cut = glob(&r, GlobParams { limit: Some(3), ..globp("**/*.txt") }).unwrap();
    assert_eq!(cut.files, sorted[..3]);
    assert_eq!((cut.count, cut.total, cut.truncated), (3, 20, true));
}

#[test]
fn glob_skips_hidden_and_gitignored_files_unless_asked() {
    let (_tmp, r) = setup(&[
        (".gitignore", "target/\n*.log\n"),
        ("keep.rs", ""),
        ("a.log", ""),
        ("target/t.rs", ""),
        (".hidden/h.rs", ""),
        (".h.rs", ""),
        (".env", "SECRET=1"),
    ]);
    let files = |hidden, ignored| {
        glob(&r, GlobParams { hidden: Some(hidden), ignored: Some(ignored), ..globp("**/*") })
            .unwrap()
            .files
    };
    assert_eq!(files(false, false), ["keep.rs"]);
    assert_eq!(files(true, false), [".gitignore", ".h.rs", ".hidden/h.rs", "keep.rs"]);
    assert_eq!(files(false, true), ["a.log", "keep.rs", "target/t.rs"]);
    // `.env` is a secret: never listed, whatever the switches.
    assert_eq!(
        files(true, true),
        [".gitignore", ".h.rs", ".hidden/h.rs", "a.log", "keep.rs", "target/t.rs"]
    );
}

#[test]
fn glob_terminates_on_link_loops_and_does_not_escape_through_a_link_to_slash() {
    let (tmp, r) = setup(&[("real/f.txt", "x")]);
    symlink(".", tmp.path().join("self")).unwrap();
    symlink("l2", tmp.path().join("l1")).unwrap();
    symlink("l1", tmp.path().join("l2")).unwrap();
    symlink("/", tmp.path().join("slash")).unwrap();
    symlink("/etc/passwd", tmp.path().join("passwd")).unwrap();
    let out =
        glob(&r, GlobParams { hidden: Some(true), ignored: Some(true), ..globp("**/*") }).unwrap();
    assert_eq!(out.files, ["real/f.txt"]);
    let abs = glob(&r, GlobParams { hidden: Some(true), ..globp("/etc/**") }).unwrap();
    assert!(abs.files.is_empty(), "{:?}", abs.files);
    // The grep walk follows no link either.
    let g = grep(&r, GrepParams { hidden: Some(true), ignored: Some(true), ..grepp("root") });
    assert!(g.unwrap().matches.is_empty());
}

#[test]
fn glob_rejects_bad_patterns_and_file_bases() {
    let (_tmp, r) = setup(&[("f", "")]);
    assert!(matches!(glob(&r, globp("a[")), Err(FsError::Invalid(_))));
    assert!(matches!(glob(&r, globp("")), Err(FsError::Invalid(_))));
    let on_file = glob(&r, GlobParams { path: Some("f".into()), ..globp("*") });
    assert!(matches!(on_file, Err(FsError::Path(_))));
}

// ---- grep ----

fn code() -> (TempDir, Resolver) {
    setup(&[
        ("a.txt", "one\nTwo\nthree\nfour\nfive\nsix\nseven two\n"),
        ("src/b.rs", "fn main() {\n    let a.b = 1;\n    let axb = 2;\n}\n"),
        ("src/c.rs", "// two\n"),
    ])
}

#[test]
fn grep_regex_literal_and_case_insensitive() {
    let (_tmp, r) = code();
    assert_eq!(hits(&grep(&r, grepp("a.b")).unwrap()), [h("src/b.rs", 2), h("src/b.rs", 3)]);
    let lit = grep(&r, GrepParams { literal: Some(true), ..grepp("a.b") }).unwrap();
    assert_eq!(hits(&lit), [h("src/b.rs", 2)]);
    assert_eq!(lit.matches[0].text, "    let a.b = 1;");
    assert_eq!(hits(&grep(&r, grepp("two")).unwrap()), [h("a.txt", 7), h("src/c.rs", 1)]);
    let ci = grep(&r, GrepParams { case_insensitive: Some(true), ..grepp("two") }).unwrap();
    assert_eq!(hits(&ci), [h("a.txt", 2), h("a.txt", 7), h("src/c.rs", 1)]);
    assert_eq!(ci.total_matches, 3);
    assert_eq!(ci.files_searched, 3);
    assert!(!ci.truncated);
    assert_eq!(ci.text(), "a.txt:2:Two\na.txt:7:seven two\nsrc/c.rs:1:// two\n");
}

#[test]
fn grep_context_before_and_after() {
    let (_tmp, r) = code();
    let lines = |p: GrepParams| -> Vec<(u64, LineKind)> {
        grep(&r, GrepParams { path: Some("a.txt".into()), ..p })
            .unwrap()
            .matches
            .iter()
            .map(|l| (l.line, l.kind))
            .collect()
    };
    use LineKind::{Context as C, Match as M};
    assert_eq!(lines(GrepParams { context: Some(1), ..grepp("four") }), [(3, C), (4, M), (5, C)]);
    assert_eq!(
        lines(GrepParams { context: Some(1), before: Some(2), ..grepp("four") }),
        [(2, C), (3, C), (4, M), (5, C)]
    );
    assert_eq!(lines(GrepParams { after: Some(2), ..grepp("four") }), [(4, M), (5, C), (6, C)]);
    let out = grep(&r, GrepParams { context: Some(1), ..grepp("one|six") }).unwrap();
    assert_eq!(
        out.text(),
        "a.txt:1:one\na.txt-2-Two\n--\na.txt-5-five\na.txt:6:six\na.txt-7-seven two\n"
    );
    let big = grep(&r, GrepParams { context: Some(1000), ..grepp("x") });
    assert!(matches!(big, Err(FsError::Invalid(_))));
}

#[test]
fn grep_files_and_count_modes() {
    let (_tmp, r) = code();
    let p = |mode| GrepParams { output: Some(mode), case_insensitive: Some(true), ..grepp("two") };
    let files = grep(&r, p(GrepMode::Files)).unwrap();
    assert!(files.matches.is_empty());
    let listed: Vec<_> = files.files.iter().map(|f| (f.path.as_str(), f.count)).collect();
    assert_eq!(listed, [("a.txt", None), ("src/c.rs", None)]);
    assert_eq!(files.text(), "a.txt\nsrc/c.rs\n");
    let count = grep(&r, p(GrepMode::Count)).unwrap();
    let counted: Vec<_> = count.files.iter().map(|f| (f.path.as_str(), f.count)).collect();
    assert_eq!(counted, [("a.txt", Some(2)), ("src/c.rs", Some(1))]);
    assert_eq!(count.total_matches, 3);
    assert_eq!(count.text(), "a.txt:2\nsrc/c.rs:1\n");
    let json = serde_json::to_value(&count).unwrap();
    assert_eq!(json["mode"], "count");
}

#[test]
fn grep_stops_at_the_limit_and_says_truncated() {
    let many: String = (0..1000).map(|i| format!("hit {i}\n")).collect();
    let (_tmp, r) = setup(&[("big.txt", &many), ("more.txt", &many)]);
    let out = grep(&r, GrepParams { limit: Some(5), ..grepp("hit") }).unwrap();
    assert_eq!(out.matches.len(), 5);
    assert_eq!(out.total_matches, 5);
    assert!(out.truncated);
    assert!(out.text().contains("[truncated"));
    let files =
        grep(&r, GrepParams { limit: Some(1), output: Some(GrepMode::Files), ..grepp("hit") });
    let files = files.unwrap();
    assert_eq!((files.files.len(), files.truncated), (1, true));
    let count =
        grep(&r, GrepParams { limit: Some(1500), output: Some(GrepMode::Count), ..grepp("hit") });
    let count = count.unwrap();
    assert_eq!((count.total_matches, count.truncated), (1500, true));
    let cut = grep(&r, GrepParams { limit: Some(10), ..grepp("hit 99\\d") }).unwrap();
    assert_eq!((cut.total_matches, cut.truncated), (10, true));
    // Exactly as many matches as the limit, the last at the end of the last file: nothing cut.
    let all = grep(&r, GrepParams { limit: Some(20), ..grepp("hit 99\\d") }).unwrap();
    assert_eq!((all.total_matches, all.truncated), (20, false));
    assert!(matches!(
        grep(&r, GrepParams { limit: Some(0), ..grepp("x") }),
        Err(FsError::Invalid(_))
    ));
}

#[test]
fn grep_before_context_of_a_match_over_the_limit_is_dropped() {
    let (_tmp, r) = setup(&[("f.txt", "a\nhit\nb\nc\nd\nhit\n")]);
    let out = grep(&r, GrepParams { limit: Some(1), before: Some(1), ..grepp("hit") }).unwrap();
    let lines: Vec<_> = out.matches.iter().map(|l| l.line).collect();
    assert_eq!(lines, [1, 2]);
    assert!(out.truncated);
}

#[test]
fn grep_skips_binary_files_secrets_and_cuts_long_lines() {
    let long = format!("needle {}\n", "é".repeat(2000));
    let (tmp, r) = setup(&[("long.txt", &long), (".env", "needle=1\n")]);
    put(tmp.path(), "bin.dat", b"needle\0\x01\x02needle\n");
    let out = grep(&r, GrepParams { hidden: Some(true), ..grepp("needle") }).unwrap();
    assert_eq!(hits(&out), [h("long.txt", 1)]);
    let text = &out.matches[0].text;
    assert!(text.ends_with("… [cut]"), "{text}");
    assert_eq!(text.chars().count(), 500 + "… [cut]".chars().count());
    // Named directly, the secret is refused with the resolver's reason.
    let direct = grep(&r, GrepParams { path: Some(".env".into()), ..grepp("needle") });
    assert!(matches!(direct, Err(FsError::Path(hands_roots::PathError::Secret { .. }))));
}

#[test]
fn grep_glob_filter_and_single_file_path() {
    let (_tmp, r) = code();
    let rs = grep(&r, GrepParams { glob: Some("*.rs".into()), ..grepp("two|let") }).unwrap();
    assert_eq!(hits(&rs), [h("src/b.rs", 2), h("src/b.rs", 3), h("src/c.rs", 1)]);
    let deep = grep(&r, GrepParams { glob: Some("src/c.*".into()), ..grepp("two") }).unwrap();
    assert_eq!(hits(&deep), [h("src/c.rs", 1)]);
    let one = grep(&r, GrepParams { path: Some("./src/c.rs".into()), ..grepp("two") }).unwrap();
    assert_eq!(hits(&one), [h("src/c.rs", 1)]);
    assert!(one.base.ends_with("/src/c.rs"));
    let sub = grep(&r, GrepParams { path: Some("src".into()), ..grepp("two") }).unwrap();
    assert_eq!(hits(&sub), [h("src/c.rs", 1)]);
}

#[test]
fn grep_rejects_empty_and_invalid_patterns() {
    let (_tmp, r) = code();
    assert!(matches!(grep(&r, grepp("")), Err(FsError::Invalid(_))));
    let huge = "a".repeat(10 << 20);
    match grep(&r, grepp(&huge)) {
        Err(FsError::Invalid(msg)) => assert!(msg.len() < 200, "{msg}"),
        other => panic!("{other:?}"),
    }
    match grep(&r, grepp("(unclosed")) {
        Err(FsError::Invalid(msg)) => assert!(msg.contains("(unclosed"), "{msg}"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        grep(&r, GrepParams { glob: Some("[".into()), ..grepp("x") }),
        Err(FsError::Invalid(_))
    ));
    assert!(matches!(
        grep(&r, GrepParams { path: Some("/".into()), ..grepp("x") }),
        Err(FsError::Path(_))
    ));
}

#[test]
fn grep_content_stops_at_256_kib_of_lines_with_their_context() {
    // 40 files of 1,000 lines of 400 characters, a match every 50 lines: the default limit of
    // 100 matches with 100 lines of context each side would be ~8 MB.
    let line = "x".repeat(400);
    let body: String = (0..1000)
        .map(|i| if i % 50 == 0 { format!("hit {line}\n") } else { format!("{line}\n") })
        .collect();
    let files: Vec<(String, String)> =
        (0..40).map(|i| (format!("f{i:02}.txt"), body.clone())).collect();
    let refs: Vec<(&str, &str)> = files.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    let (_tmp, r) = setup(&refs);
    let out = grep(&r, GrepParams { context: Some(100), ..grepp("hit") }).unwrap();
    let kept: usize = out.matches.iter().map(|l| l.text.len() + l.path.len()).sum();
    assert!(out.truncated);
    assert!(kept <= 256 * 1024 + 201 * 420, "{kept} bytes kept");
    assert!(kept > 200 * 1024, "the cap was not what stopped it: {kept}");
    assert!(out.matches.iter().any(|l| l.kind == LineKind::Match));
    // Positive control: without context the same search keeps its 100 matches.
    let plain = grep(&r, GrepParams { ..grepp("hit") }).unwrap();
    assert_eq!(plain.matches.len(), 100);
}

// ---- the walk's own ignore rules ----

/// What the `ignore` crate's own walk (which reads ignore files itself, by path) finds: the
/// semantics the walk's rules (`ignore_rules`) must keep.
fn crate_walk(base: &Path, hidden: bool) -> Vec<String> {
    let mut out: Vec<String> = ignore::WalkBuilder::new(base)
        .hidden(!hidden)
        .git_global(false)
        .build()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_some_and(|t| t.is_file()))
        .map(|e| e.path().strip_prefix(base).unwrap().to_string_lossy().into_owned())
        .collect();
    out.sort();
    out
}

/// Nested `.gitignore`s, `.ignore`, `.git/info/exclude`, negations, folder-only patterns,
/// anchored ones, a nested repository, and a base below the repository's top (its parents'
/// rules apply): the walk's own rules find exactly what the `ignore` crate's walk finds.
#[test]
fn the_walks_own_ignore_rules_agree_with_the_ignore_crate() {
    let (tmp, r) = setup(&[
        ("repo/.git/info/exclude", "excluded.txt\n"),
        ("repo/.gitignore", "\u{feff}*.log\n!keep.log\nbuild/\n/top.txt\nsub/deep/\r\n"),
        ("repo/.ignore", "ig_*\n"),
        ("repo/a.log", ""),
        ("repo/keep.log", ""),
        ("repo/top.txt", ""),
        ("repo/excluded.txt", ""),
        ("repo/ig_x.rs", ""),
        ("repo/build/b.rs", ""),
        ("repo/src/top.txt", ""),
        ("repo/src/a.log", ""),
        ("repo/src/.gitignore", "!a.log\n*.tmp\n"),
        ("repo/src/x.tmp", ""),
        ("repo/src/build", ""),
        ("repo/sub/deep/d.rs", ""),
        ("repo/sub/ok.rs", ""),
        ("repo/sub/.ignore", "!ig_y.rs\n"),
        ("repo/sub/ig_y.rs", ""),
        ("repo/.hidden/h.rs", ""),
        ("repo/.gitignore2", ""),
        // A nested repository: the outer `.gitignore` does not reach into it, `.ignore` does.
        ("repo/inner/.git/HEAD", ""),
        ("repo/inner/z.log", ""),
        ("repo/inner/ig_z.rs", ""),
        ("repo/inner/excluded.txt", ""),
    ]);
    for base in ["repo", "repo/src", "repo/sub", "repo/inner"] {
        let dir = tmp.path().join(base);
        for hidden in [false, true] {
            let ours = glob(
                &r,
                GlobParams { path: Some(base.into()), hidden: Some(hidden), ..globp("**/*") },
            )
            .unwrap();
            let mut theirs = crate_walk(&dir, hidden);
            // The crate lists `.git` contents when hidden files are shown; so do we.
            theirs.retain(|f| !f.ends_with(".env"));
            let ours: Vec<String> = ours
                .files
                .iter()
                .map(|f| f.strip_prefix(&format!("{base}/")).unwrap_or(f).to_string())
                .collect();
            assert_eq!(ours, theirs, "base {base}, hidden {hidden}");
        }
    }
    // Spot checks, so that agreeing on nothing cannot pass.
    let all = glob(&r, GlobParams { path: Some("repo".into()), ..globp("**/*") }).unwrap().files;
    for kept in ["repo/keep.log", "repo/src/a.log", "repo/src/top.txt", "repo/sub/ig_y.rs"] {
        assert!(all.contains(&kept.to_string()), "{kept} missing: {all:?}");
    }
    for gone in ["repo/a.log", "repo/top.txt", "repo/excluded.txt", "repo/ig_x.rs"] {
        assert!(!all.contains(&gone.to_string()), "{gone} listed: {all:?}");
    }
    assert!(all.contains(&"repo/inner/z.log".to_string()), "{all:?}");
    assert!(!all.contains(&"repo/inner/ig_z.rs".to_string()), "{all:?}");
}

fn mkfifo(path: &Path) {
    rustix::fs::mkfifoat(rustix::fs::CWD, path, rustix::fs::Mode::from_raw_mode(0o644)).unwrap();
}

/// A FIFO (or a symlink) where an ignore file would be is skipped and named, never opened
/// blocking: `glob` and `grep` answer with the other ignore files' rules still applied.
#[test]
fn a_special_ignore_file_is_skipped_and_named_and_the_walk_goes_on() {
    let (tmp, r) = setup(&[
        (".ignore", "*.log\n"),
        ("a.rs", "needle\n"),
        ("a.log", "needle\n"),
        ("sub/b.rs", "needle\n"),
        ("repo/.git/HEAD", ""),
        ("repo/c.rs", "needle\n"),
    ]);
    mkfifo(&tmp.path().join(".gitignore"));
    mkfifo(&tmp.path().join("repo/.git/info"));
    symlink("/etc/passwd", tmp.path().join("sub/.gitignore")).unwrap();
    let out = glob(&r, globp("**/*")).unwrap();
    assert_eq!(out.files, ["a.rs", "repo/c.rs", "sub/b.rs"]);
    let root = tmp.path().canonicalize().unwrap();
    assert!(out.skipped.contains(&format!("{}/.gitignore (FIFO)", root.display())), "{out:?}");
    assert!(out.skipped.contains(&format!("{}/sub/.gitignore (symlink)", root.display())));
    assert!(out.text().contains("ignore files not read"), "{}", out.text());
    let g = grep(&r, grepp("needle")).unwrap();
    assert_eq!(hits(&g), [h("a.rs", 1), h("repo/c.rs", 1), h("sub/b.rs", 1)]);
    assert_eq!(g.skipped, out.skipped);
    // Without ignore files nothing is read, nothing skipped.
    let all = glob(&r, GlobParams { ignored: Some(true), ..globp("**/*") }).unwrap();
    assert!(all.files.contains(&"a.log".to_string()) && all.skipped.is_empty(), "{all:?}");
}

/// Every walk has a time bound: past it `glob` and `grep` stop and say so (here a bound of
/// zero, which the first entry passes).
#[test]
fn a_walk_stops_at_its_time_bound_and_says_so() {
    let (_tmp, r) = setup(&[("a.rs", "needle\n"), ("b/c.rs", "needle\n")]);
    let zero = std::time::Duration::ZERO;
    let g = crate::glob::glob_within(&r, globp("**/*"), zero).unwrap();
    assert!(g.timed_out && g.truncated, "{g:?}");
    assert!(g.text().contains("30 s bound"), "{}", g.text());
    let s = crate::grep::grep_within(&r, grepp("needle"), zero).unwrap();
    assert!(s.timed_out && s.truncated && s.matches.is_empty(), "{s:?}");
    // Positive control: the same calls with the real bound see everything.
    let g = glob(&r, globp("**/*")).unwrap();
    assert!(!g.timed_out && g.files.len() == 2, "{g:?}");
    let s = grep(&r, grepp("needle")).unwrap();
    assert!(!s.timed_out && s.total_matches == 2, "{s:?}");
}
