"""Start-up: what the first requests must not wait for, and the headless client's early
server (spawned before the client loads pygls, told to load the model SDK at once)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

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


def test_pygls_reads_no_type_hints_of_a_command_on_each_call() -> None:
    # pygls calls typing.get_type_hints on a command's handler for every executeCommand:
    # with the wrappers' string annotations that compiled each anew (60 µs a command).
    seen = _fresh(
        "import json\n"
        "from pygls.protocol.language_server import _get_handler_params_annotations\n"
        "from agent_ls.lsp import server\n"
        "commands = server.server.protocol.fm.commands\n"
        "hints = {n: sorted(_get_handler_params_annotations(h)[1]) for n, h in commands.items()}\n"
        "hinted = {n: a for n, a in hints.items() if a}\n"
        "print(json.dumps({'count': len(commands), 'hinted': hinted}))"
    )
    assert int(str(seen["count"])) >= 10
    assert seen["hinted"] == {}


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


def test_a_quiet_json_run_loads_no_rich_until_it_prints_a_styled_line() -> None:
    # rich is ~35 ms of the client's CPU while the server and the worker start on both cores.
    seen = _fresh(
        "import json, sys\n"
        "from agent_ls.client.render import Renderer\n"
        "r = Renderer(quiet=True, json_output=True)\n"
        "r.update({'sessionUpdate': 'agent_message_chunk', 'content': {'text': 'hi'}})\n"
        "r.update({'sessionUpdate': 'tool_call', 'toolCallId': 't', 'title': 'read'})\n"
        "before = 'rich' in sys.modules\n"
        "Renderer(json_output=True).update(\n"
        "    {'sessionUpdate': 'tool_call', 'toolCallId': 't', 'title': 'read_file a.py'})\n"
        "print(json.dumps({'before': before, 'after': 'rich' in sys.modules}))"
    )
    assert seen == {"before": False, "after": True}


def test_the_headless_client_forks_its_worker_before_importing_the_workers_module(
    tmp_path: Path,
) -> None:
    # The worker imports its module (and asyncio) on its own core: the client forks it and
    # the server ~50 ms sooner than if it imported that module first.
    code = (
        "import json, os, sys\n"
        "from pathlib import Path\n"
        "from agent_ls.cli import main\n"
        "from agent_ls.client.spawn import reap_workers, spawn_server\n"
        "from agent_ls.forking import ForkedProcess\n"
        "server = spawn_server(Path(sys.argv[1]), 'anthropic:claude-x', main=main)\n"
        "forked = isinstance(server, ForkedProcess)\n"
        "imported = 'agent_ls.models.worker' in sys.modules\n"
        "server.stdin.close()\n"
        "server.wait(30)\n"
        "reap_workers(30)\n"
        "print(json.dumps({'forked': forked, 'worker module here': imported}))"
    )
    env = {**os.environ, "AGENT_LS_DATA_DIR": str(tmp_path / "data"), "ANTHROPIC_API_KEY": "x"}
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)],
        capture_output=True, text=True, timeout=60, env=env,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {"forked": True, "worker module here": False}


def test_the_command_line_imports_only_what_every_command_needs_before_it_forks() -> None:
    # `agent-ls run` forks its server and model worker right after this module loads: what
    # it imports for one command (the demo's files) delays both for every other.
    seen = _fresh(
        "import json, sys\n"
        "import agent_ls.cli\n"
        "print(json.dumps(sorted(m for m in ('importlib.resources', 'shutil', 'tempfile')\n"
        "    if m in sys.modules)))"
    )
    assert seen == []


def test_serve_loads_no_pydantic_before_it_reads_initialize(tmp_path: Path) -> None:
    # What `serve` imports before its first message (pygls, lsprotocol from the attrs code
    # cache in the data dir): pydantic and the agent core wait for the warm-up thread.
    code = (
        "import sys\n"
        "from agent_ls import codecache\n"
        "from agent_ls.lsp.attrs_replay import lsprotocol_from_caches\n"
        "codecache.install()\n"
        "with lsprotocol_from_caches():\n"
        "    import agent_ls.lsp.server\n"
        "print(sorted(m for m in ('pydantic', 'pydantic_core') if m in sys.modules))\n"
    )
    env = {**os.environ, "AGENT_LS_DATA_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_closing_the_service_loads_nothing_more() -> None:
    # `exit` right after start: a shell tool never loaded has no command to kill, and loading
    # it (with pydantic) held the server's exit for a tenth of a second.
    seen = _fresh(
        "import json, sys\n"
        "from agent_ls.agent.service import AgentService\n"
        "from agent_ls.settings import Settings\n"
        "before = set(sys.modules)\n"
        "AgentService(lambda: Settings()).close_now()\n"
        "print(json.dumps(sorted(set(sys.modules) - before)))"
    )
    assert seen == []


def test_closing_the_service_while_the_shell_tool_is_half_imported_does_not_fail() -> None:
    # The warm-up thread imports the tools; an `exit` may come while agent_ls.tools.shell is
    # in sys.modules without its functions yet. The exit must go on (the server hung).
    seen = _fresh(
        "import json, sys, types\n"
        "from agent_ls.agent.service import AgentService\n"
        "from agent_ls.settings import Settings\n"
        "sys.modules['agent_ls.tools.shell'] = types.ModuleType('agent_ls.tools.shell')\n"
        "hooks = []\n"
        "service = AgentService(lambda: Settings())\n"
        "service.exit_hooks.append(lambda: hooks.append('ran'))\n"
        "service.close_now()\n"
        "print(json.dumps(hooks))"
    )
    assert seen == ["ran"]


# Modules the server's path to its first model request once imported for one rarely used
# thing each (pydantic's plugin lookup, platformdirs, importlib.resources, an HTTP date, the
# SDK import hook that only the model worker installs, shutil for a clean-up or a lookup):
# ~20 ms of every start between them.
NOT_ON_THE_WAY = (
    "importlib.metadata",
    "importlib.resources",
    "email",
    "zipfile",
    "tempfile",
    "shutil",
    "platformdirs",
    "agent_ls.models.sdk_import",
)


def test_the_servers_way_to_its_first_request_imports_nothing_it_does_not_use(
    tmp_path: Path,
) -> None:
    code = (
        "import json, sys\n"
        "from agent_ls import codecache, pydantic_plugins\n"
        "codecache.install(); pydantic_plugins.leave_out()  # as agent_ls.__main__ does\n"
        "from agent_ls.lsp.attrs_replay import lsprotocol_from_caches\n"
        "with lsprotocol_from_caches():\n"
        "    import agent_ls.lsp.server\n"
        "from agent_ls.agent.warmup import import_core\n"
        "import_core()\n"
        "from agent_ls.agent import service\n"
        "from pathlib import Path\n"
        "from agent_ls.agent.prompt import project_context\n"
        "project_context(Path(sys.argv[1]))\n"
        "from agent_ls.dirs import user_config_dir\n"
        "from agent_ls.models import load_model\n"
        "load_model('anthropic:claude-sonnet-5-5', in_worker=True)\n"
        "service._build_tools()\n"
        "user_config_dir()\n"
        f"print(json.dumps(sorted(m for m in {NOT_ON_THE_WAY!r} if m in sys.modules)))\n"
    )
    env = {
        **os.environ,
        "AGENT_LS_DATA_DIR": str(tmp_path),
        "HOME": str(tmp_path),
        "XDG_CONFIG_HOME": "",
        "AGENT_LS_CONFIG_DIR": "",
    }
    for _ in range(2):  # the second start reads the caches the first wrote
        done = subprocess.run(
            [sys.executable, "-c", code, str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
        assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


def test_pygls_writes_the_capabilities_json_only_when_it_logs_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # pygls wrote the capabilities as JSON for a debug line before the logger dropped it.
    import logging

    from lsprotocol import types

    from agent_ls.lsp.server import server

    protocol = server.protocol
    params = types.InitializeParams(
        capabilities=types.ClientCapabilities(), process_id=None, root_uri="file:///w"
    )

    def initialize() -> types.InitializeResult:
        steps = protocol.lsp_initialize(params)
        try:
            while True:
                next(steps)
        except StopIteration as done:
            result: types.InitializeResult = done.value
            return result

    written: list[object] = []
    real_dumps = json.dumps

    def counting_dumps(*args: Any, **kwargs: Any) -> str:
        written.append(args[0])
        return real_dumps(*args, **kwargs)

    with caplog.at_level(logging.INFO, logger="pygls"), mock.patch.object(
        json, "dumps", counting_dumps
    ):
        initialize()
    assert not [c for c in written if isinstance(c, types.ServerCapabilities)]
    with caplog.at_level(logging.DEBUG, logger="pygls"):
        result = initialize()
    lines = [r.getMessage() for r in caplog.records if "Server capabilities" in r.getMessage()]
    assert len(lines) == 1
    logged = json.loads(lines[0].split("Server capabilities: ", 1)[1])
    assert logged == protocol._converter.unstructure(result.capabilities)
