//! Reading the audit log: `hands audit --verify` (every record's hash, `seq` and `prev`
//! link, torn lines the chain links across, and the head kept apart from the log: a log cut
//! short) and `hands audit`'s one line per record.

use super::{GENESIS, hash_of};
use serde_json::Value;
use std::fs::File;
use std::io::BufRead;
use std::path::Path;

/// The outcome of `--verify`.
#[derive(Debug)]
pub struct Verified {
    /// Records checked.
    pub records: u64,
    /// Lines that are torn writes the chain links across (line number, note).
    pub warnings: Vec<String>,
    /// The first broken record, when there is one.
    pub broken: Option<String>,
}

/// Checks every record's hash, `seq` and `prev` link, from the first line, then that the log
/// holds the record its head (`audit.head`) names.
#[expect(
    clippy::disallowed_methods,
    reason = "the state dir's audit log, read to verify its chain"
)]
pub fn verify(path: &Path) -> std::io::Result<Verified> {
    let file = File::open(path)?;
    let mut reader = std::io::BufReader::new(file);
    let mut out = Verified { records: 0, warnings: Vec::new(), broken: None };
    let mut prev = GENESIS.to_string();
    let mut prev_at = String::from("the start of the log");
    let mut seq = 0u64;
    // An unreadable line waiting to learn whether the next record links across it.
    let mut pending: Option<(usize, Unreadable)> = None;
    let head = super::head::read(path);
    let head_seq = head.as_ref().ok().and_then(|h| h.as_ref()).map(|h| h.seq);
    // Whether the record the head names has the hash the head records, once it is read.
    let mut head_matches = None;
    let mut buf = Vec::new();
    let mut n = 0usize;
    loop {
        buf.clear();
        if reader.read_until(b'\n', &mut buf)? == 0 {
            break;
        }
        n += 1;
        let complete = buf.last() == Some(&b'\n');
        let body = if complete { &buf[..buf.len() - 1] } else { &buf[..] };
        let record = serde_json::from_slice::<Value>(body)
            .ok()
            .filter(|v| v.get("seq").and_then(Value::as_u64).is_some() && v.get("hash").is_some());
        let Some(v) = record else {
            if let Some((line, why)) = pending.take() {
                out.broken = Some(broken_line(line, why));
                return Ok(out);
            }
            let why = if complete { Unreadable::NotARecord } else { Unreadable::Incomplete };
            pending = Some((n, why));
            continue;
        };
        let this_seq = v.get("seq").and_then(Value::as_u64).unwrap_or_default();
        let at = format!("seq {this_seq} (line {n})");
        let stored = v.get("hash").and_then(Value::as_str).unwrap_or_default();
        let link = v.get("prev").and_then(Value::as_str).unwrap_or_default();
        if link != prev || this_seq != seq + 1 {
            out.broken = Some(match pending.take() {
                // The record after an unreadable line links to that line, not across it: the
                // unreadable line was a record, and it was changed.
                Some((line, why)) => broken_line(line, why),
                None if link != prev => {
                    format!("{at}: its prev does not match the hash of {prev_at}")
                }
                None if this_seq > seq + 1 => format!(
                    "{at}: expected seq {} after {prev_at}: records {} to {} are missing (the \
                     log was cut short before this record)",
                    seq + 1,
                    seq + 1,
                    this_seq - 1
                ),
                None => format!("{at}: expected seq {} after {prev_at}", seq + 1),
            });
            return Ok(out);
        }
        if hash_of(&v) != stored {
            out.broken = Some(format!("{at}: its hash does not match its content (edited)"));
            return Ok(out);
        }
        if let Some((line, _)) = pending.take() {
            out.warnings.push(format!(
                "line {line} is an incomplete record (a write torn by a crash); {at} links \
                 across it"
            ));
        }
        if head_seq == Some(this_seq) {
            head_matches = head.as_ref().ok().and_then(|h| h.as_ref()).map(|h| h.hash == stored);
        }
        out.records += 1;
        seq = this_seq;
        prev = stored.to_string();
        prev_at = at;
    }
    match pending {
        Some((line, Unreadable::Incomplete)) => out.warnings.push(format!(
            "line {line} is an incomplete last record (a write torn by a crash); the next record \
             will continue from {prev_at}"
        )),
        Some((line, why)) => {
            out.broken = Some(broken_line(line, why));
            return Ok(out);
        }
        None => {}
    }
    out.broken = match head {
        Err(why) => Some(format!("the log's head: {why}")),
        Ok(None) if out.records == 0 => None,
        Ok(None) => Some(format!(
            "the end of the log: there is no head ({}) beside it, so whether its newest records \
             were deleted cannot be told (a daemon of this version writes one when it starts)",
            super::head::FILE_NAME
        )),
        Ok(Some(h)) if h.seq > seq => Some(format!(
            "the end of the log: it was cut short — its head ({}) names record {}, but the log \
             ends at {prev_at}: the newest {} records were deleted",
            super::head::FILE_NAME,
            h.seq,
            h.seq - seq
        )),
        Ok(Some(h)) if head_matches == Some(false) => Some(format!(
            "record {}: it is not the record the head ({}) names: the log was rewritten from \
             there",
            h.seq,
            super::head::FILE_NAME
        )),
        Ok(Some(h)) => {
            if h.seq < seq {
                out.warnings.push(format!(
                    "the head ({}) names record {}, and the log goes on to {prev_at}: the head's \
                     last write was lost in a crash, or an older version wrote the rest",
                    super::head::FILE_NAME,
                    h.seq
                ));
            }
            None
        }
    };
    Ok(out)
}

/// What is wrong with a line that is not a record: a whole line that does not read as one, or
/// a last line without its newline (a write torn by a crash, when nothing follows it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
enum Unreadable {
    #[error("is not a readable record")]
    NotARecord,
    #[error("is an incomplete record")]
    Incomplete,
}

fn broken_line(line: usize, why: Unreadable) -> String {
    format!("line {line} {why}, and no later record links across it (edited or truncated)")
}

/// One record as a readable line: `seq time client module/tool class decision(by) outcome
/// arguments`. An unreadable line is shown as such.
pub fn render(line: &[u8]) -> String {
    let Ok(v) = serde_json::from_slice::<Value>(line) else {
        return format!("(unreadable line: {})", String::from_utf8_lossy(line).trim_end());
    };
    let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("?").to_string();
    let seq = v.get("seq").and_then(Value::as_u64).unwrap_or_default();
    let mut args = v.get("arguments").map(Value::to_string).unwrap_or_default();
    const MAX: usize = 200;
    if args.chars().count() > MAX {
        args = args.chars().take(MAX).collect::<String>() + "…";
    }
    let result = v.get("result").map(|r| format!(" {r}")).unwrap_or_default();
    // The gate's decision and the call's outcome are two facts, kept apart in the text: a call
    // the policy allowed can still be refused later (by the sandbox, the roots), and "allow
    // by policy: refused" read as if the policy had refused it.
    format!(
        "#{seq} {} {} {}/{} ({}) gate: {} ({}); outcome: {}{result} {args}",
        s("time"),
        s("client"),
        s("module"),
        s("tool"),
        s("class"),
        s("decision"),
        s("decided_by"),
        s("outcome"),
    )
}
