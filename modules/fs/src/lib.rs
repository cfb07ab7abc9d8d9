//! The tools-fs logic of `hands`: read, write, edit, list_dir, glob and grep over the roots a
//! [`hands_roots::Resolver`] confines. Knows nothing of MCP: each tool is a function from a
//! parameter struct to an output struct (both with JSON schemas) or an [`FsError`].

// The lib target itself is checked without this (clippy.toml, SPEC §11).
#![cfg_attr(
    test,
    allow(
        clippy::disallowed_methods,
        reason = "unit tests make and read their fixtures by path and spawn what they test against"
    )
)]

pub mod catalogue;
pub mod edit;
mod error;
pub mod glob;
pub mod grep;
mod ignore_rules;
pub mod list_dir;
mod parallel_walk;
pub mod read;
pub mod settings;
pub mod text;
mod walk_cache;
pub mod write;

#[cfg(test)]
mod tests_rwe;

#[cfg(test)]
mod tests_walk_cache;

#[cfg(test)]
mod tests_walk;

pub use error::FsError;

/// The size cap (bytes of the file, or of the folder's own `st_size`) up to which the stdio
/// daemon runs `read` and `list_dir` inline on its one runtime thread: a call that small takes
/// tens of microseconds, about what the hop to a blocking thread and back costs. A larger one
/// stops right after opening (`read_within`, `list_dir_within` return `None`) and runs on the
/// blocking pool, so that it cannot hold up the client's other calls for long.
pub const INLINE_CAP: u64 = 128 * 1024;

/// What every tool output provides besides its structured form: the text mirror shown to
/// clients that do not read `structuredContent`.
pub trait ToolText {
    fn text(&self) -> String;
}
