"""The context the model gets: system prompt assembly, the user's selection, @mentions,
secrets kept out, the fix prompt, and the editor's diagnostics after every edit."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_ls.agent.prompt import build_system_prompt, find_instruction_files
from agent_ls.tools.registry import default_tools
from agent_ls.workspace import Workspace
from tests.editor_sim import editor
from tests.fakeapi import FakeAPI, Turn


@pytest.fixture
def api() -> Iterator[Any]:
    with FakeAPI() as fake:
        yield fake
    assert not fake.rejections, "the real API would have refused these requests"


def env_for(api: Any, config_dir: Path) -> dict[str, str]:
    return {
        "AGENT_LS_MODEL": "anthropic:claude-sonnet-5-5",
        "ANTHROPIC_BASE_URL": api.url,
        "ANTHROPIC_API_KEY": "test-key",
        "AGENT_LS_CONFIG_DIR": str(config_dir),
    }


def user_texts(body: dict[str, Any]) -> str:
    out = []
    for message in body["messages"]:
        if message["role"] != "user":
            continue
        content = message["content"]
        if isinstance(content, str):
            out.append(content)
            continue
        for block in content:
            if block.get("type") == "text":
                out.append(block["text"])
            elif block.get("type") == "tool_result":
                inner = block["content"]
                out.append(inner if isinstance(inner, str) else "".join(c["text"] for c in inner))
    return "\n".join(out)


def test_instruction_files_in_order_and_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "config"
    config.mkdir()
    (config / "AGENTS.md").write_text("GLOBAL: be brief")
    parent = tmp_path / "parent"
    root = parent / "project"
    root.mkdir(parents=True)
    (parent / "AGENTS.md").write_text("PARENT: use tabs")
    (root / "AGENTS.md").write_text("ROOT: run make test")
    (root / "CLAUDE.md").write_text("ROOT-CLAUDE: no emojis")
    (root / "AGENTS.local.md").write_text("LOCAL: my machine has no docker")
    monkeypatch.setenv("AGENT_LS_CONFIG_DIR", str(config))
    files = find_instruction_files(root)
    assert [f.read_text().split(":")[0] for f in files] == [
        "GLOBAL",
        "PARENT",
        "ROOT",
        "ROOT-CLAUDE",
        "LOCAL",
    ]
    prompt = build_system_prompt(root, default_tools().specs())
    order = [prompt.index(x) for x in ("GLOBAL", "PARENT", "ROOT:", "ROOT-CLAUDE", "LOCAL")]
    assert order == sorted(order)
    assert f"Workspace root: {root}" in prompt and "Today's date: " in prompt
    assert "- read_file: Read a text file from the workspace" in prompt  # tool guidance
    assert "# Git" not in prompt  # not a repository: nothing said, nothing failed
    # Static parts first: identity, tools, instructions, then environment.
    assert prompt.index("You are agent-ls") < prompt.index("# Tools") < prompt.index("GLOBAL")
    assert prompt.index("LOCAL") < prompt.index("# Environment")


def test_git_state_in_the_system_prompt(tmp_path: Path) -> None:
    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q", "-b", "feature-x")
    (tmp_path / "a.txt").write_text("a\n")
    git("add", "a.txt")
    git("-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "first commit here")
    (tmp_path / "b.txt").write_text("untracked\n")
    prompt = build_system_prompt(tmp_path)
    assert "Branch: feature-x" in prompt
    assert "?? b.txt" in prompt
    assert "first commit here" in prompt


async def test_selection_and_mention_are_sent_and_env_is_not(
    workspace: Path, api: Any, tmp_path: Path
) -> None:
    (workspace / ".env").write_text("API_TOKEN=supersecret\n")
    (workspace / "lib.py").write_text("def helper():\n    return 42\n")
    api.enqueue(Turn(text="seen"), Turn(text="seen too"))
    async with editor(workspace, env=env_for(api, tmp_path)) as ed:
        ed.open("app.py")
        ed.open(".env", language="dotenv")
        selection = {"start": {"line": 1, "character": 0}, "end": {"line": 2, "character": 0}}
        await ed.ask(
            "Why does this call @lib.py?",
            uri=ed.uri("app.py"),
            range=selection,
            work_done_token="ctx-1",
        )
        await ed.ask("and this file?", uri=ed.uri(".env"))
        progress = [r.message for r in ed.client.progress_reports["ctx-1"] if r.kind == "report"]
    first, second = (r.body for r in api.requests)
    sent = user_texts(first)
    assert "app.py with lines 2-2 selected" in sent
    assert '     2\t    return "Hello " + name' in sent
    assert "The user attached lib.py with @lib.py" in sent and "     2\t    return 42" in sent
    assert any("lib.py (@mention)" in (m or "") for m in progress)
    assert "supersecret" not in str(first) and "supersecret" not in str(second)
    assert "It looks like a secret" in user_texts(second)


async def test_mentioned_file_counts_as_read(workspace: Path, api: Any, tmp_path: Path) -> None:
    api.enqueue(
        Turn(
            tool_uses=[
                (
                    "edit_file",
                    {"file_path": "app.py", "old_string": "Hello ", "new_string": "Hi "},
                )
            ]
        ),
        Turn(text="done"),
    )
    async with editor(workspace, env=env_for(api, tmp_path)) as ed:
        ed.open("app.py")
        result = await ed.ask("In @app.py say Hi")
        assert result["stopReason"] == "end_turn"
        assert 'return "Hi " + name' in ed.text("app.py")


async def test_diagnostics_after_an_edit_reach_the_model(
    workspace: Path, api: Any, tmp_path: Path
) -> None:
    api.enqueue(
        Turn(tool_uses=[("read_file", {"file_path": "app.py"})]),
        Turn(
            tool_uses=[
                (
                    "edit_file",
                    {"file_path": "app.py", "old_string": "name\n", "new_string": "nme\n"},
                )
            ]
        ),
        Turn(text="oops, fixing"),
    )
    async with editor(workspace, env=env_for(api, tmp_path)) as ed:
        ed.open("app.py")

        def diagnostics(uri: str | None) -> list[dict[str, Any]]:
            # A toy language server: complains about an undefined name when it sees one.
            text = ed.text("app.py")
            found = []
            if "nme" in text:
                line = text[: text.index("nme")].count("\n")
                found.append(
                    {
                        "range": {
                            "start": {"line": line, "character": 22},
                            "end": {"line": line, "character": 25},
                        },
                        "message": '"nme" is not defined',
                        "severity": 1,
                        "source": "pyright",
                        "code": "reportUndefinedVariable",
                    }
                )
            return [{"uri": ed.uri("app.py"), "diagnostics": found}]

        ed.diagnostics_provider = diagnostics
        await ed.ask("rename")
    third = api.requests[2].body
    sent = user_texts(third)
    assert "New problems the editor reports after this edit:" in sent
    assert 'app.py:2:23: error [pyright reportUndefinedVariable] "nme" is not defined' in sent


async def test_fix_sends_the_diagnostic_with_the_whole_small_file(
    workspace: Path, api: Any, tmp_path: Path
) -> None:
    api.enqueue(
        Turn(
            tool_uses=[
                (
                    "edit_file",
                    {
                        "file_path": "app.py",
                        "old_string": '"Hello " + name',
                        "new_string": 'f"Hello {name}"',
                    },
                )
            ]
        ),
        Turn(text="Fixed."),
    )
    diagnostic = {
        "range": {"start": {"line": 1, "character": 11}, "end": {"line": 1, "character": 26}},
        "message": "use an f-string",
        "source": "lint",
        "code": "F001",
    }
    async with editor(workspace, env=env_for(api, tmp_path)) as ed:
        ed.open("app.py")
        result = await ed.command(
            "agent.fix",
            {"uri": ed.uri("app.py"), "range": diagnostic["range"], "diagnostics": [diagnostic]},
        )
        assert result["stopReason"] == "end_turn"
        assert 'return f"Hello {name}"' in ed.text("app.py")  # no read_file turn needed
    sent = user_texts(api.requests[0].body)
    assert "- line 2, column 12: use an f-string [lint F001]" in sent
    assert "The whole file (line numbers from 1):" in sent
    assert '     5\tprint(greet("world"))' in sent


async def test_follow_agent_reveals_files_without_focus(workspace: Path) -> None:
    script = {
        "turns": [
            {"tool_calls": [{"name": "read_file", "input": {"file_path": "notes.md"}}]},
            {"text": "ok"},
        ]
    }
    async with editor(workspace, script=script, init_options={"followAgent": True}) as ed:
        await ed.ask("read the notes")
        import asyncio

        for _ in range(100):
            if ed.client.shown_documents:
                break
            await asyncio.sleep(0.02)
        shown = ed.client.shown_documents
    assert shown and shown[0].uri.endswith("/notes.md") and shown[0].take_focus is False


def test_paths_typed_in_the_prompt_count_as_named(tmp_path: Path) -> None:
    from agent_ls.agent.context import find_named_paths

    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("x\n")
    (root / ".env").write_text("K=1\n")
    outside = tmp_path / "logs"
    outside.mkdir()
    prompt = f"Look at src/app.py, `{outside}` and .env. Not missing.txt or https://x.io/a.b"
    found = find_named_paths(prompt, Workspace([root]))
    assert found == [
        (root / "src" / "app.py").resolve(),
        outside.resolve(),
        (root / ".env").resolve(),
    ]
