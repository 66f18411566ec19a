"""MCP: what configured servers cost at start-up, and what agent-ls adds to each call.

- spawn → ``initialize`` response with no MCP config, against the bare pygls server (and,
  with ``--main DIR``, against another checkout's agent-ls, e.g. the main branch);
- the same with one server (``mcp-server-time``) configured: ``initialize`` must not wait
  for it (servers start after ``initialized``);
- ``initialized`` → ``agent.mcp`` reports the server ready with its tools (polled every
  20 ms, so the figure is up to 20 ms late);
- one ``get_current_time`` call: direct on an SDK ``Client`` vs through agent-ls'
  ``McpTool.run`` (permission check, owner-task queue, result conversion), interleaved,
  each on its own server process.

Standalone: ``python -m bench.mcp_tools [--rounds N] [--main DIR]``; also ``bench/run.py --only
mcp``. (Not ``bench/mcp.py``: ``python bench/run.py`` puts ``bench/`` first on ``sys.path``,
where that name would hide the SDK.)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.client import LspClient
from bench.servers import AGENT_LS, PY, PYGLS_MINIMAL, REPO, Config, server_env, small_workspace
from bench.stats import rotated, summarize
from bench.table import Row, Target, markdown

NAME = "mcp"
TIME_SERVER = {"command": PY, "args": ["-m", "mcp_server_time"]}
CALL = ("get_current_time", {"timezone": "UTC"})


def _spawn_initialize(argv: list[str], root: Path, env: dict[str, str], options: Any) -> float:
    client = LspClient(argv, cwd=root, env=env)
    try:
        answered = client.initialize(root, options)
        return (answered - client.spawned_at) * 1000
    finally:
        client.close()


def cold_start(config: Config, main: Path | None) -> list[Row]:
    root = small_workspace(config)
    env = server_env(config)
    with_server = {"mcpServers": {"time": TIME_SERVER}}
    variants: dict[str, tuple[list[str], dict[str, str], Any]] = {
        "no-config": (AGENT_LS, env, None),
        "one-server": (AGENT_LS, env, with_server),
        "pygls-minimal": (PYGLS_MINIMAL, env, None),
    }
    if main is not None:
        main_env = {**env, "PYTHONPATH": str(main)}
        variants["main"] = ([str(main / ".venv" / "bin" / "python"), *AGENT_LS[1:]], main_env, None)
    for argv, venv, options in variants.values():  # warm the page cache
        _spawn_initialize(argv, root, venv, options)
    times: dict[str, list[float]] = {name: [] for name in variants}
    for r in range(2 * config.rounds):
        for name in rotated(list(variants), r):
            argv, venv, options = variants[name]
            times[name].append(_spawn_initialize(argv, root, venv, options))
    rows = [
        Row(
            NAME,
            "spawn → initialize, no MCP config",
            "ms",
            summarize(times["no-config"]),
            summarize(times["pygls-minimal"]),
            "pygls-minimal",
            Target(1.15, "ratio"),
        ),
        Row(
            NAME,
            "spawn → initialize, one MCP server configured",
            "ms",
            summarize(times["one-server"]),
            summarize(times["no-config"]),
            "no MCP config",
            Target(1.05, "ratio"),
            note="servers start after initialized",
        ),
    ]
    if main is not None:
        rows.append(
            Row(
                NAME,
                "spawn → initialize, no MCP config, vs the other checkout",
                "ms",
                summarize(times["no-config"]),
                summarize(times["main"]),
                str(main.name),
                Target(1.05, "ratio"),
            )
        )
    return rows


def tools_ready(config: Config) -> Row:
    root = small_workspace(config)
    samples: list[float] = []
    for _ in range(config.rounds):
        client = LspClient(AGENT_LS, cwd=root, env=server_env(config))
        try:
            client.initialize(root, {"mcpServers": {"time": TIME_SERVER}})
            start = time.monotonic()
            client.initialized()
            while time.monotonic() - start < 60:
                _rtt, answer = client.call(
                    "workspace/executeCommand", {"command": "agent.mcp", "arguments": [{}]}
                )
                servers = answer.get("servers") or []
                if servers and servers[0]["state"] == "ready" and servers[0]["tools"]:
                    samples.append((time.monotonic() - start) * 1000)
                    break
                if servers and servers[0]["state"] == "failed":
                    raise RuntimeError(f"mcp-server-time failed: {servers[0].get('error')}")
                time.sleep(0.02)
        finally:
            client.close()
    return Row(
        NAME,
        "initialized → mcp-server-time's tools ready",
        "ms",
        summarize(samples),
        note="includes import mcp (worker thread) and the server's own start-up; polled at 20 ms",
    )


async def _call_latency(rounds: int, calls: int) -> tuple[list[float], list[float]]:
    import mcp

    from agent_ls.safety.permissions import Permissions
    from agent_ls.settings import PermissionRules, Settings
    from agent_ls.tools.base import ToolContext
    from agent_ls.tools.mcp import McpManager
    from agent_ls.workspace import ReadState, Workspace
    from tests.fakes import FakePort

    direct: list[float] = []
    ours: list[float] = []
    params = mcp.StdioServerParameters(command=TIME_SERVER["command"], args=TIME_SERVER["args"])
    manager = McpManager(cwd=REPO)
    manager.add_servers({"time": TIME_SERVER}, source="settings")
    try:
        async with mcp.Client(params, mode="legacy") as client:
            await manager.wait_started()
            tool = next(t for t in manager.tools() if t.name == "mcp__time__get_current_time")
            ctx = ToolContext(
                workspace=Workspace([REPO]),
                port=FakePort(),  # type: ignore[arg-type]
                read_state=ReadState(),
                permissions=Permissions(rules=PermissionRules(allow=["mcp__time__*"])),
                settings=Settings(),
                session_id="bench",
            )
            for _ in range(5):  # warm both paths
                await client.call_tool(*CALL)
                await tool.run(CALL[1], ctx)
            for r in range(rounds):
                for variant in rotated(["direct", "ours"], r):
                    samples = direct if variant == "direct" else ours
                    for _ in range(calls):
                        start = time.perf_counter()
                        if variant == "direct":
                            result = await client.call_tool(*CALL)
                            assert not result.is_error
                        else:
                            out = await tool.run(CALL[1], ctx)
                            assert not out.is_error, out.content
                        samples.append((time.perf_counter() - start) * 1000)
    finally:
        await manager.aclose()
    return direct, ours


def call_latency(config: Config) -> list[Row]:
    calls = 10 if config.quick else 50
    direct, ours = asyncio.run(_call_latency(config.rounds, calls))
    direct_s, ours_s = summarize(direct), summarize(ours)
    return [
        Row(
            NAME,
            "one MCP call (get_current_time) through McpTool.run",
            "ms",
            ours_s,
            direct_s,
            "direct SDK Client.call_tool",
            Target(5, "excess"),
            note=f"{len(ours)} calls each, interleaved; added = median difference",
        )
    ]


def run(config: Config, main: Path | None = None) -> list[Row]:
    other = os.environ.get("AGENT_LS_BENCH_MAIN")  # run.py's way to pass --main
    main = main or (Path(other) if other else None)
    return [*cold_start(config, main), tools_ready(config), *call_latency(config)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--main", type=Path, help="another checkout (with .venv) to compare")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="agent-ls-bench-mcp-") as work:
        config = Config(rounds=args.rounds, quick=args.quick, work=Path(work), tree=None)
        rows = run(config, args.main)
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
