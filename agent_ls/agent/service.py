"""What every front door shares: sessions, the model, the tools, system prompts and runs.

The LSP server and the ACP agent each hold one :class:`AgentService`; they differ only in how
they reach the editor (their :class:`~agent_ls.ports.editor.EditorPort`) and how they report
progress. Heavy modules (pydantic models, the SDKs, tool schemas) are imported inside the
methods, so a front door can create its service before anything is warm.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent_ls.agent.hooks import HookConfig, HookRunner, HookSandbox
    from agent_ls.agent.loop import AgentLoop, RunResult
    from agent_ls.agent.prompt import ProjectContext
    from agent_ls.agent.session import Session
    from agent_ls.agent.subagents import SubagentCatalog
    from agent_ls.ports.editor import EditorPort
    from agent_ls.ports.model import Model
    from agent_ls.safety.permissions import Permissions
    from agent_ls.settings import Settings
    from agent_ls.tools.mcp import McpManager
    from agent_ls.tools.registry import ToolRegistry
    from agent_ls.workspace import Workspace

log = logging.getLogger(__name__)


class UnknownSession(LookupError):
    """No live or saved session has this id (or there is no session yet)."""


class SessionBusy(RuntimeError):
    """The session already has a run; one run per session at a time."""


Fingerprint = tuple[tuple[str, int, int], ...]


@dataclass
class ActiveRun:
    """A run in flight. ``token`` is the front door's handle for it (a progress token)."""

    session_id: str
    token: Any = None
    cancelled: bool = False
    task: asyncio.Task[RunResult] = field(init=False)


class AgentService:
    """Sessions by id, the configured model, the tool registry and the runs in flight."""

    def __init__(self, settings: Callable[[], Settings]) -> None:
        self._settings = settings
        self.sessions: dict[str, Session] = {}
        self.current_session: str | None = None
        self.runs: dict[str, ActiveRun] = {}
        self.system_prompts: dict[str, str] = {}  # each session's latest system prompt
        self.prompt_parts: dict[str, tuple[str, str]] = {}  # its fixed parts (see prompt.py)
        self.hook_config: HookConfig | None = None
        self.warm_task: asyncio.Task[None] | None = None
        self._model: Model | None = None
        self._model_spec: str | None = None
        self._tools: ToolRegistry | None = None
        # Synchronous clean-ups for an exit that cannot wait (child processes to kill).
        self.exit_hooks: list[Callable[[], None]] = []
        # Sub-agents: each session's definitions and tool sets (with ``task``), built at its
        # first run; problems with agent files go to ``on_warning`` (window/showMessage).
        self.catalogs: dict[str, SubagentCatalog] = {}
        self.on_warning: Callable[[str], None] = log.warning
        self._warned: set[str] = set()
        # Before a session's first run: the definitions last read per root, with what they
        # were read from (see subagents.definitions_fingerprint).
        self._definitions_seen: dict[Path, tuple[Fingerprint, dict[str, Any]]] = {}
        # The MCP servers, once some are configured (the front door creates it: see
        # ``agent_ls.tools.mcp.McpManager``); sessions whose first ask already waited for them.
        self.mcp: McpManager | None = None
        # Set by the front door once the MCP config is read (and the manager made, if any
        # server is configured); None when the front door reads no MCP config.
        self.mcp_configured: asyncio.Event | None = None
        self._mcp_waited: set[str] = set()

    @property
    def settings(self) -> Settings:
        return self._settings()

    # -- sessions --------------------------------------------------------------------------

    def new_permissions(self) -> Permissions:
        from agent_ls.safety.permissions import Permissions

        settings = self.settings
        return Permissions(mode=settings.mode, rules=settings.permissions.model_copy())

    def session(self, session_id: str | None, *, create: bool = True) -> Session:
        """The named session (live, else loaded from its transcript), else the current one.

        Without an id and without a current session, a new one is made unless ``create`` is
        false. Raises :class:`UnknownSession`.
        """
        from agent_ls.agent.session import Session
        from agent_ls.agent.store import SessionStore

        store = SessionStore.default()
        if session_id:
            found = self.sessions.get(session_id)
            if found is None and store.exists(session_id):
                found = Session.load(store, session_id)
                found.permissions = self.new_permissions()
                self.sessions[found.id] = found
            if found is None:
                raise UnknownSession(f"unknown session {session_id!r}")
            self.current_session = found.id
            return found
        current = self.sessions.get(self.current_session or "")
        if current is not None:
            return current
        if not create:
            raise UnknownSession("there is no session yet")
        return self.new_session()

    def new_session(self) -> Session:
        from agent_ls.agent.session import Session
        from agent_ls.agent.store import SessionStore

        session = Session(permissions=self.new_permissions(), store=SessionStore.default())
        self.sessions[session.id] = session
        self.current_session = session.id
        return session

    @property
    def current(self) -> Session | None:
        return self.sessions.get(self.current_session or "")

    # -- model and tools -------------------------------------------------------------------

    def model(self) -> Model:
        """The configured model, rebuilt when the setting changed. Raises ``ValueError``."""
        from agent_ls.models import load_model

        spec = self.settings.resolved_model()
        if self._model is None or self._model_spec != spec:
            self._model = load_model(spec, in_worker=True)
            self._model_spec = spec
            self._warn_if_deprecated(spec)
        return self._model

    def _warn_if_deprecated(self, spec: str) -> None:
        """Say once per configured model when its provider has set an end to its life."""
        provider, _, name = spec.partition(":")
        if provider != "anthropic":
            return
        from agent_ls import DEFAULT_MODEL
        from agent_ls.models.claude_models import end_of_life

        date = end_of_life(name)
        if date is not None:
            self.on_warning(
                f"the model {name} is deprecated: its end of life is {date}, after which "
                f"every request fails; switch to a current model, such as {DEFAULT_MODEL}"
            )

    def tools(self) -> ToolRegistry:
        if self._tools is None:
            from agent_ls.tools.registry import default_tools

            self._tools = default_tools()
        return self._tools

    async def tools_for_ask(self, session: Session, port: EditorPort) -> ToolRegistry:
        """The built-in tools, then the MCP tools ready now, sorted: fixed for one ask (a
        ``tools/list_changed`` applies from the next). A session's first ask waits for
        servers still starting, up to their ``startupTimeoutMs``."""
        builtins = self.tools()
        first = session.id not in self._mcp_waited
        self._mcp_waited.add(session.id)
        configured = self.mcp_configured
        if first and configured is not None and not configured.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(configured.wait(), 10)
        manager = self.mcp
        if manager is None:
            return builtins
        if first:
            pending = manager.pending()
            if pending:
                names = ", ".join(s.name for s in pending)
                port.progress(f"waiting for MCP servers: {names}")
                await manager.wait_started()
        return builtins.extended(list(manager.tools()))

    async def close_mcp(self) -> None:
        """Stop every MCP server (``shutdown``); bounded, then their process groups are killed."""
        if self.mcp is not None:
            await self.mcp.aclose()

    def start_warm(self) -> None:
        """Begin the warm-up in the background (call once the front door is initialised)."""
        self.warm_task = asyncio.ensure_future(self.warm())

    async def warm(self) -> None:
        """Import the agent core and the model SDK off the event loop.

        Everything slow (pydantic models, tool schemas, the SDK and its client) happens in a
        worker thread, so requests stay responsive while the front door warms up.
        """
        from agent_ls.agent.warmup import import_core, responsive_while, settle_gc

        try:
            with responsive_while():
                await asyncio.to_thread(import_core)
                self._tools = await asyncio.to_thread(_build_tools)
                await self.model().warm()
        except Exception as exc:  # the first ask reports it properly
            log.info("warm-up failed: %s", exc)
        finally:
            settle_gc()
        from agent_ls import codecache

        await asyncio.to_thread(codecache.save)  # what the start compiled (the next needs not)

    async def wait_warm(self, port: EditorPort) -> None:
        warm = self.warm_task
        if warm is not None and not warm.done():
            port.progress("starting model client")
            await asyncio.shield(warm)  # cancelling the run must not cancel the warm-up

    # -- runs ------------------------------------------------------------------------------

    def read_context_early(
        self, session: Session, workspace: Workspace
    ) -> asyncio.Future[ProjectContext] | None:
        """For a session's first run: start reading the project context (instructions, git
        state) now, in a thread, so git runs while the run waits for the warm-up; give the
        future to :meth:`loop_for`. None when the session has its context already."""
        from agent_ls.agent.prompt import project_context

        if session.id in self.catalogs:
            return None
        read = asyncio.ensure_future(asyncio.to_thread(project_context, workspace.root))
        # A run that ends before its catalog (an error, a cancel) leaves it untaken: a failed
        # read is then nobody's to report, and never logged as an unretrieved exception.
        read.add_done_callback(lambda done: done.cancelled() or done.exception())
        return read

    async def loop_for(
        self,
        session: Session,
        workspace: Workspace,
        port: EditorPort,
        context: asyncio.Future[ProjectContext] | None = None,
    ) -> AgentLoop:
        """An agent loop for one run of ``session`` (``context``: what
        :meth:`read_context_early` started for this run).

        The system prompt's fixed parts are built once per session; the project memory is
        read for each run, so a change shows from the next ask and never within one.
        """
        from agent_ls.agent.loop import AgentLoop
        from agent_ls.agent.prompt import (
            assemble_system_prompt,
            build_prompt_parts,
            memory_section,
        )
        from agent_ls.agent.subagents import SubagentHost

        catalog = await self.subagent_catalog(session.id, workspace.root, context)
        if session.id not in self.prompt_parts:
            self.prompt_parts[session.id] = await asyncio.to_thread(
                build_prompt_parts,
                workspace.root,
                catalog.parent_tools.specs(),
                context=catalog.context,
            )
        memory = await asyncio.to_thread(memory_section, workspace.root)
        self.system_prompts[session.id] = assemble_system_prompt(
            self.prompt_parts[session.id], memory
        )
        hooks = await self.hooks_for(session, workspace, port)
        # built-ins and task, then the MCP tools of this ask (sorted, fixed for the ask)
        mcp_tools = await self.tools_for_ask(session, port)
        ask_mcp_tools = [t for t in mcp_tools.all() if catalog.parent_tools.get(t.name) is None]
        parent_tools = catalog.parent_tools.extended(ask_mcp_tools)
        loop = AgentLoop(
            session=session,
            model=self.model(),
            tools=parent_tools,
            workspace=workspace,
            port=port,
            settings=self.settings,
            system_prompt=self.system_prompts[session.id],
            hooks=hooks,
        )
        # Children share the ask's MCP tools, and so the parent's server connections.
        SubagentHost(
            catalog,
            loop,
            lambda requested: self.subagent_model(catalog, requested),
            ask_mcp_tools,
        )
        return loop

    # -- sub-agents ------------------------------------------------------------------------

    async def subagent_catalog(
        self,
        session_id: str,
        root: Path,
        context: asyncio.Future[ProjectContext] | None = None,
    ) -> SubagentCatalog:
        """The session's sub-agent definitions and tool sets, loaded at its first run (with
        ``context``, the project context being read for it, when given)."""
        from agent_ls.agent.subagents import SubagentCatalog

        catalog = self.catalogs.get(session_id)
        if catalog is None:
            read: ProjectContext | None = None
            if context is not None:
                with contextlib.suppress(Exception):  # read again below, reporting as usual
                    read = await context
            catalog = await asyncio.to_thread(SubagentCatalog.load, root, self.tools(), read)
            self.catalogs[session_id] = catalog
            self._warn_once(catalog.problems)
        return catalog

    async def subagent_status(self, session_id: str | None, root: Path) -> dict[str, Any]:
        """``agent.status``'s ``agents``: the session's, or a fresh look before its first run."""
        from agent_ls.agent.subagents import definitions_fingerprint, load_definitions, status_of

        catalog = self.catalogs.get(session_id or "")
        if catalog is not None:
            return catalog.status()
        fingerprint = definitions_fingerprint(root)
        seen = self._definitions_seen.get(root)
        if seen is not None and seen[0] == fingerprint:
            return seen[1]
        agents, problems = await asyncio.to_thread(load_definitions, root)
        self._warn_once(problems)
        status = status_of(agents, problems)
        self._definitions_seen[root] = (fingerprint, status)
        return status

    def _warn_once(self, problems: list[str]) -> None:
        for problem in problems:
            if problem not in self._warned:
                self._warned.add(problem)
                self.on_warning(problem)

    def subagent_model(self, catalog: SubagentCatalog, requested: str | None) -> Model:
        """A definition's model: the session's unless it names another. Raises ValueError."""
        from agent_ls.agent.subagents import child_model_spec
        from agent_ls.models import load_model

        session_spec = self.settings.resolved_model()
        spec = child_model_spec(requested, session_spec)
        if spec is None or spec == session_spec:
            return self.model()
        model = catalog.models.get(spec)
        if model is None:
            model = catalog.models[spec] = load_model(spec, in_worker=True)
        return model

    async def hooks_for(
        self, session: Session, workspace: Workspace, port: EditorPort
    ) -> HookRunner | None:
        """The hooks in force for one run (None when there are none); project hooks only
        once the user approved them."""
        from agent_ls.agent.hooks import HookConfig, HookRunner

        if self.hook_config is None:
            self.hook_config = HookConfig()
        hooks = await self.hook_config.load(self.settings.hooks, workspace.root, port)
        if not hooks:
            return None
        transcript = str(session.store.path(session.id)) if session.store is not None else ""
        return HookRunner(
            hooks,
            workspace.root,
            session.id,
            port,
            transcript,
            await self.hook_sandbox(workspace),
        )

    async def hook_sandbox(self, workspace: Workspace) -> HookSandbox | None:
        """Hooks run in the sandbox shell commands use (refused where ``sandbox: "on"`` has
        none; unsandboxed where ``auto`` found none or the setting is ``off``)."""
        from agent_ls.agent.hooks import HookSandbox
        from agent_ls.safety.sandbox import sandbox_status

        settings = self.settings
        status = await sandbox_status(settings.sandbox, workspace.roots)
        if status.active and status.program:
            return HookSandbox(status.program, tuple(workspace.roots), settings.sandbox_network)
        if status.mode == "on":
            return HookSandbox(None, (), refused=f"no sandbox is available ({status.reason})")
        return None

    def begin_run(
        self, session_id: str, body: Callable[[ActiveRun], Coroutine[Any, Any, RunResult]]
    ) -> ActiveRun:
        """Register a run before anything is awaited, so a cancel that arrives while the
        model client is still starting is not lost, and a second run is refused."""
        existing = self.runs.get(session_id)
        if existing is not None and not existing.task.done():
            raise SessionBusy(
                f"session {session_id} is already running; cancel it (agent.cancel) or wait"
            )
        run = ActiveRun(session_id)
        run.task = asyncio.ensure_future(body(run))
        self.runs[session_id] = run
        return run

    def end_run(self, run: ActiveRun) -> None:
        if self.runs.get(run.session_id) is run:
            self.runs.pop(run.session_id, None)

    def cancel(self, session_id: str | None = None, *, token: Any = None) -> bool:
        """Cancel the session's run (every run when None; or the run with ``token``)."""
        if token is not None:
            targets = [r for r in self.runs.values() if r.token == token]
        elif session_id:
            targets = [r for r in (self.runs.get(session_id),) if r is not None]
        else:
            targets = list(self.runs.values())
        cancelled = False
        for run in targets:
            if not run.task.done():
                run.cancelled = True
                run.task.cancel()
                cancelled = True
        return cancelled

    def close_now(self) -> None:
        """The process is about to exit: cancel every run and kill what it started, now.

        Nothing here awaits; transcripts are already on disk (each message is appended as
        it completes).
        """
        self.cancel()
        # Only a shell tool that was loaded can have started commands: loading it now would
        # hold the exit for a tenth of a second of imports, and one the warm-up thread is
        # still importing (half-made in sys.modules) has started none either.
        shell = sys.modules.get("agent_ls.tools.shell")
        try:
            if shell is not None:
                shell.kill_live_groups()
        except Exception:
            log.exception("killing the running commands failed")
        for hook in self.exit_hooks:
            try:
                hook()
            except Exception:  # one failing clean-up must not stop the others
                log.exception("exit clean-up failed")

    def running(self) -> list[str]:
        return [sid for sid, run in self.runs.items() if not run.task.done()]


def _build_tools() -> ToolRegistry:
    from agent_ls.tools.registry import default_tools

    tools = default_tools()
    tools.specs()  # builds and caches the JSON schemas
    return tools


RunAction = Callable[["AgentLoop"], Awaitable["RunResult"]]
