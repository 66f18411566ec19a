"""What a request must know of a Claude model family: how to ask for thinking, whether it
takes an effort level, how large the context window is, and how many output tokens a call may
take by default.

Claude 5 models (Sonnet, Opus and Haiku 5.x) and the Fable and Mythos families think adaptively
on every request: they answer a thinking budget or ``thinking: disabled`` with a 400, and by
default they omit the text of their thinking, which now also carries the notes they write
between tool calls; so every request asks for adaptive thinking with its text shown. Claude
4.6-4.8 take adaptive thinking when asked (a budget is deprecated there). Earlier models, and
names we do not know, take a budget; a request without ``thinkingBudget`` then sends no
``thinking`` field, which every model accepts. Models that think adaptively take an effort
level (``output_config.effort``); the others are not sent one.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Thinking = Literal["always_adaptive", "adaptive", "budget"]

# claude-<family>-<major>[-<minor>][-<date>]: a minor has one or two digits, a date eight.
_VERSIONED = re.compile(r"^claude-(?:opus|sonnet|haiku)-(\d{1,2})(?:-(\d{1,2}))?(?:-|$)")
_ALWAYS_THINKING = re.compile(r"^claude-(?:fable|mythos)(?:-|$)")

DEFAULT_MAX_TOKENS = 8192
# Thinking counts toward max_tokens, and a model that always thinks needs room for both.
THINKING_MAX_TOKENS = 32_000


@dataclass(frozen=True, slots=True)
class ClaudeTraits:
    thinking: Thinking
    context_window: int
    max_tokens: int  # the default output tokens per call
    effort: bool  # takes output_config.effort


_ALWAYS = ClaudeTraits("always_adaptive", 1_000_000, THINKING_MAX_TOKENS, effort=True)
_ADAPTIVE = ClaudeTraits("adaptive", 200_000, DEFAULT_MAX_TOKENS, effort=True)
_BUDGET = ClaudeTraits("budget", 200_000, DEFAULT_MAX_TOKENS, effort=False)


@functools.cache
def claude_traits(model: str) -> ClaudeTraits:
    """The traits of the Anthropic model ``model`` (an API model ID, no provider prefix)."""
    if _ALWAYS_THINKING.match(model):
        return _ALWAYS
    version = _VERSIONED.match(model)
    if version is None:
        return _BUDGET
    major, minor = int(version[1]), int(version[2] or 0)
    if major >= 5:
        return _ALWAYS
    if major == 4 and minor >= 6:
        return _ADAPTIVE
    return _BUDGET


def end_of_life(model: str) -> str | None:
    """The end-of-life date the installed ``anthropic`` SDK gives for ``model`` (as it words
    it, e.g. "January 22nd, 2027"), or None when it lists none."""
    return _sdk_deprecations().get(model)


@functools.cache
def _sdk_deprecations() -> dict[str, str]:
    """The SDK's ``DEPRECATED_MODELS`` table, read from its source without importing the SDK
    (a second of imports the server leaves to the model worker): its literal, nothing run."""
    try:
        spec = importlib.util.find_spec("anthropic")
        if spec is None or spec.origin is None:
            return {}
        path = Path(spec.origin).parent / "_data" / "deprecated_models.py"
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError, ImportError):
        return {}
    for node in tree.body:
        target: ast.expr | None = None
        if isinstance(node, ast.AnnAssign):
            target = node.target
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        value = getattr(node, "value", None)
        if isinstance(target, ast.Name) and target.id == "DEPRECATED_MODELS" and value:
            try:
                table = ast.literal_eval(value)
            except (ValueError, TypeError, SyntaxError, RecursionError):  # not a plain literal
                return {}
            if isinstance(table, dict):
                return {str(k): str(v) for k, v in table.items()}
    return {}
