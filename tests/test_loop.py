"""The agent loop in-process: script model, real tools, a fake editor port."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agent_ls.agent.loop import AgentLoop
from agent_ls.agent.session import Session
from agent_ls.models.script import ScriptModel
from agent_ls.ports.editor import Buffer, Decision
from agent_ls.ports.messages import ToolResultBlock
from agent_ls.settings import Settings
from agent_ls.tools.registry import default_tools
from agent_ls.workspace import Workspace
from tests.fakes import FakePort


def make_loop(
    root: Path, turns: list[dict[str, Any]], port: FakePort | None = None, **settings: Any
) -> tuple[AgentLoop, FakePort, Session]:
    port = port or FakePort()
    session = Session()
    loop = AgentLoop(
        session=session,
        model=ScriptModel({"turns": turns}),
        tools=default_tools(),
        workspace=Workspace([root], buffers=port.open_buffer),
        port=port,
        settings=Settings(**settings),
        system_prompt="test",
    )
    return loop, port, session


def tool_results(session: Session) -> list[ToolResultBlock]:
    return [b for m in session.history for b in m.content if isinstance(b, ToolResultBlock)]


async def test_errors_go_back_to_the_model(workspace: Path) -> None:
    turns = [
        {
            "tool_calls": [
                {"name": "no_such_tool", "input": {}},
                {"name": "read_file", "input": {"offset": 3}},
                {"name": "read_file", "input": {"file_path": "missing.py"}},
            ]
        },
        {"text": "recovered"},
    ]
    loop, _port, session = make_loop(workspace, turns)
    result = await loop.run("go")
    assert result.stop_reason == "end_turn" and result.text == "recovered"
    unknown, invalid, missing = tool_results(session)
    assert unknown.is_error and "Unknown tool 'no_such_tool'" in unknown.content
    assert "read_file" in unknown.content  # lists what exists
    assert invalid.is_error and "file_path" in invalid.content
    assert missing.is_error and "does not exist" in missing.content


async def test_edit_requires_read_and_rejects_stale(workspace: Path) -> None:
    edit = {
        "name": "edit_file",
        "input": {"file_path": "app.py", "old_string": "Hello ", "new_string": "Hi "},
    }
    turns = [
        {"tool_calls": [edit]},
        {"tool_calls": [{"name": "read_file", "input": {"file_path": "app.py"}}]},
        {"tool_calls": [edit]},
        {"text": "done"},
    ]
    path = (workspace / "app.py").resolve()
    loop, _port, session = make_loop(workspace, turns)
    result = await loop.run("go")
    first, read, second = tool_results(session)
    assert first.is_error and "not read this file" in first.content
    assert not read.is_error and "     2\t" in read.content
    assert not second.is_error and "Edited app.py" in second.content
    assert "Hi " in path.read_text()
    assert result.stop_reason == "end_turn"


async def test_edit_over_changed_buffer_is_refused(workspace: Path) -> None:
    path = (workspace / "app.py").resolve()
    port = FakePort()
    port.buffers[path] = Buffer(path, path.read_text(), 1)
    turns = [
        {"tool_calls": [{"name": "read_file", "input": {"file_path": "app.py"}}]},
        {
            "tool_calls": [
                {
                    "name": "edit_file",
                    "input": {"file_path": "app.py", "old_string": "Hello ", "new_string": "Hi "},
                }
            ]
        },
        {"text": "done"},
    ]
    loop, port, session = make_loop(workspace, turns, port)
    real_stream = loop.model.stream

    def typing_user(request: Any) -> Any:
        # After the read, the user types in the buffer.
        if sum(1 for m in request.messages if m.role == "assistant") == 1:
            port.buffers[path] = Buffer(path, "# typed\n" + port.buffers[path].text, 2)
        return real_stream(request)

    loop.model.stream = typing_user  # type: ignore[method-assign]
    await loop.run("go")
    _read, edit = tool_results(session)
    assert edit.is_error and "changed in the editor" in edit.content
    assert port.proposals == []


async def test_write_file_refuses_unread_existing_but_creates_new(workspace: Path) -> None:
    turns = [
        {
            "tool_calls": [
                {"name": "write_file", "input": {"file_path": "app.py", "content": "x = 1\n"}},
                {"name": "write_file", "input": {"file_path": "pkg/new.py", "content": "y = 2\n"}},
            ]
        },
        {"text": "ok"},
    ]
    loop, _port, session = make_loop(workspace, turns)
    await loop.run("go")
    overwrite, create = tool_results(session)
    assert overwrite.is_error and "not read" in overwrite.content
    assert "x = 1" not in (workspace / "app.py").read_text()
    assert not create.is_error and (workspace / "pkg/new.py").read_text() == "y = 2\n"


async def test_rejected_edit_is_the_users_decision_not_an_error(workspace: Path) -> None:
    turns = [
        {"tool_calls": [{"name": "read_file", "input": {"file_path": "app.py"}}]},
        {
            "tool_calls": [
                {
                    "name": "edit_file",
                    "input": {"file_path": "app.py", "old_string": "Hello ", "new_string": "Hi "},
                }
            ]
        },
        {"text": "ok"},
    ]
    port = FakePort(accept_edits=False)
    loop, port, session = make_loop(workspace, turns, port)
    await loop.run("go")
    edit = tool_results(session)[1]
    assert not edit.is_error and "The user rejected this edit" in edit.content


async def test_plan_mode_refuses_writes(workspace: Path) -> None:
    turns = [
        {"tool_calls": [{"name": "write_file", "input": {"file_path": "n.py", "content": "1"}}]},
        {"text": "ok"},
    ]
    loop, _port, session = make_loop(workspace, turns)
    session.permissions.mode = "plan"
    await loop.run("go")
    (result,) = tool_results(session)
    assert result.is_error and "plan mode" in result.content
    assert not (workspace / "n.py").exists()


async def test_transient_model_failures_are_retried(workspace: Path) -> None:
    turns = [
        {"fail": {"message": "overloaded", "retryable": True, "times": 2}},
        {"text": "made it"},
    ]
    loop, port, session = make_loop(workspace, turns)
    result = await loop.run("go")
    assert result.stop_reason == "end_turn" and result.text == "made it"
    assert sum("retrying" in m for m in port.progress_messages) == 2
    assert [m.role for m in session.history] == ["user", "assistant"]


async def test_permanent_model_failure_ends_with_error(workspace: Path) -> None:
    turns = [{"fail": {"message": "invalid x-api-key", "retryable": False}}]
    loop, _port, _session = make_loop(workspace, turns)
    result = await loop.run("go")
    assert result.stop_reason == "error" and result.error == "invalid x-api-key"


async def test_cancel_closes_every_tool_use(workspace: Path) -> None:
    turns = [
        {"tool_calls": [{"name": "run_shell", "input": {"command": "sleep 30"}}]},
        {"text": "never"},
    ]
    port = FakePort(decisions=[Decision.ALLOW])
    loop, port, session = make_loop(workspace, turns, port)
    task = asyncio.ensure_future(loop.run("go"))
    for _ in range(200):
        await asyncio.sleep(0.01)
        if port.of_kind("tool_call_update"):
            break
    await asyncio.sleep(0.1)
    task.cancel()
    result = await asyncio.wait_for(task, 2)
    assert result.stop_reason == "cancelled"
    (closed,) = tool_results(session)
    assert "cancelled" in closed.content


async def test_concurrency_safe_reads_run_together(workspace: Path) -> None:
    turns = [
        {
            "tool_calls": [
                {"name": "read_file", "input": {"file_path": "app.py"}},
                {"name": "read_file", "input": {"file_path": "notes.md"}},
            ]
        },
        {"text": "ok"},
    ]
    loop, _port, session = make_loop(workspace, turns)
    await loop.run("go")
    results = tool_results(session)
    assert "app.py" in results[0].content and "notes.md" in results[1].content


def test_agent_core_imports_no_lsp_library() -> None:
    code = (
        "import sys\n"
        "import agent_ls.agent.loop, agent_ls.agent.store, agent_ls.models.script\n"
        "import agent_ls.tools.registry as r; r.default_tools()\n"
        "import agent_ls.safety.permissions, agent_ls.safety.shell, agent_ls.workspace\n"
        "import agent_ls.edits\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('pygls', 'lsprotocol')]\n"
        "print(bad)\n"
        "assert not bad, bad\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("mode", ["acceptEdits", "bypassPermissions"])
async def test_accept_modes_send_edits_without_confirmation(workspace: Path, mode: str) -> None:
    turns = [
        {"tool_calls": [{"name": "write_file", "input": {"file_path": "n.py", "content": "1\n"}}]},
        {"text": "ok"},
    ]
    loop, port, session = make_loop(workspace, turns)
    session.permissions.mode = mode  # type: ignore[assignment]
    await loop.run("go")
    assert port.proposals[0].needs_confirmation is False


async def test_compaction_replaces_history_and_keeps_going(workspace: Path, tmp_path: Path) -> None:
    from agent_ls.agent.store import SessionStore

    turns = [
        {
            "tool_calls": [{"name": "read_file", "input": {"file_path": "app.py"}}],
            "usage": {"input_tokens": 180_000, "output_tokens": 10},
        },
        {
            "text": "SUMMARY: read app.py; next: answer.",
            "usage": {"input_tokens": 5, "output_tokens": 7},
        },
        {"text": "answer after compaction", "usage": {"input_tokens": 100, "output_tokens": 3}},
    ]
    loop, port, session = make_loop(workspace, turns)
    session.store = SessionStore(tmp_path / "sessions")
    result = await loop.run("explain app.py")
    assert result.stop_reason == "end_turn"
    assert result.text == "answer after compaction"
    assert any("compacting the conversation" in m for m in port.progress_messages)
    assert session.compactions == 1
    first = session.history[0]
    assert first.role == "user" and "SUMMARY: read app.py" in first.text()
    # Tokens of every call, the summary's included, are counted.
    assert result.usage.input_tokens == 180_105 and result.usage.output_tokens == 20
    # A resumed session starts from the compacted history.
    resumed = Session.load(session.store, session.id)
    assert "SUMMARY: read app.py" in resumed.history[0].text()
    assert resumed.history[-1].text() == "answer after compaction"


async def test_large_results_are_stored_and_shown_as_head_and_tail(
    workspace: Path, tmp_path: Path
) -> None:
    from agent_ls.agent.store import SessionStore

    turns = [
        {
            "tool_calls": [
                {"name": "run_shell", "input": {"command": "seq 1 20000"}},
            ]
        },
        {"text": "ok"},
    ]
    loop, _port, session = make_loop(workspace, turns)
    session.store = SessionStore(tmp_path / "sessions")
    await loop.run("count")
    (result,) = tool_results(session)
    assert len(result.content) < 25_000
    assert "\n1\n" in result.content[:100] and result.content.rstrip().endswith("20000")
    saved = next(session.store.results_dir(session.id).glob("*.txt"))
    assert "\n10000\n" in saved.read_text()
    assert str(saved) in result.content


async def test_spending_cap_stops_the_run_cleanly(workspace: Path) -> None:
    turns = [
        {
            "tool_calls": [{"name": "read_file", "input": {"file_path": "app.py"}}],
            "usage": {"input_tokens": 1_000_000, "output_tokens": 0},
        },
        {"text": "never reached"},
    ]
    port = FakePort()
    session = Session()
    loop = AgentLoop(
        session=session,
        model=ScriptModel({"turns": turns}, source="claude-sonnet-4-5"),
        tools=default_tools(),
        workspace=Workspace([workspace], buffers=port.open_buffer),
        port=port,
        settings=Settings(maxCostUsd=1.0),
        system_prompt="test",
    )
    result = await loop.run("go")
    assert result.stop_reason == "error"
    assert result.error and "spending cap of $1.00" in result.error
    assert result.cost_usd == 3.0
    assert session.history[-1].role == "user"  # the tool call got its result


def test_price_table_can_be_extended_in_settings() -> None:
    from agent_ls.ports.messages import Usage
    from agent_ls.pricing import cost_usd

    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000)
    assert cost_usd("openai:my-local-model", usage) == 0.0
    assert cost_usd("openai:my-local-model", usage, {"my-local": [1, 2]}) == 3.0
    assert cost_usd("anthropic:claude-sonnet-4-5", usage) == 18.0


async def test_edits_to_one_file_are_serialised_across_sessions(workspace: Path) -> None:
    """Session B edits while A's edit waits for review: B waits, then must read again."""
    edit = {
        "name": "edit_file",
        "input": {"file_path": "app.py", "old_string": "return", "new_string": "return  "},
    }
    turns = [
        {"tool_calls": [{"name": "read_file", "input": {"file_path": "app.py"}}]},
        {"tool_calls": [edit]},
        {"text": "done"},
    ]
    release = asyncio.Event()

    class SlowReviewPort(FakePort):
        async def propose_edit(self, proposal: Any) -> Any:
            if not self.proposals:
                self.proposals.append(proposal)
                await release.wait()  # the user is still looking at A's edit
                self.proposals.pop()
            return await FakePort.propose_edit(self, proposal)

    port = SlowReviewPort()
    loop_a, _, session_a = make_loop(workspace, turns, port)
    loop_b, _, session_b = make_loop(workspace, turns, port)
    run_a = asyncio.ensure_future(loop_a.run("a"))
    for _ in range(200):
        await asyncio.sleep(0.01)
        if port.proposals:
            break
    run_b = asyncio.ensure_future(loop_b.run("b"))
    await asyncio.sleep(0.3)
    assert not run_b.done()  # B is waiting for the file, not editing over A
    release.set()
    await asyncio.gather(run_a, run_b)
    assert not tool_results(session_a)[1].is_error
    refused = tool_results(session_b)[1]
    assert refused.is_error and "changed on disk since you last read it" in refused.content
    assert (workspace / "app.py").read_text().count("return  ") == 1


async def test_junk_paths_are_refused_with_a_clear_message(workspace: Path) -> None:
    turns = [
        {
            "tool_calls": [
                {"name": "write_file", "input": {"file_path": "x" * 300 + ".py", "content": "1"}},
                {
                    "name": "edit_file",
                    "input": {"file_path": "a\u202eb.py", "old_string": "a", "new_string": "b"},
                },
            ]
        },
        {"text": "ok"},
    ]
    loop, _port, session = make_loop(workspace, turns)
    await loop.run("go")
    long_name, bidi = tool_results(session)
    assert (
        long_name.is_error
        and "Refused: the path has a name longer than 255 bytes" in long_name.content
    )
    assert bidi.is_error and "direction-changing" in bidi.content
