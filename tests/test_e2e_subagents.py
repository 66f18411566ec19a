"""Sub-agents through the whole path: editor → server → anthropic SDK → fake API (issue 15)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp

from tests.editor_sim import EditorSim, editor
from tests.fakeapi import FakeAPI, Turn


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


def task(call_id: str, description: str, prompt: str, agent: str | None = None) -> Any:
    args = {"description": description, "prompt": prompt}
    if agent is not None:
        args["agent"] = agent
    return ("task", args, call_id)


def system_text(body: dict[str, Any]) -> str:
    system = body.get("system") or ""
    return system if isinstance(system, str) else "".join(b["text"] for b in system)


def tool_names(body: dict[str, Any]) -> list[str]:
    return [t["name"] for t in body.get("tools") or []]


def message_texts(body: dict[str, Any]) -> str:
    return json.dumps(body["messages"])


def updates_for(ed: EditorSim, call_id: str) -> list[dict[str, Any]]:
    return [
        u
        for u in ed.of_kind("tool_call") + ed.of_kind("tool_call_update")
        if u.get("toolCallId") == call_id
    ]


def parent_of(update: dict[str, Any]) -> str | None:
    return ((update.get("_meta") or {}).get("agentLs") or {}).get("parentToolCallId")


def task_result(ed: EditorSim, call_id: str) -> dict[str, Any]:
    done = [u for u in updates_for(ed, call_id) if u.get("status") in ("completed", "failed")]
    assert len(done) == 1, updates_for(ed, call_id)
    return done[0]


async def gone(pid: int, seconds: float = 5.0) -> bool:
    """Whether process ``pid`` is gone within ``seconds``."""
    for _ in range(int(seconds / 0.05)):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        await asyncio.sleep(0.05)
    return False


def sessions_dir() -> Path:
    return Path(os.environ["AGENT_LS_DATA_DIR"]) / "sessions"


async def test_child_has_a_fresh_history_and_streams_under_its_task(
    workspace: Path, api: Any
) -> None:
    api.enqueue(
        Turn(
            text="Delegating.",
            tool_uses=[task("toolu_t1", "Find greet", "Where is greet?", "explore")],
        ),
        Turn(text="Searching. ", tool_uses=[("grep_search", {"pattern": "def greet"}, "toolu_c1")]),
        Turn(text="greet is defined in app.py, line 1."),
        Turn(text="It is in app.py."),
    )
    async with editor(workspace, env=env_for(api)) as ed:
        result = await ed.ask("Where is greet defined? Use a sub-agent.")
        session_id = result["sessionId"]
    assert result["stopReason"] == "end_turn", result
    bodies = api.bodies()
    assert len(bodies) == 4
    parent, child = bodies[0], bodies[1]
    # The child's first request holds its prompt and nothing of the parent's conversation.
    assert len(child["messages"]) == 1
    assert "Where is greet?" in message_texts(child)
    assert "Use a sub-agent" not in message_texts(child)
    assert system_text(child).startswith("You are an exploration sub-agent")
    assert "# Environment" in system_text(child)
    assert system_text(parent) != system_text(child)
    # Depth 1: the child has no task tool; explore has only its read-only tools.
    assert "task" in tool_names(parent)
    assert sorted(tool_names(child)) == sorted(
        ["read_file", "list_files", "grep_search", "get_diagnostics", "run_shell"]
    )
    # The parent's next request sees only the child's final answer as the task's result.
    assert "greet is defined in app.py, line 1." in message_texts(bodies[3])
    assert "Searching." not in message_texts(bodies[3])
    assert "toolu_c1" not in message_texts(bodies[3])

    # Stream: the task card, the nested call, the child's text on the card.
    card = [u for u in ed.of_kind("tool_call") if u["toolCallId"] == "toolu_t1"]
    assert card and card[0]["kind"] == "other" and card[0]["title"] == "Find greet"
    assert parent_of(card[0]) is None
    nested = updates_for(ed, "toolu_c1")
    assert nested and all(parent_of(u) == "toolu_t1" for u in nested)
    assert nested[0]["sessionUpdate"] == "tool_call"
    assert ed.streamed_text() == result["text"] == "Delegating.\n\nIt is in app.py."
    card_texts = [
        item["content"]["text"]
        for u in updates_for(ed, "toolu_t1")
        for item in u.get("content") or []
        if item.get("type") == "content"
    ]
    assert any("Searching." in t for t in card_texts)
    assert task_result(ed, "toolu_t1")["rawOutput"] == "greet is defined in app.py, line 1."
    # Every model call reports usage; the run's usage includes the child's two calls.
    usage = ed.of_kind("usage_update")
    assert len(usage) == 4
    assert sum(1 for u in usage if parent_of(u) == "toolu_t1") == 2
    assert result["usage"]["inputTokens"] == 40 and result["usage"]["outputTokens"] == 20
    # claude-sonnet-5-5: $2 in, $10 out per million (its model page)
    assert result["costUsd"] == pytest.approx((40 * 2 + 20 * 10) / 1e6, abs=1e-9)

    # The child's transcript is saved beside the session's.
    children = list((sessions_dir() / session_id / "agents").glob("*.jsonl"))
    assert len(children) == 1
    saved = children[0].read_text()
    assert "Searching." in saved and "toolu_t1" in saved
    assert "Searching." not in (sessions_dir() / f"{session_id}.jsonl").read_text()

    # Resuming replays only the parent's conversation.
    api.enqueue(Turn(text="Still app.py."))
    async with editor(workspace, env=env_for(api)) as ed:
        await ed.command("agent.resume", {"sessionId": session_id})
        again = await ed.ask("And again?")
    assert again["stopReason"] == "end_turn"
    resumed = api.bodies()[-1]
    assert "greet is defined in app.py, line 1." in message_texts(resumed)
    assert "Searching." not in message_texts(resumed)


async def test_parallel_children_are_in_flight_at_once(workspace: Path, api: Any) -> None:
    api.enqueue(
        Turn(
            tool_uses=[
                task("toolu_a", "Look at app", "Describe app.py", "explore"),
                task("toolu_b", "Look at notes", "Describe notes.md", "explore"),
            ]
        ),
        Turn(text="child answer one", latency=0.6),
        Turn(text="child answer two", latency=0.6),
        Turn(text="Both done."),
    )
    async with editor(workspace, env=env_for(api)) as ed:
        started = time.monotonic()
        result = await ed.ask("Look at both files")
        elapsed = time.monotonic() - started
    assert result["stopReason"] == "end_turn", result
    assert api.peak_in_flight == 2
    outputs = {task_result(ed, c)["rawOutput"] for c in ("toolu_a", "toolu_b")}
    assert outputs == {"child answer one", "child answer two"}
    assert elapsed > 0.6  # sanity: the children did wait on the model
    last = message_texts(api.bodies()[-1])
    assert "child answer one" in last and "child answer two" in last


async def test_cancel_stops_every_child_and_its_processes(workspace: Path, api: Any) -> None:
    pid_file = workspace / "child.pid"
    api.enqueue(
        Turn(
            tool_uses=[
                task("toolu_a", "Run the slow thing", "Run it"),
                task("toolu_b", "Write a lot", "Write"),
            ]
        ),
    )
    # Which child gets which answer is up to the race; both are long.
    api.enqueue(
        Turn(tool_uses=[("run_shell", {"command": f"echo $$ > {pid_file}; sleep 30"}, "toolu_sh")]),
        Turn(text=["word "] * 500, chunk_delay=0.02),
    )
    async with editor(
        workspace,
        env=env_for(api),
        # $$ is read as a host pid below; the sandbox's own pid namespace would renumber it
        init_options={"mode": "bypassPermissions", "sandbox": "off"},
    ) as ed:
        ask = asyncio.ensure_future(ed.ask("Do both"))
        for _ in range(3000):
            await asyncio.sleep(0.01)
            if pid_file.exists() and pid_file.read_text().strip():
                break
        assert pid_file.exists(), "the child's command never started"
        await asyncio.sleep(0.2)
        pid = int(pid_file.read_text())
        assert await ed.command("agent.cancel", {}) == {"cancelled": True}
        result = await asyncio.wait_for(ask, 10)
        assert result["stopReason"] == "cancelled"
        # The child's command is gone, and so is the other child's model stream.
        assert await gone(pid), "the child's shell command survived the cancel"
        assert api.wait_disconnect(1, timeout=5)
        # The session takes the next ask; its history has "cancelled" results for both tasks.
        api.enqueue(Turn(text="ready again"))
        again = await ed.ask("next")
        assert again["stopReason"] == "end_turn" and again["text"] == "ready again"
    cancelled = [
        block
        for m in api.bodies()[-1]["messages"]
        if isinstance(m["content"], list)
        for block in m["content"]
        if block.get("type") == "tool_result" and block["tool_use_id"] in ("toolu_a", "toolu_b")
    ]
    assert len(cancelled) == 2
    assert all("cancelled" in json.dumps(b["content"]) for b in cancelled)


async def test_a_childs_edit_is_previewed_and_partly_accepted(workspace: Path, api: Any) -> None:
    (workspace / "m.py").write_text("a = 1\nb = 2\nc = 3\nd = 4\ne = 5\nf = 6\ng = 1\n")
    edit = {"file_path": "m.py", "old_string": "= 1", "new_string": "= 100", "replace_all": True}
    api.enqueue(
        Turn(tool_uses=[task("toolu_t", "Bump the ones", "Change every '= 1' in m.py to '= 100'")]),
        Turn(tool_uses=[("read_file", {"file_path": "m.py"}, "toolu_r")]),
        Turn(tool_uses=[("edit_file", edit, "toolu_e")]),
        Turn(text="Only the last one landed."),
        Turn(text="The user kept one change."),
    )
    async with editor(
        workspace,
        env=env_for(api),
        capabilities=pytest_lsp.client_capabilities("visual-studio-code"),
    ) as ed:
        ed.open("m.py")
        ed.accept_hunk = lambda path, index, edit: index == 1
        result = await ed.ask("Bump the ones with a sub-agent")
        assert result["stopReason"] == "end_turn", result
        assert ed.text("m.py") == "a = 1\nb = 2\nc = 3\nd = 4\ne = 5\nf = 6\ng = 100\n"
        assert len(ed.edit_requests) == 1
        request = ed.edit_requests[0]
        assert request.label is not None and request.label.startswith("[general: Bump the ones] ")
        annotations = request.edit.change_annotations or {}
        assert len(annotations) == 2
        assert all(
            (a.description or "").startswith("[general: Bump the ones]")
            for a in annotations.values()
        )
        edit_updates = updates_for(ed, "toolu_e")
        assert all(parent_of(u) == "toolu_t" for u in edit_updates)
        diffs = [i for u in edit_updates for i in u.get("content") or [] if i["type"] == "diff"]
        assert diffs, "the child's edit was not shown as a diff"
        outcome = task_result(ed, "toolu_e")["rawOutput"]
        assert outcome == {"status": "partial", "landed": [1], "hunks": 2}
    # The child was told the truth, and the parent got the child's answer.
    child_last = message_texts(api.bodies()[3])
    assert "rejected the others" in child_last
    assert "Only the last one landed." in message_texts(api.bodies()[4])


async def test_a_childs_question_names_the_agent(workspace: Path, api: Any) -> None:
    api.enqueue(
        Turn(tool_uses=[task("toolu_t", "Clean up", "Remove build output")]),
        Turn(tool_uses=[("run_shell", {"command": "rm -rf build"}, "toolu_rm")]),
        Turn(text="I was not allowed."),
        Turn(text="Not done."),
    )
    async with editor(workspace, env=env_for(api), init_options={"sandbox": "off"}) as ed:
        ed.answers = ["Deny"]
        result = await ed.ask("clean")
        assert result["stopReason"] == "end_turn", result
        assert len(ed.confirmations) == 1
        assert ed.confirmations[0].startswith("[general: Clean up] ")
        assert "rm -rf build" in ed.confirmations[0]


async def test_project_agent_body_is_its_system_prompt(workspace: Path, api: Any) -> None:
    agents = workspace / ".claude" / "agents"
    agents.mkdir(parents=True)
    (agents / "reviewer.md").write_text(
        "---\nname: reviewer\ndescription: Reviews code for bugs.\ntools: Read, Grep, Glob\n"
        "model: inherit\ncolor: red\n---\nYou are a meticulous reviewer. Report bugs only.\n"
    )
    (agents / "broken.md").write_text("---\nname: [unclosed\ndescription: x\n---\nbody\n")
    (workspace / "AGENTS.md").write_text("Always answer in English.\n")
    api.enqueue(
        Turn(tool_uses=[task("toolu_t", "Review app", "Review app.py", "reviewer")]),
        Turn(text="No bugs."),
        Turn(text="The reviewer found no bugs."),
    )
    async with editor(workspace, env=env_for(api)) as ed:
        result = await ed.ask("review")
        status = await ed.command("agent.status", {})
        shown = [m.message for m in ed.client.messages]
    assert result["stopReason"] == "end_turn", result
    parent, child = api.bodies()[0], api.bodies()[1]
    assert system_text(child).startswith("You are a meticulous reviewer. Report bugs only.")
    assert "Always answer in English." in system_text(child)
    assert sorted(tool_names(child)) == ["grep_search", "list_files", "read_file"]
    description = next(t["description"] for t in parent["tools"] if t["name"] == "task")
    assert "- reviewer: Reviews code for bugs." in description
    assert "- explore:" in description and "- general:" in description
    assert "broken" not in description
    # The bad file is skipped and reported, never a crash.
    assert any("broken.md" in m and "YAML" in m for m in shown), shown
    names = [a["name"] for a in status["agents"]["available"]]
    assert "reviewer" in names and "broken" not in names
    assert any("broken.md" in p for p in status["agents"]["problems"])


async def test_unknown_agent_name_is_an_error_listing_the_agents(workspace: Path, api: Any) -> None:
    api.enqueue(
        Turn(tool_uses=[task("toolu_t", "Plan it", "Make a plan", "planner")]),
        Turn(text="No such agent; doing it myself."),
    )
    async with editor(workspace, env=env_for(api)) as ed:
        result = await ed.ask("plan")
        card = task_result(ed, "toolu_t")
    assert result["stopReason"] == "end_turn", result
    assert card["status"] == "failed"
    assert len(api.bodies()) == 2  # no child ever asked the model
    sent = [
        b
        for m in api.bodies()[1]["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]
    text = json.dumps(sent[-1]["content"])
    assert sent[-1]["is_error"] is True
    assert "planner" in text and "general" in text and "explore" in text


REPO = Path(__file__).resolve().parents[1]
EXPLORE_TOOLS = ["read_file", "list_files", "grep_search", "get_diagnostics", "run_shell"]


def tool_results(body: dict[str, Any]) -> dict[str, str]:
    return {
        block["tool_use_id"]: json.dumps(block["content"])
        for m in body["messages"]
        if isinstance(m["content"], list)
        for block in m["content"]
        if block.get("type") == "tool_result"
    }


async def test_children_call_the_sessions_mcp_tools_over_its_connection(
    workspace: Path, api: Any, tmp_path: Path
) -> None:
    starts = tmp_path / "starts"
    faulty = {
        "command": sys.executable,
        "args": ["-m", "tests.mcp_servers.faulty"],
        "cwd": str(REPO),
        "env": {"FAULTY_STARTS": str(starts)},
    }
    api.enqueue(
        Turn(tool_uses=[task("toolu_t1", "Echo it", "Echo 'from child'")]),
        Turn(tool_uses=[("mcp__f__echo", {"text": "from child"}, "toolu_m1")]),
        Turn(text="The server said it back."),
        Turn(tool_uses=[task("toolu_t2", "Look around", "Echo 'again'", "explore")]),
        Turn(tool_uses=[("mcp__f__echo", {"text": "again"}, "toolu_m2")]),
        Turn(text="Explored."),
        Turn(text="All done."),
    )
    options = {"mcpServers": {"f": faulty}}
    async with editor(
        workspace, env=env_for(api), init_options=options, answers=["Allow for this session"]
    ) as ed:
        result = await ed.ask("Use sub-agents with the MCP server")
        assert result["stopReason"] == "end_turn", result
        status = await ed.command("agent.status", {})
    bodies = api.bodies()
    assert len(bodies) == 7
    parent_mcp = [n for n in tool_names(bodies[0]) if n.startswith("mcp__f__")]
    assert "mcp__f__echo" in parent_mcp and "mcp__f__crash" in parent_mcp
    # general gets every tool but task, MCP ones included; explore only the read-only ones.
    builtins = [n for n in tool_names(bodies[0]) if n != "task" and not n.startswith("mcp__")]
    assert tool_names(bodies[1]) == builtins + parent_mcp
    assert sorted(tool_names(bodies[4])) == sorted([*EXPLORE_TOOLS, "mcp__f__echo"])
    # The server's answers reached the children, and only their final texts the parent.
    assert "echo: from child" in tool_results(bodies[2])["toolu_m1"]
    assert "echo: again" in tool_results(bodies[5])["toolu_m2"]
    assert "echo: from child" not in message_texts(bodies[6])
    # The child's MCP call is nested under its task, titled like the parent's MCP calls.
    for call, parent in (("toolu_m1", "toolu_t1"), ("toolu_m2", "toolu_t2")):
        nested = updates_for(ed, call)
        assert nested and all(parent_of(u) == parent for u in nested)
        assert nested[0]["title"] == "f: echo" and nested[0]["kind"] == "other"
        assert task_result(ed, call)["status"] == "completed"
    # The same permissions: the question names the child; its grant is the session's, so
    # the second child's call did not ask again.
    assert len(ed.confirmations) == 1
    assert ed.confirmations[0].startswith("[general: Echo it] ")
    assert "'echo'" in ed.confirmations[0]
    assert status["grants"] == ["mcp__f__echo"]
    # One server process for the session: the children used the parent's connection.
    assert len(starts.read_text().split()) == 1


async def test_a_child_over_its_time_limit_is_stopped_alone(workspace: Path, api: Any) -> None:
    api.enqueue(
        Turn(
            tool_uses=[
                task("toolu_a", "Quick look", "Say hello", "explore"),
                task("toolu_b", "Slow look", "Say a lot", "explore"),
            ]
        ),
    )
    # Which child gets which answer is up to the race: one is quick, one streams for ~15 s.
    api.enqueue(
        Turn(text="quick answer"),
        Turn(text=["Reading ", "the ", "code. "] + ["more "] * 300, chunk_delay=0.05),
        Turn(text="One of them timed out."),
    )
    async with editor(workspace, env=env_for(api), init_options={"subagentTimeoutMs": 3000}) as ed:
        result = await ed.ask("Look twice")
        assert result["stopReason"] == "end_turn", result
        assert result["text"] == "One of them timed out."
        assert api.wait_disconnect(1, timeout=5)  # its model stream was closed
        cards = {c: task_result(ed, c) for c in ("toolu_a", "toolu_b")}
        quick = [c for c in cards.values() if c["status"] == "completed"]
        slow = [c for c in cards.values() if c["status"] == "failed"]
        assert len(quick) == 1 and quick[0]["rawOutput"] == "quick answer"
        assert len(slow) == 1
        said = slow[0]["rawOutput"]
        assert "timed out" in said and "3 s" in said and "subagentTimeoutMs" in said
        assert "Reading the code." in said  # what the child had written so far
        # The parent's model got the same: the sibling's answer, the timeout with the text.
        sent = " ".join(tool_results(api.bodies()[-1]).values())
        assert "quick answer" in sent and "timed out" in sent and "Reading the code." in sent
        # The session takes the next ask.
        api.enqueue(Turn(text="ready again"))
        again = await ed.ask("next")
        assert again["stopReason"] == "end_turn" and again["text"] == "ready again"


async def test_a_timed_out_childs_processes_are_stopped(workspace: Path, api: Any) -> None:
    pid_file = workspace / "child.pid"
    api.enqueue(
        Turn(tool_uses=[task("toolu_t", "Run the slow thing", "Run it")]),
        Turn(
            text="Starting the build.",
            tool_uses=[("run_shell", {"command": f"echo $$ > {pid_file}; sleep 30"}, "toolu_sh")],
        ),
        Turn(text="It took too long."),
    )
    options = {"mode": "bypassPermissions", "sandbox": "off", "subagentTimeoutMs": 2000}
    async with editor(workspace, env=env_for(api), init_options=options) as ed:
        result = await ed.ask("Build it")
        assert result["stopReason"] == "end_turn", result
        assert pid_file.exists(), "the child's command never started"
        pid = int(pid_file.read_text())
        assert await gone(pid), "the timed-out child's shell command survived"
        card = task_result(ed, "toolu_t")
        assert card["status"] == "failed"
        assert "timed out" in card["rawOutput"] and "Starting the build." in card["rawOutput"]
        # Its card does not stay "in progress" while the parent goes on.
        shell = task_result(ed, "toolu_sh")
        assert shell["status"] == "failed" and parent_of(shell) == "toolu_t"
        assert "subagentTimeoutMs" in shell["rawOutput"]
