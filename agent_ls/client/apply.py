"""Applying a ``WorkspaceEdit`` the way an editor would, hunk by hunk.

Used by the headless client (on disk, atomically). The edit is the JSON the server sent:
``documentChanges`` (``TextDocumentEdit``s, ``CreateFile``, ``DeleteFile``) or ``changes``.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_ls.edits import LineIndex, PositionEncoding, apply_hunks
from agent_ls.lsp.jsonrpc import uri_to_path
from agent_ls.ports.editor import Hunk
from agent_ls.workspace import DiskText, FileProblem, read_disk, write_atomically

TextEdit = dict[str, Any]  # {"range": ..., "newText": ..., "annotationId"?: ...}
AcceptHunk = Callable[[Path, int, TextEdit], bool]


@dataclass
class FileEdits:
    """The text edits for one document, in the order the edit listed them."""

    uri: str
    version: int | None
    edits: list[TextEdit] = field(default_factory=list)
    create: bool = False


def _is_text_edit(edit: Any) -> bool:
    return isinstance(edit, dict) and "range" in edit and "newText" in edit


def collect(edit: dict[str, Any]) -> list[FileEdits]:
    """Normalise ``documentChanges`` / ``changes`` into per-file edit lists."""
    files: list[FileEdits] = []
    created: set[str] = set()
    for change in edit.get("documentChanges") or []:
        if change.get("kind") == "create":
            created.add(change["uri"])
        elif "textDocument" in change:
            edits = [e for e in change.get("edits") or [] if _is_text_edit(e)]
            uri = change["textDocument"]["uri"]
            version = change["textDocument"].get("version")
            files.append(FileEdits(uri, version, edits, uri in created))
    for uri in created - {f.uri for f in files}:
        files.append(FileEdits(uri, None, [], True))
    for uri, text_edits in (edit.get("changes") or {}).items():
        files.append(FileEdits(uri, None, [e for e in text_edits if _is_text_edit(e)]))
    return files


def apply_text_edits(
    text: str,
    edits: list[TextEdit],
    encoding: PositionEncoding,
    accept: Callable[[int, TextEdit], bool] = lambda i, e: True,
) -> tuple[str, list[int]]:
    """Apply the accepted edits (all ranges refer to the original text); return text, indexes."""
    index = LineIndex(text)
    hunks: list[Hunk] = []
    accepted: list[int] = []
    for i, edit in enumerate(edits):
        if not accept(i, edit):
            continue
        start, end = edit["range"]["start"], edit["range"]["end"]
        hunks.append(
            Hunk(
                index.offset(start["line"], start["character"], encoding),
                index.offset(end["line"], end["character"], encoding),
                edit["newText"],
            )
        )
        accepted.append(i)
    return apply_hunks(text, hunks), accepted


@dataclass
class DiskResult:
    applied: bool
    failure: str | None = None


def apply_to_disk(
    edit: dict[str, Any], encoding: PositionEncoding, accept: AcceptHunk
) -> DiskResult:
    """Apply ``edit`` to files on disk, asking ``accept`` per hunk. All-or-nothing per file."""
    any_applied = False
    for change in edit.get("documentChanges") or []:
        # Deletions (agent.undo of a file a run created), asked like a hunk (index -1).
        gone = uri_to_path(change["uri"]) if change.get("kind") == "delete" else None
        if gone is not None and accept(gone, -1, change):
            with contextlib.suppress(FileNotFoundError):
                gone.unlink()
            any_applied = True
    for file_edits in collect(edit):
        path = uri_to_path(file_edits.uri)
        if path is None:
            return DiskResult(False, f"not a file URI: {file_edits.uri}")
        try:
            disk = read_disk(path) if path.exists() else DiskText("", False, 0)
        except FileProblem as exc:
            return DiskResult(False, str(exc))
        before = disk.text
        after, accepted = apply_text_edits(
            before, file_edits.edits, encoding, functools.partial(accept, path)
        )
        if not accepted and not (file_edits.create and not file_edits.edits):
            continue
        try:
            current = read_disk(path).text if path.exists() else ""
        except FileProblem as exc:
            return DiskResult(False, str(exc))
        if current != before:
            return DiskResult(False, f"{path} changed on disk while the edit was reviewed")
        write_atomically(path, after, bom=disk.bom)
        any_applied = True
    # Nothing applied and nothing failed: the user rejected it all. That is no failure (a
    # failure reason would tell the agent the edit failed, not that the user said no).
    return DiskResult(any_applied, None)
