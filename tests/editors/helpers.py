"""Helpers of the editor tiers: temp-dir isolation, bounded subprocesses, process cleanup."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
EDITORS = REPO / "editors"
HERE = Path(__file__).resolve().parent
ARTIFACTS = REPO / "test-artifacts"


def server_cmd() -> list[str]:
    """The agent-ls server as the editors start it: this interpreter's installed package."""
    return [sys.executable, "-m", "agent_ls", "serve"]


def write_script(path: Path, script: dict[str, Any]) -> str:
    path.write_text(json.dumps(script), encoding="utf-8")
    return f"script:{path}"


def isolated_env(tmp: Path, **extra: str) -> dict[str, str]:
    """An environment whose editor state (config, data, logs, sessions) lives under ``tmp``."""
    env = dict(os.environ)
    for key in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        d = tmp / "xdg" / key.lower()
        d.mkdir(parents=True, exist_ok=True)
        env[key] = str(d)
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    env["HOME"] = str(home)
    env.setdefault("AGENT_LS_DATA_DIR", str(tmp / "agent-ls-data"))
    env["AGENT_LS_LOG_FILE"] = str(tmp / "agent-ls.log")
    env["AGENT_LS_LOG_LEVEL"] = "DEBUG"
    # never reach a real model from the editor tests
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_BASE_URL"):
        env.pop(key, None)
    env.update(extra)
    return env


@dataclass
class Completed:
    returncode: int
    stdout: str
    stderr: str
    seconds: float


def run_bounded(
    cmd: list[str], *, env: dict[str, str], cwd: Path, timeout: float, stdin: Any = None
) -> Completed:
    """Run ``cmd`` in its own process group; on timeout (or after it), kill the whole group."""
    start = time.monotonic()
    proc = subprocess.Popen(
        cmd,
        env=env,
        cwd=cwd,
        stdin=stdin if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc.pid)
        out, err = proc.communicate()
        raise AssertionError(
            f"{cmd[0]} did not finish in {timeout:.0f} s\n--- stdout\n{out[-4000:]}\n"
            f"--- stderr\n{err[-4000:]}"
        ) from None
    finally:
        kill_group(proc.pid)
    return Completed(proc.returncode, out, err, time.monotonic() - start)


def kill_group(pgid: int) -> None:
    """Kill the process group we started (the editor and the servers it spawned)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def editors_home() -> Path:
    """Where ``editors/ci-setup.sh --vscode`` puts Node 24 and code-server."""
    default = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "agent-ls-editors"
    return Path(os.environ.get("AGENT_LS_EDITORS_HOME") or default)
