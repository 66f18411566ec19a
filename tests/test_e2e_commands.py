"""Commands, code actions, bad input and editor requests, against the real server process."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams, JsonRpcRequestCancelled

from tests.editor_sim import editor
from tests.rawclient import RawClient

SLOW_SCRIPT = {
    "chunk_size": 2,
    "delay_ms": 20,
    "turns": [{"text": "x" * 2000}, {"text": "second ask"}],
}


def test_code_action_is_a_quickfix_whose_command_runs_agent_fix(workspace: Path) -> None:
    """Read raw off the wire (lsprotocol mis-structures CodeAction-with-command as Command, see
    BRIEF-stack): the kind, the diagnostics it fixes and the command's arguments, which
    ``agent.fix`` then accepts as they are."""
    script = workspace.parent / "fix-script.json"
    script.write_text(json.dumps({"turns": [{"text": "Looked at it."}]}), encoding="utf-8")
    client = RawClient(workspace, env={"AGENT_LS_MODEL": f"script:{script}"})
    try:
        literal = {"codeActionLiteralSupport": {"codeActionKind": {"valueSet": ["quickfix"]}}}
        caps = {"window": {"workDoneProgress": True}, "textDocument": {"codeAction": literal}}
        client.initialize(workspace, capabilities=caps)
        uri = (workspace / "app.py").resolve().as_uri()
        text = (workspace / "app.py").read_text(encoding="utf-8")
        client.send(
            {
                "jsonrpc": "2.0",
                "method": "textDocument/didOpen",
                "params": {
                    "textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}
                },
            }
        )
        span = {"start": {"line": 1, "character": 11}, "end": {"line": 1, "character": 19}}
        cursor = {"start": {"line": 1, "character": 14}, "end": {"line": 1, "character": 14}}
        diagnostic = {
            "range": span,
            "message": '"Hello " is not an f-string',
            "severity": 2,
            "code": "F001",
            "source": "lint",
        }

        def code_actions(diagnostics: list[dict[str, Any]]) -> Any:
            params = {
                "textDocument": {"uri": uri},
                "range": cursor,
                "context": {"diagnostics": diagnostics},
            }
            return client.request("textDocument/codeAction", params)["result"]

        assert not code_actions([])
        actions = code_actions([diagnostic])
        assert len(actions) == 1
        action = actions[0]
        assert action["title"] == 'Fix with agent: "Hello " is not an f-string'
        assert action["kind"] == "quickfix"
        assert action["diagnostics"] == [diagnostic]
        assert action["command"]["command"] == "agent.fix"
        assert action["command"]["arguments"] == [
            {"uri": uri, "range": cursor, "diagnostics": [diagnostic]}
        ]
        ran = client.request(
            "workspace/executeCommand",
            {"command": "agent.fix", "arguments": action["command"]["arguments"]},
        )
        assert ran["result"]["stopReason"] == "end_turn", ran
        assert ran["result"]["text"] == "Looked at it."
    finally:
        client.close()


async def test_fix_sends_the_diagnostic_and_the_fix_lands(workspace: Path) -> None:
    script = {
        "turns": [
            {"tool_calls": [{"name": "read_file", "input": {"file_path": "app.py"}}]},
            {
                "tool_calls": [
                    {
                        "name": "edit_file",
                        "input": {
                            "file_path": "app.py",
                            "old_string": '"Hello " + name',
                            "new_string": 'f"Hello {name}"',
                        },
                    }
                ]
            },
            {"text": "Fixed."},
        ]
    }
    diagnostic = {
        "range": {"start": {"line": 1, "character": 11}, "end": {"line": 1, "character": 26}},
        "message": "use an f-string",
        "source": "lint",
        "code": "F001",
        "severity": 2,
    }
    async with editor(workspace, script=script) as ed:
        ed.open("app.py")
        result = await ed.command(
            "agent.fix",
            {"uri": ed.uri("app.py"), "range": diagnostic["range"], "diagnostics": [diagnostic]},
            work_done_token="fix-1",
        )
        assert result["stopReason"] == "end_turn"
        assert 'return f"Hello {name}"' in ed.text("app.py")
        begin = ed.client.progress_reports["fix-1"][0]
        assert begin.title == "Fix with agent"
        assert begin.message == "Fix: use an f-string"


@pytest.mark.parametrize(
    ("command", "argument", "fragment"),
    [
        ("agent.ask", {}, "prompt"),
        ("agent.ask", {"prompt": ""}, "prompt"),
        ("agent.ask", {"prompt": 42}, "prompt"),
        ("agent.ask", "just a string", "JSON object"),
        ("agent.ask", {"prompt": "hi", "sessionId": "nope"}, "unknown session"),
        ("agent.fix", {"uri": "file:///x.py"}, "range"),
        ("agent.setMode", {"mode": "yolo"}, "mode"),
        ("agent.resume", {}, "sessionId"),
    ],
)
async def test_bad_arguments_get_readable_invalid_params(
    workspace: Path, command: str, argument: Any, fragment: str
) -> None:
    async with editor(workspace, script={"turns": []}) as ed:
        with pytest.raises(JsonRpcInvalidParams) as caught:
            await ed.command(command, argument)
        message = str(caught.value)
        assert fragment in message
        assert "Traceback" not in message
        # The server is still up.
        status = await ed.command("agent.status", {})
        assert status["running"] == []


async def test_unknown_command_is_an_error_and_server_survives(workspace: Path) -> None:
    async with editor(workspace, script={"turns": []}) as ed:
        with pytest.raises(JsonRpcException):
            await ed.command("agent.nope", {})
        assert (await ed.command("agent.status", {}))["sessions"] == 0


async def test_cancel_request_answers_request_cancelled_and_stops_run(workspace: Path) -> None:
    async with editor(workspace, script=SLOW_SCRIPT) as ed:
        future = ed.client.protocol.send_request(
            types.WORKSPACE_EXECUTE_COMMAND,
            types.ExecuteCommandParams(command="agent.ask", arguments=[{"prompt": "go"}]),
            msg_id="ask-1",
        )
        for _ in range(300):
            await asyncio.sleep(0.01)
            if ed.of_kind("agent_message_chunk"):
                break
        ed.client.cancel_request(types.CancelParams(id="ask-1"))
        with pytest.raises(JsonRpcRequestCancelled):
            await asyncio.wait_for(asyncio.wrap_future(future), 5)
        await asyncio.sleep(0.2)
        status = await ed.command("agent.status", {})
        assert status["running"] == []
        chunks = len(ed.of_kind("agent_message_chunk"))
        await asyncio.sleep(0.3)
        assert len(ed.of_kind("agent_message_chunk")) == chunks  # the stream really stopped


async def test_progress_cancel_returns_cancelled(workspace: Path) -> None:
    async with editor(workspace, script=SLOW_SCRIPT) as ed:
        ask = asyncio.ensure_future(ed.ask("go", work_done_token="p-1"))
        for _ in range(300):
            await asyncio.sleep(0.01)
            if ed.of_kind("agent_message_chunk"):
                break
        ed.client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token="p-1"))
        result = await asyncio.wait_for(ask, 5)
        assert result["stopReason"] == "cancelled"
        assert ed.client.progress_reports["p-1"][-1].kind == "end"


async def test_second_ask_while_running_is_refused_clearly(workspace: Path) -> None:
    async with editor(workspace, script=SLOW_SCRIPT) as ed:
        first = asyncio.ensure_future(ed.ask("go"))
        for _ in range(300):
            await asyncio.sleep(0.01)
            if ed.of_kind("agent_message_chunk"):
                break
        with pytest.raises(JsonRpcException) as caught:
            await ed.ask("again")
        await ed.command("agent.cancel", {})
        assert (await asyncio.wait_for(first, 5))["stopReason"] == "cancelled"
        assert "already running" in str(caught.value)
        assert caught.value.code == -32803  # RequestFailed, as docs/protocol.md says


async def test_diagnostics_from_the_editor_and_when_unsupported(workspace: Path) -> None:
    script = {
        "turns": [
            {"tool_calls": [{"name": "get_diagnostics", "input": {"file_path": "app.py"}}]},
            {"text": "seen"},
        ]
    }
    async with editor(workspace, script=script) as ed:
        ed.diagnostics_provider = lambda uri: [
            {
                "uri": uri,
                "diagnostics": [
                    {
                        "range": {
                            "start": {"line": 4, "character": 0},
                            "end": {"line": 4, "character": 5},
                        },
                        "message": "print is discouraged",
                        "severity": 2,
                        "source": "lint",
                        "code": "T201",
                    }
                ],
            }
        ]
        await ed.ask("any problems?")
        done = [u for u in ed.of_kind("tool_call_update") if u.get("status") == "completed"]
        assert done
    async with editor(workspace, script=script) as ed:
        await ed.ask("any problems?")
        failed = [u for u in ed.of_kind("tool_call_update") if u.get("status") == "failed"]
        assert "not available in this editor" in str(failed[0]["rawOutput"])


async def test_edited_buffers_are_saved_before_a_command_runs(workspace: Path) -> None:
    script = {
        "turns": [
            {"tool_calls": [{"name": "read_file", "input": {"file_path": "app.py"}}]},
            {
                "tool_calls": [
                    {
                        "name": "edit_file",
                        "input": {
                            "file_path": "app.py",
                            "old_string": "Hello ",
                            "new_string": "Howdy ",
                        },
                    }
                ]
            },
            {"tool_calls": [{"name": "run_shell", "input": {"command": "cat app.py"}}]},
            {"text": "ok"},
        ]
    }
    original = (workspace / "app.py").read_text()
    async with editor(workspace, script=script) as ed:
        ed.open("app.py")
        await ed.ask("howdy")
        assert ed.saved == [ed.uri("app.py")]
        shell = [u for u in ed.of_kind("tool_call_update") if u.get("status") == "completed"][-1]
        assert "Howdy" in shell["content"][0]["content"]["text"]
    (workspace / "app.py").write_text(original)
    async with editor(workspace, script=script, handle_saves=False) as ed:
        ed.open("app.py")
        await ed.ask("howdy")
        assert "Howdy" in ed.text("app.py")
        shell = [
            u for u in ed.of_kind("tool_call_update") if u.get("status") in ("completed", "failed")
        ][-1]
        text = shell["content"][0]["content"]["text"]
        assert "not saved" in text and "app.py" in text
        assert "Hello" in text  # the command saw the disk version


async def test_compact_on_demand_summarises_the_session(workspace: Path) -> None:
    script = {
        "turns": [
            {"text": "first answer"},
            {"text": "SUMMARY: the user asked one thing."},
            {"text": "after compaction"},
        ]
    }
    async with editor(workspace, script=script) as ed:
        empty = await ed.command("agent.compact", {})
        assert empty["compacted"] is False
        await ed.ask("one thing")
        compacted = await ed.command("agent.compact", {}, work_done_token="c-1")
        assert compacted["compacted"] is True and compacted["stopReason"] == "end_turn"
        assert ed.client.progress_reports["c-1"][0].title == "Compact"
        again = await ed.ask("and then?")
        assert again["text"] == "after compaction"
        sessions = await ed.command("agent.sessions", {})
        assert sessions["sessions"][0]["turns"] == 1  # history restarted from the summary


async def test_client_that_never_answers_gets_a_bounded_wait(workspace: Path) -> None:
    script = {
        "turns": [
            {"tool_calls": [{"name": "get_diagnostics", "input": {}}]},
            {"tool_calls": [{"name": "run_shell", "input": {"command": "touch made.txt"}}]},
            {"text": "carried on"},
        ]
    }
    # sandbox off: the question is the point (in the sandbox `touch` would not ask)
    options = {"clientRequestTimeout": 0.5, "editConfirmTimeout": 1, "sandbox": "off"}
    async with editor(workspace, script=script, init_options=options) as ed:
        never: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        async def silent(uri: str | None) -> Any:
            return await never  # the editor never answers

        ed.client.protocol.fm.features.pop("agent/getDiagnostics", None)
        ed.client.protocol.fm.features.pop(types.WINDOW_SHOW_MESSAGE_REQUEST, None)

        @ed.client.feature("agent/getDiagnostics")
        async def no_answer(ls: Any, params: Any) -> Any:
            return await never

        @ed.client.feature(types.WINDOW_SHOW_MESSAGE_REQUEST)
        async def no_decision(ls: Any, params: Any) -> Any:
            return await never

        result = await asyncio.wait_for(ed.ask("go"), 20)
        assert result["stopReason"] == "end_turn" and result["text"] == "carried on"
        outputs = [
            str(u.get("rawOutput")) for u in ed.of_kind("tool_call_update") if "rawOutput" in u
        ]
        assert "did not answer agent/getDiagnostics" in outputs[0]
        assert "denied" in outputs[1]
        assert not (workspace / "made.txt").exists()
        never.cancel()


async def test_sessions_are_titled_with_the_users_words_and_list_their_workspace(
    workspace: Path,
) -> None:
    script = {"turns": [{"text": "done"}]}
    async with editor(workspace, script=script) as ed:
        uri = (workspace / "app.py").as_uri()
        selection = {"start": {"line": 0, "character": 0}, "end": {"line": 1, "character": 0}}
        await ed.ask("Why is greet so loud?\nsecond line", uri=uri, range=selection)
        rows = (await ed.command("agent.sessions", {}))["sessions"]
        assert rows[0]["title"] == "Why is greet so loud?"
        assert rows[0]["workspace"] == str(workspace.resolve())
    listing = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agent_ls", "sessions", "--json", stdout=asyncio.subprocess.PIPE
    )
    out, _ = await asyncio.wait_for(listing.communicate(), 60)
    saved = json.loads(out)
    assert saved[0]["title"] == "Why is greet so loud?"
    assert saved[0]["workspace"] == str(workspace.resolve())
