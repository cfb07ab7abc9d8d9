#!/usr/bin/python3
"""first_call.py — a fresh daemon's first `bash` call, for two (or more) builds interleaved.

    python3 benches/first_call.py N CONFIG HANDS_A HANDS_B ...

Each round starts `HANDS serve --config CONFIG` over stdio for each build in turn, sends
`initialize`, waits until the daemon's stderr says the sandbox self-test has finished (its
`containment:` line), waits `HANDS_FIRST_PAUSE_MS` more (1000 unless set: a client reading the
tool list, an agent thinking), then times one `bash` `true` call from request to answer, and
ends the daemon. CONFIG is a daemon.toml with tools-shell on (trust `allow`, so nothing asks).
Prints each build's median and p90 (ms). Standard library only; use the system's Python.
"""
import json, os, subprocess, sys, time


def first_call(hands, config, pause):
    p = subprocess.Popen([hands, "serve", "--config", config], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def send(o):
        p.stdin.write((json.dumps(o) + "\n").encode())
        p.stdin.flush()

    def recv():
        while True:
            line = p.stdout.readline()
            if not line:
                sys.exit(f"{hands}: the daemon ended: {p.stderr.read().decode()[-500:]}")
            m = json.loads(line)
            if "id" in m:
                return m

    send({"jsonrpc": "2.0", "id": 0, "method": "initialize",
          "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                     "clientInfo": {"name": "first-call", "version": "1"}}})
    recv()
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    while b"containment:" not in p.stderr.readline():
        pass
    time.sleep(pause)
    t = time.perf_counter()
    send({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
          "params": {"name": "bash", "arguments": {"command": "true"}}})
    r = recv()
    d = time.perf_counter() - t
    if r.get("error") or r["result"].get("isError"):
        sys.exit(f"{hands}: {json.dumps(r)[:500]}")
    p.stdin.close()
    p.wait()
    return d


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    n, config, builds = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
    pause = float(os.environ.get("HANDS_FIRST_PAUSE_MS", "1000")) / 1000
    times = {b: [] for b in builds}
    for _ in range(n):
        for b in builds:
            times[b].append(first_call(b, config, pause))
    load = " ".join(open("/proc/loadavg").read().split()[:3])
    print(f"{n} rounds, uid {os.getuid()}, pause {pause * 1000:.0f} ms, load {load}")
    for b, v in times.items():
        v = sorted(v)
        print(f"  {b:40s} median {v[len(v) // 2] * 1000:6.2f} ms · p90 {v[len(v) * 9 // 10] * 1000:6.2f} ms")


if __name__ == "__main__":
    main()
