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

// A file may be megabytes: a debug print shows a few dozen bytes of it at most.
impl fmt::Debug for Body {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SHOWN: usize = 64;
        match self {
            Body::Text(t) if t.len() <= SHOWN => write!(f, "Text({t:?})"),
            Body::Bytes(b) if b.len() <= SHOWN => write!(f, "Bytes({b:?})"),
            Body::Text(t) => write!(f, "Text({} bytes)", t.len()),
            Body::Bytes(b) => write!(f, "Bytes({} bytes)", b.len()),
        }
    }
}

impl fmt::Debug for Attachment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Attachment({}, {}, {:?})", self.uri, self.mime, self.body)
    }
}

/// Takes the files an output of type `O` carries (leaving none in it).
pub type Files<O> = fn(&mut O) -> Vec<Attachment>;

/// The [`Files`] of an output that never carries any.
pub fn no_files<O>(_: &mut O) -> Vec<Attachment> {
    Vec::new()
}
