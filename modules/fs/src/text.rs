//! Text helpers shared by the file tools: byte-order marks, binary sniffing, streaming UTF-8
//! validation, line endings, sha256 digests and the display of control characters.

use crate::FsError;
use sha2::{Digest, Sha256};
use std::borrow::Cow;
use std::io::BufRead;
use std::path::Path;

/// Files up to this size get a `sha256` from `read`, can be checked with `expected_sha256`,
/// can be edited, and (for UTF-16) decoded.
pub const HASH_LIMIT: u64 = 64 * 1024 * 1024;

/// How much of a file's start is inspected for a NUL byte to call it binary.
pub const SNIFF_LEN: usize = 8 * 1024;

/// Lines longer than this many characters are cut in `read` output.
pub const MAX_LINE_CHARS: usize = 2000;

/// The marker that replaces the rest of a line cut after `shown` of its `total` characters.
pub fn cut_marker(shown: u64, total: u64) -> String {
    format!("… [line cut: {shown} of {total} chars shown]")
}

/// `s` limited to `max` characters, with [`cut_marker`] appended when it was longer.
pub fn cut_chars(s: &str, max: usize) -> Cow<'_, str> {
    match s.char_indices().nth(max) {
        None => Cow::Borrowed(s),
        Some((at, _)) => {
            let total = s.chars().count() as u64;
            Cow::Owned(format!("{}{}", &s[..at], cut_marker(max as u64, total)))
        }
    }
}

/// The lowercase hex sha256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Checks that an `expected_sha256` parameter is 64 hex digits and returns it lowercased.
pub fn parse_sha256(expected: &str) -> Result<String, FsError> {
    let e = expected.trim();
    if e.len() != 64 || !e.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(FsError::Invalid(format!(
            "expected_sha256 must be 64 hex digits (the sha256 that read returned), not `{}`",
            cut_chars(&escape_controls(e), 80)
        )));
    }
    Ok(e.to_ascii_lowercase())
}

/// Refuses with [`FsError::Changed`] unless `actual` is the (lowercased) `expected` digest.
pub fn verify_sha256(path: &Path, expected: &str, actual: &str) -> Result<(), FsError> {
    if expected.eq_ignore_ascii_case(actual) {
        Ok(())
    } else {
        Err(FsError::Changed {
            path: path.to_path_buf(),
            expected: expected.to_string(),
            actual: actual.to_string(),
        })
    }
}

/// A byte-order mark at the start of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bom {
    Utf8,
    Utf16Le,
    Utf16Be,
}

impl Bom {
    /// The mark `head` (the first bytes of a file) starts with, if any.
    pub fn detect(head: &[u8]) -> Option<Bom> {
        if head.starts_with(&[0xEF, 0xBB, 0xBF]) {
            Some(Bom::Utf8)
        } else if head.starts_with(&[0xFF, 0xFE]) {
            Some(Bom::Utf16Le)
        } else if head.starts_with(&[0xFE, 0xFF]) {
            Some(Bom::Utf16Be)
        } else {
            None
        }
    }

    /// The mark's bytes.
    pub fn bytes(self) -> &'static [u8] {
        match self {
            Bom::Utf8 => &[0xEF, 0xBB, 0xBF],
            Bom::Utf16Le => &[0xFF, 0xFE],
            Bom::Utf16Be => &[0xFE, 0xFF],
        }
    }

    /// Whether this marks UTF-16 text (which is full of NULs and yet not binary).
    pub fn is_utf16(self) -> bool {
        matches!(self, Bom::Utf16Le | Bom::Utf16Be)
    }

    /// The decoder for the text after the mark.
    pub fn encoding(self) -> &'static encoding_rs::Encoding {
        match self {
            Bom::Utf8 => encoding_rs::UTF_8,
            Bom::Utf16Le => encoding_rs::UTF_16LE,
            Bom::Utf16Be => encoding_rs::UTF_16BE,
        }
    }

    /// The name shown in `read`'s `encoding`.
    pub fn name(self) -> &'static str {
        match self {
            Bom::Utf8 => "utf-8-bom",
            Bom::Utf16Le => "utf-16le",
            Bom::Utf16Be => "utf-16be",
        }
    }
}

/// Whether a file whose first bytes are `head` is binary: a NUL in the first 8 KiB, unless the
/// file starts with a UTF-16 byte-order mark.
pub fn looks_binary(head: &[u8]) -> bool {
    if Bom::detect(head).is_some_and(Bom::is_utf16) {
        return false;
    }
    find_byte(&head[..head.len().min(SNIFF_LEN)], 0).is_some()
}

/// A guess at what a binary file is, from its magic bytes.
pub fn binary_kind(head: &[u8]) -> &'static str {
    const MAGIC: &[(&[u8], &str)] = &[
        (b"\x89PNG\r\n\x1a\n", "a PNG image"),
        (b"\xFF\xD8\xFF", "a JPEG image"),
        (b"GIF87a", "a GIF image"),
        (b"GIF89a", "a GIF image"),
        (b"%PDF-", "a PDF document"),
        (b"PK\x03\x04", "a zip archive"),
        (b"PK\x05\x06", "a zip archive"),
        (b"\x1F\x8B", "gzip data"),
        (b"\x7FELF", "an ELF executable or library"),
        (b"SQLite format 3\0", "an SQLite database"),
    ];
    MAGIC.iter().find(|(m, _)| head.starts_with(m)).map_or("binary data", |(_, kind)| kind)
}

/// The position of the first `byte` in `hay`. Goes through std's `memchr` (via
/// `BufRead::skip_until` on a slice), which is fast even in unoptimised builds.
pub fn find_byte(hay: &[u8], byte: u8) -> Option<usize> {
    let mut r = hay;
    let n = r.skip_until(byte).ok()?;
    (n > 0 && hay[n - 1] == byte).then(|| n - 1)
}

/// Validates UTF-8 fed in arbitrary chunks (a character may straddle two chunks).
#[derive(Debug, Default)]
pub struct Utf8Check {
    /// The start of a character cut by the end of the previous chunk.
    carry: Vec<u8>,
    invalid: bool,
}

impl Utf8Check {
    pub fn feed(&mut self, mut bytes: &[u8]) {
        if self.invalid || bytes.is_empty() {
            return;
        }
        if let Some(&lead) = self.carry.first() {
            let width = utf8_width(lead);
            let take = (width - self.carry.len()).min(bytes.len());
            self.carry.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            if self.carry.len() < width {
                return;
            }
            if std::str::from_utf8(&self.carry).is_err() {
                self.invalid = true;
                return;
            }
            self.carry.clear();
        }
        if let Err(e) = std::str::from_utf8(bytes) {
            match e.error_len() {
                Some(_) => self.invalid = true,
                None => self.carry.extend_from_slice(&bytes[e.valid_up_to()..]),
            }
        }
    }

    /// Whether everything fed was valid UTF-8 (a character cut by the end counts as invalid).
    pub fn valid(&self) -> bool {
        !self.invalid && self.carry.is_empty()
    }
}

/// The length of the UTF-8 sequence a lead byte starts (only called on the lead byte of an
/// incomplete but so far valid sequence, which is 2 to 4 bytes long).
fn utf8_width(lead: u8) -> usize {
    match lead {
        0xF0..=0xFF => 4,
        0xE0..=0xEF => 3,
        _ => 2,
    }
}

/// How a file ends its lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineEnding {
    Lf,
    Crlf,
    /// Both LF and CRLF occur.
    Mixed,
    /// No line break at all.
    None,
}

impl LineEnding {
    /// From whether bare LF and CRLF line breaks were seen.
    pub fn from_seen(lf: bool, crlf: bool) -> LineEnding {
        match (lf, crlf) {
            (true, true) => LineEnding::Mixed,
            (false, true) => LineEnding::Crlf,
            (true, false) => LineEnding::Lf,
            (false, false) => LineEnding::None,
        }
    }

    /// The line endings of a text held in memory.
    pub fn of(text: &str) -> LineEnding {
        let bytes = text.as_bytes();
        let (mut lf, mut crlf) = (false, false);
        let mut at = 0;
        while let Some(i) = find_byte(&bytes[at..], b'\n') {
            let pos = at + i;
            if pos > 0 && bytes[pos - 1] == b'\r' {
                crlf = true;
            } else {
                lf = true;
            }
            if lf && crlf {
                break;
            }
            at = pos + 1;
        }
        LineEnding::from_seen(lf, crlf)
    }

    /// The name shown in `read`'s `line_ending`.
    pub fn name(self) -> &'static str {
        match self {
            LineEnding::Lf => "lf",
            LineEnding::Crlf => "crlf",
            LineEnding::Mixed => "mixed",
            LineEnding::None => "none",
        }
    }
}

/// `s` with every bare LF (one not preceded by CR) turned into CRLF.
pub fn lf_to_crlf(s: &str) -> Cow<'_, str> {
    let bytes = s.as_bytes();
    let bare =
        bytes.iter().enumerate().any(|(i, &b)| b == b'\n' && (i == 0 || bytes[i - 1] != b'\r'));
    if !bare {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + s.len() / 16);
    let mut prev = '\0';
    for c in s.chars() {
        if c == '\n' && prev != '\r' {
            out.push('\r');
        }
        out.push(c);
        prev = c;
    }
    Cow::Owned(out)
}

/// `s` with every CRLF turned into LF.
pub fn crlf_to_lf(s: &str) -> Cow<'_, str> {
    if s.contains("\r\n") { Cow::Owned(s.replace("\r\n", "\n")) } else { Cow::Borrowed(s) }
}

/// `s` with control characters (other than TAB) shown as `\n`, `\r` or `\u{..}` escapes, for
/// text that must stay on one line and not drive a terminal: file names, paths, parameters
/// echoed in messages. File content is never escaped.
pub fn escape_controls(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_escaped_control) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if is_escaped_control(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

fn is_escaped_control(c: char) -> bool {
    c.is_control() && c != '\t'
}
