"""Scripted responses (:class:`Turn`, :class:`Fault`) and how each wire protocol encodes them.

Anthropic: SSE records ``event: <type>`` + ``data: <json>`` — ``message_start``, ``ping``,
``content_block_start``/``_delta``/``_stop`` (thinking + ``signature_delta``, text,
``tool_use`` with ``input_json_delta`` fragments), ``message_delta`` (stop reason and
cumulative usage), ``message_stop``. OpenAI: ``data: <chat.completion.chunk>`` records, a
usage chunk with ``choices: []`` when ``stream_options.include_usage`` is set, ``data: [DONE]``.
"""

from __future__ import annotations

import itertools
import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

# (name, input) or (name, input, id); a str input is sent verbatim (e.g. invalid JSON)
ToolInput = dict[str, Any] | str
ToolUse = tuple[str, ToolInput] | tuple[str, ToolInput, str]


@dataclass
class TurnUsage:
    """Token counts of a scripted turn, in Anthropic terms (``input_tokens`` is uncached).

    For OpenAI they become ``prompt_tokens = input + cache_read + cache_creation`` with
    ``prompt_tokens_details.cached_tokens = cache_read``.
    """

    input_tokens: int = 10
    output_tokens: int = 5
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0


@dataclass
class Turn:
    """One scripted assistant turn.

    ``text``/``thinking``: a string (streamed word by word) or a list of chunks.
    ``tool_uses``: ``(name, input)`` or ``(name, input, id)``; the input JSON is streamed in
    several ``input_json_delta`` / ``arguments`` fragments (a ``str`` input is sent verbatim,
    e.g. to script invalid JSON). ``stop_reason`` ``None`` means
    ``tool_use`` when there are tool uses, else ``end_turn`` (OpenAI: ``tool_calls``/``stop``).
    ``chunk_delay``: seconds slept before each SSE record (``None``: the server's default).
    ``latency``: seconds slept before the response starts.
    """

    text: str | list[str] | None = None
    tool_uses: list[ToolUse] = field(default_factory=list)
    thinking: str | list[str] | None = None
    signature: str = "fake-signature"
    redacted_thinking: str | None = None
    stop_reason: str | None = None
    usage: TurnUsage = field(default_factory=TurnUsage)
    chunk_delay: float | None = None
    latency: float = 0.0  # seconds before the response starts (a model thinking)


_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


@dataclass
class Fault:
    """A scripted failure; build it with :meth:`status`, :meth:`cut_stream`, :meth:`error_event`."""

    kind: Literal["status", "cut", "error_event"]
    status_code: int = 500
    retry_after: float | None = None
    message: str | None = None
    error_type: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    after_events: int = 0
    clean: bool = False
    turn: Turn | None = None

    @classmethod
    def status(
        cls,
        code: int,
        *,
        retry_after: float | None = None,
        message: str | None = None,
        error_type: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> Fault:
        """An HTTP error response with the API's JSON error body (and ``retry-after``)."""
        return cls(
            "status",
            status_code=code,
            retry_after=retry_after,
            message=message,
            error_type=error_type,
            headers=dict(headers or {}),
        )

    @classmethod
    def cut_stream(
        cls, after_events: int = 3, *, clean: bool = False, turn: Turn | None = None
    ) -> Fault:
        """Stream ``after_events`` SSE records (pings count) of ``turn``, then drop the connection.

        ``clean=True`` ends the HTTP body properly instead, so only the missing
        ``message_stop`` / ``finish_reason`` shows that the turn was cut.
        """
        return cls("cut", after_events=after_events, clean=clean, turn=turn)

    @classmethod
    def error_event(
        cls,
        error_type: str = "overloaded_error",
        *,
        after_events: int = 2,
        message: str | None = None,
        turn: Turn | None = None,
    ) -> Fault:
        """An HTTP 200 stream that sends ``after_events`` records, then an ``error`` event."""
        return cls(
            "error_event",
            error_type=error_type,
            after_events=after_events,
            message=message,
            turn=turn,
        )

    def error_body(self, protocol: Literal["anthropic", "openai"]) -> dict[str, Any]:
        etype = self.error_type or _ERROR_TYPES.get(self.status_code, "api_error")
        message = self.message or f"fake {etype}"
        if protocol == "anthropic":
            return {"type": "error", "error": {"type": etype, "message": message}}
        return {
            "error": {"message": message, "type": etype, "code": self.error_type, "param": None}
        }


Response = Turn | Fault


@dataclass
class RecordedRequest:
    """A request the fake received; ``headers`` keys are lower-case, ``body`` is parsed JSON."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    at: float = field(default_factory=time.perf_counter)  # when it arrived


# --- wire format -------------------------------------------------------------------------

SSERecord = tuple[str | None, Any]  # (event name or None, data object or raw string)


def _chunks(text: str | list[str] | None) -> list[str]:
    if text is None:
        return []
    if isinstance(text, list):
        return text
    return re.findall(r"\s*\S+\s*|\s+", text) or [text]


def _json_text(value: ToolInput) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _json_pieces(value: ToolInput) -> list[str]:
    raw = _json_text(value)
    step = max(1, len(raw) // 3)
    return ["", *(raw[i : i + step] for i in range(0, len(raw), step))]


def _tool_use_parts(
    turn: Turn, counter: itertools.count[int], prefix: str
) -> list[tuple[str, ToolInput, str]]:
    parts = []
    for use in turn.tool_uses:
        tool_id = use[2] if len(use) == 3 else f"{prefix}{next(counter)}"
        parts.append((use[0], use[1], tool_id))
    return parts


def anthropic_records(
    turn: Turn, model: str, msg_id: str, tool_ids: itertools.count[int]
) -> list[SSERecord]:
    u = turn.usage
    stop = turn.stop_reason or ("tool_use" if turn.tool_uses else "end_turn")
    usage_start = {
        "input_tokens": u.input_tokens,
        "output_tokens": 1,
        "cache_creation_input_tokens": u.cache_creation_input_tokens,
        "cache_read_input_tokens": u.cache_read_input_tokens,
    }
    recs: list[SSERecord] = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": msg_id,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": usage_start,
                },
            },
        ),
        ("ping", {"type": "ping"}),
    ]
    index = 0

    def block(start: dict[str, Any], deltas: list[dict[str, Any]]) -> None:
        nonlocal index
        recs.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": start},
            )
        )
        for delta in deltas:
            recs.append(
                (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                )
            )
        recs.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1

    if turn.thinking is not None:
        deltas = [{"type": "thinking_delta", "thinking": c} for c in _chunks(turn.thinking)]
        deltas.append({"type": "signature_delta", "signature": turn.signature})
        block({"type": "thinking", "thinking": "", "signature": ""}, deltas)
    if turn.redacted_thinking is not None:
        block({"type": "redacted_thinking", "data": turn.redacted_thinking}, [])
    if turn.text is not None:
        block(
            {"type": "text", "text": ""},
            [{"type": "text_delta", "text": c} for c in _chunks(turn.text)],
        )
        recs.append(("ping", {"type": "ping"}))
    for name, args, tool_id in _tool_use_parts(turn, tool_ids, "toolu_fake_"):
        block(
            {"type": "tool_use", "id": tool_id, "name": name, "input": {}},
            [{"type": "input_json_delta", "partial_json": p} for p in _json_pieces(args)],
        )
    recs.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {**usage_start, "output_tokens": u.output_tokens},
            },
        )
    )
    recs.append(("message_stop", {"type": "message_stop"}))
    return recs


def anthropic_message(
    turn: Turn, model: str, msg_id: str, tool_ids: itertools.count[int]
) -> dict[str, Any]:
    """The non-streaming ``Message`` object for ``turn``."""
    content: list[dict[str, Any]] = []
    if turn.thinking is not None:
        content.append(
            {
                "type": "thinking",
                "thinking": "".join(_chunks(turn.thinking)),
                "signature": turn.signature,
            }
        )
    if turn.redacted_thinking is not None:
        content.append({"type": "redacted_thinking", "data": turn.redacted_thinking})
    if turn.text is not None:
        content.append({"type": "text", "text": "".join(_chunks(turn.text))})
    for name, args, tool_id in _tool_use_parts(turn, tool_ids, "toolu_fake_"):
        content.append({"type": "tool_use", "id": tool_id, "name": name, "input": args})
    u = turn.usage
    return {
        "id": msg_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": turn.stop_reason or ("tool_use" if turn.tool_uses else "end_turn"),
        "stop_sequence": None,
        "usage": {
            "input_tokens": u.input_tokens,
            "output_tokens": u.output_tokens,
            "cache_creation_input_tokens": u.cache_creation_input_tokens,
            "cache_read_input_tokens": u.cache_read_input_tokens,
        },
    }


_OPENAI_FINISH = {
    "tool_use": "tool_calls",
    "end_turn": "stop",
    "max_tokens": "length",
    "refusal": "content_filter",
    "stop_sequence": "stop",
}


def _openai_usage(u: TurnUsage) -> dict[str, Any]:
    prompt = u.input_tokens + u.cache_read_input_tokens + u.cache_creation_input_tokens
    return {
        "prompt_tokens": prompt,
        "completion_tokens": u.output_tokens,
        "total_tokens": prompt + u.output_tokens,
        "prompt_tokens_details": {"cached_tokens": u.cache_read_input_tokens},
    }


def openai_records(
    turn: Turn, model: str, msg_id: str, tool_ids: itertools.count[int], include_usage: bool
) -> list[SSERecord]:
    base = {
        "id": msg_id,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> SSERecord:
        return (
            None,
            {
                **base,
                "choices": [
                    {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
                ],
            },
        )

    recs = [chunk({"role": "assistant", "content": ""})]
    recs += [chunk({"reasoning_content": c}) for c in _chunks(turn.thinking)]
    recs += [chunk({"content": c}) for c in _chunks(turn.text)]
    for i, (name, args, tool_id) in enumerate(_tool_use_parts(turn, tool_ids, "call_fake_")):
        recs.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": i,
                            "id": tool_id,
                            "type": "function",
                            "function": {"name": name, "arguments": ""},
                        }
                    ]
                }
            )
        )
        recs += [
            chunk({"tool_calls": [{"index": i, "function": {"arguments": p}}]})
            for p in _json_pieces(args)
            if p
        ]
    stop = turn.stop_reason or ("tool_use" if turn.tool_uses else "end_turn")
    recs.append(chunk({}, _OPENAI_FINISH.get(stop, stop)))
    if include_usage:
        recs.append((None, {**base, "choices": [], "usage": _openai_usage(turn.usage)}))
    recs.append((None, "[DONE]"))
    return recs


def openai_completion(
    turn: Turn, model: str, msg_id: str, tool_ids: itertools.count[int]
) -> dict[str, Any]:
    """The non-streaming ``ChatCompletion`` object for ``turn``."""
    calls = [
        {"id": tid, "type": "function", "function": {"name": n, "arguments": _json_text(a)}}
        for n, a, tid in _tool_use_parts(turn, tool_ids, "call_fake_")
    ]
    stop = turn.stop_reason or ("tool_use" if turn.tool_uses else "end_turn")
    message: dict[str, Any] = {
        "role": "assistant",
        "content": "".join(_chunks(turn.text)) if turn.text else None,
    }
    if calls:
        message["tool_calls"] = calls
    return {
        "id": msg_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": _OPENAI_FINISH.get(stop, stop),
            }
        ],
        "usage": _openai_usage(turn.usage),
    }


# --- scripts and CLI ---------------------------------------------------------------------


def response_from_json(item: dict[str, Any]) -> Response:
    """One script entry (see the module docstring) as a :class:`Turn` or :class:`Fault`."""
    fault = item.get("fault")
    if fault == "status":
        return Fault.status(
            int(item.get("status", 500)),
            retry_after=item.get("retry_after"),
            message=item.get("message"),
            error_type=item.get("error_type"),
        )
    if fault in ("cut_stream", "cut"):
        return Fault.cut_stream(int(item.get("after_events", 3)), clean=bool(item.get("clean")))
    if fault == "error_event":
        return Fault.error_event(
            item.get("error_type", "overloaded_error"),
            after_events=int(item.get("after_events", 2)),
        )
    if fault is not None:
        raise ValueError(f"unknown fault {fault!r}")
    uses: list[ToolUse] = []
    for use in item.get("tool_uses", []):
        if isinstance(use, dict):
            uses.append(
                (use["name"], use.get("input", {}), use["id"])
                if "id" in use
                else (use["name"], use.get("input", {}))
            )
        else:
            uses.append(tuple(use))
    return Turn(
        text=item.get("text"),
        tool_uses=uses,
        thinking=item.get("thinking"),
        signature=item.get("signature", "fake-signature"),
        redacted_thinking=item.get("redacted_thinking"),
        stop_reason=item.get("stop_reason"),
        usage=TurnUsage(**item.get("usage", {})),
        chunk_delay=item.get("chunk_delay"),
    )


def load_script(path: str | Path) -> list[Response]:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, list):
        raise ValueError("a fake API script is a JSON list of turns and faults")
    return [response_from_json(item) for item in data]
