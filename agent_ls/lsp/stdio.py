"""Reading the client's messages on the event loop itself.

pygls reads stdin in its thread pool: three hand-offs per message (two header lines, then the
body), each a thread waking, taking the GIL, and queueing a callback at the back of a busy
loop. While the agent works (a grep's results streaming in, turn after turn) that put a
``agent.status`` or ``agent.cancel`` ~10 ms behind. Here the pipe is the loop's: bytes arrive
in ``data_received`` and a whole message is parsed in one go. Only for a pipe, or a socket
that is not also the server's stdout (the way editors start language servers): a terminal, a
file or a two-way socket is read the pygls way, since the loop makes what it reads
non-blocking.
"""

from __future__ import annotations

import asyncio
import os
import stat
from typing import IO, Any


class PipeReader:
    """pygls's reader interface (``readline``, ``readexactly``) over an asyncio stream."""

    def __init__(self, stream: asyncio.StreamReader) -> None:
        self._stream = stream

    async def readline(self) -> bytes:
        return await self._stream.readline()

    async def readexactly(self, count: int) -> bytes:
        try:
            return await self._stream.readexactly(count)
        except asyncio.IncompleteReadError:  # the client went away mid-message
            return b""


def is_pipe(stream: IO[bytes], writer: IO[bytes] | None = None) -> bool:
    """Whether the loop may read ``stream`` without a thread: a pipe, or a socket that is not
    also ``writer`` (the loop makes what it reads non-blocking, and pygls writes blocking)."""
    if os.name != "posix":  # asyncio's pipe transports are the selector loop's
        return False
    try:
        info = os.fstat(stream.fileno())
    except (OSError, ValueError, AttributeError):
        return False
    if stat.S_ISFIFO(info.st_mode):
        return True
    if not stat.S_ISSOCK(info.st_mode):
        return False
    try:
        other = os.fstat(writer.fileno()) if writer is not None else None
    except (OSError, ValueError, AttributeError):
        return False
    return other is None or (other.st_dev, other.st_ino) != (info.st_dev, info.st_ino)


async def pipe_reader(stream: IO[bytes]) -> PipeReader:
    """A reader of ``stream`` on the running loop."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=2**16)

    def protocol() -> Any:
        return asyncio.StreamReaderProtocol(reader)

    await loop.connect_read_pipe(protocol, stream)
    return PipeReader(reader)
