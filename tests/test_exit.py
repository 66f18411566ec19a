"""``exit`` ends the server at once: with the editor's pipe still open, and with a command
still running (its process dies with the server, never left behind)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from tests.rawclient import RawClient

MARKER_SECONDS = "31.4159"  # a `sleep` argument no other process on the machine uses


def _sleepers() -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as handle:
                argv = handle.read().split(b"\0")
            with open(f"/proc/{name}/stat") as handle:
                state = handle.read().rpartition(")")[2].split()[0]
        except OSError:
            continue
        if argv[:2] == [b"sleep", MARKER_SECONDS.encode()] and state != "Z":
            found.append(int(name))
    return found


def test_exit_after_shutdown_is_code_0_with_the_pipe_still_open(
    workspace: Path, tmp_path: Path
) -> None:
    server = RawClient(workspace, env={"AGENT_LS_DATA_DIR": str(tmp_path / "data")})
    server.initialize(workspace)
    server.request("shutdown", None)
    server.send({"jsonrpc": "2.0", "method": "exit"})
    # stdin stays open, as editors leave it
    assert server.proc.wait(timeout=10) == 0


def test_exit_without_shutdown_is_code_1(workspace: Path, tmp_path: Path) -> None:
    server = RawClient(workspace, env={"AGENT_LS_DATA_DIR": str(tmp_path / "data")})
    server.initialize(workspace)
    server.send({"jsonrpc": "2.0", "method": "exit"})
    assert server.proc.wait(timeout=10) == 1


def test_a_running_command_dies_with_the_server(workspace: Path, tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    command = f"sleep {MARKER_SECONDS}"
    script.write_text(
        json.dumps(
            {
                "turns": [
                    {"tool_calls": [{"name": "run_shell", "input": {"command": command}}]},
                    {"text": "done"},
                ]
            }
        )
    )
    env = {
        "AGENT_LS_MODEL": f"script:{script}",
        "AGENT_LS_DATA_DIR": str(tmp_path / "data"),
    }
    server = RawClient(workspace, env=env)
    server.initialize(workspace, {"mode": "bypassPermissions", "sandbox": "off"})
    server.send(
        {
            "jsonrpc": "2.0",
            "id": 99,
            "method": "workspace/executeCommand",
            "params": {"command": "agent.ask", "arguments": [{"prompt": "wait a bit"}]},
        }
    )
    deadline = time.monotonic() + 20
    while not _sleepers() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _sleepers(), "the command never started"
    server.send({"jsonrpc": "2.0", "method": "exit"})
    assert server.proc.wait(timeout=10) == 1
    deadline = time.monotonic() + 5
    while _sleepers() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _sleepers() == []


def test_shutdown_while_a_question_waits_is_answered_null(workspace: Path, tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            {
                "turns": [
                    {"tool_calls": [{"name": "run_shell", "input": {"command": "touch x"}}]},
                    {"text": "done"},
                ]
            }
        )
    )
    env = {"AGENT_LS_MODEL": f"script:{script}", "AGENT_LS_DATA_DIR": str(tmp_path / "data")}
    server = RawClient(workspace, env=env)
    server.initialize(workspace, {"sandbox": "off"})
    server.send(
        {
            "jsonrpc": "2.0",
            "id": 99,
            "method": "workspace/executeCommand",
            "params": {"command": "agent.ask", "arguments": [{"prompt": "make x"}]},
        }
    )
    while True:  # wait for the question, and leave it unanswered (the user looks away)
        message = server.read()
        if message.get("method") == "window/showMessageRequest":
            break
    server.send({"jsonrpc": "2.0", "id": 100, "method": "shutdown", "params": None})
    while True:
        message = server.read()
        if message.get("id") == 100 and "method" not in message:
            break
    assert "error" not in message and message.get("result") is None, message
    server.send({"jsonrpc": "2.0", "method": "exit"})
    assert server.proc.wait(timeout=10) == 0
    assert not (workspace / "x").exists()
