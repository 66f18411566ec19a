"""What the SDK-backed providers share: settings, the lazily built client, warm-up.

Providers import their SDK lazily (``warm`` does it ahead of time, in a worker thread) so
that starting the language server stays fast.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from agent_ls import codecache
from agent_ls.ports.model import ModelError

# What the SDKs' HTTP client loads on its first real connection (a mocked warm-up stream
# never connects): imported by the warm-up instead of on the event loop at the first request.
TRANSPORT_MODULES = (
    "httpcore2",
    "h11",
    "anyio._backends._asyncio",
    "anyio.streams.memory",
    "anyio.streams.stapled",
    "anyio.streams.tls",
)


log = logging.getLogger(__name__)


def import_transport() -> None:
    """Import :data:`TRANSPORT_MODULES` (blocking; for the warm-up thread)."""
    for name in TRANSPORT_MODULES:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


class Once:
    """``steps`` run in order at most once per process; a second caller waits for the first."""

    def __init__(self, *steps: Callable[[], object]) -> None:
        self._steps = steps
        self._lock = threading.Lock()
        self._done = False

    def __call__(self) -> None:
        with self._lock:
            if not self._done:
                for step in self._steps:
                    step()
                self._done = True


async def canned_stream(stream_once: Callable[[Any], Awaitable[None]], body: bytes) -> bool:
    """Await ``stream_once(http_client)``, the ``httpx2`` client answering every request with
    ``body`` as an event stream, in memory; False if it failed.

    The rehearsal of an SDK: what its async client imports and builds on the first stream is
    ready before the first real request.
    """
    import httpx2

    def respond(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    try:
        async with httpx2.AsyncClient(transport=httpx2.MockTransport(respond)) as http:
            await stream_once(http)
    except Exception as exc:  # warm-up only; the real request reports real problems
        log.debug("SDK warm-up stream failed: %s", exc)
        return False
    return True


def run_canned_stream(stream_once: Callable[[Any], Awaitable[None]], body: bytes) -> bool:
    """:func:`canned_stream` on an event loop of its own (blocking; for the warm-up thread)."""
    return asyncio.run(canned_stream(stream_once, body))


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
    # Modules deferred at the SDK's import that the warm-up runs once the SDK is ready, in its
    # thread: not on the first request's path, nor on the event loop where a later one needs
    # them (anthropic's error table: ~100 ms at the first error response otherwise).
    loaded_after_warm_up: ClassVar[tuple[str, ...]] = ()

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
        self._context_window = context_window or self.context_window_of(model)
        self._client: ClientT | None = None

    @classmethod
    def context_window_of(cls, model: str) -> int:
        """The context window of ``model`` when the settings give none."""
        return cls.default_context_window

    @property
    def name(self) -> str:
        return f"{self.provider}:{self._model}"

    @property
    def context_window(self) -> int:
        return self._context_window

    async def warm(self) -> None:
        """Import and warm the SDK, build the client if it is configured, then (in a thread)
        what no request waits for (:meth:`after_warm_up`)."""
        if self._client is not None:
            return
        await self.ready_to_stream()
        await asyncio.to_thread(self.after_warm_up)

    async def ready_to_stream(self) -> None:
        """What a stream needs first, in threads: the SDK imported and warmed, the client
        built if it is configured (``stream`` reports it if not, where the loop shows it)."""
        await asyncio.to_thread(self.prepare_sdk)
        with contextlib.suppress(ModelError):
            await asyncio.to_thread(self._make_client)

    async def warm_then_rehearse(
        self, ready: Callable[[], None], rehearse: Callable[[], bool], *, then_rest: bool = True
    ) -> None:
        """The model worker's warm-up: import the SDK and its transport, build the client and
        its streaming resource (in a thread), call ``ready``, then stream once in memory on
        this loop if ``rehearse()`` still says so (not once a real stream has started: it
        does that work), then :meth:`after_warm_up` in a thread unless ``then_rest`` is
        false (the caller runs it when no stream needs the CPU).
        """
        await asyncio.to_thread(self.import_sdk)
        with contextlib.suppress(ModelError):
            await asyncio.to_thread(lambda: self.stream_resource(self._make_client()))
        ready()
        await asyncio.sleep(0)  # those waiting for ready hear it before the rehearsal's imports
        if rehearse():
            await self.rehearse()
        if then_rest:
            await asyncio.to_thread(self.after_warm_up)

    def after_warm_up(self) -> None:
        """What no request waits for, once the SDK is ready (blocking, for a thread): the
        deferred modules of :attr:`loaded_after_warm_up` run, what the import read kept."""
        from agent_ls.models.sdk_import import load_deferred, save_analyses

        load_deferred(self.loaded_after_warm_up)  # first: they may read package bodies too
        save_analyses()  # the next start reads no package body
        codecache.save()  # nor compiles what it compiled

    def keep_what_imports_read(self) -> None:
        """Write what this process's imports read of the SDK's package bodies and compiled,
        if anything new (blocking, for a thread; cheap): the next start does neither."""
        from agent_ls.models.sdk_import import save_analyses

        save_analyses()
        codecache.save()

    @abstractmethod
    def prepare_sdk(self) -> None:
        """Import the SDK (and do any one-off work that would otherwise hit the first call).

        Blocking and thread-safe: it runs in a worker thread, at most once per process."""

    @abstractmethod
    def import_sdk(self) -> None:
        """Import the SDK and its transport, nothing more (blocking, thread-safe, once)."""

    @abstractmethod
    async def rehearse(self) -> None:
        """One canned stream in memory, on the running loop (see :func:`canned_stream`)."""

    def stream_resource(self, client: ClientT) -> object:
        """The client's resource that streams (its first use imports its module and builds
        its models: 100 ms or more, better spent in a thread than on the first request)."""
        return client

    @abstractmethod
    def _make_client(self) -> ClientT:
        """The client, built on first use; raises :class:`ModelError` when unconfigured."""

    async def aclose(self) -> None:
        """Close the HTTP client and its pooled connections (the model can be used again)."""
        client, self._client = self._client, None
        if client is not None:
            await client.close()
