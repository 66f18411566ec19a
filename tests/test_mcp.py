"""MCP: config, names, schemas, permissions, and the connection manager against real servers.

The fault tests run ``tests/mcp_servers/faulty.py`` (the SDK's own server side) as a real
stdio subprocess; nothing of the SDK is patched.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from agent_ls.safety.permissions import Permissions
from agent_ls.settings import PermissionRules
from agent_ls.tools.mcp import McpCallError, McpManager, McpServer
from agent_ls.tools.mcp_config import (
    acp_servers,
    expand,
    load_sources,
    merge,
    parse_servers,
)
from agent_ls.tools.mcp_schema import clean_schema, tool_name

REPO = Path(__file__).resolve().parents[1]
FAULTY = {"command": sys.executable, "args": ["-m", "tests.mcp_servers.faulty"], "cwd": str(REPO)}


# -- config -------------------------------------------------------------------------------


def test_variables_expand_with_defaults_and_unset_ones_stay_literal() -> None:
    env = {"HOME": "/home/u", "EMPTY": ""}
    assert expand("${HOME}/x", env) == "/home/u/x"
    assert expand("${MISSING:-fallback}", env) == "fallback"
    assert expand("${EMPTY:-d}", env) == "d"
    assert expand("$HOME and ${MISSING}", env) == "$HOME and ${MISSING}"


def test_entries_expand_in_every_field_and_bad_ones_are_reported_by_name() -> None:
    env = {"TOKEN": "s3cret", "BIN": "/opt/bin"}
    loaded = parse_servers(
        {
            "good": {
                "command": "${BIN}/srv",
                "args": ["--t", "${TOKEN}"],
                "env": {"K": "${TOKEN}"},
            },
            "web": {"type": "http", "url": "https://x/${TOKEN}", "headers": {"A": "B ${TOKEN}"}},
            "nocommand": {"args": ["x"]},
            "badargs": {"command": "x", "args": "not a list"},
            "unset": {"command": "x", "args": ["${NOPE}"]},
            "badtimeout": {"command": "x", "toolTimeoutMs": "soon"},
            "off": {"command": "x", "disabled": True},
        },
        "settings",
        env=env,
    )
    by_name = {s.name: s for s in loaded.servers}
    assert set(by_name) == {"good", "web", "off"}
    assert by_name["good"].command == "/opt/bin/srv"
    assert by_name["good"].args == ("--t", "s3cret")
    assert dict(by_name["good"].env) == {"K": "s3cret"}
    assert by_name["web"].transport == "http"
    assert by_name["web"].url == "https://x/s3cret"
    assert dict(by_name["web"].headers) == {"A": "B s3cret"}
    assert by_name["off"].disabled
    problems = "\n".join(loaded.problems)
    for name in ("nocommand", "badargs", "unset", "badtimeout"):
        assert f"'{name}'" in problems
    assert "NOPE" in problems


def test_sources_merge_user_then_project_then_settings(tmp_path: Path) -> None:
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    (config_dir / "mcp.json").write_text(
        json.dumps({"mcpServers": {"a": {"command": "user-a"}, "b": {"command": "user-b"}}})
    )
    root = tmp_path / "ws"
    root.mkdir()
    (root / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"b": {"command": "proj-b"}, "c": {"command": "proj-c"}}})
    )
    sources = load_sources(
        config_dir,
        [root],
        {"mcpServers": {"c": {"command": "set-c"}}, "toolTimeoutMs": 5000},
        env={},
    )
    merged = merge(
        sources.user.servers,
        [s for p in sources.projects for s in p.loaded.servers],
        sources.settings.servers,
    )
    assert {n: (s.source, s.command) for n, s in merged.items()} == {
        "a": ("user", "user-a"),
        "b": ("project", "proj-b"),
        "c": ("settings", "set-c"),
    }
    assert all(s.tool_timeout_ms == 5000 for s in merged.values())
    assert sources.projects[0].content == (root / ".mcp.json").read_bytes()


def test_a_broken_project_file_is_a_problem_not_a_crash(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / ".mcp.json").write_text("{not json")
    sources = load_sources(tmp_path / "none", [root], None, env={})
    assert not sources.empty()
    assert "not valid JSON" in sources.problems()[0]


def test_acp_lists_become_named_entries() -> None:
    raw = [
        {"name": "fs", "command": "srv", "args": ["a"], "env": [{"name": "K", "value": "v"}]},
        {
            "type": "http",
            "name": "web",
            "url": "https://h",
            "headers": [{"name": "A", "value": "b"}],
        },
    ]
    loaded = parse_servers(acp_servers(raw), "acp", env={})
    assert [(s.name, s.source, s.transport) for s in loaded.servers] == [
        ("fs", "acp", "stdio"),
        ("web", "acp", "http"),
    ]
    assert dict(loaded.servers[0].env) == {"K": "v"}
    assert dict(loaded.servers[1].headers) == {"A": "b"}


# -- names and schemas --------------------------------------------------------------------


def test_tool_names_are_sanitised_and_short_with_a_hash() -> None:
    assert tool_name("my server", "get.time") == "mcp__my_server__get_time"
    long_a = tool_name("s" * 40, "t" * 40 + "a")
    long_b = tool_name("s" * 40, "t" * 40 + "b")
    assert len(long_a) == len(long_b) == 64
    assert long_a != long_b
    assert all(c.isalnum() or c in "_-" for c in long_a)


def test_schemas_lose_refs_and_what_the_apis_reject() -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {
            "Point": {"type": "object", "properties": {"x": {"type": "integer"}}},
            "Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}},
        },
        "properties": {"p": {"$ref": "#/$defs/Point"}, "n": {"$ref": "#/$defs/Node"}},
        "required": ["p", "ghost"],
    }
    cleaned = clean_schema(schema)
    text = json.dumps(cleaned)
    assert "$ref" not in text and "$defs" not in text and "$schema" not in text
    assert cleaned["properties"]["p"]["properties"]["x"] == {"type": "integer"}
    # A recursive reference ends in an open object instead of looping.
    assert cleaned["properties"]["n"]["properties"]["next"] == {"type": "object"}
    assert cleaned["required"] == ["p"]
    for bad in (None, "string", {"type": "string"}, {"anyOf": [{"type": "object"}]}):
        fixed = clean_schema(bad)
        assert fixed["type"] == "object" and fixed["properties"] == {}
        assert "anyOf" not in fixed


# -- permissions --------------------------------------------------------------------------


def test_rules_name_a_tool_a_server_or_all_and_deny_wins() -> None:
    def verdict(allow: list[str], deny: list[str], name: str) -> str | None:
        rules = PermissionRules(allow=allow, deny=deny)
        match = Permissions(rules=rules).mcp_match(name)
        return match.verdict if match else None

    assert verdict(["mcp__time__get"], [], "mcp__time__get") == "allow"
    assert verdict(["mcp__time__get"], [], "mcp__time__getx") is None
    assert verdict(["mcp__time__*"], [], "mcp__time__convert") == "allow"
    assert verdict(["mcp__time__*"], [], "mcp__timer__convert") is None
    assert verdict(["mcp__time"], [], "mcp__time__convert") == "allow"
    assert verdict(["mcp__*"], ["mcp__time__convert"], "mcp__time__convert") == "deny"
    assert verdict(["run_shell(ls)"], [], "mcp__time__convert") is None
    session = Permissions()
    session.grant("mcp__time__get")
    match = session.mcp_match("mcp__time__get")
    assert match is not None and match.grant


# -- the manager, against a real misbehaving server ----------------------------------------


async def _faulty(manager: McpManager, **extra: Any) -> McpServer:
    manager.add_servers({"f": {**FAULTY, **extra}}, source="settings")
    await manager.wait_started()
    server = manager.servers["f"]
    assert server.state == "ready", server.error
    return server


def _gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[0] in ("Z", "X")


async def test_calls_text_errors_and_images() -> None:
    manager = McpManager(cwd=REPO)
    try:
        server = await _faulty(manager)
        assert "mcp__f__echo" in [t.name for t in manager.tools()]
        ok = await server.call("echo", {"text": "hi"})
        assert (ok.text, ok.is_error) == ("echo: hi", False)
        failed = await server.call("fail", {})
        assert failed.is_error and "the widget is broken" in failed.text
        image = await server.call("pixel", {})
        assert image.images and image.images[0][0] == "image/png"
        assert "[image: image/png" in image.text
        # $defs/$ref from the server's pydantic schema are inlined for the model.
        length = next(t for t in manager.tools() if t.name == "mcp__f__length")
        assert "$ref" not in json.dumps(length.spec().input_schema)
        assert (await server.call("length", {"segment": {"start": {"x": 0, "y": 0},
                                                         "end": {"x": 3, "y": 4}}})).text == "5.0"
    finally:
        await manager.aclose()


async def test_a_slow_call_times_out_and_the_server_keeps_serving() -> None:
    manager = McpManager(cwd=REPO)
    try:
        server = await _faulty(manager, toolTimeoutMs=500)
        with pytest.raises(McpCallError, match="did not answer within 500 ms"):
            await server.call("slow", {"seconds": 5})
        assert (await server.call("echo", {"text": "still here"})).text == "echo: still here"
    finally:
        await manager.aclose()


async def test_a_cancelled_call_is_cancelled_at_the_server_too(tmp_path: Path) -> None:
    manager = McpManager(cwd=REPO)
    marker = tmp_path / "cancelled"
    try:
        server = await _faulty(manager, env={"FAULTY_CANCEL_MARKER": str(marker)})
        call = asyncio.ensure_future(server.call("slow", {"seconds": 30}))
        await asyncio.sleep(0.5)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        # notifications/cancelled reached the server, which stopped the tool.
        for _ in range(100):
            if marker.exists():
                break
            await asyncio.sleep(0.05)
        assert marker.exists()
        assert (await asyncio.wait_for(server.call("echo", {"text": "x"}), 10)).text == "echo: x"
    finally:
        await manager.aclose()


async def test_a_crashed_server_gives_an_error_then_restarts_at_the_next_call() -> None:
    manager = McpManager(cwd=REPO)
    try:
        server = await _faulty(manager)
        first_pids = set(server.pids)
        assert first_pids
        with pytest.raises(McpCallError, match=r"exited.*restarted at the next call"):
            await server.call("crash", {})
        assert server.state == "failed"
        assert (await server.call("echo", {"text": "back"})).text == "echo: back"
        assert server.state == "ready" and server.restarts == 1
        assert server.pids and server.pids != first_pids
    finally:
        await manager.aclose()


async def test_restarts_stop_after_three() -> None:
    manager = McpManager(cwd=REPO)
    try:
        server = await _faulty(manager)
        for _ in range(4):
            with pytest.raises(McpCallError):
                await server.call("crash", {})
        with pytest.raises(McpCallError, match="restarted 3 times"):
            await server.call("echo", {"text": "x"})
    finally:
        await manager.aclose()


async def test_huge_output_is_capped_in_memory() -> None:
    manager = McpManager(cwd=REPO)
    try:
        server = await _faulty(manager)
        out = await server.call("huge", {"chars": 1_500_000})
        assert len(out.text) < 1_100_000
        assert "characters omitted" in out.text
    finally:
        await manager.aclose()


async def test_list_changed_updates_the_tools_for_the_next_listing() -> None:
    manager = McpManager(cwd=REPO)
    try:
        server = await _faulty(manager)
        before = [t.name for t in manager.tools()]
        assert "mcp__f__added" not in before
        await server.call("grow", {})
        for _ in range(100):
            if "mcp__f__added" in [t.name for t in manager.tools()]:
                break
            await asyncio.sleep(0.05)
        names = [t.name for t in manager.tools()]
        assert "mcp__f__added" in names and names == sorted(names)
        assert (await server.call("added", {})).text == "added works"
    finally:
        await manager.aclose()


async def test_failures_to_start_are_reported_not_raised(tmp_path: Path) -> None:
    manager = McpManager(cwd=tmp_path)
    try:
        manager.add_servers(
            {
                "missing": {"command": str(tmp_path / "no-such-program")},
                "sleepy": {**FAULTY, "env": {"FAULTY_START_DELAY": "30"}, "startupTimeoutMs": 1500},
                "ok": FAULTY,
            },
            source="settings",
        )
        await manager.wait_started()
        states = {s["name"]: s for s in manager.status()}
        assert states["missing"]["state"] == "failed"
        assert "no-such-program" in states["missing"]["error"]
        assert states["sleepy"]["state"] == "failed"
        assert "1500 ms" in states["sleepy"]["error"]
        assert states["ok"]["state"] == "ready"
        assert [t for t in manager.tools() if t.name.startswith("mcp__sleepy")] == []
    finally:
        await manager.aclose()


async def test_no_server_process_outlives_close(tmp_path: Path) -> None:
    manager = McpManager(cwd=REPO)
    marker = tmp_path / "pid"
    server = await _faulty(manager, env={"FAULTY_MARKER": str(marker)})
    pid = int(marker.read_text())
    assert pid in server.pids and not _gone(pid)
    await manager.aclose()
    for _ in range(50):
        if _gone(pid):
            break
        await asyncio.sleep(0.05)
    assert _gone(pid)
    assert os.getpid() != pid


async def test_streamable_http_with_expanded_headers(tmp_path: Path) -> None:
    import socket
    import subprocess

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen(  # noqa: ASYNC220 - started once, before the loop has work
        [sys.executable, "-m", "tests.mcp_servers.faulty"],
        cwd=REPO,
        env={**os.environ, "FAULTY_HTTP_PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    manager = McpManager(cwd=tmp_path)
    try:
        for _ in range(200):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            await asyncio.sleep(0.05)
        problems = manager.add_servers(
            {
                "web": {
                    "type": "http",
                    "url": f"http://127.0.0.1:{port}/mcp",
                    "headers": {"X-Token": "Bearer ${MCP_TEST_TOKEN:-from-default}"},
                }
            },
            source="settings",
        )
        assert problems == []
        await manager.wait_started()
        server = manager.servers["web"]
        assert server.state == "ready", server.error
        assert (await server.call("echo", {"text": "over http"})).text == "echo: over http"
        assert (await server.call("header", {"name": "X-Token"})).text == "Bearer from-default"
    finally:
        await manager.aclose()
        proc.terminate()
        await asyncio.to_thread(proc.wait, 10)
