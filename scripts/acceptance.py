#!/usr/bin/python3
"""acceptance.py — the sandbox's acceptance subset through the real `hands` binary and a real
MCP client over stdio (mcp_session.py), for the user running it and the machine it runs on.
scripts/vm-acceptance runs it inside QEMU VMs, one boot per cell; it runs on a host too.

    acceptance.py HANDS [--strict] [--no-userns]

Each check pairs with a positive control (the allowed neighbour works) and the canary outside
the roots (world-writable, so only the sandbox keeps it unchanged), and prints one line:
    CHECK <name> ok <what was seen>
    CHECK <name> FAIL <one-line reason>
then `ACCEPTANCE: N ok, M FAIL`. Exit 0 only when every check is ok.

Checks: probe (`hands doctor`), bash, write-outside, secret (.env masked), loopback (a listener
on this machine's 127.0.0.1, outside the sandbox, gets no connection), forkbomb (bounded while
a second call answers), kill (`kill $$` ends with SIGTERM), tmux (start, send, read, kill),
leftovers (no process, cgroup or mount left once the daemon is gone).
--strict: every new process, cgroup and mount counts as left behind (a quiet VM); without it,
only those naming this run's folder in their command line or working folder (a shared host).
--no-userns: user.max_user_namespaces is 0 (set here when run as root; vm-acceptance sets it
before dropping to the user): checks instead that `bash` and `tmux_start` are refused, nothing
runs, and the refusal and `hands doctor` name the remedy (user.max_user_namespaces).
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
    def __init__(self, hands, strict):
        self.hands = hands
        self.strict = strict
        self.mark = secrets.token_hex(4)
        self.base = tempfile.mkdtemp(prefix="hands-acc.", dir=os.environ.get("HOME") or "/tmp")
        os.chmod(self.base, 0o755)
        self.proj = os.path.join(self.base, "proj")
        self.outside = os.path.join(self.base, "outside")
        self.state = os.path.join(self.base, "state")
        for d in (self.proj, self.outside, self.state):
            os.mkdir(d)
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
        self.config = os.path.join(self.base, "daemon.toml")
        with open(self.config, "w") as f:
            f.write(f"""[daemon]
state_dir = "{self.state}"

[sandbox]
mode = "enforce"

[trust]
external = "allow"

[[builtins]]
id = "tools-shell"
grants = ["filesystem", "spawn"]
filesystem = [{{ path = "{self.proj}", write = true }}]
[builtins.config]
limits = {{ processes = 128, memory_mb = 1024 }}
""")
        self.env = dict(os.environ, XDG_STATE_HOME=self.state, RUST_LOG="warn")
        self.results = []
        self.session = None
        self.clock = time.time()

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
                               cwd=self.proj, timeout=CALL_TIMEOUT)
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

def check_probe(run, refusing):
    try:
        p = subprocess.run([run.hands, "doctor", "--config", run.config], cwd=run.proj,
                           env=run.env, capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        return run.report("probe", False, "hands doctor did not finish in 600 s")
    out = p.stdout + p.stderr
    tier = re.search(r"sandbox self-test: (.*)", out)
    tier = tier.group(1).strip() if tier else None
    missing = [line.strip() for line in out.splitlines()
               if re.search(r"\bMISSING\b|\bmissing\b", line) and "warnings" not in line]
    if refusing:
        # The missing wall is named, with this machine's remedy.
        ok = p.returncode != 0 and "max_user_namespaces" in out
        why = (f"doctor exit {p.returncode}, tier {tier!r}: "
               + (missing[0] if missing else first_line(out)))
        return run.report("probe", ok, why if ok else
                          f"no refusal naming user.max_user_namespaces: {why}")
    if tier is None:
        return run.report("probe", False, f"no self-test in doctor's output (exit "
                          f"{p.returncode}): {(p.stderr or p.stdout).strip()[-200:]}")
    rows = [line for line in missing if "MISSING" in line]
    table = "write outside the roots" in out
    ok = p.returncode == 0 and tier.startswith("full") and not missing and table
    run.report("probe", ok, f"self-test: {tier}" if ok else
               f"exit {p.returncode}, self-test {tier!r}"
               + (f": {rows[0]}" if rows else "" if table else "; no table of walls"))


def check_bash(run):
    r = run.bash("echo hi; id -u; pwd")
    s = r.structured
    ok = (not r.is_error and s.get("stdout", "").startswith("hi\n")
          and s.get("exit_code") == 0 and str(s.get("containment", "")).startswith("full"))
    run.report("bash", ok, f"uid {s.get('stdout', '').split()[1:2]} containment "
               f"{s.get('containment')!r}" if ok else outcome(r))
    return not r.is_error


def check_write_outside(run):
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
    ok = not r.is_error and "wrote-inside" in out and inside == f"inside-{run.mark}\n" and not bad
    run.report("write-outside", ok, "write, create and chmod outside refused; the root took "
               "its write" if ok else (f"escaped: {bad}" if bad else outcome(r)))


def check_secret(run):
    r = run.bash("cat README.txt; cat .env 2>&1; grep -rs hands-acc-secret . | head -1; true")
    s = r.structured
    seen = s.get("stdout", "") + s.get("stderr", "") + r.text
    host = open(os.path.join(run.proj, ".env")).read()
    ok = (not r.is_error and f"readme-visible-{run.mark}" in seen and run.secret not in seen
          and run.secret in host)
    run.report("secret", ok, ".env read empty, README.txt beside it read" if ok else
               ("the secret was read" if run.secret in seen else outcome(r)))


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


def check_tmux(run):
    s = run.session
    name = f"acc{run.mark}"
    st = s.call("tmux_start", {"name": name, "command": "bash --norc --noprofile"})
    if st.is_error:
        why = outcome(st) if "guarantees missing" in st.text else st.text
        return run.report("tmux", False, f"tmux_start: {why}")
    containment = st.structured.get("containment", "")
    sent = s.call("tmux_send", {"session": name,
                                "text": f"echo $((6*7))-{run.mark}; echo x > {run.canary} "
                                        f"2>/dev/null && echo WRITTEN-$((5*5))"})
    text, deadline = "", time.time() + 60
    while f"42-{run.mark}" not in text and time.time() < deadline:
        rd = s.call("tmux_read", {"session": name})
        text = rd.structured.get("text", rd.text)
        time.sleep(0.5)
    k = s.call("tmux_kill", {"session": name})
    lst = s.call("tmux_list", {})
    listed = name in json.dumps(lst.structured)
    ran = f"42-{run.mark}" in text
    ok = (not sent.is_error and ran and "WRITTEN-25" not in text and not k.is_error
          and k.structured.get("killed") is not False and not listed
          and str(containment).startswith("full"))
    run.report("tmux", ok, f"started ({containment}), sent, read, killed; gone from the list"
               if ok else f"send error {sent.is_error}, output seen {ran}, kill "
               f"{first_line(k.text)}, still listed {listed}, containment {containment!r}")


def check_refusals(run):
    marker = os.path.join(run.proj, "ran-marker")
    s = run.session
    t0 = time.time()
    r = run.bash(f"touch {marker}; echo ran")
    st = s.call("tmux_start", {"name": f"acc{run.mark}", "command": f"touch {marker}"})
    took = time.time() - t0
    ran = os.path.exists(marker)
    said = r.text + " " + st.text
    ok = (r.is_error and st.is_error and not ran and "namespace" in said.lower()
          and "max_user_namespaces" in said)
    run.report("refusal", ok, f"bash and tmux_start refused in {took:.1f} s: {first_line(r.text)}"
               if ok else ("the command ran" if ran else
                           f"bash: {outcome(r)}; tmux_start error {st.is_error}: "
                           f"{first_line(st.text)} (no user.max_user_namespaces remedy?)"))


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        sys.exit(__doc__)
    hands = os.path.abspath(args[0])
    strict, no_userns = "--strict" in args, "--no-userns" in args
    run = Run(hands, strict)
    print(f"acceptance: {os.uname().release}, uid {os.getuid()}, cgroup "
          f"{open('/proc/self/cgroup').read().strip().splitlines()[-1]}, base {run.base}",
          flush=True)
    if no_userns:
        knob = "/proc/sys/user/max_user_namespaces"
        if os.getuid() == 0:
            with open(knob, "w") as f:
                f.write("0")
        if open(knob).read().strip() != "0":
            # Positive control of the row: user namespaces really are off.
            run.report("refusal", False, f"control: {knob} is not 0 (set it as root first)")
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
    if run.session and not run.session.closed:
        steps = ([check_refusals] if no_userns else
                 [check_bash, check_write_outside, check_secret, check_loopback,
                  check_forkbomb, check_kill, check_tmux])
        for step in steps:
            try:
                step(run)
            except McpError as e:
                run.report(step.__name__[6:].replace("_", "-"), False, f"MCP: {e}")
            except Exception as e:  # one broken check must not hide the others
                run.report(step.__name__[6:].replace("_", "-"), False,
                           f"{type(e).__name__}: {e}")
    code, tail = run.session.close() if run.session else (None, [])
    # The module's network-namespace holder (`hands __netns`) outlives the daemon by design, so
    # tmux sessions keep their loopback across a restart (ARCHITECTURE.md); it ends once its
    # pid file in the state folder is gone. So: nothing but the holder may outlive the daemon,
    # and the holder must end after the state folder is removed.
    time.sleep(2)
    beside = [p for p in snap.left()[0] if "__netns" not in p]
    shutil.rmtree(run.state, ignore_errors=True)
    left, deadline = "?", time.time() + 15
    while left and time.time() < deadline:
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
    if tail and not all(ok for _, ok in run.results):
        print("hands stderr (last lines):\n  " + "\n  ".join(tail[-15:]), flush=True)
    good = sum(1 for _, ok in run.results if ok)
    bad = len(run.results) - good
    print(f"ACCEPTANCE: {good} ok, {bad} FAIL", flush=True)
    shutil.rmtree(run.base, ignore_errors=True)
    sys.exit(0 if bad == 0 else 1)


if __name__ == "__main__":
    main()
