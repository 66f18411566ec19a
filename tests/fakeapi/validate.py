"""Request checks the real APIs make, so that a request they would refuse fails here too.

Each function returns the first problem found, worded like the real API's 400 message, or
``None``. They check what the real services are known to refuse (the Anthropic Messages API and
OpenAI Chat Completions): required fields and their types, block shapes per role, at most four
``cache_control`` breakpoints, tool names and schemas, which thinking each model takes (and the
budget), and that every ``tool_use`` / ``tool_calls`` entry is answered by a result right after
it (and no result answers nothing); a retired model is answered 404. They do not try to be
complete; they must never refuse what the real API accepts.
"""

from __future__ import annotations

import json
import re
import threading
from typing import Any

MAX_CACHE_BREAKPOINTS = 4
TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")
TOOL_ID = re.compile(r"^[a-zA-Z0-9_-]+$")

ANTHROPIC_FIELDS = {
    "model",
    "messages",
    "max_tokens",
    "system",
    "tools",
    "tool_choice",
    "stream",
    "temperature",
    "top_p",
    "top_k",
    "stop_sequences",
    "metadata",
    "thinking",
    "service_tier",
    "container",
    "mcp_servers",
    "context_management",
    "output_config",
}
USER_BLOCKS = {"text", "image", "document", "search_result", "tool_result"}
ASSISTANT_BLOCKS = {"text", "thinking", "redacted_thinking", "tool_use", "server_tool_use"}
NON_EMPTY = (
    "all messages must have non-empty content except for the optional final assistant message"
)
UNANSWERED = (
    "An assistant message with 'tool_calls' must be followed by tool messages responding to "
    "each 'tool_call_id'. The following tool_call_ids did not have response messages: "
)


class Invalid(Exception):
    """The message of the 400 the real API would answer."""


def _need(condition: bool, message: str) -> None:
    if not condition:
        raise Invalid(message)


def _cache_control(where: str, obj: dict[str, Any], count: list[int]) -> None:
    cache = obj.get("cache_control")
    if cache is None:
        return
    _need(
        isinstance(cache, dict) and cache.get("type") == "ephemeral",
        f"{where}.cache_control.type: Input should be 'ephemeral'",
    )
    _need(
        cache.get("ttl") in (None, "5m", "1h"),
        f"{where}.cache_control.ttl: Input should be '5m' or '1h'",
    )
    count[0] += 1


def _text_block(where: str, block: dict[str, Any]) -> None:
    _need(isinstance(block.get("text"), str), f"{where}.text: Field required")
    _need(block["text"] != "", f"{where}: text content blocks must be non-empty")


def _anthropic_block(where: str, role: str, block: Any, count: list[int]) -> None:
    _need(isinstance(block, dict), f"{where}: Input should be a valid dictionary")
    kind = block.get("type")
    allowed = USER_BLOCKS if role == "user" else ASSISTANT_BLOCKS
    _need(kind in allowed, f"{where}.type: a {role} message cannot hold a {kind!r} block")
    if kind in ("thinking", "redacted_thinking"):
        _need(
            "cache_control" not in block,
            f"{where}.cache_control: thinking blocks cannot be cached directly",
        )
    _cache_control(where, block, count)
    if kind == "text":
        _text_block(where, block)
    elif kind == "thinking":
        _need(isinstance(block.get("thinking"), str), f"{where}.thinking: Field required")
        _need(
            isinstance(block.get("signature"), str) and block["signature"] != "",
            f"{where}.signature: Field required",
        )
    elif kind == "redacted_thinking":
        _need(isinstance(block.get("data"), str), f"{where}.data: Field required")
    elif kind == "tool_use":
        _need(
            isinstance(block.get("id"), str) and bool(TOOL_ID.match(block["id"])),
            f"{where}.id: String should match pattern '^[a-zA-Z0-9_-]+$'",
        )
        _need(
            isinstance(block.get("name"), str) and bool(block["name"]),
            f"{where}.name: Field required",
        )
        _need(
            isinstance(block.get("input"), dict),
            f"{where}.input: Input should be a valid dictionary",
        )
    elif kind == "tool_result":
        _need(isinstance(block.get("tool_use_id"), str), f"{where}.tool_use_id: Field required")
        content = block.get("content", "")
        if isinstance(content, list):
            for j, part in enumerate(content):
                _need(
                    isinstance(part, dict)
                    and part.get("type") in ("text", "image", "document", "search_result"),
                    f"{where}.content.{j}: Input tag does not match any of the expected tags",
                )
                if part["type"] == "text":
                    _text_block(f"{where}.content.{j}", part)
                _cache_control(f"{where}.content.{j}", part, count)
        else:
            _need(
                isinstance(content, str), f"{where}.content: Input should be a valid string or list"
            )
        _need(
            block.get("is_error") in (None, True, False),
            f"{where}.is_error: Input should be a valid boolean",
        )


def _tool_pairing(messages: list[dict[str, Any]]) -> None:
    for i, message in enumerate(messages):
        if not isinstance(message["content"], list):
            continue
        blocks = message["content"]
        if message["role"] == "user":
            results = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
            previous = messages[i - 1] if i > 0 else None
            uses = set()
            if previous is not None and isinstance(previous["content"], list):
                uses = {b.get("id") for b in previous["content"] if b.get("type") == "tool_use"}
            stray = [r for r in results if r not in uses]
            _need(
                not stray,
                f"messages.{i}.content: unexpected `tool_use_id` found in `tool_result` blocks: "
                f"{', '.join(map(str, stray))}. Each `tool_result` block must have a "
                "corresponding `tool_use` block in the previous message.",
            )
            _need(
                len(results) == len(set(results)),
                f"messages.{i}.content: each tool_use_id may be answered once",
            )
            kinds = [b.get("type") for b in blocks]
            first_other = next((k for k, t in enumerate(kinds) if t != "tool_result"), len(kinds))
            _need(
                "tool_result" not in kinds[first_other:],
                f"messages.{i}.content: `tool_result` blocks must come first in the content array",
            )
        else:
            ids = [b.get("id") for b in blocks if b.get("type") == "tool_use"]
            if not ids:
                continue
            _need(len(ids) == len(set(ids)), f"messages.{i}.content: `tool_use` ids must be unique")
            following = messages[i + 1] if i + 1 < len(messages) else None
            answered: set[Any] = set()
            if (
                following is not None
                and following["role"] == "user"
                and isinstance(following["content"], list)
            ):
                answered = {
                    b.get("tool_use_id")
                    for b in following["content"]
                    if b.get("type") == "tool_result"
                }
            missing = [x for x in ids if x not in answered]
            # The last message may be the assistant's own prefill; anywhere else, ids need answers.
            _need(
                following is None or not missing,
                f"messages.{i + 1 if following else i}: `tool_use` ids were found without "
                f"`tool_result` blocks immediately after: {', '.join(map(str, missing))}. Each "
                "`tool_use` block must have a corresponding `tool_result` block in the next "
                "message.",
            )


# What the API says of its models (platform.claude.com, model pages and migration guides,
# read 2026-12-02). Written here from the docs, not from the product's own table.
RETIRED = re.compile(
    r"^claude-(?:3-|2|instant|sonnet-4-5|opus-4-1|opus-4-0|sonnet-4-0|opus-4-2025|sonnet-4-2025)"
)
# Which thinking.type values a model takes. Claude 5 (and Fable, Mythos) think adaptively and
# refuse a budget; Sonnet 5 and Opus 5 may still turn thinking off, Sonnet 5.5 may think only
# between tools; 4.6-4.8 take all three; earlier models know no adaptive thinking.
THINKING_TYPES: tuple[tuple[re.Pattern[str], frozenset[str]], ...] = (
    (re.compile(r"^claude-sonnet-5-5(?:-|$)"), frozenset({"adaptive", "between_tools"})),
    (re.compile(r"^claude-(?:sonnet|opus)-5(?:-\d{8})?$"), frozenset({"adaptive", "disabled"})),
    (
        re.compile(r"^claude-(?:(?:opus|sonnet|haiku)-(?:[5-9]|\d\d)|fable|mythos)(?:-|$)"),
        frozenset({"adaptive"}),
    ),
    (
        re.compile(r"^claude-(?:opus|sonnet)-4-[6-8](?:-|$)"),
        frozenset({"enabled", "disabled", "adaptive"}),
    ),
)
OLDER_THINKING = frozenset({"enabled", "disabled"})


# Models whose thinking blocks are bound to the conversation that produced them: sent back
# after the system prompt, the tools or the messages before them changed, they are a 400 (the
# default for accounts since 2026-08-31); sent to another model, they are dropped silently.
BINDING = re.compile(r"^claude-(?:(?:opus|sonnet|haiku)-(?:[5-9]|\d\d)|fable|mythos)(?:-|$)")
UNBOUND = "The block is bound to a different conversation"


def strip_cache(value: Any) -> Any:
    """``value`` without its ``cache_control`` marks (where a request puts them moves)."""
    if isinstance(value, dict):
        return {k: strip_cache(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [strip_cache(v) for v in value]
    return value


class ThinkingBindings:
    """The conversation each thinking block this fake produced was produced in."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._made: dict[tuple[str, str], list[tuple[str, str]]] = {}

    @staticmethod
    def _conversation(body: dict[str, Any], messages: list[Any]) -> str:
        parts = [body.get("system"), body.get("tools"), messages]
        return json.dumps(strip_cache(parts), sort_keys=True)

    def record(self, body: Any, thinking: str, signature: str) -> None:
        """``thinking``/``signature`` were produced as the answer to ``body``."""
        model = body.get("model") if isinstance(body, dict) else None
        if isinstance(model, str) and BINDING.match(model):
            made = (model, self._conversation(body, list(body.get("messages") or [])))
            with self._lock:
                self._made.setdefault((thinking, signature), []).append(made)

    def check(self, body: Any) -> str | None:
        """The 400 message for a thinking block sent back into another conversation."""
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return None
        messages = body["messages"]
        for i, message in enumerate(messages):
            content = message.get("content") if isinstance(message, dict) else None
            if message.get("role") != "assistant" or not isinstance(content, list):
                continue
            for j, block in enumerate(content):
                if not isinstance(block, dict) or block.get("type") != "thinking":
                    continue
                with self._lock:
                    made = list(self._made.get((block.get("thinking"), block.get("signature")), ()))
                same_model = [c for m, c in made if m == body.get("model")]
                if same_model and self._conversation(body, messages[:i]) not in same_model:
                    return f"messages.{i}.content.{j}: {UNBOUND}"
        return None


# Models that take output_config.effort: Opus 4.5, the 4.6-4.8 models, Claude 5, Fable, Mythos.
EFFORT = re.compile(
    r"^claude-(?:opus-4-5|(?:opus|sonnet)-4-[6-8]|(?:opus|sonnet|haiku)-(?:[5-9]|\d\d)|fable"
    r"|mythos)(?:-|$)"
)


def _tool_choice(model: str, choice: Any, tools: Any, thinking: Any) -> None:
    if choice is None:
        return
    _need(
        isinstance(choice, dict) and choice.get("type") in ("auto", "any", "tool", "none"),
        "tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none'",
    )
    _need(bool(tools), "tool_choice may only be specified while providing tools.")
    thinks = BINDING.match(model) or (
        isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive")
    )
    _need(
        not (thinks and choice["type"] in ("any", "tool")),
        "Thinking may not be enabled when tool_choice forces tool use.",
    )


def _output_config(model: str, config: Any) -> None:
    if config is None:
        return
    _need(isinstance(config, dict), "output_config: Input should be a valid dictionary")
    effort = config.get("effort")
    if effort is not None:
        _need(
            effort in ("low", "medium", "high", "xhigh", "max"),
            "output_config.effort: Input should be 'low', 'medium', 'high', 'xhigh' or 'max'",
        )
        _need(bool(EFFORT.match(model)), "This model does not support the effort parameter.")


def retired_model(body: Any) -> str | None:
    """The 404 message for a request naming a retired model, or ``None``."""
    model = body.get("model") if isinstance(body, dict) else None
    if isinstance(model, str) and RETIRED.match(model):
        return f"model: {model}"
    return None


def _thinking(model: str, thinking: Any, max_tokens: int, temperature: Any) -> None:
    if thinking is None:
        return
    _need(
        isinstance(thinking, dict)
        and thinking.get("type") in ("enabled", "disabled", "adaptive", "between_tools"),
        "thinking.type: Input should be 'enabled', 'disabled', 'adaptive' or 'between_tools'",
    )
    kind = thinking["type"]
    accepted = next((types for rule, types in THINKING_TYPES if rule.match(model)), OLDER_THINKING)
    _need(kind in accepted, f'thinking.type "{kind}" is not supported for this model.')
    _need(
        thinking.get("display") in (None, "summarized", "omitted"),
        "thinking.display: Input should be 'summarized' or 'omitted'",
    )
    if kind == "enabled":
        budget = thinking.get("budget_tokens")
        _need(
            isinstance(budget, int) and budget >= 1024,
            "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024",
        )
        _need(max_tokens > budget, "`max_tokens` must be greater than `thinking.budget_tokens`.")
        _need(
            temperature in (None, 1),
            "`temperature` may only be set to 1 when thinking is enabled.",
        )


def anthropic_request(body: Any) -> str | None:
    """The 400 message ``POST /v1/messages`` would answer for ``body``, or ``None``."""
    try:
        _anthropic(body)
    except Invalid as exc:
        return str(exc)
    return None


def _anthropic(body: Any) -> None:
    _need(isinstance(body, dict), "the request body is not a JSON object")
    extra = sorted(set(body) - ANTHROPIC_FIELDS)
    _need(not extra, f"{', '.join(extra)}: Extra inputs are not permitted")
    _need(isinstance(body.get("model"), str) and body["model"] != "", "model: Field required")
    max_tokens = body.get("max_tokens")
    _need(
        isinstance(max_tokens, int) and not isinstance(max_tokens, bool),
        "max_tokens: Field required",
    )
    _need(max_tokens >= 1, "max_tokens: Input should be greater than or equal to 1")
    count = [0]
    system = body.get("system")
    if isinstance(system, list):
        for j, block in enumerate(system):
            _need(
                isinstance(block, dict) and block.get("type") == "text",
                f"system.{j}.type: Input should be 'text'",
            )
            _text_block(f"system.{j}", block)
            _cache_control(f"system.{j}", block, count)
    else:
        _need(
            system is None or isinstance(system, str),
            "system: Input should be a valid string or list",
        )
    tools = body.get("tools")
    if tools is not None:
        _need(isinstance(tools, list), "tools: Input should be a valid list")
        names = []
        for j, tool in enumerate(tools):
            _need(isinstance(tool, dict), f"tools.{j}: Input should be a valid dictionary")
            name = tool.get("name")
            _need(
                isinstance(name, str) and bool(TOOL_NAME.match(name)),
                f"tools.{j}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,128}}$'",
            )
            names.append(name)
            schema = tool.get("input_schema")
            _need(
                isinstance(schema, dict) and schema.get("type") == "object",
                f"tools.{j}.input_schema.type: Input should be 'object'",
            )
            _need(
                tool.get("description") is None or isinstance(tool["description"], str),
                f"tools.{j}.description: Input should be a valid string",
            )
            _cache_control(f"tools.{j}", tool, count)
        _need(len(names) == len(set(names)), "tools: Tool names must be unique.")
    messages = body.get("messages")
    _need(isinstance(messages, list), "messages: Field required")
    _need(len(messages) > 0, "messages: at least one message is required")
    for i, message in enumerate(messages):
        where = f"messages.{i}"
        _need(isinstance(message, dict), f"{where}: Input should be a valid dictionary")
        role = message.get("role")
        _need(role in ("user", "assistant"), f"{where}.role: Input should be 'user' or 'assistant'")
        content = message.get("content")
        if isinstance(content, str):
            _need(
                content != "" or (role == "assistant" and i == len(messages) - 1),
                f"{where}: {NON_EMPTY}",
            )
            continue
        _need(isinstance(content, list), f"{where}.content: Input should be a valid string or list")
        _need(
            bool(content) or (role == "assistant" and i == len(messages) - 1),
            f"{where}: {NON_EMPTY}",
        )
        for j, block in enumerate(content):
            _anthropic_block(f"{where}.content.{j}", role, block, count)
    _need(
        count[0] <= MAX_CACHE_BREAKPOINTS,
        f"A maximum of {MAX_CACHE_BREAKPOINTS} blocks with cache_control may be provided. "
        f"Found {count[0]}.",
    )
    _tool_pairing(messages)
    _thinking(str(body["model"]), body.get("thinking"), max_tokens, body.get("temperature"))
    _output_config(str(body["model"]), body.get("output_config"))
    _tool_choice(str(body["model"]), body.get("tool_choice"), tools, body.get("thinking"))
    _need(
        not (BINDING.match(str(body["model"])) and messages[-1].get("role") == "assistant"),
        "This model does not support assistant message prefill. "
        "The conversation must end with a user message.",
    )
    _need(body.get("stream") in (None, True, False), "stream: Input should be a valid boolean")


# --- OpenAI Chat Completions ----------------------------------------------------------------

OPENAI_ROLES = {"system", "developer", "user", "assistant", "tool"}


def openai_request(body: Any) -> tuple[str, str | None] | None:
    """``(message, param)`` of the 400 ``POST /v1/chat/completions`` would answer, or ``None``."""
    try:
        _openai(body)
    except Invalid as exc:
        message, _, param = str(exc).partition("\x00")
        return message, param or None
    return None


def _bad(message: str, param: str) -> Invalid:
    return Invalid(f"{message}\x00{param}")


def _check(condition: bool, message: str, param: str) -> None:
    if not condition:
        raise _bad(message, param)


def _text_or_parts(content: Any, param: str, *, nullable: bool = False) -> None:
    if content is None:
        _check(nullable, f"Invalid value for '{param}': expected a string, got null.", param)
    elif isinstance(content, list):
        for j, part in enumerate(content):
            _check(
                isinstance(part, dict)
                and part.get("type") in ("text", "image_url", "input_audio", "file", "refusal"),
                f"Invalid value for '{param}[{j}].type'.",
                f"{param}[{j}]",
            )
            if part["type"] == "text":
                _check(
                    isinstance(part.get("text"), str),
                    f"Missing required parameter: '{param}[{j}].text'.",
                    f"{param}[{j}].text",
                )
    else:
        _check(
            isinstance(content, str),
            f"Invalid type for '{param}': expected a string or an array.",
            param,
        )


def _openai(body: Any) -> None:
    _check(isinstance(body, dict), "We could not parse the JSON body of your request.", "")
    _check(
        isinstance(body.get("model"), str) and body["model"] != "",
        "you must provide a model parameter",
        "model",
    )
    messages = body.get("messages")
    _check(isinstance(messages, list), "Missing required parameter: 'messages'.", "messages")
    _check(
        len(messages) > 0,
        "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an "
        "empty array instead.",
        "messages",
    )
    if "stream_options" in body:
        _check(
            body.get("stream") is True,
            "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
            "stream_options",
        )
    _check(
        not ("max_tokens" in body and "max_completion_tokens" in body),
        "max_tokens and max_completion_tokens cannot both be set",
        "max_tokens",
    )
    for key in ("max_tokens", "max_completion_tokens"):
        if key in body:
            _check(
                isinstance(body[key], int) and body[key] >= 1,
                f"Invalid '{key}': integer below minimum value.",
                key,
            )
    tools = body.get("tools")
    if tools is not None:
        names = []
        for j, tool in enumerate(tools):
            param = f"tools[{j}]"
            _check(
                isinstance(tool, dict) and tool.get("type") == "function",
                f"Missing required parameter: '{param}.type'.",
                f"{param}.type",
            )
            function = tool.get("function")
            _check(
                isinstance(function, dict),
                f"Missing required parameter: '{param}.function'.",
                f"{param}.function",
            )
            name = function.get("name")
            _check(
                isinstance(name, str) and bool(re.match(r"^[a-zA-Z0-9_-]{1,64}$", name)),
                f"Invalid '{param}.function.name': string does not match pattern.",
                f"{param}.function.name",
            )
            names.append(name)
            parameters = function.get("parameters")
            _check(
                parameters is None or isinstance(parameters, dict),
                f"Invalid type for '{param}.function.parameters': expected an object.",
                f"{param}.function.parameters",
            )
        _check(
            len(names) == len(set(names)),
            "Invalid 'tools': function names must be unique.",
            "tools",
        )
    pending: list[str] = []  # tool_call ids of the last assistant message still unanswered
    after_calls = False
    for i, message in enumerate(messages):
        param = f"messages[{i}]"
        _check(isinstance(message, dict), f"Invalid type for '{param}': expected an object.", param)
        role = message.get("role")
        _check(
            role in OPENAI_ROLES,
            f"Invalid value: '{role}'. Supported values are: 'system', 'assistant', 'user', "
            "'function', 'tool', and 'developer'.",
            f"{param}.role",
        )
        if role == "tool":
            _check(
                after_calls,
                "Invalid parameter: messages with role 'tool' must be a response to a preceeding "
                "message with 'tool_calls'.",
                f"{param}.role",
            )
            call_id = message.get("tool_call_id")
            _check(
                isinstance(call_id, str),
                f"Missing required parameter: '{param}.tool_call_id'.",
                f"{param}.tool_call_id",
            )
            _check(
                call_id in pending,
                f"Invalid parameter: 'tool_call_id' of '{call_id}' not found in 'tool_calls' "
                "of previous message.",
                f"{param}.tool_call_id",
            )
            pending.remove(call_id)
            _text_or_parts(message.get("content"), f"{param}.content")
            continue
        _check(
            not pending,
            f"{UNANSWERED}{', '.join(pending)}",
            f"{param}.role",
        )
        after_calls = False
        if role == "assistant":
            calls = message.get("tool_calls")
            _text_or_parts(message.get("content"), f"{param}.content", nullable=bool(calls))
            if calls is not None:
                _check(
                    isinstance(calls, list) and bool(calls),
                    f"Invalid 'messages[{i}].tool_calls': empty array.",
                    f"{param}.tool_calls",
                )
                for k, call in enumerate(calls):
                    where = f"{param}.tool_calls[{k}]"
                    _check(
                        isinstance(call, dict)
                        and isinstance(call.get("id"), str)
                        and call.get("type") == "function",
                        f"Missing required parameter: '{where}.id'.",
                        f"{where}.id",
                    )
                    function = call.get("function")
                    _check(
                        isinstance(function, dict) and isinstance(function.get("name"), str),
                        f"Missing required parameter: '{where}.function.name'.",
                        f"{where}.function",
                    )
                    _check(
                        isinstance(function.get("arguments"), str),
                        f"Invalid type for '{where}.function.arguments': expected a string.",
                        f"{where}.function.arguments",
                    )
                pending = [c["id"] for c in calls]
                _check(
                    len(pending) == len(set(pending)),
                    f"Invalid '{param}.tool_calls': duplicate ids.",
                    f"{param}.tool_calls",
                )
                after_calls = True
        else:
            _text_or_parts(message.get("content"), f"{param}.content")
    _check(
        not pending,
        f"{UNANSWERED}{', '.join(pending)}",
        "messages",
    )
