"""Search-and-replace edits as minimal hunks, and offsets as LSP positions.

Pure functions over strings; no LSP types.

**Offsets** are code-point indexes into the text as the editor holds it: line endings as they
are in the file, no byte-order mark (editors strip a UTF-8 BOM from the buffer text and write it
back on save, so positions never count it; see ``agent_ls.workspace``).

**Lines** break at ``\\r\\n``, ``\\r`` and ``\\n``, as the LSP specification says, and nowhere
else (not at U+2028, U+0085, form feeds...). A position can never point between the ``\\r`` and
the ``\\n`` of a CRLF: hunks produced here never start or end there, and :meth:`LineIndex.position`
maps such an offset to the end of its line.

**The model's view.** The model never sees ``\\r``: it reads the file with every line ending
shown as ``\\n`` (``read_file``), and writes ``old_string``/``new_string`` with ``\\n``. Matching
happens on that view and offsets are mapped back onto the real text, so an ``old_string``
written with ``\\n`` matches a CRLF (or mixed, or CR-only) file, and the replacement is written
with the line ending the file uses at that place.
"""

from __future__ import annotations

import bisect
import difflib
import itertools
import re
import sys
from collections import Counter
from dataclasses import dataclass
from typing import Literal

from agent_ls.ports.editor import Hunk

PositionEncoding = Literal["utf-8", "utf-16", "utf-32"]


class EditError(ValueError):
    """The edit cannot be made; the message is written for the model."""


# -- line endings ----------------------------------------------------------------------------

_BREAK = re.compile(r"\r\n|\r|\n")
_LF = re.compile(r"\n")
_LONE_CR = re.compile(r"\r(?!\n)")
_ENDING = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+")

HINT_LINES = 30  # lines of the file quoted in a "not found" hint
HINT_LINE_CHARS = 300
_LINE_NUMBER_PREFIX = re.compile(r"^ *\d+\t")


def normalize_newlines(text: str) -> str:
    """``text`` with every ``\\r\\n`` and lone ``\\r`` written as ``\\n``: the model's view."""
    if "\r" not in text:
        return text
    return text.replace("\r\n", "\n").replace("\r", "\n")


def split_lines(text: str) -> list[str]:
    """The lines of ``text`` without their endings, split as LSP does.

    A final line ending does not start another line here: ``"a\\nb\\n"`` is ``["a", "b"]``.
    """
    lines = text.split("\n") if "\r" not in text else _BREAK.split(text)
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _lines_keepends(text: str) -> list[str]:
    """The lines of ``text`` with their endings (``\\r\\n``, ``\\r`` or ``\\n``)."""
    if "\r" not in text:
        lines = [line + "\n" for line in text.split("\n")]
        lines[-1] = lines[-1][:-1]
        if not lines[-1]:
            lines.pop()
        return lines
    return _ENDING.findall(text)


def _ending_of(line: str) -> str:
    if line.endswith("\r\n"):
        return "\r\n"
    if line.endswith(("\r", "\n")):
        return line[-1]
    return ""


def dominant_newline(text: str, default: str = "\n") -> str:
    """The line ending ``text`` uses most (``default`` when it has none)."""
    if "\r" not in text:
        return "\n" if "\n" in text else default
    crlf = text.count("\r\n")
    counts = {"\r\n": crlf, "\n": text.count("\n") - crlf, "\r": text.count("\r") - crlf}
    best = max(counts, key=lambda k: counts[k])
    return best if counts[best] else default


# -- positions -------------------------------------------------------------------------------

_BLOCK = 1 << 16  # characters per block of the sparse line index
_BIG = 32 * 1024 * 1024  # bytes of a str above which slicing it costs page faults


class LineIndex:
    """Maps code-point offsets to LSP ``(line, character)`` in a position encoding, and back.

    The index is sparse and lazy: it counts line breaks per block of the text with ``str.count``
    only as far as a query needs, and converts columns only on the line asked about. One
    position near the end of a 10 MB text costs one C-speed pass over it; further queries on the
    same text cost at most one block. No per-character Python loop runs over the text.
    """

    def __init__(self, text: str):
        self.text = text
        self._cr: bool | None = None
        self._bounds = [0]  # block k is text[_bounds[k]:_bounds[k + 1]]
        self._before = [0]  # line breaks before _bounds[k]
        self._starts: list[int] | None = None

    # -- the sparse index --------------------------------------------------------------------

    @property
    def has_cr(self) -> bool:
        """Whether the text holds any ``\\r`` (then ``\\r`` and ``\\r\\n`` break lines too)."""
        if self._cr is None:
            self._cr = "\r" in self.text
        return self._cr

    def _breaks(self, a: int, b: int) -> int:
        """Line breaks in ``text[a:b]`` (neither bound inside a CRLF)."""
        text = self.text
        n = text.count("\n", a, b)
        if self.has_cr and _LONE_CR.search(text, a, b):  # CRLFs alone count as their LFs
            n += text.count("\r", a, b) - text.count("\r\n", a, b)
        return n

    def _grow(self) -> None:
        text, bounds = self.text, self._bounds
        a = bounds[-1]
        b = min(a + _BLOCK, len(text))
        if b < len(text) and text[b - 1] == "\r" and text[b] == "\n":
            b += 1  # never split a CRLF between blocks
        self._before.append(self._before[-1] + self._breaks(a, b))
        bounds.append(b)

    def _block_of(self, offset: int) -> int:
        """The block holding ``offset`` (the last, empty one for the end of the text)."""
        bounds, size = self._bounds, len(self.text)
        while bounds[-1] <= offset and bounds[-1] < size:
            self._grow()
        return bisect.bisect_right(bounds, offset) - 1

    def _line_number(self, offset: int) -> int:
        k = self._block_of(offset)
        return self._before[k] + self._breaks(self._bounds[k], offset)

    def _line_start_of(self, offset: int) -> int:
        text = self.text
        start = text.rfind("\n", 0, offset) + 1
        if self.has_cr:
            start = max(start, text.rfind("\r", 0, offset) + 1)
        return start

    def _start_of_line(self, line: int) -> int | None:
        """The offset where ``line`` starts, or None past the last line."""
        if line <= 0:
            return 0
        bounds, before, size = self._bounds, self._before, len(self.text)
        while before[-1] < line and bounds[-1] < size:
            self._grow()
        if before[-1] < line:
            return None
        k = bisect.bisect_left(before, line) - 1  # before[k] < line <= before[k + 1]
        pattern = _BREAK if self.has_cr else _LF
        found = pattern.finditer(self.text, bounds[k], bounds[k + 1])
        match = next(itertools.islice(found, line - before[k] - 1, None))
        return match.end()

    def _content_end(self, start: int) -> int:
        """Where the line starting at ``start`` ends, before its line ending."""
        text = self.text
        if not self.has_cr:
            end = text.find("\n", start)
            return len(text) if end == -1 else end
        match = _BREAK.search(text, start)
        return match.start() if match else len(text)

    @property
    def line_count(self) -> int:
        """Number of lines as LSP counts them (an empty text has one empty line)."""
        self._block_of(len(self.text))
        return self._before[-1] + 1

    @property
    def line_starts(self) -> list[int]:
        """Offsets where each line starts (built on first use: a full pass over the text)."""
        if self._starts is None:
            pattern = _BREAK if self.has_cr else _LF
            self._starts = [0, *(m.end() for m in pattern.finditer(self.text))]
        return self._starts

    # -- public API --------------------------------------------------------------------------

    def snap(self, offset: int) -> int:
        """``offset`` clamped to the text, and moved off the inside of a CRLF (to its ``\\r``)."""
        text = self.text
        offset = max(0, min(offset, len(text)))
        if 0 < offset < len(text) and text[offset] == "\n" and text[offset - 1] == "\r":
            offset -= 1
        return offset

    def position(self, offset: int, encoding: PositionEncoding = "utf-16") -> tuple[int, int]:
        """The LSP ``(line, character)`` of a code-point offset, in ``encoding``'s units.

        Offsets past the end are clamped to the end; an offset between ``\\r`` and ``\\n``
        (which LSP cannot express) is the end of that line.
        """
        offset = self.snap(offset)
        start = self._line_start_of(offset)
        return self._line_number(start), _width(self.text[start:offset], encoding)

    def offset(self, line: int, character: int, encoding: PositionEncoding = "utf-16") -> int:
        """The code-point offset of an LSP position.

        As the LSP specification says: a character past the end of the line means the end of
        the line (before its line ending), a line past the last line means the end of the text.
        A character inside a code point (half a surrogate pair, a partial UTF-8 sequence) means
        the start of that code point.
        """
        start = self._start_of_line(line)
        if start is None:
            return len(self.text)
        if character <= 0:
            return start
        end = self._content_end(start)
        # Every code point is at least one unit wide, so ``character`` code points suffice.
        segment = self.text[start : min(end, start + character)]
        return start + _prefix_within(segment, character, encoding)


def _width(segment: str, encoding: PositionEncoding) -> int:
    """Length of ``segment`` in code units of ``encoding``."""
    if encoding == "utf-32" or segment.isascii():
        return len(segment)
    if encoding == "utf-8":
        return len(segment.encode("utf-8", "surrogatepass"))
    return len(segment.encode("utf-16-le", "surrogatepass")) // 2


def _prefix_within(segment: str, units: int, encoding: PositionEncoding) -> int:
    """How many code points of ``segment`` fit in ``units`` code units (never splitting one)."""
    if encoding == "utf-32" or segment.isascii():
        return min(len(segment), units)
    if encoding == "utf-8":
        raw = segment.encode("utf-8", "surrogatepass")[:units]
        try:
            return len(raw.decode("utf-8", "surrogatepass"))
        except UnicodeDecodeError as exc:  # the cut fell inside a multi-byte sequence
            return len(raw[: exc.start].decode("utf-8", "surrogatepass"))
    raw = segment.encode("utf-16-le", "surrogatepass")[: units * 2]
    decoded = raw.decode("utf-16-le", "surrogatepass")
    count = len(decoded)
    if count and decoded[-1] != segment[count - 1]:
        count -= 1  # the cut fell inside a surrogate pair
    return count


# -- minimal hunks ---------------------------------------------------------------------------


def _common_prefix(a: str, b: str) -> int:
    """Length of the common prefix of ``a`` and ``b``, compared in C a slice at a time."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n - 1  # a[:lo] == b[:lo]; a[:hi + 1] != b[:hi + 1]
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _common_suffix(a: str, b: str, limit: int) -> int:
    n = min(len(a), len(b), limit)
    if n <= 0:
        return 0
    if a[len(a) - n :] == b[len(b) - n :]:
        return n
    lo, hi = 0, n - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[len(a) - mid : len(a) - lo] == b[len(b) - mid : len(b) - lo]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _trimmed_hunk(start: int, old: str, new: str) -> Hunk:
    """``old`` (at ``start``) → ``new`` as one hunk without their common prefix and suffix.

    The hunk never starts or ends between the ``\\r`` and ``\\n`` of a CRLF, which no LSP
    position can address.
    """
    prefix = _common_prefix(old, new)
    if 0 < prefix < len(old) and old[prefix - 1] == "\r" and old[prefix] == "\n":
        prefix -= 1
    suffix = _common_suffix(old, new, min(len(old), len(new)) - prefix)
    cut = len(old) - suffix
    if suffix > 0 and cut > 0 and old[cut - 1] == "\r" and old[cut] == "\n":
        suffix -= 1
    return Hunk(start + prefix, start + len(old) - suffix, new[prefix : len(new) - suffix])


def _review_hunks(start: int, old: str, new: str) -> list[Hunk]:
    """One match's change as the hunks a reviewer sees: split on the unchanged lines inside it
    (as the unified diff beside it is), each trimmed to what really changes."""
    if "\n" not in old and "\n" not in new and "\r" not in old and "\r" not in new:
        return [_trimmed_hunk(start, old, new)]
    return [Hunk(start + h.start, start + h.end, h.new_text) for h in diff_hunks(old, new)]


def apply_hunks(text: str, hunks: list[Hunk]) -> str:
    """Apply non-overlapping hunks (any order) to ``text``."""
    out: list[str] = []
    cursor = 0
    for hunk in sorted(hunks, key=lambda h: (h.start, h.end)):
        out.append(text[cursor : hunk.start])
        out.append(hunk.new_text)
        cursor = hunk.end
    out.append(text[cursor:])
    return "".join(out)


def diff_hunks(old_text: str, new_text: str) -> list[Hunk]:
    """Minimal line-level hunks turning ``old_text`` into ``new_text`` (for whole-file writes)."""
    if old_text == new_text:
        return []
    old_lines = _lines_keepends(old_text)
    new_lines = _lines_keepends(new_text)
    # Common leading and trailing lines need no diffing (and keep difflib fast on big files).
    head = 0
    while head < min(len(old_lines), len(new_lines)) and old_lines[head] == new_lines[head]:
        head += 1
    tail = 0
    while (
        tail < min(len(old_lines), len(new_lines)) - head
        and old_lines[-1 - tail] == new_lines[-1 - tail]
    ):
        tail += 1
    old_mid = old_lines[head : len(old_lines) - tail]
    new_mid = new_lines[head : len(new_lines) - tail]
    starts = list(itertools.accumulate(map(len, old_mid), initial=sum(map(len, old_lines[:head]))))
    hunks: list[Hunk] = []
    matcher = difflib.SequenceMatcher(None, old_mid, new_mid, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        old_chunk = "".join(old_mid[i1:i2])
        hunks.append(_trimmed_hunk(starts[i1], old_chunk, "".join(new_mid[j1:j2])))
    return [h for h in hunks if h.start != h.end or h.new_text]


# -- search and replace ----------------------------------------------------------------------


def _find_all(text: str, needle: str, *, limit: int = 0) -> list[int]:
    """Non-overlapping occurrences (as ``str.replace`` sees them), at most ``limit`` if set."""
    found: list[int] = []
    at = text.find(needle)
    while at != -1:
        found.append(at)
        if limit and len(found) >= limit:
            break
        at = text.find(needle, at + len(needle))
    return found


def _overlapped(text: str, needle: str, hits: list[int]) -> bool:
    """Whether the single hit also overlaps another occurrence (``"aa"`` in ``"aaa"``)."""
    if len(hits) != 1:
        return False
    return text.find(needle, hits[0] + 1, hits[0] + 2 * len(needle) - 1) != -1


@dataclass(slots=True)
class _Matches:
    """Where ``old`` occurs, as spans of the real text."""

    spans: list[tuple[int, int]]
    overlapping: bool = False  # one non-overlapping match, but it overlaps another
    needle: str | None = None  # what was searched in the real text (None: in the view)


def _match(text: str, old: str, *, every: bool) -> _Matches:
    """Occurrences of ``old`` (model view, ``\\n`` only) in ``text`` (real line endings)."""
    limit = 0 if every else 2
    if "\n" not in old or "\r" not in text:
        # Without line breaks in ``old`` (or without \r in the file) the views coincide.
        hits = _find_all(text, old, limit=limit)
        return _Matches([(h, h + len(old)) for h in hits], _overlapped(text, old, hits), old)
    crlf = text.count("\r\n")
    if crlf == text.count("\n") == text.count("\r"):  # CRLF throughout
        needle = old.replace("\n", "\r\n")
        hits = _find_all(text, needle, limit=limit)
        spans = [(h, h + len(needle)) for h in hits]
        return _Matches(spans, _overlapped(text, needle, hits), needle)
    # Mixed endings: match on the normalised view and map offsets back to the real text.
    view = normalize_newlines(text)
    pairs = [m.start() - i for i, m in enumerate(re.finditer("\r\n", text))]  # view offsets

    def real(offset: int) -> int:
        return offset + bisect.bisect_left(pairs, offset)

    hits = _find_all(view, old, limit=limit)
    return _Matches([(real(h), real(h + len(old))) for h in hits], _overlapped(view, old, hits))


def _with_endings(text: str, start: int, end: int, new: str) -> str:
    """``new`` (``\\n`` endings) written with the line endings ``text`` uses at ``start:end``.

    When the replacement has as many line breaks as the replaced text, each keeps the ending
    it replaces; otherwise the most common ending there is used (else the line's own, else
    the file's usual one).
    """
    if "\n" not in new or "\r" not in text:
        return new
    endings = [m.group() for m in _BREAK.finditer(text, start, end)]
    if len(endings) == new.count("\n"):
        pieces = new.split("\n")
        mapped = "".join(itertools.chain.from_iterable(zip(pieces, [*endings, ""], strict=True)))
        if normalize_newlines(mapped) == new:  # a CR and an LF that met would be one break
            return mapped
    if endings:
        newline = Counter(endings).most_common(1)[0][0]
    else:
        after = _BREAK.search(text, end)
        before = [m.group() for m in _BREAK.finditer(text, max(0, start - 4096), start)]
        newline = after.group() if after else before[-1] if before else dominant_newline(text)
    return new if newline == "\n" else new.replace("\n", newline)


def _line_list(numbers: list[int], total: int) -> str:
    shown = ", ".join(str(n) for n in numbers[:20])
    return shown + (f" and {total - 20} more" if total > 20 else "")


def plan_replacement(
    text: str, old_string: str, new_string: str, *, replace_all: bool = False
) -> tuple[str, list[Hunk]]:
    """Apply a search-and-replace to ``text``; return the new text and its minimal hunks.

    ``old_string`` must match exactly once (every match with ``replace_all``), compared on the
    model's view of the text (every line ending as ``\\n``). Each match becomes one hunk,
    trimmed to what really changes; the replacement uses the line ending found at the match.
    Raises :class:`EditError` with a message for the model when the edit cannot be made.
    """
    if old_string == "":
        raise EditError("old_string is empty: use write_file to create or overwrite a file.")
    old, new = normalize_newlines(old_string), normalize_newlines(new_string)
    if old == new:
        raise EditError(
            "old_string and new_string are identical"
            + (" apart from line endings" if old_string != new_string else "")
            + ": there is nothing to change."
        )
    found = _match(text, old, every=replace_all)
    if not found.spans:
        raise EditError(_not_found_message(text, old, new))
    if not replace_all and (len(found.spans) > 1 or found.overlapping):
        found = _match(text, old, every=True)
        total = len(found.spans)
        index = LineIndex(text)
        starts = [index.position(s, "utf-32")[0] + 1 for s, _ in found.spans[:20]]
        if total == 1:  # "aa" in "aaa": one match as replace_all counts, but two places
            raise EditError(
                f"old_string matches at two overlapping places (line {starts[0]}). Include "
                "more surrounding context to make it unique."
            )
        raise EditError(
            f"old_string matches {total} times (at lines {_line_list(starts, total)}). Include "
            "more surrounding context to make it unique, or set replace_all to change every "
            "occurrence."
        )
    spans = found.spans
    replacements = [_with_endings(text, start, end, new) for start, end in spans]
    pairs = list(zip(spans, replacements, strict=True))
    if any(text[s - 1 : s] == "\r" or r.endswith("\r") for (s, _), r in pairs):
        _keep_breaks_apart(text, spans, replacements)  # a CR meets an LF at a junction?
        pairs = list(zip(spans, replacements, strict=True))
    hunks = [h for (s, e), r in pairs for h in _review_hunks(s, text[s:e], r)]
    if found.needle is not None and len(set(replacements)) == 1 and sys.getsizeof(text) > _BIG:
        # The spans are the first non-overlapping occurrences of the needle: one C pass and no
        # temporary slices, which glibc maps fresh above its mmap threshold (32 MB at most)
        # and which then page-fault on every copy.
        new_text = text.replace(found.needle, replacements[0], len(spans))
    else:
        pieces: list[str] = []
        cursor = 0
        for (start, end), replacement in pairs:
            pieces += (text[cursor:start], replacement)
            cursor = end
        pieces.append(text[cursor:])
        new_text = "".join(pieces)
    return new_text, [h for h in hunks if h.start != h.end or h.new_text]


def _keep_breaks_apart(text: str, spans: list[tuple[int, int]], replacements: list[str]) -> None:
    """Stop a lone ``\\r`` and a ``\\n`` from meeting where a replacement joins the text.

    Deleting ``_`` from ``"\\r_\\n"`` would leave ``"\\r\\n"``: one line break where the
    model's view has two. Where that would happen, a ``\\n`` goes between them (inside the
    replacement), giving CRLF + LF: two line breaks, as the model meant.
    """
    last_char, last_rep = "", -1  # the output so far: its last character, and from which piece
    pending_empty = -1  # an empty replacement met since that character
    cursor = 0
    for k, ((start, end), replacement) in enumerate(zip(spans, replacements, strict=True)):
        kept = text[cursor:start]
        if kept:
            if last_char == "\r" and kept[0] == "\n":
                fix = last_rep if last_rep >= 0 else pending_empty
                replacements[fix] += "\n"
            last_char, last_rep, pending_empty = kept[-1], -1, -1
        replacement = replacements[k]
        if replacement:
            if last_char == "\r" and replacement[0] == "\n":
                if last_rep >= 0:
                    replacements[last_rep] += "\n"
                elif pending_empty >= 0:
                    replacements[pending_empty] = "\n"
                else:
                    replacements[k] = "\n" + replacement
            last_char, last_rep, pending_empty = replacements[k][-1], k, -1
        elif pending_empty < 0:
            pending_empty = k
        cursor = end
    rest = text[cursor : cursor + 1]
    if rest == "\n" and last_char == "\r":
        fix = last_rep if last_rep >= 0 else pending_empty
        replacements[fix] += "\n"


def plan_write(old_text: str, content: str) -> tuple[str, list[Hunk]]:
    """Overwrite ``old_text`` with the model's ``content``, keeping the file's line endings.

    ``content`` is in the model's view (``\\n``). Lines it keeps keep their own ending; new
    lines get the ending of the lines they replace, else the file's usual one. A byte-order
    mark that the editor kept at the start of its buffer stays.
    """
    new = normalize_newlines(content)
    if old_text.startswith("\ufeff") and not new.startswith("\ufeff"):
        new = "\ufeff" + new
    if "\r" in old_text:
        crlf = old_text.count("\r\n")
        if crlf == old_text.count("\n") == old_text.count("\r"):
            new = new.replace("\n", "\r\n")
        else:
            new = _restore_endings(old_text, new)
    return new, diff_hunks(old_text, new)


def _restore_endings(old_text: str, new: str) -> str:
    """``new`` (``\\n`` endings) with the endings of the mixed-ending ``old_text`` restored."""
    old_lines = _lines_keepends(old_text)
    new_lines = _lines_keepends(new)
    keys = [line[: len(line) - len(_ending_of(line))] + ("\n" if _ending_of(line) else "")
            for line in old_lines]  # fmt: skip
    usual = dominant_newline(old_text)
    out: list[str] = []
    matcher = difflib.SequenceMatcher(None, keys, new_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            out.extend(old_lines[i1:i2])
            continue
        replaced = Counter(_ending_of(line) for line in old_lines[i1:i2] if _ending_of(line))
        newline = replaced.most_common(1)[0][0] if replaced else usual
        out.extend(
            line[:-1] + newline if line.endswith("\n") else line for line in new_lines[j1:j2]
        )
    for i in range(1, len(out)):
        if out[i - 1].endswith("\r") and out[i].startswith("\n"):
            out[i - 1] += "\n"  # a lone CR then an empty LF line must not become one CRLF
    return "".join(out)


# -- when old_string is not found ------------------------------------------------------------


def _numbered(lines: list[str], first: int) -> str:
    """Lines as read_file shows them, numbered from ``first`` (1-based)."""
    shown = []
    for number, line in enumerate(lines[:HINT_LINES], start=first):
        if len(line) > HINT_LINE_CHARS:
            line = line[:HINT_LINE_CHARS] + " [...]"
        shown.append(f"{number:>6}\t{line}")
    if len(lines) > HINT_LINES:
        shown.append(f"   ... ({len(lines) - HINT_LINES} more lines)")
    return "\n".join(shown)


def _span_lines(view: str, start: int, end: int) -> tuple[int, int]:
    """1-based first and last line of ``view[start:end]`` (``view`` has ``\\n`` endings only)."""
    first = view.count("\n", 0, start) + 1
    last = first + view.count("\n", start, max(start, end - 1))
    return first, last


def _quote(view_lines: list[str], first: int, last: int) -> str:
    label = f"line {first}" if first == last else f"lines {first}-{last}"
    return f"{label}:\n{_numbered(view_lines[first - 1 : last], first)}"


def _line_number_hint(view: str, old: str) -> str | None:
    lines = [line for line in old.split("\n") if line.strip()]
    if not lines or not all(_LINE_NUMBER_PREFIX.match(line) for line in lines):
        return None
    stripped = "\n".join(_LINE_NUMBER_PREFIX.sub("", line) for line in old.split("\n"))
    if stripped and stripped in view:
        first, _ = _span_lines(view, view.find(stripped), view.find(stripped) + len(stripped))
        return (
            "old_string includes the line numbers and tab that read_file puts before each line; "
            f"leave them out (without them it matches at line {first})."
        )
    return "old_string seems to include the line-number prefixes read_file shows; leave them out."


def _leading(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _whitespace_hint(view: str, old: str) -> str | None:
    """Where ``old`` matches if whitespace (spaces, tabs, line breaks) is ignored."""
    chars = "".join(old.split())
    if not chars or len(chars) > 4000:
        return None
    pattern = re.compile(r"\s*".join(map(re.escape, chars)))
    found = list(itertools.islice(pattern.finditer(view), 4))
    if not found:
        return None
    lines = view.split("\n")
    first, last = _span_lines(view, found[0].start(), found[0].end())
    region = lines[first - 1 : last]
    wanted = old.strip("\n").split("\n")
    what = "whitespace or line breaks"
    if len(region) == len(wanted) and all(
        a.strip() == b.strip() for a, b in zip(region, wanted, strict=True)
    ):
        pairs = list(zip(region, wanted, strict=True))
        lead = any(_leading(a) != _leading(b) for a, b in pairs)
        trail = any(a[len(a.rstrip()) :] != b[len(b.rstrip()) :] for a, b in pairs)
        what = {
            (True, False): "indentation",
            (False, True): "trailing whitespace",
        }.get((lead, trail), "indentation and trailing whitespace")
    others = len(found) - 1
    more = f" (and {others}{'+' if others == 3 else ''} other places)" if others else ""
    return f"old_string differs only in {what} from the file's {_quote(lines, first, last)}{more}"


def _closest_hint(view: str, old: str) -> str | None:
    """The region of the file most like ``old``, line by line (as aider suggests)."""
    wanted = old.strip("\n").split("\n")
    lines = view.split("\n")
    size = len(wanted)
    anchors: dict[str, list[int]] = {}
    for j, line in enumerate(wanted):
        key = line.strip()
        if len(key) >= 4:  # short lines ("}", "") are everywhere and say nothing
            anchors.setdefault(key, []).append(j)
    votes: Counter[int] = Counter()
    if anchors:
        for i, line in enumerate(lines):
            for j in anchors.get(line.strip(), ()):
                votes[max(0, i - j)] += 1
    candidates = [start for start, _ in votes.most_common(20)]
    if not candidates and len(lines) <= 3000:
        candidates = list(range(max(1, len(lines) - size + 1)))
    matcher = difflib.SequenceMatcher(None, autojunk=False)
    matcher.set_seq2("\n".join(line.strip() for line in wanted))
    best, best_ratio = -1, 0.0
    for start in candidates:
        matcher.set_seq1("\n".join(line.strip() for line in lines[start : start + size]))
        if matcher.real_quick_ratio() <= best_ratio or matcher.quick_ratio() <= best_ratio:
            continue
        ratio = matcher.ratio()
        if ratio > best_ratio:
            best, best_ratio = start, ratio
    if best < 0 or best_ratio < 0.6:
        return None
    last = min(len(lines), best + size)
    return (
        f"The most similar text in the file ({best_ratio:.0%} alike) is at "
        f"{_quote(lines, best + 1, last)}"
    )


def _not_found_message(text: str, old: str, new: str) -> str:
    view = normalize_newlines(text)
    if view.startswith("\ufeff"):
        view = view[1:]  # read_file never shows it
    if not view:
        return "old_string was not found: the file is empty. Use write_file to give it content."
    parts = ["old_string was not found in the file."]
    if len(new.strip()) >= 3 and new in view:
        line = view.count("\n", 0, view.find(new)) + 1
        parts.append(
            f"new_string is already in the file (at line {line}): the change may have been "
            "made already."
        )
    hint = _line_number_hint(view, old) or _whitespace_hint(view, old) or _closest_hint(view, old)
    if hint:
        parts.append(hint)
    parts.append(
        "Read the file again and copy the text exactly, including whitespace and indentation."
    )
    return "\n".join(parts)


# -- diffs for people, and what landed -------------------------------------------------------


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
    not explained by any subset (the text was changed some other way too). When two subsets
    give the same text (``x`` → ``""`` twice in ``"xx"``), the one with the earlier hunks
    applied is returned. The search backtracks without recursion and never revisits a state.
    """
    order = sorted(range(len(hunks)), key=lambda i: (hunks[i].start, hunks[i].end))
    failed: set[tuple[int, int]] = set()
    # A frame: the next hunk (in text order), where ``current`` is at, the hunks applied so far.
    stack: list[tuple[int, int, tuple[int, ...]]] = [(0, 0, ())]
    while stack:
        k, cur_pos, landed = stack.pop()
        if (k, cur_pos) in failed:
            continue
        old_pos = hunks[order[k - 1]].end if k else 0
        if k == len(order):
            if current[cur_pos:] == old_text[old_pos:]:
                return sorted(landed)
            failed.add((k, cur_pos))
            continue
        hunk = hunks[order[k]]
        gap = old_text[old_pos : hunk.start]
        if not current.startswith(gap, cur_pos):
            failed.add((k, cur_pos))
            continue
        at = cur_pos + len(gap)
        failed.add((k, cur_pos))  # explored below; a later visit would find nothing new
        original = old_text[hunk.start : hunk.end]
        if current.startswith(original, at):
            stack.append((k + 1, at + len(original), landed))
        if current.startswith(hunk.new_text, at):
            stack.append((k + 1, at + len(hunk.new_text), (*landed, order[k])))
    return None


_HUNK_HEADER = re.compile(r"^@@ -(\d+)(,\d+)? \+(\d+)(,\d+)? @@", re.M)


def hunks_diff(label: str, old_text: str, hunks: list[Hunk], context: int = 3) -> str:
    """A unified diff of ``hunks`` over ``old_text``, computed on the changed window only.

    Cheap on large files: only the lines from the first hunk to the last (plus context) are
    compared, and the line numbers in the ``@@`` headers are those of the whole file.
    """
    if not hunks:
        return ""
    first = min(h.start for h in hunks)
    last = max(h.end for h in hunks)
    begin = old_text.rfind("\n", 0, first) + 1
    for _ in range(context):
        if begin == 0:
            break
        begin = old_text.rfind("\n", 0, begin - 1) + 1
    end = last
    for _ in range(context + 1):
        nxt = old_text.find("\n", end)
        if nxt == -1:
            end = len(old_text)
            break
        end = nxt + 1
    window = old_text[begin:end]
    shifted = [Hunk(h.start - begin, h.end - begin, h.new_text) for h in hunks]
    diff = unified_diff(label, window, apply_hunks(window, shifted), context)
    offset = old_text.count("\n", 0, begin)
    if not offset:
        return diff

    def renumber(match: re.Match[str]) -> str:
        old_start, old_len, new_start, new_len = match.groups()
        return (
            f"@@ -{int(old_start) + offset}{old_len or ''} "
            f"+{int(new_start) + offset}{new_len or ''} @@"
        )

    return _HUNK_HEADER.sub(renumber, diff)
