"""An MCP client made with the official MCP Python SDK (`mcp`) that reaches `hands serve --http`
with OAuth, driven by tests/suite/oauth.rs.

Usage: oauth_client.py URL MODE PATH
  URL   the endpoint, `http://127.0.0.1:PORT/mcp`
  MODE  `token`: send $OAUTH_TOKEN as `Authorization: Bearer …` (a token fetched elsewhere);
        `flow`: the SDK's own OAuth client — the 401's resource_metadata, the Protected
        Resource Metadata, the issuer's metadata, a client_credentials token for the resource,
        the call — with $OAUTH_CLIENT_ID, $OAUTH_CLIENT_SECRET and $OAUTH_ISSUER
  PATH  the file to `write` once
Prints one JSON line: the tools it saw, the write's error flag and text, the protocol version.
"""

import json
import os
import sys

import anyio
import httpx2
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client


class Memory:
    """Tokens and client information kept in memory for this one run."""

    def __init__(self) -> None:
        self.tokens = None
        self.client_info = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens) -> None:
        self.tokens = tokens

    async def get_client_info(self):
        return self.client_info

    async def set_client_info(self, client_info) -> None:
        self.client_info = client_info


async def main() -> None:
    url, mode, path = sys.argv[1:4]
    out: dict = {}
    if mode == "token":
        http = httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {os.environ['OAUTH_TOKEN']}"},
            timeout=httpx2.Timeout(30, read=120),
        )
    else:
        auth = ClientCredentialsOAuthProvider(
            server_url=url,
            storage=Memory(),
            client_id=os.environ["OAUTH_CLIENT_ID"],
            client_secret=os.environ["OAUTH_CLIENT_SECRET"],
            scope="hands",
            issuer=os.environ["OAUTH_ISSUER"],
        )
        http = httpx2.AsyncClient(auth=auth, timeout=httpx2.Timeout(30, read=120))
    async with http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, mode="2026-07-28") as client:
            tools = await client.list_tools()
            out["tools"] = sorted(t.name for t in tools.tools)
            result = await client.call_tool("write", {"path": path, "content": mode})
            out["is_error"] = bool(result.is_error)
            out["text"] = "\n".join(c.text for c in result.content if getattr(c, "text", None))
            out["protocol"] = client.protocol_version
    print(json.dumps(out), flush=True)


try:
    anyio.run(main)
except BaseException as e:  # the test shows what failed, not only that it did
    import traceback

    print(json.dumps({"failed": "".join(traceback.format_exception(e))[-3000:]}), flush=True)
    sys.exit(1)
