from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _isolated_data_dir(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Session files of tests never land in the user's real data directory."""
    monkeypatch.setenv("AGENT_LS_DATA_DIR", str(tmp_path_factory.mktemp("agent-ls-data")))


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "app.py").write_text(
        'def greet(name):\n    return "Hello " + name\n\n\nprint(greet("world"))\n',
        encoding="utf-8",
    )
    (root / "notes.md").write_text("# Notes\n\nnothing yet\n", encoding="utf-8")
    return root


def pytest_configure(config: pytest.Config) -> None:
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
