#!/usr/bin/env python3
"""Issue 34's heavy rows, side by side in one run, interleaved run by run:

  work   benches/real-work.sh (copy a ~7,400-file tree, byte-compile it, tar it, git add and
         commit it, checksum every file) run bare, under `bwrap --unshare-all`, and through
         the `bash` tool of the real `hands serve` over stdio.
  steps  the same work, each step timed on its own, bare and through `bash`.
  cargo  `cargo test --offline` of the memchr crate from the cargo registry (its target folder
         removed first), bare and through `bash` (`nproc` printed by each, so the parallelism
         the sandbox lets cargo see shows).
  walls  benches/walls_spaced.py (a `mkdir` of an existing folder, a create and a rename, each
         timed alone, --gap µs of computing before each), bare and through `bash`.

  --vs B  a second build's `hands` (with its `hands-sandbox` beside it) as one more way of the
          `work` and `walls` rows, interleaved with the others: a variant against main in the
          same runs (benches/README.md, "What the notification itself costs").

    python3 benches/work.py [--bin target/release/hands] [--vs B] [--runs 3] [--gap 1000]
                            [work] [steps] [cargo] [walls]

Needs bash, python3, git, tar, sha256sum, bwrap (for the bwrap column) and, for `cargo`, the
memchr sources in ~/.cargo/registry/src with their dev-dependencies fetched. The daemon runs
with tools-shell on a writable root in the bench cache (~/.cache/hands-bench/work/root; the
source tree is made there once), so every way writes to the same file system.
"""
import argparse, glob, json, os, shutil, statistics, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
CACHE = os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "hands-bench", "work")
ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8"}


class Hands:
    """`hands serve` over stdio, spoken to with bare JSON-RPC (no client library's cost)."""

    def __init__(self, binary, root, state, extra=()):
        cfg = os.path.join(state, "daemon.toml")
        grants = "".join(f', {{ path = "{p}", write = {str(w).lower()} }}' for p, w in extra)
        with open(cfg, "w") as f:
            f.write(f'[daemon]\nstate_dir = "{state}"\n\n[[builtins]]\nid = "tools-shell"\n'
                    f'grants = ["filesystem", "spawn"]\n'
                    f'filesystem = [{{ path = "{root}", write = true }}{grants}]\n'
                    'config = { trust = { external = "allow" }, new_repositories = "allow" }\n')
        self.p = subprocess.Popen([binary, "serve", "--config", cfg], cwd=root, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.id = 0
        self.rpc("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                "clientInfo": {"name": "work-bench", "version": "0"}})
        self.p.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")

    def rpc(self, method, params):
        self.id += 1
        self.p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": self.id, "method": method, "params": params}) + "\n")
        self.p.stdin.flush()
        while True:
            msg = json.loads(self.p.stdout.readline())
            if msg.get("id") == self.id:
                return msg

    def bash(self, command, cwd):
        r = self.rpc("tools/call", {"name": "bash", "arguments": {"command": command, "cwd": cwd, "timeout_secs": 600}})
        out = r["result"].get("structuredContent") or {}
        if out.get("exit_code") != 0:
            sys.exit(f"hands: {command} failed: {json.dumps(r)[:2000]}")
        return out

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=30)


def bare(argv, cwd):
    r = subprocess.run(argv, cwd=cwd, env=ENV, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{argv[0]}: failed: {r.stderr[-2000:]}")
    return r.stdout


def bwrap(root, argv):
    return ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--ro-bind", "/", "/",
            "--bind", root, root, "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--chdir", root] + argv


def source_tree(dest):
    """~7,400 files: ten copies of the Python standard library (without byte code)."""
    if os.path.isdir(dest):
        return
    lib = sorted(glob.glob("/usr/lib/python3.[0-9]*"))[-1]
    tmp = dest + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    for i in range(10):
        shutil.copytree(lib, os.path.join(tmp, f"copy{i}"), symlinks=True,
                        ignore=shutil.ignore_patterns("__pycache__", "site-packages", "dist-packages"))
    os.rename(tmp, dest)


def accounted(script, src, w):
    """The real work, then the CPU time it took: `times` (the script's processes, user and
    system) and, inside `hands`' sandbox, its init's threads from /proc/1/task/*/schedstat (CPU
    and runqueue nanoseconds: the walls serve calls there). CPU time is what a busy host's
    noise moves least: a vCPU the host takes away is counted as steal, not as the work's."""
    return (f"bash {script} {src} {w}; times; "
            "if [ \"$(cat /proc/1/comm)\" = hands-sandbox ]; then cat /proc/1/task/*/schedstat; fi")


def cpu_spent(out):
    """(the work's CPU seconds, the init's CPU seconds, the init's runnable-but-waiting seconds)
    from what `accounted` printed."""
    lines = out.strip().splitlines()
    clock = lambda t: float(t[:t.index("m")]) * 60 + float(t[t.index("m") + 1:-1])
    times_at = next(n for n, l in enumerate(lines) if l.count("m") == 2 and l.endswith("s"))
    user, system = lines[times_at + 1].split()
    init = [tuple(int(x) for x in l.split()[:2]) for l in lines[times_at + 2:]]
    return clock(user) + clock(system), sum(c for c, _ in init) / 1e9, sum(w for _, w in init) / 1e9


def timed(f):
    t = time.perf_counter()
    out = f()
    return time.perf_counter() - t, out


def row(name, times, base="bare"):
    b = statistics.median(times[base])
    cells = []
    for k, v in times.items():
        m = statistics.median(v)
        cells.append(f"{k} {m:.2f} s" + ("" if k == base else f" ({m / b:.2f}×)"))
    print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(HERE, "..", "target", "release", "hands"))
    ap.add_argument("--vs", help="a second build's hands, one more way of `work` and `walls`")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--gap", type=int, default=1000, help="µs of computing between calls (walls)")
    ap.add_argument("rows", nargs="*", default=["work"])
    a = ap.parse_args()
    binary = os.path.abspath(a.bin)
    root = os.path.join(CACHE, "root")
    state = os.path.join(CACHE, "state")
    shutil.rmtree(state, ignore_errors=True)
    os.makedirs(root, exist_ok=True)
    os.makedirs(state)
    for w in glob.glob(os.path.join(root, "w-*")):
        shutil.rmtree(w)
    src = os.path.join(root, "src")
    source_tree(src)
    script = os.path.join(root, "real-work.sh")
    shutil.copy(os.path.join(HERE, "real-work.sh"), script)
    home = os.path.expanduser("~")
    # The cargo row's toolchain: cargo takes a lock in CARGO_HOME, rustup's toolchains are read.
    extra = [(f"{home}/.cargo", True), (f"{home}/.rustup", False)] if "cargo" in a.rows else []
    hands = Hands(binary, root, state, extra)
    vs = None
    if a.vs:
        vs_state = state + "-vs"
        shutil.rmtree(vs_state, ignore_errors=True)
        os.makedirs(vs_state)
        vs = Hands(os.path.abspath(a.vs), root, vs_state)
    nfiles = sum(len(f) for _, _, f in os.walk(src))
    print(f"source: {src} ({nfiles} files); hands: {binary}; load {os.getloadavg()[0]:.1f}", flush=True)

    if "work" in a.rows:
        ways = {
            "bare": lambda w: bare(["bash", "-c", accounted(script, src, w)], root),
            "bwrap": lambda w: bare(bwrap(root, ["bash", "-c", accounted(script, src, w)]), root),
            "hands": lambda w: hands.bash(accounted(script, src, w), root)["stdout"],
        }
        if vs:
            ways["vs"] = lambda w: vs.bash(accounted(script, src, w), root)["stdout"]
        times = {k: [] for k in ways}
        cpu = {k: [] for k in ways}
        for i in range(a.runs):
            n = i % len(ways)
            order = list(ways)[n:] + list(ways)[:n]
            spent = {}
            for k in order:
                w = os.path.join(root, f"w-{k}-{i}")
                dt, out = timed(lambda: ways[k](w))
                times[k].append(dt)
                spent[k] = cpu_spent(out)
                cpu[k].append(spent[k][0] + spent[k][1])
                shutil.rmtree(w)
                # The next run must not pay for this one's writeback.
                os.sync()
            print(f"run {i}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in times.items()), flush=True)
            print("  cpu: " + ", ".join(
                f"{k} {c:.2f} s" + (f" (the init {i_:.2f} s, {wait:.2f} s runnable but waiting)" if i_ else "")
                for k, (c, i_, wait) in spent.items()), flush=True)
        row("real work", times)
        row("cpu time (the work's processes and the sandbox's init)", cpu)

    if "steps" in a.rows:
        # Each step of the real work on its own (REAL_WORK_STEPS=1: the script prints "N ms:
        # STEP" on stderr), bare and through `bash`, interleaved: which step the walls cost.
        steps = {"bare": {}, "hands": {}}
        for i in range(a.runs):
            for k in (["bare", "hands"] if i % 2 == 0 else ["hands", "bare"]):
                w = os.path.join(root, f"w-{k}-{i}")
                if k == "bare":
                    r = subprocess.run(["bash", script, src, w], cwd=root, capture_output=True,
                                       text=True, env=dict(ENV, REAL_WORK_STEPS="1"))
                    err = r.stderr
                else:
                    err = hands.bash(f"REAL_WORK_STEPS=1 bash {script} {src} {w}", root)["stderr"]
                seen = {}
                for line in err.splitlines():
                    ms, _, name = line.partition(" ms: ")
                    if name and ms.isdigit():
                        # `git -C` twice (add, then commit): each its own row.
                        seen[name] = seen.get(name, 0) + 1
                        key = name if seen[name] == 1 else f"{name} ({seen[name]})"
                        steps[k].setdefault(key, []).append(int(ms))
                shutil.rmtree(w)
                os.sync()
        for name, v in steps["bare"].items():
            b, h = statistics.median(v), statistics.median(steps["hands"].get(name, [0]))
            print(f"| {name} | bare {b:.0f} ms | hands {h:.0f} ms ({h / max(b, 1):.2f}×, +{h - b:.0f} ms) |",
                  flush=True)

    if "cargo" in a.rows:
        crate = sorted(glob.glob(os.path.expanduser("~/.cargo/registry/src/*/memchr-2.*")))[-1]
        dest = os.path.join(root, "memchr")
        shutil.copytree(crate, dest, dirs_exist_ok=True)
        cmd = "nproc; rm -rf target && cargo test --offline -q >/dev/null 2>&1; echo $?"
        cargo_env = f"CARGO_HOME={home}/.cargo RUSTUP_HOME={home}/.rustup PATH={home}/.cargo/bin:$PATH "
        # Its dev-dependencies, once, outside the timing (the runs are offline).
        bare(["bash", "-c", cargo_env + "cargo fetch -q"], dest)
        times = {"bare": [], "hands": []}
        for i in range(a.runs):
            for k in (["bare", "hands"] if i % 2 == 0 else ["hands", "bare"]):
                if k == "bare":
                    dt, out = timed(lambda: bare(["bash", "-c", cargo_env + "bash -c '" + cmd + "'"], dest))
                else:
                    dt, out = timed(lambda: hands.bash(cargo_env + "bash -c '" + cmd + "'", dest)["stdout"])
                times[k].append(dt)
                print(f"run {i} {k}: {dt:.1f} s, nproc and status: {out.split()}", flush=True)
        row("cargo test (memchr)", times)

    if "walls" in a.rows:
        spaced = os.path.join(root, "walls_spaced.py")
        shutil.copy(os.path.join(HERE, "walls_spaced.py"), spaced)
        ways = {"bare": None, "hands": hands}
        if vs:
            ways["vs"] = vs
        for i in range(a.runs):
            n = i % len(ways)
            for k in list(ways)[n:] + list(ways)[:n]:
                d = os.path.join(root, f"w-walls-{k}-{i}")
                cmd = f"python3 {spaced} {d} {a.gap}"
                out = bare(cmd.split(), root) if ways[k] is None else ways[k].bash(cmd, root)["stdout"]
                print(f"run {i} {k}: {out.strip()}", flush=True)
                shutil.rmtree(d)
    if vs:
        vs.close()
    hands.close()


if __name__ == "__main__":
    main()
