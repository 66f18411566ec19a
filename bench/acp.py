"""The ACP front door (``agent-ls acp``) beside the LSP one (``agent-ls serve``).

* **cold start**: spawn → ``initialize`` response, ``acp`` and ``serve`` spawned alternately
  (order rotating, one discarded warm-up spawn each).
* **first chunk**: the real anthropic SDK against the fake API in its own process
  (``bench.fakemodel``); a prompt sent 2 s after start (the warm-up done), then a second one.
  Measured: the fake model's first text byte (stamped after its flush) → the first
  ``agent_message_chunk`` at the client, over ACP (``session/prompt`` → ``session/update``)
  and over LSP (``agent.ask`` → ``agent/update``), on the same fake model and machine load.

``python bench/acp.py [--rounds N]`` prints the table; ``bench/run.py --only acp`` too.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # `python bench/acp.py`
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.client import LspClient, Message
from bench.fakemodel import FakeModel
from bench.servers import AGENT_LS, PY, Config, server_env, small_workspace
from bench.stats import now, rotated, summarize
from bench.table import Row, Target

NAME = "acp"
AGENT_LS_ACP = [PY, "-m", "agent_ls", "acp"]
MODEL = "anthropic:claude-sonnet-5-5"
WARM_DELAY = 2.0
TURN = {
    "text": [f"word{i} " for i in range(12)],
    "usage": {"input_tokens": 20, "output_tokens": 12},
}


class AcpClient:
    """A raw newline-delimited JSON-RPC client: stamps each message as it arrives."""

    def __init__(self, argv: list[str], *, cwd: Path, env: dict[str, str]) -> None:
        self.notes: list[tuple[float, Message]] = []
        self._responses: dict[Any, tuple[float, Message]] = {}
        self._cond = threading.Condition()
        self._wlock = threading.Lock()
        self._id = 0
        self.closed = False
        self.spawned_at = now()
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=cwd,
            env=env,
        )
        self._reader = threading.Thread(target=self._read_loop, daemon=True)
        self._reader.start()

    def send(self, obj: Message) -> None:
        assert self.proc.stdin is not None
        with self._wlock:
            self.proc.stdin.write(json.dumps(obj, separators=(",", ":")).encode() + b"\n")
            self.proc.stdin.flush()

    def _read_loop(self) -> None:
        assert self.proc.stdout is not None
        try:
            for line in self.proc.stdout:
                stamp = now()
                msg = json.loads(line)
                if "method" in msg and "id" in msg:
                    self.send({"jsonrpc": "2.0", "id": msg["id"], "result": self.answer(msg)})
                    continue
                with self._cond:
                    if "method" in msg:
                        self.notes.append((stamp, msg))
                    else:
                        self._responses[msg.get("id")] = (stamp, msg)
                    self._cond.notify_all()
        except (OSError, ValueError):
            pass
        finally:
            with self._cond:
                self.closed = True
                self._cond.notify_all()

    @staticmethod
    def answer(msg: Message) -> Any:
        if msg["method"] == "session/request_permission":
            return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}
        return None

    def request(self, method: str, params: Any) -> int:
        with self._wlock:
            self._id += 1
            rid = self._id
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        return rid

    def response(self, rid: int, timeout: float = 60.0) -> tuple[float, Message]:
        with self._cond:
            self._cond.wait_for(lambda: rid in self._responses or self.closed, timeout)
            if rid in self._responses:
                return self._responses.pop(rid)
        raise TimeoutError(f"no answer to request {rid}")

    def call(self, method: str, params: Any) -> tuple[float, Any]:
        stamp, msg = self.response(self.request(method, params))
        if "error" in msg:
            raise RuntimeError(f"{method}: {msg['error']}")
        return stamp, msg.get("result")

    def first_chunk_after(self, start: int, timeout: float = 30.0) -> float:
        def found() -> float | None:
            for stamp, msg in self.notes[start:]:
                update = (msg.get("params") or {}).get("update") or {}
                if update.get("sessionUpdate") == "agent_message_chunk":
                    return stamp
            return None

        with self._cond:
            self._cond.wait_for(lambda: found() is not None or self.closed, timeout)
            stamp = found()
        if stamp is None:
            raise TimeoutError("no agent_message_chunk")
        return stamp

    def close(self) -> None:
        with contextlib.suppress(OSError):
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def acp_initialize(client: AcpClient) -> float:
    stamp, _result = client.call(
        "initialize",
        {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": False}}},
    )
    return stamp


def first_text_byte(fake: FakeModel, req: int) -> float:
    return float(next(r["t"] for r in fake.request_records(req) if r["text"]))


# -- scenarios ---------------------------------------------------------------------------


def coldstart(config: Config, root: Path) -> dict[str, list[float]]:
    env = server_env(config)
    times: dict[str, list[float]] = {"acp": [], "serve": []}
    ready: list[float] = []  # acp: spawn → session/new answered (the acp package loaded)
    if not config.quick:  # warm-up: page cache
        warm = AcpClient(AGENT_LS_ACP, cwd=root, env=env)
        acp_initialize(warm)
        warm.close()
        with LspClient(AGENT_LS, cwd=root, env=env) as lsp:
            lsp.initialize(root)
    rounds = config.rounds if config.quick else 2 * config.rounds
    for r in range(rounds):
        for name in rotated(list(times), r):
            if name == "acp":
                acp = AcpClient(AGENT_LS_ACP, cwd=root, env=env)
                try:
                    times[name].append((acp_initialize(acp) - acp.spawned_at) * 1000)
                    stamp, _new = acp.call("session/new", {"cwd": str(root), "mcpServers": []})
                    ready.append((stamp - acp.spawned_at) * 1000)
                finally:
                    acp.close()
            else:
                lsp = LspClient(AGENT_LS, cwd=root, env=env)
                try:
                    times[name].append((lsp.initialize(root) - lsp.spawned_at) * 1000)
                finally:
                    lsp.close()
    times["acp_ready"] = ready
    return times


def acp_first_chunks(config: Config, root: Path) -> tuple[float, float]:
    """(first prompt, second prompt): fake's first text byte → first agent_message_chunk."""
    with FakeModel([TURN], config.work) as fake:
        env = server_env(
            config, AGENT_LS_MODEL=MODEL, ANTHROPIC_API_KEY="x", ANTHROPIC_BASE_URL=fake.url
        )
        client = AcpClient(AGENT_LS_ACP, cwd=root, env=env)
        try:
            acp_initialize(client)
            _stamp, new = client.call("session/new", {"cwd": str(root), "mcpServers": []})
            time.sleep(WARM_DELAY)
            out = []
            for req in (1, 2):
                start = len(client.notes)
                client.call(
                    "session/prompt",
                    {
                        "sessionId": new["sessionId"],
                        "prompt": [{"type": "text", "text": "say something"}],
                    },
                )
                chunk = client.first_chunk_after(start)
                out.append((chunk - first_text_byte(fake, req)) * 1000)
            return out[0], out[1]
        finally:
            client.close()


def lsp_first_chunks(config: Config, root: Path) -> tuple[float, float]:
    with FakeModel([TURN], config.work) as fake:
        env = server_env(
            config, AGENT_LS_MODEL=MODEL, ANTHROPIC_API_KEY="x", ANTHROPIC_BASE_URL=fake.url
        )
        client = LspClient(AGENT_LS, cwd=root, env=env)
        try:
            client.initialize(root)
            client.initialized()
            time.sleep(WARM_DELAY)
            out = []
            for req in (1, 2):
                start = len(client.notes)
                rid = client.command("agent.ask", {"prompt": "say something"})
                client.response(rid, timeout=60)
                _i, chunk, _m = client.wait_note(
                    lambda m: (
                        m.get("method") == "agent/update"
                        and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
                    ),
                    timeout=5,
                    start=start,
                )
                out.append((chunk - first_text_byte(fake, req)) * 1000)
            return out[0], out[1]
        finally:
            client.close()


def run(config: Config) -> list[Row]:
    root = small_workspace(config)
    times = coldstart(config, root)
    first: dict[str, list[float]] = {"acp": [], "lsp": []}
    second: dict[str, list[float]] = {"acp": [], "lsp": []}
    for r in range(config.rounds):
        for door in rotated(["acp", "lsp"], r):
            one, two = (acp_first_chunks if door == "acp" else lsp_first_chunks)(config, root)
            first[door].append(one)
            second[door].append(two)
    return [
        Row(
            NAME,
            "cold start: spawn → initialize response (acp)",
            "ms",
            summarize(times["acp"]),
            summarize(times["serve"]),
            "agent-ls serve",
            note="initialize is answered while the acp package (pydantic models) loads in a "
            "thread; serve answers after importing pygls/lsprotocol",
        ),
        Row(
            NAME,
            "cold start: spawn → session/new response (acp)",
            "ms",
            summarize(times["acp_ready"]),
            note="the first request after initialize waits for the acp package to load",
        ),
        Row(
            NAME,
            f"prompt at {WARM_DELAY:g} s: fake's first byte → first agent_message_chunk",
            "ms",
            summarize(first["acp"]),
            summarize(first["lsp"]),
            "LSP: agent.ask → agent/update",
            Target(10, "excess"),
        ),
        Row(
            NAME,
            "second prompt: fake's first byte → first agent_message_chunk",
            "ms",
            summarize(second["acp"]),
            summarize(second["lsp"]),
            "LSP: second agent.ask",
            Target(10, "excess"),
        ),
    ]


def main() -> int:
    import argparse
    import shutil
    import tempfile

    from bench.table import markdown

    parser = argparse.ArgumentParser(prog="python bench/acp.py")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="agent-ls-bench-acp-"))
    try:
        rows = run(Config(rounds=args.rounds, quick=args.quick, work=work, tree=None))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
