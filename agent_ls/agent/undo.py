"""Undo: revert what a session's last run applied, over whatever the files hold now.

The run's journal keeps, per file, its text before the run's first edit and after its last
one (as the editor really held it, so a partly accepted edit counts only for what landed).
Undo diffs the two line by line into hunks and maps each onto the current text. A hunk whose
lines the user changed since is left alone and named; a file the run created is offered for
deletion if it still holds what the run left.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from agent_ls.ports.editor import Hunk
from agent_ls.workspace import EditJournal

CurrentText = Callable[[Path], tuple[str | None, int | None]]  # text and buffer version


@dataclass(slots=True)
class FileUndo:
    """What undo does to one file: hunks over its current text, or deleting it."""

    path: Path
    current: str
    version: int | None
    hunks: list[Hunk] = field(default_factory=list)
    delete: bool = False


@dataclass(slots=True)
class UndoPlan:
    files: list[FileUndo] = field(default_factory=list)
    skipped: list[tuple[Path, str]] = field(default_factory=list)


def _overlaps(a1: int, a2: int, u1: int, u2: int) -> bool:
    """Whether the run's change at lines [a1, a2) of its result and a later change at
    [u1, u2) touch the same lines (empty ranges are insertion points)."""
    if a1 < a2 and u1 < u2:
        return u1 < a2 and a1 < u2
    if a1 < a2:
        return a1 < u1 < a2
    if u1 < u2:
        return u1 < a1 < u2
    return a1 == u1


def revert_hunks(before: str, after: str, current: str) -> tuple[list[Hunk], list[str]]:
    """Hunks over ``current`` that turn the run's changes (``before`` → ``after``) back, and
    a reason for each change left alone because the lines changed since."""
    a_lines = after.splitlines(keepends=True)
    b_lines = before.splitlines(keepends=True)
    c_lines = current.splitlines(keepends=True)
    run_ops = [
        op
        for op in difflib.SequenceMatcher(None, a_lines, b_lines, autojunk=False).get_opcodes()
        if op[0] != "equal"
    ]
    user_ops = difflib.SequenceMatcher(None, a_lines, c_lines, autojunk=False).get_opcodes()
    changed = [(i1, i2) for tag, i1, i2, _j1, _j2 in user_ops if tag != "equal"]
    offsets = [0]
    for line in c_lines:
        offsets.append(offsets[-1] + len(line))

    def to_current(a1: int, a2: int) -> tuple[int, int] | None:
        """Lines [a1, a2) of the run's result, where they are in the current text."""
        for tag, i1, i2, j1, _j2 in user_ops:
            if tag == "equal" and i1 <= a1 and a2 <= i2:
                return j1 + (a1 - i1), j1 + (a2 - i1)
        if a1 == a2:  # an insertion point at the edge of a changed stretch
            for _tag, i1, i2, j1, j2 in user_ops:
                if a1 == i1:
                    return j1, j1
                if a1 == i2:
                    return j2, j2
            if not user_ops:
                return 0, 0
        return None

    hunks: list[Hunk] = []
    skipped: list[str] = []
    for _tag, a1, a2, b1, b2 in run_ops:
        where = f"line {a1 + 1}" if a2 - a1 <= 1 else f"lines {a1 + 1}-{a2}"
        mapped = None
        if not any(_overlaps(a1, a2, u1, u2) for u1, u2 in changed):
            mapped = to_current(a1, a2)
        if mapped is None or c_lines[mapped[0] : mapped[1]] != a_lines[a1:a2]:
            skipped.append(
                f"the run's change at {where} (as the run left the file) was edited since; "
                "left as it is"
            )
            continue
        c1, c2 = mapped
        hunks.append(Hunk(offsets[c1], offsets[c2], "".join(b_lines[b1:b2])))
    return hunks, skipped


def plan_undo(journal: EditJournal, current_text: CurrentText) -> UndoPlan:
    """What reverting the journal's run means for each file, as things are now."""
    plan = UndoPlan()
    for path, entry in sorted(journal.files.items()):
        current, version = current_text(path)
        if current is None:
            plan.skipped.append((path, "the file no longer exists"))
            continue
        if entry.before is None:
            if current == entry.after:
                plan.files.append(FileUndo(path, current, version, delete=True))
            else:
                plan.skipped.append(
                    (path, "the run created it and it changed since; delete it yourself")
                )
            continue
        if current == entry.before:
            plan.skipped.append((path, "it already holds its text from before the run"))
            continue
        hunks, reasons = revert_hunks(entry.before, entry.after, current)
        plan.skipped.extend((path, reason) for reason in reasons)
        if hunks:
            plan.files.append(FileUndo(path, current, version, hunks))
    return plan
