"""How the benchmarks start the servers they compare: agent-ls and the bare pygls baseline."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.client import LspClient

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "bench"
PY = sys.executable

AGENT_LS = [PY, "-m", "agent_ls", "serve"]
PYGLS_MINIMAL = [PY, str(BENCH / "minimal_server.py")]
BYPASS = {"mode": "bypassPermissions"}
# Variables of the developer's environment that would change what the server does.
_SCRUB = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_AUTH_TOKEN",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "AGENT_LS_MODEL",
    "AGENT_LS_LOG_FILE",
    "AGENT_LS_LOG_LEVEL",
)


@dataclass
class Config:
    """What every benchmark gets from ``run.py``."""

    rounds: int
    quick: bool
    work: Path  # scratch folder of this run (deleted at the end)
    tree: Path | None  # the large search tree (None: build a small one under ``work``)


def server_env(config: Config, **extra: str) -> dict[str, str]:
    """The environment for a server under test: isolated data folder, no real API keys."""
    env = {k: v for k, v in os.environ.items() if k not in _SCRUB}
    env["AGENT_LS_DATA_DIR"] = str(config.work / "data")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


def small_workspace(config: Config) -> Path:
    root = config.work / "ws"
    root.mkdir(parents=True, exist_ok=True)
    (root / "main.py").write_text("import os\n\n\ndef f(x: int) -> int:\n    return x + 1\n")
    return root


def write_script(config: Config, name: str, script: dict[str, Any]) -> Path:
    """A ``script:`` model file under the run's scratch folder."""
    path = config.work / f"{name}.script.json"
    path.write_text(json.dumps(script), encoding="utf-8")
    return path


def start_agent(
    config: Config,
    root: Path,
    *,
    model: str,
    init_options: dict[str, Any] | None = None,
    record: bool = True,
    env: dict[str, str] | None = None,
) -> LspClient:
    """agent-ls, initialized (``initialized`` sent, so the background warm-up starts)."""
    client = LspClient(
        AGENT_LS,
        cwd=root,
        env=env or server_env(config, AGENT_LS_MODEL=model),
        record=record,
    )
    client.initialize(root, init_options)
    client.initialized()
    return client


def start_minimal(config: Config, root: Path) -> LspClient:
    client = LspClient(PYGLS_MINIMAL, cwd=root, env=server_env(config))
    client.initialize(root)
    client.initialized()
    return client


def wait_warm(client: LspClient, timeout: float = 60.0) -> None:
    """Wait until agent-ls answers a command (its warm-up thread shares the GIL, so this
    is only an approximation of "idle"; benchmarks add a pause where it matters)."""
    client.call("workspace/executeCommand", {"command": "agent.status", "arguments": [{}]}, timeout)
