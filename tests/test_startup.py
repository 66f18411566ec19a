"""Start-up: what the first requests must not wait for, and the headless client's early
server (spawned before the client loads pygls, told to load the model SDK at once)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.rawclient import RawClient


def _fresh(code: str) -> dict[str, object]:
    """Run ``code`` in a new interpreter; it prints one JSON object."""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_first_status_reads_the_model_without_loading_pydantic() -> None:
    # Right after start the warm-up thread imports pydantic; a status that imported it too
    # waited on that import's lock (100-200 ms) instead of answering at once.
    seen = _fresh(
        "import json, sys\n"
        "from agent_ls.lsp import server\n"
        "model, mode = server._raw_model_and_mode({'mode': 'plan'})\n"
        "print(json.dumps({'model': model, 'mode': mode, 'pydantic': 'pydantic' in sys.modules}))"
    )
    assert seen["pydantic"] is False
    assert seen["mode"] == "plan"
    assert str(seen["model"]).startswith("anthropic:")


def test_the_sandbox_probe_started_at_launch_is_the_one_status_uses() -> None:
    seen = _fresh(
        "import json, shutil\n"
        "from agent_ls.safety import sandbox\n"
        "sandbox.probe_in_background().join(30)\n"
        "program = sandbox.find_bwrap([])\n"
        "print(json.dumps({'program': program, 'probed': program in sandbox._probed,\n"
        "                  'which': shutil.which('bwrap')}))"
    )
    assert seen["program"] == seen["which"]
    assert seen["probed"] is (seen["program"] is not None)


def test_serve_preload_with_a_bad_model_still_answers(workspace: Path, tmp_path: Path) -> None:
    # The preload runs before the settings are known: whatever it meets is left for the first
    # ask to report, and the server stays up.
    server = RawClient(
        workspace,
        env={"AGENT_LS_DATA_DIR": str(tmp_path / "data"), "AGENT_LS_MODEL": "nonsense"},
        args=("--preload",),
    )
    try:
        assert "result" in server.initialize(workspace)
        status = server.request(
            "workspace/executeCommand", {"command": "agent.status", "arguments": [{}]}
        )
        assert status["result"]["model"] == "nonsense"
        ask = server.request(
            "workspace/executeCommand", {"command": "agent.ask", "arguments": [{"prompt": "hi"}]}
        )
        assert "provider:model" in json.dumps(ask)
    finally:
        server.close()


def test_the_warm_up_turns_garbage_collection_back_on_with_the_imports_frozen(
    tmp_path: Path,
) -> None:
    # `serve` pauses the collector for its start-up imports; if the warm-up did not resume
    # it, a long session would never collect its cycles.
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": [{"text": "hi"}]}))
    seen = _fresh(
        "import asyncio, gc, json\n"
        "from agent_ls.agent.service import AgentService\n"
        "from agent_ls.agent.warmup import pause_gc\n"
        "from agent_ls.settings import Settings\n"
        "pause_gc()\n"
        "paused = not gc.isenabled()\n"
        f"service = AgentService(lambda: Settings(model='script:{script}'))\n"
        "asyncio.run(service.warm())\n"
        "print(json.dumps({'paused': paused, 'enabled': gc.isenabled(),\n"
        "                  'frozen': gc.get_freeze_count()}))"
    )
    assert seen["paused"] is True
    assert seen["enabled"] is True
    assert int(str(seen["frozen"])) > 10_000


def test_the_headless_client_loads_no_lsp_library() -> None:
    # `agent-ls run` speaks JSON-RPC itself: pygls and lsprotocol cost ~400 ms of CPU in the
    # client, on the cores the server and its model worker start on.
    seen = _fresh(
        "import json, sys\n"
        "import agent_ls.client.headless\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in\n"
        "    ('lsprotocol', 'cattrs', 'attrs', 'pydantic') or m.startswith('pygls.lsp')\n"
        "    or m in ('pygls.protocol', 'pygls.server'))))"
    )
    assert seen == []


def test_serve_loads_no_pydantic_before_it_reads_initialize(tmp_path: Path) -> None:
    # What `serve` imports before its first message (pygls, lsprotocol from the attrs code
    # cache in the data dir): pydantic and the agent core wait for the warm-up thread.
    code = (
        "import sys\n"
        "from agent_ls.lsp.attrs_cache import attrs_code_cache, default_path\n"
        "with attrs_code_cache(default_path()):\n"
        "    import agent_ls.lsp.server\n"
        "print(sorted(m for m in ('pydantic', 'pydantic_core') if m in sys.modules))\n"
    )
    env = {**os.environ, "AGENT_LS_DATA_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
