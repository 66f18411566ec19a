"""Sub-agent definitions, limits and the shared spending cap (in process, script models)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agent_ls.agent.loop import AgentLoop
from agent_ls.agent.session import Session
from agent_ls.agent.subagents import (
    DefinitionError,
    SubagentCatalog,
    SubagentHost,
    child_model_spec,
    load_definitions,
    parse_definition,
)
from agent_ls.models.script import ScriptModel
from agent_ls.ports.editor import (
    Buffer,
    ConfirmRequest,
    Decision,
    EditOutcome,
    EditProposal,
    Unsupported,
)
from agent_ls.ports.messages import Message, TextBlock, Usage
from agent_ls.ports.model import ModelEvent, ModelRequest, TurnComplete
from agent_ls.settings import Settings
from agent_ls.tools.registry import default_tools
from agent_ls.workspace import Workspace

CLAUDE_AGENT = """---
name: code-reviewer
description: Expert code reviewer. Use PROACTIVELY after changes.
tools: Read, Grep, Glob, Bash
model: inherit
color: blue
---

You are a senior code reviewer.
"""


def test_claude_code_format_works_unchanged(tmp_path: Path) -> None:
    definition = parse_definition(tmp_path / "code-reviewer.md", CLAUDE_AGENT)
    assert definition.name == "code-reviewer"
    assert definition.description == "Expert code reviewer. Use PROACTIVELY after changes."
    assert definition.tools == ("read_file", "grep_search", "list_files", "run_shell")
    assert definition.model == "inherit"
    assert definition.prompt == "You are a senior code reviewer."


def test_tools_as_a_list_and_defaults(tmp_path: Path) -> None:
    listed = parse_definition(
        tmp_path / "a.md", "---\ndescription: d\ntools: [read_file, Task, edit_file]\n---\nbody\n"
    )
    assert listed.name == "a"  # the file's name when the front matter has none
    assert listed.tools == ("read_file", "edit_file")  # never task: depth 1
    every = parse_definition(tmp_path / "b.md", "---\ndescription: d\n---\nbody\n")
    assert every.tools is None and every.model is None
    star = parse_definition(tmp_path / "c.md", "---\ndescription: d\ntools: '*'\n---\nbody\n")
    assert star.tools is None


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("no front matter\n", "does not start with YAML front matter"),
        ("---\ndescription: d\nbody\n", "no closing"),
        ("---\nname: [x\ndescription: d\n---\nbody\n", "not valid YAML"),
        ("---\n- a\n- b\n---\nbody\n", "not a mapping"),
        ("---\nname: ok\n---\nbody\n", "no description"),
        ("---\nname: 'two words'\ndescription: d\n---\nbody\n", "is not a word"),
        ("---\ndescription: d\ntools: 3\n---\nbody\n", "tools must be"),
        ("---\ndescription: d\n---\n\n", "body"),
    ],
)
def test_bad_definitions_say_why(tmp_path: Path, text: str, problem: str) -> None:
    with pytest.raises(DefinitionError, match=problem):
        parse_definition(tmp_path / "x.md", text)


def test_where_definitions_come_from_and_which_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    user = tmp_path / "config"
    monkeypatch.setenv("AGENT_LS_CONFIG_DIR", str(user))
    root = tmp_path / "ws"
    for folder, name, text in [
        (root / ".agent-ls" / "agents", "mine.md", "ours"),
        (root / ".claude" / "agents", "mine.md", "claude's"),
        (root / ".claude" / "agents", "other.md", "claude only"),
        (user / "agents", "other.md", "user's"),
        (user / "agents", "explore.md", "user explore"),
        (user / "agents", "bad.md", "---\nname: [\n---\nx"),
    ]:
        folder.mkdir(parents=True, exist_ok=True)
        body = text if text.startswith("---") else f"---\ndescription: {text}\n---\n{text} body\n"
        (folder / name).write_text(body)
    agents, problems = load_definitions(root)
    assert agents["mine"].description == "ours"
    assert agents["other"].description == "claude only"
    assert agents["explore"].description == "user explore"  # a file may replace a built-in
    assert agents["general"].source == "built-in"
    assert len(problems) == 1 and "bad.md" in problems[0]


def test_model_names() -> None:
    session = "anthropic:claude-sonnet-5-5"
    assert child_model_spec(None, session) is None
    assert child_model_spec("inherit", session) is None
    assert child_model_spec("haiku", session) == "anthropic:claude-haiku-5-5"
    assert child_model_spec("fable", session) == "anthropic:claude-fable-5-2"
    assert child_model_spec("haiku", "openai:gpt-5") is None  # an alias of another provider
    assert child_model_spec("gpt-5-mini", "openai:gpt-5") == "openai:gpt-5-mini"
    assert child_model_spec("openai:gpt-5", session) == "openai:gpt-5"


class QuietPort:
    def __init__(self) -> None:
        self.updates: list[dict[str, Any]] = []

    def open_buffer(self, path: Path) -> Buffer | None:
        return None

    async def confirm(self, request: ConfirmRequest) -> Decision:
        return Decision.DENY

    async def propose_edit(self, proposal: EditProposal) -> EditOutcome:
        return EditOutcome("rejected")

    async def save_documents(self, paths: list[Path]) -> list[Path]:
        raise Unsupported("test")

    async def diagnostics(self, path: Path | None) -> list[dict[str, Any]]:
        raise Unsupported("test")

    def update(self, session_id: str, update: dict[str, Any]) -> None:
        self.updates.append(update)

    def progress(self, message: str, percentage: int | None = None) -> None:
        return None


def parent_with_children(
    root: Path, parent_model: Any, child_model: Any, settings: Settings
) -> tuple[AgentLoop, QuietPort]:
    agents, _ = load_definitions(root)
    catalog = SubagentCatalog(root, default_tools(), agents, [], ("instructions", "environment"))
    port = QuietPort()
    loop = AgentLoop(
        session=Session(),
        model=parent_model,
        tools=catalog.parent_tools,
        workspace=Workspace([root]),
        port=port,
        settings=settings,
        system_prompt="parent",
    )
    SubagentHost(catalog, loop, lambda requested: child_model)
    return loop, port


def task_call(i: int) -> dict[str, Any]:
    return {
        "name": "task",
        "id": f"toolu_task_{i}",
        "input": {"description": f"job {i}", "prompt": f"do job {i}", "agent": "explore"},
    }


async def test_the_spending_cap_covers_the_children(workspace: Path) -> None:
    dollar = {"input_tokens": 100_000}  # $1 a call at the price below
    parent = ScriptModel({"turns": [{"tool_calls": [task_call(0)]}, {"text": "never"}]})
    child = ScriptModel(
        {
            "turns": [
                {"tool_calls": [{"name": "list_files", "input": {"pattern": "*"}}], "usage": dollar}
                for _ in range(10)
            ]
        }
    )
    settings = Settings.model_validate({"maxCostUsd": 2.5, "prices": {"<script>": [10.0]}})
    loop, _ = parent_with_children(workspace, parent, child, settings)
    result = await loop.run("go")
    # The child stops at the cap (after $3 of calls), and so does the parent.
    assert result.stop_reason == "error"
    assert "spending cap" in (result.error or "")
    assert result.cost_usd == pytest.approx(3.0)
    assert result.usage.input_tokens == 300_000
    task_result = loop.session.history[-1].content[0]
    assert "spending cap" in str(getattr(task_result, "content", ""))


class Gauge:
    """A model that answers after a pause and counts the requests in flight."""

    name = "gauge"
    context_window = 200_000

    def __init__(self) -> None:
        self.in_flight = 0
        self.peak = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            await asyncio.sleep(0.05)
        finally:
            self.in_flight -= 1
        yield TurnComplete(Message("assistant", [TextBlock("found")]), "end_turn", Usage())

    async def warm(self) -> None:
        return None


async def test_at_most_four_children_at_once(workspace: Path) -> None:
    parent = ScriptModel(
        {"turns": [{"tool_calls": [task_call(i) for i in range(6)]}, {"text": "all done"}]}
    )
    gauge = Gauge()
    loop, port = parent_with_children(workspace, parent, gauge, Settings())
    result = await loop.run("go")
    assert result.stop_reason == "end_turn", result
    assert gauge.peak == 4
    done = [
        u
        for u in port.updates
        if u.get("status") == "completed" and str(u.get("toolCallId")).startswith("toolu_task")
    ]
    assert [u["rawOutput"] for u in done] == ["found"] * 6
    waiting = [
        u
        for u in port.updates
        if "sub-agents are already running" in str(u.get("content"))
    ]
    assert len(waiting) == 2  # the fifth and sixth say why they have not started


async def test_explore_runs_only_commands_that_just_read(workspace: Path) -> None:
    parent = ScriptModel({"turns": [{"tool_calls": [task_call(0)]}, {"text": "done"}]})
    shell = [
        {"tool_calls": [{"name": "run_shell", "id": "toolu_rm", "input": {"command": cmd}}]}
        for cmd in ("rm -rf build", "ls")
    ]
    child = ScriptModel({"turns": [*shell, {"text": "listed"}]})
    (workspace / "build").mkdir()
    loop, port = parent_with_children(workspace, parent, child, Settings())
    loop.session.permissions.mode = "bypassPermissions"  # even then: explore is read-only
    result = await loop.run("go")
    assert result.stop_reason == "end_turn", result
    assert (workspace / "build").is_dir()
    outputs = [
        str(u.get("rawOutput"))
        for u in port.updates
        if u.get("toolCallId") == "toolu_rm" and u.get("status") in ("completed", "failed")
    ]
    assert len(outputs) == 2
    assert "read-only" in outputs[0]
    assert "'exitCode': 0" in outputs[1]  # ls ran


def test_which_mcp_tools_a_child_gets(tmp_path: Path) -> None:
    from agent_ls.tools.mcp import McpManager, McpServer, McpTool, RemoteTool
    from agent_ls.tools.mcp_config import ServerConfig

    manager = McpManager(tmp_path)
    tools: list[Any] = []
    for server_name, tool, read_only in (
        ("gh", "get_issue", True),
        ("gh", "create_issue", False),
        ("db", "query", False),
    ):
        server = McpServer(ServerConfig(server_name, "settings", "stdio", "x"), manager)
        remote = RemoteTool(tool, tool, {"type": "object"}, read_only_hint=read_only)
        tools.append(McpTool(f"mcp__{server_name}__{tool}", server, remote))
    (tmp_path / ".claude" / "agents").mkdir(parents=True)
    for name, listed in (
        ("all", None),
        ("named", "Read, mcp__gh__create_issue"),
        ("server", "mcp__db"),
        ("starred", "[Grep, 'mcp__gh__*']"),
    ):
        front = f"tools: {listed}\n" if listed else ""
        (tmp_path / ".claude" / "agents" / f"{name}.md").write_text(
            f"---\ndescription: d\n{front}---\nbody\n"
        )
    agents, problems = load_definitions(tmp_path)
    assert problems == []
    catalog = SubagentCatalog(tmp_path, default_tools(), agents, [], ("i", "e"))

    def names(agent: str) -> list[str]:
        return catalog.child_tools(agents[agent], tools).names()

    builtins = default_tools().names()
    # No tools list: every tool but task, the MCP ones after the built-ins.
    every_mcp_tool = ["mcp__gh__get_issue", "mcp__gh__create_issue", "mcp__db__query"]
    assert names("all") == [*builtins, *every_mcp_tool]
    assert names("general") == names("all")
    # A list names MCP tools as permission rules do: one tool, a server, server__*.
    assert names("named") == ["read_file", "mcp__gh__create_issue"]
    assert names("server") == ["mcp__db__query"]
    assert names("starred") == ["grep_search", "mcp__gh__get_issue", "mcp__gh__create_issue"]
    # The read-only explore agent: only what the server annotates readOnlyHint.
    explore = names("explore")
    assert [n for n in explore if n.startswith("mcp__")] == ["mcp__gh__get_issue"]
    # The system prompt (built once per definition) lists the built-ins only, like the
    # parent's, so a server's tools changing between asks never rebuilds it.
    assert "mcp__" not in catalog.system_prompt(agents["all"])


async def test_status_rereads_the_agent_files_only_when_they_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agent_ls.agent import subagents
    from agent_ls.agent.service import AgentService
    from agent_ls.settings import Settings

    monkeypatch.setenv("AGENT_LS_CONFIG_DIR", str(tmp_path / "user-config"))
    root = tmp_path / "ws"
    folder = root / ".agent-ls" / "agents"
    folder.mkdir(parents=True)
    (folder / "scout.md").write_text("---\nname: scout\ndescription: Looks.\n---\nLook.\n")
    service = AgentService(lambda: Settings(model="script:none.json"))
    reads: list[Path] = []
    real = subagents.load_definitions

    def counting(where: Path) -> Any:
        reads.append(where)
        return real(where)

    monkeypatch.setattr(subagents, "load_definitions", counting)

    def names(status: dict[str, Any]) -> list[str]:
        return sorted(a["name"] for a in status["available"])

    first = await service.subagent_status(None, root)
    again = await service.subagent_status(None, root)
    assert names(first) == names(again) == ["explore", "general", "scout"]
    assert len(reads) == 1  # unchanged: not parsed again
    (folder / "scout.md").write_text("---\nname: scout2\ndescription: Looks more.\n---\nLook.\n")
    (folder / "broken.md").write_text("---\nname: [unclosed\n---\nbody\n")
    changed = await service.subagent_status(None, root)
    assert names(changed) == ["explore", "general", "scout2"]
    assert any("broken.md" in p for p in changed["problems"])
    assert len(reads) == 2


async def test_a_first_run_takes_the_project_context_read_early_and_later_runs_keep_theirs(
    tmp_path: Path,
) -> None:
    # The context (instructions, git state) is read while the run waits for the warm-up;
    # the catalog must take that read, not read the project again after the wait.
    from agent_ls.agent.service import AgentService
    from agent_ls.agent.session import Session
    from agent_ls.settings import Settings
    from agent_ls.workspace import Workspace

    root = tmp_path / "ws"
    root.mkdir()
    service = AgentService(lambda: Settings(model="script:none.json"))
    session = Session("s1")
    early = service.read_context_early(session, Workspace([root]))
    assert early is not None
    read = await early
    assert str(root) in read[1]  # the environment block names the workspace
    marked = ("## marked instructions", read[1])
    given: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    given.set_result(marked)
    catalog = await service.subagent_catalog(session.id, root, given)
    assert catalog.context == marked
    assert service.read_context_early(session, Workspace([root])) is None  # has its context

    failed: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    failed.set_exception(OSError("git vanished"))
    other = await service.subagent_catalog("s2", root, failed)
    assert other.context == read  # read again, as without an early read


async def test_an_early_context_read_that_fails_untaken_is_not_logged_as_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A run that ends before its catalog (a model error, a cancel) leaves the read untaken.
    import gc

    from agent_ls.agent import prompt
    from agent_ls.agent.service import AgentService
    from agent_ls.agent.session import Session
    from agent_ls.settings import Settings
    from agent_ls.workspace import Workspace

    def broken(root: Path) -> Any:
        raise OSError("the disk went away")

    monkeypatch.setattr(prompt, "project_context", broken)
    lost: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, context: lost.append(context))
    try:
        service = AgentService(lambda: Settings(model="script:none.json"))
        early = service.read_context_early(Session("s1"), Workspace([tmp_path]))
        assert early is not None
        await asyncio.wait([early])
        del early
        gc.collect()
        await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(None)
    assert lost == []
