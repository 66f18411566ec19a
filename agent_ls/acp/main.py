"""Run ``agent-ls acp``: answer ``initialize`` at once, then hand the stream to the agent.

Importing the ``acp`` package builds a few hundred pydantic models (seconds on a busy
machine), so it happens in a worker thread while the first message, normally ``initialize``,
is answered from :mod:`agent_ls.acp.capabilities` with plain JSON. Anything else first is left
for the agent to answer once it is loaded.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import signal
from typing import Any

from agent_ls.acp.capabilities import initialize_result
from agent_ls.acp.transport import StdioTransport, stdio_transport


async def serve(raw_settings: Any = None) -> None:
    """Speak ACP on stdin/stdout until the client goes (EOF) or SIGTERM."""
    transport = await stdio_transport()
    loading = asyncio.ensure_future(
        asyncio.to_thread(importlib.import_module, "agent_ls.acp.agent")
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    first = await _first_message(transport, stop)
    client_capabilities = None
    if first is not None and _is_initialize(first):
        transport.send_nowait({"jsonrpc": "2.0", "id": first["id"], "result": initialize_result()})
        client_capabilities = first["params"].get("clientCapabilities")
    elif first is not None:
        transport.push_back(first)
    module = await loading
    if first is None and not stop.is_set():
        await transport.close()
        return
    await module.run(transport, raw_settings, client_capabilities, stop)


async def _first_message(transport: StdioTransport, stop: asyncio.Event) -> dict[str, Any] | None:
    receive = asyncio.ensure_future(transport.receive())
    stopped = asyncio.ensure_future(stop.wait())
    await asyncio.wait({receive, stopped}, return_when=asyncio.FIRST_COMPLETED)
    stopped.cancel()
    if not receive.done():
        receive.cancel()
        return None
    return receive.result()


def _is_initialize(message: dict[str, Any]) -> bool:
    msg_id = message.get("id")
    params = message.get("params")
    return (
        message.get("method") == "initialize"
        and isinstance(msg_id, int | str)
        and not isinstance(msg_id, bool)
        and isinstance(params, dict)
        and isinstance(params.get("protocolVersion"), int)
        and not isinstance(params.get("protocolVersion"), bool)
    )
