"""``agent-ls acp``: the Agent Client Protocol front door over the same core as ``serve``.

One :class:`~agent_ls.agent.service.AgentService` holds the sessions, the model, the tools
and the runs, exactly as for the LSP server; this module maps ACP's methods onto it and
reaches the client through :class:`~agent_ls.acp.port.AcpEditorPort`. ACP sessions are
agent-ls sessions (the same transcripts), each with the folder the client gave as ``cwd``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acp import RequestError
from acp.schema import (
    AvailableCommand,
    ClientCapabilities,
    CloseSessionResponse,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PromptResponse,
    ResumeSessionResponse,
    SessionInfo,
    SessionMode,
    SessionModeState,
    SetSessionModeResponse,
)
from pydantic import ValidationError

from agent_ls.acp.capabilities import initialize_result
from agent_ls.acp.port import AcpEditorPort, ClientLink
from agent_ls.acp.transport import StdioTransport
from agent_ls.settings import MODES, Settings, parse_settings

if TYPE_CHECKING:
    from acp import Client

    from agent_ls.agent.loop import AgentLoop, RunResult
    from agent_ls.agent.service import ActiveRun
    from agent_ls.agent.session import Session

log = logging.getLogger(__name__)

SHUTDOWN_GRACE = 5.0  # seconds a cancelled run may take to kill its processes on exit
MODE_INFO = {
    "default": ("Default", "Asks before edits, risky commands and paths outside the folder"),
    "acceptEdits": ("Accept edits", "Edits land without asking; commands still ask"),
    "plan": ("Plan", "Read-only: the agent looks and proposes, changes nothing"),
    "bypassPermissions": ("Bypass permissions", "Nothing asks; deny rules still hold"),
}
COMMANDS = [
    AvailableCommand(
        name="compact",
        description="Summarise the conversation so far, to free the context window",
    )
]
CONTEXT_BLOCKS = ("resource", "resource_link")
STOP_REASONS = {"end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"}


@dataclass
class AcpSession:
    """What ACP adds to a session: its folders and the MCP servers the client passed."""

    roots: list[Path]
    mcp_servers: list[dict[str, Any]] = field(default_factory=list)


class AcpAgent:
    """The ``acp.Agent`` implementation: every method called with keyword arguments."""

    def __init__(self, transport: StdioTransport, raw_settings: Any = None) -> None:
        from agent_ls.agent.service import AgentService

        self._raw_settings = raw_settings
        self._settings: Settings | None = None
        self.link = ClientLink(transport)
        self.service = AgentService(lambda: self.settings)
        self.acp_sessions: dict[str, AcpSession] = {}

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            self._settings, problems = parse_settings(self._raw_settings)
            for problem in problems:
                log.warning("agent-ls settings: %s", problem)
        return self._settings

    def on_connect(self, conn: Client) -> None:
        self.link.conn = conn

    # -- initialisation -------------------------------------------------------------------

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: Any = None,
        client_info: Any = None,
        **kwargs: Any,
    ) -> InitializeResponse:
        self.initialized(client_capabilities)
        return InitializeResponse.model_validate(initialize_result())

    def initialized(self, client_capabilities: Any) -> None:
        """Take the client's capabilities (a model or its JSON) and start the warm-up."""
        if client_capabilities is not None:
            try:
                self.link.capabilities = ClientCapabilities.model_validate(
                    client_capabilities
                    if isinstance(client_capabilities, dict)
                    else client_capabilities.model_dump(by_alias=True)
                )
            except ValidationError as exc:
                log.warning("unreadable clientCapabilities (none used): %s", exc)
        if self.service.warm_task is None:
            self.service.start_warm()

    async def authenticate(self, method_id: str, **kwargs: Any) -> None:
        return None  # no auth methods: the model's API key comes from the environment

    # -- sessions --------------------------------------------------------------------------

    async def new_session(
        self,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[Any] | None = None,
        **kwargs: Any,
    ) -> NewSessionResponse:
        state = self._session_state(cwd, additional_directories, mcp_servers)
        session = self.service.new_session()
        self.acp_sessions[session.id] = state
        await asyncio.to_thread(self._save_folder, session, state)
        self._connect_mcp(session.id, state)
        self._after_reply(lambda: self._announce(session))
        return NewSessionResponse(session_id=session.id, modes=self._modes(session))

    async def load_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: list[Any] | None = None,
        additional_directories: list[str] | None = None,
        **kwargs: Any,
    ) -> LoadSessionResponse:
        session = self._open_saved(session_id)
        state = self._session_state(cwd, additional_directories, mcp_servers)
        self.acp_sessions[session.id] = state
        await asyncio.to_thread(self._save_folder, session, state)
        self._connect_mcp(session.id, state)
        from agent_ls.acp.replay import replay

        tools = await self._tools()
        for update in replay(session.history, tools):
            self.link.notify(session.id, update)
        self._after_reply(lambda: self._announce(session))
        return LoadSessionResponse(modes=self._modes(session))

    async def resume_session(
        self,
        session_id: str,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[Any] | None = None,
        **kwargs: Any,
    ) -> ResumeSessionResponse:
        session = self._open_saved(session_id)
        state = self._session_state(cwd, additional_directories, mcp_servers)
        self.acp_sessions[session.id] = state
        await asyncio.to_thread(self._save_folder, session, state)
        self._connect_mcp(session.id, state)
        self._after_reply(lambda: self._announce(session))
        return ResumeSessionResponse(modes=self._modes(session))

    async def close_session(self, session_id: str, **kwargs: Any) -> CloseSessionResponse:
        self._known(session_id)
        await self._stop_run(session_id)
        self.acp_sessions.pop(session_id, None)
        self.service.sessions.pop(session_id, None)
        self.service.system_prompts.pop(session_id, None)
        return CloseSessionResponse()

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any
    ) -> ListSessionsResponse:
        from agent_ls.agent.store import SessionStore

        rows = await asyncio.to_thread(SessionStore.default().list)
        wanted = str(Path(cwd).resolve()) if cwd else None
        infos = []
        for row in rows:
            folder = row.get("workspace")
            if not folder or (wanted is not None and folder != wanted):
                continue  # a session without a recorded folder cannot be listed by one
            infos.append(
                SessionInfo(
                    session_id=row["sessionId"],
                    cwd=folder,
                    title=row.get("title") or None,
                    updated_at=row.get("updated"),
                )
            )
        return ListSessionsResponse(sessions=infos)

    async def set_session_mode(
        self, session_id: str, mode_id: str, **kwargs: Any
    ) -> SetSessionModeResponse:
        session = self._known(session_id)
        if mode_id not in MODES:
            raise RequestError.invalid_params(
                {"modeId": f"unknown mode {mode_id!r}; one of {', '.join(MODES)}"}
            )
        session.permissions.mode = mode_id
        self.link.notify(
            session_id, {"sessionUpdate": "current_mode_update", "currentModeId": mode_id}
        )
        return SetSessionModeResponse()

    # -- prompts ---------------------------------------------------------------------------

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        from agent_ls.agent.service import SessionBusy

        session = self._known(session_id)
        state = self.acp_sessions[session_id]
        words = "".join(str(getattr(b, "text", "")) for b in prompt).strip()
        if not words and not any(getattr(b, "type", "") in CONTEXT_BLOCKS for b in prompt):
            raise RequestError.invalid_params({"prompt": "the prompt has no text"})
        compact = words == "/compact" and len(prompt) == 1
        try:
            run = self.service.begin_run(
                session_id, lambda run: self._run_body(session, state, run, prompt, compact)
            )
        except SessionBusy as exc:
            raise RequestError.invalid_request({"sessionId": str(exc)}) from None
        try:
            result = await asyncio.shield(run.task)
        except asyncio.CancelledError:  # the connection is closing: stop the run first
            run.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await run.task
            raise
        finally:
            self.service.end_run(run)
        if result.stop_reason == "error":
            raise RequestError(-32603, f"agent-ls: {result.error}", {"stopReason": "error"})
        stop = result.stop_reason if result.stop_reason in STOP_REASONS else "end_turn"
        return PromptResponse(
            stop_reason=stop,  # type: ignore[arg-type]
            field_meta={
                "agentLs": {
                    "usage": result.usage.to_contract(),
                    "costUsd": round(result.cost_usd, 6),
                }
            },
        )

    async def _run_body(
        self,
        session: Session,
        state: AcpSession,
        run: ActiveRun,
        blocks: list[Any],
        compact: bool,
    ) -> RunResult:
        from agent_ls.acp.prompt import build_prompt
        from agent_ls.agent.loop import RunResult
        from agent_ls.workspace import Workspace

        port = AcpEditorPort(self.link, session.id, self.settings)
        try:
            workspace = Workspace(state.roots, reader=port.read_text)
            early = self.service.read_context_early(session, workspace)
            await self.service.wait_warm(port)
            try:
                self.service.model()
            except Exception as exc:  # the model setting names no usable provider
                return RunResult(session.id, "error", "", error=str(exc))
            loop: AgentLoop = await self.service.loop_for(session, workspace, port, early)
            if compact:
                if not session.history:
                    return RunResult(session.id, "end_turn", "")
                return await loop.compact_now()
            text, context = await build_prompt(
                blocks, workspace, session.read_state, session.named_paths
            )
            session.name_after(text)  # the user's words, not the attachments before them
            return await loop.run(context.prefix(text))
        except asyncio.CancelledError:
            return RunResult(session.id, "cancelled", "")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        """``session/cancel``: the running prompt answers ``cancelled``; questions withdrawn."""
        self.service.cancel(session_id)

    async def fork_session(
        self,
        session_id: str,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[Any] | None = None,
        **kwargs: Any,
    ) -> Any:
        raise RequestError.method_not_found("session/fork")

    async def set_config_option(
        self, config_id: str, session_id: str, value: str | bool, **kwargs: Any
    ) -> Any:
        raise RequestError.invalid_params({"configId": f"no config option {config_id!r}"})

    # -- extensions --------------------------------------------------------------------------

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(f"_{method}")

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        log.info("ignored extension notification _%s", method)

    # -- helpers ---------------------------------------------------------------------------

    def _session_state(
        self, cwd: str, more: list[str] | None, mcp_servers: list[Any] | None
    ) -> AcpSession:
        roots: list[Path] = []
        for raw in [cwd, *(more or [])]:
            path = Path(raw)
            if not path.is_absolute():
                raise RequestError.invalid_params({"cwd": f"{raw!r} is not an absolute path"})
            if not path.is_dir():
                raise RequestError.invalid_params({"cwd": f"{raw} is not a folder"})
            roots.append(path.resolve())
        servers = [
            s.model_dump(mode="json", by_alias=True, exclude_none=True)
            if hasattr(s, "model_dump")
            else s
            for s in (mcp_servers or [])
        ]
        return AcpSession(roots, servers)

    def _connect_mcp(self, session_id: str, state: AcpSession) -> None:
        """Hand the client's MCP servers to the core's manager (source ``acp``, no trust
        question: the editor chose them). They start in the background; the session's first
        prompt waits for those still starting, as over LSP."""
        if not state.mcp_servers:
            return
        manager = self.service.mcp
        if manager is None:
            import atexit

            from agent_ls.tools.mcp import McpManager

            manager = McpManager(cwd=state.roots[0])
            self.service.mcp = manager
            self.service.exit_hooks.append(manager.kill_all)
            atexit.register(manager.kill_all)
        for problem in manager.add_servers(state.mcp_servers, "acp"):
            log.warning("MCP server from the client: %s", problem)

    def _known(self, session_id: str) -> Session:
        session = self.service.sessions.get(session_id)
        if session is None or session_id not in self.acp_sessions:
            raise RequestError.invalid_params(
                {"sessionId": f"unknown session {session_id!r}: call session/new or session/load"}
            )
        return session

    def _open_saved(self, session_id: str) -> Session:
        from agent_ls.agent.service import UnknownSession

        try:
            return self.service.session(session_id)
        except (UnknownSession, ValueError):
            raise RequestError.invalid_params(
                {"sessionId": f"no saved session {session_id!r}"}
            ) from None

    def _modes(self, session: Session) -> SessionModeState:
        return SessionModeState(
            current_mode_id=session.permissions.mode,
            available_modes=[
                SessionMode(id=mode, name=MODE_INFO[mode][0], description=MODE_INFO[mode][1])
                for mode in MODES
            ],
        )

    def _announce(self, session: Session) -> None:
        self.link.notify(
            session.id,
            {
                "sessionUpdate": "available_commands_update",
                "availableCommands": [c.model_dump(by_alias=True) for c in COMMANDS],
            },
        )

    @staticmethod
    def _after_reply(action: Any) -> None:
        """Run ``action`` once the current reply is queued (updates about a session the
        client learns of only from that reply)."""
        asyncio.get_running_loop().call_soon(action)

    async def _tools(self) -> Any:
        warm = self.service.warm_task
        if warm is not None and not warm.done():
            await asyncio.shield(warm)
        return self.service.tools()

    @staticmethod
    def _save_folder(session: Session, state: AcpSession) -> None:
        """Keep the session's folder in its transcript (``session/list`` and ``session/load``
        of a session that has no message yet need it)."""
        folder = str(state.roots[0])
        store = session.store
        if session.workspace == folder and store is not None and store.exists(session.id):
            return
        session.workspace = folder
        if store is None:
            return
        store.append(
            session.id,
            {
                "type": "meta",
                "sessionId": session.id,
                "created": session.created,
                "workspace": folder,
            },
        )

    async def _stop_run(self, session_id: str) -> None:
        run = self.service.runs.get(session_id)
        if run is not None and not run.task.done():
            self.service.cancel(session_id)
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(run.task), SHUTDOWN_GRACE)

    async def shutdown(self) -> None:
        """Stop every run and wait (bounded) for its processes to be killed."""
        tasks = [r.task for r in self.service.runs.values() if not r.task.done()]
        self.service.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=SHUTDOWN_GRACE)
        self.service.close_now()  # whatever did not stop in time is killed now


async def run(
    transport: StdioTransport,
    raw_settings: Any,
    client_capabilities: Any,
    stop: asyncio.Event,
) -> None:
    """Serve the connection until the client goes (EOF) or ``stop`` is set (SIGTERM).

    ``client_capabilities`` is not None when ``initialize`` was already answered
    (:mod:`agent_ls.acp.main`): the agent takes them as if it had answered it.
    """
    from acp.agent.connection import AgentSideConnection

    agent = AcpAgent(transport, raw_settings)
    if client_capabilities is not None:
        agent.initialized(client_capabilities)
    conn = AgentSideConnection(agent, transport, listening=False, use_unstable_protocol=True)
    listening = asyncio.ensure_future(conn.listen())
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({listening, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
        listening.cancel()
        with contextlib.suppress(BaseException):
            await listening
        await agent.shutdown()
        await conn.close()
