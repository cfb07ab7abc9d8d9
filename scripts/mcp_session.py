#!/usr/bin/python3
"""mcp_session.py — a small MCP client over stdio for several calls in one session (standard
library only), as a module (scripts/acceptance.py) and as a command:

    mcp_session.py [-t SECONDS] -- SERVER_CMD [ARG...]  < CALLS

CALLS is one JSON object per line, {"tool": NAME, "arguments": {...}}; each call is sent in
turn after initialize (protocolVersion 2025-11-25) and notifications/initialized, and its answer
is printed as one JSON line {"tool", "isError", "text", "structuredContent"} (or {"tool",
"error"}). Requests from the server (elicitation, sampling) are declined, so a call that needs a
person fails rather than hangs. Exit: 0 when every call answered without isError, 2 when one
was a tool error, 1 on a JSON-RPC error, a timeout (default 60 s each) or the server gone.
"""
import json
import os
import subprocess
import sys
import tempfile
import threading
import time


class McpError(Exception):
    """A JSON-RPC error, no answer in time, or the server gone."""


class Session:
    """One `hands serve` (or any stdio MCP server) and its JSON-RPC traffic. Calls may overlap:
    `send` returns the request id, `wait` blocks for that id's answer."""

    def __init__(self, cmd, env=None, cwd=None, timeout=60.0, preexec_fn=None):
        self.timeout = timeout
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.stderr, env=env, cwd=cwd,
                                     preexec_fn=preexec_fn)
        self.answers = {}
        self.closed = None  # why the reader stopped
        self.next_id = 0
        self.lock = threading.Condition()
        self.write_lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.server_info = {}
        self.instructions = ""

    def _write(self, msg):
        with self.write_lock:
            self.proc.stdin.write((json.dumps(msg) + "\n").encode())
            self.proc.stdin.flush()

    def _read(self):
        for line in self.proc.stdout:
            if not line.strip():
                continue
            try:
                msg = json.loads(line)
            except ValueError:
                continue  # not ours to judge here; the caller sees a timeout
            if "method" in msg and "id" in msg:
                # A request to the client (elicitation, roots, sampling): this client has none.
                try:
                    self._write({"jsonrpc": "2.0", "id": msg["id"],
                                 "error": {"code": -32601, "message": "not supported"}})
                except OSError:
                    pass
            elif "id" in msg and ("result" in msg or "error" in msg):
                with self.lock:
                    self.answers[msg["id"]] = msg
                    self.lock.notify_all()
        with self.lock:
            self.closed = f"the server closed stdout (exit {self.proc.wait()})"
            self.lock.notify_all()

    def send(self, method, params=None):
        """Sends a request; returns its id."""
        with self.lock:
            self.next_id += 1
            rid = self.next_id
        msg = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self._write(msg)
        return rid

    def wait(self, rid, timeout=None):
        """The result of request `rid`; McpError for an error, no answer, or the server gone."""
        end = time.time() + (timeout or self.timeout)
        with self.lock:
            while rid not in self.answers:
                left = end - time.time()
                if self.closed:
                    raise McpError(self.closed)
                if left <= 0:
                    raise McpError(f"no answer in {timeout or self.timeout:.0f} s")
                self.lock.wait(left)
            msg = self.answers.pop(rid)
        if "error" in msg:
            raise McpError(json.dumps(msg["error"])[:500])
        return msg["result"]

    def initialize(self):
        rid = self.send("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                       "clientInfo": {"name": "mcp_session", "version": "0"}})
        result = self.wait(rid)
        self.server_info = result.get("serverInfo", {})
        self.instructions = result.get("instructions", "")
        self._write({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return result

    def start_call(self, tool, arguments):
        return self.send("tools/call", {"name": tool, "arguments": arguments})

    def call(self, tool, arguments, timeout=None):
        """A tool call's result: {"isError", "text", "structured"} (a tool error is a result)."""
        return Result(self.wait(self.start_call(tool, arguments), timeout))

    def close(self, timeout=15):
        """Closes stdin (the end of the session) and waits for the server; returns its exit
        code (None when it had to be killed) and the last lines of its stderr."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            code = None
        self.stderr.seek(0)
        tail = self.stderr.read().decode(errors="replace").splitlines()[-40:]
        return code, tail


class Result:
    """A tools/call result."""

    def __init__(self, raw):
        self.raw = raw
        self.is_error = bool(raw.get("isError"))
        self.text = "\n".join(c.get("text", "") for c in raw.get("content", [])
                              if isinstance(c, dict))
        self.structured = raw.get("structuredContent") or {}

    def __repr__(self):
        return f"Result(isError={self.is_error}, text={self.text[:300]!r})"


def main():
    argv = sys.argv[1:]
    timeout = 60.0
    if argv[:1] == ["-t"] and len(argv) > 1:
        timeout, argv = float(argv[1]), argv[2:]
    if not argv or argv[0] != "--" or len(argv) < 2:
        sys.exit(__doc__)
    s = Session(argv[1:], timeout=timeout)
    rc = 0
    try:
        s.initialize()
        for line in sys.stdin:
            if not line.strip():
                continue
            req = json.loads(line)
            try:
                r = s.call(req["tool"], req.get("arguments", {}))
                print(json.dumps({"tool": req["tool"], "isError": r.is_error, "text": r.text,
                                  "structuredContent": r.structured}), flush=True)
                rc = max(rc, 2 if r.is_error else 0)
            except McpError as e:
                print(json.dumps({"tool": req["tool"], "error": str(e)}), flush=True)
                rc = 1
                break
    except McpError as e:
        print(json.dumps({"error": f"initialize: {e}"}), flush=True)
        rc = 1
    finally:
        _, tail = s.close()
        if tail:
            sys.stderr.write("server stderr:\n  " + "\n  ".join(tail) + "\n")
    sys.exit(rc)


if __name__ == "__main__":
    main()
