"""agent-ls: a coding agent served over the Language Server Protocol."""

from __future__ import annotations

from importlib import metadata

try:
    __version__ = metadata.version("agent-ls")
except metadata.PackageNotFoundError:  # running from a source tree without install
    __version__ = "0.0.0"
