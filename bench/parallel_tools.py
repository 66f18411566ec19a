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
from agent_ls.agent.session import Session
from agent_ls.models.script import ScriptModel
from agent_ls.ports.editor import (
    Buffer,
    ConfirmRequest,
    Decision,
    EditOutcome,
    EditProposal,
    Unsupported,
)
from agent_ls.settings import Settings
from agent_ls.tools.registry import default_tools
from agent_ls.workspace import Workspace

QUERIES = ["def __init__", "import (os|sys)", "class \\w+Error"]
EDITOR_DELAY = 0.2


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
        await asyncio.sleep(EDITOR_DELAY)  # an editor answering agent/getDiagnostics
        return []

    def update(self, session_id: str, update: dict[str, Any]) -> None:
        return None

    def progress(self, message: str, percentage: int | None = None) -> None:
        return None

    def log(self, message: str) -> None:
        return None


async def one_turn(root: Path, queries: list[str]) -> float:
    calls = [
        {"name": "get_diagnostics", "input": {}}
        if q == "diagnostics"
        else {"name": "grep_search", "input": {"pattern": q}}
        for q in queries
    ]
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


async def compare(tree: Path, queries: list[str], rounds: int) -> None:
    singles: dict[str, list[float]] = {q: [] for q in queries}
    together: list[float] = []
    await one_turn(tree, queries)  # warm the page cache
    for _ in range(rounds):
        together.append(await one_turn(tree, queries))
        for q in queries:
            singles[q].append(await one_turn(tree, [q]))
    slowest = max(statistics.median(v) for v in singles.values())
    both = statistics.median(together)
    for q, v in singles.items():
        print(f"  alone  {q!r:24} median {statistics.median(v):7.1f} ms")
    low, high = min(together), max(together)
    print(
        f"  {len(queries)} together           median {both:7.1f} ms (min {low:.1f}, max {high:.1f})"
    )
    total = sum(statistics.median(singles[q]) for q in queries)
    print(f"  ratio to the slowest alone: {both / slowest:.2f}x")
    print(f"  ratio to the calls one after another: {both / total:.2f}x")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    default_tree = Path(sys.prefix) / "lib"
    parser.add_argument("--tree", type=Path, default=default_tree)
    args = parser.parse_args()
    print(f"grep_search x3 (CPU-bound: rg already uses every core), tree {args.tree}:")
    await compare(args.tree, QUERIES, args.rounds)
    print(f"get_diagnostics x3 (waiting {EDITOR_DELAY * 1000:.0f} ms on the editor each):")
    await compare(args.tree, ["diagnostics", "diagnostics", "diagnostics"], args.rounds)


if __name__ == "__main__":
    asyncio.run(main())
