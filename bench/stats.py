"""Small statistics helpers: summaries, percentiles, round-robin order, the shared clock."""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from typing import TypedDict, TypeVar

T = TypeVar("T")


def now() -> float:
    """Seconds on CLOCK_MONOTONIC: comparable across processes of this machine."""
    return time.clock_gettime(time.CLOCK_MONOTONIC)


class Summary(TypedDict):
    median: float
    min: float
    max: float
    n: int


def summarize(xs: Sequence[float]) -> Summary | None:
    """Median, min, max and count; None for no samples."""
    if not xs:
        return None
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)}


def pct(xs: Sequence[float], p: float) -> float:
    """The p-th percentile (nearest rank) of ``xs``; nan when empty."""
    s = sorted(xs)
    if not s:
        return float("nan")
    k = min(len(s) - 1, max(0, round(p / 100 * (len(s) - 1))))
    return s[k]


def rotated(items: Sequence[T], r: int) -> list[T]:
    """``items`` rotated by ``r``: round ``r`` of a round-robin starts with a different item."""
    if not items:
        return []
    r %= len(items)
    return [*items[r:], *items[:r]]


def scaled(s: Summary | None, factor: float) -> Summary | None:
    if s is None:
        return None
    return {
        "median": s["median"] * factor,
        "min": s["min"] * factor,
        "max": s["max"] * factor,
        "n": s["n"],
    }
