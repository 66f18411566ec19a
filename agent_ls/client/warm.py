"""``agent-ls warm``: one process that has loaded the server and the model SDK, forking both
for every ``agent-ls run`` (as Mercurial's chg and Gradle's daemon do for theirs).

A cold ``agent-ls run`` waits mostly for imports: the server's (~0.5 s of CPU) and, in the
model worker, the SDK's (~0.7 s). The warm process (the *zygote*) does them once, freezes what
they built out of the collector's sight, and listens on a Unix socket. A run hands it the
pipes its server is to use, its working directory, environment and ``sys.path[0]``; the zygote
forks the model worker and the server with exactly those (:mod:`agent_ls.forking`), answers
their pids (and the server's pidfd), and later the server's exit code. The run is otherwise
the same: the same server, the same protocol, the same client.

Opt-in: ``agent-ls warm`` starts one in the background (it exits after ``--idle`` seconds
without a run). ``agent-ls run`` uses it only when one answers for this exact installation
(:func:`fingerprint`: the version, the interpreter, its flags and path, and every file of
``agent_ls`` and every ``sys.path`` folder by size and time) and ``AGENT_LS_WARM`` is not
``0``; otherwise, or on any failure, it starts cold as before. The socket lives in a folder
only this user can enter; both ends check the other's uid (``SO_PEERCRED``).

Light imports only on the client's side: it runs before the client has loaded anything.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

REPLY_TIMEOUT = 2.0  # seconds a run waits for the zygote's answer before starting cold
REQUEST_LIMIT = 1 << 20  # bytes: a request's JSON (the environment is most of it)
# Read when a module is imported, not when it is used: a process that imported the SDK with
# another value would behave differently, so they are part of the fingerprint.
IMPORT_TIME_ENV = ("AGENT_LS_EAGER_SDK", "ANTHROPIC_LOG", "OPENAI_LOG")
_HEADER = struct.Struct(">I")
_HANDLED = (signal.SIGTERM, signal.SIGCHLD)  # what the zygote handles itself


# -- where, and for what ----------------------------------------------------------------------


def socket_dir(*, create: bool = True) -> Path | None:
    """This user's folder of warm sockets (created 0700 unless not ``create``), or None when
    it is not there or not safely ours."""
    override = os.environ.get("AGENT_LS_WARM_DIR")  # tests, unusual set-ups
    if override:
        base = Path(override)
    elif runtime := os.environ.get("XDG_RUNTIME_DIR"):
        base = Path(runtime) / "agent-ls"
    else:
        import tempfile

        base = Path(tempfile.gettempdir()) / f"agent-ls-{os.getuid()}"
    try:
        if create:
            base.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = base.lstat()
    except OSError:
        return None
    import stat

    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        return None  # another user's, or open to others: a socket there could be anyone's
    return base


def fingerprint() -> str:
    """What a warm process must share with a run to stand in for its cold start."""
    import hashlib

    import agent_ls

    digest = hashlib.sha256()
    flags = (sys.flags, sys.warnoptions, getattr(sys, "_xoptions", {}))
    for part in (agent_ls.__version__, sys.executable, sys.version, repr(flags), os.getuid()):
        digest.update(f"{part}\0".encode())
    for entry in sys.path[1:]:  # [0] is the run's own (its cwd under -m): the child sets it
        digest.update(f"{entry}:{_mtime(entry)}\0".encode("utf-8", "surrogateescape"))
    for name in IMPORT_TIME_ENV:
        digest.update(f"{name}={os.environ.get(name)}\0".encode("utf-8", "surrogateescape"))
    package = Path(agent_ls.__file__).parent
    for root, dirs, files in os.walk(package):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            with contextlib.suppress(OSError):
                info = os.stat(os.path.join(root, name))
                digest.update(
                    f"{root}/{name}:{info.st_size}:{info.st_mtime_ns}\0".encode(
                        "utf-8", "surrogateescape"
                    )
                )
    return digest.hexdigest()[:20]


SUN_PATH_MAX = 107  # bytes of a Unix socket's path (sun_path holds 108 with the NUL)


def unix_address(call: Callable[[str], None], path: Path) -> None:
    """``call`` (a socket's ``connect`` or ``bind``) with ``path``; a path too long for a
    Unix socket is reached through its folder's descriptor (``/proc/self/fd/N/name``), so a
    deep ``AGENT_LS_WARM_DIR`` still works."""
    if len(os.fsencode(path)) <= SUN_PATH_MAX:
        call(str(path))
        return
    folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        call(f"/proc/self/fd/{folder}/{path.name}")
    finally:
        os.close(folder)


def _mtime(path: str) -> int:
    try:
        return os.stat(path or ".").st_mtime_ns  # a folder changes when a package is added
    except OSError:
        return 0


def socket_path(directory: Path, key: str) -> Path:
    return directory / f"warm-{key}.sock"


def _peer_uid(sock: socket.socket) -> int:
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return int(struct.unpack("3i", creds)[1])


# -- the run's side -----------------------------------------------------------------------------


class WarmServer:
    """A server forked by the warm process: as much of :class:`subprocess.Popen` as the
    headless client uses. Its exit code comes over the socket (it is not our child); signals
    go through its pidfd, which cannot name another process once it has been reaped."""

    def __init__(
        self,
        pid: int,
        sock: socket.socket,
        pidfd: int | None,
        stdin: IO[bytes],
        stdout: IO[bytes],
        stderr: IO[bytes],
        pending: bytes = b"",
    ) -> None:
        self.pid = pid
        self.stdin: IO[bytes] | None = stdin
        self.stdout: IO[bytes] | None = stdout
        self.stderr: IO[bytes] | None = stderr
        self.returncode: int | None = None
        self._sock = sock
        self._pidfd = pidfd
        self._buffer = pending
        self._lock = threading.Lock()

    def _read_exit(self, timeout: float | None) -> int | None:
        if not self._lock.acquire(blocking=timeout != 0):
            return self.returncode
        try:
            deadline = None if timeout is None else time.monotonic() + timeout
            while self.returncode is None:
                if b"\n" in self._buffer:
                    line, _, self._buffer = self._buffer.partition(b"\n")
                    with contextlib.suppress(ValueError, TypeError):
                        code = json.loads(line).get("exit")
                        if isinstance(code, int):
                            self._finish(code)
                    continue
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                self._sock.settimeout(left)
                try:
                    chunk = self._sock.recv(4096)
                except (TimeoutError, BlockingIOError):
                    return None
                except OSError:
                    chunk = b""
                if not chunk:  # the warm process is gone: wait for the server itself
                    self._finish(self._wait_gone(deadline))
                self._buffer += chunk
            return self.returncode
        finally:
            self._lock.release()

    def _wait_gone(self, deadline: float | None) -> int:
        if self._pidfd is not None:
            import select

            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([self._pidfd], [], [], left)[0]:
                raise TimeoutError
        return -1  # its status went with the warm process

    def _finish(self, code: int) -> None:
        self.returncode = code
        self._sock.close()
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None

    def poll(self) -> int | None:
        try:
            return self._read_exit(0)
        except TimeoutError:
            return None

    def wait(self, timeout: float | None = None) -> int:
        try:
            code = self._read_exit(timeout)
        except TimeoutError:
            code = None
        if code is None:
            import subprocess

            raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout or 0)
        return code

    def send_signal(self, sig: int) -> None:
        if self.returncode is not None:
            return
        with contextlib.suppress(OSError):  # gone already
            if self._pidfd is not None and hasattr(signal, "pidfd_send_signal"):
                signal.pidfd_send_signal(self._pidfd, sig)
            else:
                os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def spawn_warm(cwd: Path, env: dict[str, str]) -> WarmServer | None:
    """The server (and its model worker) for a run in ``cwd`` with ``env``, forked by a warm
    process for this installation; None when there is none (or it fails): start cold."""
    if os.environ.get("AGENT_LS_WARM", "").strip() == "0" or not hasattr(socket, "send_fds"):
        return None
    directory = socket_dir(create=False)
    if directory is None or not any(directory.glob("warm-*.sock")):
        return None  # the usual case: none runs, and a cold start pays for no fingerprint
    path = socket_path(directory, fingerprint())
    if not path.exists():
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    ours: list[int] = []
    try:
        sock.settimeout(REPLY_TIMEOUT)
        unix_address(sock.connect, path)
        if _peer_uid(sock) != os.getuid():
            raise OSError("the warm socket is another user's")
        in_r, in_w = os.pipe()
        ours += [in_w]
        out_r, out_w = os.pipe()
        ours += [out_r]
        err_r, err_w = os.pipe()
        ours += [err_r]
        theirs = [in_r, out_w, err_w]
        try:
            request = {"op": "run", "cwd": str(cwd), "env": env, "path0": sys.path[0]}
            _send(sock, request, theirs)
        finally:
            for fd in theirs:
                os.close(fd)
        reply, fds, pending = _receive(sock)
        if "server" not in reply:
            for fd in fds:
                os.close(fd)
            raise OSError(str(reply.get("error", "no server")))
        server = WarmServer(
            int(reply["server"]),
            sock,
            fds[0] if fds else None,
            os.fdopen(in_w, "wb", buffering=0),
            os.fdopen(out_r, "rb", buffering=0),
            os.fdopen(err_r, "rb", buffering=0),
            pending,
        )
        return server
    except (OSError, ValueError, KeyError, TypeError):
        sock.close()
        for fd in ours:
            with contextlib.suppress(OSError):
                os.close(fd)
        return None


def _send(sock: socket.socket, message: dict[str, Any], fds: list[int] | None = None) -> None:
    body = json.dumps(message).encode("utf-8", "surrogateescape")
    data = _HEADER.pack(len(body)) + body
    if fds:
        sent = socket.send_fds(sock, [data], fds)
        sock.sendall(data[sent:])
    else:
        sock.sendall(data)


def _receive(sock: socket.socket) -> tuple[dict[str, Any], list[int], bytes]:
    """One answer line (and the fds sent with it), and whatever followed it."""
    data, fds, _, _ = socket.recv_fds(sock, 4096, 1)
    while b"\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    line, _, rest = data.partition(b"\n")
    reply = json.loads(line) if line else {}
    if not isinstance(reply, dict):
        raise ValueError("not an object")
    return reply, list(fds), rest


def ask(path: Path, op: str) -> dict[str, Any] | None:
    """Send ``op`` (``status`` or ``stop``) to the warm process at ``path``; its answer, or
    None when none answers there."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(REPLY_TIMEOUT)
        unix_address(sock.connect, path)
        if _peer_uid(sock) != os.getuid():
            return None
        _send(sock, {"op": op})
        reply, fds, _ = _receive(sock)
        for fd in fds:
            os.close(fd)
        return reply
    except (OSError, ValueError):
        return None
    finally:
        sock.close()


def running(directory: Path) -> list[tuple[Path, dict[str, Any]]]:
    """Every warm process of this user that answers, with its status; stale sockets go."""
    found = []
    for path in sorted(directory.glob("warm-*.sock")):
        status = ask(path, "status")
        if status is None:
            with contextlib.suppress(OSError):
                path.unlink()  # nobody listens: left by a process that was killed
        else:
            found.append((path, status))
    return found


# -- the warm process ------------------------------------------------------------------------

# What a run's server imports (found by listing sys.modules at a server's exit); a module
# missing here is imported by the forked server itself, as a cold one would.
SERVER_MODULES = (
    "agent_ls.settings",
    "agent_ls.agent.loop",
    "agent_ls.agent.service",
    "agent_ls.agent.store",
    "agent_ls.agent.subagents",
    "agent_ls.agent.compaction",
    "agent_ls.agent.hooks",
    "agent_ls.tools.registry",
    "agent_ls.tools.search",
    "agent_ls.tools.shell",
    "agent_ls.tools.edit",
    "agent_ls.tools.files",
    "agent_ls.tools.task",
    "agent_ls.safety.shell",
    "agent_ls.safety.sandbox",
    "agent_ls.models.script",
    "agent_ls.models.remote",
    "agent_ls.models.worker",
)


def preload(spec: str) -> None:
    """Import what a run's server and its model worker import, and warm ``spec``'s SDK."""
    import asyncio
    import importlib

    from agent_ls.lsp.attrs_replay import lsprotocol_from_caches

    with lsprotocol_from_caches():
        importlib.import_module("agent_ls.lsp.server")
    for name in SERVER_MODULES:
        importlib.import_module(name)
    from agent_ls.models import load_model
    from agent_ls.models.sdk import SdkModel
    from agent_ls.safety.shell import classify

    classify("true")  # builds the bash parser
    with contextlib.suppress(Exception):  # a model that cannot load here loads in the run
        model = load_model(spec)
        if isinstance(model, SdkModel):
            model.import_sdk()
            asyncio.run(model.rehearse())  # builds what a stream's parsing builds on first use
            model.after_warm_up()  # not again in each forked worker


class Zygote:
    """The warm process's loop: accept runs, fork their servers, report their exits."""

    def __init__(
        self,
        main: Callable[[list[str]], int],
        listener: socket.socket,
        path: Path,
        idle: float,
        model: str,
    ) -> None:
        self._main = main
        self._listener = listener
        self._path = path
        self._inode = path.stat().st_ino
        self._idle = idle
        self._servers: dict[int, socket.socket] = {}
        self._last = time.monotonic()
        self._stopping = False
        self._listening = True
        self.served = 0
        self.model = model  # whose SDK it loaded (a run of another loads its own)

    def serve(self) -> None:
        import selectors

        wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, lambda *_: self._stop())
        os.register_at_fork(after_in_child=_reset_signals)
        selector = selectors.DefaultSelector()
        selector.register(self._listener, selectors.EVENT_READ, "accept")
        selector.register(wake_r, selectors.EVENT_READ, "wake")
        try:
            while True:
                self._reap()
                if not self._ours():
                    self._stopping = True  # replaced (a newer one) or removed: finish
                if self._stopping and self._listening:
                    # No new run waits for an answer that will not come: they start cold.
                    selector.unregister(self._listener)
                    self._close_listener()
                if self._stopping and not self._servers:
                    return
                timeout = None
                if not self._servers:
                    timeout = max(0.0, self._last + self._idle - time.monotonic())
                    if timeout == 0:
                        _log("idle: exiting")
                        return
                for key, _ in selector.select(timeout):
                    if key.data == "wake":
                        with contextlib.suppress(OSError):
                            os.read(wake_r, 512)
                    elif not self._stopping:
                        self._accept()
        finally:
            self._close_listener()

    def _close_listener(self) -> None:
        if self._listening:
            self._listening = False
            if self._ours():
                with contextlib.suppress(OSError):
                    self._path.unlink()
            self._listener.close()

    def _ours(self) -> bool:
        try:
            return self._path.stat().st_ino == self._inode
        except OSError:
            return False

    def _stop(self) -> None:
        self._stopping = True

    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self._servers.pop(pid, None)
            if conn is not None:
                self._last = time.monotonic()
                with contextlib.suppress(OSError):
                    conn.sendall(b'{"exit": %d}\n' % os.waitstatus_to_exitcode(status))
                conn.close()

    def _accept(self) -> None:
        # Until a child has dropped the zygote's handlers (_reset_signals), a signal sent to
        # it would run them: it waits, blocked, and then meets the default action.
        signal.pthread_sigmask(signal.SIG_BLOCK, _HANDLED)
        try:
            self._accept_blocked()
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _HANDLED)

    def _accept_blocked(self) -> None:
        try:
            conn, _ = self._listener.accept()
        except OSError:
            return
        fds: list[int] = []
        keep = False
        try:
            conn.settimeout(REPLY_TIMEOUT)
            if _peer_uid(conn) != os.getuid():
                return
            request, fds = _read_request(conn)
            op = request.get("op")
            if op == "run" and len(fds) == 3:
                self._run(conn, request, fds)
                keep = True  # the connection now waits for the server's exit
            elif op == "status":
                conn.sendall(
                    _line(
                        {
                            "pid": os.getpid(),
                            "socket": str(self._path),
                            "running": len(self._servers),
                            "served": self.served,
                            "idle": self._idle,
                            "model": self.model,
                        }
                    )
                )
            elif op == "stop":
                self._stopping = True
                conn.sendall(_line({"stopping": os.getpid(), "running": len(self._servers)}))
            else:
                conn.sendall(_line({"error": f"unknown request {op!r}"}))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            _log(f"bad request: {exc}")
            with contextlib.suppress(OSError):
                conn.sendall(_line({"error": str(exc)}))
        finally:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
            if not keep:
                conn.close()

    def _run(self, conn: socket.socket, request: dict[str, Any], fds: list[int]) -> None:
        """Fork the run's worker and server, and answer their pids on ``conn``. Raises
        ``OSError`` (nothing runs) when it cannot."""
        from agent_ls import DEFAULT_MODEL
        from agent_ls.forking import can_fork, fork_child
        from agent_ls.models.remote import spawn_for_server
        from agent_ls.models.worker import main as worker_main  # loaded: no need to defer

        env = {str(k): str(v) for k, v in dict(request["env"]).items()}
        cwd = str(request["cwd"])
        path0 = str(request.get("path0", ""))
        if not can_fork():
            raise OSError("cannot fork here")
        stdin, stdout, stderr = fds
        handed: tuple[int, ...] = ()
        worker_pid = None
        try:
            spec = env.get("AGENT_LS_MODEL") or DEFAULT_MODEL
            spawned = spawn_for_server(spec, env, cwd, stderr, worker_main)
        except OSError:
            spawned = None
        if spawned is not None:
            worker_pid, handed = spawned[0].pid, spawned[1]
        main = self._main
        try:
            pid = fork_child(
                lambda: _in_child(main, path0),
                stdin=stdin,
                stdout=stdout,
                stderr=stderr,
                env=env,
                cwd=cwd,
                argv=[sys.executable, "serve", "--preload"],
                name="agent-ls serve",
                keep=handed,
            )
        finally:
            for fd in handed:
                os.close(fd)
        self.served += 1
        self._last = time.monotonic()
        pidfd = None
        with contextlib.suppress(OSError, AttributeError):
            pidfd = os.pidfd_open(pid)
        try:
            reply = _line({"server": pid, "worker": worker_pid})
            if pidfd is not None:
                socket.send_fds(conn, [reply], [pidfd])
            else:
                conn.sendall(reply)
        finally:
            if pidfd is not None:
                os.close(pidfd)
        self._servers[pid] = conn


def _read_request(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    data, fds, _, _ = socket.recv_fds(conn, 65536, 3)
    fds = list(fds)
    while len(data) < _HEADER.size:
        chunk = conn.recv(65536)
        if not chunk:
            raise ValueError("truncated request")
        data += chunk
    (size,) = _HEADER.unpack_from(data)
    if size > REQUEST_LIMIT:
        raise ValueError("request too large")
    while len(data) < _HEADER.size + size:
        chunk = conn.recv(65536)
        if not chunk:
            raise ValueError("truncated request")
        data += chunk
    request = json.loads(data[_HEADER.size : _HEADER.size + size])
    if not isinstance(request, dict):
        raise ValueError("not an object")
    return request, fds


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


def _reset_signals() -> None:
    """In every child: none of the zygote's signal handling (its wakeup pipe is not theirs),
    and what arrived meanwhile is delivered."""
    signal.set_wakeup_fd(-1)
    for sig in _HANDLED:
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _HANDLED)


def _in_child(main: Callable[[list[str]], int], path0: str) -> int:
    sys.path[0:1] = [path0]  # the run's: as if it had started this server itself
    time.tzset()  # the run's TZ
    return main(["serve", "--preload"])


def _log(message: str) -> None:
    print(
        f"{time.strftime('%Y-%m-%d %H:%M:%S')} agent-ls warm[{os.getpid()}]: {message}",
        file=sys.stderr,
        flush=True,
    )


def serve_warm(
    main: Callable[[list[str]], int],
    spec: str,
    idle: float,
    ready: Callable[[str], None],
) -> int:
    """The warm process: preload, listen, call ``ready`` with the socket's path, serve until
    idle for ``idle`` seconds, stopped or replaced. Returns the exit code."""
    import gc

    if sys.platform != "linux":
        _log("Linux only: elsewhere a process with the SDK loaded cannot safely fork")
        return 1
    directory = socket_dir()
    if directory is None:
        _log("no private folder for the socket (set XDG_RUNTIME_DIR or AGENT_LS_WARM_DIR)")
        return 1
    path = socket_path(directory, fingerprint())
    if ask(path, "status") is not None:  # before a second of imports for nothing
        _log(f"one is running already on {path}")
        ready(str(path))
        return 0
    gc.disable()  # the imports build long-lived objects only (see agent.warmup.pause_gc)
    started = time.monotonic()
    preload(spec)
    gc.freeze()  # out of the collector's sight: the forks share these pages untouched
    gc.enable()
    if threading.active_count() != 1:
        _log("the preload started a thread: a fork could deadlock; not serving")
        return 1
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    temporary = directory / f".warm-{os.getpid()}.sock"
    with contextlib.suppress(FileNotFoundError):
        temporary.unlink()
    unix_address(listener.bind, temporary)
    listener.listen(16)
    os.replace(temporary, path)  # a stale socket of a killed one is replaced at once
    _log(f"ready on {path} after {time.monotonic() - started:.2f} s ({spec})")
    zygote = Zygote(main, listener, path, idle, spec)
    ready(str(path))
    zygote.serve()
    _log(f"exiting after {zygote.served} runs")
    return 0


def start_in_background(spec: str, idle: float, log: Path, timeout: float = 120.0) -> str:
    """Start a warm process for this installation (``agent-ls warm --foreground``, detached,
    logging to ``log``) and wait until it listens; returns its socket's path. Warm processes
    of other installations (an older version, other files) are stopped: runs cannot use
    them. Raises ``OSError`` with the log's last lines when it does not come up."""
    import select
    import subprocess

    if sys.platform != "linux":
        raise OSError("Linux only: elsewhere a process with the SDK loaded cannot safely fork")
    directory = socket_dir()
    if directory is None:
        raise OSError("no private folder for the socket (set XDG_RUNTIME_DIR or AGENT_LS_WARM_DIR)")
    mine = socket_path(directory, fingerprint())
    for path, _ in running(directory):
        if path == mine:
            return str(path)  # one is serving this installation already
        ask(path, "stop")
    log.parent.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "agent_ls", "warm", "--foreground", "--idle", str(idle)]
    with open(log, "ab") as log_file:
        proc = subprocess.Popen(
            [*argv, "--model", spec],
            cwd="/",  # holds no folder of the user's busy; each run gets its own cwd
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=log_file,
            start_new_session=True,
        )
    assert proc.stdout is not None
    line = b""
    deadline = time.monotonic() + timeout
    while b"\n" not in line and proc.poll() is None:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([proc.stdout], [], [], left)[0]:
            break
        chunk = os.read(proc.stdout.fileno(), 4096)
        if not chunk:
            break
        line += chunk
    proc.stdout.close()
    if line.startswith(b"ready "):
        return line[6:].decode("utf-8", "surrogateescape").strip()
    if proc.poll() is None:
        proc.kill()
    tail = ""
    with contextlib.suppress(OSError):
        tail = "\n".join(log.read_text("utf-8", "replace").splitlines()[-10:])
    raise OSError(f"the warm process did not start (log: {log})\n{tail}".rstrip())
