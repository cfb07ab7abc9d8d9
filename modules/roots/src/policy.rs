//! What no tool may touch (denied and credential paths, by name and by file identity), which
//! files count as secrets, and which paths inside writable roots are read-only.

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use rustix::fs::Stat;
use std::collections::HashSet;
use std::convert::Infallible;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Entries below a denied folder that are indexed by identity at startup; past this the
/// name check still holds but a hard link to a deeper file would not be recognised.
const IDENTITY_SCAN_LIMIT: usize = 50_000;

/// The policy lists as data (from `sandbox-profiles/` and the config), before compilation.
#[derive(Debug, Clone, Default)]
pub struct PolicyLists {
    /// Credential paths (`~` already expanded by the caller).
    pub credentials: Vec<PathBuf>,
    /// The runner's `sandbox.deny` (`~` already expanded).
    pub deny: Vec<PathBuf>,
    /// Secret file-name patterns (globs matched against the file name).
    pub secret_patterns: Vec<String>,
    /// File names that match a secret pattern but are not secrets (`.env.example`).
    pub secret_exceptions: Vec<String>,
    /// Protected relative paths (`.git/hooks`), matched at any depth inside a root.
    pub protected: Vec<String>,
    /// Absolute paths the host trusts (the daemon's binary and config, a start-up file of the
    /// home): read-only to every tool, by name and by file identity, existing or not.
    pub host_paths: Vec<HostPath>,
}

/// A path the host trusts (SPEC §3, "What the host trusts is out of reach"): something a
/// program outside the sandbox loads or runs later without a person looking at it. Wherever it
/// lies in a root it is read-only to every tool and command, under its own name, its real
/// name (a link's target) and any other name of the same file (a hard link).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPath {
    /// Absolute, as the daemon found it (`~` expanded).
    pub path: PathBuf,
    /// What it is, for a person: "the daemon's own binary".
    pub what: String,
    /// What a person can do instead, naming the config key where there is one.
    pub remedy: String,
}

#[derive(Debug)]
struct HostEntry {
    /// As given, and canonical when it exists and differs (a dotfile linked elsewhere).
    clean: Vec<PathBuf>,
    entry: HostPath,
}

#[derive(Debug)]
struct DeniedPath {
    /// As configured, and canonical when it exists (both are checked by name).
    names: Vec<PathBuf>,
    /// `names` rebuilt from their components (no `//`, `.` or trailing `/`), for the byte-wise
    /// prefix test in [`under`].
    clean: Vec<PathBuf>,
    why: &'static str,
}

/// The compiled policy a [`crate::Resolver`] enforces.
#[derive(Debug)]
pub struct Policy {
    denied: Vec<DeniedPath>,
    /// (device, inode) of every denied path and of everything beneath the denied folders.
    identities: HashSet<(u64, u64)>,
    secrets: GlobSet,
    secret_exceptions: GlobSet,
    /// The protected rules in components, folded and matched against folded names
    /// ([`crate::fold`]: a case-folding folder answers `.envrc` to `.ENVRC`), and as given,
    /// for a person.
    protected: Vec<Vec<String>>,
    protected_shown: Vec<String>,
    host: Vec<HostEntry>,
    /// (device, inode) of every trusted path and what lies beneath a trusted folder, with the
    /// index of its entry in `host`.
    host_ids: std::collections::HashMap<(u64, u64), usize>,
}

impl Policy {
    /// Compiles the lists; fails only on an invalid secret pattern.
    pub fn new(lists: &PolicyLists) -> Result<Policy, globset::Error> {
        let mut denied = Vec::new();
        let mut identities = HashSet::new();
        let all = lists
            .credentials
            .iter()
            .map(|p| (p, "credential denylist"))
            .chain(lists.deny.iter().map(|p| (p, "sandbox.deny")));
        for (p, why) in all {
            let mut names = vec![p.clone()];
            if let Ok(c) = std::fs::canonicalize(p)
                && &c != p
            {
                names.push(c);
            }
            index_identities(p, &mut identities);
            let clean = names.iter().map(|n| n.components().collect()).collect();
            denied.push(DeniedPath { names, clean, why });
        }
        let mut host = Vec::new();
        let mut host_ids = std::collections::HashMap::new();
        for t in &lists.host_paths {
            // As given; through the real path of its folder (a home or `~/.config` that is a
            // link); and as the file itself resolves (a dotfile linked into a dotfiles folder).
            let real_parent = match (t.path.parent(), t.path.file_name()) {
                (Some(dir), Some(name)) => Some(crate::lenient_canonical(dir).join(name)),
                _ => None,
            };
            let mut clean: Vec<PathBuf> = Vec::new();
            let names = std::iter::once(Some(t.path.clone()))
                .chain([real_parent, std::fs::canonicalize(&t.path).ok()]);
            for n in names.flatten() {
                let n: PathBuf = n.components().collect();
                if !clean.contains(&n) {
                    clean.push(n);
                }
            }
            let mut ids = HashSet::new();
            index_identities(&t.path, &mut ids);
            for id in ids {
                host_ids.entry(id).or_insert(host.len());
            }
            host.push(HostEntry { clean, entry: t.clone() });
        }
        let (protected, protected_shown) = compile_rules(&lists.protected);
        Ok(Policy {
            denied,
            identities,
            secrets: build_set(&lists.secret_patterns)?,
            secret_exceptions: build_set(&lists.secret_exceptions)?,
            protected,
            protected_shown,
            host,
            host_ids,
        })
    }

    /// The trusted path `abs` is or lies beneath (by name: as given or its real name), or whose
    /// file `dev_ino` is (a hard link, another name of it): a write there is refused.
    pub fn host_path(&self, abs: &Path, dev_ino: Option<(u64, u64)>) -> Option<&HostPath> {
        let clean = is_clean(abs);
        // As a case-folding folder finds names too (decision 0094): `write DAEMON.TOML` there
        // is the config the next daemon loads.
        let named = |n: &PathBuf| under(abs, n, clean) || folded_under(abs, n);
        if let Some(t) = self.host.iter().find(|t| t.clean.iter().any(named)) {
            return Some(&t.entry);
        }
        let i = dev_ino.and_then(|id| self.host_ids.get(&id))?;
        self.host.get(*i).map(|t| &t.entry)
    }

    /// Whether (device, inode) is a trusted file or folder (or lies beneath one).
    pub fn is_host_identity(&self, dev: u64, ino: u64) -> bool {
        self.host_ids.contains_key(&(dev, ino))
    }

    /// Every name of every trusted path (as given, and its real name where that differs).
    pub fn host_paths(&self) -> impl Iterator<Item = (&Path, &HostPath)> {
        self.host.iter().flat_map(|t| t.clean.iter().map(move |n| (n.as_path(), &t.entry)))
    }

    /// A policy of protected rules alone (nothing denied, nothing secret): the rules'
    /// matching, for a walk that needs only them.
    pub fn rules_only(protected: &[String]) -> Policy {
        let (protected, protected_shown) = compile_rules(protected);
        Policy {
            denied: Vec::new(),
            identities: HashSet::new(),
            secrets: GlobSet::empty(),
            secret_exceptions: GlobSet::empty(),
            protected,
            protected_shown,
            host: Vec::new(),
            host_ids: std::collections::HashMap::new(),
        }
    }

    /// Why `abs` is denied, if it is: by name (it or an ancestor is a denied path) or by the
    /// identity of the object `stat` describes.
    pub fn denied(&self, abs: &Path, stat: Option<&Stat>) -> Option<String> {
        self.denied_ids(abs, stat.map(|s| (s.st_dev, s.st_ino)))
    }

    /// [`Policy::denied`] with a bare (device, inode) pair.
    pub fn denied_ids(&self, abs: &Path, dev_ino: Option<(u64, u64)>) -> Option<String> {
        let clean = is_clean(abs);
        // Folded as well (decision 0094): a case-folding home opens `~/.ssh` for `~/.SSH`.
        let named = |n: &PathBuf| under(abs, n, clean) || folded_under(abs, n);
        for d in &self.denied {
            if d.clean.iter().any(named) {
                return Some(format!("{} entry {}", d.why, d.names[0].display()));
            }
        }
        if let Some(id) = dev_ino
            && self.identities.contains(&id)
        {
            return Some("same file as a denied path (hard link or alias)".to_string());
        }
        None
    }

    /// Whether (device, inode) is a denied or credential file or folder (or lies beneath one).
    pub fn is_denied_identity(&self, dev: u64, ino: u64) -> bool {
        self.identities.contains(&(dev, ino))
    }

    /// Whether the file name of `abs` matches a secret pattern and no exception, as a
    /// case-folding folder finds names ([`crate::fold`]: `read .ENV` there opens `.env`).
    pub fn is_secret(&self, abs: &Path) -> bool {
        let Some(name) = abs.file_name() else { return false };
        let name = crate::fold::folded(name.as_bytes());
        let name = std::ffi::OsStr::from_bytes(&name);
        self.secrets.is_match(name) && !self.secret_exceptions.is_match(name)
    }

    /// Whether an entry named `name` can be a protected path itself: the last component of
    /// some protected rule (`hooks`, `config`, `.vscode`, ...). A cheap test before
    /// [`Policy::protected`].
    pub fn protected_leaf(&self, name: &std::ffi::OsStr) -> bool {
        // Folded once: the masks' walk asks this of every entry of the roots.
        let name = crate::fold::folded(name.as_bytes());
        self.protected.iter().any(|rule| {
            rule.last().is_some_and(|l| l == "*" || l == "**" || l.as_bytes() == name.as_ref())
        })
    }

    /// The protected rule `rel` (relative to its root) falls under, if any ([`rule_within`]:
    /// `.git/modules/**/hooks` is the hooks of a submodule of any name, `a/b` included).
    pub fn protected(&self, rel: &Path) -> Option<String> {
        let comps: Vec<Vec<u8>> =
            rel.iter().map(|c| crate::fold::folded(c.as_bytes()).into_owned()).collect();
        let i = self.protected.iter().position(|rule| rule_within(rule, &comps))?;
        self.protected_shown.get(i).cloned()
    }

    /// The denied names (as configured and in canonical form) that can be a prefix of an entry
    /// beneath `base`: those inside it or above it. A walk or a listing compares its entries
    /// with these only; the dozens of others can never match there.
    pub fn denied_near(&self, base: &Path) -> Vec<PathBuf> {
        let near = |n: &Path| {
            if is_clean(base) {
                under(n, base, true) || under(base, n, true)
            } else {
                n.starts_with(base) || base.starts_with(n)
            }
        };
        self.denied.iter().flat_map(|d| &d.clean).filter(|n| near(n)).cloned().collect()
    }

    /// The configured denied and credential paths (for the doctor and the sandbox masks).
    pub fn denied_paths(&self) -> impl Iterator<Item = &Path> {
        self.denied.iter().map(|d| d.names[0].as_path())
    }
}

/// `abs.starts_with(prefix)` (component-wise) for a `prefix` rebuilt from its components.
/// When `abs` is clean too, as every path the resolver and the walks build is, comparing bytes
/// gives the same answer without parsing components: this runs for every file a `grep` opens,
/// against every denied and credential path.
fn under(abs: &Path, prefix: &Path, abs_is_clean: bool) -> bool {
    if !abs_is_clean {
        return abs.starts_with(prefix);
    }
    let (a, p) = (abs.as_os_str().as_bytes(), prefix.as_os_str().as_bytes());
    a.starts_with(p) && (a.len() == p.len() || p.ends_with(b"/") || a[p.len()] == b'/')
}

/// Whether `abs` is `prefix` or lies beneath it, each component compared folded
/// ([`crate::fold`]); `.` components are skipped, as [`Path::components`] does.
fn folded_under(abs: &Path, prefix: &Path) -> bool {
    let mut a = abs.components();
    prefix.components().all(|p| {
        a.next()
            .is_some_and(|c| crate::fold::same(c.as_os_str().as_bytes(), p.as_os_str().as_bytes()))
    })
}

/// Whether components would rebuild `path` byte for byte: no `//`, no `.` component, no
/// trailing `/` (other than the root itself).
fn is_clean(path: &Path) -> bool {
    let b = path.as_os_str().as_bytes();
    if b == b"/" {
        return true;
    }
    !(b.is_empty()
        || b.ends_with(b"/")
        || b.ends_with(b"/.")
        || b == b"."
        || b.starts_with(b"./")
        || b.windows(2).any(|w| w == b"//")
        || b.windows(3).any(|w| w == b"/./"))
}

/// Whether `comps` are the components a protected rule names, one for one: a `*` component
/// matches any one component, a `**` one or more (a submodule's name may hold a `/`, and its git
/// dir is then `.git/modules/a/b`). Every reader of the rules — the file tools' write checks,
/// the masks walk, the in-run walls — matches with this, so they agree.
pub fn rule_fits<R: AsRef<[u8]>, C: AsRef<[u8]>>(rule: &[R], comps: &[C]) -> bool {
    Walk::new(rule, false).through(comps, |_| false).is_some_and(|w| w.at[rule.len()])
}

/// Whether a protected rule matches consecutive components anywhere in `comps` ([`rule_fits`]):
/// a rule matches at any depth, and a protected folder covers what is inside it.
pub fn rule_within<R: AsRef<[u8]>, C: AsRef<[u8]>>(rule: &[R], comps: &[C]) -> bool {
    Walk::new(rule, true).through(comps, Walk::done).is_none()
}

/// Whether consecutive components at the end of `comps` match `rule` ([`rule_fits`]): a name a
/// folder renamed or linked to brings `rule`'s remaining components along with it.
pub fn rule_ends<R: AsRef<[u8]>, C: AsRef<[u8]>>(rule: &[R], comps: &[C]) -> bool {
    Walk::new(rule, true).through(comps, |_| false).is_some_and(|w| w.done())
}

/// A rule read along a path one component at a time, every way it can match at once (a
/// `**` may take one component or more; a match may start at any component): the rules'
/// matchers in time linear in the path. Found by an attack on `**` (a `write` 185 folders deep
/// took 18 s when every start, end and split was tried, and grew with the path's fourth power).
struct Walk<'r, R> {
    rule: &'r [R],
    /// `at[i]`: the components read so far can stand for the rule's first `i`.
    at: Vec<bool>,
    /// A match may begin at every component, not only the first.
    anywhere: bool,
}

impl<'r, R: AsRef<[u8]>> Walk<'r, R> {
    fn new(rule: &'r [R], anywhere: bool) -> Self {
        let mut at = vec![false; rule.len() + 1];
        at[0] = true;
        Walk { rule, at, anywhere }
    }

    /// The whole rule is matched by the components read last (a rule of none never is).
    fn done(&self) -> bool {
        !self.rule.is_empty() && self.at[self.rule.len()]
    }

    /// Reads `comps`, stopping (`None`) as soon as `stop` holds after a component.
    fn through<C: AsRef<[u8]>>(
        mut self,
        comps: &[C],
        stop: impl Fn(&Self) -> bool,
    ) -> Option<Self> {
        for c in comps {
            let (c, mut next) = (c.as_ref(), vec![false; self.at.len()]);
            for (i, r) in self.rule.iter().enumerate() {
                let r = r.as_ref();
                // Read as the rule's next component, or as more of a `**` already begun.
                if self.at[i] && (r == b"*" || r == b"**" || r == c) {
                    next[i + 1] = true;
                }
                if self.at[i + 1] && r == b"**" {
                    next[i + 1] = true;
                }
            }
            next[0] = self.anywhere;
            self.at = next;
            if stop(&self) {
                return None;
            }
        }
        Some(self)
    }
}

/// Protected rules split into their components (`*` and `**` stay one each: see
/// [`rule_fits`]), folded ([`crate::fold`]), each with its components as given, for a person.
fn compile_rules(rules: &[String]) -> (Vec<Vec<String>>, Vec<String>) {
    rules
        .iter()
        .map(|p| {
            let comps: Vec<&str> = p.split('/').filter(|s| !s.is_empty()).collect();
            let fold =
                |c: &&str| String::from_utf8_lossy(&crate::fold::folded(c.as_bytes())).into();
            (comps.iter().map(fold).collect::<Vec<String>>(), comps.join("/"))
        })
        .filter(|(v, _)| !v.is_empty())
        .unzip()
}

/// Secret patterns and their exceptions, matched against folded names in any case.
fn build_set(patterns: &[String]) -> Result<GlobSet, globset::Error> {
    let mut b = GlobSetBuilder::new();
    for p in patterns {
        b.add(GlobBuilder::new(p).case_insensitive(true).build()?);
    }
    b.build()
}

/// Records the identity of `p` and, for a folder, of what lies beneath it (bounded: a denied
/// folder is masked for commands and refused to the tools, so no agent can grow it; past the
/// bound the name check still holds).
fn index_identities(p: &Path, ids: &mut HashSet<(u64, u64)>) {
    let Ok(meta) = std::fs::metadata(p) else { return };
    ids.insert((meta.dev(), meta.ino()));
    if !meta.is_dir() {
        return;
    }
    let Ok(fd) = crate::open_start(p) else { return };
    let start = vec![(p.to_path_buf(), fd)];
    let _ = crate::walk_beneath::<Infallible>(start, IDENTITY_SCAN_LIMIT, |l| {
        let folder = l.folder;
        for item in l.entries.iter_mut() {
            if let Ok(st) = folder.stat(&item.name) {
                ids.insert((st.st_dev, st.st_ino));
            }
            item.descend = true;
        }
        Ok(())
    });
}
