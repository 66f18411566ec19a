"""AnthropicModel against the fake API, through the real ``anthropic`` SDK (no monkeypatching)."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from agent_ls.models.anthropic import AnthropicModel, messages_to_wire
from agent_ls.ports.messages import (
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
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
from tests.fakeapi.validate import strip_cache

MODEL = "claude-test-1"
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
async def model(api: FakeAPI) -> AsyncIterator[AnthropicModel]:
    model = AnthropicModel(MODEL, base_url=api.url, api_key="test-key")
    yield model
    await model.aclose()


def user(text: str) -> Message:
    return Message("user", [TextBlock(text)])


def request(*messages: Message) -> ModelRequest:
    return ModelRequest(system=SYSTEM, tools=list(TOOLS), messages=list(messages))


async def collect(model: AnthropicModel, req: ModelRequest) -> list[ModelEvent]:
    return [event async for event in model.stream(req)]


def final(events: list[ModelEvent]) -> TurnComplete:
    assert isinstance(events[-1], TurnComplete)
    assert sum(isinstance(e, TurnComplete) for e in events) == 1
    return events[-1]


def cache_marks(value: Any) -> int:
    if isinstance(value, dict):
        return ("cache_control" in value) + sum(cache_marks(v) for v in value.values())
    if isinstance(value, list):
        return sum(cache_marks(v) for v in value)
    return 0


# --- streaming ---------------------------------------------------------------------------


async def test_text_streams_as_deltas_then_one_turn_complete(
    api: FakeAPI, model: AnthropicModel
) -> None:
    api.enqueue(Turn(text="Hello there, this answer arrives in several chunks."))
    events = await collect(model, request(user("hi")))
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(deltas) >= 3
    done = final(events)
    assert "".join(deltas) == "Hello there, this answer arrives in several chunks."
    assert done.message.role == "assistant"
    assert done.message.content == [
        TextBlock("Hello there, this answer arrives in several chunks.")
    ]
    assert done.stop_reason == "end_turn"


async def test_tool_use_input_split_over_json_deltas(api: FakeAPI, model: AnthropicModel) -> None:
    tool_input = {"file_path": "src/app/main.py", "offset": 10, "limit": 40}
    api.enqueue(Turn(text="Let me look.", tool_uses=[("read_file", tool_input, "toolu_01")]))
    events = await collect(model, request(user("read main.py")))
    starts = [e for e in events if isinstance(e, ToolUseStart)]
    pieces = [e for e in events if isinstance(e, ToolInputDelta)]
    assert starts == [ToolUseStart(id="toolu_01", name="read_file")]
    assert len(pieces) >= 2 and {p.id for p in pieces} == {"toolu_01"}
    assert json.loads("".join(p.partial_json for p in pieces)) == tool_input
    assert events.index(starts[0]) < events.index(pieces[0])
    done = final(events)
    assert done.message.tool_uses() == [ToolUseBlock("toolu_01", "read_file", tool_input)]
    assert done.message.text() == "Let me look."
    assert done.stop_reason == "tool_use"


async def test_parallel_tool_uses_keep_their_ids(api: FakeAPI, model: AnthropicModel) -> None:
    api.enqueue(
        Turn(tool_uses=[("read_file", {"file_path": "a"}), ("list_files", {"pattern": "*"})])
    )
    done = final(await collect(model, request(user("go"))))
    uses = done.message.tool_uses()
    assert [u.name for u in uses] == ["read_file", "list_files"]
    assert [u.input for u in uses] == [{"file_path": "a"}, {"pattern": "*"}]
    assert len({u.id for u in uses}) == 2


async def test_thinking_and_signature_are_kept_and_echoed_exactly(
    api: FakeAPI, model: AnthropicModel
) -> None:
    api.enqueue(
        Turn(
            thinking="The user wants the file. I will read it first.",
            signature="EqQBCkYIARgCIkD+sig/with==padding",
            tool_uses=[("read_file", {"file_path": "a.py"}, "toolu_9")],
        ),
        Turn(text="Done."),
    )
    first = request(user("read a.py"))
    events = await collect(model, first)
    thinking = "".join(e.text for e in events if isinstance(e, ThinkingDelta))
    assert thinking == "The user wants the file. I will read it first."
    done = final(events)
    block = done.message.content[0]
    assert isinstance(block, ThinkingBlock) and block.binding  # bound to this conversation
    assert block == ThinkingBlock(
        thinking="The user wants the file. I will read it first.",
        signature="EqQBCkYIARgCIkD+sig/with==padding",
        binding=block.binding,
    )
    result = Message("user", [ToolResultBlock("toolu_9", "1\tprint('hi')")])
    await collect(model, request(*first.messages, done.message, result))

    sent = strip_cache(api.requests[1].body["messages"])
    assert sent[1] == {
        "role": "assistant",
        "content": [
            {
                "type": "thinking",
                "thinking": "The user wants the file. I will read it first.",
                "signature": "EqQBCkYIARgCIkD+sig/with==padding",
            },
            {
                "type": "tool_use",
                "id": "toolu_9",
                "name": "read_file",
                "input": {"file_path": "a.py"},
            },
        ],
    }
    assert sent[2] == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_9", "content": "1\tprint('hi')"}],
    }


async def test_redacted_thinking_round_trips(api: FakeAPI, model: AnthropicModel) -> None:
    api.enqueue(Turn(redacted_thinking="EmwKAhgBEgy3opaque==", text="Answer."))
    done = final(await collect(model, request(user("q"))))
    block = done.message.content[0]
    assert isinstance(block, ThinkingBlock) and block.binding
    assert block == ThinkingBlock(
        thinking="", redacted_data="EmwKAhgBEgy3opaque==", binding=block.binding
    )
    await collect(model, request(user("q"), done.message, user("more")))
    sent = api.requests[1].body["messages"][1]["content"]
    assert sent[0] == {"type": "redacted_thinking", "data": "EmwKAhgBEgy3opaque=="}


async def test_usage_maps_uncached_input_and_cache_tokens(
    api: FakeAPI, model: AnthropicModel
) -> None:
    usage = TurnUsage(
        input_tokens=12,
        output_tokens=34,
        cache_read_input_tokens=1500,
        cache_creation_input_tokens=200,
    )
    api.enqueue(Turn(text="ok", usage=usage))
    done = final(await collect(model, request(user("hi"))))
    # message_start says output_tokens=1; message_delta's cumulative 34 replaces it.
    assert done.usage == Usage(
        input_tokens=12, output_tokens=34, cache_read_tokens=1500, cache_write_tokens=200
    )


@pytest.mark.parametrize(
    ("wire", "ours"),
    [
        ("max_tokens", "max_tokens"),
        ("stop_sequence", "stop_sequence"),
        ("pause_turn", "pause_turn"),
        ("refusal", "refusal"),
        ("model_context_window_exceeded", "max_tokens"),
    ],
)
async def test_stop_reason_is_normalised(
    api: FakeAPI, model: AnthropicModel, wire: str, ours: str
) -> None:
    api.enqueue(Turn(text="partial", stop_reason=wire))
    assert final(await collect(model, request(user("hi")))).stop_reason == ours


# --- request shape and prompt caching ------------------------------------------------------


async def test_cache_breakpoints_on_last_tool_system_and_last_block(
    api: FakeAPI, model: AnthropicModel
) -> None:
    api.enqueue(Turn(text="ok"))
    await collect(model, request(user("first"), Message("assistant", [TextBlock("a")]), user("x")))
    body = api.requests[0].body
    assert body["model"] == MODEL and body["stream"] is True and body["max_tokens"] == 8192
    assert [t.get("cache_control") for t in body["tools"]] == [None, {"type": "ephemeral"}]
    assert body["tools"][0] == {
        "name": "read_file",
        "description": "Read a file.",
        "input_schema": TOOLS[0].input_schema,
    }
    assert body["system"] == [
        {"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}
    ]
    assert body["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert cache_marks(body) <= 4


async def test_second_request_extends_the_first(api: FakeAPI, model: AnthropicModel) -> None:
    api.enqueue(
        Turn(text="Reading.", tool_uses=[("read_file", {"file_path": "a.py"})]), Turn(text="Done.")
    )
    first = request(user("fix a.py"))
    done = final(await collect(model, first))
    tool_id = done.message.tool_uses()[0].id
    result = Message("user", [ToolResultBlock(tool_id, "contents", is_error=False)])
    await collect(model, request(*first.messages, done.message, result))
    one, two = (r.body for r in api.requests)
    assert strip_cache(two["tools"]) == strip_cache(one["tools"])
    assert strip_cache(two["system"]) == strip_cache(one["system"])
    n = len(one["messages"])
    assert strip_cache(two["messages"][:n]) == strip_cache(one["messages"])
    assert len(two["messages"]) == n + 2
    last = two["messages"][-1]["content"][-1]
    assert last["type"] == "tool_result" and last["cache_control"] == {"type": "ephemeral"}
    # the previous breakpoint stays where it was, so its cache entry is found again
    assert two["messages"][0]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert cache_marks(two) <= 4


def test_history_to_wire_merges_roles_and_orders_tool_results_first() -> None:
    history = [
        user("go"),
        Message(
            "assistant",
            [
                ThinkingBlock("unsigned thoughts from another provider"),
                TextBlock(""),
                ToolUseBlock("t1", "read_file", {"file_path": "a"}),
            ],
        ),
        Message(
            "user", [TextBlock("also note this"), ToolResultBlock("t1", "boom", is_error=True)]
        ),
        user("and this"),
    ]
    wire = strip_cache(messages_to_wire(history))
    assert wire == [
        {"role": "user", "content": [{"type": "text", "text": "go"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "t1", "name": "read_file", "input": {"file_path": "a"}}
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "boom", "is_error": True},
                {"type": "text", "text": "also note this"},
                {"type": "text", "text": "and this"},
            ],
        },
    ]


# --- errors -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fault", "retry_after"),
    [
        (Fault.status(429, retry_after=1), 1.0),
        (Fault.status(529), None),
        (Fault.status(500), None),
        (Fault.status(503, retry_after=7), 7.0),
        (Fault.status(408), None),
        (Fault.status(409), None),
        (Fault.error_event("overloaded_error"), None),
        (Fault.cut_stream(after_events=6), None),
        (Fault.cut_stream(after_events=6, clean=True), None),
    ],
    ids=["429", "529", "500", "503", "408", "409", "error-event", "cut", "cut-clean"],
)
async def test_transient_faults_are_retryable(
    api: FakeAPI, model: AnthropicModel, fault: Fault, retry_after: float | None
) -> None:
    api.enqueue(fault)
    with pytest.raises(ModelError) as info:
        await collect(model, request(user("hi")))
    assert info.value.retryable is True
    assert info.value.retry_after == retry_after
    assert len(api.requests) == 1, "the SDK must not retry on its own"


async def test_cut_stream_yields_no_turn_complete(api: FakeAPI, model: AnthropicModel) -> None:
    api.enqueue(Fault.cut_stream(after_events=6))
    seen: list[ModelEvent] = []
    with pytest.raises(ModelError, match="cut before the turn completed"):
        async for event in model.stream(request(user("hi"))):
            seen.append(event)
    assert any(isinstance(e, TextDelta) for e in seen)
    assert not any(isinstance(e, TurnComplete) for e in seen)


async def test_unparseable_tool_input_is_a_retryable_error(
    api: FakeAPI, model: AnthropicModel
) -> None:
    api.enqueue(Turn(tool_uses=[("read_file", '{"file_path": oops}')]))
    with pytest.raises(ModelError, match="malformed stream") as info:
        await collect(model, request(user("hi")))
    assert info.value.retryable is True


@pytest.mark.parametrize("status", [400, 403, 413])
async def test_client_errors_are_not_retryable(
    api: FakeAPI, model: AnthropicModel, status: int
) -> None:
    api.enqueue(Fault.status(status, message="prompt is too long"))
    with pytest.raises(ModelError, match=rf"\({status}\)") as info:
        await collect(model, request(user("hi")))
    assert info.value.retryable is False
    assert "prompt is too long" in str(info.value)


async def test_401_says_the_key_is_missing_or_invalid(api: FakeAPI, model: AnthropicModel) -> None:
    api.enqueue(Fault.status(401, message="invalid x-api-key"))
    with pytest.raises(ModelError) as info:
        await collect(model, request(user("hi")))
    assert str(info.value).startswith("ANTHROPIC_API_KEY is not set or invalid (401)")
    assert info.value.retryable is False


async def test_404_names_the_model(api: FakeAPI, model: AnthropicModel) -> None:
    api.enqueue(Fault.status(404, message=f"model: {MODEL}"))
    with pytest.raises(ModelError) as info:
        await collect(model, request(user("hi")))
    assert str(info.value).startswith(f"model not found: {MODEL} (404)")
    assert info.value.retryable is False


async def test_refused_connection_is_retryable() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    model = AnthropicModel(MODEL, base_url=f"http://127.0.0.1:{port}", api_key="k")
    with pytest.raises(ModelError, match="cannot reach the Anthropic API") as info:
        await collect(model, request(user("hi")))
    assert info.value.retryable is True


async def test_missing_api_key_fails_before_any_request(
    api: FakeAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    model = AnthropicModel(MODEL, base_url=api.url)
    await model.warm()  # warming never raises; the first stream does
    with pytest.raises(ModelError) as info:
        await collect(model, request(user("hi")))
    assert str(info.value) == "ANTHROPIC_API_KEY is not set"
    assert info.value.retryable is False
    assert api.requests == []


async def test_key_and_base_url_come_from_the_environment(
    api: FakeAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "env-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", api.url)
    api.enqueue(Turn(text="from env"))
    model = AnthropicModel(MODEL)
    assert model.name == f"anthropic:{MODEL}" and model.context_window == 200_000
    assert final(await collect(model, request(user("hi")))).message.text() == "from env"
    assert api.requests[0].headers["authorization"] == "Bearer env-key"
    await model.aclose()


async def test_empty_queue_answers_visibly(api: FakeAPI, model: AnthropicModel) -> None:
    done = final(await collect(model, request(user("hi"))))
    assert done.message.text() == "(no scripted response)"


# --- cancellation -----------------------------------------------------------------------


async def test_cancel_mid_stream_returns_promptly_and_closes_the_connection(
    api: FakeAPI, model: AnthropicModel
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


# --- the model lineup: what each family is sent ----------------------------------------


async def sent_for(api: FakeAPI, name: str, thinking_budget: int | None) -> dict[str, Any]:
    """The body the fake received for one turn of ``name``, the fake having accepted it."""
    model = AnthropicModel(name, base_url=api.url, api_key="test-key")
    api.enqueue(Turn(thinking="Let me think.", text="Done."))
    try:
        req = request(user("hi"))
        req.thinking_budget = thinking_budget
        events = await collect(model, req)
    finally:
        await model.aclose()
    assert final(events).message.text() == "Done."
    body = api.requests[-1].body
    assert isinstance(body, dict)
    return body


@pytest.mark.parametrize("budget", [None, 4096])
@pytest.mark.parametrize("name", ["claude-sonnet-5-5", "claude-opus-5-5", "claude-haiku-5-5"])
async def test_claude_5_models_think_adaptively_and_show_it(
    api: FakeAPI, name: str, budget: int | None
) -> None:
    """They refuse a thinking budget (400), and omit their thinking, which now carries the
    notes they write between tool calls, unless asked to show it."""
    body = await sent_for(api, name, budget)
    assert body["thinking"] == {"type": "adaptive", "display": "summarized"}
    assert body["max_tokens"] >= 32_000  # thinking counts toward max_tokens


@pytest.mark.parametrize("name", ["claude-opus-4-8", "claude-sonnet-4-6"])
async def test_claude_4_6_to_4_8_think_adaptively_only_when_asked(api: FakeAPI, name: str) -> None:
    assert "thinking" not in await sent_for(api, name, None)
    assert (await sent_for(api, name, 4096))["thinking"]["type"] == "adaptive"


@pytest.mark.parametrize("name", ["claude-haiku-4-5", MODEL])
async def test_earlier_and_unknown_models_take_a_budget(api: FakeAPI, name: str) -> None:
    assert "thinking" not in await sent_for(api, name, None)
    body = await sent_for(api, name, 4096)
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 4096}
    assert body["max_tokens"] == 8192


async def test_a_max_tokens_setting_is_sent_as_set(api: FakeAPI) -> None:
    model = AnthropicModel("claude-sonnet-5-5", base_url=api.url, api_key="test-key")
    api.enqueue(Turn(text="ok"))
    try:
        req = ModelRequest(system=SYSTEM, tools=[], messages=[user("hi")], max_tokens=2000)
        await collect(model, req)
    finally:
        await model.aclose()
    assert api.requests[-1].body["max_tokens"] == 2000


def test_context_window_follows_the_model() -> None:
    assert AnthropicModel("claude-sonnet-5-5").context_window == 1_000_000
    assert AnthropicModel("claude-haiku-4-5").context_window == 200_000
    assert AnthropicModel("claude-sonnet-5-5", context_window=50_000).context_window == 50_000


def test_the_default_model_and_aliases_are_models_the_sdk_does_not_retire() -> None:
    """The SDK's own deprecation table (dates of end of life) is the reference."""
    from anthropic._data import DEPRECATED_MODELS

    from agent_ls import DEFAULT_MODEL
    from agent_ls.agent.subagents import MODEL_ALIASES
    from tests.fakeapi.validate import retired_model

    provider, name = DEFAULT_MODEL.split(":", 1)
    assert provider == "anthropic"
    for model in (name, *MODEL_ALIASES.values()):
        assert model not in DEPRECATED_MODELS, model
        assert retired_model({"model": model}) is None, model


async def test_thinking_is_sent_back_only_into_the_conversation_it_was_made_in(
    api: FakeAPI,
) -> None:
    """Same system prompt and tools: the block goes back as made; either changed (the project
    memory, an MCP server's tools): it is left out, its turn's text and tool calls kept."""
    model = AnthropicModel("claude-sonnet-5-5", base_url=api.url, api_key="test-key")
    api.enqueue(Turn(thinking="Plan: greet.", text="Hi."), Turn(text="a"), Turn(text="b"))
    try:
        first = request(user("hello"))
        done = final(await collect(model, first))
        history = [*first.messages, done.message, user("again")]
        await collect(model, request(*history))
        changed = ModelRequest(
            system=SYSTEM + " Memory: tabs.", tools=list(TOOLS), messages=history
        )
        await collect(model, changed)
    finally:
        await model.aclose()
    assert api.rejections == []
    same, other = (strip_cache(r.body["messages"][1]["content"]) for r in api.requests[1:])
    assert [b["type"] for b in same] == ["thinking", "text"]
    assert other == [{"type": "text", "text": "Hi."}]


async def test_effort_is_sent_to_the_models_that_take_it(api: FakeAPI) -> None:
    sent = {}
    for name in ("claude-sonnet-5-5", "claude-opus-4-8", "claude-haiku-4-5"):
        model = AnthropicModel(name, base_url=api.url, api_key="test-key")
        api.enqueue(Turn(text="ok"))
        try:
            req = request(user("hi"))
            req.effort = "low"
            await collect(model, req)
        finally:
            await model.aclose()
        sent[name] = api.requests[-1].body.get("output_config")
    assert sent == {
        "claude-sonnet-5-5": {"effort": "low"},
        "claude-opus-4-8": {"effort": "low"},
        "claude-haiku-4-5": None,  # it would answer 400
    }


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # the SDK's own warning
async def test_a_retired_model_says_so_and_what_to_use(api: FakeAPI) -> None:
    """claude-sonnet-4-5 reached its end of life on 2026-11-30 (the SDK's table): the API
    answers 404, and the error says why instead of only "check the model name"."""
    model = AnthropicModel("claude-sonnet-4-5", base_url=api.url, api_key="test-key")
    api.enqueue(Turn(text="never"))
    try:
        with pytest.raises(ModelError) as caught:
            await collect(model, request(user("hi")))
    finally:
        await model.aclose()
    api.rejections.clear()  # the refusal is the point here
    message = str(caught.value)
    assert "(404)" in message and not caught.value.retryable
    assert "claude-sonnet-4-5 reached its end of life on November 30th, 2026" in message
    assert "anthropic:claude-sonnet-5-5" in message


def test_end_of_life_comes_from_the_sdks_own_table() -> None:
    from anthropic._data import DEPRECATED_MODELS

    from agent_ls.models.claude_models import end_of_life

    assert DEPRECATED_MODELS  # the reference is not empty
    for model, date in DEPRECATED_MODELS.items():
        assert end_of_life(model) == date
    assert end_of_life("claude-sonnet-5-5") is None


# --- the final message, gathered from the raw events -----------------------------------------


def _raw_events(records: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    from anthropic._models import construct_type
    from anthropic.types.raw_message_stream_event import RawMessageStreamEvent

    return [
        construct_type(type_=RawMessageStreamEvent, value=json.loads(json.dumps(data)))
        for kind, data in records
        if kind != "ping"
    ]


def _gathered_by_sdk(records: list[tuple[str, dict[str, Any]]]) -> Any:
    """The reference: the SDK's own ``MessageStream`` accumulation of the same events."""
    from anthropic.lib.streaming._messages import accumulate_event

    snapshot: Any = None
    json_bufs: dict[int, bytes] = {}
    for event in _raw_events(records):
        snapshot = accumulate_event(event=event, current_snapshot=snapshot, json_bufs=json_bufs)
    return snapshot


def _gathered_here(records: list[tuple[str, dict[str, Any]]]) -> Any:
    from agent_ls.models.anthropic import _Accumulator

    turn = _Accumulator()
    for event in _raw_events(records):
        turn.add(event)
    return turn.message


GATHERED_TURNS = {
    "text": Turn(text="Hello there, general Kenobi."),
    "thinking, text and tools": Turn(
        thinking="Let me look at the file first.",
        signature="sig-123",
        text="Reading both.",
        tool_uses=[
            ("read_file", {"file_path": "a.py", "ünïcode": "✓ \u2028"}),
            ("list_files", {"pattern": "**/*.py", "nested": {"a": [1, 2.5, None, True]}}),
        ],
        usage=TurnUsage(
            input_tokens=7,
            output_tokens=42,
            cache_read_input_tokens=900,
            cache_creation_input_tokens=30,
        ),
    ),
    "redacted thinking": Turn(redacted_thinking="opaque==", text="ok"),
    "a tool without input": Turn(tool_uses=[("list_files", {})]),
    "tool input cut by max_tokens": Turn(
        tool_uses=[("read_file", '{"file_path": "a very long na')], stop_reason="max_tokens"
    ),
}


@pytest.mark.parametrize("name", sorted(GATHERED_TURNS))
def test_the_final_message_is_gathered_as_the_sdks_message_stream_does(name: str) -> None:
    import itertools

    from agent_ls.models.anthropic import complete_turn
    from tests.fakeapi.wire import anthropic_records

    records = anthropic_records(GATHERED_TURNS[name], MODEL, "msg_1", itertools.count())
    ours, sdk = _gathered_here(records), _gathered_by_sdk(records)
    assert complete_turn(ours, "b") == complete_turn(sdk, "b")
    assert ours.usage.to_dict() == sdk.usage.to_dict()
    assert (ours.stop_reason, ours.stop_sequence) == (sdk.stop_reason, sdk.stop_sequence)


def test_gathering_a_complete_message_gives_the_non_streaming_one() -> None:
    import itertools

    from anthropic.types.message import Message as SdkMessage

    from agent_ls.models.anthropic import complete_turn
    from tests.fakeapi.wire import anthropic_message, anthropic_records

    turn = GATHERED_TURNS["thinking, text and tools"]
    records = anthropic_records(turn, MODEL, "msg_1", itertools.count())
    whole = SdkMessage.construct(**anthropic_message(turn, MODEL, "msg_1", itertools.count()))
    assert complete_turn(_gathered_here(records)) == complete_turn(whole)


def test_usage_a_message_delta_leaves_out_keeps_the_starts() -> None:
    records: list[tuple[str, dict[str, Any]]] = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "m",
                    "type": "message",
                    "role": "assistant",
                    "model": MODEL,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {
                        "input_tokens": 3,
                        "output_tokens": 1,
                        "cache_read_input_tokens": 50,
                        "cache_creation_input_tokens": 0,
                    },
                },
            },
        ),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 9, "cache_creation_input_tokens": 4},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    ours, sdk = _gathered_here(records), _gathered_by_sdk(records)
    assert ours.usage.to_dict() == sdk.usage.to_dict()
    assert (ours.usage.input_tokens, ours.usage.output_tokens) == (3, 9)
    assert (ours.usage.cache_read_input_tokens, ours.usage.cache_creation_input_tokens) == (50, 4)


def test_tool_input_that_is_not_json_fails_as_the_sdks_does() -> None:
    import itertools

    from tests.fakeapi.wire import anthropic_records

    records = anthropic_records(
        Turn(tool_uses=[("read_file", '{"file_path": ]]')]), MODEL, "m", itertools.count()
    )
    with pytest.raises(ValueError, match="Unable to parse tool parameter JSON"):
        _gathered_by_sdk(records)
    with pytest.raises(ValueError, match="Unable to parse tool parameter JSON"):
        _gathered_here(records)
