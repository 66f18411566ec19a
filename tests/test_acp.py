"""``agent-ls acp`` driven by the agent-client-protocol package's own client, over stdio.

The agent is a real subprocess with the script model; the client is the package's
``ClientSideConnection`` (tests/acp_harness.py answers its requests as an editor would).
"""

from __future__ import annotations

import asyncio
import json
import secrets
from pathlib import Path
from typing import Any

import acp
import pytest
from acp.schema import EmbeddedResourceContentBlock, ResourceContentBlock, TextResourceContents

from tests.acp_harness import (
    RecordingClient,
    acp_agent,
    agent_env,
    live_processes_with,
    wait_until,
    write_script,
)

pytestmark = pytest.mark.timeout(90)

EDIT = {
    "name": "edit_file",
    "input": {"file_path": "app.py", "old_string": "Hello ", "new_string": "Hi "},
}
READ_EDIT = {
    "chunk_size": 4,
    "turns": [
        {
            "text": "Reading.",
            "tool_calls": [{"name": "read_file", "input": {"file_path": "app.py"}}],
        },
        {"text": "Editing.", "tool_calls": [EDIT]},
        {"text": "Done."},
    ],
}


def env_for(tmp_path: Path, script: dict[str, Any]) -> dict[str, str]:
    return agent_env(tmp_path / "data", AGENT_LS_MODEL=write_script(tmp_path, script))


async def test_initialize_new_session_and_modes(tmp_path: Path, workspace: Path) -> None:
    client = RecordingClient()
    async with acp.spawn_agent_process(
        client, *_command(), env=env_for(tmp_path, READ_EDIT), transport_kwargs={"stderr": None}
    ) as (conn, _proc):
        init = await conn.initialize(protocol_version=1)
        caps = init.agent_capabilities
        assert init.protocol_version == 1
        assert caps.load_session is True
        assert caps.prompt_capabilities.embedded_context is True
        assert caps.mcp_capabilities.http is True
        assert init.agent_info.name == "agent-ls"
        new = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        assert new.session_id
        assert new.modes.current_mode_id == "default"
        assert [m.id for m in new.modes.available_modes] == [
            "default",
            "acceptEdits",
            "plan",
            "bypassPermissions",
        ]
        assert await wait_until(lambda: bool(client.of_kind("available_commands_update")))
        commands = client.of_kind("available_commands_update")[0]["availableCommands"]
        assert [c["name"] for c in commands] == ["compact"]
        await conn.set_session_mode(session_id=new.session_id, mode_id="plan")
        assert await wait_until(lambda: bool(client.of_kind("current_mode_update")))
        assert client.of_kind("current_mode_update")[-1]["currentModeId"] == "plan"


def _command() -> tuple[str, ...]:
    import sys

    return (sys.executable, "-m", "agent_ls", "acp")


async def test_prompt_streams_asks_with_the_diff_and_writes_through_the_client(
    tmp_path: Path, workspace: Path
) -> None:
    client = RecordingClient()
    app = str(workspace / "app.py")
    async with acp_agent(client, env_for(tmp_path, READ_EDIT)) as (conn, _proc):
        new = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        answer = await conn.prompt(session_id=new.session_id, prompt=[acp.text_block("Say Hi")])
    assert answer.stop_reason == "end_turn"
    assert client.text() == "Reading.\n\nEditing.\n\nDone."
    # Three model calls, a usage_update after each.
    assert len(client.of_kind("usage_update")) == 3
    calls = client.of_kind("tool_call")
    assert [(c["title"], c["kind"]) for c in calls] == [
        ("Read app.py", "read"),
        ("Edit app.py", "edit"),
    ]
    assert calls[0]["locations"] == [{"path": app, "line": 1}]
    # The edit asked, with the diff as the tool call's content and optionId == kind.
    (asked,) = client.permissions
    assert asked["toolCall"]["toolCallId"] == calls[1]["toolCallId"]
    (diff,) = asked["toolCall"]["content"]
    assert diff["type"] == "diff" and diff["path"] == app
    assert 'return "Hello " + name' in diff["oldText"]
    assert 'return "Hi " + name' in diff["newText"]
    assert [(o["optionId"], o["kind"], o["name"]) for o in asked["options"]] == [
        ("allow_once", "allow_once", "Allow"),
        ("reject_once", "reject_once", "Deny"),
    ]
    # Reads went through fs/read_text_file; the accepted edit through fs/write_text_file.
    assert app in client.reads
    assert client.writes == [(app, diff["newText"])]
    assert 'return "Hello " + name' in (workspace / "app.py").read_text()  # the editor saves


async def test_a_denied_edit_changes_nothing(tmp_path: Path, workspace: Path) -> None:
    client = RecordingClient(answer=lambda call, options: "reject_once")
    before = (workspace / "app.py").read_text()
    async with acp_agent(client, env_for(tmp_path, READ_EDIT)) as (conn, _proc):
        new = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        answer = await conn.prompt(session_id=new.session_id, prompt=[acp.text_block("Say Hi")])
    assert answer.stop_reason == "end_turn"
    assert client.writes == []
    assert (workspace / "app.py").read_text() == before
    done = [u for u in client.of_kind("tool_call_update") if u.get("status") == "completed"]
    assert done[-1]["rawOutput"] == {"status": "rejected"}


async def test_a_cancelled_outcome_is_deny(tmp_path: Path, workspace: Path) -> None:
    client = RecordingClient(answer=lambda call, options: None)
    async with acp_agent(client, env_for(tmp_path, READ_EDIT)) as (conn, _proc):
        new = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        await conn.prompt(session_id=new.session_id, prompt=[acp.text_block("Say Hi")])
    assert client.writes == []
    assert client.permissions


async def test_without_fs_the_edit_is_written_to_disk(tmp_path: Path, workspace: Path) -> None:
    client = RecordingClient()
    async with acp_agent(client, env_for(tmp_path, READ_EDIT), fs=False) as (conn, _proc):
        new = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        answer = await conn.prompt(session_id=new.session_id, prompt=[acp.text_block("Say Hi")])
    assert answer.stop_reason == "end_turn"
    assert client.reads == [] and client.writes == []
    assert 'return "Hi " + name' in (workspace / "app.py").read_text()
    assert not list(workspace.glob(".app.py.*"))  # the temp file of the atomic write is gone


async def test_accept_edits_mode_writes_without_asking(tmp_path: Path, workspace: Path) -> None:
    client = RecordingClient(answer=lambda call, options: "reject_once")
    async with acp_agent(client, env_for(tmp_path, READ_EDIT), "--mode", "acceptEdits") as (
        conn,
        _proc,
    ):
        new = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        assert new.modes.current_mode_id == "acceptEdits"
        await conn.prompt(session_id=new.session_id, prompt=[acp.text_block("Say Hi")])
    assert client.permissions == []
    assert len(client.writes) == 1


async def test_reads_see_the_unsaved_buffer_and_a_changed_buffer_is_refused(
    tmp_path: Path, workspace: Path
) -> None:
    app = str(workspace / "app.py")
    unsaved = 'def greet(name):\n    return "Hello " + name  # unsaved\n'
    client = RecordingClient(buffers={app: unsaved})
    script = {
        "turns": [
            {"tool_calls": [{"name": "read_file", "input": {"file_path": "app.py"}}]},
            {"tool_calls": [EDIT]},
            {"text": "Stopped."},
        ]
    }
    # The user types in the buffer after the agent read it and before it edits.
    client.after_read = lambda path: client.buffers.__setitem__(app, unsaved + "# typed\n")
    async with acp_agent(client, env_for(tmp_path, script)) as (conn, _proc):
        new = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        await conn.prompt(session_id=new.session_id, prompt=[acp.text_block("Say Hi")])
    results = [u for u in client.of_kind("tool_call_update") if "rawOutput" in u]
    assert "# unsaved" in results[0]["rawOutput"]
    assert "as open in the editor" in results[0]["rawOutput"]
    assert results[1]["status"] == "failed"
    assert "changed in the editor since you last read it" in results[1]["rawOutput"]
    assert client.writes == [] and client.permissions == []


async def test_shell_asks_streams_output_and_remembers_a_session_grant(
    tmp_path: Path, workspace: Path
) -> None:
    command = "touch made.txt && echo made"
    script = {
        "turns": [
            {"tool_calls": [{"name": "run_shell", "input": {"command": command}}]},
            {"tool_calls": [{"name": "run_shell", "input": {"command": command}}]},
            {"text": "Ran it twice."},
        ]
    }
    client = RecordingClient(
        answer=lambda call, options: "allow_always" if "allow_always" in options else "allow_once"
    )
    env = env_for(tmp_path, script)
    async with acp_agent(client, env, "--settings", json.dumps({"sandbox": "off"})) as (
        conn,
        _proc,
    ):
        new = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        answer = await conn.prompt(session_id=new.session_id, prompt=[acp.text_block("make it")])
    assert answer.stop_reason == "end_turn"
    (asked,) = client.permissions  # the second identical command did not ask again
    assert [o["optionId"] for o in asked["options"]] == [
        "allow_once",
        "allow_always",
        "reject_once",
    ]
    assert [o["name"] for o in asked["options"]][1] == "Allow for this session"
    assert asked["toolCall"]["kind"] == "execute"
    assert "touch" in asked["toolCall"]["content"][0]["content"]["text"]
    assert (workspace / "made.txt").exists()
    outputs = [
        c["content"]["text"]
        for u in client.of_kind("tool_call_update")
        for c in u.get("content") or []
        if c.get("type") == "content"
    ]
    assert any("made" in text for text in outputs)


async def test_resources_and_links_are_attached_like_mentions(
    tmp_path: Path, workspace: Path
) -> None:
    """The script model cannot show what the model read; the edit it makes over an attached
    file without a read_file call proves the file counted as read."""
    notes = str(workspace / "notes.md")
    app = str(workspace / "app.py")
    script = {
        "turns": [
            {
                "tool_calls": [
                    {
                        "name": "edit_file",
                        "input": {
                            "file_path": "notes.md",
                            "old_string": "nothing yet",
                            "new_string": "a",
                        },
                    },
                    EDIT,
                ]
            },
            {"text": "Both edited."},
        ]
    }
    client = RecordingClient()
    async with acp_agent(client, env_for(tmp_path, script), "--mode", "acceptEdits") as (
        conn,
        _proc,
    ):
        new = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        prompt = [
            acp.text_block("Change"),
            EmbeddedResourceContentBlock(
                type="resource",
                resource=TextResourceContents(
                    uri=f"file://{notes}", text=(workspace / "notes.md").read_text()
                ),
            ),
            acp.text_block("and"),
            ResourceContentBlock(type="resource_link", uri=f"file://{app}", name="app.py"),
        ]
        answer = await conn.prompt(session_id=new.session_id, prompt=prompt)
    assert answer.stop_reason == "end_turn"
    assert sorted(path for path, _ in client.writes) == sorted([notes, app])


async def test_cancel_ends_the_prompt_and_withdraws_the_question(
    tmp_path: Path, workspace: Path
) -> None:
    client = RecordingClient(answer=lambda call, options: "never")
    async with acp_agent(client, env_for(tmp_path, READ_EDIT)) as (conn, _proc):
        new = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        running = asyncio.ensure_future(
            conn.prompt(session_id=new.session_id, prompt=[acp.text_block("Say Hi")])
        )
        await asyncio.wait_for(client.asked.wait(), 30)
        await conn.cancel(session_id=new.session_id)
        answer = await asyncio.wait_for(running, 10)
        assert answer.stop_reason == "cancelled"
        asked_id = next(
            m["id"] for m in client.raw_in if m.get("method") == "session/request_permission"
        )
        assert await wait_until(
            lambda: any(
                m.get("method") == "$/cancel_request" and m["params"]["requestId"] == asked_id
                for m in client.raw_in
            )
        )
        # The session goes on: the next prompt runs.
        again = await conn.prompt(session_id=new.session_id, prompt=[acp.text_block("go on")])
        assert again.stop_reason in ("end_turn", "cancelled")
    assert client.writes == []


async def test_a_permission_request_never_answered_is_denied_in_bounded_time(
    tmp_path: Path, workspace: Path
) -> None:
    client = RecordingClient(answer=lambda call, options: "never")
    settings = json.dumps({"editConfirmTimeout": 1})
    async with acp_agent(client, env_for(tmp_path, READ_EDIT), "--settings", settings) as (
        conn,
        _proc,
    ):
        new = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        answer = await asyncio.wait_for(
            conn.prompt(session_id=new.session_id, prompt=[acp.text_block("Say Hi")]), 20
        )
    assert answer.stop_reason == "end_turn"
    assert client.text().endswith("Done.")
    assert client.writes == []
    done = [u for u in client.of_kind("tool_call_update") if u.get("rawOutput")]
    assert done[-1]["rawOutput"] == {"status": "rejected"}


def _sleeper(marker: str) -> dict[str, Any]:
    return {
        "turns": [
            {"tool_calls": [{"name": "run_shell", "input": {"command": f"sleep {marker}"}}]},
            {"text": "slept"},
        ]
    }


async def test_cancel_kills_the_running_command(tmp_path: Path, workspace: Path) -> None:
    marker = f"300.{secrets.randbelow(10**6):06d}"
    client = RecordingClient()
    env = env_for(tmp_path, _sleeper(marker))
    async with acp_agent(client, env, "--mode", "bypassPermissions") as (conn, _proc):
        new = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        running = asyncio.ensure_future(
            conn.prompt(session_id=new.session_id, prompt=[acp.text_block("sleep")])
        )
        assert await wait_until(lambda: bool(live_processes_with(f"sleep {marker}")), 30)
        await conn.cancel(session_id=new.session_id)
        answer = await asyncio.wait_for(running, 10)
        assert answer.stop_reason == "cancelled"
        assert await wait_until(lambda: not live_processes_with(f"sleep {marker}"), 5)


async def test_a_client_that_disconnects_mid_run_leaves_no_process(
    tmp_path: Path, workspace: Path
) -> None:
    marker = f"300.{secrets.randbelow(10**6):06d}"
    client = RecordingClient()
    env = env_for(tmp_path, _sleeper(marker))
    async with acp_agent(client, env, "--mode", "bypassPermissions") as (conn, proc):
        new = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        running = asyncio.ensure_future(
            conn.prompt(session_id=new.session_id, prompt=[acp.text_block("sleep")])
        )
        assert await wait_until(lambda: bool(live_processes_with(f"sleep {marker}")), 30)
        assert proc.stdin is not None
        proc.stdin.close()  # the editor goes away
        await asyncio.wait_for(proc.wait(), 10)
        running.cancel()
    assert await wait_until(lambda: not live_processes_with(f"sleep {marker}"), 5)


async def test_load_replays_the_conversation_and_list_names_it(
    tmp_path: Path, workspace: Path
) -> None:
    env = env_for(tmp_path, READ_EDIT)
    first = RecordingClient()
    async with acp_agent(first, env) as (conn, _proc):
        new = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        await conn.prompt(session_id=new.session_id, prompt=[acp.text_block("Say Hi")])
    second = RecordingClient()
    async with acp_agent(second, env) as (conn, _proc):
        listed = await conn.list_sessions(cwd=str(workspace))
        assert [s.session_id for s in listed.sessions] == [new.session_id]
        assert listed.sessions[0].title == "Say Hi"
        loaded = await conn.load_session(
            cwd=str(workspace), session_id=new.session_id, mcp_servers=[]
        )
        assert loaded.modes.current_mode_id == "default"
        replayed = list(second.updates)  # sent before the load answered
        user = [
            u["content"]["text"] for u in replayed if u["sessionUpdate"] == "user_message_chunk"
        ]
        assert user == ["Say Hi"]
        agent_text = "".join(
            u["content"]["text"] for u in replayed if u["sessionUpdate"] == "agent_message_chunk"
        )
        assert agent_text == "Reading.\n\nEditing.\n\nDone."
        calls = [u for u in replayed if u["sessionUpdate"] == "tool_call"]
        assert [(c["title"], c["kind"]) for c in calls] == [
            ("Read app.py", "read"),
            ("Edit app.py", "edit"),
        ]
        # The loaded session takes prompts (the script's turns are used up by now).
        answer = await conn.prompt(session_id=new.session_id, prompt=[acp.text_block("more")])
        assert answer.stop_reason == "end_turn"


async def test_bad_requests_get_clean_errors(tmp_path: Path, workspace: Path) -> None:
    client = RecordingClient()
    async with acp_agent(client, env_for(tmp_path, READ_EDIT)) as (conn, _proc):
        with pytest.raises(acp.RequestError) as unknown:
            await conn.prompt(session_id="s-nope", prompt=[acp.text_block("hi")])
        assert unknown.value.code == -32602
        assert "unknown session" in json.dumps(unknown.value.data)
        with pytest.raises(acp.RequestError) as not_a_dir:
            await conn.new_session(cwd=str(workspace / "app.py"), mcp_servers=[])
        assert not_a_dir.value.code == -32602
        with pytest.raises(acp.RequestError) as relative:
            await conn.new_session(cwd="relative/dir", mcp_servers=[])
        assert relative.value.code == -32602
        new = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        with pytest.raises(acp.RequestError) as bad_mode:
            await conn.set_session_mode(session_id=new.session_id, mode_id="yolo")
        assert bad_mode.value.code == -32602
        with pytest.raises(acp.RequestError) as no_saved:
            await conn.load_session(cwd=str(workspace), session_id="s-missing", mcp_servers=[])
        assert no_saved.value.code == -32602
        # Still alive and well.
        answer = await conn.prompt(session_id=new.session_id, prompt=[acp.text_block("Say Hi")])
        assert answer.stop_reason == "end_turn"


async def test_sigterm_cancels_the_run_and_kills_its_command(
    tmp_path: Path, workspace: Path
) -> None:
    marker = f"300.{secrets.randbelow(10**6):06d}"
    client = RecordingClient()
    env = env_for(tmp_path, _sleeper(marker))
    async with acp_agent(client, env, "--mode", "bypassPermissions") as (conn, proc):
        new = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        running = asyncio.ensure_future(
            conn.prompt(session_id=new.session_id, prompt=[acp.text_block("sleep")])
        )
        assert await wait_until(lambda: bool(live_processes_with(f"sleep {marker}")), 30)
        proc.terminate()
        assert await asyncio.wait_for(proc.wait(), 10) == 0
        running.cancel()
    assert await wait_until(lambda: not live_processes_with(f"sleep {marker}"), 5)


async def test_close_forgets_the_session(tmp_path: Path, workspace: Path) -> None:
    client = RecordingClient()
    async with acp_agent(client, env_for(tmp_path, READ_EDIT)) as (conn, _proc):
        new = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        await conn.close_session(session_id=new.session_id)
        with pytest.raises(acp.RequestError) as closed:
            await conn.prompt(session_id=new.session_id, prompt=[acp.text_block("hi")])
        assert closed.value.code == -32602
        # Still saved: it can be loaded again.
        await conn.load_session(cwd=str(workspace), session_id=new.session_id, mcp_servers=[])
        answer = await conn.prompt(session_id=new.session_id, prompt=[acp.text_block("Say Hi")])
        assert answer.stop_reason == "end_turn"


async def test_the_compact_command_compacts_the_conversation(
    tmp_path: Path, workspace: Path
) -> None:
    script = {"turns": [{"text": "First answer."}, {"text": "Summary of the talk so far."}]}
    client = RecordingClient()
    async with acp_agent(client, env_for(tmp_path, script)) as (conn, _proc):
        new = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        await conn.prompt(session_id=new.session_id, prompt=[acp.text_block("Hello")])
        answer = await conn.prompt(session_id=new.session_id, prompt=[acp.text_block("/compact")])
        assert answer.stop_reason == "end_turn"
    transcript = (tmp_path / "data" / "sessions" / f"{new.session_id}.jsonl").read_text()
    records = [json.loads(line) for line in transcript.splitlines()]
    assert [r for r in records if r["type"] == "compaction"]
    # "/compact" was a command, not words for the model.
    said = [m["message"] for m in records if m["type"] == "message"]
    assert not any("/compact" in json.dumps(m) for m in said)


async def test_session_new_mcp_servers_are_the_models_tools(
    tmp_path: Path, workspace: Path
) -> None:
    """The client's ``mcpServers`` start without a trust question, their tools are offered,
    asked about and called: ``session/new`` reaches the same MCP manager as ``serve``."""
    import sys

    from acp.schema import EnvVariable, McpServerStdio

    repo = Path(__file__).resolve().parents[1]
    script = {
        "turns": [
            {"tool_calls": [{"name": "mcp__faulty__echo", "input": {"text": "over ACP"}}]},
            {"text": "Echoed."},
        ]
    }
    client = RecordingClient()
    server = McpServerStdio(
        name="faulty",
        command=sys.executable,
        args=["-m", "tests.mcp_servers.faulty"],
        env=[EnvVariable(name="PYTHONPATH", value=str(repo))],
    )
    async with acp_agent(client, env_for(tmp_path, script)) as (conn, _proc):
        new = await conn.new_session(cwd=str(workspace), mcp_servers=[server])
        answer = await conn.prompt(session_id=new.session_id, prompt=[acp.text_block("echo")])
    assert answer.stop_reason == "end_turn"
    (asked,) = client.permissions
    assert asked["toolCall"]["title"] == "faulty: echo"
    results = [u for u in client.of_kind("tool_call_update") if u.get("status") == "completed"]
    assert any("over ACP" in json.dumps(u.get("rawOutput")) for u in results), results
