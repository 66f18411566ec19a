"""``agent-ls run``: a small LSP client that drives the server as an editor would.

It spawns ``agent-ls serve``, answers ``workspace/applyEdit`` by writing files atomically,
answers confirmations by policy (``--yes``, ``--no``, or a prompt on a TTY; no TTY and no flag
means deny), and renders the stream in the terminal.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from lsprotocol import types
from pygls.exceptions import JsonRpcMethodNotFound
from pygls.io_ import run_async
from pygls.lsp.client import LanguageClient
from rich.text import Text

from agent_ls import __version__
from agent_ls.client.apply import apply_to_disk
from agent_ls.client.render import Renderer
from agent_ls.client.spawn import AdoptedProcess, spawn_server
from agent_ls.edits import PositionEncoding
from agent_ls.lsp.jsonrpc import path_to_uri, plain_json, uri_to_path

Policy = Literal["yes", "no", "ask"]
ENCODING: PositionEncoding = "utf-16"

EXIT_OK, EXIT_ERROR, EXIT_CANCELLED = 0, 1, 130
NO_DIAGNOSTICS = "agent-ls run has no language servers (give --checker CMD for diagnostics)"


def client_capabilities() -> types.ClientCapabilities:
    return types.ClientCapabilities(
        general=types.GeneralClientCapabilities(
            position_encodings=[types.PositionEncodingKind.Utf16]
        ),
        workspace=types.WorkspaceClientCapabilities(
            apply_edit=True,
            workspace_edit=types.WorkspaceEditClientCapabilities(
                document_changes=True,
                resource_operations=[
                    types.ResourceOperationKind.Create,
                    types.ResourceOperationKind.Delete,
                ],
                change_annotation_support=types.ChangeAnnotationsSupportOptions(
                    groups_on_label=False
                ),
            ),
            configuration=True,
        ),
        window=types.WindowClientCapabilities(work_done_progress=True),
    )


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


class _Client(LanguageClient):
    async def adopt(self, popen: subprocess.Popen[bytes]) -> None:
        """Speak to a server already spawned (as :meth:`start_io` does for one it spawns)."""
        server = await AdoptedProcess(popen).connect()
        assert server.stdin is not None and server.stdout is not None
        self.protocol.set_writer(server.stdin)
        connection = asyncio.create_task(
            run_async(
                stop_event=self._stop_event,
                reader=server.stdout,
                protocol=self.protocol,
                logger=logging.getLogger("pygls.client"),
                error_handler=self.report_server_error,
            )
        )
        self._server = server  # type: ignore[assignment]
        notify_exit = asyncio.create_task(self._server_exit())
        self._async_tasks.extend([connection, notify_exit])


class Headless:
    def __init__(
        self,
        options: RunOptions,
        renderer: Renderer,
        server: subprocess.Popen[bytes] | None = None,
    ):
        self.options = options
        self.renderer = renderer
        self.client = _Client("agent-ls-run", __version__)
        self._spawned = server
        self._stderr_lines: list[str] = []
        self._cancelling = False
        self._register()

    # -- answering the server ------------------------------------------------------------

    def _register(self) -> None:
        client = self.client

        @client.feature(types.WORKSPACE_APPLY_EDIT)
        async def apply_edit(
            ls: LanguageClient, params: types.ApplyWorkspaceEditParams
        ) -> types.ApplyWorkspaceEditResult:
            return await self.apply_edit(params)

        @client.feature(types.WINDOW_SHOW_MESSAGE_REQUEST)
        async def show_message_request(
            ls: LanguageClient, params: types.ShowMessageRequestParams
        ) -> types.MessageActionItem | None:
            return await self.confirm(params)

        @client.feature(types.WINDOW_WORK_DONE_PROGRESS_CREATE)
        def create_progress(ls: LanguageClient, params: types.WorkDoneProgressCreateParams) -> None:
            return None

        @client.feature(types.PROGRESS)
        def on_progress(ls: LanguageClient, params: types.ProgressParams) -> None:
            value = params.value
            message = getattr(value, "message", None) or (
                value.get("message") if isinstance(value, dict) else None
            )
            kind = getattr(value, "kind", None) or (
                value.get("kind") if isinstance(value, dict) else None
            )
            if message and kind == "report":
                self.renderer.progress(str(message))

        @client.feature("agent/update")
        def on_update(ls: LanguageClient, params: Any) -> None:
            update = plain_json(getattr(params, "update", None) or {})
            self.renderer.update(update)

        @client.feature("agent/saveDocuments")
        def save_documents(ls: LanguageClient, params: Any) -> dict[str, Any]:
            # Edits are written to disk as they are accepted: everything is saved already.
            return {"saved": list(getattr(params, "uris", None) or [])}

        checker = self.options.checker

        @client.feature("agent/getDiagnostics")
        async def get_diagnostics(ls: LanguageClient, params: Any) -> dict[str, Any]:
            if not checker:
                # No language servers here: say so (the server tells the model), quietly.
                raise JsonRpcMethodNotFound(NO_DIAGNOSTICS)
            from agent_ls.client.checker import run_checker

            uri = getattr(params, "uri", None)
            return await run_checker(checker, self.options.cwd, uri)

        @client.feature(types.WINDOW_SHOW_MESSAGE)
        def show_message(ls: LanguageClient, params: types.ShowMessageParams) -> None:
            self.renderer.progress(params.message)

        @client.feature(types.WINDOW_LOG_MESSAGE)
        def log_message(ls: LanguageClient, params: types.LogMessageParams) -> None:
            return None

        @client.feature(types.WORKSPACE_CONFIGURATION)
        def configuration(ls: LanguageClient, params: types.ConfigurationParams) -> list[Any]:
            return [None for _ in params.items]

    async def apply_edit(
        self, params: types.ApplyWorkspaceEditParams
    ) -> types.ApplyWorkspaceEditResult:
        edit = params.edit
        annotations = edit.change_annotations or {}
        policy = self.options.policy
        decisions: dict[tuple[Path, int], bool] = {}
        if policy == "ask":
            decisions = await asyncio.to_thread(self._ask_hunks, edit)

        def accept(path: Path, index: int, text_edit: Any) -> bool:
            if policy != "ask":
                return policy == "yes"
            annotation = annotations.get(getattr(text_edit, "annotation_id", None) or "")
            if annotation is None or not annotation.needs_confirmation:
                return True
            return decisions.get((path, index), False)

        result = apply_to_disk(edit, ENCODING, accept)
        return types.ApplyWorkspaceEditResult(applied=result.applied, failure_reason=result.failure)

    def _ask_hunks(self, edit: types.WorkspaceEdit) -> dict[tuple[Path, int], bool]:
        from agent_ls.client.apply import collect

        decisions: dict[tuple[Path, int], bool] = {}
        for change in edit.document_changes or []:
            gone = uri_to_path(change.uri) if isinstance(change, types.DeleteFile) else None
            if gone is not None:
                answer = _prompt(f"Delete {self._shown(gone)}? [y/N] ")
                decisions[(gone, -1)] = answer.strip().lower() in ("y", "yes")
        for file_edits in collect(edit):
            path = uri_to_path(file_edits.uri)
            if path is None:
                continue
            old_text = _disk_text(path)
            for i, text_edit in enumerate(file_edits.edits):
                line = text_edit.range.start.line + 1
                self.renderer.err.print(
                    f"[bold]{self._shown(path)}[/bold] hunk {i + 1} at line {line}:"
                )
                for row, style in hunk_preview(old_text, text_edit):
                    self.renderer.err.print(Text(row, style=style))
                answer = _prompt("Apply this hunk? [y/N] ")
                decisions[(path, i)] = answer.strip().lower() in ("y", "yes")
        return decisions

    def _shown(self, path: Path) -> str:
        """``path`` as the user named the workspace: relative to it when inside."""
        try:
            return str(path.relative_to(self.options.cwd))
        except ValueError:
            return str(path)

    async def confirm(
        self, params: types.ShowMessageRequestParams
    ) -> types.MessageActionItem | None:
        titles = [a.title for a in params.actions or []]
        policy = self.options.policy
        if policy == "no":
            choice = "Deny" if "Deny" in titles else None
        elif policy == "yes":
            choice = next((t for t in ("Allow", "Apply") if t in titles), None)
        else:
            choice = await asyncio.to_thread(self._ask_choice, params.message, titles)
        if policy != "ask":
            self.renderer.question(params.message, choice or "Deny", f"--{policy}")
        if choice is None:
            return None
        return types.MessageActionItem(title=choice)

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
        await self.client.adopt(popen or spawn_server(opts.cwd, opts.model, preload=False))
        server_proc = self.client._server
        drain: asyncio.Future[None] | None = None
        if server_proc is not None and server_proc.stderr is not None:
            drain = asyncio.ensure_future(self._drain(server_proc.stderr))
        root_uri = path_to_uri(opts.cwd)
        init_options: dict[str, Any] = {}
        if opts.mode:
            init_options["mode"] = opts.mode
        if opts.sandbox:
            init_options["sandbox"] = opts.sandbox
        await self.client.initialize_async(
            types.InitializeParams(
                capabilities=client_capabilities(),
                root_uri=root_uri,
                workspace_folders=[types.WorkspaceFolder(uri=root_uri, name=opts.cwd.name)],
                initialization_options=init_options or None,
                client_info=types.ClientInfo(name="agent-ls run", version=__version__),
            )
        )
        self.client.initialized(types.InitializedParams())
        return drain

    async def list_mcp(self, settle_seconds: float = 120.0) -> int:
        """``agent-ls mcp``: the MCP servers once they settled (started, failed or denied)."""
        drain = await self._start()
        try:
            deadline = asyncio.get_running_loop().time() + settle_seconds
            while True:
                answer = plain_json(
                    await self.client.workspace_execute_command_async(
                        types.ExecuteCommandParams(command="agent.mcp", arguments=[{}])
                    )
                )
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
            result = await self.client.workspace_execute_command_async(
                types.ExecuteCommandParams(command="agent.ask", arguments=[argument])
            )
            result = plain_json(result)
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
            server = self.client._server
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
        result = plain_json(
            await self.client.workspace_execute_command_async(
                types.ExecuteCommandParams(
                    command="agent.undo", arguments=[{"sessionId": session_id}]
                )
            )
        )
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
            server = self.client._server
            if server is not None and server.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(server.pid, signal.SIGKILL)
            return
        self._cancelling = True
        self.renderer.progress("cancelling… (Ctrl-C again to stop at once)")
        self.client.protocol.send_request(
            types.WORKSPACE_EXECUTE_COMMAND,
            types.ExecuteCommandParams(command="agent.cancel", arguments=[{}]),
        )

    async def _drain(self, stream: asyncio.StreamReader) -> None:
        while line := await stream.readline():
            self._stderr_lines.append(line.decode("utf-8", "replace"))
            del self._stderr_lines[:-200]

    async def _shutdown(self) -> None:
        try:
            await asyncio.wait_for(self.client.shutdown_async(None), 5)
            self.client.exit(None)
            await asyncio.wait_for(self.client.stop(), 5)
        except Exception:
            proc = self.client._server
            if proc is not None and proc.returncode is None:
                proc.kill()


PREVIEW_LINES = 40


def _disk_text(path: Path) -> str:
    from agent_ls.workspace import FileProblem, read_disk

    try:
        return read_disk(path).text if path.exists() else ""
    except FileProblem:
        return ""


def hunk_preview(old_text: str, text_edit: Any) -> list[tuple[str, str]]:
    """The lines a hunk removes and the lines it puts in their place, as ``-``/``+`` rows."""
    from agent_ls.client.apply import apply_text_edits

    lines = old_text.splitlines(keepends=True)
    first, last = text_edit.range.start.line, text_edit.range.end.line
    if text_edit.range.end.character == 0 and last > first:
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


def run_headless(options: RunOptions, server: subprocess.Popen[bytes] | None = None) -> int:
    """Run ``options`` on ``server`` (spawned by :func:`spawn_server`, or now)."""
    # pygls logs every error answer it sends (with a traceback); in a terminal, what matters
    # is already rendered, so the library stays quiet.
    logging.getLogger("pygls").setLevel(logging.CRITICAL)
    renderer = Renderer(quiet=options.quiet, root=options.cwd, json_output=options.json_output)
    return asyncio.run(Headless(options, renderer, server).run())


def list_mcp_headless(options: RunOptions) -> int:
    """``agent-ls mcp``: start the server on ``options.cwd`` and list its MCP servers."""
    renderer = Renderer(quiet=options.quiet, root=options.cwd)
    return asyncio.run(Headless(options, renderer).list_mcp())
