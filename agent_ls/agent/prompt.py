"""Assembles what the model reads from the files in ``prompts/``.

The system prompt's fixed parts are built once per session, static parts first, so every
request shares the same cache prefix (the date is fixed when the session starts); the
project's memory is read again at each ask, so it is byte-identical within an ask and a
change shows from the next one.
"""

from __future__ import annotations

import datetime
import os
import platform
import re
import subprocess
from pathlib import Path
from typing import Any

from agent_ls import prompts
from agent_ls.edits import LineIndex, PositionEncoding
from agent_ls.ports.model import ToolSpec
from agent_ls.settings import memory_file, user_config_dir

INSTRUCTION_FILES = ("AGENTS.md", "CLAUDE.md")
LOCAL_INSTRUCTION_FILES = ("AGENTS.local.md", "CLAUDE.local.md")
INSTRUCTIONS_CHAR_CAP = 40_000
GIT_STATUS_LINES = 30
GIT_TIMEOUT = 3.0
IMPORT_DEPTH = 5  # hops of @path imports followed, as in Claude Code
MEMORY_LINES = 200
_FENCE = re.compile(r"^\s*(```|~~~)")
_CODE_SPAN = re.compile(r"`+[^`]*`+")
_IMPORT = re.compile(r"(?:^|(?<=\s))@((?:~/|\.{1,2}/|/)?[^\s`@]+)")


def find_instruction_files(root: Path) -> list[Path]:
    """Instruction files in the order the model reads them.

    The user's global ``AGENTS.md``, then ``AGENTS.md``/``CLAUDE.md`` from the filesystem root
    down to ``root`` (ancestors first), then the uncommitted ``*.local.md`` ones in ``root``.
    """
    found: list[Path] = []
    user_file = user_config_dir() / "AGENTS.md"
    if user_file.is_file():
        found.append(user_file)
    for folder in [*reversed(root.parents), root]:
        for name in INSTRUCTION_FILES:
            candidate = folder / name
            if candidate.is_file():
                found.append(candidate)
    for name in LOCAL_INSTRUCTION_FILES:
        candidate = root / name
        if candidate.is_file():
            found.append(candidate)
    return found


def import_targets(text: str, base: Path) -> list[Path]:
    """Files an instruction file imports with ``@path`` (outside code fences and spans).

    Relative paths are relative to the importing file's folder, ``~/`` is the home folder.
    Only existing files count (``@someone`` in prose is not an import).
    """
    found: list[Path] = []
    fence: str | None = None
    for line in text.splitlines():
        marker = _FENCE.match(line)
        if marker:
            if fence is None:
                fence = marker.group(1)
            elif marker.group(1) == fence:
                fence = None
            continue
        if fence is not None:
            continue
        for match in _IMPORT.finditer(_CODE_SPAN.sub(" ", line)):
            raw = match.group(1).rstrip(".,;:)!?")
            path = Path(os.path.expanduser(raw)) if raw.startswith("~/") else Path(raw)
            if not path.is_absolute():
                path = base / path
            if path.is_file() and path not in found:
                found.append(path)
    return found


def with_imports(files: list[Path]) -> list[tuple[Path, str, Path | None]]:
    """The instruction files and what they import, depth first, each file once.

    Returns ``(path, text, imported_by)``. Imports are followed :data:`IMPORT_DEPTH` hops
    deep; a file already included (a cycle, or a second import) is not included again.
    """
    out: list[tuple[Path, str, Path | None]] = []
    seen: set[Path] = set()

    def visit(path: Path, parent: Path | None, depth: int) -> None:
        real = path.resolve()
        if real in seen:
            return
        seen.add(real)
        try:
            text = path.read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            return
        out.append((path, text, parent))
        if depth >= IMPORT_DEPTH:
            return
        for target in import_targets(text, path.parent):
            visit(target, path, depth + 1)

    for file in files:
        visit(file, None, 0)
    return out


def memory_section(root: Path) -> str:
    """The project's memory for the system prompt: its path and first lines."""
    path = memory_file(root)
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        lines = []
    shown = lines[:MEMORY_LINES]
    if not any(line.strip() for line in shown):
        note, body = " (empty so far)", ""
    elif len(lines) > MEMORY_LINES:
        note, body = f" (the first {MEMORY_LINES} of {len(lines)} lines)", "\n".join(shown)
    else:
        note, body = "", "\n".join(shown)
    return (
        prompts.load("memory.md")
        .format(path=path, shown=note, limit=MEMORY_LINES, memory=body)
        .strip()
    )


def _git(root: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def git_summary(root: Path) -> str:
    """Branch, short status and recent commits; empty outside a git repository."""
    branch = _git(root, "rev-parse", "--abbrev-ref", "HEAD")
    if branch is None:
        return ""
    status = _git(root, "status", "--short") or ""
    lines = status.splitlines()
    if len(lines) > GIT_STATUS_LINES:
        lines = [*lines[:GIT_STATUS_LINES], f"... and {len(lines) - GIT_STATUS_LINES} more"]
    log = _git(root, "log", "--oneline", "-5") or "(no commits yet)"
    return prompts.load("git.md").format(
        branch=branch, status="\n".join(lines) or "(clean)", log=log
    )


def tool_guidance(tools: list[ToolSpec]) -> str:
    """One line per tool: what it is for (the full description travels with the tool)."""
    lines = [
        f"- {t.name}: {t.description.split(chr(10))[0].split('. ')[0].rstrip('.')}." for t in tools
    ]
    return prompts.load("tools.md").format(tools="\n".join(lines))


ProjectContext = tuple[str, str]  # (project instructions, environment and git state)


def project_context(root: Path, today: datetime.date | None = None) -> ProjectContext:
    """The project instructions (imports followed), and the environment and git state
    (runs git: call it off the event loop)."""
    blocks = []
    for path, text, parent in with_imports(find_instruction_files(root)):
        if text:
            source = f" (imported by {parent})" if parent is not None else ""
            blocks.append(f"## {path}{source}\n{text[:INSTRUCTIONS_CHAR_CAP]}")
    instructions = (
        prompts.load("instructions.md").format(instructions="\n\n".join(blocks)) if blocks else ""
    )
    tail = [
        prompts.load("environment.md").format(
            root=root,
            platform=f"{platform.system()} {platform.release()}",
            shell=os.path.basename(os.environ.get("SHELL", "bash")) or "bash",
            date=(today or datetime.date.today()).isoformat(),
        )
    ]
    git = git_summary(root)
    if git:
        tail.append(git)
    return instructions, "\n\n".join(tail)


def build_prompt_parts(
    root: Path,
    tools: list[ToolSpec] | None = None,
    today: datetime.date | None = None,
    *,
    intro: str | None = None,
    context: ProjectContext | None = None,
) -> tuple[str, str]:
    """The session's fixed parts: before the memory (system, tools, project instructions)
    and after it (environment, git). Built once per session; the date and git state are
    those of the session's start. ``intro`` replaces the agent's own instructions (a
    sub-agent's definition body); ``context`` is a :func:`project_context` built before."""
    instructions, tail = project_context(root, today) if context is None else context
    head = [prompts.load("system.md") if intro is None else intro]
    if tools:
        head.append(tool_guidance(tools))
    head.append(instructions)
    return "\n\n".join(p for p in head if p), tail


def assemble_system_prompt(parts: tuple[str, str], memory: str) -> str:
    """One ask's system prompt: the session's parts with the memory as it is now."""
    head, tail = parts
    return "\n\n".join(p for p in (head, memory, tail) if p)


def build_system_prompt(
    root: Path,
    tools: list[ToolSpec] | None = None,
    today: datetime.date | None = None,
    *,
    intro: str | None = None,
    context: ProjectContext | None = None,
) -> str:
    """The system prompt: static parts first, so the cache prefix stays stable."""
    parts = build_prompt_parts(root, tools, today, intro=intro, context=context)
    return assemble_system_prompt(parts, memory_section(root))


def numbered_excerpt(text: str, first_line: int, last_line: int) -> str:
    """Lines ``first_line``..``last_line`` (0-based, inclusive) numbered from 1."""
    lines = text.splitlines()
    last_line = min(last_line, len(lines) - 1)
    return "\n".join(f"{n + 1:>6}\t{lines[n]}" for n in range(max(0, first_line), last_line + 1))


def selection_context(
    shown_path: str,
    text: str | None,
    rng: dict[str, Any] | None,
    encoding: PositionEncoding = "utf-16",
) -> str:
    """What the user is looking at: the active file and the selected lines, if any.

    ``rng`` is an LSP range in the session's negotiated position ``encoding``.
    """
    if text is None or not rng:
        return prompts.load("selection.md").format(path=shown_path, range_note="", selection="")
    start, end = rng["start"], rng["end"]
    index = LineIndex(text)
    begin = index.offset(start["line"], start["character"], encoding)
    finish = index.offset(end["line"], end["character"], encoding)
    if finish <= begin:
        note = f" (cursor at line {start['line'] + 1})"
        excerpt = numbered_excerpt(text, start["line"], start["line"])
        return prompts.load("selection.md").format(
            path=shown_path, range_note=note, selection=f"The cursor line:\n{excerpt}"
        )
    last_line = end["line"] - (1 if end["character"] == 0 and end["line"] > start["line"] else 0)
    note = f" with lines {start['line'] + 1}-{last_line + 1} selected"
    excerpt = numbered_excerpt(text, start["line"], last_line)
    return prompts.load("selection.md").format(
        path=shown_path, range_note=note, selection=f"The selection:\n{excerpt}"
    )


def fix_prompt(
    shown_path: str,
    text: str | None,
    diagnostics: list[dict[str, Any]],
    context_lines: int = 5,
    *,
    whole_file: bool = False,
) -> str:
    """The ``agent.fix`` request: the diagnostics and the code around them (or all of it)."""
    lines = []
    low, high = None, None
    for diag in diagnostics:
        rng = diag.get("range") or {}
        line = int((rng.get("start") or {}).get("line", 0))
        end_line = int((rng.get("end") or {}).get("line", line))
        col = int((rng.get("start") or {}).get("character", 0))
        low = line if low is None else min(low, line)
        high = end_line if high is None else max(high, end_line)
        tag = " ".join(str(x) for x in (diag.get("source"), diag.get("code")) if x)
        lines.append(
            f"- line {line + 1}, column {col + 1}: {diag.get('message', '')}"
            + (f" [{tag}]" if tag else "")
        )
    context = "(the file could not be read)"
    if text is not None and whole_file:
        context = numbered_excerpt(text, 0, text.count("\n") + 1)
    elif text is not None and low is not None and high is not None:
        context = numbered_excerpt(text, low - context_lines, high + context_lines)
    many = len(diagnostics) != 1
    return prompts.load("fix.md").format(
        plural="s" if many else "",
        path=shown_path,
        diagnostics="\n".join(lines),
        context=context,
        this_these="these" if many else "this",
        context_title="The whole file" if whole_file else "The code around it",
    )
