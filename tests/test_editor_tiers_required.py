"""CI sets AGENT_LS_REQUIRE_EDITORS=1 after installing the editors: a skipped editor test then
fails the run, while a local run without editors still skips (tests/editors/conftest.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def run_emacs_tier(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """The Emacs tier with an Emacs that is not there: its fixture skips."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_LS_")}
    full_env.update(AGENT_LS_EMACS=str(tmp_path / "no-such-emacs"), **env)
    files = ["tests/editors/test_emacs.py", "tests/editors/test_vscode.py"]
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", *files],
        cwd=REPO,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("required", [False, True])
def test_a_missing_editor_skips_locally_and_fails_when_required(
    tmp_path: Path, required: bool
) -> None:
    env = {"AGENT_LS_REQUIRE_EDITORS": "1"} if required else {}
    done = run_emacs_tier(tmp_path, **env)
    out = done.stdout + done.stderr
    if required:
        assert done.returncode != 0, out
        assert "AGENT_LS_REQUIRE_EDITORS=1, but this editor test was skipped" in out, out
        assert "no-such-emacs" in out, out
        # The VS Code tier's opt-out (it runs in its own CI step) stays a skip: its two tests.
        assert "2 skipped" in out, out
    else:
        assert done.returncode == 0, out
        assert "failed" not in out and "error" not in out, out


def test_ci_requires_the_editors_it_installs() -> None:
    lines = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    at = {name: i for i, line in enumerate(lines) for name in [line.strip()]}
    required = at["export AGENT_LS_REQUIRE_EDITORS=1"]
    suite = next(i for i, line in enumerate(lines) if re.search(r"(^|\s)\./scripts/test\b", line))
    assert at["bash editors/ci-setup.sh"] < required < suite
    vscode_run = next(i for i, line in enumerate(lines) if "pytest tests/editors -m vscode" in line)
    assert required < vscode_run
