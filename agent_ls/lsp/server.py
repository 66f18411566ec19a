"""The language server: the only module (with ``lsp.port``) that speaks LSP.

It keeps the editor's buffers, exposes the ``agent.*`` commands and the "Fix with agent" code
action, and runs the agent core (imported lazily, so ``initialize`` answers fast) with an
:class:`~agent_ls.lsp.port.LspEditorPort` per run.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import importlib
import json
import logging
import os
import sys
import uuid
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from lsprotocol import types
from pygls.exceptions import (
    JsonRpcException,
    JsonRpcInternalError,
    JsonRpcInvalidParams,
    JsonRpcRequestCancelled,
)
from pygls.lsp.server import LanguageServer
from pygls.protocol import JsonRPCNotification, LanguageServerProtocol, default_converter
from pygls.protocol import language_server as pygls_language_server
from pygls.protocol.language_server import lsp_method

from agent_ls import __version__, codecache

# pygls's converter writes a (un)structure function per message class on first use (~80 before
# the first ask is answered): their code comes from the code cache, like the dataclasses'.
_cattrs_gen = sys.modules.get("cattrs.gen")
if _cattrs_gen is not None and callable(getattr(_cattrs_gen, "make_dict_structure_fn", None)):
    codecache.cover(_cattrs_gen, "compile", _cattrs_gen.make_dict_structure_fn)


class _JsonWhenLogged:
    """Stands in for ``json`` in pygls's ``language_server`` module, whose one use of it is
    ``logger.debug("Server capabilities: %s", json.dumps(...))``: pygls converted and wrote
    the capabilities before the logger dropped the line (~3 ms of every ``initialize``); the
    text is now written when the line is."""

    class dumps:  # called as json.dumps
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.args, self.kwargs = args, kwargs

        def __str__(self) -> str:
            return json.dumps(*self.args, **self.kwargs)


if vars(pygls_language_server).get("json") is json:
    pygls_language_server.json = _JsonWhenLogged  # type: ignore[assignment]

if TYPE_CHECKING:
    from agent_ls.agent.loop import AgentLoop, RunResult
    from agent_ls.agent.service import ActiveRun
    from agent_ls.agent.session import Session
    from agent_ls.lsp.protocol import (
        AskParams,
        FixParams,
        RememberParams,
        ResumeParams,
        SessionParams,
        SetModeParams,
    )
    from agent_ls.ports.editor import Buffer
    from agent_ls.settings import Settings
    from agent_ls.workspace import Workspace

log = logging.getLogger(__name__)

REQUEST_FAILED = -32803
FIX_WHOLE_FILE_LINES = 400  # agent.fix shows smaller files whole (no extra read_file turn)
IGNORED_MESSAGE = "$/agent-ls/ignored"
MODE_NAMES = ("default", "acceptEdits", "plan", "bypassPermissions")  # as in settings.Mode
_command_params: contextvars.ContextVar[types.ExecuteCommandParams | None] = contextvars.ContextVar(
    "agent_ls_command_params", default=None
)


class AgentProtocol(LanguageServerProtocol):
    """Adds what pygls lacks: the client's workDoneToken, and real ``$/cancelRequest``."""

    def __init__(self, server: Any, converter: Any):
        super().__init__(server, converter)
        self.running: dict[Any, asyncio.Task[Any]] = {}

    @lsp_method(types.INITIALIZE)
    def lsp_initialize(
        self, params: types.InitializeParams
    ) -> Generator[Any, Any, types.InitializeResult]:
        result: types.InitializeResult = yield from super().lsp_initialize(params)
        if result.capabilities.execute_command_provider is not None:
            result.capabilities.execute_command_provider.work_done_progress = True
        return result

    @lsp_method(types.WORKSPACE_EXECUTE_COMMAND)
    def lsp_workspace__execute_command(
        self, params: types.ExecuteCommandParams
    ) -> Generator[Any, Any, Any]:
        _command_params.set(params)
        return (yield from super().lsp_workspace__execute_command(params))

    def structure_message(self, data: dict[str, Any]) -> Any:
        """pygls drops a request whose params do not parse; answer it with -32602 instead."""
        try:
            return super().structure_message(data)
        except JsonRpcException as exc:
            if "id" not in data or "method" not in data:
                raise
            error: JsonRpcException = JsonRpcInvalidParams(f"invalid params for {data['method']}")
            if not isinstance(exc, JsonRpcInvalidParams):
                error = JsonRpcInternalError(f"cannot read the {data['method']} request")
            self._send_response(data["id"], error=error.to_response_error())
            return JsonRPCNotification(method=IGNORED_MESSAGE, params=None, jsonrpc="2.0")

    @lsp_method(types.SHUTDOWN)
    def lsp_shutdown(self, *args: Any) -> Generator[Any, Any, None]:
        """As pygls does, but over a copy: cancelling a pending client request (a question the
        user has not answered) removes it from the dict pygls was iterating, and shutdown
        answered with an error instead of null."""
        if (user_handler := self.fm.features.get(types.SHUTDOWN)) is not None:
            yield user_handler, args, None
        current_id = self.msg_id
        for msg_id, future in list(self._request_futures.items()):
            if msg_id != current_id and not future.done():
                future.cancel()
        self._shutdown = True
        return None

    def _handle_cancel_notification(self, msg_id: Any) -> None:
        task = self.running.get(msg_id)
        if task is not None and not task.done():
            task.cancel()
        super()._handle_cancel_notification(msg_id)


@dataclass
class ServerState:
    settings: Settings | None = None


class AgentServer(LanguageServer):
    def start_io(self, stdin: Any = None, stdout: Any = None) -> None:
        """As pygls's, but a pipe from the client is read on the event loop (``lsp/stdio``)."""
        import threading

        from pygls.io_ import StdoutWriter, run_async

        from agent_ls.lsp.stdio import is_pipe, pipe_reader

        stdin = stdin or sys.stdin.buffer
        stdout = stdout or sys.stdout.buffer
        if not is_pipe(stdin, stdout):
            return super().start_io(stdin, stdout)
        stop = self._stop_event = threading.Event()
        self.protocol.set_writer(StdoutWriter(stdout))

        async def serve() -> None:
            await run_async(
                stop_event=stop,
                reader=await pipe_reader(stdin),
                protocol=self.protocol,
                logger=log,
                error_handler=self.report_server_error,
            )

        try:
            asyncio.run(serve())
        except BrokenPipeError:
            log.error("Connection to the client is lost! Shutting down the server.")
        except (KeyboardInterrupt, SystemExit):
            pass
        finally:
            self.shutdown()

    def __init__(self) -> None:
        from agent_ls.lsp.forward_refs import lazily_resolving_converter

        super().__init__(
            "agent-ls",
            __version__,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
            protocol_cls=AgentProtocol,
            converter_factory=lambda: lazily_resolving_converter(default_converter),
        )
        self.state = ServerState()
        self.init_options: Any = None
        self.mcp_task: asyncio.Task[None] | None = None
        from agent_ls.agent.service import AgentService

        self.service = AgentService(lambda: self.settings)
        self.service.on_warning = self.warn

    def warn(self, message: str) -> None:
        self.window_show_message(
            types.ShowMessageParams(type=types.MessageType.Warning, message=f"agent-ls: {message}")
        )

    @property
    def settings(self) -> Settings:
        if self.state.settings is None:
            from agent_ls.settings import parse_settings

            self.state.settings, problems = parse_settings(self.init_options)
            for problem in problems:
                self.window_show_message(
                    types.ShowMessageParams(
                        type=types.MessageType.Warning, message=f"agent-ls settings: {problem}"
                    )
                )
        return self.state.settings

    def report_server_error(self, error: Exception, source: Any) -> None:
        log.error("server error: %s", error)

    # -- workspace & buffers ---------------------------------------------------------------

    def roots(self) -> list[Path]:
        from agent_ls.lsp.jsonrpc import uri_to_path

        roots: list[Path] = []
        for folder in self.workspace.folders.values():
            path = uri_to_path(folder.uri)
            if path is not None:
                roots.append(path)
        root_path = self.workspace.root_path
        if not roots and root_path:
            roots.append(Path(root_path))
        return roots or [Path.cwd()]

    def agent_workspace(self) -> Workspace:
        from agent_ls.workspace import Workspace

        return Workspace(self.roots(), buffers=self.open_buffer, all_buffers=self.open_buffers)

    def open_buffers(self) -> list[Buffer]:
        from agent_ls.lsp.jsonrpc import uri_to_path
        from agent_ls.ports.editor import Buffer

        buffers = []
        for uri, doc in list(self.workspace.text_documents.items()):
            path = uri_to_path(uri)
            if path is not None:
                buffers.append(Buffer(path, doc.source, doc.version))
        return buffers

    def display_path(self, path: Path) -> str:
        return self.agent_workspace().display(path)

    def open_buffer(self, path: Path) -> Buffer | None:
        from agent_ls.lsp.jsonrpc import path_to_uri, uri_to_path
        from agent_ls.ports.editor import Buffer

        docs = self.workspace.text_documents
        doc = docs.get(path_to_uri(path))
        if doc is None:
            for uri, candidate in docs.items():
                if uri_to_path(uri) == path:
                    doc = candidate
                    break
        if doc is None:
            return None
        return Buffer(path, doc.source, doc.version)

    def current_text(self, path: Path) -> tuple[str | None, int | None]:
        """What the editor holds for ``path`` now (the buffer, else the disk)."""
        buffer = self.open_buffer(path)
        if buffer is not None:
            return buffer.text, buffer.version
        from agent_ls.workspace import FileProblem, read_disk_text

        try:
            # Not read_text: universal newlines would turn CRLF into LF; a BOM is stripped as
            # editors do.
            return read_disk_text(path), None
        except FileProblem:
            return None, None

    # -- sessions, model, tools ----------------------------------------------------------------

    def session(self, session_id: str | None, *, create: bool = True) -> Session:
        """The session a command names (or the current one); -32602 for an unknown id."""
        from agent_ls.agent.service import UnknownSession

        try:
            return self.service.session(session_id, create=create)
        except UnknownSession as exc:
            raise JsonRpcInvalidParams(str(exc)) from None

    async def warm(self) -> None:
        from agent_ls.agent.warmup import responsive_while

        with responsive_while():
            await asyncio.to_thread(importlib.import_module, "agent_ls.lsp.protocol")
        await self.service.warm()


server = AgentServer()


# -- lifecycle and documents -----------------------------------------------------------------


@server.feature(types.INITIALIZE)
def on_initialize(ls: AgentServer, params: types.InitializeParams) -> None:
    ls.init_options = params.initialization_options
    ls.state.settings = None


@server.feature(types.INITIALIZED)
def on_initialized(ls: AgentServer, params: types.InitializedParams) -> None:
    ls.service.warm_task = asyncio.ensure_future(ls.warm())
    from agent_ls.lsp.mcp import start_mcp

    ls.mcp_task = asyncio.ensure_future(start_mcp(ls))


@server.feature(types.SHUTDOWN)
async def on_shutdown(ls: AgentServer, params: Any) -> None:
    await ls.service.close_mcp()


@server.feature(types.EXIT)
def on_exit(ls: AgentServer, params: Any) -> None:
    """Exit at once, as the client asked: kill what runs, flush, and leave.

    pygls would otherwise join its stdin reader (blocked until the client closes the pipe)
    and the interpreter would tear down the whole heap; neither does anything for the user.
    """
    code = 0 if ls.protocol._shutdown else 1
    try:
        ls.service.close_now()
    finally:  # a clean-up that failed must not keep the process alive
        exit_now(code)


def exit_now(code: int) -> NoReturn:
    """Flush what is written and end the process without interpreter teardown."""
    with contextlib.suppress(Exception):
        codecache.save()  # what was compiled since the warm-up, if anything (cheap if not)
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


@server.feature(IGNORED_MESSAGE)
def on_ignored(ls: AgentServer, params: Any) -> None:
    """Stands in for a request already answered with an error (see structure_message)."""


@server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
async def on_configuration(ls: AgentServer, params: types.DidChangeConfigurationParams) -> None:
    from agent_ls.settings import parse_settings

    raw = params.settings
    if isinstance(raw, dict) and isinstance(raw.get("agent"), dict):
        raw = raw["agent"]
    elif not isinstance(raw, dict) or not raw:
        try:
            answer = await asyncio.wait_for(
                ls.workspace_configuration_async(
                    types.ConfigurationParams(items=[types.ConfigurationItem(section="agent")])
                ),
                ls.settings.client_request_timeout,
            )
        except (JsonRpcException, TimeoutError):
            return
        raw = answer[0] if answer else None
    if isinstance(raw, dict):
        ls.init_options = raw
        ls.state.settings = None
        _settings, problems = parse_settings(raw)
        for problem in problems:
            ls.window_show_message(
                types.ShowMessageParams(
                    type=types.MessageType.Warning, message=f"agent-ls settings: {problem}"
                )
            )


@server.feature(
    types.TEXT_DOCUMENT_CODE_ACTION,
    types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix]),
)
def on_code_action(
    ls: AgentServer, params: types.CodeActionParams
) -> list[types.CodeAction | types.Command]:
    diagnostics = list(params.context.diagnostics or [])
    if not diagnostics:
        return []
    first = diagnostics[0].message.strip().splitlines()[0] if diagnostics[0].message else ""
    title = f"Fix with agent: {first[:60]}" + ("…" if len(first) > 60 else "")
    if len(diagnostics) > 1:
        title = f"Fix {len(diagnostics)} problems with agent"
    converter = ls.protocol._converter
    argument = {
        "uri": params.text_document.uri,
        "range": converter.unstructure(params.range),
        "diagnostics": [converter.unstructure(d) for d in diagnostics],
    }
    fix = types.Command(title=title, command="agent.fix", arguments=[argument])
    text_caps = ls.client_capabilities.text_document
    action_caps = text_caps.code_action if text_caps else None
    if action_caps is None or action_caps.code_action_literal_support is None:
        return [fix]  # a client without literal support only understands Commands here
    return [
        types.CodeAction(
            title=title,
            kind=types.CodeActionKind.QuickFix,
            diagnostics=diagnostics,
            command=fix,
        )
    ]


# -- commands ----------------------------------------------------------------------------------

CommandHandler = Callable[[AgentServer, Any], Awaitable[Any]]


def command(name: str, params: str | None = None) -> Callable[[CommandHandler], CommandHandler]:
    """Register an ``agent.*`` command taking one JSON object, with clean errors.

    ``params`` names the model in :mod:`agent_ls.lsp.protocol` the object is validated into
    before the handler sees it (imported on first use: pydantic stays off the start-up path);
    without it the handler gets the plain object. A handler picks its session with
    ``ls.session(params.session_id)``.
    """

    def decorate(handler: CommandHandler) -> CommandHandler:
        # No functools.wraps: pygls reads the signature (following __wrapped__) to convert
        # arguments, and this wrapper must receive them raw to validate them itself.
        async def wrapper(ls: AgentServer, *args: Any) -> Any:
            if len(args) > 1:
                raise JsonRpcInvalidParams(f"{name} takes one object argument, got {len(args)}")
            raw = args[0] if args else {}
            if raw is None:
                raw = {}
            if not isinstance(raw, dict):
                raise JsonRpcInvalidParams(
                    f"{name} takes one JSON object argument, got {type(raw).__name__}"
                )
            try:
                if params is not None:
                    model = getattr(importlib.import_module("agent_ls.lsp.protocol"), params)
                    return await handler(ls, model.model_validate(raw))
                return await handler(ls, raw)
            except (JsonRpcException, asyncio.CancelledError):
                raise
            except Exception as exc:
                # pydantic is imported here, not up front: while the warm-up thread imports
                # it, an import on the loop would wait for that lock (~100-200 ms).
                from pydantic import ValidationError

                if isinstance(exc, ValidationError):
                    problems = "; ".join(
                        f"{'.'.join(str(p) for p in e['loc']) or 'argument'}: {e['msg']}"
                        for e in exc.errors()[:5]
                    )
                    raise JsonRpcInvalidParams(f"invalid {name} argument: {problems}") from None
                log.exception("%s failed", name)
                raise JsonRpcInternalError(f"{name} failed: {type(exc).__name__}: {exc}") from None

        wrapper.__name__ = wrapper.__qualname__ = handler.__name__
        wrapper.__doc__ = handler.__doc__
        # pygls reads a command handler's type hints on every call (``get_type_hints``
        # compiles each string annotation anew): 60 µs of each command, 16 without them.
        # The wrapper takes its arguments raw, so it needs none (``ls`` is found by name).
        wrapper.__annotations__ = {}
        server.command(name)(wrapper)
        return handler

    return decorate


@command("agent.ask", "AskParams")
async def cmd_ask(ls: AgentServer, params: AskParams) -> dict[str, Any]:
    from agent_ls.agent.context import attach
    from agent_ls.lsp.jsonrpc import uri_to_path
    from agent_ls.lsp.port import position_encoding

    session = ls.session(params.session_id)
    active_path = uri_to_path(params.uri) if params.uri else None
    active_text = ls.current_text(active_path)[0] if active_path else None
    context = attach(
        params.prompt,
        ls.agent_workspace(),
        session.read_state,
        session.named_paths,
        active_path=active_path,
        active_text=active_text,
        selection=params.range.model_dump() if params.range is not None else None,
        encoding=position_encoding(ls),
    )
    session.name_after(params.prompt)
    session.workspace = session.workspace or str(ls.agent_workspace().root)
    notes = ["context: " + ", ".join(context.notes)] if context.notes else []
    first_line = params.prompt.strip().splitlines()[0] if params.prompt.strip() else "Agent"
    return await run_agent(
        ls, session, context.prefix(params.prompt), title="Agent", message=first_line, notes=notes
    )


@command("agent.fix", "FixParams")
async def cmd_fix(ls: AgentServer, params: FixParams) -> dict[str, Any]:
    from agent_ls.agent.prompt import fix_prompt
    from agent_ls.lsp.jsonrpc import uri_to_path

    path = uri_to_path(params.uri)
    if path is None:
        raise JsonRpcInvalidParams(f"agent.fix needs a file URI, got {params.uri!r}")
    session = ls.session(params.session_id)
    text, version = ls.current_text(path)
    whole = text is not None and text.count("\n") <= FIX_WHOLE_FILE_LINES
    prompt = fix_prompt(ls.display_path(path), text, params.diagnostics, whole_file=whole)
    if whole and text is not None:
        session.read_state.record_text(path, text, version)  # the model saw all of it
    first = str(params.diagnostics[0].get("message", "")).strip().splitlines()
    message = f"Fix: {first[0]}" if first else "Fix"
    session.name_after(message)
    session.workspace = session.workspace or str(ls.agent_workspace().root)
    return await run_agent(ls, session, prompt, title="Fix with agent", message=message)


@command("agent.cancel", "SessionParams")
async def cmd_cancel(ls: AgentServer, params: SessionParams) -> dict[str, Any]:
    return {"cancelled": ls.service.cancel(params.session_id)}


@command("agent.status")
async def cmd_status(ls: AgentServer, raw: dict[str, Any]) -> dict[str, Any]:
    service = ls.service
    current = service.current
    model: str
    mode: str
    if ls.state.settings is not None or current is not None:
        model, mode = ls.settings.resolved_model(), ls.settings.mode
    else:
        # Right after start the warm-up thread is importing pydantic: answer from the raw
        # options instead of waiting for that import (status must stay instant).
        model, mode = _raw_model_and_mode(ls.init_options)
    return {
        "version": __version__,
        "model": model,
        "mode": current.permissions.mode if current else mode,
        "sessionId": current.id if current else None,
        "running": service.running(),
        "sessions": len(service.sessions),
        "usage": current.usage.to_contract() if current else None,
        "costUsd": round(current.cost_usd, 6) if current else 0.0,
        "grants": list(current.permissions.grants) if current else [],
        "workspace": [str(p) for p in ls.roots()],
        "agents": await _agents_status(ls),
        "sandbox": await _sandbox_status(ls),
    }


async def _agents_status(ls: AgentServer) -> dict[str, Any] | None:
    """The sub-agents of the current session (a fresh look before its first run)."""
    roots = ls.roots()
    if not roots or (ls.state.settings is None and ls.service.current is None):
        return None  # right after start: do not wait on the warm-up's imports
    current = ls.service.current
    return await ls.service.subagent_status(current.id if current else None, roots[0])


async def _sandbox_status(ls: AgentServer) -> dict[str, object]:
    """The shell sandbox as ``run_shell`` would use it now (probed once, off the loop)."""
    from agent_ls.safety.sandbox import sandbox_status

    mode: str
    if ls.state.settings is not None:
        mode = ls.settings.sandbox
    else:  # as for the model and mode: no waiting for the settings' pydantic import
        raw = ls.init_options if isinstance(ls.init_options, dict) else {}
        mode = str(raw.get("sandbox")) if raw.get("sandbox") in ("on", "off") else "auto"
    return (await sandbox_status(mode, ls.roots())).to_contract()


def _raw_model_and_mode(options: Any) -> tuple[str, str]:
    from agent_ls import DEFAULT_MODEL

    raw = options if isinstance(options, dict) else {}
    model = raw.get("model") if isinstance(raw.get("model"), str) else None
    mode = raw.get("mode") if raw.get("mode") in MODE_NAMES else "default"
    return model or os.environ.get("AGENT_LS_MODEL") or DEFAULT_MODEL, str(mode)


@command("agent.mcp")
async def cmd_mcp(ls: AgentServer, raw: dict[str, Any]) -> dict[str, Any]:
    """The MCP servers: ``{servers: [{name, source, state, tools, error?}]}``."""
    from agent_ls.lsp.mcp import status

    return await status(ls)


@command("agent.newSession")
async def cmd_new_session(ls: AgentServer, raw: dict[str, Any]) -> dict[str, Any]:
    session = ls.service.new_session()
    return {"sessionId": session.id}


@command("agent.sessions")
async def cmd_sessions(ls: AgentServer, raw: dict[str, Any]) -> dict[str, Any]:
    from agent_ls.agent.store import SessionStore

    live = {
        s.id: {
            "sessionId": s.id,
            "title": s.title,
            "workspace": s.workspace,
            "turns": sum(1 for m in s.history if m.role == "assistant"),
            "costUsd": round(s.cost_usd, 6),
            "current": s.id == ls.service.current_session,
            "loaded": True,
        }
        for s in ls.service.sessions.values()
    }
    saved = await asyncio.to_thread(SessionStore.default().list)
    rows = list(live.values())
    for row in saved:
        if row["sessionId"] in live:
            live[row["sessionId"]]["updated"] = row["updated"]
        else:
            rows.append({**row, "current": False, "loaded": False})
    return {"sessions": rows}


@command("agent.resume", "ResumeParams")
async def cmd_resume(ls: AgentServer, params: ResumeParams) -> dict[str, Any]:
    session = ls.session(params.session_id)
    return {"sessionId": session.id, "title": session.title}


@command("agent.compact", "SessionParams")
async def cmd_compact(ls: AgentServer, params: SessionParams) -> dict[str, Any]:
    session = ls.session(params.session_id)
    if not session.history:
        return {"sessionId": session.id, "compacted": False, "reason": "the session is empty"}
    result = await _run(ls, session, "Compact", "compacting the conversation", _compact)
    return {**result, "compacted": result["stopReason"] == "end_turn"}


def _compact(loop: AgentLoop) -> Awaitable[RunResult]:
    return loop.compact_now()


@command("agent.setMode", "SetModeParams")
async def cmd_set_mode(ls: AgentServer, params: SetModeParams) -> dict[str, Any]:
    from agent_ls.ports.updates import current_mode_update

    session = ls.session(params.session_id)
    session.permissions.mode = params.mode
    ls.protocol.notify(
        "agent/update",
        {
            "sessionId": session.id,
            "update": current_mode_update(params.mode),
        },
    )
    return {"sessionId": session.id, "mode": params.mode}


@command("agent.clearGrants", "SessionParams")
async def cmd_clear_grants(ls: AgentServer, params: SessionParams) -> dict[str, Any]:
    session = ls.session(params.session_id)
    cleared = len(session.permissions.grants)
    session.permissions.clear_grants()
    return {"sessionId": session.id, "cleared": cleared}


@command("agent.remember", "RememberParams")
async def cmd_remember(ls: AgentServer, params: RememberParams) -> dict[str, Any]:
    """Append one line to the project's memory; it shows from the next ask."""
    from agent_ls.agent.memory import remember

    try:
        path, line = await asyncio.to_thread(remember, ls.roots()[0], params.text)
    except ValueError as exc:
        raise JsonRpcInvalidParams(f"agent.remember: {exc}") from None
    return {"path": str(path), "line": line}


@command("agent.undo", "SessionParams")
async def cmd_undo(ls: AgentServer, params: SessionParams) -> dict[str, Any]:
    """Revert what the session's last run applied, as one previewed edit."""
    from agent_ls.agent.undo import plan_undo
    from agent_ls.edits import apply_hunks
    from agent_ls.lsp.port import LspEditorPort, can_delete_files
    from agent_ls.ports.editor import EditProposal

    session = ls.session(params.session_id, create=False)
    if session.id in ls.service.running():
        raise JsonRpcException(
            f"session {session.id} is running; cancel it or wait before undoing", REQUEST_FAILED
        )
    plan = plan_undo(session.journal, ls.current_text)
    skipped = [{"path": str(p), "reason": r} for p, r in plan.skipped]
    proposals = [
        EditProposal(
            path=f.path,
            old_text=f.current,
            new_text=apply_hunks(f.current, f.hunks),
            hunks=f.hunks,
            version=f.version,
            label=f"agent-ls: undo the last run in {ls.display_path(f.path)}",
        )
        for f in plan.files
        if not f.delete
    ]
    deletes = [
        (f.path, f"agent-ls: the last run created {ls.display_path(f.path)}")
        for f in plan.files
        if f.delete
    ]
    if deletes and not can_delete_files(ls.client_capabilities):
        skipped += [
            {
                "path": str(p),
                "reason": "the run created it; this editor cannot delete files "
                "through the server, delete it yourself",
            }
            for p, _label in deletes
        ]
        deletes = []
    reverted: list[str] = []
    if proposals or deletes:
        shown = ", ".join(ls.display_path(p.path) for p in proposals)
        summary = f"Undo the last run's changes to {shown or 'no file'}?" + (
            f" And delete {', '.join(ls.display_path(p) for p, _ in deletes)}?" if deletes else ""
        )
        port = LspEditorPort(ls, session.id, None)
        outcomes, deleted = await port.propose_undo(proposals, deletes, summary)
        for proposal, outcome in zip(proposals, outcomes, strict=True):
            path = str(proposal.path)
            if outcome.status in ("applied", "partial"):
                reverted.append(path)
            if outcome.status == "partial":
                left = [str(i + 1) for i in range(len(proposal.hunks)) if i not in outcome.landed]
                skipped.append(
                    {
                        "path": path,
                        "reason": f"hunk(s) {', '.join(left)} not accepted in the preview",
                    }
                )
            elif outcome.status not in ("applied", "unconfirmed"):
                reason = "not accepted in the preview"
                if outcome.status == "failed":
                    reason = outcome.reason or "the editor did not apply it"
                skipped.append({"path": path, "reason": reason})
        for (path_, _label), gone in zip(deletes, deleted, strict=True):
            if gone:
                reverted.append(str(path_))
            else:
                skipped.append(
                    {"path": str(path_), "reason": "deletion not accepted in the preview"}
                )
        if reverted:
            session.journal.clear()  # undone: a second undo has nothing left to revert
            await asyncio.to_thread(session.save_journal)
    return {"sessionId": session.id, "reverted": reverted, "skipped": skipped}


@server.feature(types.WINDOW_WORK_DONE_PROGRESS_CANCEL)
def on_progress_cancel(ls: AgentServer, params: types.WorkDoneProgressCancelParams) -> None:
    ls.service.cancel(token=params.token)


# -- running the agent --------------------------------------------------------------------------


async def _begin_progress(ls: AgentServer, title: str, message: str) -> str | int | None:
    params = _command_params.get()
    token = params.work_done_token if params is not None else None
    caps = ls.client_capabilities
    if token is None:
        if not (caps.window and caps.window.work_done_progress):
            return None
        token = f"agent-ls/{uuid.uuid4()}"
        try:
            await asyncio.wait_for(
                ls.work_done_progress.create_async(token), ls.settings.client_request_timeout
            )
        except (JsonRpcException, TimeoutError):
            return None
    ls.work_done_progress.begin(
        token, types.WorkDoneProgressBegin(title=title, cancellable=True, message=message[:100])
    )
    return token


def _end_progress(ls: AgentServer, token: str | int | None, message: str) -> None:
    if token is None:
        return
    ls.work_done_progress.end(token, types.WorkDoneProgressEnd(message=message))
    ls.work_done_progress.tokens.pop(token, None)


def _summary(result: RunResult) -> str:
    if result.stop_reason == "error":
        return f"Failed: {result.error}"
    if result.stop_reason == "cancelled":
        return "Cancelled"
    tokens = result.usage.input_tokens + result.usage.output_tokens
    cost = f", ${result.cost_usd:.4f}" if result.cost_usd else ""
    return f"Done ({result.stop_reason}, {tokens} tokens{cost})"


async def run_agent(
    ls: AgentServer,
    session: Session,
    prompt: str,
    *,
    title: str,
    message: str,
    notes: list[str] | None = None,
) -> dict[str, Any]:
    """Run one ask in ``session`` with progress, streaming and every cancel path."""
    return await _run(ls, session, title, message, lambda loop: loop.run(prompt), notes)


async def _run(
    ls: AgentServer,
    session: Session,
    title: str,
    message: str,
    action: Callable[[AgentLoop], Awaitable[RunResult]],
    notes: list[str] | None = None,
) -> dict[str, Any]:
    """Run ``action`` on a loop for ``session``: one run per session, every cancel path."""

    from agent_ls.agent.service import SessionBusy

    try:
        run = ls.service.begin_run(
            session.id,
            lambda run: _run_body(ls, session, run, title, message, action, notes or []),
        )
    except SessionBusy as exc:
        raise JsonRpcException(str(exc), REQUEST_FAILED) from None
    protocol: AgentProtocol = ls.protocol  # type: ignore[assignment]
    msg_id = protocol.msg_id
    outer = asyncio.current_task()
    if msg_id is not None and outer is not None:
        protocol.running[msg_id] = outer
    try:
        result = await asyncio.shield(run.task)
    except asyncio.CancelledError:
        # $/cancelRequest (or the client going away): stop the run, then answer -32800.
        run.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await run.task
        raise JsonRpcRequestCancelled("the request was cancelled") from None
    finally:
        if msg_id is not None:
            protocol.running.pop(msg_id, None)
        ls.service.end_run(run)
    return result.to_contract()


async def _run_body(
    ls: AgentServer,
    session: Session,
    run: ActiveRun,
    title: str,
    message: str,
    action: Callable[[AgentLoop], Awaitable[RunResult]],
    notes: list[str],
) -> RunResult:
    from agent_ls.agent.loop import RunResult
    from agent_ls.lsp.port import LspEditorPort

    result = RunResult(session.id, "cancelled", "")
    port: LspEditorPort | None = None
    try:
        context = ls.service.read_context_early(session, ls.agent_workspace())
        run.token = await _begin_progress(ls, title, message)
        port = LspEditorPort(ls, session.id, run.token)
        for note in notes:
            port.progress(note)
        await ls.service.wait_warm(port)
        try:
            ls.service.model()
        except Exception as exc:  # the model setting names no usable provider
            result = RunResult(session.id, "error", "", error=str(exc))
            return result
        loop = await ls.service.loop_for(session, ls.agent_workspace(), port, context)
        result = await action(loop)
        return result
    except asyncio.CancelledError:
        result = RunResult(session.id, "cancelled", "")
        return result
    finally:
        if port is not None:
            port.flush()
        _end_progress(ls, run.token, _summary(result))
