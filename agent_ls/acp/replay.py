"""A saved conversation as the ``session/update``s that show it again (``session/load``)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from agent_ls.ports.messages import Message, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
from agent_ls.tools.registry import ToolRegistry


def replay(history: list[Message], tools: ToolRegistry) -> Iterator[dict[str, Any]]:
    """User text, the agent's text and thoughts, and each tool call with its outcome."""
    for message in history:
        for block in message.content:
            if isinstance(block, TextBlock) and block.text:
                kind = "user_message_chunk" if message.role == "user" else "agent_message_chunk"
                yield {"sessionUpdate": kind, "content": {"type": "text", "text": block.text}}
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
