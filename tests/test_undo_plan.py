"""The revert planner: reverting over an untouched result gives the text before the run back;
the user's own lines are never overwritten."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agent_ls.agent.undo import revert_hunks
from agent_ls.edits import apply_hunks

LINE = st.sampled_from(["a\n", "b\n", "c\n", "\n", "d", "e\r\n"])
TEXT = st.lists(LINE, max_size=12).map("".join)


@settings(max_examples=400, deadline=None)
@given(TEXT, TEXT)
def test_revert_over_the_untouched_result_gives_the_old_text(before: str, after: str) -> None:
    hunks, skipped = revert_hunks(before, after, after)
    assert skipped == []
    assert apply_hunks(after, hunks) == before


@settings(max_examples=400, deadline=None)
@given(TEXT, TEXT, st.lists(LINE, min_size=1, max_size=3).map("".join), st.integers(0, 12))
def test_lines_the_user_added_survive_the_revert(
    before: str, after: str, mine: str, where: int
) -> None:
    lines = after.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"  # keep the user's insertion on its own lines
    at = min(where, len(lines))
    marked = "".join(f"MINE {line}" for line in mine.splitlines(keepends=True))
    if not marked.endswith("\n"):
        marked += "\n"
    current = "".join(lines[:at]) + marked + "".join(lines[at:])
    hunks, _skipped = revert_hunks(before, "".join(lines), current)
    reverted = apply_hunks(current, hunks)
    assert marked in reverted


def test_a_change_the_user_edited_is_left_and_named() -> None:
    before = "one\ntwo\nthree\nfour\n"
    after = "ONE\ntwo\nthree\nFOUR\n"
    current = "ONE\ntwo\nthree\nfour-ish\n"
    hunks, skipped = revert_hunks(before, after, current)
    assert apply_hunks(current, hunks) == "one\ntwo\nthree\nfour-ish\n"
    assert len(skipped) == 1 and "line 4" in skipped[0]
