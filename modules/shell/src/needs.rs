//! `needs` (SPEC §6): the widening `bash` and `tmux_start` take — as the model sends it
//! ([`Needs`], a typed field of their parameters) and as its check admits it ([`Widening`]):
//! each `write` path opened once without following a link, its identity (device, inode) taken,
//! and what it holds walked under the same policy as the launch's own walk of the roots. The
//! person is shown that value and the launch receives it: each `write` path becomes a writable
//! root of that one spec, carrying the identity the launcher checks before it binds it; each
//! `network` entry an allow rule of that one command's proxy ticket.
//!
//! Refused before anyone is asked: an unknown key, a relative or unclean path, a bad host; a
//! credential, denied, secret or protected path or a folder holding one; a path that is, holds
//! or lies in what the host trusts (the daemon's state dir, and the policy's host paths: its
//! config, token files, binary and launcher, the home's start-up surface) or what the host's
//! git reads or runs; a kernel interface; a path missing or reached through a link.

use hands_roots::{FileType, Policy, Trust};
use hands_sandbox::resolve::{self, Identity, Target};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::path::{Component, Path, PathBuf};

mod reach;

/// At most this many entries in each list: a person must be able to read the request.
pub const MAX_ENTRIES: usize = 16;
/// A folder named in `write` is walked for what must stay hidden or read-only; beyond this
/// many entries it is refused (a person can name a narrower folder).
pub(crate) const MAX_SCAN: usize = 10_000;

/// A widening a person must approve. `write`: absolute paths outside the roots the command may
/// write (existing, no link on the way, holding no credential, secret or protected path, nothing
/// the daemon or the host trusts); `network`: host names or host:port the command may reach
/// through the proxy. What can never be granted is refused before anyone is asked.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Needs {
    /// Host names or `host:port` (no scheme, path or wildcard).
    #[serde(default)]
    #[schemars(length(max = 16))]
    pub network: Vec<String>,
    /// Absolute paths the command may write.
    #[serde(default)]
    #[schemars(length(max = 16))]
    pub write: Vec<String>,
}

/// A widening as its check admitted it: what the person was shown and exactly what the run
/// gets.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Widening {
    /// Folders (or files) made writable, each with the identity it had when it was checked:
    /// the run gets that one, never whatever the name points at later.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub write: Vec<Granted>,
    /// `host` or `host:port`, lowercased (a port-less entry allows every port of the host).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub network: Vec<String>,
    /// How long it lasts, in a person's words: one run, or a tmux session's life.
    pub lasts: String,
}

impl Widening {
    /// The paths it makes writable (what a git tool's hold must see, decision 0084).
    pub fn write_paths(&self) -> Vec<PathBuf> {
        self.write.iter().map(|g| g.path.clone()).collect()
    }
}

/// One `write` path of a widening.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Granted {
    pub path: PathBuf,
    /// Its device and inode when it was checked.
    pub device: u64,
    pub inode: u64,
}

impl Granted {
    pub fn id(&self) -> Identity {
        Identity { dev: self.device, ino: self.inode }
    }
}

/// Where the kernel's interfaces are mounted: never granted.
const KERNEL: &[&str] = &["/proc", "/sys", "/dev"];
/// `sysfs`'s magic number (`linux/magic.h`), which rustix does not name.
const SYSFS_MAGIC: i64 = 0x6265_6572;

/// What a widening of one `bash` run lasts.
pub const ONE_RUN: &str = "this run only";
/// What a widening of a tmux session lasts: the person is told so when asked (SPEC §6).
pub const SESSION_LIFE: &str = "the tmux session's life: every tmux_send into it is asked again, \
                                naming this widening";

impl std::fmt::Display for Widening {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts: Vec<String> =
            self.write.iter().map(|g| format!("write {}", g.path.display())).collect();
        parts.extend(self.network.iter().map(|n| format!("network {n}")));
        write!(f, "{}", parts.join(", "))
    }
}

/// Why a widening is refused before anyone is asked.
#[derive(Debug)]
pub struct Forbidden {
    /// The entry refused (cut for display).
    pub what: String,
    /// The layer that refuses it: `needs`, `host-trusted paths`, `denied paths`, `protected
    /// paths`, `secret files`.
    pub layer: &'static str,
    pub why: String,
    pub remedy: &'static str,
}

const NEVER: &str = "nobody can approve it: credential, denied, secret and protected paths are \
                     never writable through `needs`; name a path that holds none of them";
const HOST: &str = "nobody can approve it: what the daemon and the host trust (its \
                    configuration, state dir, token files, binary and launcher, the home's \
                    start-up files) is never writable by a command; name another folder";
/// The layer of a refusal for what the host trusts, as the file tools name it.
const HOST_LAYER: &str = "host-trusted paths";
const FIX: &str = "fix the `needs` entry as the message says (the tool's inputSchema describes it)";
/// Why a `needs.network` cannot be granted by a module without the proxy.
pub const NO_PROXY: &str = "`needs.network` is refused: tools-shell's commands do not reach the \
     network through the proxy here (no `network` grant with network.mode = \"domain\"), so \
     nothing could carry a one-run host";
const NO_PROXY_REMEDY: &str = "a person gives tools-shell the `network` grant with network.mode = \
     \"domain\" in daemon.toml, or adds the host to network.allow";

fn cut(s: &str) -> String {
    hands_roots::shown(s).to_string()
}

fn bad(why: String) -> Forbidden {
    Forbidden { what: "needs".into(), layer: "needs", why, remedy: FIX }
}

/// The checks a widening passes, with what they need: the module's policy (the same the walk of
/// the roots uses for every launch, holding what the host trusts), the walk of what the host's
/// git reads in the roots (its rules walk a folder named here), the daemon's state dir, and
/// whether commands reach the network through the proxy (without it a `network` entry cannot
/// be carried).
pub struct Rules<'a> {
    pub policy: &'a Policy,
    pub trust: Option<&'a Trust>,
    /// Canonical, with its identity: never named, held or entered.
    pub state_dir: &'a Path,
    pub state_id: Option<Identity>,
    pub proxied: bool,
    /// The folders of tools-shell's `path`, by their real names: never named, held or entered
    /// (what one run planted there would run in every later one; decision 0068).
    pub path_folders: &'a [PathBuf],
}

impl Rules<'_> {
    /// What the host trusts that `p` (absolute, clean) is, holds or lies in, by name — and by
    /// identity when `id` is given (a bind mount of it, another name of a trusted file).
    fn host_trusted(&self, p: &Path, id: Option<Identity>) -> Option<String> {
        let state = self.state_dir;
        if p.starts_with(state) || state.starts_with(p) || (id.is_some() && id == self.state_id) {
            let at = cut(&state.display().to_string());
            return Some(format!("the daemon's state dir {at} (audit log, approvals)"));
        }
        if let Some(t) = self.policy.host_path(p, id.map(|i| (i.dev, i.ino))) {
            return Some(t.what.clone());
        }
        let (n, t) = self.policy.host_paths().find(|(n, _)| n.starts_with(p))?;
        Some(format!("{} ({})", t.what, cut(&n.display().to_string())))
    }
}

/// Checks `needs` into the [`Widening`] a person is asked about (`lasts` says for how long),
/// or why it is refused before anyone is asked. May block: it walks every folder named.
pub fn check(needs: &Needs, rules: &Rules<'_>, lasts: &str) -> Result<Widening, Forbidden> {
    for (key, n) in [("network", needs.network.len()), ("write", needs.write.len())] {
        if n > MAX_ENTRIES {
            return Err(bad(format!("`needs.{key}` names {n} entries; at most {MAX_ENTRIES}")));
        }
    }
    if needs.network.is_empty() && needs.write.is_empty() {
        return Err(bad(
            "`needs` names nothing; leave it out when the command needs no widening".into()
        ));
    }
    let mut widening = Widening { lasts: lasts.to_string(), ..Widening::default() };
    for e in &needs.network {
        let h = host_entry(e).map_err(bad)?;
        if !widening.network.contains(&h) {
            widening.network.push(h);
        }
    }
    if !widening.network.is_empty() && !rules.proxied {
        let what = "needs.network".into();
        return Err(Forbidden {
            what,
            layer: "needs",
            why: NO_PROXY.into(),
            remedy: NO_PROXY_REMEDY,
        });
    }
    let root = resolve::host_root().map_err(|e| bad(format!("cannot open / ({e})")))?;
    for e in &needs.write {
        let p = write_entry(e).map_err(bad)?;
        if widening.write.iter().any(|g| g.path == p) {
            continue;
        }
        widening.write.push(write_path(&p, &root, rules)?);
    }
    Ok(widening)
}

/// Why a widening a person approved does not run: its folder changed during the question
/// ([`recheck`]).
#[derive(Debug, thiserror::Error)]
pub enum Changed {
    #[error(
        "`needs.write` {path} changed while the person read the question, so nothing ran: {why}. \
         A person can take out what appeared there; then call again to ask about the folder as \
         it is"
    )]
    Holds { path: String, why: String },
    #[error(
        "`needs.write` {path} was replaced while the person read the question (another file or \
         folder has its name now), so nothing ran; call again to ask about what is there now"
    )]
    Replaced { path: String },
    #[error("the widening cannot be checked again before its run: cannot open / ({0})")]
    NoRoot(std::io::Error),
}

/// Checks a widening a person approved once more, just before its run starts: each `write`
/// path must still be the one shown (its identity) and still hold nothing that could not be
/// granted. A secret file, a repository or a protected name put there while the person read
/// the question is not handed to the run: the check before asking saw a folder without it.
pub fn recheck(w: &Widening, rules: &Rules<'_>) -> Result<(), Changed> {
    if w.write.is_empty() {
        return Ok(());
    }
    let root = resolve::host_root().map_err(Changed::NoRoot)?;
    for g in &w.write {
        let path = cut(&g.path.display().to_string());
        let now = write_path(&g.path, &root, rules)
            .map_err(|f| Changed::Holds { path: path.clone(), why: f.why })?;
        if now.id() != g.id() {
            return Err(Changed::Replaced { path });
        }
    }
    Ok(())
}

/// Why a session's widening could not be walked again before a `tmux_send` ([`secrets_now`]).
#[derive(Debug, thiserror::Error)]
pub enum Unwalked {
    #[error(
        "its `needs.write` path {0} is not the folder granted any more (moved, removed, or \
         another file or folder has its name)"
    )]
    Replaced(String),
    #[error("its `needs.write` path {path} cannot be opened or walked: {why}")]
    Failed { path: String, why: String },
    #[error("{0} must be hidden but its name is not UTF-8")]
    NotUtf8(String),
    #[error("the walk stopped: {0}")]
    Stopped(String),
}

/// The secret files a session-life widening's folders hold now, to be masked in the session
/// before anything more is typed (decision 0101): a `.env` another program wrote into the folder
/// after the session started is hidden from it as one in the roots is. The folder must still be
/// the one granted (its identity): another folder under its name now means the session's files
/// cannot be found by their names, and the send is refused.
pub fn secrets_now(w: &Widening, rules: &Rules<'_>) -> Result<Vec<PathBuf>, Unwalked> {
    let mut secrets = Vec::new();
    if w.write.is_empty() {
        return Ok(secrets);
    }
    let root = resolve::host_root()
        .map_err(|e| Unwalked::Failed { path: "/".into(), why: e.to_string() })?;
    for g in &w.write {
        let path = cut(&g.path.display().to_string());
        let failed = |why: String| Unwalked::Failed { path: path.clone(), why };
        let fd = match resolve::open_nofollow(&root, &g.path) {
            Ok(Target::Found(fd, true)) => fd,
            Ok(Target::Found(fd, false)) if Identity::of(&fd).is_ok_and(|id| id == g.id()) => {
                continue;
            }
            Ok(_) => return Err(Unwalked::Replaced(path)),
            Err(e) => return Err(failed(e.to_string())),
        };
        if !Identity::of(&fd).is_ok_and(|id| id == g.id()) {
            return Err(Unwalked::Replaced(path));
        }
        use std::os::fd::AsFd;
        let start = hands_roots::open_start_at(fd.as_fd())
            .map_err(|e| failed(std::io::Error::from(e).to_string()))?;
        let found = hands_sandbox::masks::walk_with(
            vec![(g.path.clone(), start)],
            rules.policy,
            MAX_SCAN,
            None,
        )
        .map_err(|e| failed(e.to_string()))?;
        if let Some(p) = &found.unmaskable {
            return Err(Unwalked::NotUtf8(cut(&p.display().to_string())));
        }
        secrets.extend(found.paths);
        // A host program's socket put there since: masked like a secret (decision 0104), found
        // by the same walk (0107).
        secrets.extend(found.sockets.into_iter().map(|(p, _)| p));
    }
    Ok(secrets)
}

/// One `write` path checked: by name against what must never be granted, then opened without
/// following a link, its identity checked too, and a folder walked under the launch's policy.
fn write_path(
    p: &Path,
    root: &std::os::fd::OwnedFd,
    rules: &Rules<'_>,
) -> Result<Granted, Forbidden> {
    let what = cut(&p.display().to_string());
    let forbid = |layer, why: String, remedy| Forbidden { what: what.clone(), layer, why, remedy };
    let host = |t: String| forbid(HOST_LAYER, format!("{what} is, holds or lies in {t}"), HOST);
    let policy = rules.policy;
    if let Some(why) = policy.denied(p, None) {
        return Err(forbid("denied paths", format!("{what} is denied ({why})"), NEVER));
    }
    if let Some(d) = policy.denied_near(p).into_iter().find(|d| d.starts_with(p)) {
        let held = cut(&d.display().to_string());
        return Err(forbid("denied paths", format!("{what} holds the denied path {held}"), NEVER));
    }
    let rel: PathBuf = p.components().skip(1).collect();
    if let Some(rule) = policy.protected(&rel) {
        return Err(forbid(
            "protected paths",
            format!("{what} is a protected path ({rule})"),
            NEVER,
        ));
    }
    if policy.is_secret(p) {
        return Err(forbid("secret files", format!("{what} is a secret file"), NEVER));
    }
    if let Some(t) = rules.host_trusted(p, None) {
        return Err(host(t));
    }
    if let Some(d) = rules.path_folders.iter().find(|d| d.starts_with(p) || p.starts_with(d)) {
        return Err(forbid(
            "needs",
            format!(
                "{what} is, holds or lies in {}, a folder of tools-shell's path: a program \
                 written there would run in every later command",
                cut(&d.display().to_string())
            ),
            "nobody can approve it: name a folder outside tools-shell's path (install programs \
             there on the host)",
        ));
    }
    let (fd, is_dir) = match resolve::open_nofollow(root, p) {
        Ok(Target::Found(fd, is_dir)) => (fd, is_dir),
        Ok(Target::Absent) => {
            let why = format!("{what} does not exist");
            return Err(forbid("needs", why, "name a path that exists (make it first)"));
        }
        Ok(Target::Linked(at)) => {
            let at = cut(&at.display().to_string());
            let why = format!("{what} passes through a symbolic link ({at})");
            return Err(forbid("needs", why, "name the real path"));
        }
        Err(e) => return Err(forbid("needs", format!("{what} cannot be used: {e}"), FIX)),
    };
    // The kernel's interfaces are no project folder: the host's processes, devices and
    // settings, whatever they are mounted as.
    #[allow(clippy::unnecessary_cast)] // `f_type`'s type differs between architectures and libcs.
    let kernel = KERNEL.iter().any(|k| p.starts_with(k))
        || rustix::fs::fstatfs(&fd).is_ok_and(|s| {
            let t = s.f_type as i64;
            t == rustix::fs::PROC_SUPER_MAGIC as i64 || t == SYSFS_MAGIC
        });
    if kernel {
        let why =
            format!("{what} is a kernel interface (/proc, /sys or /dev), not a folder to write");
        return Err(forbid("needs", why, "name a folder of files"));
    }
    let id = Identity::of(&fd).map_err(|e| forbid("needs", format!("{what}: {e}"), FIX))?;
    if let Some(t) = rules.host_trusted(p, Some(id)) {
        return Err(host(t));
    }
    if policy.is_denied_identity(id.dev, id.ino) {
        let why = format!("{what} is a denied or credential path (by its identity)");
        return Err(forbid("denied paths", why, NEVER));
    }
    let st = rustix::fs::fstat(&fd).ok();
    if st.is_some_and(|s| FileType::from_raw_mode(s.st_mode) == FileType::Socket) {
        let why = format!(
            "{what} is a unix socket: a host program's socket takes orders from outside the \
             sandbox"
        );
        return Err(forbid("needs", why, NEVER));
    }
    if let Some(st) = st.filter(|s| !is_dir && s.st_nlink > 1) {
        let why = format!(
            "{what} has {} names (hard links): another of them could be a file the host \
             trusts, which a run would write through this one",
            st.st_nlink
        );
        let remedy = "nobody can approve it: name a file with no other names (a person can \
                      copy it to a new one)";
        return Err(forbid("needs", why, remedy));
    }
    if let Some(t) = reach::host_reads(p, rules) {
        return Err(forbid("protected paths", format!("{what} is, holds or lies in {t}"), NEVER));
    }
    if is_dir {
        use std::os::fd::AsFd;
        let scan = reach::scan(p, fd.as_fd(), rules.state_id)
            .map_err(|e| forbid("needs", format!("{what} cannot be listed ({e})"), FIX))?;
        if let Some(at) = scan.state {
            let at = cut(&at.display().to_string());
            return Err(host(format!("the daemon's state dir, mounted at {at}")));
        }
        if let Some(s) = scan.sockets.first() {
            let s = cut(&s.display().to_string());
            let why = format!(
                "{what} holds the unix socket {s}: a host program's socket takes orders from \
                 outside the sandbox"
            );
            return Err(forbid("needs", why, NEVER));
        }
        walk(p, &fd, rules).map_err(|(found, why)| {
            let found = cut(&found.display().to_string());
            forbid("needs", format!("{what} cannot be granted: {found}: {why}"), NEVER)
        })?;
    }
    Ok(Granted { path: p.to_path_buf(), device: id.dev, inode: id.ino })
}

/// Walks a folder named in `write` from its descriptor with the walk of the roots
/// (`hands_sandbox::masks::walk_with`, the launch's own policy): anything it would mask or
/// protect — a secret file, a hard link to a denied or a trusted file, a denied folder, a
/// folder the daemon cannot read, a protected path — refuses the folder; so does, found in the
/// same pass as in the roots, anything the host's git would read or run there (a repository's
/// config or hooks, a bare one found by what it holds, a hooks folder a config names).
fn walk(p: &Path, fd: &std::os::fd::OwnedFd, rules: &Rules<'_>) -> Result<(), (PathBuf, String)> {
    use std::os::fd::AsFd;
    let here = || p.to_path_buf();
    let start = hands_roots::open_start_at(fd.as_fd())
        .map_err(|e| (here(), format!("cannot list it ({})", std::io::Error::from(e))))?;
    let trust = rules.trust.map(|t| t.elsewhere(&[here()], MAX_SCAN));
    let mut visitor = trust.as_ref().and_then(|t| t.visitor_for(&[here()]));
    let found = hands_sandbox::masks::walk_with(
        vec![(here(), start)],
        rules.policy,
        MAX_SCAN,
        visitor.as_mut(),
    )
    .map_err(|e| (here(), e.to_string()))?;
    if let Some(f) = found.paths.first() {
        return Err((
            f.clone(),
            "a secret file, a denied one, or a folder the daemon cannot read".into(),
        ));
    }
    if let Some(f) = found.protected.first().or(found.unmaskable.as_ref()) {
        return Err((f.clone(), "a protected path".into()));
    }
    if let (Some(t), Some(v)) = (&trust, visitor) {
        t.accept(v, found.seen, std::time::Duration::ZERO);
        let known = t.current().map_err(|why| (here(), why.to_string()))?;
        if let Some((at, why)) = known.paths().next() {
            return Err((at.to_path_buf(), format!("what the host's git reads or runs ({why})")));
        }
    }
    Ok(())
}

/// `host` or `host:port`: a DNS name; port 1–65535. No IP address: the proxy reaches an
/// address only through a `network.allow` entry that names it, so approving one here would
/// promise what the run cannot get.
fn host_entry(e: &str) -> Result<String, String> {
    let bad = |why: &str| format!("`needs.network` entry `{}`: {why}", cut(e));
    let (host, port) = match e.rsplit_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (e, None),
    };
    if host.starts_with('[')
        || host.parse::<std::net::IpAddr>().is_ok()
        || e.matches(':').count() > 1
    {
        return Err(bad("an IP address; name the host (a person can add an address to \
                        tools-shell's network.allow)"));
    }
    let name_ok = !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
                && !l.starts_with('-')
        });
    if !name_ok {
        return Err(bad("expected a host name with an optional :PORT (no scheme, path, user \
                        or wildcard)"));
    }
    // Numbers between dots are an address to a resolver (`0x7f000001` is 127.0.0.1): never put
    // to a person as a host name (found by the eighth attack pass).
    if let Err(e) = hands_sandbox::proxy::net_rules::name(host) {
        return Err(bad(&format!(
            "{e}; an IP address is not asked for (a person can add an \
                                 address to tools-shell's network.allow)"
        )));
    }
    let host = host.to_ascii_lowercase();
    match port {
        None => Ok(host),
        Some(p) => match p.parse::<u16>() {
            Ok(n) if n > 0 => Ok(format!("{host}:{n}")),
            _ => Err(bad("the port must be a number 1-65535")),
        },
    }
}

/// An absolute, clean path (no `.`/`..`, no empty component, no trailing `/`).
fn write_entry(e: &str) -> Result<PathBuf, String> {
    let bad = |why: &str| format!("`needs.write` entry `{}`: {why}", cut(e));
    if e.len() > 4096 {
        return Err(bad(&format!("{} bytes, longer than PATH_MAX", e.len())));
    }
    if !e.starts_with('/') || e == "/" {
        return Err(bad("must be an absolute path below /"));
    }
    if e.contains('\0') || e.contains("//") || e.ends_with('/') {
        return Err(bad("must be a clean path (no empty component or trailing /)"));
    }
    let p = PathBuf::from(e);
    if p.components().any(|c| matches!(c, Component::CurDir | Component::ParentDir)) {
        return Err(bad("must not contain `.` or `..`"));
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rules with `trusted` as the host's paths and `state` as the state dir.
    fn rules_with<R>(trusted: &[PathBuf], state: &Path, f: impl FnOnce(&Rules<'_>) -> R) -> R {
        let lists = hands_roots::PolicyLists {
            secret_patterns: vec![".env".into()],
            protected: vec![".git/hooks".into(), ".vscode".into()],
            host_paths: (trusted.iter())
                .map(|p| hands_roots::HostPath {
                    path: p.clone(),
                    what: "the daemon's configuration file".into(),
                    remedy: String::new(),
                })
                .collect(),
            ..Default::default()
        };
        let policy = Policy::new(&lists).unwrap();
        let trust = Trust::new(&[], &lists, None, MAX_SCAN);
        let state_id = std::fs::metadata(state).ok().map(|m| {
            use std::os::unix::fs::MetadataExt;
            Identity { dev: m.dev(), ino: m.ino() }
        });
        let rules = Rules {
            policy: &policy,
            trust: Some(&trust),
            state_dir: state,
            path_folders: &[],
            state_id,
            proxied: true,
        };
        f(&rules)
    }

    fn needs(network: &[&str], write: &[&str]) -> Needs {
        Needs {
            network: network.iter().map(|s| s.to_string()).collect(),
            write: write.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn entries_are_checked_strictly() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let b = base.display().to_string();
        rules_with(&[], Path::new("/nonexistent/state"), |r| {
            let w = check(&needs(&["Example.COM:443", "example.org"], &[&b]), r, ONE_RUN).unwrap();
            assert_eq!(w.network, ["example.com:443", "example.org"]);
            assert_eq!(w.write[0].path, base);
            for (net, write) in [
                (vec!["http://example.com"], vec![]),
                (vec!["example.com:0"], vec![]),
                (vec!["*.example.com"], vec![]),
                (vec!["example.com:99999"], vec![]),
                (vec!["10.0.0.1"], vec![]),
                // IPv4 spelled otherwise (the eighth attack pass), and numbers no resolver reads.
                (vec!["0x7f000001:28866"], vec![]),
                (vec!["2130706433"], vec![]),
                (vec!["127.1"], vec![]),
                (vec!["1.2.3.4.5"], vec![]),
                (vec!["[::1]:8080"], vec![]),
                (vec![], vec!["x/y"]),
                (vec![], vec!["/a/../b"]),
                (vec![], vec!["/a/"]),
                (vec![], vec!["/"]),
                (vec![], vec![]),
            ] {
                let n = Needs {
                    network: net.iter().map(|s| s.to_string()).collect(),
                    write: write.iter().map(|s| s.to_string()).collect(),
                };
                assert!(check(&n, r, ONE_RUN).is_err(), "{net:?} {write:?}");
            }
            let e = check(&needs(&["0x7f000001:443"], &[]), r, ONE_RUN).unwrap_err();
            assert!(e.why.contains("the IPv4 address 127.0.0.1 spelled another way"), "{}", e.why);
            let long = "x".repeat(100_000);
            let e = check(&needs(&[&long], &[]), r, ONE_RUN).unwrap_err();
            assert!(e.why.len() < 1000, "{}", e.why.len());
        });
    }

    #[test]
    fn a_link_a_secret_a_repository_or_what_the_host_trusts_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        for d in ["ok/sub", "app", "repo/.git/hooks", "conf", "state", "bare/objects", "bare/refs"]
        {
            std::fs::create_dir_all(base.join(d)).unwrap();
        }
        std::fs::write(base.join("app/.env"), "T=1\n").unwrap();
        std::fs::write(base.join("conf/daemon.toml"), "").unwrap();
        std::fs::write(base.join("bare/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::os::unix::fs::symlink("ok", base.join("link")).unwrap();
        rules_with(&[base.join("conf/daemon.toml")], &base.join("state"), |r| {
            let p = |rel: &str| base.join(rel).display().to_string();
            // An absolute `rel` (`/proc/self`) is taken as it is: `join` replaces the base.
            let w = check(&needs(&[], &[&p("ok")]), r, ONE_RUN).unwrap();
            use std::os::unix::fs::MetadataExt;
            let meta = std::fs::metadata(base.join("ok")).unwrap();
            assert_eq!(w.write[0].id(), Identity { dev: meta.dev(), ino: meta.ino() });
            for (rel, layer) in [
                ("link/sub", "needs"),
                ("link", "needs"),
                ("missing", "needs"),
                ("app", "needs"),
                ("app/.env", "secret files"),
                ("repo", "needs"),
                ("bare", "needs"),
                ("conf", "host-trusted paths"),
                ("conf/daemon.toml", "host-trusted paths"),
                ("state", "host-trusted paths"),
                ("", "host-trusted paths"),
                ("/proc/self", "needs"),
                ("/dev/shm", "needs"),
            ] {
                let e = check(&needs(&[], &[p(rel).trim_end_matches('/')]), r, ONE_RUN);
                assert_eq!(e.unwrap_err().layer, layer, "{rel}");
            }
        });
    }
}
