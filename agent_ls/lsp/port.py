"""The agent's :class:`EditorPort`, spoken over LSP to whatever client is connected."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from lsprotocol import types
from pygls.exceptions import JsonRpcException

from agent_ls.edits import LineIndex, PositionEncoding, hunks_diff, landed_hunks
from agent_ls.lsp.jsonrpc import path_to_uri, plain_json, uri_to_path
from agent_ls.lsp.protocol import (
    GET_DIAGNOSTICS_REQUEST,
    SAVE_DOCUMENTS_REQUEST,
    UPDATE_NOTIFICATION,
)
from agent_ls.ports.editor import (
    Buffer,
    ConfirmRequest,
    Decision,
    EditOutcome,
    EditProposal,
    Unsupported,
)
from agent_ls.ports.updates import ChunkUpdate, Location, SessionUpdate, text

if TYPE_CHECKING:
    from agent_ls.settings import Settings


class EditorHost(Protocol):
    """What a port needs of the server it speaks through (``AgentServer`` has it all)."""

    @property
    def settings(self) -> Settings: ...

    @property
    def protocol(self) -> Any: ...

    @property
    def client_capabilities(self) -> types.ClientCapabilities: ...

    @property
    def workspace(self) -> Any: ...

    @property
    def work_done_progress(self) -> Any: ...

    def open_buffer(self, path: Path) -> Buffer | None: ...

    def display_path(self, path: Path) -> str: ...

    def current_text(self, path: Path) -> tuple[str | None, int | None]: ...


log = logging.getLogger(__name__)

ALLOW, ALLOW_SESSION, DENY = "Allow", "Allow for this session", "Deny"
APPLY, REJECT = "Apply", "Reject"
SETTLE_SECONDS = 2.0
COALESCE_SECONDS = 0.02  # at most ~50 text updates a second reach the editor
CHUNK_BURST = 2.0  # chunks that may go at once after a pause (absorbs a steady model's jitter)


def position_encoding(server: EditorHost) -> PositionEncoding:
    """The position encoding negotiated with the client."""
    enc = str(server.workspace.position_encoding or "utf-16")
    return enc if enc in ("utf-8", "utf-16", "utf-32") else "utf-16"  # type: ignore[return-value]


def diff_summary(diff: str) -> tuple[int, int]:
    """Lines added and removed by a unified diff (parsed with unidiff)."""
    from unidiff import PatchSet
    from unidiff.errors import UnidiffParseError

    try:
        patch = PatchSet(diff)
    except UnidiffParseError:
        return 0, 0
    return sum(f.added for f in patch), sum(f.removed for f in patch)


def can_create_files(caps: types.ClientCapabilities) -> bool:
    """The client applies ``CreateFile`` in a ``WorkspaceEdit``."""
    ws_edit = caps.workspace.workspace_edit if caps.workspace else None
    return bool(
        ws_edit
        and ws_edit.document_changes
        and ws_edit.resource_operations
        and types.ResourceOperationKind.Create in ws_edit.resource_operations
    )


def create_on_disk(path: Path, text: str) -> str | None:
    """Create a new file with ``text``; None when done, else why not (it never overwrites)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return "the file appeared meanwhile; it was not overwritten"
    except OSError as exc:
        return f"the file could not be created ({exc.strerror or exc})"
    with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    return None


def build_workspace_edit(
    proposal: EditProposal,
    uri: str,
    caps: types.ClientCapabilities,
    encoding: PositionEncoding,
    annotation_prefix: str = "agent-ls/",
) -> types.WorkspaceEdit:
    """The proposal as the richest ``WorkspaceEdit`` the client supports."""
    ws_edit = caps.workspace.workspace_edit if caps.workspace else None
    document_changes = bool(ws_edit and ws_edit.document_changes)
    annotations = bool(ws_edit and ws_edit.change_annotation_support)
    create_ok = bool(
        ws_edit
        and ws_edit.resource_operations
        and types.ResourceOperationKind.Create in ws_edit.resource_operations
    )
    index = LineIndex(proposal.old_text or "")
    edits: list[types.TextEdit | types.AnnotatedTextEdit] = []
    change_annotations: dict[str, types.ChangeAnnotation] = {}
    for i, hunk in enumerate(proposal.hunks):
        start = index.position(hunk.start, encoding)
        end = index.position(hunk.end, encoding)
        rng = types.Range(
            start=types.Position(line=start[0], character=start[1]),
            end=types.Position(line=end[0], character=end[1]),
        )
        if annotations and document_changes:
            annotation_id = f"{annotation_prefix}hunk-{i + 1}"
            first, last = start[0] + 1, end[0] + 1
            lines = f"line {first}" if first == last else f"lines {first}-{last}"
            change_annotations[annotation_id] = types.ChangeAnnotation(
                label=f"Hunk {i + 1} of {len(proposal.hunks)} ({lines})",
                needs_confirmation=proposal.needs_confirmation,
                description=proposal.label,
            )
            edits.append(
                types.AnnotatedTextEdit(
                    range=rng, new_text=hunk.new_text, annotation_id=annotation_id
                )
            )
        else:
            edits.append(types.TextEdit(range=rng, new_text=hunk.new_text))
    if not document_changes:
        return types.WorkspaceEdit(
            changes={uri: [types.TextEdit(range=e.range, new_text=e.new_text) for e in edits]}
        )
    changes: list[Any] = []
    if proposal.old_text is None and create_ok:
        create_annotation = None
        if annotations:
            create_annotation = f"{annotation_prefix}create"
            change_annotations[create_annotation] = types.ChangeAnnotation(
                label="Create file",
                needs_confirmation=proposal.needs_confirmation,
                description=proposal.label,
            )
        changes.append(
            types.CreateFile(
                uri=uri,
                options=types.CreateFileOptions(overwrite=False, ignore_if_exists=True),
                annotation_id=create_annotation,
            )
        )
    changes.append(
        types.TextDocumentEdit(
            text_document=types.OptionalVersionedTextDocumentIdentifier(
                uri=uri, version=proposal.version
            ),
            edits=edits,
        )
    )
    return types.WorkspaceEdit(
        document_changes=changes, change_annotations=change_annotations or None
    )


def build_undo_edit(
    proposals: list[EditProposal],
    deletes: list[tuple[Path, str]],
    caps: types.ClientCapabilities,
    encoding: PositionEncoding,
) -> types.WorkspaceEdit:
    """Several files' reverts (and deletions, ``(path, label)``) as one ``WorkspaceEdit``,
    each hunk and deletion with its own change annotation."""
    changes: list[Any] = []
    annotations: dict[str, types.ChangeAnnotation] = {}
    plain: dict[str, list[types.TextEdit]] = {}
    for n, proposal in enumerate(proposals):
        uri = path_to_uri(proposal.path)
        edit = build_workspace_edit(proposal, uri, caps, encoding, f"agent-ls/undo-{n + 1}/")
        changes.extend(edit.document_changes or [])
        annotations.update(edit.change_annotations or {})
        for key, edits in (edit.changes or {}).items():
            plain.setdefault(key, []).extend(edits)
    if plain:
        return types.WorkspaceEdit(changes=plain)
    for n, (path, label) in enumerate(deletes):
        annotation_id = f"agent-ls/undo-delete-{n + 1}"
        annotations[annotation_id] = types.ChangeAnnotation(
            label="Delete file", needs_confirmation=True, description=label
        )
        changes.append(
            types.DeleteFile(
                uri=path_to_uri(path),
                options=types.DeleteFileOptions(ignore_if_not_exists=True),
                annotation_id=annotation_id,
            )
        )
    return types.WorkspaceEdit(document_changes=changes, change_annotations=annotations or None)


def can_delete_files(caps: types.ClientCapabilities) -> bool:
    ws_edit = caps.workspace.workspace_edit if caps.workspace else None
    return bool(
        ws_edit
        and ws_edit.document_changes
        and ws_edit.change_annotation_support
        and ws_edit.resource_operations
        and types.ResourceOperationKind.Delete in ws_edit.resource_operations
    )


class LspEditorPort:
    """One run's view of the editor: confirmations, edits, updates and progress."""

    def __init__(self, server: EditorHost, session_id: str, token: str | int | None):
        self.server = server
        self.session_id = session_id
        self.token = token
        self._pending: list[tuple[str, ChunkUpdate]] = []  # coalesced text chunks
        # A token bucket: one chunk update per COALESCE_SECONDS, up to CHUNK_BURST saved up.
        self._tokens = CHUNK_BURST
        self._tokens_at = 0.0
        self._flush_handle: asyncio.TimerHandle | None = None
        self._unsupported: dict[str, str] = {}  # client requests that failed this run

    # -- buffers ---------------------------------------------------------------------

    def open_buffer(self, path: Path) -> Buffer | None:
        return self.server.open_buffer(path)

    # -- user questions --------------------------------------------------------------

    async def confirm(self, request: ConfirmRequest) -> Decision:
        actions = [types.MessageActionItem(title=ALLOW)]
        if request.grant:
            actions.append(types.MessageActionItem(title=ALLOW_SESSION))
        actions.append(types.MessageActionItem(title=DENY))
        answer = await self._ask(request.message, actions)
        if answer == ALLOW:
            return Decision.ALLOW
        if answer == ALLOW_SESSION and request.grant:
            return Decision.ALLOW_SESSION
        return Decision.DENY

    async def _ask(self, message: str, actions: list[types.MessageActionItem]) -> str | None:
        params = types.ShowMessageRequestParams(
            type=types.MessageType.Warning, message=message, actions=actions
        )
        try:
            item = await self._request(
                types.WINDOW_SHOW_MESSAGE_REQUEST, params, self.server.settings.edit_confirm_timeout
            )
        except (JsonRpcException, TimeoutError) as exc:
            log.info("confirmation not answered: %s", exc)
            return None
        title = _field(item, "title") if item is not None else None
        return str(title) if title is not None else None

    async def _request(self, method: str, params: Any, timeout: float) -> Any:  # noqa: ASYNC109
        """A server→client request that is withdrawn (``$/cancelRequest``) on cancel or timeout."""
        msg_id = f"agent-ls/{uuid.uuid4()}"
        protocol = self.server.protocol
        try:
            return await asyncio.wait_for(
                protocol.send_request_async(method, params, msg_id=msg_id), timeout
            )
        except (asyncio.CancelledError, TimeoutError):
            with contextlib.suppress(Exception):
                protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=msg_id))
            raise

    # -- edits -----------------------------------------------------------------------

    async def propose_edit(self, proposal: EditProposal) -> EditOutcome:
        server = self.server
        uri = path_to_uri(proposal.path)
        caps = server.client_capabilities
        ws_caps = caps.workspace.workspace_edit if caps.workspace else None
        has_annotations = bool(
            ws_caps and ws_caps.document_changes and ws_caps.change_annotation_support
        )
        # A new file for a client that cannot create one: no buffer can hold it, so after
        # the user's Apply the server writes it to disk itself.
        create_here = proposal.old_text is None and not can_create_files(caps)
        if proposal.needs_confirmation and (not has_annotations or create_here):
            # The client cannot preview with per-hunk confirmation: ask first, with a summary.
            shown = server.display_path(proposal.path)
            diff = hunks_diff(shown, proposal.old_text or "", proposal.hunks)
            added, removed = diff_summary(diff)
            verb = "Create" if proposal.old_text is None else "Apply edit to"
            origin = f"{proposal.origin} " if proposal.origin else ""
            answer = await self._ask(
                f"{origin}{verb} {shown}? (+{added} -{removed} lines)\n\n{diff[:4000]}",
                [types.MessageActionItem(title=APPLY), types.MessageActionItem(title=REJECT)],
            )
            if answer != APPLY:
                return EditOutcome(
                    "rejected", final_text=proposal.old_text, final_version=proposal.version
                )
        if create_here:
            problem = create_on_disk(proposal.path, proposal.new_text)
            if problem:
                return EditOutcome("failed", reason=problem)
            return EditOutcome("applied", list(range(len(proposal.hunks))), proposal.new_text)
        edit = build_workspace_edit(proposal, uri, caps, position_encoding(server))
        try:
            result = await self._request(
                types.WORKSPACE_APPLY_EDIT,
                types.ApplyWorkspaceEditParams(edit=edit, label=proposal.label),
                server.settings.edit_confirm_timeout,
            )
        except TimeoutError:
            return EditOutcome("failed", reason="the editor did not answer the edit request")
        except JsonRpcException as exc:
            return EditOutcome("failed", reason=f"the editor refused the edit request: {exc}")
        # Where the editor previews hunks itself, "applied" with an unchanged file means the
        # user unticked everything. Where the user already said Apply (or nothing needed
        # confirming), it means the editor has not sent the new text yet (eglot sends didChange
        # only once the command returns).
        trusted = not (proposal.needs_confirmation and has_annotations)
        return await self._verify(
            proposal, bool(result.applied), result.failure_reason, trust_applied=trusted
        )

    async def propose_undo(
        self, proposals: list[EditProposal], deletes: list[tuple[Path, str]], summary: str
    ) -> tuple[list[EditOutcome], list[bool]]:
        """Send several files' reverts as one previewed edit; what landed, file by file, and
        which deletions happened."""
        server = self.server
        caps = server.client_capabilities
        ws_caps = caps.workspace.workspace_edit if caps.workspace else None
        has_annotations = bool(
            ws_caps and ws_caps.document_changes and ws_caps.change_annotation_support
        )
        if not has_annotations:
            answer = await self._ask(
                summary,
                [types.MessageActionItem(title=APPLY), types.MessageActionItem(title=REJECT)],
            )
            if answer != APPLY:
                rejected = [
                    EditOutcome("rejected", final_text=p.old_text, final_version=p.version)
                    for p in proposals
                ]
                return rejected, [False] * len(deletes)
        edit = build_undo_edit(proposals, deletes, caps, position_encoding(server))
        try:
            result = await self._request(
                types.WORKSPACE_APPLY_EDIT,
                types.ApplyWorkspaceEditParams(edit=edit, label="agent-ls: undo the last run"),
                server.settings.edit_confirm_timeout,
            )
        except (TimeoutError, JsonRpcException) as exc:
            failed = EditOutcome("failed", reason=f"the editor did not apply the undo: {exc}")
            return [failed for _ in proposals], [False] * len(deletes)
        outcomes = [
            await self._verify(p, bool(result.applied), result.failure_reason, trust_applied=False)
            for p in proposals
        ]
        deadline = asyncio.get_running_loop().time() + (SETTLE_SECONDS if deletes else 0)
        while deletes and any(path.exists() for path, _ in deletes):
            if not result.applied or asyncio.get_running_loop().time() >= deadline:
                break
            await asyncio.sleep(0.02)
        return outcomes, [not path.exists() for path, _ in deletes]

    async def _verify(
        self,
        proposal: EditProposal,
        applied: bool,
        failure: str | None,
        *,
        trust_applied: bool = False,
    ) -> EditOutcome:
        """Compare what the editor (or disk) holds now with what was proposed."""
        deadline = asyncio.get_running_loop().time() + (SETTLE_SECONDS if applied else 0.2)
        old = proposal.old_text or ""
        while True:
            current, version = self.server.current_text(proposal.path)
            if current == proposal.new_text:
                return EditOutcome("applied", list(range(len(proposal.hunks))), current, version)
            if asyncio.get_running_loop().time() >= deadline:
                break
            await asyncio.sleep(0.02)
        if current is None or current == old:
            if applied and trust_applied:
                return EditOutcome(
                    "unconfirmed", [], current, version, "the editor has not sent the new text yet"
                )
            if applied:
                reason = "the editor reported success but the file did not change"
                return EditOutcome("rejected", [], current, version, reason)
            if failure:  # the editor failed it (a stale version, a read-only file): no rejection
                return EditOutcome("failed", [], current, version, f"the editor said: {failure}")
            return EditOutcome("rejected", [], current, version, "")
        landed = landed_hunks(old, proposal.hunks, current)
        if landed is None:
            return EditOutcome(
                "failed",
                [],
                current,
                version,
                "the file now differs from both the old and the proposed text",
            )
        return EditOutcome("partial", landed, current, version)

    # -- requests that plugins implement -------------------------------------------------

    async def _client_request(self, method: str, params: dict[str, Any]) -> Any:
        if method in self._unsupported:  # asked once this run: do not wait again
            raise Unsupported(self._unsupported[method])
        try:
            return await self._client_request_once(method, params)
        except Unsupported as exc:
            self._unsupported[method] = str(exc)
            raise

    async def _client_request_once(self, method: str, params: dict[str, Any]) -> Any:
        try:
            return await self._request(method, params, self.server.settings.client_request_timeout)
        except TimeoutError:
            raise Unsupported(f"the editor did not answer {method}") from None
        except JsonRpcException as exc:
            raise Unsupported(f"the editor does not support {method}: {exc}") from None

    async def save_documents(self, paths: list[Path]) -> list[Path]:
        result = await self._client_request(
            SAVE_DOCUMENTS_REQUEST, {"uris": [path_to_uri(p) for p in paths]}
        )
        saved = _field(result, "saved") or []
        return [p for p in (uri_to_path(str(u)) for u in saved) if p is not None]

    async def diagnostics(self, path: Path | None) -> list[dict[str, Any]]:
        params = {"uri": path_to_uri(path)} if path else {}
        result = await self._client_request(GET_DIAGNOSTICS_REQUEST, params)
        items = _field(result, "items")
        if not isinstance(items, list):
            raise Unsupported("the editor answered agent/getDiagnostics without items")
        return [plain_json(i) for i in items]

    # -- streaming -----------------------------------------------------------------------

    def update(self, session_id: str, update: SessionUpdate) -> None:
        """Send an update; text chunks are coalesced to at most one per COALESCE_SECONDS.

        A chunk is sent at once while the rate allows (so a slow model adds no latency);
        otherwise it waits for a timer, merged with the chunks after it. Any other update
        flushes the waiting chunks first, so order is kept. The rate is a token bucket, not a
        minimum gap since the last send: with a gap, a model streaming a chunk per window has
        every chunk wait as long as the first one that waited, for the whole stream.
        """
        if (
            update["sessionUpdate"] != "agent_message_chunk"
            and update["sessionUpdate"] != "agent_thought_chunk"
        ):
            self.flush()
            self._send(session_id, update)
            if update["sessionUpdate"] == "tool_call" and self.server.settings.follow_agent:
                self._follow(update["locations"])
            return
        loop = asyncio.get_running_loop()
        self._refill(loop.time())
        if not self._pending and self._tokens >= 1:
            self._tokens -= 1
            self._send(session_id, update)
            return
        last = self._pending[-1] if self._pending else None
        if (
            last is not None
            and last[0] == session_id
            and last[1]["sessionUpdate"] == update["sessionUpdate"]
        ):
            last[1]["content"] = text(last[1]["content"]["text"] + update["content"]["text"])
        else:
            waiting = update.copy()  # merging must not change the caller's dict
            waiting["content"] = text(update["content"]["text"])
            self._pending.append((session_id, waiting))
        if self._flush_handle is None:
            delay = max(0.0, (1 - self._tokens) * COALESCE_SECONDS)
            self._flush_handle = loop.call_later(delay, self.flush)

    def _refill(self, now: float) -> None:
        earned = (now - self._tokens_at) / COALESCE_SECONDS
        self._tokens = min(CHUNK_BURST, self._tokens + earned)
        self._tokens_at = now

    def _follow(self, locations: list[Location]) -> None:
        """``followAgent``: reveal where the agent reads or edits, without taking focus."""
        if not locations or not isinstance(locations[0].get("path"), str):
            return
        line = max(0, int(locations[0].get("line") or 1) - 1)
        position = types.Position(line=line, character=0)
        params = types.ShowDocumentParams(
            uri=path_to_uri(Path(locations[0]["path"])),
            take_focus=False,
            selection=types.Range(start=position, end=position),
        )
        task = asyncio.ensure_future(
            self._request(
                types.WINDOW_SHOW_DOCUMENT, params, self.server.settings.client_request_timeout
            )
        )
        task.add_done_callback(lambda t: t.cancelled() or t.exception())

    def flush(self) -> None:
        """Send the coalesced chunks now (also called when a run ends)."""
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        pending, self._pending = self._pending, []
        if pending:
            self._refill(asyncio.get_running_loop().time())
            # A flush forced by another update (order) may come before a token has: no debt,
            # so the next chunk never waits longer than one window.
            self._tokens = max(0.0, self._tokens - 1)
        for session_id, update in pending:
            self._send(session_id, update)

    def _send(self, session_id: str, update: SessionUpdate) -> None:
        self.server.protocol.notify(
            UPDATE_NOTIFICATION, {"sessionId": session_id, "update": update}
        )

    def progress(self, message: str, percentage: int | None = None) -> None:
        if self.token is None:
            return
        self.server.work_done_progress.report(
            self.token, types.WorkDoneProgressReport(message=message[:200], percentage=percentage)
        )

    def log(self, message: str) -> None:
        self.server.protocol.notify(
            types.WINDOW_LOG_MESSAGE,
            types.LogMessageParams(type=types.MessageType.Warning, message=message),
        )


def _field(obj: Any, name: str) -> Any:
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)
