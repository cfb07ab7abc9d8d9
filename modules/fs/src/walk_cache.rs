//! A cache of `glob`'s walks, each kept with the proof that it is still true.
//!
//! Walking a large tree costs most of `glob`'s time (57,000 files in 12,500 folders: about
//! 100 ms, two thirds of it the kernel reading folder listings, the rest the walker rebuilding
//! every `.gitignore` matcher). Whether that walk would find the same files again can be told
//! with one `lstat` per folder, because a folder's change time moves whenever an entry is
//! added, removed or renamed in it. So a complete walk records, besides the regular files it
//! found, the *stamp* (device, inode, mode, size, modification and change time) of every folder
//! it read and of every ignore file that shaped it — `.gitignore`, `.ignore` and
//! `.git/info/exclude` in those folders and in the base's ancestors, present or absent. A later
//! `glob` with the same base and switches re-stamps them all; one difference and the listing
//! is dropped and the tree walked again.
//!
//! What keeps this honest:
//! - **Same-tick changes.** A file system stamps changes with a coarse clock, so a change made
//!   just after a folder was read can carry the same time as one made just before. A walk is
//!   kept only when every stamp it recorded is older than the walk's start by [`RACY`] (git's
//!   "racy clean" rule): a tree touched in the last second is simply walked each time.
//! - **Times set by hand.** `touch -d` can put a modification time back, never a change time,
//!   and both are compared. A walk during which the wall clock was set back is not kept.
//! - **Other file systems.** Network and FUSE file systems stamp with another machine's clock
//!   or not at all: only walks wholly on a local file system ([`LOCAL_FS`]) are kept, and a
//!   folder on another device (a mount inside the tree) disqualifies the walk.
//! - **Incomplete walks.** A walk that met an error, stopped early or found more than
//!   [`MAX_FILES`] files is not kept. A `.git` that is a file (a linked worktree, whose exclude
//!   file lives elsewhere) is not kept either.
//!
//! Matching the pattern, the policy's hiding of secrets and the output are the same for a
//! cached listing as for a fresh walk ([`crate::glob::glob`]). A large walk is stamped on a
//! thread of its own after the answer ([`Recorder::keep`]), so that keeping it does not slow
//! the call that walked.

use rustix::fd::OwnedFd;
use rustix::fs::{AtFlags, FileType, Mode, OFlags, Stat};
use rustix::io::Errno;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Listings kept at once; the least recently used goes first.
const MAX_LISTINGS: usize = if cfg!(test) { 64 } else { 4 };
/// A walk that finds more regular files than this is not kept (a listing costs about 80 bytes a
/// file and folder).
pub(crate) const MAX_FILES: usize = 200_000;
/// Files kept over all listings.
const MAX_TOTAL_FILES: usize = 2 * MAX_FILES;
/// How much older than the walk's start every recorded stamp must be.
const RACY: Duration = Duration::from_secs(1);
/// Walks reading fewer folders than this are stamped at once, larger ones on a thread of their
/// own after the answer.
const BACKGROUND_AT: usize = 256;
/// Proofs and files checked on one thread; more are split over two.
const SPLIT_AT: usize = 4_000;

/// Local file systems, whose times come from this kernel's clock (`statfs` magic numbers):
/// ext2/3/4, XFS, Btrfs, tmpfs, overlayfs, F2FS, ZFS, bcachefs.
const LOCAL_FS: [u64; 8] = [
    0xEF53,
    0x5846_5342,
    0x9123_683E,
    0x0102_1994,
    0x794C_7630,
    0xF2F5_2010,
    0x2FC1_2FC1,
    0xCA45_1A4E,
];

/// What a listing answers for: the same base, switches and pruned (denied) folders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Key {
    pub base: PathBuf,
    pub hidden: bool,
    pub ignored: bool,
    pub denied: Vec<PathBuf>,
}

/// What `lstat` says of a path, enough to tell that it was changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    mode: u32,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    // `Stat`'s field types vary by target; every value fits.
    #[allow(clippy::unnecessary_cast, clippy::cast_sign_loss, clippy::cast_possible_wrap)]
    fn of(st: &Stat) -> Stamp {
        Stamp {
            dev: st.st_dev as u64,
            ino: st.st_ino as u64,
            mode: st.st_mode as u32,
            size: st.st_size as u64,
            mtime: (st.st_mtime as i64, st.st_mtime_nsec as i64),
            ctime: (st.st_ctime as i64, st.st_ctime_nsec as i64),
        }
    }

    fn is_dir(&self) -> bool {
        FileType::from_raw_mode(self.mode) == FileType::Directory
    }

    fn is_file(&self) -> bool {
        FileType::from_raw_mode(self.mode) == FileType::RegularFile
    }

    /// Whether the change time is older than `before` (times before 1970 count as old).
    fn changed_before(&self, before: SystemTime) -> bool {
        let (secs, nanos) = self.ctime;
        let Ok(secs) = u64::try_from(secs) else { return true };
        let nanos = u32::try_from(nanos).unwrap_or(0);
        UNIX_EPOCH + Duration::new(secs, nanos) < before
    }
}

/// The stamp of `path` (relative to the folder `at`, or absolute) without following a final
/// link; `None` when nothing is there.
fn stamp(at: &OwnedFd, path: &Path) -> Result<Option<Stamp>, Errno> {
    match rustix::fs::statat(at, path, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => Ok(Some(Stamp::of(&st))),
        Err(Errno::NOENT | Errno::NOTDIR) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The base folder, opened to stamp paths relative to it (a shorter lookup for the kernel than
/// the absolute path).
fn open_base(base: &Path) -> Option<OwnedFd> {
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    rustix::fs::open(base, flags, Mode::empty()).ok()
}

/// A recorded path and its stamp (`None`: nothing was there). The path is relative to the base
/// (`.` for the base itself) or, for the base's ancestors, absolute.
type Proof = (PathBuf, Option<Stamp>);

/// The regular files a complete walk found, relative to its base and sorted, with the stamps
/// that prove it.
#[derive(Debug)]
pub(crate) struct Listing {
    /// The relative paths, back to back.
    arena: Vec<u8>,
    /// Where each path ends in `arena`.
    ends: Vec<usize>,
    proofs: Vec<Proof>,
}

impl Listing {
    fn len(&self) -> usize {
        self.ends.len()
    }

    /// The files kept by `pick` (which makes each thread its own picker), at most `cap`, and
    /// whether `cap` stopped them — or `None` when a recorded path no longer has its stamp.
    /// Two threads share a large listing, each checking half of the proofs, then picking from
    /// half of the files.
    fn search<P, F>(&self, base: &Path, pick: P, cap: u64) -> Option<(Vec<String>, bool)>
    where
        P: Fn() -> F + Sync,
        F: FnMut(&Path) -> Option<String>,
    {
        let at = open_base(base)?;
        let failed = AtomicBool::new(false);
        let half = |proofs: &[Proof], files: std::ops::Range<usize>| {
            let holds = proofs.iter().all(|(path, was)| {
                !failed.load(Ordering::Relaxed)
                    && matches!(stamp(&at, path), Ok(now) if now == *was)
            });
            if !holds {
                failed.store(true, Ordering::Relaxed);
                return None;
            }
            let mut hits = Vec::new();
            let mut pick = pick();
            for i in files {
                if let Some(hit) = pick(self.file(i)) {
                    hits.push(hit);
                    if hits.len() as u64 >= cap {
                        return Some((hits, true));
                    }
                }
            }
            Some((hits, false))
        };
        let n = self.len();
        let (mut hits, mut over) = if self.proofs.len() + n < SPLIT_AT {
            half(&self.proofs, 0..n)?
        } else {
            let (a, b) = self.proofs.split_at(self.proofs.len() / 2);
            let (mine, other) = std::thread::scope(|s| {
                let other = s.spawn(|| half(b, n / 2..n));
                // A thread that panicked proves nothing.
                (half(a, 0..n / 2), other.join().ok().flatten())
            });
            let (mut hits, over) = mine?;
            let (more, over_too) = other?;
            hits.extend(more);
            (hits, over || over_too)
        };
        // As in a walk, reaching the cap counts as stopped by it.
        if hits.len() as u64 >= cap {
            hits.truncate(usize::try_from(cap).unwrap_or(usize::MAX));
            over = true;
        }
        Some((hits, over))
    }

    fn file(&self, i: usize) -> &Path {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        Path::new(OsStr::from_bytes(&self.arena[start..self.ends[i]]))
    }
}

/// The kept listings, most recently used first.
static CACHE: Mutex<Vec<(Key, Arc<Listing>)>> = Mutex::new(Vec::new());

fn cache() -> std::sync::MutexGuard<'static, Vec<(Key, Arc<Listing>)>> {
    hands_roots::lock(&CACHE)
}

/// `glob`'s answer from the listing kept for `key`, when there is one and it still holds
/// ([`Listing::search`]: `pick` makes each thread its picker; at most `cap` files, and whether
/// the cap stopped them); a listing that no longer holds is dropped.
pub(crate) fn answer<P, F>(key: &Key, pick: P, cap: u64) -> Option<(Vec<String>, bool)>
where
    P: Fn() -> F + Sync,
    F: FnMut(&Path) -> Option<String>,
{
    let kept = lookup(key)?;
    let found = kept.search(&key.base, pick, cap);
    if found.is_none() {
        forget(&kept);
    }
    found
}

/// The kept listing for `key`, moved to the front; not yet checked.
fn lookup(key: &Key) -> Option<Arc<Listing>> {
    let mut kept = cache();
    let at = kept.iter().position(|(k, _)| k == key)?;
    let entry = kept.remove(at);
    let listing = Arc::clone(&entry.1);
    kept.insert(0, entry);
    Some(listing)
}

/// Drops a listing that no longer holds.
fn forget(listing: &Arc<Listing>) {
    cache().retain(|(_, l)| !Arc::ptr_eq(l, listing));
}

fn store(key: Key, listing: Listing) {
    let mut kept = cache();
    kept.retain(|(k, _)| *k != key);
    kept.insert(0, (key, Arc::new(listing)));
    let mut total = 0;
    let keep = kept
        .iter()
        .take_while(|(_, l)| {
            total += l.len();
            total <= MAX_TOTAL_FILES
        })
        .count()
        .min(MAX_LISTINGS);
    kept.truncate(keep.max(1));
}

/// Whether a listing is kept for `key` (without checking its proofs).
#[cfg(test)]
pub(crate) fn is_kept(key: &Key) -> bool {
    cache().iter().any(|(k, _)| k == key)
}

/// What one walker thread found: regular files and the folders it read, relative to the base.
#[derive(Debug, Default)]
pub(crate) struct Found {
    arena: Vec<u8>,
    ends: Vec<usize>,
    dirs: Vec<PathBuf>,
}

impl Found {
    pub(crate) fn file(&mut self, rel: &Path) {
        self.arena.extend_from_slice(rel.as_os_str().as_bytes());
        self.ends.push(self.arena.len());
    }

    /// A folder read, relative to the base (empty for the base itself).
    pub(crate) fn dir(&mut self, rel: &Path) {
        let rel = if rel.as_os_str().is_empty() { Path::new(".") } else { rel };
        self.dirs.push(rel.to_path_buf());
    }

    pub(crate) fn len(&self) -> usize {
        self.ends.len()
    }
}

/// When a walk started, by the wall clock (which file times follow) and by a steady one.
#[derive(Debug, Clone, Copy)]
struct Started {
    wall: SystemTime,
    steady: Instant,
}

/// Gathers one walk's findings from its threads; [`Recorder::keep`] turns them into a listing.
#[derive(Debug)]
pub(crate) struct Recorder {
    key: Key,
    started: Started,
    parts: Mutex<Vec<Found>>,
    spoiled: AtomicBool,
    /// Files found so far by all threads (counted in batches, [`Recorder::tally`]).
    files: AtomicUsize,
}

impl Recorder {
    /// A recorder for a walk about to start, or `None` when its base is not on a local file
    /// system.
    pub(crate) fn new(key: Key) -> Option<Recorder> {
        let fs = rustix::fs::statfs(key.base.as_path()).ok()?;
        #[allow(clippy::unnecessary_cast, clippy::cast_sign_loss)] // `f_type`'s type varies
        let magic = fs.f_type as u64;
        if !LOCAL_FS.contains(&magic) {
            return None;
        }
        Some(Recorder {
            key,
            started: Started { wall: SystemTime::now(), steady: Instant::now() },
            parts: Mutex::new(Vec::new()),
            spoiled: AtomicBool::new(false),
            files: AtomicUsize::new(0),
        })
    }

    /// The walk cannot be kept: it met an error, stopped early or grew too large.
    pub(crate) fn spoil(&self) {
        self.spoiled.store(true, Ordering::Relaxed);
    }

    pub(crate) fn is_spoiled(&self) -> bool {
        self.spoiled.load(Ordering::Relaxed)
    }

    /// Counts `n` more files found; whether the walk is still within [`MAX_FILES`].
    pub(crate) fn tally(&self, n: usize) -> bool {
        self.files.fetch_add(n, Ordering::Relaxed) + n <= MAX_FILES
    }

    /// Adds one thread's findings.
    pub(crate) fn add(&self, found: Found) {
        hands_roots::lock(&self.parts).push(found);
    }

    /// Keeps the walk when it is complete, on one local device, and older than [`RACY`] in
    /// every stamp. Stamping a large walk's folders takes a third of the walk's time again, so
    /// that is done on a thread of its own, after the answer (one such thread at a time; while
    /// one runs, other walks are not kept). Stamping late is as safe as stamping at once: what
    /// changed since the walk has a change time after its start, and is not kept.
    pub(crate) fn keep(self) {
        if self.is_spoiled() {
            return;
        }
        let parts = self.parts.into_inner().unwrap_or_else(PoisonError::into_inner);
        if parts.iter().map(Found::len).sum::<usize>() > MAX_FILES {
            return;
        }
        let (key, started) = (self.key, self.started);
        if parts.iter().map(|p| p.dirs.len()).sum::<usize>() < BACKGROUND_AT {
            return keep(key, &parts, started);
        }
        {
            let mut busy = keeper();
            if *busy {
                return;
            }
            *busy = true;
        }
        let spawned = std::thread::Builder::new().name("hands-listing".into()).spawn(move || {
            keep(key, &parts, started);
            *keeper() = false;
            KEEPER_DONE.notify_all();
        });
        if spawned.is_err() {
            *keeper() = false;
        }
    }
}

/// Whether a thread is keeping a walk ([`Recorder::keep`]); `KEEPER_DONE` is told when it ends.
static KEEPER: Mutex<bool> = Mutex::new(false);
static KEEPER_DONE: Condvar = Condvar::new();

fn keeper() -> std::sync::MutexGuard<'static, bool> {
    hands_roots::lock(&KEEPER)
}

/// Waits until no thread is keeping a walk.
#[cfg(test)]
pub(crate) fn wait_for_keeper() {
    let mut busy = keeper();
    while *busy {
        busy = KEEPER_DONE.wait(busy).unwrap_or_else(PoisonError::into_inner);
    }
}

/// Stamps the walk and, when every stamp allows, stores it.
fn keep(key: Key, parts: &[Found], started: Started) {
    let Some(proofs) = prove(&key, parts, started.wall) else { return };
    // A wall clock set back during the walk would make a change made meanwhile look older than
    // the walk: such a walk is not kept.
    let wall = SystemTime::now().duration_since(started.wall).unwrap_or_default();
    if wall + RACY / 2 < started.steady.elapsed() {
        return;
    }
    let mut paths: Vec<&[u8]> = Vec::new();
    for part in parts {
        let starts = std::iter::once(0).chain(part.ends.iter().copied());
        paths.extend(starts.zip(&part.ends).map(|(s, &e)| &part.arena[s..e]));
    }
    paths.sort_unstable();
    let mut arena = Vec::with_capacity(paths.iter().map(|p| p.len()).sum());
    let mut ends = Vec::with_capacity(paths.len());
    for p in paths {
        arena.extend_from_slice(p);
        ends.push(arena.len());
    }
    store(key, Listing { arena, ends, proofs });
}

/// The stamps that prove the walk: every folder read, the ignore files in them, and the ignore
/// files of the base's ancestors (present or not). `None` when a stamp disqualifies the walk.
fn prove(key: &Key, parts: &[Found], started: SystemTime) -> Option<Vec<Proof>> {
    let dirs: Vec<&Path> = parts.iter().flat_map(|p| p.dirs.iter().map(PathBuf::as_path)).collect();
    let respect = !key.ignored;
    let at = open_base(&key.base)?;
    let device = stamp(&at, Path::new(".")).ok()??.dev;
    let recent = started.checked_sub(RACY)?;
    let probe = |chunk: &[&Path]| -> Option<Vec<Proof>> {
        let mut proofs = Vec::with_capacity(chunk.len());
        for dir in chunk {
            let st = stamp(&at, dir).ok()??;
            // A tree being changed is given up at its first recent folder.
            if st.dev != device || !st.changed_before(recent) {
                return None;
            }
            proofs.push((dir.to_path_buf(), Some(st)));
            if respect {
                // An ignore file or `.git` created later changes the folder; one edited in
                // place does not.
                for name in [".gitignore", ".ignore"] {
                    let path = dir.join(name);
                    if let Some(st) = ignore_file(&at, &path)? {
                        proofs.push((path, Some(st)));
                    }
                }
                repository(&at, dir, false, &mut proofs)?;
            }
        }
        Some(proofs)
    };
    let mut proofs = if dirs.len() < SPLIT_AT {
        probe(&dirs)?
    } else {
        let (a, b) = dirs.split_at(dirs.len() / 2);
        std::thread::scope(|s| {
            let other = s.spawn(|| probe(b));
            let mut mine = probe(a)?;
            mine.extend(other.join().ok()??);
            Some(mine)
        })?
    };
    if respect {
        for dir in key.base.ancestors().skip(1) {
            for name in [".gitignore", ".ignore"] {
                let path = dir.join(name);
                let st = ignore_file(&at, &path)?;
                proofs.push((path, st));
            }
            repository(&at, dir, true, &mut proofs)?;
        }
    }
    let settled =
        proofs.iter().filter_map(|(_, st)| st.as_ref()).all(|st| st.changed_before(recent));
    settled.then_some(proofs)
}

/// The stamp of an ignore file, or `None` inside when there is none; `None` outside when it
/// cannot be proved: unreadable stamp, or a link (the walker reads the target, whose changes the
/// link's stamp does not show).
#[allow(clippy::option_option)]
fn ignore_file(at: &OwnedFd, path: &Path) -> Option<Option<Stamp>> {
    match stamp(at, path).ok()? {
        Some(st) if !st.is_file() => None,
        st => Some(st),
    }
}

/// Proofs for the `.git` of `dir` and its `info/exclude`, each present or absent (a file
/// created inside `.git` does not change `dir`); an absent `.git` is recorded only with
/// `absent_too` (for an ancestor, whose changes no folder stamp shows). `None` when `.git` is
/// not a folder.
fn repository(at: &OwnedFd, dir: &Path, absent_too: bool, proofs: &mut Vec<Proof>) -> Option<()> {
    let git = dir.join(".git");
    let st = stamp(at, &git).ok()?;
    let is_repo = st.is_some();
    if is_repo && !st.is_some_and(|s| s.is_dir()) {
        return None;
    }
    if is_repo || absent_too {
        proofs.push((git, st));
    }
    if is_repo {
        let info = dir.join(".git/info");
        let st = stamp(at, &info).ok()?;
        proofs.push((info, st));
        let exclude = dir.join(".git/info/exclude");
        let st = ignore_file(at, &exclude)?;
        proofs.push((exclude, st));
    }
    Some(())
}
