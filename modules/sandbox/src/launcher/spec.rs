//! The launcher's [`Spec`]: one type the daemon builds (through [`Builder`]) and the launcher
//! reads, serialized as JSON in a sealed memfd — never in argv, where its size would be capped
//! at one argument (128 KiB) and `ps` would show it. The memfd reaches `hands __sandbox` queued
//! (`SCM_RIGHTS`) on its stdin, a socket that is then the launcher's channel of typed reports
//! back to the daemon (`report`). Stdin, not a descriptor of its own: a child given only its
//! standard streams is started with `posix_spawn` (a `vfork`), where a descriptor moved into
//! place by a `pre_exec` hook makes the daemon `fork`, copying its page tables for every
//! command. The fields are private to this crate: the daemon cannot leave out a part by
//! misspelling a key, and the launcher refuses a key it does not know (`deny_unknown_fields`).

use super::Bound;
use super::report::{self, Reporter, Reports};
use super::sys;
use crate::resolve::Identity;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

/// Where the launcher keeps the spec it received on its stdin (close-on-exec), so that
/// `/proc/<launcher>/fd/3` shows the daemon's user what a running sandbox was built from; the
/// command's stdin is `/dev/null`.
pub const SPEC_FD: i32 = 3;

/// The longest spec the launcher reads: far above any real one (thousands of masks are a few
/// hundred KiB), so that a wrong descriptor cannot make it read without end.
const SPEC_MAX: u64 = 64 << 20;

/// Folders every command sees read-only, when they exist.
pub const SYSTEM: &[&str] = &["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc", "/opt"];

/// What to run and what it may see. Every path is absolute and canonical (the daemon's roots
/// are); `..` is refused.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    /// The command; `argv[0]` is looked up in the `PATH` of `env` when it has no `/`.
    pub(crate) argv: Vec<String>,
    /// Working directory inside the sandbox (normally inside a root).
    pub(crate) cwd: PathBuf,
    /// The whole environment of the command; nothing of the launcher's own is added.
    #[serde(default)]
    pub(crate) env: BTreeMap<String, String>,
    /// Folders bound at their real paths, read-write or read-only.
    pub(crate) roots: Vec<Root>,
    /// Paths inside writable roots re-bound read-only (their parents pinned).
    pub(crate) protected: Vec<PathBuf>,
    /// The protected rules (`sandbox-profiles/protected.txt` and `protected_extra`, relative,
    /// `*` one component): names a command may not create under a writable root while it
    /// runs (`notify`); `.git` is always one, so an empty list still refuses it.
    #[serde(default)]
    pub(crate) protected_rules: Vec<String>,
    /// `new_repositories = "allow"`: a command may make a `.git` in a writable root, and what
    /// is inside the new one is its own (an existing repository's walls stay).
    #[serde(default)]
    pub(crate) new_repositories: bool,
    /// Denied and credential paths: masked when they exist inside a bound folder.
    pub(crate) masked: Vec<PathBuf>,
    /// System folders bound read-only (`/usr`, `/etc`, ...); a symlink (merged `/usr`) is
    /// recreated as the same symlink.
    pub(crate) system: Vec<PathBuf>,
    /// The host network; without it the command gets a private network namespace with
    /// loopback only (the namespace is the wall; Landlock does not restrict TCP).
    #[serde(default)]
    pub(crate) network: bool,
    /// Without `network`: the network namespace of the module's client to join; none gives the
    /// command a namespace of its own.
    #[serde(default)]
    pub(crate) netns: Option<crate::netns::Process>,
    /// The sandbox's own home folder on the host (created when missing). With namespaces the
    /// command's home at that path is a fresh tmpfs, into which only `keep` is bound from it.
    pub(crate) home: PathBuf,
    /// Folders of the home carried from run to run (caches: `.cache`, `.cargo/registry`, …),
    /// relative to it; everything else a run writes in its home is gone with the run.
    #[serde(default)]
    pub(crate) keep: Vec<PathBuf>,
    #[serde(default)]
    pub(crate) limits: Limits,
    /// How the command's processes are bounded (chosen by the daemon, `bounds::choose`).
    #[serde(default)]
    pub(crate) bound: Bound,
    /// The uid and gid the command runs as, for a daemon run as root (`sandbox.run_as`); none:
    /// the daemon's own.
    #[serde(default)]
    pub(crate) run_as: Option<Ids>,
    /// Where user namespaces cannot be made (`best-effort` only): run the command with
    /// Landlock, seccomp, rlimits and the cgroup alone, in the host's namespaces.
    #[serde(default)]
    pub(crate) without_namespaces: bool,
    /// The device and inode `argv[0]` had when the daemon's configuration admitted it (`run`,
    /// `os-*`, `hands exec`): the launcher refuses to exec another file there.
    #[serde(default)]
    pub(crate) program: Option<(u64, u64)>,
    /// What the daemon's checks saw (SPEC §3, one resolution): the identity each of these paths
    /// had when a check admitted it — a configured root when it was pinned at startup, a
    /// `needs.write` path before a person was asked, a protected or masked path when the walk
    /// of the roots found it. The launcher opens each without following a link and refuses to
    /// start when the entry there now is another (or, for a protected or masked path, gone).
    #[serde(default)]
    pub(crate) seen: BTreeMap<PathBuf, Identity>,
    /// A host file whose removal ends the sandbox (checked every 2 s): tmux sessions live while
    /// their marker in the state dir does, so nothing outlives a removed state dir.
    #[serde(default)]
    pub(crate) watch: Option<PathBuf>,
    /// The daemon's pid: the launcher (and with it the sandbox) dies with that process, even
    /// when it is killed with SIGKILL. None for what must outlive the daemon (tmux servers).
    #[serde(default)]
    pub(crate) parent: Option<i32>,
    /// A sandbox made ready ahead of its command (decision 0077): built whole, its init waits
    /// before the command's fork for the call's spec on the report channel
    /// ([`Reports::send_call`]), which must name the same sandbox ([`Spec::sandbox_key`]); its
    /// `argv`, `cwd`, `env` and `program` are the call's. Empty `argv` and `cwd` here.
    #[serde(default)]
    pub(crate) ready: bool,
}

/// A uid and gid of the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ids {
    pub uid: u32,
    pub gid: u32,
}

/// A folder the command sees at its real path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Root {
    pub path: PathBuf,
    #[serde(default)]
    pub writable: bool,
}

/// Per-command limits; the defaults are SPEC §2's.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Processes and threads at once (the bound; see `bounds`).
    pub processes: u64,
    pub open_files: u64,
    pub file_size_mb: u64,
    /// Address space per process, the size of the private `/tmp`, and `memory.max` of the
    /// command's cgroup v2 leaf.
    pub memory_mb: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits { processes: 512, open_files: 1024, file_size_mb: 4096, memory_mb: 8192 }
    }
}

/// What no spec can be built without: what the command sees, and what is hidden or
/// read-only in it. A struct literal, so that leaving out the masks does not compile.
#[derive(Debug, Clone)]
pub struct Confinement {
    pub roots: Vec<Root>,
    /// Paths inside writable roots the command may read but not change.
    pub protected: Vec<PathBuf>,
    /// The rules those paths were found by: names a command may not create while it runs.
    pub protected_rules: Vec<String>,
    /// Denied and credential paths, hidden from the command.
    pub masked: Vec<PathBuf>,
    /// System folders bound read-only.
    pub system: Vec<PathBuf>,
    /// The sandbox's own home folder.
    pub home: PathBuf,
}

/// A spec without its command: the module's, built once at startup, extended per call, and
/// finished with [`Builder::build`].
#[derive(Debug, Clone)]
pub struct Builder(Spec);

impl Spec {
    /// A builder over what every command of a module sees.
    pub fn builder(c: Confinement) -> Builder {
        Builder(Spec {
            argv: Vec::new(),
            cwd: PathBuf::new(),
            env: BTreeMap::new(),
            roots: c.roots,
            protected: c.protected,
            protected_rules: c.protected_rules,
            new_repositories: false,
            masked: c.masked,
            system: c.system,
            network: false,
            netns: None,
            home: c.home,
            keep: Vec::new(),
            limits: Limits::default(),
            bound: Bound::None,
            run_as: None,
            without_namespaces: false,
            program: None,
            seen: BTreeMap::new(),
            watch: None,
            parent: None,
            ready: false,
        })
    }

    /// Hides these paths too (one run's: the confirm-listed programs in a run no person
    /// confirmed).
    pub fn add_masks(&mut self, paths: impl IntoIterator<Item = PathBuf>) {
        self.masked.extend(paths);
    }

    /// The file `argv[0]` must be when the command starts (its device and inode).
    pub fn expect_program(&mut self, dev: u64, ino: u64) {
        self.program = Some((dev, ino));
    }

    /// Makes every root read-only but `keep` (a tmux client's: it talks to its server through
    /// the socket folder and writes nothing else; found by the fifth attack pass, a fake
    /// server made a client run a command that swapped a work-tree folder under tools-git).
    pub fn read_only_roots_but(&mut self, keep: &Path) {
        for r in &mut self.roots {
            if r.path != keep {
                r.writable = false;
            }
        }
    }

    /// Sets one variable of the command's environment (the proxy's, per call).
    pub fn set_env(&mut self, key: impl Into<String>, value: impl Into<String>) {
        self.env.insert(key.into(), value.into());
    }

    /// What a sandbox built from this spec is, whatever command it runs: the spec as JSON
    /// without the call's own fields (`argv`, `cwd`, `env`, `program`). A sandbox made ready
    /// ahead (decision 0077) runs a call only when the call's key is its own: every mount,
    /// mask, wall, limit and identity the daemon's checks saw is the same.
    pub fn sandbox_key(&self) -> std::io::Result<Vec<u8>> {
        let mut bare = self.without_call();
        bare.ready = false;
        bare.to_json()
    }

    /// This spec without the call's own fields (`argv`, `cwd`, `env`, `program`).
    fn without_call(&self) -> Spec {
        let mut bare = self.clone();
        bare.argv.clear();
        bare.cwd = PathBuf::new();
        bare.env.clear();
        bare.program = None;
        bare
    }

    /// The spec of a sandbox made ready ahead for the next call like this one (decision 0077),
    /// and its key; `None` where none can wait: without namespaces (no init to wait in), or a
    /// tmux server's (it outlives the call).
    pub fn ready_for_next(&self) -> Option<(Spec, Vec<u8>)> {
        if self.without_namespaces || self.watch.is_some() || self.parent.is_none() {
            return None;
        }
        let key = self.sandbox_key().ok()?;
        let mut ready = self.without_call();
        ready.ready = true;
        Some((ready, key))
    }

    /// The sandbox's home folder on the host.
    pub fn home_dir(&self) -> &Path {
        &self.home
    }

    /// The paths the command has hidden from it.
    pub fn masked(&self) -> &[PathBuf] {
        &self.masked
    }

    /// The identity a check saw at `path`, if one did.
    pub(crate) fn seen_at(&self, path: &Path) -> Option<Identity> {
        self.seen.get(path).copied()
    }

    /// The spec as the launcher reads it. Fails only for a path that is not UTF-8.
    pub fn to_json(&self) -> std::io::Result<Vec<u8>> {
        serde_json::to_vec(self).map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("the sandbox spec cannot be written as JSON ({e}); rename the path"),
            )
        })
    }

    /// The launcher at `launcher` (`hands-sandbox`, or `hands` itself) with this spec on its
    /// stdin and an empty environment, and the channel of its reports; the caller sets stdout
    /// and stderr, spawns it, and reads the reports once it has ended.
    pub fn command(&self, launcher: &Path) -> std::io::Result<(std::process::Command, Reports)> {
        launcher_command(launcher, &self.to_json()?)
    }

    /// Runs the command of a launcher started with its stdout and stderr piped (by
    /// [`Spec::spawn_piped`], or one made ready ahead and given its call) to its end, and
    /// collects what it printed and what the launcher reported (a tmux client); dropped, the
    /// future kills the launcher. Like `bash`, it is done on the launcher's
    /// [`report::Report::Ended`] (decision 0076), and the launcher is reaped in the background
    /// while it tidies up; without that word, when the launcher has exited.
    pub async fn output_of(
        (mut child, reports): (tokio::process::Child, Reports),
    ) -> std::io::Result<(std::process::Output, report::Reported)> {
        use tokio::io::{AsyncRead, AsyncReadExt};
        async fn all<R: AsyncRead + Unpin>(r: Option<R>) -> std::io::Result<Vec<u8>> {
            let mut buf = Vec::new();
            if let Some(mut r) = r {
                r.read_to_end(&mut buf).await?;
            }
            Ok(buf)
        }
        let (out, err) = (child.stdout.take(), child.stderr.take());
        let read = async { tokio::join!(all(out), all(err)) };
        let mut reported = report::Reported::default();
        let ended = async {
            tokio::select! {
                s = child.wait() => (s, false),
                s = reports.ended(&mut reported) => (Ok(s), true),
            }
        };
        let ((status, told), (stdout, stderr)) = tokio::join!(ended, read);
        if told {
            report::reap_later(child);
        }
        reported.extend(reports.read());
        Ok((std::process::Output { status: status?, stdout: stdout?, stderr: stderr? }, reported))
    }

    /// Starts the launcher with the command's stdout and stderr piped to the caller, killed
    /// when the child is dropped (a `bash` or `run` call).
    pub fn spawn_piped(
        &self,
        launcher: &Path,
    ) -> std::io::Result<(tokio::process::Child, Reports)> {
        use std::process::Stdio;
        let (command, reports) = self.command(launcher)?;
        let child = tokio::process::Command::from(command)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        Ok((child, reports))
    }

    /// Starts the launcher to outlive the call (a tmux server): stdout to nowhere, stderr to
    /// `log`, and a process group of its own, so that a Ctrl-C meant for the daemon does not
    /// reach it (it ends with its daemon through its parent-death signal, or outlives it with
    /// `keep_sessions`). It inherits `marks`, which other daemons see while it lives (decision
    /// 0084; the command it runs does not: close-on-exec again there).
    pub fn spawn_detached(
        &self,
        launcher: &Path,
        log: std::fs::File,
        marks: &crate::still::Marks,
    ) -> std::io::Result<(std::process::Child, Reports)> {
        use std::os::fd::AsRawFd;
        use std::os::unix::process::CommandExt;
        let (mut command, reports) = self.command(launcher)?;
        sys::marks::inherit(&mut command, marks.descriptors().map(|fd| fd.as_raw_fd()).collect());
        let child =
            command.stdout(std::process::Stdio::null()).stderr(log).process_group(0).spawn()?;
        Ok((child, reports))
    }

    pub(crate) fn validate(&self) -> anyhow::Result<()> {
        // A ready sandbox's command comes later, in the call's spec, validated then.
        let ready = self.ready && self.argv.is_empty() && self.cwd.as_os_str().is_empty();
        anyhow::ensure!(ready || !self.argv.is_empty(), "argv is empty");
        anyhow::ensure!(
            !self.ready || (self.watch.is_none() && !self.without_namespaces),
            "a sandbox made ready ahead has an init to wait in and no watch file"
        );
        let cwd = (!ready).then_some(&self.cwd);
        let roots = self.roots.iter().map(|r| &r.path);
        let lists = self.protected.iter().chain(&self.masked).chain(&self.system);
        let seen = self.seen.keys();
        for p in roots.chain(lists).chain(seen).chain(cwd).chain([&self.home]).chain(&self.watch) {
            anyhow::ensure!(is_clean(p), "{} is not a clean absolute path below /", p.display());
        }
        for k in &self.keep {
            anyhow::ensure!(
                k.components().count() > 0
                    && k.components().all(|c| matches!(c, Component::Normal(_))),
                "{} is not a clean relative path (a folder of the home to carry)",
                k.display()
            );
        }
        match self.run_as {
            Some(ids) => {
                anyhow::ensure!(ids.uid != 0, "run_as names root; commands never run as root")
            }
            None => anyhow::ensure!(
                sys::euid() != 0,
                "the launcher runs as root and the spec names no run_as: commands never run as \
                 root"
            ),
        }
        Ok(())
    }

    /// The uid and gid the command runs as.
    pub(crate) fn command_ids(&self) -> (libc::uid_t, libc::gid_t) {
        self.run_as.map_or_else(sys::ids, |i| (i.uid, i.gid))
    }

    /// Receives the spec `hands __sandbox` was given on its stdin, and the channel of its
    /// reports, which takes stdin's place above the standard streams (close-on-exec) while
    /// `/dev/null` becomes the command's stdin. The spec's descriptor is returned at
    /// [`SPEC_FD`] or above: the launcher keeps it open (outside the sandbox, close-on-exec,
    /// closed in its child), so `/proc/<launcher>/fd/3` shows the daemon's user what a running
    /// sandbox was built from. The channel comes back even when the spec does not, to report
    /// why. A spec file on stdin (a person's, or `benches/launcher_ab.py` timing builds
    /// against each other) is read as before, with no one to report to.
    pub(crate) fn receive() -> (Reporter, anyhow::Result<(Spec, std::fs::File)>) {
        use rustix::fs::FileType;
        use std::os::fd::{AsFd, AsRawFd};
        if sys::stdin_type() == Some(FileType::RegularFile) {
            let fd = sys::take_stdin(SPEC_FD, FileType::RegularFile)
                .ok_or_else(|| anyhow::anyhow!("the spec file on stdin cannot be moved"));
            return (Reporter::default(), fd.and_then(Self::read));
        }
        let stdin = std::io::stdin();
        // Received first, so that it is the lowest descriptor above the standard streams.
        let fd = report::receive_spec(stdin.as_fd(), false).and_then(|fd| {
            if fd.as_raw_fd() >= SPEC_FD {
                Ok(fd)
            } else {
                Ok(rustix::io::fcntl_dupfd_cloexec(&fd, SPEC_FD)?)
            }
        });
        let reporter =
            sys::take_stdin(SPEC_FD + 1, FileType::Socket).map(Reporter::new).unwrap_or_default();
        let spec = fd
            .map_err(|e| {
                anyhow::anyhow!(
                    "no spec on stdin ({e}): `hands __sandbox` is started by the daemon, which \
                     passes the spec there (or give it a spec file as stdin)"
                )
            })
            .and_then(Self::read);
        (reporter, spec)
    }

    pub(crate) fn read(fd: std::os::fd::OwnedFd) -> anyhow::Result<(Spec, std::fs::File)> {
        use anyhow::Context;
        use std::io::{Read, Seek};
        let mut file = std::fs::File::from(fd);
        // The daemon's write left the shared offset at the end.
        file.rewind().context("the spec descriptor cannot be read from its start")?;
        let mut bytes = Vec::new();
        (&file)
            .take(SPEC_MAX + 1)
            .read_to_end(&mut bytes)
            .with_context(|| format!("cannot read the spec on descriptor {SPEC_FD}"))?;
        anyhow::ensure!(
            bytes.len() as u64 <= SPEC_MAX,
            "the spec on descriptor {SPEC_FD} is longer than {SPEC_MAX} bytes"
        );
        let spec = serde_json::from_slice(&bytes).with_context(|| {
            format!(
                "the spec is not valid (a launcher from another build of hands than the \
                 daemon's? `{LAUNCHER}` and `hands` are installed together: install both \
                 again, e.g. `cargo install --path .`)"
            )
        })?;
        Ok((spec, file))
    }
}

/// Whether `p` is a path a spec may name: absolute, below `/`, with no `.` or `..` (the
/// launcher refuses a spec with any other).
pub fn is_clean(p: &Path) -> bool {
    p.is_absolute()
        && p.components().count() > 1
        && p.components().all(|c| matches!(c, Component::RootDir | Component::Normal(_)))
}

/// The name of the launcher's own small binary, installed beside `hands`.
pub const LAUNCHER: &str = "hands-sandbox";

/// The binary that launches for the daemon at `exe`: [`LAUNCHER`] in the same folder when it
/// is there (a small program: its start and its forks cost a fraction of the daemon's, which
/// links libgit2, OpenSSL and an allocator that sets up its arenas at every exec), else `exe`
/// itself, whose `__sandbox` runs the same code. Only ever beside `exe` (the real path of the
/// running binary), never from `PATH`; and only a regular file of `exe`'s owner that no one
/// else may write, so that one a sandboxed command of a root daemon made (as `run_as`) is
/// passed over (SPEC §1: the daemon protects it where it lies in a writable root).
pub fn launcher_binary(exe: &Path) -> std::path::PathBuf {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let small = exe.with_file_name(LAUNCHER);
    let Ok(m) = std::fs::symlink_metadata(&small) else { return exe.to_path_buf() };
    let owner = std::fs::metadata(exe).map(|e| e.uid()).ok();
    let mode = m.permissions().mode();
    if m.is_file() && mode & 0o111 != 0 && mode & 0o022 == 0 && owner == Some(m.uid()) {
        return small;
    }
    tracing::warn!(
        "{} is not used as the launcher: it is not an executable file of {}'s owner that only \
         its owner may write (mode {:o}, uid {}); commands start through {} itself",
        small.display(),
        exe.display(),
        mode & 0o7777,
        m.uid(),
        exe.display()
    );
    exe.to_path_buf()
}

/// `LAUNCHER __sandbox` (a [`launcher_binary`], found once by the caller) with `spec` (JSON)
/// on its stdin (see [`attach_spec`]), and the channel of its reports. The environment is
/// empty; the caller sets stdout and stderr, never stdin.
#[expect(
    clippy::disallowed_methods,
    reason = "the one place the launcher starts: `LAUNCHER __sandbox` with its spec"
)]
pub fn launcher_command(
    launcher: &Path,
    spec: &[u8],
) -> std::io::Result<(std::process::Command, Reports)> {
    let mut cmd = std::process::Command::new(launcher);
    cmd.arg("__sandbox").env_clear();
    let reports = attach_spec(&mut cmd, spec)?;
    Ok((cmd, reports))
}

/// Gives `cmd` (a `hands __sandbox`) the spec `spec` (JSON) on its stdin: a sealed memfd, so
/// any size fits, nothing blocks on a pipe, and nothing shows on the command line, queued on
/// the socket whose other end is returned: the launcher's reports arrive there (a caller that
/// drops it only does not hear them). The command itself gets `/dev/null` as its stdin.
pub fn attach_spec(cmd: &mut std::process::Command, spec: &[u8]) -> std::io::Result<Reports> {
    let fd = sys::sealed_memfd("hands-spec", spec)?;
    let (theirs, reports) = report::channel(fd)?;
    cmd.stdin(std::process::Stdio::from(theirs));
    Ok(reports)
}

impl Builder {
    /// The command's whole environment.
    pub fn env(mut self, env: BTreeMap<String, String>) -> Builder {
        self.0.env = env;
        self
    }

    pub fn limits(mut self, limits: Limits) -> Builder {
        self.0.limits = limits;
        self
    }

    /// The process bound the daemon chose.
    pub fn bound(mut self, bound: Bound) -> Builder {
        self.0.bound = bound;
        self
    }

    /// Who the command runs as, for a daemon run as root.
    pub fn run_as(mut self, ids: Option<Ids>) -> Builder {
        self.0.run_as = ids;
        self
    }

    /// `new_repositories = "allow"`: commands may make repositories in writable roots.
    pub fn new_repositories(mut self, allow: bool) -> Builder {
        self.0.new_repositories = allow;
        self
    }

    /// The host's network instead of a private namespace.
    pub fn host_network(mut self, on: bool) -> Builder {
        self.0.network = on;
        self
    }

    /// Whether the command gets the host's network.
    pub fn has_host_network(&self) -> bool {
        self.0.network
    }

    /// Joins the network namespace of the module's client (held by `holder`).
    pub fn netns(mut self, holder: crate::netns::Process) -> Builder {
        self.0.netns = Some(holder);
        self
    }

    /// Runs without user namespaces (`best-effort` where none can be made).
    pub fn without_namespaces(mut self) -> Builder {
        self.0.without_namespaces = true;
        self
    }

    /// The command's home (its `HOME`, and its TMPDIR's parent) is this folder instead.
    pub fn home(mut self, path: PathBuf) -> Builder {
        self.0.env.insert("HOME".into(), path.to_string_lossy().into_owned());
        self.0.home = path;
        self
    }

    /// The folders of the home carried from run to run (relative to it).
    pub fn keep(mut self, folders: impl IntoIterator<Item = PathBuf>) -> Builder {
        self.0.keep = folders.into_iter().collect();
        self
    }

    /// Whether the command runs without user namespaces.
    pub fn has_no_namespaces(&self) -> bool {
        self.0.without_namespaces
    }

    /// Who the commands run as, for a daemon run as root.
    pub fn runs_as(&self) -> Option<Ids> {
        self.0.run_as
    }

    /// The writable roots.
    pub fn writable_roots(&self) -> impl Iterator<Item = &Path> {
        self.0.roots.iter().filter(|r| r.writable).map(|r| r.path.as_path())
    }

    /// Hides these paths too (what the walk of the roots found now).
    pub fn mask(mut self, paths: impl IntoIterator<Item = PathBuf>) -> Builder {
        self.0.masked.extend(paths);
        self
    }

    /// Makes these paths read-only too, once each.
    pub fn protect(mut self, paths: impl IntoIterator<Item = PathBuf>) -> Builder {
        for p in paths {
            if !self.0.protected.contains(&p) {
                self.0.protected.push(p);
            }
        }
        self
    }

    /// One more folder at its real path.
    pub fn root(mut self, path: PathBuf, writable: bool) -> Builder {
        self.0.roots.push(Root { path, writable });
        self
    }

    /// The identity a check saw at `path` (a root, a protected or masked path, a `needs.write`
    /// path): the launcher refuses to start when the entry there is another.
    pub fn seen(mut self, path: PathBuf, id: Identity) -> Builder {
        self.0.seen.insert(path, id);
        self
    }

    /// One more folder bound read-only, as the system folders are.
    pub fn read_only(mut self, path: PathBuf) -> Builder {
        self.0.system.push(path);
        self
    }

    /// At most `n` processes (lower than the module's, never higher).
    pub fn cap_processes(mut self, n: u64) -> Builder {
        self.0.limits.processes = self.0.limits.processes.min(n);
        self
    }

    /// Ends the sandbox when `marker` is removed (tmux sessions, which outlive the daemon).
    pub fn watch(mut self, marker: PathBuf) -> Builder {
        self.0.watch = Some(marker);
        self
    }

    /// Dies with the process `pid` (the daemon).
    pub fn parent(mut self, pid: i32) -> Builder {
        self.0.parent = Some(pid);
        self
    }

    /// The spec for `argv`, run in `cwd`.
    pub fn build(self, argv: Vec<String>, cwd: PathBuf) -> Spec {
        Spec { argv, cwd, ..self.0 }
    }
}
