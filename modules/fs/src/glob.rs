//! `glob`: the files under a folder whose path matches a pattern, by a parallel walk
//! (`crate::parallel_walk`) with ripgrep's `globset`, never following a link and never surfacing what
//! the policy hides; the walk of a settled tree is kept and reused (`walk_cache`).

use crate::parallel_walk::{
    TIMED_OUT, WALK_BUDGET, Walked, compile_glob, display, display_prefix, shown, skipped_of,
    skipped_text, walked, walker,
};
use crate::{FsError, ToolText, walk_cache};
use globset::GlobMatcher;
use hands_roots::{Hider, LastDir, Resolver, lock};
use ignore::WalkState;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

const DEFAULT_GLOB_LIMIT: u64 = 1000;
/// A glob walk stops collecting at this many times `limit` (and at least `GLOB_MIN_CAP`), so a
/// pattern that matches a whole disk does not hold every path in memory to sort it.
const GLOB_CAP_FACTOR: u64 = 100;
const GLOB_MIN_CAP: u64 = 10_000;

/// Parameters of `glob`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GlobParams {
    /// Glob matched against paths relative to `path`, e.g. `**/*.rs` (any depth, including the
    /// top), `src/*.ts`, `*.{md,txt}`; `*` does not cross `/`. A pattern starting with `/` is
    /// matched against absolute paths.
    pub pattern: String,
    /// Folder to search: absolute, or relative to the first root. Default: the first root.
    pub path: Option<String>,
    /// Most paths to return (default 1000); `truncated` says when there were more.
    pub limit: Option<u64>,
    /// Include hidden (dot) files and folders. Default false.
    pub hidden: Option<bool>,
    /// Include files that .gitignore, .ignore or .git/info/exclude exclude. Default false.
    pub ignored: Option<bool>,
}

/// What `glob` returns.
#[derive(Debug, Serialize, JsonSchema)]
pub struct GlobOutput {
    /// The real absolute path of the folder searched.
    pub base: String,
    /// Matching regular files, sorted; prefixed with `path` as given (like ripgrep), so each
    /// can be passed to `read` as it is.
    pub files: Vec<String>,
    /// Number of paths in `files`.
    pub count: u64,
    /// Matching files found (a lower bound when the walk stopped early).
    pub total: u64,
    /// Whether `limit` cut the list (or the time bound stopped the walk).
    pub truncated: bool,
    /// Ignore files that were not read: not regular files (a FIFO, socket, device or symlink)
    /// or over 4 MiB, each with what it was. Their rules did not apply. Absent when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<String>,
    /// Whether the walk stopped at its time bound (30 s) before covering everything; `truncated`
    /// is then set too. Absent when it did not.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub timed_out: bool,
}

/// Files under `p.path` whose path relative to it matches `p.pattern`, sorted. The walk of a
/// settled tree is kept and answers later calls while proved unchanged (`walk_cache`).
pub fn glob(resolver: &Resolver, p: GlobParams) -> Result<GlobOutput, FsError> {
    glob_within(resolver, p, WALK_BUDGET)
}

/// `glob` with the walk bounded by `budget`.
pub(crate) fn glob_within(
    resolver: &Resolver,
    p: GlobParams,
    budget: Duration,
) -> Result<GlobOutput, FsError> {
    let limit = p.limit.unwrap_or(DEFAULT_GLOB_LIMIT);
    let given = p.path.as_deref().unwrap_or("");
    let absolute = p.pattern.starts_with('/');
    let pattern = p.pattern.strip_prefix("./").unwrap_or(&p.pattern);
    let matcher = compile_glob(pattern, "pattern")?;
    let dir = resolver.open_dir(given)?;
    let base = dir.abs;
    let prefix = display_prefix(given);
    let cap = limit.saturating_mul(GLOB_CAP_FACTOR).max(GLOB_MIN_CAP);

    let hider = resolver.hider(&base);
    let (hidden, ignored) = (p.hidden.unwrap_or(false), p.ignored.unwrap_or(false));
    let last = LastDir::default();
    let pick =
        Pick { matcher, absolute, base: &base, prefix: &prefix, hider: &hider, resolver, last };
    let key =
        walk_cache::Key { base: base.clone(), hidden, ignored, denied: hider.near().to_vec() };
    let picker = || {
        let mut mine = pick.clone();
        move |rel: &Path| mine.cached(rel)
    };
    let cached = walk_cache::answer(&key, picker, cap);
    let (mut files, overflow, skipped, timed_out) = match cached {
        Some((files, overflow)) => (files, overflow, Vec::new(), false),
        None => {
            let walk = GlobWalk {
                pick: &pick,
                cap,
                found: AtomicU64::new(0),
                overflow: AtomicBool::new(false),
                hits: Mutex::new(Vec::new()),
                recorder: walk_cache::Recorder::new(key),
                deadline: Instant::now() + budget,
                timed_out: AtomicBool::new(false),
            };
            let (walker, rules) = walker(&hider, &base, hidden, ignored);
            walker.visit(&mut &walk);
            let skipped = skipped_of(rules.as_ref());
            if let Some(recorder) = walk.recorder
                && skipped.is_empty()
            {
                recorder.keep();
            }
            let hits = walk.hits.into_inner().unwrap_or_else(PoisonError::into_inner);
            (hits, walk.overflow.into_inner(), skipped, walk.timed_out.into_inner())
        }
    };
    files.sort_unstable();
    let total = files.len() as u64;
    let truncated = total > limit || overflow || timed_out;
    files.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
    Ok(GlobOutput {
        base: display(&base),
        count: files.len() as u64,
        files,
        total,
        truncated,
        skipped,
        timed_out,
    })
}

/// What `glob` keeps of a file: the pattern must match its path (relative to the base, or
/// absolute for a pattern starting with `/`) and the policy must not hide it.
#[derive(Clone)]
struct Pick<'a> {
    /// Each thread clones its own: threads sharing one regex contend for its scratch space.
    matcher: GlobMatcher,
    absolute: bool,
    base: &'a Path,
    prefix: &'a Path,
    hider: &'a Hider<'a>,
    resolver: &'a Resolver,
    /// The folder of the last file checked ([`Resolver::entry_ino_in`]); a clone (another
    /// thread's picker) starts without one.
    last: LastDir,
}

impl Pick<'_> {
    /// The file as `glob` shows it, if kept; `path` is absolute, `rel` below the base.
    /// `ino`: the inode the walk read, when it read one.
    fn pick(&mut self, path: &Path, rel: &Path, ino: Option<u64>) -> Option<String> {
        let subject = if self.absolute { path } else { rel };
        if !self.matcher.is_match(subject) {
            return None;
        }
        self.unless_hidden(path, rel, ino)
    }

    /// `pick` for a file of a cached walk, known by its path below the base: the absolute path
    /// costs an allocation, made only when the pattern needs it or the file matched.
    fn cached(&mut self, rel: &Path) -> Option<String> {
        if self.absolute {
            return self.pick(&self.base.join(rel), rel, None);
        }
        if !self.matcher.is_match(rel) {
            return None;
        }
        self.unless_hidden(&self.base.join(rel), rel, None)
    }

    /// The matching file as `glob` shows it, unless the policy hides it or it is not the
    /// entry beneath the root the walk read (the walk reads by path: see
    /// [`Resolver::entry_ino_in`]).
    fn unless_hidden(&mut self, path: &Path, rel: &Path, ino: Option<u64>) -> Option<String> {
        let (dir, name) = (path.parent().unwrap_or(path), path.file_name().unwrap_or_default());
        if self.hider.hides(dir, name, None, true) {
            return None;
        }
        let now = self.resolver.entry_ino_in(&mut self.last, path)?;
        if ino.is_some_and(|read| read != now) {
            return None;
        }
        Some(shown(self.prefix, rel))
    }
}

/// One `glob` walk: what its threads share.
struct GlobWalk<'a> {
    pick: &'a Pick<'a>,
    cap: u64,
    found: AtomicU64,
    overflow: AtomicBool,
    hits: Mutex<Vec<String>>,
    /// Records the walk for the cache ([`walk_cache`]), when its base allows.
    recorder: Option<walk_cache::Recorder>,
    /// When the walk stops ([`WALK_BUDGET`]), and whether it did.
    deadline: Instant,
    timed_out: AtomicBool,
}

impl<'s> ignore::ParallelVisitorBuilder<'s> for &'s GlobWalk<'s> {
    fn build(&mut self) -> Box<dyn ignore::ParallelVisitor + 's> {
        Box::new(GlobVisitor {
            walk: self,
            pick: self.pick.clone(),
            hits: Vec::new(),
            found: walk_cache::Found::default(),
        })
    }
}

/// One walker thread's visitor; hands what it gathered to the walk when dropped.
struct GlobVisitor<'a> {
    walk: &'a GlobWalk<'a>,
    pick: Pick<'a>,
    hits: Vec<String>,
    found: walk_cache::Found,
}

impl GlobVisitor<'_> {
    fn spoil(&self) {
        if let Some(r) = &self.walk.recorder {
            r.spoil();
        }
    }

    fn recording(&self) -> bool {
        self.walk.recorder.as_ref().is_some_and(|r| !r.is_spoiled())
    }
}

impl ignore::ParallelVisitor for GlobVisitor<'_> {
    fn visit(&mut self, entry: Result<ignore::DirEntry, ignore::Error>) -> WalkState {
        let Ok(entry) = entry else {
            self.spoil();
            return WalkState::Continue;
        };
        if Instant::now() >= self.walk.deadline {
            self.walk.timed_out.store(true, Ordering::Relaxed);
            self.spoil();
            return WalkState::Quit;
        }
        let rel = match walked(&entry, self.walk.pick.base) {
            Walked::File(rel) => rel,
            Walked::Dir(rel) => {
                if self.recording() {
                    self.found.dir(rel);
                }
                return WalkState::Continue;
            }
            Walked::Other => return WalkState::Continue,
            Walked::Unknown => {
                self.spoil();
                return WalkState::Continue;
            }
        };
        let path = entry.path();
        if self.recording() {
            self.found.file(rel);
            // The threads' files are counted together, a thousand at a time, so that the
            // records stay bounded however many threads walk.
            let within = !self.found.len().is_multiple_of(1024)
                || self.walk.recorder.as_ref().is_some_and(|r| r.tally(1024));
            if !within {
                self.spoil();
                self.found = walk_cache::Found::default();
            }
        }
        let Some(hit) = self.pick.pick(path, rel, entry.ino()) else {
            return WalkState::Continue;
        };
        self.hits.push(hit);
        if self.walk.found.fetch_add(1, Ordering::Relaxed) + 1 >= self.walk.cap {
            self.walk.overflow.store(true, Ordering::Relaxed);
            self.spoil();
            return WalkState::Quit;
        }
        WalkState::Continue
    }
}

impl Drop for GlobVisitor<'_> {
    fn drop(&mut self) {
        lock(&self.walk.hits).append(&mut self.hits);
        if let Some(r) = &self.walk.recorder {
            r.add(std::mem::take(&mut self.found));
        }
    }
}

impl ToolText for GlobOutput {
    fn text(&self) -> String {
        let mut out = String::new();
        for f in &self.files {
            out.push_str(f);
            out.push('\n');
        }
        if self.files.is_empty() {
            let _ = writeln!(out, "no files match under {}", self.base);
        }
        if self.timed_out {
            let _ = writeln!(out, "{TIMED_OUT}");
        } else if self.truncated {
            let _ = writeln!(
                out,
                "[truncated: {} of {} files found shown; narrow the pattern or raise limit]",
                self.count, self.total
            );
        }
        skipped_text(&mut out, &self.skipped);
        out
    }
}
