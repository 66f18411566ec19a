"""A saved conversation as the ``session/update``s that show it again (``session/load``)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from agent_ls.ports.messages import Message, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
from agent_ls.tools.registry import ToolRegistry


def replay(history: list[Message], tools: ToolRegistry) -> Iterator[dict[str, Any]]:
    """User text, the agent's text and thoughts, and each tool call with its outcome.

    The agent's turns within one ask read apart as they did live (the loop streams a blank
    line between them).
    """
    said = ""  # the agent's text since the user last spoke
    for message in history:
        for block in message.content:
            if isinstance(block, TextBlock) and block.text:
                if message.role == "user":
                    said = ""
                    yield _chunk("user_message_chunk", block.text)
                    continue
                if said and not said.endswith("\n\n"):
                    yield _chunk("agent_message_chunk", "\n\n")
                said += block.text
                yield _chunk("agent_message_chunk", block.text)
            elif isinstance(block, ThinkingBlock) and block.thinking:
                yield {
                    "sessionUpdate": "agent_thought_chunk",
                    "content": {"type": "text", "text": block.thinking},
                }
            elif isinstance(block, ToolUseBlock):
                yield _tool_call(block, tools)
            elif isinstance(block, ToolResultBlock):
                yield {
                    "sessionUpdate": "tool_call_update",
                    "toolCallId": block.tool_use_id,
                    "status": "failed" if block.is_error else "completed",
                    "rawOutput": block.content,
                }


def _chunk(kind: str, text: str) -> dict[str, Any]:
    return {"sessionUpdate": kind, "content": {"type": "text", "text": text}}


def _tool_call(block: ToolUseBlock, tools: ToolRegistry) -> dict[str, Any]:
    tool = tools.get(block.name)
    title, kind = block.name, "other"
    if tool is not None:
        kind = tool.kind
        with contextlib.suppress(Exception):  # an old or malformed input: the name will do
            title = tool.title(tool.parse(block.input))
    return {
        "sessionUpdate": "tool_call",
        "toolCallId": block.id,
        "title": title,
        "kind": kind,
        "status": "pending",
        "rawInput": block.input,
    }
