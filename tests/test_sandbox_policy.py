"""The sandbox's decisions that need no working bwrap: which bwrap, which asks it contains,
what a failure note says, and what happens when the sandbox cannot be had.

The sandbox itself (a real bwrap running harmless commands) is tested in test_sandbox.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent_ls.ports.editor import Decision
from agent_ls.safety.permissions import Permissions
from agent_ls.safety.sandbox import (
    build_argv,
    find_bwrap,
    prepare,
    refusal_note,
    resolve_status,
)
from agent_ls.safety.shell_policy import authorize, is_contained_reason
from agent_ls.settings import Settings
from agent_ls.tools.base import ToolContext
from agent_ls.tools.shell import RunShell, RunShellInput
from agent_ls.workspace import ReadState, Workspace
from tests.fakes import FakePort


def make_ctx(
    root: Path, decisions: list[Decision] | None = None, **settings: object
) -> ToolContext:
    port = FakePort(decisions=list(decisions or []))
    return ToolContext(
        workspace=Workspace([root]),
        port=port,
        read_state=ReadState(),
        permissions=Permissions(mode="default"),
        settings=Settings(**settings),  # type: ignore[arg-type]
        session_id="s1",
        tool_call_id="c1",
    )


def fake_program(folder: Path, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    program = folder / "bwrap"
    program.write_text(f"#!/bin/sh\n{body}\n", encoding="utf-8")
    program.chmod(0o755)
    return program


# -- which bwrap ------------------------------------------------------------------------------


def test_a_bwrap_planted_in_the_workspace_is_never_picked(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    planted = fake_program(ws / "bin", "exit 0")
    outside = fake_program(tmp_path / "tools", "exit 0")
    assert find_bwrap([ws], f"{planted.parent}") is None
    assert find_bwrap([ws], f"{planted.parent}:{outside.parent}") == str(outside)
    # relative PATH entries are the working directory, which is the workspace
    assert find_bwrap([ws], f".:bin:{outside.parent}") == str(outside)


def test_a_link_into_the_workspace_is_not_picked_either(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    planted = fake_program(ws / "bin", "exit 0")
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "bwrap").symlink_to(planted)
    assert find_bwrap([ws], str(tmp_path / "tools")) is None


def test_a_failing_probe_in_auto_runs_unsandboxed_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools = tmp_path / "broken-tools"
    fake_program(tools, 'echo "bwrap: No permissions to create new namespace" >&2; exit 1')
    monkeypatch.setenv("PATH", f"{tools}:{os.environ['PATH']}")
    ws = tmp_path / "ws"
    ws.mkdir()
    status = resolve_status("auto", [ws])
    assert not status.active and status.backend is None
    assert status.reason and "No permissions to create new namespace" in status.reason
    assert status.to_contract() == {
        "mode": "auto",
        "active": False,
        "backend": None,
        "reason": status.reason,
    }


async def test_auto_without_a_sandbox_runs_the_command_unsandboxed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools = tmp_path / "broken-tools2"
    fake_program(tools, "exit 1")
    monkeypatch.setenv("PATH", f"{tools}:{os.environ['PATH']}")
    ws = tmp_path / "ws"
    ws.mkdir()
    ctx = make_ctx(ws, [Decision.ALLOW])
    result = await RunShell().run(RunShellInput(command="touch made.txt"), ctx)
    assert not result.is_error and result.raw_output["sandboxed"] is False
    assert len(ctx.port.asked) == 1  # unsandboxed, the write asks again  # type: ignore[attr-defined]
    assert (ws / "made.txt").exists()


async def test_on_without_a_sandbox_refuses_every_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    ws = tmp_path / "ws"
    ws.mkdir()
    ctx = make_ctx(ws, [Decision.ALLOW], sandbox="on")
    result = await RunShell().run(RunShellInput(command="touch made.txt"), ctx)
    assert result.is_error and "not run" in result.content and "bwrap" in result.content
    assert not (ws / "made.txt").exists() and ctx.port.asked == []  # type: ignore[attr-defined]


def test_off_is_off() -> None:
    status = resolve_status("off", [Path.cwd()])
    assert not status.active and status.to_contract()["mode"] == "off"


# -- the command line -------------------------------------------------------------------------


def test_argv_confines_the_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".netrc").write_text("machine x password y\n")
    ws = tmp_path / "ws"
    (ws / ".git" / "hooks").mkdir(parents=True)
    run = prepare("/usr/bin/bwrap", [ws], network=False, home=home, env={})
    try:
        argv = run.wrap(["bash", "-c", "true"])
        text = " ".join(argv)
        for flag in ("--die-with-parent", "--new-session", "--unshare-pid", "--unshare-net"):
            assert flag in argv
        assert "--ro-bind / /" in text and "--dev /dev" in text and "--proc /proc" in text
        assert f"--bind {ws} {ws}" in text and f"--bind {run.tmpdir} {run.tmpdir}" in text
        assert f"--ro-bind {ws}/.git/hooks {ws}/.git/hooks" in text
        assert f"--ro-bind {ws}/.mcp.json {ws}/.mcp.json" in text  # missing: a placeholder
        assert f"--tmpfs {home}/.ssh --remount-ro {home}/.ssh" in text
        assert f"--ro-bind {run.empty} {home}/.netrc" in text
        assert "--cap-drop ALL" in text  # as root, bwrap would keep every capability
        assert argv[-4:] == ["--", "bash", "-c", "true"]
        # The writable binds come before the read-only ones laid over them.
        assert text.index(f"--bind {ws} ") < text.index(f"{ws}/.git/hooks")
        assert (ws / ".mcp.json").is_dir() and (ws / ".vscode").is_dir()  # git lists neither
    finally:
        run.close()
    assert not (ws / ".mcp.json").exists() and not (ws / ".vscode").exists()
    assert not run.tmpdir.exists() and run.empty and not run.empty.exists()
    with_net = build_argv("/usr/bin/bwrap", [], ws, True, ["true"])
    assert "--unshare-net" not in with_net and "--unshare-pid" in with_net


def test_a_placeholder_someone_wrote_meanwhile_is_kept(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    run = prepare("/usr/bin/bwrap", [ws], network=False, home=tmp_path / "nohome", env={})
    (ws / ".vscode" / "settings.json").write_text("{}")  # the user's editor, outside
    run.close()
    assert (ws / ".vscode" / "settings.json").read_text() == "{}"


# -- the classifier with the sandbox ----------------------------------------------------------

RUN_WITHOUT_ASKING = [
    "touch made.txt",
    "mkdir -p build/out && cp app.py build/out/",
    "python -m unittest",
    "python3 -m pytest -q tests",
    "make",
    "npm test",
    "npm run build",
    "cargo test",
    "ruff check . && mypy",
    "echo done > log.txt",
    "sed -i s/a/b/ app.py",
    "bash scripts/check.sh",
    "./gradlew build",
    "bash -c 'touch x'",  # a transparent wrapper: judged by its script, contained
]
STILL_ASK = [
    "rm -rf src",
    "mv app.py old.py",
    "curl http://127.0.0.1:1/",
    "wget https://example.com",
    "sudo ls",
    "git push",
    "git reset --hard",
    "git commit -m x",
    "cat .env",
    "touch ../outside.txt",
    "echo x > /etc/motd",
    "touch .git/hooks/pre-commit",
    "pip install requests",
    "python3 -m pip install requests",
    "python -c 'print(1)'",
    'bash -c "$SCRIPT"',  # opaque: the script is only known when it runs
    "PATH=/tmp/evil make",
    "kill 1",
    "frobnicate --now",
]


@pytest.mark.parametrize("command", RUN_WITHOUT_ASKING)
async def test_contained_commands_run_without_a_question(command: str, workspace: Path) -> None:
    ctx = make_ctx(workspace)
    decision = await authorize(command, ctx, sandboxed=True)
    assert decision.refusal is None and ctx.port.asked == []  # type: ignore[attr-defined]
    # ... and each of them asked before: the sandbox is what makes the difference.
    assert (await authorize(command, ctx, sandboxed=False)).refusal is not None


@pytest.mark.parametrize("command", STILL_ASK)
async def test_uncontained_commands_still_ask(command: str, workspace: Path) -> None:
    ctx = make_ctx(workspace)
    decision = await authorize(command, ctx, sandboxed=True)
    assert decision.refusal is not None and len(ctx.port.asked) == 1  # type: ignore[attr-defined]


async def test_a_network_command_asks_and_then_runs_with_network(workspace: Path) -> None:
    ctx = make_ctx(workspace, [Decision.ALLOW, Decision.DENY])
    allowed = await authorize("curl -s http://127.0.0.1:1/", ctx, sandboxed=True)
    assert allowed.refusal is None and allowed.network
    asked = ctx.port.asked[0].message  # type: ignore[attr-defined]
    assert "reaches the network" in asked and "with network access" in asked
    denied = await authorize("git fetch", ctx, sandboxed=True)
    assert denied.refusal is not None and not denied.network
    quiet = await authorize("touch x && python -m unittest", ctx, sandboxed=True)
    assert quiet.refusal is None and not quiet.network


def test_containment_is_decided_per_reason() -> None:
    assert is_contained_reason("touch creates or updates files")
    assert is_contained_reason("make runs project code (builds and tests execute arbitrary code)")
    assert is_contained_reason("redirects output to out.txt")
    assert not is_contained_reason("rm deletes files")
    assert not is_contained_reason("writes ../x (/tmp/x), outside the workspace")
    assert not is_contained_reason("curl reaches the network")
    assert not is_contained_reason("runs the program /opt/tool/bin/x")
    assert not is_contained_reason("python -c runs inline code: cannot be analysed statically")


# -- truthful failures ------------------------------------------------------------------------


def test_failure_notes_name_the_sandbox() -> None:
    read_only = refusal_note("touch: cannot touch '/etc/x': Read-only file system", False)
    assert read_only and "read-only" in read_only and "[sandbox]" in read_only
    offline = refusal_note("curl: (6) Could not resolve host: pypi.org", False)
    assert offline and "without network" in offline
    assert refusal_note("curl: (6) Could not resolve host: pypi.org", True) is None
    secret = refusal_note("cat: /home/u/.ssh/id_rsa: No such file or directory", False)
    assert secret and "credential" in secret
    assert refusal_note("AssertionError: 1 != 2", False) is None


def test_exiting_takes_the_placeholders_out_at_once(tmp_path: Path) -> None:
    from agent_ls.tools.shell import kill_live_groups

    ws = tmp_path / "ws"
    ws.mkdir()
    run = prepare("/usr/bin/bwrap", [ws], network=False, home=tmp_path / "nohome", env={})
    assert (ws / ".vscode").is_dir()
    kill_live_groups()  # what the server does right before os._exit
    assert sorted(p.name for p in ws.iterdir()) == []
    (ws / ".vscode").mkdir()  # the user's own, made afterwards
    run.close()  # a late clean-up leaves it alone
    assert (ws / ".vscode").is_dir()
