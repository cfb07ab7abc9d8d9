//! The policy lists of `sandbox-profiles/`, embedded at build time.

/// Lines of a profile file, without comments and blank lines.
fn lines(text: &'static str) -> impl Iterator<Item = &'static str> {
    text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#'))
}

pub fn credentials() -> impl Iterator<Item = &'static str> {
    lines(include_str!("../../../sandbox-profiles/credentials.txt"))
}

/// The protected rules; an entry's trailing `/` (a folder, see [`protected_folders`]) is not
/// part of the rule.
pub fn protected() -> impl Iterator<Item = &'static str> {
    lines(include_str!("../../../sandbox-profiles/protected.txt")).map(|l| l.trim_end_matches('/'))
}

/// The protected entries written with a trailing `/`: folders that the daemon makes empty where
/// they are missing in a writable root, so that a command cannot create them.
pub fn protected_folders() -> impl Iterator<Item = &'static str> {
    lines(include_str!("../../../sandbox-profiles/protected.txt"))
        .filter_map(|l| l.strip_suffix('/'))
        .filter(|l| !l.is_empty())
}

/// The home's start-up surface (`~` not expanded): protected when a writable root holds the
/// home with `allow_home = true`.
pub fn home_surface() -> impl Iterator<Item = &'static str> {
    lines(include_str!("../../../sandbox-profiles/home-surface.txt"))
}

pub fn secret_patterns() -> impl Iterator<Item = &'static str> {
    lines(include_str!("../../../sandbox-profiles/secrets.txt"))
}

pub fn secret_exceptions() -> impl Iterator<Item = &'static str> {
    lines(include_str!("../../../sandbox-profiles/secret-exceptions.txt"))
}
