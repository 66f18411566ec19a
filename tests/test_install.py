"""The README's install steps, run verbatim in a fresh copy of the repository."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from agent_ls import __version__

REPO = Path(__file__).resolve().parent.parent


def install_block() -> str:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    found = re.search(r"<!-- install -->\s*```sh\n(.*?)```\s*<!-- /install -->", readme, re.S)
    assert found, "README.md has no <!-- install --> block"
    return found.group(1)


@pytest.mark.timeout(600)  # a fresh virtual environment and every dependency
def test_the_readme_install_steps_work_in_a_clean_copy(tmp_path: Path) -> None:
    clone = tmp_path / "agent-ls"
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout.split(b"\0")
    for name in filter(None, tracked):
        source = REPO / name.decode()
        if source.is_file():
            (clone / name.decode()).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, clone / name.decode())
    # a repository of its own, so what the steps leave behind shows in `git status`
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "clone"]):
        subprocess.run([*git, *args], cwd=clone, check=True, capture_output=True, timeout=120)
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON"))}
    env["HOME"] = str(home)  # ~/.agent-ls lands in the test's folder
    env.setdefault("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip"))  # reuse downloads
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", install_block()],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    assert done.stdout.strip().splitlines()[-1] == f"agent-ls {__version__}"
    # the build's leftovers (build/, *.egg-info) are ignored: the clone shows nothing new
    status = subprocess.run(
        ["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True, check=True
    ).stdout
    assert status == "", status
    # The installed program works on its own, outside the clone (prompts and data included).
    verdict = subprocess.run(
        [str(home / ".agent-ls" / "bin" / "agent-ls"), "check-command", "--", "ls"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert verdict.returncode == 0 and '"decision": "allow"' in verdict.stdout, verdict.stderr
