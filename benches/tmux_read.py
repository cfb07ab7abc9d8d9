#!/usr/bin/python3
"""tmux_read.py — `tmux_read` of a live session over stdio, for two (or more) builds in turn.

    python3 benches/tmux_read.py N CONFIG HANDS_A HANDS_B ...

For each build in turn, three times over: starts `HANDS serve --config CONFIG`, starts a tmux
session running bash, then times N `tmux_read` calls from request to answer, each after a pause
of `HANDS_TMUX_PAUSE_MS` (25 unless set: an agent reading the last answer); ends the session
and the daemon. CONFIG is a daemon.toml with tools-shell on (trust `allow`). Prints each run's
median and p90 (ms). Standard library only; use the system's Python.
"""
import json, os, subprocess, sys, time


def run(hands, config, n, pause):
    p = subprocess.Popen([hands, "serve", "--config", config], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    ids = [0]

    def call(method, params, notify=False):
        m = {"jsonrpc": "2.0", "method": method, "params": params}
        if not notify:
            ids[0] += 1
            m["id"] = ids[0]
        p.stdin.write((json.dumps(m) + "\n").encode())
        p.stdin.flush()
        while not notify:
            line = p.stdout.readline()
            if not line:
                sys.exit(f"{hands}: the daemon ended")
            r = json.loads(line)
            if "id" in r:
                if r.get("error") or r.get("result", {}).get("isError"):
                    sys.exit(f"{hands}: {json.dumps(r)[:500]}")
                return r

    call("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                        "clientInfo": {"name": "tmux-read", "version": "1"}})
    call("notifications/initialized", {}, notify=True)
    tool = lambda name, args: call("tools/call", {"name": name, "arguments": args})
    tool("tmux_start", {"name": "bench", "command": "bash --noprofile --norc"})
    time.sleep(1)
    times = []
    for _ in range(n):
        time.sleep(pause)
        t = time.perf_counter()
        tool("tmux_read", {"session": "bench"})
        times.append(time.perf_counter() - t)
    tool("tmux_kill", {"session": "bench"})
    p.stdin.close()
    p.wait()
    times.sort()
    return times[n // 2] * 1000, times[n * 9 // 10] * 1000


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    n, config, builds = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
    pause = float(os.environ.get("HANDS_TMUX_PAUSE_MS", "25")) / 1000
    load = " ".join(open("/proc/loadavg").read().split()[:3])
    print(f"{n} reads a run, uid {os.getuid()}, pause {pause * 1000:.0f} ms, load {load}")
    for _ in range(3):
        for b in builds:
            median, p90 = run(b, config, n, pause)
            print(f"  {b:40s} median {median:6.2f} ms · p90 {p90:6.2f} ms")


if __name__ == "__main__":
    main()
