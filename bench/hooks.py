"""What a trivial hook adds to each tool call.

    python bench/hooks.py [--rounds 7] [--calls 40]

A run of ``--calls`` turns with one ``read_file`` call each, in-process (the real loop and
tools, the script model answering at once), with no hooks, with a ``true`` PreToolUse hook,
and with ``true`` PreToolUse and PostToolUse hooks. The variants alternate round by round;
the added latency per call is the median difference over the number of calls. Target: at
most 15 ms for one ``true`` hook.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent_ls.agent.hooks import HookCommand, HookRunner
from agent_ls.agent.loop import AgentLoop
from agent_ls.agent.session import Session
from agent_ls.models.script import ScriptModel
from agent_ls.settings import Settings
from agent_ls.tools.registry import default_tools
from agent_ls.workspace import Workspace
from bench.parallel_tools import QuietPort

TARGET_MS = 15.0


async def one_run(root: Path, calls: int, events: tuple[str, ...]) -> float:
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "read_file", "input": {"file_path": "a.py"}}]}
        for _ in range(calls)
    ]
    turns.append({"text": "ok"})
    session = Session()
    port = QuietPort()
    hooks = [HookCommand(event, "true") for event in events]
    runner = HookRunner(hooks, root, session.id, port) if hooks else None
    loop = AgentLoop(
        session=session,
        model=ScriptModel({"turns": turns}),
        tools=default_tools(),
        workspace=Workspace([root]),
        port=port,
        settings=Settings(),
        system_prompt="bench",
        hooks=runner,
    )
    started = time.perf_counter()
    await loop.run("bench")
    return (time.perf_counter() - started) * 1000


VARIANTS: dict[str, tuple[str, ...]] = {
    "no hooks": (),
    "PreToolUse true": ("PreToolUse",),
    "PreToolUse + PostToolUse true": ("PreToolUse", "PostToolUse"),
}


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=40)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="agent-ls-bench-hooks-") as tmp:
        root = Path(tmp)
        (root / "a.py").write_text("x = 1\n" * 50)
        times: dict[str, list[float]] = {name: [] for name in VARIANTS}
        names = list(VARIANTS)
        await one_run(root, 3, ("PreToolUse",))  # warm imports and the page cache
        for r in range(args.rounds):
            for name in names[r % len(names) :] + names[: r % len(names)]:
                times[name].append(await one_run(root, args.calls, VARIANTS[name]))
    base = statistics.median(times["no hooks"])
    print(f"{args.calls} tool calls per run, {args.rounds} rounds (median, min-max of the run):")
    ok = True
    for name, values in times.items():
        med = statistics.median(values)
        added = (med - base) / args.calls
        line = f"  {name:32} {med:8.1f} ms ({min(values):.1f}-{max(values):.1f})"
        if name != "no hooks":
            line += f"  added per call {added:5.2f} ms"
            if name == "PreToolUse true":
                ok = added <= TARGET_MS
                line += f"  target <= {TARGET_MS:g} ms: {'pass' if ok else 'MISS'}"
        print(line)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
