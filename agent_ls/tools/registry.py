"""The registry: the only module that knows every tool."""

from __future__ import annotations

from typing import Any

from agent_ls.ports.model import ToolSpec
from agent_ls.tools.base import Tool


class ToolRegistry:
    """Tools by name, in a stable order (the order is part of the prompt-cache prefix)."""

    def __init__(self, tools: list[Tool[Any]]):
        self._tools = {t.name: t for t in tools}
        self._specs: list[ToolSpec] | None = None

    def get(self, name: str) -> Tool[Any] | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def all(self) -> list[Tool[Any]]:
        return list(self._tools.values())

    def specs(self) -> list[ToolSpec]:
        """The tools as the model sees them, built once (they are part of the cache prefix)."""
        if self._specs is None:
            self._specs = [t.spec() for t in self._tools.values()]
        return self._specs


def default_tools() -> ToolRegistry:
    """The seven tools of the contract."""
    from agent_ls.tools.diagnostics import GetDiagnostics
    from agent_ls.tools.edit import EditFile, WriteFile
    from agent_ls.tools.files import ReadFile
    from agent_ls.tools.search import GrepSearch, ListFiles
    from agent_ls.tools.shell import RunShell

    return ToolRegistry(
        [
            ReadFile(),
            WriteFile(),
            EditFile(),
            ListFiles(),
            GrepSearch(),
            RunShell(),
            GetDiagnostics(),
        ]
    )
