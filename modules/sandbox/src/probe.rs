//! The sandbox self-test (SPEC §5 item 6): one probe command run through the launcher with the
//! module's own spec, trying the escapes; the daemon checks the host side (canaries, listeners)
//! and records, per guarantee, whether it holds.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// One guarantee and what the probe found.
#[derive(Debug, Clone)]
pub struct Check {
    pub name: &'static str,
    /// `Some(true)` holds, `Some(false)` missing, `None` not tested here (with why in `note`).
    pub holds: Option<bool>,
    /// The mechanism that should hold it, or why it was not tested.
    pub note: String,
}

#[derive(Debug, Clone)]
pub struct Probe {
    pub checks: Vec<Check>,
    /// The walls' mechanisms (`namespaces`, `Landlock ABI 6`, `seccomp`, the bound), which
    /// the tier names.
    pub mechanisms: Vec<String>,
    /// The launcher reported that the namespaces cannot be had here: no user namespace can
    /// be made, or a container forbids what they need
    /// ([`Cause::NoNamespaces`](crate::launcher::Cause)).
    pub no_namespaces: bool,
    /// Commands run without namespaces in a container of this runtime (`Docker`, `Podman`):
    /// the tier is the container tier, named for it (decision 0071).
    pub container: Option<String>,
}

impl Probe {
    /// Whether the sandbox could not be built because the namespaces cannot be had here.
    pub fn namespaces_refused(&self) -> bool {
        self.no_namespaces
    }

    pub fn missing(&self) -> Vec<&'static str> {
        self.checks.iter().filter(|c| c.holds == Some(false)).map(|c| c.name).collect()
    }

    /// The containment tier as results and the banner state it.
    pub fn tier(&self) -> String {
        let missing = self.missing();
        let with = self.mechanisms.join(", ");
        if let Some(runtime) = &self.container {
            // What only namespaces give is always among the missing here.
            return format!("container tier ({runtime}): {with}; missing: {}", missing.join(", "));
        }
        match (missing.is_empty(), with.is_empty()) {
            (true, true) => "full".to_string(),
            (true, false) => format!("full ({with})"),
            (false, true) => format!("partial (missing: {})", missing.join(", ")),
            (false, false) => format!("partial (missing: {}; with {with})", missing.join(", ")),
        }
    }

    /// The table `hands doctor` prints.
    pub fn table(&self) -> String {
        let mut s = String::new();
        for c in &self.checks {
            let state = match c.holds {
                Some(true) => "holds",
                Some(false) => "MISSING",
                None => "not tested",
            };
            s.push_str(&format!("    {:<28} {:<10} {}\n", c.name, state, c.note));
        }
        s.trim_end().to_string()
    }
}

const SCRIPT: &str = r#"
out=$1; masked=$2; tcp=$3; udp=$4; daemon=$5
echo escaped > "$out/canary" 2>/dev/null
touch "$out/new" 2>/dev/null
chmod 000 "$out/canary" 2>/dev/null
# Each check has its positive control: a visible file reads, the probe's own environment shows.
if grep -q HANDS-PROBE-VISIBLE "${masked%/*}/visible" 2>/dev/null; then
  if grep -q HANDS-PROBE-SECRET "$masked" 2>/dev/null; then echo "masked: missing"; else echo "masked: holds"; fi
fi
if [ "$tcp" != 0 ]; then
  # Whether it got through, the host's listener says (the sandbox's own loopback may answer).
  (exec 3<>"/dev/tcp/127.0.0.1/$tcp") 2>/dev/null
  (echo probe > "/dev/udp/127.0.0.1/$udp") 2>/dev/null
fi
if command -v unshare >/dev/null; then
  if unshare -Ur true 2>/dev/null; then echo "userns: missing"; else echo "userns: holds"; fi
fi
if kill -0 "$daemon" 2>/dev/null; then echo "signal: missing"; else echo "signal: holds"; fi
if grep -qa "HOME=" /proc/self/environ 2>/dev/null; then
  if grep -qa "HOME=" "/proc/$daemon/environ" 2>/dev/null; then echo "environ: missing"; else echo "environ: holds"; fi
fi
# Fork past the bound (the probe's limit is PROBE_PROCESSES): a shell that does not retry a
# failed fork (bash retries for 15 s) starts more sleeps than the bound admits. The sleeps do
# not hold the pipe (grep would wait for them all), and the init ends them with the probe.
sh=$(readlink -f /bin/sh 2>/dev/null)
case "$sh" in
  ''|*bash) ;;
  *) if /bin/sh -c 'i=0; while [ $i -lt 24 ]; do sleep 5 >/dev/null 2>&1 & i=$((i+1)); done; echo all' 2>/dev/null | grep -q all; then echo "bound: missing"; else echo "bound: holds"; fi ;;
esac
echo "done: yes"
"#;

/// The process limit of the probe's own sandbox: small, so that forking past it is quick.
const PROBE_PROCESSES: u64 = 16;

/// A folder in the temp dir no other process uses: `<name>-<pid>-<nanos>`, not made yet.
pub(crate) fn unique_dir(name: &str) -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let tmp = std::fs::canonicalize(std::env::temp_dir()).unwrap_or_else(|_| "/tmp".into());
    tmp.join(format!("{name}-{}-{nanos}", std::process::id()))
}

/// Runs the probe with `base` (the module's launcher spec without argv and cwd).
#[cfg(target_os = "linux")]
pub fn run(launcher: &Path, base: &crate::launcher::Builder, roots: &[PathBuf]) -> Probe {
    let dir = unique_dir("hands-probe");
    let probe = run_in(launcher, base, roots, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    probe
}

#[cfg(target_os = "linux")]
fn run_in(
    launcher: &Path,
    base: &crate::launcher::Builder,
    roots: &[PathBuf],
    dir: &Path,
) -> Probe {
    use crate::launcher::Cause;
    use std::os::unix::fs::PermissionsExt;
    let owners = owner_check(base);
    let network = base.has_host_network();
    // `best-effort` where no user namespace can be made: Landlock and seccomp are the walls,
    // so the notes name them, and what only namespaces give is stated missing.
    let bare = base.has_no_namespaces();
    let by = |with_ns: &'static str, without: &'static str| if bare { without } else { with_ns };
    let (out, inside) = (dir.join("out"), dir.join("in"));
    #[expect(
        clippy::disallowed_methods,
        reason = "the probe's own files, in its folder of the state dir"
    )]
    let setup = (|| -> std::io::Result<()> {
        std::fs::create_dir_all(&out)?;
        std::fs::create_dir_all(&inside)?;
        std::fs::write(out.join("canary"), "canary\n")?;
        std::fs::write(inside.join("visible"), "HANDS-PROBE-VISIBLE\n")?;
        std::fs::write(inside.join("secret"), "HANDS-PROBE-SECRET\n")
    })();
    if let Err(e) = setup {
        return failed(format!("cannot prepare the probe in {}: {e}", dir.display()));
    }
    let outside_tested = !roots.iter().any(|r| out.starts_with(r));
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").ok();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").ok();
    let port = |a: Option<std::io::Result<std::net::SocketAddr>>| {
        a.and_then(Result::ok).map(|a| a.port()).unwrap_or(0)
    };
    let tcp_port = if network { 0 } else { port(tcp.as_ref().map(|l| l.local_addr())) };
    let udp_port = port(udp.as_ref().map(|u| u.local_addr()));
    let daemon = std::process::id();
    // The folder the probe tries to write is visible, as the system folders are (bound
    // read-only, Landlock read-only): a write that fails only because the folder cannot be
    // seen would prove nothing.
    let base = base
        .clone()
        .read_only(out.clone())
        .root(inside.clone(), false)
        .mask([inside.join("secret")])
        .cap_processes(PROBE_PROCESSES);
    let args = [
        out.display().to_string(),
        inside.join("secret").display().to_string(),
        tcp_port.to_string(),
        udp_port.to_string(),
        daemon.to_string(),
    ];
    let mut argv: Vec<String> =
        ["bash", "--noprofile", "--norc", "-c", SCRIPT, "probe"].map(String::from).into();
    argv.extend(args);
    let spec = base.build(argv, inside.clone());
    let child = spec.command(launcher).and_then(|(mut c, reports)| {
        Ok((c.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?, reports))
    });
    let (output, reports) = match child {
        Ok((c, reports)) => (wait(c, Duration::from_secs(60)), reports),
        Err(e) => return failed(format!("the launcher could not start: {e}")),
    };
    let Some(output) = output else {
        return failed("the probe did not finish within 60 s".into());
    };
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    if !text.contains("done: yes") {
        let reported = reports.read();
        let (why, cause) = reported.setup_failed().unwrap_or(("no report", Cause::Other));
        let mut p = failed(format!("the sandbox could not be built (hands sandbox: {why})"));
        p.no_namespaces = cause == Cause::NoNamespaces;
        return p;
    }
    let said = |key: &str| -> Option<bool> {
        text.lines().find_map(|l| l.strip_prefix(key)?.strip_prefix(": ")).map(|v| v == "holds")
    };
    let mode_same =
        std::fs::metadata(out.join("canary")).is_ok_and(|m| m.permissions().mode() & 0o777 != 0);
    if !mode_same {
        // A daemon that is not root could not read a canary the probe made mode 000: the
        // write check below must see its content, not the chmod.
        let _ = std::fs::set_permissions(out.join("canary"), PermissionsExt::from_mode(0o644));
    }
    #[expect(
        clippy::disallowed_methods,
        reason = "the probe's canary, in its folder of the state dir"
    )]
    let canary_same = std::fs::read_to_string(out.join("canary")).is_ok_and(|c| c == "canary\n")
        && !out.join("new").exists();
    let mut udp_received = false;
    if let Some(u) = &udp {
        let _ = u.set_nonblocking(true);
        udp_received = u.recv(&mut [0u8; 64]).is_ok();
    }
    let mut tcp_accepted = false;
    if let Some(l) = &tcp {
        let _ = l.set_nonblocking(true);
        tcp_accepted = l.accept().is_ok();
    }
    let untested = |why: &str| (None, why.to_string());
    let mut checks = Vec::new();
    let mut add = |name: &'static str, (holds, note): (Option<bool>, String)| {
        checks.push(Check { name, holds, note })
    };
    let tested = |holds: bool, how: &str| (Some(holds), how.to_string());
    add(
        "write outside the roots",
        if outside_tested {
            tested(canary_same, by("mount namespace with a read-only root, Landlock", "Landlock"))
        } else {
            untested("the temp folder lies inside a root")
        },
    );
    add(
        "chmod outside the roots",
        if outside_tested {
            tested(
                mode_same,
                by(
                    "read-only root, Landlock",
                    "no mount namespace: Landlock does not restrict chmod",
                ),
            )
        } else {
            untested("the temp folder lies inside a root")
        },
    );
    add(
        "read a masked path",
        match said("masked") {
            Some(h) => tested(
                h,
                by(
                    "masks over denied and credential paths",
                    "no mount namespace to mask in: a secret inside a root is readable",
                ),
            ),
            None => untested("its positive control, a visible file, did not read"),
        },
    );
    if network {
        add("host loopback TCP", untested("the module holds the network grant"));
        add("UDP to the host", untested("the module holds the network grant"));
    } else {
        // Whether the host's listener took a connection, not whether the probe reached a port
        // of that number: the module's network namespace is shared with its tmux sessions and
        // outlives a restart, so a kept session listening on the port the host just handed the
        // probe answered it, and the self-test called the wall missing (found by CI: the kept
        // sessions test's server, on a port the host had given back, at the next daemon's
        // start).
        let tcp_holds = !tcp_accepted;
        let tcp_by = by("private network namespace", "Landlock TCP rules (ABI 4 and up)");
        add("host loopback TCP", tested(tcp_holds, tcp_by));
        let udp_by = by("private network namespace", "no network namespace: UDP is not walled");
        add("UDP to the host", tested(!udp_received, udp_by));
    }
    add(
        "nested user namespace",
        match said("userns") {
            Some(h) => tested(h, "seccomp (unshare, clone flags)"),
            None => untested("unshare is not installed"),
        },
    );
    let small_pid = daemon < 64;
    add(
        "signal the daemon",
        match said("signal") {
            Some(h) if !small_pid => tested(
                h,
                by("PID namespace, Landlock signal scope", "Landlock signal scope (ABI 6 and up)"),
            ),
            _ => untested("the daemon's pid could exist inside the sandbox"),
        },
    );
    add(
        "read the daemon's environ",
        match said("environ") {
            Some(h) if !small_pid => {
                tested(h, by("PID namespace, fresh /proc", "Landlock (no ptrace of the daemon)"))
            }
            Some(_) => untested("the daemon's pid could exist inside the sandbox"),
            None => untested("its positive control, the probe's own environ, did not read"),
        },
    );
    add(
        "fork past the bound",
        match said("bound") {
            Some(h) => tested(h, "the process bound (below)"),
            None => untested("/bin/sh is bash, which retries a failed fork for 15 s"),
        },
    );
    add("vsock, packet sockets", (None, "seccomp socket families (not probed)".to_string()));
    if bare {
        // What only the namespaces give, missing by construction (not probed).
        add(
            "host unix sockets hidden",
            (
                Some(false),
                "no mount namespace: the host's sockets (a session bus, tmux and ssh-agent \
                 sockets) can be connected to; Landlock does not restrict connecting"
                    .into(),
            ),
        );
        add(
            "host terminals hidden",
            (
                Some(false),
                "no mount namespace: /dev/pts is the host's (a tmux pane needs it), so a \
                 command can open the terminals of its own uid"
                    .into(),
            ),
        );
        add(
            "protected paths read-only",
            (
                Some(false),
                "no mount namespace: a protected path in a writable root (`.git/hooks`, \
                 `.vscode`) is as writable as the root; Landlock cannot carve a read-only path \
                 out of a writable one"
                    .into(),
            ),
        );
        add(
            "creates of protected names refused",
            (
                Some(false),
                "no init hears the command's creates: a protected name that does not exist yet \
                 (`.vscode/`, `.envrc`, a hooks folder git's config names) or a missing denied \
                 path in a writable root (`~/.ssh` in a home declared writable) can be created; \
                 hands makes nothing in the roots to occupy them"
                    .into(),
            ),
        );
        add(
            "host processes hidden",
            (Some(false), "no PID namespace: /proc lists the host's processes".into()),
        );
    }
    checks.extend(owners);
    Probe { checks, mechanisms: Vec::new(), no_namespaces: false, container: None }
}

/// For a daemon run as root with namespaces, whose writable roots belong to another user than
/// the one commands run as (a root-owned checkout): whether each can be bound id-mapped, so
/// that commands write it as its owner would (SPEC §5.2 item 6, `launcher::idmap`). Nothing to
/// check (`None`) where commands run as the roots' owner.
fn owner_check(base: &crate::launcher::Builder) -> Option<Check> {
    let to = base.runs_as().filter(|_| !base.has_no_namespaces())?;
    let mut mapped = Vec::new();
    let mut refused = Vec::new();
    for root in base.writable_roots() {
        match crate::launcher::idmap::support(root, to) {
            Ok(None) => {}
            Ok(Some(owner)) => mapped.push(format!("uid {owner} of {}", root.display())),
            Err(why) => refused.push(why.to_string()),
        }
    }
    if mapped.is_empty() && refused.is_empty() {
        return None;
    }
    let (holds, note) = if refused.is_empty() {
        let note = format!(
            "id-mapped mounts: commands (uid {}) write as the owner ({})",
            to.uid,
            mapped.join(", ")
        );
        (true, note)
    } else {
        (false, refused.join("; "))
    };
    Some(Check { name: OWNER_CHECK, holds: Some(holds), note })
}

/// The name of the check [`owner_check`] adds.
pub const OWNER_CHECK: &str = "roots writable as owner";

pub fn failed(why: String) -> Probe {
    Probe {
        checks: vec![Check { name: "sandbox can be built", holds: Some(false), note: why }],
        mechanisms: Vec::new(),
        no_namespaces: false,
        container: None,
    }
}

/// Waits for `child` at most `limit`, then reads what it printed; `None` (and the child
/// killed) when it has not ended by then.
pub(crate) fn wait(
    mut child: std::process::Child,
    limit: Duration,
) -> Option<std::process::Output> {
    use std::io::Read;
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                let mut stdout = Vec::new();
                let mut stderr = Vec::new();
                if let Some(mut o) = child.stdout.take() {
                    let _ = o.read_to_end(&mut stdout);
                }
                if let Some(mut e) = child.stderr.take() {
                    let _ = e.read_to_end(&mut stderr);
                }
                return Some(std::process::Output { status, stdout, stderr });
            }
            Ok(None) if start.elapsed() < limit => std::thread::sleep(Duration::from_millis(10)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_guarantee_lowers_the_tier_and_is_named() {
        let check = |name, holds| Check { name, holds, note: String::new() };
        let p = Probe {
            checks: vec![check("a", Some(true)), check("b", Some(false)), check("c", None)],
            mechanisms: Vec::new(),
            no_namespaces: false,
            container: None,
        };
        assert_eq!(p.missing(), vec!["b"]);
        assert_eq!(p.tier(), "partial (missing: b)");
        assert!(p.table().contains("MISSING"));
        let full = Probe {
            checks: vec![check("a", Some(true)), check("c", None)],
            mechanisms: vec![],
            no_namespaces: false,
            container: None,
        };
        assert_eq!(full.tier(), "full");
        let named =
            Probe { mechanisms: vec!["namespaces".into(), "cgroup v1 pids".into()], ..full };
        assert_eq!(named.tier(), "full (namespaces, cgroup v1 pids)");
    }

    #[test]
    fn the_container_tier_is_named_for_its_runtime_and_says_what_is_missing() {
        let check = |name, holds| Check { name, holds, note: String::new() };
        let p = Probe {
            checks: vec![check("write outside the roots", Some(true)), check("b", Some(false))],
            mechanisms: vec!["no namespaces".into(), "Landlock ABI 7".into(), "seccomp".into()],
            no_namespaces: false,
            container: Some("Podman".into()),
        };
        assert_eq!(
            p.tier(),
            "container tier (Podman): no namespaces, Landlock ABI 7, seccomp; missing: b"
        );
    }
}
