"""Every import points down the floors of docs/architecture.md, and the core speaks no LSP/ACP.

Imports are read statically from the source (module level, inside functions and under
``TYPE_CHECKING`` alike), so an import that only runs on some path still counts.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "agent_ls"

# Lowest first. A module may import its own package and anything on a lower floor; packages
# that share a floor are siblings and must not import each other.
FLOORS: list[list[str]] = [
    ["agent_ls", "agent_ls.prompts", "agent_ls.ports"],
    ["agent_ls.edits", "agent_ls.settings", "agent_ls.pricing"],
    ["agent_ls.safety"],
    ["agent_ls.workspace"],
    ["agent_ls.tools", "agent_ls.models"],
    ["agent_ls.agent"],
    ["agent_ls.lsp", "agent_ls.acp"],
    ["agent_ls.client"],
    ["agent_ls.cli"],
    ["agent_ls.__main__"],
]
FRONT_DOORS = (
    "agent_ls.lsp",
    "agent_ls.acp",
    "agent_ls.client",
    "agent_ls.cli",
    "agent_ls.__main__",
)
PROTOCOL_LIBRARIES = ("pygls", "lsprotocol", "acp")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def source_files() -> dict[str, Path]:
    return {
        module_name(p): p
        for p in sorted(PACKAGE.rglob("*.py"))
        if "demo" not in p.relative_to(PACKAGE).parts
    }


MODULES = source_files()


def imports_of(path: Path) -> set[str]:
    """Every module ``path`` imports, ours resolved to the module (not the package)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}: use absolute imports"
            base = node.module or ""
            found.add(base)
            for alias in node.names:  # ``from agent_ls import prompts`` imports a module
                if f"{base}.{alias.name}" in MODULES:
                    found.add(f"{base}.{alias.name}")
    return found


def unit(module: str) -> str:
    """The floor entry a module belongs to: the longest entry that is it or contains it."""
    best = ""
    for floor in FLOORS:
        for entry in floor:
            if (module == entry or module.startswith(entry + ".")) and len(entry) > len(best):
                best = entry
    assert best, f"{module} is on no floor: add it to FLOORS and to docs/architecture.md"
    return best


def floor_of(module: str) -> int:
    entry = unit(module)
    return next(i for i, floor in enumerate(FLOORS) if entry in floor)


def ours(imported: set[str]) -> set[str]:
    return {m for m in imported if m == "agent_ls" or m.startswith("agent_ls.")}


def upward_or_sideways(module: str, imported: str) -> str | None:
    if unit(imported) == unit(module) or imported == "agent_ls":
        return None
    mine, theirs = floor_of(module), floor_of(imported)
    if theirs > mine:
        return f"{module} (floor {mine}) imports {imported} (floor {theirs}), a higher floor"
    if theirs == mine:
        return f"{module} imports its sibling {imported} (both on floor {mine})"
    return None


def test_every_module_is_on_a_floor() -> None:
    for module in MODULES:
        unit(module)


def test_every_import_points_down() -> None:
    problems = [
        problem
        for module, path in MODULES.items()
        for imported in sorted(ours(imports_of(path)))
        if imported in MODULES and (problem := upward_or_sideways(module, imported))
    ]
    assert not problems, "\n".join(problems)


def test_no_import_circle() -> None:
    graph = {
        m: {i for i in ours(imports_of(p)) if i in MODULES and i != m} for m, p in MODULES.items()
    }
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for module in sorted(graph):
        if module not in state and (cycle := visit(module)):
            pytest.fail("import circle: " + " -> ".join(cycle))


def test_the_core_imports_no_protocol_library() -> None:
    problems = []
    for module, path in MODULES.items():
        if module.startswith(FRONT_DOORS):
            continue
        for imported in imports_of(path):
            if imported.split(".")[0] in PROTOCOL_LIBRARIES:
                problems.append(f"{module} imports {imported}")
    assert not problems, "\n".join(problems)


def test_the_checker_itself_catches_an_upward_import() -> None:
    """The rules above would pass vacuously if the resolution were wrong."""
    assert upward_or_sideways("agent_ls.tools.base", "agent_ls.agent.loop")
    assert upward_or_sideways("agent_ls.tools.shell", "agent_ls.models.sdk")
    assert upward_or_sideways("agent_ls.ports.editor", "agent_ls.edits")
    assert upward_or_sideways("agent_ls.agent.loop", "agent_ls.tools.base") is None
    assert "agent_ls.prompts" in imports_of(MODULES["agent_ls.tools.base"])
