"""What the editor already knows, attached to the user's prompt.

The active file and selection, and files the user mentions as ``@path``. Mentioned files are
read through the buffer-aware workspace and count as read (the agent may edit them at once).
Files that look like secrets are attached only when the user names them explicitly.

A path typed in the prompt without ``@`` (absolute, ``~/...`` or relative to the workspace) is
not attached, but counts as named, like a mention: the agent may read it (and under it, for a
folder) without a question.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_ls import prompts
from agent_ls.agent.prompt import selection_context
from agent_ls.edits import PositionEncoding
from agent_ls.safety.paths import is_secret_like
from agent_ls.tools.files import number_lines
from agent_ls.workspace import FileProblem, FileView, ReadState, Workspace

MENTION = re.compile(r"(?<![\w@/])@((?:[\w.~-]|/)[^\s,;:!?()\[\]{}<>\"'`]*)")
MENTION_LINE_LIMIT = 2000
MAX_MENTIONS = 20
MAX_NAMED = 50
_TOKEN_EDGES = "\"'`()[]{}<>,;:!?"


def find_named_paths(prompt: str, workspace: Workspace) -> list[Path]:
    """Existing paths the user typed in the prompt: ``/etc/hosts``, ``~/notes.txt``,
    ``src/app.py``, ``.env``. A word counts when it looks like a path and exists."""
    found: list[Path] = []
    for token in prompt.split():
        word = token.strip(_TOKEN_EDGES).lstrip("@").rstrip(".")
        looks_like_path = "/" in word or word.startswith((".", "~")) or "." in word[1:]
        if not word or not looks_like_path or word.startswith(("http:", "https:")):
            continue
        try:
            path = workspace.resolve(word)
            exists = workspace.exists(path)
        except (FileProblem, OSError, ValueError):
            continue
        if path not in found and exists:
            found.append(path)
        if len(found) >= MAX_NAMED:
            break
    return found


@dataclass
class AttachedContext:
    """The text to put before the prompt, and a note per attachment for progress."""

    blocks: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def prefix(self, prompt: str) -> str:
        return "\n\n".join([*self.blocks, prompt]) if self.blocks else prompt


def find_mentions(prompt: str) -> list[str]:
    """``@path`` mentions in order, without duplicates or trailing punctuation."""
    seen: list[str] = []
    for match in MENTION.finditer(prompt):
        mention = match.group(1).rstrip(".")
        if mention and mention not in seen:
            seen.append(mention)
    return seen[:MAX_MENTIONS]


def attach(
    prompt: str,
    workspace: Workspace,
    read_state: ReadState,
    named_paths: set[Path],
    *,
    active_path: Path | None = None,
    active_text: str | None = None,
    selection: dict[str, Any] | None = None,
    encoding: PositionEncoding = "utf-16",
) -> AttachedContext:
    context = AttachedContext()
    named_paths.update(find_named_paths(prompt, workspace))
    if active_path is not None:
        shown = workspace.display(active_path)
        if is_secret_like(active_path):
            context.blocks.append(prompts.load("secret_not_attached.md").format(path=shown))
            context.notes.append(f"{shown} (a secret: path only)")
        else:
            context.blocks.append(selection_context(shown, active_text, selection, encoding))
            context.notes.append(f"{shown} (active file{' and selection' if selection else ''})")
    for mention in find_mentions(prompt):
        try:
            path = workspace.resolve(mention)
        except FileProblem:
            continue
        if not workspace.exists(path) or path.is_dir():
            continue
        try:
            view = workspace.view(path)
        except FileProblem as exc:
            context.notes.append(f"@{mention} (not attached: {exc})")
            continue
        attach_text(context, workspace, read_state, named_paths, view, mention)
    return context


def attach_text(
    context: AttachedContext,
    workspace: Workspace,
    read_state: ReadState,
    named_paths: set[Path],
    view: FileView,
    mention: str,
) -> None:
    """Attach a file the user named, as the model will see it, and count it as read.

    ``view`` is the text the user's editor gave (an ``@mention`` read through the workspace,
    or an ACP ``resource`` block the client embedded).
    """
    named_paths.add(view.path)  # the user named it: no question for reading it
    read_state.record(view)
    body, total = number_lines(view.text, 1, MENTION_LINE_LIMIT)
    shown_lines = body.count("\n") + 1 if body else 0
    note = f" (lines 1-{shown_lines} of {total})" if shown_lines < total else ""
    shown = workspace.display(view.path)
    context.blocks.append(
        prompts.load("mention.md").format(
            path=shown, mention=mention, note=note, body=body or "(empty)"
        )
    )
    context.notes.append(f"{shown} (@mention)")
