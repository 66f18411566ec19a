"""The classifier reads a line as bash does (issue 12, item 5).

Each case pairs a harmless stand-in, run by real bash in a temp dir with ``touch`` (or ``find
-delete`` on a file made for it), with the dangerous line of the same shape, which is only
classified, never run. The stand-in shows what bash really does; the classifier must see the
same command.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from agent_ls.safety.shell import classify

# (stand-in for bash, files it leaves, dangerous line of the same shape, its decision, reason)
CASES = [
    # A backslash-newline inside a word joins it.
    ("tou\\\nch m", ["m"], "tr\\\nuncate -s0 f", "ask", "truncate changes file sizes"),
    ("touch m; find . -name m -de\\\nlete", [], "find . -de\\\nlete", "ask", "-delete"),
    (
        "touch m; find . -name m -ex\\\nec touch {}.x \\;",
        ["m", "m.x"],
        "find . -ex\\\nec sh -c id \\;",
        "ask",
        "-exec",
    ),
    ('"tou\\\nch" m', ["m"], '"r\\\nm" -rf /', "deny", "whole filesystem"),
    ("echo $(tou\\\nch m)", ["m"], "echo $(r\\\nm -rf /)", "deny", "whole filesystem"),
    ("echo `tou\\\nch m`", ["m"], "echo `r\\\nm x`", "ask", "rm deletes files"),
    ("cat <<E\n$\\\n(touch m)\nE", ["m"], "cat <<E\n$\\\n(rm x)\nE", "ask", "rm deletes files"),
    # ... but not in single quotes, $'...', comments or quoted here-docs.
    ("touch 'a\\\nb'", ["a\\\nb"], "echo 'r\\\nm -rf /'", "allow", "echo is read-only"),
    ("echo $'a\\\nb'", [], "echo $'r\\\nm -rf /'", "allow", "echo is read-only"),
    ("echo a # \\\ntouch m", ["m"], "echo a # \\\nrm x", "ask", "rm deletes files"),
    ("cat <<'E'\n$(touch m)\nE", [], "cat <<'E'\n$(rm -rf /)\nE", "allow", "cat is read-only"),
    # An escaped backslash before the newline is no continuation.
    ("echo a\\\\\ntouch m", ["m"], "echo a\\\\\nrm x", "ask", "rm deletes files"),
    # `#` starts a comment only at the start of a word; CR, VT and FF are not blanks for bash.
    ("echo a#; touch m", ["m"], "echo a#; rm x", "ask", "rm deletes files"),
    ("echo a\r#; touch m", ["m"], "echo a\r#; rm x", "ask", "rm deletes files"),
    ("echo a\v#; touch m", ["m"], "echo a\v#; rm x", "ask", "rm deletes files"),
    ("echo a\f#; touch m", ["m"], "echo a\f#; rm x", "ask", "rm deletes files"),
    ("echo a\\\r\ntouch m", ["m"], "echo a\\\r\nrm x", "ask", "rm deletes files"),
    ("echo a\t#; touch m", [], "echo a\t#; rm x", "allow", "echo is read-only"),
]


@pytest.mark.parametrize(("stand_in", "leaves", "line", "decision", "reason"), CASES)
def test_bash_and_the_classifier_agree(
    tmp_path: Path, stand_in: str, leaves: list[str], line: str, decision: str, reason: str
) -> None:
    subprocess.run(["bash", "-c", stand_in], cwd=tmp_path, capture_output=True, timeout=10)
    assert sorted(os.listdir(tmp_path)) == leaves, "bash did not do what the case says"
    verdict = classify(line)
    assert verdict.decision == decision, verdict.to_json()
    assert any(reason in r for r in verdict.reasons), verdict.reasons
