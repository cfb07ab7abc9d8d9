//! Unit tests of the audit log: condensed arguments, the chain, the head kept beside it and
//! when it is flushed.

use super::*;
use serde_json::json;

#[test]
fn long_strings_are_condensed_at_every_depth_and_short_ones_kept() {
    let long = "y".repeat(MAX_LOGGED_STRING + 1);
    let edge = "z".repeat(MAX_LOGGED_STRING);
    let v = condensed(&json!({ "a": long, "b": [edge, { "c": long }], "n": 3 }));
    assert_eq!(v["a"]["bytes"], MAX_LOGGED_STRING + 1);
    assert_eq!(v["a"]["sha256"], hex::encode(Sha256::digest(long.as_bytes())));
    assert_eq!(v["b"][0], json!(edge));
    assert_eq!(v["b"][1]["c"]["bytes"], MAX_LOGGED_STRING + 1);
    assert_eq!(v["n"], 3);
}

/// The head follows the answer (decision 0077): unsynced after a record, synced by
/// `settle` or before the next record, whoever wrote it; the chain and head verify.
#[test]
fn the_head_is_flushed_after_the_answer_and_before_the_next_record() {
    let dir = tempfile::tempdir().unwrap();
    let a = Audit::open(dir.path()).unwrap();
    let unsynced = |a: &Audit| hands_roots::lock(&a.tail).head_unsynced;
    assert!(unsynced(&a), "another daemon's last head may not be on the disk");
    a.append(&entry("write")).unwrap();
    assert!(unsynced(&a), "the record's answer does not wait for the head");
    a.settle();
    assert!(!unsynced(&a));
    a.append(&entry("write")).unwrap();
    let b = Audit::open(dir.path()).unwrap();
    assert_eq!(b.append(&entry("edit")).unwrap(), 3);
    assert_eq!(a.append(&entry("edit")).unwrap(), 4, "continued after the other's record");
    let h = head::read(a.path()).unwrap().unwrap();
    assert_eq!(h.seq, 4);
    let v = verify::verify(a.path()).unwrap();
    assert_eq!((v.records, v.broken), (4, None));
}

fn entry(tool: &str) -> Entry {
    Entry {
        client: "stdio".into(),
        module: "tools-fs".into(),
        tool: tool.into(),
        class: "write".into(),
        arguments: json!({ "path": "a.txt", "content": "x\u{1}y\"é" , "n": 1.5 }),
        decision: Decision::Allow,
        decided_by: DecidedBy::Policy,
        outcome: "ok".into(),
        result: Some(json!({ "bytes": 3 })),
    }
}

fn lines(p: &Path) -> Vec<String> {
    std::fs::read_to_string(p).unwrap().lines().map(str::to_string).collect()
}

#[test]
fn rfc3339_is_utc_with_millis() {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(1_709_164_800_123);
    assert_eq!(rfc3339(t), "2024-02-29T00:00:00.123Z");
    assert_eq!(rfc3339(std::time::UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
}

#[test]
fn the_chain_continues_across_reopen_and_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let a = Audit::open(dir.path()).unwrap();
    assert_eq!(a.append(&entry("write")).unwrap(), 1);
    assert_eq!(a.append(&entry("edit")).unwrap(), 2);
    drop(a);
    let a = Audit::open(dir.path()).unwrap();
    assert_eq!(a.append(&entry("write")).unwrap(), 3);
    let v = verify(a.path()).unwrap();
    assert_eq!((v.records, v.broken.as_deref()), (3, None));
    let l = lines(a.path());
    let first: Value = serde_json::from_str(&l[0]).unwrap();
    assert_eq!(first["prev"], GENESIS);
    let second: Value = serde_json::from_str(&l[1]).unwrap();
    assert_eq!(second["prev"], first["hash"]);
}

#[test]
fn two_handles_on_one_file_keep_one_chain() {
    let dir = tempfile::tempdir().unwrap();
    let a = Audit::open(dir.path()).unwrap();
    let b = Audit::open(dir.path()).unwrap();
    a.append(&entry("write")).unwrap();
    b.append(&entry("write")).unwrap();
    a.append(&entry("write")).unwrap();
    let v = verify(a.path()).unwrap();
    assert_eq!((v.records, v.broken.as_deref()), (3, None));
}

#[test]
fn an_edited_byte_names_the_record() {
    let dir = tempfile::tempdir().unwrap();
    let a = Audit::open(dir.path()).unwrap();
    for _ in 0..3 {
        a.append(&entry("write")).unwrap();
    }
    let text = std::fs::read_to_string(a.path()).unwrap();
    // Inside a string value: still JSON, wrong hash.
    let edited = text.replacen("a.txt", "b.txt", 2).replacen("b.txt", "a.txt", 1);
    std::fs::write(a.path(), edited).unwrap();
    let v = verify(a.path()).unwrap();
    assert!(v.broken.as_deref().unwrap().starts_with("seq 2 (line 2)"), "{v:?}");
    // A byte that breaks the JSON: the line is named.
    let edited = text.replacen("\"seq\":2", "\"seq\":2,", 1);
    std::fs::write(a.path(), edited).unwrap();
    let v = verify(a.path()).unwrap();
    assert!(v.broken.as_deref().unwrap().starts_with("line 2 "), "{v:?}");
}

#[test]
fn a_torn_last_line_does_not_stop_the_daemon_and_verifies_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let a = Audit::open(dir.path()).unwrap();
    a.append(&entry("write")).unwrap();
    drop(a);
    let p = path_in(dir.path());
    let mut f = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
    f.write_all(b"{\"seq\":2,\"time\":\"20").unwrap();
    let v = verify(&p).unwrap();
    assert_eq!((v.records, v.broken.as_deref(), v.warnings.len()), (1, None, 1));
    let a = Audit::open(dir.path()).unwrap();
    assert_eq!(a.append(&entry("write")).unwrap(), 2);
    let v = verify(&p).unwrap();
    assert_eq!((v.records, v.broken.as_deref(), v.warnings.len()), (2, None, 1), "{v:?}");
    assert_eq!(lines(&p).len(), 3);
}

#[test]
fn canonical_sorts_keys_whatever_the_order() {
    let a: Value =
        serde_json::from_str(r#"{"b":1,"a":{"d":[1,{"z":0,"y":"é"}],"c":null}}"#).unwrap();
    let mut s = String::new();
    canonical(&a, &mut s);
    assert_eq!(s, r#"{"a":{"c":null,"d":[1,{"y":"é","z":0}]},"b":1}"#);
}
