"""A minimal synchronous JSON-RPC client over stdio, independent of pygls (for black-box tests)."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any


class RawClient:
    def __init__(
        self, cwd: Path, env: dict[str, str] | None = None, args: tuple[str, ...] = ()
    ):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "agent_ls", "serve", *args],
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={**os.environ, **(env or {})},
        )
        self.next_id = 0
        self.notifications: list[dict[str, Any]] = []
        self._inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def send(self, message: dict[str, Any]) -> None:
        body = json.dumps(message).encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def _pump(self) -> None:
        stream = self.proc.stdout
        assert stream is not None
        while True:
            length = 0
            while True:
                line = stream.readline()
                if not line:
                    self._inbox.put(None)
                    return
                if line in (b"\r\n", b"\n"):
                    break
                name, _, value = line.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            self._inbox.put(json.loads(stream.read(length)))

    def read(self, timeout: float = 20.0) -> dict[str, Any]:
        try:
            message = self._inbox.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"no message from the server within {timeout} s") from None
        if message is None:
            raise EOFError("the server closed its output")
        return message

    def request(self, method: str, params: Any) -> dict[str, Any]:
        """Send a request; answer server requests with null; return the response."""
        self.next_id += 1
        my_id = self.next_id
        self.send({"jsonrpc": "2.0", "id": my_id, "method": method, "params": params})
        while True:
            message = self.read()
            if "method" in message and "id" in message:  # a server→client request
                self.send({"jsonrpc": "2.0", "id": message["id"], "result": None})
            elif "method" in message:
                self.notifications.append(message)
            elif message.get("id") == my_id:
                return message

    def initialize(
        self,
        root: Path,
        options: dict[str, Any] | None = None,
        capabilities: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        response = self.request(
            "initialize",
            {
                "processId": os.getpid(),
                "rootUri": root.as_uri(),
                "capabilities": capabilities or {"window": {"workDoneProgress": True}},
                "initializationOptions": options,
            },
        )
        self.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        return response

    def close(self) -> None:
        try:
            self.request("shutdown", None)
            self.send({"jsonrpc": "2.0", "method": "exit"})
            self.proc.wait(timeout=5)
        except Exception:
            self.proc.kill()
            self.proc.wait()
