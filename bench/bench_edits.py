"""edit_file on big non-ASCII files: plan a unique replacement near the end, make LSP ranges.

    python bench/bench_edits.py [--rounds 9] [--quick] [--out bench/results/edits.json]

Measured, per file (10 MB and 1 MB of Python-like text; ``bmp``: é → ü every 40th line,
2 bytes per character in CPython; ``astral``: also an emoji line every 40 lines, 4 bytes per
character): ``plan_replacement`` (find, uniqueness, minimal hunk, the new text) plus the hunk's
LSP range from ``LineIndex.position`` in UTF-16 and in UTF-8, as ``lsp.port`` computes them for
the ``WorkspaceEdit``. Baseline, in the same rounds: the bare string work — ``str.count`` for
uniqueness, ``str.find``, ``str.count('\\n')`` for the line, ``rfind`` and a UTF-16 encode of
the line prefix for the column, and the new text by slicing (``edit_fast`` of the anchor
harness in ``shared/bench/baselines.py``). Variants run round-robin, rotating the order each
round; cells are median (min–max) in ms. Targets (issue 4): ≤ 15 ms at 10 MB, ≤ 2 ms at 1 MB,
for BMP text with LF endings; astral and CRLF rows are information (building a 40 MB astral
string pays page faults, in the baseline too).

``run(rounds=, quick=)`` returns the same rows for ``bench/run.py``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # `python bench/bench_edits.py`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent_ls.edits import LineIndex, PositionEncoding, plan_replacement

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "edits.json"

LINE_ASCII = "    result = compute_value(alpha, beta)  # plain ascii comment here\n"
LINE_BMP = "    msg = 'café → naïve résumé'  # Ünïcödé in the BMP\n"
LINE_ASTRAL = "    emoji = '🙂🚀'  # outside the BMP: 2 UTF-16 units each\n"
OLD = "old_value = UNIQUE_TARGET_42(a, b)"
NEW = "new_value = replaced_target(a, b, c)"
TARGETS_MS = {10_000_000: 15.0, 1_000_000: 2.0}


def make_text(size: int, kind: str, crlf: bool = False) -> str:
    """``size`` characters of code with a unique target two lines before the end."""
    block = [LINE_ASCII] * 40
    block[7] = LINE_BMP
    if kind == "astral":
        block[23] = LINE_ASTRAL
    chunk = "".join(block)
    body = (chunk * (size // len(chunk) + 1))[: size - 200]
    body = body[: body.rfind("\n") + 1]
    prefix = {"bmp": "    x = 'é→'", "astral": "    x = '🙂é'"}[kind]
    text = body + prefix + "; " + OLD + "\n" + LINE_ASCII * 2
    return text.replace("\n", "\r\n") if crlf else text


def ours(text: str, encoding: PositionEncoding) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    _new_text, hunks = plan_replacement(text, OLD, NEW)
    index = LineIndex(text)
    return [(index.position(h.start, encoding), index.position(h.end, encoding)) for h in hunks]


def baseline(text: str) -> tuple[tuple[int, int], tuple[int, int]]:
    if text.count(OLD) != 1:
        raise ValueError("not unique")
    at = text.find(OLD)
    end = at + len(OLD)
    line = text.count("\n", 0, at)
    start_col = len(text[text.rfind("\n", 0, at) + 1 : at].encode("utf-16-le")) // 2
    end_col = len(text[text.rfind("\n", 0, end) + 1 : end].encode("utf-16-le")) // 2
    _new_text = text[:at] + NEW + text[end:]
    return (line, start_col), (line + OLD.count("\n"), end_col)


def summary(samples: list[float]) -> dict[str, float]:
    return {
        "median": statistics.median(samples),
        "min": min(samples),
        "max": max(samples),
        "n": len(samples),
    }


def measure(text: str, rounds: int) -> dict[str, list[float]]:
    """Milliseconds per variant, interleaved round-robin with a rotating start."""
    variants: dict[str, Callable[[], object]] = {
        "utf-16": lambda: ours(text, "utf-16"),
        "utf-8": lambda: ours(text, "utf-8"),
        "baseline": lambda: baseline(text),
    }
    names = list(variants)
    for name in names:  # warm up, and check that ours and the baseline agree
        variants[name]()
    # Same range as the baseline's, but for the common suffix ")" that the minimal hunk trims.
    (start, (end_line, end_col)) = baseline(text)
    assert ours(text, "utf-16") == [(start, (end_line, end_col - 1))], ours(text, "utf-16")
    samples: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            started = time.perf_counter()
            variants[name]()
            samples[name].append((time.perf_counter() - started) * 1000)
    return samples


def fmt(s: dict[str, float]) -> str:
    return f"{s['median']:.2f} ({s['min']:.2f}–{s['max']:.2f})"


def run(rounds: int = 9, quick: bool = False) -> list[dict[str, Any]]:
    """The rows for ``bench/run.py`` (and the standalone table)."""
    sizes = [1_000_000] if quick else [10_000_000, 1_000_000]
    rows: list[dict[str, Any]] = []
    for size in sizes:
        for kind, crlf in (("bmp", False), ("astral", False), ("bmp", True)):
            text = make_text(size, kind, crlf)
            samples = measure(text, max(1, rounds))
            label = f"{size // 1_000_000} MB {kind}" + (" CRLF" if crlf else "")
            for encoding in ("utf-16", "utf-8"):
                target = TARGETS_MS[size] if kind == "bmp" and not crlf else None
                note = ""
                if kind == "astral":
                    note = "info: astral text, 4 bytes per character in CPython"
                elif crlf:
                    note = "info: every line ending CRLF"
                rows.append(
                    {
                        "metric": f"edit_file plan + {encoding} range, {label}",
                        "value": summary(samples[encoding]),
                        "unit": "ms",
                        "baseline": summary(samples["baseline"]),
                        "baseline_name": "str.count + find + count('\\n') + new text",
                        "target": target,
                        "note": note,
                        "size": size,
                        "kind": kind + (" CRLF" if crlf else ""),
                        "encoding": encoding,
                        "chars": len(text),
                    }
                )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python bench/bench_edits.py", description=__doc__)
    parser.add_argument("--rounds", type=int, default=9, help="rounds per file (default 9)")
    parser.add_argument("--quick", action="store_true", help="1 MB files only")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"JSON ({DEFAULT_OUT})")
    args = parser.parse_args(argv)
    rows = run(rounds=args.rounds, quick=args.quick)
    print(f"edit_file: plan a unique replacement near the end + LSP range; ms, n={args.rounds}")
    print("| file | encoding | ours | baseline (str.find + str.count) | ratio | target |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        ratio = row["value"]["median"] / row["baseline"]["median"]
        target = f"≤ {row['target']:g} ms" if row["target"] else "info"
        if row["target"]:
            target += " pass" if row["value"]["median"] <= row["target"] else " MISS"
        print(
            f"| {row['size'] // 1_000_000} MB {row['kind']} | {row['encoding']} | "
            f"{fmt(row['value'])} | {fmt(row['baseline'])} | {ratio:.2f}× | {target} |"
        )
    meta = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load": os.getloadavg(),
        "rounds": args.rounds,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=2), encoding="utf-8")
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
