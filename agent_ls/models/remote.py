"""Models whose SDK runs in the model worker process (:mod:`agent_ls.models.worker`).

The language server keeps one worker (:func:`shared_worker`): spawned as the server starts,
warming the model the environment names, or handed over by ``agent-ls run``'s client, which
starts it even earlier (:func:`spawn_for_server`); else started by the first warm-up or
request, and again after it died. :class:`RemoteModel` is a
:class:`~agent_ls.ports.model.Model` whose ``stream`` runs there; the agent loop cannot tell it
from the SDK adapter it wraps. Two threads carry the frames (one writes, one reads), so
neither a long request nor a slow worker blocks an event loop, and any number of streams share
the pipe. A worker that dies fails its streams with a retryable
:class:`~agent_ls.ports.model.ModelError`; the next request starts a new one.

``AGENT_LS_MODEL_WORKER=0`` keeps the SDKs in the server process.

Imported at server start-up before anything heavy: standard library only at the top.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any

from agent_ls.forking import ForkedProcess, can_fork, fork_child

if TYPE_CHECKING:
    import asyncio
    from typing import TypeAlias

    from agent_ls.models.sdk import SdkModel
    from agent_ls.ports.model import ModelEvent, ModelRequest

    Deliver: TypeAlias = Callable[[tuple[Any, ...]], None]  # a stream's messages, on its loop

log = logging.getLogger(__name__)


_shared: ModelWorker | None = None
_shared_lock = threading.Lock()


def enabled() -> bool:
    """Whether SDK models run in the worker (``AGENT_LS_MODEL_WORKER`` is not ``0``)."""
    return os.environ.get("AGENT_LS_MODEL_WORKER", "1").strip() != "0"


def _needs_worker(spec: str) -> bool:
    return enabled() and spec.partition(":")[0] in SDK_PROVIDERS


HANDOFF = "AGENT_LS_MODEL_WORKER_FDS"  # "PID:WRITE_FD:READ_FD" of a worker spawned for us
SDK_PROVIDERS = ("anthropic", "openai")


def shared_worker(preload: Sequence[str] = ()) -> ModelWorker:
    """This process's worker: the one its parent handed over (:func:`spawn_for_server`),
    else one started now (warming ``preload``) if none is running."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = _adopt_handed_over()
        if _shared is None or _shared.exited is not None:
            _shared = ModelWorker.spawn(preload)
        return _shared


def start_early(spec: str) -> None:
    """Start the worker warming ``spec`` now, if it is an SDK model and the worker is on."""
    if _needs_worker(spec):
        shared_worker([spec])


# Not `-m`: run as `__main__`, the worker would show the SDK's DeprecationWarnings (Python's
# default filter shows them for `__main__`), which in the server it never did.
_LAUNCH = (
    "import sys; from agent_ls import codecache, pydantic_plugins; codecache.install(); "
    "pydantic_plugins.leave_out(); "
    "from agent_ls.models.worker import main; main(sys.argv[1:])"
)


def worker_args(preload: Sequence[str], log_level: str) -> list[str]:
    """The arguments of :func:`agent_ls.models.worker.main`."""
    return ["--log-level", log_level, *preload]


def worker_argv(preload: Sequence[str], log_level: str) -> list[str]:
    return [sys.executable, "-c", _LAUNCH, *worker_args(preload, log_level)]


def spawn_for_server(
    spec: str,
    env: dict[str, str],
    cwd: str | os.PathLike[str],
    stderr: int,
    worker_main: Callable[[list[str]], int] | None = None,
) -> tuple[subprocess.Popen[bytes] | ForkedProcess, tuple[int, int]] | None:
    """For a client about to spawn ``serve``: start the model worker warming ``spec`` now, one
    interpreter start-up earlier than the server could, writing its log to ``stderr`` (the
    server's). Given ``worker_main`` (``models.worker.main``) and where
    :func:`agent_ls.forking.can_fork`, the worker is this interpreter forked. Returns the
    worker and the two pipe ends to pass to the server (``pass_fds``; close them here once it
    is spawned), and names them in ``env``; None when ``spec`` needs no worker. Raises
    ``OSError``."""
    if not _needs_worker(spec):  # `env` is this process's, plus the model it names
        return None
    to_worker_r, to_worker_w = os.pipe()
    from_worker_r, from_worker_w = os.pipe()
    level = env.get("AGENT_LS_LOG_LEVEL", "warning").upper()
    # The ask follows at once, but the worker is ready ~190 ms before the server sends it
    # (the server's start-up is the longer): it streams once in memory meanwhile, and the
    # real stream finds its models built (`agent-ls run`, 2 x 9 interleaved rounds against
    # no rehearsal: whole task -19 and -43 ms, first request -2 and -25 ms, the same CPU).
    args = worker_args([spec], level)
    proc: subprocess.Popen[bytes] | ForkedProcess
    try:
        if worker_main is not None and can_fork():
            main = worker_main
            pid = fork_child(
                lambda: main(args),
                stdin=to_worker_r,
                stdout=from_worker_w,
                stderr=stderr,
                env=env,
                cwd=cwd,
                argv=["-c", *args],
                name="agent-ls worker",
            )
            proc = ForkedProcess(pid)
        else:
            proc = subprocess.Popen(
                worker_argv([spec], level),
                stdin=to_worker_r,
                stdout=from_worker_w,
                stderr=stderr,
                env=env,
                cwd=cwd,
                start_new_session=True,  # as the server: a Ctrl-C is the client's to handle
            )
    except OSError:
        for fd in (to_worker_w, from_worker_r):
            os.close(fd)
        raise
    finally:
        os.close(to_worker_r)
        os.close(from_worker_w)
    env[HANDOFF] = f"{proc.pid}:{to_worker_w}:{from_worker_r}"
    return proc, (to_worker_w, from_worker_r)


def _adopt_handed_over() -> ModelWorker | None:
    """The worker :func:`spawn_for_server` started for this process, if it did."""
    value = os.environ.pop(HANDOFF, "")
    try:
        pid, write_fd, read_fd = (int(part) for part in value.split(":"))
        # Ours alone: a shell command or MCP server holding the write end would keep the
        # worker from seeing this process go.
        os.set_inheritable(write_fd, False)
        os.set_inheritable(read_fd, False)
    except (ValueError, OSError):
        if value:
            log.warning("ignoring %s=%r", HANDOFF, value)
        return None
    # Nothing counted as asked: whatever this process warms, it asks for (answered at once
    # if the worker warms it already), so a spec the client did not start cannot hang.
    return ModelWorker(os.fdopen(write_fd, "wb"), os.fdopen(read_fd, "rb"), pid, None)


class ModelWorker:
    """One worker process and the frames to and from it."""

    def __init__(
        self,
        stdin: IO[bytes],
        stdout: IO[bytes],
        pid: int,
        proc: subprocess.Popen[bytes] | None,
        preload: Sequence[str] = (),
    ) -> None:
        """Speak to the worker ``pid`` on its ``stdin``/``stdout`` (``proc`` when it is our
        child; one handed over by the parent is not)."""
        self._stdin = stdin
        self._stdout = stdout
        self.pid = pid
        self._proc = proc
        self._lock = threading.Lock()
        self._next_sid = 0
        self._streams: dict[int, tuple[asyncio.AbstractEventLoop, Deliver]] = {}
        self._asked_warm: set[str] = set(preload)
        self.exited: int | None = None
        self._outbox: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        threading.Thread(target=self._write_loop, name="agent-ls-model-out", daemon=True).start()
        threading.Thread(target=self._read_loop, name="agent-ls-model-in", daemon=True).start()

    @classmethod
    def spawn(
        cls, preload: Sequence[str] = (), env: Mapping[str, str] | None = None
    ) -> ModelWorker:
        """Spawn a worker (its environment: ``env``, else this process's), warming
        ``preload``. Raises ``OSError`` if it cannot start."""
        proc = subprocess.Popen(
            worker_argv(preload, logging.getLevelName(logging.root.level)),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=None if env is None else dict(env),
        )
        assert proc.stdin is not None and proc.stdout is not None
        return cls(proc.stdin, proc.stdout, proc.pid, proc, preload)

    # -- the two threads -------------------------------------------------------------------

    def _write_loop(self) -> None:
        stdin = self._stdin
        while (frame := self._outbox.get()) is not None:
            try:
                stdin.write(frame)
                stdin.flush()
            except (BrokenPipeError, ValueError, OSError):
                return  # the reader sees the worker go and fails what is open
        stdin.close()

    def _read_loop(self) -> None:
        from agent_ls.models.frames import HEADER, MAX_FRAME, decode

        stdout = self._stdout
        try:
            while len(header := stdout.read(HEADER.size)) == HEADER.size:
                (size,) = HEADER.unpack(header)
                body = stdout.read(size) if size <= MAX_FRAME else b""
                if len(body) != size:
                    self._kill()  # cut or oversized: no frame boundary left to trust
                    break
                self._dispatch(decode(body))
        except Exception:  # a frame we cannot read: the worker is unusable
            log.exception("model worker: unreadable frame")
            self._kill()
        stdout.close()
        # Not our child (handed over): its parent reaps it; the pipe's end is all we see.
        self._gone(self._proc.wait() if self._proc is not None else -1)

    def _kill(self) -> None:
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)

    def _dispatch(self, message: tuple[Any, ...]) -> None:
        kind = message[0]
        if kind == "warmed":  # nothing here waits for it: a stream waits in the worker
            return
        with self._lock:
            target = self._streams.get(message[1])
        if target is not None:
            loop, deliver = target
            _call_soon(loop, deliver, message)

    def _gone(self, code: int) -> None:
        with self._lock:
            self.exited = code
            streams = list(self._streams.values())
        if streams or code not in (0, -9, -15):
            log.warning("the model worker exited with code %s", code)
        for loop, deliver in streams:
            _call_soon(loop, deliver, ("gone", code))

    # -- what the models call --------------------------------------------------------------

    def send(self, message: tuple[Any, ...]) -> None:
        from agent_ls.models.frames import encode

        self._outbox.put(encode(message))

    def ask_warm(self, spec: str) -> None:
        """Have the worker warm ``spec`` (once), without waiting for it."""
        with self._lock:
            ask = spec not in self._asked_warm and self.exited is None
            self._asked_warm.add(spec)
        if ask:
            self.send(("warm", spec))

    def open_stream(
        self, deliver: Callable[[tuple[Any, ...]], None], loop: asyncio.AbstractEventLoop
    ) -> int:
        """A new stream id whose messages go to ``deliver`` on ``loop``."""
        with self._lock:
            self._next_sid += 1
            sid = self._next_sid
            self._streams[sid] = (loop, deliver)
            exited = self.exited
        if exited is not None:
            loop.call_soon(deliver, ("gone", exited))
        return sid

    def close_stream(self, sid: int, *, cancel: bool) -> None:
        with self._lock:
            self._streams.pop(sid, None)
        if cancel and self.exited is None:
            self.send(("cancel", sid))

    def stop(self) -> None:
        """Close the worker's stdin (it exits at once); does not wait."""
        self._outbox.put(None)


def _call_soon(loop: asyncio.AbstractEventLoop, callback: Callable[..., None], *args: Any) -> None:
    with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits any more
        loop.call_soon_threadsafe(callback, *args)


class RemoteModel:
    """An SDK model (``local`` names it and sizes its context) streamed by the worker."""

    def __init__(self, local: SdkModel[Any], worker: Callable[[], ModelWorker] = shared_worker):
        self._local = local
        self._worker = worker

    @property
    def name(self) -> str:
        return self._local.name

    @property
    def context_window(self) -> int:
        return self._local.context_window

    async def warm(self) -> None:
        """Ask the worker to warm this model, and return: a stream waits for the warm-up in
        the worker, so whatever the caller does next (the prompt, the tools) overlaps it."""
        self._worker().ask_warm(self.name)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        import asyncio

        from agent_ls.ports.model import ModelError

        worker = self._worker()
        inbox: asyncio.Queue[tuple[Any, ...]] = asyncio.Queue()
        sid = worker.open_stream(inbox.put_nowait, asyncio.get_running_loop())
        finished = False
        try:
            worker.send(("stream", sid, self.name, request))
            while True:
                message = await inbox.get()
                kind = message[0]
                if kind == "event":
                    yield message[2]
                elif kind == "done":
                    finished = True
                    return
                elif kind == "error":
                    finished = True
                    raise ModelError(message[2], retryable=message[3], retry_after=message[4])
                elif kind == "gone":
                    finished = True
                    code = f" (code {message[1]})" if message[1] != -1 else ""
                    raise ModelError(
                        f"the model worker process exited{code} during the request; the "
                        "next request starts a new one",
                        retryable=True,
                    )
        finally:
            worker.close_stream(sid, cancel=not finished)

    async def aclose(self) -> None:
        """Nothing here: the worker owns the client and its connections."""
