"""What a shell line reads and where it runs git, judged as bash will expand it (issue 12).

No command runs here: lines are only authorised (``authorize_command`` never executes);
``git init`` makes the nested repositories.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_ls.ports.editor import Decision
from agent_ls.safety.check import check_command
from agent_ls.safety.paths import secret_kind, sensitive_reason
from agent_ls.safety.shell import classify
from agent_ls.safety.shell_policy import authorize_command
from agent_ls.safety.shell_words import expand_word
from tests.test_permissions import make_ctx

HOME = str(Path.home())


@pytest.mark.parametrize(
    ("word", "words"),
    [
        ("~/.aws/{config,credentials}", (f"{HOME}/.aws/config", f"{HOME}/.aws/credentials")),
        ("$HOME/.ssh/id_rsa", (f"{HOME}/.ssh/id_rsa",)),
        ('"${HOME}/.config/gh/hosts.yml"', (f"{HOME}/.config/gh/hosts.yml",)),
        ('"$HOME"/x', (f"{HOME}/x",)),
        ("{~/.ssh,b}", (f"{HOME}/.ssh", "b")),  # braces first, then the tilde, as bash does
        ("a{1..3}", ("a1", "a2", "a3")),
        ("'~/x'", ("~/x",)),  # quoted: no tilde expansion
        ("'{a,b}'", ("{a,b}",)),
        ("$OTHER/x", None),
        ("$(echo x)", None),
    ],
)
def test_words_expand_as_bash_expands_them(word: str, words: tuple[str, ...] | None) -> None:
    assert expand_word(word) == words


def test_expansions_agree_with_bash(tmp_path: Path) -> None:
    """The same words, printed by real bash (one per line)."""
    for word in ("~/.aws/{config,credentials}", '"${HOME}/.x"', "{~/.ssh,b}", "a{1..3}"):
        out = subprocess.run(
            ["bash", "-c", f"printf '%s\\n' {word}"], capture_output=True, text=True, check=True
        ).stdout
        assert tuple(out.splitlines()) == expand_word(word), word


@pytest.mark.parametrize(
    ("command", "matched"),
    [
        ("cat ~/.aws/credentials", "the AWS credentials folder ~/.aws"),
        ("cat $HOME/.ssh/id_rsa", "the SSH keys folder ~/.ssh"),
        ('cat "${HOME}/.config/gh/hosts.yml"', "the GitHub CLI's tokens"),
        ("strings ~/.aws/credentials", "~/.aws"),
        ("cat ~/.aws/{config,credentials}", "~/.aws"),
        ("cat ~/.kube/config", "the Kubernetes credentials"),
        ("cat ~/.docker/config.json", "the Docker registry credentials"),
        ("rg token ~", "holds credential stores"),
        ("grep -r token /", "holds credential stores"),
        ("xxd ~/.gnupg/pubring.kbx", "the GnuPG keyring"),
        ("base64 < ~/.ssh/id_ed25519", "~/.ssh"),
        ("tar czf k.tgz ~/.ssh", "~/.ssh"),
        ("cp ~/.netrc n.txt", "the .netrc login store"),
        ("awk 1 ~/.npmrc", "the npm credentials file"),
        ("cat .env", "an environment file (.env)"),
        ("cat prod.pem", "a key or certificate file (prod.pem)"),
        ("bash -lc 'cat ~/.pypirc'", "the PyPI credentials file"),
        ("bash -c 'cat \"$1\"' _ ~/.ssh/id_rsa", "~/.ssh"),
    ],
)
async def test_secrets_ask_in_every_spelling_and_the_reason_names_the_match(
    tmp_path: Path, command: str, matched: str
) -> None:
    ctx, port = make_ctx(tmp_path)
    refusal = await authorize_command(command, ctx)
    assert refusal is not None, command  # no answer is a Deny
    (question,) = port.asked
    assert matched in question.message, question.message


async def test_a_glob_is_judged_by_what_it_matches(tmp_path: Path) -> None:
    (tmp_path / ".env.production").write_text("KEY=1\n")
    (tmp_path / "a.txt").write_text("a\n")
    ctx, port = make_ctx(tmp_path)
    assert await authorize_command("cat .env.p*", ctx) is not None
    assert ".env.production" in port.asked[0].message
    assert await authorize_command("cat *.txt", ctx) is None


async def test_templates_and_public_keys_are_not_secrets(tmp_path: Path) -> None:
    ctx, port = make_ctx(tmp_path)
    for command in ("cat .env.example", "cat id_rsa.pub", "ls ~/.ssh", "cat src/id_utils.py"):
        assert await authorize_command(command, ctx) is None, command
    assert port.asked == []
    assert secret_kind(Path(".env.example")) is None


async def test_reads_outside_the_workspace_ask_unless_named(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    outside = tmp_path / "notes.txt"
    outside.write_text("hi\n")
    ctx, port = make_ctx(root)
    for command in (
        f"cat {outside}",
        "cat ../notes.txt",
        "cd .. && cat notes.txt",
        "wc < ../notes.txt",
    ):
        assert await authorize_command(command, ctx) is not None, command
        assert "outside the workspace" in port.asked[-1].message
    assert len(port.asked) == 4
    ctx.named_paths.add(outside.resolve())
    assert await authorize_command("cat ../notes.txt", ctx) is None
    ctx.named_paths.clear()
    ctx.named_paths.add(tmp_path.resolve())  # a named folder covers what is under it
    assert await authorize_command(f"head {outside}", ctx) is None
    assert len(port.asked) == 4


async def test_patterns_and_listings_are_not_reads(tmp_path: Path) -> None:
    ctx, port = make_ctx(tmp_path)
    for command in (
        "grep -rn /usr/lib .",  # the pattern, not a file
        "sed -n 's/a/b/p' notes.md",
        "ls /etc",
        "tr / _ < notes.md",
        "echo /etc/shadow",
        "grep x notes.md /dev/null",
        "find . -path /x -print",
    ):
        assert await authorize_command(command, ctx) is None, command
    assert port.asked == []


def _git_init(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(folder)], check=True)


async def test_git_in_another_repository_asks_each_time(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    _git_init(root)
    _git_init(root / "vendor" / "lib")
    (root / "src").mkdir()
    ctx, port = make_ctx(root, allow=["run_shell(git status)"], decisions=[Decision.ALLOW_SESSION])
    assert await authorize_command("git status && git -C src status", ctx) is None
    assert port.asked == []
    assert await authorize_command("cd vendor/lib && git status", ctx) is None  # allowed once
    (question,) = port.asked
    assert "vendor/lib" in question.message and "core.fsmonitor" in question.message
    assert question.grant is None  # never for the session: the next time asks again
    assert await authorize_command("git -C vendor/lib log", ctx) is not None
    assert await authorize_command('cd "$D" && git status', ctx) is not None
    assert len(port.asked) == 3


@pytest.mark.parametrize(
    "command",
    [
        "declare -n p=PATH; p=./bin; ls",
        "typeset -n p=PATH; p=./bin; ls",
        "f() { local -n p=PATH; p=./bin; ls; }; f",
        "declare -n p; p=PATH; p=./bin; ls",
        "for PATH in ./bin; do ls; done",
        "BASH_CMDS[ls]=./bin/ls; ls",
        "declare -n e=BASH_ENV",
    ],
)
async def test_namerefs_and_loops_that_change_what_runs_ask(tmp_path: Path, command: str) -> None:
    verdict = classify(command)
    assert verdict.decision == "ask", verdict.to_json()
    ctx, port = make_ctx(tmp_path, allow=["run_shell(ls)"])
    assert await authorize_command(command, ctx) is not None
    assert len(port.asked) == 1


def test_plain_namerefs_and_loops_do_not_ask() -> None:
    assert classify("declare -n ref=items; echo ${ref[0]}").decision == "allow"
    assert classify("for f in *.py; do wc -l $f; done").decision == "allow"


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        ("rsync --delete a/ b/", "rsync deletes files (--delete or --remove-source-files)"),
        ("rsync -a a/ b/", "rsync copies files (writes)"),
        ("rsync -a a/ host:b/", "rsync reaches the network (host:b/)"),
    ],
)
def test_rsync_reasons_are_true(command: str, reason: str) -> None:
    verdict = classify(command)
    assert reason in verdict.reasons
    if ":" not in command:
        assert not any("network" in r for r in verdict.reasons)


@pytest.mark.parametrize(
    "rel",
    [
        ".claude/settings.json",
        ".codex/config.toml",
        ".gemini/settings.json",
        ".cursor/mcp.json",
        ".agent-ls/settings.json",
        ".mcp.json",
        ".vscode/tasks.json",
        ".idea/workspace.xml",
    ],
)
def test_agent_and_editor_configuration_is_sensitive(rel: str) -> None:
    assert sensitive_reason(Path("/w") / rel)


@pytest.mark.parametrize(
    ("command", "inner"),
    [
        ('bash -lc "ls && pwd"', ["ls", "pwd"]),
        ("sh -c 'git status'", ["git"]),
        ("zsh -lc ls", ["ls"]),
        ("timeout 5 bash -c 'grep -n x f | wc -l'", ["grep", "wc"]),
        ("env A=1 bash -o pipefail -c 'ls | head'", ["ls", "head"]),
    ],
)
def test_shell_wrappers_are_judged_by_their_script(command: str, inner: list[str]) -> None:
    verdict = classify(command)
    assert verdict.decision == "allow", verdict.to_json()
    assert not verdict.opaque
    assert [c.name for c in verdict.commands][1:] == inner


@pytest.mark.parametrize(
    "command",
    [
        "bash -ic ls",  # interactive: aliases
        "bash --rcfile x -c ls",
        "bash -O extglob -c ls",
        'bash -c "$CMD"',
        "zsh -c 'ls *(e:\"touch x\":)'",
        "fish -c ls",
        "xargs -I{} sh -c 'echo {}'",
    ],
)
def test_wrappers_that_are_not_transparent_stay_opaque(command: str) -> None:
    verdict = classify(command)
    assert verdict.decision == "ask" and verdict.opaque, verdict.to_json()


async def test_a_wrapped_command_asks_as_itself_once(tmp_path: Path) -> None:
    ctx, port = make_ctx(tmp_path, decisions=[Decision.ALLOW_SESSION])
    assert await authorize_command("bash -lc 'touch a.txt'", ctx) is None
    (question,) = port.asked
    assert question.grant == "run_shell(touch a.txt)"
    assert await authorize_command("sh -c 'touch a.txt'", ctx) is None  # the grant covers it
    assert len(port.asked) == 1


@pytest.mark.parametrize(
    "command",
    [
        'echo "$(< ~/.ssh/id_rsa)"',
        "cat<~/.ssh/id_rsa",
        "x=$(<~/.aws/credentials)",
        "while read l; do echo $l; done < ~/.netrc",
        "{ cat; } < .env",
        "[ -s x ] < .env",
    ],
)
async def test_every_input_redirection_is_a_read(tmp_path: Path, command: str) -> None:
    ctx, port = make_ctx(tmp_path)
    assert await authorize_command(command, ctx) is not None
    assert "looks like a secret" in port.asked[0].message


async def test_xargs_reads_the_files_the_line_names(tmp_path: Path) -> None:
    ctx, port = make_ctx(tmp_path)
    asked = {
        "echo ~/.ssh/id_rsa | xargs cat": "the SSH keys folder",
        "cat list.txt | xargs cat": "known only when it runs",
        "xargs -a list.txt cat": "the files named in list.txt",
        "xargs cat < list.txt": "the files named in list.txt",
    }
    for command, words in asked.items():
        assert await authorize_command(command, ctx) is not None, command
        assert words in port.asked[-1].message, port.asked[-1].message
    for command in (
        "find . -name '*.py' | xargs grep -n TODO",
        "git ls-files | xargs wc -l",
        "find . -type f | sort | xargs head -1",
        "echo a b | xargs -n1 echo",
    ):
        assert await authorize_command(command, ctx) is None, command
    assert len(port.asked) == len(asked)


@pytest.mark.parametrize(
    ("command", "words"),
    [
        ("f=~/.ssh/id_rsa; cat $f", "the SSH keys folder"),
        ('K=$HOME/.aws/credentials && cat "$K"', "the AWS credentials folder"),
        ('for f in ~/.ssh/*; do cat "$f"; done', "the SSH keys folder"),
        ("cat $'\\x2eenv'", "an environment file (.env)"),
        ('cd "$HOME/.docker" && cat config.json', "the Docker registry credentials"),
        ("f=$(cat list); cat $f", "known only when it runs"),
        ('while read f; do cat "$f"; done < list', "known only when it runs"),
        ("cat $(echo ~/.ssh/id_rsa)", "the SSH keys folder"),
        ('cat "$GOOGLE_APPLICATION_CREDENTIALS"', "a credentials variable"),
        ("grep -f x --file=~/.ssh/id_rsa y", "the SSH keys folder"),
        ("git show HEAD:.env", "from the git history"),
    ],
)
async def test_names_the_line_computes_are_judged(tmp_path: Path, command: str, words: str) -> None:
    ctx, port = make_ctx(tmp_path)
    assert await authorize_command(command, ctx) is not None
    assert words in port.asked[0].message, port.asked[0].message


async def test_names_the_line_computes_from_the_workspace_do_not_ask(tmp_path: Path) -> None:
    ctx, port = make_ctx(tmp_path)
    for command in (
        'for f in *.py; do head -3 "$f"; done',
        "wc -l $(git ls-files)",
        "git show HEAD:README.md",
        "d=src; cat $d/app.py",
    ):
        assert await authorize_command(command, ctx) is None, command
    assert port.asked == []


_PIECES = [*"ab ~/$.{},*'\"\\\n\r;|&<>()`=-_:#x", "HOME", "cat ", "cd ", "$'", "${", "xargs "]
_SHELLISH = st.lists(st.sampled_from(_PIECES), max_size=25).map("".join)


@settings(max_examples=400, deadline=None)
@given(_SHELLISH)
def test_the_agents_verdict_never_crashes(command: str) -> None:
    verdict = check_command(command, Path.cwd())
    assert verdict["decision"] in ("allow", "ask", "deny")
    assert not any("could not be checked" in r for r in verdict["reasons"]), verdict


async def test_a_write_target_is_not_called_a_read(tmp_path: Path) -> None:
    """Reasons are true (item 7): `cp a /etc/y` writes /etc/y, it does not read it."""
    ctx, port = make_ctx(tmp_path)
    for command, target in (
        ("cp notes.md /etc/y", "/etc/y"),
        ("tar czf /tmp/x.tgz src", "/tmp/x.tgz"),
    ):
        assert await authorize_command(command, ctx) is not None
        message = port.asked[-1].message
        assert f"writes {target}, outside the workspace" in message
        assert f"reads {target}" not in message


async def test_a_search_of_a_workspace_that_holds_the_stores_asks(tmp_path: Path) -> None:
    """A workspace at ~ (or /): `rg token` searches the credential stores too."""
    ctx, port = make_ctx(Path.home())
    for command in ("rg token", "grep -rn token", "find -name '*.pem'", "rg password ~/.aws"):
        assert await authorize_command(command, ctx) is not None, command
    assert all("credential" in q.message or "secret" in q.message for q in port.asked)
    assert await authorize_command("jq .name package.json", ctx) is None
