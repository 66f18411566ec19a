"""The ACP front door's pieces that need no subprocess."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from acp.schema import InitializeResponse

from agent_ls.acp.capabilities import initialize_result
from agent_ls.acp.prompt import file_path
from agent_ls.acp.replay import replay
from agent_ls.ports.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from agent_ls.tools.registry import default_tools


def test_the_initialize_answered_before_acp_loads_fits_the_schema() -> None:
    """``initialize`` is answered with plain JSON while the acp package loads: the schema
    must read it back with nothing lost or renamed."""
    result = initialize_result()
    model = InitializeResponse.model_validate(result)
    assert model.model_dump(mode="json", by_alias=True, exclude_none=True) == {
        **result,
        "agentCapabilities": {
            **result["agentCapabilities"],
            "auth": {},
            "mcpCapabilities": {**result["agentCapabilities"]["mcpCapabilities"], "acp": False},
        },
    }
    assert model.agent_capabilities.load_session is True
    assert model.agent_capabilities.prompt_capabilities.embedded_context is True
    assert model.agent_capabilities.mcp_capabilities.http is True


def test_the_cli_and_the_fast_path_do_not_import_acp() -> None:
    code = (
        "import sys, agent_ls.cli, agent_ls.acp.main\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('acp', 'pydantic')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_file_uris() -> None:
    assert file_path("file:///home/u/a%20b.py") == Path("/home/u/a b.py")
    assert file_path("/abs/path.py") == Path("/abs/path.py")
    assert file_path("file:///a.py#L3-5") is None  # a fragment is not the whole file
    assert file_path("zed://rules/x") is None


def test_replay_shows_words_tool_calls_and_results() -> None:
    history = [
        Message("user", [TextBlock("fix it")]),
        Message(
            "assistant",
            [TextBlock("Reading."), ToolUseBlock("t1", "read_file", {"file_path": "a.py"})],
        ),
        Message("user", [ToolResultBlock("t1", "a.py\n     1\tx", is_error=False)]),
        Message("assistant", [ToolUseBlock("t2", "nope", {"x": 1})]),
        Message("user", [ToolResultBlock("t2", "Unknown tool", is_error=True)]),
    ]
    updates = list(replay(history, default_tools()))
    assert [u["sessionUpdate"] for u in updates] == [
        "user_message_chunk",
        "agent_message_chunk",
        "tool_call",
        "tool_call_update",
        "tool_call",
        "tool_call_update",
    ]
    assert (updates[2]["title"], updates[2]["kind"]) == ("Read a.py", "read")
    assert (updates[4]["title"], updates[4]["kind"]) == ("nope", "other")
    assert updates[5]["status"] == "failed"
