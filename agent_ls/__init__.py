"""agent-ls: a coding agent served over the Language Server Protocol."""

# Read by the build (pyproject's dynamic version): importlib.metadata would cost ~50 ms at start.
__version__ = "0.1.0"
# Here, not in settings: a front door names it before pydantic (settings' models) is loaded.
DEFAULT_MODEL = "anthropic:claude-sonnet-5-5"
