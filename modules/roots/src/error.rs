//! Refusals and failures of path resolution, each naming the path and what to do.

use std::path::PathBuf;

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
    #[error("path `{path}` contains a `..` component; give the path without `..`")]
    DotDot { path: String },
    #[error("path `{}` is outside every root ({roots}); use a path under one of them", path.display())]
    Outside { path: PathBuf, roots: String },
    #[error("path `{}` leaves root {} (a symlink points outside it); only links that stay beneath the root are followed", path.display(), root.display())]
    Escapes { path: PathBuf, root: PathBuf },
    #[error("path `{}` goes through a symlink loop or a /proc magic link; refused", path.display())]
    LinkLoop { path: PathBuf },
    #[error("path `{}` is a dangling symlink; its target would be created outside what the resolver can confine — write to the target path directly", path.display())]
    DanglingLink { path: PathBuf },
    #[error("`{}` does not exist", path.display())]
    NotFound { path: PathBuf },
    #[error("a component of `{}` is not a directory", path.display())]
    NotADirectory { path: PathBuf },
    #[error("`{}` is a directory; use list_dir or glob for folders", path.display())]
    IsADirectory { path: PathBuf },
    #[error("`{}` is a {kind}, not a regular file; refused", path.display())]
    NotRegular { path: PathBuf, kind: &'static str },
    #[error("`{}` is denied to every tool ({why}); this cannot be approved", path.display())]
    Denied { path: PathBuf, why: String },
    #[error("`{}` looks like a secret file (sandbox.secret_patterns); refused to the file tools", path.display())]
    Secret { path: PathBuf },
    #[error("`{}` is protected ({rule}): something outside the sandbox executes it later, so it is read-only to every tool", path.display())]
    Protected { path: PathBuf, rule: String },
    #[error("`{}` is under read-only root {}; writes are refused there", path.display(), root.display())]
    ReadOnlyRoot { path: PathBuf, root: PathBuf },
    #[error("`{}` has {links} hard links; writing it would change the other names too — refused", path.display())]
    HardLinked { path: PathBuf, links: u64 },
    #[error("`{}` changed while it was being opened; try again", path.display())]
    Changed { path: PathBuf },
    #[error("path `{}` is not valid UTF-8", path.display())]
    NotUtf8 { path: PathBuf },
    #[error("cannot {op} `{}`: {source}", path.display())]
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
                | PathError::DotDot { .. }
                | PathError::Outside { .. }
                | PathError::Escapes { .. }
                | PathError::LinkLoop { .. }
                | PathError::DanglingLink { .. }
                | PathError::Denied { .. }
                | PathError::Secret { .. }
                | PathError::Protected { .. }
                | PathError::ReadOnlyRoot { .. }
                | PathError::HardLinked { .. }
        )
    }
}

pub type Result<T> = std::result::Result<T, PathError>;
