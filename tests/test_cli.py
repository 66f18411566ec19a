"""The agent-ls command line, run as a user would (subprocesses, real files)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

EDIT_SCRIPT = {
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
        {"text": "Changed the greeting."},
    ]
}


def agent_ls(
    *args: str, cwd: Path, script: dict[str, Any] | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("ANTHROPIC_API_KEY", None)
    if script is not None:
        path = cwd.parent / "script.json"
        path.write_text(json.dumps(script))
        env["AGENT_LS_MODEL"] = f"script:{path}"
    return subprocess.run(
        [sys.executable, "-m", "agent_ls", *args],
        cwd=cwd,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_run_yes_edits_the_file_on_disk(workspace: Path) -> None:
    done = agent_ls("run", "--yes", "Say Hi", cwd=workspace, script=EDIT_SCRIPT)
    assert done.returncode == 0, done.stderr
    assert 'return "Hi " + name' in (workspace / "app.py").read_text()
    assert "Changed the greeting." in done.stdout
    assert '+    return "Hi " + name' in done.stderr  # the diff is shown


def test_run_no_leaves_the_file_untouched(workspace: Path) -> None:
    before = (workspace / "app.py").read_text()
    done = agent_ls("run", "--no", "Say Hi", cwd=workspace, script=EDIT_SCRIPT)
    assert done.returncode == 0, done.stderr
    assert (workspace / "app.py").read_text() == before
    leftovers = [p.name for p in workspace.iterdir() if p.name.endswith(".agent-ls")]
    assert leftovers == []


def test_run_without_tty_or_flag_denies(workspace: Path) -> None:
    before = (workspace / "app.py").read_text()
    done = agent_ls("run", "Say Hi", cwd=workspace, script=EDIT_SCRIPT, stdin="")
    assert done.returncode == 0, done.stderr
    assert (workspace / "app.py").read_text() == before


def test_run_json_result_and_resume(workspace: Path) -> None:
    first = agent_ls("run", "--yes", "--json", "Say Hi", cwd=workspace, script=EDIT_SCRIPT)
    assert first.returncode == 0, first.stderr
    result = json.loads(first.stdout[first.stdout.index("{") :])
    assert result["stopReason"] == "end_turn"
    session_id = result["sessionId"]
    listed = agent_ls("sessions", "--json", cwd=workspace)
    rows = json.loads(listed.stdout)
    assert rows[0]["sessionId"] == session_id and rows[0]["title"] == "Say Hi"
    follow_up = {"turns": [*EDIT_SCRIPT["turns"], {"text": "I remember: I changed it."}]}
    second = agent_ls(
        "run", "--yes", "--resume", session_id, "what did you do?", cwd=workspace, script=follow_up
    )
    assert second.returncode == 0, second.stderr
    assert "I remember: I changed it." in second.stdout


def test_run_with_a_broken_model_exits_nonzero(workspace: Path) -> None:
    done = agent_ls("run", "--model", "nonsense", "hi", cwd=workspace)
    assert done.returncode == 1
    assert "provider:model" in done.stderr


def test_demo_runs_offline_and_passes_its_tests(tmp_path: Path) -> None:
    done = agent_ls("demo", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "all 3 tests pass" in done.stdout
    assert "Ran 3 tests" in done.stderr and "OK" in done.stderr


def test_check_command_prints_one_json_verdict(tmp_path: Path) -> None:
    done = agent_ls("check-command", "--", "git status && rm -rf build", cwd=tmp_path)
    assert done.returncode == 0
    verdict = json.loads(done.stdout)
    assert verdict["decision"] == "ask" and verdict["reasons"]
    safe = json.loads(agent_ls("check-command", "ls -la", cwd=tmp_path).stdout)
    assert safe["decision"] == "allow"
    assert agent_ls("check-command", cwd=tmp_path).returncode == 2


def _check(*args: str, cwd: Path, config: Path | None = None) -> dict[str, Any]:
    env = dict(os.environ)
    env["AGENT_LS_CONFIG_DIR"] = str(config or cwd / "no-user-config")
    done = subprocess.run(
        [sys.executable, "-m", "agent_ls", "check-command", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    verdict: dict[str, Any] = json.loads(done.stdout)
    assert set(verdict) == {"decision", "reasons"} and verdict["reasons"]
    return verdict


def test_check_command_gives_the_agents_own_verdict(tmp_path: Path) -> None:
    """The classifier alone allows these; the agent asks (issue 12, item 8)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    for line in ("cat .env", "cat ~/.ssh/id_ed25519", "cat /etc/shadow", "cat ../x.txt"):
        assert _check("--", line, cwd=ws)["decision"] == "ask", line
    assert _check("cat", ".env.example", cwd=ws)["decision"] == "allow"
    # --cwd names the workspace: ../x.txt is inside a workspace one level up.
    assert _check("--cwd", str(tmp_path), "--", "cat", "ws/../x.txt", cwd=ws)["decision"] == "allow"
    secret = _check("--", "cat ~/.aws/credentials", cwd=ws)
    assert "the AWS credentials folder ~/.aws" in secret["reasons"][0]


def test_check_command_applies_user_and_project_rules(tmp_path: Path) -> None:
    ws, config = tmp_path / "ws", tmp_path / "config"
    (ws / ".agent-ls").mkdir(parents=True)
    config.mkdir()
    (config / "settings.json").write_text(
        json.dumps(
            {"permissions": {"deny": ["run_shell(git push:*)"], "allow": ["run_shell(make)"]}}
        )
    )
    (ws / ".agent-ls" / "settings.json").write_text(
        json.dumps({"permissions": {"ask": ["run_shell(git log:*)"], "allow": ["run_shell(rm:*)"]}})
    )
    pushed = _check("--", "git push origin main", cwd=ws, config=config)
    assert pushed["decision"] == "deny" and "git push" in pushed["reasons"][0]
    assert _check("make", cwd=ws, config=config)["decision"] == "allow"
    assert _check("make", cwd=ws)["decision"] == "ask"  # without the user's rule
    logged = _check("git", "log", cwd=ws, config=config)
    assert logged["decision"] == "ask" and "git log:*" in logged["reasons"][0]
    assert _check("--", "rm -rf /", cwd=ws, config=config)["decision"] == "deny"
    assert _check("rm", "x", cwd=ws, config=config)["decision"] == "ask"  # the project's allow


def test_check_command_usage_errors_exit_2(tmp_path: Path) -> None:
    assert (
        agent_ls("check-command", "--cwd", str(tmp_path / "missing"), "ls", cwd=tmp_path).returncode
        == 2
    )
    assert agent_ls("check-command", "--", cwd=tmp_path).returncode == 2


def test_run_keeps_a_bom_and_edits_the_right_place(workspace: Path) -> None:
    (workspace / "bom.py").write_bytes(b"\xef\xbb\xbfx = 1  # caf\xc3\xa9\r\ny = 2\r\n")
    script = {
        "turns": [
            {"tool_calls": [{"name": "read_file", "input": {"file_path": "bom.py"}}]},
            {
                "tool_calls": [
                    {
                        "name": "edit_file",
                        "input": {
                            "file_path": "bom.py",
                            "old_string": "x = 1",
                            "new_string": "x = 10",
                        },
                    }
                ]
            },
            {"text": "ok"},
        ]
    }
    done = agent_ls("run", "--yes", "edit", cwd=workspace, script=script)
    assert done.returncode == 0, done.stderr
    assert (workspace / "bom.py").read_bytes() == b"\xef\xbb\xbfx = 10  # caf\xc3\xa9\r\ny = 2\r\n"


def test_remember_appends_to_the_projects_memory(workspace: Path) -> None:
    from agent_ls.settings import memory_file

    done = agent_ls("remember", "use", "tabs", cwd=workspace)
    assert done.returncode == 0, done.stderr
    path = memory_file(workspace)
    assert done.stdout.strip() == f"{path}: - use tabs"
    agent_ls("remember", "run make check", cwd=workspace)
    assert path.read_text() == "- use tabs\n- run make check\n"
    empty = agent_ls("remember", " ", cwd=workspace)
    assert empty.returncode == 2 and "empty" in empty.stderr


def test_undo_reverts_a_headless_run(workspace: Path) -> None:
    before = (workspace / "app.py").read_text()
    script = {
        "turns": [
            *EDIT_SCRIPT["turns"][:2],
            {
                "tool_calls": [
                    {"name": "write_file", "input": {"file_path": "new.txt", "content": "x\n"}}
                ]
            },
            {"text": "done"},
        ]
    }
    done = agent_ls("run", "--yes", "Say Hi", cwd=workspace, script=script)
    assert done.returncode == 0, done.stderr
    assert (workspace / "new.txt").exists() and (workspace / "app.py").read_text() != before
    dry = agent_ls("undo", "--no", cwd=workspace)
    assert dry.returncode == 0, dry.stderr
    assert (workspace / "app.py").read_text() != before  # --no rejects the preview
    assert "not accepted in the preview" in dry.stdout
    undone = agent_ls("undo", "--yes", "--json", cwd=workspace)
    assert undone.returncode == 0, undone.stderr
    result = json.loads(undone.stdout)
    assert sorted(result["reverted"]) == sorted(
        [str((workspace / "app.py").resolve()), str((workspace / "new.txt").resolve())]
    )
    assert (workspace / "app.py").read_text() == before
    assert not (workspace / "new.txt").exists()
    again = agent_ls("undo", "--yes", cwd=workspace)
    assert again.returncode == 1 and "no saved run changed files" in again.stderr


def test_run_no_reports_the_edit_as_rejected_not_done(workspace: Path) -> None:
    done = agent_ls("run", "--no", "Say Hi", cwd=workspace, script=EDIT_SCRIPT)
    assert done.returncode == 0, done.stderr
    edit_lines = [ln for ln in done.stderr.splitlines() if "Edit app.py" in ln and ln[:1] in "✓✗◐?"]
    assert edit_lines and all(": rejected" in ln for ln in edit_lines), done.stderr
    assert not any("failed" in ln for ln in edit_lines), done.stderr  # a "no" is no failure
    assert not any(ln.startswith("✓") for ln in edit_lines)


def test_run_yes_reports_the_edit_as_applied(workspace: Path) -> None:
    done = agent_ls("run", "--yes", "Say Hi", cwd=workspace, script=EDIT_SCRIPT)
    edit_lines = [ln for ln in done.stderr.splitlines() if "Edit app.py" in ln and ln[:1] in "✓✗◐?"]
    assert any(ln.startswith("✓") and "applied" in ln for ln in edit_lines), done.stderr


def test_run_json_prints_only_the_result_object_on_stdout(workspace: Path) -> None:
    done = agent_ls("run", "--no", "--json", "Say Hi", cwd=workspace, script=EDIT_SCRIPT)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)  # nothing else on stdout: pipes into jq as it is
    assert result["text"] == "Changed the greeting." and result["stopReason"] == "end_turn"
    assert "Changed the greeting." in done.stderr  # the answer still streams, to stderr
    quiet = agent_ls("run", "--no", "--json", "-q", "Say Hi", cwd=workspace, script=EDIT_SCRIPT)
    assert json.loads(quiet.stdout)["text"] == "Changed the greeting."
    assert "Changed the greeting." not in quiet.stderr


def test_run_answers_diagnostics_itself_without_log_noise(workspace: Path) -> None:
    script = {
        "turns": [
            {"tool_calls": [{"name": "get_diagnostics", "input": {}}]},
            {"text": "checked"},
        ]
    }
    done = agent_ls("run", "--no", "check it", cwd=workspace, script=script)
    assert done.returncode == 0, done.stderr
    assert "unknown method" not in done.stderr and "Failed to handle" not in done.stderr
    assert "no language servers" in done.stderr  # what the model was told, shown to the user


def test_run_resume_of_an_unknown_session_is_one_clear_line(workspace: Path) -> None:
    done = agent_ls("run", "--no", "--resume", "s-nosuch", "hi", cwd=workspace, script=EDIT_SCRIPT)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "agent-ls run: no saved session 's-nosuch' ('agent-ls sessions' lists them)"
    ]


def test_demo_leaves_nothing_behind_unless_kept(tmp_path: Path) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch)}
    env.pop("AGENT_LS_MODEL", None)
    done = subprocess.run(
        [sys.executable, "-m", "agent_ls", "demo"],
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stderr
    assert list(scratch.iterdir()) == []
    kept = subprocess.run(
        [sys.executable, "-m", "agent_ls", "demo", "--keep"],
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert kept.returncode == 0, kept.stderr
    left = list(scratch.iterdir())
    assert len(left) == 1 and (left[0] / "stats.py").is_file()
    assert str(left[0]) in kept.stderr


def _run_in_a_terminal(
    argv: list[str], cwd: Path, env: dict[str, str], keys: bytes, when: bytes = b"aaaa"
) -> tuple[int, str]:
    """Run ``argv`` on a real pseudo-terminal; type ``keys`` once it has shown ``when``;
    return (exit status, everything the terminal showed)."""
    import pty
    import select
    import time

    pid, fd = pty.fork()
    if pid == 0:  # the child: becomes the terminal's foreground process
        os.chdir(cwd)
        os.execve(sys.executable, [sys.executable, *argv], env)
    shown = b""
    typed = False
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            shown += chunk
            if not typed and when in shown:
                os.write(fd, keys)
                typed = True
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), shown.decode("utf-8", "replace")


def test_ctrl_c_in_a_terminal_cancels_cleanly_and_exits_130(workspace: Path) -> None:
    script = workspace.parent / "slow.json"
    script.write_text(json.dumps({"chunk_size": 2, "delay_ms": 30, "turns": [{"text": "a" * 400}]}))
    env = {**os.environ, "AGENT_LS_MODEL": f"script:{script}"}
    env.pop("ANTHROPIC_API_KEY", None)
    code, shown = _run_in_a_terminal(
        ["-m", "agent_ls", "run", "--no", "write a lot"], workspace, env, b"\x03"
    )
    assert code == 130, shown
    assert "Traceback" not in shown and "error" not in shown.lower(), shown
    assert "[cancelled]" in shown


def test_the_hunk_question_in_a_terminal_shows_the_changed_lines(workspace: Path) -> None:
    script = workspace.parent / "edit.json"
    script.write_text(json.dumps(EDIT_SCRIPT))
    env = {**os.environ, "AGENT_LS_MODEL": f"script:{script}"}
    env.pop("ANTHROPIC_API_KEY", None)
    code, shown = _run_in_a_terminal(
        ["-m", "agent_ls", "run", "Say Hi"], workspace, env, b"y\n", when=b"Apply this hunk?"
    )
    assert code == 0, shown
    question = shown[: shown.index("Apply this hunk?")]
    hunk = question[question.rindex("hunk 1 at line 2") :]
    plain = re.sub(r"\x1b\[[0-9;]*m", "", question)  # named as in the workspace
    assert "\napp.py hunk 1 at line 2" in plain.replace("\r", "") and str(workspace) not in plain
    assert '-     return "Hello " + name' in hunk and '+     return "Hi " + name' in hunk, hunk
    assert 'return "Hi " + name' in (workspace / "app.py").read_text()
def test_run_shows_a_sub_agents_tool_calls_indented(workspace: Path) -> None:
    task = {"description": "Find the greeting", "prompt": "Where is greet?", "agent": "explore"}
    script = {
        "turns": [
            {"tool_calls": [{"name": "task", "input": task}]},
            {"tool_calls": [{"name": "list_files", "input": {"pattern": "*.py"}}]},
            {"text": "greet is in app.py"},
            {"text": "It is in app.py."},
        ]
    }
    done = agent_ls("run", "--no", "Where is greet?", cwd=workspace, script=script)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "It is in app.py."  # the sub-agent's text is not the answer
    lines = done.stderr.splitlines()
    task_line = next(i for i, line in enumerate(lines) if line == "→ Find the greeting")
    child = next(i for i, line in enumerate(lines) if "list" in line and "*.py" in line)
    assert child > task_line
    assert lines[child].startswith("    → ")
    assert any(line.startswith("✓ Find the greeting") for line in lines[child:])


def test_run_parts_the_turns_texts_by_one_empty_line(workspace: Path) -> None:
    script = {
        "turns": [
            {
                "text": "Reading app.py.",
                "tool_calls": [{"name": "read_file", "input": {"file_path": "app.py"}}],
            },
            {"text": "It greets."},
        ]
    }
    done = agent_ls("run", "--no", "What does app.py do?", cwd=workspace, script=script)
    assert done.returncode == 0, done.stderr
    # not three newlines: the line the tool call broke counts as one of the turns' two
    assert done.stdout == "Reading app.py.\n\nIt greets.\n", repr(done.stdout)


def test_run_reports_progress_on_its_own_token_without_a_create_round_trip(
    tmp_path: Path,
) -> None:
    # The server would otherwise ask the client for a token (window/workDoneProgress/create)
    # and wait for the answer before the ask's first model request.
    (tmp_path / "ws").mkdir()
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": [{"text": "Done."}]}))
    code = (
        "import asyncio, json, sys\n"
        "from pathlib import Path\n"
        "from agent_ls.client.headless import Headless, RunOptions\n"
        "from agent_ls.client.render import Renderer\n"
        "seen = {'create': 0, 'tokens': set()}\n"
        "class Watched(Headless):\n"
        "    def _handlers(self):\n"
        "        handlers = super()._handlers()\n"
        "        create = handlers['window/workDoneProgress/create']\n"
        "        progress = handlers['$/progress']\n"
        "        def on_create(params):\n"
        "            seen['create'] += 1\n"
        "            return create(params)\n"
        "        def on_progress(params):\n"
        "            seen['tokens'].add(params['token'])\n"
        "            return progress(params)\n"
        "        handlers['window/workDoneProgress/create'] = on_create\n"
        "        handlers['$/progress'] = on_progress\n"
        "        return handlers\n"
        "options = RunOptions(prompt='hi', cwd=Path(sys.argv[1]), policy='yes', quiet=True)\n"
        "code = asyncio.run(Watched(options, Renderer(quiet=True)).run())\n"
        "print(json.dumps({'code': code, 'create': seen['create'],\n"
        "                  'tokens': sorted(seen['tokens'])}))\n"
    )
    env = {**os.environ, "AGENT_LS_MODEL": f"script:{script}"}
    env.pop("ANTHROPIC_API_KEY", None)
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "ws")],
        capture_output=True, text=True, timeout=60, env=env,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["code"] == 0
    assert seen["create"] == 0
    assert len(seen["tokens"]) == 1 and seen["tokens"][0].startswith("agent-ls-run/")
