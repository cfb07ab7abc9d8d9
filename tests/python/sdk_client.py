"""A client made with the official MCP Python SDK (`mcp`), driven by tests/suite/channels.rs.

Usage: sdk_client.py HANDS CONFIG MODE ELICITATION PATH
  CONFIG       the daemon.toml to serve over stdio, or the `http://…/mcp` URL of a running one
  MODE         `legacy` (2025-11-25 initialize) or a modern version (`2026-07-28`)
  ELICITATION  `form` (a callback that allows once) or `none` (no callback: the SDK declares
               no elicitation capability)
Calls `write` on PATH once and prints one JSON line: the result's error flag and text, and the
questions the callback was asked.
"""

import json
import os
import sys

import anyio
from mcp import types
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters


async def main() -> None:
    hands, config, mode, elicitation, path = sys.argv[1:6]
    asked: list[str] = []

    async def answer(_context, params):
        asked.append(getattr(params, "message", ""))
        return types.ElicitResult(action="accept", content={"decision": "allow_once"})

    if config.startswith("http://"):
        server = config
    else:
        server = StdioServerParameters(
            command=hands, args=["serve", "--config", config], env=dict(os.environ), cwd=os.getcwd()
        )
    callback = answer if elicitation == "form" else None
    async with Client(server, mode=mode, elicitation_callback=callback) as client:
        try:
            result = await client.call_tool("write", {"path": path, "content": "py"})
            text = "\n".join(c.text for c in result.content if getattr(c, "text", None))
            out = {"is_error": bool(result.is_error), "text": text, "asked": asked}
        except Exception as e:  # the SDK's own failure, reported to the test
            out = {"exception": f"{type(e).__name__}: {e}", "asked": asked}
        out["protocol"] = client.protocol_version
    print(json.dumps(out), flush=True)


anyio.run(main)
