"""Screenshots of the terminal front ends for the README: Neovim (the plugin's chat, inline
review and review split, a partial accept, a sub-agent's task), Emacs (plain eglot) and
``agent-ls run`` typed into bash, each in its real TUI inside tmux, captured with colours and
rendered by headless Chromium into ``test-artifacts/``.

They need Chromium and tmux, so they run with the VS Code tier (``AGENT_LS_VSCODE_TIER=1``).
``AGENT_LS_UPDATE_DOCS_IMAGES=1`` also copies them into ``docs/images/``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.editors.helpers import (
    ARTIFACTS,
    EDITORS,
    HERE,
    REPO,
    isolated_env,
    server_cmd,
    write_script,
)
from tests.editors.terminal_shot import Tmux, render_png

pytestmark = [pytest.mark.vscode, pytest.mark.timeout(120)]

COLS, ROWS = 150, 40


def _tools() -> str:
    if os.environ.get("AGENT_LS_VSCODE_TIER") != "1":
        pytest.skip("screenshots run with the VS Code tier (AGENT_LS_VSCODE_TIER=1)")
    chromium = os.environ.get("AGENT_LS_CHROMIUM", "/usr/bin/chromium")
    if not Path(chromium).exists() or not shutil.which("tmux"):
        pytest.skip("screenshots need chromium and tmux: run `bash editors/ci-setup.sh --vscode`")
    return chromium


def _wait_file(path: Path, timeout: float, what: str, tmux: Tmux) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}; screen:\n{tmux.capture()}")
        time.sleep(0.1)


def _shoot(tmux: Tmux, shots: Path, name: str, title: str, chromium: str) -> Path:
    _wait_file(shots / f"{name}.ready", 60, name, tmux)
    time.sleep(0.5)  # let the terminal settle
    ansi = tmux.capture()
    (shots / f"{name}.go").touch()
    out = ARTIFACTS / f"{title}.png"
    render_png(ansi, title, out, chromium, COLS, ROWS)
    assert out.exists() and out.stat().st_size > 5_000
    return out


def _publish(shot: Path, name: str) -> None:
    if os.environ.get("AGENT_LS_UPDATE_DOCS_IMAGES") == "1":
        images = REPO / "docs" / "images"
        images.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, images / name)


NVIM_SCRIPT = {
    "chunk_size": 6,
    "turns": [
        {
            "text": "Let me read names.py first.",
            "tool_calls": [{"name": "read_file", "input": {"file_path": "names.py"}}],
        },
        {
            "text": "`foo` is a poor name: renaming it to `bar` everywhere.",
            "tool_calls": [
                {
                    "name": "edit_file",
                    "input": {
                        "file_path": "names.py",
                        "old_string": "foo",
                        "new_string": "bar",
                        "replace_all": True,
                    },
                }
            ],
        },
        {
            "text": "Done: the definition is now `bar()`; the call site kept `foo()` as you chose.",
            "usage": {"input_tokens": 1830, "output_tokens": 74},
        },
    ],
}


def _nvim_in_tmux(
    nvim: str,
    tmp_path: Path,
    files: dict[str, str],
    script: dict[str, Any],
    lua: str,
    gates: list[tuple[str, str]],
) -> tuple[dict[str, Any], list[Path]]:
    """Run ``tests/editors/nvim/<lua>`` in Neovim's TUI inside tmux on a workspace of
    ``files`` with the script model; capture one screenshot per ``(gate, name)`` as the
    script reaches it. Returns the harness's data and the shots."""
    chromium = _tools()
    ARTIFACTS.mkdir(exist_ok=True)
    ws, shots_dir = tmp_path / "ws", tmp_path / "shots"
    ws.mkdir()
    shots_dir.mkdir()
    for name, text in files.items():
        (ws / name).write_text(text, encoding="utf-8")
    out = tmp_path / "out.json"
    env = isolated_env(
        tmp_path,
        AGENT_LS_MODEL=write_script(tmp_path / "model.json", script),
        AGENT_LS_PLUGIN_DIR=str(EDITORS / "nvim"),
        AGENT_LS_HARNESS=str(HERE / "nvim" / "harness.lua"),
        AGENT_LS_TEST_WS=str(ws),
        AGENT_LS_TEST_OUT=str(out),
        AGENT_LS_SHOT_DIR=str(shots_dir),
        AGENT_LS_SERVER_CMD=json.dumps(server_cmd()),
    )
    tmux = Tmux(tmp_path / "tmux.sock", COLS, ROWS)
    try:
        tmux.start([nvim, "--clean", "-u", str(HERE / "nvim" / lua)], env, ws)
        shots = [_shoot(tmux, shots_dir, gate, name, chromium) for gate, name in gates]
        _wait_file(out, 20, "the result", tmux)
    finally:
        tmux.kill()
    data = json.loads(out.read_text())
    assert not data.get("error"), data.get("error")
    assert data["result"]["stopReason"] == "end_turn"
    return data, shots


def test_nvim_screenshot(nvim: str, tmp_path: Path) -> None:
    from tests.editors.test_nvim import NAMES_PY

    _, (shot, done_shot) = _nvim_in_tmux(
        nvim,
        tmp_path,
        {"names.py": NAMES_PY},
        NVIM_SCRIPT,
        "screenshot.lua",
        [("review", "nvim"), ("done", "nvim-partial")],
    )
    _publish(shot, "nvim.png")
    _publish(done_shot, "nvim-partial.png")


EMACS_SCRIPT = {
    "chunk_size": 6,
    "turns": [
        {
            "text": "Reading app.py. ",
            "tool_calls": [{"name": "read_file", "input": {"file_path": "app.py"}}],
        },
        {
            "text": "Switching to an f-string. ",
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
            "text": "Running it. ",
            "tool_calls": [{"name": "run_shell", "input": {"command": "touch ran.txt"}}],
        },
        {"text": "Done: greet() uses an f-string; you did not let me run it."},
    ],
}


def test_emacs_screenshot(emacs: str, tmp_path: Path) -> None:
    chromium = _tools()
    ARTIFACTS.mkdir(exist_ok=True)
    ws, shots = tmp_path / "ws", tmp_path / "shots"
    ws.mkdir()
    shots.mkdir()
    from tests.editors.test_emacs import APP_PY

    (ws / "app.py").write_text(APP_PY, encoding="utf-8")
    out = tmp_path / "out.json"
    env = isolated_env(
        tmp_path,
        AGENT_LS_MODEL=write_script(tmp_path / "model.json", EMACS_SCRIPT),
        AGENT_LS_TEST_FILE=str(ws / "app.py"),
        AGENT_LS_TEST_OUT=str(out),
        AGENT_LS_SHOT_DIR=str(shots),
        AGENT_LS_SERVER_CMD=json.dumps(server_cmd()),
    )
    tmux = Tmux(tmp_path / "tmux.sock", COLS, ROWS)
    try:
        tmux.start(
            [emacs, "-nw", "--no-init-file", "-l", str(HERE / "emacs" / "ask_edit.el")], env, ws
        )
        shot = _shoot(tmux, shots, "emacs", "emacs", chromium)
        _wait_file(out, 20, "the result", tmux)
    finally:
        tmux.kill()
    data = json.loads(out.read_text())
    assert not data.get("error"), data.get("error")
    assert data["result"]["stopReason"] == "end_turn"
    _publish(shot, "emacs.png")


CALC_PY = '''"""Arithmetic for the invoices."""


def add(a, b):
    return a - b


def mul(a, b):
    return a + b
'''

CLI_SCRIPT = {
    "chunk_size": 8,
    "turns": [
        {
            "text": "Reading calc.py.",
            "tool_calls": [{"name": "read_file", "input": {"file_path": "calc.py"}}],
        },
        {
            "text": "The docstring first.",
            "tool_calls": [
                {
                    "name": "edit_file",
                    "input": {
                        "file_path": "calc.py",
                        "old_string": "for the invoices",
                        "new_string": "helpers: add and mul",
                    },
                }
            ],
        },
        {
            "text": "add() subtracts and mul() adds: fixing both.",
            "tool_calls": [
                {
                    "name": "edit_file",
                    "input": {
                        "file_path": "calc.py",
                        "old_string": "    return a - b\n\n\ndef mul(a, b):\n    return a + b",
                        "new_string": "    return a + b\n\n\ndef mul(a, b):\n    return a * b",
                    },
                }
            ],
        },
        {
            "text": "And a test for add().",
            "tool_calls": [
                {
                    "name": "write_file",
                    "input": {
                        "file_path": "test_calc.py",
                        "content": "from calc import add\n\nassert add(2, 3) == 5\n",
                    },
                }
            ],
        },
        {
            "text": "add() is fixed, the docstring updated; mul() and the test are as you chose.",
            "usage": {"input_tokens": 2140, "output_tokens": 96},
        },
    ],
}


PROMPT = "$ "


def _wait_screen(tmux: Tmux, what: str, count: int = 1, timeout: float = 30) -> str:
    """The screen once it shows ``what`` ``count`` times (the shell's prompt counts once per
    line that starts with it; tmux drops the trailing space)."""
    deadline = time.monotonic() + timeout
    while True:
        screen = tmux.capture()
        plain = re.sub(r"\x1b\[[0-9;:]*m", "", screen)
        if what == PROMPT:
            seen = sum(1 for line in plain.splitlines() if line.startswith(PROMPT.strip()))
        else:
            seen = plain.count(what)
        if seen >= count:
            return screen
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what!r} x{count}; screen:\n{screen}")
        time.sleep(0.1)


def test_cli_screenshot(tmp_path: Path) -> None:
    """``agent-ls run`` in a real terminal: one edit accepted, one partly, one rejected, and
    each outcome line says which."""

    chromium = _tools()
    if not shutil.which("bash"):
        pytest.skip("the CLI screenshot types into bash")
    ARTIFACTS.mkdir(exist_ok=True)
    ws = tmp_path / "shop"
    ws.mkdir()
    (ws / "calc.py").write_text(CALC_PY, encoding="utf-8")
    env = isolated_env(
        tmp_path,
        AGENT_LS_MODEL=write_script(tmp_path / "model.json", CLI_SCRIPT),
        PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
    )
    cols, rows = 100, 68  # the whole run, from the command line to the next prompt
    tmux = Tmux(tmp_path / "tmux.sock", cols, rows)
    try:
        tmux.start(["env", f"PS1={PROMPT}", "bash", "--norc", "--noprofile"], env, ws)
        _wait_screen(tmux, PROMPT)
        tmux.send_keys('agent-ls run "Fix the arithmetic in calc.py"', "Enter")
        for n, answer in enumerate(["y", "y", "n", "n"], 1):
            _wait_screen(tmux, "Apply this hunk? [y/N]", n)
            time.sleep(0.2)
            tmux.send_keys(answer, "Enter")
        _wait_screen(tmux, "tokens", 1)
        _wait_screen(tmux, PROMPT, 2)
        time.sleep(0.3)
        screen = tmux.capture()
    finally:
        tmux.kill()
    plain = re.sub(r"\x1b\[[0-9;:]*m", "", screen)
    assert "✓ Edit calc.py: applied" in plain, plain
    assert "◐ Edit calc.py: partly applied (hunk 1 of 2)" in plain, plain
    assert "✗ Write test_calc.py: rejected" in plain, plain
    assert "Traceback" not in plain and str(tmp_path) not in plain, plain
    assert (ws / "calc.py").read_text(encoding="utf-8") == CALC_PY.replace(
        "for the invoices", "helpers: add and mul"
    ).replace("return a - b", "return a + b")
    assert not (ws / "test_calc.py").exists()
    out = ARTIFACTS / "cli.png"
    render_png(screen, "cli", out, chromium, cols, rows)
    assert out.exists() and out.stat().st_size > 5_000
    _publish(out, "cli.png")


TASK_SCRIPT = {
    "chunk_size": 6,
    "turns": [
        {
            "text": "A sub-agent can look around while I wait.",
            "tool_calls": [
                {
                    "name": "task",
                    "input": {
                        "description": "Find the greeting",
                        "prompt": "Where is the greeting made, and who calls it?",
                        "agent": "explore",
                    },
                }
            ],
        },
        {  # the sub-agent: its own calls, shown under its task
            "tool_calls": [
                {"name": "grep_search", "input": {"pattern": "greet"}},
                {"name": "read_file", "input": {"file_path": "app.py"}},
            ]
        },
        {"text": "greet() builds it in app.py (line 2); main() calls it (line 6)."},
        {
            "text": "The greeting is made by `greet()` in app.py and called from `main()`.",
            "usage": {"input_tokens": 2410, "output_tokens": 58},
        },
    ],
}

APP_PY_TASK = """def greet(name):
    return "Hello " + name


def main():
    print(greet("world"))
"""


def test_nvim_task_screenshot(nvim: str, tmp_path: Path) -> None:
    """Neovim's chat with a sub-agent's task and the calls it made indented under it."""
    data, (shot,) = _nvim_in_tmux(
        nvim,
        tmp_path,
        {"app.py": APP_PY_TASK},
        TASK_SCRIPT,
        "screenshot_task.lua",
        [("task", "nvim-task")],
    )
    lines = data["chat"].splitlines()
    task = next(i for i, line in enumerate(lines) if "Find the greeting" in line)
    child = [line for line in lines[task + 1 :] if "Read app.py" in line]
    assert child and child[0].startswith("    "), data["chat"]
    _publish(shot, "nvim-task.png")
