#!/usr/bin/env python3
"""Two (N) processes creating files in parallel with GAP_US microseconds of computing before
each create (decision 0080: a hand-over held on the init's CPU must not pull a parallel
build's processes onto one CPU). Run it bare and through the `bash` tool on a tmpfs:

    python3 benches/walls_parallel.py DIR N GAP_US      # e.g. DIR 2 300 and DIR 2 0
"""
import os, sys, time
d = sys.argv[1]; n = int(sys.argv[2]); gap = float(sys.argv[3]) / 1e6
os.makedirs(d, exist_ok=True)
def work(k):
    t = time.perf_counter()
    for i in range(2000):
        e = time.perf_counter() + gap
        while time.perf_counter() < e: pass
        fd = os.open(f"{d}/p{k}-{i}", os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644); os.write(fd, b"x"); os.close(fd)
    return time.perf_counter() - t
t = time.perf_counter()
kids = []
for k in range(n):
    pid = os.fork()
    if pid == 0:
        work(k); os._exit(0)
    kids.append(pid)
for p in kids: os.waitpid(p, 0)
print(f"{n} procs gap {gap*1e6:.0f}us: {(time.perf_counter()-t)*1000:.0f} ms")
