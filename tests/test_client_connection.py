"""The headless client's JSON-RPC connection, against a peer written here with plain bytes."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from agent_ls.client.connection import (
    INTERNAL_ERROR,
    METHOD_NOT_FOUND,
    Connection,
    ConnectionClosed,
    ResponseError,
)


class Peer:
    """The server's end: reads what the client wrote, writes raw frames back."""

    def __init__(self) -> None:
        self.to_client = asyncio.StreamReader()
        self.written = bytearray()

    def frame(self, message: Any) -> None:
        body = json.dumps(message).encode()
        self.to_client.feed_data(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def sent(self) -> list[dict[str, Any]]:
        out, data = [], bytes(self.written)
        while data:
            head, _, rest = data.partition(b"\r\n\r\n")
            length = int(head.split(b":")[1])
            out.append(json.loads(rest[:length]))
            data = rest[length:]
        return out


class _Writer:
    def __init__(self, peer: Peer) -> None:
        self.peer = peer

    def write(self, data: bytes) -> None:
        self.peer.written += data

    def is_closing(self) -> bool:
        return False

    async def drain(self) -> None:
        return None

    def close(self) -> None:
        return None


async def connect() -> tuple[Connection, Peer]:
    peer = Peer()
    return Connection(peer.to_client, _Writer(peer)), peer  # type: ignore[arg-type]


async def test_a_request_gets_its_result_and_an_error_answer_raises() -> None:
    rpc, peer = await connect()
    ok = asyncio.ensure_future(rpc.request("initialize", {"a": 1}))
    bad = asyncio.ensure_future(rpc.request("workspace/executeCommand", {}))
    await asyncio.sleep(0)
    first, second = peer.sent()
    assert first["method"] == "initialize" and first["params"] == {"a": 1}
    peer.frame({"jsonrpc": "2.0", "id": second["id"], "error": {"code": -32602, "message": "no"}})
    peer.frame({"jsonrpc": "2.0", "id": first["id"], "result": {"capabilities": {}}})
    assert await ok == {"capabilities": {}}
    with pytest.raises(ResponseError) as info:
        await bad
    assert (info.value.code, str(info.value)) == (-32602, "no")


async def test_requests_of_the_server_are_answered() -> None:
    rpc, peer = await connect()

    async def slow(params: Any) -> Any:
        await asyncio.sleep(0.01)
        return {"echo": params}

    def broken(params: Any) -> Any:
        raise KeyError("range")

    def refuses(params: Any) -> Any:
        raise ResponseError(METHOD_NOT_FOUND, "no language servers")

    rpc.handlers.update({"slow": slow, "broken": broken, "refuses": refuses})
    for i, method in enumerate(("slow", "broken", "refuses", "unknown"), 1):
        peer.frame({"jsonrpc": "2.0", "id": i, "method": method, "params": [i]})
    peer.frame({"jsonrpc": "2.0", "method": "unknown/notification", "params": {}})
    await asyncio.sleep(0.05)
    answers = {m["id"]: m for m in peer.sent()}
    assert answers[1]["result"] == {"echo": [1]}
    assert answers[2]["error"]["code"] == INTERNAL_ERROR
    assert "KeyError" in answers[2]["error"]["message"]
    assert answers[3]["error"] == {"code": METHOD_NOT_FOUND, "message": "no language servers"}
    assert answers[4]["error"]["code"] == METHOD_NOT_FOUND
    assert len(answers) == 4, "a notification is never answered"


async def test_the_end_of_the_servers_output_fails_what_waits() -> None:
    rpc, peer = await connect()
    waiting = asyncio.ensure_future(rpc.request("shutdown"))
    await asyncio.sleep(0)
    peer.to_client.feed_data(b"Content-Length: 40\r\n\r\n{\"jsonrpc\"")  # cut mid-message
    peer.to_client.feed_eof()
    with pytest.raises(ConnectionClosed):
        await asyncio.wait_for(waiting, 2)
    await asyncio.wait_for(rpc.closed, 2)
    with pytest.raises(ConnectionClosed):
        await rpc.request("anything")


async def test_a_frame_without_a_length_closes_the_connection() -> None:
    rpc, peer = await connect()
    waiting = asyncio.ensure_future(rpc.request("initialize"))
    await asyncio.sleep(0)
    peer.to_client.feed_data(b"Content-Type: x\r\n\r\n{}")
    with pytest.raises(ConnectionClosed):
        await asyncio.wait_for(waiting, 2)
