#!/usr/bin/env python3
"""The in-run walls' cost per call (decision 0074): 20,000 creates, stats, opens, opens for
writing of an existing file (sent to the init since decision 0079: plain, and with O_CREAT and
O_TRUNC as a shell's `>` does), renames and, last, `umask` calls (the one call the init lets
continue at once: the notification's own cost; once a command calls it, every create reads the
caller's umask, so it goes after them) in a loop in DIR, each figure per call. Run it bare
and through the `bash` tool on the same file system (a tmpfs keeps the disk out of it) and
compare:

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
    fd = os.open(f"{d}/f{i}", os.O_WRONLY); os.close(fd)
t5 = time.perf_counter()
for i in range(20000):
    fd = os.open(f"{d}/f{i}", os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644); os.close(fd)
t6 = time.perf_counter()
for i in range(20000):
    os.rename(f"{d}/f{i}", f"{d}/g{i}")
t7 = time.perf_counter()
for i in range(20000):
    os.umask(0o022)
t8 = time.perf_counter()
us = lambda a, b, n=20000: (b - a) / n * 1e6
print(f"create {us(t, t1):.1f} us, stat {us(t1, t2):.1f} us, getppid {us(t2, t3, 200000):.2f} us, "
      f"open {us(t3, t4):.1f} us, open-write {us(t4, t5):.1f} us, rewrite {us(t5, t6):.1f} us, "
      f"rename {us(t6, t7):.1f} us, umask {us(t7, t8):.2f} us")
