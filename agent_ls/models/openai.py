"""OpenAI Chat Completions (and OpenAI-compatible local servers) as a :class:`Model`.

Streams with ``stream=True, stream_options={"include_usage": True}``, merges tool-call
fragments by index, maps ``finish_reason`` onto the Anthropic vocabulary the loop speaks, and
turns failures into :class:`ModelError`. ``OPENAI_API_KEY``/``OPENAI_BASE_URL`` are honoured;
a local server (``OPENAI_BASE_URL`` set) may go without a key. The SDK retries nothing
(``max_retries=0``) and is imported lazily, from the modules that define what we use, its
package bodies deferred (:mod:`agent_ls.models.sdk_import`).
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agent_ls.models.errors import OPENAI
from agent_ls.models.sdk import (
    Once,
    SdkModel,
    canned_stream,
    import_transport,
    run_canned_stream,
)
from agent_ls.ports.messages import (
    Block,
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
    ToolUseStart,
    TurnComplete,
)

if TYPE_CHECKING:
    import openai

# The SDK release whose package bodies tests/test_sdk_import.py checked (see anthropic.py).
SDK_VERSION = "3.57.0"
DEFAULT_CONTEXT_WINDOW = 128_000
DEFAULT_MAX_TOKENS = 8192
PLACEHOLDER_KEY = "not-needed"  # sent to OpenAI-compatible servers that want no key
RAW_ARGUMENTS = "_raw_arguments"
_FINISH_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}


def defer_sdk_packages() -> None:
    """Before the first import of ``openai``: its package bodies run when first used (not
    with ``OPENAI_LOG`` set: the top package's body sets up the SDK's logging)."""
    if not os.environ.get("OPENAI_LOG"):
        from agent_ls.models.sdk_import import analysis_cache, defer_package_bodies

        defer_package_bodies(
            "openai",
            version=SDK_VERSION,
            exclude=("openai._vendor",),
            cache=analysis_cache("openai", SDK_VERSION),
        )


class OpenAIModel(SdkModel["openai.AsyncOpenAI"]):
    """``openai:<model>``; ``api_key``/``base_url`` default to the ``OPENAI_*`` variables."""

    provider = "openai"
    default_context_window = DEFAULT_CONTEXT_WINDOW

    def _endpoint(self) -> tuple[str, str | None]:
        """``(api_key, base_url)``; raises if no key and no local server is configured."""
        base_url = self._base_url or os.environ.get("OPENAI_BASE_URL") or None
        key = self._api_key or os.environ.get("OPENAI_API_KEY")
        if not key:
            if base_url is None:
                raise ModelError("OPENAI_API_KEY is not set", retryable=False)
            key = PLACEHOLDER_KEY
        return key, base_url

    def prepare_sdk(self) -> None:
        _prewarm_sdk()

    def import_sdk(self) -> None:
        _import_once()

    async def rehearse(self) -> None:
        await canned_stream(_stream_once, _WARM_STREAM)

    def _make_client(self) -> openai.AsyncOpenAI:
        if self._client is None:
            key, base_url = self._endpoint()
            defer_sdk_packages()
            from openai._client import AsyncOpenAI

            self._client = AsyncOpenAI(api_key=key, base_url=base_url, max_retries=0)
        return self._client

    def stream_resource(self, client: openai.AsyncOpenAI) -> object:
        return client.chat.completions

    def request_params(self, request: ModelRequest) -> dict[str, Any]:
        """The keyword arguments of ``chat.completions.create`` for ``request``."""
        _, base_url = self._endpoint()
        params: dict[str, Any] = {
            "model": self._model,
            "messages": messages_to_wire(request.system, request.messages),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        # OpenAI's newer models reject max_tokens; compatible servers know only max_tokens.
        max_tokens = request.max_tokens or DEFAULT_MAX_TOKENS
        params["max_tokens" if base_url else "max_completion_tokens"] = max_tokens
        if request.tools:
            params["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.input_schema,
                    },
                }
                for t in request.tools
            ]
            if request.tool_choice == "none":
                params["tool_choice"] = "none"
        return params

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self._endpoint()  # fail before any request when no key is configured
        if self._client is None:
            await self.ready_to_stream()
        client = self._make_client()
        import httpx2
        from openai._exceptions import APIConnectionError, APIError, APIStatusError, OpenAIError

        params = self.request_params(request)
        acc = _Accumulator()
        create: Any = client.chat.completions.create
        try:
            chunks = await create(**params)
            async with chunks:
                async for chunk in chunks:
                    for event in acc.feed(chunk):
                        yield event
        except APIStatusError as exc:
            raise status_error(exc, self._model) from exc
        except APIConnectionError as exc:
            cause = exc.__cause__ or exc
            raise (OPENAI.cut(cause) if acc.received else OPENAI.unreachable(cause, exc)) from exc
        except APIError as exc:  # an error object inside the stream
            kind = exc.type if isinstance(exc.type, str) else None
            raise OPENAI.status_error(
                None, detail=exc.message, model=self._model, error_types=(kind,)
            ) from exc
        except httpx2.TransportError as exc:
            raise OPENAI.cut(exc) from exc
        except OpenAIError as exc:
            raise OPENAI.client_error(exc) from exc
        if acc.finish_reason is None:
            raise OPENAI.ended_early()
        yield acc.complete()


@dataclass(slots=True)
class _Call:
    id: str
    name: str = ""
    arguments: list[str] = field(default_factory=list)
    started: bool = False


@dataclass(slots=True)
class _Accumulator:
    """Merges streamed chunks into events and, at the end, one :class:`TurnComplete`."""

    text: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    calls: dict[int, _Call] = field(default_factory=dict)
    finish_reason: str | None = None
    received: bool = False
    refused: bool = False
    usage: Usage = field(default_factory=Usage)

    def feed(self, chunk: Any) -> list[ModelEvent]:
        self.received = True
        if getattr(chunk, "usage", None) is not None:
            self.usage = usage_from_wire(chunk.usage)
        events: list[ModelEvent] = []
        for choice in chunk.choices or []:
            if choice.index != 0:
                continue
            delta = choice.delta
            if delta is not None:
                events += self._delta(delta)
            if choice.finish_reason:
                self.finish_reason = choice.finish_reason
        return events

    def _delta(self, delta: Any) -> list[ModelEvent]:
        events: list[ModelEvent] = []
        # DeepSeek/vLLM/llama.cpp stream reasoning as a non-standard field.
        reasoning = getattr(delta, "reasoning_content", None) or getattr(delta, "reasoning", None)
        if isinstance(reasoning, str) and reasoning:
            self.reasoning.append(reasoning)
            events.append(ThinkingDelta(reasoning))
        for piece in (delta.content, delta.refusal):
            if piece:
                self.text.append(piece)
                events.append(TextDelta(piece))
        if delta.refusal:
            self.refused = True
        for fragment in delta.tool_calls or []:
            call = self.calls.get(fragment.index)
            if call is None:
                call = self.calls[fragment.index] = _Call(id=fragment.id or "")
            elif fragment.id and not call.id:
                call.id = fragment.id
            function = fragment.function
            new_args = (function.arguments or "") if function is not None else ""
            if function is not None and function.name and not call.name:
                call.name = function.name
            if new_args:
                call.arguments.append(new_args)
            if not call.started and call.name:
                call.started = True
                call.id = call.id or f"call_{fragment.index}"
                events.append(ToolUseStart(id=call.id, name=call.name))
                if call.arguments:
                    events.append(ToolInputDelta(id=call.id, partial_json="".join(call.arguments)))
            elif call.started and new_args:
                events.append(ToolInputDelta(id=call.id, partial_json=new_args))
        return events

    def complete(self) -> TurnComplete:
        blocks: list[Block] = []
        if self.reasoning:
            blocks.append(ThinkingBlock(thinking="".join(self.reasoning)))
        if self.text:
            blocks.append(TextBlock("".join(self.text)))
        for index in sorted(self.calls):
            call = self.calls[index]
            blocks.append(
                ToolUseBlock(
                    id=call.id or f"call_{index}",
                    name=call.name,
                    input=parse_arguments("".join(call.arguments)),
                )
            )
        reason = _FINISH_REASONS.get(self.finish_reason or "", "end_turn")
        if self.refused:
            reason = "refusal"
        elif self.calls and reason == "end_turn":
            reason = "tool_use"  # some local servers say "stop" after tool calls
        return TurnComplete(
            message=Message(role="assistant", content=blocks), stop_reason=reason, usage=self.usage
        )


def parse_arguments(raw: str) -> dict[str, Any]:
    """Tool-call arguments as a dict; invalid JSON is kept as ``{"_raw_arguments": raw}``."""
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {RAW_ARGUMENTS: raw}
    return value if isinstance(value, dict) else {RAW_ARGUMENTS: raw}


def usage_from_wire(u: Any) -> Usage:
    details = getattr(u, "prompt_tokens_details", None)
    cached = (getattr(details, "cached_tokens", None) or 0) if details is not None else 0
    prompt = u.prompt_tokens or 0
    return Usage(
        input_tokens=max(0, prompt - cached),
        output_tokens=u.completion_tokens or 0,
        cache_read_tokens=cached,
    )


# --- history → wire ----------------------------------------------------------------------


def _arguments(block: ToolUseBlock) -> str:
    raw = block.input.get(RAW_ARGUMENTS)
    if isinstance(raw, str) and len(block.input) == 1:
        return raw  # echo what the model produced
    return json.dumps(block.input)


def messages_to_wire(system: str, messages: list[Message]) -> list[dict[str, Any]]:
    """Chat messages: system first; tool results become ``tool`` messages; thinking is dropped."""
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for message in messages:
        texts = [b.text for b in message.content if isinstance(b, TextBlock) and b.text]
        if message.role == "assistant":
            calls = [
                {
                    "id": b.id,
                    "type": "function",
                    "function": {"name": b.name, "arguments": _arguments(b)},
                }
                for b in message.content
                if isinstance(b, ToolUseBlock)
            ]
            if not texts and not calls:
                continue
            wire: dict[str, Any] = {"role": "assistant", "content": "".join(texts) or None}
            if calls:
                wire["tool_calls"] = calls
            out.append(wire)
            continue
        for b in message.content:
            if isinstance(b, ToolResultBlock):
                content = f"Error: {b.content}" if b.is_error else b.content
                out.append({"role": "tool", "tool_call_id": b.tool_use_id, "content": content})
        if texts:
            out.append({"role": "user", "content": "\n\n".join(texts)})
    return out


# --- errors ------------------------------------------------------------------------------


def status_error(exc: openai.APIStatusError, model: str) -> ModelError:
    """Classify an HTTP failure of the chat completions endpoint by the shared table."""
    body = exc.body if isinstance(exc.body, dict) else {}
    message = body.get("message")
    detail = message if isinstance(message, str) else exc.message
    return OPENAI.status_error(
        exc.status_code,
        detail=detail,
        model=model,
        headers=exc.response.headers,
        error_types=(exc.code, exc.type),
    )


# --- warm-up ------------------------------------------------------------------------------

_WARM_STREAM = "".join(
    f"data: {json.dumps(chunk)}\n\n"
    for chunk in (
        {
            "id": "warm",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "warm",
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": "a"}}],
        },
        {
            "id": "warm",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "warm",
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "w",
                                "type": "function",
                                "function": {"name": "w", "arguments": "{}"},
                            }
                        ]
                    },
                    "finish_reason": "tool_calls",
                }
            ],
        },
        {
            "id": "warm",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "warm",
            "choices": [],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        },
    )
).encode() + b"data: [DONE]\n\n"

def _import_sdk() -> None:
    defer_sdk_packages()
    import openai._client  # noqa: F401


async def _stream_once(http: Any) -> None:
    """One canned chat completion through the async client, over ``http``."""
    from openai._client import AsyncOpenAI

    client = AsyncOpenAI(
        api_key="warm-up", base_url="http://warm-up.invalid/v1", http_client=http, max_retries=0
    )
    chunks = await client.chat.completions.create(
        model="warm-up",
        messages=[{"role": "user", "content": "x"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    async with chunks:
        acc = _Accumulator()
        async for chunk in chunks:
            list(acc.feed(chunk))


def _prewarm_stream() -> bool:
    """Import the SDK, then one canned chat completion in memory; False if it failed."""
    _import_sdk()
    return run_canned_stream(_stream_once, _WARM_STREAM)


# As for Anthropic: the whole warm-up in process, or the import alone for the worker.
_prewarm_sdk = Once(_prewarm_stream, import_transport)
_import_once = Once(_import_sdk, import_transport)
