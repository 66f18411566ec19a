"""Search-and-replace edits as minimal hunks, and offsets as LSP positions.

Pure functions over strings; no LSP types. Offsets are code-point indexes into the file's text
as the editor holds it (line endings preserved). The model never sees ``\\r``: in a CRLF file an
``old_string`` written with ``\\n`` is matched against the CRLF form and the CRLF form is written.
"""

from __future__ import annotations

import bisect
import difflib
import re
from dataclasses import dataclass
from typing import Literal

PositionEncoding = Literal["utf-8", "utf-16", "utf-32"]


@dataclass(frozen=True, slots=True)
class Hunk:
    """Replace ``old_text[start:end]`` with ``new_text``."""

    start: int
    end: int
    new_text: str


class EditError(ValueError):
    """The edit cannot be made; the message is written for the model."""


def line_of(text: str, offset: int) -> int:
    """1-based line number of ``offset``."""
    return text.count("\n", 0, offset) + 1


def _trimmed_hunk(start: int, old: str, new: str) -> Hunk:
    prefix = 0
    limit = min(len(old), len(new))
    while prefix < limit and old[prefix] == new[prefix]:
        prefix += 1
    suffix = 0
    while suffix < limit - prefix and old[-1 - suffix] == new[-1 - suffix]:
        suffix += 1
    return Hunk(start + prefix, start + len(old) - suffix, new[prefix : len(new) - suffix])


def _occurrences(text: str, needle: str) -> list[int]:
    found: list[int] = []
    at = text.find(needle)
    while at != -1:
        found.append(at)
        at = text.find(needle, at + len(needle))
    return found


def plan_replacement(
    text: str, old_string: str, new_string: str, *, replace_all: bool = False
) -> tuple[str, list[Hunk]]:
    """Apply a search-and-replace to ``text``; return the new text and its minimal hunks."""
    if old_string == "":
        raise EditError("old_string is empty: use write_file to create or overwrite a file.")
    if old_string == new_string:
        raise EditError("old_string and new_string are identical: there is nothing to change.")
    old, new = old_string, new_string
    hits = _occurrences(text, old)
    if not hits and "\r\n" in text and "\n" in old and "\r" not in old:
        old, new = old.replace("\n", "\r\n"), new.replace("\n", "\r\n")
        hits = _occurrences(text, old)
    if not hits:
        hint = ""
        if new_string and new_string in text:
            hint = " new_string is already in the file: the change may have been made before."
        raise EditError(
            "old_string was not found in the file. Read the file again and copy the text "
            "exactly, including whitespace and indentation." + hint
        )
    if len(hits) > 1 and not replace_all:
        lines = ", ".join(str(line_of(text, h)) for h in hits[:20])
        raise EditError(
            f"old_string matches {len(hits)} times (lines {lines}). Include more surrounding "
            "context to make it unique, or set replace_all to change every occurrence."
        )
    hunks = [_trimmed_hunk(at, old, new) for at in hits]
    pieces: list[str] = []
    cursor = 0
    for at in hits:
        pieces.append(text[cursor:at])
        pieces.append(new)
        cursor = at + len(old)
    pieces.append(text[cursor:])
    return "".join(pieces), [h for h in hunks if h.start != h.end or h.new_text]


def diff_hunks(old_text: str, new_text: str) -> list[Hunk]:
    """Minimal line-level hunks turning ``old_text`` into ``new_text`` (for whole-file writes)."""
    old_lines = old_text.splitlines(keepends=True)
    new_lines = new_text.splitlines(keepends=True)
    starts = [0]
    for line in old_lines:
        starts.append(starts[-1] + len(line))
    hunks: list[Hunk] = []
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        old_chunk = old_text[starts[i1] : starts[i2]]
        hunks.append(_trimmed_hunk(starts[i1], old_chunk, "".join(new_lines[j1:j2])))
    return hunks


def apply_hunks(text: str, hunks: list[Hunk]) -> str:
    """Apply non-overlapping hunks (any order) to ``text``."""
    out: list[str] = []
    cursor = 0
    for hunk in sorted(hunks, key=lambda h: h.start):
        out.append(text[cursor : hunk.start])
        out.append(hunk.new_text)
        cursor = hunk.end
    out.append(text[cursor:])
    return "".join(out)


_LINE_BREAK = re.compile(r"\r\n|\r|\n")


class LineIndex:
    """Maps code-point offsets to LSP ``(line, character)`` in a given position encoding.

    Lines break at ``\\r\\n``, ``\\r`` and ``\\n`` as the LSP specification says.
    """

    def __init__(self, text: str):
        self.text = text
        self.line_starts = [0] + [m.end() for m in _LINE_BREAK.finditer(text)]

    def position(self, offset: int, encoding: PositionEncoding = "utf-16") -> tuple[int, int]:
        line = bisect.bisect_right(self.line_starts, offset) - 1
        segment = self.text[self.line_starts[line] : offset]
        if encoding == "utf-32":
            return line, len(segment)
        if encoding == "utf-8":
            return line, len(segment.encode("utf-8", "surrogatepass"))
        return line, len(segment.encode("utf-16-le", "surrogatepass")) // 2

    def offset(self, line: int, character: int, encoding: PositionEncoding = "utf-16") -> int:
        """The code-point offset of an LSP position (clamped to the line, as the spec says)."""
        if line >= len(self.line_starts):
            return len(self.text)
        start = self.line_starts[line]
        end = self.line_starts[line + 1] if line + 1 < len(self.line_starts) else len(self.text)
        content = self.text[start:end].rstrip("\r\n")
        if encoding == "utf-32":
            return start + min(character, len(content))
        codec = "utf-8" if encoding == "utf-8" else "utf-16-le"
        width = 1 if encoding == "utf-8" else 2
        raw = content.encode(codec, "surrogatepass")[: character * width]
        return start + len(raw.decode(codec, "ignore"))


def unified_diff(label: str, old_text: str, new_text: str, context: int = 3) -> str:
    """A unified diff of two texts, for people (``a/label`` → ``b/label``)."""
    lines = difflib.unified_diff(
        old_text.splitlines(keepends=True),
        new_text.splitlines(keepends=True),
        fromfile=f"a/{label}",
        tofile=f"b/{label}",
        n=context,
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def landed_hunks(old_text: str, hunks: list[Hunk], current: str) -> list[int] | None:
    """Which hunks ``current`` holds, if it is ``old_text`` with some subset of them applied.

    Returns the indexes (in ``hunks`` order) of those that landed, or None when ``current`` is
    not explained by any subset (the text was changed some other way too).
    """
    order = sorted(range(len(hunks)), key=lambda i: hunks[i].start)

    def walk(k: int, old_pos: int, cur_pos: int) -> list[int] | None:
        if k == len(order):
            return [] if current[cur_pos:] == old_text[old_pos:] else None
        hunk = hunks[order[k]]
        gap = old_text[old_pos : hunk.start]
        if not current.startswith(gap, cur_pos):
            return None
        cur_pos += len(gap)
        if current.startswith(hunk.new_text, cur_pos):
            rest = walk(k + 1, hunk.end, cur_pos + len(hunk.new_text))
            if rest is not None:
                return [order[k], *rest]
        original = old_text[hunk.start : hunk.end]
        if current.startswith(original, cur_pos):
            return walk(k + 1, hunk.end, cur_pos + len(original))
        return None

    found = walk(0, 0, 0)
    return sorted(found) if found is not None else None
