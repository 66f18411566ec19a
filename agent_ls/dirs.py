"""Where agent-ls keeps its files: the data dir and the user's config dir (no pydantic here:
the server asks for them before it has loaded any)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

APP = "agent-ls"


def data_dir() -> Path:
    """Where agent-ls keeps sessions, trust decisions and memory (``AGENT_LS_DATA_DIR``)."""
    override = os.environ.get("AGENT_LS_DATA_DIR")
    if override:
        return Path(override)
    found = _xdg("XDG_DATA_HOME", "~/.local/share")
    if found is not None:
        return Path(found)
    import platformdirs

    return Path(platformdirs.user_data_dir(APP, appauthor=False))


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
    found = _xdg("XDG_CONFIG_HOME", "~/.config")
    if found is not None:
        return Path(found)
    import platformdirs

    return Path(platformdirs.user_config_dir(APP, appauthor=False))


def _xdg(variable: str, default: str) -> str | None:
    """platformdirs' answer on Linux in the usual case, without importing it: that costs
    ~6 ms of each start (it imports tempfile, shutil, bz2, lzma and random), the client's
    before it forks the server. None where platformdirs' rules are more than these (Android,
    another system, no absolute ``HOME``); tests compare the two."""
    if sys.platform != "linux" or os.environ.get("ANDROID_DATA") is not None:
        return None
    base = os.environ.get(variable, "")
    if not base.startswith("/"):  # platformdirs ignores a relative XDG directory
        if not os.environ.get("HOME", "").startswith("/"):
            return None
        base = os.path.expanduser(default)
    return os.path.join(base, APP)
