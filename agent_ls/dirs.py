"""Where agent-ls keeps its files: the data dir and the user's config dir (no pydantic here:
the server asks for them before it has loaded any)."""

from __future__ import annotations

import os
from pathlib import Path


def data_dir() -> Path:
    """Where agent-ls keeps sessions, trust decisions and memory (``AGENT_LS_DATA_DIR``)."""
    override = os.environ.get("AGENT_LS_DATA_DIR")
    if override:
        return Path(override)
    import platformdirs

    return Path(platformdirs.user_data_dir("agent-ls", appauthor=False))


def memory_file(root: Path) -> Path:
    """The project's memory (``MEMORY.md``) in the data dir, keyed by the workspace root."""
    import hashlib
    import re

    real = root.resolve()
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", real.name)[:40] or "root"
    key = hashlib.sha256(str(real).encode("utf-8", "surrogateescape")).hexdigest()[:12]
    return data_dir() / "projects" / f"{slug}-{key}" / "MEMORY.md"


def user_config_dir() -> Path:
    """The user's own agent-ls files: ``mcp.json``, ``settings.json``, ``agents/``, ``AGENTS.md``.

    ``AGENT_LS_CONFIG_DIR`` overrides it (tests, portable set-ups).
    """
    override = os.environ.get("AGENT_LS_CONFIG_DIR")
    if override:
        return Path(override)
    import platformdirs

    return Path(platformdirs.user_config_dir("agent-ls", appauthor=False))
