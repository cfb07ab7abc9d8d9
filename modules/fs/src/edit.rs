//! `edit`: replace an exact string in a text file, keeping its encoding, BOM and line endings,
//! written back atomically; a miss shows the closest lines, an ambiguous match the line numbers.

use crate::text::{
    Bom, HASH_LIMIT, LineEnding, binary_kind, crlf_to_lf, cut_chars, find_byte, lf_to_crlf,
    looks_binary, parse_sha256, sha256_hex, verify_sha256,
};
use crate::write::atomic_write;
use crate::{FsError, ToolText};
use hands_roots::Resolver;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use similar::{Algorithm, TextDiff};
use std::borrow::Cow;
use std::io::Read;
use std::path::Path;
use std::time::Duration;

/// The diff returned is cut past this many bytes.
const DIFF_CAP: usize = 8 * 1024;

/// Line numbers listed when `old_string` occurs more than once.
const LINES_LISTED: usize = 20;

/// Lines of the file compared with `old_string` when looking for candidates after a miss.
const CANDIDATE_SCAN: usize = 100_000;

/// Parameters of `edit`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditParams {
    /// The file to edit: absolute (under a root) or relative to the first root. It must exist,
    /// be UTF-8 (or UTF-16 with a BOM) text and be at most 64 MiB.
    pub path: String,
    /// The exact text to replace, as `read` shows it but without the line-number prefixes.
    /// Must occur exactly once unless replace_all. LF line breaks also match in a CRLF file.
    pub old_string: String,
    /// The text to put in its place; must differ from old_string. In a CRLF file its LF line
    /// breaks are written as CRLF.
    pub new_string: String,
    /// Replace every occurrence instead of requiring exactly one. Default false.
    #[serde(default)]
    pub replace_all: Option<bool>,
    /// The sha256 that `read` returned; if given, the file must still have this content, else
    /// the edit is refused as "changed since read".
    #[serde(default)]
    pub expected_sha256: Option<String>,
}

/// The result of `edit`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct EditOutput {
    /// The real absolute path edited.
    pub path: String,
    /// How many occurrences were replaced.
    pub replacements: u64,
    /// A unified diff of the change (3 lines of context, cut past 8 KiB).
    pub diff: String,
    /// sha256 of the new content.
    pub sha256: String,
}

impl ToolText for EditOutput {
    fn text(&self) -> String {
        let s = if self.replacements == 1 { "" } else { "s" };
        format!(
            "edited `{}`: {} replacement{s} (sha256 {})\n{}",
            self.path, self.replacements, self.sha256, self.diff
        )
    }
}

/// Replaces `old_string` with `new_string` in the file at `p.path` and writes it back
/// atomically.
pub fn edit(resolver: &Resolver, p: EditParams) -> Result<EditOutput, FsError> {
    if p.old_string.is_empty() {
        return Err(FsError::Invalid(
            "old_string is empty; give the exact text to replace (use write to create or \
             overwrite a whole file)"
                .to_string(),
        ));
    }
    if p.old_string == p.new_string {
        return Err(FsError::Invalid(
            "old_string and new_string are identical; there is nothing to change".to_string(),
        ));
    }
    let expected = p.expected_sha256.as_deref().map(parse_sha256).transpose()?;
    let target = resolver.prepare_write(&p.path, false)?;
    let abs = target.abs.clone();
    let Some(existing) = &target.existing else {
        return Err(FsError::Invalid(format!(
            "`{}` does not exist; edit changes existing files — use write to create it",
            hands_roots::shown(&abs)
        )));
    };
    let opened = resolver.open_file(&p.path)?;
    if (opened.stat.st_dev, opened.stat.st_ino) != (existing.st_dev, existing.st_ino) {
        return Err(FsError::Invalid(format!(
            "`{}` changed while editing (it was replaced or moved); retry",
            hands_roots::shown(&abs)
        )));
    }
    let size = u64::try_from(opened.stat.st_size).unwrap_or(0);
    let too_big = |size: u64| {
        FsError::Invalid(format!(
            "`{}` is {size} bytes; edit works on files up to 64 MiB — use write to replace it",
            hands_roots::shown(&abs)
        ))
    };
    if size > HASH_LIMIT {
        return Err(too_big(size));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    opened
        .file
        .take(HASH_LIMIT + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| FsError::io(&abs, "read", e))?;
    if bytes.len() as u64 > HASH_LIMIT {
        return Err(too_big(bytes.len() as u64));
    }
    if let Some(expected) = expected {
        verify_sha256(&abs, &expected, &sha256_hex(&bytes))?;
    }
    if looks_binary(&bytes) {
        return Err(FsError::Binary {
            path: abs,
            size: bytes.len() as u64,
            guess: binary_kind(&bytes).to_string(),
        });
    }
    let bom = Bom::detect(&bytes);
    let text = decode(&abs, &bytes, bom)?;

    let replace_all = p.replace_all.unwrap_or(false);
    let eol = LineEnding::of(&text);
    let Some((old, new, positions)) = find_matches(&text, &p.old_string, &p.new_string, eol) else {
        return Err(FsError::NoMatch { path: abs, candidates: miss_hint(&text, &p.old_string) });
    };
    if positions.len() > 1 && !replace_all {
        let lines = line_numbers(&text, &positions[..positions.len().min(LINES_LISTED)]);
        let mut listed = lines.iter().map(u64::to_string).collect::<Vec<_>>().join(", ");
        if positions.len() > LINES_LISTED {
            listed.push_str(", …");
        }
        return Err(FsError::NotUnique { path: abs, count: positions.len(), lines: listed });
    }

    let mut edited = String::with_capacity(text.len() + new.len());
    let mut last = 0;
    for &at in &positions {
        edited.push_str(&text[last..at]);
        edited.push_str(&new);
        last = at + old.len();
    }
    edited.push_str(&text[last..]);

    let out = encode(&edited, bom);
    atomic_write(&target, &out)?;
    let shown = abs.display().to_string();
    Ok(EditOutput {
        diff: short_diff(&shown, &text, &edited),
        path: shown,
        replacements: positions.len() as u64,
        sha256: sha256_hex(&out),
    })
}

/// The file's text without its BOM; refuses what is not valid UTF-8 (or UTF-16 with a BOM),
/// since replacing invalid bytes with U+FFFD on write would corrupt the file.
fn decode<'a>(abs: &Path, bytes: &'a [u8], bom: Option<Bom>) -> Result<Cow<'a, str>, FsError> {
    let body = &bytes[bom.map_or(0, |b| b.bytes().len())..];
    match bom {
        Some(b) if b.is_utf16() => b
            .encoding()
            .decode_without_bom_handling_and_without_replacement(body)
            .ok_or_else(|| {
                FsError::Invalid(format!(
                    "`{}` is not valid {} text; edit refuses files it cannot write back \
                     unchanged — use write to replace the whole file",
                    hands_roots::shown(&abs),
                    b.name()
                ))
            }),
        _ => std::str::from_utf8(body).map(Cow::Borrowed).map_err(|e| {
            FsError::Invalid(format!(
                "`{}` is not valid UTF-8 (invalid byte at offset {}; read shows it as \
                 invalid-utf8); edit refuses files that are not valid UTF-8 text — use write to \
                 replace the whole file",
                hands_roots::shown(&abs),
                e.valid_up_to() + bytes.len() - body.len()
            ))
        }),
    }
}

/// The file's bytes for `text`, with the BOM and encoding it was read with.
fn encode(text: &str, bom: Option<Bom>) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() + 3);
    if let Some(b) = bom {
        out.extend_from_slice(b.bytes());
    }
    match bom {
        Some(Bom::Utf16Le) => out.extend(text.encode_utf16().flat_map(u16::to_le_bytes)),
        Some(Bom::Utf16Be) => out.extend(text.encode_utf16().flat_map(u16::to_be_bytes)),
        _ => out.extend_from_slice(text.as_bytes()),
    }
    out
}

/// The first form of (old, new) that occurs in `text`, with the byte offsets of its
/// occurrences: as given, or with line breaks turned into the file's own.
fn find_matches<'a>(
    text: &str,
    old: &'a str,
    new: &'a str,
    eol: LineEnding,
) -> Option<(Cow<'a, str>, Cow<'a, str>, Vec<usize>)> {
    let as_given = (Cow::Borrowed(old), Cow::Borrowed(new));
    let variants = match eol {
        // In a CRLF file the model's LF text stands for CRLF, in old and new alike.
        LineEnding::Crlf => vec![(lf_to_crlf(old), lf_to_crlf(new))],
        LineEnding::Mixed => vec![as_given, (lf_to_crlf(old), lf_to_crlf(new))],
        LineEnding::Lf => vec![as_given, (crlf_to_lf(old), crlf_to_lf(new))],
        LineEnding::None => vec![as_given],
    };
    let mut tried: Vec<Cow<'a, str>> = Vec::new();
    for (o, n) in variants {
        if tried.contains(&o) {
            continue;
        }
        let positions: Vec<usize> = text.match_indices(&*o).map(|(i, _)| i).collect();
        if !positions.is_empty() {
            return Some((o, n, positions));
        }
        tried.push(o);
    }
    None
}

/// The 1-based line number of each byte offset (offsets ascending).
fn line_numbers(text: &str, positions: &[usize]) -> Vec<u64> {
    let bytes = text.as_bytes();
    let mut line = 1;
    let mut from = 0;
    positions
        .iter()
        .map(|&at| {
            let mut rest = &bytes[from..at];
            while let Some(i) = find_byte(rest, b'\n') {
                line += 1;
                rest = &rest[i + 1..];
            }
            from = at;
            line
        })
        .collect()
}

/// What to tell the caller when `old` is not in `text`: whether it would match ignoring
/// whitespace and line endings, and the lines closest to its first line.
fn miss_hint(text: &str, old: &str) -> String {
    let mut hint = String::new();
    if let Some(line) = loose_match(text, old) {
        hint.push_str(&format!(
            "; it would match at line {line} if whitespace and line endings were ignored — copy \
             the exact text (indentation, spaces, blank lines) from read"
        ));
    }
    let Some(probe) = probe_line(text, old) else { return hint };
    let close = closest_lines(text, probe);
    if close.is_empty() {
        if hint.is_empty() {
            hint.push_str("; no similar line found — read the file again to see its current text");
        }
    } else {
        hint.push_str(&format!("\nlines closest to `{}`:", cut_chars(probe, 120)));
        for (n, line) in close {
            hint.push_str(&format!("\n{n:>6}\t{}", cut_chars(line, 200)));
        }
    }
    hint
}

/// `s` without any whitespace, for comparisons that ignore it.
fn squeeze(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

/// The line where `old` would start matching if whitespace (indentation, blank lines, CR) did
/// not count: its non-blank lines equal consecutive non-blank file lines, the first as a
/// suffix and the last as a prefix of theirs.
fn loose_match(text: &str, old: &str) -> Option<u64> {
    let want: Vec<String> = old.lines().map(squeeze).filter(|l| !l.is_empty()).collect();
    let (first, rest) = want.split_first()?;
    let lines: Vec<(u64, String)> = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i as u64 + 1, squeeze(l)))
        .filter(|(_, l)| !l.is_empty())
        .collect();
    if rest.is_empty() {
        return lines.iter().find(|(_, l)| l.contains(first.as_str())).map(|(n, _)| *n);
    }
    (0..lines.len().saturating_sub(rest.len())).find_map(|i| {
        if !lines[i].1.ends_with(first.as_str()) {
            return None;
        }
        let ok = rest.iter().enumerate().all(|(k, w)| {
            let have = &lines[i + 1 + k].1;
            if k + 1 == rest.len() { have.starts_with(w.as_str()) } else { have == w }
        });
        ok.then_some(lines[i].0)
    })
}

/// The line of `old` to find candidates for: its first non-blank line that the file does not
/// contain (the likely culprit), else its first non-blank line.
fn probe_line<'o>(text: &str, old: &'o str) -> Option<&'o str> {
    let mut lines = old.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.clone().next()?;
    Some(lines.find(|l| !text.contains(l)).unwrap_or(first))
}

/// Up to 3 file lines most similar to `probe` (trimmed), with their numbers.
fn closest_lines<'t>(text: &'t str, probe: &str) -> Vec<(u64, &'t str)> {
    let mut trimmed = Vec::new();
    let mut full = Vec::new();
    for (i, line) in text.lines().enumerate().take(CANDIDATE_SCAN) {
        let t = line.trim();
        if !t.is_empty() {
            trimmed.push(t);
            full.push((i as u64 + 1, line));
        }
    }
    similar::get_close_matches(probe, &trimmed, 3, 0.5)
        .into_iter()
        .filter_map(|m| {
            // The matches are the very slices passed in: find each by address.
            let i = trimmed.iter().position(|t| t.as_ptr() == m.as_ptr() && t.len() == m.len())?;
            Some(full[i])
        })
        .collect()
}

/// A unified diff of the change with 3 lines of context, cut past [`DIFF_CAP`]. CRs of CRLF
/// are left out so that the diff reads the same for CRLF files.
fn short_diff(path: &str, before: &str, after: &str) -> String {
    let before = crlf_to_lf(before);
    let after = crlf_to_lf(after);
    let diff = TextDiff::configure()
        .algorithm(Algorithm::Myers)
        .timeout(Duration::from_secs(2))
        .diff_lines(&*before, &*after);
    let mut out = format!("--- {path}\n+++ {path}\n");
    let mut udiff = diff.unified_diff();
    udiff.context_radius(3);
    for hunk in udiff.iter_hunks() {
        let h = hunk.to_string();
        if out.len() + h.len() <= DIFF_CAP {
            out.push_str(&h);
            continue;
        }
        for line in h.split_inclusive('\n') {
            if out.len() + line.len() > DIFF_CAP {
                break;
            }
            out.push_str(line);
        }
        if !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str("… diff cut at 8 KiB; read the file to see the rest\n");
        break;
    }
    out
}
