"""``python -m agent_ls`` and the ``agent-ls`` program."""

from typing import NoReturn


def main() -> NoReturn:
    """Install the code cache, then run the command line (:func:`agent_ls.cli.entry`)."""
    from agent_ls import codecache

    codecache.install()  # before the CLI's own imports compile a regular expression
    from agent_ls.cli import entry

    entry()


if __name__ == "__main__":
    main()
