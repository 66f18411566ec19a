"""Text chunks through ``LspEditorPort.update``: coalesced to about one update per 20 ms, and a
model streaming at that pace is not held back (timed on a real event loop, generous margins)."""

from __future__ import annotations

import asyncio
import statistics
from types import SimpleNamespace
from typing import Any

from agent_ls.lsp.port import COALESCE_SECONDS, LspEditorPort
from agent_ls.ports.updates import text


class _Protocol:
    def __init__(self) -> None:
        self.sent: list[tuple[float, str]] = []  # (loop time, chunk text)

    def notify(self, method: str, params: Any) -> None:
        update = params["update"]
        if "content" in update:  # a text chunk
            self.sent.append((asyncio.get_running_loop().time(), update["content"]["text"]))


def _port() -> tuple[LspEditorPort, _Protocol]:
    protocol = _Protocol()
    host = SimpleNamespace(protocol=protocol, settings=SimpleNamespace(follow_agent=False))
    return LspEditorPort(host, "s", None), protocol  # type: ignore[arg-type]


def _chunk(words: str) -> Any:
    return {"sessionUpdate": "agent_message_chunk", "content": text(words)}


async def _stream(port: LspEditorPort, at: list[float]) -> dict[str, float]:
    """Send chunk i at ``at[i]`` seconds from now; return each chunk's send time."""
    loop = asyncio.get_running_loop()
    start, called = loop.time(), {}
    for i, offset in enumerate(at):
        await asyncio.sleep(max(0.0, start + offset - loop.time()))
        called[f"c{i} "] = loop.time()
        port.update("s", _chunk(f"c{i} "))
    await asyncio.sleep(COALESCE_SECONDS * 2)
    port.flush()
    return called


async def test_a_model_streaming_once_per_window_is_not_held_back() -> None:
    # The second chunk comes 10 ms after the first and waits for the window; the rest come
    # every 20 ms. Counting the window from the timer's send, every later chunk would wait
    # those 10 ms again, to the end of the stream.
    port, protocol = _port()
    window = COALESCE_SECONDS
    called = await _stream(port, [0.0, window / 2] + [window * (k + 1.5) for k in range(12)])
    delays = {}
    for sent_at, words in protocol.sent:
        for word in words.split():
            delays[word + " "] = sent_at - called[word + " "]
    assert set(delays) == set(called)
    later = [delays[f"c{i} "] * 1000 for i in range(2, 14)]
    assert statistics.median(later) < 4.0, later


async def test_a_fast_model_still_gets_about_one_update_per_window() -> None:
    port, protocol = _port()
    called = await _stream(port, [i * 0.001 for i in range(300)])  # ~0.3 s, a chunk a ms
    assert "".join(words for _, words in protocol.sent) == "".join(called)
    windows = 0.3 / COALESCE_SECONDS
    assert len(protocol.sent) <= windows * 1.5 + 2, len(protocol.sent)


async def test_updates_that_force_a_flush_do_not_make_the_next_chunk_wait_longer() -> None:
    # Text, then a tool call (which sends the waiting text first, for order), again and again
    # within one window: the chunk after them waits at most one window, not one per flush.
    port, protocol = _port()
    loop = asyncio.get_running_loop()
    for i in range(6):
        port.update("s", _chunk(f"t{i} "))
        port.update("s", {"sessionUpdate": "tool_call", "toolCallId": f"c{i}"})
    called = loop.time()
    port.update("s", _chunk("last "))
    await asyncio.sleep(COALESCE_SECONDS * 4)
    port.flush()
    sent_at = next(t for t, words in protocol.sent if "last" in words)
    assert sent_at - called <= COALESCE_SECONDS + 0.01, sent_at - called
