"""The frames between the server and its model worker: a ``>I`` byte count, then a pickle.

Both ends are this package's code in processes of one user, on a private pipe: pickle carries
the dataclasses of :mod:`agent_ls.ports.model` as they are.
"""

from __future__ import annotations

import asyncio
import pickle
import struct
from typing import Any

HEADER = struct.Struct(">I")
MAX_FRAME = 256 * 1024 * 1024  # a frame longer than this is a broken pipe, not a request

def encode(message: tuple[Any, ...]) -> bytes:
    """One frame: the pickle's length, then the pickle."""
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return HEADER.pack(len(body)) + body


def decode(body: bytes) -> tuple[Any, ...]:
    """The message of one frame's body. Raises ``ValueError`` if it is not a message."""
    message = pickle.loads(body)
    if not isinstance(message, tuple) or not message:
        raise ValueError(f"not a message: {type(message).__name__}")
    return message


async def read_frame(reader: asyncio.StreamReader) -> tuple[Any, ...] | None:
    """The next message, or None at the end of the stream (a cut frame is an end too)."""
    try:
        (size,) = HEADER.unpack(await reader.readexactly(HEADER.size))
        if size > MAX_FRAME:
            raise ValueError(f"a frame of {size} bytes")
        return decode(await reader.readexactly(size))
    except asyncio.IncompleteReadError:
        return None
