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

/// The folders of the commands' home carried from run to run (`~/` removed): caches only.
pub fn home_carried() -> impl Iterator<Item = &'static str> {
    lines(include_str!("../../../sandbox-profiles/home-carried.txt"))
        .map(|l| l.trim_start_matches("~/"))
}

/// Start-up and config files of a home (`~/` removed): never carried (see [`home_carried`]).
pub fn home_startup() -> impl Iterator<Item = &'static str> {
    lines(include_str!("../../../sandbox-profiles/home-startup.txt"))
        .map(|l| l.trim_start_matches("~/"))
}

pub fn secret_patterns() -> impl Iterator<Item = &'static str> {
    lines(include_str!("../../../sandbox-profiles/secrets.txt"))
}

pub fn secret_exceptions() -> impl Iterator<Item = &'static str> {
    lines(include_str!("../../../sandbox-profiles/secret-exceptions.txt"))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// What the home carries is neither a start-up file nor a credential, nor holds one, nor
    /// lies in one; and the person's start-up surface is never carried either.
    #[test]
    fn the_home_carries_no_start_up_file_and_no_credential() {
        let home = |l: &'static str| l.strip_prefix("~/").map(Path::new);
        let never: Vec<&Path> = super::home_startup()
            .map(Path::new)
            .chain(super::home_surface().filter_map(home))
            .chain(super::credentials().filter_map(home))
            .collect();
        let carried: Vec<&Path> = super::home_carried().map(Path::new).collect();
        assert!(carried.len() >= 5 && never.len() >= 40);
        for c in &carried {
            assert!(c.is_relative() && !c.as_os_str().is_empty(), "{}", c.display());
            for n in &never {
                assert!(
                    !c.starts_with(n) && !n.starts_with(c),
                    "{} is carried but {} must not be",
                    c.display(),
                    n.display()
                );
            }
        }
    }
}
