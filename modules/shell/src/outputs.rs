//! `bash`'s `outputs`: files under the roots that the result carries back as embedded
//! resources once the command has ended (a report, an image, an archive), for an agent that
//! cannot read them itself. Each is checked by name before anything runs (how many, under the
//! roots) and read after the run through the same resolver and rules as the `read` tool
//! (`Resolver::open_file`: one resolution beneath a pinned root, links that leave it refused,
//! denied, credential and secret files refused, FIFOs and devices refused without being opened
//! for I/O), then read up to what is left of the budget, never more.

use hands_roots::Resolver;
use hands_tool::{Attachment, Body};
use schemars::JsonSchema;
use serde::Serialize;
use std::io::Read;
use std::path::{Path, PathBuf};

/// At most this many files per call.
pub const MAX_FILES: usize = 8;

/// At most this many bytes of files per call, all of them together.
pub const MAX_BYTES: u64 = 20 * 1024 * 1024;

/// What became of one file `outputs` asked for.
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq, Eq)]
pub struct OutputFile {
    /// The path as asked.
    pub path: String,
    /// It comes back after the text, as an embedded resource with this entry's `uri`.
    pub returned: bool,
    /// `file://` and the real path read: the embedded resource's URI.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
    /// Its size in bytes, when it was seen.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// Its MIME type, from its name (or its bytes when the name says nothing).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mime: Option<String>,
    /// Why it was not returned, and what to do.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// Why `bash`'s `outputs` is refused before anything runs ([`check`]); the text says what to
/// change. tools-shell refuses the call with it (the layer `arguments`).
#[derive(Debug, thiserror::Error)]
pub enum OutputsError {
    /// It names this many files, more than [`MAX_FILES`].
    #[error(
        "`outputs` names {0} files, more than the {MAX_FILES} one call returns; nothing ran — \
         ask for at most {MAX_FILES} (pack more into one archive, or read the rest in a later \
         call)"
    )]
    TooMany(usize),
    /// The entry at this index is empty.
    #[error("`outputs[{0}]` is empty; nothing ran — give a file's path")]
    Empty(usize),
    /// This path is named twice.
    #[error("`outputs` names `{}` twice; nothing ran — name each file once", hands_roots::shown(.0))]
    Twice(String),
    /// A relative `path` cannot be joined to the working folder `base`, which is not UTF-8.
    #[error(
        "the working folder {} is not valid UTF-8, so `{}` cannot be placed under it; give an \
         absolute path",
        base.display(),
        hands_roots::shown(path)
    )]
    NotUtf8 { base: PathBuf, path: String },
    /// The entry at `index` is not under the roots (or the resolver refuses it by name).
    #[error("`outputs[{index}]`: {source}; nothing ran")]
    Path { index: usize, source: hands_roots::PathError },
}

/// The check before anything runs: at most [`MAX_FILES`] paths, none empty or given twice,
/// each under the roots by name (relative ones to the command's working folder `cwd`, as given:
/// the first root when it is absent). Returns why the call is refused.
pub fn check(resolver: &Resolver, cwd: Option<&str>, paths: &[String]) -> Result<(), OutputsError> {
    if paths.len() > MAX_FILES {
        return Err(OutputsError::TooMany(paths.len()));
    }
    let base = match resolver.locate(cwd.unwrap_or_default()) {
        Ok(l) => l.abs,
        // A bad `cwd` is refused by the run itself, with its own message.
        Err(_) => return Ok(()),
    };
    for (i, p) in paths.iter().enumerate() {
        if p.is_empty() {
            return Err(OutputsError::Empty(i));
        }
        if paths[..i].contains(p) {
            return Err(OutputsError::Twice(p.clone()));
        }
        let joined = joined(&base, p)?;
        if let Err(source) = resolver.locate(&joined) {
            return Err(OutputsError::Path { index: i, source });
        }
    }
    Ok(())
}

/// `p` as the resolver takes it: absolute as it is, relative under `base` (a real folder).
fn joined(base: &Path, p: &str) -> Result<String, OutputsError> {
    let abs = if Path::new(p).is_absolute() { PathBuf::from(p) } else { base.join(p) };
    abs.into_os_string()
        .into_string()
        .map_err(|_| OutputsError::NotUtf8 { base: base.to_path_buf(), path: p.to_string() })
}

/// Reads the files `paths` names after the command ran in `cwd` (its real path), in order,
/// each through the resolver, within [`MAX_BYTES`] in all and, when `wire` is set, within
/// `wire` bytes as the answer encodes them (base64, escaped text): the largest answer the
/// daemon's transport delivers. A file that cannot be returned is reported, never fatal.
pub fn collect(
    resolver: &Resolver,
    cwd: &Path,
    paths: &[String],
    wire: Option<u64>,
) -> (Vec<OutputFile>, Vec<Attachment>) {
    let (mut left, mut wire_left) = (MAX_BYTES, wire);
    let mut report = Vec::new();
    let mut files = Vec::new();
    for p in paths.iter().take(MAX_FILES) {
        let mut entry = OutputFile {
            path: p.clone(),
            returned: false,
            uri: None,
            bytes: None,
            mime: None,
            why: None,
        };
        match read_one(resolver, cwd, p, left) {
            Err((why, size)) => {
                entry.bytes = size;
                entry.why = Some(why);
            }
            Ok((abs, bytes)) => {
                let size = bytes.len() as u64;
                let (mime, body) = typed(&abs, bytes);
                entry.bytes = Some(size);
                entry.uri = Some(file_uri(&abs));
                entry.mime = Some(mime.clone());
                let encoded = encoded_len(&body);
                if wire_left.is_some_and(|w| encoded > w) {
                    entry.why = Some(format!(
                        "{size} bytes ({encoded} as the answer carries them) would make the \
                         answer larger than this daemon's transport delivers (a runner's link \
                         carries {} MiB); ask for it alone, or compress it",
                        wire.unwrap_or_default() >> 20
                    ));
                } else {
                    left -= size;
                    wire_left = wire_left.map(|w| w - encoded);
                    entry.returned = true;
                    files.push(Attachment { uri: file_uri(&abs), mime, body });
                }
            }
        }
        report.push(entry);
    }
    (report, files)
}

/// Every file of `paths` reported as not returned, because reading them failed (`why`).
pub fn failed(paths: &[String], why: &str) -> Vec<OutputFile> {
    let why = format!("not returned: reading the outputs failed ({why}); try again");
    paths
        .iter()
        .map(|p| OutputFile {
            path: p.clone(),
            returned: false,
            uri: None,
            bytes: None,
            mime: None,
            why: Some(why.clone()),
        })
        .collect()
}

/// One file read: its real path and bytes, or why not (with its size when it was seen).
fn read_one(
    resolver: &Resolver,
    cwd: &Path,
    p: &str,
    left: u64,
) -> Result<(PathBuf, Vec<u8>), (String, Option<u64>)> {
    let path = joined(cwd, p).map_err(|why| (why.to_string(), None))?;
    let opened = resolver.open_file(&path).map_err(|e| (format!("not returned: {e}"), None))?;
    let size = u64::try_from(opened.stat.st_size).unwrap_or(0);
    let over = |n: u64| {
        format!(
            "not returned: `{}` is {n} bytes, more than the {left} bytes left of the {} MiB \
             all outputs of one call share; ask for it alone or compress it, or read it with \
             `read`",
            hands_roots::shown(p),
            MAX_BYTES >> 20
        )
    };
    if size > left {
        return Err((over(size), Some(size)));
    }
    // The file may grow while it is read: never more than what is left, plus one byte to see it.
    let mut bytes = Vec::with_capacity(size as usize);
    let read = (&opened.file).take(left + 1).read_to_end(&mut bytes);
    if let Err(e) = read {
        return Err((
            format!("not returned: reading `{}` failed: {e}", opened.abs.display()),
            None,
        ));
    }
    if bytes.len() as u64 > left {
        let why = format!("{} (it grew while it was read)", over(bytes.len() as u64));
        return Err((why, Some(bytes.len() as u64)));
    }
    Ok((opened.abs, bytes))
}

/// The MIME type of the file at `abs` and how the answer carries its bytes: as text when the
/// type is textual and the bytes are UTF-8, else as base64.
fn typed(abs: &Path, bytes: Vec<u8>) -> (String, Body) {
    let ext = abs.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
    let named = ext.as_deref().and_then(mime_of);
    let mime = match named {
        Some(m) => m.to_string(),
        None if !bytes.contains(&0) && std::str::from_utf8(&bytes).is_ok() => "text/plain".into(),
        None => "application/octet-stream".into(),
    };
    if !is_textual(&mime) {
        return (mime, Body::Bytes(bytes));
    }
    match String::from_utf8(bytes) {
        Ok(text) => (mime, Body::Text(text)),
        Err(e) => (mime, Body::Bytes(e.into_bytes())),
    }
}

/// Whether a MIME type is text a client can show as it is.
fn is_textual(mime: &str) -> bool {
    mime.starts_with("text/")
        || mime.ends_with("+xml")
        || mime.ends_with("+json")
        || matches!(
            mime,
            "application/json"
                | "application/xml"
                | "application/javascript"
                | "application/toml"
                | "application/yaml"
                | "application/x-sh"
                | "application/sql"
        )
}

/// The MIME type of a lowercase file extension, for the kinds a build or a test run leaves.
fn mime_of(ext: &str) -> Option<&'static str> {
    Some(match ext {
        "txt" | "log" | "out" | "text" => "text/plain",
        "md" | "markdown" => "text/markdown",
        "html" | "htm" => "text/html",
        "css" => "text/css",
        "csv" => "text/csv",
        "tsv" => "text/tab-separated-values",
        "diff" | "patch" => "text/x-diff",
        "rs" | "py" | "go" | "c" | "h" | "cpp" | "hpp" | "java" | "kt" | "rb" | "ts" | "tsx"
        | "jsx" | "lock" | "ini" | "cfg" | "conf" => "text/plain",
        "js" | "mjs" => "application/javascript",
        "json" | "jsonl" | "ndjson" | "sarif" => "application/json",
        "xml" | "junit" => "application/xml",
        "svg" => "image/svg+xml",
        "toml" => "application/toml",
        "yaml" | "yml" => "application/yaml",
        "sh" => "application/x-sh",
        "sql" => "application/sql",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "bmp" => "image/bmp",
        "ico" => "image/vnd.microsoft.icon",
        "pdf" => "application/pdf",
        "zip" => "application/zip",
        "gz" | "tgz" => "application/gzip",
        "tar" => "application/x-tar",
        "xz" => "application/x-xz",
        "zst" => "application/zstd",
        "bz2" => "application/x-bzip2",
        "wasm" => "application/wasm",
        _ => return None,
    })
}

/// Bytes the answer spends on `body`: base64 for bytes, JSON-escaped text for text.
fn encoded_len(body: &Body) -> u64 {
    match body {
        Body::Bytes(b) => (b.len() as u64).div_ceil(3) * 4,
        Body::Text(t) => t
            .bytes()
            .map(|b| match b {
                b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 2,
                0..0x20 => 6,
                _ => 1,
            })
            .sum(),
    }
}

/// What a path in a `file://` URI keeps as it is: the unreserved characters (RFC 3986) and `/`.
const KEPT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b'/');

/// `file://` and `abs`, every byte but unreserved ones and `/` percent-encoded.
fn file_uri(abs: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    format!("file://{}", percent_encoding::percent_encode(abs.as_os_str().as_bytes(), KEPT))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_text_only_when_its_type_is_and_it_is_utf8() {
        let (m, b) = typed(Path::new("/r/report.json"), b"{\"a\":1}".to_vec());
        assert_eq!((m.as_str(), b), ("application/json", Body::Text("{\"a\":1}".into())));
        let png = b"\x89PNG\r\n\x1a\n\0\0".to_vec();
        let (m, b) = typed(Path::new("/r/shot.PNG"), png.clone());
        assert_eq!((m.as_str(), b), ("image/png", Body::Bytes(png)));
        let (m, b) = typed(Path::new("/r/Makefile"), b"all:\n".to_vec());
        assert_eq!((m.as_str(), b), ("text/plain", Body::Text("all:\n".into())));
        let (m, b) = typed(Path::new("/r/blob"), vec![0, 1, 2]);
        assert_eq!((m.as_str(), b), ("application/octet-stream", Body::Bytes(vec![0, 1, 2])));
        let (m, b) = typed(Path::new("/r/latin1.txt"), vec![b'a', 0xe9]);
        assert_eq!((m.as_str(), b), ("text/plain", Body::Bytes(vec![b'a', 0xe9])));
    }

    #[test]
    fn the_answer_size_counts_base64_and_escapes() {
        assert_eq!(encoded_len(&Body::Bytes(vec![0; 4])), 8);
        assert_eq!(encoded_len(&Body::Text("a\"\n\u{1}".into())), 1 + 2 + 2 + 6);
    }

    /// Over a transport with a cap (a runner's link), a file that would overflow the answer is
    /// refused while a smaller one after it still comes back; so is one over the budget.
    #[test]
    fn what_the_answer_cannot_carry_is_refused_and_the_rest_comes_back() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::write(root.join("big.bin"), vec![7u8; 3000]).unwrap();
        std::fs::write(root.join("small.txt"), "small").unwrap();
        let spec = hands_roots::RootSpec { path: root.clone(), writable: true };
        let resolver = Resolver::new(&[spec], hands_roots::Policy::rules_only(&[])).unwrap();
        let paths = ["big.bin".to_string(), "small.txt".to_string()];
        let (report, files) = collect(&resolver, &root, &paths, Some(1000));
        assert!(!report[0].returned && report[0].why.as_ref().unwrap().contains("transport"));
        assert!(report[1].returned, "{report:?}");
        assert_eq!(files.len(), 1);
        assert_eq!(files[0].body, Body::Text("small".into()));
        let (report, files) = collect(&resolver, &root, &paths, None);
        assert!(report.iter().all(|r| r.returned) && files.len() == 2, "{report:?}");
        assert!(check(&resolver, None, &paths).is_ok());
        let nine: Vec<String> = (0..9).map(|i| format!("{i}")).collect();
        let e = check(&resolver, None, &nine).unwrap_err();
        assert!(matches!(e, OutputsError::TooMany(9)), "{e:?}");
        assert!(e.to_string().contains("more than the 8"), "{e}");
    }

    #[test]
    fn uris_percent_encode_what_a_uri_cannot_hold() {
        assert_eq!(file_uri(Path::new("/w/a b/r%#.txt")), "file:///w/a%20b/r%25%23.txt");
    }
}
