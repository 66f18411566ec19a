"""Result rows, targets, the printed table and the JSON form."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

from bench.stats import Summary


@dataclass(frozen=True)
class Target:
    """What must be ≤ ``limit``: ``value`` (the median), ``ratio`` (median / baseline median)
    or ``excess`` (median − baseline median, what the server adds over the baseline)."""

    limit: float
    on: Literal["value", "ratio", "excess"] = "value"
    approx: bool = False  # "≤ ~50": shown with a tilde, checked as written

    def text(self, unit: str) -> str:
        tilde = "~" if self.approx else ""
        if self.on == "ratio":
            return f"≤ {tilde}{self.limit:g}×"
        if self.on == "excess":
            return f"≤ {tilde}{self.limit:g} {unit} over baseline"
        return f"≤ {tilde}{self.limit:g} {unit}".rstrip()


@dataclass
class Row:
    """One measured metric next to its baseline."""

    bench: str
    metric: str
    unit: str
    value: Summary | None
    baseline: Summary | None = None
    baseline_name: str = ""
    target: Target | None = None
    note: str = ""
    skipped: bool = False
    ok_override: bool | None = None  # for checks that are not a number (e.g. "no SDK imported")
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def ratio(self) -> float | None:
        if self.value is None or self.baseline is None or not self.baseline["median"]:
            return None
        return self.value["median"] / self.baseline["median"]

    @property
    def ok(self) -> bool | None:
        if self.ok_override is not None or self.skipped:
            return self.ok_override
        if self.target is None or self.value is None:
            return None
        measured: float | None = self.value["median"]
        if self.target.on == "ratio":
            measured = self.ratio
        elif self.target.on == "excess":
            if self.baseline is None:
                return None
            measured = self.value["median"] - self.baseline["median"]
        if measured is None or math.isnan(measured):
            return None
        return measured <= self.target.limit

    def target_json(self) -> dict[str, Any]:
        assert self.target is not None
        t = self.target
        return {"limit": t.limit, "on": t.on, "text": t.text(self.unit)}

    def to_json(self) -> dict[str, Any]:
        return {
            "bench": self.bench,
            "metric": self.metric,
            "unit": self.unit,
            "value": self.value,
            "baseline": self.baseline,
            "baseline_name": self.baseline_name,
            "ratio": self.ratio,
            "target": None if self.target is None else self.target_json(),
            "ok": self.ok,
            "skipped": self.skipped,
            "note": self.note,
            "detail": self.detail,
        }


def fmt_num(x: float) -> str:
    if math.isnan(x):
        return "nan"
    a = abs(x)
    if a >= 100 or a == int(a):
        return f"{x:.0f}"
    if a >= 10:
        return f"{x:.1f}"
    if a >= 1:
        return f"{x:.2f}"
    return f"{x:.3f}"


def fmt_summary(s: Summary | None) -> str:
    if s is None:
        return "—"
    if s["n"] <= 1 or s["min"] == s["max"]:
        return fmt_num(s["median"])
    return f"{fmt_num(s['median'])} ({fmt_num(s['min'])}–{fmt_num(s['max'])})"


def mark(ok: bool | None, skipped: bool) -> str:
    if skipped:
        return "skip"
    if ok is None:
        return "info"
    return "pass" if ok else "MISS"


HEADER = ["benchmark", "metric", "measured", "baseline", "ratio", "target", "mark"]


def row_cells(row: Row) -> list[str]:
    unit = f" {row.unit}" if row.unit else ""
    measured = "—" if row.value is None else fmt_summary(row.value) + unit
    baseline = "—"
    if row.baseline is not None:
        baseline = fmt_summary(row.baseline) + unit
        if row.baseline_name:
            baseline += f" [{row.baseline_name}]"
    elif row.baseline_name:
        baseline = row.baseline_name
    ratio = "—" if row.ratio is None else f"{row.ratio:.2f}×"
    target = "—" if row.target is None else row.target.text(row.unit)
    return [row.bench, row.metric, measured, baseline, ratio, target, mark(row.ok, row.skipped)]


def markdown(rows: list[Row]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "|".join("---" for _ in HEADER) + "|"]
    for row in rows:
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in row_cells(row)) + " |")
    notes = [f"- {r.bench} / {r.metric}: {r.note}" for r in rows if r.note]
    if notes:
        lines += ["", "Notes:", *notes]
    return "\n".join(lines)
