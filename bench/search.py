"""``grep_search`` and ``list_files`` in-process against raw ``rg`` on a large tree.

Both sides do the same rg work, so the ratio is the tool's own cost:

* the tool runs in-process (``GrepSearch``/``ListFiles`` with a ``ToolContext``, one event
  loop): rg in a worker thread, its output cut into blocks, matches counted (the first
  ``MATCH_STORE_LIMIT`` kept), rg killed at the first match past ``MATCH_COUNT_LIMIT`` (grep)
  or the first file past ``LIST_COLLECT_LIMIT`` (list); list_files also reads every listed
  file's mtime (it shows the newest first), then either formats its answer;
* the baseline is the same rg binary with the argv the tool builds (``grep_argv`` /
  ``list_argv``: the same output format, flags, globs, ignore and hidden handling, cwd, stdin
  ``/dev/null`` and pipe size), its stdout read as the tool reads it (``READ_CHUNK`` reads,
  ``PUMP_NAP`` after one that came short) and only counted (the two ``FIELD_SEP`` bytes of a
  match line, or a path's NUL), and rg killed at the same cap. For list_files, whose answer
  is the newest files first, that argv with ``--sortr modified`` (rg reads the mtimes and
  sorts) is the baseline; the plain ``rg --files`` listing is shown beside it (``info``) with
  what the mtimes cost;
* grep is also measured against ``rg --json`` with the tool's other flags (its records
  counted by their ``{"type":"match"`` start): the baseline issue #19 names.

Warm page cache (one discarded run of each first).

The tree (``--make-tree DIR``) is copied from this Python's site-packages and standard library
(``.py`` and other text; no ``__pycache__``, ``.so`` or files over 4 MB), site-packages copied
again until at least 10,000 files are searched, plus an ``ignored/`` folder (the stdlib's
``test/``) listed in a root ``.gitignore`` so that ignore handling costs what it does in a real
project with a virtualenv.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any, cast

from bench.servers import REPO, Config
from bench.stats import rotated, summarize
from bench.table import Row, Target

NAME = "search"
MIN_FILES = 10_000
MAX_FILE_BYTES = 4 << 20
MARKER = ".bench-tree.json"
SKIP_SUFFIXES = (".so", ".pyc", ".pyo", ".a", ".o", ".dylib", ".exe", ".dll")
GREP_QUERIES = {
    "rare literal": "get_terminal_size",
    "common word": "import",
    "regex": r"\b[A-Z]\w*Error\(",
}
LIST_QUERIES = {"**/*.py": "**/*.py", "every file": "**/*"}
RG_MATCH = b'{"type":"match"'
MATCH_LINE_SEPS = 2  # a match line of grep_search's argv holds two FIELD_SEP bytes


def _ignore(directory: str, names: list[str]) -> set[str]:
    skipped = set()
    for name in names:
        path = os.path.join(directory, name)
        big = os.path.isfile(path) and os.path.getsize(path) > MAX_FILE_BYTES
        if name == "__pycache__" or name.endswith(SKIP_SUFFIXES) or os.path.islink(path) or big:
            skipped.add(name)
    return skipped


def _copy(src: Path, dest: Path, exclude: tuple[str, ...] = ()) -> None:
    def ignore(directory: str, names: list[str]) -> set[str]:
        skipped = _ignore(directory, names)
        if Path(directory) == src:
            skipped |= {n for n in names if n in exclude}
        return skipped

    shutil.copytree(src, dest, ignore=ignore, dirs_exist_ok=True)


def count_searched(tree: Path) -> int:
    from agent_ls.tools.search import COMMON_ARGS, rg_binary

    rg = rg_binary()
    if rg is None:
        raise RuntimeError("rg is not installed (pip install 'ripgrep>=14.1,<15')")
    out = subprocess.run([rg, "--files", *COMMON_ARGS, "--", str(tree)], capture_output=True)
    return out.stdout.count(b"\n")


def make_tree(dest: Path, min_files: int = MIN_FILES) -> int:
    """Build the large tree at ``dest``; returns the number of files rg searches there."""
    paths = sysconfig.get_paths()
    stdlib, purelib = Path(paths["stdlib"]), Path(paths["purelib"])
    dest.mkdir(parents=True, exist_ok=True)
    (dest / MARKER).unlink(missing_ok=True)
    (dest / ".gitignore").write_text("ignored/\n__pycache__/\n*.pyc\n")
    _copy(stdlib, dest / "stdlib", exclude=("site-packages", "test", "idlelib", "config-3.11"))
    if (stdlib / "test").is_dir():
        _copy(stdlib / "test", dest / "ignored" / "test")
    copies = 0
    while True:
        copies += 1
        _copy(purelib, dest / f"site-packages-{copies}")
        files = count_searched(dest)
        if files >= min_files or copies >= 20:
            break
    (dest / MARKER).write_text(json.dumps({"files": files, "copies": copies}))
    return files


def make_small_tree(dest: Path) -> int:
    """A few hundred files for ``--quick``."""
    dest.mkdir(parents=True, exist_ok=True)
    (dest / ".gitignore").write_text("ignored/\n__pycache__/\n")
    _copy(REPO / "agent_ls", dest / "agent_ls")
    _copy(REPO / "tests", dest / "tests")
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    for package in ("json", "email", "asyncio"):
        _copy(stdlib / package, dest / "stdlib" / package)
    _copy(stdlib / "json", dest / "ignored" / "json")
    files = count_searched(dest)
    (dest / MARKER).write_text(json.dumps({"files": files, "copies": 0}))
    return files


def ensure_tree(config: Config) -> Path:
    """The tree for this run: the large one (built on first use), or a small one in --quick."""
    if config.quick or config.tree is None:
        tree = config.work / "tree"
        if not (tree / MARKER).exists():
            make_small_tree(tree)
        return tree
    if not (config.tree / MARKER).exists():
        print(f"   building the search tree at {config.tree} (once)...", file=sys.stderr)
        make_tree(config.tree)
    return config.tree


# --------------------------------------------------------------------------- measuring


def tool_context(tree: Path) -> Any:
    from agent_ls.settings import Settings
    from agent_ls.tools.base import ToolContext
    from agent_ls.workspace import ReadState, Workspace

    return ToolContext(
        workspace=Workspace([tree]),
        port=cast(Any, object()),  # search never talks to the editor
        read_state=ReadState(),
        permissions=cast(Any, None),
        settings=Settings(),
        session_id="bench",
    )


def run_tool(loop: asyncio.AbstractEventLoop, tool: Any, raw: dict[str, Any], ctx: Any) -> int:
    result = loop.run_until_complete(tool.run(tool.parse(raw), ctx))
    if result.is_error:
        raise RuntimeError(f"{tool.name} failed: {result.content[:300]}")
    out = result.raw_output or {}
    return int(out.get("matches", out.get("count", 0)))


def run_rg(args: list[str], cwd: Path, marker: bytes, cap: int, per_record: int = 1) -> int:
    """Raw rg: count ``marker`` (``per_record`` times in a record) in its output; kill it at
    the first record past ``cap``, as the tool does. Returns the records counted (at most
    ``cap``)."""
    from agent_ls.tools.search import PIPE_BYTES, PUMP_NAP, READ_CHUNK, rg_binary

    proc = subprocess.Popen(
        [cast(str, rg_binary()), *args],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        pipesize=PIPE_BYTES,
    )
    assert proc.stdout is not None
    fd, count, tail, killed = proc.stdout.fileno(), 0, b"", False
    while chunk := os.read(fd, READ_CHUNK):
        buf = tail + chunk  # a marker may straddle two reads
        count += buf.count(marker)
        tail = buf[1 - len(marker) :] if len(marker) > 1 else b""
        if count > cap * per_record:
            proc.kill()
            killed = True
            break
        if len(chunk) < READ_CHUNK:
            time.sleep(PUMP_NAP)
    proc.stdout.close()
    proc.wait()
    if not killed and proc.returncode not in (0, 1):
        raise RuntimeError(f"rg failed with exit status {proc.returncode}")
    return min(count // per_record, cap)


def listing(args: list[str], cwd: Path) -> list[str]:
    """The paths rg lists for ``args``."""
    from agent_ls.tools.search import rg_binary

    out = subprocess.run([cast(str, rg_binary()), *args], cwd=cwd, capture_output=True).stdout
    return [os.fsdecode(p) for p in out.split(b"\0") if p]


def newest_agree(
    loop: asyncio.AbstractEventLoop, tool: Any, pattern: str, ctx: Any, args: list[str], cwd: Path
) -> str:
    """Whether the tool shows the files rg sorts newest: the same modification times, in the
    same order, for the files the tool shows (files of equal time may come in any order)."""
    result = loop.run_until_complete(tool.run(tool.parse({"pattern": pattern}), ctx))
    # The result cap keeps the answer's head and tail: compare the head, up to the cut.
    shown = []
    for line in result.content.splitlines():
        if not (cwd / line).is_file():
            break
        shown.append(line)
    ours = [os.stat(cwd / p).st_mtime for p in shown]
    theirs = [os.stat(p if os.path.isabs(p) else cwd / p).st_mtime for p in listing(args, cwd)]
    same = ours == theirs[: len(ours)]
    verdict = "match" if same else "DIFFER from"
    return f"the first {len(ours):,} files shown: their times {verdict} rg's first {len(ours):,}"


def stat_all(paths: list[str]) -> int:
    """What reading the mtimes alone costs: one ``os.stat`` per listed file."""
    for path in paths:
        os.stat(path)
    return len(paths)


Timings = dict[str, list[float]]


def measure(config: Config, variants: dict[str, Any]) -> tuple[Timings, dict[str, int]]:
    names = list(variants)
    for name in names:  # warm the page cache and the code paths
        variants[name]()
    times: dict[str, list[float]] = {n: [] for n in names}
    counts: dict[str, int] = {}
    for r in range(config.rounds):
        for name in rotated(names, r):
            t0 = time.perf_counter()
            counts[name] = variants[name]()
            times[name].append((time.perf_counter() - t0) * 1000)
    return times, counts


def run(config: Config) -> list[Row]:
    from agent_ls.tools.search import (
        FIELD_SEP,
        LIST_COLLECT_LIMIT,
        MATCH_COUNT_LIMIT,
        PRINT_ARGS,
        GrepSearch,
        ListFiles,
        grep_argv,
        list_argv,
        plan_filter,
    )

    tree = ensure_tree(config)
    files = json.loads((tree / MARKER).read_text())["files"]
    ctx = tool_context(tree)
    loop = asyncio.new_event_loop()
    rows = []
    try:
        for label, pattern in GREP_QUERIES.items():
            grep_args = grep_argv(pattern, plan_filter(None, tree))
            # The baseline: rg's JSON, with the tool's other flags.
            json_args = ["--json", *grep_args[len(PRINT_ARGS) :]]
            times, counts = measure(
                config,
                {
                    "tool": lambda p=pattern: run_tool(loop, GrepSearch(), {"pattern": p}, ctx),
                    "rg": lambda a=grep_args: run_rg(
                        a, tree, FIELD_SEP, MATCH_COUNT_LIMIT, MATCH_LINE_SEPS
                    ),
                    "rg --json": lambda a=json_args: run_rg(a, tree, RG_MATCH, MATCH_COUNT_LIMIT),
                },
            )
            rows.append(
                Row(
                    NAME,
                    f"grep_search {label} `{pattern}` ({files:,} files)",
                    "ms",
                    summarize(times["tool"]),
                    summarize(times["rg"]),
                    f"rg, same argv, killed past {MATCH_COUNT_LIMIT:,} matches",
                    Target(1.1, "ratio"),
                    note=f"matching lines: tool {counts['tool']:,}, rg {counts['rg']:,}",
                )
            )
            rows.append(
                Row(
                    NAME,
                    f"grep_search {label}, against rg --json",
                    "ms",
                    summarize(times["tool"]),
                    summarize(times["rg --json"]),
                    f"rg --json, the same flags otherwise, killed past {MATCH_COUNT_LIMIT:,} "
                    "matches",
                    Target(1.1, "ratio"),
                    note=f"matching lines: rg --json {counts['rg --json']:,}",
                )
            )
        for label, pattern in LIST_QUERIES.items():
            list_args = list_argv(plan_filter(pattern, tree))
            # The same answer from rg: every file listed, newest first (rg stats and sorts).
            sorted_args = [list_args[0], "--sortr", "modified", *list_args[1:]]
            listed = listing(list_args, tree)
            times, counts = measure(
                config,
                {
                    "tool": lambda p=pattern: run_tool(loop, ListFiles(), {"pattern": p}, ctx),
                    "rg": lambda a=list_args: run_rg(a, tree, b"\0", LIST_COLLECT_LIMIT),
                    "rg sorted": lambda a=sorted_args: run_rg(a, tree, b"\0", LIST_COLLECT_LIMIT),
                    "stat": lambda paths=listed: stat_all(paths),
                },
            )
            stat = summarize(times["stat"])
            stat_text = "—" if stat is None else f"{stat['median']:.1f} ms"
            agree = newest_agree(loop, ListFiles(), pattern, ctx, sorted_args, tree)
            rows.append(
                Row(
                    NAME,
                    f"list_files {label} ({files:,} files)",
                    "ms",
                    summarize(times["tool"]),
                    summarize(times["rg sorted"]),
                    "rg --files --sortr modified, same argv",
                    Target(1.2, "ratio"),
                    note=f"files: tool {counts['tool']:,}, rg {counts['rg sorted']:,}; both list "
                    f"newest first; {agree}",
                )
            )
            rows.append(
                Row(
                    NAME,
                    f"list_files {label}, against an unsorted listing",
                    "ms",
                    summarize(times["tool"]),
                    summarize(times["rg"]),
                    "rg --files, same argv (no mtimes, rg's order)",
                    note=f"the tool also reads each file's mtime to list the newest first: "
                    f"os.stat of them all alone takes {stat_text}",
                    detail={"stat_ms": stat},
                )
            )
    finally:
        loop.close()
    return rows
