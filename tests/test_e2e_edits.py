"""Edits the user can trust, across three client profiles (issue 4's end-to-end matrix).

- vscode: documentChanges + change annotations (per-hunk preview), utf-16;
- neovim: no annotations (the server asks Apply/Reject first), utf-8 first;
- minimal: only the ``changes`` form, utf-16.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types

from tests.editor_sim import EditorSim, editor

MINIMAL = types.ClientCapabilities(
    workspace=types.WorkspaceClientCapabilities(apply_edit=True),
    window=types.WindowClientCapabilities(work_done_progress=True),
)
PROFILES: dict[str, types.ClientCapabilities] = {
    "vscode": pytest_lsp.client_capabilities("visual-studio-code"),
    "neovim": pytest_lsp.client_capabilities("neovim"),
    "minimal": MINIMAL,
}


def read_then_edit(path: str, old: str, new: str, **extra: Any) -> dict[str, Any]:
    return {
        "turns": [
            {"tool_calls": [{"name": "read_file", "input": {"file_path": path}}]},
            {
                "tool_calls": [
                    {
                        "name": "edit_file",
                        "input": {"file_path": path, "old_string": old, "new_string": new, **extra},
                    }
                ]
            },
            {"text": "done"},
        ]
    }


def results(ed: EditorSim) -> list[dict[str, Any]]:
    return [u for u in ed.of_kind("tool_call_update") if u.get("status") in ("completed", "failed")]


def approve(ed: EditorSim, profile: str) -> None:
    """Where the client cannot preview hunks, the server asks first: say Apply."""
    if profile != "vscode":
        ed.answers = ["Apply"]


@pytest.fixture(params=list(PROFILES))
def profile(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_emoji_before_the_edit_point(workspace: Path, profile: str) -> None:
    (workspace / "e.py").write_text('s = "🎉🎉 café 日本"; x = 1\n', encoding="utf-8")
    script = read_then_edit("e.py", "x = 1", "x = 2")
    async with editor(workspace, script=script, capabilities=PROFILES[profile]) as ed:
        ed.open("e.py")
        approve(ed, profile)
        await ed.ask("bump x")
        assert ed.text("e.py") == 's = "🎉🎉 café 日本"; x = 2\n'
        assert results(ed)[-1]["rawOutput"]["status"] == "applied"


async def test_crlf_file_keeps_crlf(workspace: Path, profile: str) -> None:
    (workspace / "w.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    script = read_then_edit("w.txt", "one\ntwo", "one\n2")
    async with editor(workspace, script=script, capabilities=PROFILES[profile]) as ed:
        ed.open("w.txt", language="plaintext")
        approve(ed, profile)
        await ed.ask("edit")
        assert ed.text("w.txt") == "one\r\n2\r\nthree\r\n"


async def test_unsaved_buffer_is_what_the_agent_reads(workspace: Path, profile: str) -> None:
    script = {
        "turns": [
            {"tool_calls": [{"name": "read_file", "input": {"file_path": "app.py"}}]},
            {"text": "read"},
        ]
    }
    async with editor(workspace, script=script, capabilities=PROFILES[profile]) as ed:
        ed.open("app.py")
        ed.change("app.py", "UNSAVED = True\n")
        await ed.ask("read it")
        assert "1\tUNSAVED = True" in str(results(ed)[0]["rawOutput"])


async def test_stale_buffer_edit_is_refused(workspace: Path, profile: str) -> None:
    script = {
        "chunk_size": 200,
        "delay_ms": 300,
        "turns": [
            {"tool_calls": [{"name": "read_file", "input": {"file_path": "app.py"}}]},
            {
                "text": "thinking about it",
                "tool_calls": [
                    {
                        "name": "edit_file",
                        "input": {
                            "file_path": "app.py",
                            "old_string": "Hello ",
                            "new_string": "Hi ",
                        },
                    }
                ],
            },
            {"text": "ok"},
        ],
    }
    async with editor(workspace, script=script, capabilities=PROFILES[profile]) as ed:
        ed.open("app.py")
        import asyncio

        ask = asyncio.ensure_future(ed.ask("edit"))
        for _ in range(500):
            await asyncio.sleep(0.01)
            if any(u.get("status") == "completed" for u in ed.of_kind("tool_call_update")):
                break
        ed.change("app.py", "# the user typed this\n" + ed.text("app.py"))
        await asyncio.wait_for(ask, 10)
        assert "changed in the editor" in str(results(ed)[-1]["rawOutput"])
        assert ed.edit_requests == []
        assert ed.text("app.py").startswith("# the user typed this")


async def test_stale_disk_edit_is_refused(workspace: Path, profile: str) -> None:
    script = {
        "chunk_size": 200,
        "delay_ms": 300,
        "turns": read_then_edit("app.py", "Hello ", "Hi ")["turns"],
    }
    async with editor(workspace, script=script, capabilities=PROFILES[profile]) as ed:
        import asyncio

        ask = asyncio.ensure_future(ed.ask("edit"))
        for _ in range(500):
            await asyncio.sleep(0.01)
            if any(u.get("status") == "completed" for u in ed.of_kind("tool_call_update")):
                break
        path = workspace / "app.py"
        path.write_text("# changed on disk\n" + path.read_text())
        await asyncio.wait_for(ask, 10)
        assert "changed on disk" in str(results(ed)[-1]["rawOutput"])
        assert ed.edit_requests == []


async def test_reject(workspace: Path, profile: str) -> None:
    before = (workspace / "app.py").read_text()
    async with editor(
        workspace, script=read_then_edit("app.py", "Hello ", "Hi "), capabilities=PROFILES[profile]
    ) as ed:
        ed.open("app.py")
        if profile == "vscode":
            ed.accept_hunk = lambda path, index, edit: False
        else:
            ed.answers = ["Reject"]
        await ed.ask("edit")
        assert ed.text("app.py") == before
        assert results(ed)[-1]["rawOutput"] == {"status": "rejected"}
        assert results(ed)[-1]["status"] == "completed"  # the user's decision, not an error


async def test_new_file(workspace: Path, profile: str) -> None:
    script = {
        "turns": [
            {
                "tool_calls": [
                    {
                        "name": "write_file",
                        "input": {"file_path": "pkg/new.py", "content": "VALUE = 1\n"},
                    }
                ]
            },
            {"text": "created"},
        ]
    }
    async with editor(workspace, script=script, capabilities=PROFILES[profile]) as ed:
        approve(ed, profile)
        await ed.ask("create")
        assert (workspace / "pkg/new.py").read_text() == "VALUE = 1\n"
        if profile == "vscode":
            kinds = [type(c).__name__ for c in ed.edit_requests[0].edit.document_changes]
            assert kinds == ["CreateFile", "TextDocumentEdit"]
        else:  # no per-hunk preview: asked first, with a unified diff summary
            assert ed.confirmations[0].startswith("Create pkg/new.py? (+1 -0 lines)")
            assert "+VALUE = 1" in ed.confirmations[0]


async def test_partial_accept_is_reported_hunk_by_hunk(workspace: Path) -> None:
    (workspace / "m.py").write_text("a = 1\nb = 2\nc = 3\nd = 4\ne = 5\nf = 6\ng = 1\n")
    script = read_then_edit("m.py", "= 1", "= 100", replace_all=True)
    async with editor(workspace, script=script, capabilities=PROFILES["vscode"]) as ed:
        ed.open("m.py")
        ed.accept_hunk = lambda path, index, edit: index == 1
        await ed.ask("edit")
        assert ed.text("m.py") == "a = 1\nb = 2\nc = 3\nd = 4\ne = 5\nf = 6\ng = 100\n"
        edits = ed.edit_requests[0].edit.document_changes[0].edits
        assert len(edits) == 2
        annotations = ed.edit_requests[0].edit.change_annotations
        assert annotations is not None and len(annotations) == 2
        assert results(ed)[-1]["rawOutput"] == {"status": "partial", "landed": [1], "hunks": 2}


async def test_editor_that_applies_without_didchange_is_not_called_a_rejection(
    workspace: Path,
) -> None:
    async with editor(
        workspace,
        script=read_then_edit("app.py", "Hello ", "Hi "),
        capabilities=PROFILES["neovim"],
    ) as ed:
        ed.open("app.py")
        ed.lazy_changes = True
        ed.answers = ["Apply"]
        await ed.ask("edit")
        assert results(ed)[-1]["rawOutput"] == {"status": "unconfirmed"}


async def test_one_edit_that_changes_two_separated_lines_is_two_hunks(workspace: Path) -> None:
    (workspace / "m.py").write_text("def f():\n    a = 1\n    b = 2\n    c = 3\n")
    script = read_then_edit("m.py", "a = 1\n    b = 2\n    c = 3", "a = 10\n    b = 2\n    c = 30")
    async with editor(workspace, script=script, capabilities=PROFILES["vscode"]) as ed:
        ed.open("m.py")
        ed.accept_hunk = lambda path, index, edit: index == 0
        await ed.ask("edit")
        edits = ed.edit_requests[0].edit.document_changes[0].edits
        assert [e.range.start.line for e in edits] == [1, 3]  # reviewable one by one
        assert ed.text("m.py") == "def f():\n    a = 10\n    b = 2\n    c = 3\n"
        assert results(ed)[-1]["rawOutput"] == {"status": "partial", "landed": [0], "hunks": 2}
