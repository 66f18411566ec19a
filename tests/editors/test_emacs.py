"""Emacs with plain eglot (no plugin) as a second, independent LSP client of the real server.

eglot 1.9 (Debian bookworm) has ``documentChanges`` but no change annotations, so the server
asks Apply/Reject through ``window/showMessageRequest`` before it sends plain text edits; eglot's
own handler asks with ``completing-read``, which the test script answers.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest

from tests.editors.helpers import (
    HERE,
    REPO,
    isolated_env,
    run_bounded,
    server_cmd,
    write_script,
)

APP_PY = 'def greet(name):\n    return "Hello " + name\n\n\nprint(greet("world"))\n'

SCRIPT = {
    "chunk_size": 6,
    "turns": [
        {
            "text": "Reading app.py.",
            "tool_calls": [{"name": "read_file", "input": {"file_path": "app.py"}}],
        },
        {
            "text": "Switching to an f-string.",
            "tool_calls": [
                {
                    "name": "edit_file",
                    "input": {
                        "file_path": "app.py",
                        "old_string": 'return "Hello " + name',
                        "new_string": 'return f"Hello, {name}!"',
                    },
                }
            ],
        },
        {
            "text": "Running it.",
            "tool_calls": [{"name": "run_shell", "input": {"command": "touch ran.txt"}}],
        },
        {"text": "Done: greet() uses an f-string; you did not let me run it."},
    ],
}


def test_eglot_ask_edit_round_trip(emacs: str, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "app.py").write_text(APP_PY, encoding="utf-8")
    out = tmp_path / "out.json"
    env = isolated_env(
        tmp_path,
        AGENT_LS_MODEL=write_script(tmp_path / "model.json", SCRIPT),
        AGENT_LS_TEST_FILE=str(ws / "app.py"),
        AGENT_LS_TEST_OUT=str(out),
        AGENT_LS_SERVER_CMD=json.dumps(server_cmd()),
    )
    done = run_bounded(
        [emacs, "--batch", "-l", str(HERE / "emacs" / "ask_edit.el")],
        env=env,
        cwd=ws,
        timeout=90,
    )
    context = (
        f"emacs exit {done.returncode} after {done.seconds:.1f} s\n--- stdout\n"
        f"{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-5000:]}"
    )
    if not out.exists():
        pytest.fail("the elisp script wrote no result\n" + context)
    data = json.loads(out.read_text())
    if data.get("error"):
        pytest.fail(f"{data['error']}\n{json.dumps(data)[:2000]}\n{context}")
    assert done.returncode == 0, context

    assert "agent.ask" in data["commands"]
    result = data["result"]
    assert result["stopReason"] == "end_turn", context
    # the edit went through eglot into the buffer (not saved: saving is the editor's)
    assert data["buffer"] == APP_PY.replace('"Hello " + name', 'f"Hello, {name}!"'), context
    assert data["modified"] is True
    assert (ws / "app.py").read_text() == APP_PY
    # and the server saw it land (didChange), so the model was told the truth
    outputs = data["outputs"]
    assert outputs[1]["rawOutput"]["status"] == "applied", outputs
    # two questions through eglot's showMessageRequest handler: the edit (Apply) and the
    # shell command (Deny)
    asked = data["asked"]
    assert len(asked) == 2, asked
    assert "Apply edit to app.py" in asked[0]["prompt"], asked[0]
    assert asked[0]["choices"] == ["Apply", "Reject"]
    assert "touch ran.txt" in asked[1]["prompt"]
    assert asked[1]["choices"][0] == "Allow" and asked[1]["choices"][-1] == "Deny"
    assert not (ws / "ran.txt").exists()
    # agent/update reached eglot: the streamed chunks make up the final text
    assert data["chunks"] == result["text"]
    assert result["text"].endswith("you did not let me run it.")


def readme_snippet() -> str:
    readme = (REPO / "editors" / "README.md").read_text(encoding="utf-8")
    found = re.search(r"<!-- emacs-snippet -->\s*```elisp\n(.*?)```", readme, re.S)
    assert found, "editors/README.md has no <!-- emacs-snippet --> block"
    return found.group(1)


SLOW_SCRIPT = {
    "chunk_size": 1,
    "delay_ms": 90,
    "turns": [
        {
            "text": "Reading app.py first, slowly.",
            "tool_calls": [{"name": "read_file", "input": {"file_path": "app.py"}}],
        },
        {
            "text": "Thinking it over " + "." * 90,
            "tool_calls": [
                {
                    "name": "edit_file",
                    "input": {
                        "file_path": "app.py",
                        "old_string": 'return "Hello " + name',
                        "new_string": 'return f"Hello, {name}!"',
                    },
                }
            ],
        },
        {"text": "Done."},
    ],
}


def test_the_readme_snippet_survives_a_long_run_and_asks_once_per_edit(
    emacs: str, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "app.py").write_text(APP_PY, encoding="utf-8")
    snippet = tmp_path / "snippet.el"
    snippet.write_text(readme_snippet(), encoding="utf-8")
    out = tmp_path / "out.json"
    bin_dir = Path(sys.executable).parent  # where `agent-ls` is installed, as a user has it
    assert (bin_dir / "agent-ls").exists()
    env = isolated_env(
        tmp_path,
        AGENT_LS_MODEL=write_script(tmp_path / "model.json", SLOW_SCRIPT),
        AGENT_LS_SNIPPET=str(snippet),
        AGENT_LS_TEST_FILE=str(ws / "app.py"),
        AGENT_LS_TEST_OUT=str(out),
    )
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    done = run_bounded(
        [emacs, "--batch", "-l", str(HERE / "emacs" / "readme_snippet.el")],
        env=env,
        cwd=ws,
        timeout=150,
    )
    context = f"emacs exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    if not out.exists():
        pytest.fail("the elisp script wrote no result\n" + context)
    data = json.loads(out.read_text())
    assert not data.get("error"), f"{data}\n{context}"
    assert data["ask_returned_after"] < 5, data  # M-x agent-ls-ask does not block Emacs
    assert data["answered_after"] > 10, data  # longer than eglot's 10 s request timeout
    assert data["result"]["stopReason"] == "end_turn", data
    assert data["buffer"] == APP_PY.replace('"Hello " + name', 'f"Hello, {name}!"'), data
    # one question for the one edit: agent-ls's Apply/Reject, not eglot's confirmation too
    asked = data["asked"]
    assert [a["via"] for a in asked] == ["completing-read"], asked
    assert asked[0]["choices"] == ["Apply", "Reject"], asked
