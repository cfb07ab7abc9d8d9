#!/usr/bin/env python3
"""N processes renaming a file back and forth in parallel with GAP_US microseconds of computing
before each rename: the answered calls of the in-run walls with callers in parallel (decision
0081). Run it bare and through the `bash` tool on a tmpfs:

    python3 benches/walls_parallel_renames.py DIR N GAP_US      # e.g. DIR 2 300 and DIR 1 300
"""
import os, sys, time
d = sys.argv[1]; n = int(sys.argv[2]); gap = float(sys.argv[3]) / 1e6
os.makedirs(d, exist_ok=True)
def work(k):
    a, b = f"{d}/r{k}a", f"{d}/r{k}b"
    open(a, "w").close()
    for i in range(2000):
        e = time.perf_counter() + gap
        while time.perf_counter() < e: pass
        os.rename(a, b); a, b = b, a
t = time.perf_counter()
kids = []
for k in range(n):
    pid = os.fork()
    if pid == 0:
        work(k); os._exit(0)
    kids.append(pid)
for p in kids: os.waitpid(p, 0)
print(f"{n} procs renaming, gap {gap*1e6:.0f}us: {(time.perf_counter()-t)*1000:.0f} ms")
