"""agent.undo through the real server: after a full and a partial accept, around the user's
own edits, files the run created, and what the preview offers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types

from tests.editor_sim import editor

LINES = "".join(f"line {i}\n" for i in range(1, 31))


def edit(path: str, old: str, new: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": "edit_file",
        "input": {"file_path": path, "old_string": old, "new_string": new, **extra},
    }


def two_hunk_run() -> dict[str, Any]:
    """Reads long.txt, then changes lines 2 and 25 in one write, and creates new.py."""
    changed = LINES.replace("line 2\n", "LINE TWO\n").replace("line 25\n", "LINE 25\n")
    return {
        "turns": [
            {"tool_calls": [{"name": "read_file", "input": {"file_path": "long.txt"}}]},
            {
                "tool_calls": [
                    {"name": "write_file", "input": {"file_path": "long.txt", "content": changed}},
                    {"name": "write_file", "input": {"file_path": "new.py", "content": "x = 1\n"}},
                ]
            },
            {"text": "done"},
        ]
    }


@pytest.fixture
def long_file(workspace: Path) -> Path:
    path = workspace / "long.txt"
    path.write_text(LINES)
    return path


async def test_undo_after_a_full_accept(workspace: Path, long_file: Path) -> None:
    async with editor(workspace, script=two_hunk_run()) as ed:
        ed.open("long.txt", language="plaintext")
        await ed.ask("change it")
        assert "LINE TWO" in ed.text("long.txt")
        assert (workspace / "new.py").exists()
        result = await ed.command("agent.undo", {})
        assert ed.text("long.txt") == LINES
        assert not (workspace / "new.py").exists()
        assert sorted(result["reverted"]) == sorted(
            [str(long_file.resolve()), str((workspace / "new.py").resolve())]
        )
        assert result["skipped"] == []
        undo = ed.edit_requests[-1].edit
        annotations = undo.change_annotations or {}
        text_edits = [
            e
            for c in undo.document_changes or []
            if isinstance(c, types.TextDocumentEdit)
            for e in c.edits
        ]
        assert len(text_edits) == 2  # one per hunk, each with its own annotation
        assert len({getattr(e, "annotation_id", None) for e in text_edits}) == 2
        assert all(a.needs_confirmation for a in annotations.values())
        assert any(isinstance(c, types.DeleteFile) for c in undo.document_changes or [])
        again = await ed.command("agent.undo", {})
        assert again["reverted"] == [] and again["skipped"] == []


async def test_undo_after_a_partial_accept(workspace: Path, long_file: Path) -> None:
    async with editor(workspace, script=two_hunk_run()) as ed:
        ed.open("long.txt", language="plaintext")
        # The user accepts only the first hunk of long.txt (and the new file).
        ed.accept_hunk = lambda path, index, e: path.name != "long.txt" or index == 0
        await ed.ask("change it")
        after_run = ed.text("long.txt")
        assert "LINE TWO" in after_run and "LINE 25" not in after_run
        ed.accept_hunk = lambda path, index, e: True
        result = await ed.command("agent.undo", {})
        assert ed.text("long.txt") == LINES
        assert str(long_file.resolve()) in result["reverted"]
        assert result["skipped"] == []


async def test_undo_skips_a_hunk_the_user_edited(workspace: Path, long_file: Path) -> None:
    async with editor(workspace, script=two_hunk_run()) as ed:
        ed.open("long.txt", language="plaintext")
        await ed.ask("change it")
        # The user rewrites the agent's line 25 and types a line at the top.
        mine = "# mine\n" + ed.text("long.txt").replace("LINE 25\n", "my line 25\n")
        ed.change("long.txt", mine)
        result = await ed.command("agent.undo", {})
        now = ed.text("long.txt")
        assert "line 2\n" in now and "LINE TWO" not in now  # reverted
        assert "my line 25\n" in now and now.startswith("# mine\n")  # left alone
        path = str(long_file.resolve())
        assert path in result["reverted"]
        [skip] = [s for s in result["skipped"] if s["path"] == path]
        assert "line 25" in skip["reason"] and "edited since" in skip["reason"]


async def test_undo_keeps_a_created_file_the_user_changed(workspace: Path, long_file: Path) -> None:
    async with editor(workspace, script=two_hunk_run()) as ed:
        await ed.ask("change it")
        (workspace / "new.py").write_text("x = 2  # mine\n")
        result = await ed.command("agent.undo", {})
        assert (workspace / "new.py").read_text() == "x = 2  # mine\n"
        new = str((workspace / "new.py").resolve())
        assert new not in result["reverted"]
        assert any(s["path"] == new and "changed since" in s["reason"] for s in result["skipped"])
        assert long_file.read_text() == LINES


async def test_undo_rejected_in_the_preview_changes_nothing(
    workspace: Path, long_file: Path
) -> None:
    script = {
        "turns": [
            {"tool_calls": [{"name": "read_file", "input": {"file_path": "app.py"}}]},
            {"tool_calls": [edit("app.py", "Hello ", "Hi ")]},
            {"text": "done"},
        ]
    }
    async with editor(workspace, script=script) as ed:
        ed.open("app.py")
        await ed.ask("say hi")
        changed = ed.text("app.py")
        ed.accept_hunk = lambda path, index, e: False
        result = await ed.command("agent.undo", {})
        assert ed.text("app.py") == changed
        assert result["reverted"] == []
        assert result["skipped"] == [
            {"path": str((workspace / "app.py").resolve()), "reason": "not accepted in the preview"}
        ]
