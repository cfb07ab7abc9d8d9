//! The roots resolver's fuzz check, shared by the libFuzzer target (`fuzz_targets/resolver.rs`)
//! and the stable-Rust random loop in the test suite (`tests/suite/faults.rs`).
//!
//! One input is a small program: it lays out folders, files and symlinks (pointing up with
//! `..`, at absolute paths outside, at the sibling `w-x` that shares the root's prefix, at
//! `/proc/self/root`, at each other in loops) inside a temp base, then asks the resolver to
//! place, open, list and prepare writes for paths made of the same pieces. Whatever the layout
//! and the path, anything the resolver hands back must be inside a root (by the kernel's own
//! record of the descriptor, `/proc/self/fd`), never under the denied folder, never a secret
//! file, and a write target never in the read-only root or a protected folder; and nothing
//! outside the roots may change (canaries and listings compared at the end).

use hands_roots::{Policy, PolicyLists, Resolver, RootSpec, fd_path};
use std::os::fd::AsFd;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

/// Path pieces the program draws from; `..` and absolute pieces are what the resolver must
/// refuse or contain.
const PIECES: &[&str] =
    &["a", "b", "c", "l", "m", "..", ".", "", "x.key", "f.txt", ".git", "hooks", "denied", "w-x"];

/// Symlink targets: within the root, up and out, absolute, magic links, loops.
fn targets(base: &Path) -> Vec<String> {
    let b = base.display();
    vec![
        "a".into(),
        "f.txt".into(),
        ".".into(),
        "..".into(),
        "../..".into(),
        "../out".into(),
        "../out/canary.txt".into(),
        "../w-x".into(),
        "../w-x/f.txt".into(),
        "../r".into(),
        "a/../../out".into(),
        "l".into(),
        "m".into(),
        "denied".into(),
        "denied/s.txt".into(),
        "x.key".into(),
        "/".into(),
        "/etc".into(),
        "/proc/self/root".into(),
        "/proc/self/cwd".into(),
        "/proc/self/fd/0".into(),
        format!("{b}/out"),
        format!("{b}/out/canary.txt"),
        format!("{b}/w-x"),
        format!("{b}/w"),
        format!("{b}/w/a"),
        format!("{b}/r/f.txt"),
        format!("{b}/w/denied/s.txt"),
        ".git/hooks".into(),
        "nowhere".into(),
    ]
}

/// A byte reader that yields zeros once the input runs out.
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn next(&mut self) -> u8 {
        match self.0.split_first() {
            Some((b, rest)) => {
                self.0 = rest;
                *b
            }
            None => 0,
        }
    }
    fn done(&self) -> bool {
        self.0.is_empty()
    }
}

/// A relative path of 1–4 pieces, possibly made absolute under one of the base's folders.
fn path(bytes: &mut Bytes<'_>, base: &Path) -> String {
    let n = 1 + (bytes.next() % 4) as usize;
    let mut parts: Vec<&str> = Vec::new();
    for _ in 0..n {
        parts.push(PIECES[bytes.next() as usize % PIECES.len()]);
    }
    let rel = parts.join("/");
    match bytes.next() % 8 {
        0 => format!("{}/w/{rel}", base.display()),
        1 => format!("{}/r/{rel}", base.display()),
        2 => format!("{}/w-x/{rel}", base.display()),
        3 => format!("{}/out/{rel}", base.display()),
        _ => rel,
    }
}

/// Every file and folder under `dir` with its content (links as their target), for comparison.
fn snapshot(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let p = e.path();
            let Ok(ft) = e.file_type() else { continue };
            let what = if ft.is_symlink() {
                format!("link {:?}", std::fs::read_link(&p).ok())
            } else if ft.is_dir() {
                stack.push(p.clone());
                "dir".to_string()
            } else {
                format!("file {:?}", std::fs::read(&p).ok())
            };
            out.push((p, what));
        }
    }
    out.sort();
    out
}

/// Asserts a path the resolver handed back is where it may be. `locate` is lexical only (the
/// deny list is checked when something is opened), so it is held to the roots alone.
fn assert_inside(what: &str, got: &Path, base: &Path, write: bool) {
    assert_in_roots(what, got, base, write);
    assert!(
        !got.starts_with(base.join("w/denied")),
        "{what} reached the denied folder: {}",
        got.display()
    );
}

fn assert_in_roots(what: &str, got: &Path, base: &Path, write: bool) {
    let w = base.join("w");
    let r = base.join("r");
    assert!(
        got.starts_with(&w) || (!write && got.starts_with(&r)),
        "{what} resolved outside the {} roots: {}",
        if write { "writable" } else { "" },
        got.display()
    );
    if write {
        let protected = got.strip_prefix(&w).is_ok_and(|rel| {
            let parts: Vec<_> = rel.components().map(|c| c.as_os_str().to_owned()).collect();
            parts.windows(2).any(|p| p[0] == ".git" && p[1] == "hooks")
        });
        assert!(!protected, "{what} targets a protected folder: {}", got.display());
    }
}

/// Creates one layout entry at `dir/parts…` (a folder, a file, or a symlink to `target`)
/// without ever following a symlink: the harness runs as root, and a layout link to `/` or
/// `/proc/self/cwd` must not make it write there. Missing folders on the way are made one at a
/// time; an entry whose way crosses a link, or whose name is taken, is skipped.
fn lay(dir: &Path, parts: &[&str], kind: u8, target: &str) {
    let Some((last, folders)) = parts.split_last() else { return };
    let mut at = dir.to_path_buf();
    for f in folders {
        at.push(f);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_dir() => {}
            Ok(_) => return,
            Err(_) => {
                if std::fs::create_dir(&at).is_err() {
                    return;
                }
            }
        }
    }
    at.push(last);
    if std::fs::symlink_metadata(&at).is_ok() {
        return;
    }
    let _ = match kind {
        0 => std::fs::create_dir(&at),
        1 => std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&at)
            .and_then(|mut f| std::io::Write::write_all(&mut f, b"layout\n")),
        _ => symlink(target, &at),
    };
}

/// Runs one fuzz input: builds its layout in a fresh temp base and checks every resolution.
pub fn check(data: &[u8]) {
    let tmp = match tempfile::tempdir() {
        Ok(t) => t,
        Err(_) => return,
    };
    let Ok(base) = std::fs::canonicalize(tmp.path()) else { return };
    for d in ["w/denied", "w/.git/hooks", "r", "w-x", "out"] {
        let _ = std::fs::create_dir_all(base.join(d));
    }
    let _ = std::fs::write(base.join("w/f.txt"), "in the root\n");
    let _ = std::fs::write(base.join("w/denied/s.txt"), "denied\n");
    let _ = std::fs::write(base.join("r/f.txt"), "read-only root\n");
    let _ = std::fs::write(base.join("w-x/f.txt"), "sibling with the root's prefix\n");
    let _ = std::fs::write(base.join("out/canary.txt"), "canary\n");
    let targets = targets(&base);

    let mut bytes = Bytes(data);
    // Layout: up to 12 entries, each a folder, a file or a symlink at a path inside `w` or `r`.
    let entries = bytes.next() % 13;
    for _ in 0..entries {
        let kind = bytes.next() % 3;
        let within = if bytes.next() % 4 == 0 { "r" } else { "w" };
        let n = 1 + (bytes.next() % 3) as usize;
        let mut parts = Vec::new();
        for _ in 0..n {
            let piece = PIECES[bytes.next() as usize % PIECES.len()];
            if !(piece == ".." || piece == "." || piece.is_empty()) {
                parts.push(piece);
            }
        }
        let target = &targets[bytes.next() as usize % targets.len()];
        lay(&base.join(within), &parts, kind, target);
    }
    let outside_before = snapshot(&base.join("out"));
    let sibling_before = snapshot(&base.join("w-x"));
    let denied_before = snapshot(&base.join("w/denied"));
    let hooks_before = snapshot(&base.join("w/.git/hooks"));

    let lists = PolicyLists {
        deny: vec![base.join("w/denied")],
        secret_patterns: vec!["*.key".into()],
        protected: vec![".git/hooks".into()],
        ..Default::default()
    };
    let Ok(policy) = Policy::new(&lists) else { return };
    let specs = [
        RootSpec { path: base.join("w"), writable: true },
        RootSpec { path: base.join("r"), writable: false },
    ];
    let Ok(resolver) = Resolver::new(&specs, policy) else { return };

    let mut calls = 0;
    while !bytes.done() && calls < 64 {
        calls += 1;
        let op = bytes.next() % 6;
        let p = path(&mut bytes, &base);
        match op {
            0 => {
                if let Ok(loc) = resolver.locate(&p) {
                    assert_in_roots("locate", &loc.abs, &base, false);
                }
            }
            1 => {
                if let Ok(f) = resolver.open_file(&p) {
                    assert_inside("open_file", &f.abs, &base, false);
                    let real = fd_path(f.file.as_fd()).unwrap_or_default();
                    assert_inside("open_file (descriptor)", &real, &base, false);
                    assert!(
                        real.extension().is_none_or(|e| e != "key"),
                        "open_file opened a secret file: {}",
                        real.display()
                    );
                }
            }
            2 => {
                if let Ok(d) = resolver.open_dir(&p) {
                    assert_inside("open_dir", &d.abs, &base, false);
                    let real = fd_path(d.fd.as_fd()).unwrap_or_default();
                    assert_inside("open_dir (descriptor)", &real, &base, false);
                }
            }
            3 | 4 => {
                let create = op == 4;
                if let Ok(t) = resolver.prepare_write(&p, create) {
                    assert_inside("prepare_write", &t.abs, &base, true);
                    let parent = fd_path(t.parent.as_fd()).unwrap_or_default();
                    assert_inside("prepare_write (parent descriptor)", &parent, &base, true);
                    assert_eq!(parent.join(&t.name), t.abs, "the target is not the parent's child");
                    assert!(
                        t.abs.extension().is_none_or(|e| e != "key"),
                        "prepare_write allowed a secret file: {}",
                        t.abs.display()
                    );
                }
            }
            _ => {
                let abs = if p.starts_with('/') {
                    p.clone()
                } else {
                    format!("{}/w/{p}", base.display())
                };
                if let Ok(f) = resolver.open_walked(Path::new(&abs)) {
                    assert_inside("open_walked", &f.abs, &base, false);
                    let real = fd_path(f.file.as_fd()).unwrap_or_default();
                    assert_inside("open_walked (descriptor)", &real, &base, false);
                }
            }
        }
    }
    assert_eq!(snapshot(&base.join("out")), outside_before, "something outside the roots changed");
    assert_eq!(snapshot(&base.join("w-x")), sibling_before, "the prefix sibling changed");
    assert_eq!(snapshot(&base.join("w/denied")), denied_before, "the denied folder changed");
    assert_eq!(snapshot(&base.join("w/.git/hooks")), hooks_before, "a protected folder changed");
}
