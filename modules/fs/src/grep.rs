//! `grep`: the lines matching a regex in a file or under a folder, by a parallel walk
//! (`crate::parallel_walk`) with ripgrep's own crates (`grep-regex`, `grep-searcher`), never following a
//! link and never searching what the policy hides.

use crate::parallel_walk::{
    TIMED_OUT, WALK_BUDGET, Walked, check_len, compile_glob, display, display_prefix, shown,
    skipped_of, skipped_text, walked, walker,
};
use crate::{FsError, ToolText};
use globset::GlobMatcher;
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{
    BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkContextKind, SinkMatch,
};
use hands_roots::{LastDir, PathError, Resolver, lock};
use ignore::WalkState;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, Read};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

const DEFAULT_GREP_LIMIT: u64 = 100;
/// Lines are cut to this many characters in grep output.
const LINE_CHARS: usize = 500;
const CUT_MARKER: &str = "… [cut]";
/// The most line text (with its paths) one content-mode `grep` keeps, as for `read`: with
/// context lines a modest `limit` could otherwise return megabytes. Past it the search stops
/// and says `truncated`.
const CONTENT_CAP: u64 = crate::read::OUTPUT_CAP as u64;
/// Most context lines on either side of a match.
const MAX_CONTEXT: u64 = 100;
/// A line longer than this makes the searcher give up on the file instead of buffering it.
const HEAP_LIMIT: usize = 64 << 20;

/// How `grep` reports what it found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum GrepMode {
    /// Matching lines with line numbers and context.
    #[default]
    Content,
    /// Only the paths of files that match.
    Files,
    /// Matching lines counted per file.
    Count,
}

/// Parameters of `grep`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GrepParams {
    /// Regular expression (Rust regex syntax, like ripgrep), or a plain string with `literal`.
    /// Matches within one line.
    pub pattern: String,
    /// Treat `pattern` as a plain string, not a regex. Default false.
    pub literal: Option<bool>,
    /// Folder or file to search: absolute, or relative to the first root. Default: the first
    /// root.
    pub path: Option<String>,
    /// Only search files whose path (relative to `path`) or name matches this glob, e.g. `*.rs`
    /// or `src/**/*.ts`.
    pub glob: Option<String>,
    /// Match case-insensitively. Default false.
    pub case_insensitive: Option<bool>,
    /// Lines of context before and after each match (content mode, at most 100). Default 0.
    pub context: Option<u64>,
    /// Lines of context before each match; overrides `context`.
    pub before: Option<u64>,
    /// Lines of context after each match; overrides `context`.
    pub after: Option<u64>,
    /// Most results (default 100): matching lines in content and count modes, files in files
    /// mode. The search stops when it is reached and sets `truncated`; in content mode also
    /// once 256 KiB of lines (context included) are kept.
    pub limit: Option<u64>,
    /// `content` (matching lines, the default), `files` (paths of matching files) or `count`
    /// (matching lines per file).
    pub output: Option<GrepMode>,
    /// Search hidden (dot) files and folders. Default false.
    pub hidden: Option<bool>,
    /// Search files that .gitignore, .ignore or .git/info/exclude exclude. Default false.
    pub ignored: Option<bool>,
}

/// Whether a line of grep output matched or is context around a match.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum LineKind {
    Match,
    Context,
}

/// One line of grep content output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct GrepLine {
    /// The file, prefixed with `path` as given.
    pub path: String,
    /// 1-based line number.
    pub line: u64,
    /// The line without its terminator, cut at 500 characters with `… [cut]`.
    pub text: String,
    /// `match` or `context`.
    pub kind: LineKind,
}

/// A file with matches (files and count modes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct FileCount {
    /// The file, prefixed with `path` as given.
    pub path: String,
    /// Matching lines in the file (count mode only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
}

/// What `grep` returns.
#[derive(Debug, Serialize, JsonSchema)]
pub struct GrepOutput {
    /// The output mode used.
    pub mode: GrepMode,
    /// The real absolute path of the folder or file searched.
    pub base: String,
    /// Content mode: matching and context lines, sorted by path and line.
    pub matches: Vec<GrepLine>,
    /// Files and count modes: the files with matches, sorted by path.
    pub files: Vec<FileCount>,
    /// Matching lines reported (in files mode, matching files).
    pub total_matches: u64,
    /// Files searched.
    pub files_searched: u64,
    /// Whether `limit` (or the time bound) stopped the search before it covered everything.
    pub truncated: bool,
    /// Ignore files that were not read: not regular files (a FIFO, socket, device or symlink)
    /// or over 4 MiB, each with what it was. Their rules did not apply. Absent when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<String>,
    /// Whether the walk stopped at its time bound (30 s) before covering everything; `truncated`
    /// is then set too. Absent when it did not.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub timed_out: bool,
    /// Context lines were requested, so `--` separates groups in the text form.
    #[serde(skip)]
    pub(crate) grouped: bool,
}

/// Lines matching `p.pattern` under `p.path` (a folder, walked in parallel, or one file).
pub fn grep(resolver: &Resolver, p: GrepParams) -> Result<GrepOutput, FsError> {
    grep_within(resolver, p, WALK_BUDGET)
}

/// `grep` with the walk (and each file's search) bounded by `budget`.
pub(crate) fn grep_within(
    resolver: &Resolver,
    p: GrepParams,
    budget: Duration,
) -> Result<GrepOutput, FsError> {
    if p.pattern.is_empty() {
        return Err(FsError::Invalid("pattern is empty; give a regex or a string".into()));
    }
    check_len(&p.pattern, "pattern")?;
    let mode = p.output.unwrap_or_default();
    let limit = p.limit.unwrap_or(DEFAULT_GREP_LIMIT);
    if limit == 0 {
        return Err(FsError::Invalid("limit must be at least 1".into()));
    }
    let (before, after) = match mode {
        GrepMode::Content => {
            (p.before.or(p.context).unwrap_or(0), p.after.or(p.context).unwrap_or(0))
        }
        GrepMode::Files | GrepMode::Count => (0, 0),
    };
    if before > MAX_CONTEXT || after > MAX_CONTEXT {
        return Err(FsError::Invalid(format!(
            "context lines are limited to {MAX_CONTEXT} on each side; ask for fewer"
        )));
    }
    let matcher = RegexMatcherBuilder::new()
        .case_insensitive(p.case_insensitive.unwrap_or(false))
        .fixed_strings(p.literal.unwrap_or(false))
        .line_terminator(Some(b'\n'))
        .build(&p.pattern)
        .map_err(|e| {
            FsError::Invalid(format!(
                "invalid pattern `{}`: {}",
                hands_roots::shown(&p.pattern),
                hands_roots::shown(&e.to_string())
            ))
        })?;
    let file_filter = p.glob.as_deref().map(|g| compile_glob(g, "glob")).transpose()?;
    let mut builder = SearcherBuilder::new();
    builder
        .line_number(true)
        .before_context(usize::try_from(before).unwrap_or(0))
        .after_context(usize::try_from(after).unwrap_or(0))
        .binary_detection(BinaryDetection::quit(b'\0'))
        .heap_limit(Some(HEAP_LIMIT));

    let given = p.path.as_deref().unwrap_or("");
    let prefix = display_prefix(given);
    let shared = GrepShared {
        matcher,
        mode,
        limit,
        counted: AtomicU64::new(0),
        bytes: AtomicU64::new(0),
        truncated: AtomicBool::new(false),
        files_searched: AtomicU64::new(0),
        hits: Mutex::new(Vec::new()),
        deadline: Instant::now() + budget,
        timed_out: AtomicBool::new(false),
    };

    let (base, skipped) = match resolver.open_dir(given) {
        Ok(dir) => {
            let base = dir.abs;
            let skipped =
                walk_grep(resolver, &shared, &builder, &base, &prefix, file_filter.as_ref(), &p);
            (base, skipped)
        }
        Err(PathError::NotADirectory { .. }) => {
            let opened = resolver.open_file(given)?;
            shared.search(&mut builder.build(), &opened.file, shown(&prefix, Path::new("")));
            (opened.abs, Vec::new())
        }
        Err(e) => return Err(e.into()),
    };

    let timed_out = shared.timed_out.load(Ordering::Relaxed);
    let truncated = shared.truncated.load(Ordering::Relaxed) || timed_out;
    let files_searched = shared.files_searched.load(Ordering::Relaxed);
    let mut hits = shared.hits.into_inner().unwrap_or_else(PoisonError::into_inner);
    hits.sort_unstable_by(|a, b| a.path.cmp(&b.path));
    let total_matches = hits.iter().map(|h| h.count).sum();
    let (matches, files) = match mode {
        GrepMode::Content => (hits.into_iter().flat_map(|h| h.lines).collect(), Vec::new()),
        GrepMode::Files => (
            Vec::new(),
            hits.into_iter().map(|h| FileCount { path: h.path, count: None }).collect(),
        ),
        GrepMode::Count => (
            Vec::new(),
            hits.into_iter().map(|h| FileCount { path: h.path, count: Some(h.count) }).collect(),
        ),
    };
    Ok(GrepOutput {
        mode,
        base: display(&base),
        matches,
        files,
        total_matches,
        files_searched,
        truncated,
        skipped,
        timed_out,
        grouped: before > 0 || after > 0,
    })
}

fn walk_grep(
    resolver: &Resolver,
    shared: &GrepShared,
    builder: &SearcherBuilder,
    base: &Path,
    prefix: &Path,
    filter: Option<&GlobMatcher>,
    p: &GrepParams,
) -> Vec<String> {
    let hider = resolver.hider(base);
    let (walker, rules) =
        walker(&hider, base, p.hidden.unwrap_or(false), p.ignored.unwrap_or(false));
    walker.run(|| {
        let mut searcher = builder.build();
        // The folder of the last file opened (`Resolver::open_walked_in`).
        let mut last = LastDir::default();
        Box::new(move |entry| {
            if shared.limit_reached() {
                // Something was still left to visit when the limit stopped the search.
                shared.truncated.store(true, Ordering::Relaxed);
                return WalkState::Quit;
            }
            let Ok(entry) = entry else { return WalkState::Continue };
            // Only regular files below the base are searched: never a link (`walked`).
            let Walked::File(rel) = walked(&entry, base) else { return WalkState::Continue };
            let path = entry.path();
            if let Some(f) = filter
                && !f.is_match(rel)
                && !f.is_match(entry.file_name())
            {
                return WalkState::Continue;
            }
            // The resolver opens the file in its folder as resolved beneath its root (once per
            // folder) and refuses denied, secret and non-regular files; such files are simply
            // not searched.
            let Ok(opened) = resolver.open_walked_in(&mut last, path) else {
                return WalkState::Continue;
            };
            shared.search(&mut searcher, &opened.file, shown(prefix, rel));
            WalkState::Continue
        })
    });
    skipped_of(rules.as_ref())
}

/// State shared by the threads of one grep.
struct GrepShared {
    matcher: RegexMatcher,
    mode: GrepMode,
    limit: u64,
    /// Matching lines (files in files mode) accepted or offered so far, across threads.
    counted: AtomicU64,
    /// Bytes of line text kept so far (content mode), against [`CONTENT_CAP`].
    bytes: AtomicU64,
    truncated: AtomicBool,
    files_searched: AtomicU64,
    hits: Mutex<Vec<FileHits>>,
    /// When the search stops ([`WALK_BUDGET`]), and whether it did.
    deadline: Instant,
    timed_out: AtomicBool,
}

/// What one file contributed.
struct FileHits {
    path: String,
    lines: Vec<GrepLine>,
    count: u64,
}

impl GrepShared {
    /// Whether the search should stop: the limit or the content cap reached, or the time
    /// bound passed (then `timed_out` says so).
    fn limit_reached(&self) -> bool {
        if self.counted.load(Ordering::Relaxed) >= self.limit || self.full() {
            return true;
        }
        if Instant::now() >= self.deadline {
            self.timed_out.store(true, Ordering::Relaxed);
            return true;
        }
        false
    }

    /// Whether the kept lines have reached [`CONTENT_CAP`].
    fn full(&self) -> bool {
        self.bytes.load(Ordering::Relaxed) >= CONTENT_CAP
    }

    /// Searches one opened file; a read error keeps what was found before it.
    fn search(&self, searcher: &mut Searcher, file: &File, path: String) {
        let mut sink = FileSink { shared: self, path, lines: Vec::new(), count: 0, pending: 0 };
        let reader = StopReader { file, shared: self };
        let _ = searcher.search_reader(&self.matcher, reader, &mut sink);
        self.files_searched.fetch_add(1, Ordering::Relaxed);
        if sink.count > 0 {
            let FileSink { path, lines, count, .. } = sink;
            lock(&self.hits).push(FileHits { path, lines, count });
        }
    }
}

/// Reads a file until the limit is reached anywhere, then reports end of file, so that a long
/// file without matches stops as soon as another thread fills the limit.
struct StopReader<'a> {
    file: &'a File,
    shared: &'a GrepShared,
}

impl Read for StopReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut file: &File = self.file;
        let n = file.read(buf)?;
        if n > 0 && self.shared.limit_reached() {
            self.shared.truncated.store(true, Ordering::Relaxed);
            return Ok(0);
        }
        Ok(n)
    }
}

/// Collects one file's matches, counting them against the shared limit.
struct FileSink<'a> {
    shared: &'a GrepShared,
    path: String,
    lines: Vec<GrepLine>,
    count: u64,
    /// Before-context lines at the end of `lines`, dropped if their match is over the limit.
    pending: usize,
}

impl FileSink<'_> {
    fn push(&mut self, line: Option<u64>, bytes: &[u8], kind: LineKind) {
        let text = cut_line(bytes);
        let size = (text.len() + self.path.len()) as u64;
        self.shared.bytes.fetch_add(size, Ordering::Relaxed);
        self.lines.push(GrepLine { path: self.path.clone(), line: line.unwrap_or(0), text, kind });
    }
}

impl Sink for FileSink<'_> {
    type Error = io::Error;

    fn matched(&mut self, _: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, io::Error> {
        let shared = self.shared;
        if shared.full() || shared.counted.fetch_add(1, Ordering::Relaxed) >= shared.limit {
            shared.truncated.store(true, Ordering::Relaxed);
            self.lines.truncate(self.lines.len().saturating_sub(self.pending));
            return Ok(false);
        }
        self.count += 1;
        self.pending = 0;
        match shared.mode {
            GrepMode::Content => self.push(mat.line_number(), mat.bytes(), LineKind::Match),
            // One match is enough to list the file.
            GrepMode::Files => return Ok(false),
            GrepMode::Count => {}
        }
        Ok(true)
    }

    fn context(&mut self, _: &Searcher, ctx: &SinkContext<'_>) -> Result<bool, io::Error> {
        if self.shared.mode == GrepMode::Content {
            self.push(ctx.line_number(), ctx.bytes(), LineKind::Context);
            self.pending = match ctx.kind() {
                SinkContextKind::Before => self.pending + 1,
                SinkContextKind::After | SinkContextKind::Other => 0,
            };
        }
        Ok(true)
    }
}

/// The line without its terminator, lossily decoded, cut at `LINE_CHARS` characters.
fn cut_line(bytes: &[u8]) -> String {
    let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
    // Decode no more than the bytes the kept characters can occupy, ending on a char boundary.
    let max_bytes = LINE_CHARS * 4;
    let mut end = bytes.len().min(max_bytes);
    while end > 0 && end < bytes.len() && bytes[end] & 0xC0 == 0x80 {
        end -= 1;
    }
    let text = String::from_utf8_lossy(&bytes[..end]);
    match text.char_indices().nth(LINE_CHARS) {
        Some((at, _)) => format!("{}{CUT_MARKER}", &text[..at]),
        None if end < bytes.len() => format!("{text}{CUT_MARKER}"),
        None => text.into_owned(),
    }
}

impl ToolText for GrepOutput {
    fn text(&self) -> String {
        let mut out = String::new();
        match self.mode {
            GrepMode::Content => {
                let mut prev: Option<(&str, u64)> = None;
                for l in &self.matches {
                    if self.grouped
                        && let Some((path, line)) = prev
                        && (path != l.path || line + 1 != l.line)
                    {
                        out.push_str("--\n");
                    }
                    let sep = if l.kind == LineKind::Match { ':' } else { '-' };
                    let _ = writeln!(out, "{}{sep}{}{sep}{}", l.path, l.line, l.text);
                    prev = Some((&l.path, l.line));
                }
            }
            GrepMode::Files => {
                for f in &self.files {
                    let _ = writeln!(out, "{}", f.path);
                }
            }
            GrepMode::Count => {
                for f in &self.files {
                    let _ = writeln!(out, "{}:{}", f.path, f.count.unwrap_or(0));
                }
            }
        }
        if self.total_matches == 0 {
            let searched = hands_tool::counted(self.files_searched, "file", "files");
            let _ = writeln!(out, "no matches ({searched} searched)");
        }
        if self.timed_out {
            let _ = writeln!(out, "{TIMED_OUT}");
        } else if self.truncated {
            let what = if self.mode == GrepMode::Files { "files" } else { "matches" };
            let _ = writeln!(
                out,
                "[truncated: stopped at {} {what}; narrow the search or raise limit]",
                self.total_matches
            );
        }
        skipped_text(&mut out, &self.skipped);
        out
    }
}
