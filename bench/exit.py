"""Exit: how long agent-ls takes to be gone once it has nothing left to do.

``serve``: ``exit`` notification → process gone, for agent-ls after its warm-up and for a
bare pygls server; and ``exit`` right after ``initialize`` → the server and its model worker
(still importing the SDK then) both gone. ``run``: the result's last byte on stdout → the
headless process (client and server) gone, against the same program's time from spawn to that
byte (reported only).

agent-ls is configured with the Anthropic model (no API key needed: the warm-up imports and
warms the SDK all the same), initialized, and left to finish its background warm-up, so the
heap it has to tear down is the one a user's server has. The bare pygls server
(``bench/minimal_server.py``) does the same ``shutdown`` / ``exit`` handshake.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from bench.client import LspClient, children_of
from bench.servers import (
    AGENT_LS,
    PY,
    PYGLS_MINIMAL,
    Config,
    server_env,
    small_workspace,
    wait_warm,
    write_script,
)
from bench.stats import now, rotated, summarize
from bench.table import Row, Target

NAME = "exit"
WARM_PAUSE = 2.5  # seconds for the SDK warm-up thread to finish after the first status


@contextlib.contextmanager
def _server(config: Config, argv: list[str]) -> Iterator[LspClient]:
    """A server on a small workspace with the Anthropic model (no API key needed: the SDK
    imports and warms all the same), ``initialize`` answered; closed at the end."""
    root = small_workspace(config)
    env = server_env(
        config,
        AGENT_LS_MODEL="anthropic:claude-sonnet-5-5",
        ANTHROPIC_API_KEY="x",
        ANTHROPIC_BASE_URL="http://127.0.0.1:9",
    )
    client = LspClient(argv, cwd=root, env=env)
    try:
        client.initialize(root)
        yield client
    finally:
        client.close()


def _exit(client: LspClient) -> float:
    """``shutdown``, then ``exit``: when ``exit`` was sent; the process is gone on return."""
    client.call("shutdown", None)
    sent = now()
    client.notify("exit", None)
    client.closed = True
    client.proc.wait(timeout=10)
    return sent


def _one(config: Config, argv: list[str], agent: bool) -> float:
    with _server(config, argv) as client:
        client.initialized()
        if agent:
            wait_warm(client)
        time.sleep(0.2 if config.quick else WARM_PAUSE)
        sent = _exit(client)
        return (now() - sent) * 1000


def _running(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie, or a pid gone, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _tree(config: Config) -> float:
    """``exit`` right after ``initialize``, while the model worker still imports the SDK →
    the server and its worker gone, in ms (polled every 0.5 ms)."""
    with _server(config, AGENT_LS) as client:
        workers = children_of(client.proc.pid)
        if not workers:
            raise RuntimeError("agent-ls serve started no model worker")
        sent = _exit(client)
        while any(_running(pid) for pid in workers) and now() - sent < 10:
            time.sleep(0.0005)
        return (now() - sent) * 1000


def _headless(config: Config) -> float:
    """``agent-ls run --json`` on a one-turn script: result printed → process gone, in ms."""
    root = small_workspace(config)
    script = write_script(config, "exit", {"turns": [{"text": "Nothing to change."}]})
    env = server_env(config, AGENT_LS_MODEL=f"script:{script}")
    proc = subprocess.Popen(
        [PY, "-m", "agent_ls", "run", "--no", "--json", "-q", "say hi"],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdout is not None
    data = b""
    last = now()
    while chunk := proc.stdout.read1(65536):
        data += chunk
        last = now()
    proc.wait(timeout=30)
    gone = now()
    json.loads(data[data.index(b"{") :])  # the result really was printed
    return (gone - last) * 1000


def run(config: Config) -> list[Row]:
    variants = {"agent-ls": (AGENT_LS, True), "pygls-minimal": (PYGLS_MINIMAL, False)}
    times: dict[str, list[float]] = {n: [] for n in variants}
    for r in range(config.rounds):
        for name in rotated(list(variants), r):
            argv, agent = variants[name]
            times[name].append(_one(config, argv, agent))
    headless = [_headless(config) for _ in range(config.rounds)]
    tree = [_tree(config) for _ in range(config.rounds)]
    return [
        Row(
            NAME,
            "run: result printed → process gone",
            "ms",
            summarize(headless),
            target=Target(100),
        ),
        Row(
            NAME,
            "serve: exit → process gone (after warm-up)",
            "ms",
            summarize(times["agent-ls"]),
            summarize(times["pygls-minimal"]),
            "pygls-minimal",
            Target(100),
        ),
        Row(
            NAME,
            "serve: exit right after initialize → server and model worker gone",
            "ms",
            summarize(tree),
            target=Target(100),
            note="the worker is still importing the SDK when the server exits",
        ),
    ]
