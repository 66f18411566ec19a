"""``agent-ls warm``: runs forked from a warm process do what cold runs do, with the run's own
directory, environment and exit code; anything amiss and the run starts cold.

Every warm process here is a real ``agent-ls warm`` in a socket folder of the test's own
(``AGENT_LS_WARM_DIR``), asked for its count of forked runs through its socket, so a test
knows which way a run went.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_ls.client import warm as warm_module
from tests.fakeapi import FakeAPI, Turn
from tests.test_cli import EDIT_SCRIPT, _run_in_a_terminal

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the warm process is Linux-only")

SHELL_SCRIPT = {
    "turns": [
        {"tool_calls": [{"name": "read_file", "input": {"file_path": "app.py"}}]},
        {
            "tool_calls": [
                {
                    "name": "edit_file",
                    "input": {"file_path": "app.py", "old_string": "Hello ", "new_string": "Hi "},
                }
            ]
        },
        {
            "tool_calls": [
                {
                    "name": "run_shell",
                    "input": {"command": "printenv WARM_MARKER > seen.txt && pwd >> seen.txt"},
                }
            ]
        },
        {"text": "Changed the greeting."},
    ]
}


class Warm:
    """One ``agent-ls warm --foreground``, a child of the test."""

    def __init__(self, folder: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.folder = folder
        self.env = {**os.environ, **(env or {}), "AGENT_LS_WARM_DIR": str(folder)}
        self.env.pop("AGENT_LS_WARM", None)
        self.log = folder.parent / f"warm-{time.monotonic_ns()}.log"
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "agent_ls", "warm", "--foreground", *args],
                env=self.env,
                stdout=subprocess.PIPE,
                stderr=log,
            )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().decode()
        assert line.startswith("ready "), self.log.read_text()
        self.socket = Path(line[6:].strip())

    def status(self) -> dict[str, Any] | None:
        return warm_module.ask(self.socket, "status")

    def served(self) -> int:
        status = self.status()
        assert status is not None, self.log.read_text()
        return int(status["served"])

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
        self.proc.wait(timeout=30)


@pytest.fixture
def warm(tmp_path: Path) -> Iterator[Warm]:
    folder = tmp_path / "warm"
    process = Warm(folder, "--idle", "300", env={"WARM_MARKER": "the warm process's"})
    yield process
    process.close()
    assert process.proc.returncode == 0, process.log.read_text()
    assert not process.socket.exists(), "a stopped warm process leaves no socket"


def warm_cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``agent-ls warm ARGS`` in ``env``, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "agent_ls", "warm", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def run(
    workspace: Path,
    warm: Warm,
    script: dict[str, Any] | None,
    *args: str,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    full = {**warm.env, **(env or {})}
    full.pop("ANTHROPIC_API_KEY", None)
    if script is not None:
        path = workspace.parent / f"script-{workspace.name}.json"
        path.write_text(json.dumps(script))
        full["AGENT_LS_MODEL"] = f"script:{path}"
    return subprocess.run(
        [sys.executable, "-m", "agent_ls", "run", *args],
        cwd=workspace,
        env=full,
        capture_output=True,
        text=True,
        timeout=60,
    )


def copy_of(workspace: Path, name: str) -> Path:
    other = workspace.parent / name
    other.mkdir()
    for path in workspace.iterdir():
        (other / path.name).write_bytes(path.read_bytes())
    return other


def test_a_run_forked_from_the_warm_process_does_what_a_cold_one_does(
    workspace: Path, warm: Warm
) -> None:
    cold_ws = copy_of(workspace, "cold")
    mine = {"WARM_MARKER": "the run's"}
    done = run(workspace, warm, SHELL_SCRIPT, "--yes", "--json", "Say Hi", env=mine)
    assert done.returncode == 0, done.stderr
    assert warm.served() == 1
    cold = run(
        cold_ws, warm, SHELL_SCRIPT, "--yes", "--json", "Say Hi", env={**mine, "AGENT_LS_WARM": "0"}
    )
    assert cold.returncode == 0, cold.stderr
    assert warm.served() == 1, "AGENT_LS_WARM=0 starts cold"
    answer, cold_answer = json.loads(done.stdout), json.loads(cold.stdout)
    assert answer["text"] == cold_answer["text"] == "Changed the greeting."
    assert answer["stopReason"] == cold_answer["stopReason"] == "end_turn"
    assert (workspace / "app.py").read_text() == (cold_ws / "app.py").read_text()
    assert 'return "Hi " + name' in (workspace / "app.py").read_text()
    # The shell command ran with the run's environment and in its workspace.
    assert (workspace / "seen.txt").read_text().splitlines() == ["the run's", str(workspace)]
    assert (cold_ws / "seen.txt").read_text().splitlines() == ["the run's", str(cold_ws)]


def test_a_failing_run_exits_as_a_cold_one_does(workspace: Path, warm: Warm) -> None:
    done = run(workspace, warm, None, "--model", "nonsense", "hi")
    cold = run(workspace, warm, None, "--model", "nonsense", "hi", env={"AGENT_LS_WARM": "0"})
    assert warm.served() == 1
    assert done.returncode == cold.returncode == 1
    assert "nonsense" in done.stderr and "Traceback" not in done.stderr


def test_runs_one_after_another_and_at_once_each_get_their_own_server(
    workspace: Path, warm: Warm
) -> None:
    spaces = [copy_of(workspace, f"ws{i}") for i in range(3)]
    scripts = [workspace.parent / f"s{i}.json" for i in range(3)]
    procs = []
    for space, script in zip(spaces, scripts, strict=True):
        script.write_text(json.dumps(EDIT_SCRIPT))
        env = {**warm.env, "AGENT_LS_MODEL": f"script:{script}"}
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "agent_ls", "run", "--yes", "-q", "Say Hi"],
                cwd=space,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        )
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert b"Changed the greeting." in out
    assert warm.served() == 3
    for space in spaces:
        assert 'return "Hi " + name' in (space / "app.py").read_text()
    status = warm.status()
    assert status is not None and status["running"] == 0


def test_a_run_of_another_installation_starts_cold(workspace: Path, warm: Warm) -> None:
    # AGENT_LS_EAGER_SDK changes how the SDK was imported: the warm process cannot stand in.
    done = run(
        workspace, warm, EDIT_SCRIPT, "--yes", "-q", "Say Hi", env={"AGENT_LS_EAGER_SDK": "1"}
    )
    assert done.returncode == 0, done.stderr
    assert warm.served() == 0
    assert 'return "Hi " + name' in (workspace / "app.py").read_text()


def test_the_real_sdk_streams_from_a_forked_worker(workspace: Path, warm: Warm) -> None:
    with FakeAPI() as api:
        api.enqueue(Turn(text="Warm hello."))
        env = {
            "AGENT_LS_MODEL": "anthropic:claude-sonnet-5-5",
            "ANTHROPIC_BASE_URL": api.url,
        }
        full = {**warm.env, **env, "ANTHROPIC_API_KEY": "test-key"}
        done = subprocess.run(
            [sys.executable, "-m", "agent_ls", "run", "--no", "--json", "-q", "hi"],
            cwd=workspace,
            env=full,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["text"] == "Warm hello."
        assert len(api.requests) == 1
        headers = api.requests[0].headers  # the run's key, whichever header carries it
        assert "test-key" in (headers.get("x-api-key"), headers.get("authorization", "")[7:])
        assert not api.rejections
    assert warm.served() == 1


def test_ctrl_c_in_a_terminal_cancels_a_warm_run(workspace: Path, warm: Warm) -> None:
    script = workspace.parent / "slow.json"
    script.write_text(json.dumps({"chunk_size": 2, "delay_ms": 30, "turns": [{"text": "a" * 400}]}))
    env = {**warm.env, "AGENT_LS_MODEL": f"script:{script}"}
    code, shown = _run_in_a_terminal(
        ["-m", "agent_ls", "run", "--no", "write a lot"], workspace, env, b"\x03"
    )
    assert code == 130, shown
    assert "[cancelled]" in shown and "Traceback" not in shown
    assert warm.served() == 1
    status = warm.status()
    assert status is not None and status["running"] == 0


def test_a_killed_warm_process_leaves_runs_working(workspace: Path, tmp_path: Path) -> None:
    folder = tmp_path / "warm"
    process = Warm(folder, "--idle", "300")
    process.proc.kill()
    process.proc.wait(timeout=30)
    assert process.socket.exists()  # what a killed one leaves behind
    done = run(workspace, process, EDIT_SCRIPT, "--yes", "-q", "Say Hi")
    assert done.returncode == 0, done.stderr
    assert 'return "Hi " + name' in (workspace / "app.py").read_text()
    status = warm_cli(process.env, "--status")
    assert status.returncode == 1 and "none running" in status.stdout
    assert not process.socket.exists(), "--status removes a socket nobody listens on"


def test_an_idle_warm_process_exits_and_removes_its_socket(tmp_path: Path) -> None:
    process = Warm(tmp_path / "warm", "--idle", "0.5")
    assert process.proc.wait(timeout=30) == 0
    assert not process.socket.exists()


def test_warm_starts_in_the_background_and_stops(tmp_path: Path) -> None:
    env = {**os.environ, "AGENT_LS_WARM_DIR": str(tmp_path / "warm")}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return warm_cli(env, *args)

    started = cli("--idle", "300")
    assert started.returncode == 0, started.stderr
    assert "ready" in started.stdout
    status = cli("--status")
    assert status.returncode == 0 and "used by runs" in status.stdout, status.stdout
    from agent_ls import DEFAULT_MODEL

    assert f"{DEFAULT_MODEL} loaded" in status.stdout  # the SDK it has ready
    pid = int(status.stdout.split("pid ")[1].split()[0])
    again = cli("--idle", "300")  # one per installation
    assert again.returncode == 0 and cli("--status").stdout.count("pid ") == 1
    stopped = cli("--stop")
    assert stopped.returncode == 0 and f"pid {pid}" in stopped.stdout
    deadline = time.monotonic() + 30
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{pid}").exists() or _zombie(pid), "it did not stop"
    assert not list((tmp_path / "warm").glob("warm-*.sock"))


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_a_socket_folder_others_can_enter_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "open"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    monkeypatch.setenv("AGENT_LS_WARM_DIR", str(folder))
    assert warm_module.socket_dir() is None
    folder.chmod(0o700)
    assert warm_module.socket_dir() == folder


def test_the_fingerprint_changes_with_a_file_of_agent_ls(tmp_path: Path) -> None:
    # Checked through a copy of the package, not by touching the installed one.
    import shutil

    import agent_ls

    copy = tmp_path / "agent_ls"
    shutil.copytree(
        Path(agent_ls.__file__).parent, copy, ignore=shutil.ignore_patterns("__pycache__")
    )
    code = "from agent_ls.client.warm import fingerprint; print(fingerprint())"
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}

    def key() -> str:
        return subprocess.run(
            [sys.executable, "-c", code],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()

    first = key()
    assert key() == first
    (copy / "prompts" / "extra.md").write_text("new")
    assert key() != first


def test_a_signal_reaches_the_forked_server_through_its_pidfd(workspace: Path, warm: Warm) -> None:
    # The run's side as the headless client uses it, in an interpreter like the CLI's (the
    # fingerprint covers sys.path, which pytest's own differs in).
    code = """if True:
        import json, os, signal, sys
        from pathlib import Path
        from agent_ls.client.warm import spawn_warm
        server = spawn_warm(Path(sys.argv[1]), dict(os.environ))
        assert server is not None
        seen = {"running": server.poll()}
        server.send_signal(signal.SIGTERM)
        seen["code"] = server.wait(timeout=30)
        seen["again"] = server.poll()
        server.kill()  # a no-op once it is gone
        print(json.dumps(seen))
    """
    env = {**warm.env, "AGENT_LS_MODEL": "script:/nonexistent.json"}
    done = subprocess.run(
        [sys.executable, "-c", code, str(workspace)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen == {"running": None, "code": -signal.SIGTERM, "again": -signal.SIGTERM}
    assert warm.served() == 1


def test_a_stopped_warm_process_lets_its_runs_finish_and_takes_no_new_one(
    workspace: Path, tmp_path: Path
) -> None:
    process = Warm(tmp_path / "warm", "--idle", "300")
    slow = workspace.parent / "slow.json"
    slow.write_text(json.dumps({"chunk_size": 4, "delay_ms": 20, "turns": [{"text": "b" * 400}]}))
    env = {**process.env, "AGENT_LS_MODEL": f"script:{slow}"}
    in_flight = subprocess.Popen(
        [sys.executable, "-m", "agent_ls", "run", "--no", "-q", "write"],
        cwd=workspace,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 30
    while (process.status() or {}).get("running") != 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert warm_module.ask(process.socket, "stop") is not None
    # At once: a run now must not wait for an answer that will not come.
    deadline = time.monotonic() + 5
    while process.socket.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not process.socket.exists()
    other = copy_of(workspace, "other")
    started = time.monotonic()
    done = run(other, process, EDIT_SCRIPT, "--yes", "-q", "Say Hi")
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started < 30
    out, err = in_flight.communicate(timeout=60)
    assert in_flight.returncode == 0, err
    assert out.decode().strip() == "b" * 400
    assert process.proc.wait(timeout=30) == 0
    assert "exiting after 1 runs" in process.log.read_text()


def test_status_without_a_socket_folder_says_none_and_creates_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "never"
    env = {**os.environ, "AGENT_LS_WARM_DIR": str(folder)}
    for flag, code in (("--status", 1), ("--stop", 0)):
        done = warm_cli(env, flag)
        assert done.returncode == code, done.stderr
        assert "none running" in done.stdout
    assert not folder.exists()


def test_a_second_warm_process_for_the_same_installation_steps_aside(warm: Warm) -> None:
    done = warm_cli(warm.env, "--foreground")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"ready {warm.socket}"
    assert "one is running already" in done.stderr
    status = warm.status()
    assert status is not None and status["pid"] == warm.proc.pid


def test_a_socket_path_too_long_for_a_unix_address_still_serves(
    workspace: Path, tmp_path: Path
) -> None:
    # sun_path holds 107 bytes: a deeper AGENT_LS_WARM_DIR (pytest's under xdist came to
    # 108) made a warm process that said "ready" and that no run or --status could reach.
    folder = tmp_path / ("d" * 80) / "warm"
    folder.parent.mkdir()
    process = Warm(folder, "--idle", "300")
    try:
        assert len(os.fsencode(process.socket)) > 107
        assert process.status() is not None
        done = run(workspace, process, {"turns": [{"text": "Hello."}]}, "--json", "hi")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["text"] == "Hello."
        assert process.served() == 1
    finally:
        process.close()
    assert process.proc.returncode == 0, process.log.read_text()
    assert not process.socket.exists()


def test_the_warm_process_preloads_what_each_worker_would_run_after_its_warm_up(
    tmp_path: Path,
) -> None:
    # What the SDK's warm-up runs once it is ready (anthropic's error table, 277 modules) is
    # run once in the warm process: its forked workers find it done instead of each running
    # it again.
    script = (
        "import json, sys\n"
        "from agent_ls.client.warm import preload\n"
        "from agent_ls.models.sdk_import import is_deferred\n"
        "preload('anthropic:claude-sonnet-4-5')\n"
        "table = sys.modules.get('anthropic._error_classes')\n"
        "print(json.dumps(table is not None and not is_deferred(table)))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "AGENT_LS_DATA_DIR": str(tmp_path), "ANTHROPIC_API_KEY": "k"},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "true"
