"""What a run has used, told while it goes and after a cancel (issue 13 item 15).

Through the whole path: editor → server → anthropic SDK → fake API.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.editor_sim import editor
from tests.fakeapi import FakeAPI, Turn, TurnUsage


@pytest.fixture
def api() -> Iterator[Any]:
    with FakeAPI() as fake:
        yield fake


def env_for(api: Any) -> dict[str, str]:
    return {
        "AGENT_LS_MODEL": "anthropic:claude-sonnet-5-5",
        "ANTHROPIC_BASE_URL": api.url,
        "ANTHROPIC_API_KEY": "test-key",
    }


def run_usage(update: dict[str, Any]) -> dict[str, int]:
    return dict(update["_meta"]["agentLs"]["usage"])


async def test_every_usage_update_carries_the_runs_tokens_so_far(
    workspace: Path, api: Any
) -> None:
    api.enqueue(
        Turn(
            text="Reading.",
            tool_uses=[("read_file", {"file_path": "app.py"})],
            usage=TurnUsage(input_tokens=100, output_tokens=7),
        ),
        Turn(text="Done.", usage=TurnUsage(input_tokens=150, output_tokens=3)),
    )
    async with editor(workspace, env=env_for(api)) as ed:
        result = await ed.ask("look at app.py")
    updates = ed.of_kind("usage_update")
    assert [run_usage(u)["inputTokens"] for u in updates] == [100, 250]
    assert [run_usage(u)["outputTokens"] for u in updates] == [7, 10]
    assert run_usage(updates[-1]) == result["usage"]


async def test_a_sub_agents_usage_update_has_the_run_tree_tokens_and_its_parent(
    workspace: Path, api: Any
) -> None:
    api.enqueue(
        Turn(tool_uses=[("task", {"description": "look", "prompt": "Read app.py"}, "toolu_t")]),
        Turn(text="app.py greets."),
        Turn(text="It greets."),
    )
    async with editor(workspace, env=env_for(api)) as ed:
        result = await ed.ask("delegate")
    updates = ed.of_kind("usage_update")
    child = [u for u in updates if u["_meta"]["agentLs"].get("parentToolCallId") == "toolu_t"]
    assert len(child) == 1
    # the parent's first call (10 in) and the child's (10 in): the run so far
    assert run_usage(child[0])["inputTokens"] == 20
    assert run_usage(updates[-1]) == result["usage"]


async def test_a_run_cancelled_mid_stream_reports_the_tokens_it_used(
    workspace: Path, api: Any
) -> None:
    api.enqueue(
        Turn(
            text=["word "] * 400,
            chunk_delay=0.02,
            usage=TurnUsage(input_tokens=1200, output_tokens=400),
        )
    )
    async with editor(workspace, env=env_for(api)) as ed:
        ask = asyncio.ensure_future(ed.ask("write a lot"))
        for _ in range(1500):  # the SDK warm-up can take seconds on a loaded machine
            await asyncio.sleep(0.01)
            if len(ed.streamed_text()) >= 40:
                break
        await ed.command("agent.cancel", {})
        result = await asyncio.wait_for(ask, 5)
        status = await ed.command("agent.status", {})
    streamed = ed.streamed_text()
    assert result["stopReason"] == "cancelled"
    assert len(streamed) >= 40
    # the input the API reported when the stream began, and the output that streamed
    assert result["usage"]["inputTokens"] == 1200
    assert result["usage"]["outputTokens"] >= len(streamed) // 4 > 0
    assert result["costUsd"] > 0
    assert status["usage"] == result["usage"]
