"""End to end (issue 12): the real server, the script model, a simulated editor answering.

Every dangerous line here is asked about and denied, so it never runs; the stand-ins that
would prove it ran are harmless (``touch`` of a marker, a fake credentials file in a fake
home).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from tests.editor_sim import editor

CANARY = "AKIA-CANARY-SECRET"
OFF = {"sandbox": "off"}  # the asking behaviour, whatever the machine offers


def shell_script(*commands: str) -> dict[str, Any]:
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "run_shell", "input": {"command": c}}]} for c in commands
    ]
    return {"turns": [*turns, {"text": "done"}]}


def fake_home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    (home / ".aws").mkdir(parents=True)
    (home / ".aws" / "credentials").write_text(f"[default]\naws_secret_access_key={CANARY}\n")
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_rsa").write_text(f"{CANARY}\n")
    return home


def results(ed: Any) -> str:
    """Everything the tool calls reported: raw outputs and shown content."""
    updates = ed.of_kind("tool_call_update")
    return str([(u.get("rawOutput"), u.get("content")) for u in updates])


async def test_secrets_in_every_spelling_are_asked_and_denied(
    workspace: Path, tmp_path: Path
) -> None:
    home = fake_home(tmp_path)
    lines = [
        "cat ~/.aws/credentials",
        "cat $HOME/.ssh/id_rsa",
        'cat "${HOME}/.aws/credentials"',
        "strings ~/.aws/{config,credentials}",
        'bash -lc "cat ~/.ssh/id_rsa"',
    ]
    script = shell_script(*lines)
    async with editor(workspace, script=script, env={"HOME": str(home)}, init_options=OFF) as ed:
        ed.answers = ["Deny"] * len(lines)
        result = await ed.ask("look around")
        assert result["stopReason"] == "end_turn"
        assert len(ed.confirmations) == len(lines)
        assert all("looks like a secret" in c for c in ed.confirmations)
        assert "the AWS credentials folder ~/.aws" in ed.confirmations[0]
        assert "the SSH keys folder ~/.ssh" in ed.confirmations[1]
        assert CANARY not in results(ed)


async def test_reads_outside_ask_unless_the_prompt_names_the_path(
    workspace: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("outside-content\n")
    script = shell_script(f"cat {outside}")
    async with editor(workspace, script=script, init_options=OFF) as ed:
        ed.answers = ["Deny"]
        await ed.ask("show me that file")
        (question,) = ed.confirmations
        assert "outside the workspace" in question
        assert "outside-content" not in results(ed)
    async with editor(workspace, script=script, init_options=OFF) as ed:
        await ed.ask(f"show me {outside} please")  # named in the prompt: no question
        assert ed.confirmations == []
        assert "outside-content" in results(ed)


async def test_a_nameref_to_path_is_asked_before_the_workspace_ls_runs(workspace: Path) -> None:
    (workspace / "bin").mkdir()
    fake_ls = workspace / "bin" / "ls"
    fake_ls.write_text("#!/bin/sh\ntouch hijacked\n")
    fake_ls.chmod(0o755)
    script = shell_script("declare -n p=PATH; p=./bin; ls")
    async with editor(workspace, script=script, init_options=OFF) as ed:
        ed.answers = ["Deny"]
        await ed.ask("list the files")
        (question,) = ed.confirmations
        assert "reference to PATH" in question
    assert not (workspace / "hijacked").exists()


def nested_repository_with_fsmonitor(workspace: Path) -> Path:
    """vendor/lib, its own repository, whose core.fsmonitor touches a marker; the marker."""
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    nested = workspace / "vendor" / "lib"
    nested.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(nested)], check=True)
    marker = workspace / "fsmonitor-ran"
    hook = nested / "monitor.sh"
    hook.write_text(f"#!/bin/sh\ntouch '{marker}'\n")
    hook.chmod(0o755)
    subprocess.run(["git", "-C", str(nested), "config", "core.fsmonitor", str(hook)], check=True)
    return marker


async def test_git_in_a_nested_repository_is_asked_before_its_fsmonitor_runs(
    workspace: Path,
) -> None:
    marker = nested_repository_with_fsmonitor(workspace)
    script = shell_script("cd vendor/lib && git status")
    async with editor(workspace, script=script, init_options=OFF) as ed:
        ed.answers = ["Deny"]
        await ed.ask("status of the vendored lib")
        (question,) = ed.confirmations
        assert "core.fsmonitor" in question and "vendor/lib" in question
    assert not marker.exists()


async def test_a_line_continuation_does_not_hide_find_delete(workspace: Path) -> None:
    (workspace / "keep.me").write_text("x\n")
    script = shell_script("find . -name keep.me -de\\\nlete")
    async with editor(workspace, script=script, init_options=OFF) as ed:
        ed.answers = ["Deny"]
        await ed.ask("clean up")
        (question,) = ed.confirmations
        assert "-delete deletes files" in question
    assert (workspace / "keep.me").exists()


async def test_a_shell_wrapper_runs_its_read_only_script_without_a_question(
    workspace: Path,
) -> None:
    script = shell_script('bash -lc "ls && pwd"')
    async with editor(workspace, script=script, init_options=OFF) as ed:
        await ed.ask("where am I")
        assert ed.confirmations == []
        done = [u for u in ed.of_kind("tool_call_update") if u.get("status") == "completed"]
        assert "app.py" in done[0]["content"][0]["content"]["text"]


async def test_a_local_rsync_is_asked_with_true_reasons(workspace: Path) -> None:
    script = shell_script("rsync --delete a/ b/")
    async with editor(workspace, script=script, init_options=OFF) as ed:
        ed.answers = ["Deny"]
        await ed.ask("sync")
        (question,) = ed.confirmations
        assert "rsync deletes files" in question and "network" not in question


async def test_other_agents_configuration_asks_even_when_edits_are_accepted(
    workspace: Path,
) -> None:
    writes = [
        {"name": "write_file", "input": {"file_path": p, "content": "{}"}}
        for p in (".claude/settings.json", ".mcp.json", ".vscode/tasks.json", "ok.txt")
    ]
    script = {"turns": [{"tool_calls": [w]} for w in writes] + [{"text": "done"}]}
    options = {**OFF, "mode": "acceptEdits"}
    async with editor(workspace, script=script, init_options=options) as ed:
        ed.answers = ["Deny", "Deny", "Deny"]
        await ed.ask("configure things")
        assert len(ed.confirmations) == 3
        assert all("another agent's or editor's configuration" in c for c in ed.confirmations)
    assert not (workspace / ".claude").exists() and not (workspace / ".mcp.json").exists()
    assert (workspace / "ok.txt").read_text() == "{}"
