"""Starting the server for a headless command before the client loads its own libraries.

``agent-ls run`` starts its model worker and its server before it imports anything else of
its own (forked from its interpreter where :func:`agent_ls.forking.can_fork`): they run on the
other core while the client imports, the worker loads the model SDK, and (``serve
--preload``) the server imports the agent core at once instead of after ``initialized``. Light
imports only (the standard library and ``models.remote``; a forked worker imports its own
module): this module runs before anything heavy is loaded.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

from agent_ls.forking import ForkedProcess, can_fork, fork_child

if TYPE_CHECKING:
    import asyncio

    from agent_ls.client.warm import WarmServer

# The server, or a worker: a new interpreter, or this one forked.
Server: TypeAlias = "subprocess.Popen[bytes] | ForkedProcess | WarmServer"


def server_argv(*, preload: bool) -> list[str]:
    argv = [sys.executable, "-m", "agent_ls", "serve"]
    return [*argv, "--preload"] if preload else argv


def spawn_server(
    cwd: Path,
    model: str | None,
    *,
    preload: bool = True,
    main: Callable[[list[str]], int] | None = None,
) -> Server:
    """The server process, on pipes, in its own session (a Ctrl-C in the terminal reaches
    the client only, which cancels the run through the protocol and then shuts it down).

    ``preload``: the client asks at once. An SDK model's worker process then starts here,
    first, and is handed to the server (``models.remote.spawn_for_server``): it begins loading
    the SDK one interpreter start-up sooner than the server could start it.
    ``main``: the CLI's entry point; given, and where :func:`agent_ls.forking.can_fork`, the
    server is this interpreter forked, running ``main(["serve", ...])``, not a new one.
    Given with ``preload``, a warm process (``agent-ls warm``, :mod:`agent_ls.client.warm`)
    that runs for this installation forks both instead, with everything loaded.
    """
    env = dict(os.environ)
    if model:
        env["AGENT_LS_MODEL"] = model
    if preload and main is not None:
        from agent_ls.client.warm import spawn_warm

        warm = spawn_warm(cwd, env)  # forked by `agent-ls warm`, if one runs for us
        if warm is not None:
            return warm
    handed: tuple[int, ...] = ()
    err_read, err_write = os.pipe()  # the server's stderr, and its worker's
    if preload:
        from agent_ls import DEFAULT_MODEL
        from agent_ls.models.remote import spawn_for_server

        try:
            spec = env.get("AGENT_LS_MODEL") or DEFAULT_MODEL
            spawned = spawn_for_server(spec, env, cwd, err_write, _worker_main)
        except OSError:  # the server starts its own
            spawned = None
        if spawned is not None:
            _workers.append(spawned[0])
            handed = spawned[1]
    argv = server_argv(preload=preload)
    server: Server
    try:
        if main is not None and can_fork():
            server = _fork_server(main, argv, cwd, env, err_write, handed)
        else:
            server = subprocess.Popen(
                argv,
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


def _fork_server(
    main: Callable[[list[str]], int],
    argv: list[str],
    cwd: Path,
    env: dict[str, str],
    stderr: int,
    handed: tuple[int, ...],
) -> ForkedProcess:
    in_read, in_write = os.pipe()
    out_read, out_write = os.pipe()
    try:
        args = argv[3:]  # after `python -m agent_ls`
        pid = fork_child(
            lambda: main(args),
            stdin=in_read,
            stdout=out_write,
            stderr=stderr,
            env=env,
            cwd=cwd,
            argv=[argv[0], *args],
            name="agent-ls serve",
            keep=handed,
        )
    except BaseException:
        os.close(in_write)
        os.close(out_read)
        raise
    finally:
        os.close(in_read)
        os.close(out_write)
    return ForkedProcess(
        pid, os.fdopen(in_write, "wb", buffering=0), os.fdopen(out_read, "rb", buffering=0)
    )


def _worker_main(args: list[str]) -> int:
    # Imported in the forked worker, not here first: the server and the worker start
    # sooner, and each imports asyncio on a core of its own.
    from agent_ls.models.worker import main

    return main(args)


_workers: list[Server] = []


def reap_workers(timeout: float = 1.0) -> None:
    """Wait for the model workers spawned here (each ends when its server's pipe closes)."""
    for proc in _workers:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout)


class AdoptedProcess:
    """A running :class:`subprocess.Popen` seen as an ``asyncio.subprocess.Process``: the
    attributes and methods the language client uses (``stdin``, ``stdout``, ``stderr``,
    ``pid``, ``returncode``, ``wait``, ``kill``)."""

    def __init__(self, popen: Server) -> None:
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
