"""What the SDK-backed providers share: settings, the lazily built client, warm-up.

Providers import their SDK lazily (``warm`` does it ahead of time, in a worker thread) so
that starting the language server stays fast.
"""

from __future__ import annotations

import asyncio
import contextlib
from abc import ABC, abstractmethod
from typing import ClassVar, Generic, Protocol, TypeVar

from agent_ls.ports.model import ModelError


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
        await asyncio.to_thread(self.prepare_sdk)
        with contextlib.suppress(ModelError):  # stream() reports it, where the loop shows it
            await asyncio.to_thread(self._make_client)

    @abstractmethod
    def prepare_sdk(self) -> None:
        """Import the SDK (and do any one-off work that would otherwise hit the first call).

        Blocking and thread-safe: it runs in a worker thread, at most once per process."""

    @abstractmethod
    def _make_client(self) -> ClientT:
        """The client, built on first use; raises :class:`ModelError` when unconfigured."""

    async def aclose(self) -> None:
        """Close the HTTP client and its pooled connections (the model can be used again)."""
        client, self._client = self._client, None
        if client is not None:
            await client.close()
