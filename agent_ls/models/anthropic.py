"""The Anthropic Messages API as a :class:`~agent_ls.models.sdk.Model`.

Streams one turn through the SDK's async client (``POST /v1/messages`` with ``stream``, as
``messages.create(stream=True)`` sends it, its raw events gathered into the final message as
the SDK's ``MessageStream`` does), translates our provider-neutral history to the wire format
(assistant blocks echoed exactly, thinking signatures included), puts prompt-cache breakpoints
so that each request extends the previous one, and turns every failure into a
:class:`ModelError` that says whether retrying may help. The SDK retries nothing
(``max_retries=0``): the agent loop owns retries.

``anthropic`` is imported lazily because it takes over a second to import and the language
server must start fast, and from the modules that define what we use, its package bodies
deferred (:mod:`agent_ls.models.sdk_import`), its OpenTelemetry span helpers imported when
first called and its error table by the warm-up once the SDK is ready: the first request then
waits for about 190 of the SDK's 3,150 modules.
Not through the Messages resource: its module, and the ``messages.stream`` helper's, import
the beta Messages types for their tracing and parsing (~250 ms).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from agent_ls.models.claude_models import ClaudeTraits, claude_traits, end_of_life
from agent_ls.models.errors import ANTHROPIC
from agent_ls.models.sdk import (
    Once,
    SdkModel,
    canned_stream,
    import_transport,
    run_canned_stream,
)
from agent_ls.ports.messages import Block, Message, TextBlock, ThinkingBlock, ToolUseBlock, Usage
from agent_ls.ports.model import (
    ModelError,
    ModelEvent,
    ModelRequest,
    TextDelta,
    ThinkingDelta,
    ToolInputDelta,
    ToolUseStart,
    TurnComplete,
    UsageSoFar,
)

if TYPE_CHECKING:
    import anthropic

# The SDK release whose package bodies tests/test_sdk_import.py checked: only re-exports of
# their own modules, so running them late changes nothing. Another release imports as usual.
SDK_VERSION = "2.14.0"
# Plain modules of that release whose bodies wait for a call of these functions (or a use of
# any other of their names): the OpenTelemetry span helpers, called when a span records (their
# module imports the beta Messages types: ~200 ms), and the error table, used on an error
# response (every error type: ~100 ms; the warm-up runs it once the SDK is ready, see
# loaded_after_warm_up). Their bodies only import and define (tested).
FORWARDED = {
    "anthropic.lib._tracing._api_call": ("finish_api_call_span",),
    "anthropic._error_classes": ("make_status_error",),
}
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})  # tool results
_STOP_REASONS = {"end_turn", "tool_use", "max_tokens", "stop_sequence", "pause_turn", "refusal"}


MIN_THINKING_BUDGET = 1024


def _cache() -> dict[str, str]:
    return {"type": "ephemeral"}


class AnthropicModel(SdkModel["anthropic.AsyncAnthropic"]):
    """``anthropic:<model>``. ``api_key``/``base_url`` default to the SDK's environment lookup."""

    provider = "anthropic"
    loaded_after_warm_up = ("anthropic._error_classes",)

    @classmethod
    def context_window_of(cls, model: str) -> int:
        return claude_traits(model).context_window

    @property
    def _traits(self) -> ClaudeTraits:
        return claude_traits(self._model)

    def _key(self) -> str | None:
        """The API key to pass the SDK; raises if no credential is configured at all."""
        key = self._api_key or os.environ.get("ANTHROPIC_API_KEY")
        if not key and not os.environ.get("ANTHROPIC_AUTH_TOKEN"):
            raise ModelError("ANTHROPIC_API_KEY is not set", retryable=False)
        return key or None

    def prepare_sdk(self) -> None:
        _prewarm_sdk()

    def import_sdk(self) -> None:
        _import_once()

    async def rehearse(self) -> None:
        await canned_stream(_stream_once, _WARM_STREAM)

    def _make_client(self) -> anthropic.AsyncAnthropic:
        if self._client is None:
            key = self._key()
            defer_sdk_packages()
            from anthropic._client import AsyncAnthropic

            self._client = AsyncAnthropic(api_key=key, base_url=self._base_url, max_retries=0)
        return self._client

    def stream_resource(self, client: anthropic.AsyncAnthropic) -> object:
        _stream_class()
        return client

    def binding_of(self, request: ModelRequest) -> str:
        """What this request's thinking blocks are bound to besides the messages before them
        (which only grow within a session): the model, the system prompt and the tools."""
        tools = [(t.name, t.description, t.input_schema) for t in request.tools]
        text = json.dumps([self._model, request.system, tools], sort_keys=True, default=str)
        return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()

    def request_params(self, request: ModelRequest, binding: str | None = None) -> dict[str, Any]:
        """The keyword arguments of ``messages.stream`` for ``request``, cache breakpoints set.

        Thinking made under another ``binding`` (:meth:`binding_of`) is left out: Claude 5
        models answer 400 to a block sent back after the system prompt or tools changed.
        """
        max_tokens = request.max_tokens or self._traits.max_tokens
        params: dict[str, Any] = {
            "model": self._model,
            "max_tokens": max_tokens,
            "messages": messages_to_wire(request.messages, binding or self.binding_of(request)),
        }
        if request.system:
            params["system"] = [{"type": "text", "text": request.system, "cache_control": _cache()}]
        if request.tools:
            tools: list[dict[str, Any]] = [
                {"name": t.name, "description": t.description, "input_schema": t.input_schema}
                for t in request.tools
            ]
            tools[-1]["cache_control"] = _cache()
            params["tools"] = tools
            if request.tool_choice == "none":
                params["tool_choice"] = {"type": "none"}
        thinking = self._traits.thinking
        if thinking == "always_adaptive" or (thinking == "adaptive" and request.thinking_budget):
            # Shown, not omitted: these models also write their notes between tool calls as
            # thinking, and the user would see nothing of them.
            params["thinking"] = {"type": "adaptive", "display": "summarized"}
        # The API wants 1024 <= budget_tokens < max_tokens: below that, no room to think.
        elif thinking == "budget" and request.thinking_budget and max_tokens > MIN_THINKING_BUDGET:
            budget = max(MIN_THINKING_BUDGET, min(request.thinking_budget, max_tokens - 1))
            params["thinking"] = {"type": "enabled", "budget_tokens": budget}
        if request.effort and self._traits.effort:
            params["output_config"] = {"effort": request.effort}
        return params

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self._key()  # fail before any request when no credential is configured
        if self._client is None:
            await self.ready_to_stream()
        client = self._make_client()
        import httpx2
        from anthropic._exceptions import AnthropicError, APIConnectionError, APIStatusError

        binding = self.binding_of(request)
        params = self.request_params(request, binding)
        tool_ids: dict[int, str] = {}
        final: Any = None
        try:
            turn = _Accumulator()
            async with await open_stream(client, params) as events:
                async for event in events:
                    turn.add(event)
                    translated = _translate(event, tool_ids)
                    if translated is not None:
                        yield translated
                    elif event.type == "message_stop":
                        final = turn.message
        except APIStatusError as exc:
            raise status_error(exc, self._model) from exc
        except APIConnectionError as exc:
            raise ANTHROPIC.unreachable(exc.__cause__ or exc, exc) from exc
        except httpx2.TransportError as exc:
            raise ANTHROPIC.cut(exc) from exc
        except AnthropicError as exc:
            raise ANTHROPIC.client_error(exc) from exc
        except ValueError as exc:  # the SDK could not parse streamed tool input JSON
            raise ANTHROPIC.malformed(exc) from exc
        if final is None:
            raise ANTHROPIC.ended_early()
        yield complete_turn(final, binding)


# --- events and the final message --------------------------------------------------------


async def open_stream(client: anthropic.AsyncAnthropic, params: dict[str, Any]) -> Any:
    """The raw event stream of ``params`` (``AsyncStream[RawMessageStreamEvent]``), requested
    as ``messages.create(stream=True)`` does: its path, body, span name and route.

    Not its span attributes: the SDK computes them for every request, span or not, with a
    module that imports the beta Messages types (~200 ms). A span, where OpenTelemetry
    records one, has the client's attributes and the request's (method, URL, stream)."""
    from anthropic._base_client import make_request_options

    stream_class, message_class = _stream_class()
    options = make_request_options(span_name="anthropic.messages.create", span_route="/v1/messages")
    return await client.post(
        "/v1/messages",
        body={**params, "stream": True},
        options=options,
        cast_to=message_class,
        stream=True,
        stream_cls=stream_class,
    )


@functools.cache
def _stream_class() -> tuple[Any, Any]:
    """``AsyncStream[RawMessageStreamEvent]`` and ``Message`` (importing their modules)."""
    from anthropic._streaming import AsyncStream
    from anthropic.types.message import Message
    from anthropic.types.raw_message_stream_event import RawMessageStreamEvent

    return AsyncStream[RawMessageStreamEvent], Message


class _Accumulator:
    """The final ``Message`` of a raw event stream, gathered as the SDK's ``MessageStream``
    gathers it (``accumulate_event``), for what :func:`complete_turn` reads: the content
    blocks (text, thinking and its signature, tool input JSON), stop reason and usage."""

    def __init__(self) -> None:
        self.message: Any = None
        self._json: dict[int, list[str]] = {}  # tool input's pieces, by block index

    def add(self, event: Any) -> None:
        kind = event.type
        if kind == "message_start":
            self.message = event.message
            return
        message = self.message
        if message is None:
            raise ValueError(f"unexpected event order: {kind} before message_start")
        if kind == "content_block_start":
            message.content.append(event.content_block)
        elif kind == "content_block_delta":
            block, delta = message.content[event.index], event.delta
            if delta.type == "text_delta" and block.type == "text":
                block.text += delta.text
            elif delta.type == "thinking_delta" and block.type == "thinking":
                block.thinking += delta.thinking
            elif delta.type == "signature_delta" and block.type == "thinking":
                block.signature = delta.signature
            elif delta.type == "input_json_delta" and block.type in _TOOL_INPUT_BLOCKS:
                self._json.setdefault(event.index, []).append(delta.partial_json)
        elif kind == "message_delta":
            message.stop_reason = event.delta.stop_reason
            message.stop_sequence = event.delta.stop_sequence
            usage = event.usage
            message.usage.output_tokens = usage.output_tokens
            # Cumulative totals, each given only when it applies (the start's stands).
            for field in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"):
                value = getattr(usage, field, None)
                if value is not None:
                    setattr(message.usage, field, value)
        elif kind == "message_stop" and self._json:
            from jiter import from_json

            for index, pieces in self._json.items():
                text = "".join(pieces)
                if not text:
                    continue
                try:  # partial: a tool call cut short by max_tokens keeps what it had
                    message.content[index].input = from_json(text.encode(), partial_mode=True)
                except ValueError as exc:
                    raise ValueError(
                        f"Unable to parse tool parameter JSON from model: {exc}. JSON: {text}"
                    ) from exc


_TOOL_INPUT_BLOCKS = ("tool_use", "server_tool_use")


def _translate(event: Any, tool_ids: dict[int, str]) -> ModelEvent | None:
    """Map a raw stream event to ours; the SDK's derived events (``text``...) are skipped."""
    if event.type == "message_start":
        return UsageSoFar(usage_of(event.message.usage))
    if event.type == "content_block_start":
        block = event.content_block
        if block.type == "tool_use":
            tool_ids[event.index] = block.id
            return ToolUseStart(id=block.id, name=block.name)
    elif event.type == "content_block_delta":
        delta = event.delta
        if delta.type == "text_delta" and delta.text:
            return TextDelta(delta.text)
        if delta.type == "thinking_delta" and delta.thinking:
            return ThinkingDelta(delta.thinking)
        if delta.type == "input_json_delta" and delta.partial_json and event.index in tool_ids:
            return ToolInputDelta(id=tool_ids[event.index], partial_json=delta.partial_json)
    return None


def complete_turn(message: Any, binding: str | None = None) -> TurnComplete:
    """Our :class:`TurnComplete` for the SDK's final ``Message`` snapshot (its thinking made
    under ``binding``)."""
    blocks: list[Block] = []
    for b in message.content:
        if b.type == "text":
            blocks.append(TextBlock(b.text))
        elif b.type == "thinking":
            blocks.append(
                ThinkingBlock(thinking=b.thinking, signature=b.signature or "", binding=binding)
            )
        elif b.type == "redacted_thinking":
            blocks.append(ThinkingBlock(thinking="", redacted_data=b.data, binding=binding))
        elif b.type == "tool_use":
            tool_input = b.input if isinstance(b.input, dict) else {"_raw_arguments": str(b.input)}
            blocks.append(ToolUseBlock(id=b.id, name=b.name, input=dict(tool_input)))
    has_tools = any(isinstance(b, ToolUseBlock) for b in blocks)
    return TurnComplete(
        message=Message(role="assistant", content=blocks),
        stop_reason=normalize_stop_reason(message.stop_reason, has_tools),
        usage=usage_of(message.usage),
    )


def usage_of(u: Any) -> Usage:
    """Our :class:`Usage` for the SDK's ``Usage`` (of ``message_start`` or the final message)."""
    return Usage(
        input_tokens=u.input_tokens or 0,
        output_tokens=u.output_tokens or 0,
        cache_read_tokens=u.cache_read_input_tokens or 0,
        cache_write_tokens=u.cache_creation_input_tokens or 0,
    )


def normalize_stop_reason(reason: str | None, has_tools: bool) -> str:
    if reason in _STOP_REASONS:
        return reason
    if reason == "model_context_window_exceeded":
        return "max_tokens"
    return "tool_use" if has_tools else "end_turn"


# --- history → wire ----------------------------------------------------------------------


def block_to_wire(block: Block, binding: str | None = None) -> dict[str, Any] | None:
    """One history block as an API content block (``None``: not sendable, e.g. empty text, or
    thinking bound to something other than ``binding``)."""
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text} if block.text else None
    if isinstance(block, ThinkingBlock):
        if block.binding is not None and binding is not None and block.binding != binding:
            return None
        if block.redacted_data is not None:
            return {"type": "redacted_thinking", "data": block.redacted_data}
        if not block.signature:
            return None  # thinking from another provider: the API would reject it unsigned
        return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
    if isinstance(block, ToolUseBlock):
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    wire: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": block.tool_use_id,
        "content": block.content,
    }
    images = [i for i in block.images or () if len(i) == 2 and i[0] in IMAGE_TYPES]
    if images:
        wire["content"] = [{"type": "text", "text": block.content}] + [
            {"type": "image", "source": {"type": "base64", "media_type": kind, "data": data}}
            for kind, data in images
        ]
    if block.is_error:
        wire["is_error"] = True
    return wire


def messages_to_wire(messages: list[Message], binding: str | None = None) -> list[dict[str, Any]]:
    """The API ``messages`` list, with prompt-cache breakpoints.

    Consecutive messages of one role are merged and a user message's tool results come first,
    as the API requires. Breakpoints go on the last block of the last message and of the
    user message before it (where the previous request put its breakpoint, so the cache is
    found however many blocks the last turn added). Thinking bound to something other than
    ``binding`` is left out (the cached prefix changed with it anyway).
    """
    out: list[dict[str, Any]] = []
    for message in messages:
        content = [w for b in message.content if (w := block_to_wire(b, binding)) is not None]
        if not content:
            continue
        if out and out[-1]["role"] == message.role:
            out[-1]["content"].extend(content)
        else:
            out.append({"role": message.role, "content": content})
    for wire in out:
        if wire["role"] == "user":
            blocks = wire["content"]
            wire["content"] = [b for b in blocks if b["type"] == "tool_result"] + [
                b for b in blocks if b["type"] != "tool_result"
            ]
    if out:
        _mark_cache(out[-1])
        earlier_users = [m for m in out[:-1] if m["role"] == "user"]
        if earlier_users:
            _mark_cache(earlier_users[-1])
    return out


def _mark_cache(message: dict[str, Any]) -> None:
    for block in reversed(message["content"]):
        if block["type"] not in ("thinking", "redacted_thinking"):
            block["cache_control"] = _cache()
            return


# --- errors ------------------------------------------------------------------------------


def status_error(exc: anthropic.APIStatusError, model: str) -> ModelError:
    """Classify an HTTP (or mid-stream ``error`` event) failure by the shared table; a 404 for
    a model the SDK lists as deprecated says when its life ended and what to use instead."""
    error = ANTHROPIC.status_error(
        exc.status_code,
        detail=exc.api_message or str(exc.body or exc),
        model=model,
        headers=exc.response.headers,
        error_types=(exc.type,),
    )
    ended = end_of_life(model) if exc.status_code == 404 else None
    if ended:
        from agent_ls import DEFAULT_MODEL

        error = ModelError(
            f"{error} — {model} reached its end of life on {ended}; "
            f"use a current model, such as {DEFAULT_MODEL}",
            retryable=False,
        )
    return error


_WARM_STREAM = "".join(
    f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"
    for kind, data in (
        (
            "message_start",
            {
                "message": {
                    "id": "warm",
                    "type": "message",
                    "role": "assistant",
                    "model": "warm",
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 1, "output_tokens": 1},
                }
            },
        ),
        ("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "a"}}),
        ("content_block_stop", {"index": 0}),
        (
            "content_block_start",
            {
                "index": 1,
                "content_block": {"type": "tool_use", "id": "w", "name": "w", "input": {}},
            },
        ),
        (
            "content_block_delta",
            {"index": 1, "delta": {"type": "input_json_delta", "partial_json": '{"a": 1}'}},
        ),
        ("content_block_stop", {"index": 1}),
        (
            "message_delta",
            {
                "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                "usage": {"output_tokens": 2},
            },
        ),
        ("message_stop", {}),
    )
).encode()


def defer_sdk_packages() -> None:
    """Before the first import of ``anthropic``: its package bodies run when first used
    (not with ``ANTHROPIC_LOG`` set: the top package's body sets up the SDK's logging)."""
    if not os.environ.get("ANTHROPIC_LOG"):
        from agent_ls.models.sdk_import import analysis_cache, defer_package_bodies

        defer_package_bodies(
            "anthropic",
            version=SDK_VERSION,
            exclude=("anthropic._vendor",),
            cache=analysis_cache("anthropic", SDK_VERSION),
            forward=FORWARDED,
        )


def _import_sdk() -> None:
    defer_sdk_packages()
    import anthropic._client  # noqa: F401


async def _stream_once(http: Any) -> None:
    """One stream through the async client the real requests use, over ``http``.

    The SDK builds pydantic models for streamed events lazily; streaming a canned response
    first saves 40-150 ms on the first real request.
    """
    from anthropic._client import AsyncAnthropic

    client = AsyncAnthropic(
        api_key="warm-up", base_url="http://warm-up.invalid", http_client=http, max_retries=0
    )
    params = {"model": "warm-up", "max_tokens": 1, "messages": [{"role": "user", "content": "x"}]}
    turn = _Accumulator()
    async with await open_stream(client, params) as events:
        async for event in events:
            turn.add(event)
            _translate(event, {})
    complete_turn(turn.message)


def _prewarm_stream() -> bool:
    """Import the SDK, then one canned stream on an event loop of its own; False if the
    stream failed."""
    _import_sdk()
    return run_canned_stream(_stream_once, _WARM_STREAM)


# Once per process: the SDK imported, streamed once in memory, its transport imported (in
# process); or imported with its transport, the canned stream left to rehearse() (the worker).
_prewarm_sdk = Once(_prewarm_stream, import_transport)
_import_once = Once(_import_sdk, import_transport)
