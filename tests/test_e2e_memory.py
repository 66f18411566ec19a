"""Memory through the real server: @path imports in instruction files, the project's
MEMORY.md in the system prompt, agent.remember, and the agent editing its memory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_ls.agent.prompt import import_targets, with_imports
from agent_ls.settings import memory_file
from tests.editor_sim import editor
from tests.fakeapi import FakeAPI, Turn


@pytest.fixture
def api() -> Iterator[Any]:
    with FakeAPI() as fake:
        yield fake


def api_env(api: Any, tmp_path: Path) -> dict[str, str]:
    config = tmp_path / "config"
    config.mkdir(exist_ok=True)
    return {
        "AGENT_LS_MODEL": "anthropic:claude-sonnet-5-5",
        "ANTHROPIC_BASE_URL": api.url,
        "ANTHROPIC_API_KEY": "test-key",
        "AGENT_LS_CONFIG_DIR": str(config),
    }


def system_of(body: dict[str, Any]) -> str:
    system = body["system"]
    return system if isinstance(system, str) else "".join(b["text"] for b in system)


async def test_imports_are_followed_and_cycles_cut(
    workspace: Path, api: Any, tmp_path: Path
) -> None:
    (workspace / "docs").mkdir()
    (workspace / "AGENTS.md").write_text(
        "Project rules. See @docs/style.md for style.\n"
        "```\n@docs/fenced.md is only an example\n```\n"
        "Not this one: `@docs/span.md`.\n"
    )
    (workspace / "docs" / "style.md").write_text(
        "STYLE-RULES: tabs.\nMore in @deeper.md and @../AGENTS.md\n"
    )
    (workspace / "docs" / "deeper.md").write_text("DEEPER-RULES: short names.\n")
    (workspace / "docs" / "fenced.md").write_text("FENCED-SECRET\n")
    (workspace / "docs" / "span.md").write_text("SPAN-SECRET\n")
    api.enqueue(Turn(text="ok"))
    async with editor(workspace, env=api_env(api, tmp_path)) as ed:
        await ed.ask("hello")
    system = system_of(api.requests[0].body)
    assert "STYLE-RULES: tabs." in system
    assert "DEEPER-RULES: short names." in system
    assert system.count("Project rules.") == 1  # the cycle back to AGENTS.md is cut
    assert "FENCED-SECRET" not in system and "SPAN-SECRET" not in system
    assert f"imported by {workspace / 'AGENTS.md'}" in system


def test_import_depth_is_five_hops_and_home_is_expanded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    (home / "mine.md").write_text("from home\n")
    chain = [tmp_path / f"f{i}.md" for i in range(8)]
    for i, path in enumerate(chain):
        path.write_text(f"level {i} @f{i + 1}.md\n" if i + 1 < len(chain) else "last\n")
    assert import_targets("see @~/mine.md and mail me@example.com", tmp_path) == [home / "mine.md"]
    loaded = [p for p, _text, _parent in with_imports([chain[0]])]
    assert loaded == chain[:6]  # the file and five hops of imports


async def test_remember_reaches_the_next_asks_system_prompt(
    workspace: Path, api: Any, tmp_path: Path
) -> None:
    api.enqueue(Turn(text="one"), Turn(text="two"))
    async with editor(workspace, env=api_env(api, tmp_path)) as ed:
        first = await ed.ask("hello")
        remembered = await ed.command("agent.remember", {"text": "Run tests with\n  make check"})
        await ed.ask("again", sessionId=first["sessionId"])
        bad = None
        try:
            await ed.command("agent.remember", {"text": ""})
        except Exception as exc:  # -32602
            bad = exc
        assert bad is not None
    path = memory_file(workspace)
    assert remembered == {"path": str(path), "line": "- Run tests with make check"}
    assert path.read_text() == "- Run tests with make check\n"
    one, two = (system_of(r.body) for r in api.requests)
    assert "Run tests with make check" not in one
    assert "- Run tests with make check" in two
    assert str(path) in one and str(path) in two  # the model knows where its memory lives


async def test_memory_shows_its_first_200_lines(workspace: Path, api: Any, tmp_path: Path) -> None:
    path = memory_file(workspace)
    path.parent.mkdir(parents=True)
    path.write_text("".join(f"note {i}\n" for i in range(1, 251)))
    api.enqueue(Turn(text="ok"))
    async with editor(workspace, env=api_env(api, tmp_path)) as ed:
        await ed.ask("hello")
    system = system_of(api.requests[0].body)
    assert "note 200\n" in system + "\n" and "note 201" not in system
    assert "first 200 of 250 lines" in system


async def test_the_agent_edits_its_memory_without_a_question(
    workspace: Path, tmp_path: Path
) -> None:
    path = memory_file(workspace)
    script = {
        "turns": [
            {
                "tool_calls": [
                    {
                        "name": "write_file",
                        "input": {"file_path": str(path), "content": "- prefers tabs\n"},
                    }
                ]
            },
            {"text": "noted"},
        ]
    }
    config = tmp_path / "config"
    config.mkdir()
    async with editor(workspace, script=script, env={"AGENT_LS_CONFIG_DIR": str(config)}) as ed:
        await ed.ask("remember that I prefer tabs")
        assert ed.confirmations == []
        assert ed.edit_requests == []  # written directly: no preview for the agent's own notes
    assert path.read_text() == "- prefers tabs\n"


async def test_a_changed_memory_does_not_send_thinking_into_another_conversation(
    workspace: Path, api: Any, tmp_path: Path
) -> None:
    """Claude 5 thinking blocks are bound to the conversation they were made in: after the
    memory (so the system prompt) changed, the API answers 400 to one sent back; the next ask
    leaves the earlier ask's thinking out and keeps the rest of the history."""
    api.enqueue(
        Turn(thinking="The user greets me.", text="Hello."),
        Turn(thinking="Now the user asks again.", text="Again."),
        Turn(text="Third."),
    )
    env = api_env(api, tmp_path)
    async with editor(workspace, env=env) as ed:
        first = await ed.ask("hello")
        assert first["stopReason"] == "end_turn", first
        second = await ed.ask("and again", sessionId=first["sessionId"])  # same conversation
        assert second["stopReason"] == "end_turn", second
        memory = memory_file(workspace)
        memory.parent.mkdir(parents=True, exist_ok=True)
        memory.write_text("- the tests run with pytest\n")
        third = await ed.ask("once more", sessionId=first["sessionId"])
    assert third["stopReason"] == "end_turn", third
    assert api.rejections == []
    bodies = [r.body for r in api.requests]
    assert "the tests run with pytest" in system_of(bodies[2])
    thoughts = [
        b["thinking"]
        for m in bodies[1]["messages"] + bodies[2]["messages"]
        for b in m["content"]
        if isinstance(b, dict) and b.get("type") == "thinking"
    ]
    # Unchanged system prompt: sent back as made; changed: left out, the text kept.
    assert thoughts == ["The user greets me."]
    replies = [m for m in bodies[2]["messages"] if m["role"] == "assistant"]
    texts = [b.get("text") for m in replies for b in m["content"]]
    assert texts == ["Hello.", "Again."]
