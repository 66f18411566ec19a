"""The one error table, as each provider's user meets it: the real SDKs against the fake API.

Every row is spelled out per provider (not derived from ``models/errors.py``), so a changed
message, a lost row or a row that leaks from one provider to the other turns a case red.
"""

from __future__ import annotations

import os
import socket
from collections.abc import AsyncIterator, Iterator

import pytest

from agent_ls.models.anthropic import AnthropicModel
from agent_ls.models.openai import OpenAIModel
from agent_ls.models.remote import ModelWorker, RemoteModel
from agent_ls.ports.messages import Message, TextBlock
from agent_ls.ports.model import Model, ModelError, ModelRequest
from tests.fakeapi import FakeAPI, Fault, Turn

MODEL = "model-x"
REQUEST = ModelRequest(system="s", tools=[], messages=[Message("user", [TextBlock("hi")])])
PROVIDERS = ("anthropic", "openai")

# status: (retryable, Anthropic's message, OpenAI's message); the API's message is "the detail".
STATUS_TABLE: dict[int, tuple[bool, str, str]] = {
    400: (
        False,
        "the Anthropic API rejected the request (400): the detail",
        "the OpenAI API rejected the request (400): the detail",
    ),
    401: (
        False,
        "ANTHROPIC_API_KEY is not set or invalid (401): the detail",
        "OPENAI_API_KEY is not set or invalid (401): the detail",
    ),
    403: (
        False,
        "the Anthropic API key may not use this model or endpoint (403): the detail",
        "the OpenAI API key may not use this model or endpoint (403): the detail",
    ),
    404: (
        False,
        f"model not found: {MODEL} (404) — check the model name and ANTHROPIC_BASE_URL: "
        "the detail",
        f"model not found: {MODEL} (404) — check the model name and OPENAI_BASE_URL: the detail",
    ),
    408: (True, "Anthropic API error (408): the detail", "OpenAI API error (408): the detail"),
    409: (True, "Anthropic API error (409): the detail", "OpenAI API error (409): the detail"),
    413: (
        False,
        "the Anthropic API rejected the request (413): the detail",
        "the OpenAI API rejected the request (413): the detail",
    ),
    422: (
        False,
        "the Anthropic API rejected the request (422): the detail",
        "the OpenAI API rejected the request (422): the detail",
    ),
    429: (
        True,
        "Anthropic API rate limit reached (429): the detail",
        "OpenAI API rate limit reached (429): the detail",
    ),
    500: (True, "Anthropic API error (500): the detail", "OpenAI API error (500): the detail"),
    502: (True, "Anthropic API error (502): the detail", "OpenAI API error (502): the detail"),
    503: (True, "Anthropic API error (503): the detail", "OpenAI API error (503): the detail"),
    # 529 is Anthropic's "overloaded"; for OpenAI it is just another 5xx.
    529: (True, "Anthropic API overloaded (529): the detail", "OpenAI API error (529): the detail"),
}


@pytest.fixture(scope="module")
def server() -> Iterator[FakeAPI]:
    with FakeAPI() as fake:
        yield fake
    assert not fake.rejections, "the real API would have refused these requests"


@pytest.fixture
def api(server: FakeAPI) -> Iterator[FakeAPI]:
    """The module's fake API; each test consumes exactly what it enqueues."""
    assert server.pending == 0
    yield server
    assert server.pending == 0, "a scripted response was not requested"


def make_model(provider: str, base_url: str) -> AnthropicModel | OpenAIModel:
    if provider == "anthropic":
        return AnthropicModel(MODEL, base_url=base_url, api_key="k")
    return OpenAIModel(MODEL, base_url=base_url + "/v1", api_key="k")


@pytest.fixture(scope="module")
def worker(server: FakeAPI) -> Iterator[ModelWorker]:
    """The model worker process, its SDKs configured (by environment) for the fake API."""
    env = {
        **os.environ,
        "ANTHROPIC_BASE_URL": server.url,
        "ANTHROPIC_API_KEY": "k",
        "OPENAI_BASE_URL": server.url + "/v1",
        "OPENAI_API_KEY": "k",
    }
    w = ModelWorker.spawn(env=env)
    yield w
    w.stop()


# Each provider in this process, and streamed by the model worker process: the same table.
@pytest.fixture(params=[*PROVIDERS, "anthropic in the worker", "openai in the worker"])
async def model(
    request: pytest.FixtureRequest, api: FakeAPI, worker: ModelWorker
) -> AsyncIterator[Model]:
    provider, _, where = str(request.param).partition(" ")
    local = make_model(provider, api.url)
    if where:
        yield RemoteModel(local, lambda: worker)
        assert worker.exited is None, "a provider error must not take the worker down"
    else:
        yield local
    await local.aclose()


async def failure(model: Model) -> ModelError:
    with pytest.raises(ModelError) as info:
        async for _ in model.stream(REQUEST):
            pass
    return info.value


def pick(model: Model, anthropic: str, openai: str) -> str:
    return anthropic if model.name.startswith("anthropic:") else openai


@pytest.mark.parametrize("status", sorted(STATUS_TABLE))
async def test_each_status_reads_and_retries_as_the_table_says(
    api: FakeAPI, model: Model, status: int
) -> None:
    retryable, anthropic, openai = STATUS_TABLE[status]
    before = len(api.requests)
    api.enqueue(Fault.status(status, message="the detail"))
    error = await failure(model)
    assert str(error) == pick(model, anthropic, openai)
    assert error.retryable is retryable
    assert error.retry_after is None
    assert api.pending == 0
    assert len(api.requests) == before + 1, "the SDK must not retry on its own"


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after": "3"}, 3.0),
        ({"retry-after-ms": "1500"}, 1.5),
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0.0),  # a date in the past
        ({"retry-after": "soon"}, None),
    ],
    ids=["seconds", "ms", "ms-first", "http-date", "garbage"],
)
async def test_retry_after_is_read_from_the_response(
    api: FakeAPI, model: Model, headers: dict[str, str], seconds: float
) -> None:
    api.enqueue(Fault.status(429, headers=headers))
    error = await failure(model)
    assert error.retryable is True
    assert error.retry_after == seconds


@pytest.mark.parametrize(
    ("status", "should_retry", "retryable"),
    [(500, "false", False), (400, "true", True), (429, "maybe", True)],
)
async def test_x_should_retry_overrides_the_table(
    api: FakeAPI,
    model: Model,
    status: int,
    should_retry: str,
    retryable: bool,
) -> None:
    api.enqueue(Fault.status(status, headers={"x-should-retry": should_retry}))
    assert (await failure(model)).retryable is retryable


async def test_exhausted_quota_is_final_for_openai_only(
    api: FakeAPI, model: Model
) -> None:
    api.enqueue(Fault.status(429, error_type="insufficient_quota", message="q"))
    error = await failure(model)
    assert str(error) == pick(
        model, "Anthropic API rate limit reached (429): q", "OpenAI quota exhausted (429): q"
    )
    assert error.retryable is model.name.startswith("anthropic:")


@pytest.mark.parametrize(
    ("error_type", "retryable"),
    [
        ("overloaded_error", True),
        ("server_error", True),
        ("invalid_request_error", False),
        ("authentication_error", False),
        ("permission_error", False),
    ],
)
async def test_error_event_mid_stream(
    api: FakeAPI, model: Model, error_type: str, retryable: bool
) -> None:
    api.enqueue(Fault.error_event(error_type, message="the detail"))
    error = await failure(model)
    label = pick(model, "Anthropic", "OpenAI")
    assert str(error) == f"{label} API error mid-stream ({error_type}): the detail"
    assert error.retryable is retryable


@pytest.mark.parametrize(
    ("fault", "anthropic", "openai"),
    [
        (
            Fault.cut_stream(after_events=5),
            "the Anthropic stream was cut before the turn completed (RemoteProtocolError)",
            "the OpenAI stream was cut before the turn completed (RemoteProtocolError)",
        ),
        (
            Fault.cut_stream(after_events=5, clean=True),
            "the Anthropic stream ended before the turn completed",
            "the OpenAI stream ended before the turn completed",
        ),
    ],
    ids=["cut", "ended-early"],
)
async def test_broken_streams_are_retryable(
    api: FakeAPI, model: Model, fault: Fault, anthropic: str, openai: str
) -> None:
    api.enqueue(fault)
    error = await failure(model)
    assert str(error) == pick(model, anthropic, openai)
    assert error.retryable is True


async def test_malformed_tool_input_from_anthropic_is_retryable(api: FakeAPI) -> None:
    model = make_model("anthropic", api.url)
    api.enqueue(Turn(tool_uses=[("read_file", '{"file_path": oops}')]))
    error = await failure(model)
    assert str(error).startswith("malformed stream from the Anthropic API: ")
    assert error.retryable is True
    await model.aclose()


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_refused_connection_names_the_api(provider: str) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    model = make_model(provider, f"http://127.0.0.1:{port}")
    error = await failure(model)
    label = "Anthropic" if provider == "anthropic" else "OpenAI"
    # why, as the socket said it, not the SDK's bare "Connection error."
    assert str(error).startswith(f"cannot reach the {label} API (ConnectError: ")
    assert "Connection error." not in str(error)
    assert error.retryable is True
    await model.aclose()
