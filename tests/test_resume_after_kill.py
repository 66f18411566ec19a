"""A server killed with SIGKILL mid-run: the session resumes at its last complete turn."""

from __future__ import annotations

import json
import time
from pathlib import Path

from tests.rawclient import RawClient


def test_sigkill_mid_run_resumes_at_last_complete_turn(workspace: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    first_script = tmp_path / "first.json"
    first_script.write_text(
        json.dumps(
            {
                "turns": [
                    {"tool_calls": [{"name": "read_file", "input": {"file_path": "app.py"}}]},
                    {"text": "a very long answer " * 200, "chunk_size": 4},
                ],
                "chunk_size": 4,
                "delay_ms": 5,
            }
        )
    )
    env = {"AGENT_LS_MODEL": f"script:{first_script}", "AGENT_LS_DATA_DIR": str(data)}
    server = RawClient(workspace, env=env)
    server.initialize(workspace)
    session_id = server.request(
        "workspace/executeCommand", {"command": "agent.newSession", "arguments": [{}]}
    )["result"]["sessionId"]
    server.next_id += 1
    server.send(
        {
            "jsonrpc": "2.0",
            "id": server.next_id,
            "method": "workspace/executeCommand",
            "params": {
                "command": "agent.ask",
                "arguments": [{"prompt": "explain app.py", "sessionId": session_id}],
            },
        }
    )
    # Wait until the second turn is streaming, then kill the server outright.
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        message = server.read()
        update = (message.get("params") or {}).get("update") or {}
        if update.get("sessionUpdate") == "agent_message_chunk":
            break
    server.proc.kill()
    server.proc.wait()

    second_script = tmp_path / "second.json"
    second_script.write_text(
        json.dumps(
            {
                "turns": [
                    {"text": "wrong: the resumed history has no assistant turn"},
                    {"text": "resumed after the one complete assistant turn"},
                    {"text": "wrong: the half-streamed turn was kept"},
                ]
            }
        )
    )
    env["AGENT_LS_MODEL"] = f"script:{second_script}"
    again = RawClient(workspace, env=env)
    try:
        again.initialize(workspace)
        listed = again.request(
            "workspace/executeCommand", {"command": "agent.sessions", "arguments": [{}]}
        )["result"]["sessions"]
        assert [row["sessionId"] for row in listed] == [session_id]
        answer = again.request(
            "workspace/executeCommand",
            {"command": "agent.ask", "arguments": [{"prompt": "go on", "sessionId": session_id}]},
        )["result"]
        # The script answers by the number of assistant turns in the history it is sent: one
        # complete turn (the read) survived; the half-streamed second turn did not.
        assert answer["stopReason"] == "end_turn"
        assert answer["text"] == "resumed after the one complete assistant turn"
    finally:
        again.close()
    lines = [
        json.loads(line)
        for line in (data / "sessions" / f"{session_id}.jsonl").read_text().splitlines()
    ]
    roles = [r["message"]["role"] for r in lines if r["type"] == "message"]
    kinds = [b["type"] for r in lines if r["type"] == "message" for b in r["message"]["content"]]
    assert roles[:3] == ["user", "assistant", "user"]
    assert kinds[:3] == ["text", "tool_use", "tool_result"]
    assert "a very long answer" not in json.dumps(lines[:4])  # no half-streamed text


def test_server_exits_when_the_editor_disconnects_mid_run(workspace: Path, tmp_path: Path) -> None:
    script = tmp_path / "slow.json"
    script.write_text(
        json.dumps({"delay_ms": 20, "chunk_size": 2, "turns": [{"text": "x" * 2000}]})
    )
    server = RawClient(
        workspace,
        env={"AGENT_LS_MODEL": f"script:{script}", "AGENT_LS_DATA_DIR": str(tmp_path / "d")},
    )
    server.initialize(workspace)
    server.send(
        {
            "jsonrpc": "2.0",
            "id": 99,
            "method": "workspace/executeCommand",
            "params": {"command": "agent.ask", "arguments": [{"prompt": "talk"}]},
        }
    )
    server.read()  # the run has started streaming
    assert server.proc.stdin is not None
    server.proc.stdin.close()  # the editor went away without shutdown/exit
    code = server.proc.wait(timeout=15)
    assert code is not None
