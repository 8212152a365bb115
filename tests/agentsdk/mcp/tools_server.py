"""A small MCP server for the agentsdk.mcp tests, on the ``mcp`` package's own server side.

``python tools_server.py`` serves over stdio; ``python tools_server.py --http`` serves streamable
HTTP on a free loopback port and prints ``PORT <n>`` once its socket listens.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys

from mcp.server.mcpserver import Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("test-tools")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def shout(text: str) -> str:
    """The text in capitals."""
    return text.upper()


@server.tool()
def fail(reason: str) -> str:
    """Always fails with ``reason``."""
    raise ToolError(reason)


@server.tool()
def crash() -> str:
    """Ends the server process in the middle of the call."""
    os._exit(3)


@server.tool(structured_output=False)
def picture() -> list[str | Image]:
    """A caption and a (tiny, fake) PNG image."""
    return ["a red dot", Image(data=b"\x89PNG" + bytes(96), format="png")]


@server.tool()
def forecast(city: str) -> dict[str, object]:
    """Structured weather for a city."""
    return {"city": city, "celsius": 21, "sky": "clear"}


@server.tool()
def pid() -> int:
    """This server's process id."""
    return os.getpid()


@server.tool()
async def slow(seconds: float) -> str:
    """Answers after ``seconds``."""
    await asyncio.sleep(seconds)
    return "finally"


def serve_http() -> None:
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)  # connections wait in the backlog until uvicorn accepts them: PORT is usable at once
    config = uvicorn.Config(server.streamable_http_app(), log_level="warning")
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    if "--http" in sys.argv:
        serve_http()
    else:
        server.run()
