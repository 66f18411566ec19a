"""The simulated editor's own position arithmetic, against positions worked out by hand (it is the
independent side of every end-to-end edit test, so it must be right on its own)."""

from __future__ import annotations

import pytest
from lsprotocol import types

from tests.editor_sim import BadEdit, apply_edits, line_starts, offset_of

TEXT = "a🎉b\r\n日x\rz\n"  # 🎉 is U+1F389 (2 UTF-16 units, 4 UTF-8 bytes); 日 is 3 UTF-8 bytes


def pos(line: int, character: int) -> types.Position:
    return types.Position(line=line, character=character)


def test_lines_break_at_crlf_cr_and_lf() -> None:
    assert line_starts(TEXT) == [0, 5, 8, 10]
    assert line_starts("") == [0]


@pytest.mark.parametrize(
    ("encoding", "before_b", "after_ri"),
    [("utf-8", 5, 3), ("utf-16", 3, 1), ("utf-32", 2, 1)],
)
def test_columns_per_encoding(encoding: str, before_b: int, after_ri: int) -> None:
    assert offset_of(TEXT, pos(0, before_b), encoding) == 2  # before "b"
    assert offset_of(TEXT, pos(1, after_ri), encoding) == 6  # after "日"
    assert offset_of(TEXT, pos(3, 0), encoding) == len(TEXT)


@pytest.mark.parametrize(
    ("position", "encoding"),
    [(pos(0, 2), "utf-16"), (pos(0, 3), "utf-8"), (pos(1, 1), "utf-8"), (pos(0, 9), "utf-16")],
)
def test_positions_that_point_nowhere_fail(position: types.Position, encoding: str) -> None:
    with pytest.raises(BadEdit):
        offset_of(TEXT, position, encoding)
    with pytest.raises(BadEdit):
        offset_of(TEXT, pos(4, 0), encoding)


def edit(a: tuple[int, int], b: tuple[int, int], new: str) -> types.TextEdit:
    return types.TextEdit(range=types.Range(start=pos(*a), end=pos(*b)), new_text=new)


def test_edits_refer_to_the_original_text_and_keep_insert_order() -> None:
    edits = [edit((1, 0), (1, 1), "月"), edit((0, 0), (0, 0), "1"), edit((0, 0), (0, 0), "2")]
    assert apply_edits(TEXT, edits, "utf-16", lambda i, e: True) == (
        "12a🎉b\r\n月x\rz\n",
        [0, 1, 2],
    )
    assert apply_edits(TEXT, edits, "utf-16", lambda i, e: i == 0)[0] == "a🎉b\r\n月x\rz\n"
    with pytest.raises(BadEdit, match="overlap"):
        apply_edits(TEXT, [edit((0, 0), (0, 2), ""), edit((0, 1), (0, 3), "")], "utf-32", print)
