"""Three concurrency-safe tool calls in one turn vs the slowest of them alone.

    python bench/parallel_tools.py [--rounds 5] [--tree DIR]

The agent loop runs consecutive read-only, concurrency-safe calls together; this measures a
turn of three grep_search calls against a turn with only the slowest one, side by side over
rounds (the loop, the real tools and rg; the script model answers instantly).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent_ls.agent.loop import AgentLoop
from agent_ls.agent.port import (
    Buffer,
    ConfirmRequest,
    Decision,
    EditOutcome,
    EditProposal,
    Unsupported,
)
from agent_ls.agent.session import Session
from agent_ls.models.script import ScriptModel
from agent_ls.settings import Settings
from agent_ls.tools.registry import default_tools
from agent_ls.workspace import Workspace

QUERIES = ["def __init__", "import (os|sys)", "class \\w+Error"]


class QuietPort:
    def open_buffer(self, path: Path) -> Buffer | None:
        return None

    async def confirm(self, request: ConfirmRequest) -> Decision:
        return Decision.DENY

    async def propose_edit(self, proposal: EditProposal) -> EditOutcome:
        return EditOutcome("rejected")

    async def save_documents(self, paths: list[Path]) -> list[Path]:
        raise Unsupported("bench")

    async def diagnostics(self, path: Path | None) -> list[dict[str, Any]]:
        raise Unsupported("bench")

    def update(self, session_id: str, update: dict[str, Any]) -> None:
        return None

    def progress(self, message: str, percentage: int | None = None) -> None:
        return None


async def one_turn(root: Path, queries: list[str]) -> float:
    calls = [{"name": "grep_search", "input": {"pattern": q}} for q in queries]
    loop = AgentLoop(
        session=Session(),
        model=ScriptModel({"turns": [{"tool_calls": calls}, {"text": "ok"}]}),
        tools=default_tools(),
        workspace=Workspace([root]),
        port=QuietPort(),
        settings=Settings(),
        system_prompt="bench",
    )
    started = time.perf_counter()
    await loop.run("bench")
    return (time.perf_counter() - started) * 1000


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    default_tree = Path(sys.prefix) / "lib"
    parser.add_argument("--tree", type=Path, default=default_tree)
    args = parser.parse_args()
    singles: dict[str, list[float]] = {q: [] for q in QUERIES}
    together: list[float] = []
    await one_turn(args.tree, QUERIES)  # warm the page cache
    for _ in range(args.rounds):
        together.append(await one_turn(args.tree, QUERIES))
        for q in QUERIES:
            singles[q].append(await one_turn(args.tree, [q]))
    slowest = max(statistics.median(v) for v in singles.values())
    both = statistics.median(together)
    print(f"tree: {args.tree}")
    for q, v in singles.items():
        print(f"  alone  {q!r:24} median {statistics.median(v):7.1f} ms")
    low, high = min(together), max(together)
    print(f"  three together       median {both:7.1f} ms (min {low:.1f}, max {high:.1f})")
    total = sum(statistics.median(v) for v in singles.values())
    print(f"  ratio to the slowest alone: {both / slowest:.2f}x")
    print(f"  ratio to the three one after another: {both / total:.2f}x")


if __name__ == "__main__":
    asyncio.run(main())
