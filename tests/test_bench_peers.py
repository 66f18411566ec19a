"""bench/peers.py: the CPU a side had spent by the first request, by process name."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="reads Linux's /proc")
def test_the_cpu_of_a_process_tree_is_summed_by_the_names_its_processes_took() -> None:
    from bench.peers import _tree_cpu

    # A parent that forks a child; the child names itself, burns ~0.3 s of CPU, then waits.
    code = (
        "import os, sys, time\n"
        "if os.fork() == 0:\n"
        "    open('/proc/self/comm', 'w').write('cpu burner')\n"
        "    end = time.process_time() + 0.3\n"
        "    while time.process_time() < end: pass\n"
        "    print('burnt', flush=True)\n"
        "    time.sleep(30)\n"
        "    os._exit(0)\n"
        "time.sleep(30)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    try:
        assert parent.stdout.readline() == "burnt\n"
        time.sleep(0.05)
        cpu = _tree_cpu(parent.pid)
        assert 0.25 <= cpu["cpu burner"] <= 1.0, cpu
        assert sum(cpu.values()) >= cpu["cpu burner"]
        assert len(cpu) == 2, cpu  # the parent under its own name
    finally:
        for task in os.listdir(f"/proc/{parent.pid}/task"):
            with open(f"/proc/{parent.pid}/task/{task}/children") as f:
                for child in f.read().split():
                    os.kill(int(child), 9)
        parent.kill()
        parent.wait()
