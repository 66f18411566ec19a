"""The model worker process: the SDKs stream there, the server sees the same turns.

The error table runs through the worker too (``tests/test_provider_errors.py``); here, what only
a second process brings: a whole turn crossing the pipe, a cancelled stream closing its HTTP
response, a worker that dies or is fed garbage, and the server's worker from start to exit.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_ls.models import load_model, remote
from agent_ls.models.anthropic import AnthropicModel
from agent_ls.models.remote import ModelWorker, RemoteModel
from agent_ls.ports.messages import Message, TextBlock, ToolUseBlock
from agent_ls.ports.model import (
    ModelError,
    ModelEvent,
    ModelRequest,
    TextDelta,
    ToolInputDelta,
    ToolUseStart,
    TurnComplete,
)
from tests.editor_sim import editor
from tests.fakeapi import FakeAPI, Turn, TurnUsage

SPEC = "anthropic:claude-sonnet-5-5"
REQUEST = ModelRequest(system="s", tools=[], messages=[Message("user", [TextBlock("hi")])])


@pytest.fixture
def api() -> Iterator[FakeAPI]:
    with FakeAPI() as fake:
        yield fake
    assert not fake.rejections, "the real API would have refused these requests"


def api_env(api: FakeAPI) -> dict[str, str]:
    return {**os.environ, "ANTHROPIC_BASE_URL": api.url, "ANTHROPIC_API_KEY": "k"}


@pytest.fixture
async def worker(api: FakeAPI) -> AsyncIterator[ModelWorker]:
    w = ModelWorker.spawn([SPEC], env=api_env(api))
    yield w
    w.stop()
    await asyncio.to_thread(_wait_gone, w.pid)


def remote_model(worker: ModelWorker) -> RemoteModel:
    return RemoteModel(AnthropicModel("claude-sonnet-5-5"), lambda: worker)


async def collect(model: RemoteModel, request: ModelRequest = REQUEST) -> list[ModelEvent]:
    return [event async for event in model.stream(request)]


def _wait_gone(pid: int, timeout: float = 5.0) -> bool:
    """Whether ``pid`` ended (exited, or a zombie nobody reaped yet) within ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.02)
    return False


def children(pid: int) -> list[tuple[int, str]]:
    """``(pid, "[name] command line")`` of each child of ``pid`` (a forked child has its
    parent's command line, and a name of its own)."""
    found: list[tuple[int, str]] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            try:
                cmdline = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ")
                name = Path(f"/proc/{child}/comm").read_text().strip()
            except OSError:
                continue
            found.append((int(child), f"[{name}] {cmdline.decode(errors='replace')}"))
    return found


def is_worker(cmd: str) -> bool:
    return "agent_ls.models.worker" in cmd or cmd.startswith("[agent-ls worker]")


def is_server(cmd: str) -> bool:
    return " -m agent_ls serve" in cmd or cmd.startswith("[agent-ls serve]")


def model_workers(pid: int) -> list[int]:
    return [child for child, cmd in children(pid) if is_worker(cmd)]


async def test_a_whole_turn_crosses_the_pipe(api: FakeAPI, worker: ModelWorker) -> None:
    api.enqueue(
        Turn(
            text=["Let me ", "look."],
            tool_uses=[("read_file", {"file_path": "a.py"}, "toolu_1")],
            usage=TurnUsage(input_tokens=12, output_tokens=7),
        )
    )
    events = await collect(remote_model(worker))
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text == "Let me look."
    starts = [e for e in events if isinstance(e, ToolUseStart)]
    assert [(s.id, s.name) for s in starts] == [("toolu_1", "read_file")]
    partial = "".join(e.partial_json for e in events if isinstance(e, ToolInputDelta))
    assert partial.replace(" ", "") == '{"file_path":"a.py"}'
    done = events[-1]
    assert isinstance(done, TurnComplete)
    assert done.stop_reason == "tool_use"
    assert (done.usage.input_tokens, done.usage.output_tokens) == (12, 7)
    tool = [b for b in done.message.content if isinstance(b, ToolUseBlock)]
    assert tool[0].input == {"file_path": "a.py"}
    assert api.requests[0].body["model"] == "claude-sonnet-5-5"


async def test_streams_share_the_worker(api: FakeAPI, worker: ModelWorker) -> None:
    api.enqueue(*(Turn(text=f"answer {i}", chunk_delay=0.01) for i in range(3)))
    model = remote_model(worker)
    runs = await asyncio.gather(*(collect(model) for _ in range(3)))
    texts = sorted("".join(e.text for e in run if isinstance(e, TextDelta)) for run in runs)
    assert texts == ["answer 0", "answer 1", "answer 2"]


async def test_a_cancelled_stream_closes_its_response(api: FakeAPI, worker: ModelWorker) -> None:
    api.enqueue(Turn(text=[f"w{i} " for i in range(200)], chunk_delay=0.02), Turn(text="next"))
    model = remote_model(worker)
    stream = model.stream(REQUEST)
    async for event in stream:
        if isinstance(event, TextDelta):
            break
    await stream.aclose()  # as the agent loop does when the user cancels
    assert await asyncio.to_thread(api.wait_disconnect, 1, 5.0), "the HTTP stream stayed open"
    events = await collect(model)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "next"


async def test_a_dead_worker_fails_the_turn_retryably_and_is_replaced(
    api: FakeAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in api_env(api).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(remote, "_shared", None)
    model = load_model(SPEC, in_worker=True)
    assert isinstance(model, RemoteModel)
    api.enqueue(Turn(text=[f"w{i} " for i in range(200)], chunk_delay=0.02), Turn(text="again"))
    first = remote.shared_worker()
    with pytest.raises(ModelError) as info:
        async for event in model.stream(REQUEST):
            if isinstance(event, TextDelta):
                os.kill(first.pid, signal.SIGKILL)
    assert info.value.retryable is True
    assert "model worker process exited" in str(info.value)
    events = await collect(model)  # type: ignore[arg-type]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "again"
    second = remote.shared_worker()
    assert second.pid != first.pid
    second.stop()


def test_garbage_on_its_stdin_ends_the_worker_with_an_error() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "agent_ls.models.worker"],
        input=b"\x00\x00\x00\x05hello",
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert b"bad input from the server" in proc.stderr
    assert proc.stdout == b""


def test_stdin_closing_ends_the_worker_at_once() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent_ls.models.worker"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    time.sleep(0.3)
    assert proc.stdin is not None
    proc.stdin.close()
    assert proc.wait(timeout=10) == 0


async def test_the_server_streams_through_its_worker_and_leaves_none(
    workspace: Path, api: FakeAPI
) -> None:
    api.enqueue(Turn(text="Hello from the worker."))
    env = {"AGENT_LS_MODEL": SPEC, "ANTHROPIC_BASE_URL": api.url, "ANTHROPIC_API_KEY": "k"}
    async with editor(workspace, env=env) as ed:
        result = await ed.ask("hi")
        server = ed.client._server
        assert server is not None
        workers = model_workers(server.pid)
    assert result["text"] == "Hello from the worker.", result
    assert len(workers) == 1, children(server.pid)
    assert await asyncio.to_thread(_wait_gone, workers[0]), "the worker outlived the server"


async def test_with_the_worker_off_the_sdk_runs_in_the_server(
    workspace: Path, api: FakeAPI
) -> None:
    api.enqueue(Turn(text="In process."))
    env = {
        "AGENT_LS_MODEL": SPEC,
        "ANTHROPIC_BASE_URL": api.url,
        "ANTHROPIC_API_KEY": "k",
        "AGENT_LS_MODEL_WORKER": "0",
    }
    async with editor(workspace, env=env) as ed:
        result = await ed.ask("hi")
        server = ed.client._server
        assert server is not None
        assert model_workers(server.pid) == []
    assert result["text"] == "In process.", result


@pytest.mark.parametrize(
    ("model", "expected"), [(SPEC, 1), ("openai:gpt-4o", 1), ("script:/nonexistent.json", 0)]
)
def test_serve_starts_the_worker_with_the_process(
    workspace: Path, tmp_path: Path, model: str, expected: int
) -> None:
    # Before `initialized` (the settings are not known yet): the SDK of the model the
    # environment names starts loading at once, elsewhere; a script model needs none.
    from tests.rawclient import RawClient

    server = RawClient(
        workspace, env={"AGENT_LS_DATA_DIR": str(tmp_path / "data"), "AGENT_LS_MODEL": model}
    )
    try:
        params = {"processId": os.getpid(), "rootUri": workspace.as_uri(), "capabilities": {}}
        assert "result" in server.request("initialize", params)  # and no `initialized`
        workers = model_workers(server.proc.pid)
        assert len(workers) == expected, children(server.proc.pid)
    finally:
        server.close()
    for pid in workers:
        assert _wait_gone(pid), "the worker outlived the server"


def _tree(pid: int) -> dict[int, str]:
    """Every descendant of ``pid``: its command line."""
    found: dict[int, str] = {}
    for child, cmd in children(pid):
        found[child] = cmd
        found.update(_tree(child))
    return found


@pytest.mark.parametrize("fork", ["1", "0"], ids=["forked", "new-interpreters"])
def test_run_hands_its_early_worker_to_the_server(
    workspace: Path, api: FakeAPI, fork: str
) -> None:
    # `agent-ls run` starts the worker itself, before the server's interpreter is up, and the
    # server adopts it: one worker in all, gone with the run.
    api.enqueue(Turn(text="Done.", latency=1.5))
    env = {**api_env(api), "AGENT_LS_MODEL": SPEC, "AGENT_LS_DATA_DIR": str(workspace / ".d")}
    env["AGENT_LS_FORK"] = fork
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent_ls", "run", "--yes", "--json", "-q", "hi"],
        cwd=workspace,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while not api.requests and time.monotonic() < deadline:
        time.sleep(0.02)
    tree = _tree(proc.pid)
    direct = dict(children(proc.pid))  # while the run waits for its answer
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert '"text": "Done."' in out.decode()
    workers = [pid for pid, cmd in tree.items() if is_worker(cmd)]
    assert len(workers) == 1, tree
    servers = [pid for pid, cmd in direct.items() if is_server(cmd)]
    assert len(servers) == 1, direct
    assert workers[0] in direct, "the run's worker is the client's child, not the server's"
    for pid in workers:
        assert _wait_gone(pid), "the worker outlived the run"


def test_the_adopted_pipes_are_not_inherited_further(tmp_path: Path) -> None:
    # A shell command or MCP server that kept the pipe to the worker open would keep the
    # worker alive after the server is gone.
    code = (
        "import os, subprocess, sys\n"
        "from agent_ls.models import remote\n"
        "w = remote._adopt_handed_over()\n"
        "assert w is not None and os.environ.get(remote.HANDOFF) is None\n"
        "fds = subprocess.run(['ls', '/proc/self/fd'], close_fds=False, capture_output=True,\n"
        "                     text=True).stdout.split()\n"
        "print(' '.join(fds))\n"
    )
    to_r, to_w = os.pipe()
    from_r, from_w = os.pipe()
    env = {**os.environ, remote.HANDOFF: f"{os.getpid()}:{to_w}:{from_r}"}
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        pass_fds=(to_w, from_r),
        capture_output=True,
        text=True,
        timeout=60,
    )
    for fd in (to_r, to_w, from_r, from_w):
        os.close(fd)
    assert done.returncode == 0, done.stderr
    inherited = {int(fd) for fd in done.stdout.split()}
    assert to_w not in inherited and from_r not in inherited, inherited


def test_ctrl_c_cancels_a_model_run_and_the_terminal_shows_no_worker_noise(
    workspace: Path, api: FakeAPI
) -> None:
    from tests.test_cli import _run_in_a_terminal

    api.enqueue(Turn(text=["aaaa"] + ["bb"] * 300, chunk_delay=0.03))
    env = {**api_env(api), "AGENT_LS_MODEL": SPEC, "AGENT_LS_DATA_DIR": str(workspace / ".d")}
    code, shown = _run_in_a_terminal(
        ["-m", "agent_ls", "run", "--no", "write a lot"], workspace, env, b"\x03"
    )
    assert code == 130, shown
    assert "[cancelled]" in shown
    for noise in ("Traceback", "KeyboardInterrupt", "Warning", "error"):
        assert noise not in shown, shown


def test_acp_starts_the_worker_with_the_process(workspace: Path, tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent_ls", "acp", "--model", "openai:gpt-4o"],
        cwd=workspace,
        env={**os.environ, "AGENT_LS_DATA_DIR": str(tmp_path / "data")},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                 "params": {"protocolVersion": 1, "clientCapabilities": {}}}
        proc.stdin.write((json.dumps(hello) + "\n").encode())
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == 1
        workers = model_workers(proc.pid)
        assert len(workers) == 1, children(proc.pid)
        assert "openai:gpt-4o" in dict(children(proc.pid))[workers[0]]
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    assert _wait_gone(workers[0]), "the worker outlived the ACP agent"


async def test_a_large_request_crosses_the_pipe_whole(api: FakeAPI, worker: ModelWorker) -> None:
    # 6 MB of history: many pipe buffers' worth, written by the writer thread while the
    # worker reads; nothing is cut or reordered on the way to the API.
    big = "".join(f"line {i:07d} of a large file\n" for i in range(200_000))
    request = ModelRequest(system="s", tools=[], messages=[Message("user", [TextBlock(big)])])
    api.enqueue(Turn(text="read it"))
    events = await asyncio.wait_for(collect(remote_model(worker), request), 60)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "read it"
    sent = api.requests[0].body["messages"][0]["content"]
    text = sent if isinstance(sent, str) else "".join(block["text"] for block in sent)
    assert text == big


def _model_without_sdk() -> type[Any]:
    """An SDK model whose SDK imports and client cost nothing: the worker's warm-up at once."""
    from agent_ls.models.sdk import SdkModel

    class WithoutSdk(SdkModel[Any]):
        default_context_window = 1000

        def prepare_sdk(self) -> None:
            pass

        def import_sdk(self) -> None:
            pass

        def _make_client(self) -> Any:
            return object()

    return WithoutSdk


async def test_the_worker_says_warmed_before_it_rehearses_if_it_does() -> None:
    # The rehearsal's first steps block its loop (imports, first-time model building): the
    # server, waiting to stream, must hear "warmed" the moment the SDK is loaded, not after.
    import io

    from agent_ls.models.frames import decode
    from agent_ls.models.worker import Worker

    out = io.BytesIO()
    sent_before_rehearsal: list[tuple[object, ...]] = []

    class Slow(_model_without_sdk()):
        provider = "slow"

        async def rehearse(self) -> None:
            sent_before_rehearsal.extend(frames(out.getvalue()))
            time.sleep(0.05)  # noqa: ASYNC251 (blocking, as an import is)

    def frames(data: bytes) -> list[tuple[object, ...]]:
        found = []
        while data:
            size = int.from_bytes(data[:4], "big")
            found.append(decode(data[4 : 4 + size]))
            data = data[4 + size :]
        return found

    for rehearse in (True, False):
        out.seek(0)
        out.truncate()
        sent_before_rehearsal.clear()
        worker = Worker(out, rehearse=rehearse)
        worker._models["slow:x"] = Slow("x")
        worker.answer_warm("slow:x")
        for _ in range(100):
            await asyncio.sleep(0.01)
            if ("warmed", "slow:x") in frames(out.getvalue()):
                break
        await asyncio.sleep(0.1)
        assert frames(out.getvalue()) == [("warmed", "slow:x")]
        # A worker told its first stream is on its way does not rehearse at all.
        assert sent_before_rehearsal == ([("warmed", "slow:x")] if rehearse else [])


async def test_the_remote_models_warm_up_does_not_wait_for_the_worker(api: FakeAPI) -> None:
    # The server's warm-up asks the worker to warm and goes on (the first ask's prompt and
    # tools are built meanwhile); the stream itself waits for the worker's SDK.
    w = ModelWorker.spawn([], env=api_env(api))
    try:
        model = remote_model(w)
        started = time.monotonic()
        await model.warm()
        assert time.monotonic() - started < 0.05  # the SDK's import takes far longer
        api.enqueue(Turn(text="warm enough"))
        events = await collect(model)
        assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "warm enough"
    finally:
        w.stop()
        await asyncio.to_thread(_wait_gone, w.pid)


async def test_a_real_stream_stops_the_rehearsal_it_would_wait_behind() -> None:
    # The canned stream only warms the SDK up; once a real stream needs the worker's CPU, it
    # stops where it is instead of running its course first.
    import io

    from agent_ls.models.worker import Worker

    rehearsal: list[str] = []

    class Rehearsing(_model_without_sdk()):
        provider = "rehearsing"

        async def rehearse(self) -> None:
            rehearsal.append("started")
            try:
                await asyncio.sleep(30)
                rehearsal.append("finished")
            except asyncio.CancelledError:
                rehearsal.append("stopped")
                raise

        async def stream(self, request: Any) -> Any:
            rehearsal.append("streamed")
            return
            yield

    worker = Worker(io.BytesIO())
    worker._models["rehearsing:x"] = Rehearsing("x")
    worker.answer_warm("rehearsing:x")
    for _ in range(200):
        await asyncio.sleep(0.01)
        if rehearsal:
            break
    assert rehearsal == ["started"]
    worker.handle(("stream", 1, "rehearsing:x", None))
    for _ in range(200):
        await asyncio.sleep(0.01)
        if len(rehearsal) == 3:
            break
    assert sorted(rehearsal) == ["started", "stopped", "streamed"]


def test_stdin_closing_ends_the_worker_at_once_while_its_sdk_still_imports(
    tmp_path: Path,
) -> None:
    # The server exits while its worker still imports the SDK (half a second of CPU): the
    # worker leaves with it, not when the import ends. An SDK whose import never ends
    # stands in for the slow one.
    sdk = tmp_path / "sdk" / "anthropic"
    sdk.mkdir(parents=True)
    (sdk / "__init__.py").write_text("")
    begun = tmp_path / "import-begun"
    stall = f"import time\nopen({str(begun)!r}, 'w').close()\ntime.sleep(60)\n"
    (sdk / "_client.py").write_text(stall)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(sdk.parent), *sys.path[1:]])}
    env.update(ANTHROPIC_API_KEY="k", ANTHROPIC_BASE_URL="http://127.0.0.1:9")
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent_ls.models.worker", "--no-rehearsal", SPEC],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
    )
    try:
        deadline = time.monotonic() + 30
        while not begun.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert begun.exists(), "the worker never began importing the SDK"
        assert proc.poll() is None
        assert proc.stdin is not None
        proc.stdin.close()
        assert proc.wait(timeout=10) == 0
    finally:
        proc.kill()
        proc.wait()


async def test_what_no_request_waits_for_runs_once_no_stream_has_run_for_a_while(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The SDK's error table (after_warm_up, ~100 ms of CPU) ran the moment the warm-up ended,
    # beside the first request `agent-ls run` sends at once: it now waits until the worker has
    # gone a while without a stream; what the import read is kept after each stream anyway.
    import io

    from agent_ls.models import worker as worker_module
    from agent_ls.models.worker import Worker

    quiet = 0.3
    monkeypatch.setattr(worker_module, "QUIET_BEFORE_REST", quiet)
    def recording(seen: list[tuple[str, float]]) -> Any:
        class Recording(_model_without_sdk()):
            provider = "recording"

            def after_warm_up(self) -> None:
                seen.append(("rest", time.monotonic()))

            def keep_what_imports_read(self) -> None:
                seen.append(("kept", time.monotonic()))

            async def rehearse(self) -> None:
                pass

            async def stream(self, request: Any) -> Any:
                seen.append(("stream", time.monotonic()))
                await asyncio.sleep(0.4)
                seen.append(("streamed", time.monotonic()))
                return
                yield

        return Recording("x")

    for rehearse in (False, True):
        seen: list[tuple[str, float]] = []
        started = time.monotonic()  # before the worker starts counting its quiet time
        worker = Worker(io.BytesIO(), rehearse=rehearse)
        worker._models["recording:x"] = recording(seen)
        worker.answer_warm("recording:x")
        if not rehearse:  # `agent-ls run`'s worker: its first stream follows at once
            worker.handle(("stream", 1, "recording:x", None))
        for _ in range(300):
            await asyncio.sleep(0.01)
            if "rest" in dict(seen):
                break
        at = dict(seen)
        if rehearse:  # a language server's worker, asked nothing: the rest follows in time
            assert list(at) == ["rest"]
            assert at["rest"] - started >= quiet
        else:
            assert list(at) == ["stream", "streamed", "kept", "rest"]
            assert at["rest"] - at["streamed"] >= quiet
