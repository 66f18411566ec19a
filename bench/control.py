"""Control stays responsive: ``agent.status`` / ``agent.cancel`` round trips under load.

Variants, order rotating each round, each on a fresh server:

* ``pygls idle``: ``bench.echo`` on the bare pygls server (the baseline);
* ``agent-ls idle``: ``agent.status`` with nothing running;
* ``stream``: a ``script:`` model streaming small chunks with a 2 ms pause each;
* ``shell``: ``run_shell`` running ``sleep 30`` (mode bypassPermissions);
* ``grep``: ``grep_search`` for a common word over the search tree, turn after turn.

During a probe window the client alternates ``agent.status`` and ``agent.cancel`` for a session
that does not exist (answered, nothing cancelled), one request at a time with a 5 ms gap. After
the window a real ``agent.cancel`` stops the run; the time until the ask returns is recorded.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.client import LspClient, Message
from bench.profiling import pyspy
from bench.search import ensure_tree
from bench.servers import (
    BYPASS,
    Config,
    server_env,
    small_workspace,
    start_agent,
    start_minimal,
    write_script,
)
from bench.stats import pct, rotated, summarize
from bench.table import Row, Target

SDK_MODEL = "anthropic:claude-sonnet-5-5"
FIRST_MS = 40  # issue 19: answered within 40 ms even while the warm-up runs

NAME = "control"
GAP = 0.005
LOADS = ("stream", "shell", "grep")
LOAD_TEXT = {"stream": "a run streams", "shell": "a shell command runs", "grep": "a grep runs"}


@dataclass
class Probe:
    status: list[float] = field(default_factory=list)
    cancel: list[float] = field(default_factory=list)
    stop_ms: float | None = None  # real cancel → the ask's response
    first_ms: float | None = None  # the first command, sent right after `initialized`


def execute(name: str, arg: Any = None) -> dict[str, Any]:
    return {"command": name, "arguments": [] if arg is None else [arg]}


def probe(client: LspClient, window: float, done: Callable[[], bool], echo: bool = False) -> Probe:
    result = Probe()
    deadline = time.monotonic() + window
    i = 0
    while time.monotonic() < deadline and not done():
        if echo:
            rtt, _ = client.call("workspace/executeCommand", execute("bench.echo", i), 10)
            (result.status if i % 2 == 0 else result.cancel).append(rtt * 1000)
        elif i % 2 == 0:
            rtt, _ = client.call("workspace/executeCommand", execute("agent.status", {}), 10)
            result.status.append(rtt * 1000)
        else:
            rtt, _ = client.call(
                "workspace/executeCommand",
                execute("agent.cancel", {"sessionId": "bench-not-running"}),
                10,
            )
            result.cancel.append(rtt * 1000)
        i += 1
        time.sleep(GAP)
    return result


def load_script(load: str, quick: bool) -> dict[str, Any]:
    if load == "stream":
        return {"chunk_size": 4, "delay_ms": 2, "turns": [{"text": "lorem ipsum " * 2000}]}
    if load == "shell":
        call = {"name": "run_shell", "input": {"command": "sleep 30"}}
        return {"turns": [{"text": "Running.", "tool_calls": [call]}, {"text": "Done."}]}
    grep = {"name": "grep_search", "input": {"pattern": "import"}}
    return {"turns": [{"text": "Searching.", "tool_calls": [grep]} for _ in range(500)]}


def started(load: str) -> Callable[[Message], bool]:
    def pred(msg: Message) -> bool:
        if msg.get("method") != "agent/update":
            return False
        update = (msg.get("params") or {}).get("update") or {}
        if load == "stream":
            return update.get("sessionUpdate") == "agent_message_chunk"
        return update.get("sessionUpdate") == "tool_call_update" and update.get("status") == (
            "in_progress"
        )

    return pred


def loaded(config: Config, load: str, root: Path, window: float) -> Probe:
    script = write_script(config, f"control-{load}", load_script(load, config.quick))
    options = {**BYPASS, "maxTurns": 1000}
    client = start_agent(config, root, model=f"script:{script}", init_options=options, record=True)
    try:
        rid = client.command("agent.ask", {"prompt": f"bench {load}"})
        client.wait_note(started(load), timeout=60)
        with pyspy(client.proc.pid, f"control-{load}"):
            result = probe(client, window, lambda: client.has_response(rid))
        cancel_sent = time.monotonic()
        client.call("workspace/executeCommand", execute("agent.cancel", {}), 10)
        _stamp, msg = client.response(rid, timeout=30)
        if (msg.get("result") or {}).get("stopReason") == "cancelled":
            result.stop_ms = (time.monotonic() - cancel_sent) * 1000
        return result
    finally:
        client.close()


def idle(config: Config, root: Path, window: float, pygls: bool) -> Probe:
    if pygls:
        client = start_minimal(config, root)
    else:
        client = start_agent(config, root, model="script:/nonexistent.json")
    try:
        # The first command right away: it meets the background warm-up (imports, tools).
        first = execute("bench.echo", 0) if pygls else execute("agent.status", {})
        first_rtt, _ = client.call("workspace/executeCommand", first, 30)
        time.sleep(0.3 if config.quick else 1.5)  # the warm-up holds the GIL a while
        result = probe(client, window, lambda: False, echo=pygls)
        result.first_ms = first_rtt * 1000
        return result
    finally:
        client.close()


def first_with_sdk(config: Config, root: Path) -> float:
    """The first ``agent.status`` right after ``initialized`` with the Anthropic model
    configured, so that it meets the SDK's background import (ms)."""
    env = server_env(
        config,
        AGENT_LS_MODEL=SDK_MODEL,
        ANTHROPIC_API_KEY="x",
        ANTHROPIC_BASE_URL="http://127.0.0.1:9",
    )
    client = start_agent(config, root, model=SDK_MODEL, env=env)
    try:
        rtt, _ = client.call("workspace/executeCommand", execute("agent.status", {}), 30)
        return rtt * 1000
    finally:
        client.close()


def run(config: Config) -> list[Row]:
    window = 0.4 if config.quick else 2.0
    root = small_workspace(config)
    tree = ensure_tree(config)
    variants = ["pygls idle", "agent-ls idle", *LOADS]
    runs: dict[str, list[Probe]] = {v: [] for v in variants}
    sdk_firsts: list[float] = []
    for r in range(config.rounds):
        sdk_firsts.append(first_with_sdk(config, root))
        for variant in rotated(variants, r):
            if variant.endswith("idle"):
                runs[variant].append(idle(config, root, window, variant == "pygls idle"))
            else:
                runs[variant].append(
                    loaded(config, variant, tree if variant == "grep" else root, window)
                )

    def per_run(variant: str, kind: str, p: float) -> list[float]:
        out = []
        for one in runs[variant]:
            xs = one.status if kind == "status" else one.cancel
            if xs:
                out.append(pct(xs, p))
        return out

    def samples(variant: str) -> int:
        return sum(len(one.status) + len(one.cancel) for one in runs[variant])

    base99 = summarize(per_run("pygls idle", "status", 99) + per_run("pygls idle", "cancel", 99))
    base50 = summarize(per_run("pygls idle", "status", 50) + per_run("pygls idle", "cancel", 50))

    def firsts(variant: str) -> list[float]:
        return [one.first_ms for one in runs[variant] if one.first_ms is not None]

    rows = [
        Row(
            NAME,
            "first agent.status, sent right after initialized",
            "ms",
            summarize(firsts("agent-ls idle")),
            summarize(firsts("pygls idle")),
            "pygls first bench.echo",
            Target(FIRST_MS),
            note="meets the start-up warm-up (script model: the core and tools); nothing "
            "should block the event loop",
        ),
        Row(
            NAME,
            "first agent.status right after initialized, SDK warm-up running",
            "ms",
            summarize(sdk_firsts),
            summarize(firsts("pygls idle")),
            "pygls first bench.echo",
            Target(FIRST_MS),
            note=f"{SDK_MODEL}: the status meets the background `import anthropic`",
        ),
        Row(
            NAME,
            "agent.status p50, idle",
            "ms",
            summarize(per_run("agent-ls idle", "status", 50)),
            base50,
            "pygls bench.echo p50",
        ),
        Row(
            NAME,
            "agent.status p99, idle",
            "ms",
            summarize(per_run("agent-ls idle", "status", 99)),
            base99,
            "pygls bench.echo p99",
            Target(5),
        ),
    ]
    for load in LOADS:
        for kind in ("status", "cancel"):
            p50 = summarize(per_run(load, kind, 50))
            p50_text = "—" if p50 is None else f"{p50['median']:.2f} ms"
            probes = f"; {samples(load)} probes in {len(runs[load])} runs"
            rows.append(
                Row(
                    NAME,
                    f"agent.{kind} p99 while {LOAD_TEXT[load]}",
                    "ms",
                    summarize(per_run(load, kind, 99)),
                    base99,
                    "pygls bench.echo p99",
                    Target(5),
                    note=f"p50 {p50_text}" + (probes if kind == "status" else ""),
                )
            )
    stops = [one.stop_ms for load in LOADS for one in runs[load] if one.stop_ms is not None]
    rows.append(
        Row(
            NAME,
            "agent.cancel of a running ask → ask answered (stream, shell, grep)",
            "ms",
            summarize(stops),
        )
    )
    return rows
