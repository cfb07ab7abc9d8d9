"""An agent made with the official MCP Python SDK (`mcp`) that reaches a runner through
`hands relay` over TLS, driven by tests/suite/runner/python.rs.

Usage: relay_client.py URL CA_FILE TOKEN MODE PATH
  URL      the runner's endpoint at the relay, `https://localhost:PORT/runners/NAME/mcp`
  CA_FILE  the PEM of the CA that signed the relay's certificate (and nothing else is trusted)
  TOKEN    the agent's bearer token (read from $RELAY_AGENT_TOKEN when `-`)
  MODE     `legacy` (2025-11-25 initialize) or a modern version (`2026-07-28`)
  PATH     the file to `write` once (with a callback that would allow it, so a runner with
           `approvals = "local"` must park it instead of asking here)
Prints one JSON line: the tools it saw, the write's error flag and text, the questions asked.
"""

import json
import os
import ssl
import sys

import anyio
import httpx2
from mcp import types
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client


async def main() -> None:
    url, ca_file, token, mode, path = sys.argv[1:6]
    if token == "-":
        token = os.environ["RELAY_AGENT_TOKEN"]
    asked: list[str] = []

    async def answer(_context, params):
        asked.append(getattr(params, "message", ""))
        return types.ElicitResult(action="accept", content={"decision": "allow_once"})

    tls = ssl.create_default_context(cafile=ca_file)
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"},
        verify=tls,
        timeout=httpx2.Timeout(30, read=300),
    )
    out: dict = {"asked": asked}
    async with http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, mode=mode, elicitation_callback=answer) as client:
            tools = await client.list_tools()
            out["tools"] = sorted(t.name for t in tools.tools)
            read = await client.call_tool("bash", {"command": "echo py-through-relay"})
            out["bash"] = "\n".join(c.text for c in read.content if getattr(c, "text", None))
            result = await client.call_tool("write", {"path": path, "content": "py"})
            out["is_error"] = bool(result.is_error)
            out["text"] = "\n".join(c.text for c in result.content if getattr(c, "text", None))
            out["protocol"] = client.protocol_version
    print(json.dumps(out), flush=True)


anyio.run(main)
