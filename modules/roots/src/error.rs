//! Refusals and failures of path resolution, each naming the path and what to do.

use std::borrow::Cow;
use std::ffi::OsStr;
use std::path::PathBuf;

/// The most characters of one input an error message quotes (SPEC §10: an error never echoes
/// an input whole): enough to recognise a path, pattern or command, never a flood.
pub const QUOTE_MAX: usize = 240;

/// The kernel's `PATH_MAX` on Linux (`linux/limits.h`, including the final NUL): a longer path
/// can name nothing, so it is refused as too long before any work.
pub const PATH_MAX: usize = 4096;

/// An input as an error message quotes it ([`shown`]).
pub struct Shown<'a>(Cow<'a, str>);

/// An input (a path, pattern, name or command) as every error that quotes one shows it: whole
/// when it has at most [`QUOTE_MAX`] characters, else its first ones, `…` and its full length.
pub fn shown<S: AsRef<OsStr> + ?Sized>(input: &S) -> Shown<'_> {
    Shown(input.as_ref().to_string_lossy())
}

impl std::fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.0.as_ref();
        match s.char_indices().nth(QUOTE_MAX) {
            None => f.write_str(s),
            Some((end, _)) => write!(f, "{}… ({} bytes in all)", &s[..end], s.len()),
        }
    }
}

impl std::fmt::Debug for Shown<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "\"{self}\"")
    }
}

/// Why a path was refused or could not be used. Returned by every [`crate::Resolver`] method;
/// callers show the message to the person or model as it is (it says what to do).
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    /// The module was given no roots; the daemon refuses to start it.
    #[error("no roots are configured for this module")]
    NoRoots,
    /// A configured root cannot be pinned at startup.
    #[error("root {root} cannot be used: {why}")]
    RootUnusable { root: PathBuf, why: String },
    #[error("path contains a NUL byte; pass a plain path")]
    Nul,
    #[error("path is {len} bytes, longer than the kernel's PATH_MAX ({max}); no file has such a name — pass a shorter path", max = PATH_MAX)]
    TooLong { len: usize },
    #[error("path `{}` contains a `..` component; give the path without `..`", shown(path))]
    DotDot { path: String },
    /// A relative path whose first component is `~`: tools expand nothing, so it would name a
    /// folder called `~` under the first root (and `write` would make one).
    #[error(
        "path `{}` starts with `~`, which tool paths do not expand (it would name a folder \
         called `~` in the first root); write the absolute path, or one relative to the first root",
        shown(path)
    )]
    Tilde { path: String },
    #[error("path `{}` is outside every root ({roots}); use a path under one of them", shown(path))]
    Outside { path: PathBuf, roots: String },
    #[error(
        "path `{}` leaves root {} (a symlink points outside it); only links that stay beneath the root are followed",
        shown(path),
        shown(root)
    )]
    Escapes { path: PathBuf, root: PathBuf },
    #[error("path `{}` goes through a symlink loop or a /proc magic link; refused", shown(path))]
    LinkLoop { path: PathBuf },
    #[error(
        "path `{}` is a dangling symlink; its target would be created outside what the resolver can confine — write to the target path directly",
        shown(path)
    )]
    DanglingLink { path: PathBuf },
    #[error("`{}` does not exist", shown(path))]
    NotFound { path: PathBuf },
    #[error("a component of `{}` is not a directory", shown(path))]
    NotADirectory { path: PathBuf },
    #[error("`{}` is a directory; use list_dir or glob for folders", shown(path))]
    IsADirectory { path: PathBuf },
    #[error("`{}` is a {kind}, not a regular file; refused", shown(path))]
    NotRegular { path: PathBuf, kind: &'static str },
    #[error("`{}` is denied to every tool ({why}); this cannot be approved", shown(path))]
    Denied { path: PathBuf, why: String },
    #[error(
        "`{}` looks like a secret file (sandbox.secret_patterns); refused to the file tools",
        shown(path)
    )]
    Secret { path: PathBuf },
    #[error(
        "`{}` is protected ({rule}): something outside the sandbox executes it later, so it is read-only to every tool",
        shown(path)
    )]
    Protected { path: PathBuf, rule: String },
    /// A write to a path the host trusts ([`crate::HostPath`]): the daemon's binary or config,
    /// a start-up file of the home. Never approvable; `remedy` says what a person can do.
    #[error(
        "`{}` is {what}: the host trusts it, so it is read-only to every tool and command",
        shown(path)
    )]
    Trusted { path: PathBuf, what: String, remedy: String },
    /// The walk for what the host's git reads in the roots did not finish (too many entries,
    /// a folder it cannot list): nothing is written until it can, since the write could land
    /// in a hooks folder or an included config it did not see.
    #[error("`{}` is not written: {why}", shown(path))]
    Unchecked { path: PathBuf, why: String },
    #[error("`{}` is under read-only root {}; writes are refused there", shown(path), shown(root))]
    ReadOnlyRoot { path: PathBuf, root: PathBuf },
    #[error(
        "`{}` has {links} hard links; writing it would change the other names too — refused",
        shown(path)
    )]
    HardLinked { path: PathBuf, links: u64 },
    #[error("`{}` changed while it was being opened; try again", shown(path))]
    Changed { path: PathBuf },
    #[error("path `{}` is not valid UTF-8", shown(path))]
    NotUtf8 { path: PathBuf },
    #[error("cannot {op} `{}`: {source}", shown(path))]
    Io {
        path: PathBuf,
        op: &'static str,
        #[source]
        source: std::io::Error,
    },
}

impl PathError {
    /// Whether this is a policy refusal (denied, credential, secret, protected, outside, escape)
    /// rather than an ordinary failure; refusals are audited.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            PathError::Nul
                | PathError::TooLong { .. }
                | PathError::DotDot { .. }
                | PathError::Tilde { .. }
                | PathError::Outside { .. }
                | PathError::Escapes { .. }
                | PathError::LinkLoop { .. }
                | PathError::DanglingLink { .. }
                | PathError::Denied { .. }
                | PathError::Secret { .. }
                | PathError::Protected { .. }
                | PathError::Trusted { .. }
                | PathError::Unchecked { .. }
                | PathError::ReadOnlyRoot { .. }
                | PathError::HardLinked { .. }
        )
    }
}

pub type Result<T> = std::result::Result<T, PathError>;

#[cfg(test)]
mod quote_tests {
    use super::*;

    #[test]
    fn a_short_input_is_quoted_whole_and_a_long_one_cut_with_its_length() {
        assert_eq!(shown("src/main.rs").to_string(), "src/main.rs");
        let exact = "é".repeat(QUOTE_MAX);
        assert_eq!(shown(&exact).to_string(), exact);
        // Cut on a character boundary (é is two bytes), with the length in bytes.
        let long = "é".repeat(QUOTE_MAX + 1);
        let s = shown(&long).to_string();
        assert_eq!(s, format!("{}… ({} bytes in all)", "é".repeat(QUOTE_MAX), long.len()));
        let huge = "a".repeat(10 << 20);
        assert!(shown(&huge).to_string().len() < 300);
        let e = PathError::NotFound { path: PathBuf::from(&huge) };
        assert!(e.to_string().len() < 320, "{}", e.to_string().len());
    }
}
