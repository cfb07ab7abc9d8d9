//! The ignore rules of a `glob` or `grep` walk, read by the walk itself: `.ignore`,
//! `.gitignore` and `.git/info/exclude`, each looked at with `lstat` first, opened non-blocking
//! without following a link and read only when `fstat` says it is a regular file.
//!
//! Why not the `ignore` crate's own reading: it opens ignore files (and a `.git` file, and the
//! `commondir` that names) by path with a blocking `open`, so a FIFO named `.gitignore` — or one
//! swapped in between any check of ours and its open — hangs a walker thread forever. So the
//! walker reads none (`parallel_walk::walker` switches all of it off), and the rules are rebuilt here
//! with the crate's own [`Gitignore`] matcher over what was read this way. A FIFO, socket,
//! device or symlink where an ignore file would be is skipped, treated as absent, and named in
//! the tool's answer ([`Rules::skipped`]); the walk goes on.
//!
//! The semantics are git's, as the crate has them: a folder's rules apply to what lies below it,
//! a deeper folder's before a shallower one's, and within one folder `.ignore` before
//! `.gitignore` before `.git/info/exclude`; the first rule that matches decides, so a `!pattern`
//! re-includes. `.gitignore` and `exclude` rules stop at the top of the repository (the nearest
//! folder holding a `.git`, itself included; without one, every folder up to `/` counts, as
//! before), `.ignore` rules do not. The base's ancestors count like the folders walked. A linked
//! worktree's or submodule's `.git` file leads to the `info/exclude` of its common git dir.

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;
use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

/// An ignore file larger than this is skipped (and named): its rules would cost more memory
/// than the walk they shape.
const MAX_IGNORE_FILE: u64 = 4 << 20;
/// Most skipped files named in one answer.
const MAX_SKIPPED: usize = 20;

/// One folder's rules, linked to those of the folder above that has any.
struct Level {
    /// `.ignore`
    ignore: Gitignore,
    /// `.gitignore`
    git: Gitignore,
    /// `.git/info/exclude` (or the common git dir's, for a `.git` file)
    exclude: Gitignore,
    /// The folder holds a `.git`: rules of `.gitignore`/`exclude` above it do not apply.
    top: bool,
    up: Option<Arc<Level>>,
}

/// The rules of one walk: the base's (with its ancestors'), and each folder's as the walk
/// reaches it, kept by folder path for the folders below it.
pub(crate) struct Rules {
    base: PathBuf,
    at_base: Option<Arc<Level>>,
    dirs: RwLock<HashMap<PathBuf, Option<Arc<Level>>>>,
    skipped: Mutex<Vec<String>>,
}

impl Rules {
    /// The rules that apply at `base` (an absolute, real folder path): its own and its
    /// ancestors' ignore files, read now.
    pub(crate) fn new(base: &Path) -> Rules {
        let mut rules = Rules {
            base: base.to_path_buf(),
            at_base: None,
            dirs: RwLock::new(HashMap::new()),
            skipped: Mutex::new(Vec::new()),
        };
        let mut level = None;
        let chain: Vec<&Path> = base.ancestors().collect();
        for dir in chain.into_iter().rev() {
            level = rules.read_level(dir, level);
        }
        rules.at_base = level;
        rules
    }

    /// What the rules say of `path` (an entry the walk found below the base; `is_dir` when it
    /// is a folder): ignored, re-included by a `!pattern`, or neither.
    pub(crate) fn matched(&self, path: &Path, is_dir: bool) -> Match<()> {
        let level = match path.parent() {
            Some(dir) => self.level(dir),
            None => self.at_base.clone(),
        };
        let (mut ignore, mut git, mut exclude) = (Match::None, Match::None, Match::None);
        let mut above_top = false;
        let mut cur = level.as_deref();
        while let Some(l) = cur {
            if ignore.is_none() {
                ignore = l.ignore.matched(path, is_dir).map(|_| ());
            }
            if !above_top {
                if git.is_none() {
                    git = l.git.matched(path, is_dir).map(|_| ());
                }
                if exclude.is_none() {
                    exclude = l.exclude.matched(path, is_dir).map(|_| ());
                }
            }
            above_top |= l.top;
            cur = l.up.as_deref();
        }
        ignore.or(git).or(exclude)
    }

    /// The files skipped because they were not regular files (each with what it was), at most
    /// [`MAX_SKIPPED`], sorted.
    pub(crate) fn skipped(&self) -> Vec<String> {
        let mut s = hands_roots::lock(&self.skipped).clone();
        s.sort_unstable();
        s
    }

    /// The rules that apply to the entries of `dir`, read when the walk first asks (the walk
    /// asks for a folder's entries only after the folder above was asked for, so the recursion
    /// is at most one step in practice).
    fn level(&self, dir: &Path) -> Option<Arc<Level>> {
        if dir == self.base || !dir.starts_with(&self.base) {
            return self.at_base.clone();
        }
        if let Some(l) = self.dirs.read().unwrap_or_else(PoisonError::into_inner).get(dir) {
            return l.clone();
        }
        let up = match dir.parent() {
            Some(p) => self.level(p),
            None => self.at_base.clone(),
        };
        let level = self.read_level(dir, up);
        let mut dirs = self.dirs.write().unwrap_or_else(PoisonError::into_inner);
        dirs.entry(dir.to_path_buf()).or_insert(level).clone()
    }

    /// `dir`'s rules on top of `up`; `up` itself when `dir` has none and no `.git`.
    fn read_level(&self, dir: &Path, up: Option<Arc<Level>>) -> Option<Arc<Level>> {
        // The folder is opened as a handle only (`O_PATH`: nothing is read, nothing blocks);
        // one that is gone or became a link since it was listed has no rules of its own.
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let Ok(fd) = rustix::fs::open(dir, flags, Mode::empty()) else { return up };
        let ignore = self.matcher(&fd, dir, Path::new(".ignore"), dir);
        let git = self.matcher(&fd, dir, Path::new(".gitignore"), dir);
        let (top, exclude) = self.exclude(&fd, dir);
        if ignore.is_empty() && git.is_empty() && exclude.is_empty() && !top {
            return up;
        }
        Some(Arc::new(Level { ignore, git, exclude, top, up }))
    }

    /// Whether `dir` holds a `.git` (a folder, or a file naming one), and the rules of the
    /// `info/exclude` of its git dir (the common one, for a linked worktree).
    fn exclude(&self, fd: &OwnedFd, dir: &Path) -> (bool, Gitignore) {
        // `stat` (following a link, as git does) never blocks.
        let Ok(st) = rustix::fs::statat(fd, ".git", AtFlags::empty()) else {
            return (false, Gitignore::empty());
        };
        match FileType::from_raw_mode(st.st_mode) {
            FileType::Directory => {
                (true, self.matcher(fd, &dir.join(".git"), Path::new(".git/info/exclude"), dir))
            }
            FileType::RegularFile => {
                let Some(common) = self.common_dir(fd, dir) else {
                    return (true, Gitignore::empty());
                };
                let cwd = rustix::fs::CWD;
                let exclude = common.join("info/exclude");
                let text = self.read(cwd, &exclude, &exclude);
                (true, text.map_or_else(Gitignore::empty, |t| build(dir, &t)))
            }
            // A FIFO or the like named `.git` is no repository.
            _ => (false, Gitignore::empty()),
        }
    }

    /// The common git dir a `.git` file of `dir` leads to: its `gitdir: X` line, then X's
    /// `commondir` (relative to X), or X itself when there is none (a submodule's).
    fn common_dir(&self, fd: &OwnedFd, dir: &Path) -> Option<PathBuf> {
        let line = first_line(&self.read(fd.as_fd(), Path::new(".git"), &dir.join(".git"))?)?;
        let gitdir = dir.join(line.strip_prefix("gitdir: ")?.trim_end());
        let commondir = gitdir.join("commondir");
        match self.read(rustix::fs::CWD, &commondir, &commondir) {
            Some(text) => Some(gitdir.join(first_line(&text)?.trim_end())),
            None => Some(gitdir),
        }
    }

    /// The matcher of the ignore file `name` (relative to `at`, shown as `shown_dir/name`)
    /// whose patterns are relative to `root`; empty when there is none or it was skipped.
    fn matcher(&self, at: &OwnedFd, shown_dir: &Path, name: &Path, root: &Path) -> Gitignore {
        let shown = match name.strip_prefix(".git/") {
            Ok(rest) => shown_dir.join(rest),
            Err(_) => shown_dir.join(name),
        };
        match self.read(at.as_fd(), name, &shown) {
            Some(text) => build(root, &text),
            None => Gitignore::empty(),
        }
    }

    /// The contents of the regular file `name` (relative to `at`; `shown` is its path for the
    /// answer): `None` when there is none, or when it is something else (a FIFO, socket, device,
    /// a symlink) or too large — then it is skipped and named. Looked at with `lstat` first, so
    /// a device is not even opened; then opened with `O_NONBLOCK | O_NOFOLLOW` and checked with
    /// `fstat`, so one swapped in since cannot block the read either.
    fn read(&self, at: rustix::fd::BorrowedFd<'_>, name: &Path, shown: &Path) -> Option<Vec<u8>> {
        let st = rustix::fs::statat(at, name, AtFlags::SYMLINK_NOFOLLOW).ok()?;
        let kind = FileType::from_raw_mode(st.st_mode);
        if kind != FileType::RegularFile {
            if kind != FileType::Directory {
                self.skip(shown, hands_roots::kind_name(kind));
            }
            return None;
        }
        let flags =
            OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOFOLLOW | OFlags::NOCTTY | OFlags::CLOEXEC;
        let fd = match rustix::fs::openat(at, name, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::LOOP) => {
                self.skip(shown, "symlink");
                return None;
            }
            Err(_) => return None,
        };
        let st = rustix::fs::fstat(&fd).ok()?;
        let kind = FileType::from_raw_mode(st.st_mode);
        if kind != FileType::RegularFile {
            self.skip(shown, hands_roots::kind_name(kind));
            return None;
        }
        let mut text = Vec::new();
        std::fs::File::from(fd).take(MAX_IGNORE_FILE + 1).read_to_end(&mut text).ok()?;
        if text.len() as u64 > MAX_IGNORE_FILE {
            self.skip(shown, "file over 4 MiB");
            return None;
        }
        Some(text)
    }

    fn skip(&self, path: &Path, kind: &str) {
        let mut s = hands_roots::lock(&self.skipped);
        if s.len() < MAX_SKIPPED {
            s.push(format!("{} ({kind})", path.display()));
        }
    }
}

/// A matcher of gitignore lines relative to `root`, read as git reads them: a leading BOM
/// dropped, `\r\n` endings, a line that is not UTF-8 or not a valid pattern skipped (as the
/// `ignore` crate skips them).
fn build(root: &Path, text: &[u8]) -> Gitignore {
    let mut b = GitignoreBuilder::new(root);
    for (i, line) in text.split(|&c| c == b'\n').enumerate() {
        let Ok(line) = std::str::from_utf8(line) else { continue };
        let line = line.strip_suffix('\r').unwrap_or(line);
        let line = if i == 0 { line.trim_start_matches('\u{feff}') } else { line };
        let _ = b.add_line(None, line);
    }
    b.build().unwrap_or_else(|_| Gitignore::empty())
}

fn first_line(text: &[u8]) -> Option<String> {
    let line = text.split(|&c| c == b'\n').next()?;
    std::str::from_utf8(line).ok().map(str::to_string)
}
