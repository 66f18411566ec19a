"""``agent-ls acp`` fed raw bytes: malformed JSON-RPC gets JSON-RPC errors, never a crash."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.acp_harness import agent_env

pytestmark = pytest.mark.timeout(60)


class Wire:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    async def send(self, line: str | bytes) -> None:
        assert self.proc.stdin is not None
        data = line if isinstance(line, bytes) else line.encode()
        self.proc.stdin.write(data + b"\n")
        await self.proc.stdin.drain()

    async def receive(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), 20)
        assert line, "the agent closed its output"
        message: dict[str, Any] = json.loads(line)
        return message

    async def answer_to(self, msg_id: Any) -> dict[str, Any]:
        while True:
            message = await self.receive()
            if message.get("id") == msg_id and "method" not in message:
                return message


async def test_malformed_messages_get_errors_and_the_agent_goes_on(tmp_path: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "agent_ls",
        "acp",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env={**agent_env(tmp_path / "data"), "PATH": "/usr/bin:/bin"},
    )
    wire = Wire(proc)
    try:
        await wire.send("this is not json")
        parse = await wire.receive()
        assert parse["id"] is None and parse["error"]["code"] == -32700

        await wire.send(b"\xff\xfe{")
        assert (await wire.receive())["error"]["code"] == -32700

        await wire.send("[1, 2, 3]")
        batch = await wire.receive()
        assert batch["id"] is None and batch["error"]["code"] == -32600

        await wire.send(json.dumps({"jsonrpc": "2.0", "id": 3, "method": 42}))
        assert await wire.answer_to(3) == {
            "jsonrpc": "2.0",
            "id": 3,
            "error": {"code": -32600, "message": "method must be a string"},
        }

        await wire.send(json.dumps({"jsonrpc": "2.0", "id": 4, "method": "no/such", "params": {}}))
        assert (await wire.answer_to(4))["error"]["code"] == -32601

        await wire.send(
            json.dumps(
                {"jsonrpc": "2.0", "id": 5, "method": "session/new", "params": {"mcpServers": 7}}
            )
        )
        assert (await wire.answer_to(5))["error"]["code"] == -32602

        await wire.send(json.dumps({"jsonrpc": "2.0", "id": 6, "method": "session/prompt"}))
        assert (await wire.answer_to(6))["error"]["code"] == -32602

        # An unknown notification is ignored; then a proper initialize is answered.
        await wire.send(json.dumps({"jsonrpc": "2.0", "method": "no/such/notification"}))
        await wire.send(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 7,
                    "method": "initialize",
                    "params": {"protocolVersion": 1},
                }
            )
        )
        init = await wire.answer_to(7)
        assert init["result"]["protocolVersion"] == 1
        assert init["result"]["agentCapabilities"]["loadSession"] is True
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        code = await asyncio.wait_for(proc.wait(), 10)
    assert code == 0  # EOF is a clean exit
