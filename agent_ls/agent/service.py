"""What every front door shares: sessions, the model, the tools, system prompts and runs.

The LSP server and the ACP agent each hold one :class:`AgentService`; they differ only in how
they reach the editor (their :class:`~agent_ls.ports.editor.EditorPort`) and how they report
progress. Heavy modules (pydantic models, the SDKs, tool schemas) are imported inside the
methods, so a front door can create its service before anything is warm.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent_ls.agent.loop import AgentLoop, RunResult
    from agent_ls.agent.session import Session
    from agent_ls.ports.editor import EditorPort
    from agent_ls.ports.model import Model
    from agent_ls.safety.permissions import Permissions
    from agent_ls.settings import Settings
    from agent_ls.tools.registry import ToolRegistry
    from agent_ls.workspace import Workspace

log = logging.getLogger(__name__)


class UnknownSession(LookupError):
    """No live or saved session has this id (or there is no session yet)."""


class SessionBusy(RuntimeError):
    """The session already has a run; one run per session at a time."""


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
        self.system_prompts: dict[str, str] = {}
        self.warm_task: asyncio.Task[None] | None = None
        self._model: Model | None = None
        self._model_spec: str | None = None
        self._tools: ToolRegistry | None = None
        # Synchronous clean-ups for an exit that cannot wait (child processes to kill).
        self.exit_hooks: list[Callable[[], None]] = []

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
            self._model = load_model(spec)
            self._model_spec = spec
        return self._model

    def tools(self) -> ToolRegistry:
        if self._tools is None:
            from agent_ls.tools.registry import default_tools

            self._tools = default_tools()
        return self._tools

    def start_warm(self) -> None:
        """Begin the warm-up in the background (call once the front door is initialised)."""
        self.warm_task = asyncio.ensure_future(self.warm())

    async def warm(self) -> None:
        """Import the agent core and the model SDK off the event loop.

        Everything slow (pydantic models, tool schemas, the SDK and its client) happens in a
        worker thread, so requests stay responsive while the front door warms up.
        """
        try:
            await asyncio.to_thread(_import_core)
            self._tools = await asyncio.to_thread(_build_tools)
            await self.model().warm()
        except Exception as exc:  # the first ask reports it properly
            log.info("warm-up failed: %s", exc)

    async def wait_warm(self, port: EditorPort) -> None:
        warm = self.warm_task
        if warm is not None and not warm.done():
            port.progress("starting model client")
            await asyncio.shield(warm)  # cancelling the run must not cancel the warm-up

    # -- runs ------------------------------------------------------------------------------

    async def loop_for(self, session: Session, workspace: Workspace, port: EditorPort) -> AgentLoop:
        """An agent loop for one run of ``session`` (the system prompt is built once)."""
        from agent_ls.agent.loop import AgentLoop
        from agent_ls.agent.prompt import build_system_prompt

        if session.id not in self.system_prompts:
            self.system_prompts[session.id] = await asyncio.to_thread(
                build_system_prompt, workspace.root, self.tools().specs()
            )
        return AgentLoop(
            session=session,
            model=self.model(),
            tools=self.tools(),
            workspace=workspace,
            port=port,
            settings=self.settings,
            system_prompt=self.system_prompts[session.id],
        )

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
        from agent_ls.tools.shell import kill_live_groups

        kill_live_groups()
        for hook in self.exit_hooks:
            try:
                hook()
            except Exception:  # one failing clean-up must not stop the others
                log.exception("exit clean-up failed")

    def running(self) -> list[str]:
        return [sid for sid, run in self.runs.items() if not run.task.done()]


def _import_core() -> None:
    for name in ("agent_ls.settings", "agent_ls.agent.loop"):
        importlib.import_module(name)


def _build_tools() -> ToolRegistry:
    from agent_ls.tools.registry import default_tools

    tools = default_tools()
    tools.specs()  # builds and caches the JSON schemas
    return tools


RunAction = Callable[["AgentLoop"], Awaitable["RunResult"]]
