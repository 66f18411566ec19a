"""The model worker: a process of its own that imports the SDKs and streams the turns.

``python -m agent_ls.models.worker [--log-level LEVEL] [SPEC ...]`` (the
server calls :func:`main` through ``-c``, or forked, see :mod:`agent_ls.models.remote`) warms
the SDKs of the ``SPEC``s at once, then serves :mod:`agent_ls.models.remote` over its stdin and
stdout:
length-prefixed pickles (``>I`` byte count, then the pickle), the only thing ever written to
its stdout. In::

    ("warm", spec)                 import that model's SDK and build its client, then answer
                                   ("warmed", spec) (informational: a stream waits for the
                                   warm-up here, the server does not); a canned in-memory
                                   stream follows unless a real one started (each SPEC of
                                   the command line too), and stops when a real one starts;
                                   what no request waits for runs once no stream has run
                                   for QUIET_BEFORE_REST
    ("stream", sid, spec, request) stream one turn of a ModelRequest
    ("cancel", sid)                stop that stream (its HTTP response is closed)

Out::

    ("warmed", spec)
    ("event", sid, event)          one ModelEvent
    ("error", sid, message, retryable, retry_after)
    ("done", sid)                  the stream ended (after its TurnComplete, or cancelled)

Why a process: the SDKs are over half a second of imports and their streams parse every event
with pydantic; in the language server that CPU shares one GIL with the thread that answers the
editor. Here it runs on another core. The worker exits when its stdin closes (the server is
gone), at once: nothing it holds needs flushing.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import pickle
import signal
import sys
import time
from collections.abc import Callable
from typing import Any, BinaryIO

from agent_ls.models.frames import encode, read_frame

log = logging.getLogger("agent_ls.models.worker")

# What no request waits for (an SDK's error table, SdkModel.after_warm_up) runs once no stream
# has run for this long: the first request and the turns right after it get the CPU first.
QUIET_BEFORE_REST = 1.0  # seconds
# How long a worker whose stdin closed waits for what it is still writing down.
KEEP_WAIT = 0.5  # seconds


class Worker:
    """Serves the messages of one server; one model object per spec, built on first use."""

    def __init__(self, out: BinaryIO, *, rehearse: bool = True) -> None:
        """``rehearse``: after a warm-up, stream once in memory unless a real stream started
        (one that starts stops it; off for a worker whose first stream is on its way:
        ``agent-ls run``'s)."""
        self._out = out
        self._rehearse = rehearse
        self._models: dict[str, Any] = {}
        self._streams: dict[int, asyncio.Task[None]] = {}
        self._ready: dict[str, asyncio.Future[None]] = {}
        self._answering: set[asyncio.Task[None]] = set()
        self._warming: dict[str, asyncio.Task[None]] = {}  # warm-ups not finished
        self._streamed = False
        # When the last stream ended, or the worker started: its first stream may be on its
        # way (`agent-ls run` asks at once), and what it makes may not wait behind the rest.
        self._quiet_since = time.monotonic()
        self._writing: set[asyncio.Future[None]] = set()  # threads writing caches down

    def send(self, message: tuple[Any, ...]) -> None:
        self._out.write(encode(message))
        self._out.flush()

    def _model(self, spec: str) -> Any:
        model = self._models.get(spec)
        if model is None:
            from agent_ls.models import load_model

            model = self._models[spec] = load_model(spec)
        return model

    def warm(self, spec: str) -> asyncio.Future[None]:
        """Warm ``spec``'s SDK once; the future is done when a stream of it can start."""
        ready = self._ready.get(spec)
        if ready is None:
            ready = self._ready[spec] = asyncio.get_running_loop().create_future()
            task = asyncio.ensure_future(self._warm(spec, ready))
            self._answering.add(task)
            task.add_done_callback(self._answering.discard)
            self._warming[spec] = task
            task.add_done_callback(lambda _: self._warming.pop(spec, None))
        return ready

    async def _warm(self, spec: str, ready: asyncio.Future[None]) -> None:
        from agent_ls.models.sdk import SdkModel

        def resolve() -> None:
            if not ready.done():
                ready.set_result(None)

        try:
            model = self._model(spec)
            if isinstance(model, SdkModel):
                try:
                    # Ready once imported; the canned stream then runs here, on this loop,
                    # while the server already may stream (a real stream first makes it
                    # needless, and stops it).
                    await model.warm_then_rehearse(
                        resolve, lambda: self._rehearse and not self._streamed, then_rest=False
                    )
                finally:
                    self._when_quiet(model.after_warm_up)
            else:
                await model.warm()
        except Exception as exc:  # the stream reports it where the user sees it
            log.info("warm-up of %s failed: %s", spec, exc)
        finally:
            resolve()
            settle_gc()

    def _when_quiet(self, work: Callable[[], None]) -> None:
        """Run ``work`` in a thread once no stream has run for :data:`QUIET_BEFORE_REST`
        (not cancelled by a stream, as a rehearsal is: it waits for it instead)."""

        async def later() -> None:
            while True:
                wait = QUIET_BEFORE_REST
                if not self._streams:
                    wait -= time.monotonic() - self._quiet_since
                if wait <= 0:
                    break
                await asyncio.sleep(wait)
            with contextlib.suppress(Exception):  # best effort: errors load on first use
                await self._in_thread(work)

        task = asyncio.ensure_future(later())
        self._answering.add(task)
        task.add_done_callback(self._answering.discard)

    def answer_warm(self, spec: str) -> None:
        """Warm ``spec``, then say so (when a stream of it can start)."""
        task = asyncio.ensure_future(self._answer_warm(spec))
        self._answering.add(task)
        task.add_done_callback(self._answering.discard)

    async def _answer_warm(self, spec: str) -> None:
        await self.warm(spec)
        self.send(("warmed", spec))

    async def _stream(self, sid: int, spec: str, request: Any) -> None:
        from agent_ls.models.sdk import SdkModel
        from agent_ls.ports.model import ModelError

        self._streamed = True
        self._stop_rehearsals()
        try:
            await self.warm(spec)  # not the adapter's own in-process warm-up
            async for event in self._model(spec).stream(request):
                self.send(("event", sid, event))
        except ModelError as exc:
            self.send(("error", sid, str(exc), exc.retryable, exc.retry_after))
        except asyncio.CancelledError:
            pass
        except Exception as exc:  # a bug of ours or the SDK's: report it, stay up
            log.exception("stream %s failed", sid)
            self.send(("error", sid, f"the model client failed: {type(exc).__name__}: {exc}",
                       False, None))
        finally:
            self._streams.pop(sid, None)
            self._quiet_since = time.monotonic()
        self.send(("done", sid))
        model = self._models.get(spec)
        if not self._streams and isinstance(model, SdkModel):
            # What the import read is kept now: this worker may never be quiet long enough
            # for after_warm_up (an `agent-ls run` of a few turns is not).
            await self._in_thread(model.keep_what_imports_read)

    def _in_thread(self, work: Callable[[], None]) -> asyncio.Future[None]:
        """``work`` in a thread that writes a cache: the worker's end waits for it."""
        future = asyncio.ensure_future(asyncio.to_thread(work))
        self._writing.add(future)
        future.add_done_callback(self._writing.discard)
        return future

    async def finish_writing(self) -> None:
        """Let the threads writing caches end (at most :data:`KEEP_WAIT`): stdin closes right
        after the last stream of a short run, and a write cut there is lost (the one that
        takes the new entries may be the quiet-time rest's, not the last stream's)."""
        if self._writing:
            await asyncio.wait(list(self._writing), timeout=KEEP_WAIT)

    def _stop_rehearsals(self) -> None:
        """A real stream needs the CPU now: canned streams still running stop where they
        are (what they built stays built; the stream builds the rest)."""
        for spec, task in list(self._warming.items()):
            ready = self._ready.get(spec)
            if ready is not None and ready.done():  # imported: what runs is the rehearsal
                task.cancel()

    def handle(self, message: tuple[Any, ...]) -> None:
        kind = message[0]
        if kind == "warm":
            self.answer_warm(message[1])
        elif kind == "stream":
            _, sid, spec, request = message
            self._streams[sid] = asyncio.ensure_future(self._stream(sid, spec, request))
        elif kind == "cancel":
            task = self._streams.get(message[1])
            if task is not None:
                task.cancel()
        else:
            log.warning("unknown message %r", kind)


async def serve(specs: list[str]) -> None:
    """Warm ``specs``, then answer stdin until it closes."""
    loop = asyncio.get_running_loop()
    # Stray prints (an SDK's warning) must not land between our frames: fd 1 becomes stderr.
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    worker = Worker(out)
    for spec in specs:
        worker.answer_warm(spec)
    reader = asyncio.StreamReader(limit=2**16)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin.buffer)
    if not specs:
        settle_gc()
    while (message := await read_frame(reader)) is not None:
        worker.handle(message)
    await worker.finish_writing()


def settle_gc() -> None:
    """After the first warm-up: what the SDK import built is never garbage (``gc.freeze``
    keeps it out of later collections), and collecting resumes. Idempotent."""
    if not gc.isenabled():
        gc.freeze()
        gc.enable()


def main(argv: list[str]) -> int:
    """``[--log-level LEVEL] [SPEC ...]``"""
    gc.disable()  # while the SDKs import (see agent.warmup.pause_gc); enabled once warm
    # A Ctrl-C is the server's (or its client's) to turn into a cancel: the worker ends only
    # when its stdin does, or when it is killed.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    level = "WARNING"
    if argv[:1] == ["--log-level"] and len(argv) > 1:
        level, argv = argv[1].upper(), argv[2:]
    logging.basicConfig(
        level=getattr(logging, level, logging.WARNING),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # Not asyncio.run: once stdin ends, it would wait for the default executor's threads,
    # and one may still be importing an SDK (half a second of CPU) for a server that is gone.
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(serve(argv))
    except (ValueError, pickle.UnpicklingError) as exc:
        log.error("model worker: bad input from the server: %s", exc)
        os._exit(2)
    # Nothing to flush or join: the SDK's pools die with the process, and skipping the
    # interpreter's teardown keeps the exit at a few milliseconds.
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
