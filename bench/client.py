"""A raw Content-Length JSON-RPC client over stdio: no pygls, no LSP library.

A reader thread stamps every message the moment its body is read (``stats.now``), answers the
server's requests (progress tokens, confirmations, configuration) and keeps notifications for
the benchmark to inspect, so latencies are measured from the client's side of the pipe.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from bench.stats import now

Message = dict[str, Any]
NotificationHook = Callable[[float, Message], None]


class LspError(RuntimeError):
    """The server answered a request with a JSON-RPC error."""

    def __init__(self, error: Message) -> None:
        super().__init__(f"{error.get('code')}: {error.get('message')}")
        self.error = error


class LspClient:
    """One server process spoken to over its stdin/stdout."""

    def __init__(
        self,
        argv: list[str],
        *,
        cwd: str | Path | None = None,
        env: dict[str, str] | None = None,
        stderr: int | IO[Any] | None = subprocess.DEVNULL,
        record: bool = True,
        on_notification: NotificationHook | None = None,
    ) -> None:
        self.record = record
        self.on_notification = on_notification
        self.init_options: Any = None
        self.notes: list[tuple[float, Message]] = []
        self.note_count = 0
        self.sent: dict[int, float] = {}
        self._responses: dict[Any, tuple[float, Message]] = {}
        self._cond = threading.Condition()
        self._wlock = threading.Lock()
        self._id = 0
        self.closed = False
        self.spawned_at = now()
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, cwd=cwd, env=env
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._wfile = self.proc.stdin
        self._rfile = self.proc.stdout
        self._reader = threading.Thread(target=self._read_loop, name="lsp-reader", daemon=True)
        self._reader.start()

    # -- wire -------------------------------------------------------------------------------

    def send(self, obj: Message) -> None:
        body = json.dumps(obj, separators=(",", ":")).encode()
        data = b"Content-Length: %d\r\n\r\n" % len(body) + body
        with self._wlock:
            self._wfile.write(data)
            self._wfile.flush()

    def _read_frame(self) -> bytes:
        length = -1
        while True:
            line = self._rfile.readline()
            if not line:
                raise EOFError("server closed stdout")
            if line in (b"\r\n", b"\n"):
                if length >= 0:
                    break
                continue
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        return self._rfile.read(length)

    def _read_loop(self) -> None:
        try:
            while True:
                body = self._read_frame()
                stamp = now()
                self._dispatch(stamp, json.loads(body))
        except (EOFError, OSError, ValueError):
            pass
        finally:
            with self._cond:
                self.closed = True
                self._cond.notify_all()

    def _dispatch(self, stamp: float, msg: Message) -> None:
        if "method" in msg and "id" in msg:
            with contextlib.suppress(OSError, ValueError):
                self.send({"jsonrpc": "2.0", "id": msg["id"], "result": self.answer(msg)})
            return
        if "method" in msg:
            if self.on_notification is not None:
                self.on_notification(stamp, msg)
            with self._cond:
                self.note_count += 1
                if self.record:
                    self.notes.append((stamp, msg))
                self._cond.notify_all()
            return
        with self._cond:
            self._responses[msg.get("id")] = (stamp, msg)
            self._cond.notify_all()

    def answer(self, msg: Message) -> Any:
        """The reply to a server→client request: what a cooperative, quiet editor says."""
        method, params = msg["method"], msg.get("params") or {}
        if method == "window/showMessageRequest":
            actions = params.get("actions") or []
            return actions[0] if actions else None
        if method == "workspace/applyEdit":
            return {"applied": False, "failureReason": "benchmark client"}
        if method == "workspace/configuration":
            return [self.init_options for _ in params.get("items") or []]
        if method == "agent/saveDocuments":
            return {"saved": []}
        if method == "agent/getDiagnostics":
            return {"items": []}
        return None

    # -- requests -----------------------------------------------------------------------------

    def request(self, method: str, params: Any) -> int:
        with self._wlock:
            self._id += 1
            rid = self._id
        self.sent[rid] = now()
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        return rid

    def notify(self, method: str, params: Any) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def response(self, rid: int, timeout: float = 60.0) -> tuple[float, Message]:
        """(receive time, message) of the response to ``rid``."""
        with self._cond:
            ok = self._cond.wait_for(lambda: rid in self._responses or self.closed, timeout)
            if rid in self._responses:
                return self._responses.pop(rid)
        if not ok:
            raise TimeoutError(f"no response to request {rid} within {timeout:g} s")
        raise EOFError(f"server exited (code {self.proc.poll()}) before answering {rid}")

    def has_response(self, rid: int) -> bool:
        with self._cond:
            return rid in self._responses or self.closed

    def call(self, method: str, params: Any, timeout: float = 60.0) -> tuple[float, Any]:
        """(round-trip seconds, result); raises :class:`LspError` on an error response."""
        rid = self.request(method, params)
        stamp, msg = self.response(rid, timeout)
        if "error" in msg:
            raise LspError(msg["error"])
        return stamp - self.sent[rid], msg.get("result")

    def command(self, name: str, argument: Any = None, *, token: str | None = None) -> int:
        params: Message = {"command": name, "arguments": [] if argument is None else [argument]}
        if token is not None:
            params["workDoneToken"] = token
        return self.request("workspace/executeCommand", params)

    def wait_note(
        self, pred: Callable[[Message], bool], timeout: float = 60.0, start: int = 0
    ) -> tuple[int, float, Message]:
        """The first recorded notification from index ``start`` on that satisfies ``pred``."""
        index = start
        found: tuple[int, float, Message] | None = None

        def scan() -> bool:
            nonlocal index, found
            while index < len(self.notes):
                stamp, msg = self.notes[index]
                index += 1
                if pred(msg):
                    found = (index - 1, stamp, msg)
                    return True
            return self.closed

        with self._cond:
            self._cond.wait_for(scan, timeout)
        if found is None:
            raise TimeoutError("the expected notification did not arrive")
        return found

    # -- lifecycle ----------------------------------------------------------------------------

    def initialize(self, root: Path, init_options: Any = None, timeout: float = 60.0) -> float:
        """Send ``initialize``; returns the receive time of its response."""
        self.init_options = init_options
        rid = self.request(
            "initialize",
            {
                "processId": os.getpid(),
                "clientInfo": {"name": "agent-ls-bench", "version": "0"},
                "rootUri": root.as_uri(),
                "workspaceFolders": [{"uri": root.as_uri(), "name": root.name}],
                "initializationOptions": init_options,
                "capabilities": {
                    "window": {"workDoneProgress": True},
                    "workspace": {
                        "configuration": True,
                        "workspaceEdit": {"documentChanges": True},
                    },
                },
            },
        )
        stamp, msg = self.response(rid, timeout)
        if "error" in msg:
            raise LspError(msg["error"])
        return stamp

    def initialized(self) -> None:
        self.notify("initialized", {})

    def close(self) -> None:
        with contextlib.suppress(Exception):
            if not self.closed:
                self.response(self.request("shutdown", None), timeout=5)
                self.notify("exit", None)
        with contextlib.suppress(OSError):
            self._wfile.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            kill_tree(self.proc.pid)
            self.proc.wait()
        self._reader.join(timeout=5)

    def __enter__(self) -> LspClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- processes ------------------------------------------------------------------------------


def children_of(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return out


def tree_pids(pid: int) -> list[int]:
    pids, todo = [], [pid]
    while todo:
        p = todo.pop()
        pids.append(p)
        todo += children_of(p)
    return pids


def status_kb(pid: int, field: str = "VmRSS") -> int:
    """A ``/proc/PID/status`` field in KiB (``VmRSS``, ``VmHWM``); 0 when gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def rss_tree_mb(pid: int) -> float:
    return sum(status_kb(p) for p in tree_pids(pid)) / 1024


def kill_tree(pid: int) -> None:
    for p in reversed(tree_pids(pid)):
        with contextlib.suppress(OSError):
            os.kill(p, 9)
