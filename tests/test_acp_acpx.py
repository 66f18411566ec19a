"""``agent-ls acp`` driven by acpx (npm), a headless ACP client no one here wrote.

acpx is installed by ``.ci/run`` (``npm install --prefix .ci/node acpx@<pinned>``); set
``AGENT_LS_ACPX`` to use another copy. Outside CI the tests skip when it is missing; in CI a
missing acpx fails them. ``--format json`` prints every JSON-RPC message acpx exchanged.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.acp_harness import agent_env, write_script
from tests.fakeapi import FakeAPI, Turn

pytestmark = pytest.mark.timeout(120)

REPO = Path(__file__).resolve().parent.parent
AGENT = f"{sys.executable} -m agent_ls acp"


def acpx_path() -> str | None:
    candidates = [
        os.environ.get("AGENT_LS_ACPX"),
        str(REPO / ".ci" / "node" / "node_modules" / ".bin" / "acpx"),
        shutil.which("acpx"),
    ]
    for candidate in candidates:
        if candidate and Path(candidate).exists():
            return candidate
    return None


@pytest.fixture
def acpx() -> str:
    found = acpx_path()
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("acpx is not installed (.ci/run installs it into .ci/node)")
        pytest.skip("acpx is not installed (npm install --prefix .ci/node acpx@0.19.1)")
    return found


def messages(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def run_acpx(
    acpx: str, cwd: Path, env: dict[str, str], *args: str, timeout: float = 60
) -> tuple[int, list[dict[str, Any]], str]:
    done = subprocess.run(
        [acpx, "--agent", AGENT, "--format", "json", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return done.returncode, messages(done.stdout), done.stderr


def acpx_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {
        **agent_env(tmp_path / "data", **extra),
        "HOME": str(home),  # acpx keeps its session records under ~/.acpx
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    }


def updates(msgs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [
        m["params"]["update"]
        for m in msgs
        if m.get("method") == "session/update" and m["params"]["update"]["sessionUpdate"] == kind
    ]


def results_with(msgs: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    """Results holding ``key`` (both sides number their requests from 0, so an id alone does
    not tell a ``session/prompt`` answer from a ``session/request_permission`` one)."""
    return [m["result"] for m in msgs if isinstance(m.get("result"), dict) and key in m["result"]]


READ_EDIT = {
    "turns": [
        {
            "text": "Reading.",
            "tool_calls": [{"name": "read_file", "input": {"file_path": "app.py"}}],
        },
        {
            "text": "Editing.",
            "tool_calls": [
                {
                    "name": "edit_file",
                    "input": {"file_path": "app.py", "old_string": "Hello ", "new_string": "Hi "},
                }
            ],
        },
        {"text": "Done."},
    ]
}


def test_exec_with_approve_all_edits_through_acpx(
    acpx: str, tmp_path: Path, workspace: Path
) -> None:
    env = acpx_env(tmp_path, AGENT_LS_MODEL=write_script(tmp_path, READ_EDIT))
    code, msgs, err = run_acpx(acpx, workspace, env, "--approve-all", "exec", "Say Hi")
    assert code == 0, err
    methods = [m.get("method") for m in msgs if "method" in m]
    assert methods[:2] == ["initialize", "session/new"]
    assert "session/request_permission" in methods
    assert "fs/write_text_file" in methods  # acpx offers fs: the edit went through it
    (prompt_answer,) = results_with(msgs, "stopReason")
    assert prompt_answer["stopReason"] == "end_turn"
    text = "".join(u["content"]["text"] for u in updates(msgs, "agent_message_chunk"))
    assert text == "Reading.\n\nEditing.\n\nDone."
    assert [c["kind"] for c in updates(msgs, "tool_call")] == ["read", "edit"]
    assert 'return "Hi " + name' in (workspace / "app.py").read_text()


def test_exec_with_deny_all_changes_nothing(acpx: str, tmp_path: Path, workspace: Path) -> None:
    before = (workspace / "app.py").read_text()
    env = acpx_env(tmp_path, AGENT_LS_MODEL=write_script(tmp_path, READ_EDIT))
    code, msgs, err = run_acpx(acpx, workspace, env, "--deny-all", "exec", "Say Hi")
    assert code == 5, err  # acpx's exit code when it denied a permission
    (prompt_answer,) = results_with(msgs, "stopReason")
    assert prompt_answer["stopReason"] == "end_turn"
    (asked,) = results_with(msgs, "outcome")
    outcome = asked["outcome"]
    assert outcome.get("optionId") != "allow_once"
    assert "fs/write_text_file" not in [m.get("method") for m in msgs]
    assert (workspace / "app.py").read_text() == before


@pytest.fixture
def api() -> Iterator[Any]:
    with FakeAPI() as fake:
        yield fake


def test_the_real_sdk_against_the_fake_api(
    acpx: str, tmp_path: Path, workspace: Path, api: Any
) -> None:
    api.enqueue(
        Turn(text="Reading.", tool_uses=[("read_file", {"file_path": "app.py"})]),
        Turn(
            text="Editing.",
            tool_uses=[
                ("edit_file", {"file_path": "app.py", "old_string": "Hello ", "new_string": "Hi "})
            ],
        ),
        Turn(text="Done."),
    )
    env = acpx_env(
        tmp_path,
        AGENT_LS_MODEL="anthropic:claude-sonnet-5-5",
        ANTHROPIC_BASE_URL=api.url,
        ANTHROPIC_API_KEY="test-key",
    )
    code, msgs, err = run_acpx(acpx, workspace, env, "--approve-all", "exec", "Say Hi")
    assert code == 0, err
    (prompt_answer,) = results_with(msgs, "stopReason")
    assert prompt_answer["stopReason"] == "end_turn"
    assert len(updates(msgs, "usage_update")) == 3
    assert 'return "Hi " + name' in (workspace / "app.py").read_text()
    bodies = [r.body for r in api.requests]
    assert len(bodies) == 3
    last = bodies[2]["messages"][-1]["content"][-1]
    content = last["content"] if isinstance(last["content"], str) else last["content"][0]["text"]
    assert content.startswith("Edited app.py")


def test_sessions_prompt_cancel_and_resume(acpx: str, tmp_path: Path, workspace: Path) -> None:
    script = {
        "chunk_size": 2,
        "delay_ms": 100,
        "turns": [
            {"text": "A slow answer, cancelled by the user. " * 2},
        ],
    }
    env = acpx_env(tmp_path, AGENT_LS_MODEL=write_script(tmp_path, script))
    code, _msgs, err = run_acpx(acpx, workspace, env, "--ttl", "2", "sessions", "new")
    assert code == 0, err
    slow = subprocess.Popen(
        [acpx, "--agent", AGENT, "--format", "json", "--ttl", "2", "prompt", "go slowly"],
        cwd=workspace,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert slow.stdout is not None
        seen: list[str] = []
        for line in slow.stdout:  # wait until the answer streams: then cancel it
            seen.append(line)
            if "agent_message_chunk" in line:
                break
        done = subprocess.run(
            [acpx, "--agent", AGENT, "cancel"],
            cwd=workspace,
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        rest, err = slow.communicate(timeout=30)
        out = "".join(seen) + rest
    finally:
        if slow.poll() is None:
            slow.kill()
    msgs = messages(out)
    assert "session/cancel" in [m.get("method") for m in msgs], err
    (prompt_answer,) = results_with(msgs, "stopReason")
    assert prompt_answer["stopReason"] == "cancelled"
    session_id = prompt_answer_session(msgs)
    # Once acpx's own process has gone (ttl), the next prompt reopens the saved session.
    time.sleep(3)
    code, msgs, err = run_acpx(acpx, workspace, env, "--ttl", "1", "prompt", "are you there")
    assert code == 0, err
    reopen = [m for m in msgs if m.get("method") in ("session/load", "session/resume")]
    assert reopen and reopen[0]["params"]["sessionId"] == session_id
    (prompt_answer,) = results_with(msgs, "stopReason")
    assert prompt_answer["stopReason"] == "end_turn"
    # The cancelled answer left no turn in the history, so the model gives it again, whole.
    text = "".join(u["content"]["text"] for u in updates(msgs, "agent_message_chunk"))
    assert text == "A slow answer, cancelled by the user. " * 2


def prompt_answer_session(msgs: list[dict[str, Any]]) -> str:
    return str(next(m["params"]["sessionId"] for m in msgs if m.get("method") == "session/prompt"))
