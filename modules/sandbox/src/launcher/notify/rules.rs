//! What a command may not create while it runs (decision 0046, 0054): under a writable root,
//! a `.git`, a name matching a protected rule anywhere in its path, an absolute path the spec
//! protects or masks (what the host's git resolves — a hooks folder `core.hooksPath` names
//! that does not exist yet, an included config — and missing denied or credential paths such
//! as `~/.ssh`), and the last piece of a git dir under another name. With `new_repositories =
//! "allow"`, a `.git` folder the run makes is its own, except the files through which the
//! person's git would run something: its `config` comes in only through git's lock file, read
//! and checked by the init ([`Verdict::CheckConfig`]), and its hooks folder takes only
//! `*.sample` files.

use hands_roots::fold;
use std::collections::HashSet;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// How a call makes its new entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `open(O_CREAT)`, `creat`, `mknod`.
    File,
    /// `mkdir`.
    Dir,
    /// `symlink`: it brings a target along.
    Symlink,
    /// `rename`: it brings content (a folder's whole tree) along.
    Rename,
    /// `link`: it brings a file's content along.
    Link,
}

impl Kind {
    fn carries(self) -> bool {
        matches!(self, Kind::Symlink | Kind::Rename | Kind::Link)
    }
}

/// What the init does with a new entry.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    Refuse(String),
    /// A rename onto the `config` of a repository the run made: the init reads the source,
    /// checks it (`hands_roots::gitcfg::refusal_for_new_repository`) and puts a copy it wrote
    /// itself in place, which no descriptor of the command's reaches.
    CheckConfig,
}

/// Why a write or a create in a read-only root whose bind is gone is refused.
pub const READ_ONLY_GONE: &str = "it lies in a read-only root whose read-only bind is gone (the host \
     moved the folder aside or replaced it while the command ran); a person can restart the \
     daemon to bind the folder there now";

/// The lock of the folder `dir` when the new entry `name` is a `HEAD` or a git control name
/// (`hands_roots::trust::lock_folder`), to hold while it is checked and made: the file tools
/// and every other sandbox's init check such names under the same lock, so that no two of
/// them each see the folder without the other's piece. When it cannot be taken (another
/// holds it for two seconds, or the folder cannot be read) the entry is refused: [`UNLOCKED`].
pub(crate) fn piece_lock(
    dir: std::os::fd::BorrowedFd<'_>,
    name: &[u8],
) -> std::io::Result<Option<std::os::fd::OwnedFd>> {
    use hands_roots::trust::{is_piece_name, lock_folder};
    if !is_piece_name(super::trim_slashes(name)) {
        return Ok(None);
    }
    lock_folder(dir).map(Some)
}

/// Why a `HEAD` or a git control name is refused when its folder cannot be locked.
pub const UNLOCKED: &str = "its folder could not be locked while a git dir's `HEAD` or control \
     file is checked (another process holds the lock, or the folder cannot be read)";

/// The files of a git dir through which git reads config or moves where it reads it from.
const CONTROL: &[&[u8]] = &[b"config", b"config.worktree", b"commondir"];

/// What may not be created, from the spec.
#[derive(Debug, Clone)]
pub struct Walls {
    /// Every root: (path, writable). A read-only root's own binds already refuse creates.
    roots: Vec<(PathBuf, bool)>,
    /// The protected rules, split into components (`*` is any one component, `**` one or
    /// more: `hands_roots::rule_fits`), lowercased.
    rules: Vec<Vec<Vec<u8>>>,
    /// Every component the rules name literally, sorted: a path none of whose components is
    /// one matches no rule (when every rule starts with a literal), which is most creates.
    literals: Vec<Vec<u8>>,
    /// Every rule starts with a literal component.
    literal_first: bool,
    /// Absolute paths no new entry may have or lie beneath (lowercased bytes): the spec's
    /// protected and masked paths.
    exact: HashSet<Vec<u8>>,
    /// Every folder above one of `exact`: a name a rename or link must not take.
    above: HashSet<Vec<u8>>,
    /// With `new_repositories = "allow"`: what the run made; None: a new `.git` is refused.
    made: Option<Arc<Mutex<Made>>>,
    /// The home's carried caches, shared with the other runs over the same roots: no unix
    /// socket is made in them (decision 0107; a socket cannot be renamed or linked in, since
    /// each is a mount of its own).
    pub(super) caches: Vec<PathBuf>,
}

/// The repositories a run made, and the configs the init wrote for them.
#[derive(Debug, Default)]
struct Made {
    /// `.git` folders made by this run (a name that did not exist when it was asked for).
    dirs: Vec<PathBuf>,
    /// Where the init put a checked config: the file at each of these names is never opened
    /// for writing, nor given a second name. Compared by the identity found there now, not
    /// one remembered (an inode number is reused once its file is gone); a config moved away
    /// and back is checked again on its way back.
    configs: Vec<PathBuf>,
}

/// A path as a case-folding folder compares it with the protected ones ([`fold`]), component
/// by component.
fn lower(p: &Path) -> Vec<u8> {
    fold::folded_path(p.as_os_str().as_bytes())
}

impl Walls {
    /// The walls of `spec`: [`Walls::new`] of its parts, and its home's carried caches.
    pub fn of(spec: &super::super::Spec) -> Walls {
        let absolute = [&spec.protected[..], &spec.masked[..]];
        let mut w =
            Walls::new(&spec.roots, &spec.protected_rules, &absolute, spec.new_repositories);
        w.caches = spec.keep.iter().map(|rel| spec.home.join(rel)).collect();
        w
    }

    /// The walls of a spec: its roots, protected rules, the absolute paths it protects and
    /// masks, and whether new repositories are allowed.
    pub fn new(
        roots: &[super::super::Root],
        rules: &[String],
        absolute: &[&[PathBuf]],
        new_repositories: bool,
    ) -> Walls {
        let rules: Vec<Vec<Vec<u8>>> = rules
            .iter()
            .map(|r| {
                r.trim_matches('/')
                    .split('/')
                    .filter(|c| !c.is_empty())
                    .map(|c| fold::folded(c.as_bytes()).into_owned())
                    .collect::<Vec<_>>()
            })
            .filter(|r| !r.is_empty())
            .collect();
        let wild = |c: &[u8]| c == b"*" || c == b"**";
        let mut literals: Vec<Vec<u8>> =
            rules.iter().flatten().filter(|c| !wild(c)).cloned().collect();
        literals.sort();
        literals.dedup();
        let literal_first = rules.iter().all(|r| !wild(&r[0]));
        let roots: Vec<(PathBuf, bool)> =
            roots.iter().map(|r| (r.path.clone(), r.writable)).collect();
        let (mut exact, mut above) = (HashSet::new(), HashSet::new());
        for p in absolute.iter().flat_map(|l| l.iter()) {
            // A denied folder written with a trailing `/` names the folder itself.
            let p: PathBuf = p.components().collect();
            // Only what lies below a writable root can be made by a command at all.
            let Some(root) = roots.iter().find(|(r, w)| *w && p.starts_with(r) && p != *r) else {
                continue;
            };
            exact.insert(lower(&p));
            for a in p.ancestors().skip(1).take_while(|a| a.starts_with(&root.0) && *a != root.0) {
                above.insert(lower(a));
            }
        }
        let made = new_repositories.then(Default::default);
        Walls { roots, rules, literals, literal_first, exact, above, made, caches: Vec::new() }
    }

    /// With `new_repositories = "allow"`, writes to existing files are checked too (a config
    /// the init wrote for a new repository is never opened for writing).
    pub fn watches_writes(&self) -> bool {
        self.made.is_some()
    }

    /// Whether (device, inode) is the file now at a name where the init put a checked config
    /// for a repository the run made.
    pub fn sealed(&self, id: (u64, u64)) -> bool {
        use std::os::unix::fs::MetadataExt;
        let Some(m) = &self.made else { return false };
        hands_roots::lock(m)
            .configs
            .iter()
            .filter_map(|p| std::fs::symlink_metadata(p).ok())
            .any(|st| (st.dev(), st.ino()) == id)
    }

    /// Records that the init put a checked config at `path`.
    pub fn seal(&self, path: PathBuf) {
        if let Some(m) = &self.made {
            let mut m = hands_roots::lock(m);
            if !m.configs.contains(&path) {
                m.configs.push(path);
            }
        }
    }

    /// Whether the innermost root holding `parent` is a read-only one. Its bind refuses every
    /// write while it lasts; one the host moved aside or renamed over (a nested read-only root
    /// is mounted on the host's entry) leaves the host's new folder writable through the
    /// writable root around it, so the init refuses there itself (decision 0079).
    pub fn in_read_only_root(&self, parent: &Path) -> bool {
        let innermost = self.roots.iter().filter(|(r, _)| parent.starts_with(r));
        innermost.max_by_key(|(r, _)| r.components().count()).is_some_and(|(_, w)| !w)
    }

    /// The innermost root holding `parent`, when it is writable.
    fn writable_root(&self, parent: &Path) -> Option<&Path> {
        let (root, writable) = self
            .roots
            .iter()
            .filter(|(r, _)| parent.starts_with(r))
            .max_by_key(|(r, _)| r.components().count())?;
        writable.then_some(root.as_path())
    }

    /// Why a new entry `name` in the folder `parent` is refused because with it the folder
    /// would be a git dir under another name, or arm one: git run in that folder on the host
    /// would use its config or hooks. Three ways: the entry completes one (`HEAD`, and
    /// `commondir` or `refs` + `objects`, as git's discovery checks); it is a control file
    /// beside a `HEAD` or a `HEAD` beside one (`config`, `config.worktree`, `commondir`,
    /// `hooks`: the file tools' and checkouts' own rule, [`GitDirPiece`], so that no order of
    /// the tools and commands puts both in one folder); or it lies below the `hooks` of a
    /// folder holding `HEAD` (a repository the run made, renamed out of its `.git`). Folders
    /// inside a `.git` are git's own (an existing one's control files are walled by name; a new
    /// one's are checked). `present` says whether an entry exists there (the new one counts).
    pub fn makes_git_dir(
        &self,
        parent: &Path,
        name: &[u8],
        present: impl Fn(&[u8]) -> bool,
    ) -> Option<String> {
        use hands_roots::trust::GitDirPiece;
        let name = super::trim_slashes(name);
        let root = self.writable_root(parent)?;
        let rel = parent.strip_prefix(root).ok()?;
        let dot_git = |c: &OsStr| fold::same(c.as_bytes(), b".git");
        if rel.iter().any(dot_git) {
            return None;
        }
        // Below `hooks` of a folder holding `HEAD`, looked at by path: no `HEAD` can join a
        // `hooks` meanwhile (the rule below refuses it), so a folder that holds both held them
        // before the run or came whole.
        let armed = hands_roots::trust::hooks_owners(rel)
            .any(|g| std::fs::symlink_metadata(root.join(g).join("HEAD")).is_ok());
        if armed {
            return Some(
                "it would be a hook of a git dir (the folder above `hooks` holds HEAD) inside a \
                 root: git run there on the host would run it"
                    .to_string(),
            );
        }
        let parts: [&[u8]; 7] =
            [b"HEAD", b"refs", b"objects", b"commondir", b"config", b"config.worktree", b"hooks"];
        if !parts.iter().any(|p| fold::same(p, name)) {
            return None;
        }
        let text = std::str::from_utf8(name).ok()?;
        if GitDirPiece::of(text, |c| present(c.as_bytes())).is_some() {
            return Some(
                "a git dir's `HEAD` and its config or hooks (`config`, `config.worktree`, \
                 `commondir`, `hooks`) are never made side by side inside a root: with \
                 `objects` and `refs` beside them, git run in that folder on the host would use \
                 that config and run those hooks"
                    .to_string(),
            );
        }
        let git_dir = present(b"HEAD")
            && (present(b"commondir") || (present(b"refs") && present(b"objects")));
        git_dir.then(|| {
            "it would make this folder a git dir (HEAD with commondir, or refs and objects) inside \
             a root: git run there on the host would use its config"
                .to_string()
        })
    }

    /// What to do with a new entry `name` in the folder whose real path is `parent`, made as
    /// `kind` says.
    pub fn verdict(&self, parent: &Path, name: &[u8], kind: Kind) -> Verdict {
        let name = super::trim_slashes(name);
        if name.is_empty() || name == b"." || name == b".." || name.contains(&b'/') {
            return Verdict::Allow;
        }
        // The innermost root holding the folder decides; none, or a read-only one: no check
        // (outside the roots are the sandbox's own /tmp and home, and read-only binds).
        let Some(root) = self.writable_root(parent) else { return Verdict::Allow };
        let full = parent.join(OsStr::from_bytes(name));
        if let Some(why) = self.absolute(root, &full, kind) {
            return Verdict::Refuse(why);
        }
        let Ok(rel) = parent.strip_prefix(root) else { return Verdict::Allow };
        let mut rel: Vec<Vec<u8>> =
            rel.components().map(|c| fold::folded(c.as_os_str().as_bytes()).into_owned()).collect();
        rel.push(fold::folded(name).into_owned());
        if let Some(made) = &self.made {
            let mut made = hands_roots::lock(made);
            if rel.last().is_some_and(|n| n == b".git") {
                if kind != Kind::Dir {
                    return Verdict::Refuse(
                        "a `.git` file or link inside a root: it would point the host's git at a \
                         git dir of its choosing (new repositories are made with `git init`, a \
                         folder)"
                            .into(),
                    );
                }
                // Only a `.git` that is not there yet becomes the run's own: an existing
                // repository's git dir keeps its walls (the mkdir fails with EEXIST).
                if std::fs::symlink_metadata(&full).is_err() {
                    made.dirs.push(full);
                }
                return Verdict::Allow;
            }
            if let Some(m) = made.dirs.iter().find(|m| full.starts_with(m)) {
                return inside_new_repository(full.strip_prefix(m).unwrap_or(&full), kind);
            }
        }
        if rel.last().is_some_and(|n| n == b".git") {
            return Verdict::Refuse(
                "a `.git` folder or file inside a root: a git on the host (the person's, an \
                 editor's) would run what its config names"
                    .into(),
            );
        }
        self.relative(&rel, kind).map_or(Verdict::Allow, Verdict::Refuse)
    }

    /// Why the existing file whose real path is `path` may not be opened for writing
    /// (decision 0079): a new entry at its name would be refused (a host rename over a
    /// protected file takes the read-only bind off it in every sandbox, so the bind alone
    /// does not hold for a command that outlives it), or it is the lock file through which git
    /// replaces one (`.git/config.lock` becomes `.git/config` when the host's git renames it;
    /// a descriptor the command held would then write the config). `None`: it may be written.
    pub fn written(&self, path: &Path) -> Option<String> {
        let (parent, name) = (path.parent()?, path.file_name()?.as_bytes());
        if self.in_read_only_root(parent) {
            return Some(format!("{}: {READ_ONLY_GONE}", super::WRITTEN));
        }
        let lock = name.len().checked_sub(5).map(|n| name.split_at(n));
        let stem = lock.filter(|(s, l)| !s.is_empty() && l.eq_ignore_ascii_case(b".lock"));
        for n in std::iter::once(name).chain(stem.map(|(s, _)| s)) {
            if let Verdict::Refuse(why) = self.verdict(parent, n, Kind::File) {
                let lock =
                    if n == name { "" } else { " (this is the lock file git renames onto it)" };
                return Some(format!(
                    "{}{lock}, where a new file would be refused too ({why}); the host may \
                     have replaced it while the command ran, which takes its read-only wall off",
                    super::WRITTEN
                ));
            }
        }
        None
    }

    /// The spec's absolute paths: the new entry is one, lies below one, or (carried) leads to
    /// one. Walked from the root down, stopping at the first folder that leads to none: one
    /// lookup for most creates.
    fn absolute(&self, root: &Path, full: &Path, kind: Kind) -> Option<String> {
        if self.exact.is_empty() {
            return None;
        }
        let low = lower(full);
        let start = root.as_os_str().len();
        let ends = (start + 1..low.len()).filter(|&i| low[i] == b'/').chain([low.len()]);
        for end in ends {
            let p = &low[..end];
            if self.exact.contains(p) {
                return Some(format!(
                    "{} is read or run by a program on the host (git's config, hooks and \
                     includes as git resolves them, a protected name's target) or is a denied \
                     path; a command may neither create nor write it",
                    // As written (lowering keeps every byte where it was).
                    String::from_utf8_lossy(&full.as_os_str().as_bytes()[..end])
                ));
            }
            if !self.above.contains(p) {
                return None;
            }
        }
        // The new name itself leads to one of the paths.
        kind.carries().then(|| {
            "a name on the way to a path the host reads or a denied path: what it brings along \
             would appear there"
                .to_string()
        })
    }

    /// The protected rules, anywhere in the path relative to the root.
    fn relative(&self, rel: &[Vec<u8>], kind: Kind) -> Option<String> {
        if self.literal_first && !rel.iter().any(|c| self.literals.binary_search(c).is_ok()) {
            return None;
        }
        for rule in &self.rules {
            // A protected folder covers what is inside it.
            if hands_roots::rule_within(rule, rel) {
                return Some(format!(
                    "a protected path (rule `{}` of sandbox-profiles/protected.txt): programs on \
                     the host read it",
                    shown_rule(rule)
                ));
            }
            // A folder renamed or linked to a name on the way to a protected path would bring
            // that path along.
            if kind.carries() {
                for k in 1..rule.len() {
                    if hands_roots::rule_ends(&rule[..k], rel) {
                        return Some(format!(
                            "a name on the way to a protected path (rule `{}`): what it brings \
                             along would be read by programs on the host",
                            shown_rule(rule)
                        ));
                    }
                }
            }
        }
        None
    }
}

/// Inside a `.git` the run made (`rel` is below it): everything is the new repository's own
/// but what would make the person's git run something — its config files and its hooks.
fn inside_new_repository(rel: &Path, kind: Kind) -> Verdict {
    let comps: Vec<Vec<u8>> = rel.iter().map(|c| fold::folded(c.as_bytes()).into_owned()).collect();
    let Some(last) = comps.last() else { return Verdict::Allow };
    // Refs, reflogs and objects may have any name (a branch called `config`).
    let data =
        comps.first().is_some_and(|c| [&b"refs"[..], b"logs", b"objects"].contains(&c.as_slice()));
    if !data && CONTROL.contains(&last.as_slice()) {
        if last == b"config" && kind == Kind::Rename {
            return Verdict::CheckConfig;
        }
        return Verdict::Refuse(
            "a config file of a repository a command made: git writes it through its lock file, \
             and what it may hold is checked (a key naming a program would run on the person's \
             git status, or the git status of the repository that records this one)"
                .into(),
        );
    }
    if let Some(i) = comps.iter().position(|c| c == b"hooks").filter(|_| !data) {
        if i + 1 == comps.len() {
            // The folder itself: made empty by `git init`; never carried in whole.
            return if kind == Kind::Dir {
                Verdict::Allow
            } else {
                Verdict::Refuse("the hooks folder of a repository a command made".into())
            };
        }
        if !(last.ends_with(b".sample") && matches!(kind, Kind::File | Kind::Rename)) {
            return Verdict::Refuse(
                "a hook of a repository a command made: the person's git would run it (only \
                 `*.sample` files, which git never runs, may be made there)"
                    .into(),
            );
        }
    }
    Verdict::Allow
}

fn shown_rule(rule: &[Vec<u8>]) -> String {
    rule.iter().map(|c| String::from_utf8_lossy(c).into_owned()).collect::<Vec<_>>().join("/")
}

#[cfg(test)]
#[path = "rules_tests.rs"]
mod tests;

#[cfg(test)]
mod cost {
    use super::*;

    /// What the rules add to each notified create (`cargo test -p hands-sandbox -- --ignored
    /// verdict_cost --nocapture`): a spec with 2,000 absolute paths, a create 8 folders deep.
    #[test]
    #[ignore = "a cost probe: --ignored --nocapture"]
    #[allow(clippy::print_stderr)] // the figures, for the record
    fn verdict_cost() {
        let roots = vec![super::super::super::Root { path: "/w".into(), writable: true }];
        let rules: Vec<String> = crate::profiles::protected().map(str::to_string).collect();
        let abs: Vec<PathBuf> = (0..2000).map(|i| PathBuf::from(format!("/w/p{i}/.env"))).collect();
        let parent = Path::new("/w/target/debug/build/x-1234/out/a/b");
        let n = 50_000;
        for (what, abs) in [("no absolute paths", &[][..]), ("2000 absolute paths", &abs[..])] {
            let w = Walls::new(&roots, &rules, &[abs], false);
            let t = std::time::Instant::now();
            for _ in 0..n {
                assert_eq!(w.verdict(parent, b"file.o", Kind::File), Verdict::Allow);
            }
            let per = t.elapsed() / n;
            let t = std::time::Instant::now();
            for _ in 0..n {
                assert!(w.absolute(Path::new("/w"), &parent.join("file.o"), Kind::File).is_none());
            }
            let abs_part = t.elapsed() / n;
            eprintln!(
                "verdict: {per:?} per create, of which absolute {abs_part:?} ({what}, {} rules)",
                rules.len()
            );
        }
    }
}
