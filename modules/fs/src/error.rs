//! Failures of the file tools, each saying what was wrong and what to do.

use hands_roots::{PathError, shown};
use std::path::PathBuf;

/// Why a file tool failed. Every variant is shown to the caller as a tool error (`isError`).
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    /// Resolution refused the path or could not open it.
    #[error(transparent)]
    Path(#[from] PathError),
    /// `read` or `edit` met a file with a NUL in its first 8 KiB.
    #[error(
        "`{}` is a binary file ({size} bytes, looks like {guess}); read refuses binary files",
        shown(path)
    )]
    Binary { path: PathBuf, size: u64, guess: String },
    /// `expected_sha256` did not match the file's current content.
    #[error(
        "`{}` changed since read: its sha256 is {actual}, not the expected {expected}; read it again and retry",
        shown(path)
    )]
    Changed { path: PathBuf, expected: String, actual: String },
    /// `edit` found no occurrence of `old_string`.
    #[error("old_string was not found in `{}`{candidates}", shown(path))]
    NoMatch { path: PathBuf, candidates: String },
    /// `edit` found several occurrences and `replace_all` was false.
    #[error(
        "old_string occurs {count} times in `{}` (lines {lines}); add surrounding context to make it unique, or set replace_all",
        shown(path)
    )]
    NotUnique { path: PathBuf, count: usize, lines: String },
    /// A parameter is out of range or contradicts another.
    #[error("{0}")]
    Invalid(String),
    /// A capped call (`read_within`, `list_dir_within`) stopped before its work: over the cap.
    #[error("the call stopped at its size cap before reading; run it without a cap")]
    OverCap,
    /// An I/O error on an already-resolved file.
    #[error("cannot {op} `{}`: {source}", shown(path))]
    Io {
        path: PathBuf,
        op: &'static str,
        #[source]
        source: std::io::Error,
    },
}

impl FsError {
    /// Whether this is a policy refusal (the path's, see [`PathError::is_refusal`]) rather than
    /// a failure of the call itself (binary, changed, no match, an I/O error).
    pub fn is_refusal(&self) -> bool {
        match self {
            FsError::Path(p) => p.is_refusal(),
            _ => false,
        }
    }

    pub(crate) fn io(path: &std::path::Path, op: &'static str, source: std::io::Error) -> Self {
        FsError::Io { path: path.to_path_buf(), op, source }
    }
}
