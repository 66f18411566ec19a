"""A scripted local fake of the Anthropic Messages and OpenAI Chat Completions APIs.

Usage::

    with FakeAPI() as api:
        api.enqueue(Turn(text="hello"), Fault.status(529), Turn(tool_uses=[("read_file", {...})]))
        model = AnthropicModel("claude-x", base_url=api.url, api_key="test-key")
        ...
        api.requests[0].body["messages"]

OpenAI clients use ``api.url + "/v1"``. See :mod:`tests.fakeapi.server` for the CLI.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tests.fakeapi.wire import Fault, RecordedRequest, Turn, TurnUsage, load_script

if TYPE_CHECKING:
    from tests.fakeapi.server import FakeAPI

__all__ = ["FakeAPI", "Fault", "RecordedRequest", "Turn", "TurnUsage", "load_script"]


def __getattr__(name: str) -> Any:
    # Lazy, so that `python -m tests.fakeapi.server` does not import the module twice.
    if name == "FakeAPI":
        from tests.fakeapi.server import FakeAPI

        return FakeAPI
    raise AttributeError(name)
