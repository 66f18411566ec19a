"""``agent_ls.forking``: a child forked from this interpreter, as a new one would have started.

Each case forks from a fresh single-threaded Python (a pytest worker runs threads, and a fork
there could deadlock), and checks what the child saw from the child itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="forking is Linux-only")

PARENT = r"""
import json, os, sys, threading
from agent_ls.forking import ForkedProcess, can_fork, fork_child

def run(target, keep=(), env=None, name="agent-ls test"):
    assert can_fork()
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    extra_r, extra_w = os.pipe()  # the parent's own: the child must not hold it
    pid = fork_child(target, stdin=in_r, stdout=out_w, stderr=err_w,
                     env=env or {"ONLY": "this"}, cwd=sys.argv[1], argv=["prog", "a"],
                     name=name, keep=keep)
    for fd in (in_r, out_w, err_w):
        os.close(fd)
    proc = ForkedProcess(pid)
    try:
        os.write(in_w, b"ping")
    except BrokenPipeError:  # a child that never reads stdin may be gone already
        pass
    os.close(in_w)
    out = b"".join(iter(lambda: os.read(out_r, 65536), b""))
    err = b"".join(iter(lambda: os.read(err_r, 65536), b""))
    code = proc.wait()
    return {"code": code, "out": out.decode(), "err": err.decode(), "extra": [extra_r, extra_w]}
"""


def parent(tmp_path: Path, body: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", PARENT + body, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if k != "AGENT_LS_FORK"},
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return result


def test_the_child_runs_on_its_pipes_in_its_own_session_with_its_env(tmp_path: Path) -> None:
    result = parent(
        tmp_path,
        r"""
def child():
    fds = sorted(int(fd) for fd in os.listdir("/proc/self/fd"))
    print(json.dumps({
        "stdin": sys.stdin.buffer.read().decode(),
        "own session": os.getsid(0) == os.getpid(),
        "fds": fds,
        "cwd": os.getcwd(),
        "env": dict(os.environ),
        "argv": sys.argv,
        "comm": open("/proc/self/comm").read().strip(),
    }), flush=True)
    print("to stderr", file=sys.stderr, flush=True)
    return 7
print(json.dumps(run(child)))
""",
    )
    assert result["code"] == 7
    assert result["err"] == "to stderr\n"
    seen = json.loads(str(result["out"]))
    assert seen["stdin"] == "ping"
    assert seen["own session"] is True
    # 0-2, and 3 (listdir's own): nothing of the parent's, not even its pipe to the child
    assert seen["fds"] == [0, 1, 2, 3], (seen["fds"], result["extra"])
    assert seen["cwd"] == str(tmp_path)
    assert seen["env"] == {"ONLY": "this"}
    assert seen["argv"] == ["prog", "a"]
    assert seen["comm"] == "agent-ls test"


def test_kept_descriptors_stay_open_in_the_child(tmp_path: Path) -> None:
    result = parent(
        tmp_path,
        r"""
kept_r, kept_w = os.pipe()
def child():
    os.write(kept_w, b"through the kept pipe")
    return 0
outcome = run(child, keep=(kept_w,))
os.close(kept_w)
outcome["kept"] = os.read(kept_r, 100).decode()
print(json.dumps(outcome))
""",
    )
    assert result["code"] == 0 and result["kept"] == "through the kept pipe"


@pytest.mark.parametrize(
    ("body", "code", "stderr"),
    [
        ("raise RuntimeError('boom')", 1, "RuntimeError: boom"),
        ("raise SystemExit(3)", 3, ""),
        ("raise SystemExit('bye')", 1, ""),
        ("return None", 0, ""),
    ],
)
def test_the_childs_end_is_its_exit_status(
    tmp_path: Path, body: str, code: int, stderr: str
) -> None:
    result = parent(tmp_path, f"def child():\n    {body}\nprint(json.dumps(run(child)))\n")
    assert result["code"] == code
    assert stderr in str(result["err"])
    if not stderr:
        assert "Traceback" not in str(result["err"])


def test_wait_times_out_and_kill_ends_the_child(tmp_path: Path) -> None:
    result = parent(
        tmp_path,
        r"""
import subprocess, time
def child():
    time.sleep(30)
r, w = os.pipe()
pid = fork_child(child, stdin=r, stdout=w, stderr=w, env={}, cwd=sys.argv[1], argv=["x"],
                 name="sleeper")
proc = ForkedProcess(pid)
try:
    proc.wait(timeout=0.2)
    timed_out = False
except subprocess.TimeoutExpired:
    timed_out = True
polled = proc.poll()
waiter = threading.Thread(target=proc.wait)  # two waiters at once: the status is kept
waiter.start()
proc.kill()
waiter.join(5)
print(json.dumps({"timed_out": timed_out, "polled": polled, "code": proc.wait(),
                  "after": proc.poll()}))
""",
    )
    assert result == {"timed_out": True, "polled": None, "code": -9, "after": -9}


def test_no_fork_with_a_thread_running_or_when_turned_off() -> None:
    code = (
        "import os, threading, time\n"
        "from agent_ls.forking import can_fork\n"
        "alone = can_fork()\n"
        "os.environ['AGENT_LS_FORK'] = '0'\n"
        "off = can_fork()\n"
        "del os.environ['AGENT_LS_FORK']\n"
        "t = threading.Thread(target=time.sleep, args=(0.5,)); t.start()\n"
        "print(alone, off, can_fork())\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "AGENT_LS_FORK"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, env=env
    )
    assert done.stdout.split() == ["True", "False", "False"], done.stderr
