"""Assembles what the model reads from the files in ``prompts/``.

The system prompt is built once per session, static parts first, so every request of a run
shares the same cache prefix (the date is fixed when the session starts).
"""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

from agent_ls import prompts
from agent_ls.edits import LineIndex, PositionEncoding
from agent_ls.ports.model import ToolSpec
from agent_ls.settings import user_config_dir

INSTRUCTION_FILES = ("AGENTS.md", "CLAUDE.md")
LOCAL_INSTRUCTION_FILES = ("AGENTS.local.md", "CLAUDE.local.md")
INSTRUCTIONS_CHAR_CAP = 40_000
GIT_STATUS_LINES = 30
GIT_TIMEOUT = 3.0


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


def build_system_prompt(
    root: Path,
    tools: list[ToolSpec] | None = None,
    today: datetime.date | None = None,
    *,
    intro: str | None = None,
    context: str | None = None,
) -> str:
    """The session's system prompt: static parts first, so the cache prefix stays stable.

    Built once per session (it runs git, so call it off the event loop); the date and git
    state are those of the session's start. ``intro`` replaces the agent's own instructions
    (a sub-agent's definition body); ``context`` is a :func:`project_context` built before.
    """
    parts = [prompts.load("system.md") if intro is None else intro]
    if tools:
        parts.append(tool_guidance(tools))
    parts.append(project_context(root, today) if context is None else context)
    return "\n\n".join(p for p in parts if p)


def project_context(root: Path, today: datetime.date | None = None) -> str:
    """The project instructions, the environment and the git state (runs git)."""
    parts = []
    blocks = []
    for path in find_instruction_files(root):
        try:
            text = path.read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            continue
        if text:
            blocks.append(f"## {path}\n{text[:INSTRUCTIONS_CHAR_CAP]}")
    if blocks:
        parts.append(prompts.load("instructions.md").format(instructions="\n\n".join(blocks)))
    parts.append(
        prompts.load("environment.md").format(
            root=root,
            platform=f"{platform.system()} {platform.release()}",
            shell=os.path.basename(os.environ.get("SHELL", "bash")) or "bash",
            date=(today or datetime.date.today()).isoformat(),
        )
    )
    git = git_summary(root)
    if git:
        parts.append(git)
    return "\n\n".join(parts)


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
