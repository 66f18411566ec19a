"""The server reads a pipe from its client on the event loop (``agent_ls.lsp.stdio``).

What a client can do to the framing — a message cut into many writes, several in one write,
a connection gone mid-message, stdin that is a file — and what the server must do about it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from agent_ls.lsp.stdio import is_pipe


def frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def initialize(workspace: Path, rid: int = 1) -> dict[str, Any]:
    params = {"processId": os.getpid(), "rootUri": workspace.as_uri(), "capabilities": {}}
    return {"jsonrpc": "2.0", "id": rid, "method": "initialize", "params": params}


def server(
    workspace: Path, tmp_path: Path, stdin: Any = subprocess.PIPE
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "agent_ls", "serve"],
        cwd=workspace,
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={
            **os.environ,
            "AGENT_LS_DATA_DIR": str(tmp_path / "data"),
            "AGENT_LS_MODEL": "script:/nonexistent.json",
        },
    )


def responses(out: bytes) -> list[dict[str, Any]]:
    found = []
    while out:
        head, _, rest = out.partition(b"\r\n\r\n")
        lengths = [h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length:")]
        size = int(lengths[0].split(b":")[1])
        found.append(json.loads(rest[:size]))
        out = rest[size:]
    return [m for m in found if "id" in m and "method" not in m]


def test_cut_and_batched_messages_are_all_answered(workspace: Path, tmp_path: Path) -> None:
    proc = server(workspace, tmp_path)
    assert proc.stdin is not None
    for byte in frame(initialize(workspace)):  # one byte per write
        proc.stdin.write(bytes([byte]))
        proc.stdin.flush()
    status = {"command": "agent.status", "arguments": [{}]}
    batch = b"".join(
        frame({"jsonrpc": "2.0", "id": i, "method": "workspace/executeCommand", "params": status})
        for i in (2, 3, 4)
    )
    proc.stdin.write(frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}) + batch)
    proc.stdin.write(frame({"jsonrpc": "2.0", "id": 5, "method": "shutdown"}))
    proc.stdin.flush()
    out = read_until(proc, 5)  # `exit` only once `shutdown` is answered, as LSP says
    proc.stdin.write(frame({"jsonrpc": "2.0", "method": "exit"}))
    rest, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()
    answered = {m["id"]: m for m in responses(out + rest)}
    assert sorted(answered) == [1, 2, 3, 4, 5], answered
    assert all("result" in answered[i] for i in (2, 3, 4))


def read_until(proc: subprocess.Popen[bytes], rid: int) -> bytes:
    """What the server wrote up to and including its response ``rid``."""
    assert proc.stdout is not None
    out = b""
    while True:
        head = b""
        while not head.endswith(b"\r\n\r\n"):
            byte = proc.stdout.read(1)
            assert byte, "the server closed its stdout"
            head += byte
        size = next(
            int(h.split(b":")[1])
            for h in head.split(b"\r\n")
            if h.lower().startswith(b"content-length")
        )
        body = proc.stdout.read(size)
        out += head + body
        message = json.loads(body)
        if message.get("id") == rid and "method" not in message:
            return out


def test_a_client_gone_mid_message_ends_the_server_quietly(workspace: Path, tmp_path: Path) -> None:
    proc = server(workspace, tmp_path)
    assert proc.stdin is not None
    whole = frame(initialize(workspace))
    proc.stdin.write(whole + frame(initialize(workspace, 2))[:40])  # the second one cut short
    proc.stdin.flush()
    time.sleep(0.5)
    out, err = proc.communicate(timeout=30)  # closes its stdin
    assert [m["id"] for m in responses(out)] == [1]
    assert b"Traceback" not in err, err.decode()


def test_a_file_as_stdin_is_served_too(workspace: Path, tmp_path: Path) -> None:
    script = tmp_path / "session.jsonrpc"
    script.write_bytes(
        frame(initialize(workspace))
        + frame({"jsonrpc": "2.0", "id": 2, "method": "shutdown"})
        + frame({"jsonrpc": "2.0", "method": "exit"})
    )
    with script.open("rb") as stdin:
        assert not is_pipe(stdin)
        proc = server(workspace, tmp_path, stdin=stdin)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()
    assert [m["id"] for m in responses(out)] == [1, 2]


def test_only_pipes_and_sockets_are_read_on_the_loop(tmp_path: Path) -> None:
    import socket

    read, write = os.pipe()
    left, right = socket.socketpair()
    with os.fdopen(read, "rb") as pipe, os.fdopen(write, "wb"), left, right:
        assert is_pipe(pipe)
        assert is_pipe(left.makefile("rb"), right.makefile("wb"))
        # one socket both ways: reading it non-blocking would make the writes non-blocking
        assert not is_pipe(left.makefile("rb"), left.makefile("wb"))
        with (tmp_path / "f").open("wb+") as regular:
            assert not is_pipe(regular)
        with open(os.devnull, "rb") as device:  # a character device, as a terminal is
            assert not is_pipe(device)
