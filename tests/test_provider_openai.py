"""OpenAIModel against the fake API, through the real ``openai`` SDK (no monkeypatching)."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import AsyncIterator, Iterator

import pytest

from agent_ls.models.openai import OpenAIModel, parse_arguments
from agent_ls.ports.messages import Message, TextBlock, ThinkingBlock, ToolResultBlock, Usage
from agent_ls.ports.model import (
    ModelError,
    ModelEvent,
    ModelRequest,
    TextDelta,
    ThinkingDelta,
    ToolInputDelta,
    ToolSpec,
    ToolUseStart,
    TurnComplete,
)
from tests.fakeapi import FakeAPI, Fault, Turn, TurnUsage

MODEL = "gpt-test"
TOOLS = [
    ToolSpec(
        "read_file",
        "Read a file.",
        {"type": "object", "properties": {"file_path": {"type": "string"}}},
    ),
    ToolSpec(
        "list_files",
        "List files.",
        {"type": "object", "properties": {"pattern": {"type": "string"}}},
    ),
]
SYSTEM = "You are a careful coding agent."


@pytest.fixture
def api() -> Iterator[FakeAPI]:
    with FakeAPI() as fake:
        yield fake
    assert not fake.rejections, "the real API would have refused these requests"


@pytest.fixture
async def model(api: FakeAPI) -> AsyncIterator[OpenAIModel]:
    model = OpenAIModel(MODEL, base_url=api.url + "/v1", api_key="test-key")
    yield model
    await model.aclose()


def user(text: str) -> Message:
    return Message("user", [TextBlock(text)])


def request(*messages: Message) -> ModelRequest:
    return ModelRequest(system=SYSTEM, tools=list(TOOLS), messages=list(messages))


async def collect(model: OpenAIModel, req: ModelRequest) -> list[ModelEvent]:
    return [event async for event in model.stream(req)]


def final(events: list[ModelEvent]) -> TurnComplete:
    assert isinstance(events[-1], TurnComplete)
    assert sum(isinstance(e, TurnComplete) for e in events) == 1
    return events[-1]


# --- streaming ---------------------------------------------------------------------------


async def test_text_streams_as_deltas_then_one_turn_complete(
    api: FakeAPI, model: OpenAIModel
) -> None:
    api.enqueue(Turn(text="Hello there, this answer arrives in several chunks."))
    events = await collect(model, request(user("hi")))
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(deltas) >= 3
    done = final(events)
    assert "".join(deltas) == "Hello there, this answer arrives in several chunks."
    assert done.message.content == [
        TextBlock("Hello there, this answer arrives in several chunks.")
    ]
    assert done.stop_reason == "end_turn"


async def test_tool_call_fragments_are_merged_by_index(api: FakeAPI, model: OpenAIModel) -> None:
    first = {"file_path": "src/app/main.py", "offset": 3}
    second = {"pattern": "**/*.py"}
    api.enqueue(
        Turn(
            text="Looking.",
            tool_uses=[("read_file", first, "call_a"), ("list_files", second, "call_b")],
        )
    )
    events = await collect(model, request(user("go")))
    starts = [e for e in events if isinstance(e, ToolUseStart)]
    assert starts == [ToolUseStart("call_a", "read_file"), ToolUseStart("call_b", "list_files")]
    for call_id, expected in (("call_a", first), ("call_b", second)):
        pieces = [
            e.partial_json for e in events if isinstance(e, ToolInputDelta) and e.id == call_id
        ]
        assert len(pieces) >= 2
        assert json.loads("".join(pieces)) == expected
    done = final(events)
    assert [(u.id, u.name, u.input) for u in done.message.tool_uses()] == [
        ("call_a", "read_file", first),
        ("call_b", "list_files", second),
    ]
    assert done.message.text() == "Looking."
    assert done.stop_reason == "tool_use"


async def test_invalid_tool_arguments_keep_the_raw_string(api: FakeAPI, model: OpenAIModel) -> None:
    raw = '{"file_path": "a.py", "limit": '
    api.enqueue(Turn(tool_uses=[("read_file", raw, "call_x")]), Turn(text="ok"))
    done = final(await collect(model, request(user("go"))))
    assert done.message.tool_uses()[0].input == {"_raw_arguments": raw}
    # echoed as the model wrote it, so the model sees its own mistake
    result = Message("user", [ToolResultBlock("call_x", "invalid JSON", is_error=True)])
    await collect(model, request(user("go"), done.message, result))
    sent = api.requests[1].body["messages"]
    assert sent[2]["tool_calls"][0]["function"]["arguments"] == raw
    assert sent[3] == {"role": "tool", "tool_call_id": "call_x", "content": "Error: invalid JSON"}


def test_parse_arguments() -> None:
    assert parse_arguments("") == {}
    assert parse_arguments('{"a": 1}') == {"a": 1}
    assert parse_arguments("[1, 2]") == {"_raw_arguments": "[1, 2]"}
    assert parse_arguments("{oops") == {"_raw_arguments": "{oops"}


async def test_reasoning_content_becomes_thinking(api: FakeAPI, model: OpenAIModel) -> None:
    api.enqueue(Turn(thinking="Considering the options.", text="Answer."))
    events = await collect(model, request(user("q")))
    assert (
        "".join(e.text for e in events if isinstance(e, ThinkingDelta))
        == "Considering the options."
    )
    done = final(events)
    assert done.message.content[0] == ThinkingBlock("Considering the options.")
    await collect(model, request(user("q"), done.message, user("next")))
    # thinking is not sent back over chat completions
    assert api.requests[1].body["messages"][2] == {"role": "assistant", "content": "Answer."}


async def test_usage_subtracts_cached_prompt_tokens(api: FakeAPI, model: OpenAIModel) -> None:
    api.enqueue(
        Turn(
            text="ok",
            usage=TurnUsage(input_tokens=40, output_tokens=9, cache_read_input_tokens=960),
        )
    )
    done = final(await collect(model, request(user("hi"))))
    assert done.usage == Usage(input_tokens=40, output_tokens=9, cache_read_tokens=960)


@pytest.mark.parametrize(
    ("finish", "tools", "ours"),
    [
        ("stop", False, "end_turn"),
        ("tool_calls", True, "tool_use"),
        ("stop", True, "tool_use"),  # some local servers say "stop" after tool calls
        ("length", False, "max_tokens"),
        ("content_filter", False, "refusal"),
    ],
)
async def test_finish_reason_mapping(
    api: FakeAPI, model: OpenAIModel, finish: str, tools: bool, ours: str
) -> None:
    uses = [("read_file", {"file_path": "a"})] if tools else []
    api.enqueue(Turn(text="t", tool_uses=uses, stop_reason=finish))  # type: ignore[arg-type]
    assert final(await collect(model, request(user("hi")))).stop_reason == ours


# --- request shape -----------------------------------------------------------------------


async def test_request_body_shape_and_prefix_extension(api: FakeAPI, model: OpenAIModel) -> None:
    api.enqueue(Turn(text="Reading.", tool_uses=[("read_file", {"file_path": "a.py"}, "call_1")]))
    api.enqueue(Turn(text="Done."))
    first = request(user("fix a.py"))
    done = final(await collect(model, first))
    result = Message("user", [ToolResultBlock("call_1", "1\tx = 1")])
    await collect(model, request(*first.messages, done.message, result))
    one, two = (r.body for r in api.requests)
    assert api.requests[0].path == "/v1/chat/completions"
    assert one["model"] == MODEL and one["stream"] is True
    assert one["stream_options"] == {"include_usage": True}
    assert one["max_tokens"] == 8192  # a custom base URL: an OpenAI-compatible server
    assert one["tools"][0] == {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file.",
            "parameters": TOOLS[0].input_schema,
        },
    }
    assert one["messages"] == [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "fix a.py"},
    ]
    assert two["messages"][: len(one["messages"])] == one["messages"]
    assert two["messages"][2:] == [
        {
            "role": "assistant",
            "content": "Reading.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"file_path": "a.py"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "1\tx = 1"},
    ]
    assert api.requests[0].headers["authorization"] == "Bearer test-key"


# --- errors -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fault", "retry_after"),
    [
        (Fault.status(429, retry_after=1), 1.0),
        (Fault.status(529), None),
        (Fault.status(500), None),
        (Fault.status(503, retry_after=7), 7.0),
        (Fault.status(408), None),
        (Fault.error_event("server_error"), None),
        (Fault.cut_stream(after_events=4), None),
        (Fault.cut_stream(after_events=4, clean=True), None),
    ],
    ids=["429", "529", "500", "503", "408", "error-event", "cut", "cut-clean"],
)
async def test_transient_faults_are_retryable(
    api: FakeAPI, model: OpenAIModel, fault: Fault, retry_after: float | None
) -> None:
    api.enqueue(fault)
    with pytest.raises(ModelError) as info:
        await collect(model, request(user("hi")))
    assert info.value.retryable is True
    assert info.value.retry_after == retry_after
    assert len(api.requests) == 1, "the SDK must not retry on its own"


async def test_cut_stream_says_so(api: FakeAPI, model: OpenAIModel) -> None:
    api.enqueue(Fault.cut_stream(after_events=4))
    with pytest.raises(ModelError, match="cut before the turn completed"):
        await collect(model, request(user("hi")))


@pytest.mark.parametrize("status", [400, 403, 422])
async def test_client_errors_are_not_retryable(
    api: FakeAPI, model: OpenAIModel, status: int
) -> None:
    api.enqueue(Fault.status(status, message="context_length_exceeded"))
    with pytest.raises(ModelError, match=rf"\({status}\)") as info:
        await collect(model, request(user("hi")))
    assert info.value.retryable is False
    assert "context_length_exceeded" in str(info.value)


async def test_quota_exhausted_429_is_not_retryable(api: FakeAPI, model: OpenAIModel) -> None:
    api.enqueue(Fault.status(429, error_type="insufficient_quota", message="quota"))
    with pytest.raises(ModelError) as info:
        await collect(model, request(user("hi")))
    assert info.value.retryable is False
    assert "quota" in str(info.value)


async def test_401_says_the_key_is_missing_or_invalid(api: FakeAPI, model: OpenAIModel) -> None:
    api.enqueue(Fault.status(401, message="Incorrect API key provided"))
    with pytest.raises(ModelError) as info:
        await collect(model, request(user("hi")))
    assert str(info.value).startswith("OPENAI_API_KEY is not set or invalid (401)")
    assert "Incorrect API key provided" in str(info.value)
    assert info.value.retryable is False


async def test_404_names_the_model(api: FakeAPI, model: OpenAIModel) -> None:
    api.enqueue(Fault.status(404, message=f"The model `{MODEL}` does not exist"))
    with pytest.raises(ModelError) as info:
        await collect(model, request(user("hi")))
    assert str(info.value).startswith(f"model not found: {MODEL} (404)")
    assert info.value.retryable is False


async def test_refused_connection_is_retryable() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    model = OpenAIModel(MODEL, base_url=f"http://127.0.0.1:{port}/v1", api_key="k")
    with pytest.raises(ModelError, match="cannot reach the OpenAI API") as info:
        await collect(model, request(user("hi")))
    assert info.value.retryable is True


# --- configuration ----------------------------------------------------------------------


async def test_missing_api_key_fails_before_any_request(
    api: FakeAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    model = OpenAIModel(MODEL)
    await model.warm()  # warming never raises; the first stream does
    with pytest.raises(ModelError) as info:
        await collect(model, request(user("hi")))
    assert str(info.value) == "OPENAI_API_KEY is not set"
    assert info.value.retryable is False
    assert api.requests == []


async def test_local_server_from_env_needs_no_key(
    api: FakeAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", api.url + "/v1")
    api.enqueue(Turn(text="local"))
    model = OpenAIModel(MODEL)
    assert model.name == f"openai:{MODEL}" and model.context_window == 128_000
    assert final(await collect(model, request(user("hi")))).message.text() == "local"
    assert api.requests[0].headers["authorization"] == "Bearer not-needed"
    await model.aclose()


async def test_key_from_env_and_official_token_parameter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "env-key")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    params = OpenAIModel(MODEL).request_params(request(user("hi")))
    assert params["max_completion_tokens"] == 8192 and "max_tokens" not in params


# --- cancellation -----------------------------------------------------------------------


async def test_cancel_mid_stream_returns_promptly_and_closes_the_connection(
    api: FakeAPI, model: OpenAIModel
) -> None:
    words = " ".join(f"word{i}" for i in range(200))
    api.enqueue(Turn(text=words, chunk_delay=0.05))
    seen: list[ModelEvent] = []
    three = asyncio.Event()

    async def consume() -> None:
        async for event in model.stream(request(user("hi"))):
            seen.append(event)
            if sum(isinstance(e, TextDelta) for e in seen) >= 3:
                three.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(three.wait(), timeout=10)
    started = time.perf_counter()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.perf_counter() - started < 0.2
    assert not any(isinstance(e, TurnComplete) for e in seen)
    assert await asyncio.to_thread(api.wait_disconnect, 1, 3.0), "server kept streaming"
