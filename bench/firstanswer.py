"""First answer over the real SDK path: agent-ls with ``anthropic:`` against the fake API.

Two scenarios per round, order rotating:

* **warm ask**: ``agent.ask`` sent 2 s after ``initialized``. Measured: from the fake model's
  first SSE byte (stamped by ``bench.fakemodel`` after its flush) to the first ``agent/update``
  at the client. Baseline: the same for a second ask on the same server (everything warm).
* **ask at once**: ``agent.ask`` sent right after ``initialized`` with a ``workDoneToken``.
  Measured: time to the first ``agent/update``, and whether ``$/progress`` said "starting
  model client" (and when) instead of staying silent while the SDK loads.
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from typing import Any

from bench.client import LspClient, Message
from bench.fakemodel import FakeModel
from bench.profiling import pyspy
from bench.servers import AGENT_LS, PY, Config, server_env, small_workspace
from bench.stats import rotated, summarize
from bench.table import Row, Target

NAME = "first_answer"
MODEL = "anthropic:claude-sonnet-5-5"
WARM_DELAY = 2.0
STARTING = "starting model client"
TURN = {
    "text": [f"word{i} " for i in range(12)],
    "usage": {"input_tokens": 20, "output_tokens": 12},
}


@dataclass
class AskTiming:
    sent: float
    first_byte: float
    first_update: float
    starting_progress: float | None  # when "starting model client" arrived, if it did
    initialized: float | None = None  # when the initialize response arrived (ask at once)


def is_update(msg: Message) -> bool:
    return msg.get("method") == "agent/update"


def is_starting(msg: Message) -> bool:
    if msg.get("method") != "$/progress":
        return False
    value = (msg.get("params") or {}).get("value") or {}
    return STARTING in str(value.get("message", ""))


def ask(client: LspClient, fake: FakeModel, req: int, token: str | None = None) -> AskTiming:
    start = len(client.notes)
    rid = client.command("agent.ask", {"prompt": "say something"}, token=token)
    sent = client.sent[rid]
    _stamp, msg = client.response(rid, timeout=60)
    result: dict[str, Any] = msg.get("result") or {}
    if result.get("stopReason") != "end_turn":
        raise RuntimeError(f"ask failed: {msg}")
    _i, first_update, _m = client.wait_note(is_update, timeout=5, start=start)
    starting = None
    for stamp, note in client.notes[start:]:
        if is_starting(note):
            starting = stamp
            break
    records = fake.request_records(req)
    return AskTiming(sent, records[0]["t"], first_update, starting)


def scenario(config: Config, at_once: bool) -> tuple[AskTiming, AskTiming | None]:
    root = small_workspace(config)
    with FakeModel([TURN], config.work) as fake:
        env = server_env(
            config, AGENT_LS_MODEL=MODEL, ANTHROPIC_API_KEY="x", ANTHROPIC_BASE_URL=fake.url
        )
        client = LspClient(AGENT_LS, cwd=root, env=env)
        initialized = client.initialize(root)
        client.initialized()
        try:
            if at_once:
                timing = ask(client, fake, 1, token="bench-first-answer")
                timing.initialized = initialized
                return timing, None
            time.sleep(WARM_DELAY)
            with pyspy(client.proc.pid, "first-ask"):
                first = ask(client, fake, 1)
            return first, ask(client, fake, 2)
        finally:
            client.close()


WARM_ALONE = (  # the collector paused, as the server's warm-up has it (agent.warmup.pause_gc)
    "import gc, time; gc.disable(); t = time.perf_counter()\n"
    "from agent_ls.models.anthropic import AnthropicModel\n"
    "AnthropicModel('m', api_key='k').prepare_sdk()\n"
    "print((time.perf_counter() - t) * 1000)\n"
)


def import_sdk_alone(config: Config) -> float:
    """The server's SDK warm-up (the deferred import, the canned stream, the transport) timed
    inside a fresh interpreter that does nothing else, in ms: what an ask sent at once waits
    for at least, before the core and pygls share its GIL."""
    out = subprocess.run(
        [PY, "-c", WARM_ALONE], check=True, env=server_env(config), capture_output=True, text=True
    ).stdout
    return float(out.strip().splitlines()[-1])


def describe_warm(config: Config, waited: int, rounds: int) -> str:
    if config.quick:
        return "not measured in --quick"
    if waited:
        return (
            f"the SDK warm-up was still running at {WARM_DELAY:g} s in {waited} of {rounds} "
            "rounds (the ask waited for it)"
        )
    return f"the SDK was warm at {WARM_DELAY:g} s in every round"


def run(config: Config) -> list[Row]:
    warm_first: list[float] = []  # first byte → first update, first ask at 2 s
    warm_second: list[float] = []
    warm_ask_to_update: list[float] = []
    warm_starting = 0
    once_ask_to_update: list[float] = []
    once_starting: list[float] = []
    once_missing = 0
    once_init_to_model: list[float] = []
    sdk_import: list[float] = []
    scenarios = [True] if config.quick else [False, True]  # --quick: one spawn, ~5 s
    for r in range(config.rounds):
        for at_once in rotated(scenarios, r):
            first, second = scenario(config, at_once)
            if at_once:
                assert first.initialized is not None
                once_init_to_model.append((first.first_byte - first.initialized) * 1000)
                sdk_import.append(import_sdk_alone(config))
                once_ask_to_update.append((first.first_update - first.sent) * 1000)
                if first.starting_progress is None:
                    once_missing += 1
                else:
                    once_starting.append((first.starting_progress - first.sent) * 1000)
            else:
                assert second is not None
                warm_first.append((first.first_update - first.first_byte) * 1000)
                warm_second.append((second.first_update - second.first_byte) * 1000)
                warm_ask_to_update.append((first.first_update - first.sent) * 1000)
                warm_starting += first.starting_progress is not None
    warm_note = describe_warm(config, warm_starting, len(warm_first))
    return [
        Row(
            NAME,
            f"ask at {WARM_DELAY:g} s: fake model's first byte → first agent/update",
            "ms",
            summarize(warm_first),
            summarize(warm_second),
            "same, second ask",
            Target(50),
            note=warm_note,
        ),
        Row(
            NAME,
            f"ask at {WARM_DELAY:g} s: ask sent → first agent/update",
            "ms",
            summarize(warm_ask_to_update),
        ),
        Row(
            NAME,
            "ask at once: ask sent → first agent/update",
            "ms",
            summarize(once_ask_to_update),
            note="includes waiting for the background SDK import",
        ),
        Row(
            NAME,
            "ask at once: initialize answered → the model's first byte",
            "ms",
            summarize(once_init_to_model),
            summarize(sdk_import),
            "the SDK warm-up alone, fresh interpreter",
            Target(500),
            note="the SDK warms in the model worker process, started with the server, on "
            "another core; the baseline is the same work in one interpreter",
        ),
        Row(
            NAME,
            f'ask at once: ask sent → progress "{STARTING}"',
            "ms",
            summarize(once_starting),
            ok_override=once_missing == 0,
            note=f"missing in {once_missing} of {len(once_ask_to_update)} rounds"
            if once_missing
            else "shown in every round",
        ),
    ]
