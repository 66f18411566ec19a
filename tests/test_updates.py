"""Every ``agent/update`` the agent sends has exactly the shape ``ports/updates.py`` declares.

The shapes are read from the TypedDicts at run time (``typing.get_type_hints``), so a builder
that misspells a key, drops a required one, or sends a value outside a Literal turns a test red.
"""

from __future__ import annotations

import types
import typing
from pathlib import Path
from typing import Any, Literal, NotRequired, Union, get_args, get_origin, get_type_hints

import pytest

from agent_ls.agent.loop import AgentLoop
from agent_ls.agent.session import Session
from agent_ls.models.script import ScriptModel
from agent_ls.ports import updates
from agent_ls.ports.editor import Decision
from agent_ls.settings import Settings
from agent_ls.tools.registry import default_tools
from agent_ls.workspace import Workspace
from tests.editor_sim import editor
from tests.fakes import FakePort


def problems(value: Any, hint: Any, where: str = "update") -> list[str]:
    """What is wrong with ``value`` as a ``hint`` (a TypedDict, Literal, list, union...)."""
    if hint is Any:
        return []
    origin = get_origin(hint)
    if origin is NotRequired:
        return problems(value, get_args(hint)[0], where)
    if typing.is_typeddict(hint):
        if not isinstance(value, dict):
            return [f"{where}: {value!r} is not an object ({hint.__name__})"]
        fields = get_type_hints(hint, include_extras=True)
        found = [f"{where}: unknown key {k!r} ({hint.__name__})" for k in value if k not in fields]
        found += [
            f"{where}: missing key {k!r} ({hint.__name__})"
            for k in sorted(hint.__required_keys__)
            if k not in value
        ]
        for key in value.keys() & fields.keys():
            found += problems(value[key], fields[key], f"{where}.{key}")
        return found
    if origin is Literal:
        return [] if value in get_args(hint) else [f"{where}: {value!r} not in {get_args(hint)}"]
    if origin in (Union, types.UnionType):
        options = [problems(value, option, where) for option in get_args(hint)]
        return [] if any(not p for p in options) else min(options, key=len)
    if origin is list:
        if not isinstance(value, list):
            return [f"{where}: {value!r} is not a list"]
        (item,) = get_args(hint)
        return [p for i, v in enumerate(value) for p in problems(v, item, f"{where}[{i}]")]
    if hint is type(None):
        return [] if value is None else [f"{where}: {value!r} is not null"]
    if hint is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        return [] if ok else [f"{where}: {value!r} is not a number"]
    if hint in (str, int, bool):
        ok = isinstance(value, hint) and (hint is bool or not isinstance(value, bool))
        return [] if ok else [f"{where}: {value!r} is not {hint.__name__}"]
    raise AssertionError(f"{where}: no check for {hint!r}")


def update_problems(update: Any) -> list[str]:
    kind = update.get("sessionUpdate") if isinstance(update, dict) else None
    if kind not in updates.KINDS:
        return [f"unknown sessionUpdate {kind!r}"]
    return problems(update, updates.KINDS[kind], kind)


# -- the checker itself ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("update", "fragment"),
    [
        ({"sessionUpdate": "tool_call_update", "toolCallID": "t"}, "unknown key 'toolCallID'"),
        ({"sessionUpdate": "tool_call_update"}, "missing key 'toolCallId'"),
        ({"sessionUpdate": "tool_call_update", "toolCallId": "t", "status": "done"}, "'done'"),
        (
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "t",
                "content": [{"type": "content", "content": {"type": "text", "txt": "x"}}],
            },
            "unknown key 'txt'",
        ),
        ({"sessionUpdate": "usage_update", "used": "1", "size": 2}, "'1' is not int"),
        ({"sessionUpdate": "agent_message", "content": {}}, "unknown sessionUpdate"),
    ],
)
def test_the_checker_finds_a_wrong_shape(update: dict[str, Any], fragment: str) -> None:
    found = update_problems(update)
    assert any(fragment in p for p in found), found


def test_every_kind_of_the_contract_is_declared() -> None:
    assert set(updates.KINDS) == {
        "agent_message_chunk",
        "agent_thought_chunk",
        "tool_call",
        "tool_call_update",
        "plan",
        "usage_update",
        "current_mode_update",
    }
    assert set(get_args(updates.ToolKind)) == {
        "read", "edit", "delete", "move", "search", "execute", "think", "fetch", "other",
    }  # fmt: skip
    assert set(get_args(updates.ToolCallStatus)) == {
        "pending",
        "in_progress",
        "completed",
        "failed",
    }


def test_builders_make_valid_updates() -> None:
    built = [
        updates.message_chunk("hi"),
        updates.thought_chunk("hmm"),
        updates.tool_call(
            "t1",
            title="Read a.py",
            kind="read",
            status="pending",
            locations=[{"path": "/w/a.py", "line": 3}],
            raw_input={"file_path": "a.py"},
        ),
        updates.tool_call_update("t1", status="in_progress"),
        updates.tool_call_update("t1", content=[updates.text_item("out")]),
        updates.tool_call_update("t1", status="completed", raw_output=None),
        updates.usage_update(10, 200_000, 0.01),
        updates.current_mode_update("plan"),
    ]
    for update in built:
        assert update_problems(update) == [], update
    assert updates.tool_call_update("t1", status="completed", raw_output=None)["rawOutput"] is None
    assert "rawOutput" not in updates.tool_call_update("t1")


# -- what a scripted run really sends ----------------------------------------------------

SCRIPT: dict[str, Any] = {
    "chunk_size": 4,
    "turns": [
        {
            "thinking": "Look around first.",
            "text": "Reading.",
            "tool_calls": [
                {"name": "read_file", "input": {"file_path": "app.py"}},
                {"name": "list_files", "input": {"pattern": "*.md"}},
                {"name": "grep_search", "input": {"pattern": "greet"}},
                {"name": "no_such_tool", "input": {"x": 1}},
                {"name": "read_file", "input": {"offset": 0}},
                {"name": "read_file", "input": {"file_path": "missing.py"}},
            ],
        },
        {
            "text": "Editing.",
            "tool_calls": [
                {
                    "name": "edit_file",
                    "input": {
                        "file_path": "app.py",
                        "old_string": '"Hello "',
                        "new_string": '"Hi "',
                    },
                },
                {"name": "write_file", "input": {"file_path": "new.py", "content": "x = 1\n"}},
            ],
        },
        {"tool_calls": [{"name": "run_shell", "input": {"command": "printf 'one\\ntwo\\n'"}}]},
        {"tool_calls": [{"name": "get_diagnostics", "input": {}}]},
        {"text": "Done."},
    ],
}


def assert_all_valid(sent: list[Any]) -> None:
    bad = {i: found for i, u in enumerate(sent) if (found := update_problems(u))}
    assert not bad, {i: (sent[i], found) for i, found in bad.items()}


def assert_covers_the_run(sent: list[dict[str, Any]]) -> None:
    """The run went through every update the loop and the tools build."""
    kinds = {u["sessionUpdate"] for u in sent}
    assert {"agent_message_chunk", "agent_thought_chunk", "tool_call", "tool_call_update"} <= kinds
    assert "usage_update" in kinds
    calls = {
        u["rawInput"].get("file_path", u["title"]): u
        for u in sent
        if u["sessionUpdate"] == "tool_call"
    }
    assert calls["no_such_tool"]["status"] == "failed"
    items = [
        c["type"]
        for u in sent
        if u["sessionUpdate"] == "tool_call_update"
        for c in u.get("content", [])
    ]
    assert "diff" in items and "content" in items
    statuses = {u.get("status") for u in sent if u["sessionUpdate"] == "tool_call_update"}
    assert {"in_progress", "completed", "failed"} <= statuses


async def test_every_update_of_a_scripted_run_has_its_declared_shape(workspace: Path) -> None:
    port = FakePort(decisions=[Decision.ALLOW] * 4)
    loop = AgentLoop(
        session=Session(),
        model=ScriptModel(SCRIPT),
        tools=default_tools(),
        workspace=Workspace([workspace], buffers=port.open_buffer),
        port=port,
        settings=Settings(mode="acceptEdits"),
        system_prompt="test",
    )
    result = await loop.run("go")
    assert result.stop_reason == "end_turn", result
    assert_all_valid(port.updates)
    assert_covers_the_run(port.updates)


async def test_every_agent_update_on_the_wire_has_its_declared_shape(workspace: Path) -> None:
    """Through the real server: coalesced chunks, follow-agent, and agent.setMode too."""
    async with editor(workspace, script=SCRIPT, init_options={"mode": "acceptEdits"}) as ed:
        ed.answers = ["Allow"] * 4
        ed.open("app.py")
        result = await ed.ask("go")
        assert result["stopReason"] == "end_turn", result
        await ed.command("agent.setMode", {"sessionId": result["sessionId"], "mode": "plan"})
        assert all(set(n) == {"sessionId", "update"} for n in ed.updates)
        sent = [n["update"] for n in ed.updates]
    assert_all_valid(sent)
    assert_covers_the_run(sent)
    assert sent[-1] == {"sessionUpdate": "current_mode_update", "currentModeId": "plan"}
