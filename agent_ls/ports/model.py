"""What the agent loop needs from a model provider, and what a provider sends back.

A provider turns a :class:`ModelRequest` into a stream of :data:`ModelEvent`s that ends with
exactly one :class:`TurnComplete`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from agent_ls.ports.messages import Message, Usage


@dataclass(slots=True)
class ToolSpec:
    """A tool as the model sees it."""

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(slots=True)
class ModelRequest:
    system: str
    tools: list[ToolSpec]
    messages: list[Message]
    max_tokens: int | None = None  # None: the model's default
    thinking_budget: int | None = None  # extended thinking tokens, where the model supports it
    effort: str | None = None  # "low" to "max": how much the model works, where it takes that
    # "none": the tools are listed (the prompt cache's prefix stays the loop's) but not callable
    tool_choice: Literal["auto", "none"] = "auto"


@dataclass(slots=True)
class TextDelta:
    text: str


@dataclass(slots=True)
class ThinkingDelta:
    text: str


@dataclass(slots=True)
class ToolUseStart:
    id: str
    name: str


@dataclass(slots=True)
class ToolInputDelta:
    id: str
    partial_json: str


@dataclass(slots=True)
class UsageSoFar:
    """What the provider has reported of this turn's usage before it ends (Anthropic's
    ``message_start``: the input). A turn cancelled before :class:`TurnComplete` counts it."""

    usage: Usage


@dataclass(slots=True)
class TurnComplete:
    """The whole assistant message of this turn, with why it stopped and what it cost.

    ``stop_reason`` is normalised to the Anthropic vocabulary: ``end_turn``, ``tool_use``,
    ``max_tokens``, ``stop_sequence``, ``pause_turn``, ``refusal``.
    """

    message: Message
    stop_reason: str
    usage: Usage = field(default_factory=Usage)


ModelEvent = (
    TextDelta | ThinkingDelta | ToolUseStart | ToolInputDelta | UsageSoFar | TurnComplete
)


class ModelError(Exception):
    """A provider failure. ``retryable`` says whether trying the same turn again may help."""

    def __init__(self, message: str, *, retryable: bool = False, retry_after: float | None = None):
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after


class Model(Protocol):
    """A model provider."""

    @property
    def name(self) -> str:
        """``provider:model`` as the user configured it."""
        ...

    @property
    def context_window(self) -> int: ...

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream one assistant turn. Raises :class:`ModelError` on failure."""
        ...

    async def warm(self) -> None:
        """Import the SDK and build the client ahead of the first request."""
        ...
