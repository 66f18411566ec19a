"""agent-ls beside its rivals on one machine, interleaved round by round (issue 19).

``python bench/peers.py [--rounds 7] [--peers DIR]`` (set up the peers once with
``bash bench/peers-setup.sh``; not part of CI: it downloads Claude Code and Copilot's language
server from npm).

Headless task, same fake Anthropic API (``bench/peerfake.py``, its own process) and the same
three scripted turns (read ``calc.py``, fix it, answer) for both sides:

- ``agent-ls run --yes --json -q PROMPT`` with ``anthropic:claude-sonnet-5-5``;
- ``claude -p PROMPT --permission-mode acceptEdits --allowedTools Read,Edit --output-format json``
  (a fresh ``HOME`` each round, non-essential traffic off).

Per round and side: spawn → the first agent-loop request at the fake API ("first request"),
spawn → process gone ("whole task"), the last byte on stdout → gone ("exit"), the bytes
of the agent-loop requests and the CPU time of all the side's processes ("CPU ms", user +
system, which a loaded machine changes far less than the wall-clock rows), also up to the
first request ("CPU ms to first request", from ``/proc`` when the fake records it; for
agent-ls split into its server and model worker too). The edit must
have landed or the round fails.

Language servers (raw JSON-RPC client, ``bench/client.py``): spawn → ``initialize`` response
("cold start"), RSS of the process tree after it, a request sent right after ``initialized``
→ its answer ("first command": ``agent.status`` for agent-ls, Copilot's ``checkStatus``), and
``exit`` → gone, for ``agent-ls serve`` and ``copilot-language-server --stdio``.

Cells are median (min–max) over the rounds; ratios are agent-ls / peer per round, then the
median. Lower is better everywhere.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.client import LspClient, rss_tree_mb
from bench.fakemodel import FakeProcess
from bench.peerfake import FILE, NEW, OLD
from bench.stats import now, rotated

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable
PROMPT = "add() in calc.py subtracts. Fix it."
DEFAULT_PEERS = Path.home() / ".cache" / "agent-ls-bench" / "peers"
SCRUB = ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN", "AGENT_LS_MODEL")


class Fake(FakeProcess):
    """``bench.peerfake`` in its own process; collects its per-request lines."""

    def __init__(self) -> None:
        super().__init__([PY, "-m", "bench.peerfake"])

    def since(self, t0: float) -> list[dict[str, Any]]:
        with self._cond:
            return self.since_locked(t0)

    def since_locked(self, t0: float) -> list[dict[str, Any]]:
        """:meth:`since`, the condition held already."""
        return [x for x in self.records if x["t"] >= t0]


def _base_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in SCRUB}


def _workspace(work: Path, name: str) -> Path:
    root = work / name
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    (root / FILE).write_text(f"def add(a, b):\n    {OLD}\n", encoding="utf-8")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    return root


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _become_subreaper() -> bool:
    """Orphans of the measured processes (a worker its parent did not wait for) become ours,
    so :func:`_reap_orphans` counts their CPU too (Linux ``PR_SET_CHILD_SUBREAPER``)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(36, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def _children(keep: set[int]) -> set[int]:
    pids: set[int] = set()
    for task in Path("/proc/self/task").iterdir():
        with contextlib.suppress(OSError):
            pids.update(int(p) for p in (task / "children").read_text().split())
    return pids - keep


def _reap_orphans(keep: set[int], timeout: float = 10.0) -> None:
    """Wait for every child but ``keep`` (orphans adopted as subreaper), up to ``timeout``."""
    deadline = time.monotonic() + timeout
    while (pids := _children(keep)) and time.monotonic() < deadline:
        for pid in pids:
            with contextlib.suppress(ChildProcessError):
                if os.waitpid(pid, os.WNOHANG)[0] == 0:
                    time.sleep(0.005)
    for pid in _children(keep):  # still running: not ours to leave behind
        with contextlib.suppress(OSError):
            os.kill(pid, 9)
            os.waitpid(pid, 0)


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _tree_cpu(root_pid: int) -> dict[str, float]:
    """CPU seconds so far of ``root_pid`` and its descendants (with the children they
    reaped), by process name (``/proc/PID/comm``: agent-ls names its forked server and
    worker)."""
    by_name: dict[str, float] = {}
    todo = [root_pid]
    while todo:
        pid = todo.pop()
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            name = Path(f"/proc/{pid}/comm").read_text().strip()
            for task in Path(f"/proc/{pid}/task").iterdir():
                todo.extend(int(c) for c in (task / "children").read_text().split())
        except OSError:  # gone meanwhile
            continue
        fields = stat.rsplit(")", 1)[1].split()
        ticks = sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
        by_name[name] = by_name.get(name, 0.0) + ticks / _TICK
    return by_name


def _cpu_at_first_request(
    fake: Fake, t0: float, pids: list[int], out: dict[str, dict[str, float]]
) -> threading.Thread:
    """Sample :func:`_tree_cpu` of each of ``pids`` the moment the fake records the first
    agent-loop request since ``t0`` (a few ms late at worst): what each process spent before
    it (``out["cpu"]``, ``out["cpu1"]``...)."""

    def watch() -> None:
        deadline = time.monotonic() + 60
        with fake._cond:
            while not any(x["main"] for x in fake.since_locked(t0)):
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                fake._cond.wait(left)
        for i, pid in enumerate(pids):
            out[f"cpu{i or ''}"] = _tree_cpu(pid)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


class Zygote:
    """``agent-ls warm --foreground``, a child of the benchmark, for the warm side's runs:
    its forked servers and workers are its children, so their CPU is counted through it."""

    def __init__(self, work: Path, env: dict[str, str]) -> None:
        self.dir = work / "warm"
        self.env = {**env, "AGENT_LS_WARM_DIR": str(self.dir)}
        self.log = work / "warm.log"
        argv = [PY, "-m", "agent_ls", "warm", "--foreground", "--idle", "3600"]
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                argv, cwd=work, env=self.env, stdout=subprocess.PIPE, stderr=log
            )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith(b"ready "):
            raise RuntimeError(f"agent-ls warm did not start: {self.log.read_text()[-800:]}")
        self.pid = self.proc.pid
        _LONG_LIVED.add(self.pid)
        self.socket = Path(line[6:].decode().strip())

    def served(self) -> int:
        """How many runs it has forked servers for."""
        from agent_ls.client.warm import ask

        status = ask(self.socket, "status") or {}
        return int(status.get("served", -1))

    def cpu(self) -> float:
        """Its CPU seconds with its reaped children's."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return sum(int(f) for f in fields[11:15]) / _TICK

    def settle(self, timeout: float = 10.0) -> None:
        """Until every child of the last run is reaped (its CPU then is in :meth:`cpu`)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            tasks = Path(f"/proc/{self.pid}/task").iterdir()
            if not any((t / "children").read_text().split() for t in tasks):
                return
            time.sleep(0.002)

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)
        _LONG_LIVED.discard(self.pid)


def _headless(
    argv: list[str], root: Path, env: dict[str, str], fake: Fake, zygote: Zygote | None = None
) -> dict[str, float]:
    cpu0 = _children_cpu()
    zygote_cpu0 = zygote.cpu() if zygote is not None else 0.0
    t0 = now()
    proc = subprocess.Popen(argv, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    at_first: dict[str, dict[str, float]] = {}
    pids = [proc.pid] if zygote is None else [proc.pid, zygote.pid]
    watcher = _cpu_at_first_request(fake, t0, pids, at_first)
    assert proc.stdout is not None and proc.stderr is not None
    err: list[bytes] = []
    reader = threading.Thread(target=lambda: err.append(proc.stderr.read()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    last = t0
    out = b""
    while chunk := proc.stdout.read1(65536):
        out += chunk
        last = now()
    proc.wait(timeout=120)
    gone = now()
    reader.join(timeout=5)
    watcher.join(timeout=5)
    _reap_orphans(_kept(fake))
    zygote_cpu = 0.0
    if zygote is not None:
        zygote.settle()
        zygote_cpu = zygote.cpu() - zygote_cpu0
    text = (root / FILE).read_text(encoding="utf-8")
    if proc.returncode != 0 or NEW not in text:
        raise RuntimeError(
            f"{argv[0]} failed (exit {proc.returncode}); stderr: {b''.join(err)[-800:]!r}"
        )
    main = [x for x in fake.since(t0) if x["main"]]
    if len(main) < 3:
        raise RuntimeError(f"{argv[0]}: {len(main)} agent-loop requests, expected 3")
    cpu = at_first.get("cpu", {})
    cpu_first = sum(cpu.values())
    if zygote is not None:  # its own tree then, less what it had spent before the run
        forked = at_first.get("cpu1", {})
        cpu_first += sum(forked.values()) - zygote_cpu0
        for name in ("agent-ls serve", "agent-ls worker"):
            cpu[name] = cpu.get(name, 0.0) + forked.get(name, 0.0)
    result = {
        "first request": (main[0]["t"] - t0) * 1000,
        "whole task": (gone - t0) * 1000,
        "exit": (gone - last) * 1000,
        "request KB": sum(x["bytes"] for x in main) / 1024,
        # Every process of the side, reaped (the server by the client): robust to load.
        "CPU ms": (_children_cpu() - cpu0 + zygote_cpu) * 1000,
        # The same, up to the first request: less noisy than its wall time.
        "CPU ms to first request": cpu_first * 1000,
    }
    for name, key in (("agent-ls serve", "server"), ("agent-ls worker", "worker")):
        if name in cpu:  # agent-ls's forked processes: where the first request's CPU goes
            result[f"{key} CPU ms to first request"] = cpu[name] * 1000
    return result


def _kept(fake: Fake) -> set[int]:
    """The benchmark's own long-lived children, which :func:`_reap_orphans` leaves alone."""
    return {fake.proc.pid, *_LONG_LIVED}


_LONG_LIVED: set[int] = set()  # the warm process, while it runs


def agent_ls_env(work: Path, fake: Fake, checkout: Path | None = None) -> dict[str, str]:
    env = _base_env()
    data = work / "agent-ls-data"
    if checkout is not None:  # another checkout of agent-ls, in this Python
        env["PYTHONPATH"] = str(checkout)
        data = work / "agent-ls-data-compare"  # its caches are its own, as an install's are
    env.update(
        AGENT_LS_DATA_DIR=str(data),
        AGENT_LS_MODEL="anthropic:claude-sonnet-5-5",
        ANTHROPIC_API_KEY="bench",
        ANTHROPIC_BASE_URL=fake.url,
        AGENT_LS_WARM="0",  # cold: a warm process the user runs is not used
    )
    return env


def agent_ls_run(work: Path, fake: Fake, checkout: Path | None = None) -> dict[str, float]:
    root = _workspace(work, "ws-agent-ls")
    argv = [PY, "-m", "agent_ls", "run", "--yes", "--json", "-q", PROMPT]
    return _headless(argv, root, agent_ls_env(work, fake, checkout), fake)


def agent_ls_warm_run(work: Path, fake: Fake, zygote: Zygote) -> dict[str, float]:
    """``agent-ls run`` with ``agent-ls warm`` running: the server and worker are forked
    from it (the run fails here if they are not: no server CPU would show)."""
    root = _workspace(work, "ws-agent-ls-warm")
    env = {**zygote.env, "AGENT_LS_WARM": "1"}
    argv = [PY, "-m", "agent_ls", "run", "--yes", "--json", "-q", PROMPT]
    served = zygote.served()
    result = _headless(argv, root, env, fake, zygote)
    if zygote.served() != served + 1:
        raise RuntimeError("the warm run did not use the warm process")
    return result


def claude_run(work: Path, fake: Fake, peers: Path) -> dict[str, float]:
    root = _workspace(work, "ws-claude")
    home = work / "claude-home"
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir()
    env = _base_env()
    env.update(
        HOME=str(home),
        ANTHROPIC_API_KEY="bench",
        ANTHROPIC_BASE_URL=fake.url,
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        DISABLE_AUTOUPDATER="1",
    )
    argv = [
        str(peers / "node_modules" / ".bin" / "claude"),
        "-p",
        PROMPT,
        "--permission-mode",
        "acceptEdits",
        "--allowedTools",
        "Read,Edit",
        "--output-format",
        "json",
    ]
    return _headless(argv, root, env, fake)


def language_server(
    argv: list[str], root: Path, env: dict[str, str], probe: Any
) -> dict[str, float]:
    client = LspClient(argv, cwd=root, env=env)
    try:
        t0 = client.spawned_at
        rid = client.request(
            "initialize",
            {
                "processId": os.getpid(),
                "rootUri": root.as_uri(),
                "workspaceFolders": [{"uri": root.as_uri(), "name": root.name}],
                "capabilities": {"window": {"workDoneProgress": True}},
                "clientInfo": {"name": "bench-peers", "version": "1"},
                "initializationOptions": {
                    "editorInfo": {"name": "bench", "version": "1"},
                    "editorPluginInfo": {"name": "bench", "version": "1"},
                },
            },
        )
        stamp, _ = client.response(rid)
        cold = (stamp - t0) * 1000
        rss = rss_tree_mb(client.proc.pid)
        client.notify("initialized", {})
        rtt, _ = client.call(*probe)
        first = rtt * 1000
        time.sleep(2.0)  # let background start-up work finish: exit is measured when idle
        client.call("shutdown", None)
        sent = now()
        client.notify("exit", None)
        client.closed = True
        client.proc.wait(timeout=10)
        gone = (now() - sent) * 1000
        return {"cold start": cold, "RSS MiB": rss, "first command": first, "exit": gone}
    finally:
        client.close()


def agent_ls_serve(work: Path) -> dict[str, float]:
    root = _workspace(work, "ws-serve")
    env = _base_env()
    env.update(
        AGENT_LS_DATA_DIR=str(work / "agent-ls-data"),
        AGENT_LS_MODEL="anthropic:claude-sonnet-5-5",
        ANTHROPIC_API_KEY="bench",
        ANTHROPIC_BASE_URL="http://127.0.0.1:9",
    )
    probe = ("workspace/executeCommand", {"command": "agent.status", "arguments": [{}]})
    return language_server([PY, "-m", "agent_ls", "serve"], root, env, probe)


def copilot_serve(work: Path, peers: Path) -> dict[str, float]:
    root = _workspace(work, "ws-copilot")
    home = work / "copilot-home"
    home.mkdir(exist_ok=True)
    env = _base_env()
    env["HOME"] = str(home)
    server = peers / "node_modules" / "@github" / "copilot-language-server" / "dist"
    argv = ["node", str(server / "language-server.js"), "--stdio"]
    return language_server(argv, root, env, ("checkStatus", {}))


def _cell(xs: list[float]) -> str:
    if not xs:
        return "-"
    return f"{statistics.median(xs):.0f} ({min(xs):.0f}–{max(xs):.0f})"


def _ratio(a: list[float], b: list[float]) -> str:
    pairs = [x / y for x, y in zip(a, b, strict=False) if y]
    return f"{statistics.median(pairs):.2f}×" if pairs else "-"


def report(title: str, names: tuple[str, str], runs: dict[str, list[dict[str, float]]]) -> str:
    ours, theirs = names
    metrics = list(runs[ours][0]) if runs[ours] else []
    rows = [f"### {title}", "", f"| metric | {ours} | {theirs} | ratio |", "|---|---|---|---|"]
    for m in metrics:  # a metric only one side has gets "-" on the other
        a = [r[m] for r in runs[ours] if m in r]
        b = [r[m] for r in runs[theirs] if m in r]
        rows.append(f"| {m} | {_cell(a)} | {_cell(b)} | {_ratio(a, b)} |")
    return "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python bench/peers.py", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--peers", type=Path, default=DEFAULT_PEERS)
    parser.add_argument("--only", choices=("run", "serve"), default=None)
    parser.add_argument(
        "--compare", type=Path, metavar="DIR", help="also run `agent-ls run` from this checkout"
    )
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "peers.json")
    args = parser.parse_args(argv)
    claude = args.peers / "node_modules" / ".bin" / "claude"
    if not claude.exists():
        print(
            f"no Claude Code in {args.peers}: run `bash bench/peers-setup.sh` first",
            file=sys.stderr,
        )
        return 2
    import compileall
    import sysconfig

    # As `pip install` does (see bench/coldstart.py): a module without its .pyc would be
    # compiled at every start under PYTHONDONTWRITEBYTECODE=1. The installed packages too: a
    # file touched after its install (its .pyc then stale) cost every run a compile.
    compileall.compile_dir(REPO / "agent_ls", quiet=1)
    compileall.compile_dir(sysconfig.get_paths()["purelib"], quiet=1)
    work = Path(tempfile.mkdtemp(prefix="agent-ls-peers-"))
    if not _become_subreaper():
        print("note: not a subreaper here; CPU ms misses processes left to run on", file=sys.stderr)
    fake = Fake()
    headless: dict[str, list[dict[str, float]]] = {
        "agent-ls run": [],
        "claude -p": [],
        "agent-ls run (warm)": [],
    }
    if args.compare:
        headless["agent-ls (compare)"] = []
    servers: dict[str, list[dict[str, float]]] = {"agent-ls serve": [], "copilot LS": []}
    zygote: Zygote | None = None
    try:
        # One discarded warm-up of each (disk caches, Claude Code's first-run files).
        if args.only in (None, "run"):
            zygote = Zygote(work, agent_ls_env(work, fake))
            agent_ls_run(work, fake)
            agent_ls_warm_run(work, fake, zygote)
            claude_run(work, fake, args.peers)
        if args.only in (None, "serve"):
            agent_ls_serve(work)
            copilot_serve(work, args.peers)
        _reap_orphans(_kept(fake))
        for r in range(args.rounds):
            sides: list[tuple[str, Any]] = []
            if args.only in (None, "run"):
                assert zygote is not None
                warm: Zygote = zygote
                sides += [
                    ("agent-ls run", lambda: agent_ls_run(work, fake)),
                    ("claude -p", lambda: claude_run(work, fake, args.peers)),
                    ("agent-ls run (warm)", lambda w=warm: agent_ls_warm_run(work, fake, w)),
                ]
                if args.compare:
                    sides.append(
                        ("agent-ls (compare)", lambda: agent_ls_run(work, fake, args.compare))
                    )
            if args.only in (None, "serve"):
                sides += [
                    ("agent-ls serve", lambda: agent_ls_serve(work)),
                    ("copilot LS", lambda: copilot_serve(work, args.peers)),
                ]
            for name, run in rotated(sides, r):
                result = run()
                # A language server's orphans (its model worker, exiting with it) are reaped
                # now: later, their CPU would count as the next headless side's.
                _reap_orphans(_kept(fake))
                (headless if name in headless else servers)[name].append(result)
                print(
                    f"round {r + 1} {name}: "
                    + ", ".join(f"{k} {v:.0f}" for k, v in result.items()),
                    file=sys.stderr,
                )
    finally:
        if zygote is not None:
            zygote.close()
        fake.close()
        shutil.rmtree(work, ignore_errors=True)
    load = os.getloadavg()
    print(f"## Peers: {args.rounds} interleaved rounds, load average {load[0]:.2f} {load[1]:.2f}\n")
    if headless["agent-ls run"]:
        print(report("Headless task (3 turns), ms", ("agent-ls run", "claude -p"), headless))
        title = "Headless task, `agent-ls warm` running (server and worker forked from it), ms"
        print(report(title, ("agent-ls run (warm)", "claude -p"), headless))
        if args.compare:
            title = f"Headless task, this checkout vs {args.compare}, ms"
            print(report(title, ("agent-ls run", "agent-ls (compare)"), headless))
    if servers["agent-ls serve"]:
        print(report("Language server, ms", ("agent-ls serve", "copilot LS"), servers))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps({"headless": headless, "servers": servers, "load": load}, indent=1)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
