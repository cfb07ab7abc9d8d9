//! The dashboard's audit trail: the latest records of the log, filtered by client, module
//! and decision, under the hash chain's state (re-verified when the log changed).

use super::Cache;
use super::esc;
use crate::server::Daemon;
use hands_roots::lock;
use serde_json::Value;
use std::fmt::Write as _;

/// How many of the latest audit records are read for the trail.
const AUDIT_RECORDS: usize = 200;
/// How many bytes from the end of the audit log are read for them.
const AUDIT_TAIL_BYTES: u64 = 512 * 1024;
/// A changed audit log is re-verified at most this often (a full check reads the whole log).
const VERIFY_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

#[derive(Clone)]
pub(super) enum ChainState {
    Intact { records: u64, warnings: Vec<String> },
    Broken(String),
    Unreadable(String),
}

/// The chain's state, re-verified when the log changed since the last check (at most every
/// [`VERIFY_EVERY`]; a broken chain is re-checked at once, so a repaired log shows soon).
async fn chain_state(cache: &Cache, path: &std::path::Path) -> ChainState {
    let meta = std::fs::metadata(path).ok();
    let key = meta.as_ref().map(|m| (m.len(), m.modified().unwrap_or(std::time::UNIX_EPOCH)));
    if let (Some((len, mtime)), Some((l, t, at, state))) = (key, lock(&cache.chain).as_ref()) {
        let unchanged = len == *l && mtime == *t;
        let recent = at.elapsed() < VERIFY_EVERY && matches!(state, ChainState::Intact { .. });
        if unchanged || recent {
            return state.clone();
        }
    }
    let p = path.to_path_buf();
    let state = match tokio::task::spawn_blocking(move || crate::audit::verify(&p)).await {
        Ok(Ok(v)) => match v.broken {
            Some(b) => ChainState::Broken(b),
            None => ChainState::Intact { records: v.records, warnings: v.warnings },
        },
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => {
            ChainState::Intact { records: 0, warnings: Vec::new() }
        }
        Ok(Err(e)) => ChainState::Unreadable(e.to_string()),
        Err(e) => ChainState::Unreadable(e.to_string()),
    };
    if let Some((len, mtime)) = key {
        *lock(&cache.chain) = Some((len, mtime, std::time::Instant::now(), state.clone()));
    }
    state
}

/// The latest records (newest first), read from the end of the log.
#[expect(clippy::disallowed_methods, reason = "the state dir's audit log, shown on the dashboard")]
fn latest_records(path: &std::path::Path) -> std::io::Result<Vec<Value>> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let len = f.metadata()?.len();
    let start = len.saturating_sub(AUDIT_TAIL_BYTES);
    f.seek(SeekFrom::Start(start))?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf)?;
    let mut text = String::from_utf8_lossy(&buf).into_owned();
    if start > 0 {
        // The first line may be cut: start at the next whole one.
        text = text.split_once('\n').map(|(_, r)| r.to_string()).unwrap_or_default();
    }
    Ok(text
        .lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .take(AUDIT_RECORDS)
        .collect())
}

fn select(name: &str, label: &str, options: &[String], chosen: &str) -> String {
    let mut s = format!(
        "<label>{} <select name=\"{}\"><option value=\"\">any</option>",
        esc(label),
        esc(name)
    );
    for o in options {
        let sel = if o == chosen { " selected" } else { "" };
        let _ = write!(s, "<option value=\"{v}\"{sel}>{v}</option>", v = esc(o));
    }
    s.push_str("</select></label> ");
    s
}

pub(super) async fn audit(daemon: &Daemon, cache: &Cache, query: &str) -> String {
    let path = crate::audit::path_in(&crate::server::absolute(&daemon.config.state_dir));
    let mut s = String::from("<section id=\"audit\"><h2>Audit trail</h2>");
    match chain_state(cache, &path).await {
        ChainState::Intact { records, warnings } => {
            let _ = write!(
                s,
                "<p id=\"chain\" class=\"ok\">Hash chain verified: {records} records intact.</p>"
            );
            for w in warnings {
                let _ = write!(s, "<p class=\"warn\">{}</p>", esc(&w));
            }
        }
        ChainState::Broken(b) => {
            let _ =
                write!(s, "<p id=\"chain\" class=\"broken\">Hash chain BROKEN: {}</p>", esc(&b));
        }
        ChainState::Unreadable(e) => {
            let _ = write!(
                s,
                "<p id=\"chain\" class=\"broken\">The audit log {} cannot be read: {}</p>",
                esc(&path.display().to_string()),
                esc(&e)
            );
        }
    }
    let p = path.clone();
    let records = match tokio::task::spawn_blocking(move || latest_records(&p)).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => {
            let _ = write!(s, "<p class=\"error\">{}</p></section>", esc(&e.to_string()));
            return s;
        }
        Err(e) => {
            let _ = write!(s, "<p class=\"error\">{}</p></section>", esc(&e.to_string()));
            return s;
        }
    };
    let q = crate::dashboard::form::form_pairs(query);
    let want = |k: &str| crate::dashboard::form::field(&q, k).unwrap_or("").to_string();
    let (client, module, decision) = (want("client"), want("module"), want("decision"));
    let str_of = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let distinct = |k: &str| {
        let mut all: Vec<String> = records.iter().map(|r| str_of(r, k)).collect();
        all.sort();
        all.dedup();
        all.retain(|x| !x.is_empty());
        all
    };
    let _ = write!(
        s,
        "<form method=\"get\" action=\"./\" id=\"filters\">{}{}{}<button type=\"submit\">Filter</button></form>",
        select("client", "client", &distinct("client"), &client),
        select("module", "module", &distinct("module"), &module),
        select("decision", "decision", &["allow".to_string(), "deny".to_string()], &decision),
    );
    s.push_str(
        "<table class=\"audit\"><thead><tr><th>#</th><th>time</th><th>client</th><th>module / tool</th>\
         <th>decision</th><th>by</th><th>outcome</th><th>arguments</th></tr></thead><tbody>",
    );
    let shown: Vec<&Value> = records
        .iter()
        .filter(|r| client.is_empty() || str_of(r, "client") == client)
        .filter(|r| module.is_empty() || str_of(r, "module") == module)
        .filter(|r| decision.is_empty() || str_of(r, "decision") == decision)
        .collect();
    for r in &shown {
        let mut args = r.get("arguments").map(Value::to_string).unwrap_or_default();
        if args.chars().count() > 300 {
            args = args.chars().take(300).collect::<String>() + "…";
        }
        let d = str_of(r, "decision");
        let _ = write!(
            s,
            "<tr class=\"record {}\"><td>{}</td><td>{}</td><td>{}</td><td>{} / <code>{}</code></td>\
             <td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td></tr>",
            esc(&d),
            r.get("seq").and_then(Value::as_u64).unwrap_or(0),
            esc(&str_of(r, "time")),
            esc(&str_of(r, "client")),
            esc(&str_of(r, "module")),
            esc(&str_of(r, "tool")),
            esc(&d),
            esc(&str_of(r, "decided_by")),
            esc(&str_of(r, "outcome")),
            esc(&args)
        );
    }
    if shown.is_empty() {
        s.push_str("<tr><td colspan=\"8\" class=\"muted\">No records.</td></tr>");
    }
    let _ = write!(
        s,
        "</tbody></table><p class=\"muted\">The latest {} records of {}; <code>hands audit \
         --verify</code> checks the whole log.</p></section>",
        AUDIT_RECORDS,
        esc(&path.display().to_string())
    );
    s
}
