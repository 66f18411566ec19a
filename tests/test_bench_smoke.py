"""The benchmark harness runs end to end (one quick round); timings are not checked."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agent_ls.tools.search import rg_binary

REPO = Path(__file__).resolve().parents[1]
BENCHMARKS = {
    "coldstart",
    "first_answer",
    "control",
    "stream",
    "search",
    "edit",
    "memory",
    "exit",
    "acp",
}


@pytest.mark.timeout(600)
@pytest.mark.skipif(rg_binary() is None, reason="rg is not installed")
def test_quick_bench_run_writes_every_benchmark(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, "bench/run.py", "--rounds", "1", "--quick", "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    results = json.loads(out.read_text(encoding="utf-8"))
    assert set(results["benchmarks"]) == BENCHMARKS
    for name, bench in results["benchmarks"].items():
        assert bench["error"] is None, name
        assert bench["rows"], name
        for row in bench["rows"]:
            assert row["bench"] == name
            assert {"metric", "value", "baseline", "ratio", "target", "ok"} <= set(row)
    assert "| benchmark |" in proc.stdout
