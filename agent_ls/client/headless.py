"""``agent-ls run``: a small LSP client that drives the server as an editor would.

It spawns ``agent-ls serve``, answers ``workspace/applyEdit`` by writing files atomically,
answers confirmations by policy (``--yes``, ``--no``, or a prompt on a TTY; no TTY and no flag
means deny), and renders the stream in the terminal.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from agent_ls import __version__
from agent_ls.client.apply import TextEdit, apply_to_disk
from agent_ls.client.connection import METHOD_NOT_FOUND, Connection, ResponseError
from agent_ls.client.render import Renderer, styled
from agent_ls.client.spawn import AdoptedProcess, Server, spawn_server
from agent_ls.edits import PositionEncoding
from agent_ls.lsp.jsonrpc import path_to_uri, uri_to_path

Policy = Literal["yes", "no", "ask"]
ENCODING: PositionEncoding = "utf-16"

EXIT_OK, EXIT_ERROR, EXIT_CANCELLED = 0, 1, 130
NO_DIAGNOSTICS = "agent-ls run has no language servers (give --checker CMD for diagnostics)"


def client_capabilities() -> dict[str, Any]:
    return {
        "general": {"positionEncodings": [ENCODING]},
        "workspace": {
            "applyEdit": True,
            "workspaceEdit": {
                "documentChanges": True,
                "resourceOperations": ["create", "delete"],
                "changeAnnotationSupport": {"groupsOnLabel": False},
            },
            "configuration": True,
        },
        "window": {"workDoneProgress": True},
    }


@dataclass
class RunOptions:
    prompt: str
    cwd: Path
    policy: Policy
    model: str | None = None
    session_id: str | None = None
    mode: str | None = None
    sandbox: str | None = None  # the setting sandbox: auto, on or off
    json_output: bool = False
    quiet: bool = False
    checker: str | None = None  # a command whose output serves agent/getDiagnostics
    undo: bool = False  # agent.undo on session_id instead of an ask


class Headless:
    def __init__(
        self,
        options: RunOptions,
        renderer: Renderer,
        server: Server | None = None,
    ):
        self.options = options
        self.renderer = renderer
        self._spawned = server
        self._server: AdoptedProcess | None = None
        self._rpc: Connection | None = None
        self._stderr_lines: list[str] = []
        self._cancelling = False
        self._pending: set[asyncio.Task[Any]] = set()

    @property
    def rpc(self) -> Connection:
        assert self._rpc is not None, "_start() first"
        return self._rpc

    # -- answering the server ------------------------------------------------------------

    def _handlers(self) -> dict[str, Any]:
        checker = self.options.checker

        def on_progress(params: dict[str, Any]) -> None:
            value = (params or {}).get("value")
            if isinstance(value, dict) and value.get("message") and value.get("kind") == "report":
                self.renderer.progress(str(value["message"]))

        def on_update(params: dict[str, Any]) -> None:
            self.renderer.update((params or {}).get("update") or {})

        def save_documents(params: dict[str, Any]) -> dict[str, Any]:
            # Edits are written to disk as they are accepted: everything is saved already.
            return {"saved": list((params or {}).get("uris") or [])}

        async def get_diagnostics(params: dict[str, Any]) -> dict[str, Any]:
            if not checker:
                # No language servers here: say so (the server tells the model), quietly.
                raise ResponseError(METHOD_NOT_FOUND, NO_DIAGNOSTICS)
            from agent_ls.client.checker import run_checker

            return await run_checker(checker, self.options.cwd, (params or {}).get("uri"))

        def show_message(params: dict[str, Any]) -> None:
            self.renderer.progress(str((params or {}).get("message", "")))

        def configuration(params: dict[str, Any]) -> list[Any]:
            return [None for _ in (params or {}).get("items") or []]

        return {
            "workspace/applyEdit": self.apply_edit,
            "window/showMessageRequest": self.confirm,
            "window/workDoneProgress/create": lambda params: None,
            "$/progress": on_progress,
            "agent/update": on_update,
            "agent/saveDocuments": save_documents,
            "agent/getDiagnostics": get_diagnostics,
            "window/showMessage": show_message,
            "window/logMessage": lambda params: None,
            "workspace/configuration": configuration,
        }

    async def apply_edit(self, params: dict[str, Any]) -> dict[str, Any]:
        edit = params["edit"]
        annotations = edit.get("changeAnnotations") or {}
        policy = self.options.policy
        decisions: dict[tuple[Path, int], bool] = {}
        if policy == "ask":
            decisions = await asyncio.to_thread(self._ask_hunks, edit)

        def accept(path: Path, index: int, text_edit: TextEdit) -> bool:
            if policy != "ask":
                return policy == "yes"
            annotation = annotations.get(text_edit.get("annotationId") or "")
            if not isinstance(annotation, dict) or not annotation.get("needsConfirmation"):
                return True
            return decisions.get((path, index), False)

        result = apply_to_disk(edit, ENCODING, accept)
        answer: dict[str, Any] = {"applied": result.applied}
        if result.failure is not None:
            answer["failureReason"] = result.failure
        return answer

    def _ask_hunks(self, edit: dict[str, Any]) -> dict[tuple[Path, int], bool]:
        from agent_ls.client.apply import collect

        decisions: dict[tuple[Path, int], bool] = {}
        for change in edit.get("documentChanges") or []:
            gone = uri_to_path(change["uri"]) if change.get("kind") == "delete" else None
            if gone is not None:
                answer = _prompt(f"Delete {self._shown(gone)}? [y/N] ")
                decisions[(gone, -1)] = answer.strip().lower() in ("y", "yes")
        for file_edits in collect(edit):
            path = uri_to_path(file_edits.uri)
            if path is None:
                continue
            old_text = _disk_text(path)
            for i, text_edit in enumerate(file_edits.edits):
                line = text_edit["range"]["start"]["line"] + 1
                self.renderer.err.print(
                    f"[bold]{self._shown(path)}[/bold] hunk {i + 1} at line {line}:"
                )
                for row, style in hunk_preview(old_text, text_edit):
                    self.renderer.err.print(styled(row, style))
                answer = _prompt("Apply this hunk? [y/N] ")
                decisions[(path, i)] = answer.strip().lower() in ("y", "yes")
        return decisions

    def _shown(self, path: Path) -> str:
        """``path`` as the user named the workspace: relative to it when inside."""
        try:
            return str(path.relative_to(self.options.cwd))
        except ValueError:
            return str(path)

    async def confirm(self, params: dict[str, Any]) -> dict[str, Any] | None:
        titles = [str(a.get("title")) for a in params.get("actions") or []]
        message = str(params.get("message", ""))
        policy = self.options.policy
        if policy == "no":
            choice = "Deny" if "Deny" in titles else None
        elif policy == "yes":
            choice = next((t for t in ("Allow", "Apply") if t in titles), None)
        else:
            choice = await asyncio.to_thread(self._ask_choice, message, titles)
        if policy != "ask":
            self.renderer.question(message, choice or "Deny", f"--{policy}")
        if choice is None:
            return None
        return {"title": choice}

    def _ask_choice(self, message: str, titles: list[str]) -> str | None:
        self.renderer.err.print(message, markup=False)
        for i, title in enumerate(titles, 1):
            self.renderer.err.print(f"  {i}) {title}", markup=False)
        answer = _prompt("Choose: ").strip()
        if answer.isdigit() and 1 <= int(answer) <= len(titles):
            return titles[int(answer) - 1]
        return None

    # -- the run ---------------------------------------------------------------------------

    async def _start(self) -> asyncio.Future[None] | None:
        """Spawn the server, initialize it; returns the stderr drain task."""
        opts = self.options
        popen, self._spawned = self._spawned, None
        server = await AdoptedProcess(
            popen or spawn_server(opts.cwd, opts.model, preload=False)
        ).connect()
        self._server = server
        assert server.stdin is not None and server.stdout is not None
        self._rpc = Connection(server.stdout, server.stdin)
        self._rpc.handlers.update(self._handlers())
        drain: asyncio.Future[None] | None = None
        if server.stderr is not None:
            drain = asyncio.ensure_future(self._drain(server.stderr))
        root_uri = path_to_uri(opts.cwd)
        init_options: dict[str, Any] = {}
        if opts.mode:
            init_options["mode"] = opts.mode
        if opts.sandbox:
            init_options["sandbox"] = opts.sandbox
        await self.rpc.request(
            "initialize",
            {
                "processId": os.getpid(),
                "capabilities": client_capabilities(),
                "rootUri": root_uri,
                "workspaceFolders": [{"uri": root_uri, "name": opts.cwd.name}],
                "initializationOptions": init_options or None,
                "clientInfo": {"name": "agent-ls run", "version": __version__},
            },
        )
        self.rpc.notify("initialized", {})
        return drain

    async def _command(
        self, command: str, argument: dict[str, Any], *, progress: bool = False
    ) -> Any:
        """``progress``: the request carries a ``workDoneToken`` of ours, so the server
        reports on it at once instead of first asking for one (a round trip before the
        ask's first model request)."""
        params: dict[str, Any] = {"command": command, "arguments": [argument]}
        if progress:
            params["workDoneToken"] = f"agent-ls-run/{os.getpid()}/{command}"
        return await self.rpc.request("workspace/executeCommand", params)

    async def list_mcp(self, settle_seconds: float = 120.0) -> int:
        """``agent-ls mcp``: the MCP servers once they settled (started, failed or denied)."""
        drain = await self._start()
        try:
            deadline = asyncio.get_running_loop().time() + settle_seconds
            while True:
                answer = await self._command("agent.mcp", {})
                servers = answer.get("servers", [])
                settled = all(s.get("state") not in ("starting", "approval") for s in servers)
                if settled or asyncio.get_running_loop().time() > deadline:
                    break
                await asyncio.sleep(0.1)
            if self.options.json_output:
                print(json.dumps(answer, indent=2))
            else:
                self.renderer.mcp_servers(answer)
            return EXIT_OK
        finally:
            await self._shutdown()
            if drain is not None:
                drain.cancel()

    async def run(self) -> int:
        opts = self.options
        drain = await self._start()
        loop = asyncio.get_running_loop()
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signal.SIGINT, self._cancel)
        argument: dict[str, Any] = {"prompt": opts.prompt}
        if opts.session_id:
            argument["sessionId"] = opts.session_id
        code = EXIT_ERROR
        try:
            if opts.undo:
                return await self._undo(opts.session_id or "")
            result = await self._command("agent.ask", argument, progress=True)
            self.renderer.finish(result)
            if opts.json_output:
                print(json.dumps(result, indent=2))
            stop = result.get("stopReason")
            code = (
                EXIT_CANCELLED
                if stop == "cancelled"
                else EXIT_ERROR
                if stop == "error"
                else EXIT_OK
            )
        except Exception as exc:
            if self._cancelling:  # stopped at the user's word: not an error
                self.renderer.finish({"stopReason": "cancelled"})
                return EXIT_CANCELLED
            self.renderer.err.print(f"[red]error:[/red] {exc}")
            server = self._server
            if server is not None and server.returncode is not None:  # it died: say why
                tail = "".join(self._stderr_lines[-20:]).strip()
                if tail:
                    self.renderer.err.print(tail, markup=False)
        finally:
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(signal.SIGINT)
            await self._shutdown()
            if drain is not None:
                drain.cancel()
        return code

    async def _undo(self, session_id: str) -> int:
        """``agent-ls undo``: revert the session's last run, answering the preview by policy."""
        result = await self._command("agent.undo", {"sessionId": session_id})
        if self.options.json_output:
            print(json.dumps(result, indent=2))
        else:
            for path in result.get("reverted", []):
                print(f"reverted {path}")
            for skip in result.get("skipped", []):
                print(f"left {skip.get('path')}: {skip.get('reason')}")
            if not result.get("reverted") and not result.get("skipped"):
                print("nothing to undo")
        return EXIT_OK

    def _cancel(self) -> None:
        if self._cancelling:  # a second Ctrl-C: stop waiting for a clean cancel
            self.renderer.progress("stopping the server")
            server = self._server
            if server is not None and server.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(server.pid, signal.SIGKILL)
            return
        self._cancelling = True
        self.renderer.progress("cancelling… (Ctrl-C again to stop at once)")
        task = asyncio.ensure_future(self._command("agent.cancel", {}))
        self._pending.add(task)
        task.add_done_callback(self._cancel_sent)

    def _cancel_sent(self, task: asyncio.Task[Any]) -> None:
        self._pending.discard(task)
        if not task.cancelled():
            task.exception()  # the run's own answer says what became of it

    async def _drain(self, stream: asyncio.StreamReader) -> None:
        while line := await stream.readline():
            self._stderr_lines.append(line.decode("utf-8", "replace"))
            del self._stderr_lines[:-200]

    async def _shutdown(self) -> None:
        proc = self._server
        try:
            await asyncio.wait_for(self.rpc.request("shutdown"), 5)
            self.rpc.notify("exit")
            await self.rpc.drain()
            self.rpc.close_input()
            if proc is not None:
                await asyncio.wait_for(proc.wait(), 5)
        except Exception:
            if proc is not None and proc.returncode is None:
                proc.kill()
        finally:
            await self.rpc.aclose()


PREVIEW_LINES = 40


def _disk_text(path: Path) -> str:
    from agent_ls.workspace import FileProblem, read_disk

    try:
        return read_disk(path).text if path.exists() else ""
    except FileProblem:
        return ""


def hunk_preview(old_text: str, text_edit: TextEdit) -> list[tuple[str, str]]:
    """The lines a hunk removes and the lines it puts in their place, as ``-``/``+`` rows."""
    from agent_ls.client.apply import apply_text_edits

    lines = old_text.splitlines(keepends=True)
    start, end = text_edit["range"]["start"], text_edit["range"]["end"]
    first, last = start["line"], end["line"]
    if end["character"] == 0 and last > first:
        last -= 1  # a range ending at a line's start does not touch that line
    before = "".join(lines[first : last + 1])
    region_end = sum(len(ln) for ln in lines[: last + 1])
    region_start = sum(len(ln) for ln in lines[:first])
    after_text, _ = apply_text_edits(old_text, [text_edit], ENCODING)
    tail = len(old_text) - region_end
    after = after_text[region_start : len(after_text) - tail]
    rows = [("- " + ln, "red") for ln in before.splitlines()]
    rows += [("+ " + ln, "green") for ln in after.splitlines()]
    if len(rows) > PREVIEW_LINES:
        rows = [*rows[:PREVIEW_LINES], (f"  [... {len(rows) - PREVIEW_LINES} more lines]", "dim")]
    return rows or [("  (no change)", "dim")]


def _prompt(text: str) -> str:
    try:
        with open("/dev/tty", encoding="utf-8") as tty:
            sys.stderr.write(text)
            sys.stderr.flush()
            return tty.readline()
    except OSError:
        return ""


def run_headless(options: RunOptions, server: Server | None = None) -> int:
    """Run ``options`` on ``server`` (spawned by :func:`spawn_server`, or now)."""
    renderer = Renderer(quiet=options.quiet, root=options.cwd, json_output=options.json_output)
    return asyncio.run(Headless(options, renderer, server).run())


def list_mcp_headless(options: RunOptions) -> int:
    """``agent-ls mcp``: start the server on ``options.cwd`` and list its MCP servers."""
    renderer = Renderer(quiet=options.quiet, root=options.cwd)
    return asyncio.run(Headless(options, renderer).list_mcp())
