#!/usr/bin/env python3
"""A bare MCP driver with almost no client cost of its own, for checking round-trip figures
outside rmcp: it writes requests and reads answers without decoding them.

  bare_driver.py stdio TOOL ARGS_JSON -- COMMAND...   (starts the server on stdio)
  bare_driver.py http://HOST:PORT/mcp TOOL ARGS_JSON  (a 2025-11-25 session over HTTP)

Prints the p50/p99 of N (env, default 3000) `ping`s and N calls of TOOL with ARGS_JSON.
"""
import http.client
import io
import json
import os
import subprocess
import sys
import time
import urllib.parse

VERSION = "2025-11-25"
INIT = {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "bare", "version": "1"}}


def stdio(cmd):
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0)
    out = io.BufferedReader(p.stdout, 1 << 20)

    def send(msg, answer=True):
        p.stdin.write((json.dumps(msg) + "\n").encode())
        return out.readline() if answer else b""

    return send, lambda: (p.stdin.close(), p.wait())


def http_session(url):
    u = urllib.parse.urlparse(url)
    c = http.client.HTTPConnection(u.hostname, u.port)
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": VERSION}
    token = os.environ.get("HANDS_TOKEN")
    if token:
        headers["Authorization"] = "Bearer " + token

    def send(msg, answer=True):
        c.request("POST", u.path, json.dumps(msg), headers)
        r = c.getresponse()
        body = r.read()
        sid = r.getheader("mcp-session-id")
        if sid:
            headers["mcp-session-id"] = sid
        return body

    return send, c.close


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    target, tool, args = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    if target == "stdio":
        send, close = stdio(sys.argv[sys.argv.index("--") + 1:])
    else:
        send, close = http_session(target)
    send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT})
    send({"jsonrpc": "2.0", "method": "notifications/initialized"}, answer=target != "stdio")
    n = int(os.environ.get("N", "3000"))
    calls = {
        "ping": ("ping", {}),
        tool: ("tools/call", {"name": tool, "arguments": args}),
    }
    next_id = 1
    for name, (method, params) in calls.items():
        times = []
        for _ in range(n):
            t = time.perf_counter()
            answer = send({"jsonrpc": "2.0", "id": next_id, "method": method, "params": params})
            times.append(time.perf_counter() - t)
            next_id += 1
        times.sort()
        print(f"{name}: p50 {times[n // 2] * 1000:.3f} ms, p99 {times[n * 99 // 100] * 1000:.3f} ms")
    print("last answer:", answer[:160])
    close()


if __name__ == "__main__":
    main()
