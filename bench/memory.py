"""Memory: peak RSS of the real server over a long scripted session with large tool outputs.

One ``agent.ask`` on a ``script:`` model (mode bypassPermissions, maxTurns 1000) makes 500
model calls, alternating ``run_shell`` ``seq 1 50000`` (~290 KB of output, streamed and
persisted) and ``read_file`` of a 5 MB file. The scripted usage grows ~5k tokens per turn, so
the history is compacted whenever it passes the threshold, as it would with a real model.
The server's RSS is sampled every 0.25 s; the peak is its ``VmHWM``. Baseline: its RSS after
the first 5 turns.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.client import Message, status_kb
from bench.servers import BYPASS, Config, start_agent, write_script
from bench.stats import summarize
from bench.table import Row, Target

NAME = "memory"
THRESHOLD_TOKENS = 170_000  # compactThreshold 0.85 of the script model's 200k window
TOKENS_PER_TURN = 5_000


def build_script(calls: int) -> dict[str, Any]:
    """``calls`` model turns, each with a tool call (so a turn consumed by compaction as its
    summary is harmless), usage predicting when the loop compacts, then a final answer."""
    turns: list[dict[str, Any]] = []
    last, since = 0, 0
    for i in range(calls):
        if last >= THRESHOLD_TOKENS:  # this call is the compaction summary
            usage, last, since = 1_000, 0, 0
        else:
            usage = 2_000 + TOKENS_PER_TURN * since
            last, since = usage, since + 1
        if i % 2 == 0:
            call = {"name": "run_shell", "input": {"command": "seq 1 50000"}}
        else:
            offset = 1 + (i * 997) % 60_000
            call = {"name": "read_file", "input": {"file_path": "big.log", "offset": offset}}
        turns.append(
            {
                "text": f"Turn {i}: summary of the work so far, then the next step.",
                "tool_calls": [call],
                "usage": {"input_tokens": usage, "output_tokens": 50},
            }
        )
    turns.append({"text": "Done.", "usage": {"input_tokens": 2_000, "output_tokens": 5}})
    return {"chunk_size": 64, "turns": turns}


def big_file(root: Path) -> None:
    line = "2024-01-01 12:00:00 INFO worker-%05d processed request id=%08d status=ok\n"
    with (root / "big.log").open("w") as f:
        for i in range(70_000):
            f.write(line % (i % 64, i))


@dataclass
class Sampler:
    pid: int
    turns: int = 0
    compactions: int = 0
    samples: list[tuple[int, float]] = field(default_factory=list)  # (turns, MB)
    after_5: float | None = None
    _stop: threading.Event = field(default_factory=threading.Event)

    def on_note(self, _stamp: float, msg: Message) -> None:
        if msg.get("method") == "$/progress":
            value = (msg.get("params") or {}).get("value") or {}
            self.compactions += str(value.get("message", "")).startswith("compacting")
            return
        if msg.get("method") != "agent/update":
            return
        update = (msg.get("params") or {}).get("update") or {}
        if update.get("sessionUpdate") == "usage_update":
            self.turns += 1
            if self.turns == 5:
                self.after_5 = status_kb(self.pid) / 1024

    def loop(self) -> None:
        while not self._stop.wait(0.25):
            self.samples.append((self.turns, status_kb(self.pid) / 1024))

    def stop(self) -> None:
        self._stop.set()


def one_session(config: Config, calls: int) -> tuple[float, float | None, Sampler]:
    root = config.work / "ws-memory"
    root.mkdir(parents=True, exist_ok=True)
    big_file(root)
    script = write_script(config, "memory", build_script(calls))
    sampler = Sampler(pid=0)
    client = start_agent(
        config,
        root,
        model=f"script:{script}",
        init_options={**BYPASS, "maxTurns": 1000},
        record=False,
    )
    client.on_notification = sampler.on_note
    sampler.pid = client.proc.pid
    thread = threading.Thread(target=sampler.loop, daemon=True)
    thread.start()
    try:
        rid = client.command("agent.ask", {"prompt": "a long session"})
        _stamp, msg = client.response(rid, timeout=900)
        result = msg.get("result") or {}
        if result.get("stopReason") != "end_turn":
            raise RuntimeError(f"the session did not complete: {str(msg)[:300]}")
        peak = status_kb(client.proc.pid, "VmHWM") / 1024
    finally:
        sampler.stop()
        thread.join()
        client.close()
    return peak, sampler.after_5, sampler


def run(config: Config) -> list[Row]:
    calls = 40 if config.quick else 500
    runs = 1 if config.quick else max(1, min(config.rounds, 2))  # ~1 min per full session
    peaks, bases, turns, compactions = [], [], [], []
    curve: list[tuple[int, float]] = []
    for _ in range(runs):
        peak, after_5, sampler = one_session(config, calls)
        peaks.append(peak)
        if after_5 is not None:
            bases.append(after_5)
        turns.append(sampler.turns)
        compactions.append(sampler.compactions)
        step = max(1, len(sampler.samples) // 10)
        curve = sampler.samples[::step]
    curve_text = ", ".join(f"t{t}: {mb:.0f}" for t, mb in curve)
    return [
        Row(
            NAME,
            f"peak RSS, {calls}-turn session with large tool outputs",
            "MB",
            summarize(peaks),
            summarize(bases),
            "RSS after 5 turns",
            Target(200),
            note=f"turns answered: {turns}, compactions: {compactions}; "
            f"RSS (MB) by turn: {curve_text}",
            detail={"curve": curve},
        )
    ]
