"""Exit: ``exit`` notification → process gone, for agent-ls after its warm-up and a bare pygls.

agent-ls is configured with the Anthropic model (no API key needed: the warm-up imports and
warms the SDK all the same), initialized, and left to finish its background warm-up, so the
heap it has to tear down is the one a user's server has. The bare pygls server
(``bench/minimal_server.py``) does the same ``shutdown`` / ``exit`` handshake.
"""

from __future__ import annotations

import time

from bench.client import LspClient
from bench.servers import (
    AGENT_LS,
    PYGLS_MINIMAL,
    Config,
    server_env,
    small_workspace,
    wait_warm,
)
from bench.stats import now, rotated, summarize
from bench.table import Row, Target

NAME = "exit"
WARM_PAUSE = 2.5  # seconds for the SDK warm-up thread to finish after the first status


def _one(config: Config, argv: list[str], agent: bool) -> float:
    root = small_workspace(config)
    env = server_env(
        config,
        AGENT_LS_MODEL="anthropic:claude-sonnet-4-5",
        ANTHROPIC_API_KEY="x",
        ANTHROPIC_BASE_URL="http://127.0.0.1:9",
    )
    client = LspClient(argv, cwd=root, env=env)
    try:
        client.initialize(root)
        client.initialized()
        if agent:
            wait_warm(client)
        time.sleep(0.2 if config.quick else WARM_PAUSE)
        client.call("shutdown", None)
        sent = now()
        client.notify("exit", None)
        client.closed = True
        client.proc.wait(timeout=10)
        return (now() - sent) * 1000
    finally:
        client.close()


def run(config: Config) -> list[Row]:
    variants = {"agent-ls": (AGENT_LS, True), "pygls-minimal": (PYGLS_MINIMAL, False)}
    times: dict[str, list[float]] = {n: [] for n in variants}
    for r in range(config.rounds):
        for name in rotated(list(variants), r):
            argv, agent = variants[name]
            times[name].append(_one(config, argv, agent))
    return [
        Row(
            NAME,
            "serve: exit → process gone (after warm-up)",
            "ms",
            summarize(times["agent-ls"]),
            summarize(times["pygls-minimal"]),
            "pygls-minimal",
            Target(100),
        )
    ]
