"""A scriptable editor for end-to-end tests: a pytest-lsp client of the real server process.

It opens buffers, applies ``workspace/applyEdit`` to them (or to disk for closed files) hunk by
hunk as a user would accept or reject them, answers confirmations from a queue, answers
``agent/getDiagnostics`` / ``agent/saveDocuments`` when told to, and records every
``agent/update``.

It is a second, independent implementation of what an editor does with a ``WorkspaceEdit``: its
own line splitting and position arithmetic per encoding (the one the server announced), its own
disk I/O, nothing from ``agent_ls.edits`` or ``agent_ls.client.apply``. So a position the server
gets wrong lands in the wrong place here and the test sees it. It is also strict where an editor
would be lenient: a position inside a code point, past the end of its line or a line that does
not exist, and overlapping edits, fail the test instead of being clamped.
"""

from __future__ import annotations

import asyncio
import itertools
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

from agent_ls.lsp.jsonrpc import path_to_uri, plain_json, uri_to_path

REPO = Path(__file__).resolve().parents[1]

HunkPolicy = Callable[[Path, int, Any], bool]
TextEdit = types.TextEdit | types.AnnotatedTextEdit
BOM = b"\xef\xbb\xbf"


class BadEdit(AssertionError):
    """The server sent an edit no editor can apply as meant."""


# -- the editor's own text arithmetic (deliberately not agent_ls.edits) ---------------------------


def line_starts(text: str) -> list[int]:
    """Where each line starts; lines end at CRLF, CR or LF (LSP), one code point at a time."""
    starts, i = [0], 0
    while i < len(text):
        ch = text[i]
        if ch == "\r" and i + 1 < len(text) and text[i + 1] == "\n":
            i += 2
            starts.append(i)
            continue
        i += 1
        if ch in "\r\n":
            starts.append(i)
    return starts


def units(ch: str, encoding: str) -> int:
    """The width of one code point in ``encoding``'s code units."""
    cp = ord(ch)
    if encoding == "utf-32":
        return 1
    if encoding == "utf-16":
        return 2 if cp > 0xFFFF else 1
    if encoding == "utf-8":
        return 1 if cp < 0x80 else 2 if cp < 0x800 else 3 if cp < 0x10000 else 4
    raise BadEdit(f"unknown position encoding {encoding!r}")


def offset_of(text: str, position: types.Position, encoding: str) -> int:
    """The code-point offset of ``position``; strict about positions that point nowhere."""
    starts = line_starts(text)
    if position.line >= len(starts):
        raise BadEdit(f"line {position.line} does not exist ({len(starts)} lines)")
    start = starts[position.line]
    end = starts[position.line + 1] if position.line + 1 < len(starts) else len(text)
    while end > start and text[end - 1] in "\r\n":
        end -= 1
    offset, counted = start, 0
    while counted < position.character:
        if offset >= end:
            raise BadEdit(f"{position} is past the end of its line ({counted} {encoding} units)")
        counted += units(text[offset], encoding)
        offset += 1
    if counted != position.character:
        raise BadEdit(f"{position} points inside the code point {text[offset - 1]!r}")
    return offset


def apply_edits(
    text: str, edits: list[TextEdit], encoding: str, accept: Callable[[int, TextEdit], bool]
) -> tuple[str, list[int]]:
    """Apply the accepted edits, all relative to ``text`` as LSP says; inserts at one place keep
    the array's order."""
    spans = []
    for i, edit in enumerate(edits):
        start = offset_of(text, edit.range.start, encoding)
        end = offset_of(text, edit.range.end, encoding)
        if end < start:
            raise BadEdit(f"edit {i} ends before it starts: {edit.range}")
        spans.append((start, end, i, edit))
    accepted = [i for i, edit in enumerate(edits) if accept(i, edit)]  # asked in array order
    spans.sort(key=lambda span: (span[0], span[2]))
    for (_, end_a, a, _), (start_b, _, b, _) in itertools.pairwise(spans):
        if start_b < end_a:
            raise BadEdit(f"edits {a} and {b} overlap")
    out, cursor = [], 0
    for start, end, i, edit in spans:
        if i in accepted:
            out.append(text[cursor:start] + edit.new_text)
            cursor = end
    out.append(text[cursor:])
    return "".join(out), accepted


@dataclass
class FileChange:
    uri: str
    version: int | None
    edits: list[TextEdit]
    create: bool = False


def file_changes(edit: types.WorkspaceEdit) -> list[FileChange]:
    """The per-document edits of ``documentChanges`` (with CreateFile) or ``changes``."""
    changes: list[FileChange] = []
    created: set[str] = set()
    for change in edit.document_changes or []:
        if isinstance(change, types.CreateFile):
            created.add(change.uri)
        elif isinstance(change, types.TextDocumentEdit):
            uri = change.text_document.uri
            edits = [e for e in change.edits if isinstance(e, TextEdit)]
            if len(edits) != len(change.edits):
                raise BadEdit(f"unexpected edit kinds for {uri}: {change.edits}")
            changes.append(FileChange(uri, change.text_document.version, edits, uri in created))
        elif isinstance(change, types.DeleteFile):
            continue  # applied on its own (the undo of a created file), see _apply_checked
        else:
            raise BadEdit(f"unexpected document change {change!r}")
    changes += [FileChange(u, None, [], True) for u in created - {c.uri for c in changes}]
    changes += [FileChange(u, None, list(e)) for u, e in (edit.changes or {}).items()]
    return changes


def read_file(path: Path) -> tuple[str, bool]:
    """A file's text as an editor loads it (without a UTF-8 BOM), and whether it had one."""
    data = path.read_bytes()
    return data.removeprefix(BOM).decode("utf-8"), data.startswith(BOM)


def write_file(path: Path, text: str, *, bom: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes((BOM if bom else b"") + text.encode("utf-8"))


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
    accept_delete: Callable[[Path], bool] = lambda path: True
    deleted: list[Path] = field(default_factory=list)
    bad_edits: list[str] = field(default_factory=list)  # edits no editor could apply as meant
    fail_edits: list[str] = field(default_factory=list)  # fail the next edits with these reasons

    # -- buffers ---------------------------------------------------------------------------

    def uri(self, rel: str) -> str:
        return path_to_uri((self.root / rel).resolve())

    def open(self, rel: str, text: str | None = None, language: str = "python") -> Doc:
        path = (self.root / rel).resolve()
        content = read_file(path)[0] if text is None else text
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
        return read_file(path)[0]

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
        try:
            return self._apply_checked(params)
        except BadEdit as exc:
            self.bad_edits.append(str(exc))
            return types.ApplyWorkspaceEditResult(applied=False, failure_reason=str(exc))

    def _apply_checked(
        self, params: types.ApplyWorkspaceEditParams
    ) -> types.ApplyWorkspaceEditResult:
        any_applied = False
        for change in params.edit.document_changes or []:
            if isinstance(change, types.DeleteFile):
                gone = uri_to_path(change.uri)
                if gone is not None and self.accept_delete(gone):
                    self.docs.pop(gone, None)
                    gone.unlink(missing_ok=True)
                    self.deleted.append(gone)
                    any_applied = True
        for change in file_changes(params.edit):
            path = uri_to_path(change.uri)
            assert path is not None
            doc = self.docs.get(path)
            if doc is not None and change.version is not None and change.version != doc.version:
                return types.ApplyWorkspaceEditResult(
                    applied=False, failure_reason="version mismatch"
                )
            before, bom = (doc.text, False) if doc else ("", False)
            if doc is None and path.exists():
                before, bom = read_file(path)
            after, accepted = apply_edits(
                before, change.edits, self.encoding, lambda i, e, p=path: self.accept_hunk(p, i, e)
            )
            if not accepted and not (change.create and not change.edits):
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
                write_file(path, after, bom=bom)
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
    answers: list[str | None] | None = None,
) -> AsyncIterator[EditorSim]:
    """Start the real server on ``root`` and connect a simulated editor to it."""
    client = pytest_lsp.make_test_lsp_client()
    caps = capabilities or pytest_lsp.client_capabilities(profile)
    offered = (caps.general.position_encodings if caps.general else None) or ["utf-16"]
    sim = EditorSim(client=client, root=root.resolve(), encoding="utf-16")
    sim.answers = list(answers or [])  # for questions asked before the test gets the editor

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
                    write_file(path, sim.docs[path].text)
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
    result = await client.initialize_session(
        types.InitializeParams(
            capabilities=caps,
            root_uri=root_uri,
            workspace_folders=[types.WorkspaceFolder(uri=root_uri, name=root.name)],
            initialization_options=init_options,
        )
    )
    # Positions are in the encoding the server chose (UTF-16 when it names none), as in an editor.
    sim.encoding = str(result.capabilities.position_encoding or "utf-16")
    assert sim.encoding in offered, f"the server chose {sim.encoding}, not one of {offered}"
    try:
        yield sim
        assert not sim.bad_edits, f"the server sent edits no editor can apply: {sim.bad_edits}"
    finally:
        try:
            await asyncio.wait_for(client.shutdown_session(), 10)
        finally:
            await client.stop()
