"""The shell sandbox's cost and what it saves.

1. Overhead per command: the median over N runs (default 50) of ``true``, sandboxed vs not,
   interleaved so both see the same load. Measured twice: the bare process
   (``bash -c true`` vs ``bwrap ... bash -c true``) and the whole ``run_shell`` execution path
   (``tools.shell.execute``: environment, process group, output pipe, plus for the sandbox its
   temp dir, placeholders and clean-up).
2. Questions: a scripted "fix the failing test" session (the demo project, the script model,
   the real tools and permissions, default mode) counted with the sandbox and without, for a
   user who answers "Allow" each time and one who picks "Allow for this session" when offered.

    .venv/bin/python bench/sandbox.py [--runs 50] [--json OUT]

Needs a working ``bwrap`` for the sandboxed half (``apt-get install bubblewrap``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent_ls.agent.loop import AgentLoop
from agent_ls.agent.session import Session
from agent_ls.models.script import ScriptModel
from agent_ls.ports.editor import ConfirmRequest, Decision
from agent_ls.safety.permissions import Permissions
from agent_ls.safety.sandbox import find_bwrap, probe, resolve_status
from agent_ls.settings import Settings
from agent_ls.tools.base import ToolContext
from agent_ls.tools.registry import default_tools
from agent_ls.tools.shell import execute
from agent_ls.workspace import ReadState, Workspace
from tests.fakes import FakePort

TARGET_MS = 15.0


def _ms(samples: list[float]) -> dict[str, float]:
    return {
        "median": round(statistics.median(samples), 2),
        "min": round(min(samples), 2),
        "max": round(max(samples), 2),
    }


def bare_overhead(program: str, ws: Path, runs: int) -> dict[str, Any]:
    """``bash -c true`` vs the same inside bwrap, as plain subprocesses, with an ablation:
    bwrap with only the read-only root, then with the isolation flags, then the full line
    minus ``--unshare-net``, all interleaved in the same rounds."""
    from agent_ls.safety.sandbox import prepare

    sandbox = prepare(program, [ws], network=False)
    try:
        full = sandbox.wrap(["bash", "-c", "true"])
        cut = full.index("--bind")
        variants = {
            "unsandboxed": ["bash", "-c", "true"],
            "bwrap_ro_root_only": [program, "--ro-bind", "/", "/", "--", "bash", "-c", "true"],
            "bwrap_isolation_no_mounts": [*full[:cut], "--", "bash", "-c", "true"],
            "bwrap_full_with_network": [a for a in full if a != "--unshare-net"],
            "sandboxed": full,
        }
        samples: dict[str, list[float]] = {name: [] for name in variants}
        names = list(variants)
        for i in range(runs):
            for name in names[i % len(names) :] + names[: i % len(names)]:
                started = time.perf_counter()
                subprocess.run(variants[name], cwd=ws, check=True)
                samples[name].append((time.perf_counter() - started) * 1000)
    finally:
        sandbox.close()
    return {f"{name}_ms": _ms(xs) for name, xs in samples.items()}


async def tool_overhead(ws: Path, runs: int) -> dict[str, Any]:
    """The run_shell execution path (``execute``) for ``true``, with and without bwrap."""
    status = resolve_status("on", [ws])
    ctx = ToolContext(
        workspace=Workspace([ws]),
        port=FakePort(),
        read_state=ReadState(),
        permissions=Permissions(mode="bypassPermissions"),
        settings=Settings(),
        session_id="bench",
    )
    plain: list[float] = []
    boxed: list[float] = []
    for i in range(runs):
        for which in ("plain", "boxed") if i % 2 else ("boxed", "plain"):
            started = time.perf_counter()
            outcome = await execute("true", ctx, 10_000, status if which == "boxed" else None)
            assert outcome.exit_code == 0, outcome.output
            (plain if which == "plain" else boxed).append((time.perf_counter() - started) * 1000)
    return {"unsandboxed_ms": _ms(plain), "sandboxed_ms": _ms(boxed)}


# --------------------------------------------------------------------------- questions

FIX_SESSION: list[dict[str, Any]] = [
    {"tool_calls": [{"name": "run_shell", "input": {"command": "ls"}}]},
    {"tool_calls": [{"name": "run_shell", "input": {"command": "python3 -m unittest"}}]},
    {"tool_calls": [{"name": "read_file", "input": {"file_path": "stats.py"}}]},
    {
        "tool_calls": [
            {"name": "grep_search", "input": {"pattern": "average\\(", "include": "*.py"}}
        ]
    },
    {
        "tool_calls": [
            {
                "name": "edit_file",
                "input": {
                    "file_path": "stats.py",
                    "old_string": "    return total(values) / len(values)",
                    "new_string": "    if not values:\n        return 0\n"
                    "    return total(values) / len(values)",
                },
            }
        ]
    },
    {"tool_calls": [{"name": "run_shell", "input": {"command": "python3 -m unittest -v"}}]},
    {
        "tool_calls": [
            {
                "name": "run_shell",
                "input": {
                    "command": "mkdir -p reports && python3 -m unittest 2> reports/tests.log"
                },
            }
        ]
    },
    {"tool_calls": [{"name": "run_shell", "input": {"command": "tail -3 reports/tests.log"}}]},
    {"tool_calls": [{"name": "run_shell", "input": {"command": "touch CHANGELOG.md"}}]},
    {"tool_calls": [{"name": "run_shell", "input": {"command": "python3 -m unittest"}}]},
    {"tool_calls": [{"name": "run_shell", "input": {"command": "rm -rf reports"}}]},
    {"text": "Fixed average() for an empty list; the tests pass."},
]


@dataclass
class CountingPort(FakePort):
    """Answers every question the same way and counts them."""

    answer: Decision = Decision.ALLOW
    questions: list[str] = field(default_factory=list)

    async def confirm(self, request: ConfirmRequest) -> Decision:
        self.questions.append(request.message.splitlines()[2].strip())
        if self.answer is Decision.ALLOW_SESSION and request.grant:
            return Decision.ALLOW_SESSION
        return Decision.ALLOW


async def count_questions(sandbox: str, answer: Decision) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="agent-ls-bench-") as tmp:
        ws = Path(tmp) / "project"
        demo = resources.files("agent_ls").joinpath("demo/project")
        with resources.as_file(demo) as src:
            shutil.copytree(src, ws)
        port = CountingPort(answer=answer)
        session = Session()
        loop = AgentLoop(
            session=session,
            model=ScriptModel({"turns": FIX_SESSION}),
            tools=default_tools(),
            workspace=Workspace([ws], buffers=port.open_buffer),
            port=port,
            settings=Settings(sandbox=sandbox),  # type: ignore[arg-type]
            system_prompt="bench",
        )
        await loop.run("The average() helper crashes on an empty list. Fix it.")
        shell_calls = sum(
            1 for t in FIX_SESSION for c in t.get("tool_calls", []) if c["name"] == "run_shell"
        )
        return {
            "questions": len(port.questions),
            "asked_about": port.questions,
            "edit_previews": len(port.proposals),
            "shell_commands": shell_calls,
            "fixed": "if not values" in (ws / "stats.py").read_text(),
        }


async def main_async(runs: int) -> dict[str, Any]:
    program = find_bwrap([])
    why = "bwrap not on PATH" if program is None else probe(program)
    results: dict[str, Any] = {"bwrap": program, "runs": runs, "target_overhead_ms": TARGET_MS}
    results["load_before"] = [round(x, 2) for x in os.getloadavg()]
    if why is not None:
        results["error"] = why
        return results
    assert program is not None
    with tempfile.TemporaryDirectory(prefix="agent-ls-bench-") as tmp:
        ws = Path(tmp) / "ws"
        ws.mkdir()
        results["process"] = bare_overhead(program, ws, runs)
        results["run_shell"] = await tool_overhead(ws, runs)
    questions: dict[str, Any] = {}
    for label, answer in (
        ("allow_each_time", Decision.ALLOW),
        ("allow_for_session", Decision.ALLOW_SESSION),
    ):
        questions[label] = {
            "unsandboxed": await count_questions("off", answer),
            "sandboxed": await count_questions("on", answer),
        }
    results["questions"] = questions
    results["load_after"] = [round(x, 2) for x in os.getloadavg()]
    return results


def report(results: dict[str, Any]) -> str:
    if "error" in results:
        return f"sandbox bench: no sandbox ({results['error']})"
    lines = [
        f"| `true`, median (min) of {results['runs']} | unsandboxed | sandboxed | overhead |",
        "|---|---|---|---|",
    ]
    for key, label in (("process", "bare process"), ("run_shell", "run_shell execute()")):
        plain, boxed = results[key]["unsandboxed_ms"], results[key]["sandboxed_ms"]
        a, b = plain["median"], boxed["median"]
        mark = "pass" if b - a <= TARGET_MS else "MISS"
        lines.append(
            f"| {label} | {a:.2f} ({plain['min']:.2f}) ms | {b:.2f} ({boxed['min']:.2f}) ms "
            f"| {b - a:+.2f} ({boxed['min'] - plain['min']:+.2f}) ms, {mark} ≤ {TARGET_MS:g} |"
        )
    ablation = ", ".join(
        f"{k[:-3].replace('_', ' ')} {v['median']:.2f}" for k, v in results["process"].items()
    )
    lines += ["", f"Bare process, median ms: {ablation}"]
    lines += ["", "| fix-the-failing-test session | questions unsandboxed | questions sandboxed |"]
    lines.append("|---|---|---|")
    for label, pair in results["questions"].items():
        off, on = pair["unsandboxed"], pair["sandboxed"]
        lines.append(f"| {label.replace('_', ' ')} | {off['questions']} | {on['questions']} |")
    on = results["questions"]["allow_each_time"]["sandboxed"]
    lines += ["", f"Still asked with the sandbox: {on['asked_about']}"]
    lines.append(f"Load average before/after: {results['load_before']} / {results['load_after']}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--json", type=Path, help="write the results as JSON here")
    args = parser.parse_args()
    results = asyncio.run(main_async(args.runs))
    print(report(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2), encoding="utf-8")
    return 1 if "error" in results else 0


if __name__ == "__main__":
    raise SystemExit(main())
