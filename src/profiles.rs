//! The policy lists of `sandbox-profiles/`, embedded at build time.

/// Lines of a profile file, without comments and blank lines.
fn lines(text: &'static str) -> impl Iterator<Item = &'static str> {
    text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#'))
}

pub fn credentials() -> impl Iterator<Item = &'static str> {
    lines(include_str!("../sandbox-profiles/credentials.txt"))
}

pub fn protected() -> impl Iterator<Item = &'static str> {
    lines(include_str!("../sandbox-profiles/protected.txt"))
}

pub fn secret_patterns() -> impl Iterator<Item = &'static str> {
    lines(include_str!("../sandbox-profiles/secrets.txt"))
}

pub fn secret_exceptions() -> impl Iterator<Item = &'static str> {
    lines(include_str!("../sandbox-profiles/secret-exceptions.txt"))
}
