//! `read`: a window of a text file with `cat -n` line numbers, streamed so that memory is
//! bounded by the window and never by the file.

use crate::text::{
    Bom, HASH_LIMIT, LineEnding, MAX_LINE_CHARS, SNIFF_LEN, Utf8Check, binary_kind, cut_marker,
    find_byte, looks_binary, sha256_hex,
};
use crate::{FsError, ToolText};
use hands_roots::Resolver;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::{BufRead, BufReader, ErrorKind, Read};
use std::path::Path;

/// Lines returned when `limit` is not given.
pub const DEFAULT_LIMIT: u64 = 2000;

/// The most `content` a single read returns; lines past it are left for the next call.
pub const OUTPUT_CAP: usize = 256 * 1024;

/// Read buffer of the streaming pass.
const CHUNK: usize = 64 * 1024;

/// Parameters of `read`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadParams {
    /// The file to read: absolute (under a root) or relative to the first root.
    pub path: String,
    /// 1-based number of the first line to return. Default 1.
    #[serde(default)]
    pub offset: Option<u64>,
    /// How many lines to return at most. Default 2000; output is also capped at 256 KiB.
    #[serde(default)]
    pub limit: Option<u64>,
}

/// The result of `read`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ReadOutput {
    /// The real absolute path of the file read.
    pub path: String,
    /// The lines `cat -n` style: line number right-aligned in 6 columns, a TAB, the line. Lines
    /// over 2000 characters are cut with a marker; the CR of CRLF is not shown.
    pub content: String,
    /// The 1-based number of the first line asked for.
    pub offset: u64,
    /// How many lines `content` holds.
    pub lines_returned: u64,
    /// How many lines the whole file has.
    pub total_lines: u64,
    /// Whether lines remain after the returned ones (the limit or the 256 KiB cap stopped it).
    pub truncated: bool,
    /// `utf-8`, `utf-8-bom`, `utf-16le`, `utf-16be`, or `invalid-utf8` (invalid bytes shown as
    /// U+FFFD; edit refuses such files).
    pub encoding: String,
    /// The file's line breaks: `lf`, `crlf`, `mixed` or `none`.
    pub line_ending: String,
    /// sha256 of the whole file's bytes, for `expected_sha256`; absent above 64 MiB.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// File size in bytes.
    pub size: u64,
}

impl ToolText for ReadOutput {
    fn text(&self) -> String {
        if self.total_lines == 0 {
            return format!("`{}` is empty (0 lines)", self.path);
        }
        if self.lines_returned == 0 {
            return format!(
                "no lines: offset {} is past the end of `{}`, which has {}",
                self.offset,
                self.path,
                hands_tool::counted(self.total_lines, "line", "lines")
            );
        }
        let mut out = self.content.clone();
        if self.truncated {
            let next = self.offset + self.lines_returned;
            let more = self.total_lines + 1 - next;
            let s = if more == 1 { "" } else { "s" };
            out.push_str(&format!("... {more} more line{s}; continue with offset={next}\n"));
        }
        match self.encoding.as_str() {
            "invalid-utf8" => out.push_str(
                "[not valid UTF-8: invalid bytes shown as \u{FFFD}; edit refuses this file]\n",
            ),
            "utf-16le" | "utf-16be" => {
                out.push_str(&format!("[decoded from {}]\n", self.encoding));
            }
            _ => {}
        }
        // The facts the structured answer has and the lines do not, for clients that show the
        // model only the text: the hash is what `expected_sha256` of write and edit takes.
        let lines = hands_tool::counted(self.total_lines, "line", "lines");
        let mut facts = format!("[{lines}, {}", self.line_ending);
        if let Some(sha) = &self.sha256 {
            facts.push_str(&format!(", sha256 {sha}"));
        }
        facts.push_str("]\n");
        out.push_str(&facts);
        out
    }
}

/// Reads a window of the text file at `p.path`. Binary files are refused; the whole file is
/// read through once to count its lines (and hash it, up to 64 MiB) but only the window is kept.
pub fn read(resolver: &Resolver, p: ReadParams) -> Result<ReadOutput, FsError> {
    read_within(resolver, p, None)?.ok_or(FsError::OverCap)
}

/// `read`, unless the file is larger than `cap` bytes: then `None`, with nothing read but the
/// file's opening (see [`crate::INLINE_CAP`]).
pub fn read_within(
    resolver: &Resolver,
    p: ReadParams,
    cap: Option<u64>,
) -> Result<Option<ReadOutput>, FsError> {
    let offset = p.offset.unwrap_or(1);
    let limit = p.limit.unwrap_or(DEFAULT_LIMIT);
    if offset == 0 {
        return Err(FsError::Invalid(
            "offset is 1-based (the first line is 1); pass offset >= 1 or omit it".to_string(),
        ));
    }
    if limit == 0 {
        return Err(FsError::Invalid(
            "limit must be at least 1 (it is a line count, default 2000); omit it for the default"
                .to_string(),
        ));
    }
    let opened = resolver.open_file(&p.path)?;
    let abs = opened.abs;
    let size = u64::try_from(opened.stat.st_size).unwrap_or(0);
    if cap.is_some_and(|c| size > c) {
        return Ok(None);
    }
    let mut file = opened.file;
    let io = |e| FsError::io(&abs, "read", e);

    let head = read_head(&mut file, SNIFF_LEN).map_err(io)?;
    let bom = Bom::detect(&head);
    let mut window = Window::new(offset, limit);
    let (encoding, sha256) = match bom {
        Some(b) if b.is_utf16() => {
            let sha = read_utf16(&abs, file, head, size, b, &mut window)?;
            (b.name(), Some(sha))
        }
        _ => {
            if looks_binary(&head) {
                return Err(FsError::Binary {
                    path: abs,
                    size,
                    guess: binary_kind(&head).to_string(),
                });
            }
            let skip = bom.map_or(0, |b| b.bytes().len());
            let (valid, sha) =
                stream(file, &head, skip, size <= HASH_LIMIT, &mut window).map_err(io)?;
            let name = match (valid, bom) {
                (false, _) => "invalid-utf8",
                (true, Some(b)) => b.name(),
                (true, None) => "utf-8",
            };
            (name, sha)
        }
    };
    window.finish();
    let total_lines = window.line - 1;
    Ok(Some(ReadOutput {
        path: abs.display().to_string(),
        truncated: offset + window.returned <= total_lines,
        content: window.out,
        offset,
        lines_returned: window.returned,
        total_lines,
        encoding: encoding.to_string(),
        line_ending: LineEnding::from_seen(window.saw_lf, window.saw_crlf).name().to_string(),
        sha256,
        size,
    }))
}

/// Reads up to `len` bytes from the start of `file` (fewer only at end of file).
fn read_head(file: &mut File, len: usize) -> std::io::Result<Vec<u8>> {
    let mut head = Vec::with_capacity(len);
    file.by_ref().take(len as u64).read_to_end(&mut head)?;
    Ok(head)
}

/// The UTF-8 pass: feeds `head` (minus `skip` BOM bytes) and then the rest of `file` through
/// the window, validating UTF-8 and hashing when asked. Returns (valid UTF-8, sha256).
fn stream(
    file: File,
    head: &[u8],
    skip: usize,
    hash: bool,
    window: &mut Window,
) -> std::io::Result<(bool, Option<String>)> {
    let mut hasher = hash.then(Sha256::new);
    let mut utf8 = Utf8Check::default();
    if let Some(h) = hasher.as_mut() {
        h.update(head);
    }
    let text = head.get(skip..).unwrap_or_default();
    utf8.feed(text);
    window.feed(text);
    let mut reader = BufReader::with_capacity(CHUNK, file);
    loop {
        let chunk = match reader.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            break;
        }
        if let Some(h) = hasher.as_mut() {
            h.update(chunk);
        }
        utf8.feed(chunk);
        window.feed(chunk);
        let n = chunk.len();
        reader.consume(n);
    }
    Ok((utf8.valid(), hasher.map(|h| hex::encode(h.finalize()))))
}

/// The UTF-16 pass: the whole file is read (up to 64 MiB), decoded, then fed through the
/// window. Returns the sha256 of the file's bytes.
fn read_utf16(
    abs: &Path,
    file: File,
    head: Vec<u8>,
    size: u64,
    bom: Bom,
    window: &mut Window,
) -> Result<String, FsError> {
    let too_big = || {
        FsError::Invalid(format!(
            "`{}` is UTF-16 text of {size} bytes; read decodes UTF-16 files only up to 64 MiB \
             (convert it to UTF-8 to read it)",
            hands_roots::shown(&abs)
        ))
    };
    if size > HASH_LIMIT {
        return Err(too_big());
    }
    let mut bytes = head;
    let room = (HASH_LIMIT + 1).saturating_sub(bytes.len() as u64);
    file.take(room).read_to_end(&mut bytes).map_err(|e| FsError::io(abs, "read", e))?;
    if bytes.len() as u64 > HASH_LIMIT {
        return Err(too_big());
    }
    let (text, _had_errors) = bom.encoding().decode_with_bom_removal(&bytes);
    window.feed(text.as_bytes());
    Ok(sha256_hex(&bytes))
}

/// Splits a byte stream into lines and keeps only those in `first..=last`, formatted.
struct Window {
    first: u64,
    last: u64,
    /// Number of the line being scanned (1-based); after `finish`, total lines + 1.
    line: u64,
    /// Whether the current line has any byte yet (a last line without LF still counts).
    started: bool,
    /// The byte before the current position, to tell CRLF from LF across chunks.
    prev: u8,
    saw_lf: bool,
    saw_crlf: bool,
    /// The kept bytes of the current line (at most `MAX_LINE_CHARS` characters).
    buf: Vec<u8>,
    /// Characters in the current line so far (UTF-8 lead bytes).
    chars: u64,
    out: String,
    returned: u64,
    /// The output cap was reached; later lines are counted but not kept.
    full: bool,
}

impl Window {
    fn new(offset: u64, limit: u64) -> Window {
        Window {
            first: offset,
            last: offset.saturating_add(limit - 1),
            line: 1,
            started: false,
            prev: 0,
            saw_lf: false,
            saw_crlf: false,
            buf: Vec::new(),
            chars: 0,
            out: String::new(),
            returned: 0,
            full: false,
        }
    }

    fn wanted(&self) -> bool {
        !self.full && self.line >= self.first && self.line <= self.last
    }

    fn feed(&mut self, mut chunk: &[u8]) {
        while let Some(i) = find_byte(chunk, b'\n') {
            self.piece(&chunk[..i]);
            let crlf = self.prev == b'\r';
            if crlf {
                self.saw_crlf = true;
            } else {
                self.saw_lf = true;
            }
            self.end_line(crlf);
            chunk = &chunk[i + 1..];
        }
        self.piece(chunk);
    }

    /// Part of a line, without its LF.
    fn piece(&mut self, bytes: &[u8]) {
        let Some(&last) = bytes.last() else { return };
        self.started = true;
        self.prev = last;
        if !self.wanted() {
            return;
        }
        let max = MAX_LINE_CHARS as u64;
        if self.chars > max {
            self.chars += bytes.iter().filter(|&&b| !is_continuation(b)).count() as u64;
            return;
        }
        for &b in bytes {
            if !is_continuation(b) {
                self.chars += 1;
            }
            if self.chars <= max {
                self.buf.push(b);
            }
        }
    }

    fn end_line(&mut self, crlf: bool) {
        if self.wanted() {
            if crlf {
                // The CR was kept only if the line was not cut before it.
                if self.chars <= MAX_LINE_CHARS as u64 {
                    self.buf.pop();
                }
                self.chars -= 1;
            }
            self.emit();
        }
        self.buf.clear();
        self.chars = 0;
        self.started = false;
        self.prev = b'\n';
        self.line += 1;
    }

    fn emit(&mut self) {
        let text = String::from_utf8_lossy(&self.buf);
        let mut line = format!("{:>6}\t{}", self.line, text);
        if self.chars > MAX_LINE_CHARS as u64 {
            line.push_str(&cut_marker(MAX_LINE_CHARS as u64, self.chars));
        }
        line.push('\n');
        if self.out.len() + line.len() > OUTPUT_CAP {
            self.full = true;
        } else {
            self.out.push_str(&line);
            self.returned += 1;
        }
    }

    /// Ends a last line that has no LF.
    fn finish(&mut self) {
        if self.started {
            if self.wanted() {
                self.emit();
            }
            self.line += 1;
            self.started = false;
        }
    }
}

fn is_continuation(b: u8) -> bool {
    b & 0xC0 == 0x80
}
