#!/usr/bin/env python3
"""The in-run walls' cost per call (decision 0074): 20,000 creates, stats, opens and renames in
a loop in DIR, each figure per call. Run it bare and through the `bash` tool on the same file
system (a tmpfs keeps the disk out of it) and compare:

    python3 benches/walls_micro.py DIR
"""
import os, sys, time
d = sys.argv[1]; os.makedirs(d, exist_ok=True)
t = time.perf_counter()
for i in range(20000):
    fd = os.open(f"{d}/f{i}", os.O_CREAT | os.O_WRONLY, 0o644); os.close(fd)
t1 = time.perf_counter()
for i in range(20000):
    os.stat(f"{d}/f{i}")
t2 = time.perf_counter()
for i in range(200000):
    os.getppid()
t3 = time.perf_counter()
for i in range(20000):
    fd = os.open(f"{d}/f{i}", os.O_RDONLY); os.close(fd)
t4 = time.perf_counter()
for i in range(20000):
    os.rename(f"{d}/f{i}", f"{d}/g{i}")
t5 = time.perf_counter()
print(f"create {(t1-t)/20000*1e6:.1f} us, stat {(t2-t1)/20000*1e6:.1f} us, getppid {(t3-t2)/200000*1e6:.2f} us, open {(t4-t3)/20000*1e6:.1f} us, rename {(t5-t4)/20000*1e6:.1f} us")
