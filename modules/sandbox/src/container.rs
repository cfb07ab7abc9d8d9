//! Whether the daemon runs in a container, which runtime made it, and the `run` flags that let
//! the sandbox build its namespaces there (SPEC §5.1, §5.2; decision 0071).
//!
//! A container as `docker run` or `podman run` gives it is root without `CAP_SYS_ADMIN`, under
//! the runtime's seccomp profile and with parts of `/proc` masked: the launcher cannot make
//! (Docker) or cannot use (Podman) the namespaces it needs, so what holds there is Landlock,
//! seccomp and the rlimits — the *container tier* — unless the container is run with the flags
//! [`Container::flags`] names. The flags are the ones tried with Debian 12's packages
//! (`scripts/container-acceptance`): each was needed, and together they give the full tier.

use std::path::Path;

/// The runtime a container was made by, as far as its traces tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Runtime {
    Docker,
    Podman,
    Kubernetes,
    /// Another runtime, by the name it gave (`lxc`, `systemd-nspawn`); empty when unknown.
    Other(String),
}

impl Runtime {
    /// The runtime's name, as the tier and the refusal say it.
    pub fn name(&self) -> &str {
        match self {
            Runtime::Docker => "Docker",
            Runtime::Podman => "Podman",
            Runtime::Kubernetes => "Kubernetes",
            Runtime::Other(name) => name,
        }
    }
}

/// A container the daemon runs in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Container {
    pub runtime: Runtime,
    /// What gave it away: `/.dockerenv`, `/run/.containerenv`, `container=podman`, a cgroup path.
    pub found: Vec<String>,
    /// The container's root is an ordinary user of the host (rootless Podman or Docker, a
    /// remapped user namespace: `/proc/self/uid_map` is not the identity, or Podman's
    /// `/run/.containerenv` says `rootless=1`), so id-mapped roots are out of reach whatever
    /// the flags.
    pub rootless: bool,
    /// The bounding set holds `CAP_SYS_ADMIN` (what `--cap-add SYS_ADMIN` gives).
    pub sys_admin: bool,
    /// The AppArmor profile that confines this process, when one does (`docker-default`).
    pub apparmor: Option<String>,
}

/// The flags that gave the full tier in rootful Podman (4.3): `CAP_SYS_ADMIN` to join the
/// module's network namespace, clone and id-map the roots, and an unmasked `/proc`, without
/// which the kernel refuses a fresh proc mount for the sandbox's PID namespace. Podman's
/// seccomp profile already allows the rest once the capability is there.
pub const PODMAN_FLAGS: &str = "--cap-add SYS_ADMIN --security-opt systempaths=unconfined";

/// The flags that gave the full tier in Docker (20.10): as Podman's, and no seccomp filter,
/// since Docker's default profile refuses `pivot_root` even with `CAP_SYS_ADMIN`.
pub const DOCKER_FLAGS: &str = "--cap-add SYS_ADMIN --security-opt seccomp=unconfined \
                                --security-opt systempaths=unconfined";

/// Where AppArmor confines the container (Ubuntu's and Debian's hosts load `docker-default`
/// or `containers-default`), its profile forbids mounts: this flag lifts it.
pub const APPARMOR_FLAG: &str = "--security-opt apparmor=unconfined";

/// What the container tier walls and what it does not (decision 0048 and 0071), for `hands
/// check`, the `initialize` instructions and the README.
pub const TIER_WALLS: &str = "Landlock keeps reads to the roots and system folders and writes \
     to the writable roots, and refuses TCP (ABI 4 and up) and signals outside (ABI 6); seccomp \
     refuses the denied system calls; rlimits bound file size, open files and address space. \
     Not walled: secrets inside a root (nothing masks them), protected paths in a writable root \
     (`.git/hooks`, `.vscode`), UDP, the container's processes and unix sockets, chmod outside \
     the roots, the number of processes";

impl Container {
    /// `a Podman container`, `a rootless Podman container`, `a Kubernetes pod`.
    pub fn described(&self) -> String {
        match &self.runtime {
            Runtime::Kubernetes => "a Kubernetes pod".into(),
            Runtime::Other(name) if name.is_empty() => "a container".into(),
            r if self.rootless => format!("a rootless {} container", r.name()),
            r => format!("a {} container", r.name()),
        }
    }

    /// The `run` flags that give the full tier with this container's runtime, as one command
    /// line prefix (`podman run --cap-add …`); Docker's for a runtime these were not tried with.
    pub fn flags(&self) -> String {
        let (run, flags) = match self.runtime {
            Runtime::Podman => ("podman run", PODMAN_FLAGS),
            _ => ("docker run", DOCKER_FLAGS),
        };
        match &self.apparmor {
            Some(_) => format!("{run} {flags} {APPARMOR_FLAG}"),
            None => format!("{run} {flags}"),
        }
    }

    /// One line on where the daemon runs and what its commands get, before any sandbox was
    /// tried (`hands check`, the `initialize` instructions): with `CAP_SYS_ADMIN` the full
    /// sandbox may be built (the self-test says); without it, the container tier when
    /// `best_effort`, a refusal of every command otherwise, and the flags that give more.
    pub fn summary(&self, best_effort: bool) -> String {
        let found = self.found.join(", ");
        if self.sys_admin {
            return format!(
                "{} (found: {found}), with CAP_SYS_ADMIN: the full sandbox can be built where \
                 the runtime allows the rest too, as `{}` does (the sandbox self-test says)",
                self.described(),
                self.flags()
            );
        }
        let gets = match best_effort {
            true => format!(
                "without CAP_SYS_ADMIN: commands get the container tier (no namespaces): \
                 {TIER_WALLS}"
            ),
            false => "without CAP_SYS_ADMIN: sandbox.mode = \"enforce\" refuses every command"
                .to_string(),
        };
        format!(
            "{} (found: {found}), {gets}. Remedy: {}",
            self.described(),
            self.remedy(best_effort)
        )
    }

    /// What a person can do, as one sentence: the flags for this runtime (and the other's), or
    /// (unless the daemon is in it already) `sandbox.mode = "best-effort"` for the container
    /// tier.
    pub fn remedy(&self, best_effort: bool) -> String {
        let apparmor = match &self.apparmor {
            Some(p) => format!(" (with {APPARMOR_FLAG}, since AppArmor confines it: {p})"),
            None => String::new(),
        };
        let how = match &self.runtime {
            Runtime::Docker => format!("start it with `{}`{apparmor}", self.flags()),
            Runtime::Podman => format!(
                "start it with `{}`{apparmor} (Docker: `docker run {DOCKER_FLAGS}`)",
                self.flags()
            ),
            Runtime::Kubernetes => format!(
                "give the container what these flags give Docker, in its securityContext \
                 (capability SYS_ADMIN, an unconfined seccomp profile, procMount: Unmasked): \
                 `docker run {DOCKER_FLAGS}`{apparmor}"
            ),
            Runtime::Other(_) => format!(
                "start it with what these flags give Docker or Podman: `docker run \
                 {DOCKER_FLAGS}`, `podman run {PODMAN_FLAGS}`{apparmor}"
            ),
        };
        let rootless = if self.rootless {
            "; a rootless container cannot bind a root-owned project id-mapped: set \
             sandbox.run_as to the project's owner"
        } else {
            ""
        };
        let or = if best_effort {
            ""
        } else {
            ", or set sandbox.mode = \"best-effort\" for the container tier (Landlock, seccomp \
             and rlimits, no namespaces)"
        };
        format!("{how} for the full sandbox{rootless}{or}")
    }
}

/// The container this process runs in, if any (read once).
pub fn detect() -> Option<Container> {
    static FOUND: std::sync::OnceLock<Option<Container>> = std::sync::OnceLock::new();
    FOUND.get_or_init(|| detect_from(&Traces::read())).clone()
}

/// What a container leaves where its processes can read it.
#[derive(Debug, Default)]
struct Traces {
    dockerenv: bool,
    /// `/run/.containerenv` (Podman, Buildah, CRI-O), with its content (rootful Podman fills
    /// it in: `engine="podman-4.3.1"`, `rootless=0`).
    containerenv: Option<String>,
    /// The `container` environment variable (Podman, LXC and systemd-nspawn set it).
    container_var: Option<String>,
    kubernetes: bool,
    cgroup: String,
    /// The line of `/proc/self/mountinfo` for `/`.
    root_mount: String,
    /// `/proc/self/status`.
    status: String,
    /// `/proc/self/attr/current`: the LSM label (AppArmor's profile and mode).
    label: String,
    /// `/proc/self/uid_map`.
    uid_map: String,
}

impl Traces {
    #[expect(
        clippy::disallowed_methods,
        reason = "procfs and the runtimes' marker files, not paths of a root"
    )]
    fn read() -> Traces {
        let text = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        Traces {
            dockerenv: Path::new("/.dockerenv").exists(),
            containerenv: Path::new("/run/.containerenv")
                .exists()
                .then(|| std::fs::read_to_string("/run/.containerenv").unwrap_or_default()),
            container_var: env("container"),
            kubernetes: env("KUBERNETES_SERVICE_HOST").is_some(),
            cgroup: text("/proc/self/cgroup"),
            root_mount: text("/proc/self/mountinfo")
                .lines()
                .find(|l| l.split(' ').nth(4) == Some("/"))
                .unwrap_or_default()
                .to_string(),
            status: text("/proc/self/status"),
            label: text("/proc/self/attr/current"),
            uid_map: text("/proc/self/uid_map"),
        }
    }
}

/// `CAP_SYS_ADMIN`'s bit in the capability sets.
const CAP_SYS_ADMIN: u32 = 21;

/// A container is named by a trace only a running container leaves (the `container`
/// variable, a runtime's cgroup, its storage under `/`), or by two of the weaker ones: the
/// marker files survive in an image turned into a VM's disk (this project's CI host has a
/// `/.dockerenv`, with every capability, on ext4), an overlay root and a bounding set without
/// `CAP_SYS_ADMIN` are found elsewhere too.
fn detect_from(t: &Traces) -> Option<Container> {
    let bounding = t
        .status
        .lines()
        .find_map(|l| l.strip_prefix("CapBnd:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok());
    let mut found = Vec::new();
    let (mut runtime, mut strong, mut weak) = (None, 0, 0);
    let mut saw = |what: String, r: Option<Runtime>, is_strong: bool| {
        found.push(what);
        if is_strong {
            strong += 1
        } else {
            weak += 1
        }
        if runtime.is_none() {
            runtime = r;
        }
    };
    let (docker, podman, kube) =
        (Some(Runtime::Docker), Some(Runtime::Podman), Some(Runtime::Kubernetes));
    if t.kubernetes {
        saw("KUBERNETES_SERVICE_HOST".into(), kube.clone(), true);
    }
    if t.cgroup.contains("kubepods") {
        saw("a kubepods cgroup".into(), kube, true);
    }
    match t.container_var.as_deref() {
        Some("podman") => saw("container=podman".into(), podman.clone(), true),
        Some("docker") => saw("container=docker".into(), docker.clone(), true),
        Some(other) => saw(format!("container={other}"), Some(Runtime::Other(other.into())), true),
        None => {}
    }
    if t.cgroup.contains("libpod") {
        saw("a libpod cgroup".into(), podman.clone(), true);
    }
    if t.cgroup.lines().any(|l| l.contains("/docker/") || l.contains("/docker-")) {
        saw("a docker cgroup".into(), docker.clone(), true);
    }
    if t.cgroup.lines().any(|l| l.contains("/lxc/") || l.contains("/lxc.payload")) {
        saw("an lxc cgroup".into(), Some(Runtime::Other("LXC".into())), true);
    }
    if t.root_mount.contains(" - overlay ") {
        if t.root_mount.contains("/containers/storage/overlay") {
            saw("/ on Podman's overlay storage".into(), podman.clone(), true);
        } else if t.root_mount.contains("/overlay2/") {
            saw("/ on Docker's overlay2 storage".into(), docker.clone(), true);
        } else {
            saw("/ on overlayfs".into(), None, false);
        }
    }
    if t.containerenv.is_some() {
        // CRI-O writes the file too, but under Kubernetes, seen above.
        saw("/run/.containerenv".into(), podman, false);
    }
    if t.dockerenv {
        saw("/.dockerenv".into(), docker, false);
    }
    if bounding.is_some_and(|b| b & (1 << CAP_SYS_ADMIN) == 0) {
        saw("no CAP_SYS_ADMIN in the bounding set".into(), None, false);
    }
    if strong == 0 && weak < 2 {
        return None;
    }
    let runtime = runtime.unwrap_or(Runtime::Other(String::new()));
    let identity = t.uid_map.split_whitespace().collect::<Vec<_>>() == ["0", "0", "4294967295"];
    let rootless = (!t.uid_map.is_empty() && !identity)
        || t.containerenv.as_deref().is_some_and(|e| e.lines().any(|l| l.trim() == "rootless=1"));
    let label = t.label.trim_end_matches(['\0', '\n']).trim();
    let apparmor = (!label.is_empty() && label != "unconfined" && label.contains("(enforce)"))
        .then(|| label.to_string());
    Some(Container {
        runtime,
        found,
        rootless,
        sys_admin: bounding.is_some_and(|b| b & (1 << CAP_SYS_ADMIN) != 0),
        apparmor,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Traces as `docker run` left them (Docker 20.10, Debian 12): `/.dockerenv`, a docker
    /// cgroup (v1), the root on overlay2, no CAP_SYS_ADMIN.
    fn docker() -> Traces {
        Traces {
            dockerenv: true,
            cgroup: "8:pids:/docker/3e5dcf92\n0::/docker/3e5dcf92\n".into(),
            root_mount: "115 53 0:48 / / rw,relatime master:3 - overlay overlay \
                         rw,lowerdir=/var/lib/docker/overlay2/l/V5X"
                .into(),
            status: "CapBnd:\t00000000a80425fb\n".into(),
            ..Traces::default()
        }
    }

    #[test]
    fn docker_is_named_with_its_own_flags() {
        let c = detect_from(&docker()).unwrap();
        assert_eq!(c.runtime, Runtime::Docker);
        assert!(!c.sys_admin);
        let found = [
            "a docker cgroup",
            "/ on Docker's overlay2 storage",
            "/.dockerenv",
            "no CAP_SYS_ADMIN in the bounding set",
        ];
        assert_eq!(c.found, found);
        assert_eq!(c.flags(), format!("docker run {DOCKER_FLAGS}"));
        assert!(c.remedy(false).contains("seccomp=unconfined"), "{}", c.remedy(false));
        assert!(c.remedy(false).contains("best-effort"));
        let confined = Traces { label: "docker-default (enforce)\n".into(), ..docker() };
        let c = detect_from(&confined).unwrap();
        assert!(c.flags().ends_with(APPARMOR_FLAG), "{}", c.flags());
    }

    #[test]
    fn podman_rootful_and_rootless() {
        let t = Traces {
            containerenv: Some("engine=\"podman-4.3.1\"\nrootless=0\n".into()),
            container_var: Some("podman".into()),
            cgroup: "0::/libpod_parent/libpod-7550\n".into(),
            status: "CapBnd:\t00000000a82425fb\n".into(),
            ..Traces::default()
        };
        let c = detect_from(&t).unwrap();
        assert_eq!(c.runtime, Runtime::Podman);
        assert!(c.sys_admin && !c.rootless);
        assert_eq!(c.flags(), format!("podman run {PODMAN_FLAGS}"));
        assert!(
            c.remedy(false).contains(DOCKER_FLAGS),
            "Docker's are named too: {}",
            c.remedy(false)
        );
        assert!(c.summary(false).contains("with CAP_SYS_ADMIN"), "{}", c.summary(false));
        // Podman 4.3 leaves the file empty in a rootless container: its uid map says it.
        let uid_map = "         0       1004          1\n         1     296608      65536\n";
        let rootless = Traces { containerenv: Some(String::new()), uid_map: uid_map.into(), ..t };
        let c = detect_from(&rootless).unwrap();
        assert_eq!(c.described(), "a rootless Podman container");
        assert!(c.remedy(false).contains("sandbox.run_as"), "{}", c.remedy(false));
    }

    /// This project's CI host: a VM whose disk was a Docker image (a stale `/.dockerenv`),
    /// cgroup v1 paths of its own, `/` on ext4, every capability.
    fn ci_host() -> Traces {
        Traces {
            dockerenv: true,
            cgroup: "4:memory:/process_api/1e1f5cb4\n0::/\n".into(),
            root_mount: "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw".into(),
            status: "CapBnd:\t000001fffeffffff\n".into(),
            ..Traces::default()
        }
    }

    #[test]
    fn a_stale_marker_alone_is_no_container() {
        assert_eq!(detect_from(&ci_host()), None);
        assert_eq!(detect_from(&Traces { dockerenv: false, ..ci_host() }), None);
        // The same marker where CAP_SYS_ADMIN was taken away: a container after all.
        let status = "CapBnd:\t00000000a80425fb\n".into();
        let c = detect_from(&Traces { status, ..ci_host() }).unwrap();
        assert_eq!((c.runtime, c.sys_admin), (Runtime::Docker, false));
        // Two weak traces of no known runtime.
        let t = Traces {
            dockerenv: false,
            root_mount: "80 53 0:41 / / rw - overlay overlay rw,lowerdir=/x".into(),
            status: "CapBnd:\t00000000a80425fb\n".into(),
            ..ci_host()
        };
        assert_eq!(detect_from(&t).unwrap().described(), "a container");
    }

    #[test]
    fn a_kubernetes_pod_is_told_its_security_context() {
        let c = detect_from(&Traces { kubernetes: true, ..ci_host() }).unwrap();
        assert_eq!(c.described(), "a Kubernetes pod");
        assert!(c.remedy(false).contains("securityContext"), "{}", c.remedy(false));
    }
}
