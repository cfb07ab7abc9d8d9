//! A file a tool's result carries besides its structured content and text (`bash`'s
//! `outputs`): the daemon returns each as an MCP embedded resource, text as text and anything
//! else as a base64 blob, so that a client which cannot read the file itself (a remote agent)
//! still gets the build's report, image or archive.

use std::fmt;

/// One file a result carries: where it was read, what it is, and its bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct Attachment {
    /// `file:///` and the real absolute path read, percent-encoded.
    pub uri: String,
    /// The MIME type, guessed from the name (and the bytes when the name says nothing).
    pub mime: String,
    pub body: Body,
}

/// What a file holds, as the result carries it.
#[derive(Clone, PartialEq, Eq)]
pub enum Body {
    /// Valid UTF-8 of a textual type: carried as text.
    Text(String),
    /// Anything else: carried as base64.
    Bytes(Vec<u8>),
}

impl Body {
    /// The file's size in bytes.
    pub fn len(&self) -> usize {
        match self {
            Body::Text(t) => t.len(),
            Body::Bytes(b) => b.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

// A file may be megabytes: a debug print says what it is, never its bytes.
impl fmt::Debug for Attachment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.body {
            Body::Text(_) => "text",
            Body::Bytes(_) => "bytes",
        };
        write!(f, "Attachment({}, {}, {} {kind})", self.uri, self.mime, self.body.len())
    }
}

/// Takes the files an output of type `O` carries (leaving none in it).
pub type Files<O> = fn(&mut O) -> Vec<Attachment>;

/// The [`Files`] of an output that never carries any.
pub fn no_files<O>(_: &mut O) -> Vec<Attachment> {
    Vec::new()
}
