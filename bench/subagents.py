"""Sub-agents: parallel children, the cost of spawning one, and the memory of an idle one.

    python bench/subagents.py [--rounds 5] [--latency 0.3] [--idle 50]

1. Parallel: a parent turn with three ``task`` calls to ``explore`` children, each child
   waiting ``--latency`` on the model (the real anthropic SDK against the local fake API),
   against the same turn with one child. Targets: three together ≤ 1.3× one alone.
2. Overhead: per child, from the task's start (its ``in_progress`` update) to its first request
   arriving at the fake API (session, transcript, tools, prompt, SDK request). Target ≤ 20 ms.
3. Memory: ``--idle`` children spawned at once, each waiting on a model that never answers;
   the RSS growth per child. Target ≤ 5 MB.
4. Time limit: a child waiting on a model that never answers, ``subagentTimeoutMs`` 200; the
   time from the limit to the ``task`` result (the child stopped, its result built).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent_ls.agent.loop import AgentLoop
from agent_ls.agent.session import Session
from agent_ls.agent.store import SessionStore
from agent_ls.agent.subagents import SubagentCatalog, SubagentHost
from agent_ls.ports.editor import (
    Buffer,
    ConfirmRequest,
    Decision,
    EditOutcome,
    EditProposal,
    Unsupported,
)
from agent_ls.ports.model import Model, ModelEvent, ModelRequest
from agent_ls.settings import Settings
from agent_ls.tools.base import ToolContext
from agent_ls.tools.registry import default_tools
from agent_ls.workspace import Workspace
from tests.fakeapi import FakeAPI, Turn

parent_sdk: list[float] = []  # the parent's own request: handed to the SDK → at the fake API


class RecordingPort:
    """An editor that answers nothing and notes when each tool call started."""

    def __init__(self) -> None:
        self.started: dict[str, float] = {}

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
        if update.get("sessionUpdate") == "tool_call_update" and update.get("status") == (
            "in_progress"
        ):
            self.started.setdefault(str(update["toolCallId"]), time.perf_counter())

    def progress(self, message: str, percentage: int | None = None) -> None:
        return None


class Timed:
    """The SDK model, noting when the agent hands each request to it (by its first text)."""

    def __init__(self, inner: Model):
        self.inner = inner
        self.name = inner.name
        self.context_window = inner.context_window
        self.calls: dict[str, float] = {}

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        first = request.messages[0].text() if request.messages else ""
        self.calls.setdefault(first, time.perf_counter())
        return self.inner.stream(request)

    async def warm(self) -> None:
        await self.inner.warm()


def sdk_model(api: FakeAPI) -> Timed:
    os.environ["ANTHROPIC_BASE_URL"] = api.url
    os.environ["ANTHROPIC_API_KEY"] = "bench-key"
    from agent_ls.models import load_model

    return Timed(load_model("anthropic:claude-sonnet-5-5"))


def parent_loop(
    model: Model, catalog: SubagentCatalog, root: Path, store: SessionStore, port: RecordingPort
) -> AgentLoop:
    loop = AgentLoop(
        session=Session(store=store),
        model=model,
        tools=catalog.parent_tools,
        workspace=Workspace([root]),
        port=port,
        settings=Settings(),
        system_prompt="bench parent",
    )
    SubagentHost(catalog, loop, lambda requested: model)
    return loop


async def one_turn(
    api: FakeAPI, model: Timed, catalog: SubagentCatalog, root: Path, store: SessionStore,
    children: int, latency: float,
) -> tuple[float, list[float], list[float]]:
    """Wall time of the task batch (ms); per child, spawn → its first request handed to the
    SDK, and spawn → that request arriving at the fake API (ms)."""
    ids = [f"toolu_bench_{i}_{time.perf_counter_ns()}" for i in range(children)]
    uses = [
        ("task", {"description": f"look {i}", "prompt": f"bench child {ids[i]}",
                  "agent": "explore"}, ids[i])
        for i in range(children)
    ]
    api.enqueue(Turn(tool_uses=uses))
    api.enqueue(*[Turn(text="found it", latency=latency) for _ in range(children)])
    api.enqueue(Turn(text="done"))
    port = RecordingPort()
    loop = parent_loop(model, catalog, root, store, port)
    seen = len(api.requests)
    result = await loop.run("bench")
    assert result.stop_reason == "end_turn", result
    done = time.perf_counter()
    requests = api.requests[seen:]
    parent_sdk.append((requests[0].at - model.calls.pop("bench")) * 1000)
    overheads, ours = [], []
    for call_id in ids:
        first = next(r for r in requests if call_id in str(r.body.get("messages")))
        overheads.append((first.at - port.started[call_id]) * 1000)
        ours.append((model.calls[f"bench child {call_id}"] - port.started[call_id]) * 1000)
    # The batch ends when the parent's second request arrives.
    wall = (requests[-1].at - min(port.started[c] for c in ids)) * 1000
    del done
    return wall, ours, overheads


class Waiting:
    """A model that never answers: a child waiting on it is idle."""

    name = "bench:waiting"
    context_window = 200_000

    def __init__(self) -> None:
        self.waiting = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.waiting += 1
        await asyncio.Event().wait()
        yield  # type: ignore[misc]  # never reached: makes this an async generator

    async def warm(self) -> None:
        return None


def rss_kb() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


async def idle_children(
    catalog: SubagentCatalog, root: Path, store: SessionStore, n: int
) -> tuple[float, float]:
    """RSS growth and Python allocations per idle child, KB."""
    model = Waiting()
    port = RecordingPort()
    loop = AgentLoop(
        session=Session(store=store), model=model, tools=catalog.parent_tools,
        workspace=Workspace([root]), port=port, settings=Settings(), system_prompt="bench",
    )
    host = SubagentHost(catalog, loop, lambda requested: model)
    host._slots = asyncio.Semaphore(n + 1)

    def ctx(i: int) -> ToolContext:
        return ToolContext(
            workspace=loop.workspace, port=port, read_state=loop.session.read_state,
            permissions=loop.session.permissions, settings=loop.settings,
            session_id=loop.session.id, tool_call_id=f"toolu_idle_{i}", subagents=host,
        )

    # One child first, so the per-child figure leaves out one-time imports and caches.
    warm = asyncio.ensure_future(host.run_task("explore", "warm", "wait", ctx(-1)))
    while model.waiting < 1:  # noqa: ASYNC110 (a bench polls)
        await asyncio.sleep(0.01)
    gc.collect()
    before = rss_kb()
    tracemalloc.start()
    traced_before = tracemalloc.get_traced_memory()[0]
    tasks = [
        asyncio.ensure_future(host.run_task("explore", f"idle {i}", "wait", ctx(i)))
        for i in range(n)
    ]
    while model.waiting < n + 1:  # noqa: ASYNC110
        await asyncio.sleep(0.01)
    gc.collect()
    after = rss_kb()
    traced = tracemalloc.get_traced_memory()[0] - traced_before
    tracemalloc.stop()
    for t in [warm, *tasks]:
        t.cancel()
    await asyncio.gather(warm, *tasks, return_exceptions=True)
    return (after - before) / n, traced / 1024 / n


async def timeout_latency(
    catalog: SubagentCatalog, root: Path, store: SessionStore, rounds: int, limit_ms: int = 200
) -> list[float]:
    """Per round, ms from the child's time limit to its ``task`` result."""
    model = Waiting()
    port = RecordingPort()
    loop = AgentLoop(
        session=Session(store=store), model=model, tools=catalog.parent_tools,
        workspace=Workspace([root]), port=port,
        settings=Settings(subagentTimeoutMs=limit_ms), system_prompt="bench",
    )
    host = SubagentHost(catalog, loop, lambda requested: model)
    late: list[float] = []
    for i in range(rounds):
        ctx = ToolContext(
            workspace=loop.workspace, port=port, read_state=loop.session.read_state,
            permissions=loop.session.permissions, settings=loop.settings,
            session_id=loop.session.id, tool_call_id=f"toolu_late_{i}", subagents=host,
        )
        started = time.perf_counter()
        result = await host.run_task("explore", f"late {i}", "wait", ctx)
        assert result.is_error and "timed out" in result.content, result
        late.append((time.perf_counter() - started) * 1000 - limit_ms)
    return late


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--latency", type=float, default=0.3)
    parser.add_argument("--idle", type=int, default=50)
    args = parser.parse_args()
    root = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory() as tmp, FakeAPI() as api:
        os.environ["AGENT_LS_DATA_DIR"] = tmp
        store = SessionStore(Path(tmp) / "sessions")
        catalog = await asyncio.to_thread(SubagentCatalog.load, root, default_tools())
        model = sdk_model(api)
        await one_turn(api, model, catalog, root, store, 3, args.latency)  # warm the SDK
        alone: list[float] = []
        together: list[float] = []
        overheads: dict[int, list[float]] = {1: [], 3: []}
        ours: list[float] = []
        for _ in range(args.rounds):
            for n, walls in ((1, alone), (3, together)):
                wall, agent, total = await one_turn(
                    api, model, catalog, root, store, n, args.latency
                )
                walls.append(wall)
                ours += agent
                overheads[n] += total
        one, three = statistics.median(alone), statistics.median(together)
        print(f"explore children waiting {args.latency * 1000:.0f} ms on the model "
              f"(anthropic SDK → fake API), {args.rounds} rounds:")
        print(f"  1 child alone      median {one:7.1f} ms (min {min(alone):.1f}, "
              f"max {max(alone):.1f})")
        print(f"  3 children at once median {three:7.1f} ms (min {min(together):.1f}, "
              f"max {max(together):.1f})")
        print(f"  ratio: {three / one:.2f}x (target ≤ 1.3x)")
        for n, values in overheads.items():
            print(f"  spawn → first request at the fake API, {n} at once: median "
                  f"{statistics.median(values):.1f} ms, max {max(values):.1f} ms over "
                  f"{len(values)} children (target ≤ 20 ms)")
        print(f"    of which spawn → request handed to the SDK: median "
              f"{statistics.median(ours):.2f} ms, max {max(ours):.2f} ms")
        print(f"    (a parent's own request, SDK → fake API: median "
              f"{statistics.median(parent_sdk):.1f} ms)")
        per_child, allocated = await idle_children(catalog, root, store, args.idle)
        print(f"  RSS per idle child ({args.idle} at once): {per_child:.0f} KB, Python "
              f"allocations {allocated:.0f} KB (target ≤ 5120 KB)")
        late = await timeout_latency(catalog, root, store, args.rounds * 2)
        print(f"  time limit (200 ms) → task result: median {statistics.median(late):.1f} ms, "
              f"max {max(late):.1f} ms over {len(late)} children")


if __name__ == "__main__":
    asyncio.run(main())
