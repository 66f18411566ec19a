"""run_shell execution: process groups, timeout, cancel, output, environment.

Only harmless commands run here (echo, sleep, seq, env, cat, touch in tmp_path). Whether a
process survived is checked independently of the code under test, through /proc (a zombie
counts as dead: in containers whose PID 1 does not reap, an orphan's zombie lingers and
``os.killpg(pgid, 0)`` keeps succeeding on it).
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from pathlib import Path
from typing import Any

import pytest

from agent_ls.safety.permissions import Permissions
from agent_ls.settings import Settings
from agent_ls.tools.base import ToolContext, ToolResult
from agent_ls.tools.shell import (
    RUN_MARKER,
    OutputBuffer,
    RunShell,
    RunShellInput,
    child_environment,
    execute,
    is_scrubbed,
    live_group_members,
)
from agent_ls.workspace import ReadState, Workspace
from tests.fakes import FakePort

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")


def make_ctx(root: Path, **settings: Any) -> tuple[ToolContext, FakePort]:
    port = FakePort()
    ctx = ToolContext(
        workspace=Workspace([root]),
        port=port,
        read_state=ReadState(),
        permissions=Permissions(mode="bypassPermissions"),  # no questions: execution only
        # Process-group mechanics read host PIDs ($$): unsandboxed here, test_sandbox.py
        # checks the same inside the sandbox.
        settings=Settings(**{"sandbox": "off", **settings}),
        session_id="s1",
        tool_call_id="call-1",
    )
    return ctx, port


async def run(ctx: ToolContext, command: str, timeout_ms: int | None = None) -> ToolResult:
    return await RunShell().run(RunShellInput(command=command, timeout=timeout_ms), ctx)


def alive(pid: int) -> bool:
    """Running (not gone, not a zombie), judged from /proc alone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def group_alive(pgid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rpartition(")")[2].split()
            except OSError:
                continue
            if fields[2] == str(pgid) and fields[0] != "Z":
                found.append(int(entry.name))
    return found


def streamed(port: FakePort) -> list[str]:
    return [
        u["content"][0]["content"]["text"]
        for u in port.of_kind("tool_call_update")
        if u.get("content") and u["content"][0].get("type") == "content"
    ]


async def pids_from_stream(port: FakePort, count: int) -> list[int]:
    """The PIDs the command printed (``echo pid=$$``), read from the live stream."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        for text in reversed(streamed(port)):
            numbers = [int(n) for n in re.findall(r"\bpid=(\d+)", text)]
            if len(numbers) >= count:
                return numbers
        await asyncio.sleep(0.01)
    raise AssertionError(f"the command did not print {count} PIDs: {streamed(port)}")


async def test_timeout_kills_the_whole_group(tmp_path: Path) -> None:
    ctx, _port = make_ctx(tmp_path)
    started = time.monotonic()
    result = await run(ctx, "echo pid=$$; sleep 300 & echo pid=$!; sleep 300", timeout_ms=700)
    elapsed = time.monotonic() - started
    assert result.is_error and "Timed out after 0.7 s" in result.content
    assert result.raw_output["timedOut"] is True
    pgid, child = (int(n) for n in re.findall(r"pid=(\d+)", result.content))
    assert os.getpgid(os.getpid()) != pgid
    assert group_alive(pgid) == [] and not alive(child)
    assert live_group_members(pgid) == []
    # The background sleep held the output pipe open: the run still ended promptly.
    assert elapsed < 3, elapsed


async def test_cancel_kills_the_group_within_200_ms(tmp_path: Path) -> None:
    ctx, port = make_ctx(tmp_path)
    task = asyncio.ensure_future(run(ctx, "echo pid=$$; sleep 300 & echo pid=$!; sleep 300"))
    pgid, child = await pids_from_stream(port, 2)
    assert alive(child)
    cancelled_at = time.monotonic()
    task.cancel()
    while group_alive(pgid) or alive(child):
        assert time.monotonic() - cancelled_at < 2, "processes survived the cancel"
        await asyncio.sleep(0.002)
    latency = time.monotonic() - cancelled_at
    print(f"\ncancel -> whole group dead: {latency * 1000:.0f} ms")
    with pytest.raises(asyncio.CancelledError):
        await task
    assert latency < 0.2


@pytest.mark.parametrize("how", ["timeout", "cancel"])
async def test_a_child_ignoring_sigterm_is_still_killed(tmp_path: Path, how: str) -> None:
    ctx, port = make_ctx(tmp_path)
    command = "trap '' TERM; echo pid=$$; sleep 300 & echo pid=$!; sleep 300"
    if how == "timeout":
        result = await run(ctx, command, timeout_ms=500)
        assert result.raw_output["timedOut"] is True
        pgid, child = (int(n) for n in re.findall(r"pid=(\d+)", result.content))
    else:
        task = asyncio.ensure_future(run(ctx, command))
        pgid, child = await pids_from_stream(port, 2)
        cancelled_at = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        print(
            f"\ncancel of a TERM-ignoring group: {(time.monotonic() - cancelled_at) * 1000:.0f} ms"
        )
    assert group_alive(pgid) == [] and not alive(child)


async def test_a_process_that_left_the_group_is_killed_on_timeout(tmp_path: Path) -> None:
    # setsid puts the sleep in a session (and group) of its own; the run's marker in its
    # environment still finds it.
    ctx, _port = make_ctx(tmp_path)
    result = await run(ctx, "setsid sleep 300 & echo pid=$!; sleep 300", timeout_ms=500)
    (escaped,) = (int(n) for n in re.findall(r"pid=(\d+)", result.content))
    deadline = time.monotonic() + 2
    while alive(escaped) and time.monotonic() < deadline:  # noqa: ASYNC110
        await asyncio.sleep(0.01)
    assert not alive(escaped)


async def test_background_children_are_stopped_when_the_command_ends(tmp_path: Path) -> None:
    ctx, _port = make_ctx(tmp_path)
    started = time.monotonic()
    result = await run(ctx, "sleep 300 & echo pid=$!; echo started")
    assert time.monotonic() - started < 3
    assert not result.is_error and "Exit code 0" in result.content
    assert "started" in result.content
    assert "background process" in result.content  # the model learns why it is gone
    (child,) = (int(n) for n in re.findall(r"pid=(\d+)", result.content))
    assert not alive(child)


async def test_exit_codes_are_reported(tmp_path: Path) -> None:
    ctx, _port = make_ctx(tmp_path)
    ok = await run(ctx, "echo fine")
    assert not ok.is_error and ok.content == "Exit code 0\nfine"
    assert ok.raw_output["exitCode"] == 0
    failed = await run(ctx, "echo oops >&2; exit 3")
    assert failed.is_error and failed.content == "Exit code 3\noops"
    assert failed.raw_output["exitCode"] == 3
    silent = await run(ctx, "true")
    assert silent.content == "Exit code 0 (no output)"
    killed = await run(ctx, "kill -USR1 $$")
    assert killed.is_error and "Killed by SIGUSR1" in killed.content


async def test_stdin_is_closed(tmp_path: Path) -> None:
    ctx, _port = make_ctx(tmp_path)
    started = time.monotonic()
    result = await run(ctx, "cat; read line; echo read=$?", timeout_ms=20_000)
    assert time.monotonic() - started < 2
    assert "read=1" in result.content and "Exit code 0" in result.content


async def test_runs_in_the_workspace_root(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    ctx, _port = make_ctx(tmp_path)
    result = await run(ctx, "pwd; cd sub && touch made.txt && pwd")
    assert f"{tmp_path.resolve()}\n{tmp_path.resolve() / 'sub'}" in result.content
    assert (tmp_path / "sub" / "made.txt").exists()


async def test_output_is_streamed_while_the_command_runs(tmp_path: Path) -> None:
    ctx, port = make_ctx(tmp_path)
    result = await run(ctx, "for i in 1 2 3; do echo line$i; sleep 0.3; done")
    chunks = streamed(port)
    assert all(u["toolCallId"] == "call-1" for u in port.of_kind("tool_call_update"))
    assert len(chunks) >= 3, chunks
    assert "line1" in chunks[0] and "line3" not in chunks[0]
    # ACP replaces a tool call's content with each update: every update holds the output so far.
    assert chunks[-1] == "line1\nline2\nline3\n"
    assert result.content.endswith("line1\nline2\nline3")


async def test_output_is_capped_keeping_head_and_tail(tmp_path: Path) -> None:
    ctx, port = make_ctx(tmp_path)
    outcome = await execute("seq 1 300000", ctx, 30_000)
    assert outcome.total_chars > 1_900_000
    assert len(outcome.output) < 210_000
    assert outcome.output.startswith("1\n2\n3\n")
    assert outcome.output.endswith("299999\n300000\n")
    assert re.search(r"\[\.\.\. [\d,]+ characters of output omitted \.\.\.\]", outcome.output)
    # The live view is a bounded window of the latest output.
    assert all(len(text) < 9_000 for text in streamed(port))
    assert streamed(port)[-1].endswith("300000\n")


def test_output_buffer_decodes_utf8_split_across_reads() -> None:
    buffer = OutputBuffer(head=10, tail=10)
    data = "héllo wörld ✓ done".encode()
    for i in range(len(data)):
        buffer.feed(data[i : i + 1])
    buffer.feed(b"", final=True)
    assert "\ufffd" not in buffer.text()
    assert buffer.text().startswith("héllo wörl") and buffer.text().endswith("d ✓ done")
    small = OutputBuffer(head=100, tail=100)
    small.add("abc")
    assert small.text() == "abc" and small.recent() == "abc"


async def test_the_agents_api_keys_are_not_in_the_child_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secrets = {
        "ANTHROPIC_API_KEY": "sk-ant-secret",
        "ANTHROPIC_AUTH_TOKEN": "tok-secret",
        "OPENAI_API_KEY": "sk-openai-secret",
        "OPENAI_ADMIN_KEY": "sk-admin-secret",
        "AGENT_LS_MODEL": "anthropic:secret-model",
    }
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("MY_PROJECT_SETTING", "kept")
    monkeypatch.setenv("GITHUB_TOKEN", "the-users-own")  # the user's tools still need theirs
    ctx, _port = make_ctx(tmp_path)
    result = await run(ctx, "env")
    for name, value in secrets.items():
        assert value not in result.content and f"{name}=" not in result.content
    assert "MY_PROJECT_SETTING=kept" in result.content
    assert "GITHUB_TOKEN=the-users-own" in result.content
    assert is_scrubbed("anthropic_api_key") and not is_scrubbed("PATH")
    assert RUN_MARKER in child_environment("m") and RUN_MARKER not in child_environment()


async def test_cancel_during_the_grace_period_still_kills(tmp_path: Path) -> None:
    ctx, port = make_ctx(tmp_path)
    task = asyncio.ensure_future(run(ctx, "trap '' TERM; echo pid=$$; sleep 300"))
    (pgid,) = await pids_from_stream(port, 1)
    task.cancel()
    await asyncio.sleep(0.02)  # inside the SIGTERM grace period
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    deadline = time.monotonic() + 1
    while group_alive(pgid) and time.monotonic() < deadline:  # noqa: ASYNC110
        await asyncio.sleep(0.01)
    assert group_alive(pgid) == []


async def test_default_timeout_comes_from_settings(tmp_path: Path) -> None:
    ctx, _port = make_ctx(tmp_path, shellTimeoutMs=1000)
    result = await run(ctx, "sleep 30")
    assert result.raw_output["timedOut"] is True and "after 1 s" in result.content


def test_timeout_input_is_bounded() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        RunShellInput(command="ls", timeout=600_001)
    assert RunShellInput(command="ls", timeout=600_000).timeout == 600_000


async def test_nul_and_empty_commands_are_refused(tmp_path: Path) -> None:
    ctx, _port = make_ctx(tmp_path)
    assert "NUL" in (await run(ctx, "echo a\0b")).content
    assert "empty" in (await run(ctx, "   ")).content
