"""How long the agent's shell verdict takes: the classifier alone, and the whole check
(classifier + reads, secrets, other repositories) that ``run_shell`` and ``check-command`` do.

    python -m bench.check_command

Prints the median and p99 per command over the project's labelled corpus, in an empty
temporary workspace. Nothing is run: the lines are only parsed and judged.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from pathlib import Path

from agent_ls.safety.check import check_command
from agent_ls.safety.shell import classify

CORPUS = Path(__file__).parent.parent / "tests" / "data" / "shell_corpus.jsonl"


def _times(fn: object, commands: list[str]) -> list[float]:
    out = []
    for command in commands:
        start = time.perf_counter()
        fn(command)  # type: ignore[operator]
        out.append(time.perf_counter() - start)
    return out


def main() -> None:
    commands = [json.loads(line)["command"] for line in CORPUS.read_text().splitlines() if line]
    workspace = Path(tempfile.mkdtemp(prefix="bench-check-"))
    for command in commands[:20]:
        check_command(command, workspace)  # warm up the parser and imports
    for name, fn in (
        ("classify", classify),
        ("check_command", lambda c: check_command(c, workspace)),
    ):
        times = sorted(_times(fn, commands))
        p99 = times[int(len(times) * 0.99) - 1]
        print(
            f"{name:14s} {len(times)} commands: median {statistics.median(times) * 1e6:.0f} µs, "
            f"p99 {p99 * 1e6:.0f} µs"
        )


if __name__ == "__main__":
    main()
