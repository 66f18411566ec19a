"""Through the whole path with the real anthropic SDK: editor → server → SDK → fake API."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types

from tests.editor_sim import editor
from tests.fakeapi import FakeAPI, Fault, Turn, TurnUsage
from tests.fakeapi.validate import strip_cache


@pytest.fixture
def api() -> Iterator[Any]:
    with FakeAPI() as fake:
        yield fake
    assert not fake.rejections, "the real API would have refused these requests"


def env_for(api: Any) -> dict[str, str]:
    return {
        "AGENT_LS_MODEL": "anthropic:claude-sonnet-5-5",
        "ANTHROPIC_BASE_URL": api.url,
        "ANTHROPIC_API_KEY": "test-key",
    }


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        block
        for message in body["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]


async def test_rejected_edit_reaches_the_model_as_the_users_decision(
    workspace: Path, api: Any
) -> None:
    api.enqueue(
        Turn(text="Reading.", tool_uses=[("read_file", {"file_path": "app.py"})]),
        Turn(
            text="Editing.",
            tool_uses=[
                (
                    "edit_file",
                    {"file_path": "app.py", "old_string": "Hello ", "new_string": "Hi "},
                )
            ],
        ),
        Turn(text="Understood, I left it as it was."),
    )
    before = (workspace / "app.py").read_text()
    async with editor(workspace, env=env_for(api)) as ed:
        ed.open("app.py")
        ed.accept_hunk = lambda path, index, edit: False
        result = await ed.ask("Say Hi instead")
        assert result["stopReason"] == "end_turn", result
        assert ed.text("app.py") == before
        assert (workspace / "app.py").read_text() == before
        assert result["text"] == "Reading.\n\nEditing.\n\nUnderstood, I left it as it was."
        assert ed.streamed_text() == result["text"]
    bodies = [r.body for r in api.requests]
    assert len(bodies) == 3
    last_result = tool_results(bodies[2])[-1]
    content = last_result["content"]
    text = content if isinstance(content, str) else "".join(c["text"] for c in content)
    assert "The user rejected this edit" in text
    assert not last_result.get("is_error")
    # The read result the model saw was the numbered buffer text.
    read = tool_results(bodies[1])[0]
    read_text = read["content"] if isinstance(read["content"], str) else read["content"][0]["text"]
    assert '     2\t    return "Hello " + name' in read_text
    # The system prompt and the tools are identical across the turns of the run.
    assert bodies[0]["system"] == bodies[1]["system"] == bodies[2]["system"]
    assert bodies[0]["tools"] == bodies[2]["tools"]


async def test_usage_and_cost_are_summed(workspace: Path, api: Any) -> None:
    api.enqueue(
        Turn(
            tool_uses=[("list_files", {"pattern": "*.py"})],
            usage=TurnUsage(input_tokens=100, output_tokens=10, cache_creation_input_tokens=1000),
        ),
        Turn(
            text="One Python file.",
            usage=TurnUsage(input_tokens=20, output_tokens=5, cache_read_input_tokens=1000),
        ),
    )
    async with editor(workspace, env=env_for(api)) as ed:
        result = await ed.ask("How many python files?")
        status = await ed.command("agent.status", {})
    assert result["usage"] == {
        "inputTokens": 120,
        "outputTokens": 15,
        "cachedReadTokens": 1000,
        "cachedWriteTokens": 1000,
    }
    # claude-sonnet-5-5 (its model page and migration guide): $2 in, $10 out, $0.10 cache read,
    # $2.50 cache write (5 minutes) per million.
    expected = (120 * 2 + 15 * 10 + 1000 * 0.1 + 1000 * 2.5) / 1e6
    assert result["costUsd"] == pytest.approx(expected, abs=1e-6)
    assert status["usage"] == result["usage"]
    usage_updates = ed.of_kind("usage_update")
    assert len(usage_updates) == 2 and usage_updates[-1]["size"] == 1_000_000  # Sonnet 5.5: 1M


async def test_transient_faults_are_retried_without_trace(workspace: Path, api: Any) -> None:
    api.enqueue(
        Fault.status(529),
        Fault.status(429, retry_after=0),
        Turn(text="Fine now."),
    )
    async with editor(workspace, env=env_for(api)) as ed:
        result = await ed.ask("hello", work_done_token="t-retry")
        reports = ed.client.progress_reports["t-retry"]
    assert result["stopReason"] == "end_turn" and result["text"] == "Fine now."
    retries = [r.message for r in reports if r.kind == "report" and "retrying" in (r.message or "")]
    assert len(retries) == 2
    bodies = [r.body for r in api.requests]
    assert len(bodies) == 3 and bodies[0]["messages"] == bodies[2]["messages"]


async def test_auth_error_ends_run_with_actionable_message(workspace: Path, api: Any) -> None:
    api.enqueue(Fault.status(401))
    async with editor(workspace, env=env_for(api)) as ed:
        result = await ed.ask("hello")
        # The server stays up and answers.
        status = await ed.command("agent.status", {})
    assert result["stopReason"] == "error"
    assert "ANTHROPIC_API_KEY" in result["error"]
    assert status["running"] == []


async def test_cancel_stops_a_streaming_run(workspace: Path, api: Any) -> None:
    api.enqueue(Turn(text=["word "] * 400, chunk_delay=0.02), Turn(text="next ask works"))
    async with editor(workspace, env=env_for(api)) as ed:
        ask = asyncio.ensure_future(ed.ask("write a lot"))
        for _ in range(1500):  # the SDK warm-up can take seconds on a loaded machine
            await asyncio.sleep(0.01)
            if ed.of_kind("agent_message_chunk"):
                break
        started = time.monotonic()
        cancelled = await ed.command("agent.cancel", {})
        result = await asyncio.wait_for(ask, 5)
        latency = time.monotonic() - started
        assert cancelled == {"cancelled": True}
        assert result["stopReason"] == "cancelled"
        assert latency < 2.0
        again = await ed.ask("and now?")
        assert again["stopReason"] == "end_turn" and again["text"] == "next ask works"


async def test_cancel_while_the_model_client_is_starting(workspace: Path, api: Any) -> None:
    """The SDK warm-up takes a second or more after start: a cancel then is not lost."""
    api.enqueue(Turn(text="should not be asked"))
    async with editor(workspace, env=env_for(api)) as ed:
        ask = asyncio.ensure_future(ed.ask("quick question", work_done_token="w-1"))
        await asyncio.sleep(0.05)
        started = time.monotonic()
        await ed.command("agent.cancel", {})
        result = await asyncio.wait_for(ask, 10)
        assert result["stopReason"] == "cancelled"
        assert time.monotonic() - started < 2.0
        messages = [r.message for r in ed.client.progress_reports["w-1"] if r.kind != "end"]
        assert "starting model client" in messages
    assert api.requests == []


def result_text(block: dict[str, Any]) -> str:
    content = block["content"]
    return content if isinstance(content, str) else "".join(c["text"] for c in content)


def diagnostic(line: int, col: int, message: str, severity: int, **tags: str) -> dict[str, Any]:
    span = {"start": {"line": line, "character": col}, "end": {"line": line, "character": col + 5}}
    return {"range": span, "message": message, "severity": severity, **tags}


async def test_what_get_diagnostics_tells_the_model(workspace: Path, api: Any) -> None:
    api.enqueue(
        Turn(tool_uses=[("get_diagnostics", {"file_path": "app.py"})]),
        Turn(text="Two problems."),
        Turn(tool_uses=[("get_diagnostics", {})]),
        Turn(text="No diagnostics here."),
    )
    async with editor(workspace, env=env_for(api)) as ed:
        ed.open("app.py")
        ed.diagnostics_provider = lambda uri: [
            {
                "uri": uri,
                "diagnostics": [
                    diagnostic(4, 0, "print is discouraged", 2, source="lint", code="T201"),
                    diagnostic(1, 4, "name\n  is undefined", 1),
                ],
            }
        ]
        assert (await ed.ask("any problems?"))["stopReason"] == "end_turn"
        ed.diagnostics_provider = None  # this editor cannot answer agent/getDiagnostics
        assert (await ed.ask("and now?"))["stopReason"] == "end_turn"
    bodies = [r.body for r in api.requests]
    seen = tool_results(bodies[1])[-1]
    assert result_text(seen) == (
        "app.py:5:1: warning [lint T201] print is discouraged\n"
        "app.py:2:5: error name   is undefined"
    )
    assert not seen.get("is_error")
    unsupported = tool_results(bodies[3])[-1]
    assert unsupported["is_error"] is True
    text = result_text(unsupported)
    assert text.startswith("Diagnostics are not available in this editor"), text
    assert "run_shell" in text


async def test_what_the_post_edit_check_tells_the_model(workspace: Path, api: Any) -> None:
    """The editor's diagnostics before and after an edit: the model reads what it introduced and
    how many it fixed, in the edit's tool result."""
    api.enqueue(
        Turn(tool_uses=[("read_file", {"file_path": "app.py"})]),
        Turn(
            tool_uses=[
                ("edit_file", {"file_path": "app.py", "old_string": "Hello ", "new_string": "Hi "})
            ]
        ),
        Turn(text="Edited."),
    )
    formal = diagnostic(1, 11, "too formal", 2, source="tone", code="T1")
    curt = diagnostic(1, 11, "too curt", 1, source="tone", code="T2")
    async with editor(workspace, env=env_for(api)) as ed:
        ed.open("app.py")
        ed.diagnostics_provider = lambda uri: [
            {"uri": uri, "diagnostics": [curt if "Hi " in ed.text("app.py") else formal]}
        ]
        assert (await ed.ask("be brief"))["stopReason"] == "end_turn"
    edit_result = tool_results(api.requests[2].body)[-1]
    assert result_text(edit_result) == (
        "Edited app.py (1 hunk applied).\n\n"
        "New problems the editor reports after this edit:\n"
        "  app.py:2:12: error [tone T2] too curt\n"
        "Fixed by this edit: 1 problem(s) in app.py."
    )


async def test_the_default_model_is_asked_to_show_its_thinking_and_the_effort_set(
    workspace: Path, api: Any
) -> None:
    """Sonnet 5.5 omits its thinking (and its notes between tool calls) unless asked; its
    notes reach the editor as thought chunks. ``effort`` goes where the API reads it."""
    api.enqueue(Turn(thinking="I will answer briefly.", text="Hi."))
    async with editor(workspace, env=env_for(api), init_options={"effort": "medium"}) as ed:
        result = await ed.ask("hello")
    assert result["stopReason"] == "end_turn", result
    body = api.requests[0].body
    assert body["thinking"] == {"type": "adaptive", "display": "summarized"}
    assert body["output_config"] == {"effort": "medium"}
    thoughts = "".join(u["content"]["text"] for u in ed.of_kind("agent_thought_chunk"))
    assert thoughts == "I will answer briefly."


async def test_compaction_reuses_the_cached_prefix_and_calls_no_tool(
    workspace: Path, api: Any
) -> None:
    """The summary request sends the ask's system prompt and tools (not callable): the
    history is read from the prompt cache instead of billed again in full."""
    api.enqueue(
        Turn(tool_uses=[("list_files", {"pattern": "*.py"})]),
        Turn(text="One file."),
        Turn(text="SUMMARY: the user counted Python files."),
    )
    async with editor(workspace, env=env_for(api)) as ed:
        await ed.ask("How many python files?")
        compacted = await ed.command("agent.compact", {})
    assert compacted["compacted"] is True, compacted
    ask, summary = api.requests[1].body, api.requests[2].body
    assert summary["system"] == ask["system"] and summary["tools"] == ask["tools"]
    assert summary["tool_choice"] == {"type": "none"}
    assert strip_cache(summary["messages"][: len(ask["messages"])]) == strip_cache(
        ask["messages"]
    )


async def test_a_deprecated_model_is_named_once_with_its_end_of_life(
    workspace: Path, api: Any
) -> None:
    """The SDK's deprecation table is the reference: Opus 4.5 still answers, until its date."""
    from anthropic._data import DEPRECATED_MODELS

    api.enqueue(Turn(text="one"), Turn(text="two"))
    env = {**env_for(api), "AGENT_LS_MODEL": "anthropic:claude-opus-4-5"}
    async with editor(workspace, env=env) as ed:
        first = await ed.ask("hello")
        await ed.ask("again", sessionId=first["sessionId"])
        shown = [m.message for m in ed.client.messages if m.type == types.MessageType.Warning]
    assert first["stopReason"] == "end_turn", first
    warned = [m for m in shown if "claude-opus-4-5" in m]
    assert len(warned) == 1, shown
    assert DEPRECATED_MODELS["claude-opus-4-5"] in warned[0]
    assert "anthropic:claude-sonnet-5-5" in warned[0]


async def test_the_default_model_is_not_called_deprecated(workspace: Path, api: Any) -> None:
    api.enqueue(Turn(text="one"))
    async with editor(workspace, env=env_for(api)) as ed:
        await ed.ask("hello")
        shown = [m.message for m in ed.client.messages]
    assert not any("deprecated" in m for m in shown), shown
