"""Search-and-replace, minimal hunks and LSP positions: the cases people get wrong."""

from __future__ import annotations

import pytest

from agent_ls import edits
from agent_ls.edits import (
    EditError,
    LineIndex,
    PositionEncoding,
    apply_hunks,
    diff_hunks,
    dominant_newline,
    landed_hunks,
    normalize_newlines,
    plan_replacement,
    plan_write,
    split_lines,
)
from agent_ls.ports.editor import Hunk

ENCODINGS: list[PositionEncoding] = ["utf-8", "utf-16", "utf-32"]
BLOCK = edits._BLOCK


# -- positions ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "offset", "expected"),
    [
        # emoji: 1 code point, 2 UTF-16 units, 4 UTF-8 bytes
        ("a😀b", 2, {"utf-8": (0, 5), "utf-16": (0, 3), "utf-32": (0, 2)}),
        # CJK: 1 code point, 1 UTF-16 unit, 3 UTF-8 bytes
        ("x\n中文z", 5, {"utf-8": (1, 7), "utf-16": (1, 3), "utf-32": (1, 3)}),
        # combining mark: e + U+0301 are two code points
        ("e\u0301x", 2, {"utf-8": (0, 3), "utf-16": (0, 2), "utf-32": (0, 2)}),
        # ZWJ family: 5 code points, 8 UTF-16 units
        ("👩\u200d👩\u200d👧!", 5, {"utf-8": (0, 18), "utf-16": (0, 8), "utf-32": (0, 5)}),
        # a BOM character left in a buffer is a character like any other
        ("\ufeffab", 2, {"utf-8": (0, 4), "utf-16": (0, 2), "utf-32": (0, 2)}),
        # CRLF, lone CR and LF all break lines
        ("a\r\nb\rc\nd", 7, {"utf-8": (3, 0), "utf-16": (3, 0), "utf-32": (3, 0)}),
        ("a\r\nb\rc\nd", 5, {"utf-8": (2, 0), "utf-16": (2, 0), "utf-32": (2, 0)}),
        # ...but U+2028, NEL, VT and FF do not
        ("a\u2028b\x85c\x0bd\x0ce", 9, {"utf-8": (0, 12), "utf-16": (0, 9), "utf-32": (0, 9)}),
        # the very end, with and without a final newline
        ("ab\n", 3, {"utf-8": (1, 0), "utf-16": (1, 0), "utf-32": (1, 0)}),
        ("ab😀", 3, {"utf-8": (0, 6), "utf-16": (0, 4), "utf-32": (0, 3)}),
        ("", 0, {"utf-8": (0, 0), "utf-16": (0, 0), "utf-32": (0, 0)}),
    ],
)
def test_position(text: str, offset: int, expected: dict[str, tuple[int, int]]) -> None:
    index = LineIndex(text)
    for encoding in ENCODINGS:
        assert index.position(offset, encoding) == expected[encoding], encoding
        assert index.offset(*expected[encoding], encoding) == offset, encoding


def test_offset_inside_a_crlf_is_the_end_of_its_line() -> None:
    index = LineIndex("ab\r\ncd")
    assert index.position(3) == (0, 2) == index.position(2)
    assert index.snap(3) == 2
    assert index.position(99) == (1, 2) and index.position(-5) == (0, 0)


def test_offsets_clamp_as_the_lsp_spec_says() -> None:
    text = "a😀\r\nxyz\rq"
    index = LineIndex(text)
    # past the end of a line: the end of the line, before its line ending
    assert index.offset(0, 99, "utf-16") == 2
    assert index.offset(1, 4, "utf-8") == 7
    # past the last line: the end of the text
    assert index.offset(5, 0) == len(text)
    assert index.offset(2, 7) == len(text)
    # negative values: the start
    assert index.offset(-1, 3) == 2 and index.offset(1, -2) == 4  # line 0, char 3


def test_offset_inside_a_code_point_rounds_down() -> None:
    index = LineIndex("a😀b")
    assert index.offset(0, 2, "utf-16") == 1  # half a surrogate pair
    assert [index.offset(0, c, "utf-8") for c in range(7)] == [0, 1, 1, 1, 1, 2, 3]


def test_line_count_and_line_starts() -> None:
    index = LineIndex("a\r\nb\rc\n")
    assert index.line_count == 4
    assert index.line_starts == [0, 3, 5, 7]
    assert LineIndex("").line_count == 1
    assert split_lines("a\r\nb\rc\n") == ["a", "b", "c"]
    assert split_lines("") == [] and split_lines("\n") == [""]
    assert LineIndex("a\rb\r\nc").position(5, "utf-32") == (2, 0)


def test_big_text_positions_and_offsets_far_from_each_other() -> None:
    block = "é → 😀 line\n" * 5000 + "x\r\ny\rz\n"
    text = block * 8
    index = LineIndex(text)
    expected_lines = normalize_newlines(text).split("\n")
    for offset in [0, 5, len(text) // 3, len(text) // 2 + 7, len(text) - 3, len(text)]:
        line, char = index.position(offset, "utf-32")
        start = index.offset(line, 0, "utf-32")
        assert text[start:offset] == expected_lines[line][:char]
        for encoding in ENCODINGS:
            assert index.offset(*index.position(offset, encoding), encoding) == index.snap(offset)
    # queries in any order on the same index agree with a fresh index
    for offset in [len(text) - 1, 3, len(text) // 2]:
        assert index.position(offset) == LineIndex(text).position(offset)
    assert index.line_count == len(expected_lines)


def test_block_boundaries_never_split_a_crlf() -> None:
    # Put a CRLF across every possible block boundary near the block size.
    for pad in range(BLOCK - 5, BLOCK + 5):
        text = "a" * pad + "\r\n" + "b\r\n" * 3
        index = LineIndex(text)
        assert index.position(len(text)) == (4, 0)
        assert index.offset(1, 0) == pad + 2


# -- search and replace -------------------------------------------------------------------------


def test_unique_replacement_gives_one_trimmed_hunk() -> None:
    text = "def greet(name):\n    return 'Hello ' + name\n"
    new_text, hunks = plan_replacement(text, "return 'Hello ' + name", "return 'Hi ' + name")
    assert new_text == "def greet(name):\n    return 'Hi ' + name\n"
    assert hunks == [Hunk(30, 34, "i")]  # "H" is common
    assert apply_hunks(text, hunks) == new_text


def test_uniqueness_error_gives_count_and_lines() -> None:
    text = "x = 1\ny = 2\nx = 1\n\nx = 1\n"
    with pytest.raises(EditError, match=r"matches 3 times \(at lines 1, 3, 5\)"):
        plan_replacement(text, "x = 1", "x = 2")
    with pytest.raises(EditError, match="overlapping"):
        plan_replacement("aaa", "aa", "b")


def test_replace_all_makes_a_hunk_per_occurrence() -> None:
    text = "foo(1)\nbar\nfoo(2)\r\nfoo(3)"
    new_text, hunks = plan_replacement(text, "foo", "fooBar", replace_all=True)
    assert new_text == "fooBar(1)\nbar\nfooBar(2)\r\nfooBar(3)"
    assert hunks == [Hunk(3, 3, "Bar"), Hunk(14, 14, "Bar"), Hunk(22, 22, "Bar")]


def test_empty_and_identical_strings_are_refused() -> None:
    with pytest.raises(EditError, match="empty"):
        plan_replacement("abc", "", "x")
    with pytest.raises(EditError, match="identical"):
        plan_replacement("abc", "b", "b")
    with pytest.raises(EditError, match="apart from line endings"):
        plan_replacement("a\nb", "a\nb", "a\r\nb")


def test_crlf_file_matches_lf_old_string_and_keeps_crlf() -> None:
    text = "one\r\ntwo\r\nthree\r\n"
    new_text, hunks = plan_replacement(text, "one\ntwo\n", "one\n2\nand a half\n")
    assert new_text == "one\r\n2\r\nand a half\r\nthree\r\n"
    assert apply_hunks(text, hunks) == new_text
    assert all("\n" not in h.new_text.replace("\r\n", "") for h in hunks)


def test_cr_only_file() -> None:
    text = "one\rtwo\rthree"
    new_text, _ = plan_replacement(text, "two\nthree", "2\n3\n4")
    assert new_text == "one\r2\r3\r4"


def test_mixed_endings_keep_each_line_s_ending() -> None:
    text = "a\nb\r\nc\rd\n"
    new_text, hunks = plan_replacement(text, "b\nc\nd", "B\nC\nD")
    assert new_text == "a\nB\r\nC\rD\n"
    assert apply_hunks(text, hunks) == new_text
    # a different number of lines: the most common ending of the replaced region
    new_text, _ = plan_replacement("a\nb\r\nc\r\nd\n", "b\nc\n", "x\ny\nz\n")
    assert new_text == "a\nx\r\ny\r\nz\r\nd\n"
    # a multi-line replacement of a single-line match takes its line's ending
    new_text, _ = plan_replacement("a\nb\r\nc\n", "b", "b1\nb2")
    assert new_text == "a\nb1\r\nb2\r\nc\n"


def test_a_lone_cr_and_an_lf_never_merge_into_one_line_break() -> None:
    # Deleting "_" from "\r_\n" must leave two line breaks, as the model's view has.
    new_text, hunks = plan_replacement("x\r_\ny", "_", "")
    assert normalize_newlines(new_text) == "x\n\ny"
    assert apply_hunks("x\r_\ny", hunks) == new_text
    new_text, _ = plan_replacement("a\rb\n\nc", "b\n", "")  # the LF after b is LF, the next LF
    assert normalize_newlines(new_text) == "a\n\nc"
    new_text, _ = plan_replacement("a\rb\nc", "a\nb\nc", "\n\n")  # CR, LF kept apart
    assert normalize_newlines(new_text) == "\n\n"
    new_text, _ = plan_write("a\rb\n", "a\n\nb\n")
    assert normalize_newlines(new_text) == "a\n\nb\n"


def test_hunks_never_split_a_crlf() -> None:
    old, new = "a\r\nb", "a\rX\r\nb"
    hunks = diff_hunks(old, new)
    index = LineIndex(old)
    for hunk in hunks:
        assert index.snap(hunk.start) == hunk.start and index.snap(hunk.end) == hunk.end
    assert apply_hunks(old, hunks) == new
    # a line ending changed from CRLF to LF: the hunk covers the whole CRLF
    hunks = diff_hunks("x\r\ny", "x\ny")
    assert hunks == [Hunk(1, 3, "\n")]


def test_edits_at_the_very_end_and_in_an_empty_file() -> None:
    new_text, hunks = plan_replacement("abc", "c", "c\n")
    assert new_text == "abc\n" and hunks == [Hunk(3, 3, "\n")]
    index = LineIndex("abc")
    assert index.position(3) == (0, 3)
    new_text, hunks = plan_write("", "hello\n")
    assert new_text == "hello\n" and hunks == [Hunk(0, 0, "hello\n")]
    with pytest.raises(EditError, match="file is empty"):
        plan_replacement("", "x", "y")


def test_replacement_deleting_everything() -> None:
    new_text, hunks = plan_replacement("only line\n", "only line\n", "")
    assert new_text == "" and hunks == [Hunk(0, 10, "")]


# -- hints when old_string is not found ---------------------------------------------------------

SOURCE = """def greet(name):
    if not name:
        return "nobody"
    return "Hello " + name


def main():
    print(greet("world"))
"""


def _error(text: str, old: str, new: str = "x") -> str:
    with pytest.raises(EditError) as info:
        plan_replacement(text, old, new)
    return str(info.value)


def test_hint_for_indentation_only() -> None:
    message = _error(SOURCE, "if not name:\n  return 'nobody'")  # quotes differ: not whitespace
    assert "differs only" not in message
    message = _error(SOURCE, '  if not name:\n      return "nobody"')
    assert "differs only in indentation from the file's lines 2-3" in message
    assert '     3\t        return "nobody"' in message


def test_hint_for_other_whitespace() -> None:
    message = _error(SOURCE, 'return "Hello "+name')
    assert "differs only in whitespace or line breaks from the file's line 4" in message
    message = _error(SOURCE, 'def main():   \n    print(greet("world"))')
    assert "differs only in trailing whitespace" in message


def test_hint_for_line_number_prefixes() -> None:
    message = _error(SOURCE, '     7\tdef main():\n     8\t    print(greet("world"))')
    assert "line numbers" in message and "matches at line 7" in message


def test_hint_with_the_closest_region() -> None:
    message = _error(SOURCE, 'def greet(name):\n    if name is None:\n        return "nobody"')
    assert "most similar text in the file" in message
    assert "lines 1-3" in message and "     2\t    if not name:" in message


def test_hint_when_new_string_is_already_there() -> None:
    message = _error(SOURCE, 'print(greet("moon"))', 'print(greet("world"))')
    assert "new_string is already in the file (at line 8)" in message


def test_not_found_in_crlf_file_quotes_lines_without_cr() -> None:
    text = SOURCE.replace("\n", "\r\n")
    message = _error(text, '  if not name:\n      return "nobody"')
    assert "\r" not in message and "lines 2-3" in message


def test_hints_stay_quick_on_a_big_file() -> None:
    import time

    big = "value_{0} = compute({0})  # é\n"
    text = "".join(big.format(i) for i in range(100_000))
    started = time.perf_counter()
    message = _error(text, "value_99999 = compute( 99999 )")
    assert "line 100000" in message
    message = _error(text, "something that is nowhere at all\nand more of it")
    assert time.perf_counter() - started < 5


# -- whole-file writes ---------------------------------------------------------------------------


def test_plan_write_keeps_crlf_and_mixed_endings() -> None:
    new_text, hunks = plan_write("a\r\nb\r\n", "a\nB\nc\n")
    assert new_text == "a\r\nB\r\nc\r\n"
    assert apply_hunks("a\r\nb\r\n", hunks) == new_text
    old = "keep\r\nlf\nold\rend"
    new_text, hunks = plan_write(old, "keep\nlf\nnew\nend")
    assert new_text == "keep\r\nlf\nnew\rend"
    assert apply_hunks(old, hunks) == new_text
    assert dominant_newline("a\r\nb\r\nc\n") == "\r\n" and dominant_newline("abc") == "\n"


def test_plan_write_keeps_a_bom_character_in_the_buffer() -> None:
    new_text, hunks = plan_write("\ufeffa\nb\n", "a\nc\n")
    assert new_text == "\ufeffa\nc\n" and hunks == [Hunk(3, 4, "c")]


def test_diff_hunks_are_minimal_and_separate() -> None:
    old = "".join(f"line {i}\n" for i in range(100))
    new = old.replace("line 10\n", "line ten\n").replace("line 80\n", "")
    hunks = diff_hunks(old, new)
    assert len(hunks) == 2
    assert apply_hunks(old, hunks) == new
    assert diff_hunks(old, old) == []


# -- what landed ---------------------------------------------------------------------------------


def test_landed_hunks_recognises_subsets_and_other_changes() -> None:
    old = "a b c d"
    hunks = [Hunk(0, 1, "A"), Hunk(4, 5, "C"), Hunk(6, 7, "")]
    assert landed_hunks(old, hunks, "A b C ") == [0, 1, 2]
    assert landed_hunks(old, hunks, "a b C d") == [1]
    assert landed_hunks(old, hunks, old) == []
    assert landed_hunks(old, hunks, "A b c d!") is None
    assert landed_hunks(old, hunks, "A B C ") is None


def test_landed_hunks_handles_thousands_of_hunks() -> None:
    old = "x," * 5000
    new_text, hunks = plan_replacement(old, "x", "yy", replace_all=True)
    assert len(hunks) == 5000
    assert landed_hunks(old, hunks, new_text) == list(range(5000))
    half = apply_hunks(old, hunks[::2])
    assert landed_hunks(old, hunks, half) == list(range(0, 5000, 2))


def test_landed_hunks_with_ambiguous_subsets_reproduces_the_text() -> None:
    old = "xx"
    _, hunks = plan_replacement(old, "x", "", replace_all=True)
    landed = landed_hunks(old, hunks, "x")
    assert landed in ([0], [1])
    assert apply_hunks(old, [hunks[i] for i in landed or []]) == "x"


def test_hunks_diff_numbers_lines_of_the_whole_file() -> None:
    from agent_ls.edits import hunks_diff, unified_diff

    old = "".join(f"line {i}\n" for i in range(1, 101))
    new_text, hunks = plan_replacement(old, "line 50\n", "line fifty\n")
    diff = hunks_diff("f.txt", old, hunks)
    assert "@@ -47,7 +47,7 @@" in diff
    assert "-line 50\n+line fifty\n" in diff
    assert diff == unified_diff("f.txt", old, new_text)
