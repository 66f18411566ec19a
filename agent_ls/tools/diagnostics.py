"""get_diagnostics: problems reported by the language servers the editor runs."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote, urlparse

from pydantic import BaseModel, Field

from agent_ls.agent.port import Unsupported
from agent_ls.tools.registry import Tool, ToolContext, ToolResult, cap_text

SEVERITY = {1: "error", 2: "warning", 3: "info", 4: "hint"}


class GetDiagnosticsInput(BaseModel):
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
