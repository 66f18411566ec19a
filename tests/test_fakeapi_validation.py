"""The fake API refuses what the real APIs refuse, with their 400 and error body, seen through
the official SDKs (so a product request the real service would reject cannot pass a test)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

from agent_ls.models.anthropic import AnthropicModel
from agent_ls.ports.messages import Message, TextBlock
from agent_ls.ports.model import ModelError, ModelRequest, TurnComplete
from tests.fakeapi import FakeAPI, Turn


@pytest.fixture
def api() -> Iterator[FakeAPI]:
    with FakeAPI() as fake:
        yield fake


def text(value: str, cached: bool = False) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": value}
    if cached:
        block["cache_control"] = {"type": "ephemeral"}
    return block


USE = {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"file_path": "a"}}
RESULT = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "contents"}
TOOL = {"name": "read_file", "description": "Read.", "input_schema": {"type": "object"}}


def valid() -> dict[str, Any]:
    return {
        "model": "claude-x",
        "max_tokens": 100,
        "system": [text("sys", cached=True)],
        "tools": [{**TOOL, "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": [text("hi")]},
            {"role": "assistant", "content": [text("looking"), USE]},
            {"role": "user", "content": [RESULT, text("go on", cached=True)]},
        ],
    }


def broken(change: str) -> dict[str, Any]:
    body = valid()
    messages = body["messages"]
    if change == "five breakpoints":
        messages[0]["content"][0]["cache_control"] = {"type": "ephemeral"}
        messages[1]["content"][0]["cache_control"] = {"type": "ephemeral"}
    elif change == "unanswered tool_use":
        messages[2]["content"] = [text("go on")]
    elif change == "tool_result answers nothing":
        messages[2]["content"].insert(1, {**RESULT, "tool_use_id": "toolu_other"})
    elif change == "tool_result after text":
        messages[2]["content"].reverse()
    elif change == "empty text block":
        messages[0]["content"] = [text("")]
    elif change == "tool_use in a user message":
        messages[0]["content"].append(USE)
    elif change == "thinking budget above max_tokens":
        body["thinking"] = {"type": "enabled", "budget_tokens": 1024}
    elif change == "unknown field":
        body["extra_body"] = {"temperatur": 0.5}
    elif change == "duplicate tool names":
        body["tools"].append(TOOL)
    return body


CHANGES = {
    "five breakpoints": "A maximum of 4 blocks with cache_control may be provided. Found 5.",
    "unanswered tool_use": "`tool_use` ids were found without `tool_result` blocks",
    "tool_result answers nothing": "unexpected `tool_use_id` found in `tool_result` blocks",
    "tool_result after text": "`tool_result` blocks must come first",
    "empty text block": "text content blocks must be non-empty",
    "tool_use in a user message": "a user message cannot hold a 'tool_use' block",
    "thinking budget above max_tokens": "`max_tokens` must be greater than",
    "unknown field": "temperatur: Extra inputs are not permitted",
    "duplicate tool names": "Tool names must be unique",
}


def test_a_valid_request_is_answered(api: FakeAPI) -> None:
    api.enqueue(Turn(text="fine"))
    client = anthropic.Anthropic(base_url=api.url, api_key="k", max_retries=0)
    reply = client.messages.create(**valid())
    assert reply.content[0].text == "fine"  # type: ignore[union-attr]
    assert api.rejections == []


@pytest.mark.parametrize("change", list(CHANGES))
def test_anthropic_refuses_what_the_real_api_refuses(api: FakeAPI, change: str) -> None:
    api.enqueue(Turn(text="only for a valid request"))
    client = anthropic.Anthropic(base_url=api.url, api_key="k", max_retries=0)
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.messages.create(**broken(change))
    assert caught.value.status_code == 400
    body = caught.value.body
    assert isinstance(body, dict) and body["type"] == "error"
    assert body["error"]["type"] == "invalid_request_error"
    assert CHANGES[change] in body["error"]["message"]
    assert caught.value.request_id  # the real API sends request-id on errors too
    assert [message for _, message in api.rejections] == [body["error"]["message"]]
    assert api.pending == 1  # a refused request does not consume the scripted answer


def chat(*messages: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"model": "gpt-x", "messages": list(messages), **extra}


CALL = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
OPENAI_CHANGES = {
    "unanswered tool call": (
        chat({"role": "user", "content": "hi"}, {"role": "assistant", "content": None,
             "tool_calls": [CALL]}, {"role": "user", "content": "well?"}),
        "must be followed by tool messages responding to each 'tool_call_id'",
    ),
    "tool message without a call": (
        chat({"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "call_1",
             "content": "x"}),
        "messages with role 'tool' must be a response to a preceeding message with 'tool_calls'",
    ),
    "stream_options without stream": (
        chat({"role": "user", "content": "hi"}, stream_options={"include_usage": True}),
        "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
    ),
}  # fmt: skip


@pytest.mark.parametrize("change", list(OPENAI_CHANGES))
def test_openai_refuses_what_the_real_api_refuses(api: FakeAPI, change: str) -> None:
    body, message = OPENAI_CHANGES[change]
    client = openai.OpenAI(base_url=api.url + "/v1", api_key="k", max_retries=0)
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(**body)
    assert caught.value.status_code == 400
    assert message in caught.value.message
    assert caught.value.type == "invalid_request_error"
    assert len(api.rejections) == 1
    answered = chat(
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": "result"},
    )
    assert client.chat.completions.create(**answered).choices[0].message.content


async def test_thinking_with_a_small_max_tokens_is_a_request_the_api_accepts(
    api: FakeAPI,
) -> None:
    """maxTokens may be 256 and thinkingBudget is at least 1024: the budget the provider sends
    must still be below max_tokens (the real API refuses it otherwise)."""
    api.enqueue(Turn(text="short"))
    model = AnthropicModel("claude-test-1", base_url=api.url, api_key="k")
    request = ModelRequest(
        system="s",
        tools=[],
        messages=[Message("user", [TextBlock("hi")])],
        max_tokens=512,
        thinking_budget=2000,
    )
    try:
        events = [e async for e in model.stream(request)]
    except ModelError as exc:
        pytest.fail(f"the request was refused: {exc}")
    finally:
        await model.aclose()
    assert api.rejections == []
    assert isinstance(events[-1], TurnComplete)
    assert "thinking" not in api.requests[0].body  # no room for the 1024-token minimum budget


def test_a_reused_connection_gets_its_stream_without_a_delayed_ack_stall() -> None:
    # The fake's small SSE writes go out at once (TCP_NODELAY), as a real API's do; with
    # Nagle on, every response after a connection's first waited ~40 ms for the client's
    # delayed ACK, which the peer benchmark counted as agent time.
    import http.client
    import json
    import statistics
    import time

    from tests.fakeapi import FakeAPI, Turn

    with FakeAPI(validate=False) as api:
        host, port = api.url.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port))
        body = json.dumps(
            {
                "model": "m",
                "max_tokens": 5,
                "stream": True,
                "messages": [{"role": "user", "content": "hi"}],
            }
        )
        took = []
        for _ in range(6):
            api.enqueue(Turn(text=["a", "b", "c"]))
            started = time.monotonic()
            conn.request("POST", "/v1/messages", body, {"content-type": "application/json"})
            response = conn.getresponse()
            assert b"message_stop" in response.read()
            took.append(time.monotonic() - started)
        conn.close()
    assert statistics.median(took[1:]) < 0.025, took


@pytest.mark.parametrize(
    ("model", "thinking"),
    [
        ("claude-sonnet-5-5", {"type": "enabled", "budget_tokens": 2048}),
        ("claude-sonnet-5-5", {"type": "disabled"}),
        ("claude-opus-5-5", {"type": "disabled"}),
        ("claude-haiku-5-5", {"type": "enabled", "budget_tokens": 2048}),
        ("claude-fable-5-2", {"type": "enabled", "budget_tokens": 2048}),
        ("claude-haiku-4-5", {"type": "adaptive"}),
        ("claude-opus-5-5", {"type": "adaptive", "display": "everything"}),
    ],
)
def test_anthropic_refuses_thinking_a_model_does_not_take(
    api: FakeAPI, model: str, thinking: dict[str, Any]
) -> None:
    client = anthropic.Anthropic(base_url=api.url, api_key="k", max_retries=0)
    body = {**valid(), "model": model, "max_tokens": 4096, "thinking": thinking}
    with pytest.raises(anthropic.BadRequestError):
        client.messages.create(**body)
    assert len(api.rejections) == 1


def test_claude_5_refuses_an_assistant_prefill(api: FakeAPI) -> None:
    client = anthropic.Anthropic(base_url=api.url, api_key="k", max_retries=0)
    body = valid()
    body["messages"].append({"role": "assistant", "content": [text("The answer is")]})
    with pytest.raises(anthropic.BadRequestError):
        client.messages.create(**{**body, "model": "claude-sonnet-5-5"})
    api.enqueue(Turn(text=" 42."))
    assert client.messages.create(**{**body, "model": "claude-haiku-4-5"}).content


@pytest.mark.parametrize(
    ("model", "thinking"),
    [
        ("claude-sonnet-5-5", {"type": "adaptive", "display": "summarized"}),
        ("claude-sonnet-5-5", {"type": "between_tools"}),
        ("claude-sonnet-5", {"type": "disabled"}),
        ("claude-opus-4-6", {"type": "adaptive"}),
        ("claude-haiku-4-5", {"type": "enabled", "budget_tokens": 2048}),
    ],
)
def test_anthropic_takes_the_thinking_each_model_takes(
    api: FakeAPI, model: str, thinking: dict[str, Any]
) -> None:
    api.enqueue(Turn(text="fine"))
    client = anthropic.Anthropic(base_url=api.url, api_key="k", max_retries=0)
    body = {**valid(), "model": model, "max_tokens": 4096, "thinking": thinking}
    assert client.messages.create(**body).content[0].text == "fine"  # type: ignore[union-attr]
    assert api.rejections == []


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # the SDK warns of sonnet 4.5
@pytest.mark.parametrize(
    "model", ["claude-sonnet-4-5", "claude-opus-4-1", "claude-3-5-haiku-20241022"]
)
def test_anthropic_answers_a_retired_model_404(api: FakeAPI, model: str) -> None:
    api.enqueue(Turn(text="only for a live model"))
    client = anthropic.Anthropic(base_url=api.url, api_key="k", max_retries=0)
    with pytest.raises(anthropic.NotFoundError) as caught:
        client.messages.create(**{**valid(), "model": model})
    body = caught.value.body
    assert isinstance(body, dict) and body["error"]["type"] == "not_found_error"
    assert model in body["error"]["message"]
    assert api.pending == 1


def test_effort_only_where_a_model_takes_it(api: FakeAPI) -> None:
    client = anthropic.Anthropic(base_url=api.url, api_key="k", max_retries=0)
    for model, effort in (("claude-haiku-4-5", "low"), ("claude-sonnet-5-5", "extreme")):
        with pytest.raises(anthropic.BadRequestError):
            client.messages.create(
                **{**valid(), "model": model, "output_config": {"effort": effort}}
            )
    api.enqueue(Turn(text="fine"))
    body = {**valid(), "model": "claude-sonnet-5-5", "output_config": {"effort": "max"}}
    assert client.messages.create(**body).content


def test_tool_choice_none_is_taken_and_forcing_a_thinking_model_is_not(api: FakeAPI) -> None:
    client = anthropic.Anthropic(base_url=api.url, api_key="k", max_retries=0)
    forced = {**valid(), "model": "claude-sonnet-5-5", "tool_choice": {"type": "any"}}
    with pytest.raises(anthropic.BadRequestError):
        client.messages.create(**forced)
    api.enqueue(Turn(text="summary"))
    quiet = {**valid(), "model": "claude-sonnet-5-5", "tool_choice": {"type": "none"}}
    assert client.messages.create(**quiet).content
