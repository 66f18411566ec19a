"""A small MCP server (the SDK's own server side) that misbehaves on request, for the tests.

Environment: ``FAULTY_MARKER`` names a file it writes at start-up (its pid), proving it ran;
``FAULTY_STARTS`` names a file it appends its pid to at each start (how many processes ran);
``FAULTY_START_DELAY`` seconds it sleeps before serving (a slow start); ``FAULTY_HTTP_PORT``
serves streamable HTTP on 127.0.0.1 at that port (path ``/mcp``) instead of stdio.
"""

from __future__ import annotations

import asyncio
import base64
import os
import sys
import time
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image
from mcp.types import ToolAnnotations
from pydantic import BaseModel

# A 1x1 PNG.
PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)

server = MCPServer("faulty")


class Point(BaseModel):
    x: int
    y: int


class Segment(BaseModel):
    start: Point
    end: Point


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def echo(text: str) -> str:
    """Echo the text back."""
    return f"echo: {text}"


@server.tool()
async def slow(seconds: float) -> str:
    """Sleep, then answer (``FAULTY_CANCEL_MARKER``: a file written when cancelled)."""
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        marker = os.environ.get("FAULTY_CANCEL_MARKER")
        if marker:
            Path(marker).write_text("cancelled", encoding="utf-8")
        raise
    return "slept"


@server.tool()
def crash() -> str:
    """Exit the server process at once."""
    sys.stdout.flush()
    os._exit(3)


@server.tool()
def fail() -> str:
    """Always fails."""
    raise ToolError("the widget is broken")


@server.tool()
def huge(chars: int) -> str:
    """Return this many characters."""
    line = "0123456789abcdef" * 4 + "\n"
    return (line * (chars // len(line) + 1))[:chars]


@server.tool()
def pixel() -> Image:
    """A tiny image."""
    return Image(data=PIXEL, format="png")


@server.tool()
def length(segment: Segment) -> str:
    """The length of a segment (a schema with $defs and $ref)."""
    dx, dy = segment.end.x - segment.start.x, segment.end.y - segment.start.y
    return f"{(dx * dx + dy * dy) ** 0.5:.1f}"


@server.tool()
def header(name: str, ctx: Context) -> str:
    """The value of one HTTP request header (streamable HTTP only)."""
    return str((ctx.headers or {}).get(name.lower(), "(none)"))


@server.tool()
async def grow(ctx: Context) -> str:
    """Add a tool named 'added' and tell the client the list changed."""

    def added() -> str:
        """A tool that appeared later."""
        return "added works"

    server.add_tool(added, name="added")
    await ctx.session.send_tool_list_changed()
    return "grown"


def main() -> None:
    marker = os.environ.get("FAULTY_MARKER")
    if marker:
        Path(marker).write_text(str(os.getpid()), encoding="utf-8")
    starts = os.environ.get("FAULTY_STARTS")
    if starts:
        with open(starts, "a", encoding="utf-8") as log:
            log.write(f"{os.getpid()}\n")
    delay = float(os.environ.get("FAULTY_START_DELAY") or 0)
    if delay:
        time.sleep(delay)
    port = os.environ.get("FAULTY_HTTP_PORT")
    if port:
        server.run("streamable-http", host="127.0.0.1", port=int(port))
    else:
        server.run("stdio")


if __name__ == "__main__":
    main()
