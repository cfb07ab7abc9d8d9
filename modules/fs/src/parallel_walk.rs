//! What `glob` and `grep` share: the parallel `ignore` walk of a folder by the rules both
//! tools follow (links never followed, hidden and ignored files per the switches, the policy's
//! denied folders never descended into), its time bound, pattern checks and how paths are shown.

use crate::FsError;
use crate::ignore_rules::Rules;
use globset::{GlobBuilder, GlobMatcher};
use hands_roots::Hider;
use ignore::{WalkBuilder, WalkParallel};
use std::ffi::OsStr;
use std::fmt::Write as _;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Longest regex or glob accepted; a longer one is refused before it is compiled or echoed.
pub(crate) const MAX_PATTERN: usize = 64 << 10;
/// The most time one `glob` or `grep` walks: past it the walk stops and says `timed_out`, so
/// that no call runs unbounded (a tree of millions of files, a file system gone slow).
pub(crate) const WALK_BUDGET: Duration = Duration::from_secs(30);

/// An `ignore` walk of `base` by the rules both tools share: links never followed, hidden and
/// ignored files per the switches, `.gitignore` honoured outside git repositories too, and the
/// policy's denied folders never descended into.
///
/// The `ignore` crate reads no file here: its own ignore-file reading opens by path with a
/// blocking `open`, so a FIFO named `.gitignore` (or one swapped in between any check and that
/// open) would hang a walker thread forever. Every one of its filters is off; the entry filter
/// applies the rules [`Rules`] read itself (non-blocking, regular files only; a special file is
/// skipped and named, `Rules::skipped`) and the hidden switch. The returned rules are `None`
/// when ignore files are not read (`ignored`).
pub(crate) fn walker(
    hider: &Hider<'_>,
    base: &Path,
    hidden: bool,
    ignored: bool,
) -> (WalkParallel, Option<Arc<Rules>>) {
    let rules = (!ignored).then(|| Arc::new(Rules::new(base)));
    let mut b = WalkBuilder::new(base);
    b.standard_filters(false).follow_links(false);
    // Denied folders are pruned here, so that the walker does not even read their listings
    // (the visitors then check files: `glob` with the hider, `grep`'s open by identity too).
    // Only the denied paths near the base are compared (`Hider`): the credential list's dozens
    // of others cost half of a `glob`'s time over 20,000 files before.
    let denied = hider.near().to_vec();
    let matcher = rules.clone();
    b.filter_entry(move |e| {
        if !denied.is_empty() && denied.iter().any(|d| e.path().starts_with(d)) {
            return false;
        }
        let is_dir = e.file_type().is_some_and(|t| t.is_dir());
        let verdict = match &matcher {
            Some(rules) => rules.matched(e.path(), is_dir),
            None => ignore::Match::None,
        };
        if verdict.is_ignore() {
            return false;
        }
        // As the crate has it: a `!pattern` that names a hidden entry shows it.
        hidden || verdict.is_whitelist() || e.file_name().as_bytes().first() != Some(&b'.')
    });
    (b.build_parallel(), rules)
}

/// What a walked entry is to `glob` and `grep` ([`walked`]), with its path below the base.
pub(crate) enum Walked<'a> {
    /// A regular file below the base: the only entry either tool matches or searches.
    File(&'a Path),
    /// A folder (the base itself at depth 0); denied ones were pruned by [`walker`]'s filter.
    Dir(&'a Path),
    /// Anything else, never looked into: the base when it is not a folder, and a link (never
    /// followed: ripgrep without `-L`), a FIFO, socket or device.
    Other,
    /// The walk could not tell what the entry is.
    Unknown,
}

/// The rule both tools walk by: only regular files below the base are theirs.
pub(crate) fn walked<'a>(entry: &'a ignore::DirEntry, base: &Path) -> Walked<'a> {
    let Some(ft) = entry.file_type() else { return Walked::Unknown };
    let rel = below(entry.path(), base);
    if ft.is_dir() {
        Walked::Dir(rel)
    } else if entry.depth() == 0 || !ft.is_file() {
        Walked::Other
    } else {
        Walked::File(rel)
    }
}

/// The skipped ignore files of a walk's rules (none when no rules were read).
pub(crate) fn skipped_of(rules: Option<&Arc<Rules>>) -> Vec<String> {
    rules.map(|r| r.skipped()).unwrap_or_default()
}

/// `path` relative to `base`, which the walk started from: a byte slice, where
/// `Path::strip_prefix` would parse both paths' components for every entry.
pub(crate) fn below<'a>(path: &'a Path, base: &Path) -> &'a Path {
    let (p, b) = (path.as_os_str().as_bytes(), base.as_os_str().as_bytes());
    match p.strip_prefix(b) {
        Some(rest) if b.ends_with(b"/") => Path::new(OsStr::from_bytes(rest)),
        Some([b'/', rest @ ..]) => Path::new(OsStr::from_bytes(rest)),
        _ => path.strip_prefix(base).unwrap_or(path),
    }
}

pub(crate) fn compile_glob(pattern: &str, what: &str) -> Result<GlobMatcher, FsError> {
    if pattern.is_empty() {
        return Err(FsError::Invalid(format!("{what} is empty; give a glob such as `**/*.rs`")));
    }
    check_len(pattern, what)?;
    let glob = GlobBuilder::new(pattern).literal_separator(true).build().map_err(|e| {
        FsError::Invalid(format!(
            "invalid {what} `{}`: {}",
            hands_roots::shown(pattern),
            hands_roots::shown(&e.to_string())
        ))
    })?;
    Ok(glob.compile_matcher())
}

pub(crate) fn check_len(pattern: &str, what: &str) -> Result<(), FsError> {
    if pattern.len() > MAX_PATTERN {
        return Err(FsError::Invalid(format!(
            "{what} is {} bytes long; at most {MAX_PATTERN} are accepted",
            pattern.len()
        )));
    }
    Ok(())
}

/// The `path` parameter as a prefix for output paths: `.` components dropped, so results read
/// like ripgrep's and can be passed back to the tools as they are.
pub(crate) fn display_prefix(given: &str) -> PathBuf {
    Path::new(given).components().filter(|c| !matches!(c, Component::CurDir)).collect()
}

pub(crate) fn shown(prefix: &Path, rel: &Path) -> String {
    if rel.as_os_str().is_empty() {
        return display(prefix);
    }
    display(&prefix.join(rel))
}

pub(crate) fn display(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

pub(crate) const TIMED_OUT: &str = "[truncated: the walk stopped at its 30 s bound; search a smaller folder \
                         or narrow the pattern]";

/// The text mirror's line for ignore files that were not read.
pub(crate) fn skipped_text(out: &mut String, skipped: &[String]) {
    if !skipped.is_empty() {
        let _ = writeln!(
            out,
            "[ignore files not read (not regular files, or over 4 MiB), their rules not applied: {}]",
            skipped.join(", ")
        );
    }
}

#[cfg(test)]
mod tests {
    use super::below;
    use std::path::Path;

    #[test]
    fn below_gives_strip_prefix_answer() {
        let cases = [
            ("/r/a/b.rs", "/r", "a/b.rs"),
            ("/r/a/b.rs", "/r/", "a/b.rs"),
            ("/a/b", "/", "a/b"),
            ("/r/ab/c", "/r/a", "/r/ab/c"),
        ];
        for (path, base, want) in cases {
            assert_eq!(below(Path::new(path), Path::new(base)), Path::new(want), "{path} {base}");
        }
    }
}
