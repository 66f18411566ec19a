"""Every text the model reads lives in this folder as a file; code only assembles them."""

from __future__ import annotations

from functools import cache
from importlib import resources


@cache
def load(name: str) -> str:
    """The prompt file ``name`` (e.g. ``"system.md"``, ``"tools/read_file.md"``), stripped."""
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8").strip()
