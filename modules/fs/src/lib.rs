//! The tools-fs logic of `hands`: read, write, edit, list_dir, glob and grep over the roots a
//! [`hands_roots::Resolver`] confines. Knows nothing of MCP: each tool is a function from a
//! parameter struct to an output struct (both with JSON schemas) or an [`FsError`].

pub mod edit;
mod error;
pub mod list;
pub mod read;
pub mod search;
pub mod text;
pub mod write;

#[cfg(test)]
mod tests_rwe;

#[cfg(test)]
mod tests_walk;

pub use error::FsError;

/// What every tool output provides besides its structured form: the text mirror shown to
/// clients that do not read `structuredContent`.
pub trait ToolText {
    fn text(&self) -> String;
}
