"""End to end (issue 12, items 11-13): outcomes told as they are, for every kind of client."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest_lsp
from lsprotocol import types

from tests.editor_sim import editor
from tests.rawclient import RawClient

EDIT = {
    "name": "edit_file",
    "input": {
        "file_path": "app.py",
        "old_string": 'return "Hello " + name',
        "new_string": 'return f"Hello {name}"',
    },
}
READ = {"name": "read_file", "input": {"file_path": "app.py"}}


def finished(ed: Any) -> list[dict[str, Any]]:
    return [u for u in ed.of_kind("tool_call_update") if u.get("status") in ("completed", "failed")]


async def test_a_failed_edit_is_not_a_rejection_and_the_retry_lands(workspace: Path) -> None:
    script = {
        "turns": [
            {"tool_calls": [READ]},
            {"tool_calls": [EDIT]},
            {"tool_calls": [EDIT]},
            {"text": "ok"},
        ]
    }
    async with editor(workspace, script=script) as ed:
        ed.fail_edits = ["the file is read-only in the editor"]
        result = await ed.ask("f-string please")
        assert result["stopReason"] == "end_turn"
        first, second = finished(ed)[1:3]
    assert first["status"] == "failed"
    assert first["rawOutput"] == {
        "status": "failed",
        "reason": "the editor said: the file is read-only in the editor",
    }
    assert second["status"] == "completed" and second["rawOutput"]["status"] == "applied"
    assert 'f"Hello {name}"' in (workspace / "app.py").read_text()


def _without_create(profile: str = "visual-studio-code") -> types.ClientCapabilities:
    caps = pytest_lsp.client_capabilities(profile)
    assert caps.workspace is not None and caps.workspace.workspace_edit is not None
    caps.workspace.workspace_edit.resource_operations = None
    return caps


NEW_FILE = {
    "turns": [
        {
            "tool_calls": [
                {"name": "write_file", "input": {"file_path": "pkg/new.py", "content": "X = 1\n"}}
            ]
        },
        {"text": "ok"},
    ]
}


async def test_a_client_without_create_gets_the_new_file_after_apply(workspace: Path) -> None:
    async with editor(workspace, script=NEW_FILE, capabilities=_without_create()) as ed:
        ed.answers = ["Apply"]
        await ed.ask("add a module")
        (question,) = ed.confirmations
        assert question.startswith("Create pkg/new.py?")
        (done,) = finished(ed)
        assert ed.edit_requests == []  # no edit the client could not apply
    assert (workspace / "pkg" / "new.py").read_text() == "X = 1\n"
    assert done["status"] == "completed" and done["rawOutput"]["status"] == "applied"


async def test_a_client_without_create_rejecting_leaves_no_file(workspace: Path) -> None:
    async with editor(workspace, script=NEW_FILE, capabilities=_without_create()) as ed:
        ed.answers = ["Reject"]
        await ed.ask("add a module")
        (done,) = finished(ed)
    assert not (workspace / "pkg" / "new.py").exists()
    assert done["rawOutput"]["status"] == "rejected"


def _code_actions(root: Path, code_action_caps: dict[str, Any] | None) -> list[dict[str, Any]]:
    client = RawClient(root, env={"AGENT_LS_MODEL": "script:/nonexistent"})
    try:
        caps: dict[str, Any] = {"window": {"workDoneProgress": True}}
        if code_action_caps is not None:
            caps["textDocument"] = {"codeAction": code_action_caps}
        client.request(
            "initialize", {"processId": os.getpid(), "rootUri": root.as_uri(), "capabilities": caps}
        )
        client.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        uri = (root / "app.py").as_uri()
        rng = {"start": {"line": 1, "character": 4}, "end": {"line": 1, "character": 10}}
        answer = client.request(
            "textDocument/codeAction",
            {
                "textDocument": {"uri": uri},
                "range": rng,
                "context": {"diagnostics": [{"range": rng, "message": "not an f-string"}]},
            },
        )
        result: list[dict[str, Any]] = answer["result"]
        return result
    finally:
        client.close()


def test_code_actions_are_commands_without_literal_support(workspace: Path) -> None:
    (plain,) = _code_actions(workspace, {})
    assert plain["command"] == "agent.fix" and "kind" not in plain  # a Command
    (none,) = _code_actions(workspace, None)
    assert none["command"] == "agent.fix"
    literal = {"codeActionLiteralSupport": {"codeActionKind": {"valueSet": ["quickfix"]}}}
    (action,) = _code_actions(workspace, literal)
    assert action["kind"] == "quickfix" and action["command"]["command"] == "agent.fix"
