"""End to end: a simulated editor drives the real server process with the script model."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types

from tests.editor_sim import editor

READ_EDIT_SCRIPT = {
    "chunk_size": 5,
    "turns": [
        {
            "text": "Reading app.py first.",
            "tool_calls": [{"name": "read_file", "input": {"file_path": "app.py"}}],
        },
        {
            "text": "Now the edit.",
            "tool_calls": [
                {
                    "name": "edit_file",
                    "input": {
                        "file_path": "app.py",
                        "old_string": 'return "Hello " + name',
                        "new_string": 'return f"Hello, {name}!"',
                    },
                }
            ],
        },
        {"text": "Done: greet() now uses an f-string."},
    ],
}

EXPECTED = 'def greet(name):\n    return f"Hello, {name}!"\n\n\nprint(greet("world"))\n'


async def test_ask_reads_and_edits_open_buffer(workspace: Path) -> None:
    async with editor(workspace, script=READ_EDIT_SCRIPT) as ed:
        ed.open("app.py")
        result = await ed.ask("Use an f-string in greet", work_done_token="tok-1")
        assert result["stopReason"] == "end_turn"
        assert ed.text("app.py") == EXPECTED
        # The buffer changed; saving is the editor's business, so the disk is untouched.
        assert 'return "Hello " + name' in (workspace / "app.py").read_text()
        # Streamed chunks concatenate to the final text.
        assert ed.streamed_text() == result["text"]
        # The turns' texts read apart (a blank line between them), in the chat and the result.
        assert (
            result["text"]
            == "Reading app.py first.\n\nNow the edit.\n\nDone: greet() now uses an f-string."
        )
        # The edit went out as annotated hunks pinned to the buffer version, needing confirmation.
        request = ed.edit_requests[0]
        doc_edit = request.edit.document_changes[0]
        assert isinstance(doc_edit, types.TextDocumentEdit)
        assert doc_edit.text_document.version == 1
        assert all(isinstance(e, types.AnnotatedTextEdit) for e in doc_edit.edits)
        annotations = request.edit.change_annotations
        assert annotations and all(a.needs_confirmation for a in annotations.values())
        # Progress: begin, a report per tool call, end.
        reports = ed.client.progress_reports["tok-1"]
        kinds = [r.kind for r in reports]
        assert kinds[0] == "begin" and kinds[-1] == "end"
        assert reports[0].cancellable is True
        messages = [r.message for r in reports if r.kind == "report"]
        assert "Read app.py" in messages and "Edit app.py" in messages
        # Tool calls reported with ACP shapes.
        calls = ed.of_kind("tool_call")
        assert [c["kind"] for c in calls] == ["read", "edit"]
        finals = [u for u in ed.of_kind("tool_call_update") if u.get("status") == "completed"]
        assert len(finals) == 2


async def test_rejected_edit_leaves_file_and_tells_model(workspace: Path) -> None:
    async with editor(workspace, script=READ_EDIT_SCRIPT) as ed:
        ed.accept_hunk = lambda path, index, edit: False
        result = await ed.ask("Use an f-string in greet")
        assert result["stopReason"] == "end_turn"
        assert (workspace / "app.py").read_text() == (
            'def greet(name):\n    return "Hello " + name\n\n\nprint(greet("world"))\n'
        )
        edit_result = [
            u for u in ed.of_kind("tool_call_update") if u.get("status") in ("completed", "failed")
        ][1]
        assert "rejected" in str(edit_result["rawOutput"])


async def test_closed_file_edit_lands_on_disk(workspace: Path) -> None:
    async with editor(workspace, script=READ_EDIT_SCRIPT) as ed:
        result = await ed.ask("Use an f-string in greet")
        assert result["stopReason"] == "end_turn"
        assert (workspace / "app.py").read_text() == EXPECTED
        doc_edit = ed.edit_requests[0].edit.document_changes[0]
        assert doc_edit.text_document.version is None


async def test_denied_shell_command_is_not_run(workspace: Path) -> None:
    script = {
        "turns": [
            {
                "text": "Creating the marker.",
                "tool_calls": [{"name": "run_shell", "input": {"command": "touch marker.txt"}}],
            },
            {"text": "It was denied."},
        ]
    }
    async with editor(workspace, script=script) as ed:
        ed.answers = ["Deny"]
        result = await ed.ask("make a marker")
        assert result["stopReason"] == "end_turn"
        assert not (workspace / "marker.txt").exists()
        assert len(ed.confirmations) == 1 and "touch marker.txt" in ed.confirmations[0]
        failed = [u for u in ed.of_kind("tool_call_update") if u.get("status") == "failed"]
        assert "denied" in str(failed[0]["rawOutput"])


async def test_allowed_shell_command_runs_in_workspace(workspace: Path) -> None:
    script = {
        "turns": [
            {
                "tool_calls": [
                    {"name": "run_shell", "input": {"command": "touch marker.txt && ls"}}
                ],
            },
            {"text": "ok"},
        ]
    }
    async with editor(workspace, script=script) as ed:
        ed.answers = ["Allow"]
        result = await ed.ask("make a marker")
        assert result["stopReason"] == "end_turn"
        assert (workspace / "marker.txt").exists()
        done = [u for u in ed.of_kind("tool_call_update") if u.get("status") == "completed"]
        assert done[0]["rawOutput"]["exitCode"] == 0
        assert "marker.txt" in done[0]["content"][0]["content"]["text"]  # ls saw the new file


async def test_fast_streams_are_coalesced_without_losing_text(workspace: Path) -> None:
    text = "".join(f"word{i} " for i in range(600))
    script = {"chunk_size": 3, "turns": [{"text": text}]}
    async with editor(workspace, script=script) as ed:
        result = await ed.ask("talk")
        chunks = ed.of_kind("agent_message_chunk")
        assert result["text"] == text == ed.streamed_text()
        # 1,334 model deltas arrive within a few ms: the editor gets a handful of updates.
        assert len(chunks) < 100
