//! What confines the process once the root is built: the pids cgroup, rlimits,
//! `no_new_privs`, no capabilities, Landlock, and seccomp last.

use super::{Limits, Spec, sys};
use anyhow::{Context, Result, anyhow};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// The cgroup v1 pids controller. RLIMIT_NPROC does not bind a process whose real uid is the
/// host's root (the kernel exempts it), so the process count is bounded here instead.
const PIDS_V1: &str = "/sys/fs/cgroup/pids";

/// The launcher's own pids cgroup, `hands/<pid>`: it joins it before unsharing, so every process
/// of the sandbox is counted; on drop it moves back and removes the cgroup. Both go through
/// descriptors opened beforehand, because the child's pivot_root moves the launcher's root too.
pub struct PidsCgroup {
    base: File,
    name: String,
    back: File,
}

impl PidsCgroup {
    pub fn join(max: u64) -> Result<PidsCgroup> {
        let missing = || {
            anyhow!(
                "no writable cgroup v1 pids controller at {PIDS_V1}: the process limit cannot \
                 be enforced"
            )
        };
        let root = Path::new(PIDS_V1);
        if !root.join("cgroup.procs").exists() {
            return Err(missing());
        }
        let base = root.join("hands");
        std::fs::create_dir_all(&base).map_err(|_| missing())?;
        // Cgroups of launchers that died without cleaning up (killed); a live one is kept.
        for e in std::fs::read_dir(&base).map_err(|_| missing())?.flatten() {
            let name = e.file_name();
            let Some(pid) = name.to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
            if !Path::new("/proc").join(pid.to_string()).exists() {
                let _ = std::fs::remove_dir(e.path());
            }
        }
        let me = std::process::id();
        let own: PathBuf = {
            let text = std::fs::read_to_string("/proc/self/cgroup").context("/proc/self/cgroup")?;
            let line = text.lines().find_map(|l| {
                let mut f = l.splitn(3, ':');
                let (_, ctrl, path) = (f.next()?, f.next()?, f.next()?);
                ctrl.split(',').any(|c| c == "pids").then(|| path.to_string())
            });
            root.join(line.ok_or_else(missing)?.trim_start_matches('/'))
        };
        let name = me.to_string();
        let dir = base.join(&name);
        match std::fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(anyhow!("cannot create {}: {e}", dir.display())),
        }
        // The launcher itself is one of the tasks counted.
        std::fs::write(dir.join("pids.max"), (max + 1).to_string())
            .with_context(|| format!("cannot set {}/pids.max", dir.display()))?;
        let back = File::options()
            .write(true)
            .open(own.join("cgroup.procs"))
            .with_context(|| format!("cannot open {}/cgroup.procs", own.display()))?;
        std::fs::write(dir.join("cgroup.procs"), &name)
            .with_context(|| format!("cannot join {}", dir.display()))?;
        let base = File::open(&base).context("cannot open the hands pids cgroup")?;
        Ok(PidsCgroup { base, name, back })
    }
}

impl PidsCgroup {
    /// The processes of the sandbox (all but the launcher); `None` when the list cannot be read.
    fn members(&self) -> Option<Vec<u32>> {
        let path = sys::cstr(format!("{}/cgroup.procs", self.name)).ok()?;
        // SAFETY: a directory descriptor and a NUL-terminated relative path.
        let fd = unsafe {
            libc::openat(self.base.as_raw_fd(), path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC)
        };
        if fd < 0 {
            return None;
        }
        let mut text = String::new();
        File::from(super::owned(fd)).read_to_string(&mut text).ok()?;
        let me = std::process::id();
        Some(
            text.lines()
                .filter_map(|l| l.trim().parse::<u32>().ok())
                .filter(|p| *p != me)
                .collect(),
        )
    }

    /// Sends `sig` to every process of the sandbox (all but the launcher).
    pub fn signal_all(&self, sig: i32) {
        for pid in self.members().unwrap_or_default() {
            // SAFETY: kill with integer arguments.
            unsafe { libc::kill(pid as libc::pid_t, sig) };
        }
    }

    /// How many processes the sandbox has left (`usize::MAX` when that cannot be read).
    pub fn count(&self) -> usize {
        self.members().map_or(usize::MAX, |m| m.len())
    }
}

impl Drop for PidsCgroup {
    fn drop(&mut self) {
        let _ = self.back.write_all(self.name.as_bytes());
        if let Ok(name) = sys::cstr(&self.name) {
            // SAFETY: a directory descriptor and a NUL-terminated name.
            unsafe { libc::unlinkat(self.base.as_raw_fd(), name.as_ptr(), libc::AT_REMOVEDIR) };
        }
    }
}

pub fn rlimits(limits: &Limits) -> Result<()> {
    const MIB: u64 = 1024 * 1024;
    let set = [
        (libc::RLIMIT_NOFILE, limits.open_files, "open files"),
        (libc::RLIMIT_FSIZE, limits.file_size_mb.saturating_mul(MIB), "file size"),
        (libc::RLIMIT_AS, limits.memory_mb.saturating_mul(MIB), "address space"),
        (libc::RLIMIT_CORE, 0, "core size"),
        (libc::RLIMIT_NPROC, limits.processes, "processes"),
    ];
    for (resource, value, what) in set {
        let mut cur = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: `cur` is a valid out-pointer.
        if unsafe { libc::getrlimit(resource, &mut cur) } < 0 {
            return Err(sys::os_err(format_args!("getrlimit({what})")));
        }
        // Lower only: raising a hard limit would need a capability of the host's namespace.
        let v = value.min(cur.rlim_max);
        let new = libc::rlimit { rlim_cur: v, rlim_max: v };
        // SAFETY: `new` is a valid rlimit.
        if unsafe { libc::setrlimit(resource, &new) } < 0 {
            return Err(sys::os_err(format_args!("setrlimit({what})")));
        }
    }
    Ok(())
}

pub fn no_new_privs() -> Result<()> {
    // SAFETY: prctl with integer arguments.
    let ret = unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
    if ret < 0 { Err(sys::os_err("prctl(PR_SET_NO_NEW_PRIVS)")) } else { Ok(()) }
}

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// Every securebit that keeps root from regaining capabilities, each locked.
const SECUREBITS: libc::c_ulong = 0b1110_1111;

/// Drops every capability: securebits locked (no root magic on execve), the bounding set
/// emptied, ambient cleared, then effective/permitted/inheritable zeroed.
pub fn drop_capabilities() -> Result<()> {
    // SAFETY: prctl with integer arguments throughout.
    unsafe {
        if libc::prctl(libc::PR_SET_SECUREBITS, SECUREBITS) < 0 {
            return Err(sys::os_err("prctl(PR_SET_SECUREBITS)"));
        }
        for cap in 0..64 {
            if libc::prctl(libc::PR_CAPBSET_DROP, cap) < 0 {
                if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL) {
                    break;
                }
                return Err(sys::os_err(format_args!("prctl(PR_CAPBSET_DROP, {cap})")));
            }
        }
        if libc::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 {
            return Err(sys::os_err("prctl(PR_CAP_AMBIENT_CLEAR_ALL)"));
        }
    }
    let header = CapHeader { version: 0x2008_0522, pid: 0 };
    let data = [CapData { effective: 0, permitted: 0, inheritable: 0 }; 2];
    // SAFETY: a v3 header and the two data words it expects.
    let ret = unsafe { libc::syscall(libc::SYS_capset, &header, data.as_ptr()) };
    if ret < 0 { Err(sys::os_err("capset")) } else { Ok(()) }
}

/// Landlock as a second wall behind the mounts: read+exec on system folders and read-only
/// roots, everything on writable roots, /tmp and the home, devices on /dev, listing anywhere;
/// signals and abstract unix sockets scoped to the sandbox. TCP is not restricted here: without
/// the network grant the private network namespace is the wall, and Landlock TCP rules would
/// break the shared loopback SPEC §4.2 promises (a dev server reachable from other commands).
/// Anything short of full enforcement on this kernel is a failure.
pub fn landlock(spec: &Spec) -> Result<()> {
    use landlock::{
        ABI, Access, AccessFs, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
        path_beneath_rules,
    };
    let abi = ABI::V6;
    let exists = |p: &&Path| p.exists();
    let ruleset =
        Ruleset::default().handle_access(AccessFs::from_all(abi))?.scope(Scope::from_all(abi))?;
    let read = AccessFs::from_read(abi);
    let all = AccessFs::from_all(abi);
    let system: Vec<&Path> = spec.system.iter().map(PathBuf::as_path).filter(exists).collect();
    let ro: Vec<&Path> =
        spec.roots.iter().filter(|r| !r.writable).map(|r| r.path.as_path()).collect();
    let rw: Vec<&Path> = spec
        .roots
        .iter()
        .filter(|r| r.writable)
        .map(|r| r.path.as_path())
        .chain([spec.home.as_path(), Path::new("/tmp"), Path::new("/dev")])
        .collect();
    let status = ruleset
        .create()?
        .add_rules(path_beneath_rules(system, read))?
        .add_rules(path_beneath_rules(ro, read))?
        .add_rules(path_beneath_rules(rw, all))?
        // Read-only: the command's uid is the host's root, which the kernel lets write global
        // sysctls (core_pattern!) and /proc/sysrq-trigger by file mode alone.
        .add_rules(path_beneath_rules(["/proc"], read))?
        // Listing folders only, so `ls /` works; nothing outside the binds exists to list.
        .add_rules(path_beneath_rules(["/"], AccessFs::ReadDir))?
        .restrict_self()?;
    anyhow::ensure!(
        status.ruleset == RulesetStatus::FullyEnforced,
        "Landlock is not fully enforced on this kernel ({:?})",
        status.ruleset
    );
    Ok(())
}

/// `open_tree_attr` (Linux 6.15; one number on every architecture since 424), which the libc
/// crate does not name yet: the mount family, like `open_tree`.
const SYS_OPEN_TREE_ATTR: libc::c_long = 467;

/// System calls refused with EPERM whatever their arguments (SPEC §5 item 4).
const DENIED: &[libc::c_long] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_keyctl,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    SYS_OPEN_TREE_ATTR,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_open_by_handle_at,
    libc::SYS_acct,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_reboot,
    libc::SYS_chroot,
];

/// `clone` flags that make a namespace.
const NAMESPACE_FLAGS: &[libc::c_int] = &[
    libc::CLONE_NEWNS,
    libc::CLONE_NEWCGROUP,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWTIME,
];

/// Socket families a command may open; vsock, packet, bluetooth, ... are refused.
const SOCKET_FAMILIES: &[libc::c_int] =
    &[libc::AF_UNIX, libc::AF_INET, libc::AF_INET6, libc::AF_NETLINK];

fn rule(conds: Vec<SeccompCondition>) -> Result<SeccompRule> {
    Ok(SeccompRule::new(conds)?)
}

fn cond(arg: u8, len: SeccompCmpArgLen, op: SeccompCmpOp, val: u64) -> Result<SeccompCondition> {
    Ok(SeccompCondition::new(arg, len, op, val)?)
}

/// Installs the seccomp filters, last before execve: foreign architectures kill the process,
/// x32 numbers and `clone3` get ENOSYS (so libc falls back to `clone`, whose flags a filter can
/// see), the deny list and namespace-making `clone` get EPERM.
pub fn seccomp() -> Result<()> {
    use SeccompCmpArgLen::{Dword, Qword};
    let arch = TargetArch::try_from(std::env::consts::ARCH)?;
    let mut deny: BTreeMap<i64, Vec<SeccompRule>> =
        DENIED.iter().map(|&nr| (nr, Vec::new())).collect();
    let clone_rules = NAMESPACE_FLAGS
        .iter()
        .map(|&f| rule(vec![cond(0, Qword, SeccompCmpOp::MaskedEq(f as u64), f as u64)?]))
        .collect::<Result<_>>()?;
    deny.insert(libc::SYS_clone, clone_rules);
    // The request's type differs between libcs (c_ulong in glibc, c_int in musl).
    #[allow(clippy::unnecessary_cast)]
    let ioctl_rules = [libc::TIOCSTI as u64, libc::TIOCLINUX as u64]
        .iter()
        .map(|&req| rule(vec![cond(1, Dword, SeccompCmpOp::Eq, req)?]))
        .collect::<Result<_>>()?;
    deny.insert(libc::SYS_ioctl, ioctl_rules);
    // One rule whose conditions all hold: the family is none of the allowed ones.
    let family_conds = SOCKET_FAMILIES
        .iter()
        .map(|&f| cond(0, Dword, SeccompCmpOp::Ne, f as u64))
        .collect::<Result<_>>()?;
    deny.insert(libc::SYS_socket, vec![rule(family_conds)?]);
    let main: BpfProgram = SeccompFilter::new(
        deny,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )?
    .try_into()?;
    let clone3: BpfProgram = SeccompFilter::new(
        [(libc::SYS_clone3, Vec::new())].into_iter().collect(),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch,
    )?
    .try_into()?;
    #[cfg(target_arch = "x86_64")]
    seccompiler::apply_filter(&x32_filter()).context("seccomp (x32)")?;
    seccompiler::apply_filter(&clone3).context("seccomp (clone3)")?;
    seccompiler::apply_filter(&main).context("seccomp")?;
    Ok(())
}

/// x32 system calls share the x86_64 audit arch with bit 30 set in the number; a deny list
/// keyed by x86_64 numbers would not see them, so they are refused here as a whole.
#[cfg(target_arch = "x86_64")]
fn x32_filter() -> BpfProgram {
    use seccompiler::sock_filter;
    const LD_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
    const JEQ: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
    const JGE: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
    const RET: u16 = 0x06; // BPF_RET | BPF_K
    const AUDIT_ARCH_X86_64: u32 = 62 | 0x8000_0000 | 0x4000_0000;
    let ins = |code, jt, jf, k| sock_filter { code, jt, jf, k };
    vec![
        ins(LD_ABS, 0, 0, 4),
        ins(JEQ, 1, 0, AUDIT_ARCH_X86_64),
        ins(RET, 0, 0, libc::SECCOMP_RET_KILL_PROCESS),
        ins(LD_ABS, 0, 0, 0),
        ins(JGE, 0, 1, 0x4000_0000),
        ins(RET, 0, 0, libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32),
        ins(RET, 0, 0, libc::SECCOMP_RET_ALLOW),
    ]
}
