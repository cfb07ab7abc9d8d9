//! OpenSSH's `known_hosts`: the format parsed as OpenSSH reads it (markers, patterns with
//! negation and wildcards, hashed names), the verdict on a host's key, and the line trust on
//! first use records.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, KeyInit, Mac};
use std::io::Write;
use std::path::Path;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Marker {
    None,
    Revoked,
    CertAuthority,
}

/// One line of a known_hosts file.
#[derive(Debug)]
pub(super) struct Entry {
    pub(super) line: usize,
    pub(super) marker: Marker,
    pub(super) patterns: String,
    pub(super) key_type: String,
    pub(super) blob: Vec<u8>,
}

/// Parses OpenSSH's known_hosts format; malformed lines are skipped, as OpenSSH does.
pub(super) fn parse_known_hosts(text: &str) -> Vec<Entry> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut fields = line.split_ascii_whitespace();
        let mut first = fields.next();
        let marker = match first {
            Some("@revoked") => Marker::Revoked,
            Some("@cert-authority") => Marker::CertAuthority,
            Some(m) if m.starts_with('@') => continue,
            _ => Marker::None,
        };
        if marker != Marker::None {
            first = fields.next();
        }
        let (Some(patterns), Some(key_type), Some(key)) = (first, fields.next(), fields.next())
        else {
            continue;
        };
        let Ok(blob) = STANDARD.decode(key) else { continue };
        out.push(Entry {
            line: i + 1,
            marker,
            patterns: patterns.to_string(),
            key_type: key_type.to_string(),
            blob,
        });
    }
    out
}

/// Whether a comma-separated pattern list (plain names, `*`/`?` wildcards, `!` negations,
/// `[host]:port`, or one hashed `|1|salt|hash`) matches `name` (already lower-cased).
pub(super) fn host_matches(patterns: &str, name: &str) -> bool {
    if patterns.starts_with("|1|") {
        return hashed_matches(patterns, name);
    }
    let mut matched = false;
    for pat in patterns.split(',') {
        let (negated, pat) = match pat.strip_prefix('!') {
            Some(p) => (true, p),
            None => (false, pat),
        };
        if wildcard(pat.to_ascii_lowercase().as_bytes(), name.as_bytes()) {
            if negated {
                return false;
            }
            matched = true;
        }
    }
    matched
}

/// `|1|base64(salt)|base64(HMAC-SHA1(salt, name))`, as `ssh-keygen -H` writes.
fn hashed_matches(pattern: &str, name: &str) -> bool {
    let mut parts = pattern["|1|".len()..].split('|');
    let (Some(salt), Some(hash), None) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    let (Ok(salt), Ok(hash)) = (STANDARD.decode(salt), STANDARD.decode(hash)) else {
        return false;
    };
    let Ok(mut mac) = Hmac::<sha1::Sha1>::new_from_slice(&salt) else { return false };
    mac.update(name.as_bytes());
    mac.verify_slice(&hash).is_ok()
}

/// Glob match with `*` (any run) and `?` (one byte).
fn wildcard(pat: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pat.len() && (pat[p] == b'?' || pat[p] == text[t]) {
            p += 1;
            t += 1;
        } else if p < pat.len() && pat[p] == b'*' {
            star = Some((p, t));
            p += 1;
        } else if let Some((sp, st)) = star {
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    pat[p..].iter().all(|&c| c == b'*')
}

/// What a known_hosts file says about a host's offered key.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    /// A line for this host has exactly this key.
    Known,
    /// The key is marked `@revoked` (line).
    Revoked(usize),
    /// The host is listed with a different key of the same type (line).
    Changed(usize),
    /// The host is listed only with keys of other types (first line, the types).
    OtherTypes(usize, Vec<String>),
    /// The host is not listed.
    Unknown,
}

pub(super) fn verdict(entries: &[Entry], name: &str, key_type: &str, blob: &[u8]) -> Verdict {
    if let Some(e) = entries.iter().find(|e| e.marker == Marker::Revoked && e.blob == blob) {
        return Verdict::Revoked(e.line);
    }
    let listed: Vec<&Entry> = entries
        .iter()
        .filter(|e| e.marker == Marker::None && host_matches(&e.patterns, name))
        .collect();
    if listed.iter().any(|e| e.blob == blob) {
        return Verdict::Known;
    }
    if let Some(e) = listed.iter().find(|e| e.key_type == key_type) {
        return Verdict::Changed(e.line);
    }
    match listed.first() {
        Some(first) => {
            let mut types: Vec<String> = listed.iter().map(|e| e.key_type.clone()).collect();
            types.dedup();
            Verdict::OtherTypes(first.line, types)
        }
        None => Verdict::Unknown,
    }
}

/// Appends `name type key` to the trust-on-first-use file (made `0600`, its folder `0700`).
#[expect(
    clippy::disallowed_methods,
    reason = "the state dir's trust-on-first-use file (`<state_dir>/known_hosts`)"
)]
pub(super) fn record(path: &Path, name: &str, key_type: &str, blob: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    if let Some(dir) = path.parent() {
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    }
    let mut f = std::fs::OpenOptions::new().append(true).create(true).mode(0o600).open(path)?;
    let line = format!("{name} {key_type} {}\n", STANDARD.encode(blob));
    f.write_all(line.as_bytes())?;
    f.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_like_openssh() {
        assert!(host_matches("h.example,other", "h.example"));
        assert!(host_matches("H.Example", "h.example"));
        assert!(host_matches("*.example", "h.example"));
        assert!(host_matches("h?example", "h.example"));
        assert!(!host_matches("*.example,!h.example", "h.example"));
        assert!(!host_matches("h.example", "[h.example]:2222"));
        assert!(host_matches("[h.example]:2222", "[h.example]:2222"));
        assert!(host_matches("[*.example]:*", "[h.example]:2222"));
        assert!(!host_matches("h.exampl", "h.example"));
        assert!(wildcard(b"a*b*c", b"aXXbYYc"));
        assert!(!wildcard(b"a*b*c", b"aXXbYY"));
    }

    #[test]
    fn hashed_entries_match_openssh_output() {
        // Written by `ssh-keygen -H` for `example.com` and `[127.0.0.1]:2222`.
        let example = "|1|+ir5YdAcg/wKGu5oW7IaBEZ3Pmc=|PX9eTCW7rgMkKuMxKw8Cli8LnwA=";
        let local = "|1|7/bqbeTuvetVNlsFt5pZ8bCpOg0=|ZEX+bgG0wQ4aUpOV3Xkw6syxZ/I=";
        assert!(host_matches(example, "example.com"));
        assert!(!host_matches(example, "example.org"));
        assert!(host_matches(local, "[127.0.0.1]:2222"));
        assert!(!host_matches(local, "127.0.0.1"));
        assert!(!host_matches("|1|bad|bad", "example.com"));
    }

    #[test]
    fn verdicts() {
        let a = STANDARD.encode(b"key-a");
        let b = STANDARD.encode(b"key-b");
        let text = format!(
            "# comment\n\nh1 ssh-ed25519 {a}\nh2 ssh-ed25519 {b} c\n@revoked * ssh-ed25519 {b}\n\
             @cert-authority h3 ssh-ed25519 {a}\nh4 ecdsa-sha2-nistp256 {a}\ngarbage\nh5 ssh-rsa !!!\n"
        );
        let e = parse_known_hosts(&text);
        assert_eq!(e.len(), 5);
        assert_eq!(verdict(&e, "h1", "ssh-ed25519", b"key-a"), Verdict::Known);
        assert_eq!(verdict(&e, "h1", "ssh-ed25519", b"key-c"), Verdict::Changed(3));
        assert_eq!(verdict(&e, "h2", "ssh-ed25519", b"key-b"), Verdict::Revoked(5));
        assert_eq!(verdict(&e, "h3", "ssh-ed25519", b"key-a"), Verdict::Unknown);
        assert_eq!(
            verdict(&e, "h4", "ssh-ed25519", b"key-a"),
            Verdict::Known,
            "the same blob is the same key"
        );
        assert_eq!(
            verdict(&e, "h4", "ssh-ed25519", b"key-x"),
            Verdict::OtherTypes(7, vec!["ecdsa-sha2-nistp256".into()])
        );
        assert_eq!(verdict(&e, "nope", "ssh-ed25519", b"key-a"), Verdict::Unknown);
    }

    #[test]
    fn first_use_records_a_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/known_hosts");
        record(&path, "[h]:2222", "ssh-ed25519", b"key-a").unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let e = parse_known_hosts(&text);
        assert_eq!(verdict(&e, "[h]:2222", "ssh-ed25519", b"key-a"), Verdict::Known);
        assert_eq!(verdict(&e, "[h]:2222", "ssh-ed25519", b"key-b"), Verdict::Changed(1));
    }
}
