"""Sub-agents: their definitions, and the runner behind the ``task`` tool.

A definition is built in (``general``, ``explore``) or a Markdown file with YAML front matter
(``name``, ``description``, ``tools``, ``model``; Claude Code's format) in the project's
``.agent-ls/agents/`` or ``.claude/agents/``, or in the user's ``<config dir>/agents/``; the
first place a name appears wins. A file with bad front matter is skipped and reported.

A child runs an ordinary :class:`AgentLoop` with a fresh history, its own read-state and turn
limit, the session's permissions (mode, rules, grants), and no ``task`` tool (depth 1). It
gets the MCP tools of the parent's ask as Claude Code gives them (see :func:`takes_mcp_tool`):
the same :class:`~agent_ls.tools.mcp.McpTool` objects, so its calls go over the parent's
connections (no server is started per child) and through the same permission checks. A child
runs in a task of its own, so ``subagentTimeoutMs`` can stop it alone, as a cancel would. Its
editor port (:class:`ChildPort`) tags every tool call with the parent's ``task`` call id,
prefixes its questions and edit previews with ``[<agent>: <description>]``, and turns its text
into the ``task`` card's content instead of the parent's message.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import re
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, cast

from agent_ls import prompts
from agent_ls.agent.loop import AgentLoop
from agent_ls.agent.prompt import ProjectContext, build_system_prompt, project_context
from agent_ls.agent.session import Session
from agent_ls.agent.store import SessionStore
from agent_ls.ports.editor import (
    Buffer,
    ConfirmRequest,
    Decision,
    EditorPort,
    EditOutcome,
    EditProposal,
)
from agent_ls.ports.messages import Usage
from agent_ls.ports.model import Model, ToolSpec
from agent_ls.ports.updates import SessionUpdate, text_item
from agent_ls.safety.permissions import mcp_rule_matches
from agent_ls.settings import user_config_dir
from agent_ls.tools.base import ToolContext, ToolResult
from agent_ls.tools.mcp import McpTool
from agent_ls.tools.registry import ToolRegistry
from agent_ls.tools.shell import RunShell, RunShellInput
from agent_ls.tools.task import AgentSummary, TaskTool

if TYPE_CHECKING:
    from agent_ls.tools.base import Tool

log = logging.getLogger(__name__)

MAX_PARALLEL = 4
STREAM_CHARS = 8_000  # the task card shows the child's last text, like a shell's output
STREAM_INTERVAL = 0.1  # at most ten card updates a second
TASK_TOOL = "task"
BUILT_IN = "built-in"
EXPLORE_TOOLS = ("read_file", "list_files", "grep_search", "get_diagnostics", "run_shell")
# Claude Code's tool names, so its agent files work unchanged.
CLAUDE_TOOL_NAMES = {
    "Read": "read_file",
    "Write": "write_file",
    "Edit": "edit_file",
    "MultiEdit": "edit_file",
    "Glob": "list_files",
    "LS": "list_files",
    "Grep": "grep_search",
    "Bash": "run_shell",
}
NO_CHILD_TOOLS = {"task", "Task", "Agent"}  # depth 1
MODEL_ALIASES = {  # Claude Code's aliases, for an Anthropic session
    "sonnet": "claude-sonnet-5-5",
    "opus": "claude-opus-5-5",
    "haiku": "claude-haiku-5-5",
    "fable": "claude-fable-5-2",
}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


# -- definitions ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AgentDefinition:
    """One kind of sub-agent. ``tools`` None means every tool but ``task``, MCP ones too."""

    name: str
    description: str
    prompt: str  # the body: the start of the child's system prompt
    tools: tuple[str, ...] | None = None
    model: str | None = None
    source: str = BUILT_IN
    read_only: bool = False  # run_shell only for what the classifier allows without asking

    def to_status(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "source": self.source}


class DefinitionError(ValueError):
    """An agent file that cannot be used (the message says why)."""


def built_in_agents() -> list[AgentDefinition]:
    return [
        AgentDefinition(
            "general",
            "General-purpose agent for multi-step tasks: research, then changes if asked. "
            "Has every tool.",
            prompts.load("agents/general.md"),
        ),
        AgentDefinition(
            "explore",
            "Read-only agent for finding and understanding code: searches, reads, read-only "
            "shell commands. Use it for research that would take many searches.",
            prompts.load("agents/explore.md"),
            tools=EXPLORE_TOOLS,
            read_only=True,
        ),
    ]


def agent_dirs(root: Path) -> list[Path]:
    """Where definitions are looked for, the first place a name appears winning."""
    return [
        root / ".agent-ls" / "agents",
        root / ".claude" / "agents",
        user_config_dir() / "agents",
    ]


def parse_definition(path: Path, text: str) -> AgentDefinition:
    """A definition from a Markdown file with YAML front matter. Raises DefinitionError."""
    import yaml

    text = text.lstrip("\ufeff")
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise DefinitionError("it does not start with YAML front matter (a '---' line)")
    end = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), None)
    if end is None:
        raise DefinitionError("its front matter has no closing '---' line")
    try:
        meta = yaml.safe_load("".join(lines[1:end]))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 2})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise DefinitionError(f"its front matter is not valid YAML{where}: {problem}") from None
    if not isinstance(meta, dict):
        raise DefinitionError("its front matter is not a mapping of fields")
    name = meta.get("name", path.stem)
    if not isinstance(name, str) or not _NAME.match(name):
        raise DefinitionError(f"name {name!r} is not a word of letters, digits, '-', '_', '.'")
    description = meta.get("description")
    if not isinstance(description, str) or not description.strip():
        raise DefinitionError("it has no description (what the agent is for)")
    body = "".join(lines[end + 1 :]).strip()
    if not body:
        raise DefinitionError("its body (the agent's system prompt) is empty")
    model = meta.get("model")
    if model is not None and not isinstance(model, str):
        raise DefinitionError("model must be a model name")
    return AgentDefinition(
        name=name,
        description=" ".join(description.split()),
        prompt=body,
        tools=_parse_tools(meta.get("tools")),
        model=model.strip() or None if isinstance(model, str) else None,
        source=str(path),
    )


def _parse_tools(raw: Any) -> tuple[str, ...] | None:
    if raw is None:
        return None
    if isinstance(raw, str):
        items = [t.strip() for t in raw.split(",")]
    elif isinstance(raw, list) and all(isinstance(t, str) for t in raw):
        items = [t.strip() for t in raw]
    else:
        raise DefinitionError("tools must be a list of tool names or a comma-separated string")
    if "*" in items:
        return None
    names: list[str] = []
    for item in items:
        if not item or item in NO_CHILD_TOOLS:
            continue
        mapped = CLAUDE_TOOL_NAMES.get(item, item)
        if mapped not in names:
            names.append(mapped)
    return tuple(names)


def load_definitions(root: Path) -> tuple[dict[str, AgentDefinition], list[str]]:
    """Every usable definition by name, and one problem line per file skipped."""
    found: dict[str, AgentDefinition] = {}
    problems: list[str] = []
    for folder in agent_dirs(root):
        try:
            files = sorted(folder.glob("*.md")) if folder.is_dir() else []
        except OSError:
            files = []
        here: set[str] = set()
        for path in files:
            try:
                definition = parse_definition(path, path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, DefinitionError) as exc:
                problems.append(f"agent file {path} skipped: {exc}")
                continue
            if definition.name in here:
                problems.append(
                    f"agent file {path} skipped: another file here already defines "
                    f"{definition.name!r}"
                )
                continue
            here.add(definition.name)
            found.setdefault(definition.name, definition)
    for definition in built_in_agents():
        found.setdefault(definition.name, definition)
    return found, problems


def definitions_fingerprint(root: Path) -> tuple[tuple[str, int, int], ...]:
    """What :func:`load_definitions` would read, as (path, mtime, size) of each ``*.md``: a
    few ``stat`` calls, cheap enough for the event loop, so an unchanged folder is not parsed
    again on every ``agent.status``."""
    seen: list[tuple[str, int, int]] = []
    for folder in agent_dirs(root):
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    if entry.name.endswith(".md"):
                        st = entry.stat()
                        seen.append((entry.path, st.st_mtime_ns, st.st_size))
        except OSError:
            continue
    return tuple(sorted(seen))


def child_model_spec(requested: str | None, session_spec: str) -> str | None:
    """The provider spec for a definition's ``model``; None means the session's model."""
    if not requested or requested == "inherit":
        return None
    if ":" in requested:
        return requested
    provider = session_spec.partition(":")[0]
    if requested in MODEL_ALIASES:
        return f"anthropic:{MODEL_ALIASES[requested]}" if provider == "anthropic" else None
    return f"{provider}:{requested}"


def takes_mcp_tool(definition: AgentDefinition, tool: McpTool) -> bool:
    """Does a child of ``definition`` get this MCP tool? Claude Code's rule, plus one for
    read-only agents.

    No ``tools`` in the front matter: every MCP tool. A list: the MCP tools it names, in the
    forms of a permission rule (``mcp__<server>__<tool>``, ``mcp__<server>``,
    ``mcp__<server>__*``, ``mcp__*``). A read-only agent (``explore``) also gets the tools its
    server annotates ``readOnlyHint: true``: a user who asks it to research expects it to read
    the issue tracker too, and never to file an issue. The hint is the server's claim, not a
    permission: the call asks like any other MCP call.
    """
    if definition.tools is None:
        return not definition.read_only
    if any(mcp_rule_matches(entry, tool.name) for entry in definition.tools):
        return True
    return definition.read_only and tool.remote.read_only_hint


# -- the catalog of one session --------------------------------------------------------------


class ReadOnlyShell(RunShell):
    """``run_shell`` for read-only agents: what the classifier would ask about is refused."""

    def spec(self) -> ToolSpec:
        base = super().spec()
        note = prompts.load("agents/read_only_shell.md")
        return dataclasses.replace(base, description=f"{base.description}\n\n{note}")

    async def run(self, args: RunShellInput, ctx: ToolContext) -> ToolResult:
        if not self.reads_only(args):
            return ToolResult(
                "This agent is read-only: only commands that just read run here, and this one "
                "may change something, so it was not run.",
                is_error=True,
            )
        return await super().run(args, ctx)


class SubagentCatalog:
    """A session's definitions, tool sets and child system prompts, built once.

    ``load`` reads files and runs git: call it off the event loop.
    """

    def __init__(
        self,
        root: Path,
        base_tools: ToolRegistry,
        agents: dict[str, AgentDefinition],
        problems: list[str],
        context: ProjectContext,
    ):
        self.root = root
        self.base_tools = base_tools
        self.agents = agents
        self.problems = problems
        self.context = context  # project instructions, environment, git state
        summaries = [AgentSummary(a.name, a.description) for a in agents.values()]
        self.parent_tools = ToolRegistry([*base_tools.all(), TaskTool(summaries)])
        self._child_tools: dict[str, ToolRegistry] = {}
        self._prompts: dict[str, str] = {}
        self.models: dict[str, Model] = {}

    @classmethod
    def load(
        cls, root: Path, base_tools: ToolRegistry, context: ProjectContext | None = None
    ) -> SubagentCatalog:
        """``context``: :func:`project_context` of ``root``, when it was read already."""
        agents, problems = load_definitions(root)
        if context is None:
            context = project_context(root)
        catalog = cls(root, base_tools, agents, problems, context)
        catalog.parent_tools.specs()  # builds and caches the schemas off the event loop
        return catalog

    def names(self) -> list[str]:
        return list(self.agents)

    def child_tools(
        self, definition: AgentDefinition, mcp_tools: Sequence[Tool[Any]] = ()
    ) -> ToolRegistry:
        """The definition's built-in tools, then the MCP tools of this ask it takes (sorted,
        as the parent has them)."""
        builtins = self.builtin_tools(definition)
        return builtins.extended(
            [t for t in mcp_tools if isinstance(t, McpTool) and takes_mcp_tool(definition, t)]
        )

    def builtin_tools(self, definition: AgentDefinition) -> ToolRegistry:
        registry = self._child_tools.get(definition.name)
        if registry is None:
            wanted = definition.tools
            chosen: list[Tool[Any]] = []
            for tool in self.base_tools.all():
                if tool.name == TASK_TOOL or (wanted is not None and tool.name not in wanted):
                    continue
                if definition.read_only and isinstance(tool, RunShell):
                    tool = ReadOnlyShell()
                chosen.append(tool)
            if wanted is not None:  # keep the definition's order (a stable cache prefix)
                chosen.sort(key=lambda t: wanted.index(t.name))
            registry = self._child_tools[definition.name] = ToolRegistry(chosen)
        return registry

    def system_prompt(self, definition: AgentDefinition) -> str:
        """The definition's body, the tools, then the project instructions and environment."""
        text = self._prompts.get(definition.name)
        if text is None:
            # Built-ins only, like the parent's prompt: MCP tools come and go between asks.
            tools = self.builtin_tools(definition).specs()
            text = build_system_prompt(
                self.root, tools, intro=definition.prompt, context=self.context
            )
            self._prompts[definition.name] = text
        return text

    def status(self) -> dict[str, Any]:
        return status_of(self.agents, self.problems)


def status_of(agents: dict[str, AgentDefinition], problems: list[str]) -> dict[str, Any]:
    return {"available": [a.to_status() for a in agents.values()], "problems": list(problems)}


# -- the child's editor port -----------------------------------------------------------------


class ChildPort:
    """The parent's editor port as a sub-agent sees it (see the module's docstring)."""

    def __init__(self, parent: EditorPort, session_id: str, task_call_id: str, origin: str):
        self.parent = parent
        self.session_id = session_id  # the parent's: the client knows no other
        self.task_call_id = task_call_id
        self.origin = origin
        self.meta = {"agentLs": {"parentToolCallId": task_call_id}}
        self.text = ""
        self.open_calls: list[str] = []  # its tool calls not yet completed or failed
        self._sent_text = ""
        self._last_sent = 0.0
        self._timer: asyncio.TimerHandle | None = None

    def open_buffer(self, path: Path) -> Buffer | None:
        return self.parent.open_buffer(path)

    async def confirm(self, request: ConfirmRequest) -> Decision:
        message = f"{self.origin} {request.message}"
        return await self.parent.confirm(ConfirmRequest(message=message, grant=request.grant))

    async def propose_edit(self, proposal: EditProposal) -> EditOutcome:
        tagged = dataclasses.replace(
            proposal, label=f"{self.origin} {proposal.label}", origin=self.origin
        )
        return await self.parent.propose_edit(tagged)

    async def save_documents(self, paths: list[Path]) -> list[Path]:
        return await self.parent.save_documents(paths)

    async def diagnostics(self, path: Path | None) -> list[dict[str, Any]]:
        return await self.parent.diagnostics(path)

    def progress(self, message: str, percentage: int | None = None) -> None:
        self.parent.progress(f"{self.origin} {message}", percentage)

    def log(self, message: str) -> None:
        self.parent.log(f"{self.origin} {message}")

    def update(self, session_id: str, update: SessionUpdate) -> None:
        if update["sessionUpdate"] == "agent_thought_chunk":
            return
        if update["sessionUpdate"] == "agent_message_chunk":
            self.text += update["content"]["text"]
            self._schedule()
            return
        if update["sessionUpdate"] == "tool_call" and self.text and not self.text.endswith("\n"):
            self.text += "\n"
        if update["sessionUpdate"] in ("tool_call", "tool_call_update"):
            call_id = update["toolCallId"]
            if update.get("status") in ("completed", "failed"):
                if call_id in self.open_calls:
                    self.open_calls.remove(call_id)
            elif call_id not in self.open_calls:
                self.open_calls.append(call_id)
        raw: dict[str, Any] = dict(update)
        meta = dict(raw.get("_meta") or {})
        meta["agentLs"] = {**(meta.get("agentLs") or {}), **self.meta["agentLs"]}
        raw["_meta"] = meta
        self.parent.update(self.session_id, cast("SessionUpdate", raw))

    def close_open_calls(self, reason: str) -> None:
        """Mark the calls a stopped child left open as failed: the parent's run goes on, and
        their cards must not look as if they were still running."""
        for call_id in list(self.open_calls):
            self.update(
                self.session_id,
                {
                    "sessionUpdate": "tool_call_update",
                    "toolCallId": call_id,
                    "status": "failed",
                    "rawOutput": reason,
                },
            )
        self.open_calls.clear()

    def _schedule(self) -> None:
        if self._timer is not None:
            return
        loop = asyncio.get_running_loop()
        wait = max(0.0, self._last_sent + STREAM_INTERVAL - loop.time())
        if wait == 0.0:
            self.flush()
        else:
            self._timer = loop.call_later(wait, self.flush)

    def flush(self) -> None:
        """Send the child's text so far as the task card's content (replacing the last)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.text == self._sent_text:
            return
        self._sent_text = self.text
        self._last_sent = asyncio.get_running_loop().time()
        self.parent.update(
            self.session_id,
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": self.task_call_id,
                "content": [text_item(self.text[-STREAM_CHARS:])],
            },
        )


# -- the runner ------------------------------------------------------------------------------


@dataclass
class ChildRecord:
    """One sub-agent of the run, for totals and the bench."""

    agent: str
    session_id: str
    loop: AgentLoop
    started: float = field(default_factory=time.perf_counter)


class SubagentHost:
    """Runs the ``task`` calls of one parent run (a :class:`~agent_ls.tools.task.SubagentRunner`).

    ``models`` resolves a definition's model spec (None: the session's model);
    ``mcp_tools`` are the MCP tools of the parent's ask, which children take a share of.
    """

    max_parallel: ClassVar[int] = MAX_PARALLEL

    def __init__(
        self,
        catalog: SubagentCatalog,
        parent: AgentLoop,
        models: Callable[[str | None], Model],
        mcp_tools: Sequence[Tool[Any]] = (),
    ):
        self.catalog = catalog
        self.parent = parent
        self.models = models
        self.mcp_tools = list(mcp_tools)
        self.children: list[ChildRecord] = []
        self._slots = asyncio.Semaphore(self.max_parallel)
        parent.subagents = self
        parent.spent_elsewhere = self.children_cost

    def children_cost(self) -> float:
        return sum(c.loop._cost(c.loop.live_usage) for c in self.children)

    def totals(self) -> tuple[Usage, float]:
        usage = Usage()
        for child in self.children:
            usage.add(child.loop.live_usage)
        return usage, self.children_cost()

    async def run_task(
        self, agent: str, description: str, prompt: str, ctx: ToolContext
    ) -> ToolResult:
        definition = self.catalog.agents.get(agent)
        if definition is None:
            names = ", ".join(self.catalog.names())
            return ToolResult(
                prompts.load("agents/unknown.md").format(name=agent, agents=names),
                is_error=True,
            )
        try:
            model = self.models(definition.model)
        except ValueError as exc:
            return ToolResult(f"Agent {definition.name!r} cannot start: {exc}", is_error=True)
        if self._slots.locked():
            ctx.stream(f"(waiting: {self.max_parallel} sub-agents are already running)")
        async with self._slots:
            loop, port = self._spawn(definition, description, model, ctx)
            limit_ms = self.parent.settings.subagent_timeout_ms
            child = asyncio.ensure_future(loop.run(prompt))
            try:
                done, _ = await asyncio.wait({child}, timeout=limit_ms / 1000)
                if not done:  # too long: stop this child alone, as a cancel would
                    child.cancel()
                    await asyncio.wait({child})
            except asyncio.CancelledError:  # the parent's run is cancelled: so is the child
                child.cancel()
                await asyncio.wait({child})  # its processes are stopped before we go on
                raise
            finally:
                port.flush()
        if not done:
            port.close_open_calls("cancelled: the sub-agent ran out of time (subagentTimeoutMs)")
            return _timed_out_result(limit_ms, port.text)
        result = child.result()
        if result.stop_reason == "cancelled":
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise asyncio.CancelledError
            return ToolResult("The sub-agent was cancelled before it finished.", is_error=True)
        return _task_result(definition, loop, result.stop_reason, result.error)

    def _spawn(
        self, definition: AgentDefinition, description: str, model: Model, ctx: ToolContext
    ) -> tuple[AgentLoop, ChildPort]:
        parent = self.parent
        child_id = f"{re.sub(r'[^A-Za-z0-9_.-]', '-', definition.name)}-{uuid.uuid4().hex[:8]}"
        store = None
        if parent.session.store is not None:
            folder = parent.session.store.path(parent.session.id).with_suffix("")
            store = SessionStore(folder / "agents")
            store.append(
                child_id,
                {
                    "type": "meta",
                    "sessionId": child_id,
                    "title": description,
                    "agent": definition.name,
                    "parentSessionId": parent.session.id,
                    "parentToolCallId": ctx.tool_call_id,
                    "created": time.time(),
                },
            )
        session = Session(
            id=child_id,
            permissions=parent.session.permissions,  # the session's mode, rules and grants
            edited_paths=parent.session.edited_paths,  # saved before the parent's commands
            store=store,
            title=description,
        )
        origin = f"[{definition.name}: {description}]"
        port = ChildPort(parent.port, parent.session.id, ctx.tool_call_id, origin)
        settings = parent.settings.model_copy(
            update={"max_turns": parent.settings.subagent_max_turns}
        )
        loop = AgentLoop(
            session=session,
            model=model,
            tools=self.catalog.child_tools(definition, self.mcp_tools),
            workspace=parent.workspace,
            port=port,
            settings=settings,
            system_prompt=self.catalog.system_prompt(definition),
        )
        loop.journal = parent.journal  # agent.undo of the run covers the child's edits
        # The whole tree counts against the cap: the parent's spending includes this child.
        loop.spent_elsewhere = lambda: parent.spent(parent.live_usage) - loop._cost(
            loop.live_usage
        )
        loop.tree_usage = parent.tree_usage  # its usage_update tells the whole run's tokens
        self.children.append(ChildRecord(definition.name, child_id, loop))
        return loop, port


def _timed_out_result(limit_ms: int, text: str) -> ToolResult:
    template = prompts.load("agents/timeout.md")
    message = template.format(limit=_duration(limit_ms), partial=text.strip() or "(none)")
    return ToolResult(message, is_error=True, raw_output=message)


def _duration(ms: int) -> str:
    if ms % 60_000 == 0:
        minutes = ms // 60_000
        return f"{minutes} minute" + ("" if minutes == 1 else "s")
    if ms % 1000 == 0:
        return f"{ms // 1000} s"
    return f"{ms} ms"


def _task_result(
    definition: AgentDefinition, loop: AgentLoop, stop: str, error: str | None
) -> ToolResult:
    history = loop.session.history
    final = history[-1].text().strip() if history and history[-1].role == "assistant" else ""
    if stop == "error":
        message = f"The sub-agent failed: {error}"
        if final:
            message += f"\n\nIts last message:\n{final}"
        return ToolResult(message, is_error=True, raw_output=message)
    content = final or "(the sub-agent finished without a final answer)"
    if stop == "max_turn_requests":
        content += (
            f"\n\n[The sub-agent stopped at its limit of {loop.settings.max_turns} turns "
            "before finishing.]"
        )
    elif stop == "max_tokens":
        content += "\n\n[The sub-agent's answer was cut off at its output limit.]"
    return ToolResult(content, raw_output=final, display=[text_item(final)] if final else None)
