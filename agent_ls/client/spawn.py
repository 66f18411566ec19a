"""Starting the server for a headless command before the client loads its own libraries.

``agent-ls run`` spawns its model worker and its server before it imports anything else of
its own: they start on the other core while the client imports, the worker loads the model
SDK, and (``serve --preload``) the server imports the agent core at once instead of after
``initialized``. Standard library only (and ``models.remote``, which is too): this module
runs before anything heavy is loaded.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import asyncio


def server_argv(*, preload: bool) -> list[str]:
    argv = [sys.executable, "-m", "agent_ls", "serve"]
    return [*argv, "--preload"] if preload else argv


def spawn_server(cwd: Path, model: str | None, *, preload: bool = True) -> subprocess.Popen[bytes]:
    """The server process, on pipes, in its own session (a Ctrl-C in the terminal reaches
    the client only, which cancels the run through the protocol and then shuts it down).

    ``preload``: the client asks at once. An SDK model's worker process then starts here,
    first, and is handed to the server (``models.remote.spawn_for_server``): it begins loading
    the SDK one interpreter start-up sooner than the server could start it.
    """
    env = dict(os.environ)
    if model:
        env["AGENT_LS_MODEL"] = model
    handed: tuple[int, ...] = ()
    err_read, err_write = os.pipe()  # the server's stderr, and its worker's
    if preload:
        from agent_ls import DEFAULT_MODEL
        from agent_ls.models.remote import spawn_for_server

        try:
            spec = env.get("AGENT_LS_MODEL") or DEFAULT_MODEL
            spawned = spawn_for_server(spec, env, cwd, err_write)
        except OSError:  # the server starts its own
            spawned = None
        if spawned is not None:
            _workers.append(spawned[0])
            handed = spawned[1]
    try:
        server = subprocess.Popen(
            server_argv(preload=preload),
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err_write,
            bufsize=0,
            start_new_session=True,
            pass_fds=handed,
        )
    except BaseException:
        os.close(err_read)
        raise
    finally:
        for fd in (*handed, err_write):  # the server's now: the worker sees it go when it does
            os.close(fd)
    server.stderr = os.fdopen(err_read, "rb", buffering=0)
    return server


_workers: list[subprocess.Popen[bytes]] = []


def reap_workers(timeout: float = 1.0) -> None:
    """Wait for the model workers spawned here (each ends when its server's pipe closes)."""
    for proc in _workers:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout)


class AdoptedProcess:
    """A running :class:`subprocess.Popen` seen as an ``asyncio.subprocess.Process``: the
    attributes and methods the language client uses (``stdin``, ``stdout``, ``stderr``,
    ``pid``, ``returncode``, ``wait``, ``kill``)."""

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        self._popen = popen
        self.pid = popen.pid
        self.stdin: asyncio.StreamWriter | None = None
        self.stdout: asyncio.StreamReader | None = None
        self.stderr: asyncio.StreamReader | None = None
        self._exited: asyncio.Future[int] | None = None

    async def connect(self) -> AdoptedProcess:
        """Attach the pipes to the running event loop."""
        import asyncio

        loop = asyncio.get_running_loop()
        popen = self._popen
        assert popen.stdin is not None and popen.stdout is not None and popen.stderr is not None
        self.stdout = await _reader(loop, popen.stdout)
        self.stderr = await _reader(loop, popen.stderr)
        transport, protocol = await loop.connect_write_pipe(
            lambda: asyncio.streams.FlowControlMixin(loop), popen.stdin
        )
        self.stdin = asyncio.StreamWriter(transport, protocol, None, loop)
        self._exited = asyncio.ensure_future(asyncio.to_thread(popen.wait))
        return self

    @property
    def returncode(self) -> int | None:
        return self._popen.poll()

    async def wait(self) -> int:
        import asyncio

        assert self._exited is not None, "connect() first"
        return await asyncio.shield(self._exited)

    def kill(self) -> None:
        if self._popen.poll() is None:
            self._popen.kill()


async def _reader(loop: asyncio.AbstractEventLoop, pipe: object) -> asyncio.StreamReader:
    import asyncio

    reader = asyncio.StreamReader(limit=2**16, loop=loop)  # as asyncio's subprocesses
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader, loop=loop), pipe)
    return reader
