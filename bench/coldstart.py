"""Cold start: spawn → ``initialize`` response, RSS after it, and what was imported by then.

agent-ls and the bare pygls server (``bench/minimal_server.py``) are spawned alternately, the
order rotating each round, after one discarded warm-up spawn each. The import check runs
``python -X importtime -m agent_ls serve`` once: every module imported before ``initialized``
is sent (the server's background warm-up only starts then) counts as "before initialize".
"""

from __future__ import annotations

import compileall
import re
import time
from dataclasses import dataclass
from pathlib import Path

from bench.client import LspClient, rss_tree_mb, status_kb
from bench.servers import AGENT_LS, PY, PYGLS_MINIMAL, REPO, Config, server_env, small_workspace
from bench.stats import rotated, summarize
from bench.table import Row, Target

NAME = "coldstart"
# Top-level packages that must not be imported before initialize returns.
HEAVY = {
    "anthropic",
    "openai",
    "httpx",
    "httpx2",
    "httpcore",
    "h11",
    "anyio",
    "pydantic",
    "pydantic_core",
    "tree_sitter",
    "tree_sitter_bash",
    "rich",
}


@dataclass
class ImportLine:
    self_us: int
    cumulative_us: int
    name: str
    depth: int

    @property
    def package(self) -> str:
        return self.name.split(".")[0]


_LINE = re.compile(r"import time:\s+(\d+)\s+\|\s+(\d+)\s+\|( *)(\S+)")


def parse_importtime(text: str) -> list[ImportLine]:
    out = []
    for line in text.splitlines():
        m = _LINE.match(line)
        if m:
            depth = max(0, (len(m.group(3)) - 1) // 2)
            out.append(ImportLine(int(m.group(1)), int(m.group(2)), m.group(4), depth))
    return out


def by_package(lines: list[ImportLine]) -> list[tuple[str, float]]:
    """Self time summed per top-level package, in ms, largest first."""
    totals: dict[str, int] = {}
    for line in lines:
        totals[line.package] = totals.get(line.package, 0) + line.self_us
    return sorted(((k, v / 1000) for k, v in totals.items()), key=lambda kv: -kv[1])


def precompile() -> None:
    """Write agent_ls' .pyc files, as ``pip install`` does (PYTHONDONTWRITEBYTECODE may be set,
    and an editable install would otherwise recompile every module on every start)."""
    compileall.compile_dir(REPO / "agent_ls", quiet=1)


def import_check(config: Config, root: Path) -> tuple[list[ImportLine], list[ImportLine]]:
    """(imports before ``initialized`` was sent, imports during the background warm-up;
    the latter stays empty in --quick)."""
    log = config.work / "importtime.log"
    with log.open("wb") as err:
        client = LspClient(
            [PY, "-X", "importtime", "-m", "agent_ls", "serve"],
            cwd=root,
            env=server_env(
                config,
                AGENT_LS_MODEL="anthropic:claude-sonnet-5-5",
                ANTHROPIC_API_KEY="x",
                ANTHROPIC_BASE_URL="http://127.0.0.1:9",
            ),
            stderr=err,
        )
        try:
            client.initialize(root)
            time.sleep(0.3)  # let stderr settle; nothing more is imported before `initialized`
            before = log.read_text(errors="replace")
            if not config.quick:
                client.initialized()
                wait_quiet(log, quiet=1.5, timeout=30)
        finally:
            client.close()
    everything = parse_importtime(log.read_text(errors="replace"))
    early = parse_importtime(before)
    return early, everything[len(early) :]


def wait_quiet(path: Path, quiet: float, timeout: float) -> None:
    """Until ``path`` stopped growing for ``quiet`` seconds."""
    deadline = time.monotonic() + timeout
    size, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        current = path.stat().st_size
        if current != size:
            size, since = current, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return
        time.sleep(0.1)


def run(config: Config) -> list[Row]:
    if not config.quick:  # the smoke test leaves the source tree alone
        precompile()
    root = small_workspace(config)
    servers = {"agent-ls": AGENT_LS, "pygls-minimal": PYGLS_MINIMAL}
    env = server_env(config)
    times: dict[str, list[float]] = {n: [] for n in servers}
    rss: dict[str, list[float]] = {n: [] for n in servers}
    rss_alone: list[float] = []  # agent-ls's server process without its model worker
    for argv in [] if config.quick else servers.values():  # warm-up: page cache
        with LspClient(argv, cwd=root, env=env) as client:
            client.initialize(root)
    rounds = config.rounds if config.quick else 2 * config.rounds  # spawns are cheap
    for r in range(rounds):
        for name in rotated(list(servers), r):
            client = LspClient(servers[name], cwd=root, env=env)
            try:
                answered = client.initialize(root)
                times[name].append((answered - client.spawned_at) * 1000)
                rss[name].append(rss_tree_mb(client.proc.pid))
                if name == "agent-ls":
                    rss_alone.append(status_kb(client.proc.pid) / 1024)
            finally:
                client.close()

    early, background = import_check(config, root)
    heavy = [(pkg, ms) for pkg, ms in by_package(early) if pkg in HEAVY]
    early_total = sum(line.self_us for line in early) / 1000
    top_early = ", ".join(f"{p} {ms:.0f}" for p, ms in by_package(early)[:6])
    top_background = ", ".join(f"{p} {ms:.0f}" for p, ms in by_package(background)[:6])
    heavy_text = ", ".join(f"{p} ({ms:.0f} ms)" for p, ms in heavy) or "none"
    return [
        Row(
            NAME,
            "spawn → initialize response",
            "ms",
            summarize(times["agent-ls"]),
            summarize(times["pygls-minimal"]),
            "pygls-minimal",
            Target(1.15, "ratio"),
            note="agent-ls takes lsprotocol's attrs-generated code from its cache in the data dir "
            "(written by the warm-up start, as .pyc files are); pygls-minimal compiles it",
        ),
        Row(
            NAME,
            "RSS after initialize",
            "MB",
            summarize(rss["agent-ls"]),
            summarize(rss["pygls-minimal"]),
            "pygls-minimal",
            Target(60),
            note="the process tree: the server and its model worker, which starts with it and "
            "is importing the SDK by then (the next row: the server alone)",
        ),
        Row(
            NAME,
            "RSS after initialize, the server process alone",
            "MB",
            summarize(rss_alone),
            summarize(rss["pygls-minimal"]),
            "pygls-minimal",
        ),
        Row(
            NAME,
            "heavy packages imported before initialize",
            "",
            summarize([float(len(heavy))]),
            target=Target(0),
            note=f"heavy: {heavy_text}; all imports before initialize {early_total:.0f} ms "
            f"(-X importtime self time; top: {top_early})",
            detail={
                "heavy": heavy,
                "before_initialize_ms": early_total,
                "top_before": by_package(early)[:15],
                "modules_before": len(early),
            },
        ),
        Row(
            NAME,
            "background warm-up imports after initialized",
            "ms",
            None if config.quick else summarize([sum(ln.self_us for ln in background) / 1000]),
            note="not measured in --quick"
            if config.quick
            else f"in the warm-up thread (holding the GIL at times); top: {top_background}",
            detail={"top_background": by_package(background)[:15], "modules": len(background)},
        ),
    ]
