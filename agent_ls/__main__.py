"""``python -m agent_ls`` and the ``agent-ls`` program."""

from typing import NoReturn


def main() -> NoReturn:
    """Install the code cache, leave pydantic's plugins out, then run the command line
    (:func:`agent_ls.cli.entry`)."""
    from agent_ls import codecache, pydantic_plugins

    codecache.install()  # before the CLI's own imports compile a regular expression
    pydantic_plugins.leave_out()
    from agent_ls.cli import entry

    entry()


if __name__ == "__main__":
    main()
