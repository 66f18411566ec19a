"""The Neovim plugin (editors/nvim) in real headless Neovim against the real server.

Each test runs one Lua script under ``tests/editors/nvim/`` in ``nvim --headless --clean``; the
script drives the plugin's commands and writes what it saw as JSON, which is checked here. The
model is the ``script:`` provider, so runs are deterministic and offline.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.editors.helpers import EDITORS, HERE, isolated_env, run_bounded, server_cmd, write_script
from tests.fakeapi import FakeAPI, Turn

NAMES_PY = """def foo():  # 🎉 fête
    return "日本"


def unrelated():
    return 2


結果 = foo()  # 🎉
"""


def run_nvim(
    nvim: str,
    tmp_path: Path,
    test: str,
    script: dict[str, Any] | None,
    *,
    timeout: float = 60,
    model_env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Run one Lua test; the model is ``script`` (the script: provider) or ``model_env``."""
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    out = tmp_path / "out.json"
    if model_env is None:
        assert script is not None
        model_env = {"AGENT_LS_MODEL": write_script(tmp_path / "model.json", script)}
    env = isolated_env(
        tmp_path,
        **model_env,
        AGENT_LS_PLUGIN_DIR=str(EDITORS / "nvim"),
        AGENT_LS_HARNESS=str(HERE / "nvim" / "harness.lua"),
        AGENT_LS_TEST_WS=str(ws),
        AGENT_LS_TEST_OUT=str(out),
        AGENT_LS_SERVER_CMD=json.dumps(server_cmd()),
    )
    done = run_bounded(
        [nvim, "--headless", "--clean", "-u", str(HERE / "nvim" / test)],
        env=env,
        cwd=ws,
        timeout=timeout,
    )
    log = tmp_path / "agent-ls.log"
    context = (
        f"nvim exit {done.returncode} after {done.seconds:.1f} s\n--- stdout\n{done.stdout[-3000:]}"
        f"\n--- stderr\n{done.stderr[-3000:]}\n--- server log\n"
        + (log.read_text(errors="replace")[-4000:] if log.exists() else "(none)")
    )
    assert out.exists(), "the test script wrote no result\n" + context
    # errors="replace": a position the server got wrong can split a UTF-8 sequence in the buffer
    data = json.loads(out.read_text(encoding="utf-8", errors="replace"))
    error = data.get("error")
    if error:
        pytest.fail(
            f"{error}\nupdates: {json.dumps(data.get('updates'))[-3000:]}\n"
            f"messages: {data.get('messages')}\n{context}"
        )
    assert done.returncode == 0, context
    data["_context"] = context
    return data


def updates_of(data: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [
        u["update"] for u in data.get("updates", []) if u["update"].get("sessionUpdate") == kind
    ]


ASK_SCRIPT = {
    "chunk_size": 7,
    "turns": [
        {
            "text": "Let me read names.py first.",
            "tool_calls": [{"name": "read_file", "input": {"file_path": "names.py"}}],
        },
        {
            "text": "Renaming foo to bar everywhere.",
            "tool_calls": [
                {
                    "name": "edit_file",
                    "input": {
                        "file_path": "names.py",
                        "old_string": "foo",
                        "new_string": "bar",
                        "replace_all": True,
                    },
                }
            ],
        },
        {
            "text": "Checking what is on disk now.",
            "tool_calls": [
                {"name": "run_shell", "input": {"command": "touch marker.txt && cat names.py"}}
            ],
        },
        {
            "text": "And the editor's diagnostics.",
            "tool_calls": [{"name": "get_diagnostics", "input": {"file_path": "names.py"}}],
        },
        {"text": "All done: the definition is renamed, the call site kept as you chose."},
    ],
}

PARTIAL = NAMES_PY.replace("def foo", "def bar")


def as_fake_turns(script: dict[str, Any]) -> list[Turn]:
    return [
        Turn(
            text=t.get("text"), tool_uses=[(c["name"], c["input"]) for c in t.get("tool_calls", [])]
        )
        for t in script["turns"]
    ]


def tool_result_text(body: dict[str, Any], index: int = -1) -> str:
    blocks = [
        b
        for m in body["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]
    content = blocks[index]["content"]
    return content if isinstance(content, str) else "".join(c["text"] for c in content)


def test_ask_review_accept_one_hunk_reject_other(nvim: str, tmp_path: Path) -> None:
    """Through the Anthropic SDK and the fake API, so what the model reads is checked too."""
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "names.py").write_text(NAMES_PY, encoding="utf-8")
    with FakeAPI() as api:
        api.enqueue(*as_fake_turns(ASK_SCRIPT))
        model_env = {
            "AGENT_LS_MODEL": "anthropic:claude-test-1",
            "ANTHROPIC_BASE_URL": api.url,
            "ANTHROPIC_API_KEY": "test-key",
        }
        data = run_nvim(nvim, tmp_path, "ask_review.lua", None, model_env=model_env)
    assert not api.rejections
    ctx = data["_context"]
    bodies = [r.body for r in api.requests]
    assert len(bodies) == len(ASK_SCRIPT["turns"]), ctx
    # what the model read: the edit's outcome and the editor's diagnostics, as text
    edit_result = tool_result_text(bodies[2])
    assert "accepted only part of the edit to names.py: of the 2 hunks" in edit_result, edit_result
    assert tool_result_text(bodies[4]) == (
        "names.py:9:1: warning [test-linter] test-linter: result is unused"
    )

    # :'<,'>AgentAsk sent the file and the selected lines
    assert data["ask_name"] == "agent.ask"
    assert data["ask_arg"]["uri"].endswith("/ws/names.py")
    assert data["ask_arg"]["range"] == {
        "start": {"line": 0, "character": 0},
        "end": {"line": 1, "character": 19},  # UTF-8 (negotiated): 日 and 本 are 3 bytes each
    }
    assert "names.py, lines 1-2" in data["chat"]

    # the review showed two hunks, inline (virtual lines) and in the review split, before
    # anything was written
    assert data["hunks"] == 2, ctx
    assert data["inline_virt_lines"] >= 2, ctx
    assert data["first_virt_line"] == "+ def bar():  # 🎉 fête", ctx
    assert data["buffer_during_review"] == NAMES_PY.splitlines(), ctx
    # the labels fit beside the code (they were cut off at the window's edge), the header does
    # not say "agent" twice
    assert data["inline_labels"] == [
        "  hunk 1/2 · :AgentAccept 1 · :AgentReject 1",
        "  hunk 2/2 · :AgentAccept 2 · :AgentReject 2",
    ], data["inline_labels"]
    assert data["review_list"][0] == "Agent edit: edit_file names.py · 2 hunks", data["review_list"]
    listing = "\n".join(data["review_list"])
    assert "- def foo():" in listing and "+ def bar():" in listing, listing
    assert "- 結果 = foo()" in listing and "+ 結果 = bar()" in listing, listing
    assert data["pending_after_accept"] == 1
    assert data["review_result"] == {"applied": True}, data["review_result"]
    assert data["review_closed"] is True

    # the buffer holds exactly the accepted hunk; agent/saveDocuments wrote it before the shell
    result = data["result"]
    assert result["stopReason"] == "end_turn", ctx
    assert "\n".join(data["buffer"]) + "\n" == PARTIAL, ctx
    assert data["disk"] == PARTIAL, ctx
    assert data["modified"] is False
    assert (tmp_path / "ws" / "marker.txt").exists()

    # the server was told the truth: one hunk of two landed
    finals = [
        u
        for u in updates_of(data, "tool_call_update")
        if u.get("status") in ("completed", "failed")
    ]
    assert finals[1].get("rawOutput") == {"status": "partial", "landed": [0], "hunks": 2}, finals[1]
    # the shell command ran after the confirmation and saw the saved file
    shell_out = json.dumps(finals[2], ensure_ascii=False)
    assert "def bar():" in shell_out and "結果 = foo()" in shell_out, shell_out
    # agent/getDiagnostics was answered from vim.diagnostic
    diag_out = json.dumps(finals[3].get("rawOutput"))
    assert "test-linter: result is unused" in diag_out, diag_out

    # the confirmation went through vim.ui.select with the contract's actions
    confirms = [s for s in data["selects"] if s["kind"] == "agent_ls_confirm"]
    assert len(confirms) == 1, data["selects"]
    assert "touch marker.txt" in confirms[0]["prompt"]
    assert confirms[0]["items"][0] == "Allow" and confirms[0]["items"][-1] == "Deny"

    # the chat streamed the answer: every chunk, and the final text
    chat = data["chat"]
    assert data["chat_visible"] is True
    assert "## You" in chat and "rename foo to bar" in chat
    for turn in ASK_SCRIPT["turns"]:
        assert turn["text"] in chat, chat
    assert "Review: accepted 1 of 2 hunks" in chat, chat
    assert "All done: the definition is renamed, the call site kept as you chose." in chat
    assert "✓ Read names.py · completed" in chat, chat
    assert "✓ Edit names.py · completed · partly applied (hunk 1 of 2)" in chat, chat
    assert "```diff" in chat and "+def bar():" in chat, chat
    # the diff says which hunk landed: the rejected one no longer looks like the applied one
    assert "@@ -1,2 +1,2 @@ · hunk 1 applied" in chat, chat
    assert "@@ -8,2 +8,2 @@ · hunk 2 rejected" in chat, chat
    # rendered cleanly: no runs of empty lines (each turn's text came with its own), no empty
    # context line closing a diff (the file's final newline counted twice)
    assert "\n\n\n" not in chat, chat
    lines = chat.splitlines()
    closing = [i for i, line in enumerate(lines) if line == "```"]
    assert closing and all(lines[i - 1].strip() for i in closing), chat
    chunks = "".join(u["content"]["text"] for u in updates_of(data, "agent_message_chunk"))
    assert chunks == result["text"]
    assert len(updates_of(data, "agent_message_chunk")) > 5  # really streamed in pieces


def test_cancel_stops_a_slow_run(nvim: str, tmp_path: Path) -> None:
    script = {
        "chunk_size": 2,
        "delay_ms": 100,
        "turns": [{"text": "This answer streams slowly. " * 20}],
    }
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "a.txt").write_text("hello\n", encoding="utf-8")
    data = run_nvim(nvim, tmp_path, "cancel.lua", script)
    ctx = data["_context"]
    assert data["result"]["stopReason"] == "cancelled", ctx
    # nothing is left running: a second cancel finds nothing to stop
    assert data["second_cancel"]["cancelled"] is False
    assert data["running"] == 0
    # the run took 28 s to stream in full; cancel stopped it at once
    assert data["seconds_to_stop"] < 5, ctx
    assert data["chunks_at_cancel"] >= 1
    assert "cancelled" in data["chat"]


def test_fix_code_action_mode_and_sessions(nvim: str, tmp_path: Path) -> None:
    script = {
        "turns": [
            {"tool_calls": [{"name": "read_file", "input": {"file_path": "typo.py"}}]},
            {
                "text": "Fixing the typo.",
                "tool_calls": [
                    {
                        "name": "edit_file",
                        "input": {
                            "file_path": "typo.py",
                            "old_string": "pritn",
                            "new_string": "print",
                        },
                    }
                ],
            },
            {"text": "Fixed: pritn is now print."},
        ]
    }
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "typo.py").write_text('pritn("hi")\n', encoding="utf-8")
    data = run_nvim(nvim, tmp_path, "fix_mode_sessions.lua", script)
    ctx = data["_context"]
    # :AgentMode acceptEdits: the server switched modes and said so in agent/update
    assert data["mode_result"]["mode"] == "acceptEdits"
    assert data["status"]["mode"] == "acceptEdits"
    assert data["chat_mode"] == "acceptEdits"
    # the server's "Fix with agent" code action ran agent.fix through the plugin
    assert data["actions"] and data["actions"][0].startswith("Fix with agent"), data["actions"]
    assert data["result"]["stopReason"] == "end_turn", ctx
    assert data["result"]["text"].endswith("Fixed: pritn is now print.")
    # acceptEdits: the edit needed no review and landed in the buffer
    assert data["reviews"] == 0
    assert data["buffer"] == ['print("hi")'], ctx
    assert "Fix with agent" in data["chat"]
    # :AgentSessions lists the session and "+ New session" starts a fresh one
    sessions = [s for s in data["selects"] if s["kind"] == "agent_ls_sessions"]
    assert sessions and sessions[0]["items"][0] == "+ New session"
    assert len(sessions[0]["items"]) >= 2
    assert data["new_session"] and data["new_session"] != data["result"]["sessionId"]


def test_a_save_during_review_is_harmless_and_a_withdrawn_review_closes(
    nvim: str, tmp_path: Path
) -> None:
    def rename(old: str, new: str) -> dict[str, Any]:
        edit = {"file_path": "names.py", "old_string": old, "new_string": new, "replace_all": True}
        return {"tool_calls": [{"name": "edit_file", "input": edit}]}

    script = {
        "turns": [
            {"tool_calls": [{"name": "read_file", "input": {"file_path": "names.py"}}]},
            rename("foo", "bar"),
            {"text": "Renamed."},
            rename("bar", "baz"),
            {"text": "You did not answer."},
        ]
    }
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "names.py").write_text(NAMES_PY, encoding="utf-8")
    data = run_nvim(nvim, tmp_path, "review_save_timeout.lua", script, timeout=90)
    ctx = data["_context"]
    renamed = [*NAMES_PY.replace("foo", "bar").splitlines(), "# unsaved note"]
    # :w bumped b:changedtick mid-review; the accept still landed, reported as applied
    assert data["tick_changed"] is True
    assert data["first_buffer"] == renamed, ctx
    outputs = [
        u["rawOutput"]
        for u in updates_of(data, "tool_call_update")
        if isinstance(u.get("rawOutput"), dict) and "status" in u["rawOutput"]
    ]
    assert outputs[0]["status"] == "applied", outputs
    # nobody answered the second review: the server gave up, the editor closed it unapplied
    assert data["closed_by_server"] is True
    assert outputs[1]["status"] in ("failed", "rejected"), outputs
    assert data["second_buffer"] == renamed, ctx


def test_checkhealth_fails_on_a_missing_script_or_api_key(nvim: str, tmp_path: Path) -> None:
    data = run_nvim(nvim, tmp_path, "health.lua", {"turns": [{"text": "unused"}]})
    assert "ERROR the script file does not exist" in data["missing_script"], data["missing_script"]
    assert "ERROR ANTHROPIC_API_KEY is not set" in data["missing_key"], data["missing_key"]
    assert "OK ANTHROPIC_API_KEY is set" in data["with_key"], data["with_key"]
    assert "ERROR" not in data["with_key"].split("model:")[1], data["with_key"]


def test_agent_mcp_lists_servers_tools_and_a_failed_servers_error(
    nvim: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from tests.editors.helpers import REPO

    servers = {
        "faulty": {
            "command": sys.executable,
            "args": ["-m", "tests.mcp_servers.faulty"],
            "cwd": str(REPO),
        },
        "broken": {"command": str(tmp_path / "no-such-server")},
    }
    monkeypatch.setenv("AGENT_LS_TEST_MCP", json.dumps(servers))
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "a.txt").write_text("hello\n", encoding="utf-8")
    data = run_nvim(nvim, tmp_path, "mcp.lua", {"turns": [{"text": "unused"}]}, timeout=120)
    shown = data["shown"]
    assert "faulty [settings] ready" in shown and "mcp__faulty__echo" in shown, shown
    assert "broken [settings] failed" in shown and "  error: " in shown, shown
    assert data["level"] == 3  # vim.log.levels.WARN: a server failed


@pytest.mark.parametrize(
    ("setup", "word", "line"),
    [
        ({}, "sandboxed", "shell sandbox: bwrap (auto)"),
        ({"settings": {"sandbox": "off"}}, "unsandboxed", "shell sandbox: off (off)"),
    ],
)
def test_the_statusline_shows_the_sandbox(
    nvim: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    setup: dict[str, Any],
    word: str,
    line: str,
) -> None:
    monkeypatch.setenv("AGENT_LS_TEST_SETUP", json.dumps(setup or {"settings": {}}))
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "a.txt").write_text("hello\n", encoding="utf-8")
    data = run_nvim(nvim, tmp_path, "sandbox_status.lua", {"turns": [{"text": "unused"}]})
    assert f" · {word}" in data["statusline"], data["statusline"]
    assert line in data["status"], data["status"]


def test_a_sub_agents_calls_are_indented_under_its_task(nvim: str, tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "a.txt").write_text("hello\n", encoding="utf-8")
    task = {"description": "look around", "prompt": "Read a.txt", "agent": "explore"}
    with FakeAPI() as api:
        api.enqueue(
            Turn(tool_uses=[("task", task)]),  # the parent delegates
            Turn(tool_uses=[("read_file", {"file_path": "a.txt"})]),  # the sub-agent reads
            Turn(text="a.txt says hello"),  # and answers
            Turn(text="The sub-agent found it."),  # the parent's answer
        )
        model_env = {
            "AGENT_LS_MODEL": "anthropic:claude-test-1",
            "ANTHROPIC_BASE_URL": api.url,
            "ANTHROPIC_API_KEY": "test-key",
        }
        data = run_nvim(nvim, tmp_path, "nested_task.lua", None, model_env=model_env)
    assert data["result"]["stopReason"] == "end_turn", data["_context"]
    lines = data["chat"].splitlines()
    task_line = next(i for i, line in enumerate(lines) if "look around" in line)
    child = next(i for i, line in enumerate(lines) if "Read a.txt" in line)
    assert child > task_line, data["chat"]
    indent = len(lines[child]) - len(lines[child].lstrip())
    assert indent >= len(lines[task_line]) - len(lines[task_line].lstrip()) + 4, data["chat"]
    # the sub-agent's text sits under its task after the calls it made first (it read before
    # them), and before the parent's answer
    said = next(i for i, line in enumerate(lines) if "a.txt says hello" in line)
    answer = next(i for i, line in enumerate(lines) if "The sub-agent found it." in line)
    assert task_line < child < said < answer, data["chat"]
    assert lines[said].startswith("    "), data["chat"]


def test_the_chat_streams_while_a_question_is_open(
    nvim: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Neovim's own vim.ui.select (inputlist) would hold the event loop until answered; the
    plugin's question must not: a sibling sub-agent's text reaches the chat meanwhile."""
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "a.txt").write_text("hello\n", encoding="utf-8")
    marker = "(end of the sibling's stream)"
    monkeypatch.setenv("AGENT_LS_TEST_MARKER", marker)
    streamed = "Reading on while you decide. " * 6 + marker
    with FakeAPI() as api:
        api.enqueue(
            Turn(  # the parent starts two sub-agents at once
                tool_uses=[
                    ("task", {"description": "one", "prompt": "go", "agent": "general"}),
                    ("task", {"description": "two", "prompt": "go", "agent": "general"}),
                ]
            ),
            # whichever child asks first runs the command; the other one streams, slowly and
            # starting later, so most of its text arrives while the question is open
            Turn(tool_uses=[("run_shell", {"command": "touch asked.txt"})]),
            Turn(text=streamed, latency=2.0, chunk_delay=0.08),
            Turn(text="Touched it."),  # the asking child, once allowed
            Turn(text="Both sub-agents are done."),  # the parent
        )
        model_env = {
            "AGENT_LS_MODEL": "anthropic:claude-test-1",
            "ANTHROPIC_BASE_URL": api.url,
            "ANTHROPIC_API_KEY": "test-key",
        }
        data = run_nvim(nvim, tmp_path, "stream_while_asking.lua", None, model_env=model_env)
    ctx = data["_context"]
    assert data["builtin_select"] is True  # the test runs with Neovim's own select
    assert any("touch asked.txt" in line for line in data["picker"]), data["picker"]
    assert "1. Allow" in data["picker"] and data["picker"][-3].endswith("Deny"), data["picker"]
    # text streamed after the question opened was in the chat before it was answered
    assert marker not in data["chat_at_open"], data["chat_at_open"]
    assert marker in data["chat_before_answer"]
    assert data["picker_still_open"] and data["picker_focused"], ctx
    # the key answered it: the command ran and the run finished
    assert data["picker_closed"] is True
    assert data["result"]["stopReason"] == "end_turn", ctx
    assert (tmp_path / "ws" / "asked.txt").exists(), ctx
    assert "Both sub-agents are done." in data["chat"]


def _readme_block(text: str, lang: str, containing: str) -> str:
    blocks = re.findall(rf"```{lang}\n(.*?)```", text, re.S)
    found = [b for b in blocks if containing in b]
    assert len(found) == 1, f"editors/README.md has no single ```{lang} block with {containing!r}"
    return found[0]


@pytest.mark.timeout(180)
def test_the_readme_install_steps_leave_a_clone_clean(nvim: str, tmp_path: Path) -> None:
    """editors/README.md's Neovim install (packages + init.lua), verbatim, in a fresh clone."""
    from tests.editors.helpers import REPO

    if not (REPO / ".git").exists():
        pytest.skip("the repository is not a git checkout: nothing to clone")
    clone = tmp_path / "agent-ls"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True, timeout=120)
    readme = (REPO / "editors" / "README.md").read_text(encoding="utf-8")
    steps = _readme_block(readme, "sh", "pack/agent-ls/start").replace(
        "/path/to/agent-ls", str(clone)
    )
    init_lua = _readme_block(readme, "lua", "require('agent_ls').setup({\n")
    # a user's own Neovim: HOME is the test's, the XDG folders are the defaults under it
    env = isolated_env(tmp_path)
    for key in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        env.pop(key)
    home = Path(env["HOME"])
    # `nvim` and `agent-ls` on PATH, as the steps expect
    env["PATH"] = os.pathsep.join([str(Path(nvim).parent), str(Path(sys.executable).parent),
                                   env.get("PATH", "")])  # fmt: skip
    done = run_bounded(["bash", "-euo", "pipefail", "-c", steps], env=env, cwd=home, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    (home / ".config" / "nvim").mkdir(parents=True)
    (home / ".config" / "nvim" / "init.lua").write_text(init_lua, encoding="utf-8")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.py").write_text("x = 1\n", encoding="utf-8")
    out = tmp_path / "out.json"
    env["AGENT_LS_TEST_OUT"] = str(out)
    script = HERE / "nvim" / "installed.lua"
    done = run_bounded(
        [nvim, "--headless", "-c", f"luafile {script}", "a.py"], env=env, cwd=ws, timeout=60
    )
    assert out.exists(), done.stdout + done.stderr
    data = json.loads(out.read_text(encoding="utf-8"))
    assert not data.get("error"), data
    assert data["plugin"] == str(
        home / ".local/share/nvim/site/pack/agent-ls/start/agent-ls/lua/agent_ls/init.lua"
    ), data
    assert data["command"] is True and data["client"] is True, data
    assert data["help"] == "agent-ls.txt", data
    # nothing the steps made (helptags' doc/tags) shows as untracked or changed in the clone
    status = subprocess.run(
        ["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True, check=True
    ).stdout
    assert status == "", status


def test_the_floating_question_fails_closed(nvim: str, tmp_path: Path) -> None:
    """<CR> at once picks Deny (the cursor starts there); <Esc>, q and :q are no answer."""
    data = run_nvim(nvim, tmp_path, "picker.lua", {"turns": [{"text": "unused"}]})
    assert data["answers"] == {
        "<CR>": "Deny",
        "<Esc>": "nil",
        "q": "nil",
        "2": "Allow for this session",
        ":q<CR>": "nil",
    }, data["answers"]
    assert data["windows_left"] == 1  # every float closed
