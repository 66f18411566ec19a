"""A scriptable editor for end-to-end tests: a pytest-lsp client of the real server process.

It opens buffers, applies ``workspace/applyEdit`` to them (or to disk for closed files) hunk by
hunk as a user would accept or reject them, answers confirmations from a queue, answers
``agent/getDiagnostics`` / ``agent/saveDocuments`` when told to, and records every
``agent/update``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest_lsp
from lsprotocol import types
from pygls.lsp.client import LanguageClient

from agent_ls.client.apply import apply_text_edits, collect, write_atomically
from agent_ls.lsp.jsonrpc import path_to_uri, plain_json, uri_to_path
from agent_ls.workspace import read_disk, read_disk_text

REPO = Path(__file__).resolve().parents[1]

HunkPolicy = Callable[[Path, int, Any], bool]


@dataclass
class Doc:
    path: Path
    text: str
    version: int


@dataclass
class EditorSim:
    client: LanguageClient
    root: Path
    encoding: str
    docs: dict[Path, Doc] = field(default_factory=dict)
    updates: list[dict[str, Any]] = field(default_factory=list)
    edit_requests: list[types.ApplyWorkspaceEditParams] = field(default_factory=list)
    confirmations: list[str] = field(default_factory=list)  # messages asked
    answers: list[str | None] = field(default_factory=list)  # queued answers; empty → None
    accept_hunk: HunkPolicy = lambda path, index, edit: True
    diagnostics_provider: Callable[[str | None], list[dict[str, Any]]] | None = None
    saved: list[str] = field(default_factory=list)
    lazy_changes: bool = False  # apply edits to buffers but send no didChange (like eglot)
    fail_edits: list[str] = field(default_factory=list)  # fail the next edits with these reasons

    # -- buffers ---------------------------------------------------------------------------

    def uri(self, rel: str) -> str:
        return path_to_uri((self.root / rel).resolve())

    def open(self, rel: str, text: str | None = None, language: str = "python") -> Doc:
        path = (self.root / rel).resolve()
        content = read_disk_text(path) if text is None else text
        doc = Doc(path, content, 1)
        self.docs[path] = doc
        self.client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(
                    uri=path_to_uri(path), language_id=language, version=1, text=content
                )
            )
        )
        return doc

    def change(self, rel: str, text: str) -> None:
        """The user types: replace the whole buffer (unsaved)."""
        doc = self.docs[(self.root / rel).resolve()]
        doc.version += 1
        doc.text = text
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(
                    uri=path_to_uri(doc.path), version=doc.version
                ),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
            )
        )

    def text(self, rel: str) -> str:
        path = (self.root / rel).resolve()
        if path in self.docs:
            return self.docs[path].text
        return read_disk_text(path)

    # -- what the server sent ----------------------------------------------------------------

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [u["update"] for u in self.updates if u["update"].get("sessionUpdate") == kind]

    def streamed_text(self) -> str:
        return "".join(u["content"]["text"] for u in self.of_kind("agent_message_chunk"))

    async def ask(
        self, prompt: str, *, work_done_token: str | None = None, **extra: Any
    ) -> dict[str, Any]:
        params = {"work_done_token": work_done_token} if work_done_token else {}
        return await self.command("agent.ask", {"prompt": prompt, **extra}, **params)

    async def command(self, name: str, argument: Any = None, **params: Any) -> Any:
        arguments = [] if argument is None else [argument]
        token = params.get("work_done_token")
        if token is not None:
            self.client.progress_reports.setdefault(token, [])
        result = await self.client.workspace_execute_command_async(
            types.ExecuteCommandParams(command=name, arguments=arguments, **params)
        )
        return plain_json(result)

    # -- answering the server -----------------------------------------------------------------

    def _apply(self, params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
        self.edit_requests.append(params)
        if self.fail_edits:  # the editor fails it (read-only file, ...): not the user's choice
            return types.ApplyWorkspaceEditResult(
                applied=False, failure_reason=self.fail_edits.pop(0)
            )
        any_applied = False
        for file_edits in collect(params.edit):
            path = uri_to_path(file_edits.uri)
            assert path is not None
            doc = self.docs.get(path)
            if (
                doc is not None
                and file_edits.version is not None
                and file_edits.version != doc.version
            ):
                return types.ApplyWorkspaceEditResult(
                    applied=False, failure_reason="version mismatch"
                )
            disk = read_disk(path) if doc is None and path.exists() else None
            before = doc.text if doc else (disk.text if disk else "")
            after, accepted = apply_text_edits(
                before,
                file_edits.edits,
                self.encoding,  # type: ignore[arg-type]
                lambda i, e, p=path: self.accept_hunk(p, i, e),
            )
            if not accepted and not (file_edits.create and not file_edits.edits):
                continue
            any_applied = True
            if doc is not None and self.lazy_changes:
                doc.text = after
            elif doc is not None:
                doc.version += 1
                doc.text = after
                self.client.text_document_did_change(
                    types.DidChangeTextDocumentParams(
                        text_document=types.VersionedTextDocumentIdentifier(
                            uri=path_to_uri(path), version=doc.version
                        ),
                        content_changes=[types.TextDocumentContentChangeWholeDocument(text=after)],
                    )
                )
            else:
                write_atomically(path, after, bom=bool(disk and disk.bom))
        return types.ApplyWorkspaceEditResult(applied=any_applied)


@asynccontextmanager
async def editor(
    root: Path,
    *,
    script: dict[str, Any] | None = None,
    profile: str = "visual-studio-code",
    init_options: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
    capabilities: types.ClientCapabilities | None = None,
    handle_saves: bool = True,
) -> AsyncIterator[EditorSim]:
    """Start the real server on ``root`` and connect a simulated editor to it."""
    client = pytest_lsp.make_test_lsp_client()
    caps = capabilities or pytest_lsp.client_capabilities(profile)
    encodings = (caps.general.position_encodings if caps.general else None) or ["utf-16"]
    sim = EditorSim(client=client, root=root.resolve(), encoding=str(encodings[0]))

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    def on_apply(ls: LanguageClient, params: types.ApplyWorkspaceEditParams) -> Any:
        return sim._apply(params)

    @client.feature(types.WINDOW_SHOW_MESSAGE_REQUEST)
    def on_confirm(ls: LanguageClient, params: types.ShowMessageRequestParams) -> Any:
        sim.confirmations.append(params.message)
        answer = sim.answers.pop(0) if sim.answers else None
        return types.MessageActionItem(title=answer) if answer else None

    @client.feature("agent/update")
    def on_update(ls: LanguageClient, params: Any) -> None:
        sim.updates.append(plain_json(params))

    @client.feature("agent/getDiagnostics")
    def on_diagnostics(ls: LanguageClient, params: Any) -> Any:
        if sim.diagnostics_provider is None:
            raise RuntimeError("no diagnostics here")
        uri = getattr(params, "uri", None)
        return {"items": sim.diagnostics_provider(uri)}

    if handle_saves:

        @client.feature("agent/saveDocuments")
        def on_save(ls: LanguageClient, params: Any) -> Any:
            uris = list(getattr(params, "uris", None) or [])
            for uri in uris:
                path = uri_to_path(uri)
                if path in sim.docs:
                    write_atomically(path, sim.docs[path].text)
                    sim.saved.append(uri)
            return {"saved": uris}

    server_env = dict(os.environ)
    server_env.pop("ANTHROPIC_API_KEY", None)
    if script is not None:
        script_path = root.parent / f"{root.name}-script.json"
        script_path.write_text(json.dumps(script), encoding="utf-8")
        server_env["AGENT_LS_MODEL"] = f"script:{script_path}"
    server_env.update(env or {})
    await client.start_io(sys.executable, "-m", "agent_ls", "serve", cwd=str(root), env=server_env)
    root_uri = path_to_uri(root.resolve())
    await client.initialize_session(
        types.InitializeParams(
            capabilities=caps,
            root_uri=root_uri,
            workspace_folders=[types.WorkspaceFolder(uri=root_uri, name=root.name)],
            initialization_options=init_options,
        )
    )
    try:
        yield sim
    finally:
        try:
            await asyncio.wait_for(client.shutdown_session(), 10)
        finally:
            await client.stop()
