//! What confines the command once the root is built: rlimits, `no_new_privs`, no
//! capabilities, Landlock at the kernel's ABI, and seccomp last.

use super::{Limits, Spec};
use anyhow::{Context, Result};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The rlimits; `nproc` sets RLIMIT_NPROC too, which is the process bound when no cgroup is
/// (inside the command's fresh user namespace it counts that namespace's processes of the
/// command's uid only: Linux 5.14+; the init is one of them). `address_space`: RLIMIT_AS,
/// only where no cgroup bounds memory (`Bound::bounds_memory`).
pub fn rlimits(limits: &Limits, nproc: bool, address_space: bool) -> Result<()> {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    const MIB: u64 = 1024 * 1024;
    let mut set = vec![
        (Resource::Nofile, limits.open_files, "open files"),
        (Resource::Fsize, limits.file_size_mb.saturating_mul(MIB), "file size"),
        (Resource::Core, 0, "core size"),
    ];
    if address_space {
        set.push((Resource::As, limits.memory_mb.saturating_mul(MIB), "address space"));
    }
    if nproc {
        set.push((Resource::Nproc, limits.processes.saturating_add(1), "processes"));
    }
    for (resource, value, what) in set {
        // Lower only: raising a hard limit would need a capability of the host's namespace
        // (`None` is unlimited).
        let v = getrlimit(resource).maximum.map_or(value, |max| value.min(max));
        setrlimit(resource, Rlimit { current: Some(v), maximum: Some(v) })
            .with_context(|| format!("setrlimit({what})"))?;
    }
    Ok(())
}

pub fn no_new_privs() -> Result<()> {
    rustix::thread::set_no_new_privs(true).context("prctl(PR_SET_NO_NEW_PRIVS)")
}

/// Every securebit that keeps root from regaining capabilities, each locked.
const SECUREBITS: u32 = 0b1110_1111;

/// Locks the securebits and empties the bounding and ambient sets; the effective set stays
/// (a later `setresuid` keeps it: no setuid fixup) until [`clear_capabilities`].
///
/// `unprivileged`: an ordinary user's command outside any namespace of its own (`best-effort`
/// where none can be made). It holds no capability, and may neither lock the securebits nor
/// shrink the bounding set (both need CAP_SETPCAP, which failed every such command); only the
/// ambient set is emptied, and `no_new_privs` keeps it from gaining any (set-uid and file
/// capabilities are inert under it).
pub fn lock_privileges(unprivileged: bool) -> Result<()> {
    use rustix::thread::{CapabilitiesSecureBits, CapabilitySet};
    if unprivileged {
        return rustix::thread::clear_ambient_capability_set()
            .context("prctl(PR_CAP_AMBIENT_CLEAR_ALL)");
    }
    rustix::thread::set_capabilities_secure_bits(CapabilitiesSecureBits::from_bits_retain(
        SECUREBITS,
    ))
    .context("prctl(PR_SET_SECUREBITS)")?;
    for cap in 0..64u32 {
        let one = CapabilitySet::from_bits_retain(1 << cap);
        match rustix::thread::remove_capability_from_bounding_set(one) {
            Ok(()) => {}
            // Past the kernel's last capability.
            Err(rustix::io::Errno::INVAL) => break,
            Err(e) => anyhow::bail!("prctl(PR_CAPBSET_DROP, {cap}): {e}"),
        }
    }
    rustix::thread::clear_ambient_capability_set().context("prctl(PR_CAP_AMBIENT_CLEAR_ALL)")
}

/// Zeroes the effective, permitted and inheritable capability sets.
pub fn clear_capabilities() -> Result<()> {
    use rustix::thread::{CapabilitySet, CapabilitySets};
    let none = CapabilitySets {
        effective: CapabilitySet::empty(),
        permitted: CapabilitySet::empty(),
        inheritable: CapabilitySet::empty(),
    };
    rustix::thread::set_capabilities(None, none).context("capset")
}

/// Landlock as a second wall behind the mounts, at whatever ABI the kernel has (the crate's
/// best-effort compatibility drops what an older ABI lacks: truncate before 3, signal and
/// abstract-socket scopes before 6): read+exec on system folders and read-only roots,
/// everything on writable roots, /tmp and the home, devices on /dev, listing anywhere. TCP is
/// not restricted in the namespaces: without the network grant the private network namespace
/// is the wall, and Landlock TCP rules would break the shared loopback SPEC §4.2 promises.
/// Without namespaces (`best-effort` where none can be made) Landlock is the only wall: /dev
/// and /proc are the host's, so only a few devices are opened up, and without the network
/// grant every TCP bind and connect is refused (ABI 4+).
///
/// ABI 1 is not used: it cannot allow a rename or link across folders at all (that right came
/// with ABI 2), which would break ordinary commands (`mv a/x b/`); the mount namespace is the
/// first wall.
pub fn landlock(spec: &Spec, without_namespaces: bool) -> Result<()> {
    use landlock::{
        ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, Ruleset,
        RulesetAttr, RulesetCreatedAttr, Scope, path_beneath_rules,
    };
    if super::sys::landlock_abi() < 2 {
        return Ok(());
    }
    let abi = ABI::V6;
    let exists = |p: &&Path| p.exists();
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(abi))?
        .scope(Scope::from_all(abi))?;
    if without_namespaces && !spec.network {
        ruleset = ruleset.handle_access(AccessNet::from_all(abi))?;
    }
    let read = AccessFs::from_read(abi);
    let all = AccessFs::from_all(abi);
    let system: Vec<&Path> = spec.system.iter().map(PathBuf::as_path).filter(exists).collect();
    // The roots by descriptors opened without following a link and checked against what the
    // daemon's check saw (SPEC §3): in the new root, the mounts made from those; without
    // namespaces, the host's folders themselves.
    let mut ro = Vec::new();
    let mut rw_roots = Vec::new();
    for r in &spec.roots {
        let root = super::mounts::checked_root(spec, &r.path)?;
        if r.writable { rw_roots.push(root) } else { ro.push(root) }
    }
    // A file (a `needs.write` path may be one) takes only a file's rights: Landlock refuses a
    // folder's on it.
    let file = AccessFs::from_file(abi);
    let beneath = |roots: Vec<(std::os::fd::OwnedFd, bool)>,
                   access: landlock::BitFlags<AccessFs>| {
        roots.into_iter().map(move |(fd, dir)| {
            let access = if dir { access } else { access & file };
            Ok::<_, landlock::RulesetError>(PathBeneath::new(fd, access))
        })
    };
    // The sandbox's own /dev is a tmpfs of a few devices (and /dev/shm); the host's is not.
    let dev: Vec<&Path> = if without_namespaces {
        [
            "/dev/null",
            "/dev/zero",
            "/dev/full",
            "/dev/random",
            "/dev/urandom",
            "/dev/tty",
            "/dev/ptmx",
        ]
        .iter()
        .map(Path::new)
        .filter(exists)
        .collect()
    } else {
        Vec::new()
    };
    // A tmux pane needs a pseudo-terminal: /dev/ptmx makes one and the kernel opens its other
    // end on the host's devpts (TIOCGPTPEER checks that path too). The uid's own terminals
    // are then openable, which the probe names ("host terminals hidden").
    let ptys: Vec<&Path> = if without_namespaces {
        [Path::new("/dev/pts")].into_iter().filter(exists).collect()
    } else {
        Vec::new()
    };
    // The sandbox's own /tmp and /dev are tmpfs; without namespaces they are the host's, so
    // neither is opened up (the command's TMPDIR is then a folder of the sandbox home).
    let own: &[&Path] =
        if without_namespaces { &[] } else { &[Path::new("/tmp"), Path::new("/dev")] };
    let rw: Vec<&Path> = [spec.home.as_path()].into_iter().chain(own.iter().copied()).collect();
    ruleset
        .create()?
        .add_rules(path_beneath_rules(system, read))?
        .add_rules(beneath(ro, read))?
        .add_rules(beneath(rw_roots, all))?
        .add_rules(path_beneath_rules(rw, all))?
        .add_rules(path_beneath_rules(dev, AccessFs::from_file(abi)))?
        .add_rules(path_beneath_rules(ptys, AccessFs::from_file(abi) | AccessFs::ReadDir))?
        // Read-only: the kernel lets a uid write some /proc files by mode alone.
        .add_rules(path_beneath_rules(["/proc"], read))?
        // Listing folders only, so `ls /` works; nothing outside the binds exists to list.
        .add_rules(path_beneath_rules(["/"], AccessFs::ReadDir))?
        .restrict_self()?;
    Ok(())
}

/// `open_tree_attr` (Linux 6.15; one number on every architecture since 424), which the libc
/// crate does not name yet: the mount family, like `open_tree`.
const SYS_OPEN_TREE_ATTR: libc::c_long = 467;
/// `fchmodat2` (Linux 6.6; the same number everywhere), which the libc crate names only on some
/// targets (not aarch64 glibc).
const SYS_FCHMODAT2: libc::c_long = 452;

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

/// Installs the seccomp filter, last before execve: foreign architectures kill the process,
/// x32 numbers and `clone3` get ENOSYS (so libc falls back to `clone`, whose flags a filter can
/// see), the deny list and namespace-making `clone` get EPERM. One program (a short prefix,
/// then seccompiler's deny list): each filter installed is one more BPF program for the kernel
/// to check and compile at every launch, and one more to run at every system call.
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
    for (nr, rules) in set_id_rules()? {
        deny.insert(nr, rules);
    }
    // A filter with a listener of the command's own would get the in-run walls' calls before
    // the init (the newest filter's listener wins) and could let them continue unchecked.
    let listener = libc::SECCOMP_FILTER_FLAG_NEW_LISTENER;
    deny.insert(
        libc::SYS_seccomp,
        vec![rule(vec![cond(1, Qword, SeccompCmpOp::MaskedEq(listener), listener)?])?],
    );
    let main: BpfProgram = SeccompFilter::new(
        deny,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )?
    .try_into()?;
    let mut program = prefix();
    program.extend(main);
    seccompiler::apply_filter(&program).context("seccomp")?;
    Ok(())
}

/// Calls that would give a file the set-user-id or set-group-id bit, each with the index of its
/// mode argument and, for an open, of its flags (the mode counts only with `O_CREAT`): EPERM.
/// A program the command leaves set-uid runs with its owner's rights for whoever starts it
/// outside the sandbox — root's, where a root daemon's id-mapped root makes the command's files
/// root's (found by session 40's attack pass; decision 0102). `nosuid` inside the sandbox does
/// not reach the file on the host.
fn set_id_calls() -> Vec<(libc::c_long, u8, Option<u8>)> {
    let mut v = vec![
        (libc::SYS_fchmod, 1, None),
        (libc::SYS_fchmodat, 2, None),
        (SYS_FCHMODAT2, 2, None),
        (libc::SYS_mknodat, 2, None),
        (libc::SYS_openat, 3, Some(2)),
    ];
    #[cfg(target_arch = "x86_64")]
    v.extend([
        (libc::SYS_chmod, 1, None),
        (libc::SYS_mknod, 1, None),
        (libc::SYS_creat, 1, None),
        (libc::SYS_open, 2, Some(1)),
    ]);
    v
}

/// [`set_id_calls`] as rules: one per bit, and for an open one per flag that makes a file
/// (`O_CREAT`, and `O_TMPFILE`'s own bit: a nameless file linked in later; found by the
/// attack pass on 0102), as a rule's conditions must all hold.
fn set_id_rules() -> Result<Vec<(i64, Vec<SeccompRule>)>> {
    use SeccompCmpArgLen::Dword;
    let has = |arg: u8, bit: u32| cond(arg, Dword, SeccompCmpOp::MaskedEq(bit.into()), bit.into());
    let makes = [libc::O_CREAT as u32, (libc::O_TMPFILE & !libc::O_DIRECTORY) as u32];
    set_id_calls()
        .into_iter()
        .map(|(nr, mode, flags)| {
            let mut rules = Vec::new();
            for bit in [libc::S_ISUID, libc::S_ISGID] {
                match flags {
                    None => rules.push(rule(vec![has(mode, bit)?])?),
                    Some(f) => {
                        for m in makes {
                            rules.push(rule(vec![has(mode, bit)?, has(f, m)?])?);
                        }
                    }
                }
            }
            Ok((nr, rules))
        })
        .collect()
}

/// `AUDIT_ARCH_*` of the architectures the filter is built for.
#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 62 | 0x8000_0000 | 0x4000_0000;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 183 | 0x8000_0000 | 0x4000_0000;

/// The start of the filter, which falls through to the deny list: a foreign architecture is
/// killed; x32 system calls (the x86_64 audit arch, bit 30 set in the number: a deny list keyed
/// by x86_64 numbers would not see them) and `clone3` (its flags live in memory a filter cannot
/// read) get ENOSYS.
fn prefix() -> BpfProgram {
    use seccompiler::sock_filter;
    const LD_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
    const JEQ: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
    const RET: u16 = 0x06; // BPF_RET | BPF_K
    let ins = |code, jt, jf, k| sock_filter { code, jt, jf, k };
    let enosys = libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32;
    let mut p = vec![
        ins(LD_ABS, 0, 0, 4),
        ins(JEQ, 1, 0, AUDIT_ARCH),
        ins(RET, 0, 0, libc::SECCOMP_RET_KILL_PROCESS),
        ins(LD_ABS, 0, 0, 0),
    ];
    #[cfg(target_arch = "x86_64")]
    {
        const JGE: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
        p.extend([ins(JGE, 0, 1, 0x4000_0000), ins(RET, 0, 0, enosys)]);
    }
    p.extend([ins(JEQ, 0, 1, libc::SYS_clone3 as u32), ins(RET, 0, 0, enosys)]);
    p
}
