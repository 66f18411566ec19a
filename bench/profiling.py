"""Optional profiles: ``AGENT_LS_BENCH_PYSPY=DIR`` attaches ``py-spy record`` to agent-ls
during the measured part of a benchmark (the control probe window, the fast stream, the first
ask) and writes collapsed stacks per thread to ``DIR/<name>-<pid>.txt``. Sampling is
non-blocking, but timings of a profiled run are still not comparable with a plain run.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def pyspy(pid: int, name: str) -> Iterator[None]:
    out = os.environ.get("AGENT_LS_BENCH_PYSPY")
    spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
    if not out or spy is None:
        yield
        return
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{name}-{pid}.txt"
    argv = [spy, "record", "--pid", str(pid), "--format", "raw", "--threads", "--nonblocking"]
    proc = subprocess.Popen(
        [*argv, "--rate", "1000", "-o", str(target)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(0.2)  # attaching takes a moment
    try:
        yield
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
