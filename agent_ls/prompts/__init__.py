"""Every text the model reads lives in this folder as a file; code only assembles them."""

from __future__ import annotations

from functools import cache
from pathlib import Path

# A folder beside this file, not importlib.resources: that costs ~5 ms of the server's start
# (it imports zipfile), and agent-ls is installed as files.
HERE = Path(__file__).parent


@cache
def load(name: str) -> str:
    """The prompt file ``name`` (e.g. ``"system.md"``, ``"tools/read_file.md"``), stripped."""
    return (HERE / name).read_text(encoding="utf-8").strip()
