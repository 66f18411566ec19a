"""An ACP prompt (content blocks) as the text the agent runs on.

Text blocks are the user's words. A ``resource`` block (context the client embedded: a file
it holds, with its unsaved text) and a ``resource_link`` (a file the user picked) are attached
like ``@mentions`` (:mod:`agent_ls.agent.context`): named, counted as read, shown numbered;
in the words they stand as ``@path``. ``@path`` typed in the text attaches too.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from agent_ls import prompts
from agent_ls.agent.context import AttachedContext, attach, attach_text
from agent_ls.safety.paths import is_secret_like
from agent_ls.workspace import FileProblem, FileView, ReadState, Workspace

RESOURCE_CHAR_LIMIT = 200_000


def file_path(uri: str) -> Path | None:
    """The local path of a ``file://`` URI (or of a plain absolute path), else None."""
    if uri.startswith("/"):
        return Path(uri)
    parsed = urlparse(uri)
    if parsed.scheme != "file" or parsed.fragment or parsed.query:
        return None
    return Path(unquote(parsed.path))


def _join(parts: list[str], piece: str) -> None:
    """Append ``piece`` so that neighbours do not run together."""
    if parts and piece and not parts[-1][-1:].isspace() and not piece[:1].isspace():
        parts.append(" ")
    parts.append(piece)


async def build_prompt(
    blocks: list[Any],
    workspace: Workspace,
    read_state: ReadState,
    named_paths: set[Path],
) -> tuple[str, AttachedContext]:
    """The words of the prompt and what it attaches."""
    words: list[str] = []
    typed: list[str] = []  # only what the user typed is scanned for @mentions
    context = AttachedContext()
    for block in blocks:
        kind = getattr(block, "type", None)
        if kind == "text":
            _join(words, str(block.text))
            typed.append(str(block.text))
        elif kind == "resource":
            _join(words, _embedded(block.resource, workspace, read_state, named_paths, context))
        elif kind == "resource_link":
            name = await _linked(block, workspace, read_state, named_paths, context)
            _join(words, name)
        elif kind in ("image", "audio"):
            context.notes.append(f"an {kind} block (not supported: left out)")
    text = "".join(words)
    mentions = attach("\n".join(typed), workspace, read_state, named_paths)
    context.blocks.extend(mentions.blocks)
    context.notes.extend(mentions.notes)
    return text, context


def _embedded(
    resource: Any,
    workspace: Workspace,
    read_state: ReadState,
    named_paths: set[Path],
    context: AttachedContext,
) -> str:
    uri = str(getattr(resource, "uri", ""))
    text = getattr(resource, "text", None)
    path = file_path(uri)
    shown = workspace.display(path) if path is not None else uri
    if text is None:  # a blob
        size = len(base64.b64decode(str(getattr(resource, "blob", "")) or b"", validate=False))
        context.notes.append(f"{shown} (binary, {size} bytes: not attached)")
        return f"@{shown}"
    text = str(text)
    if path is not None and path.is_absolute():
        attach_text(
            context, workspace, read_state, named_paths, FileView(path, text, None, True), shown
        )
        return f"@{shown}"
    # A fragment (a selection, a symbol) or something other than a file: shown as given, and
    # not counted as a read of any file.
    body = text if len(text) <= RESOURCE_CHAR_LIMIT else text[:RESOURCE_CHAR_LIMIT] + "\n[...]"
    context.blocks.append(prompts.load("resource.md").format(name=uri, body=body))
    context.notes.append(f"{uri} (attached)")
    return f"@{uri}"


async def _linked(
    link: Any,
    workspace: Workspace,
    read_state: ReadState,
    named_paths: set[Path],
    context: AttachedContext,
) -> str:
    uri = str(link.uri)
    path = file_path(uri)
    if path is None or not path.is_absolute():
        return f"[{link.name}]({uri})"
    shown = workspace.display(path)
    if path.is_dir() or not workspace.exists(path):
        named_paths.add(path)
        return f"@{shown}"
    if is_secret_like(path):
        # The user picked it: readable on request, but its content is not sent on its own.
        named_paths.add(path)
        context.blocks.append(prompts.load("secret_not_attached.md").format(path=shown))
        context.notes.append(f"{shown} (a secret: path only)")
        return f"@{shown}"
    try:
        view = await workspace.load(path)
    except FileProblem as exc:
        context.notes.append(f"{shown} (not attached: {exc})")
        return f"@{shown}"
    attach_text(context, workspace, read_state, named_paths, view, shown)
    return f"@{shown}"
