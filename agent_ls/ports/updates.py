"""The ``agent/update`` vocabulary: ACP's session-update kinds, typed once.

Every update the core sends is one of :data:`SessionUpdate`, in the exact shapes of the
contract (``docs/protocol.md``, "Stream"); the keys are the wire's (camelCase). The builders
below keep the key order the wire has always had.
"""

# No ``from __future__ import annotations`` here: on Python 3.11 it hides ``NotRequired`` from
# the TypedDicts' ``__required_keys__``, which the tests read to check every update's shape.
from typing import Any, Literal, NotRequired, TypedDict

ToolKind = Literal["read", "edit", "delete", "move", "search", "execute", "think", "fetch", "other"]
ToolCallStatus = Literal["pending", "in_progress", "completed", "failed"]


class TextContent(TypedDict):
    type: Literal["text"]
    text: str


class Location(TypedDict):
    """Where a tool call reads or writes: an absolute path, and a 1-based line."""

    path: str
    line: NotRequired[int]


class ContentItem(TypedDict):
    """Tool-call content that is plain content (a running command's output so far)."""

    type: Literal["content"]
    content: TextContent


class DiffItem(TypedDict):
    """A proposed edit; ``oldText`` is None for a new file, ``unifiedDiff`` has its hunks."""

    type: Literal["diff"]
    path: str
    oldText: str | None
    newText: str
    unifiedDiff: str


ToolCallContent = ContentItem | DiffItem


class AgentMessageChunk(TypedDict):
    sessionUpdate: Literal["agent_message_chunk"]
    content: TextContent


class AgentThoughtChunk(TypedDict):
    sessionUpdate: Literal["agent_thought_chunk"]
    content: TextContent


class ToolCall(TypedDict):
    sessionUpdate: Literal["tool_call"]
    toolCallId: str
    title: str
    kind: ToolKind
    status: ToolCallStatus
    locations: list[Location]
    rawInput: Any  # the model's input, as JSON
    _meta: NotRequired[dict[str, Any]]  # {"agentLs": {"parentToolCallId"}} for sub-agents


class ToolCallUpdate(TypedDict):
    """A change to a tool call; ``content`` replaces the call's content."""

    sessionUpdate: Literal["tool_call_update"]
    toolCallId: str
    status: NotRequired[ToolCallStatus]
    rawOutput: NotRequired[Any]  # the text the model reads, or a JSON object
    content: NotRequired[list[ToolCallContent]]
    _meta: NotRequired[dict[str, Any]]


class PlanEntry(TypedDict):
    content: str
    priority: Literal["high", "medium", "low"]
    status: Literal["pending", "in_progress", "completed"]


class Plan(TypedDict):
    """The whole plan, replacing the previous one."""

    sessionUpdate: Literal["plan"]
    entries: list[PlanEntry]


class Cost(TypedDict):
    amount: float
    currency: Literal["USD"]


class TokenCounts(TypedDict):
    """A run's ``usage`` as ``agent.ask`` answers it."""

    inputTokens: int
    outputTokens: int
    cachedReadTokens: int
    cachedWriteTokens: int


class UsageMetaAgentLs(TypedDict):
    usage: TokenCounts  # the run's usage so far, its sub-agents included
    parentToolCallId: NotRequired[str]  # a sub-agent's model call


class UsageMeta(TypedDict):
    agentLs: UsageMetaAgentLs


class UsageUpdate(TypedDict):
    """``used``: the context the last request filled; ``size``: the window; the session's cost."""

    sessionUpdate: Literal["usage_update"]
    used: int
    size: int
    cost: NotRequired[Cost]
    _meta: NotRequired[UsageMeta]


class CurrentModeUpdate(TypedDict):
    sessionUpdate: Literal["current_mode_update"]
    currentModeId: str


SessionUpdate = (
    AgentMessageChunk
    | AgentThoughtChunk
    | ToolCall
    | ToolCallUpdate
    | Plan
    | UsageUpdate
    | CurrentModeUpdate
)
ChunkUpdate = AgentMessageChunk | AgentThoughtChunk

# sessionUpdate -> its shape (tests check every update against it).
KINDS: dict[str, type[Any]] = {
    "agent_message_chunk": AgentMessageChunk,
    "agent_thought_chunk": AgentThoughtChunk,
    "tool_call": ToolCall,
    "tool_call_update": ToolCallUpdate,
    "plan": Plan,
    "usage_update": UsageUpdate,
    "current_mode_update": CurrentModeUpdate,
}


# -- builders -----------------------------------------------------------------------------


def text(value: str) -> TextContent:
    return {"type": "text", "text": value}


def message_chunk(value: str) -> AgentMessageChunk:
    return {"sessionUpdate": "agent_message_chunk", "content": text(value)}


def thought_chunk(value: str) -> AgentThoughtChunk:
    return {"sessionUpdate": "agent_thought_chunk", "content": text(value)}


def text_item(value: str) -> ContentItem:
    """Tool-call content holding ``value`` as text."""
    return {"type": "content", "content": text(value)}


def tool_call(
    tool_call_id: str,
    *,
    title: str,
    kind: ToolKind,
    status: ToolCallStatus,
    locations: list[Location],
    raw_input: Any,
) -> ToolCall:
    return {
        "sessionUpdate": "tool_call",
        "toolCallId": tool_call_id,
        "title": title,
        "kind": kind,
        "status": status,
        "locations": locations,
        "rawInput": raw_input,
    }


_UNSET: Any = object()


def tool_call_update(
    tool_call_id: str,
    *,
    status: ToolCallStatus | None = None,
    raw_output: Any = _UNSET,
    content: list[ToolCallContent] | None = None,
) -> ToolCallUpdate:
    """Only the fields given are sent (a ``rawOutput`` of None is sent as null)."""
    update: ToolCallUpdate = {"sessionUpdate": "tool_call_update", "toolCallId": tool_call_id}
    if status is not None:
        update["status"] = status
    if raw_output is not _UNSET:
        update["rawOutput"] = raw_output
    if content is not None:
        update["content"] = content
    return update


def usage_update(used: int, size: int, cost_usd: float) -> UsageUpdate:
    return {
        "sessionUpdate": "usage_update",
        "used": used,
        "size": size,
        "cost": {"amount": cost_usd, "currency": "USD"},
    }


def current_mode_update(mode: str) -> CurrentModeUpdate:
    return {"sessionUpdate": "current_mode_update", "currentModeId": mode}
