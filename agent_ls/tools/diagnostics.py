"""get_diagnostics: problems reported by the language servers the editor runs."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from pydantic import BaseModel, ConfigDict, Field

from agent_ls.ports.editor import Unsupported
from agent_ls.tools.base import Tool, ToolContext, ToolResult, cap_text

SEVERITY = {1: "error", 2: "warning", 3: "info", 4: "hint"}


class GetDiagnosticsInput(BaseModel):
    model_config = ConfigDict(defer_build=True)  # built at its first call (schemas.py)

    file_path: str | None = Field(
        default=None, description="Only this file's diagnostics; all open files when omitted."
    )


def _uri_path(uri: str) -> str:
    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme == "file" else uri


def format_diagnostics(items: list[dict[str, Any]], ctx: ToolContext) -> str:
    """``path:line:col: severity [source code] message`` lines (1-based positions)."""
    lines: list[str] = []
    for item in items:
        raw_path = _uri_path(str(item.get("uri", "")))
        try:
            shown = ctx.workspace.display(ctx.workspace.resolve(raw_path))
        except Exception:
            shown = raw_path
        for diag in item.get("diagnostics") or []:
            start = (diag.get("range") or {}).get("start") or {}
            severity = SEVERITY.get(diag.get("severity") or 1, "error")
            tag = " ".join(str(x) for x in (diag.get("source"), diag.get("code")) if x)
            message = str(diag.get("message", "")).replace("\n", " ")
            lines.append(
                f"{shown}:{int(start.get('line', 0)) + 1}:{int(start.get('character', 0)) + 1}: "
                f"{severity}{f' [{tag}]' if tag else ''} {message}"
            )
    return "\n".join(lines)


class GetDiagnostics(Tool[GetDiagnosticsInput]):
    name = "get_diagnostics"
    input_model = GetDiagnosticsInput
    kind = "read"
    read_only = True
    concurrency_safe = True

    def title(self, args: GetDiagnosticsInput) -> str:
        return f"Diagnostics for {args.file_path}" if args.file_path else "Diagnostics"

    async def run(self, args: GetDiagnosticsInput, ctx: ToolContext) -> ToolResult:
        path = ctx.workspace.resolve(args.file_path) if args.file_path else None
        try:
            items = await ctx.port.diagnostics(path)
        except Unsupported as exc:
            return ToolResult(
                "Diagnostics are not available in this editor"
                + (f" ({exc})" if str(exc) else "")
                + ". Run the project's checker with run_shell instead if you need them.",
                is_error=True,
            )
        text = format_diagnostics(items, ctx)
        where = ctx.workspace.display(path) if path else "the open files"
        if not text:
            return ToolResult(f"No diagnostics for {where}.", raw_output=items)
        return ToolResult(cap_text(text), raw_output=items)


SETTLE_MIN_SECONDS = 0.3
SETTLE_POLL_SECONDS = 0.15
SETTLE_MAX_SECONDS = 2.0


def _key(diag: dict[str, Any]) -> tuple[str, str, str, str]:
    """What makes two diagnostics the same problem, wherever the edit moved it."""
    return (
        str(diag.get("severity") or 1),
        str(diag.get("source") or ""),
        str(diag.get("code") or ""),
        str(diag.get("message") or ""),
    )


def _for_file(items: list[dict[str, Any]], ctx: ToolContext, path: Path) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for item in items:
        try:
            item_path = ctx.workspace.resolve(_uri_path(str(item.get("uri", ""))))
        except Exception:
            continue
        if item_path == path:
            found.extend(item.get("diagnostics") or [])
    return found


async def snapshot(ctx: ToolContext, path: Path) -> list[dict[str, Any]] | None:
    """The file's diagnostics now, or None when the editor cannot tell."""
    try:
        return _for_file(await ctx.port.diagnostics(path), ctx, path)
    except Unsupported:
        return None


async def settled_delta(ctx: ToolContext, path: Path, before: list[dict[str, Any]] | None) -> str:
    """After an edit: wait (bounded) for the editor's diagnostics to settle, then say what the
    edit introduced and fixed. Empty when the editor gives no diagnostics."""
    if before is None:
        return ""
    await asyncio.sleep(SETTLE_MIN_SECONDS)
    deadline = asyncio.get_running_loop().time() + SETTLE_MAX_SECONDS
    previous = await snapshot(ctx, path)
    while previous is not None and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(SETTLE_POLL_SECONDS)
        current = await snapshot(ctx, path)
        if current is None or sorted(map(_key, current)) == sorted(map(_key, previous)):
            break
        previous = current
    if previous is None:
        return ""
    old = Counter(map(_key, before))
    new = Counter(map(_key, previous))
    introduced = [d for d in previous if (new - old)[_key(d)] > 0]
    fixed_keys = old - new
    shown = ctx.workspace.display(path)
    uri_item = [{"uri": str(path), "diagnostics": introduced}]
    lines = []
    if introduced:
        lines.append("New problems the editor reports after this edit:")
        lines.extend("  " + line for line in format_diagnostics(uri_item, ctx).splitlines())
    if fixed_keys:
        lines.append(f"Fixed by this edit: {sum(fixed_keys.values())} problem(s) in {shown}.")
    if not lines:
        lines.append(f"The editor reports no new problems in {shown}.")
    return "\n".join(lines)
