//! The sandbox launcher (`hands __sandbox`, its spec on descriptor 3), run directly: positive controls, and attacks
//! each paired with a canary outside the roots that must stay unchanged. They run as root, so
//! every refusal here comes from the sandbox, not from file permissions.

use super::common::{Fixture, host_processes, unique_sleep};
use serde_json::{Value, json};
use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

const SECRET: &str = "hands-test-secret-7f3a9c";

/// The fixture plus a read-only root, a fake home inside the writable root holding
/// credentials, and a repository whose hooks are protected.
struct Sandbox {
    fx: Fixture,
    ro: PathBuf,
    home: PathBuf,
}

impl Sandbox {
    fn new() -> Sandbox {
        let fx = Fixture::new();
        let ro = fx.root.parent().unwrap().join("ro");
        std::fs::create_dir_all(&ro).unwrap();
        std::fs::write(ro.join("doc.txt"), "read-only content\n").unwrap();
        fx.write("fakehome/.ssh/id_rsa", "PRIVATE KEY\n");
        fx.write("fakehome/.netrc", "machine x password hunter2\n");
        fx.write("fakehome/notes.txt", "not a secret\n");
        fx.write(".git/hooks/pre-commit.sample", "#!/bin/sh\n");
        fx.write(".git/config", "[core]\n");
        let home = fx.state.join("home");
        Sandbox { fx, ro, home }
    }

    fn spec(&self, cmd: &str, network: bool) -> Value {
        let root = &self.fx.root;
        json!({
            "argv": ["bash", "--noprofile", "--norc", "-c", cmd],
            "cwd": root,
            "env": { "PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": self.home, "LANG": "C.UTF-8" },
            "roots": [
                { "path": root, "writable": true },
                { "path": self.ro, "writable": false },
            ],
            "protected": [root.join(".git/hooks"), root.join(".git/config"), root.join(".vscode")],
            "masked": [root.join("fakehome/.ssh"), root.join("fakehome/.netrc"), self.fx.home.join(".ssh")],
            "system": ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc", "/opt"],
            "network": network,
            "home": self.home,
            "limits": { "processes": 64, "open_files": 256, "file_size_mb": 64, "memory_mb": 2048 },
            "bound": bound(),
            "run_as": run_as(),
        })
    }

    fn command(&self, spec: &Value) -> std::process::Command {
        let mut c = self.fx.std_command(&["__sandbox"]);
        hands_sandbox::launcher::attach_spec(&mut c, spec.to_string().as_bytes()).unwrap();
        c.env("HANDS_TEST_SECRET", SECRET);
        c
    }

    fn run_spec(&self, spec: &Value) -> Output {
        self.run_spec_within(spec, Duration::from_secs(20))
    }

    fn run_spec_within(&self, spec: &Value, limit: Duration) -> Output {
        let child = self.command(spec).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn();
        wait_output(child.unwrap(), limit)
    }

    fn run(&self, cmd: &str) -> Output {
        self.run_spec(&self.spec(cmd, false))
    }
}

/// Who commands run as: `nobody` (the roots' owner, see `Fixture`) when the suite is root.
fn run_as() -> Value {
    if rustix::process::geteuid().is_root() {
        json!({ "uid": super::common::COMMAND_UID, "gid": super::common::COMMAND_UID })
    } else {
        Value::Null
    }
}

/// The bound a daemon would choose here, read off `hands doctor`'s choice: the cgroup v1
/// pids hierarchy when it is writable (root on this project's CI), else RLIMIT_NPROC.
fn bound() -> Value {
    let v1 = std::path::Path::new("/sys/fs/cgroup/pids/hands");
    if rustix::process::geteuid().is_root() && std::fs::create_dir_all(v1).is_ok() {
        json!({ "kind": "cgroup-v1", "dir": v1 })
    } else {
        json!({ "kind": "rlimit" })
    }
}

/// Waits for a child with a deadline, so a sandbox that hangs fails the test instead.
fn wait_output(mut child: Child, limit: Duration) -> Output {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut stdout = Vec::new();
            let mut stderr = Vec::new();
            child.stdout.take().unwrap().read_to_end(&mut stdout).unwrap();
            child.stderr.take().unwrap().read_to_end(&mut stderr).unwrap();
            return Output { status, stdout, stderr };
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("the sandboxed command did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn all(o: &Output) -> String {
    format!("{}{}", stdout(o), String::from_utf8_lossy(&o.stderr))
}

fn wait_until(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    f()
}

#[test]
fn positive_controls_read_write_in_rw_root_read_ro_root_and_list_usr_bin() {
    let sb = Sandbox::new();
    let ro = sb.ro.display();
    let o = sb.run(&format!(
        "cat .git/config && echo written > new.txt && cat new.txt && cat {ro}/doc.txt \
         && cat fakehome/notes.txt && ls /usr/bin | grep -qx bash && echo usr-ok \
         && echo tmp > /tmp/t && cat /tmp/t && echo home > $HOME/h && cat $HOME/h && pwd"
    ));
    assert!(o.status.success(), "{}", all(&o));
    let out = stdout(&o);
    for want in ["[core]", "written", "read-only content", "not a secret", "usr-ok", "tmp", "home"]
    {
        assert!(out.contains(want), "missing {want:?} in {out}");
    }
    assert!(out.ends_with(&format!("{}\n", sb.fx.root.display())), "{out}");
    assert_eq!(std::fs::read_to_string(sb.fx.root.join("new.txt")).unwrap(), "written\n");
    sb.fx.assert_canary();
}

#[test]
fn exit_code_is_mirrored_and_a_setup_failure_is_125() {
    let sb = Sandbox::new();
    let o = sb.run("exit 7");
    assert_eq!(o.status.code(), Some(7), "{}", all(&o));
    let mut spec = sb.spec("true", false);
    spec["cwd"] = json!(sb.fx.root.join("missing"));
    let o = sb.run_spec(&spec);
    assert_eq!(o.status.code(), Some(125));
    assert!(all(&o).contains("hands sandbox: cannot enter cwd"), "{}", all(&o));
}

#[test]
fn write_touch_chmod_truncate_outside_roots_are_refused() {
    let sb = Sandbox::new();
    let outside = sb.fx.outside.display();
    let o = sb.run(&format!(
        "echo pwned > {outside}/canary.txt; touch {outside}/new; chmod 777 {outside}/canary.txt; \
         truncate -s 0 {outside}/canary.txt; mkdir {outside}/d; ls {outside}; echo done"
    ));
    assert!(stdout(&o).contains("done"), "{}", all(&o));
    sb.fx.assert_canary();
    let mode = std::fs::metadata(sb.fx.outside.join("canary.txt")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    assert_ne!(mode.permissions().mode() & 0o777, 0o777);
}

#[test]
fn write_into_a_read_only_root_is_refused() {
    let sb = Sandbox::new();
    let ro = sb.ro.display();
    let o = sb.run(&format!(
        "cat {ro}/doc.txt && echo pwned > {ro}/doc.txt; touch {ro}/new; rm -f {ro}/doc.txt; \
         chmod 777 {ro}/doc.txt; echo done"
    ));
    assert!(stdout(&o).contains("read-only content"), "{}", all(&o));
    assert!(stdout(&o).contains("done"), "{}", all(&o));
    assert_eq!(std::fs::read_to_string(sb.ro.join("doc.txt")).unwrap(), "read-only content\n");
    assert!(!sb.ro.join("new").exists());
    sb.fx.assert_canary();
}

#[test]
fn write_to_git_hooks_and_config_in_a_writable_root_is_refused() {
    let sb = Sandbox::new();
    let o = sb.run(
        "echo evil > .git/hooks/pre-commit; echo '[core] hooksPath=/x' >> .git/config; \
         mv .git .git-aside; mv .git/hooks .git/h2; rm -rf .git/hooks; echo ok > src.txt; echo done",
    );
    assert!(stdout(&o).contains("done"), "{}", all(&o));
    let root = &sb.fx.root;
    assert!(!root.join(".git/hooks/pre-commit").exists(), "a hook was written");
    assert!(root.join(".git/hooks/pre-commit.sample").exists());
    assert_eq!(std::fs::read_to_string(root.join(".git/config")).unwrap(), "[core]\n");
    assert!(!root.join(".git-aside").exists(), ".git was moved aside");
    // The positive control: the rest of the root stays writable.
    assert_eq!(std::fs::read_to_string(root.join("src.txt")).unwrap(), "ok\n");
    sb.fx.assert_canary();
}

#[test]
fn masked_credential_files_read_nothing() {
    let sb = Sandbox::new();
    let o = sb.run(
        "cat fakehome/.ssh/id_rsa; ls -a fakehome/.ssh; cat fakehome/.netrc; \
         echo x > fakehome/.netrc; mv fakehome fh2; cat fakehome/notes.txt",
    );
    let out = all(&o);
    assert!(!out.contains("PRIVATE KEY"), "{out}");
    assert!(!out.contains("hunter2"), "{out}");
    assert!(out.contains("not a secret"), "the positive control failed: {out}");
    let netrc = sb.fx.root.join("fakehome/.netrc");
    assert_eq!(std::fs::read_to_string(netrc).unwrap(), "machine x password hunter2\n");
    sb.fx.assert_canary();
}

/// The end state of the race the launcher's descriptors close: the daemon walked the roots and
/// listed `app/.env`; before the sandbox was built, a command in the same root moved `app` to
/// `real` and put a symlink `app -> decoy` (with a `decoy/.env`) in its place. Binding by path
/// followed the link: the mask landed on `decoy/.env` and `real/.env` ran readable. Bound by
/// descriptor, the launcher refuses to start and says why.
#[test]
fn a_mask_behind_a_folder_swapped_for_a_symlink_refuses_the_start() {
    let sb = Sandbox::new();
    let root = &sb.fx.root;
    sb.fx.write("real/.env", "TOKEN=hunter2-swapped\n");
    sb.fx.write("decoy/.env", "decoy\n");
    std::os::unix::fs::symlink("decoy", root.join("app")).unwrap();
    let cmd = "cat real/.env app/.env; echo ran";
    let mut spec = sb.spec(cmd, false);
    spec["masked"].as_array_mut().unwrap().push(json!(root.join("app/.env")));
    let o = sb.run_spec(&spec);
    let out = all(&o);
    assert!(!out.contains("hunter2-swapped"), "the secret was readable: {out}");
    assert!(!stdout(&o).contains("ran"), "the command ran: {out}");
    assert_eq!(o.status.code(), Some(125), "{out}");
    assert!(out.contains("is a symbolic") && out.contains("/app"), "{out}");
    // Positive control: the same secret listed by its real path is masked and the command runs.
    let mut spec = sb.spec(cmd, false);
    spec["masked"].as_array_mut().unwrap().push(json!(root.join("real/.env")));
    let o = sb.run_spec(&spec);
    let out = all(&o);
    assert!(stdout(&o).contains("ran"), "the positive control failed: {out}");
    assert!(out.contains("decoy"), "the positive control failed: {out}");
    assert!(!out.contains("hunter2-swapped"), "the secret was readable: {out}");
    assert_eq!(std::fs::read_to_string(root.join("real/.env")).unwrap(), "TOKEN=hunter2-swapped\n");
    sb.fx.assert_canary();
}

#[test]
fn proc_1_environ_shows_nothing_of_the_launcher() {
    let sb = Sandbox::new();
    let o = sb.run("tr '\\0' '\\n' < /proc/1/environ; echo; env");
    let out = stdout(&o);
    assert!(o.status.success(), "{}", all(&o));
    assert!(out.contains("LANG=C.UTF-8"), "the positive control failed: {out}");
    assert!(!out.contains(SECRET), "the launcher's environment leaked: {out}");
    assert!(!out.contains("XDG_STATE_HOME"), "{out}");
}

#[test]
fn proc_self_fd_shows_only_0_to_2() {
    let sb = Sandbox::new();
    // A descriptor the launcher inherits without close-on-exec must still not reach the command.
    let leaked = std::fs::File::open(sb.fx.outside.join("canary.txt")).unwrap();
    rustix::io::fcntl_setfd(&leaked, rustix::io::FdFlags::empty()).unwrap();
    let o = sb.run("ls /proc/self/fd");
    drop(leaked);
    let fds: Vec<String> = stdout(&o).lines().map(str::to_string).collect();
    // 3 is the folder `ls` itself opened.
    assert_eq!(fds, ["0", "1", "2", "3"], "{}", all(&o));
}

fn tcp_probe(network: bool) -> (Output, bool) {
    let sb = Sandbox::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let cmd = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");
    let o = sb.run_spec(&sb.spec(&cmd, network));
    listener.set_nonblocking(true).unwrap();
    let accepted = listener.accept().is_ok();
    sb.fx.assert_canary();
    (o, accepted)
}

#[test]
fn tcp_connect_to_a_host_loopback_listener_fails_without_network() {
    let (o, accepted) = tcp_probe(false);
    assert!(!o.status.success(), "{}", all(&o));
    assert!(!stdout(&o).contains("connected"));
    assert!(!accepted, "the host listener got a connection");
}

#[test]
fn tcp_connect_to_a_host_loopback_listener_works_with_network() {
    let (o, accepted) = tcp_probe(true);
    assert!(stdout(&o).contains("connected"), "{}", all(&o));
    assert!(accepted);
}

#[test]
fn nested_user_namespace_is_refused() {
    let sb = Sandbox::new();
    let o = sb.run("unshare -Ur true && echo nested; unshare -m true && echo mountns; echo done");
    let out = stdout(&o);
    assert!(out.contains("done"), "{}", all(&o));
    assert!(!out.contains("nested") && !out.contains("mountns"), "{out}");
    sb.fx.assert_canary();
}

#[test]
fn mount_is_refused() {
    let sb = Sandbox::new();
    let o = sb.run(
        "mkdir -p /tmp/x && echo made; mount -t tmpfs x /tmp/x && echo mounted; \
         mount --bind / /tmp/x && echo bound; echo done",
    );
    let out = stdout(&o);
    assert!(out.contains("made") && out.contains("done"), "{}", all(&o));
    assert!(!out.contains("mounted") && !out.contains("bound"), "{out}");
    sb.fx.assert_canary();
}

#[test]
fn setsid_sleep_is_gone_after_the_launcher_exits() {
    let sb = Sandbox::new();
    let secs = unique_sleep();
    let o = sb.run(&format!(
        "setsid sleep {secs} > /dev/null 2>&1 < /dev/null & \
         for i in $(seq 50); do pgrep -x sleep > /dev/null && break; sleep 0.05; done; echo started"
    ));
    assert!(stdout(&o).contains("started"), "{}", all(&o));
    assert!(
        wait_until(Duration::from_secs(3), || host_processes(&["sleep", &secs]).is_empty()),
        "the setsid child outlived the sandbox"
    );
}

#[test]
fn setsid_sleep_is_gone_after_the_launcher_is_killed() {
    let sb = Sandbox::new();
    let (bg, fg) = (unique_sleep(), unique_sleep());
    let cmd = format!("setsid sleep {bg} > /dev/null 2>&1 < /dev/null & exec sleep {fg}");
    let mut child = sb.command(&sb.spec(&cmd, false)).spawn().unwrap();
    let seen = wait_until(Duration::from_secs(10), || {
        !host_processes(&["sleep", &bg]).is_empty() && !host_processes(&["sleep", &fg]).is_empty()
    });
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(seen, "the sandboxed sleeps never started");
    assert!(
        wait_until(Duration::from_secs(3), || {
            host_processes(&["sleep", &bg]).is_empty() && host_processes(&["sleep", &fg]).is_empty()
        }),
        "a sandboxed process outlived the killed launcher"
    );
}

/// The fork bombs of this module, one at a time: two at once on a busy two-core host starved
/// each other's counting shell past the deadline (seen once in a full run, "no count").
static BOMBS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// How long a bombed command may take to count and end: a liveness bound (the bomb ends with
/// the command), loose enough for a loaded host; the bound itself is the process count.
const BOMB_DEADLINE: Duration = Duration::from_secs(45);

#[test]
fn fork_bomb_is_bounded() {
    let _one = BOMBS.lock().unwrap_or_else(|e| e.into_inner());
    let sb = Sandbox::new();
    let start = Instant::now();
    // Only builtins after the bomb starts: a fork would wait for the bomb's slots.
    let spec = sb.spec(
        "mkfifo /tmp/f; exec 3<>/tmp/f; bomb() { bomb | bomb & }; bomb; read -t 2 -u 3; \
         n=0; for p in /proc/[0-9]*; do n=$((n+1)); done; echo procs=$n",
        false,
    );
    let o = sb.run_spec_within(&spec, BOMB_DEADLINE + Duration::from_secs(5));
    let out = stdout(&o);
    let n: u64 = out
        .lines()
        .find_map(|l| l.strip_prefix("procs="))
        .unwrap_or_else(|| panic!("no count: {}", all(&o)))
        .parse()
        .unwrap();
    assert!(n <= 64, "{n} processes ran, above the limit of 64");
    assert!(start.elapsed() < BOMB_DEADLINE, "the bomb was not contained quickly");
    sb.fx.assert_canary();
}

#[test]
fn a_home_outside_the_roots_is_not_visible() {
    let sb = Sandbox::new();
    std::fs::create_dir_all(sb.fx.home.join(".ssh")).unwrap();
    std::fs::write(sb.fx.home.join(".ssh/id_ed25519"), "REAL KEY\n").unwrap();
    let o =
        sb.run(&format!("cat {}/.ssh/id_ed25519; ls /home /root; echo done", sb.fx.home.display()));
    assert!(stdout(&o).contains("done"), "{}", all(&o));
    assert!(!all(&o).contains("REAL KEY"));
}

#[test]
fn a_command_killed_by_a_signal_exits_128_plus_the_signal() {
    let sb = Sandbox::new();
    let secs = unique_sleep();
    let child = sb
        .command(&sb.spec(&format!("exec sleep {secs}"), false))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut pids = Vec::new();
    assert!(wait_until(Duration::from_secs(10), || {
        pids = host_processes(&["sleep", &secs]);
        !pids.is_empty()
    }));
    // From the host, the sandbox's PID 1 is an ordinary process that SIGKILL reaches.
    let pid = rustix::process::Pid::from_raw(pids[0] as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::KILL).unwrap();
    let o = wait_output(child, Duration::from_secs(10));
    assert_eq!(o.status.code(), Some(128 + 9), "{}", all(&o));
}

#[test]
fn writing_host_sysctls_through_proc_is_refused() {
    let sb = Sandbox::new();
    let before = std::fs::read_to_string("/proc/sys/kernel/panic").unwrap();
    // Appending the value it already has: harmless even if the sandbox failed.
    let o = sb.run(
        "v=$(cat /proc/sys/kernel/panic) && echo read; echo $v >> /proc/sys/kernel/panic && \
         echo wrote; echo b >> /proc/sysrq-trigger && echo triggered; echo done",
    );
    let out = stdout(&o);
    assert!(out.contains("read") && out.contains("done"), "{}", all(&o));
    assert!(!out.contains("wrote") && !out.contains("triggered"), "{out}");
    assert_eq!(std::fs::read_to_string("/proc/sys/kernel/panic").unwrap(), before);
}

/// The command is under Landlock even where the mounts would let it write: the sandbox's /proc
/// is mounted read-write, and a process may write its own `/proc/self/comm` by file mode, so
/// only Landlock (read-only on /proc) refuses it. The command does not restrict itself again:
/// it inherits the domain the init made before forking it, which this proves.
#[test]
fn landlock_refuses_a_write_the_mounts_allow() {
    let sb = Sandbox::new();
    let outside = sb.fx.outside.display();
    let o = sb.run(&format!(
        "cat /proc/self/comm > /dev/null && echo read; echo ok > landlock.txt && echo wrote;          echo pwned > /proc/self/comm && echo renamed; echo pwned > {outside}/canary.txt;          echo done"
    ));
    let out = stdout(&o);
    assert!(out.contains("read") && out.contains("wrote") && out.contains("done"), "{}", all(&o));
    assert!(!out.contains("renamed"), "a write to /proc/self/comm went through: {}", all(&o));
    assert!(all(&o).contains("Permission denied"), "{}", all(&o));
    assert_eq!(std::fs::read_to_string(sb.fx.root.join("landlock.txt")).unwrap(), "ok\n");
    sb.fx.assert_canary();
}

#[test]
fn dev_stdout_works_through_the_output_pipe() {
    let sb = Sandbox::new();
    let o =
        sb.run("echo out > /dev/stdout; echo err > /dev/stderr; head -c 3 /dev/urandom | wc -c");
    assert_eq!(stdout(&o), "out\n3\n", "{}", all(&o));
    assert_eq!(String::from_utf8_lossy(&o.stderr), "err\n");
}

#[test]
fn ptrace_io_uring_vsock_packet_sockets_x32_and_tiocsti_are_refused() {
    let sb = Sandbox::new();
    // Raw system calls through python's ctypes; skipped where python3 is missing.
    let probe = r#"
import ctypes, socket, fcntl, termios
libc = ctypes.CDLL(None, use_errno=True)
def sys(name, nr, *args):
    r = libc.syscall(nr, *args)
    print(name, "ok" if r >= 0 else "refused", ctypes.get_errno())
sys("ptrace", 101, 16, 1, 0, 0)
sys("io_uring_setup", 425, 1, 0)
sys("bpf", 321, 0, 0, 0)
sys("x32_getpid", 0x40000000 + 39)
sys("clone3", 435, 0, 0)
sys("process_vm_readv", 310, 1, 0, 0, 0, 0, 0)
sys("perf_event_open", 298, 0, 0, -1, -1, 0)
sys("userfaultfd", 323, 0)
sys("keyctl", 250, 0, 0)
sys("fsopen", 430, 0, 0)
sys("open_tree_attr", 467, -100, 0, 0, 0, 0)
sys("setns", 308, 0, 0)
sys("init_module", 175, 0, 0, 0)
sys("kexec_load", 246, 0, 0, 0, 0)
sys("getpid", 39)
for fam, kind in ((40, socket.SOCK_STREAM), (17, socket.SOCK_RAW)):
    try:
        socket.socket(fam, kind); print("socket", fam, "ok")
    except OSError as e:
        print("socket", fam, "refused", e.errno)
try:
    fcntl.ioctl(1, termios.TIOCSTI, b"x"); print("tiocsti ok")
except OSError as e:
    print("tiocsti refused", e.errno)
"#;
    let o = sb.run(&format!(
        "command -v python3 > /dev/null || {{ echo skip; exit 0; }}; python3 -c '{probe}'"
    ));
    let out = stdout(&o);
    assert_ne!(out.trim(), "skip", "python3 is missing in the sandbox (.ci/run installs it)");
    assert!(out.contains("getpid ok"), "the positive control failed: {}", all(&o));
    for want in [
        "ptrace refused 1",
        "io_uring_setup refused 1",
        "bpf refused 1",
        "x32_getpid refused 38",
        "clone3 refused 38",
        "process_vm_readv refused 1",
        "perf_event_open refused 1",
        "userfaultfd refused 1",
        "keyctl refused 1",
        "fsopen refused 1",
        "open_tree_attr refused 1",
        "setns refused 1",
        "init_module refused 1",
        "kexec_load refused 1",
        "socket 40 refused 1",
        "socket 17 refused 1",
        "tiocsti refused 1",
    ] {
        assert!(out.contains(want), "missing {want:?} in {out}");
    }
}

#[test]
fn a_file_larger_than_the_size_limit_is_cut_and_a_memory_bomb_is_bounded() {
    let sb = Sandbox::new();
    let mut spec = sb.spec(
        "head -c 3000000 /dev/zero > big; echo big=$?; \
         (x=$(head -c 400000000 /dev/zero | tr '\\0' a); echo len=${#x}) 2>/dev/null; \
         echo bomb=$?; echo done",
        false,
    );
    spec["limits"]["file_size_mb"] = json!(1);
    spec["limits"]["memory_mb"] = json!(256);
    let o = sb.run_spec(&spec);
    let out = stdout(&o);
    assert!(out.contains("done"), "{}", all(&o));
    assert!(!out.contains("big=0"), "{out}");
    assert_eq!(std::fs::metadata(sb.fx.root.join("big")).unwrap().len(), 1024 * 1024);
    assert!(!out.contains("len=400000000"), "{out}");
}

#[test]
fn udp_to_a_host_loopback_port_is_not_delivered_without_network() {
    let sb = Sandbox::new();
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = sock.local_addr().unwrap().port();
    let o = sb.run(&format!("echo leak > /dev/udp/127.0.0.1/{port}; echo done"));
    assert!(stdout(&o).contains("done"), "{}", all(&o));
    sock.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    let mut buf = [0u8; 64];
    assert!(sock.recv(&mut buf).is_err(), "a datagram reached the host");
}

#[test]
fn kill_minus_9_minus_1_reaches_nothing_outside() {
    let sb = Sandbox::new();
    // Killed on drop, so a failing assertion does not leave it running (it kept the output
    // pipe of scripts/test-as-user open).
    struct KillOnDrop(std::process::Child);
    impl Drop for KillOnDrop {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut outside =
        KillOnDrop(std::process::Command::new("sleep").arg(unique_sleep()).spawn().unwrap());
    let o = sb.run("kill -9 -1; kill -9 $PPID; echo done");
    assert!(stdout(&o).contains("done"), "{}", all(&o));
    assert!(outside.0.try_wait().unwrap().is_none(), "a host process was killed");
}

#[test]
fn sigterm_to_the_launcher_reaches_the_command_and_its_children() {
    let sb = Sandbox::new();
    let (bg, fg) = (unique_sleep(), unique_sleep());
    let cmd = format!(
        "sh -c 'trap \"echo child > child-term; exit 0\" TERM; sleep {bg} & wait' & \
         trap 'echo term > got-term; wait; exit 3' TERM; sleep {fg} & wait"
    );
    let child = sb
        .command(&sb.spec(&cmd, false))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(wait_until(Duration::from_secs(10), || {
        !host_processes(&["sleep", &bg]).is_empty() && !host_processes(&["sleep", &fg]).is_empty()
    }));
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let o = wait_output(child, Duration::from_secs(10));
    assert_eq!(o.status.code(), Some(3), "{}", all(&o));
    assert_eq!(std::fs::read_to_string(sb.fx.root.join("got-term")).unwrap(), "term\n");
    assert_eq!(std::fs::read_to_string(sb.fx.root.join("child-term")).unwrap(), "child\n");
    assert!(
        host_processes(&["sleep", &bg]).is_empty() && host_processes(&["sleep", &fg]).is_empty()
    );
}

/// A device node that lies in a root is inert inside the sandbox (the roots are bound nodev),
/// and set-uid bits do nothing (nosuid): a host device file planted in a project cannot be a
/// way to the device. Positive control: the sandbox's own /dev/null takes writes.
#[test]
#[ignore = "needs root (device nodes); run with --include-ignored"]
fn device_nodes_in_a_root_are_inert() {
    let why = "only root can plant a device node (mknod), so an ordinary user has none to try";
    if !super::common::needs_root("device_nodes_in_a_root_are_inert", why) {
        return;
    }
    let sb = Sandbox::new();
    let node = sb.fx.root.join("null-node");
    let made = std::process::Command::new("mknod")
        .args([node.to_str().unwrap(), "c", "1", "3"])
        .status()
        .unwrap();
    assert!(made.success(), "mknod needs root, as the suite runs");
    let o = sb.run("echo x > null-node && echo NODE-WROTE; echo x > /dev/null && echo DEVNULL-OK");
    let text = stdout(&o);
    assert!(!text.contains("NODE-WROTE"), "a device node in a root was usable: {}", all(&o));
    assert!(text.contains("DEVNULL-OK"), "the positive control failed: {}", all(&o));
    sb.fx.assert_canary();
}

/// The command is not PID 1: the launcher's init is, so `kill $$` ends bash like anywhere, and
/// is reported as the signal (128 + N). Positive control: what ran before the kill printed.
#[test]
fn kill_dollar_dollar_ends_the_command_with_that_signal() {
    let sb = Sandbox::new();
    for (kill, sig) in
        [("kill $$", 15), ("kill -TERM $$", 15), ("kill -KILL $$", 9), ("kill -HUP $$", 1)]
    {
        let o = sb.run(&format!("echo before; {kill}; echo after"));
        assert_eq!(o.status.code(), Some(128 + sig), "{kill}: {}", all(&o));
        assert_eq!(stdout(&o), "before\n", "{kill}: {}", all(&o));
    }
    let o = sb.run("echo $$; ps -o pid= -p 1 >/dev/null && echo init-is-there");
    assert_eq!(stdout(&o), "2\ninit-is-there\n", "{}", all(&o));
    sb.fx.assert_canary();
}

/// Each bound mechanism holds by itself: RLIMIT_NPROC in the user namespace (for a uid that is
/// not root) and, where the daemon's uid can write one, the cgroup v1 pids cgroup. A fork bomb
/// under each stays within the limit and ends; the canary outside the roots is unchanged.
#[test]
fn a_fork_bomb_is_bounded_by_each_mechanism() {
    let _one = BOMBS.lock().unwrap_or_else(|e| e.into_inner());
    let sb = Sandbox::new();
    let mut bounds = vec![json!({ "kind": "rlimit" })];
    if bound()["kind"] == "cgroup-v1" {
        bounds.push(bound());
    }
    for b in bounds {
        let mut spec = sb.spec(
            "mkfifo /tmp/f; exec 3<>/tmp/f; bomb() { bomb | bomb & }; bomb; read -t 2 -u 3; \
             n=0; for p in /proc/[0-9]*; do n=$((n+1)); done; echo procs=$n",
            false,
        );
        spec["bound"] = b.clone();
        let start = Instant::now();
        let o = sb.run_spec_within(&spec, BOMB_DEADLINE + Duration::from_secs(5));
        let n: u64 = stdout(&o)
            .lines()
            .find_map(|l| l.strip_prefix("procs="))
            .unwrap_or_else(|| panic!("{b}: no count: {}", all(&o)))
            .parse()
            .unwrap();
        // 64 processes for the command, plus the init.
        assert!(n <= 65, "{b}: {n} processes ran, above the limit of 64");
        assert!(start.elapsed() < BOMB_DEADLINE, "{b}: not contained quickly");
        // Positive control: the same command without any bound forks past 64 (root only:
        // an ordinary user's own process count may be capped).
        sb.fx.assert_canary();
    }
    if rustix::process::geteuid().is_root() {
        let mut spec = sb.spec(
            "for i in $(seq 100); do sleep 5 & done; n=0; for p in /proc/[0-9]*; do n=$((n+1)); \
             done; echo procs=$n; kill -9 -1",
            false,
        );
        spec["bound"] = json!({ "kind": "none" });
        let o = sb.run_spec(&spec);
        assert!(stdout(&o).contains("procs=10"), "without a bound 100 sleeps run: {}", all(&o));
    }
}

/// A launcher run as root refuses a spec without `run_as` (commands never run as host root),
/// and with one, the command's files belong to that user and a file readable only by root (by
/// mode, not by a mask) stays unreadable. Positive control: a world-readable file reads.
#[allow(clippy::print_stderr)] // says why it skips
#[test]
fn a_root_launcher_runs_commands_as_run_as_only() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let sb = Sandbox::new();
    let only_root = sb.fx.root.join("root-only.txt");
    std::fs::write(&only_root, "ROOT ONLY\n").unwrap();
    std::fs::set_permissions(&only_root, std::fs::Permissions::from_mode(0o600)).unwrap();
    sb.fx.write("public.txt", "public\n");
    let mut spec = sb.spec("id -u; echo made > made.txt", false);
    spec["run_as"] = Value::Null;
    let o = sb.run_spec(&spec);
    assert_eq!(o.status.code(), Some(125), "{}", all(&o));
    assert!(all(&o).contains("never run as root"), "{}", all(&o));
    assert!(!sb.fx.root.join("made.txt").exists());
    let o = sb.run("id -u; echo made > made.txt; cat public.txt; cat root-only.txt; echo end");
    if super::common::root_owned() {
        // Root's roots bound id-mapped: the command is their owner there (suite::idmap has a
        // root-only file outside the roots).
        assert_eq!(stdout(&o), "65534\npublic\nROOT ONLY\nend\n", "{}", all(&o));
    } else {
        assert_eq!(stdout(&o), "65534\npublic\nend\n", "{}", all(&o));
        assert!(all(&o).contains("Permission denied"), "{}", all(&o));
    }
    assert_eq!(
        std::fs::metadata(sb.fx.root.join("made.txt")).unwrap().uid(),
        super::common::made_by_commands_uid()
    );
    assert_eq!(std::fs::read_to_string(&only_root).unwrap(), "ROOT ONLY\n");
    sb.fx.assert_canary();
}

/// A root launcher binds a read-only root owned by root (mode 0700) id-mapped (decision 0061):
/// the command (`nobody`) reads its 0600 file as the owner would, cannot write it (read-only
/// still: `EROFS`), and a 0600 file of a third user there stays unreadable (the mount keeps
/// its owner; the sandbox's user namespace maps only root and `nobody`, so it shows as the
/// overflow id, 65534, which is not the command).
/// Positive control: the writable root, which `nobody` owns, is written as before.
#[test]
#[ignore = "needs root (run_as); run with --include-ignored"]
fn a_root_owned_read_only_root_reads_as_its_owner_and_stays_read_only() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    if !super::common::needs_root("a_root_owned_read_only_root_reads_as_its_owner", "run_as") {
        return;
    }
    let sb = Sandbox::new();
    let ro = &sb.ro;
    std::fs::set_permissions(ro, PermissionsExt::from_mode(0o700)).unwrap();
    std::fs::write(ro.join("secret.txt"), "owner only\n").unwrap();
    std::fs::set_permissions(ro.join("secret.txt"), PermissionsExt::from_mode(0o600)).unwrap();
    std::fs::write(ro.join("third.txt"), "third user\n").unwrap();
    std::fs::set_permissions(ro.join("third.txt"), PermissionsExt::from_mode(0o600)).unwrap();
    std::os::unix::fs::lchown(ro.join("third.txt"), Some(1234), Some(1234)).unwrap();
    let r = ro.display();
    let o = sb.run(&format!(
        "stat -c %u {r} {r}/third.txt; cat {r}/secret.txt; cat {r}/third.txt; \
         echo x > {r}/new.txt; echo ok > made.txt && cat made.txt"
    ));
    assert_eq!(stdout(&o), "65534\n65534\nowner only\nok\n", "{}", all(&o));
    assert_eq!(std::fs::metadata(ro.join("third.txt")).unwrap().uid(), 1234);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("third.txt: Permission denied"), "{err}");
    assert!(err.contains("new.txt: Read-only file system"), "{err}");
    assert!(!ro.join("new.txt").exists());
    assert_eq!(std::fs::read_to_string(ro.join("secret.txt")).unwrap(), "owner only\n");
    sb.fx.assert_canary();
}

/// As any user, the launcher refuses a set-user-id or set-group-id bit on a file (decision
/// 0102): a set-uid copy of a program left in the project would run with its owner's rights
/// for whoever starts it outside the sandbox. Positive control: `chmod 755` of the same file.
#[test]
fn a_command_cannot_make_a_set_uid_file() {
    use std::os::unix::fs::PermissionsExt;
    let sb = Sandbox::new();
    let o = sb.run(
        "cp /bin/true e && chmod 755 e && echo CONTROL; chmod 4755 e && echo SUID; \
         chmod g+s e && echo SGID; python3 -c 'import os; os.open(\".\", os.O_TMPFILE|os.O_RDWR, \
         0o2755)' 2>/dev/null && echo TMPFILE; python3 -c 'import os; os.close(os.open(\".\", \
         os.O_TMPFILE|os.O_RDWR, 0o755))' && echo PLAIN; echo end",
    );
    assert_eq!(stdout(&o), "CONTROL\nPLAIN\nend\n", "{}", all(&o));
    assert!(all(&o).contains("Operation not permitted"), "{}", all(&o));
    let mode = std::fs::metadata(sb.fx.root.join("e")).unwrap().permissions().mode();
    assert_eq!(mode & 0o7777, 0o755, "{mode:o}");
    sb.fx.assert_canary();
}
