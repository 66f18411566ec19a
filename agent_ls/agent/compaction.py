"""Compaction: replace a long history with a summary the model writes, to free the window.

The summary call is the only model call besides the loop's turns; it is shown in progress. It
sends the loop's system prompt and tools (not callable): the history is then read from the
prompt cache at a tenth of the price or less instead of again in full, and the API takes the
history's tool calls (some refuse ``tool_use`` blocks in a request that defines no tools).
"""

from __future__ import annotations

from agent_ls import prompts
from agent_ls.agent.session import Session
from agent_ls.ports.messages import Message, TextBlock, Usage
from agent_ls.ports.model import Model, ModelError, ModelRequest, ToolSpec, TurnComplete


def needs_compaction(session: Session, model: Model, threshold: float) -> bool:
    """True when the last request filled ``threshold`` of the model's context window."""
    return session.last_context_tokens >= threshold * model.context_window


async def compact(
    session: Session, model: Model, system_prompt: str, tools: list[ToolSpec]
) -> Usage:
    """Summarise the history with ``prompts/compact.md`` and restart it from the summary.

    Returns the usage of the summary call. Raises :class:`ModelError` when it fails, leaving
    the history unchanged.
    """
    if not session.history:
        return Usage()
    history = list(session.history)
    session.close_dangling_tool_uses("Interrupted by compaction.")
    history = list(session.history)
    request = ModelRequest(
        system=system_prompt,
        tools=tools,
        messages=[*history, Message("user", [TextBlock(prompts.load("compact.md"))])],
        tool_choice="none",
    )
    complete: TurnComplete | None = None
    async for event in model.stream(request):
        if isinstance(event, TurnComplete):
            complete = event
    if complete is None or not complete.message.text().strip():
        raise ModelError("compaction produced no summary", retryable=True)
    summary = complete.message.text().strip()
    restarted = Message("user", [TextBlock(prompts.load("compacted.md").format(summary=summary))])
    session.replace_history([restarted], summary)
    session.last_context_tokens = 0
    return complete.usage
