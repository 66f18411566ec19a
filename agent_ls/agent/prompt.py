"""Assembles what the model reads from the files in ``prompts/``.

The system prompt is built once per session, static parts first, so every request of a run
shares the same cache prefix (the date is fixed when the session starts).
"""

from __future__ import annotations

import datetime
import platform
from pathlib import Path
from typing import Any

from agent_ls import prompts
from agent_ls.edits import LineIndex

INSTRUCTION_FILES = ("AGENTS.md", "CLAUDE.md")
INSTRUCTIONS_CHAR_CAP = 40_000


def find_instruction_files(root: Path) -> list[Path]:
    """``AGENTS.md``/``CLAUDE.md`` from the filesystem root down to ``root`` (ancestors first)."""
    found: list[Path] = []
    for folder in [*reversed(root.parents), root]:
        for name in INSTRUCTION_FILES:
            candidate = folder / name
            if candidate.is_file():
                found.append(candidate)
    return found


def build_system_prompt(root: Path, today: datetime.date | None = None) -> str:
    parts = [prompts.load("system.md")]
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
            date=(today or datetime.date.today()).isoformat(),
        )
    )
    return "\n\n".join(parts)


def numbered_excerpt(text: str, first_line: int, last_line: int) -> str:
    """Lines ``first_line``..``last_line`` (0-based, inclusive) numbered from 1."""
    lines = text.splitlines()
    last_line = min(last_line, len(lines) - 1)
    return "\n".join(f"{n + 1:>6}\t{lines[n]}" for n in range(max(0, first_line), last_line + 1))


def selection_context(shown_path: str, text: str | None, rng: dict[str, Any] | None) -> str:
    """What the user is looking at: the active file and the selected lines, if any."""
    if text is None or not rng:
        return prompts.load("selection.md").format(path=shown_path, range_note="", selection="")
    start, end = rng["start"], rng["end"]
    index = LineIndex(text)
    begin = index.offset(start["line"], start["character"], "utf-16")
    finish = index.offset(end["line"], end["character"], "utf-16")
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
    shown_path: str, text: str | None, diagnostics: list[dict[str, Any]], context_lines: int = 5
) -> str:
    """The ``agent.fix`` request: the diagnostics and the code around them."""
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
    if text is not None and low is not None and high is not None:
        context = numbered_excerpt(text, low - context_lines, high + context_lines)
    many = len(diagnostics) != 1
    return prompts.load("fix.md").format(
        plural="s" if many else "",
        path=shown_path,
        diagnostics="\n".join(lines),
        context=context,
        this_these="these" if many else "this",
    )
