#!/usr/bin/python3
"""launcher_ab.py — the sandbox launcher of two (or more) builds, interleaved call by call.

    python3 benches/launcher_ab.py capture HANDS SPEC.json   # the daemon's own spec
    python3 benches/launcher_ab.py capture-v2 HANDS SPEC.json
    python3 benches/launcher_ab.py run N SPEC.json HANDS_A HANDS_B ...
    python3 benches/launcher_ab.py run-idmap N SPEC.json HANDS   # as root: id-mapped roots

`capture` starts `HANDS serve` with tools-shell on a fresh writable root (mode 0777, so a root
daemon's `nobody` can enter it), runs `bash` `sleep` through it, reads the launcher's spec off
`/proc/<launcher>/fd/3` (where the launcher keeps the spec it read on stdin), swaps its argv for `bash --noprofile --norc -c true`, drops `parent`
and writes it to SPEC.json (the daemon exits, and its network namespace holder about 2 s later:
a spec that names `netns` then fails to join it, so time such a spec while a daemon of that
state folder runs, as `benches/launcher_phases.py` does, or drop `netns` as `run-idmap` does). `run` times N
rounds of `HANDS __sandbox` with that spec for each build in turn (each after a pause of
`HANDS_AB_PAUSE_MS` ms, 0 unless set: an agent reading the last answer), then a bare spawn of the same
bash, and prints medians and p90s: on a shared machine only builds timed in the same rounds
compare. `run-idmap` (a root daemon's spec, which names `run_as`) times one build in rounds of
three: the spec's writable root given to root (the launcher binds it id-mapped, decision
0061), the same root given to `run_as` (bound as it is), and the bare spawn. Edit the spec's `bound` (`{"kind": "rlimit"}`) to time another process bound. A
build older than a key of the spec is given the spec without it (`spec_for`).
`capture-v2` first gives the daemon a cgroup v2 of its own, as `systemd-run --user --scope`
would: this script moves itself into `acc-runner/` of its (delegated) cgroup and starts the
daemon in `acc-hands-0/` (scripts/acceptance.py's `Scopes`), so the daemon chooses cgroup v2 leaves instead of passing over a cgroup that
other processes share (it then picks RLIMIT_NPROC); `run` then times the launcher making its
leaf there. Standard library (and scripts/ for capture-v2) only; as an ordinary user, put the binaries and SPEC.json where it can read.
"""
import fcntl, json, os, subprocess, sys, tempfile, time

SLEEP = "sleep 2.71828"


def own_scope():
    """A preexec_fn that starts the daemon in a delegated cgroup of its own, this script moved
    out of the way: scripts/acceptance.py's `Scopes`, which its delegated VM cells use too."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
    from acceptance import Scopes
    scopes = Scopes()
    if not scopes.own:
        line = open("/proc/self/cgroup").read().strip().splitlines()[-1]
        sys.exit(f"no delegated cgroup v2 here (/proc/self/cgroup: {line}): run in a "
                 "delegated scope")
    return scopes.preexec()


def capture(hands, out, preexec=None, keep=False):
    """Writes the daemon's spec to `out`. With `keep`, the daemon is left running and returned
    (close its stdin and wait to end it): the module's network namespace holder, which the spec
    joins, ends about 2 s after its last daemon."""
    root = tempfile.mkdtemp(prefix="hands-ab-root-")
    os.chmod(root, 0o777)
    state = tempfile.mkdtemp(prefix="hands-ab-state-")
    cfg = os.path.join(state, "daemon.toml")
    with open(cfg, "w") as f:
        f.write(f'[daemon]\nstate_dir = "{state}"\n[[builtins]]\nid = "tools-shell"\n'
                f'grants = ["filesystem", "spawn"]\n'
                f'filesystem = [{{ path = "{root}", write = true }}]\n'
                f'config = {{ trust = {{ external = "allow" }} }}\n')
    p = subprocess.Popen([hands, "serve", "--config", cfg], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, preexec_fn=preexec)

    def send(m):
        p.stdin.write((json.dumps(m) + "\n").encode())
        p.stdin.flush()

    send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "launcher_ab", "version": "0"}}})
    p.stdout.readline()
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
          "params": {"name": "bash", "arguments": {"command": SLEEP}}})
    spec, t = None, time.time()
    while spec is None and time.time() - t < 30:
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                ppid = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1]
                args = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
                if int(ppid) != p.pid or args[1:2] != [b"__sandbox"]:
                    continue
                s = json.loads(open(f"/proc/{pid}/fd/3", "rb").read())
                if s["argv"][-1] == SLEEP:
                    spec = s
            except (OSError, ValueError, IndexError):
                pass
        time.sleep(0.02)
    p.stdout.readline()
    if not keep:
        p.stdin.close()
        p.wait()
    if spec is None:
        sys.exit("no launcher running the sleep was seen in /proc")
    spec["argv"] = ["bash", "--noprofile", "--norc", "-c", "true"]
    spec.pop("parent", None)
    with open(out, "w") as f:
        json.dump(spec, f)
    print(f"bound {spec.get('bound')}, netns {spec.get('netns')}, run_as {spec.get('run_as')}")
    return p if keep else None


def launch(hands, spec):
    fd = os.memfd_create("hands-spec", os.MFD_ALLOW_SEALING)
    os.write(fd, spec)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, 0xF)
    os.lseek(fd, 0, os.SEEK_SET)
    # The spec is the launcher's stdin, as the daemon passes it: no preexec_fn, so Python
    # spawns it as it spawns the bare command (vfork/posix_spawn, not a fork of itself).
    t = time.perf_counter()
    r = subprocess.run([hands, "__sandbox"], env={}, stdin=fd, capture_output=True)
    d = time.perf_counter() - t
    os.close(fd)
    if r.returncode != 0:
        sys.exit(f"{hands}: exit {r.returncode}: {r.stderr.decode()[-500:]}")
    return d


def bare():
    t = time.perf_counter()
    subprocess.run(["bash", "--noprofile", "--norc", "-c", "true"],
                   env={"PATH": "/usr/bin:/bin"}, stdin=subprocess.DEVNULL, capture_output=True)
    return time.perf_counter() - t


def spec_for(hands, spec):
    """The spec as `hands` reads it: a build older than a key of the spec (one made before the
    launcher took `seen`, say) is given the spec without the keys it refuses as unknown."""
    while True:
        fd = os.memfd_create("hands-spec", os.MFD_ALLOW_SEALING)
        os.write(fd, spec)
        os.lseek(fd, 0, os.SEEK_SET)
        r = subprocess.run([hands, "__sandbox"], env={}, stdin=fd, capture_output=True)
        os.close(fd)
        err = r.stderr.decode()
        if r.returncode == 0 or "unknown field `" not in err:
            return spec
        key = err.split("unknown field `", 1)[1].split("`", 1)[0]
        s = json.loads(spec)
        s.pop(key)
        spec = json.dumps(s).encode()
        print(f"{hands}: given the spec without `{key}`")


def run(n, spec_path, builds):
    spec = open(spec_path, "rb").read()
    specs = {b: spec_for(b, spec) for b in builds}
    times = {b: [] for b in builds}
    times["bare spawn"] = []
    for b in builds:
        launch(b, specs[b])
    pause = float(os.environ.get("HANDS_AB_PAUSE_MS", "0")) / 1000
    for _ in range(n):
        for b in builds:
            time.sleep(pause)
            times[b].append(launch(b, specs[b]))
        time.sleep(pause)
        times["bare spawn"].append(bare())

    def stats(v):
        v = sorted(v)
        return v[len(v) // 2] * 1000, v[len(v) * 9 // 10] * 1000

    base = stats(times["bare spawn"])[0]
    load = " ".join(open("/proc/loadavg").read().split()[:3])
    print(f"{n} rounds, uid {os.getuid()}, bound {json.loads(spec)['bound']}, load {load}")
    for k, v in times.items():
        m, p90 = stats(v)
        print(f"  {k:40s} median {m:6.2f} ms · p90 {p90:6.2f} ms · over the bare spawn {m - base:6.2f} ms")


def run_idmap(n, spec_path, hands):
    spec = open(spec_path, "rb").read()
    s = json.loads(spec)
    if not s.get("run_as") or os.getuid() != 0:
        sys.exit("run-idmap needs root and a root daemon's spec (one that names run_as)")
    if s.pop("netns", None):
        # The holder may be gone with the daemon, and a network namespace of its own would
        # cost each launch tens of ms: both rows run on the host's network instead.
        print("the spec's network namespace dropped: both rows on the host's network")
        s["network"] = True
        spec = json.dumps(s).encode()
    root = next(r["path"] for r in s["roots"] if r.get("writable"))
    uid, gid = s["run_as"]["uid"], s["run_as"]["gid"]
    owners = {"root owned by root (id-mapped)": (0, 0), f"root owned by uid {uid}": (uid, gid)}
    times = {k: [] for k in owners}
    times["bare spawn"] = []
    for _ in range(n):
        for k, ids in owners.items():
            os.chown(root, *ids)
            times[k].append(launch(hands, spec))
        times["bare spawn"].append(bare())
    os.chown(root, 0, 0)

    def median(v):
        return sorted(v)[len(v) // 2] * 1000

    base = median(times["bare spawn"])
    load = " ".join(open("/proc/loadavg").read().split()[:3])
    print(f"{n} rounds, bound {s['bound']}, load {load}")
    for k, v in times.items():
        p90 = sorted(v)[len(v) * 9 // 10] * 1000
        print(f"  {k:40s} median {median(v):6.2f} ms · p90 {p90:6.2f} ms · "
              f"over the bare spawn {median(v) - base:6.2f} ms")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "capture":
        capture(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 4 and sys.argv[1] == "capture-v2":
        capture(sys.argv[2], sys.argv[3], own_scope())
    elif len(sys.argv) >= 5 and sys.argv[1] == "run":
        run(int(sys.argv[2]), sys.argv[3], sys.argv[4:])
    elif len(sys.argv) == 5 and sys.argv[1] == "run-idmap":
        run_idmap(int(sys.argv[2]), sys.argv[3], sys.argv[4])
    else:
        sys.exit(__doc__)
