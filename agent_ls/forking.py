"""Starting a child of ours by forking this interpreter instead of starting a new one.

A new interpreter costs ~50 ms of CPU before it runs a line of ours (more with an editable
install's path hooks), and on the two cores that ``agent-ls run`` shares with its server and
model worker every such millisecond is one the first request waits for. A child forked from
the headless client before it has started a thread or an event loop has the standard library
and ``agent_ls`` already loaded. :func:`fork_child` runs a function there with the given pipes
as fds 0-2, every other descriptor closed but ``keep``, in a session of its own, ``cwd`` and
``env`` applied, ``/proc/self/comm`` set to ``name``, and exits with what it returned
(``os._exit``: the parent's ``atexit`` handlers and buffers are not the child's to run).

Linux only (elsewhere system libraries are not safe to use after a fork without exec), and
only while this process runs one thread: :func:`can_fork` says so, and callers start a new
interpreter otherwise.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Collection, Mapping
from typing import IO, NoReturn


def can_fork() -> bool:
    """Whether :func:`fork_child` may be used now."""
    return (
        sys.platform == "linux"
        and hasattr(os, "fork")
        and threading.active_count() == 1
        and os.environ.get("AGENT_LS_FORK") != "0"
    )


class ForkedProcess:
    """A forked child, as much of :class:`subprocess.Popen` as our callers use."""

    def __init__(
        self,
        pid: int,
        stdin: IO[bytes] | None = None,
        stdout: IO[bytes] | None = None,
        stderr: IO[bytes] | None = None,
    ) -> None:
        self.pid = pid
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = stderr
        self.returncode: int | None = None
        self._lock = threading.Lock()

    def _reap(self, flags: int) -> int | None:
        # One waitpid at a time: a second caller would reap nothing and lose the status.
        if not self._lock.acquire(blocking=not flags):
            return None
        try:
            if self.returncode is None:
                try:
                    pid, status = os.waitpid(self.pid, flags)
                except ChildProcessError:  # reaped by someone else: the status is lost
                    self.returncode = -1
                else:
                    if pid == self.pid:
                        self.returncode = os.waitstatus_to_exitcode(status)
            return self.returncode
        finally:
            self._lock.release()

    def poll(self) -> int | None:
        return self._reap(os.WNOHANG)

    def wait(self, timeout: float | None = None) -> int:
        if timeout is None:
            code = self._reap(0)
            assert code is not None
            return code
        deadline = time.monotonic() + timeout
        delay = 0.0005
        while (code := self.poll()) is None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout)
            time.sleep(min(delay, left))
            delay = min(delay * 2, 0.05)
        return code

    def send_signal(self, signal: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal)

    def kill(self) -> None:
        import signal

        self.send_signal(signal.SIGKILL)


def fork_child(
    target: Callable[[], int | None],
    *,
    stdin: int,
    stdout: int,
    stderr: int,
    env: Mapping[str, str],
    cwd: str | os.PathLike[str],
    argv: list[str],
    name: str,
    keep: Collection[int] = (),
) -> int:
    """Fork; in the child run ``target`` as described above and exit. Returns the child's
    pid (the parent closes its copies of the child's pipe ends itself). Raises ``OSError``."""
    for stream in (sys.stdout, sys.stderr):  # what is buffered here is not the child's
        with contextlib.suppress(Exception):
            stream.flush()
    pid = os.fork()
    if pid == 0:
        _run_child(target, (stdin, stdout, stderr), env, cwd, argv, name, set(keep))
    return pid


def _run_child(
    target: Callable[[], int | None],
    stdio: tuple[int, int, int],
    env: Mapping[str, str],
    cwd: str | os.PathLike[str],
    argv: list[str],
    name: str,
    keep: set[int],
) -> NoReturn:
    code = 1
    try:
        import fcntl

        os.setsid()
        # Out of 0-2 first, so no dup2 below overwrites a pipe another one still needs.
        moved = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3) for fd in stdio]
        for number, fd in enumerate(moved):
            os.dup2(fd, number)
        for fd in _open_fds():
            if fd > 2 and fd not in keep:
                with contextlib.suppress(OSError):
                    os.close(fd)
        with contextlib.suppress(OSError), open("/proc/self/comm", "w") as comm:
            comm.write(name[:15])
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        sys.argv[:] = argv
        result = target()
        code = result if isinstance(result, int) else 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        with contextlib.suppress(Exception):
            import traceback

            traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


def _open_fds() -> list[int]:
    try:
        return [int(fd) for fd in os.listdir("/proc/self/fd")]
    except OSError:
        return list(range(3, 1024))
