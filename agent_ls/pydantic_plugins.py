"""agent-ls's own pydantic models are built without third-party pydantic plugins.

The first validator pydantic builds asks for its plugins: its loader imports
``importlib.metadata`` (with ``email``, ``zipfile`` and ``csv``) and reads the entry points of
every installed distribution, ~25-35 ms of each process's start (server and model worker
alike), for nothing: the models are agent-ls's internals (tool inputs, settings, the SDK's
events), not the user's code that a validation-observing plugin is installed for. This is what
``PYDANTIC_DISABLE_PLUGINS=__all__`` asks of pydantic, without its cost (the loader is still
imported) and without the variable reaching the commands the agent runs.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Iterable
from typing import Any

LOADER = "pydantic.plugin._loader"


def _no_plugins() -> Iterable[Any]:
    return ()


def leave_out() -> None:
    """From now on, in this process (and its forks), pydantic finds no plugins. Call before
    pydantic builds a model; a no-op if its plugin loader has already been imported."""
    if LOADER in sys.modules:
        return
    loader = types.ModuleType(LOADER, "pydantic's plugin loader, finding no plugins.")
    loader.get_plugins = _no_plugins  # type: ignore[attr-defined]
    sys.modules[LOADER] = loader
