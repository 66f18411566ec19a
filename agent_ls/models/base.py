"""What the agent loop needs from a model provider.

A provider turns a :class:`ModelRequest` into a stream of :data:`ModelEvent`s that ends with
exactly one :class:`TurnComplete`. Providers import their SDK lazily (``warm`` does it ahead
of time) so that starting the language server stays fast.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from agent_ls.agent.messages import Message, Usage


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
    max_tokens: int = 8192
    thinking_budget: int | None = None  # extended thinking tokens, where the model supports it


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
class TurnComplete:
    """The whole assistant message of this turn, with why it stopped and what it cost.

    ``stop_reason`` is normalised to the Anthropic vocabulary: ``end_turn``, ``tool_use``,
    ``max_tokens``, ``stop_sequence``, ``pause_turn``, ``refusal``.
    """

    message: Message
    stop_reason: str
    usage: Usage = field(default_factory=Usage)


ModelEvent = TextDelta | ThinkingDelta | ToolUseStart | ToolInputDelta | TurnComplete


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


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """``retry-after-ms`` / ``retry-after`` (seconds or an HTTP date) as seconds."""
    with contextlib.suppress(ValueError):
        ms = headers.get("retry-after-ms")
        if ms:
            return max(0.0, float(ms) / 1000)
    value = headers.get("retry-after")
    if not value:
        return None
    with contextlib.suppress(ValueError):
        return max(0.0, float(value))
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class _Closable(Protocol):
    async def close(self) -> None: ...


ClientT = TypeVar("ClientT", bound=_Closable)


class SdkModel(ABC, Generic[ClientT]):
    """What the SDK-backed providers share: settings, the lazily built client, warm-up.

    The SDK is imported, warmed and its client built in a worker thread, never on the event
    loop (``import anthropic`` alone is over a second; SSL set-up is 30-50 ms).
    """

    provider: ClassVar[str]
    default_context_window: ClassVar[int]

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        context_window: int | None = None,
    ) -> None:
        self._model = model
        self._api_key = api_key
        self._base_url = base_url
        self._context_window = context_window or self.default_context_window
        self._client: ClientT | None = None

    @property
    def name(self) -> str:
        return f"{self.provider}:{self._model}"

    @property
    def context_window(self) -> int:
        return self._context_window

    async def warm(self) -> None:
        """Import and warm the SDK, then build the client if it is configured."""
        if self._client is not None:
            return
        await asyncio.to_thread(self._prepare_sdk)
        with contextlib.suppress(ModelError):  # stream() reports it, where the loop shows it
            await asyncio.to_thread(self._make_client)

    @abstractmethod
    def _prepare_sdk(self) -> None:
        """Import the SDK (and do any one-off work that would otherwise hit the first call)."""

    @abstractmethod
    def _make_client(self) -> ClientT:
        """The client, built on first use; raises :class:`ModelError` when unconfigured."""

    async def aclose(self) -> None:
        """Close the HTTP client and its pooled connections (the model can be used again)."""
        client, self._client = self._client, None
        if client is not None:
            await client.close()
