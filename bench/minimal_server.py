"""Minimal pygls 2 server used as the baseline in baselines.py.

It registers a handful of workspace/executeCommand handlers and nothing else:

* ``bench.echo``            returns its arguments (round-trip latency).
* ``bench.progress``        sends N ``$/progress`` reports built from lsprotocol
                            attrs classes, synchronously, then returns N.
* ``bench.progress_async``  same, but an ``async`` handler that yields to the
                            event loop after every report (the shape of a
                            handler that forwards streamed model tokens).
* ``bench.progress_raw``    same as ``bench.progress`` but each report is a
                            plain dict handed to the protocol's (private)
                            ``_send_data``, so attrs construction and cattrs
                            unstructuring are skipped. (``protocol.notify``
                            with a dict does not work for ``$/progress``:
                            pygls looks up the typed notification class and
                            cattrs fails to unstructure a dict as
                            ProgressParams, so nothing is sent.)

* ``bench.relay``           (added for agent-ls' bench) streams one Anthropic-style
                            SSE response from ``POST {url}/v1/messages`` over a raw
                            asyncio socket and forwards every text delta as an
                            ``agent/update`` notification: the floor for agent-ls'
                            delta → update latency (no SDK, no agent loop).

Copied from ``../shared/bench/minimal_server.py`` (the anchor measurements' baseline).
Run it with ``python minimal_server.py`` (stdio transport). With
``--sync-io`` it uses pygls' synchronous stdio loop (the one pygls uses under
WASM: stdin is read on the event-loop thread instead of one executor hop per
header line and per body), to measure what those thread hops cost.
"""

from __future__ import annotations

import asyncio
import json
import sys
from urllib.parse import urlsplit

from lsprotocol import types
from pygls.lsp.server import LanguageServer

server = LanguageServer("bench-minimal", "0.0.1")


@server.command("bench.echo")
def echo(ls: LanguageServer, *args):
    return list(args)


def _begin(ls: LanguageServer, token: str) -> None:
    ls.work_done_progress.begin(
        token, types.WorkDoneProgressBegin(title="bench", cancellable=False)
    )


@server.command("bench.progress")
def progress(ls: LanguageServer, token: str, n: int):
    _begin(ls, token)
    for i in range(n):
        ls.work_done_progress.report(token, types.WorkDoneProgressReport(message=f"tok{i}"))
    ls.work_done_progress.end(token, types.WorkDoneProgressEnd(message="done"))
    return n


@server.command("bench.progress_async")
async def progress_async(ls: LanguageServer, token: str, n: int):
    _begin(ls, token)
    for i in range(n):
        ls.work_done_progress.report(token, types.WorkDoneProgressReport(message=f"tok{i}"))
        await asyncio.sleep(0)
    ls.work_done_progress.end(token, types.WorkDoneProgressEnd(message="done"))
    return n


@server.command("bench.progress_raw")
def progress_raw(ls: LanguageServer, token: str, n: int):
    _begin(ls, token)
    send = ls.protocol._send_data
    for i in range(n):
        send(
            {
                "jsonrpc": "2.0",
                "method": "$/progress",
                "params": {"token": token, "value": {"kind": "report", "message": f"tok{i}"}},
            }
        )
    ls.work_done_progress.end(token, types.WorkDoneProgressEnd(message="done"))
    return n


@server.command("bench.relay")
async def relay(ls: LanguageServer, *args):
    url = urlsplit(args[0])
    reader, writer = await asyncio.open_connection(url.hostname, url.port)
    body = json.dumps(
        {
            "model": "relay",
            "max_tokens": 16,
            "stream": True,
            "messages": [{"role": "user", "content": "relay"}],
        }
    ).encode()
    writer.write(
        b"POST /v1/messages HTTP/1.1\r\nHost: %s\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\n\r\n" % (url.netloc.encode(), len(body)) + body
    )
    await writer.drain()
    forwarded = 0
    # One SSE record per HTTP chunk: the "data:" lines arrive whole between chunk-size lines.
    while line := await reader.readline():
        if line.startswith(b"data: "):
            data = json.loads(line[6:])
            delta = data.get("delta") or {}
            if data.get("type") == "content_block_delta" and delta.get("type") == "text_delta":
                ls.protocol.notify(
                    "agent/update",
                    {
                        "sessionId": "relay",
                        "update": {
                            "sessionUpdate": "agent_message_chunk",
                            "content": {"type": "text", "text": delta["text"]},
                        },
                    },
                )
                forwarded += 1
            elif data.get("type") == "message_stop":
                break
    writer.close()
    return forwarded


if __name__ == "__main__":
    if "--sync-io" in sys.argv:
        server._start_io_sync()
    else:
        server.start_io()
