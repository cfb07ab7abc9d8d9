#!/usr/bin/env python3
"""Two (N) processes calling the in-run walls in parallel, with GAP_US microseconds of
computing before each call: creating files (decision 0080: a hand-over held on the init's CPU
must not pull a parallel build's processes onto one CPU), or renaming a file back and forth
(decision 0082: the answered calls). Run it bare and through the `bash` tool on a tmpfs:

    python3 benches/walls_parallel.py DIR N GAP_US [create|rename]
    # e.g. DIR 2 300, DIR 2 0, DIR 2 300 rename, DIR 1 300 rename
"""
import os, sys, time
d = sys.argv[1]; n = int(sys.argv[2]); gap = float(sys.argv[3]) / 1e6
what = sys.argv[4] if len(sys.argv) > 4 else "create"
os.makedirs(d, exist_ok=True)
def spin():
    e = time.perf_counter() + gap
    while time.perf_counter() < e: pass
def create(k):
    for i in range(2000):
        spin()
        fd = os.open(f"{d}/p{k}-{i}", os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644); os.write(fd, b"x"); os.close(fd)
def rename(k):
    a, b = f"{d}/r{k}a", f"{d}/r{k}b"
    open(a, "w").close()
    for i in range(2000):
        spin()
        os.rename(a, b); a, b = b, a
work = {"create": create, "rename": rename}[what]
t = time.perf_counter()
kids = []
for k in range(n):
    pid = os.fork()
    if pid == 0:
        work(k); os._exit(0)
    kids.append(pid)
for p in kids: os.waitpid(p, 0)
label = "" if what == "create" else " renaming,"
print(f"{n} procs{label} gap {gap*1e6:.0f}us: {(time.perf_counter()-t)*1000:.0f} ms")
