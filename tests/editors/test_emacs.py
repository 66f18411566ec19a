"""Emacs with plain eglot (no plugin) as a second, independent LSP client of the real server.

eglot 1.9 (Debian bookworm) has ``documentChanges`` but no change annotations, so the server
asks Apply/Reject through ``window/showMessageRequest`` before it sends plain text edits; eglot's
own handler asks with ``completing-read``, which the test script answers.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.editors.helpers import HERE, isolated_env, run_bounded, server_cmd, write_script

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
