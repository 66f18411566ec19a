"""``edit_file`` on 10 MB / 1 MB non-ASCII files: delegated to ``bench/bench_edits.py``.

That module is written separately. It is called as ``run(config)`` like every benchmark here
(``config`` is :class:`bench.servers.Config`: ``rounds``, ``quick``, ``work``), or else as
``run(rounds=N, quick=bool)``. It may return :class:`bench.table.Row` objects, or dicts with
``metric`` (or ``name``), ``value`` (a number, a list of samples or a summary dict with
``median``/``min``/``max``/``n``), and optionally ``unit`` (default ms), ``baseline``,
``baseline_name``, ``target`` (a number: value ≤ target) and ``note``.
Without the module the benchmark is reported as skipped.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
from collections.abc import Sequence
from typing import Any

from bench.servers import BENCH, Config
from bench.stats import Summary, summarize
from bench.table import Row, Target

NAME = "edit"


def as_summary(value: Any) -> Summary | None:
    if value is None:
        return None
    if isinstance(value, int | float):
        return summarize([float(value)])
    if isinstance(value, dict) and "median" in value:
        median = float(value["median"])
        return {
            "median": median,
            "min": float(value.get("min", median)),
            "max": float(value.get("max", median)),
            "n": int(value.get("n", 1)),
        }
    if isinstance(value, Sequence) and not isinstance(value, str):
        return summarize([float(x) for x in value])
    raise TypeError(f"unrecognised value {value!r}")


def to_row(item: Any) -> Row:
    if isinstance(item, Row):
        return item
    if not isinstance(item, dict):
        raise TypeError(f"bench_edits returned {type(item).__name__}, not a Row or dict")
    target = item.get("target")
    return Row(
        NAME,
        str(item.get("metric") or item.get("name") or "edit"),
        str(item.get("unit", "ms")),
        as_summary(item.get("value")),
        as_summary(item.get("baseline")),
        str(item.get("baseline_name", "")),
        Target(float(target)) if isinstance(target, int | float) else None,
        note=str(item.get("note", "")),
    )


def run(config: Config) -> list[Row]:
    if (
        importlib.util.find_spec("bench.bench_edits") is None
        or not (BENCH / "bench_edits.py").exists()
    ):
        return [
            Row(
                NAME,
                "edit_file 10 MB / 1 MB non-ASCII",
                "ms",
                None,
                target=Target(15),
                skipped=True,
                note="bench/bench_edits.py is not there yet",
            )
        ]
    module = importlib.import_module("bench.bench_edits")
    params = inspect.signature(module.run).parameters
    if "rounds" in params and "config" not in params:
        result = module.run(rounds=config.rounds, quick=config.quick)
    else:
        result = module.run(config)
    return [to_row(item) for item in result]
