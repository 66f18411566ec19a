"""Property tests: edits turned into LSP ranges land exactly, in every position encoding.

The reference applier here is written from the LSP specification and shares no code with
``agent_ls.edits``: it splits lines itself (``\\r\\n``, ``\\r``, ``\\n`` and nothing else),
walks code points counting the units of the encoding, clamps a character past the end of a line
to the line's end and a line past the last line to the end of the text. Each example checks all
three encodings: ``EXAMPLES`` (2000) examples per encoding for the position and replacement
properties, half as many for the others (``AGENT_LS_PROPERTY_EXAMPLES`` raises it).
"""

from __future__ import annotations

import itertools
import os

from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from agent_ls.edits import (
    EditError,
    LineIndex,
    PositionEncoding,
    diff_hunks,
    landed_hunks,
    plan_replacement,
    plan_write,
)
from agent_ls.ports.editor import Hunk

ENCODINGS: list[PositionEncoding] = ["utf-8", "utf-16", "utf-32"]
EXAMPLES = int(os.environ.get("AGENT_LS_PROPERTY_EXAMPLES", "2000"))  # per encoding

# Characters that trip position code up: line breaks (CR and LF apart, so CRLF, lone CR and
# LF all come up), astral characters (emoji, a ZWJ sequence, a flag), CJK, a combining mark, a
# BOM, and separators that LSP does not treat as line breaks (U+2028, NEL, VT, FF).
CHARS = "ab_ \t\n\r\n\réñ\u0301中文한😀𝄞👩\u200d👧🇫🇷\ufeff\u2028\x85\x0b\x0c"
LF_CHARS = CHARS.replace("\r", "")

texts = st.text(alphabet=CHARS, max_size=40)
small_texts = st.text(alphabet=CHARS, max_size=6)
lf_texts = st.tuples(st.text(LF_CHARS, max_size=20), st.text(LF_CHARS, max_size=20)).map("\n".join)
cut_lists = st.lists(st.integers(0, 10**6), max_size=8)
new_texts = st.lists(small_texts, min_size=4, max_size=4)

PROPERTY = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
SECONDARY = settings(PROPERTY, max_examples=max(1, EXAMPLES // 2))  # keeps the file near 20 s

# -- the reference --------------------------------------------------------------------------


def ref_lines(text: str) -> list[tuple[int, int]]:
    """(start, end of content) of every line, per the LSP specification."""
    lines: list[tuple[int, int]] = []
    start = i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\r" or ch == "\n":
            end = i
            i += 2 if text[i : i + 2] == "\r\n" else 1
            lines.append((start, end))
            start = i
        else:
            i += 1
    lines.append((start, len(text)))
    return lines


def units(ch: str, encoding: str) -> int:
    if encoding == "utf-8":
        return len(ch.encode("utf-8"))
    if encoding == "utf-16":
        return 2 if ord(ch) > 0xFFFF else 1
    return 1


def ref_offset(
    text: str, line: int, character: int, encoding: str, lines: list[tuple[int, int]] | None = None
) -> int:
    lines = lines if lines is not None else ref_lines(text)
    if line >= len(lines):
        return len(text)
    i, end = lines[line]
    used = 0
    while i < end and used + units(text[i], encoding) <= character:
        used += units(text[i], encoding)
        i += 1
    return i


def ref_apply(
    text: str, edits: list[tuple[tuple[int, int], tuple[int, int], str]], encoding: str
) -> str:
    """Apply LSP text edits (ranges over the original text) the way an editor does."""
    lines = ref_lines(text)
    # Stable, by position only: inserts at one place keep the array's order (LSP), whatever text.
    offsets = [
        (ref_offset(text, *start, encoding, lines), ref_offset(text, *end, encoding, lines), new)
        for start, end, new in edits
    ]
    spans = sorted(offsets, key=lambda span: span[:2])
    out, cursor = [], 0
    for start, end, new in spans:
        assert cursor <= start <= end, "edits overlap"
        out.append(text[cursor:start] + new)
        cursor = end
    return "".join(out) + text[cursor:]


def ref_normalize(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        if text[i] == "\r":
            out.append("\n")
            i += 2 if text[i : i + 2] == "\r\n" else 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def addressable(text: str) -> list[int]:
    """Offsets an LSP position can name: all but those between a CR and its LF."""
    return [
        o for o in range(len(text) + 1) if not (0 < o < len(text) and text[o - 1 : o + 1] == "\r\n")
    ]


def as_edits(
    text: str, hunks: list[Hunk], encoding: PositionEncoding
) -> list[tuple[tuple[int, int], tuple[int, int], str]]:
    index = LineIndex(text)
    return [
        (index.position(h.start, encoding), index.position(h.end, encoding), h.new_text)
        for h in hunks
    ]


def by_slicing(text: str, hunks: list[Hunk]) -> str:
    out, cursor = [], 0
    for h in sorted(hunks, key=lambda h: h.start):
        out.append(text[cursor : h.start] + h.new_text)
        cursor = h.end
    return "".join(out) + text[cursor:]


def make_hunks(text: str, cuts: list[int], news: list[str]) -> list[Hunk]:
    """Non-overlapping hunks over ``text`` at offsets LSP can address."""
    points = addressable(text)
    offsets = sorted(points[c % len(points)] for c in cuts)
    hunks: list[Hunk] = []
    for k in range(0, len(offsets) - 1, 2):
        start, end = offsets[k], offsets[k + 1]
        if hunks and hunks[-1].start == hunks[-1].end == start == end:
            continue  # two insertions at one point have no defined order
        hunks.append(Hunk(start, end, news[k // 2]))
    return hunks


# -- properties -------------------------------------------------------------------------------


@PROPERTY
@given(texts, cut_lists, new_texts)
def test_hunks_as_lsp_edits_land_exactly(text: str, cuts: list[int], news: list[str]) -> None:
    hunks = make_hunks(text, cuts, news)
    expected = by_slicing(text, hunks)
    for encoding in ENCODINGS:
        assert ref_apply(text, as_edits(text, hunks, encoding), encoding) == expected, encoding


@PROPERTY
@given(texts, st.integers(0, 50), st.integers(0, 12))
def test_offset_and_position_round_trip_and_match_the_reference(
    text: str, line: int, character: int
) -> None:
    index = LineIndex(text)
    lines = ref_lines(text)
    for encoding in ENCODINGS:
        previous = (-1, 0)
        for offset in addressable(text):
            position = index.position(offset, encoding)
            assert position > previous  # strictly increasing
            previous = position
            assert index.offset(*position, encoding) == offset
            assert ref_offset(text, *position, encoding, lines) == offset
        # any position, also past the end of a line or of the text, or inside a character
        line = line % (len(lines) + 2)
        expected = ref_offset(text, line, character, encoding, lines)
        assert index.offset(line, character, encoding) == expected


@PROPERTY
@given(texts, st.integers(0, 10**6), st.integers(1, 12), small_texts, st.booleans())
@example("\r\r", 0, 1, "_\r\ra", True)  # two inserts at one place: their order is the array's
def test_plan_replacement_lands_exactly_and_keeps_line_endings(
    text: str, at: int, length: int, new: str, replace_all: bool
) -> None:
    view = ref_normalize(text)
    assume(view)
    i = at % len(view)
    old = view[i : i + length]
    new_view = ref_normalize(new)
    assume(new_view != old)
    places = sum(1 for k in range(len(view)) if view.startswith(old, k))
    try:
        new_text, hunks = plan_replacement(text, old, new, replace_all=replace_all)
    except EditError:
        assert places > 1 and not replace_all
        return
    assert replace_all or places == 1
    assert ref_normalize(new_text) == view.replace(old, new_view)
    for encoding in ENCODINGS:
        assert ref_apply(text, as_edits(text, hunks, encoding), encoding) == new_text, encoding
    # Line endings: a CRLF-only file stays CRLF-only, an LF-only file LF-only.
    crlf = text.count("\r\n")
    if crlf and crlf == text.count("\n") == text.count("\r"):
        assert new_text.count("\r\n") == new_text.count("\n") == new_text.count("\r")
    if "\r" not in text:
        assert "\r" not in new_text


@SECONDARY
@given(lf_texts, st.integers(0, 10**6), st.integers(1, 12), st.text(LF_CHARS, max_size=6))
def test_crlf_file_edited_through_the_lf_view(text: str, at: int, length: int, new: str) -> None:
    """The model sees LF; the CRLF file gets exactly the LF result written with CRLF."""
    i = at % len(text)
    old = text[i : i + length]
    assume(old != new)
    crlf_text = text.replace("\n", "\r\n")
    try:
        new_text, hunks = plan_replacement(crlf_text, old, new)
    except EditError:
        assert sum(1 for k in range(len(text)) if text.startswith(old, k)) > 1
        return
    assert new_text == text.replace(old, new).replace("\n", "\r\n")
    for encoding in ENCODINGS:
        assert ref_apply(crlf_text, as_edits(crlf_text, hunks, encoding), encoding) == new_text


@SECONDARY
@given(texts, texts)
def test_plan_write_lands_exactly_and_keeps_endings(old: str, content: str) -> None:
    new_text, hunks = plan_write(old, content)
    expected_view = ref_normalize(content)
    if old.startswith("\ufeff") and not expected_view.startswith("\ufeff"):
        expected_view = "\ufeff" + expected_view
    assert ref_normalize(new_text) == expected_view
    for encoding in ENCODINGS:
        assert ref_apply(old, as_edits(old, hunks, encoding), encoding) == new_text, encoding
    if "\r" not in old:
        assert "\r" not in new_text
    crlf = old.count("\r\n")
    if crlf and crlf == old.count("\n") == old.count("\r"):
        assert new_text.count("\r\n") == new_text.count("\n") == new_text.count("\r")


@SECONDARY
@given(texts, texts, cut_lists, new_texts)
def test_diff_hunks_land_exactly(old: str, other: str, cuts: list[int], news: list[str]) -> None:
    """From a text to an unrelated one, and to close variants changed at any character."""
    variants = [other]
    for cut, piece in zip(cuts, news, strict=False):
        at = cut % (len(old) + 1)
        variants.append(old[:at] + piece + old[at + 1 :])  # also just the CR or LF of a CRLF
    for new in variants:
        hunks = diff_hunks(old, new)
        for encoding in ENCODINGS:
            assert ref_apply(old, as_edits(old, hunks, encoding), encoding) == new, encoding


@SECONDARY
@given(texts, cut_lists, new_texts, st.integers(0, 15), st.integers(0, 10**6))
def test_landed_hunks_recognises_any_subset_and_nothing_else(
    text: str, cuts: list[int], news: list[str], mask: int, at: int
) -> None:
    hunks = [h for h in make_hunks(text, cuts, news) if text[h.start : h.end] != h.new_text]
    chosen = [i for i in range(len(hunks)) if mask >> i & 1]
    current = by_slicing(text, [hunks[i] for i in chosen])

    def explaining(target: str) -> list[list[int]]:
        return [
            list(subset)
            for r in range(len(hunks) + 1)
            for subset in itertools.combinations(range(len(hunks)), r)
            if by_slicing(text, [hunks[i] for i in subset]) == target
        ]

    landed = landed_hunks(text, hunks, current)
    assert landed is not None
    assert by_slicing(text, [hunks[i] for i in landed]) == current
    candidates = explaining(current)
    assert landed in candidates
    if len(candidates) == 1:
        assert landed == chosen
    # Changed some other way too: a character no text or hunk holds → never explained.
    where = at % (len(current) + 1)
    assert landed_hunks(text, hunks, current[:where] + "§" + current[where:]) is None
    # A character dropped: explained only if some subset really gives that text.
    if current:
        where = at % len(current)
        damaged = current[:where] + current[where + 1 :]
        result = landed_hunks(text, hunks, damaged)
        if explaining(damaged):
            assert result is not None
            assert by_slicing(text, [hunks[i] for i in result]) == damaged
        else:
            assert result is None
