"""The command line built for one command is that command's, exactly as in the whole one."""

from __future__ import annotations

import contextlib
import io

import pytest

from agent_ls import cli


def _help(command: str | None, name: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as done:
        cli.build_parser(command).parse_args([name, "--help"])
    assert done.value.code == 0
    return out.getvalue()


@pytest.mark.parametrize("name", list(cli._COMMANDS))
def test_a_command_alone_parses_and_helps_as_in_the_whole_command_line(name: str) -> None:
    assert _help(name, name) == _help(None, name)


def test_a_command_alone_parses_its_arguments_as_the_whole_one_does() -> None:
    argv = ["run", "--yes", "--json", "-q", "--mode", "plan", "fix", "it"]
    assert vars(cli.build_parser("run").parse_args(argv)) == vars(
        cli.build_parser().parse_args(argv)
    )
    argv = ["serve", "--preload", "--log-level", "debug"]
    assert vars(cli.build_parser("serve").parse_args(argv)) == vars(
        cli.build_parser().parse_args(argv)
    )


def test_an_unknown_command_lists_them_all(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        cli.main(["frobnicate"])
    assert done.value.code == 2
    error = capsys.readouterr().err
    for name in cli._COMMANDS:
        assert name in error
