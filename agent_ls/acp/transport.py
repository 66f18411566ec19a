"""Newline-delimited JSON-RPC on stdio, as ACP frames it, with what the package's own lacks.

The ``acp`` package's stdio transport logs and skips a line that is not JSON and lets a JSON
value that is not an object break its receive loop. Here a bad line is answered the JSON-RPC
way (-32700 parse error, -32600 invalid request, ``id: null``) and the agent goes on.

Every outgoing message goes through one queue in call order, including the updates the
agent's port sends without awaiting (:meth:`send_nowait`), so a ``session/update`` is never
overtaken by a ``session/request_permission`` sent after it. The id of each request sent is
recorded for the caller (:func:`recording_requests`), so a permission question withdrawn by
a cancel can be named in ``$/cancel_request``.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import logging
import sys
import threading
from collections.abc import Iterator
from typing import IO, Any, Protocol

log = logging.getLogger(__name__)

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
_sent_requests: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar(
    "agent_ls_acp_sent_requests", default=None
)


@contextlib.contextmanager
def recording_requests() -> Iterator[list[Any]]:
    """Collect the ids of the requests sent from this context (and tasks it starts)."""
    ids: list[Any] = []
    token = _sent_requests.set(ids)
    try:
        yield ids
    finally:
        _sent_requests.reset(token)


class Writer(Protocol):
    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...


class StdioTransport:
    """An ``acp`` message transport over an asyncio reader and writer."""

    def __init__(self, reader: asyncio.StreamReader, writer: Writer) -> None:
        self._reader = reader
        self._writer = writer
        self._queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._pushed: list[dict[str, Any]] = []
        self._closed = False
        self._writer_task = asyncio.ensure_future(self._write_loop())

    def push_back(self, message: dict[str, Any]) -> None:
        """Make ``message`` the next one :meth:`receive` returns (read ahead, not handled)."""
        self._pushed.append(message)

    # -- outgoing ----------------------------------------------------------------------

    def send_nowait(self, message: dict[str, Any]) -> None:
        """Queue a message (a notification) in order, without waiting for it to be written."""
        if self._closed:
            return
        if "id" in message and "method" in message:
            ids = _sent_requests.get()
            if ids is not None:
                ids.append(message["id"])
        data = json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n"
        self._queue.put_nowait(data.encode("utf-8"))

    async def send(self, message: dict[str, Any]) -> None:
        if self._closed:
            raise ConnectionError("the client connection is closed")
        self.send_nowait(message)

    async def _write_loop(self) -> None:
        while True:
            data = await self._queue.get()
            if data is None:
                return
            try:
                self._writer.write(data)
                await self._writer.drain()
            except (ConnectionError, OSError, RuntimeError) as exc:
                log.info("the client's input is closed: %s", exc)
                self._closed = True
                return

    # -- incoming ----------------------------------------------------------------------

    async def receive(self) -> dict[str, Any] | None:
        if self._pushed:
            return self._pushed.pop()
        while True:
            try:
                line = await self._reader.readline()
            except ValueError:  # a line over the reader's limit
                await self._skip_long_line()
                self._reply_error(None, INVALID_REQUEST, "the message is too large")
                continue
            except (ConnectionError, OSError):
                return None
            if not line:
                return None
            line = line.strip()
            if not line:
                continue
            try:
                message = json.loads(line)
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                self._reply_error(None, PARSE_ERROR, f"parse error: {exc}")
                continue
            if not isinstance(message, dict):
                self._reply_error(
                    None, INVALID_REQUEST, "a JSON-RPC message must be an object (no batches)"
                )
                continue
            if "method" in message and not isinstance(message["method"], str):
                self._reply_error(message.get("id"), INVALID_REQUEST, "method must be a string")
                continue
            return message

    async def _skip_long_line(self) -> None:
        with contextlib.suppress(Exception):
            while True:
                chunk = await self._reader.read(65536)
                if not chunk or b"\n" in chunk:
                    return

    def _reply_error(self, msg_id: Any, code: int, message: str) -> None:
        if isinstance(msg_id, bool) or not isinstance(msg_id, int | str):
            msg_id = None
        self.send_nowait(
            {"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}}
        )

    async def close(self) -> None:
        if self._closed and self._writer_task.done():
            return
        self._closed = True
        self._queue.put_nowait(None)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._writer_task, 2.0)


async def stdio_transport() -> StdioTransport:
    """The process's stdin and stdout as a transport (pipes and sockets; files too)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=50 * 1024 * 1024)
    try:
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    except ValueError:  # a regular file (``< input.jsonl``): read it in a thread
        _feed_from_thread(loop, reader, sys.stdin.buffer)
    writer: Writer
    try:
        transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, sys.stdout
        )
        writer = asyncio.StreamWriter(transport, protocol, None, loop)
    except ValueError:  # a regular file (``> output.jsonl``)
        writer = _FileWriter(sys.stdout.buffer)
    return StdioTransport(reader, writer)


def _feed_from_thread(
    loop: asyncio.AbstractEventLoop, reader: asyncio.StreamReader, source: IO[bytes]
) -> None:
    def pump() -> None:
        try:
            while data := source.readline():
                loop.call_soon_threadsafe(reader.feed_data, data)
        finally:
            loop.call_soon_threadsafe(reader.feed_eof)

    threading.Thread(target=pump, name="acp-stdin", daemon=True).start()


class _FileWriter:
    def __init__(self, sink: IO[bytes]) -> None:
        self._sink = sink

    def write(self, data: bytes) -> None:
        self._sink.write(data)

    async def drain(self) -> None:
        self._sink.flush()
