"""Headless diagnostics from a checker command (agent-ls run --checker)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_ls.client.checker import parse_output
from tests.fakeapi import FakeAPI, Turn

CHECKER = (
    "python3 -c \"import sys; t=open('app.py').read(); "
    "[print(f'app.py:{n}:12: error undefined name nme') "
    "for n, l in enumerate(t.splitlines(), 1) if 'nme' in l]\""
)


def test_parse_output_reads_common_checker_formats(tmp_path: Path) -> None:
    output = "\n".join(
        [
            "src/a.py:3:5: F821 Undefined name `x`",  # ruff concise
            "src/a.py:7: error: Name 'y' is not defined  [name-defined]",  # mypy
            f"  {tmp_path}/b.py:2:1 - warning: Import could not be resolved",  # pyright
            "Found 3 errors.",
        ]
    )
    found = parse_output(output, tmp_path)
    a = found[(tmp_path / "src/a.py").resolve().as_uri()]
    assert [d["range"]["start"] for d in a] == [
        {"line": 2, "character": 4},
        {"line": 6, "character": 0},
    ]
    assert a[0]["message"] == "F821 Undefined name `x`" and a[1]["severity"] == 1
    b = found[(tmp_path / "b.py").resolve().as_uri()]
    assert b[0]["severity"] == 2 and "could not be resolved" in b[0]["message"]


@pytest.fixture
def api() -> Iterator[Any]:
    with FakeAPI() as fake:
        yield fake
    assert not fake.rejections, "the real API would have refused these requests"


def test_run_with_a_checker_tells_the_model_what_an_edit_broke(workspace: Path, api: Any) -> None:
    api.enqueue(
        Turn(tool_uses=[("read_file", {"file_path": "app.py"})]),
        Turn(
            tool_uses=[
                (
                    "edit_file",
                    {"file_path": "app.py", "old_string": "name\n", "new_string": "nme\n"},
                )
            ]
        ),
        Turn(text="I broke it; fixing."),
    )
    env = {
        **os.environ,
        "AGENT_LS_MODEL": "anthropic:claude-sonnet-5-5",
        "ANTHROPIC_BASE_URL": api.url,
        "ANTHROPIC_API_KEY": "test-key",
    }
    done = subprocess.run(
        [sys.executable, "-m", "agent_ls", "run", "--yes", "--checker", CHECKER, "rename"],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    last = api.requests[2].body["messages"][-1]["content"]
    text = "".join(
        b["content"] if isinstance(b["content"], str) else b["content"][0]["text"]
        for b in last
        if b.get("type") == "tool_result"
    )
    assert "New problems the editor reports after this edit:" in text
    assert "app.py:2:12: error [checker] error undefined name nme" in text
