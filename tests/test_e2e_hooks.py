"""Hooks through the real server: each event's blocking and non-blocking path, decisions and
their precedence, project hooks behind approval, warnings and cancel."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.editor_sim import EditorSim
from tests.editor_sim import editor as sandboxed_editor
from tests.fakeapi import FakeAPI, Turn


def editor(*args: Any, init_options: dict[str, Any] | None = None, **kwargs: Any) -> Any:
    """The real server with the sandbox off: these hooks write beside the workspace to report
    what they saw (test_hooks_run_in_the_sandbox shows hooks do run sandboxed)."""
    options = {"sandbox": "off", **(init_options or {})}
    return sandboxed_editor(*args, init_options=options, **kwargs)


@pytest.fixture
def api() -> Iterator[Any]:
    with FakeAPI() as fake:
        yield fake


@pytest.fixture
def config_dir(tmp_path: Path) -> Path:
    """The user's config dir (no user settings.json unless a test writes one)."""
    folder = tmp_path / "config"
    folder.mkdir()
    return folder


def api_env(api: Any, config_dir: Path) -> dict[str, str]:
    return {
        "AGENT_LS_MODEL": "anthropic:claude-sonnet-5-5",
        "ANTHROPIC_BASE_URL": api.url,
        "ANTHROPIC_API_KEY": "test-key",
        "AGENT_LS_CONFIG_DIR": str(config_dir),
    }


def hook(event: str, command: str, matcher: str | None = None) -> dict[str, Any]:
    group: dict[str, Any] = {"hooks": [{"type": "command", "command": command}]}
    if matcher is not None:
        group["matcher"] = matcher
    return {event: [group]}


def read_app() -> dict[str, Any]:
    return {
        "turns": [
            {"tool_calls": [{"name": "read_file", "input": {"file_path": "app.py"}}]},
            {"text": "done"},
        ]
    }


def finished(ed: EditorSim) -> list[dict[str, Any]]:
    return [u for u in ed.of_kind("tool_call_update") if u.get("status") in ("completed", "failed")]


def progress_messages(ed: EditorSim) -> list[str]:
    return [
        str(getattr(r, "message", "") or "")
        for reports in ed.client.progress_reports.values()
        for r in reports
    ]


def user_texts(body: dict[str, Any]) -> list[str]:
    texts = []
    for message in body["messages"]:
        if message["role"] != "user":
            continue
        content = message["content"]
        if isinstance(content, str):
            texts.append(content)
            continue
        texts += [b.get("text", "") for b in content if b.get("type") == "text"]
    return texts


def payloads(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# -- PreToolUse --------------------------------------------------------------------------------


async def test_pre_tool_use_exit_2_blocks_the_call_with_stderr_as_result(
    workspace: Path, config_dir: Path
) -> None:
    hooks = hook("PreToolUse", "echo 'reads are off today' >&2; exit 2", matcher="read_.*")
    env = {"AGENT_LS_CONFIG_DIR": str(config_dir)}
    async with editor(workspace, script=read_app(), init_options={"hooks": hooks}, env=env) as ed:
        result = await ed.ask("read app.py")
        assert result["stopReason"] == "end_turn"
        end = finished(ed)[-1]
        assert end["status"] == "failed"
        assert "reads are off today" in str(end["rawOutput"])
        assert "blocked this read_file call" in str(end["rawOutput"])
        assert "def greet" not in str(end["rawOutput"])
        assert any("blocked read_file" in m for m in progress_messages(ed))


async def test_pre_tool_use_exit_0_sees_the_call_and_lets_it_run(
    workspace: Path, config_dir: Path, tmp_path: Path
) -> None:
    log = tmp_path / "pre.jsonl"
    hooks = {
        **hook("PreToolUse", f"cat >> {log}; echo >> {log}", matcher="read_file"),
    }
    hooks["PreToolUse"].append(
        {"matcher": "run_shell", "hooks": [{"type": "command", "command": "touch never.txt"}]}
    )
    env = {"AGENT_LS_CONFIG_DIR": str(config_dir)}
    async with editor(workspace, script=read_app(), init_options={"hooks": hooks}, env=env) as ed:
        result = await ed.ask("read app.py")
        assert result["stopReason"] == "end_turn"
        end = finished(ed)[-1]
        assert end["status"] == "completed"
        assert "def greet" in str(end["rawOutput"])
    [seen] = payloads(log)
    assert seen["hook_event_name"] == "PreToolUse"
    assert seen["tool_name"] == "read_file"
    assert seen["tool_input"] == {"file_path": "app.py"}
    assert seen["session_id"] == result["sessionId"]
    assert seen["cwd"] == str(workspace.resolve())
    assert seen["transcript_path"].endswith(f"{result['sessionId']}.jsonl")
    assert not (workspace / "never.txt").exists()  # the matcher names another tool


def shell_script(command: str) -> dict[str, Any]:
    return {
        "turns": [
            {"tool_calls": [{"name": "run_shell", "input": {"command": command}}]},
            {"text": "ran"},
        ]
    }


ALLOW = json.dumps({"hookSpecificOutput": {"permissionDecision": "allow"}})


async def test_hook_allow_skips_the_question(workspace: Path, config_dir: Path) -> None:
    hooks = hook("PreToolUse", f"echo '{ALLOW}'", matcher="run_shell")
    options = {"hooks": hooks, "sandbox": "off"}
    env = {"AGENT_LS_CONFIG_DIR": str(config_dir)}
    async with editor(
        workspace, script=shell_script("touch made.txt"), init_options=options, env=env
    ) as ed:
        await ed.ask("make the file")
        assert ed.confirmations == []  # touch writes: it would have asked
        assert (workspace / "made.txt").exists()
        assert any("allowed run_shell" in m for m in progress_messages(ed))


async def test_hook_allow_never_beats_a_deny_rule(workspace: Path, config_dir: Path) -> None:
    hooks = hook("PreToolUse", f"echo '{ALLOW}'", matcher="run_shell")
    options = {"hooks": hooks, "permissions": {"deny": ["run_shell(touch:*)"]}, "sandbox": "off"}
    env = {"AGENT_LS_CONFIG_DIR": str(config_dir)}
    async with editor(
        workspace, script=shell_script("touch made.txt"), init_options=options, env=env
    ) as ed:
        await ed.ask("make the file")
        assert not (workspace / "made.txt").exists()
        assert "denied by the user's permission rule" in str(finished(ed)[-1]["rawOutput"])


async def test_hook_allow_does_not_skip_an_ask_rule(workspace: Path, config_dir: Path) -> None:
    hooks = hook("PreToolUse", f"echo '{ALLOW}'", matcher="run_shell")
    options = {"hooks": hooks, "permissions": {"ask": ["run_shell(touch:*)"]}, "sandbox": "off"}
    env = {"AGENT_LS_CONFIG_DIR": str(config_dir)}
    async with editor(
        workspace, script=shell_script("touch made.txt"), init_options=options, env=env
    ) as ed:
        await ed.ask("make the file")  # no answer queued: Deny
        assert len(ed.confirmations) == 1
        assert not (workspace / "made.txt").exists()


async def test_hook_deny_and_ask_decisions(workspace: Path, config_dir: Path) -> None:
    deny = json.dumps(
        {
            "hookSpecificOutput": {
                "permissionDecision": "deny",
                "permissionDecisionReason": "no shell on fridays",
            }
        }
    )
    ask = json.dumps(
        {"hookSpecificOutput": {"permissionDecision": "ask", "permissionDecisionReason": "sure?"}}
    )
    hooks = {
        "PreToolUse": [
            {"matcher": "run_shell", "hooks": [{"type": "command", "command": f"echo '{deny}'"}]},
            {"matcher": "read_file", "hooks": [{"type": "command", "command": f"echo '{ask}'"}]},
        ]
    }
    script = {
        "turns": [
            {"tool_calls": [{"name": "run_shell", "input": {"command": "echo hi"}}]},
            {"tool_calls": [{"name": "read_file", "input": {"file_path": "app.py"}}]},
            {"text": "ok"},
        ]
    }
    env = {"AGENT_LS_CONFIG_DIR": str(config_dir)}
    async with editor(workspace, script=script, init_options={"hooks": hooks}, env=env) as ed:
        ed.answers = ["Deny"]
        await ed.ask("go")
        shell_end, read_end = finished(ed)
        assert shell_end["status"] == "failed"
        assert "no shell on fridays" in str(shell_end["rawOutput"])
        assert read_end["status"] == "failed"
        assert "did not allow" in str(read_end["rawOutput"])
        [question] = ed.confirmations
        assert "sure?" in question and "read_file" in question


async def test_hook_ask_answered_allow_runs_the_call_without_a_second_question(
    workspace: Path, config_dir: Path
) -> None:
    ask = json.dumps({"hookSpecificOutput": {"permissionDecision": "ask"}})
    hooks = hook("PreToolUse", f"echo '{ask}'", matcher="run_shell")
    env = {"AGENT_LS_CONFIG_DIR": str(config_dir)}
    options = {"hooks": hooks, "sandbox": "off"}
    async with editor(
        workspace, script=shell_script("touch made.txt"), init_options=options, env=env
    ) as ed:
        ed.answers = ["Allow"]
        await ed.ask("make the file")
        assert len(ed.confirmations) == 1 and "asks you to confirm" in ed.confirmations[0]
        assert (workspace / "made.txt").exists()


# -- PostToolUse -------------------------------------------------------------------------------


async def test_post_tool_use_exit_2_adds_stderr_to_the_result(
    workspace: Path, config_dir: Path, tmp_path: Path
) -> None:
    log = tmp_path / "post.jsonl"
    hooks = {
        "PostToolUse": [
            {
                "matcher": "read_file",
                "hooks": [
                    {"type": "command", "command": f"cat >> {log}; echo >> {log}"},
                    {"type": "command", "command": "echo 'LINT: 3 problems' >&2; exit 2"},
                ],
            }
        ]
    }
    env = {"AGENT_LS_CONFIG_DIR": str(config_dir)}
    async with editor(workspace, script=read_app(), init_options={"hooks": hooks}, env=env) as ed:
        await ed.ask("read app.py")
        end = finished(ed)[-1]
        assert end["status"] == "completed"
        assert "def greet" in str(end["rawOutput"])
        assert "LINT: 3 problems" in str(end["rawOutput"])
        assert any("added to the read_file result" in m for m in progress_messages(ed))
    [seen] = payloads(log)
    assert seen["hook_event_name"] == "PostToolUse"
    assert "def greet" in json.dumps(seen["tool_response"])


# -- UserPromptSubmit and SessionStart ---------------------------------------------------------


async def test_user_prompt_submit_exit_2_refuses_without_a_model_call(
    workspace: Path, api: Any, config_dir: Path
) -> None:
    hooks = hook("UserPromptSubmit", "echo 'no secrets in prompts' >&2; exit 2")
    async with editor(workspace, env=api_env(api, config_dir), init_options={"hooks": hooks}) as ed:
        result = await ed.ask("my password is hunter2")
        assert result["stopReason"] == "refusal"
        assert result["text"] == "no secrets in prompts"
        assert ed.streamed_text() == result["text"]
    assert api.requests == []


async def test_prompt_hooks_add_context(
    workspace: Path, api: Any, config_dir: Path, tmp_path: Path
) -> None:
    starts = tmp_path / "starts.jsonl"
    hooks = {
        **hook("SessionStart", f"cat >> {starts}; echo >> {starts}; echo SESSION-CONTEXT-1"),
        **hook("UserPromptSubmit", "echo PROMPT-CONTEXT-2"),
    }
    api.enqueue(Turn(text="one"), Turn(text="two"))
    async with editor(workspace, env=api_env(api, config_dir), init_options={"hooks": hooks}) as ed:
        first = await ed.ask("hello")
        await ed.ask("again", sessionId=first["sessionId"])
    one, two = (user_texts(r.body) for r in api.requests)
    assert "SESSION-CONTEXT-1" in one[0] and "PROMPT-CONTEXT-2" in one[0] and "hello" in one[0]
    assert "SESSION-CONTEXT-1" not in two[-1]  # SessionStart ran once for the session
    assert "PROMPT-CONTEXT-2" in two[-1] and "again" in two[-1]
    [start] = payloads(starts)
    assert start["hook_event_name"] == "SessionStart" and start["source"] == "startup"


async def test_a_failing_hook_warns_and_the_run_goes_on(
    workspace: Path, api: Any, config_dir: Path
) -> None:
    hooks = hook("UserPromptSubmit", "echo broken >&2; exit 1")
    api.enqueue(Turn(text="answered"))
    async with editor(workspace, env=api_env(api, config_dir), init_options={"hooks": hooks}) as ed:
        result = await ed.ask("hello")
        assert result["stopReason"] == "end_turn" and result["text"] == "answered"
        warnings = [m.message for m in ed.client.log_messages]
        assert any("exited with 1" in w and "broken" in w for w in warnings), warnings


# -- Stop --------------------------------------------------------------------------------------


async def test_stop_exit_2_goes_on_once_with_stderr(
    workspace: Path, api: Any, config_dir: Path, tmp_path: Path
) -> None:
    log = tmp_path / "stop.jsonl"
    hooks = hook("Stop", f"cat >> {log}; echo >> {log}; echo 'run the tests first' >&2; exit 2")
    api.enqueue(Turn(text="done."), Turn(text="Tests pass."))
    async with editor(workspace, env=api_env(api, config_dir), init_options={"hooks": hooks}) as ed:
        result = await ed.ask("fix it")
        assert result["stopReason"] == "end_turn"
        assert result["text"] == "done.\n\nTests pass."
    assert len(api.requests) == 2
    assert "run the tests first" in user_texts(api.requests[1].body)[-1]
    assert [p["stop_hook_active"] for p in payloads(log)] == [False, True]


async def test_stop_exit_0_lets_the_run_end(workspace: Path, api: Any, config_dir: Path) -> None:
    api.enqueue(Turn(text="done."))
    hooks = hook("Stop", "true")
    async with editor(workspace, env=api_env(api, config_dir), init_options={"hooks": hooks}) as ed:
        result = await ed.ask("fix it")
        assert result["text"] == "done."
    assert len(api.requests) == 1


# -- where hooks come from ---------------------------------------------------------------------


def write_project_hooks(root: Path, hooks: dict[str, Any]) -> None:
    (root / ".agent-ls").mkdir(exist_ok=True)
    (root / ".agent-ls" / "settings.json").write_text(json.dumps({"hooks": hooks}))


async def test_project_hooks_run_only_after_approval(workspace: Path, config_dir: Path) -> None:
    write_project_hooks(workspace, hook("PreToolUse", "touch side-effect.txt"))
    env = {"AGENT_LS_CONFIG_DIR": str(config_dir)}
    async with editor(workspace, script=read_app(), env=env) as ed:
        await ed.ask("read app.py")  # the trust question gets no answer: Deny
        assert any("touch side-effect.txt" in c for c in ed.confirmations)
        assert finished(ed)[-1]["status"] == "completed"
    assert not (workspace / "side-effect.txt").exists()
    async with editor(workspace, script=read_app(), env=env) as ed:
        ed.answers = ["Allow"]
        await ed.ask("read app.py")
    assert (workspace / "side-effect.txt").exists()
    (workspace / "side-effect.txt").unlink()
    async with editor(workspace, script=read_app(), env=env) as ed:
        await ed.ask("read app.py")  # approved for this exact content: no question
        assert ed.confirmations == []
    assert (workspace / "side-effect.txt").exists()


async def test_a_changed_project_script_asks_again(workspace: Path, config_dir: Path) -> None:
    (workspace / "check.sh").write_text("touch first.txt\n")
    write_project_hooks(workspace, hook("PreToolUse", "sh check.sh"))
    env = {"AGENT_LS_CONFIG_DIR": str(config_dir)}
    async with editor(workspace, script=read_app(), env=env) as ed:
        ed.answers = ["Allow"]
        await ed.ask("read app.py")
    assert (workspace / "first.txt").exists()
    (workspace / "check.sh").write_text("touch second.txt\n")
    async with editor(workspace, script=read_app(), env=env) as ed:
        await ed.ask("read app.py")  # changed script, no answer: Deny
        assert len(ed.confirmations) == 1
    assert not (workspace / "second.txt").exists()


async def test_user_settings_file_hooks_need_no_approval(workspace: Path, config_dir: Path) -> None:
    (config_dir / "settings.json").write_text(
        json.dumps({"hooks": hook("PreToolUse", "touch from-user.txt")})
    )
    env = {"AGENT_LS_CONFIG_DIR": str(config_dir)}
    async with editor(workspace, script=read_app(), env=env) as ed:
        await ed.ask("read app.py")
        assert ed.confirmations == []
    assert (workspace / "from-user.txt").exists()


async def test_cancel_kills_a_running_hook(workspace: Path, config_dir: Path) -> None:
    hooks = hook("PreToolUse", "echo $$ > hook.pid; exec sleep 30")
    env = {"AGENT_LS_CONFIG_DIR": str(config_dir)}
    async with editor(workspace, script=read_app(), init_options={"hooks": hooks}, env=env) as ed:
        ask = asyncio.ensure_future(ed.ask("read app.py"))
        pid_file = workspace / "hook.pid"
        for _ in range(200):
            if pid_file.exists() and pid_file.read_text().strip():
                break
            await asyncio.sleep(0.05)
        pid = int(pid_file.read_text())
        await ed.command("agent.cancel", {})
        result = await asyncio.wait_for(ask, 10)
        assert result["stopReason"] == "cancelled"
        for _ in range(100):
            if not _alive(pid):
                break
            await asyncio.sleep(0.05)
        assert not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(") ")[-1].startswith("Z"))


async def test_bad_hook_entries_are_reported_and_skipped(workspace: Path, config_dir: Path) -> None:
    hooks = {
        "PreTooluse": [{"hooks": [{"type": "command", "command": "touch typo.txt"}]}],
        "PreToolUse": [
            {"matcher": "(", "hooks": [{"type": "command", "command": "touch bad.txt"}]},
            {"hooks": [{"type": "command", "command": "touch good.txt", "timeout": -1}]},
        ],
    }
    env = {"AGENT_LS_CONFIG_DIR": str(config_dir)}
    async with editor(workspace, script=read_app(), init_options={"hooks": hooks}, env=env) as ed:
        result = await ed.ask("read app.py")
        assert result["stopReason"] == "end_turn"
        warnings = " | ".join(m.message for m in ed.client.log_messages)
        assert "unknown event 'PreTooluse'" in warnings
        assert "bad matcher" in warnings and "bad timeout" in warnings
    assert (workspace / "good.txt").exists()
    assert not (workspace / "typo.txt").exists() and not (workspace / "bad.txt").exists()


async def test_hooks_run_in_the_sandbox(workspace: Path, config_dir: Path, tmp_path: Path) -> None:
    """With the sandbox active, a hook writes inside the workspace but not beside it."""
    from agent_ls.safety.sandbox import find_bwrap, probe

    program = find_bwrap([workspace])
    if program is None or probe(program) is not None:
        if os.environ.get("CI"):
            pytest.fail("bubblewrap is missing or broken: the sandbox tests must run in CI")
        pytest.skip("no working bwrap here")
    outside = tmp_path / "outside.txt"
    command = f"touch inside.txt; touch {outside}"
    hooks = hook("PreToolUse", command, matcher="read_file")
    env = {"AGENT_LS_CONFIG_DIR": str(config_dir)}
    async with sandboxed_editor(
        workspace, script=read_app(), init_options={"hooks": hooks}, env=env
    ) as ed:
        result = await ed.ask("read app.py")
        assert result["stopReason"] == "end_turn"
    assert (workspace / "inside.txt").exists()
    assert not outside.exists()
