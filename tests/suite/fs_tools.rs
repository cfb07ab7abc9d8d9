//! Every file tool and every parameter: windows and limits, encodings and line endings, atomic
//! writes, edit matching, listing order, glob and grep switches. In process, but for the
//! gigabyte read (it is about `hands serve`'s one-thread runtime) and the cached walk (bash).

use super::common::{Client, Era, Fixture, text_of};
use serde_json::json;
use sha2::{Digest, Sha256};

async fn setup() -> (Fixture, Client) {
    let fx = Fixture::new();
    let c = Client::in_process(&fx, &fx.fs_config(), Era::Legacy).await;
    (fx, c)
}

fn sha(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

#[tokio::test]
async fn read_windows_line_numbers_and_metadata() {
    let (fx, c) = setup().await;
    let text: String = (1..=50).map(|i| format!("line {i}\n")).collect();
    fx.write("f.txt", &text);
    let r = c.ok("read", json!({"path": "f.txt"})).await;
    assert_eq!(r["total_lines"], 50);
    assert_eq!(r["truncated"], false);
    assert_eq!(r["encoding"], "utf-8");
    assert_eq!(r["line_ending"], "lf");
    assert_eq!(r["sha256"], sha(text.as_bytes()));
    assert!(r["content"].as_str().unwrap().starts_with("     1\tline 1\n     2\tline 2\n"));
    let w = c.ok("read", json!({"path": "f.txt", "offset": 10, "limit": 3})).await;
    assert_eq!(w["content"], "    10\tline 10\n    11\tline 11\n    12\tline 12\n");
    assert_eq!(w["truncated"], true);
    assert_eq!(w["total_lines"], 50);
    let past = c.ok("read", json!({"path": "f.txt", "offset": 99})).await;
    assert_eq!(past["lines_returned"], 0);
    let e = c.err("read", json!({"path": "f.txt", "offset": 0})).await;
    assert!(e.contains("offset"), "{e}");
    let e = c.err("read", json!({"path": "missing.txt"})).await;
    assert!(e.contains("does not exist"), "{e}");
    c.stop().await;
}

#[tokio::test]
async fn read_default_limit_long_lines_and_output_cap() {
    let (fx, c) = setup().await;
    let many: String = (1..=2500).map(|i| format!("{i}\n")).collect();
    fx.write("many.txt", &many);
    let r = c.ok("read", json!({"path": "many.txt"})).await;
    assert_eq!(r["lines_returned"], 2000);
    assert_eq!(r["truncated"], true);
    fx.write("long.txt", &format!("{}\nshort\n", "x".repeat(5000)));
    let r = c.ok("read", json!({"path": "long.txt"})).await;
    let content = r["content"].as_str().unwrap();
    assert!(content.contains("line cut"), "{content}");
    assert!(content.len() < 3000);
    assert!(content.contains("\tshort"));
    // 200 lines of 1999 chars each exceed 256 KiB: capped and flagged.
    let wide: String = (0..200).map(|_| format!("{}\n", "y".repeat(1999))).collect();
    fx.write("wide.txt", &wide);
    let r = c.ok("read", json!({"path": "wide.txt"})).await;
    assert!(r["content"].as_str().unwrap().len() <= 256 * 1024);
    assert_eq!(r["truncated"], true);
    c.stop().await;
}

#[tokio::test]
async fn read_encodings_and_binary_refusal() {
    let (fx, c) = setup().await;
    std::fs::write(fx.root.join("bom.txt"), b"\xEF\xBB\xBFhello\r\nworld\r\n").unwrap();
    let r = c.ok("read", json!({"path": "bom.txt"})).await;
    assert_eq!(r["encoding"], "utf-8-bom");
    assert_eq!(r["line_ending"], "crlf");
    assert_eq!(r["content"], "     1\thello\n     2\tworld\n");
    let mut u16 = vec![0xFF, 0xFE];
    for ch in "héllo\n".encode_utf16() {
        u16.extend_from_slice(&ch.to_le_bytes());
    }
    std::fs::write(fx.root.join("u16.txt"), &u16).unwrap();
    let r = c.ok("read", json!({"path": "u16.txt"})).await;
    assert_eq!(r["encoding"], "utf-16le");
    assert!(r["content"].as_str().unwrap().contains("héllo"));
    std::fs::write(fx.root.join("bad.txt"), b"ok\nbad \xFF byte\n").unwrap();
    let r = c.ok("read", json!({"path": "bad.txt"})).await;
    assert_eq!(r["encoding"], "invalid-utf8");
    assert!(r["content"].as_str().unwrap().contains('\u{FFFD}'));
    std::fs::write(fx.root.join("img.png"), b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR").unwrap();
    let e = c.err("read", json!({"path": "img.png"})).await;
    assert!(e.contains("binary") && e.contains("png"), "{e}");
    let e = c.err("read", json!({"path": "."})).await;
    assert!(e.contains("directory"), "{e}");
    c.stop().await;
}

#[tokio::test]
async fn read_one_line_window_at_the_end_of_a_sparse_gigabyte_file() {
    let fx = Fixture::new();
    let c = Client::start(&fx, &fx.fs_config()).await;
    {
        use std::io::{Seek, SeekFrom, Write};
        let mut f = std::fs::File::create(fx.root.join("huge.txt")).unwrap();
        f.write_all(&b"text line\n".repeat(1000)).unwrap();
        f.seek(SeekFrom::Start(1024 * 1024 * 1024)).unwrap();
        f.write_all(b"\nlast line\n").unwrap();
    }
    fx.write("small.txt", "one line\n");
    let r = {
        let big = c.ok("read", json!({"path": "huge.txt", "offset": 1002, "limit": 1}));
        tokio::pin!(big);
        // The stdio daemon runs small reads and listings on its one thread; this read is far
        // over the inline cap, so it goes to the blocking pool and the client's other calls are
        // answered while it reads through the gigabyte (about a second).
        let small = async {
            let listed = c.ok("list_dir", json!({})).await;
            (listed, c.ok("read", json!({"path": "small.txt"})).await)
        };
        let (listed, small) = tokio::select! {
            biased;
            r = &mut big => panic!("the 1 GiB read answered before two small calls after it: {r}"),
            both = small => both,
        };
        assert_eq!(listed["total"], 2, "{listed}");
        assert_eq!(small["content"], "     1\tone line\n");
        big.await
    };
    assert_eq!(r["content"], "  1002\tlast line\n");
    assert_eq!(r["total_lines"], 1002);
    assert!(r.get("sha256").is_none() || r["sha256"].is_null(), "no sha256 above 64 MiB");
    c.stop().await;
}

#[tokio::test]
async fn write_creates_replaces_atomically_and_keeps_permissions() {
    use std::os::unix::fs::PermissionsExt;
    let (fx, c) = setup().await;
    let w = c.ok("write", json!({"path": "deep/er/new.txt", "content": "v1\n"})).await;
    assert_eq!(w["action"], "created");
    assert_eq!(w["bytes"], 3);
    assert_eq!(w["sha256"], sha(b"v1\n"));
    let p = fx.root.join("deep/er/new.txt");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o751)).unwrap();
    let w = c.ok("write", json!({"path": "deep/er/new.txt", "content": "v2\n"})).await;
    assert_eq!(w["action"], "replaced");
    assert_eq!(std::fs::read_to_string(&p).unwrap(), "v2\n");
    assert_eq!(std::fs::metadata(&p).unwrap().permissions().mode() & 0o7777, 0o751);
    // No temp file is left in the folder.
    let names: Vec<_> = std::fs::read_dir(fx.root.join("deep/er"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
    c.stop().await;
}

#[tokio::test]
async fn write_and_edit_refuse_a_stale_expected_sha256() {
    let (fx, c) = setup().await;
    fx.write("s.txt", "original\n");
    let r = c.ok("read", json!({"path": "s.txt"})).await;
    let h = r["sha256"].as_str().unwrap().to_string();
    fx.write("s.txt", "changed behind our back\n");
    let e =
        c.err("write", json!({"path": "s.txt", "content": "mine\n", "expected_sha256": h})).await;
    assert!(e.contains("changed since read"), "{e}");
    let e = c.err("edit", json!({"path": "s.txt", "old_string": "changed", "new_string": "x", "expected_sha256": h})).await;
    assert!(e.contains("changed since read"), "{e}");
    assert_eq!(
        std::fs::read_to_string(fx.root.join("s.txt")).unwrap(),
        "changed behind our back\n"
    );
    let fresh = sha(b"changed behind our back\n");
    c.ok("write", json!({"path": "s.txt", "content": "mine\n", "expected_sha256": fresh})).await;
    assert_eq!(std::fs::read_to_string(fx.root.join("s.txt")).unwrap(), "mine\n");
    c.stop().await;
}

#[tokio::test]
async fn edit_unique_match_diff_and_errors() {
    let (fx, c) = setup().await;
    fx.write("e.rs", "fn a() {}\nfn b() {}\nfn a() {}\n");
    let e = c
        .err("edit", json!({"path": "e.rs", "old_string": "fn a() {}", "new_string": "fn z() {}"}))
        .await;
    assert!(e.contains("2 times") && e.contains("1") && e.contains("3"), "{e}");
    let e =
        c.err("edit", json!({"path": "e.rs", "old_string": "fn c() {}", "new_string": "x"})).await;
    assert!(e.contains("not found") && e.contains("fn"), "{e}");
    assert_eq!(
        std::fs::read_to_string(fx.root.join("e.rs")).unwrap(),
        "fn a() {}\nfn b() {}\nfn a() {}\n"
    );
    let r = c
        .ok("edit", json!({"path": "e.rs", "old_string": "fn b() {}", "new_string": "fn bee() {}"}))
        .await;
    assert_eq!(r["replacements"], 1);
    assert!(r["diff"].as_str().unwrap().contains("-fn b() {}\n+fn bee() {}"), "{}", r["diff"]);
    let content = std::fs::read_to_string(fx.root.join("e.rs")).unwrap();
    assert_eq!(r["sha256"], sha(content.as_bytes()));
    let r = c.ok("edit", json!({"path": "e.rs", "old_string": "fn a()", "new_string": "fn y()", "replace_all": true})).await;
    assert_eq!(r["replacements"], 2);
    assert_eq!(
        std::fs::read_to_string(fx.root.join("e.rs")).unwrap(),
        "fn y() {}\nfn bee() {}\nfn y() {}\n"
    );
    c.stop().await;
}

#[tokio::test]
async fn edit_preserves_crlf_bom_and_missing_final_newline() {
    let (fx, c) = setup().await;
    std::fs::write(fx.root.join("w.txt"), b"\xEF\xBB\xBFone\r\ntwo\r\nthree").unwrap();
    c.ok(
        "edit",
        json!({"path": "w.txt", "old_string": "one\ntwo", "new_string": "uno\ndos\nplus"}),
    )
    .await;
    assert_eq!(
        std::fs::read(fx.root.join("w.txt")).unwrap(),
        b"\xEF\xBB\xBFuno\r\ndos\r\nplus\r\nthree"
    );
    let r = c.ok("read", json!({"path": "w.txt"})).await;
    assert_eq!(r["line_ending"], "crlf");
    assert_eq!(r["encoding"], "utf-8-bom");
    std::fs::write(fx.root.join("bin.dat"), b"a\0b").unwrap();
    let e = c.err("edit", json!({"path": "bin.dat", "old_string": "a", "new_string": "b"})).await;
    assert!(e.contains("binary"), "{e}");
    std::fs::write(fx.root.join("inv.txt"), b"a \xFF b\n").unwrap();
    let e = c.err("edit", json!({"path": "inv.txt", "old_string": "a", "new_string": "b"})).await;
    assert!(e.to_lowercase().contains("utf-8"), "{e}");
    c.stop().await;
}

#[tokio::test]
async fn list_dir_orders_folders_first_and_shows_links() {
    let (fx, c) = setup().await;
    fx.write("b.txt", "bb");
    fx.write("a.txt", "a");
    fx.write("zdir/x", "");
    fx.write("adir/y", "");
    std::os::unix::fs::symlink("a.txt", fx.root.join("link")).unwrap();
    std::os::unix::fs::symlink("/etc", fx.root.join("etc-link")).unwrap();
    let r = c.ok("list_dir", json!({})).await;
    assert_eq!(r["folders"], json!(["adir", "zdir"]));
    assert_eq!(r["files"], json!({"a.txt": 1, "b.txt": 2}));
    assert_eq!(r["links"], json!({"etc-link": "/etc", "link": "a.txt"}));
    assert_eq!(r.get("other"), None, "no FIFO, socket or device here: {r}");
    // The text mirror in the same order: folders, files, links, each by name.
    let text = text_of(&c.call("list_dir", json!({})).await);
    assert!(
        text.contains("adir/\nzdir/\na.txt  1 bytes\nb.txt  2 bytes\netc-link -> /etc\n"),
        "{text}"
    );
    let r = c.ok("list_dir", json!({"limit": 3})).await;
    assert_eq!((&r["folders"], &r["files"]), (&json!(["adir", "zdir"]), &json!({"a.txt": 1})));
    assert_eq!(r["truncated"], true);
    assert_eq!(r["total"], 6);
    // A folder larger than the inline cap (its own size, 128 KiB) is listed on the blocking
    // pool: the same answer.
    std::fs::create_dir(fx.root.join("many")).unwrap();
    for i in 0..8000 {
        std::fs::write(fx.root.join(format!("many/file-{i:05}.txt")), "").unwrap();
    }
    let size = std::fs::metadata(fx.root.join("many")).unwrap().len();
    assert!(size > 128 * 1024, "the folder must be over the inline cap: {size} bytes");
    let r = c.ok("list_dir", json!({"path": "many", "limit": 3})).await;
    let names: Vec<_> = r["files"].as_object().unwrap().keys().cloned().collect();
    assert_eq!(names, ["file-00000.txt", "file-00001.txt", "file-00002.txt"]);
    assert_eq!((r["total"].as_u64(), r["truncated"].as_bool()), (Some(8000), Some(true)));
    c.stop().await;
}

#[tokio::test]
async fn glob_patterns_hidden_ignored_limit_and_order() {
    let (fx, c) = setup().await;
    fx.write("src/main.rs", "");
    fx.write("src/lib/mod.rs", "");
    fx.write("top.rs", "");
    fx.write("notes.md", "");
    fx.write(".hidden/h.rs", "");
    fx.write("target/gen.rs", "");
    fx.write(".gitignore", "target/\n");
    let r = c.ok("glob", json!({"pattern": "**/*.rs"})).await;
    assert_eq!(r["files"], json!(["src/lib/mod.rs", "src/main.rs", "top.rs"]));
    let r = c.ok("glob", json!({"pattern": "**/*.rs", "hidden": true, "ignored": true})).await;
    assert_eq!(
        r["files"],
        json!([".hidden/h.rs", "src/lib/mod.rs", "src/main.rs", "target/gen.rs", "top.rs"])
    );
    let r = c.ok("glob", json!({"pattern": "*.rs", "path": "src"})).await;
    assert_eq!(r["files"], json!(["src/main.rs"]));
    let r = c.ok("glob", json!({"pattern": "**/*.rs", "limit": 2})).await;
    assert_eq!(r["files"].as_array().unwrap().len(), 2);
    assert_eq!(r["truncated"], true);
    c.stop().await;
}

/// A settled tree's walk is cached (`modules/fs/src/listing.rs`); whatever changes after —
/// a file written deep in the tree, through the tools or beside them, an ignore file edited in
/// place, a file removed, files made by a sandboxed command — shows in the very next `glob`,
/// and a secret never shows.
#[tokio::test]
async fn glob_from_a_cached_walk_sees_every_change_at_once() {
    let fx = Fixture::new();
    let c = Client::start(&fx, &fx.fs_shell_config()).await;
    fx.write("a.rs", "");
    fx.write("src/deep/er/b.rs", "");
    fx.write("src/deep/er/server.key", "secret");
    fx.write("src/.gitignore", "");
    fx.write("target/gen.rs", "");
    fx.write(".gitignore", "target/\n");
    // Older than the cache's one-second same-tick margin: the walk is kept.
    tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
    let all = json!({"pattern": "**/*"});
    let first = c.ok("glob", all.clone()).await;
    // The secret (`*.key`) stays out of the walk and of the cached answer alike.
    assert_eq!(first["files"], json!(["a.rs", "src/deep/er/b.rs"]));
    assert_eq!(c.ok("glob", all.clone()).await["files"], first["files"]);

    c.ok("write", json!({"path": "src/deep/er/c.rs", "content": ""})).await;
    assert_eq!(
        c.ok("glob", all.clone()).await["files"],
        json!(["a.rs", "src/deep/er/b.rs", "src/deep/er/c.rs"])
    );

    tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
    c.ok("glob", all.clone()).await;
    let gitignore = fx.root.join("src/.gitignore");
    let mut f = std::fs::OpenOptions::new().append(true).open(gitignore).unwrap();
    std::io::Write::write_all(&mut f, b"c.rs\n").unwrap();
    std::fs::remove_file(fx.root.join("a.rs")).unwrap();
    let r = c.ok("glob", all.clone()).await;
    assert_eq!(r["files"], json!(["src/deep/er/b.rs"]));

    // A sandboxed command's changes (the roots are bind-mounted into its namespace: the same
    // folders) show as well.
    tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
    c.ok("glob", all.clone()).await;
    let command = "mkdir -p src/new && touch src/new/d.rs && mv src/deep/er/b.rs src/deep/er/b2.rs";
    assert_eq!(c.ok("bash", json!({ "command": command })).await["exit_code"], 0);
    let r = c.ok("glob", all.clone()).await;
    assert_eq!(r["files"], json!(["src/deep/er/b2.rs", "src/new/d.rs"]));
    c.stop().await;
}

#[tokio::test]
async fn grep_modes_context_case_literal_glob_and_limit() {
    let (fx, c) = setup().await;
    fx.write("a.rs", "one\nTwo needle\nthree\nfour\n");
    fx.write("b.txt", "needle\nneedle again\n");
    fx.write("c.rs", "a.b\naxb\n");
    fx.write(".secret-dir/x.rs", "needle\n");
    fx.write("long.txt", &format!("needle{}\n", "z".repeat(2000)));
    std::fs::write(fx.root.join("bin.dat"), b"needle\0binary").unwrap();
    let r = c.ok("grep", json!({"pattern": "needle"})).await;
    assert_eq!(r["total_matches"], 4, "{r}");
    let long = r["matches"].as_array().unwrap().iter().find(|m| m["path"] == "long.txt").unwrap();
    assert!(long["text"].as_str().unwrap().chars().count() < 600, "lines cut at 500 chars");
    let r = c.ok("grep", json!({"pattern": "needle", "hidden": true})).await;
    assert_eq!(r["total_matches"], 5, "{r}");
    let r = c.ok("grep", json!({"pattern": "two", "case_insensitive": true, "context": 1})).await;
    let kinds: Vec<_> = r["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["line"].as_u64().unwrap(), m["kind"].as_str().unwrap().to_string()))
        .collect();
    assert_eq!(
        kinds,
        [(1, "context".to_string()), (2, "match".to_string()), (3, "context".to_string())]
    );
    let r = c.ok("grep", json!({"pattern": "Two", "before": 0, "after": 2})).await;
    assert_eq!(r["matches"].as_array().unwrap().len(), 3);
    let r = c.ok("grep", json!({"pattern": "a.b", "literal": true})).await;
    assert_eq!(r["total_matches"], 1);
    let r = c.ok("grep", json!({"pattern": "a.b"})).await;
    assert_eq!(r["total_matches"], 2);
    let r = c.ok("grep", json!({"pattern": "needle", "glob": "*.txt", "output": "count"})).await;
    let files = r["files"].as_array().unwrap();
    assert!(files.iter().any(|f| f["path"] == "b.txt" && f["count"] == 2), "{r}");
    assert!(files.iter().all(|f| f["path"].as_str().unwrap().ends_with(".txt")), "{r}");
    let r = c.ok("grep", json!({"pattern": "needle", "output": "files"})).await;
    let paths: Vec<_> =
        r["files"].as_array().unwrap().iter().map(|f| f["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["a.rs", "b.txt", "long.txt"]);
    let r = c.ok("grep", json!({"pattern": "needle", "limit": 2})).await;
    assert_eq!(r["matches"].as_array().unwrap().len(), 2);
    assert_eq!(r["truncated"], true);
    let t = text_of(&c.call("grep", json!({"pattern": "needle", "path": "b.txt"})).await);
    assert!(t.contains("1:needle"), "{t}");
    c.stop().await;
}

/// Found by the eighth attack pass: a refused `write` left the folders it made on its way
/// (`.git/worktrees/zz` for a refused `commondir`). A refusal loses nothing and leaves nothing;
/// the positive control writes through new folders, which stay.
#[tokio::test]
async fn a_refused_write_leaves_no_folder_it_made() {
    let (fx, c) = setup().await;
    std::fs::create_dir_all(fx.root.join("repo/.git/worktrees")).unwrap();
    std::fs::write(fx.root.join("repo/.git/HEAD"), "ref: refs/heads/main\n").unwrap();
    // `HEAD` beside a `config` would make `new/deep` a git dir: refused once both folders exist.
    std::fs::create_dir_all(fx.root.join("bare")).unwrap();
    std::fs::write(fx.root.join("bare/config"), "[core]\n").unwrap();
    for path in ["repo/.git/worktrees/zz/commondir", "made/a/b/.git", "bare/HEAD"] {
        let e = c.err("write", serde_json::json!({ "path": path, "content": "x\n" })).await;
        assert!(e.contains("protected") || e.contains("git dir"), "{path}: {e}");
    }
    for left in ["repo/.git/worktrees/zz", "made"] {
        assert!(!fx.root.join(left).exists(), "{left} was left behind");
    }
    assert!(fx.root.join("bare/config").exists());
    c.ok("write", serde_json::json!({ "path": "made/a/b/file.txt", "content": "x\n" })).await;
    assert_eq!(std::fs::read_to_string(fx.root.join("made/a/b/file.txt")).unwrap(), "x\n");
    fx.assert_canary();
}
