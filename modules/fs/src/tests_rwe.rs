//! Unit tests of read, write and edit (and the text helpers they share), on temp-dir roots.

// Tests may panic on a failed setup step: that is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::edit::{EditParams, edit};
use crate::read::{ReadOutput, ReadParams, read};
use crate::text::{LineEnding, Utf8Check, escape_controls, lf_to_crlf, sha256_hex};
use crate::write::{WriteParams, write};
use crate::{FsError, ToolText};
use hands_roots::{PathError, Policy, PolicyLists, Resolver, RootSpec};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

struct Fx {
    _dir: tempfile::TempDir,
    root: PathBuf,
    r: Resolver,
}

fn fx() -> Fx {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let spec = RootSpec { path: root.clone(), writable: true };
    let r = Resolver::new(&[spec], Policy::new(&PolicyLists::default()).unwrap()).unwrap();
    Fx { _dir: dir, root, r }
}

impl Fx {
    fn abs(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }
    fn put(&self, name: &str, bytes: impl AsRef<[u8]>) {
        let p = self.abs(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, bytes).unwrap();
    }
    fn get(&self, name: &str) -> Vec<u8> {
        std::fs::read(self.abs(name)).unwrap()
    }
    fn read(&self, name: &str, offset: Option<u64>, limit: Option<u64>) -> ReadOutput {
        read(&self.r, ReadParams { path: name.into(), offset, limit }).unwrap()
    }
    fn read_err(&self, name: &str, offset: Option<u64>, limit: Option<u64>) -> FsError {
        read(&self.r, ReadParams { path: name.into(), offset, limit }).unwrap_err()
    }
    fn write(&self, name: &str, content: &str, sha: Option<&str>) -> Result<String, FsError> {
        let p = WriteParams {
            path: name.into(),
            content: content.into(),
            expected_sha256: sha.map(str::to_string),
        };
        write(&self.r, p).map(|o| o.action)
    }
    fn edit(
        &self,
        name: &str,
        old: &str,
        new: &str,
        all: bool,
    ) -> Result<crate::edit::EditOutput, FsError> {
        edit(
            &self.r,
            EditParams {
                path: name.into(),
                old_string: old.into(),
                new_string: new.into(),
                replace_all: Some(all),
                expected_sha256: None,
            },
        )
    }
    fn mode(&self, name: &str) -> u32 {
        std::fs::metadata(self.abs(name)).unwrap().permissions().mode() & 0o7777
    }
    /// Names in the root, to check that no temp file is left behind.
    fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&self.root)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }
}

// ---- read ----

#[test]
fn read_is_cat_n_with_metadata() {
    let f = fx();
    f.put("a.txt", "alpha\nbeta\ngamma\n");
    let o = f.read("a.txt", None, None);
    assert_eq!(o.content, "     1\talpha\n     2\tbeta\n     3\tgamma\n");
    assert_eq!(o.path, f.abs("a.txt").display().to_string());
    assert_eq!((o.offset, o.lines_returned, o.total_lines, o.truncated), (1, 3, 3, false));
    assert_eq!((o.encoding.as_str(), o.line_ending.as_str()), ("utf-8", "lf"));
    assert_eq!(o.sha256.as_deref(), Some(sha256_hex(b"alpha\nbeta\ngamma\n").as_str()));
    assert_eq!(o.size, 17);
    let sha = o.sha256.clone().unwrap();
    assert_eq!(o.text(), format!("{}[3 lines, lf, sha256 {sha}]\n", o.content));
}

#[test]
fn a_capped_read_stops_over_the_cap_and_reads_alike_under_it() {
    let f = fx();
    f.put("a.txt", "alpha\nbeta\n");
    let p = |path: &str| ReadParams { path: path.into(), offset: None, limit: None };
    let capped = crate::read::read_within(&f.r, p("a.txt"), Some(11)).unwrap().unwrap();
    assert_eq!(capped.content, f.read("a.txt", None, None).content);
    // One byte over: nothing read, `None` (the caller reads it elsewhere, uncapped).
    assert!(crate::read::read_within(&f.r, p("a.txt"), Some(10)).unwrap().is_none());
    // Refusals come before the cap: a missing file is an error, not `None`.
    let e = crate::read::read_within(&f.r, p("missing"), Some(0)).unwrap_err();
    assert!(matches!(e, FsError::Path(PathError::NotFound { .. })), "{e}");
}

#[test]
fn read_window_is_absolute_and_says_how_to_continue() {
    let f = fx();
    let body: String = (1..=10).map(|i| format!("line {i}\n")).collect();
    f.put("w.txt", &body);
    let o = f.read("w.txt", Some(3), Some(2));
    assert_eq!(o.content, "     3\tline 3\n     4\tline 4\n");
    assert_eq!((o.lines_returned, o.total_lines, o.truncated), (2, 10, true));
    assert!(
        o.text().contains("... 6 more lines; continue with offset=5\n[10 lines, lf"),
        "{}",
        o.text()
    );
    // The window reaching the end is not truncated.
    let o = f.read("w.txt", Some(9), Some(5));
    assert_eq!((o.lines_returned, o.truncated), (2, false));
    // Past the end: empty, not an error.
    let o = f.read("w.txt", Some(50), None);
    assert_eq!((o.content.as_str(), o.lines_returned, o.total_lines), ("", 0, 10));
    assert!(o.text().contains("past the end"));
}

#[test]
fn read_refuses_zero_offset_and_limit() {
    let f = fx();
    f.put("z.txt", "x\n");
    assert!(
        matches!(f.read_err("z.txt", Some(0), None), FsError::Invalid(m) if m.contains("1-based"))
    );
    assert!(
        matches!(f.read_err("z.txt", None, Some(0)), FsError::Invalid(m) if m.contains("limit"))
    );
}

#[test]
fn read_counts_last_line_without_newline_and_empty_file() {
    let f = fx();
    f.put("n.txt", "a\nb");
    let o = f.read("n.txt", None, None);
    assert_eq!((o.total_lines, o.content.as_str()), (2, "     1\ta\n     2\tb\n"));
    f.put("one.txt", "abc");
    assert_eq!(f.read("one.txt", None, None).line_ending, "none");
    f.put("e.txt", "");
    let o = f.read("e.txt", None, None);
    assert_eq!((o.total_lines, o.content.as_str(), o.line_ending.as_str()), (0, "", "none"));
    assert!(o.text().contains("empty"));
}

#[test]
fn read_cuts_long_lines_at_2000_chars() {
    let f = fx();
    let long = "é".repeat(5000);
    let exact = "x".repeat(2000);
    f.put("l.txt", format!("{long}\r\n{exact}\r\nshort\r\n"));
    let o = f.read("l.txt", None, None);
    let lines: Vec<&str> = o.content.lines().collect();
    assert_eq!(
        lines[0],
        format!("     1\t{}… [line cut: 2000 of 5000 chars shown]", "é".repeat(2000))
    );
    assert_eq!(lines[1], format!("     2\t{exact}"), "exactly 2000 chars and a CR is not cut");
    assert_eq!(lines[2], "     3\tshort");
    assert_eq!(o.line_ending, "crlf");
}

#[test]
fn read_caps_output_at_256_kib() {
    let f = fx();
    let body: String = (0..300).map(|_| format!("{}\n", "y".repeat(2000))).collect();
    f.put("big.txt", &body);
    let o = f.read("big.txt", None, None);
    assert!(o.content.len() <= 256 * 1024);
    assert!(o.lines_returned > 100 && o.lines_returned < 300);
    assert!(o.truncated);
    assert_eq!(o.total_lines, 300);
    let next = o.lines_returned + 1;
    assert!(o.text().contains(&format!("continue with offset={next}")));
}

#[test]
fn read_hides_cr_of_crlf_and_reports_mixed() {
    let f = fx();
    f.put("c.txt", "a\r\nb\nc\r\n");
    let o = f.read("c.txt", None, None);
    assert_eq!(o.content, "     1\ta\n     2\tb\n     3\tc\n");
    assert_eq!(o.line_ending, "mixed");
}

#[test]
fn read_strips_utf8_bom() {
    let f = fx();
    f.put("b.txt", b"\xEF\xBB\xBFhello\n");
    let o = f.read("b.txt", None, None);
    assert_eq!((o.content.as_str(), o.encoding.as_str()), ("     1\thello\n", "utf-8-bom"));
    assert_eq!(o.sha256.unwrap(), sha256_hex(b"\xEF\xBB\xBFhello\n"));
}

#[test]
fn read_flags_invalid_utf8() {
    let f = fx();
    f.put("i.txt", b"ok\nbad \xFF here\n");
    let o = f.read("i.txt", None, None);
    assert_eq!(o.encoding, "invalid-utf8");
    assert_eq!(o.content, "     1\tok\n     2\tbad \u{FFFD} here\n");
    assert!(o.text().contains("edit refuses"));
}

#[test]
fn read_keeps_a_char_split_across_chunks_valid() {
    // 64 KiB read chunks: put a 3-byte char across the first boundary after the 8 KiB head.
    let f = fx();
    let mut body = "a".repeat(64 * 1024 + 8 * 1024 - 1);
    body.push('€');
    body.push('\n');
    f.put("s.txt", &body);
    assert_eq!(f.read("s.txt", None, None).encoding, "utf-8");
}

#[test]
fn read_decodes_utf16_with_bom() {
    let f = fx();
    let text = "héllo\r\nwörld\r\n";
    let mut le = vec![0xFF, 0xFE];
    le.extend(text.encode_utf16().flat_map(u16::to_le_bytes));
    let mut be = vec![0xFE, 0xFF];
    be.extend(text.encode_utf16().flat_map(u16::to_be_bytes));
    f.put("le.txt", &le);
    f.put("be.txt", &be);
    for (name, enc, bytes) in [("le.txt", "utf-16le", &le), ("be.txt", "utf-16be", &be)] {
        let o = f.read(name, None, None);
        assert_eq!(o.content, "     1\théllo\n     2\twörld\n");
        assert_eq!((o.encoding.as_str(), o.line_ending.as_str()), (enc, "crlf"));
        assert_eq!(o.sha256.unwrap(), sha256_hex(bytes));
    }
}

#[test]
fn read_refuses_binary_with_a_guess() {
    let f = fx();
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    png.extend_from_slice(&[0; 100]);
    f.put("p.png", &png);
    match f.read_err("p.png", None, None) {
        FsError::Binary { size, guess, .. } => {
            assert_eq!((size, guess.as_str()), (108, "a PNG image"))
        }
        other => panic!("{other}"),
    }
    f.put("blob", b"abc\0def");
    assert!(
        matches!(f.read_err("blob", None, None), FsError::Binary { guess, .. } if guess == "binary data")
    );
}

#[test]
fn read_refuses_a_fifo_without_blocking() {
    let f = fx();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        f.abs("pipe"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
    assert!(matches!(f.read_err("pipe", None, None), FsError::Path(PathError::NotRegular { .. })));
}

#[test]
fn read_last_line_of_a_1_gib_sparse_file() {
    let f = fx();
    let head: String = (0..1000).map(|i| format!("head line {i}\n")).collect();
    let path = f.abs("sparse.log");
    {
        use std::io::Write;
        let mut file = std::fs::File::create(&path).unwrap();
        file.write_all(head.as_bytes()).unwrap();
        file.set_len(1 << 30).unwrap();
        let mut file = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
        file.write_all(b"\nthe end\n").unwrap();
    }
    // 1000 text lines, one line of NULs (the hole), then "the end".
    let o = f.read("sparse.log", Some(1002), Some(1));
    assert_eq!(o.content, "  1002\tthe end\n");
    assert_eq!((o.total_lines, o.truncated), (1002, false));
    assert_eq!(o.sha256, None, "no sha256 above 64 MiB");
    assert_eq!(o.size, (1 << 30) + 9);
}

// ---- write ----

#[test]
fn write_creates_with_parents_then_replaces() {
    let f = fx();
    let o = write(
        &f.r,
        WriteParams { path: "new/dir/x.txt".into(), content: "hi\n".into(), expected_sha256: None },
    )
    .unwrap();
    assert_eq!((o.action.as_str(), o.bytes), ("created", 3));
    assert_eq!(o.sha256, sha256_hex(b"hi\n"));
    assert_eq!(o.path, f.abs("new/dir/x.txt").display().to_string());
    assert_eq!(f.get("new/dir/x.txt"), b"hi\n");
    assert_eq!(f.mode("new/dir/x.txt"), 0o644);
    assert_eq!(f.write("new/dir/x.txt", "bye\n", None).unwrap(), "replaced");
    assert_eq!(f.get("new/dir/x.txt"), b"bye\n");
}

#[test]
fn write_keeps_permissions_and_leaves_no_temp_file() {
    let f = fx();
    f.put("run.sh", "#!/bin/sh\n");
    std::fs::set_permissions(f.abs("run.sh"), std::fs::Permissions::from_mode(0o751)).unwrap();
    f.write("run.sh", "#!/bin/sh\necho hi\n", None).unwrap();
    assert_eq!(f.mode("run.sh"), 0o751);
    assert_eq!(f.get("run.sh"), b"#!/bin/sh\necho hi\n");
    assert_eq!(f.names(), vec!["run.sh"]);
}

#[test]
fn write_checks_expected_sha256() {
    let f = fx();
    f.put("s.txt", "one\n");
    let stale = sha256_hex(b"zero\n");
    let err = f.write("s.txt", "two\n", Some(&stale)).unwrap_err();
    assert!(matches!(&err, FsError::Changed { .. }), "{err}");
    assert!(err.to_string().contains("changed since read"));
    assert_eq!(f.get("s.txt"), b"one\n", "file unchanged after a refused write");
    // Positive control: the right hash, in any case, lets it through.
    let right = sha256_hex(b"one\n").to_uppercase();
    assert_eq!(f.write("s.txt", "two\n", Some(&right)).unwrap(), "replaced");
    assert_eq!(f.get("s.txt"), b"two\n");
    // A missing file cannot match; a malformed hash is refused before anything else.
    assert!(
        matches!(f.write("gone.txt", "x", Some(&right)), Err(FsError::Invalid(m)) if m.contains("does not exist"))
    );
    assert!(!f.abs("gone.txt").exists());
    assert!(f.write("no/such/dir.txt", "x", Some(&right)).is_err());
    assert!(!f.abs("no").exists(), "a refused write creates no folder");
    assert!(
        matches!(f.write("s.txt", "x", Some("abc")), Err(FsError::Invalid(m)) if m.contains("64 hex"))
    );
}

#[test]
fn write_refuses_a_hard_linked_file() {
    let f = fx();
    f.put("a.txt", "shared\n");
    std::fs::hard_link(f.abs("a.txt"), f.abs("b.txt")).unwrap();
    let err = f.write("a.txt", "changed\n", None).unwrap_err();
    assert!(matches!(err, FsError::Path(PathError::HardLinked { links: 2, .. })), "{err}");
    assert_eq!(f.get("b.txt"), b"shared\n");
    // Positive control: once the other name is gone, the write goes through.
    std::fs::remove_file(f.abs("b.txt")).unwrap();
    f.write("a.txt", "changed\n", None).unwrap();
    assert_eq!(f.get("a.txt"), b"changed\n");
}

#[test]
fn write_through_an_in_root_symlink_replaces_the_target() {
    let f = fx();
    f.put("real.txt", "old\n");
    std::os::unix::fs::symlink("real.txt", f.abs("link.txt")).unwrap();
    f.write("link.txt", "new\n", None).unwrap();
    assert_eq!(f.get("real.txt"), b"new\n");
    assert!(std::fs::symlink_metadata(f.abs("link.txt")).unwrap().file_type().is_symlink());
}

// ---- edit ----

#[test]
fn edit_replaces_once_and_returns_a_diff() {
    let f = fx();
    f.put("e.rs", "fn main() {\n    println!(\"hi\");\n}\n");
    let o = f.edit("e.rs", "\"hi\"", "\"hello\"", false).unwrap();
    assert_eq!(o.replacements, 1);
    assert_eq!(f.get("e.rs"), b"fn main() {\n    println!(\"hello\");\n}\n");
    assert_eq!(o.sha256, sha256_hex(&f.get("e.rs")));
    assert!(o.diff.contains("-    println!(\"hi\");\n+    println!(\"hello\");\n"), "{}", o.diff);
    assert!(o.diff.starts_with(&format!("--- {}", f.abs("e.rs").display())));
    assert!(o.text().contains("1 replacement "));
}

#[test]
fn edit_keeps_crlf_when_given_lf_text() {
    let f = fx();
    f.put("w.txt", "a\r\nb\r\nc\r\n");
    f.edit("w.txt", "a\nb", "x\ny\nz", false).unwrap();
    assert_eq!(f.get("w.txt"), b"x\r\ny\r\nz\r\nc\r\n");
}

#[test]
fn edit_keeps_bom_and_missing_final_newline() {
    let f = fx();
    f.put("b.txt", "\u{FEFF}a\nb");
    let o = f.edit("b.txt", "b", "c", false).unwrap();
    assert_eq!(f.get("b.txt"), "\u{FEFF}a\nc".as_bytes());
    assert!(o.diff.contains("\\ No newline at end of file"), "{}", o.diff);
}

#[test]
fn edit_round_trips_utf16() {
    let f = fx();
    let mut le = vec![0xFF, 0xFE];
    le.extend("ä\r\nb\r\n".encode_utf16().flat_map(u16::to_le_bytes));
    f.put("u.txt", &le);
    f.edit("u.txt", "b\n", "ö\nc\n", false).unwrap();
    let mut want = vec![0xFF, 0xFE];
    want.extend("ä\r\nö\r\nc\r\n".encode_utf16().flat_map(u16::to_le_bytes));
    assert_eq!(f.get("u.txt"), want);
}

#[test]
fn edit_replace_all_and_ambiguity() {
    let f = fx();
    f.put("r.txt", "foo bar\nbaz\nfoo\n");
    match f.edit("r.txt", "foo", "qux", false).unwrap_err() {
        FsError::NotUnique { count, lines, .. } => assert_eq!((count, lines.as_str()), (2, "1, 3")),
        other => panic!("{other}"),
    }
    assert_eq!(f.get("r.txt"), b"foo bar\nbaz\nfoo\n");
    let o = f.edit("r.txt", "foo", "qux", true).unwrap();
    assert_eq!(o.replacements, 2);
    assert_eq!(f.get("r.txt"), b"qux bar\nbaz\nqux\n");
}

#[test]
fn edit_miss_shows_closest_lines_and_whitespace_hint() {
    let f = fx();
    f.put("m.rs", "fn alpha() {\n    let total = 1;\n}\nfn beta() {}\n");
    let err = f.edit("m.rs", "let totl = 1;", "let total = 2;", false).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, FsError::NoMatch { .. }));
    assert!(msg.contains("closest to `let totl = 1;`:\n     2\t    let total = 1;"), "{msg}");
    // The candidates are for the line of old_string that the file lacks, not its first.
    let err = f.edit("m.rs", "fn alpha() {\n    let totl = 1;", "x", false).unwrap_err();
    assert!(err.to_string().contains("\n     2\t    let total = 1;"), "{err}");
    let err = f.edit("m.rs", "fn alpha() {\n  let total = 1;", "x", false).unwrap_err();
    assert!(err.to_string().contains("would match at line 1 if whitespace"), "{err}");
    assert_eq!(f.get("m.rs"), b"fn alpha() {\n    let total = 1;\n}\nfn beta() {}\n");
}

#[test]
fn edit_checks_expected_sha256() {
    let f = fx();
    f.put("h.txt", "one\n");
    let p = |sha: String| EditParams {
        path: "h.txt".into(),
        old_string: "one".into(),
        new_string: "two".into(),
        replace_all: None,
        expected_sha256: Some(sha),
    };
    let err = edit(&f.r, p(sha256_hex(b"other\n"))).unwrap_err();
    assert!(matches!(err, FsError::Changed { .. }), "{err}");
    assert_eq!(f.get("h.txt"), b"one\n");
    edit(&f.r, p(sha256_hex(b"one\n"))).unwrap();
    assert_eq!(f.get("h.txt"), b"two\n");
}

#[test]
fn edit_refuses_what_it_cannot_write_back() {
    let f = fx();
    f.put("bad.txt", b"ok\nbad \xFF\n");
    let err = f.edit("bad.txt", "ok", "fine", false).unwrap_err();
    assert!(err.to_string().contains("not valid UTF-8"), "{err}");
    f.put("bin", b"ok\0");
    assert!(matches!(f.edit("bin", "ok", "no", false), Err(FsError::Binary { .. })));
    let err = f.edit("missing.txt", "a", "b", false).unwrap_err();
    assert!(err.to_string().contains("use write"), "{err}");
    f.put("t.txt", "a\n");
    assert!(
        matches!(f.edit("t.txt", "", "b", false), Err(FsError::Invalid(m)) if m.contains("empty"))
    );
    assert!(
        matches!(f.edit("t.txt", "a", "a", false), Err(FsError::Invalid(m)) if m.contains("identical"))
    );
    assert_eq!(f.get("bad.txt"), b"ok\nbad \xFF\n");
    assert_eq!(f.get("t.txt"), b"a\n");
}

#[test]
fn edit_keeps_permissions_and_refuses_hard_links() {
    let f = fx();
    f.put("p.sh", "echo a\n");
    std::fs::set_permissions(f.abs("p.sh"), std::fs::Permissions::from_mode(0o700)).unwrap();
    f.edit("p.sh", "a", "b", false).unwrap();
    assert_eq!(f.mode("p.sh"), 0o700);
    assert_eq!(f.names(), vec!["p.sh"]);
    std::fs::hard_link(f.abs("p.sh"), f.abs("q.sh")).unwrap();
    let err = f.edit("p.sh", "b", "c", false).unwrap_err();
    assert!(matches!(err, FsError::Path(PathError::HardLinked { .. })), "{err}");
    assert_eq!(f.get("q.sh"), b"echo b\n");
}

#[test]
fn edit_diff_is_capped() {
    let f = fx();
    let body: String = (0..2000).map(|i| format!("item {i} old\n")).collect();
    f.put("many.txt", &body);
    let o = f.edit("many.txt", "old", "new", true).unwrap();
    assert_eq!(o.replacements, 2000);
    assert!(o.diff.len() <= 8 * 1024 + 100, "{}", o.diff.len());
    assert!(o.diff.ends_with("… diff cut at 8 KiB; read the file to see the rest\n"));
}

// ---- text helpers ----

#[test]
fn utf8_check_handles_split_and_truncated_chars() {
    let euro = "€".as_bytes();
    let mut c = Utf8Check::default();
    c.feed(&euro[..1]);
    c.feed(&euro[1..2]);
    c.feed(&euro[2..]);
    assert!(c.valid());
    let mut c = Utf8Check::default();
    c.feed(&euro[..2]);
    assert!(!c.valid(), "a char cut by the end of the file is invalid");
    let mut c = Utf8Check::default();
    c.feed(&[0xE2, 0x41]);
    assert!(!c.valid());
}

#[test]
fn line_endings_and_escapes() {
    assert_eq!(LineEnding::of("a\nb\n"), LineEnding::Lf);
    assert_eq!(LineEnding::of("a\r\nb\r\n"), LineEnding::Crlf);
    assert_eq!(LineEnding::of("a\r\nb\n"), LineEnding::Mixed);
    assert_eq!(LineEnding::of("a"), LineEnding::None);
    assert_eq!(lf_to_crlf("a\nb\r\nc\n"), "a\r\nb\r\nc\r\n");
    assert_eq!(escape_controls("a\tb\nc\u{1b}[1m"), "a\tb\\nc\\u{1b}[1m");
}
