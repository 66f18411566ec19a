"""JSON-RPC 2.0 over the LSP base protocol (``Content-Length`` framing), for the headless client.

The client speaks to one server it spawned and handles a dozen messages, all as plain JSON,
so it needs no LSP library: importing pygls and lsprotocol would cost ``agent-ls run`` about
400 ms of CPU, on the same two cores the server and its model worker start on.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger(__name__)

METHOD_NOT_FOUND = -32601
INTERNAL_ERROR = -32603

Handler = Callable[[Any], Any | Awaitable[Any]]


class ResponseError(Exception):
    """An error answer: from the server to a request of ours, or from a handler to the server."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


class ConnectionClosed(ConnectionError):
    """The server's output ended while requests were waiting."""


class Connection:
    """One JSON-RPC peer on a pair of asyncio streams.

    ``handlers`` answer the server's requests (their return value is the result; raise
    :class:`ResponseError` for an error answer) and take its notifications; a request with no
    handler gets ``MethodNotFound``, a notification with none is dropped.
    """

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self.handlers: dict[str, Handler] = {}
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._next_id = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self.closed = asyncio.get_running_loop().create_future()
        self._reading = asyncio.ensure_future(self._read_loop())

    # -- sending ---------------------------------------------------------------------------

    def _send(self, message: dict[str, Any]) -> None:
        if self._writer.is_closing():
            raise ConnectionClosed("the server's input is closed")
        body = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        self._writer.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))

    async def request(self, method: str, params: Any = None) -> Any:
        """Send a request and wait for its result; raises :class:`ResponseError` or
        :class:`ConnectionClosed`."""
        self._next_id += 1
        rid = self._next_id
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[rid] = future
        try:
            self._send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
            if self.closed.done():
                raise ConnectionClosed("the server exited")
            return await future
        finally:
            self._pending.pop(rid, None)

    def notify(self, method: str, params: Any = None) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    async def drain(self) -> None:
        with contextlib.suppress(ConnectionError):
            await self._writer.drain()

    def close_input(self) -> None:
        """Close the server's stdin (after ``exit``)."""
        with contextlib.suppress(OSError, RuntimeError):
            self._writer.close()

    # -- receiving -------------------------------------------------------------------------

    async def _read_message(self) -> Any | None:
        length: int | None = None
        while True:
            line = await self._reader.readline()
            if not line:
                return None
            if line in (b"\r\n", b"\n"):
                break
            name, _, value = line.decode("ascii", "replace").partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip())
        if length is None:
            raise ValueError("a message without Content-Length")
        return json.loads(await self._reader.readexactly(length))

    async def _read_loop(self) -> None:
        try:
            while (message := await self._read_message()) is not None:
                self._dispatch(message)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        except ValueError as exc:
            log.error("unreadable message from the server: %s", exc)
        finally:
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(ConnectionClosed("the server exited"))
            if not self.closed.done():
                self.closed.set_result(None)

    def _dispatch(self, message: Any) -> None:
        if not isinstance(message, dict):
            return
        method = message.get("method")
        if method is None:  # an answer to one of ours
            future = self._pending.get(message.get("id"))  # type: ignore[arg-type]
            if future is None or future.done():
                return
            error = message.get("error")
            if isinstance(error, dict):
                future.set_exception(
                    ResponseError(
                        int(error.get("code", INTERNAL_ERROR)),
                        str(error.get("message", "")),
                        error.get("data"),
                    )
                )
            else:
                future.set_result(message.get("result"))
            return
        task = asyncio.ensure_future(self._handle(method, message.get("params"), message))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _handle(self, method: str, params: Any, message: dict[str, Any]) -> None:
        is_request = "id" in message
        handler = self.handlers.get(method)
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message.get("id")}
        try:
            if handler is None:
                raise ResponseError(METHOD_NOT_FOUND, f"no handler for {method}")
            result = handler(params)
            if inspect.isawaitable(result):
                result = await result
            reply["result"] = result
        except ResponseError as exc:
            reply["error"] = {"code": exc.code, "message": exc.message}
        except Exception as exc:  # a bug of ours: the server gets an error answer, we go on
            log.exception("handling %s failed", method)
            reply["error"] = {"code": INTERNAL_ERROR, "message": f"{type(exc).__name__}: {exc}"}
        if is_request:
            with contextlib.suppress(ConnectionError):
                self._send(reply)

    async def aclose(self) -> None:
        self._reading.cancel()
        for task in list(self._tasks):
            task.cancel()
