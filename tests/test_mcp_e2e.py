"""MCP end to end: editor → agent-ls → real MCP servers, model requests at the fake API.

``mcp-server-time`` (PyPI) and ``@modelcontextprotocol/server-everything`` (npm, installed by
``.ci/run`` into ``.cache/mcp-npm``) are servers no one here wrote; ``tests/mcp_servers/faulty``
is ours, for trust, permissions and processes.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.editor_sim import EditorSim, editor
from tests.fakeapi import FakeAPI, Turn

REPO = Path(__file__).resolve().parents[1]
EVERYTHING = Path(
    os.environ.get(
        "AGENT_LS_MCP_EVERYTHING",
        REPO / ".cache" / "mcp-npm" / "node_modules" / ".bin" / "mcp-server-everything",
    )
)
TIME = {"command": sys.executable, "args": ["-m", "mcp_server_time"]}
FAULTY = {"command": sys.executable, "args": ["-m", "tests.mcp_servers.faulty"], "cwd": str(REPO)}
BUILTINS = [
    "read_file",
    "write_file",
    "edit_file",
    "list_files",
    "grep_search",
    "run_shell",
    "get_diagnostics",
    "task",  # sub-agents: a built-in of every session
]


@pytest.fixture
def api() -> Iterator[Any]:
    with FakeAPI() as fake:
        yield fake


def env_for(api: Any, **extra: str) -> dict[str, str]:
    return {
        "AGENT_LS_MODEL": "anthropic:claude-sonnet-5-5",
        "ANTHROPIC_BASE_URL": api.url,
        "ANTHROPIC_API_KEY": "test-key",
        **extra,
    }


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        block
        for message in body["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]


def result_text(block: dict[str, Any]) -> str:
    content = block["content"]
    if isinstance(content, str):
        return content
    return "".join(c.get("text", "") for c in content)


async def settled(ed: EditorSim, wait: float = 40) -> dict[str, dict[str, Any]]:
    """``agent.mcp`` once no server is starting or awaiting approval."""
    deadline = asyncio.get_running_loop().time() + wait
    while True:
        answer = await ed.command("agent.mcp", {})
        servers = {s["name"]: s for s in answer["servers"]}
        if all(s["state"] not in ("starting", "approval") for s in servers.values()):
            return servers
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"MCP servers did not settle: {servers}")
        await asyncio.sleep(0.1)


def gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[0] in ("Z", "X")


async def test_mcp_server_time_through_an_ask(workspace: Path, api: Any) -> None:
    api.enqueue(
        Turn(text="Checking.", tool_uses=[("mcp__time__get_current_time", {"timezone": "UTC"})]),
        Turn(tool_uses=[("mcp__time__get_current_time", {"timezone": "Europe/Paris"})]),
        Turn(text="It is noon somewhere."),
    )
    options = {"mcpServers": {"time": TIME}}
    async with editor(
        workspace, env=env_for(api), init_options=options, answers=["Allow for this session"]
    ) as ed:
        # The first ask waits for the server still starting, then offers its tools.
        result = await ed.ask("What time is it in UTC?")
        assert result["stopReason"] == "end_turn", result
        servers = await settled(ed)
        assert servers["time"]["state"] == "ready"
        assert servers["time"]["source"] == "settings"
        assert "mcp__time__get_current_time" in servers["time"]["tools"]
        # The dialog showed server, tool and arguments, and offered a session grant, which
        # covered the second call.
        assert len(ed.confirmations) == 1
        status = await ed.command("agent.status", {})
        assert status["grants"] == ["mcp__time__get_current_time"]
        asked = ed.confirmations[0]
        assert "'time'" in asked and "'get_current_time'" in asked and '"UTC"' in asked
        call = next(u for u in ed.of_kind("tool_call") if u["toolCallId"])
        assert call["kind"] == "other" and call["title"] == "time: get_current_time"
    first, second, third = (r.body for r in api.requests)
    names = [t["name"] for t in first["tools"]]
    assert names[: len(BUILTINS)] == BUILTINS
    assert names[len(BUILTINS) :] == ["mcp__time__convert_time", "mcp__time__get_current_time"]
    spec = next(t for t in first["tools"] if t["name"] == "mcp__time__get_current_time")
    assert spec["input_schema"]["type"] == "object" and "timezone" in spec["input_schema"][
        "properties"
    ]
    assert first["tools"] == third["tools"]  # fixed for the ask (the prompt-cache prefix)
    answer = tool_results(second)[0]
    assert not answer.get("is_error")
    assert json.loads(result_text(answer))["timezone"] == "UTC"
    assert json.loads(result_text(tool_results(third)[-1]))["timezone"] == "Europe/Paris"


@pytest.mark.skipif(
    not EVERYTHING.exists() and not os.environ.get("CI"),
    reason="server-everything is not installed (.ci/run installs it into .cache/mcp-npm)",
)
async def test_server_everything_echo_and_image_through_an_ask(workspace: Path, api: Any) -> None:
    api.enqueue(
        Turn(
            tool_uses=[
                ("mcp__everything__echo", {"message": "hello from the test"}),
                ("mcp__everything__get-tiny-image", {}),
            ]
        ),
        Turn(text="Echoed."),
    )
    options = {
        "mcpServers": {"everything": {"command": str(EVERYTHING)}},
        "permissions": {"allow": ["mcp__everything__*"]},
    }
    async with editor(workspace, env=env_for(api), init_options=options) as ed:
        result = await ed.ask("Echo something")
        assert result["stopReason"] == "end_turn", result
        assert ed.confirmations == []  # the allow rule names the server's tools
    first, second = (r.body for r in api.requests)
    assert "mcp__everything__echo" in [t["name"] for t in first["tools"]]
    for tool in first["tools"]:
        assert len(tool["name"]) <= 64 and "$ref" not in json.dumps(tool["input_schema"])
    echo, image = tool_results(second)
    assert "hello from the test" in result_text(echo)
    images = [c for c in image["content"] if c.get("type") == "image"]
    assert images and images[0]["source"]["media_type"] == "image/png"
    assert images[0]["source"]["data"]


def project_config(workspace: Path, marker: Path, *extra_args: str) -> dict[str, Any]:
    entry = {**FAULTY, "env": {"FAULTY_MARKER": "${MARKER_FILE}"}}
    entry["args"] = [*FAULTY["args"], *extra_args]
    config = {"mcpServers": {"proj": entry}}
    (workspace / ".mcp.json").write_text(json.dumps(config))
    return config


async def test_project_servers_do_not_start_without_approval(
    workspace: Path, api: Any, tmp_path: Path
) -> None:
    marker = tmp_path / "started"
    project_config(workspace, marker)
    api.enqueue(Turn(text="No tools."))
    # No answer is Deny: nothing ran, nothing is offered to the model.
    async with editor(workspace, env=env_for(api, MARKER_FILE=str(marker))) as ed:
        servers = await settled(ed)
        assert servers["proj"]["state"] == "denied"
        assert servers["proj"]["source"] == "project"
        assert servers["proj"]["tools"] == []
        assert len(ed.confirmations) == 1
        shown = ed.confirmations[0]
        assert "proj:" in shown and "tests.mcp_servers.faulty" in shown and sys.executable in shown
        await ed.ask("hi")
        await asyncio.sleep(0.5)
        assert not marker.exists()
    assert not [t for t in api.requests[0].body["tools"] if t["name"].startswith("mcp__")]


@pytest.mark.timeout(120)
async def test_approved_project_servers_start_and_approval_is_remembered(
    workspace: Path, api: Any, tmp_path: Path
) -> None:
    marker = tmp_path / "started"
    project_config(workspace, marker)
    env = env_for(api, MARKER_FILE=str(marker))
    async with editor(workspace, env=env, answers=["Allow"]) as ed:
        servers = await settled(ed)
        assert servers["proj"]["state"] == "ready", servers
        assert marker.exists()
        pid = int(marker.read_text())
    for _ in range(100):
        if gone(pid):
            break
        await asyncio.sleep(0.05)
    assert gone(pid), "the MCP server outlived the editor's shutdown"
    async with editor(workspace, env=env) as ed:
        assert (await settled(ed))["proj"]["state"] == "ready"
        assert ed.confirmations == []


async def test_a_changed_project_file_asks_again(
    workspace: Path, api: Any, tmp_path: Path
) -> None:
    from agent_ls.safety.trust import TrustRequest, TrustStore

    marker = tmp_path / "started"
    project_config(workspace, marker)
    path = workspace / ".mcp.json"
    TrustStore.default().approve(
        TrustRequest(workspace, path, path.read_bytes(), "MCP servers", ("proj",))
    )
    project_config(workspace, marker, "--changed")
    async with editor(workspace, env=env_for(api, MARKER_FILE=str(marker))) as ed:
        assert (await settled(ed))["proj"]["state"] == "denied"
        assert len(ed.confirmations) == 1 and "--changed" in ed.confirmations[0]
        assert not marker.exists()


async def test_rules_plan_mode_and_large_results(workspace: Path, api: Any) -> None:
    api.enqueue(
        Turn(
            tool_uses=[
                ("mcp__f__echo", {"text": "planned"}),
                ("mcp__f__huge", {"chars": 60_000}),
                ("mcp__f__fail", {}),
            ]
        ),
        Turn(text="Done."),
    )
    options = {
        "mode": "plan",
        "mcpServers": {"f": FAULTY},
        "permissions": {"allow": ["mcp__f__echo", "mcp__f__huge"], "deny": ["mcp__f__fail"]},
    }
    async with editor(workspace, env=env_for(api), init_options=options) as ed:
        result = await ed.ask("Plan something")
        assert result["stopReason"] == "end_turn", result
        assert ed.confirmations == []
    echo, huge, fail = tool_results(api.requests[1].body)
    assert result_text(echo) == "echo: planned"
    assert "saved in full at" in result_text(huge) and len(result_text(huge)) < 30_000
    assert fail.get("is_error") and "plan mode" in result_text(fail)


async def test_deny_rules_refuse_and_a_denied_dialog_is_the_users_decision(
    workspace: Path, api: Any
) -> None:
    api.enqueue(
        Turn(tool_uses=[("mcp__f__echo", {"text": "x"}), ("mcp__f__fail", {})]),
        Turn(text="ok"),
    )
    options = {"mcpServers": {"f": FAULTY}, "permissions": {"deny": ["mcp__f__fail"]}}
    async with editor(workspace, env=env_for(api), init_options=options, answers=["Deny"]) as ed:
        await ed.ask("go")
        assert len(ed.confirmations) == 1 and "'echo'" in ed.confirmations[0]
    echo, fail = tool_results(api.requests[1].body)
    assert echo.get("is_error") and "denied" in result_text(echo)
    assert fail.get("is_error") and "mcp__f__fail" in result_text(fail)


@pytest.mark.timeout(240)
def test_headless_mcp_lists_servers_and_approves_with_yes(workspace: Path) -> None:
    (workspace / ".mcp.json").write_text(json.dumps({"mcpServers": {"proj": FAULTY}}))

    def run(*flags: str) -> dict[str, Any]:
        done = subprocess.run(
            [sys.executable, "-m", "agent_ls", "mcp", "--json", "--cwd", str(workspace), *flags],
            capture_output=True,
            text=True,
            timeout=90,
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 0, done.stderr
        return {s["name"]: s for s in json.loads(done.stdout)["servers"]}

    assert run()["proj"]["state"] == "denied"  # no terminal: denied
    assert run("--no")["proj"]["state"] == "denied"
    approved = run("--yes")["proj"]
    assert approved["state"] == "ready" and "mcp__proj__echo" in approved["tools"]


def _ready_server_pid(client: Any, marker: Path) -> int:
    import time

    deadline = time.monotonic() + 40
    while time.monotonic() < deadline:
        answer = client.request(
            "workspace/executeCommand", {"command": "agent.mcp", "arguments": [{}]}
        )["result"]
        states = [s["state"] for s in answer["servers"]]
        if states == ["ready"]:
            return int(marker.read_text())
        assert "failed" not in states, answer
        time.sleep(0.1)
    raise AssertionError("the MCP server did not start")


def _wait_gone(pid: int, seconds: float = 10) -> bool:
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if gone(pid):
            return True
        time.sleep(0.05)
    return gone(pid)


@pytest.mark.parametrize("how", ["editor-vanishes", "agent-ls-killed"])
def test_no_orphan_server_when_the_editor_or_agent_ls_dies(
    workspace: Path, tmp_path: Path, how: str
) -> None:
    """The editor going away without shutdown (its pipes close), or agent-ls SIGKILLed: the
    MCP server process goes too."""
    from tests.rawclient import RawClient

    marker = tmp_path / "pid"
    options = {"mcpServers": {"f": {**FAULTY, "env": {"FAULTY_MARKER": str(marker)}}}}
    client = RawClient(workspace, env={"AGENT_LS_MODEL": "script:/nonexistent"})
    try:
        client.initialize(workspace, options)
        pid = _ready_server_pid(client, marker)
        assert not gone(pid)
        if how == "agent-ls-killed":
            client.proc.kill()
        else:
            assert client.proc.stdin is not None
            client.proc.stdin.close()
        client.proc.wait(timeout=15)
        assert _wait_gone(pid), f"MCP server {pid} outlived agent-ls ({how})"
    finally:
        if client.proc.poll() is None:
            client.proc.kill()
            client.proc.wait()


async def test_cancelling_the_run_cancels_the_mcp_call(
    workspace: Path, api: Any, tmp_path: Path
) -> None:
    marker = tmp_path / "cancelled"
    api.enqueue(Turn(tool_uses=[("mcp__f__slow", {"seconds": 60})]), Turn(text="never"))
    options = {
        "mcpServers": {"f": {**FAULTY, "env": {"FAULTY_CANCEL_MARKER": str(marker)}}},
        "permissions": {"allow": ["mcp__f__*"]},
    }
    async with editor(workspace, env=env_for(api), init_options=options) as ed:
        ask = asyncio.ensure_future(ed.ask("wait a minute"))
        for _ in range(400):
            if any(u.get("status") == "in_progress" for u in ed.of_kind("tool_call_update")):
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)
        assert (await ed.command("agent.cancel", {}))["cancelled"]
        result = await asyncio.wait_for(ask, 20)
        assert result["stopReason"] == "cancelled"
        for _ in range(100):
            if marker.exists():
                break
            await asyncio.sleep(0.05)
        assert marker.exists(), "the server's tool was not cancelled"
