//! The audit log (SPEC §8): `<state_dir>/audit.jsonl`, one JSON line per write-class and
//! external-class call and per refusal, hash-chained, appended and fsynced before the call's
//! result is returned; and the reader behind `hands audit [--follow] [--verify]`.
//!
//! Each record carries `prev` (the `hash` of the record before it; 64 zeros for the first) and
//! `hash`: the sha256, in hex, of the record's canonical JSON without `hash` — keys sorted at
//! every level, no whitespace, serde_json's string escaping. The chain proves order and
//! completeness against edits, not against someone who rewrites the whole file from an edit
//! onwards (there is no key); keep a copy elsewhere when that matters.
//!
//! Several daemons may share a state dir (every stdio client starts its own `hands serve`):
//! each append takes an exclusive `flock` on the file and, when the file grew since this
//! daemon's last append, re-reads the last record, so the chain stays one chain.
//!
//! The daemon keeps the count and head hash of its last record apart from the log
//! (`audit.head`, `head.rs`), so a log cut short is found too.
//!
//! A crash can tear the last line (a partial write). The daemon still starts: the next append
//! first ends the torn line with a newline, then continues the chain from the last complete
//! record. `--verify` accepts such a line only when the record after it links across it (its
//! `prev` is the hash of the record before the torn line), and then prints a warning; a line
//! that cannot be read and is not linked across is the first broken record.

use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The `prev` of the first record.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The file name inside the state dir.
pub const FILE_NAME: &str = "audit.jsonl";

/// What the gate decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Allow,
    Deny,
}

/// Who made the gate's decision (SPEC §6, §8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DecidedBy {
    /// `[trust]` (or the module's override) said allow or deny, a denied path was refused, or
    /// the gate failed closed: nobody answered in time, or the answer's state was invalid,
    /// expired or spent.
    Policy,
    /// A standing *session* or *always* permission of this client.
    StandingPermission,
    /// A person answered through the client (input-required result or elicitation).
    PersonViaClient,
    /// A person answered with `hands approvals` in a terminal.
    PersonViaTerminal,
    /// A person answered, or acted, on the dashboard (`src/dashboard`).
    PersonViaDashboard,
    /// The brake: `hands stop` is in effect until `hands stop --release`.
    Stop,
}

/// One call, as the server describes it; `Audit::append` adds seq, time and the chain.
#[derive(Debug, Clone)]
pub struct Entry {
    pub client: String,
    pub module: String,
    pub tool: String,
    pub class: String,
    pub arguments: Value,
    pub decision: Decision,
    pub decided_by: DecidedBy,
    /// `ok`, `error: <first line>` or `refused: <why>`.
    pub outcome: String,
    /// Scalar facts of a successful result (exit code, signal, duration, bytes, sha256, ...).
    pub result: Option<Value>,
}

/// The record as written; field order is the line's order (the hash does not depend on it).
#[derive(Serialize)]
struct Record<'a> {
    seq: u64,
    time: String,
    client: &'a str,
    module: &'a str,
    tool: &'a str,
    class: &'a str,
    arguments: &'a Value,
    decision: Decision,
    decided_by: DecidedBy,
    outcome: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<&'a Value>,
    prev: &'a str,
}

/// The open log. Appends are serialised in-process by the mutex and across processes by flock.
pub struct Audit {
    path: PathBuf,
    tail: Mutex<Tail>,
    /// Why the last append failed, until one succeeds: write- and external-class calls are
    /// refused meanwhile ([`Audit::ready`]), so nothing runs unaudited.
    failed: Mutex<Option<String>>,
}

/// A string argument longer than this (bytes) is recorded as its sha256 and size, not its
/// content: a 4 MiB `write` must not put 4 MiB into the log (nor let a caller fill the disk
/// through it). Commands and paths are far shorter and stay whole.
pub const MAX_LOGGED_STRING: usize = 4096;

/// Free space the audit log's file system must have before a write- or external-class call
/// runs: a record is well under this (arguments are condensed), so an append then fits.
pub const MIN_FREE: u64 = 256 * 1024;

/// Why the audit log cannot take a record ([`Audit::ready`], `Daemon::append_audit`): a write-
/// or external-class call is refused with it, and `hands exec` reports a record it could not
/// write. The text says what a person can do.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// The free space of the log's file system could not be asked.
    #[error("cannot check the free space of {}: {source}", dir.display())]
    FreeSpace { dir: PathBuf, source: rustix::io::Errno },
    /// The log's file system has `free` bytes free, under [`MIN_FREE`].
    #[error(
        "the audit log {} cannot be written safely: its file system has {free} bytes free (at \
         least {MIN_FREE} are needed); a person can free space there",
        log.display()
    )]
    Full { log: PathBuf, free: u64 },
    /// The last append failed (`why`), and space has not come back since.
    #[error(
        "the last write to the audit log {} failed ({why}); a person can free space or fix the \
         state dir",
        log.display()
    )]
    LastWriteFailed { log: PathBuf, why: String },
    /// This append failed.
    #[error("cannot write the audit log {}: {source}", log.display())]
    Write { log: PathBuf, source: std::io::Error },
    /// The task that appends (off the async runtime) ended without an answer.
    #[error("cannot write the audit log {}: {source}", log.display())]
    Task { log: PathBuf, source: tokio::task::JoinError },
}

/// `v` with every string longer than [`MAX_LOGGED_STRING`] replaced by its digest and size.
pub fn condensed(v: &Value) -> Value {
    match v {
        Value::String(s) if s.len() > MAX_LOGGED_STRING => serde_json::json!({
            "sha256": hex::encode(Sha256::digest(s.as_bytes())),
            "bytes": s.len(),
            "omitted": format!("over {MAX_LOGGED_STRING} bytes: content not logged"),
        }),
        Value::Array(items) => Value::Array(items.iter().map(condensed).collect()),
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), condensed(v))).collect())
        }
        other => other.clone(),
    }
}

/// Where this daemon believes the chain ends.
struct Tail {
    file: File,
    /// The file's length after our last append (or at open).
    end: u64,
    seq: u64,
    prev: String,
    /// The head may not be on the disk yet (written after a record, synced after the answer
    /// by [`Audit::settle`], or before the next record). True at open: another daemon's last
    /// head may not be either.
    head_unsynced: bool,
}

/// Holds an exclusive flock until dropped.
struct Flock<'a>(&'a File);

impl<'a> Flock<'a> {
    fn exclusive(file: &'a File) -> std::io::Result<Flock<'a>> {
        rustix::fs::flock(file, rustix::fs::FlockOperation::LockExclusive)?;
        Ok(Flock(file))
    }
}

impl Drop for Flock<'_> {
    fn drop(&mut self) {
        let _ = rustix::fs::flock(self.0, rustix::fs::FlockOperation::Unlock);
    }
}

/// The audit log's path for a state dir (relative state dirs are taken from the current folder,
/// as tools-shell does).
pub fn path_in(state_dir: &Path) -> PathBuf {
    state_dir.join(FILE_NAME)
}

impl Audit {
    /// Opens (creating the state dir and the file, mode 0600) and finds the end of the chain.
    #[expect(clippy::disallowed_methods, reason = "the state dir's audit log")]
    pub fn open(state_dir: &Path) -> anyhow::Result<Audit> {
        use anyhow::Context;
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::create_dir_all(state_dir).with_context(|| {
            format!(
                "cannot create the state dir {} for the audit log; fix its permissions or set \
                 [daemon] state_dir",
                state_dir.display()
            )
        })?;
        let path = path_in(state_dir);
        let file = std::fs::OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(0o600)
            .open(&path)
            .with_context(|| {
                format!(
                    "cannot open the audit log {}; fix its permissions or set [daemon] state_dir",
                    path.display()
                )
            })?;
        let (end, seq, prev) = {
            let _lock = Flock::exclusive(&file)
                .with_context(|| format!("cannot lock the audit log {}", path.display()))?;
            let end = file.metadata()?.len();
            let (seq, prev) = head::end_of_chain(&file, end, &path)
                .with_context(|| format!("cannot read the audit log {}", path.display()))?;
            // A log from before the head was kept: its head is where it ends now.
            if matches!(head::read(&path), Ok(None)) {
                head::write(&path, &head::Head { seq, hash: prev.clone() }).with_context(|| {
                    format!("cannot write the audit log's head beside {}", path.display())
                })?;
            }
            (end, seq, prev)
        };
        let tail = Tail { file, end, seq, prev, head_unsynced: true };
        Ok(Audit { path, tail: Mutex::new(tail), failed: Mutex::new(None) })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one record and fsyncs it; returns its seq. Blocking: call it off the async
    /// runtime's worker threads.
    pub fn append(&self, e: &Entry) -> std::io::Result<u64> {
        let r = self.append_record(e);
        let mut failed = hands_roots::lock(&self.failed);
        *failed = r.as_ref().err().map(|e| e.to_string());
        r
    }

    /// Whether a write- or external-class call may run: the last append succeeded and the
    /// log's file system has [`MIN_FREE`] bytes free. Otherwise the reason, for a refusal that
    /// tells a person what to do.
    pub fn ready(&self) -> Result<(), AuditError> {
        let dir = self.path.parent().unwrap_or(Path::new("/"));
        let failed = hands_roots::lock(&self.failed).clone();
        let free = rustix::fs::statvfs(dir)
            .map(|v| v.f_bavail.saturating_mul(v.f_frsize))
            .map_err(|source| AuditError::FreeSpace { dir: dir.to_path_buf(), source })?;
        if free < MIN_FREE {
            return Err(AuditError::Full { log: self.path.clone(), free });
        }
        match failed {
            // Space is back: the next append will tell (and clears this when it succeeds).
            Some(_) if free >= MIN_FREE * 4 => Ok(()),
            Some(why) => Err(AuditError::LastWriteFailed { log: self.path.clone(), why }),
            None => Ok(()),
        }
    }

    fn append_record(&self, e: &Entry) -> std::io::Result<u64> {
        let mut t = hands_roots::lock(&self.tail);
        let t = &mut *t;
        let _lock = Flock::exclusive(&t.file)?;
        let len = t.file.metadata()?.len();
        // The head on the disk names the last record before another is written: a crash then
        // leaves it at most one behind. Another daemon's append (the log grew) may have left
        // its head unsynced as this one does.
        if t.head_unsynced || len != t.end {
            head::sync(&self.path)?;
            t.head_unsynced = false;
        }
        let mut line = Vec::new();
        if len != t.end {
            // Another daemon appended (or a torn line is there, or the log was cut short):
            // continue from the file's end, numbered after the head's record.
            let (seq, prev) = head::end_of_chain(&t.file, len, &self.path)?;
            t.seq = seq;
            t.prev = prev;
        }
        if len > 0 && !ends_with_newline(&t.file, len)? {
            line.push(b'\n');
        }
        let seq = t.seq + 1;
        let arguments = condensed(&e.arguments);
        let record = Record {
            seq,
            time: rfc3339(std::time::SystemTime::now()),
            client: &e.client,
            module: &e.module,
            tool: &e.tool,
            class: &e.class,
            arguments: &arguments,
            decision: e.decision,
            decided_by: e.decided_by,
            outcome: &e.outcome,
            result: e.result.as_ref(),
            prev: &t.prev,
        };
        let value = serde_json::to_value(&record).map_err(std::io::Error::other)?;
        let hash = hash_of(&value);
        let mut text = serde_json::to_string(&record).map_err(std::io::Error::other)?;
        // The record's own order, with `hash` last; `to_string` of a struct always ends in `}`.
        text.pop();
        text.push_str(&format!(",\"hash\":\"{hash}\"}}\n"));
        line.extend_from_slice(text.as_bytes());
        (&t.file).write_all(&line)?;
        t.file.sync_data()?;
        t.end = len + line.len() as u64;
        t.seq = seq;
        // The log is on the disk (SPEC §8: before the answer); the head follows it after the
        // answer ([`Audit::settle`]).
        head::write_unsynced(&self.path, &head::Head { seq, hash: hash.clone() })?;
        t.head_unsynced = true;
        t.prev = hash;
        Ok(seq)
    }

    /// Makes the head of the last record durable, when it is not yet: called once the answer
    /// that record goes with is on its way (decision 0077), off the async runtime's workers.
    pub fn settle(&self) {
        let mut t = hands_roots::lock(&self.tail);
        let t = &mut *t;
        if !t.head_unsynced {
            return;
        }
        let Ok(_lock) = Flock::exclusive(&t.file) else { return };
        match head::sync(&self.path) {
            Ok(()) => t.head_unsynced = false,
            Err(e) => tracing::warn!("the audit log's head could not be flushed: {e}"),
        }
    }

    /// [`Audit::settle`] on a blocking thread, not waited for.
    pub fn settle_later(self: &std::sync::Arc<Self>) {
        let audit = self.clone();
        tokio::task::spawn_blocking(move || audit.settle());
    }
}

impl Drop for Audit {
    /// The last head on the disk when the daemon lets go of its log.
    fn drop(&mut self) {
        self.settle();
    }
}

/// The facts of a successful result worth a record (SPEC §8: exit code, signal, duration,
/// bytes; and what a write or commit produced), never the output itself.
pub fn facts(structured: &Value) -> Option<Value> {
    const KEYS: &[&str] = &[
        "exit_code",
        "signal",
        "timed_out",
        "duration_ms",
        "dropped_bytes",
        "containment",
        "path",
        "action",
        "bytes",
        "sha256",
        "replacements",
        "commit",
        "branch",
        "session",
    ];
    let obj = structured.as_object()?;
    let mut out = serde_json::Map::new();
    for k in KEYS {
        if let Some(v) = obj.get(*k).filter(|v| !v.is_object() && !v.is_array()) {
            out.insert((*k).to_string(), v.clone());
        }
    }
    // A command's output size: what was shown plus what was dropped.
    if let (Some(o), Some(e)) = (obj.get("stdout"), obj.get("stderr")) {
        let shown = o.as_str().map_or(0, str::len) + e.as_str().map_or(0, str::len);
        let dropped = obj.get("dropped_bytes").and_then(Value::as_u64).unwrap_or(0);
        out.insert("output_bytes".into(), Value::from(shown as u64 + dropped));
    }
    (!out.is_empty()).then_some(Value::Object(out))
}

fn ends_with_newline(file: &File, len: u64) -> std::io::Result<bool> {
    let mut b = [0u8; 1];
    file.read_exact_at(&mut b, len - 1)?;
    Ok(b[0] == b'\n')
}

/// The seq and hash of the last complete, readable record before `end` (0 and GENESIS when
/// there is none). Reads backwards, so opening a large log costs only its last records.
fn last_link(file: &File, end: u64) -> std::io::Result<(u64, String)> {
    const CHUNK: u64 = 64 * 1024;
    // The region [0, stop) holds complete lines (each ending in '\n').
    let mut stop = end;
    if end > 0 && !ends_with_newline(file, end)? {
        stop = find_back(file, end, CHUNK)?.map_or(0, |nl| nl + 1);
    }
    while stop > 0 {
        let line_end = stop - 1; // the '\n'
        let start = find_back(file, line_end, CHUNK)?.map_or(0, |nl| nl + 1);
        let mut buf = vec![0u8; (line_end - start) as usize];
        file.read_exact_at(&mut buf, start)?;
        if let Some((seq, hash)) = link_of(&buf) {
            return Ok((seq, hash));
        }
        stop = start;
    }
    Ok((0, GENESIS.to_string()))
}

/// The offset of the last '\n' before `end`, if any.
fn find_back(file: &File, end: u64, chunk: u64) -> std::io::Result<Option<u64>> {
    let mut hi = end;
    while hi > 0 {
        let lo = hi.saturating_sub(chunk);
        let mut buf = vec![0u8; (hi - lo) as usize];
        file.read_exact_at(&mut buf, lo)?;
        if let Some(i) = buf.iter().rposition(|&b| b == b'\n') {
            return Ok(Some(lo + i as u64));
        }
        hi = lo;
    }
    Ok(None)
}

/// `seq` and `hash` of a line that is a record.
fn link_of(line: &[u8]) -> Option<(u64, String)> {
    let v: Value = serde_json::from_slice(line).ok()?;
    let seq = v.get("seq")?.as_u64()?;
    let hash = v.get("hash")?.as_str()?;
    (hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| (seq, hash.to_string()))
}

/// sha256 (hex) of a record's canonical JSON, `hash` left out.
fn hash_of(record: &Value) -> String {
    let mut s = String::new();
    match record {
        Value::Object(m) => {
            let mut m = m.clone();
            m.remove("hash");
            canonical(&Value::Object(m), &mut s);
        }
        other => canonical(other, &mut s),
    }
    hex::encode(Sha256::digest(s.as_bytes()))
}

/// JSON with object keys sorted at every level and no whitespace: the same bytes whatever
/// order a writer or serde_json's map used.
fn canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                if let Some(x) = m.get(k) {
                    canonical(x, out);
                }
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(x, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// RFC 3339 UTC with milliseconds, e.g. `2026-11-29T22:11:45.123Z`.
pub fn rfc3339(t: std::time::SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(t).to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

pub mod head;
mod verify;

pub use verify::{Verified, render, verify};

#[cfg(test)]
mod tests;
