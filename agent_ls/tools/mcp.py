"""The user's MCP servers: one owner task per connection, and their tools as agent tools.

The official ``mcp`` SDK is built on anyio, whose cancel scopes must be exited by the task that
entered them; so each server has one long-lived task that enters ``async with Client(...)``,
lists the tools, then serves calls handed to it through a queue until it is stopped. Callers
(the agent loop) only ever wait on futures. ``import mcp`` (~1 s) runs in a worker thread the
first time a server starts, never at server start and never on the event loop.

A server that fails to start is reported (``agent.mcp``) and left out, never fatal. A server
that died gives its caller an error result and is restarted at the next call, at most
:data:`MAX_RESTARTS` times a session. Every server's process group is killed on shutdown.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import importlib
import json
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict

from agent_ls.ports.model import ToolSpec
from agent_ls.ports.updates import ToolKind
from agent_ls.tools.base import Tool, ToolContext, ToolResult, cap_text
from agent_ls.tools.mcp_config import ServerConfig, Source, acp_servers, parse_servers
from agent_ls.tools.mcp_schema import clean_schema, tool_name

log = logging.getLogger(__name__)

State = Literal["approval", "starting", "ready", "failed", "denied", "disabled"]
MAX_RESTARTS = 3
STOP_GRACE_SECONDS = 3.0
# What one call may hold in memory; the loop persists anything over its own limit to a file.
RESULT_MEMORY_CAP = 1_000_000
_STDERR_TAIL = 2_000


@dataclass(slots=True)
class RemoteTool:
    """One tool as the server lists it."""

    name: str
    description: str
    input_schema: dict[str, Any]
    # The server's ``readOnlyHint`` annotation: a claim, never a permission (calls still
    # ask); it only lets read-only sub-agents (``explore``) see the tool.
    read_only_hint: bool = False


@dataclass(slots=True)
class CallOutcome:
    """A finished call, in the SDK-neutral terms the adapter needs."""

    text: str
    is_error: bool
    images: list[tuple[str, str]] = field(default_factory=list)  # (media type, base64)
    raw: Any = None


class McpCallError(Exception):
    """The call could not be made or did not finish (dead server, timeout, protocol error)."""

    def __init__(self, message: str, *, connection_lost: bool = False) -> None:
        super().__init__(message)
        self.connection_lost = connection_lost


CONNECTION_CLOSED = -32000  # the SDK's JSON-RPC code for a transport that ended


@dataclass(slots=True)
class _Call:
    tool: str
    arguments: dict[str, Any]
    timeout: float
    future: asyncio.Future[CallOutcome]
    scope: Any = None  # the anyio CancelScope the owner task runs it in
    cancelled: bool = False


_RELIST = object()  # queue item: the server said its tool list changed
_MCP_LOCK = threading.Lock()


def _import_mcp() -> Any:
    with _MCP_LOCK:
        return importlib.import_module("mcp")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            state = handle.read().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _session_leaders() -> set[int]:
    """Our child processes that lead their own session (how the SDK spawns stdio servers)."""
    me = os.getpid()
    found: set[int] = set()
    try:
        tasks = os.listdir(f"/proc/{me}/task")
    except OSError:
        return found
    for tid in tasks:
        try:
            with open(f"/proc/{me}/task/{tid}/children", encoding="ascii") as handle:
                found.update(int(p) for p in handle.read().split())
        except OSError:
            continue
    return {pid for pid in found if _leads_session(pid)}


def _own_processes(new: set[int], config: ServerConfig) -> set[int]:
    """Of the session leaders that appeared while this server started, the ones that run its
    command line (others may be starting at the same time)."""
    if len(new) <= 1:
        return new
    base = os.path.basename(config.command)
    args = list(config.args)
    mine = set()
    for pid in new:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                argv = [a.decode(errors="replace") for a in handle.read().split(b"\0") if a]
        except OSError:
            continue
        names = {os.path.basename(a) for a in argv}
        if base in names and (not args or argv[-len(args) :] == args):
            mine.add(pid)
    return mine


def _leads_session(pid: int) -> bool:
    try:
        return os.getsid(pid) == pid
    except OSError:
        return False


class McpServer:
    """One configured server: its state, its tools and the task that owns its connection."""

    def __init__(self, config: ServerConfig, manager: McpManager) -> None:
        self.config = config
        self.manager = manager
        self.state: State = "disabled" if config.disabled else "starting"
        self.error: str | None = None
        self.tools: list[RemoteTool] = []
        self.restarts = 0
        self.pids: set[int] = set()
        self.ready = asyncio.Event()  # set once started or failed (the wait is over)
        self._task: asyncio.Task[None] | None = None
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._stderr: Any = None
        self._timed_out = False

    @property
    def name(self) -> str:
        return self.config.name

    def model_names(self) -> list[str]:
        return [tool_name(self.name, t.name) for t in self.tools] if self.state == "ready" else []

    def status(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "source": self.config.source,
            "state": self.state,
            "tools": self.model_names(),
        }
        if self.error:
            out["error"] = self.error
        return out

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> None:
        if self.config.disabled or (self._task is not None and not self._task.done()):
            return
        self.state, self.error = "starting", None
        self.ready.clear()
        self._queue = asyncio.Queue()
        self._timed_out = False
        self._task = asyncio.ensure_future(self._own())
        loop = asyncio.get_running_loop()
        watchdog = loop.call_later(self.config.startup_timeout_ms / 1000, self._startup_expired)
        self._task.add_done_callback(lambda _t: watchdog.cancel())

    def _startup_expired(self) -> None:
        if self.state == "starting" and self._task is not None and not self._task.done():
            self._timed_out = True
            self._task.cancel()  # the owner task unwinds its own scopes

    async def stop(self) -> None:
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(task), STOP_GRACE_SECONDS)
        self.kill()

    def kill(self) -> None:
        """Kill the server's process group (whatever the SDK's shutdown left)."""
        for pid in list(self.pids):
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
        self.pids.clear()

    def is_dead(self) -> bool:
        if self._task is None or self._task.done():
            return True
        return bool(self.pids) and not any(_alive(p) for p in self.pids)

    # -- the owner task -------------------------------------------------------------

    async def _own(self) -> None:
        started = False
        try:
            mcp = await asyncio.to_thread(_import_mcp)
            import anyio

            client = self._client(mcp)
            before = _session_leaders() if self.config.transport == "stdio" else set()
            async with client:
                if self.config.transport == "stdio":
                    self.pids = _own_processes(_session_leaders() - before, self.config)
                self.tools = await self._list(client)
                self.state, started = "ready", True
                self.ready.set()
                self.manager.changed()
                async with anyio.create_task_group() as group:
                    while True:
                        item = await self._queue.get()
                        if item is _RELIST:
                            group.start_soon(self._relist, client)
                        else:
                            group.start_soon(self._serve, client, item)
        except asyncio.CancelledError:
            if self._timed_out:
                self._fail(
                    f"did not start within {self.config.startup_timeout_ms} ms (startupTimeoutMs)"
                )
            elif not started:
                self._fail("stopped before it started")
            raise
        except Exception as exc:  # anything the server does is reported, never raised
            self._fail(self._describe(exc, started))
        finally:
            self._fail_pending()
            self.ready.set()
            self.kill()
            if self._stderr is not None:
                with contextlib.suppress(Exception):
                    self._stderr.close()
                self._stderr = None

    def _client(self, mcp: Any) -> Any:
        config = self.config

        async def on_message(message: Any) -> None:
            root = getattr(message, "root", message)
            if getattr(root, "method", None) == "notifications/tools/list_changed":
                self._queue.put_nowait(_RELIST)

        options: dict[str, Any] = {
            "mode": "legacy",  # the handshake era: list_changed arrives through message_handler
            "message_handler": on_message,
            "cache": None,  # a re-list after list_changed must reach the server
        }
        if config.transport == "http":
            return mcp.Client(config.url, **options) if not config.headers else mcp.Client(
                self._http_transport(config), **options
            )
        from mcp.client.stdio import stdio_client

        cwd = config.cwd or str(self.manager.cwd)
        if config.cwd and not os.path.isabs(config.cwd):
            cwd = str(self.manager.cwd / config.cwd)
        params = mcp.StdioServerParameters(
            command=config.command, args=list(config.args), env=dict(config.env) or None, cwd=cwd
        )
        # The SDK needs a real file for the child's stderr; its tail explains a failure.
        import tempfile  # here, not at start-up (~4 ms): most starts have no MCP server

        self._stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115
        return mcp.Client(stdio_client(params, errlog=self._stderr), **options)

    @staticmethod
    def _http_transport(config: ServerConfig) -> Any:
        import httpx2  # type: ignore[import-not-found, unused-ignore]
        from mcp.client.streamable_http import streamable_http_client

        http = httpx2.AsyncClient(headers=dict(config.headers), follow_redirects=True)
        return streamable_http_client(config.url, http_client=http)

    async def _list(self, client: Any) -> list[RemoteTool]:
        tools: list[RemoteTool] = []
        cursor = None
        for _ in range(100):
            page = await client.list_tools(cursor=cursor)
            for tool in page.tools:
                tools.append(
                    RemoteTool(
                        name=str(tool.name),
                        description=str(tool.description or tool.title or tool.name),
                        input_schema=clean_schema(_jsonable(tool.input_schema)),
                        read_only_hint=_read_only_hint(tool),
                    )
                )
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    async def _relist(self, client: Any) -> None:
        try:
            self.tools = await self._list(client)
            self.manager.changed()
        except Exception as exc:
            log.info("MCP server %s: re-listing its tools failed: %s", self.name, exc)

    async def _serve(self, client: Any, call: _Call) -> None:
        import anyio

        with anyio.CancelScope() as scope:
            call.scope = scope
            if call.cancelled:
                scope.cancel()
            try:
                with anyio.fail_after(call.timeout):
                    result = await client.call_tool(call.tool, call.arguments)
            except TimeoutError:
                _settle(call.future, exc=McpCallError(self._timeout_message(call)))
                return
            except Exception as exc:
                lost = getattr(exc, "code", None) == CONNECTION_CLOSED
                _settle(
                    call.future,
                    exc=McpCallError(self._describe(exc, True), connection_lost=lost),
                )
                return
            _settle(call.future, value=_outcome(result))
        if scope.cancelled_caught and not call.future.done():
            call.future.cancel()

    def _timeout_message(self, call: _Call) -> str:
        ms = int(call.timeout * 1000)
        return f"the MCP tool {call.tool} on {self.name} did not answer within {ms} ms"

    # -- calls -----------------------------------------------------------------------

    async def call(self, tool: str, arguments: dict[str, Any]) -> CallOutcome:
        if self.state != "ready" or self.is_dead():
            await self._restart()
        loop = asyncio.get_running_loop()
        call = _Call(tool, arguments, self.config.tool_timeout_ms / 1000, loop.create_future())
        self._queue.put_nowait(call)
        try:
            return await asyncio.shield(call.future)
        except asyncio.CancelledError:
            call.cancelled = True
            if call.scope is not None:
                call.scope.cancel()  # the SDK sends notifications/cancelled
            raise
        except McpCallError as exc:
            if exc.connection_lost:
                # The pipe closes a moment before the process is gone: give it that moment.
                for _ in range(50):
                    if self.is_dead():
                        break
                    await asyncio.sleep(0.02)
            if exc.connection_lost or self.is_dead():
                self._fail(self._died_message())
                raise McpCallError(
                    f"{self._died_message()}; it will be restarted at the next call"
                ) from None
            raise

    async def _restart(self) -> None:
        if self.state in ("approval", "denied", "disabled"):
            raise McpCallError(f"the MCP server {self.name} is {self.state}")
        if self.state == "starting" and self._task is not None and not self._task.done():
            await self.ready.wait()
        elif self.state != "ready" or self.is_dead():
            if self.restarts >= MAX_RESTARTS:
                raise McpCallError(
                    f"the MCP server {self.name} failed and was restarted {MAX_RESTARTS} times "
                    f"already; it stays stopped this session (last error: {self.error})"
                )
            self.restarts += 1
            await self.stop()
            self.start()
            await self.ready.wait()
        if self.state != "ready":
            raise McpCallError(f"the MCP server {self.name} could not start: {self.error}")

    # -- reporting -------------------------------------------------------------------

    def _fail(self, message: str) -> None:
        self.state, self.error = "failed", message
        self.manager.changed()

    def _fail_pending(self) -> None:
        while not self._queue.empty():
            item = self._queue.get_nowait()
            if isinstance(item, _Call):
                _settle(item.future, exc=McpCallError(self._died_message()))

    def _died_message(self) -> str:
        return f"the MCP server {self.name} exited"

    def _describe(self, exc: BaseException, started: bool) -> str:
        while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
            exc = exc.exceptions[0]
        what = str(exc) or type(exc).__name__
        if isinstance(exc, FileNotFoundError) or (
            isinstance(exc, OSError) and not started and exc.errno is not None
        ):
            what = f"cannot run {self.config.command!r}: {exc.strerror or exc}"
        tail = self._stderr_tail()
        prefix = "" if started else "failed to start: "
        return prefix + what + (f"; its stderr ends: {tail}" if tail and not started else "")

    def _stderr_tail(self) -> str:
        handle = self._stderr
        if handle is None:
            return ""
        try:
            handle.flush()
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - _STDERR_TAIL))
            return " ".join(handle.read().split())[-500:]
        except (OSError, ValueError):
            return ""


def _settle(
    future: asyncio.Future[CallOutcome],
    *,
    value: CallOutcome | None = None,
    exc: BaseException | None = None,
) -> None:
    if future.done():
        return
    if exc is not None:
        future.set_exception(exc)
    elif value is not None:
        future.set_result(value)


def _read_only_hint(tool: Any) -> bool:
    annotations = getattr(tool, "annotations", None)
    return getattr(annotations, "read_only_hint", None) is True


def _jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    return value


def _outcome(result: Any) -> CallOutcome:
    """Text joined, images kept, resources shown as text or a reference."""
    texts: list[str] = []
    images: list[tuple[str, str]] = []
    for block in getattr(result, "content", None) or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            texts.append(str(block.text))
        elif kind == "image":
            images.append((str(block.mime_type), str(block.data)))
            size = len(base64.b64decode(block.data, validate=False)) if block.data else 0
            texts.append(f"[image: {block.mime_type}, {size:,} bytes]")
        elif kind == "audio":
            texts.append(f"[audio: {block.mime_type}; not shown to the model]")
        elif kind == "resource_link":
            texts.append(f"[resource: {block.uri}" + (f" — {block.name}]" if block.name else "]"))
        elif kind == "resource":
            resource = block.resource
            text = getattr(resource, "text", None)
            if text is not None:
                texts.append(f"[resource {resource.uri}]\n{text}")
            else:
                texts.append(f"[resource {resource.uri}: binary, {resource.mime_type or 'data'}]")
        else:
            texts.append(f"[{kind or 'unknown'} content]")
    structured = getattr(result, "structured_content", None)
    if not texts and structured is not None:
        texts.append(json.dumps(structured, ensure_ascii=False))
    text = "\n".join(texts)
    if len(text) > RESULT_MEMORY_CAP:
        text = cap_text(text, RESULT_MEMORY_CAP)
    return CallOutcome(text=text, is_error=bool(getattr(result, "is_error", False)), images=images)


class McpManager:
    """Every configured MCP server of one front door, by name.

    The LSP server configures it from the user's file, the settings and (once trusted) the
    workspace's ``.mcp.json``; the ACP front door adds the servers of ``session/new`` with
    :meth:`add_servers`. :meth:`tools` gives the ready servers' tools, sorted, for one ask.
    """

    def __init__(self, cwd: Path | None = None) -> None:
        self.cwd = cwd or Path.cwd()
        self.servers: dict[str, McpServer] = {}
        self.problems: list[str] = []  # config errors, shown by agent.mcp
        self.generation = 0  # bumped whenever a server's tools or state change
        self._listeners: list[Callable[[], None]] = []
        self._stopping: set[asyncio.Future[None]] = set()

    # -- configuration -----------------------------------------------------------------

    def add(
        self, config: ServerConfig, *, state: State | None = None, start: bool = True
    ) -> McpServer:
        """Add (or replace) one server; start it unless told otherwise."""
        old = self.servers.pop(config.name, None)
        if old is not None:
            old.kill()
            self._stopping.add(asyncio.ensure_future(old.stop()))
        server = McpServer(config, self)
        if state is not None and not config.disabled:
            server.state = state
        self.servers[config.name] = server
        if start and server.state == "starting":
            server.start()
        self.changed()
        return server

    def add_servers(
        self, configs: Any, source: Source = "acp", *, start: bool = True
    ) -> list[str]:
        """Add servers from raw config and start them; returns the problems found.

        ``configs`` is Claude Code's ``{NAME: entry}`` object or ACP's ``mcpServers`` list
        (``[{name, command, args, env: [{name, value}]}]`` or ``{type: "http", name, url,
        headers}``). A server of the same name is replaced. ACP's ``session/new`` calls
        ``manager.add_servers(params.mcpServers, source="acp")``; nothing here needs approval
        (the client is the user's own).
        """
        loaded = parse_servers(acp_servers(configs), source)
        for config in loaded.servers:
            self.add(config, start=start)
        self.problems.extend(loaded.problems)
        return loaded.problems

    def set_state(self, name: str, state: State, error: str | None = None) -> None:
        server = self.servers.get(name)
        if server is not None:
            server.state, server.error = state, error
            server.ready.set()
            self.changed()

    def start(self, name: str) -> None:
        server = self.servers.get(name)
        if server is not None and server.state != "disabled":
            server.start()

    def on_change(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)

    def changed(self) -> None:
        self.generation += 1
        for listener in self._listeners:
            with contextlib.suppress(Exception):
                listener()

    # -- what an ask sees ----------------------------------------------------------------

    def pending(self) -> list[McpServer]:
        return [s for s in self.servers.values() if s.state in ("starting", "approval")]

    async def wait_started(self, timeout: float | None = None) -> None:  # noqa: ASYNC109
        """Wait for servers still starting (or awaiting approval), each up to its timeout."""
        pending = self.pending()
        if not pending:
            return
        limit = timeout or max(s.config.startup_timeout_ms for s in pending) / 1000
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(
                asyncio.gather(*(s.ready.wait() for s in pending)), limit
            )

    def tools(self) -> list[McpTool]:
        """The ready servers' tools, sorted by model-facing name (the prompt-cache order)."""
        found: dict[str, McpTool] = {}
        for server in self.servers.values():
            if server.state != "ready":
                continue
            for remote in server.tools:
                name = tool_name(server.name, remote.name)
                found.setdefault(name, McpTool(name, server, remote))
        return [found[name] for name in sorted(found)]

    def status(self) -> list[dict[str, Any]]:
        return [s.status() for s in self.servers.values()]

    # -- shutdown -----------------------------------------------------------------------

    async def aclose(self) -> None:
        """Stop every server: the SDK's shutdown, bounded, then kill what is left."""
        servers = list(self.servers.values())
        await asyncio.gather(*(s.stop() for s in servers), return_exceptions=True)
        self.kill_all()

    def kill_all(self) -> None:
        """Kill every server's process group now (``exit``, interpreter exit)."""
        for server in self.servers.values():
            server.kill()


class _AnyInput(BaseModel):
    """MCP tools take the JSON object their server's schema describes."""

    model_config = ConfigDict(defer_build=True)  # built at the first MCP call


class McpTool(Tool[Any]):
    """One MCP server's tool, as the agent sees it: asks first, then calls the server."""

    input_model: ClassVar[type[BaseModel]] = _AnyInput
    kind: ClassVar[ToolKind] = "other"
    read_only: ClassVar[bool] = False
    concurrency_safe: ClassVar[bool] = False

    def __init__(self, name: str, server: McpServer, remote: RemoteTool) -> None:
        self.name = name  # type: ignore[misc]  # per instance: one class, many tools
        self.server = server
        self.remote = remote

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name,
            description=self.remote.description,
            input_schema=self.remote.input_schema,
        )

    def parse(self, raw: dict[str, Any]) -> Any:
        if not isinstance(raw, dict):
            raise ValueError("the input must be a JSON object")
        return raw

    def title(self, args: Any) -> str:
        return f"{self.server.name}: {self.remote.name}"

    def runs_in_plan(self, args: Any, ctx: ToolContext) -> bool:
        """Plan mode runs an MCP tool only when an allow rule names it."""
        match = ctx.permissions.mcp_match(self.name)
        return match is not None and match.verdict == "allow" and not match.grant

    async def run(self, args: Any, ctx: ToolContext) -> ToolResult:
        refusal = await self._check_permission(args, ctx)
        if refusal is not None:
            return refusal
        started = time.perf_counter()
        try:
            outcome = await self.server.call(self.remote.name, args)
        except McpCallError as exc:
            return ToolResult(f"MCP tool {self.title(args)} failed: {exc}", is_error=True)
        log.debug("MCP %s took %.1f ms", self.name, (time.perf_counter() - started) * 1000)
        text = outcome.text or ("(no output)" if not outcome.is_error else "(error, no message)")
        return ToolResult(text, is_error=outcome.is_error, images=outcome.images or None)

    async def _check_permission(self, args: Any, ctx: ToolContext) -> ToolResult | None:
        match = ctx.permissions.mcp_match(self.name)
        if match is not None and match.verdict == "deny":
            return ToolResult(
                f"The MCP tool {self.name} is denied by the rule {match.rule!r}; "
                "do not try it again.",
                is_error=True,
            )
        if match is not None and match.verdict == "allow":
            return None
        if ctx.permissions.mode == "bypassPermissions" and match is None:
            return None
        shown = json.dumps(args, ensure_ascii=False, indent=1)
        if len(shown) > 2000:
            shown = shown[:2000] + " …"
        message = (
            f"Allow the MCP server {self.server.name!r} to run its tool "
            f"{self.remote.name!r}?\n\nArguments:\n{shown}\n\n"
            f"\"Allow for this session\" allows {self.name} with any arguments until the "
            "session ends."
        )
        if await ctx.permissions.ask(ctx.port, message, grant=self.name):
            return None
        return ToolResult(
            f"The user denied the MCP tool call {self.name}. Do not retry it; ask the user "
            "or take another way.",
            is_error=True,
        )


def all_tools(builtins: Iterable[Tool[Any]], manager: McpManager | None) -> list[Tool[Any]]:
    """Built-in tools first, then the MCP tools sorted; a clash keeps the built-in."""
    tools = list(builtins)
    if manager is None:
        return tools
    names = {t.name for t in tools}
    return tools + [t for t in manager.tools() if t.name not in names]
