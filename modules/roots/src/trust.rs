//! What the host trusts inside the roots beyond the protected names (SPEC §3, "What the host
//! trusts is out of reach"): for every git repository found in a root, or holding one, its
//! config as git resolves it — `config`, `config.worktree`, every `include.path` /
//! `includeIf.*.path` target, the hooks folder `core.hooksPath` names (or the default one),
//! `gitdir:` and `commondir` targets — and the target of every protected name that is a
//! symbolic link (`.vscode -> tools/vscode`), each followed through symbolic links to the real
//! place, whether it exists yet or not.
//!
//! One walk of the roots of every module finds them ([`Trust::current`], cached like the
//! sandbox's masks); the file tools refuse writing them (`Resolver::check_writable`), and the
//! sandbox binds the existing ones read-only and refuses creating the missing ones while a
//! command runs. Config files are read by [`crate::gitcfg`], never by running git.

use crate::gitcfg;
use crate::{Policy, PolicyLists, WalkError};
use rustix::fs::FileType;
use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Entries one walk visits at most before it fails (closed: writes and commands are refused,
/// saying why). It lists folders only, never opening or stat-ing an ordinary file, so a walk
/// of a million entries takes about a second; its result is then reused ten times as long.
pub const WALK_LIMIT: usize = 1_000_000;

/// How long a walk's result is reused (longer for a slow walk, as the masks' walk): a
/// repository a person clones, or a config a person edits, counts from then on.
const TTL: Duration = Duration::from_secs(2);

/// Config files read per walk at most; past it the walk fails closed.
const FILE_BUDGET: usize = 20_000;

/// Entries below one hooks folder, or one protected folder reached through a link, looked at
/// for symbolic links.
const LINKS_BELOW: usize = 10_000;

/// Symbolic links followed on one path, as the kernel's own limit.
const MAX_LINKS: usize = 40;

/// What a git dir holds that git reads as config, or runs, or that moves where it reads from.
pub const GIT_CONTROL: &[&str] = &["config", "config.worktree", "commondir", "hooks"];

/// What the entry `name` would be in a folder that `holds` what it says: a git control file
/// beside a `HEAD`, or a `HEAD` beside one — either makes the folder a git dir (bare-repository
/// discovery) whose config and hooks git on the host loads, once `objects` and `refs` are
/// there too. One rule for the file tools (by what the disk holds), for git checkouts (by the
/// tree and the disk) and for a command's run (decision 0046: found by the tenth attack pass
/// of session 32, a command's `HEAD` and `config` beside which the file tools then wrote
/// `objects/` and `refs/`, and a person's `git branch` there ran the config's pager). Names
/// match as a case-folding folder finds them ([`crate::fold`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GitDirPiece {
    /// `config`, `config.worktree`, `commondir` or `hooks` beside a `HEAD`.
    Control,
    /// `HEAD` beside one of those.
    Head,
}

impl GitDirPiece {
    pub fn of(name: &str, holds: impl Fn(&str) -> bool) -> Option<GitDirPiece> {
        let same = |c: &str| crate::fold::same(c.as_bytes(), name.as_bytes());
        if GIT_CONTROL.iter().any(|c| same(c)) && holds("HEAD") {
            return Some(GitDirPiece::Control);
        }
        let head = same("HEAD");
        (head && GIT_CONTROL.iter().any(|c| holds(c))).then_some(GitDirPiece::Head)
    }
}

/// Whether a new entry `name` is one [`GitDirPiece::of`] looks at (`HEAD` or a control name,
/// folded): its check and its making happen under [`lock_folder`].
pub fn is_piece_name(name: &[u8]) -> bool {
    crate::fold::same(name, b"HEAD")
        || GIT_CONTROL.iter().any(|c| crate::fold::same(c.as_bytes(), name))
}

/// The folders that would be a git dir with an entry made in `folder` among its hooks: the one
/// above each folder of `folder`'s path (itself included) named `hooks` as a case-folding
/// folder answers to it ([`crate::fold`]), nearest first. Such an entry is a hook when that
/// folder holds `HEAD` (a repository renamed out of its `.git`, or one a checkout brought
/// whole). One rule for the file tools, checkouts and a command's run; each stops the walk at
/// its root.
pub fn hooks_owners(folder: &Path) -> impl Iterator<Item = &Path> {
    folder
        .ancestors()
        .filter(|a| a.file_name().is_some_and(|n| crate::fold::same(n.as_bytes(), b"hooks")))
        .filter_map(Path::parent)
}

/// How long [`lock_folder`] waits for another holder (a write or a create in flight).
const LOCK_WAIT: Duration = Duration::from_secs(2);

/// Locks the folder `dir` (`flock`, exclusive, on a descriptor of its own) while a `HEAD` or a
/// control name is checked against what the folder holds and then made there: the file tools
/// and every sandbox's init check and make such names in separate processes, so without one
/// lock a check on each side passed before either entry existed (found by the eleventh attack
/// pass: a tmux session made `x/HEAD` while `write` filled `x/config`, and a person's `git
/// branch` in `x` ran its pager). Waits up to two seconds, then fails (`EWOULDBLOCK`): a
/// command that holds the lock itself only stops such names being made there.
pub fn lock_folder(dir: std::os::fd::BorrowedFd<'_>) -> std::io::Result<std::os::fd::OwnedFd> {
    use rustix::fs::{FlockOperation, Mode, OFlags};
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(dir, ".", flags, Mode::empty())?;
    let until = Instant::now() + LOCK_WAIT;
    loop {
        match rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => return Ok(fd),
            Err(rustix::io::Errno::WOULDBLOCK | rustix::io::Errno::INTR)
                if Instant::now() < until =>
            {
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// The walk of the roots for what the host trusts, and its cached result.
#[derive(Debug)]
pub struct Trust {
    /// The outermost roots: each is walked once.
    tops: Vec<PathBuf>,
    /// Every root, for "does this lie in a root".
    roots: Vec<PathBuf>,
    /// The protected rules alone (`protected.txt`, `protected_extra`), compiled and as given.
    rules: Policy,
    protected: Vec<String>,
    /// Denied and credential folders, not entered.
    skip: Vec<PathBuf>,
    home: Option<PathBuf>,
    limit: usize,
    cache: Mutex<Option<(Instant, Duration, Known)>>,
}

/// A walk's result as it is cached and handed out: every caller of one walk gets the same.
type Known = Result<Arc<Trusted>, Arc<TrustError>>;

/// Why the walk could not tell what the host trusts in the roots ([`Trust::current`]): then
/// nothing may be written there. The text says what a person can do.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    /// A root could not be opened.
    #[error("a root cannot be opened ({0})")]
    Open(std::io::Error),
    /// The roots hold more than `limit` entries: the rest was not looked at.
    #[error(
        "the roots hold more than {limit} files and folders, so hands cannot check which of them \
         git on the host reads; a person can narrow the roots"
    )]
    TooMany { limit: usize },
    /// A folder could not be listed (other than for permission): what lies beneath is unknown.
    #[error("{0}; a person can fix or remove that folder")]
    Unlisted(WalkError<std::convert::Infallible>),
    /// The repositories name more config files than one walk reads.
    #[error(
        "the repositories in the roots name more than {FILE_BUDGET} config files; a person can \
         narrow the roots"
    )]
    TooManyConfigs,
}

/// One walk's result.
#[derive(Debug, Default)]
pub struct Trusted {
    /// Real paths inside a root (parents canonical, the last component as found) that the
    /// host reads or runs, existing or not, each with the reason; a folder covers what is
    /// below it.
    paths: BTreeMap<PathBuf, String>,
    /// The same keyed folded ([`crate::fold::folded_path`]), as `covers` looks them up.
    folded: BTreeMap<Vec<u8>, String>,
    /// Places outside every root that a protected name, a `.git` file or a git config leads
    /// to: (what leads there, the place). Commands must not be able to write them.
    pub outside: Vec<(PathBuf, PathBuf)>,
    /// Entries the walk visited.
    pub seen: usize,
}

impl Trusted {
    /// The reason `abs` (absolute, clean) may not be written or created, when it or a folder
    /// above it is one of the paths.
    pub fn covers(&self, abs: &Path) -> Option<&str> {
        let folded = |a: &Path| crate::fold::folded_path(a.as_os_str().as_bytes());
        abs.ancestors().find_map(|a| self.folded.get(&folded(a))).map(String::as_str)
    }

    /// Every path and why.
    pub fn paths(&self) -> impl Iterator<Item = (&Path, &str)> {
        self.paths.iter().map(|(p, w)| (p.as_path(), w.as_str()))
    }
}

impl Trust {
    /// A walk of `roots` (canonical: the resolvers' own), the protected rules of `lists`,
    /// not entering its denied paths; `~` in git's config is `home`.
    pub fn new(
        roots: &[PathBuf],
        lists: &PolicyLists,
        home: Option<PathBuf>,
        limit: usize,
    ) -> Trust {
        let mut tops: Vec<PathBuf> = roots
            .iter()
            .filter(|p| !roots.iter().any(|o| p.starts_with(o) && p != &o))
            .cloned()
            .collect();
        tops.sort();
        tops.dedup();
        let rules = Policy::rules_only(&lists.protected);
        let protected = lists.protected.clone();
        let skip = lists.credentials.iter().chain(&lists.deny).cloned().collect();
        let cache = Mutex::new(None);
        Trust { tops, roots: roots.to_vec(), rules, protected, skip, home, limit, cache }
    }

    /// A walk of other folders (canonical) under this one's rules, skipped folders and home:
    /// what the host's git would read or run in a folder outside the roots that a widening
    /// names (SPEC §6), found as it is in a root.
    pub fn elsewhere(&self, roots: &[PathBuf], limit: usize) -> Trust {
        let lists = PolicyLists {
            protected: self.protected.clone(),
            deny: self.skip.clone(),
            ..PolicyLists::default()
        };
        Trust::new(roots, &lists, self.home.clone(), limit)
    }

    /// What the host trusts in the roots now: the last walk's when it is young enough, else a
    /// new walk's. An error (why, and what a person can do) when the walk could not see
    /// everything: then nothing may be written. Blocking.
    pub fn current(&self) -> Known {
        let mut cache = crate::lock(&self.cache);
        if let Some((at, ttl, known)) = cache.as_ref()
            && at.elapsed() < *ttl
        {
            return known.clone();
        }
        let started = Instant::now();
        let known = self.walk().map(Arc::new).map_err(Arc::new);
        let ttl = TTL.max(started.elapsed().saturating_mul(10));
        *cache = Some((Instant::now(), ttl, known.clone()));
        known
    }

    /// Forgets the cached result: the next [`Trust::current`] walks again.
    pub fn expire(&self) {
        *crate::lock(&self.cache) = None;
    }

    fn walk(&self) -> Result<Trusted, TrustError> {
        let start = self
            .tops
            .iter()
            .map(|p| crate::open_start(p).map(|fd| (p.clone(), fd)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| TrustError::Open(std::io::Error::from(e)))?;
        let mut v = Visitor { trust: self, found: Found::default(), steer: true };
        let seen = crate::walk_beneath::<std::convert::Infallible>(start, self.limit, |l| {
            v.visit(l);
            Ok(())
        })
        .map_err(|e| match e {
            WalkError::Limit { limit } => TrustError::TooMany { limit },
            other => TrustError::Unlisted(other),
        })?;
        self.finish(v.found, seen)
    }

    /// A visitor for another complete walk of exactly this walk's roots (`tops`), when this
    /// one's result is due: the sandbox's mask walk then finds both in one pass, and hands the
    /// visitor back with [`Trust::accept`]. None when the result is fresh or the roots differ.
    pub fn visitor_for(&self, tops: &[PathBuf]) -> Option<Visitor<'_>> {
        let due = crate::lock(&self.cache).as_ref().is_none_or(|(at, ttl, _)| at.elapsed() >= *ttl);
        (due && tops == self.tops).then(|| Visitor {
            trust: self,
            found: Found::default(),
            steer: false,
        })
    }

    /// The result of a walk that carried `v` over every folder of the roots (`seen` entries),
    /// cached as this walk's own.
    pub fn accept(&self, v: Visitor<'_>, seen: usize, took: Duration) {
        let known = self.finish(v.found, seen).map(Arc::new).map_err(Arc::new);
        let ttl = TTL.max(took.saturating_mul(10));
        *crate::lock(&self.cache) = Some((Instant::now(), ttl, known));
    }

    /// What the folders of a complete walk showed, resolved: each git dir's config as git reads
    /// it, the global configs, the links.
    fn finish(&self, mut found: Found, seen: usize) -> Result<Trusted, TrustError> {
        for top in &self.tops {
            self.enclosing(top, &mut found);
        }
        let mut out = Trusted { seen, ..Trusted::default() };
        let mut budget = FILE_BUDGET;
        let global = self.global(&mut budget);
        for f in &global.files {
            self.add(&mut out, f, "a git config file the host's git reads for every repository");
        }
        let mut done = std::collections::HashSet::new();
        while let Some(g) = found.gitdirs.pop() {
            if done.insert(g.path.clone()) {
                self.git_dir(&g, &global, &mut budget, &mut out);
            }
        }
        for (link, why) in std::mem::take(&mut found.links) {
            self.add(&mut out, &link, &why);
            // A protected folder that is a link: the links inside its target lead on.
            self.links_below(&link, &mut out);
        }
        if budget == 0 {
            return Err(TrustError::TooManyConfigs);
        }
        Ok(out)
    }

    /// The repository that holds a root (`~/proj/.git` for the root `~/proj/src`): its config
    /// can name hooks or includes inside the root.
    fn enclosing(&self, top: &Path, found: &mut Found) {
        for a in top.ancestors().skip(1) {
            let dotgit = a.join(".git");
            let Ok(meta) = std::fs::symlink_metadata(&dotgit) else { continue };
            let gd = if meta.is_file() {
                match gitcfg::read(&dotgit).as_deref().and_then(gitdir_line) {
                    Some(t) => crate::lexical(&a.join(t)),
                    None => return,
                }
            } else {
                dotgit
            };
            found.gitdirs.push(GitDir { path: gd, worktrees: vec![a.to_path_buf()] });
            return;
        }
    }

    /// The system and global config files and what they name (for every repository): what a
    /// widening must not reach wherever it lies (SPEC §6).
    pub fn global(&self, budget: &mut usize) -> gitcfg::Named {
        gitcfg::global(self.home.as_deref(), budget)
    }

    /// Everything one git dir makes the host's git read or run.
    fn git_dir(&self, g: &GitDir, global: &gitcfg::Named, budget: &mut usize, out: &mut Trusted) {
        let gd = &g.path;
        let common = gitcfg::read(&gd.join("commondir"))
            .and_then(|t| first_line(&t))
            .map(|c| crate::lexical(&gd.join(c)));
        let c = common.as_deref().unwrap_or(gd);
        let shown = gd.display();
        for name in GIT_CONTROL {
            self.add(out, &gd.join(name), &format!("`{name}` of the git dir {shown}"));
            if common.is_some() {
                self.add(out, &c.join(name), &format!("`{name}` of {shown}'s common dir"));
            }
        }
        let mut named = gitcfg::Named::default();
        gitcfg::resolve(&c.join("config"), self.home.as_deref(), budget, &mut named);
        if common.is_some() {
            gitcfg::resolve(&gd.join("config"), self.home.as_deref(), budget, &mut named);
        }
        gitcfg::resolve(&gd.join("config.worktree"), self.home.as_deref(), budget, &mut named);
        for f in &named.files {
            self.add(out, f, &format!("a git config file the git dir {shown} reads"));
        }
        // Where hooks run from: the work trees (a relative `core.hooksPath` is taken from
        // there), the git dir, and the common dir (a bare repository's hooks run there).
        let mut bases: Vec<PathBuf> = g.worktrees.clone();
        bases.extend(named.worktrees.iter().map(|w| crate::lexical(&gd.join(w))));
        if let Some(t) = gitcfg::read(&gd.join("gitdir")).and_then(|t| first_line(&t)) {
            // A linked worktree's git dir names the worktree's `.git` file.
            bases.extend(crate::lexical(&gd.join(t)).parent().map(Path::to_path_buf));
        }
        bases.push(gd.clone());
        bases.push(c.to_path_buf());
        let mut hooks = vec![c.join("hooks"), gd.join("hooks")];
        for h in named.hooks_paths.iter().chain(&global.hooks_paths) {
            if h.is_absolute() {
                hooks.push(crate::lexical(h));
            } else {
                hooks.extend(bases.iter().map(|b| crate::lexical(&b.join(h))));
            }
        }
        for h in hooks {
            self.add(out, &h, &format!("the hooks folder of the git dir {shown}"));
            self.links_below(&h, out);
        }
    }

    /// The links below a protected folder reached through a link, or a hooks folder (a hook
    /// that is a link runs what it points at): each covered with its target. Bounded; the
    /// walk of the roots has already covered the ones below protected names it met by name.
    fn links_below(&self, folder: &Path, out: &mut Trusted) {
        let (_, real) = follow(folder);
        let mut stack = vec![real];
        let mut left = LINKS_BELOW;
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else { continue };
            for e in entries.flatten() {
                if left == 0 {
                    return;
                }
                left -= 1;
                match e.file_type() {
                    Ok(t) if t.is_symlink() => {
                        let why = format!("a link below {}", folder.display());
                        self.add(out, &e.path(), &why);
                    }
                    Ok(t) if t.is_dir() => stack.push(e.path()),
                    _ => {}
                }
            }
        }
    }

    /// Records `path` (lexical, absolute) followed through its links: each link on the way
    /// and the real place, inside a root as a path, outside every root as a place.
    fn add(&self, out: &mut Trusted, path: &Path, why: &str) {
        let (links, real) = follow(path);
        for p in links.iter().chain([&real]) {
            if self.roots.iter().any(|r| p.starts_with(r)) {
                out.paths.entry(p.clone()).or_insert_with(|| why.to_string());
                let folded = crate::fold::folded_path(p.as_os_str().as_bytes());
                out.folded.entry(folded).or_insert_with(|| why.to_string());
            } else if p == &real && !out.outside.iter().any(|(_, o)| o == p) {
                out.outside.push((path.to_path_buf(), p.clone()));
            }
        }
    }
}

/// What a walk of the roots gathers for [`Trust`], folder by folder.
pub struct Visitor<'a> {
    trust: &'a Trust,
    found: Found,
    /// Decides which folders the walk enters (its own walk); else the other walk does.
    steer: bool,
}

impl Visitor<'_> {
    /// One folder of a complete walk: git dirs by what they hold or their name, `.git` files and
    /// links, and protected names that are symbolic links.
    pub fn visit(&mut self, l: &mut crate::Listing<'_>) {
        let (trust, found) = (self.trust, &mut self.found);
        let folder = l.folder;
        let Some(_) = folder.fd else { return };
        let kind_of = |name: &str, k: FileType| l.get(name).is_some_and(|i| i.kind == k);
        let named_git = folder.path.file_name() == Some(OsStr::new(".git"));
        let in_modules = folder.path.parent().is_some_and(|p| {
            p.file_name() == Some(OsStr::new("modules"))
                && p.parent().and_then(Path::file_name) == Some(OsStr::new(".git"))
        });
        let holds = kind_of("HEAD", FileType::RegularFile)
            && (kind_of("commondir", FileType::RegularFile)
                || (kind_of("objects", FileType::Directory)
                    && kind_of("refs", FileType::Directory)));
        if named_git || in_modules || holds {
            let worktrees = match (named_git, folder.path.parent()) {
                (true, Some(p)) => vec![p.to_path_buf()],
                _ => Vec::new(),
            };
            found.gitdirs.push(GitDir { path: folder.path.to_path_buf(), worktrees });
        }
        let root = trust.tops.iter().find(|r| folder.path.starts_with(r));
        // Most entries are plain files and folders: no path is built for them.
        for item in l.entries.iter_mut() {
            match item.kind {
                FileType::Directory if self.steer => {
                    item.descend = trust.skip.is_empty()
                        || !trust.skip.iter().any(|d| folder.path.join(&item.name).starts_with(d));
                }
                FileType::RegularFile if item.name == ".git" => {
                    let path = folder.path.join(&item.name);
                    found.links.push((path, "a `.git` file: it names the git dir".into()));
                    if let Some(head) = folder.read_head(&item.name, 4096)
                        && let Some(target) = gitdir_line(&head)
                    {
                        let gd = crate::lexical(&folder.path.join(target));
                        let worktrees = vec![folder.path.to_path_buf()];
                        found.gitdirs.push(GitDir { path: gd, worktrees });
                    }
                }
                FileType::Symlink if item.name == ".git" => {
                    let path = folder.path.join(&item.name);
                    found.links.push((path.clone(), "a `.git` link: it names the git dir".into()));
                    let worktrees = vec![folder.path.to_path_buf()];
                    found.gitdirs.push(GitDir { path, worktrees });
                }
                FileType::Symlink => {
                    // A protected name (or a name below one) that is a link: what it points
                    // at is what the host's program reads.
                    let path = folder.path.join(&item.name);
                    if let Some(root) = root
                        && let Ok(rel) = path.strip_prefix(root)
                        && let Some(rule) = trust.rules.protected(rel)
                    {
                        let why = format!("a protected name (rule `{rule}`) links here");
                        found.links.push((path, why));
                    }
                }
                _ => {}
            }
        }
    }
}

/// A git dir the walk met, and the work trees known to use it.
struct GitDir {
    path: PathBuf,
    worktrees: Vec<PathBuf>,
}

#[derive(Default)]
struct Found {
    gitdirs: Vec<GitDir>,
    /// Links and `.git` files to protect with their targets, and why.
    links: Vec<(PathBuf, String)>,
}

/// The git dir a `.git` file names (`gitdir: <path>` on its first line).
pub fn gitdir_line(text: &[u8]) -> Option<PathBuf> {
    let text = std::str::from_utf8(text).ok()?;
    let target = text.lines().next()?.strip_prefix("gitdir:")?.trim();
    (!target.is_empty()).then(|| PathBuf::from(target))
}

fn first_line(text: &[u8]) -> Option<PathBuf> {
    let line = text.split(|&b| b == b'\n').next()?;
    let line = line.strip_suffix(b"\r").unwrap_or(line).trim_ascii();
    (!line.is_empty()).then(|| PathBuf::from(OsStr::from_bytes(line)))
}

/// `path` (absolute) with every symbolic link on it followed, as the kernel would, up to
/// [`MAX_LINKS`]: the links met (each under a real parent) and the real place (a missing part
/// kept as named). Reads links only; opens nothing.
pub fn follow(path: &Path) -> (Vec<PathBuf>, PathBuf) {
    let mut links = Vec::new();
    let mut done = PathBuf::from("/");
    let mut rest: Vec<OsString> = Vec::new();
    push_front(&mut rest, path);
    let mut hops = 0;
    let mut missing = false;
    while let Some(c) = rest.pop() {
        if c == ".." {
            done.pop();
            continue;
        }
        let next = done.join(&c);
        if !missing && let Ok(meta) = std::fs::symlink_metadata(&next) {
            if meta.file_type().is_symlink() && hops < MAX_LINKS {
                hops += 1;
                links.push(next.clone());
                if let Ok(t) = std::fs::read_link(&next) {
                    if t.is_absolute() {
                        done = PathBuf::from("/");
                    }
                    push_front(&mut rest, &t);
                    continue;
                }
            }
        } else {
            missing = true;
        }
        done = next;
    }
    (links, done)
}

/// Puts the components of `p` on the stack so they are popped in order (`..` kept as such).
fn push_front(stack: &mut Vec<OsString>, p: &Path) {
    let comps: Vec<OsString> = p
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            _ => None,
        })
        .collect();
    stack.extend(comps.into_iter().rev());
}

#[cfg(test)]
#[path = "trust_tests.rs"]
mod tests;
