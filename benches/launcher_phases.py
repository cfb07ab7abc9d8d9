#!/usr/bin/python3
"""launcher_phases.py — where the sandbox launcher's time goes, phase by phase (issue 34).

    sudo python3 benches/launcher_phases.py target/release/hands [RUNS]

Captures the spec the daemon builds for `bash true` (`launcher_ab.capture`, the daemon kept
running so that the module's network namespace holder the spec joins stays), then runs
`hands-sandbox __sandbox` (beside HANDS) RUNS times (60 by default) in a row under `perf record
-a`, twice: with the scheduler's fork, exec and exit events alone (the least tracing: the
totals), then with the entry and exit tracepoints of the marker syscalls added (MARKERS: about
10% slower), whose timestamps split a launch into the phases printed, medians over the runs.
bwrap, when present, is timed the first way for comparison. Root only (`perf record -a` with
tracepoints); needs `perf`. Standard library only.
"""
import os, re, shutil, statistics, subprocess, sys, tempfile
from collections import defaultdict

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from launcher_ab import capture  # noqa: E402

SCHED = ["sched:sched_process_fork", "sched:sched_process_exec", "sched:sched_process_exit"]
MARKERS = ["mount", "pivot_root", "open_tree", "move_mount", "mount_setattr", "clone",
           "sethostname", "unshare", "landlock_create_ruleset", "landlock_restrict_self",
           "seccomp", "exit_group", "execve", "wait4"]
BWRAP = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--ro-bind", "/", "/",
         "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
BASH = ["bash", "--noprofile", "--norc", "-c", "true"]
LINE = re.compile(r"\s*(\S.*?)\s+(\d+)/(\d+)\s+([\d.]+):\s+(\S+):\s*(.*)")


def record(events, loop, data):
    """`perf record -a` of `events` around the shell loop `loop`; the events, parsed."""
    args = ["perf", "record", "-q", "-a", "-o", data]
    for e in events:
        args += ["-e", e]
    subprocess.run(args + ["--", "sh", "-c", loop], check=True, stdout=subprocess.DEVNULL)
    out = subprocess.run(["perf", "script", "-i", data, "-F", "comm,pid,tid,time,event,trace"],
                         check=True, capture_output=True, text=True).stdout
    ev = []
    for line in out.splitlines():
        m = LINE.match(line)
        if m:
            _, _, tid, t, name, rest = m.groups()
            ev.append((float(t) * 1000, int(tid), name.split(":", 1)[1], rest))
    return Trace(ev)


class Trace:
    def __init__(self, ev):
        self.ev = ev
        self.children = defaultdict(list)
        self.parent = {}
        self.by = defaultdict(list)
        for e in ev:
            self.by[e[1]].append(e)
            if e[2] == "sched_process_fork":
                child = int(re.search(r"child_pid=(\d+)", e[3]).group(1))
                self.children[e[1]].append((e[0], child))
                self.parent[child] = e[1]

    def first(self, tid, name, after=None, flags=None):
        after = -1 if after is None else after
        for t, _, n, rest in self.by[tid]:
            if n == name and t > after and (flags is None or f"flags: {flags:#010x}" in rest):
                return t
        return None

    def execs(self, program):
        """Execs of `program`, a path, or a name matched as the path's last component."""
        def match(r):
            f = r.split()[0].removeprefix("filename=")
            return f == program or ("/" not in program and f.endswith("/" + program))
        return [(t, tid) for t, tid, n, r in self.ev if n == "sched_process_exec" and match(r)]

    def forked(self, tid, child):
        return next(t for t, c in self.children[tid] if c == child)


def totals(tr, program):
    """Per run: the sandbox's exec to bash's exec, bash's run, bash's exit to the sandbox's."""
    starts = dict((tid, t) for t, tid in tr.execs(program))
    rows = defaultdict(list)
    for t, tid in tr.execs("bash"):
        top = tid
        while top in tr.parent and top not in starts:
            top = tr.parent[top]
        if top not in starts:
            continue
        end, bash_end = tr.first(top, "sched_process_exit"), tr.first(tid, "sched_process_exit")
        rows["setup: exec -> bash's exec"].append(t - starts[top])
        rows["bash runs `true`"].append(bash_end - t)
        rows["teardown: bash's exit -> exit"].append(end - bash_end)
        rows["total"].append(end - starts[top])
    return rows


def phases(tr, program):
    rows = defaultdict(list)
    for t0, launcher in tr.execs(program):
        kids = [c for _, c in tr.children[launcher]]
        init = next((c for c in kids if tr.first(c, "sys_enter_pivot_root")), None)
        if init is None:
            continue
        cmd = next((c for _, c in tr.children[init] if tr.first(c, "sched_process_exec")), None)
        f = tr.first
        clones = [t for t, _, n, _ in tr.by[launcher] if n == "sys_enter_clone"]
        p = {"start": t0, "clone0": clones[0], "idmap": f(launcher, "sys_exit_mount_setattr"),
             "clone": clones[-1], "cloned": f(launcher, "sys_exit_clone", clones[-1]),
             "init": tr.forked(launcher, init), "m1": f(init, "sys_enter_mount")}
        p["piv1"] = f(init, "sys_exit_pivot_root")
        p["dev"] = f(init, "sys_enter_mount", p["piv1"], 0xA)  # the /dev tmpfs
        p["pts"] = f(init, "sys_enter_mount", p["dev"], 0xA)  # devpts
        p["tmp"] = f(init, "sys_enter_mount", p["pts"], 0x6)  # the /tmp tmpfs
        p["home"] = f(init, "sys_enter_mount", p["tmp"], 0x6)  # the home's tmpfs
        # The premade root: the first move_mount with no open_tree since the one before.
        last = None
        for t, _, n, _ in tr.by[init]:
            if t > p["home"] and n in ("sys_enter_open_tree", "sys_enter_move_mount"):
                if n == last == "sys_enter_move_mount":
                    p["root"] = t
                    break
                last = n
        p["piv2"] = f(init, "sys_enter_pivot_root", p["piv1"])
        p["ro"] = f(init, "sys_exit_mount_setattr", p["piv2"])
        p["ll"] = f(init, "sys_enter_landlock_create_ruleset", p["ro"])
        p["llx"] = f(init, "sys_exit_landlock_restrict_self", p["ll"])
        p["fork"] = f(init, "sys_enter_clone", p["llx"])
        p["cmd"] = tr.forked(init, cmd)
        p["cll"] = f(cmd, "sys_enter_landlock_create_ruleset")
        p["cllx"] = f(cmd, "sys_exit_landlock_restrict_self")
        p["sc"] = f(cmd, "sys_enter_seccomp")
        p["exec"] = f(cmd, "sys_enter_execve")
        p["bash"] = f(cmd, "sched_process_exec")
        p["bash_end"] = f(cmd, "sched_process_exit")
        p["init_end"] = f(init, "sched_process_exit")
        p["reaped"] = f(launcher, "sys_exit_wait4", p["init_end"])
        p["end"] = f(launcher, "sched_process_exit")
        steps = [
            ("launcher: exec, dynamic loading, spec, checks", "start", "clone0"),
            ("launcher: id-mapped root (helper userns, open_tree, setattr)", "clone0", "idmap"),
            ("launcher: cgroup leaf, join the module's netns", "idmap", "clone"),
            ("launcher: clone of the init (5 namespaces)", "clone", "cloned"),
            ("init: waits for its id maps", "init", "m1"),
            ("root: private, scratch tmpfs, pivot_root 1", "m1", "piv1"),
            ("root: tmpfs, /proc (+ /proc/sys ro, sysrq)", "piv1", "dev"),
            ("root: /dev (tmpfs, devices, devpts, links)", "dev", "tmp"),
            ("root: /tmp tmpfs, system folders (ro)", "tmp", "home"),
            ("root: sandbox home (tmpfs, kept caches)", "home", "root"),
            ("root: the roots, the masked paths", "root", "piv2"),
            ("root: pivot_root 2, detach old root, / ro", "piv2", "ro"),
            ("init: hostname, cgroup ns, signals, privileges", "ro", "ll"),
            ("init: Landlock", "ll", "llx"),
            ("init: handoff socket, fork of the command", "llx", "cmd"),
            ("command: signals, cwd, rlimits, fds, setsid", "cmd", "cll"),
            ("command: Landlock (own layer)", "cll", "cllx"),
            ("command: program lookup, identity check", "cllx", "sc"),
            ("command: seccomp (listener, handoff, filter)", "sc", "exec"),
            ("command: execve of bash", "exec", "bash"),
            ("bash runs `true`, exits", "bash", "bash_end"),
            ("teardown: the init exits", "bash_end", "init_end"),
            ("teardown: the launcher reaps it", "init_end", "reaped"),
            ("teardown: cgroup leaf removed, exit", "reaped", "end"),
            ("total", "start", "end"),
        ]
        for name, a, b in steps:
            if p.get(a) is not None and p.get(b) is not None:
                rows[name].append(p[b] - p[a])
    return rows


def show(title, rows):
    n = len(rows.get("total", []))
    print(f"{title} ({n} runs; medians, ms)")
    for k, v in rows.items():
        v = sorted(v)
        print(f"  {k:62s} {statistics.median(v):6.3f}  (p90 {v[len(v) * 9 // 10]:6.3f})")


def main():
    if len(sys.argv) not in (2, 3) or os.geteuid() != 0:
        sys.exit(__doc__)
    hands = os.path.abspath(sys.argv[1])
    runs = int(sys.argv[2]) if len(sys.argv) == 3 else 60
    launcher = os.path.join(os.path.dirname(hands), "hands-sandbox")
    work = tempfile.mkdtemp(prefix="hands-phases-")
    spec = os.path.join(work, "spec.json")
    daemon = capture(hands, spec, keep=True)
    try:
        loop = f"for i in $(seq {runs}); do {launcher} __sandbox < {spec} || exit 1; done"
        data = os.path.join(work, "perf.data")
        subprocess.run(["sh", "-c", loop.replace(str(runs), "5", 1)], check=True)  # warm-up
        show(f"{launcher}, scheduler events only", totals(record(SCHED, loop, data), launcher))
        markers = SCHED + [f"syscalls:sys_{d}_{s}" for s in MARKERS for d in ("enter", "exit")]
        show(f"{launcher}, with the marker syscalls", phases(record(markers, loop, data), launcher))
        bwrap = subprocess.run(["sh", "-c", "command -v bwrap"], capture_output=True, text=True)
        if bwrap.returncode == 0:
            cmd = " ".join(BWRAP + BASH)
            bloop = f"for i in $(seq {runs}); do {cmd} || exit 1; done"
            show("bwrap, scheduler events only",
                 totals(record(SCHED, bloop, data), bwrap.stdout.strip()))
    finally:
        daemon.stdin.close()
        daemon.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
