#!/usr/bin/env python3
"""How long `initialize` takes with tools-shell on (issue 36 point 4): spawns `hands serve`
with a config of tools-shell over a temp root, writes `initialize`, and times the answer; then
`tools/call bash true`, which waits for the sandbox self-test running beside serving.

    python3 benches/initialize.py [path/to/hands] [runs]
"""
import json, os, subprocess, sys, tempfile, time

hands = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "target/release/hands")
runs = int(sys.argv[2]) if len(sys.argv) > 2 else 5
init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {},
    "clientInfo": {"name": "bench", "version": "0"}}}
call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "bash", "arguments": {"command": "true"}}}
first, command = [], []
for _ in range(runs):
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(f"{d}/root"); os.makedirs(f"{d}/state")
        with open(f"{d}/daemon.toml", "w") as f:
            f.write(f'[daemon]\nstate_dir = "{d}/state"\n\n[[builtins]]\nid = "tools-shell"\n'
                    f'grants = ["filesystem", "spawn"]\nfilesystem = [{{ path = "{d}/root", write = true }}]\n'
                    'config = { trust = { external = "allow" } }\n')
        t0 = time.monotonic()
        p = subprocess.Popen([hands, "serve", "--config", f"{d}/daemon.toml"], cwd=f"{d}/root",
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
        p.stdin.write(json.dumps(init) + "\n"); p.stdin.flush()
        p.stdout.readline(); t1 = time.monotonic()
        p.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
        p.stdin.write(json.dumps(call) + "\n"); p.stdin.flush()
        p.stdout.readline(); t2 = time.monotonic()
        p.stdin.close(); p.wait(timeout=30)
        first.append((t1 - t0) * 1000); command.append((t2 - t0) * 1000)
first.sort(); command.sort()
print(f"initialize answered: median {first[len(first)//2]:.0f} ms (min {first[0]:.0f}, max {first[-1]:.0f})")
print(f"first bash answered: median {command[len(command)//2]:.0f} ms after spawn (waits for the self-test)")
