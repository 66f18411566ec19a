"""The ``script:`` provider: replays a JSON file of assistant turns.

It powers ``agent-ls demo`` and fast tests, and streams like a real model (text in chunks,
tool input as partial JSON) so the streaming paths run. Turn *n* answers the request whose
history holds *n* assistant messages (or the next turn after the last one served, if that is
later, as after a compaction), so a script describes a whole conversation, across resumes.

File format (``docs/script-model.md`` has the details)::

    {
      "chunk_size": 16,          // characters per streamed text chunk (optional)
      "delay_ms": 0,             // pause before each chunk (optional)
      "turns": [
        {"text": "Let me look.",
         "tool_calls": [{"name": "read_file", "input": {"file_path": "a.py"}}]},
        {"fail": {"message": "overloaded", "retryable": true, "times": 1}},
        {"thinking": "...", "text": "Done.", "stop_reason": "end_turn",
         "usage": {"input_tokens": 10, "output_tokens": 5}}
      ]
    }

A ``fail`` entry raises a provider error ``times`` times (default 1) for that request, then the
request is answered by the next entry.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from agent_ls.ports.messages import Block, Message, TextBlock, ThinkingBlock, ToolUseBlock, Usage
from agent_ls.ports.model import (
    ModelError,
    ModelEvent,
    ModelRequest,
    TextDelta,
    ThinkingDelta,
    ToolInputDelta,
    ToolUseStart,
    TurnComplete,
    UsageSoFar,
)


class ScriptError(ValueError):
    """The script file is missing or malformed."""


class ScriptModel:
    """Replays scripted assistant turns."""

    def __init__(self, script: dict[str, Any], source: str = "<script>"):
        turns = script.get("turns")
        if not isinstance(turns, list):
            raise ScriptError(f"{source}: a script needs a list under 'turns'")
        self._entries: list[dict[str, Any]] = turns
        self._source = source
        self.chunk_size = max(1, int(script.get("chunk_size", 16)))
        self.delay = float(script.get("delay_ms", 0)) / 1000
        self._failures: dict[int, int] = {}
        self._next_turn = 0

    @classmethod
    def from_file(cls, path: str) -> ScriptModel:
        try:
            data = json.loads(Path(path).expanduser().read_text(encoding="utf-8"))
        except OSError as exc:
            raise ScriptError(f"cannot read script {path}: {exc.strerror or exc}") from None
        except json.JSONDecodeError as exc:
            raise ScriptError(f"script {path} is not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise ScriptError(f"script {path} must hold a JSON object")
        return cls(data, source=path)

    @property
    def name(self) -> str:
        return f"script:{self._source}"

    @property
    def context_window(self) -> int:
        return 200_000

    async def warm(self) -> None:
        return None

    def _entry_for(self, turn: int) -> dict[str, Any] | None:
        """The entry answering the ``turn``-th request, skipping spent failures."""
        index = 0
        answered = 0
        while index < len(self._entries):
            entry = self._entries[index]
            if "fail" in entry:
                if answered == turn:
                    times = int(entry["fail"].get("times", 1))
                    if self._failures.get(index, 0) < times:
                        self._failures[index] = self._failures.get(index, 0) + 1
                        return entry
                index += 1
                continue
            if answered == turn:
                return entry
            answered += 1
            index += 1
        return None

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        turn = max(self._next_turn, sum(1 for m in request.messages if m.role == "assistant"))
        entry = self._entry_for(turn)
        if entry is None:
            entry = {"text": "(the script has no more turns)"}
        if "fail" in entry:
            fail = entry["fail"]
            raise ModelError(
                str(fail.get("message", "scripted failure")),
                retryable=bool(fail.get("retryable", True)),
                retry_after=fail.get("retry_after", 0),
            )
        usage_raw = entry.get("usage") or {}
        usage = Usage(
            input_tokens=int(usage_raw.get("input_tokens", 0)),
            output_tokens=int(usage_raw.get("output_tokens", 0)),
            cache_read_tokens=int(usage_raw.get("cache_read_input_tokens", 0)),
            cache_write_tokens=int(usage_raw.get("cache_creation_input_tokens", 0)),
        )
        # As Anthropic's message_start: the input is known before the first chunk.
        yield UsageSoFar(
            Usage(usage.input_tokens, 0, usage.cache_read_tokens, usage.cache_write_tokens)
        )
        blocks: list[Block] = []
        if entry.get("thinking"):
            thinking = str(entry["thinking"])
            for piece in self._chunks(thinking):
                await self._pause()
                yield ThinkingDelta(piece)
            blocks.append(ThinkingBlock(thinking, signature="script"))
        if entry.get("text"):
            text = str(entry["text"])
            for piece in self._chunks(text):
                await self._pause()
                yield TextDelta(piece)
            blocks.append(TextBlock(text))
        for j, call in enumerate(entry.get("tool_calls") or []):
            call_id = str(call.get("id") or f"toolu_script_{turn:03d}_{j}")
            name = str(call["name"])
            raw_input = call.get("input", {})
            yield ToolUseStart(call_id, name)
            for piece in self._chunks(json.dumps(raw_input)):
                await self._pause()
                yield ToolInputDelta(call_id, piece)
            blocks.append(ToolUseBlock(call_id, name, raw_input))
        has_tools = any(isinstance(b, ToolUseBlock) for b in blocks)
        stop = str(entry.get("stop_reason") or ("tool_use" if has_tools else "end_turn"))
        self._next_turn = turn + 1
        yield TurnComplete(Message("assistant", blocks), stop, usage)

    def _chunks(self, text: str) -> list[str]:
        return [text[i : i + self.chunk_size] for i in range(0, len(text), self.chunk_size)]

    async def _pause(self) -> None:
        if self.delay:
            await asyncio.sleep(self.delay)
        else:
            await asyncio.sleep(0)
