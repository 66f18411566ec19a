"""Permissions: rules per parsed command, precedence, session grants, modes, paths.

No dangerous command runs here: shell lines are only classified and authorised
(``authorize_command`` never executes), and the few that do run are ``touch`` in tmp_path.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from agent_ls.ports.editor import Decision
from agent_ls.safety.paths import path_problem, sensitive_reason
from agent_ls.safety.permissions import Permissions
from agent_ls.safety.rules import Rule, command_words
from agent_ls.safety.shell import classify
from agent_ls.safety.shell_policy import authorize_command, write_targets
from agent_ls.settings import Mode, PermissionRules, Settings
from agent_ls.tools.access import authorize_path
from agent_ls.tools.base import ToolContext
from agent_ls.workspace import ReadState, Workspace
from tests.fakes import FakePort
from tests.test_loop import make_loop, tool_results


def make_ctx(
    root: Path,
    *,
    mode: Mode = "default",
    allow: list[str] | None = None,
    ask: list[str] | None = None,
    deny: list[str] | None = None,
    decisions: list[Decision] | None = None,
    perms: Permissions | None = None,
) -> tuple[ToolContext, FakePort]:
    port = FakePort(decisions=list(decisions or []))
    rules = PermissionRules(allow=allow or [], ask=ask or [], deny=deny or [])
    ctx = ToolContext(
        workspace=Workspace([root], buffers=port.open_buffer),
        port=port,
        read_state=ReadState(),
        permissions=perms or Permissions(mode=mode, rules=rules),
        settings=Settings(sandbox="off"),  # the asking behaviour without the sandbox
        session_id="s1",
        tool_call_id="c1",
    )
    return ctx, port


def words_of(command: str) -> list[str]:
    return [command_words(c.argv) for c in classify(command).commands]


# -- rules match parsed simple commands, never the raw line ---------------------------------


def test_rules_match_the_command_words() -> None:
    (npm,) = classify("CI=1 npm test -- -x").commands
    assert command_words(npm.argv) == "npm test -- -x"  # no assignment, no redirection
    perms = Permissions(rules=PermissionRules(allow=["run_shell(npm test:*)"]))
    assert perms.shell_rule(npm.argv) == "allow"
    (redirected,) = classify("npm test > out.txt 2>&1").commands
    assert perms.shell_rule(redirected.argv) == "allow"
    assert perms.shell_rule(("npm", "testing")) is None  # a prefix rule ends at a word
    assert perms.shell_rule(("npm", "install")) is None
    glob = Permissions(rules=PermissionRules(allow=["run_shell(git log*)"]))
    assert glob.shell_rule(("git", "log", "--oneline")) == "allow"


def test_rule_parsing() -> None:
    rule = Rule.parse("run_shell(npm test:*)")
    assert rule is not None and rule.tool == "run_shell" and rule.pattern == "npm test:*"
    assert Rule.parse("read_file") == Rule("read_file", None, "read_file")
    assert Rule.parse("not a rule!") is None
    assert Rule.parse("edit_file(src/**)").matches_path("write_file", "src/a/b.py")  # type: ignore[union-attr]
    assert not Rule.parse("edit_file(src/**)").matches_path("read_file", "src/a.py")  # type: ignore[union-attr]


def test_quoting_keeps_different_commands_apart() -> None:
    assert words_of('rm "a b"') == ["rm 'a b'"]
    assert words_of("rm a b") == ["rm a b"]
    assert words_of('rm -rf "$DIR"') == ['rm -rf "$DIR"']  # shown as written


async def test_a_compound_line_never_matches_a_rule_for_its_first_part(tmp_path: Path) -> None:
    # Classified and authorised only: this line is never executed.
    (tmp_path / "x").mkdir()
    ctx, port = make_ctx(tmp_path, allow=["run_shell(git status*)"], decisions=[Decision.DENY])
    refusal = await authorize_command("git status && rm -rf x", ctx)
    assert refusal and "rm -rf x" in refusal
    (question,) = port.asked
    assert "git status && rm -rf x" in question.message  # the whole line is shown
    assert "The part `rm -rf x` needs permission: rm deletes files" in question.message
    assert question.grant == "run_shell(rm -rf x)"  # never the compound line
    assert "`rm -rf x` (exactly these words)" in question.message
    assert "not the rest of the line" in question.message
    assert (tmp_path / "x").is_dir()


async def test_a_compound_line_with_one_dangerous_part_asks(tmp_path: Path) -> None:
    ctx, port = make_ctx(tmp_path)
    assert await authorize_command("ls && cat README.md | wc -l", ctx) is None
    assert port.asked == []
    assert await authorize_command("ls && touch new.txt | wc -l", ctx) is not None
    assert [q.grant for q in port.asked] == ["run_shell(touch new.txt)"]


@pytest.mark.parametrize(
    ("lists", "expected"),
    [
        (
            {
                "deny": ["run_shell(touch:*)"],
                "ask": ["run_shell(touch:*)"],
                "allow": ["run_shell(touch:*)"],
            },
            "deny",
        ),
        ({"ask": ["run_shell(touch:*)"], "allow": ["run_shell(touch:*)"]}, "ask"),
        ({"allow": ["run_shell(touch:*)"]}, "allow"),
        ({"deny": ["run_shell(touch a.txt)"], "allow": ["run_shell(touch:*)"]}, "deny"),
    ],
)
async def test_deny_wins_then_ask_then_allow(
    tmp_path: Path, lists: dict[str, list[str]], expected: str
) -> None:
    ctx, port = make_ctx(tmp_path, decisions=[Decision.ALLOW_SESSION], **lists)  # type: ignore[arg-type]
    refusal = await authorize_command("touch a.txt", ctx)
    if expected == "deny":
        assert refusal and "denied by the user's permission rule" in refusal
        assert port.asked == []
    elif expected == "ask":
        assert refusal is None
        (question,) = port.asked
        assert question.grant is None  # an ask rule asks every time: nothing to grant
        assert "permission rule `run_shell(touch:*)` asks" in question.message
        assert ctx.permissions.grants == []
    else:
        assert refusal is None and port.asked == []


async def test_deny_rules_see_through_wrappers(tmp_path: Path) -> None:
    for line in ("sudo rm -rf build", "/bin/rm x", "timeout 5 rm x", "env FOO=1 rm x", "ls; rm x"):
        ctx, port = make_ctx(tmp_path, deny=["run_shell(rm:*)"])
        refusal = await authorize_command(line, ctx)
        assert refusal and "run_shell(rm:*)" in refusal, line
        assert port.asked == []


async def test_an_allow_rule_does_not_clear_redirections_or_sensitive_variables(
    tmp_path: Path,
) -> None:
    ctx, port = make_ctx(tmp_path, allow=["run_shell(npm test:*)"], decisions=[Decision.ALLOW] * 3)
    assert await authorize_command("npm test -- -x", ctx) is None
    assert port.asked == []
    assert await authorize_command("npm test > out.txt", ctx) is None
    assert await authorize_command("PATH=/tmp/evil npm test", ctx) is None
    assert await authorize_command("npm test >> ../log.txt", ctx) is None
    redirect, variable, outside = port.asked
    assert "redirects output to out.txt" in redirect.message and redirect.grant is None
    assert "sets PATH" in variable.message and variable.grant is None
    assert "outside the workspace" in outside.message and outside.grant is None
    assert "npm test manages packages" not in redirect.message  # the rule cleared that part


# -- "Allow for this session" ----------------------------------------------------------------


async def test_a_session_grant_covers_exactly_the_command_shown(tmp_path: Path) -> None:
    perms = Permissions()
    ctx, port = make_ctx(tmp_path, perms=perms, decisions=[Decision.ALLOW_SESSION])
    assert await authorize_command("git status && touch a.txt", ctx) is None
    (question,) = port.asked
    assert question.grant == "run_shell(touch a.txt)"
    assert perms.grants == ["run_shell(touch a.txt)"]
    # The same command, alone or in another line, with an assignment: no question.
    for line in ("touch a.txt", "ls && touch a.txt", "CI=1 touch a.txt"):
        ctx, port = make_ctx(tmp_path, perms=perms)
        assert await authorize_command(line, ctx) is None, line
        assert port.asked == [], line
    # A different command still asks; so does a redirection around the granted one.
    for line in ("touch b.txt", "touch a.txt b.txt", "touch a.txt > log.txt", "touch -d x a.txt"):
        ctx, port = make_ctx(tmp_path, perms=perms)
        assert await authorize_command(line, ctx) is not None, line
        assert len(port.asked) == 1, line
    # A compound line asks only about the part not granted.
    ctx, port = make_ctx(tmp_path, perms=perms)
    await authorize_command("touch a.txt && touch c.txt", ctx)
    assert [q.grant for q in port.asked] == ["run_shell(touch c.txt)"]
    perms.clear_grants()
    ctx, port = make_ctx(tmp_path, perms=perms)
    assert await authorize_command("touch a.txt", ctx) is not None


async def test_a_grant_is_exact_not_a_pattern(tmp_path: Path) -> None:
    perms = Permissions(grants=["run_shell(rm *.tmp)"])
    ctx, port = make_ctx(tmp_path, perms=perms)
    assert await authorize_command("rm a.tmp", ctx) is not None
    assert len(port.asked) == 1


async def test_opaque_commands_can_only_be_allowed_once(tmp_path: Path) -> None:
    perms = Permissions()
    for _ in range(2):
        ctx, port = make_ctx(tmp_path, perms=perms, decisions=[Decision.ALLOW_SESSION])
        assert await authorize_command("eval 'touch x'", ctx) is None
        (question,) = port.asked
        assert question.grant is None
        assert "eval 'touch x'" in question.message
        assert "can only be allowed once" in question.message
    assert perms.grants == []
    ctx, port = make_ctx(tmp_path, perms=perms)  # no answer is a Deny
    assert await authorize_command('eval "$(echo cm0gLXJmIHgK | base64 -d)"', ctx) is not None


async def test_writes_outside_the_workspace_are_asked_each_time(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    cases = {
        "echo hi > ../outside.txt": "outside.txt",
        "cp notes.md /etc/y": "/etc/y",
        "ls | tee /tmp/x": "/tmp/x",
        "cd .. && touch y": "y",
        "mv notes.md ~/notes.md": "~/notes.md",
        "sed -i s/a/b/ ../other.txt": "../other.txt",
    }
    for line, target in cases.items():
        ctx, port = make_ctx(root, decisions=[Decision.ALLOW_SESSION])
        assert await authorize_command(line, ctx) is None
        (question,) = port.asked
        assert "outside the workspace" in question.message and target in question.message, line
        assert question.grant is None, line  # a grant could never cover it
        assert ctx.permissions.grants == []


def test_write_targets_from_the_words() -> None:
    assert write_targets(("cp", "-r", "a", "b", "dest")) == ["dest"]
    assert write_targets(("cp", "-t", "/tmp", "a")) == ["/tmp"]
    assert write_targets(("mv", "a", "b")) == ["a", "b"]
    assert write_targets(("rm", "-rf", "--", "-x", "y")) == ["-x", "y"]
    assert write_targets(("chmod", "-R", "755", "dir")) == ["dir"]
    assert write_targets(("dd", "if=/dev/zero", "of=/tmp/disk")) == ["/tmp/disk"]
    assert write_targets(("sed", "-n", "p", "f")) == []
    assert write_targets(("sed", "-i.bak", "-e", "s/a/b/", "f", "g")) == ["f", "g"]
    assert write_targets(("curl", "-o", "/tmp/x", "https://example.com")) == ["/tmp/x"]
    assert write_targets(("tar", "-xzf", "a.tgz", "-C", "/opt")) == ["/opt"]
    assert write_targets(("find", ".", "-name", "*.pyc", "-delete")) == ["."]
    assert write_targets(("ls", "-la")) == []


async def test_sensitive_write_targets_in_the_shell_ask(tmp_path: Path) -> None:
    ctx, port = make_ctx(tmp_path, allow=["run_shell(touch:*)"])
    assert await authorize_command("touch .git/hooks/pre-commit", ctx) is not None
    (question,) = port.asked
    assert ".git" in question.message


async def test_reading_secrets_through_the_shell_asks_unless_named(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("TOKEN=1\n")
    ctx, port = make_ctx(tmp_path)
    assert await authorize_command("cat .env", ctx) is not None
    assert await authorize_command("grep TOKEN < .env", ctx) is not None
    assert all("looks like a secret" in q.message for q in port.asked) and len(port.asked) == 2
    assert await authorize_command("ls -la .env && cat README.md", ctx) is None
    ctx.named_paths.add((tmp_path / ".env").resolve())
    assert await authorize_command("cat .env", ctx) is None


# -- modes -------------------------------------------------------------------------------------


async def test_bypass_asks_nothing_but_deny_rules_still_refuse(tmp_path: Path) -> None:
    ctx, port = make_ctx(tmp_path, mode="bypassPermissions", deny=["run_shell(git push:*)"])
    assert await authorize_command("touch a.txt && echo hi > ../outside.txt", ctx) is None
    assert await authorize_command("PATH=/x npm install", ctx) is None
    refusal = await authorize_command("git add . && git push origin main", ctx)
    assert refusal and "git push" in refusal
    assert "destructive" in (await authorize_command("rm -rf /", ctx) or "")
    # An opaque line cannot be checked against the deny rules: refused, not asked.
    refusal = await authorize_command("eval 'git push'", ctx)
    assert refusal and "deny rules" in refusal
    # A transparent wrapper is judged by its script: the deny rule sees the inner git push.
    refusal = await authorize_command("bash -lc 'git push origin main'", ctx)
    assert refusal and "run_shell(git push:*)" in refusal
    assert port.asked == []
    # Without deny rules an opaque line runs unasked in bypass mode.
    ctx, port = make_ctx(tmp_path, mode="bypassPermissions")
    assert await authorize_command("eval 'touch x'", ctx) is None
    path_ctx, path_port = make_ctx(tmp_path, mode="bypassPermissions", deny=["write_file(.env)"])
    assert await authorize_path(path_ctx, "write_file", tmp_path.parent / "x", write=True) is None
    assert (
        await authorize_path(path_ctx, "edit_file", tmp_path / ".git" / "config", write=True)
        is None
    )
    denied = await authorize_path(path_ctx, "edit_file", tmp_path / ".env", write=True)
    assert denied and "write_file(.env)" in denied  # a rule on editing covers both edit tools
    assert path_port.asked == []


async def test_plan_mode_refuses_every_writing_tool(workspace: Path) -> None:
    turns: list[dict[str, Any]] = [
        {
            "tool_calls": [
                {"name": "read_file", "input": {"file_path": "app.py"}},
                {"name": "write_file", "input": {"file_path": "n.py", "content": "1"}},
                {
                    "name": "edit_file",
                    "input": {"file_path": "app.py", "old_string": "Hello", "new_string": "Hi"},
                },
                {"name": "run_shell", "input": {"command": "touch made.txt"}},
                {"name": "run_shell", "input": {"command": "ls && git status --short"}},
            ]
        },
        {"text": "ok"},
    ]
    port = FakePort(decisions=[Decision.ALLOW] * 5)
    loop, port, session = make_loop(workspace, turns, port)
    session.permissions.mode = "plan"
    await loop.run("go")
    read, write, edit, shell, inspect = tool_results(session)
    assert not read.is_error
    assert (
        "plan mode" not in inspect.content and "app.py" in inspect.content
    )  # read-only shell runs
    for refused in (write, edit, shell):
        assert refused.is_error and "plan mode" in refused.content
    assert not (workspace / "n.py").exists() and not (workspace / "made.txt").exists()
    assert "Hello" in (workspace / "app.py").read_text()
    assert port.asked == [] and port.proposals == []


# -- paths -------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["default", "acceptEdits"])
@pytest.mark.parametrize(
    "rel",
    [
        ".git/config",
        ".GIT/config",
        ".git/hooks/pre-commit",
        ".env",
        ".env.local",
        "config/.ENV.production",
        "deploy/id_rsa",
        "certs/server.key",
        ".agent-ls/settings.json",
        "AGENTS.md",
        "sub/CLAUDE.md",
        ".bashrc",
        ".vscode/settings.json",
    ],
)
async def test_sensitive_paths_ask_even_when_edits_are_accepted(
    tmp_path: Path, mode: Mode, rel: str
) -> None:
    ctx, port = make_ctx(tmp_path, mode=mode, allow=["edit_file(**)"])
    refusal = await authorize_path(ctx, "write_file", tmp_path / rel, write=True)
    assert refusal and "did not allow writing" in refusal
    (question,) = port.asked
    assert str(tmp_path / rel) in question.message
    assert sensitive_reason((tmp_path / rel).resolve())


def test_home_sensitive_paths() -> None:
    home = Path.home()
    for path in (home / ".ssh" / "config", home / ".zshrc", home / ".config/fish/config.fish"):
        assert sensitive_reason(path), path
    assert sensitive_reason(Path("/home/dev/project/src/app.py")) is None


async def test_sensitive_write_through_the_loop_in_accept_edits(workspace: Path) -> None:
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "write_file", "input": {"file_path": ".env", "content": "A=1"}}]},
        {"text": "ok"},
    ]
    loop, port, session = make_loop(workspace, turns)
    session.permissions.mode = "acceptEdits"
    await loop.run("go")
    (result,) = tool_results(session)
    assert result.is_error and len(port.asked) == 1
    assert not (workspace / ".env").exists()


async def test_an_exact_rule_or_grant_opens_a_sensitive_path(tmp_path: Path) -> None:
    ctx, port = make_ctx(tmp_path, mode="acceptEdits", allow=["write_file(.env.example)"])
    assert await authorize_path(ctx, "write_file", tmp_path / ".env.example", write=True) is None
    ctx, port = make_ctx(tmp_path, decisions=[Decision.ALLOW_SESSION])
    assert await authorize_path(ctx, "write_file", tmp_path / ".env", write=True) is None
    assert ctx.permissions.grants == ["write_file(.env)"]
    assert await authorize_path(ctx, "write_file", tmp_path / ".env", write=True) is None
    assert await authorize_path(ctx, "write_file", tmp_path / ".env.local", write=True)
    assert len(port.asked) == 2


async def test_path_traversal_asks(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (tmp_path / "x").write_text("outside\n")
    workspace = Workspace([root])
    for raw in ("../x", "sub/../../x", str(tmp_path / "x")):
        path = workspace.resolve(raw)
        for write in (True, False):
            ctx, port = make_ctx(root, mode="acceptEdits")
            refusal = await authorize_path(ctx, "read_file", path, write=write)
            assert refusal, (raw, write)
            (question,) = port.asked
            assert "outside the workspace" in question.message
            assert str(tmp_path / "x") in question.message
    ctx, port = make_ctx(root, mode="bypassPermissions")
    assert await authorize_path(ctx, "write_file", workspace.resolve("../x"), write=True) is None


async def test_a_symlink_escaping_the_workspace_asks(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    outside = tmp_path / "secret-dir"
    outside.mkdir()
    (outside / "data.txt").write_text("x\n")
    (root / "link").symlink_to(outside)
    (root / "inner.txt").write_text("in\n")
    (root / "ok-link").symlink_to(root / "inner.txt")
    workspace = Workspace([root])
    ctx, port = make_ctx(root, mode="acceptEdits")
    escaped = workspace.resolve("link/data.txt")
    assert escaped == (outside / "data.txt").resolve()
    assert await authorize_path(ctx, "edit_file", escaped, write=True)
    assert await authorize_path(ctx, "read_file", escaped, write=False)
    assert len(port.asked) == 2 and all("outside the workspace" in q.message for q in port.asked)
    # Even a path not resolved by the caller is judged where it really leads.
    assert await authorize_path(ctx, "edit_file", root / "link" / "new.txt", write=True)
    # A symlink that stays inside is fine.
    ctx, port = make_ctx(root, mode="acceptEdits")
    assert await authorize_path(ctx, "read_file", workspace.resolve("ok-link"), write=False) is None
    # And a symlink to .git internals is a sensitive path.
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]\n")
    (root / "innocent.cfg").symlink_to(root / ".git" / "config")
    ctx, port = make_ctx(root, mode="acceptEdits")
    assert await authorize_path(ctx, "write_file", workspace.resolve("innocent.cfg"), write=True)
    assert ".git" in port.asked[0].message


async def test_the_loop_asks_for_a_path_outside_and_denies_without_answer(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    turns: list[dict[str, Any]] = [
        {
            "tool_calls": [
                {"name": "write_file", "input": {"file_path": "../escape.txt", "content": "x"}}
            ]
        },
        {"text": "ok"},
    ]
    loop, _port, session = make_loop(root, turns)
    session.permissions.mode = "acceptEdits"
    await loop.run("go")
    (result,) = tool_results(session)
    assert result.is_error and "did not allow" in result.content
    assert not (tmp_path / "escape.txt").exists()


async def test_reading_secrets_asks_unless_named(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("TOKEN=1\n")
    (tmp_path / "key.pem").write_text("-----BEGIN PRIVATE KEY-----\n")
    ctx, port = make_ctx(tmp_path)
    assert await authorize_path(ctx, "read_file", tmp_path / ".env", write=False)
    assert await authorize_path(ctx, "read_file", tmp_path / "key.pem", write=False)
    assert len(port.asked) == 2 and "looks like a secret" in port.asked[0].message
    ctx.named_paths.add((tmp_path / ".env").resolve())
    assert await authorize_path(ctx, "read_file", tmp_path / ".env", write=False) is None
    assert await authorize_path(ctx, "read_file", tmp_path / "app.py", write=False) is None


async def test_reading_secrets_through_the_loop(workspace: Path) -> None:
    (workspace / ".env").write_text("TOKEN=abc\n")
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "read_file", "input": {"file_path": ".env"}}]},
        {"text": "ok"},
    ]
    loop, port, session = make_loop(workspace, turns)
    await loop.run("go")
    (result,) = tool_results(session)
    assert result.is_error and "TOKEN=abc" not in result.content
    assert len(port.asked) == 1


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ("a\0b", "NUL byte"),
        ("", "empty"),
        ("   ", "empty"),
        ("x" * 5000, "too long"),
        ("bad\x07name.py", "control character"),
        ("new\nline.py", "control character"),
        ("esc\x1b[31m.py", "control character"),
        ("c1\x9b.py", "control character"),
        ("evil\u202etxt.py", "direction-changing"),
        ("zero\u200bwidth.py", "invisible"),
    ],
)
def test_junk_paths_are_named(raw: str, problem: str) -> None:
    found = path_problem(raw)
    assert found and problem in found


async def test_junk_paths_are_refused(tmp_path: Path) -> None:
    ctx, port = make_ctx(tmp_path, mode="bypassPermissions")
    for raw in ("bad\x07name.py", "x" * 5000, "rtl\u202e.py"):
        refusal = await authorize_path(ctx, "write_file", tmp_path / raw, write=True)
        assert refusal and refusal.startswith("Refused: the path"), raw
    assert port.asked == []
    assert path_problem("src/ok file-name_1.py") is None
    assert path_problem(str(tmp_path / "é.py")) is None


@pytest.mark.parametrize("tool", ["read_file", "write_file"])
@pytest.mark.parametrize(
    ("raw", "expected"),
    [("a\0b.py", "NUL byte"), ("bad\x07.py", "control character"), ("   ", "empty")],
)
async def test_junk_paths_through_the_loop(
    workspace: Path, tool: str, raw: str, expected: str
) -> None:
    args: dict[str, Any] = {"file_path": raw}
    if tool == "write_file":
        args["content"] = "x"
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"name": tool, "input": args}]},
        {"text": "ok"},
    ]
    loop, port, session = make_loop(workspace, turns)
    await loop.run("go")
    (result,) = tool_results(session)
    assert result.is_error and expected in result.content
    assert port.asked == []


async def test_an_allow_rule_opens_a_folder_outside_but_not_secrets_in_it(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    shared = tmp_path / "shared"
    shared.mkdir()
    rule = f"read_file({shared}/**)"
    ctx, port = make_ctx(root, allow=[rule])
    assert await authorize_path(ctx, "read_file", shared / "a.txt", write=False) is None
    assert await authorize_path(ctx, "read_file", shared / ".env", write=False)
    assert len(port.asked) == 1


async def test_shell_and_file_tools_run_for_real_after_allow(workspace: Path) -> None:
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "run_shell", "input": {"command": "touch made.txt && ls"}}]},
        {"tool_calls": [{"name": "run_shell", "input": {"command": "touch made.txt"}}]},
        {"text": "ok"},
    ]
    # The asking behaviour without the sandbox (with it, `touch` in the workspace does not ask).
    port = FakePort(decisions=[Decision.ALLOW_SESSION])
    loop, port, session = make_loop(workspace, turns, port, sandbox="off")
    await loop.run("go")
    first, second = tool_results(session)
    assert not first.is_error and "made.txt" in first.content
    assert not second.is_error
    assert len(port.asked) == 1  # the grant covered the second call
    assert session.permissions.grants == ["run_shell(touch made.txt)"]
    assert os.path.exists(workspace / "made.txt")


async def test_a_grant_to_write_a_path_covers_both_edit_tools(tmp_path: Path) -> None:
    perms = Permissions(grants=["edit_file(.env)"])
    ctx, port = make_ctx(tmp_path, perms=perms)
    assert await authorize_path(ctx, "write_file", tmp_path / ".env", write=True) is None
    assert await authorize_path(ctx, "read_file", tmp_path / ".env", write=False)
    assert len(port.asked) == 1


async def test_command_v_is_a_lookup_not_a_wrapper(tmp_path: Path) -> None:
    ctx, _port = make_ctx(tmp_path, deny=["run_shell(rm:*)"])
    assert await authorize_command("command -v rm", ctx) is None
    assert await authorize_command("command rm x", ctx)
