//! The process and memory bound of a command (SPEC §5.2 item 4), from the first mechanism the
//! machine offers: a cgroup v2 leaf under the daemon's own cgroup (`pids.max`, `memory.max`,
//! `memory.oom.group`), a cgroup v1 pids cgroup nested under the daemon's own (with a sibling
//! in the v1 memory hierarchy, `memory.limit_in_bytes`, where the daemon can make one), or
//! `RLIMIT_NPROC` set inside the command's fresh user namespace for a non-root uid (where,
//! since Linux 5.14, it counts that namespace's processes only).
//!
//! Memory is bounded by the cgroup wherever there is one (resident memory, the tree as a
//! whole); `RLIMIT_AS` (address space, per process) only where there is none
//! ([`Bound::bounds_memory`]): wasm runtimes, JITs and sanitizers reserve far more address
//! space than they use, and failed under `RLIMIT_AS` with no hint.
//!
//! The daemon chooses once ([`choose`], at startup) and names the choice in the tier; each
//! launcher makes its leaf ([`Leaf::create`]), puts the sandbox's init into it, and removes it
//! when the command has ended. Leaves never leave the daemon's own cgroup, so a systemd unit's
//! `TasksMax=`/`MemoryMax=` hold for everything the daemon starts.
//!
//! cgroup v2 forbids processes in a cgroup whose controllers are enabled for its children
//! (the no-internal-processes rule), so when the daemon's own cgroup holds the daemon itself,
//! the daemon first moves into a leaf of its own, `hands-daemon`, and the commands' leaves are
//! its siblings.

use super::sys;
use anyhow::{Context, Result, anyhow};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// The daemon's own leaf when its cgroup v2 must hold the commands' leaves too.
const DAEMON_LEAF: &str = "hands-daemon";
/// The prefix of a command's cgroup v2 leaf (`hands-<launcher pid>`).
const LEAF_PREFIX: &str = "hands-";
/// The cgroup v1 pids hierarchy.
const PIDS_V1: &str = "/sys/fs/cgroup/pids";
/// The cgroup v1 memory hierarchy.
const MEMORY_V1: &str = "/sys/fs/cgroup/memory";

/// How the processes of a command are bounded.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind", deny_unknown_fields)]
pub enum Bound {
    /// Leaves `hands-<pid>` in `dir` (the daemon's own cgroup v2), with `memory.max` when the
    /// memory controller is there.
    CgroupV2 { dir: PathBuf, memory: bool },
    /// Children `<pid>` of `dir` (`hands/` in the daemon's own cgroup v1 pids cgroup), and of
    /// `memory` (`hands/` in its v1 memory cgroup) when the daemon could make that.
    CgroupV1 {
        dir: PathBuf,
        #[serde(default)]
        memory: Option<PathBuf>,
    },
    /// `RLIMIT_NPROC` inside the command's user namespace (the command's uid is not root).
    Rlimit,
    /// Nothing bounds the process count.
    #[default]
    None,
}

impl Bound {
    /// The mechanism's name, as the tier states it.
    pub fn name(&self) -> &'static str {
        match self {
            Bound::CgroupV2 { memory: true, .. } => "cgroup v2 pids+memory",
            Bound::CgroupV2 { memory: false, .. } => "cgroup v2 pids",
            Bound::CgroupV1 { memory: Some(_), .. } => "cgroup v1 pids+memory",
            Bound::CgroupV1 { memory: None, .. } => "cgroup v1 pids",
            Bound::Rlimit => "RLIMIT_NPROC in the user namespace",
            Bound::None => "none",
        }
    }

    /// Whether a cgroup bounds the command's memory (then `RLIMIT_AS` is not set).
    pub fn bounds_memory(&self) -> bool {
        matches!(
            self,
            Bound::CgroupV2 { memory: true, .. } | Bound::CgroupV1 { memory: Some(_), .. }
        )
    }
}

/// What [`choose`] found: the bound, and why each better mechanism was not available.
#[derive(Debug, Clone)]
pub struct Choice {
    pub bound: Bound,
    pub passed_over: Vec<String>,
}

/// The daemon's own cgroup: the cgroup2 mount (or the v1 hierarchy of `controller`) and the
/// path in it from `/proc/self/cgroup`.
#[expect(
    clippy::disallowed_methods,
    reason = "procfs: the daemon's own cgroup (/proc/self/cgroup), not a path of a root"
)]
fn own_cgroup(controller: Option<&str>) -> Option<String> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    text.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (id, ctrl, path) = (f.next()?, f.next()?, f.next()?);
        let hit = match controller {
            None => id == "0" && ctrl.is_empty(),
            Some(c) => ctrl.split(',').any(|x| x == c),
        };
        hit.then(|| path.to_string())
    })
}

/// Where cgroup2 is mounted (`/sys/fs/cgroup` on v2-only hosts, `/sys/fs/cgroup/unified` on
/// hybrid ones), from `/proc/self/mountinfo`.
#[expect(
    clippy::disallowed_methods,
    reason = "procfs: where cgroup2 is mounted (/proc/self/mountinfo), not a path of a root"
)]
fn cgroup2_mount() -> Option<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    text.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        if !right.starts_with("cgroup2 ") {
            return None;
        }
        left.split(' ').nth(4).map(PathBuf::from)
    })
}

fn writable(p: &Path) -> bool {
    rustix::fs::access(p, rustix::fs::Access::WRITE_OK).is_ok()
}

/// Chooses the bound for this daemon's commands; `nonroot_command` says whether the commands
/// run as a uid other than root (so that RLIMIT_NPROC binds). May move the daemon into a cgroup
/// v2 leaf of its own (see the module's comment).
pub fn choose(nonroot_command: bool) -> Choice {
    let mut passed_over = Vec::new();
    match v2() {
        Ok(bound) => return Choice { bound, passed_over },
        Err(e) => passed_over.push(format!("cgroup v2: {e:#}")),
    }
    match v1() {
        Ok(bound) => return Choice { bound, passed_over },
        Err(e) => passed_over.push(format!("cgroup v1: {e:#}")),
    }
    if nonroot_command {
        return Choice { bound: Bound::Rlimit, passed_over };
    }
    passed_over.push("RLIMIT_NPROC: the commands would run as root, whom it does not bind".into());
    Choice { bound: Bound::None, passed_over }
}

#[expect(
    clippy::disallowed_methods,
    reason = "cgroupfs: the daemon's own cgroup, read and set by path"
)]
fn v2() -> Result<Bound> {
    let mount = cgroup2_mount().ok_or_else(|| anyhow!("no cgroup2 file system is mounted"))?;
    let own = own_cgroup(None).ok_or_else(|| anyhow!("/proc/self/cgroup names no cgroup v2"))?;
    let mut dir = mount.join(own.trim_start_matches('/'));
    // A daemon that already moved itself (doctor after serve's start, in one process).
    if dir.file_name().is_some_and(|n| n == DAEMON_LEAF)
        && let Some(parent) = dir.parent()
    {
        dir = parent.to_path_buf();
    }
    let controllers = std::fs::read_to_string(dir.join("cgroup.controllers"))
        .with_context(|| format!("cannot read {}/cgroup.controllers", dir.display()))?;
    let has = |c: &str| controllers.split_whitespace().any(|x| x == c);
    if !has("pids") {
        return Err(anyhow!(
            "the pids controller is not delegated to the daemon's cgroup {}",
            dir.display()
        ));
    }
    let memory = has("memory");
    if !writable(&dir) || !writable(&dir.join("cgroup.subtree_control")) {
        return Err(anyhow!("the daemon's cgroup {} is not writable by it", dir.display()));
    }
    let wanted = if memory { "+pids +memory" } else { "+pids" };
    let subtree = dir.join("cgroup.subtree_control");
    let enabled = |d: &Path| {
        std::fs::read_to_string(d.join("cgroup.subtree_control")).is_ok_and(|s| {
            let on = |c: &str| s.split_whitespace().any(|x| x == c);
            on("pids") && (!memory || on("memory"))
        })
    };
    if !enabled(&dir) && std::fs::write(&subtree, wanted).is_err() {
        // Processes in the cgroup (the daemon itself): move the daemon into a leaf first.
        let leaf = dir.join(DAEMON_LEAF);
        match std::fs::create_dir(&leaf) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(anyhow!("cannot create {}: {e}", leaf.display())),
        }
        std::fs::write(leaf.join("cgroup.procs"), std::process::id().to_string())
            .with_context(|| format!("cannot move the daemon into {}", leaf.display()))?;
        std::fs::write(&subtree, wanted).map_err(|e| {
            anyhow!(
                "cannot enable {wanted} in {}: {e} (other processes share the daemon's cgroup; \
                 start hands in a cgroup of its own, e.g. `systemd-run --user --scope hands \
                 serve`)",
                subtree.display()
            )
        })?;
    }
    Ok(Bound::CgroupV2 { dir, memory })
}

fn v1() -> Result<Bound> {
    let root = Path::new(PIDS_V1);
    if !root.join("cgroup.procs").exists() {
        return Err(anyhow!("no cgroup v1 pids hierarchy at {PIDS_V1}"));
    }
    let own = own_cgroup(Some("pids"))
        .ok_or_else(|| anyhow!("/proc/self/cgroup names no pids cgroup"))?;
    let dir = root.join(own.trim_start_matches('/')).join("hands");
    if !dir.is_dir() {
        std::fs::create_dir(&dir).map_err(|e| anyhow!("cannot create {}: {e}", dir.display()))?;
    }
    if !writable(&dir) {
        return Err(anyhow!("{} is not writable by the daemon", dir.display()));
    }
    Ok(Bound::CgroupV1 { dir, memory: v1_memory() })
}

/// `hands/` in the daemon's own v1 memory cgroup, when there is that hierarchy and the daemon
/// may make and write it (a root daemon, or one a unit delegated it to).
fn v1_memory() -> Option<PathBuf> {
    let root = Path::new(MEMORY_V1);
    if !root.join("cgroup.procs").exists() {
        return None;
    }
    let own = own_cgroup(Some("memory"))?;
    let dir = root.join(own.trim_start_matches('/')).join("hands");
    if !dir.is_dir() && std::fs::create_dir(&dir).is_err() {
        return None;
    }
    writable(&dir).then_some(dir)
}

/// A command's cgroup, made by its launcher: the sandbox's init is put in it before it runs
/// anything, and it is removed when the command has ended. Everything goes through a
/// descriptor of the parent folder, opened first.
pub struct Leaf {
    parent: File,
    name: String,
    /// cgroup v2: the leaf's `cgroup.procs`, where the launcher writes the init's pid when
    /// `clone3` was refused; cgroup v1: its `tasks`, where the init writes `0` itself.
    procs: File,
    /// The leaf's own folder, for `clone3(CLONE_INTO_CGROUP)`; cgroup v2 only.
    v2: Option<File>,
    /// cgroup v1: the sibling in the memory hierarchy (its parent folder and `tasks`), of the
    /// same name.
    memory_v1: Option<(File, File)>,
}

impl Leaf {
    /// Makes the leaf for `max` processes and `memory_mb` of memory (cgroup v2 with the memory
    /// controller); `None` for the rlimit bound and none. Leaves of launchers that are gone
    /// (killed before they could clean up) are removed on the way.
    #[expect(
        clippy::disallowed_methods,
        reason = "cgroupfs: the command's leaf cgroup, made, set and opened by path"
    )]
    pub fn create(bound: &Bound, max: u64, memory_mb: u64) -> Result<Option<Leaf>> {
        let (dir, v2, memory, prefix) = match bound {
            Bound::CgroupV2 { dir, memory } => (dir, true, *memory, LEAF_PREFIX),
            Bound::CgroupV1 { dir, .. } => (dir, false, false, ""),
            Bound::Rlimit | Bound::None => return Ok(None),
        };
        let memory_v1 = match bound {
            Bound::CgroupV1 { memory: Some(m), .. } => Some(v1_memory_leaf(m, memory_mb)?),
            _ => None,
        };
        let parent = File::open(dir).with_context(|| format!("cannot open {}", dir.display()))?;
        sweep(dir, prefix);
        let name = format!("{prefix}{}", std::process::id());
        let leaf = dir.join(&name);
        match std::fs::create_dir(&leaf) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(anyhow!("cannot create the cgroup {}: {e}", leaf.display())),
        }
        let set = |file: &str, value: String| {
            std::fs::write(leaf.join(file), value)
                .with_context(|| format!("cannot set {}/{file}", leaf.display()))
        };
        // The sandbox's init is one of the tasks counted.
        set("pids.max", (max + 1).to_string())?;
        if memory {
            set("memory.max", memory_mb.saturating_mul(1024 * 1024).to_string())?;
            // An out-of-memory kills the command's whole tree at once, never the daemon.
            set("memory.oom.group", "1".into())?;
            // Swap would let the tree outgrow memory.max; absent without swap accounting.
            let _ = std::fs::write(leaf.join("memory.swap.max"), "0");
        }
        let procs_file = if v2 { "cgroup.procs" } else { "tasks" };
        let procs = File::options()
            .write(true)
            .open(leaf.join(procs_file))
            .with_context(|| format!("cannot open {}/{procs_file}", leaf.display()))?;
        let v2 = if v2 {
            Some(File::open(&leaf).with_context(|| format!("cannot open {}", leaf.display()))?)
        } else {
            None
        };
        Ok(Some(Leaf { parent, name, procs, v2, memory_v1 }))
    }

    /// The leaf's folder when it is a cgroup v2 one: the sandbox's init can be cloned straight
    /// into it (see `sys::clone_into_cgroup`).
    pub fn v2_folder(&self) -> Option<&File> {
        self.v2.as_ref()
    }

    /// Whether the launcher puts the init into the leaf ([`Leaf::add`], cgroup v2 where
    /// `clone3` was refused) rather than the init itself ([`Leaf::enter`], cgroup v1).
    pub fn added_by_launcher(&self) -> bool {
        self.v2.is_some()
    }

    /// Puts `pid` (the sandbox's init, before it forks the command) into the cgroup v2 leaf.
    /// A write of another process's pid takes the cgroup rwsem for writing, which waits for
    /// an RCU grace period when none was taken lately (~12 ms here after 25 ms of idleness).
    pub fn add(&mut self, pid: libc::pid_t) -> Result<()> {
        self.procs
            .write_all(pid.to_string().as_bytes())
            .with_context(|| format!("cannot put the sandbox into the cgroup {}", self.name))
    }

    /// cgroup v1: moves the calling process, which must have one thread (the sandbox's init
    /// before it forks the command, or the command without namespaces), into the leaves by
    /// writing `0` to their `tasks`. A thread that moves itself is the one migration the kernel
    /// makes without the cgroup rwsem (`cgroup_procs_write_start`), so it never waits for an
    /// RCU grace period; with one thread, the thread is the whole process. A no-op on v2.
    pub fn enter(&self) -> Result<()> {
        if self.v2.is_some() {
            return Ok(());
        }
        let memory = self.memory_v1.as_ref().map(|(_, tasks)| tasks);
        for (tasks, what) in
            memory.into_iter().map(|t| (t, "memory cgroup")).chain([(&self.procs, "cgroup")])
        {
            (&*tasks)
                .write_all(b"0")
                .with_context(|| format!("cannot put the sandbox into the {what} {}", self.name))?;
        }
        Ok(())
    }

    /// Kills every process of the leaf (the sandbox without namespaces has no init to do it).
    pub fn kill_all(&self) {
        if self.v2.is_some() && self.write_at("cgroup.kill", b"1") {
            return;
        }
        for pid in self.members() {
            sys::signal(pid, libc::SIGKILL);
        }
    }

    /// Whether the memory controller killed something for lack of memory (v2's
    /// `memory.events`, v1's `memory.oom_control`: both count `oom_kill`).
    pub fn oom_killed(&self) -> bool {
        let text = match &self.memory_v1 {
            Some((parent, _)) => read_in(parent, &format!("{}/memory.oom_control", self.name)),
            None => self.read_at("memory.events"),
        };
        text.is_some_and(|t| {
            t.lines().any(|l| l.strip_prefix("oom_kill ").is_some_and(|n| n.trim() != "0"))
        })
    }

    fn members(&self) -> Vec<libc::pid_t> {
        self.read_at("cgroup.procs")
            .map(|t| t.lines().filter_map(|l| l.trim().parse().ok()).collect())
            .unwrap_or_default()
    }

    fn open_at(&self, file: &str, flags: rustix::fs::OFlags) -> Option<File> {
        let path = format!("{}/{file}", self.name);
        let flags = flags | rustix::fs::OFlags::CLOEXEC;
        rustix::fs::openat(&self.parent, path, flags, rustix::fs::Mode::empty())
            .ok()
            .map(File::from)
    }

    fn read_at(&self, file: &str) -> Option<String> {
        read_in(&self.parent, &format!("{}/{file}", self.name))
    }

    fn write_at(&self, file: &str, what: &[u8]) -> bool {
        self.open_at(file, rustix::fs::OFlags::WRONLY)
            .is_some_and(|mut f| f.write_all(what).is_ok())
    }
}

/// The text of `path` under the folder `dir`.
fn read_in(dir: &File, path: &str) -> Option<String> {
    let flags = rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC;
    let fd = rustix::fs::openat(dir, path, flags, rustix::fs::Mode::empty()).ok()?;
    let mut text = String::new();
    File::from(fd).read_to_string(&mut text).ok()?;
    Some(text)
}

/// The command's leaf in the v1 memory hierarchy `dir`, named like its pids leaf (the launcher's
/// pid), limited to `memory_mb` (and as much with swap, where swap is accounted): its parent
/// folder and its `tasks`.
#[expect(
    clippy::disallowed_methods,
    reason = "cgroupfs: the command's v1 memory leaf, made, set and opened by path"
)]
fn v1_memory_leaf(dir: &Path, memory_mb: u64) -> Result<(File, File)> {
    let parent = File::open(dir).with_context(|| format!("cannot open {}", dir.display()))?;
    sweep(dir, "");
    let leaf = dir.join(std::process::id().to_string());
    match std::fs::create_dir(&leaf) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(anyhow!("cannot create the cgroup {}: {e}", leaf.display())),
    }
    let bytes = memory_mb.saturating_mul(1024 * 1024).to_string();
    std::fs::write(leaf.join("memory.limit_in_bytes"), &bytes)
        .with_context(|| format!("cannot set {}/memory.limit_in_bytes", leaf.display()))?;
    // Swap would let the tree outgrow the limit; absent without swap accounting.
    let _ = std::fs::write(leaf.join("memory.memsw.limit_in_bytes"), &bytes);
    let tasks = File::options()
        .write(true)
        .open(leaf.join("tasks"))
        .with_context(|| format!("cannot open {}/tasks", leaf.display()))?;
    Ok((parent, tasks))
}

impl Drop for Leaf {
    fn drop(&mut self) {
        // The last tasks leave the cgroup a moment after they are reaped: after a fork bomb
        // (hundreds of processes killed at once) on a slow machine, well over 100 ms. Waits up
        // to 3 s, checking often at first; what is still busy then is swept by the next
        // launcher or the daemon's exit ([`Sweeper`]).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
        let parents = std::iter::once(&self.parent).chain(self.memory_v1.as_ref().map(|m| &m.0));
        for parent in parents {
            let mut pause = std::time::Duration::from_millis(1);
            loop {
                match rustix::fs::unlinkat(
                    parent,
                    self.name.as_str(),
                    rustix::fs::AtFlags::REMOVEDIR,
                ) {
                    Err(rustix::io::Errno::BUSY) if std::time::Instant::now() < deadline => {}
                    _ => break,
                }
                std::thread::sleep(pause);
                pause = (pause * 2).min(std::time::Duration::from_millis(50));
            }
        }
    }
}

/// Held by the daemon for as long as it starts commands: when it is dropped (the daemon
/// exits), the leaves of launchers that are gone are removed, so a launcher killed before it
/// could remove its own leaf (a `SIGKILL` after the grace) leaves nothing behind.
pub struct Sweeper(Bound);

impl Sweeper {
    pub fn new(bound: Bound) -> Sweeper {
        Sweeper(bound)
    }
}

impl Drop for Sweeper {
    fn drop(&mut self) {
        match &self.0 {
            Bound::CgroupV2 { dir, .. } => sweep(dir, LEAF_PREFIX),
            Bound::CgroupV1 { dir, memory } => {
                sweep(dir, "");
                if let Some(m) = memory {
                    sweep(m, "");
                }
            }
            Bound::Rlimit | Bound::None => {}
        }
    }
}

/// Removes the leaves in `dir` whose launcher is gone.
fn sweep(dir: &Path, prefix: &str) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.strip_prefix(prefix)?.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new("/proc").join(pid.to_string()).exists() {
            let _ = std::fs::remove_dir(e.path());
        }
    }
}

/// When the memory bound killed the command's processes: the report, and a line on stderr
/// for a person.
pub(super) fn out_of_memory(
    leaf: Option<&Leaf>,
    spec: &super::Spec,
    reporter: &super::report::Reporter,
) {
    if !leaf.is_some_and(Leaf::oom_killed) {
        return;
    }
    reporter.send(&super::Report::OutOfMemory { limit_mb: spec.limits.memory_mb });
    let mut err = std::io::stderr().lock();
    let _ = writeln!(
        err,
        "{} ({} MiB, tools-shell limits.memory_mb) and were killed",
        super::notify::OUT_OF_MEMORY,
        spec.limits.memory_mb
    );
}
