"""Run every agent-ls benchmark next to its baseline; print the table and write JSON.

    python bench/run.py [--rounds N] [--only coldstart,stream,...] [--out bench/results/latest.json]
    python bench/run.py --make-tree DIR      # build the large search tree once
    python bench/run.py --rounds 1 --quick   # tiny trees, few iterations (the smoke test)

Each benchmark interleaves its variants round-robin, rotating the order every round, and
reports median (min–max) over the rounds. See bench/README.md.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

if __package__ in (None, ""):  # `python bench/run.py`: make `bench` and `tests` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.servers import REPO, Config
from bench.table import Row, markdown

# name → module; run in this order
BENCHMARKS = {
    "coldstart": "bench.coldstart",
    "first_answer": "bench.firstanswer",
    "control": "bench.control",
    "stream": "bench.stream",
    "search": "bench.search",
    "edit": "bench.edit",
    "memory": "bench.memory",
    "exit": "bench.exit",
    "mcp": "bench.mcp_tools",
    "acp": "bench.acp",
}
DEFAULT_OUT = REPO / "bench" / "results" / "latest.json"


def default_tree() -> Path:
    override = os.environ.get("AGENT_LS_BENCH_TREE")
    if override:
        return Path(override)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "agent-ls-bench" / "tree"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python bench/run.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--rounds", type=int, default=5, help="rounds per benchmark (default 5)")
    parser.add_argument("--only", default="", help="comma-separated: " + ",".join(BENCHMARKS))
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="JSON results file")
    parser.add_argument("--quick", action="store_true", help="tiny trees and few iterations")
    parser.add_argument("--tree", type=Path, default=None, help="the large search tree")
    parser.add_argument(
        "--make-tree", type=Path, metavar="DIR", help="build the search tree and exit"
    )
    return parser.parse_args(argv)


def git_rev() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=REPO,
            capture_output=True,
            text=True,
        )
        return out.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except OSError:
        return "?"


def meta(args: argparse.Namespace) -> dict[str, object]:
    return {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "git": git_rev(),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "loadavg": os.getloadavg(),
        "rounds": args.rounds,
        "quick": args.quick,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.make_tree:
        from bench.search import make_tree

        files = make_tree(args.make_tree)
        print(f"search tree: {args.make_tree} ({files:,} files searched)")
        return 0
    names = [n.strip() for n in args.only.split(",") if n.strip()] or list(BENCHMARKS)
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(BENCHMARKS)}")
        return 2
    work = Path(tempfile.mkdtemp(prefix="agent-ls-bench-"))
    tree = None if args.quick else (args.tree or default_tree())
    config = Config(rounds=max(1, args.rounds), quick=args.quick, work=work, tree=tree)
    results: dict[str, object] = {"meta": meta(args), "benchmarks": {}}
    all_rows: list[Row] = []
    failed = False
    try:
        for name in names:
            started = time.monotonic()
            print(f"== {name} ...", file=sys.stderr, flush=True)
            error = None
            try:
                module = importlib.import_module(BENCHMARKS[name])
                rows: list[Row] = module.run(config)
            except Exception as exc:
                failed = True
                error = "".join(traceback.format_exception(exc))
                print(error, file=sys.stderr)
                note = f"{type(exc).__name__}: {exc}"
                rows = [Row(name, "error", "", None, skipped=True, note=note)]
            elapsed = time.monotonic() - started
            print(f"   {name} done in {elapsed:.1f} s", file=sys.stderr, flush=True)
            all_rows += rows
            results["benchmarks"][name] = {  # type: ignore[index]
                "seconds": round(elapsed, 2),
                "error": error,
                "rows": [r.to_json() for r in rows],
            }
    finally:
        shutil.rmtree(work, ignore_errors=True)
    table = markdown(all_rows)
    print(table)
    results["table"] = table
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2, default=str) + "\n", encoding="utf-8")
    print(f"\nwrote {args.out}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
