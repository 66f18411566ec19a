"""Streaming: delta → ``agent/update`` latency, and how many updates a fast model produces.

The fake API (``bench.fakemodel``, Anthropic SSE) stamps each text delta when it has flushed
it; the client stamps each ``agent/update`` when it has read it (both CLOCK_MONOTONIC). A
delta's latency is the time until the update that completes its text arrives, so coalesced
updates are measured fairly. Each server streams three responses from its own fake:

1. a warm-up (slow model, not measured),
2. the latency run: a slow model, one delta every ``SLOW`` seconds,
3. the rate run: a fast model, ~1,000 deltas per second.

Baseline: ``bench.relay`` on the bare pygls server, which reads the same SSE stream over a raw
socket and forwards each delta as an ``agent/update`` (no SDK, no agent loop, no coalescing).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any

from agent_ls.lsp.port import CHUNK_BURST, COALESCE_SECONDS
from bench.client import LspClient, Message
from bench.fakemodel import FakeModel
from bench.profiling import pyspy
from bench.servers import Config, server_env, small_workspace, start_agent, start_minimal
from bench.stats import rotated, summarize
from bench.table import Row, Target

NAME = "stream"
MODEL = "anthropic:claude-sonnet-5-5"
SLOW = 0.02
FAST = 0.001


@dataclass
class StreamRun:
    latencies_ms: list[float]
    updates: int
    deltas: int
    duration: float
    peak_per_second: int


def script(quick: bool) -> list[dict[str, Any]]:
    slow_n, fast_n = (15, 300) if quick else (60, 1500)
    slow = {"text": [f"s{i:04d} " for i in range(slow_n)], "chunk_delay": SLOW}
    fast = {"text": [f"f{i:05d} " for i in range(fast_n)], "chunk_delay": FAST}
    return [slow, slow, fast]


def chunk_text(msg: Message) -> str | None:
    if msg.get("method") != "agent/update":
        return None
    update = (msg.get("params") or {}).get("update") or {}
    if update.get("sessionUpdate") != "agent_message_chunk":
        return None
    return str((update.get("content") or {}).get("text", ""))


def analyse(client: LspClient, start: int, records: list[dict[str, Any]]) -> StreamRun:
    """Match the fake's deltas to the updates that delivered them."""
    deltas = [(r["t"], r["text"]) for r in records if r.get("text")]
    ends: list[int] = []  # cumulative text length after each update
    stamps: list[float] = []
    total = 0
    for stamp, msg in client.notes[start:]:
        text = chunk_text(msg)
        if text is None:
            continue
        total += len(text)
        ends.append(total)
        stamps.append(stamp)
    latencies = []
    sent_total = 0
    for sent, text in deltas:
        sent_total += len(text)
        i = bisect.bisect_left(ends, sent_total)
        if i < len(stamps):
            latencies.append((stamps[i] - sent) * 1000)
    duration = stamps[-1] - stamps[0] if len(stamps) > 1 else 0.0
    peak = 0
    for i, stamp in enumerate(stamps):
        peak = max(peak, bisect.bisect_right(stamps, stamp + 1.0) - i)
    return StreamRun(latencies, len(stamps), len(deltas), duration, peak)


def one_stream(client: LspClient, fake: FakeModel, req: int, relay: bool) -> StreamRun:
    start = len(client.notes)
    if relay:
        client.call("workspace/executeCommand", {"command": "bench.relay", "arguments": [fake.url]})
    else:
        rid = client.command("agent.ask", {"prompt": "stream"})
        _stamp, msg = client.response(rid, timeout=120)
        if (msg.get("result") or {}).get("stopReason") != "end_turn":
            raise RuntimeError(f"ask failed: {msg}")
    return analyse(client, start, fake.request_records(req))


def variant(config: Config, relay: bool) -> tuple[StreamRun, StreamRun]:
    root = small_workspace(config)
    with FakeModel(script(config.quick), config.work) as fake:
        if relay:
            client = start_minimal(config, root)
        else:
            env = server_env(
                config, AGENT_LS_MODEL=MODEL, ANTHROPIC_API_KEY="x", ANTHROPIC_BASE_URL=fake.url
            )
            client = start_agent(config, root, model=MODEL, env=env)
        try:
            one_stream(client, fake, 1, relay)  # warm-up
            latency = one_stream(client, fake, 2, relay)
            with pyspy(client.proc.pid, "stream-fast-relay" if relay else "stream-fast"):
                rate = one_stream(client, fake, 3, relay)
            return latency, rate
        finally:
            client.close()


def run(config: Config) -> list[Row]:
    names = ["agent-ls", "relay"]
    slow: dict[str, list[StreamRun]] = {n: [] for n in names}
    fast: dict[str, list[StreamRun]] = {n: [] for n in names}
    for r in range(config.rounds):
        for name in rotated(names, r):
            latency_run, rate_run = variant(config, name == "relay")
            slow[name].append(latency_run)
            fast[name].append(rate_run)

    def medians(runs: list[StreamRun]) -> list[float]:
        return [summarize(x.latencies_ms)["median"] for x in runs if x.latencies_ms]  # type: ignore[index]

    def p99s(runs: list[StreamRun]) -> list[float]:
        out = []
        for x in runs:
            xs = sorted(x.latencies_ms)
            if xs:
                out.append(xs[min(len(xs) - 1, round(0.99 * (len(xs) - 1)))])
        return out

    def rate(x: StreamRun) -> float:
        if x.duration >= 1.0:
            return float(x.peak_per_second)
        return x.updates / x.duration if x.duration > 0 else float(x.updates)

    agent_fast, relay_fast = fast["agent-ls"], fast["relay"]
    lat = summarize(medians(slow["agent-ls"]))
    base = summarize(medians(slow["relay"]))
    added = "" if lat is None or base is None else f"adds {lat['median'] - base['median']:.2f} ms; "
    p99 = summarize(p99s(slow["agent-ls"]))
    p99_text = "" if p99 is None else f"agent-ls p99 {p99['median']:.1f} ms; "
    deltas = agent_fast[0].deltas if agent_fast else 0
    return [
        Row(
            NAME,
            f"delta → agent/update, median (a delta every {SLOW * 1000:g} ms)",
            "ms",
            lat,
            base,
            "pygls relay",
            Target(2, "excess"),
            note=f"{added}{p99_text}end to end: fake API flush → client read",
        ),
        Row(
            NAME,
            f"agent/update rate, fast model ({deltas:,} deltas, 1 ms apart)",
            "updates/s",
            summarize([rate(x) for x in agent_fast]),
            summarize([rate(x) for x in relay_fast]),
            "pygls relay (no coalescing)",
            # One update per 20 ms sustained, plus the CHUNK_BURST saved up before the stream
            Target(1 / COALESCE_SECONDS + CHUNK_BURST, approx=True),
            note=f"peak count in any 1 s window (1 per {COALESCE_SECONDS * 1000:g} ms, plus a "
            f"burst of {CHUNK_BURST:g} after a pause); updates per delta: "
            + ", ".join(f"{x.updates / max(1, x.deltas):.2f}" for x in agent_fast),
            detail={
                "agent_ls": [x.__dict__ | {"latencies_ms": None} for x in agent_fast],
                "relay": [x.__dict__ | {"latencies_ms": None} for x in relay_fast],
            },
        ),
    ]
