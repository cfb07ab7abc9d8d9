//! One-run expansions (SPEC §6): `bash` and `tmux_start` take an optional
//! `needs: { network: ["host[:port]"…], write: ["/abs/path"…] }`. The gate asks a person for
//! exactly that widening (once or for the session, never *always*), and the launch gets it and
//! nothing more: each `write` path becomes a writable root of that one launcher spec, each
//! `network` entry an allow rule of that one command's proxy ticket.
//!
//! This file parses and checks the request. It is strict: an unknown key, a relative or
//! unclean path, a bad host entry is an error naming the entry (cut to a few hundred
//! characters). Credential, denied, secret and protected paths, the state dir, and any folder
//! holding one of them can never be requested: refused before anyone is asked.

use crate::gate::Refusal;
use hands_roots::Policy;
use serde_json::Value;
use std::path::{Component, Path, PathBuf};

/// At most this many entries in each list: a person must be able to read the request.
const MAX_ENTRIES: usize = 16;
/// A folder named in `write` is scanned for what must stay hidden; beyond this many entries
/// it is refused (a person can name a narrower folder).
const MAX_SCAN: usize = 10_000;

// What the launch gets lives with tools-shell, which reads it when it builds the spec.
pub use hands_shell::needs::{GRANTED, NO_PROXY, Needs, granted};

/// Adds `needs` to a tool's input schema: what a model reads to ask for a widening.
pub fn publish(tool: &mut rmcp::model::Tool) {
    let schema = serde_json::json!({
        "type": "object",
        "description": "Optional: a widening for this one run, which a person must approve \
            (once or for the session). `write`: absolute paths outside the roots the command \
            may write (existing, no link, holding no credential, secret or protected path); \
            `network`: host names or host:port the command may reach through the proxy. \
            Credential, denied and protected paths are refused before anyone is asked.",
        "properties": {
            "network": { "type": "array", "items": { "type": "string" }, "maxItems": MAX_ENTRIES },
            "write": { "type": "array", "items": { "type": "string" }, "maxItems": MAX_ENTRIES }
        },
        "additionalProperties": false
    });
    let input = std::sync::Arc::make_mut(&mut tool.input_schema);
    if let Some(Value::Object(props)) = input.get_mut("properties") {
        props.insert("needs".into(), schema);
    }
}

/// Takes `needs` out of a `bash`/`tmux_start` call's arguments (the tool's own parameters do
/// not know it): the checked request, or the refusal that stops the call before anyone is
/// asked. The gate and the audit record still see it in the call's `arguments`. `lists` are
/// the daemon's policy lists (what can never be requested), `state_dir` its state dir (absolute), and
/// `proxied` whether tools-shell's commands reach the network through the proxy (without it a
/// `network` entry cannot be granted).
pub fn take(
    lists: &hands_roots::PolicyLists,
    state_dir: &Path,
    path_folders: &[PathBuf],
    proxied: bool,
    tool: &str,
    args: &mut rmcp::model::JsonObject,
) -> (Option<std::sync::Arc<Needs>>, Option<Refusal>) {
    let Some(raw) = args.remove("needs") else { return (None, None) };
    let needs = match parse(&raw) {
        Ok(n) => n,
        Err(why) => {
            let msg = format!("`{tool}` is refused: {why}");
            let remedy = "fix the `needs` entry as the message says (the tool's inputSchema \
                          describes it)";
            return (None, Some(Refusal::new(tool, "needs", msg, remedy)));
        }
    };
    if !needs.network.is_empty() && !proxied {
        return (None, Some(Refusal::new(tool, "needs", NO_PROXY.into(), NO_PROXY_REMEDY)));
    }
    let policy = match Policy::new(lists) {
        Ok(p) => p,
        Err(e) => {
            let msg = format!("`{tool}` is refused: the policy could not be compiled ({e})");
            return (None, Some(Refusal::new(tool, "needs", msg, "a person fixes daemon.toml")));
        }
    };
    match refuse_forbidden(&needs, &policy, state_dir, path_folders) {
        Ok(()) => (Some(std::sync::Arc::new(needs)), None),
        Err(f) => {
            let msg = format!("`{tool}` is refused before asking anyone: {}", f.why);
            (None, Some(Refusal::new(&f.what, f.layer, msg, f.remedy)))
        }
    }
}

const NO_PROXY_REMEDY: &str = "a person gives tools-shell the `network` grant with \
     network.mode = \"domain\" in daemon.toml, or adds the host to network.allow";

fn cut(s: &str) -> String {
    hands_roots::shown(s).to_string()
}

/// Parses `needs` strictly.
pub fn parse(v: &Value) -> Result<Needs, String> {
    let Value::Object(map) = v else {
        return Err("`needs` must be an object: { network: [\"host[:port]\"…], write: \
                    [\"/abs/path\"…] }"
            .into());
    };
    let mut needs = Needs::default();
    for (key, value) in map {
        let list = |v: &Value| -> Result<Vec<String>, String> {
            let Value::Array(items) = v else {
                return Err(format!("`needs.{}` must be a list of strings", cut(key)));
            };
            if items.len() > MAX_ENTRIES {
                return Err(format!(
                    "`needs.{}` names {} entries; at most {MAX_ENTRIES}",
                    cut(key),
                    items.len()
                ));
            }
            items
                .iter()
                .map(|i| match i {
                    Value::String(s) => Ok(s.clone()),
                    other => Err(format!(
                        "`needs.{}` entry {} is not a string",
                        cut(key),
                        cut(&other.to_string())
                    )),
                })
                .collect()
        };
        match key.as_str() {
            "network" => {
                for e in list(value)? {
                    let h = host_entry(&e)?;
                    if !needs.network.contains(&h) {
                        needs.network.push(h);
                    }
                }
            }
            "write" => {
                for e in list(value)? {
                    let p = write_entry(&e)?;
                    if !needs.write.contains(&p) {
                        needs.write.push(p);
                    }
                }
            }
            other => {
                return Err(format!(
                    "`needs` has an unknown key `{}`; it takes only `network` and `write`",
                    cut(other)
                ));
            }
        }
    }
    if needs.network.is_empty() && needs.write.is_empty() {
        return Err("`needs` names nothing; leave it out when the command needs no widening".into());
    }
    Ok(needs)
}

/// `host` or `host:port`: a DNS name; port 1–65535. No IP address: the proxy reaches an
/// address only through a `network.allow` entry that names it, so approving one here would
/// promise what the run cannot get.
fn host_entry(e: &str) -> Result<String, String> {
    let bad = |why: &str| format!("`needs.network` entry `{}`: {why}", cut(e));
    let (host, port) = match e.rsplit_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (e, None),
    };
    if host.starts_with('[')
        || host.parse::<std::net::IpAddr>().is_ok()
        || e.matches(':').count() > 1
    {
        return Err(bad("an IP address; name the host (a person can add an address to \
                        tools-shell's network.allow)"));
    }
    let name_ok = !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
                && !l.starts_with('-')
        });
    if !name_ok {
        return Err(bad("expected a host name with an optional :PORT (no scheme, path, user \
                        or wildcard)"));
    }
    let host = host.to_ascii_lowercase();
    match port {
        None => Ok(host),
        Some(p) => match p.parse::<u16>() {
            Ok(n) if n > 0 => Ok(format!("{host}:{n}")),
            _ => Err(bad("the port must be a number 1-65535")),
        },
    }
}

/// An absolute, clean path (no `.`/`..`, no empty component, no trailing `/`).
fn write_entry(e: &str) -> Result<PathBuf, String> {
    let bad = |why: &str| format!("`needs.write` entry `{}`: {why}", cut(e));
    if e.len() > 4096 {
        return Err(bad(&format!("{} bytes, longer than PATH_MAX", e.len())));
    }
    if !e.starts_with('/') {
        return Err(bad("must be an absolute path"));
    }
    if e.contains('\0') || e.contains("//") || (e.len() > 1 && e.ends_with('/')) {
        return Err(bad("must be a clean path (no empty component or trailing /)"));
    }
    let p = PathBuf::from(e);
    if p.components().any(|c| matches!(c, Component::CurDir | Component::ParentDir)) {
        return Err(bad("must not contain `.` or `..`"));
    }
    Ok(p)
}

/// What a `write` entry may not be, and why (a refusal before anyone is asked).
#[derive(Debug)]
pub struct Forbidden {
    pub what: String,
    pub layer: &'static str,
    pub why: String,
    pub remedy: &'static str,
}

/// Refuses a `write` path that is, lies beneath or holds a credential, denied, secret or
/// protected path or the state dir (`state_dir`, absolute), that is missing, or whose name passes
/// through a link.
pub fn refuse_forbidden(
    needs: &Needs,
    policy: &Policy,
    state_dir: &Path,
    path_folders: &[PathBuf],
) -> Result<(), Forbidden> {
    let never = "nobody can approve it: credential, denied, secret and protected paths are never \
                 writable through `needs`; name a path that holds none of them";
    for p in &needs.write {
        let what = cut(&p.display().to_string());
        let forbid =
            |layer, why: String, remedy| Err(Forbidden { what: what.clone(), layer, why, remedy });
        let real = match std::fs::canonicalize(p) {
            Ok(r) => r,
            Err(e) => {
                return forbid(
                    "needs",
                    format!("{what} cannot be used: {e}"),
                    "name a path that exists (make it first, or name its folder)",
                );
            }
        };
        if real != *p {
            return forbid(
                "needs",
                format!(
                    "{what} passes through a symbolic link (it is {})",
                    cut(&real.display().to_string())
                ),
                "name the real path",
            );
        }
        if let Some(why) = policy.denied(p, None) {
            return forbid("denied paths", format!("{what} is denied ({why})"), never);
        }
        if let Some(d) = policy.denied_near(p).into_iter().find(|d| d.starts_with(p)) {
            return forbid(
                "denied paths",
                format!(
                    "{what} holds the denied or credential path {}",
                    cut(&d.display().to_string())
                ),
                never,
            );
        }
        // What the host trusts (the daemon's config, binary, launcher, tokens, the home's
        // start-up files): the path is one, lies beneath one, or holds one.
        let id = std::fs::metadata(p).ok().map(|m| {
            use std::os::unix::fs::MetadataExt;
            (m.dev(), m.ino())
        });
        let trusted = policy.host_path(p, id).map(|t| (t, p.clone())).or_else(|| {
            policy.host_paths().find(|(t, _)| t.starts_with(p)).map(|(n, t)| (t, n.to_path_buf()))
        });
        if let Some((t, at)) = trusted {
            return forbid(
                "host-trusted paths",
                format!(
                    "{what} is or holds {} ({}): the host trusts it",
                    cut(&at.display().to_string()),
                    t.what
                ),
                never,
            );
        }
        // A folder commands find programs in (tools-shell's `path`, by its real name): what
        // one run planted there would run in every later run (decision 0068).
        if let Some(d) = path_folders.iter().find(|d| d.starts_with(p) || p.starts_with(d)) {
            return forbid(
                "needs",
                format!(
                    "{what} is, holds or lies in {}, a folder of tools-shell's path: a program \
                     written there would run in every later command",
                    cut(&d.display().to_string())
                ),
                "nobody can approve it: name a folder outside tools-shell's path (install \
                 programs there on the host)",
            );
        }
        if state_dir.starts_with(p) || p.starts_with(state_dir) {
            return forbid(
                "protected paths",
                format!("{what} is or holds the daemon's state dir (the audit log, approvals)"),
                never,
            );
        }
        let rel: PathBuf = p.components().skip(1).collect();
        if let Some(rule) = policy.protected(&rel) {
            return forbid(
                "protected paths",
                format!("{what} is a protected path ({rule})"),
                never,
            );
        }
        if policy.is_secret(p) {
            return forbid("secret files", format!("{what} is a secret file"), never);
        }
        if p.is_dir() {
            scan(p, policy).map_err(|(found, why)| Forbidden {
                what: what.clone(),
                layer: "needs",
                why: format!(
                    "{what} cannot be granted: {}: {why}",
                    cut(&found.display().to_string())
                ),
                remedy: never,
            })?;
        }
    }
    Ok(())
}

/// Walks a folder named in `write` (no link followed) for what must stay hidden or read-only:
/// a secret file, a denied file (also by identity: a hard link), a protected path.
fn scan(dir: &Path, policy: &Policy) -> Result<(), (PathBuf, String)> {
    use std::os::unix::fs::MetadataExt;
    let mut stack = vec![dir.to_path_buf()];
    let mut seen = 0usize;
    while let Some(d) = stack.pop() {
        let entries =
            std::fs::read_dir(&d).map_err(|e| (d.clone(), format!("cannot list it ({e})")))?;
        for entry in entries {
            let entry = entry.map_err(|e| (d.clone(), format!("cannot list it ({e})")))?;
            seen += 1;
            if seen > MAX_SCAN {
                return Err((dir.to_path_buf(), format!("it holds more than {MAX_SCAN} entries")));
            }
            let path = entry.path();
            let meta = std::fs::symlink_metadata(&path)
                .map_err(|e| (path.clone(), format!("cannot inspect it ({e})")))?;
            if policy.denied_ids(&path, Some((meta.dev(), meta.ino()))).is_some() {
                return Err((path, "a denied or credential file".into()));
            }
            if let Some(t) = policy.host_path(&path, Some((meta.dev(), meta.ino()))) {
                return Err((path, format!("{} (the host trusts it)", t.what)));
            }
            if meta.is_file() && policy.is_secret(&path) {
                return Err((path, "a secret file".into()));
            }
            let rel: PathBuf = path.components().skip(1).collect();
            if let Some(rule) = policy.protected(&rel) {
                return Err((path, format!("a protected path ({rule})")));
            }
            if meta.is_dir() {
                stack.push(path);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_strictly() {
        let n = parse(&json!({ "network": ["Example.COM:443", "pkg.example.org"],
            "write": ["/tmp/x"] }))
        .unwrap();
        assert_eq!(n.network, ["example.com:443", "pkg.example.org"]);
        assert_eq!(n.write, [PathBuf::from("/tmp/x")]);
        for bad in [
            json!({ "read": ["/x"] }),
            json!({ "write": ["x/y"] }),
            json!({ "write": ["/a/../b"] }),
            json!({ "write": ["/a/"] }),
            json!({ "write": "/a" }),
            json!({ "write": [1] }),
            json!({ "network": ["http://example.com"] }),
            json!({ "network": ["example.com:0"] }),
            json!({ "network": ["*.example.com"] }),
            json!({ "network": ["example.com:99999"] }),
            json!({ "network": ["10.0.0.1"] }),
            json!({ "network": ["[::1]:8080"] }),
            json!({}),
            json!([]),
        ] {
            assert!(parse(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn errors_are_cut() {
        let long = "x".repeat(100_000);
        let e = parse(&json!({ "network": [long] })).unwrap_err();
        assert!(e.len() < 1000, "{}", e.len());
        let e = parse(&json!({ long.clone(): [] })).unwrap_err();
        assert!(e.len() < 1000, "{}", e.len());
    }
}
