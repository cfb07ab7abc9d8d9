#!/usr/bin/env python3
"""The in-run walls' cost per call when a program computes between its calls, as a compiler
or `git add` does (decision 0080): 2,000 rounds of `mkdir` of an existing folder, a create
(the init hands the new descriptor over) and a rename over an existing name, each call timed
alone, with GAP_US microseconds of computing before each. Run it bare and through the `bash`
tool on the same file system (a tmpfs keeps the disk out of it) and compare:

    python3 benches/walls_spaced.py DIR GAP_US      # e.g. 0 and 1000
"""
import os, sys, time
d = sys.argv[1]; os.makedirs(d, exist_ok=True)
N=2000; gap=float(sys.argv[2])/1e6
def busy():
    e=time.perf_counter()+gap
    while time.perf_counter()<e: pass
os.makedirs(f"{d}/p", exist_ok=True)
tm=tc=tr=0
for i in range(N):
    busy(); t=time.perf_counter()
    try: os.mkdir(f"{d}/p")
    except FileExistsError: pass
    t1=time.perf_counter(); busy(); t2=time.perf_counter()
    fd=os.open(f"{d}/p/x.{i}", os.O_EXCL|os.O_CREAT|os.O_WRONLY, 0o644)
    t3=time.perf_counter(); os.close(fd); busy(); t4=time.perf_counter()
    os.replace(f"{d}/p/x.{i}", f"{d}/p/m{i%50}.pyc")
    t5=time.perf_counter()
    tm+=t1-t; tc+=t3-t2; tr+=t5-t4
print(f"gap {gap*1e6:.0f}us: mkdir-exist {tm/N*1e6:.1f} create {tc/N*1e6:.1f} rename-over {tr/N*1e6:.1f}")
