"""Terminal rendering of the agent's stream for the headless client."""

from __future__ import annotations

import contextlib
import difflib
import sys
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

OUTPUT_LINES = 12
NESTED_INDENT = "    "
STATUS_MARK = {"completed": "✓", "failed": "✗", "in_progress": "…", "pending": "·"}


def styled(text: str, style: str = "") -> Text:
    """``rich.text.Text``; rich is imported at the first styled line, as a ``--json -q`` run
    may print none (and its import would compete with the server's start for the CPU)."""
    from rich.text import Text

    return Text(text, style=style)


EDIT_OUTCOMES = ("applied", "partial", "rejected", "failed", "unconfirmed")


def edit_outcome(output: dict[str, Any]) -> tuple[str, str, str]:
    """(mark, detail, style) for an edit's outcome, as truthful as what the model is told."""
    status = output.get("status")
    if status == "applied":
        return "✓", ": applied", "green"
    if status == "partial":
        landed = [int(i) + 1 for i in output.get("landed") or []]
        total = output.get("hunks")
        of = f" of {total}" if isinstance(total, int) else ""
        which = ", ".join(map(str, landed)) or "none"
        return (
            "◐",
            f": partly applied (hunk{'s' if len(landed) != 1 else ''} {which}{of})",
            "yellow",
        )
    if status == "rejected":
        return "✗", ": rejected, the file is unchanged", "yellow"
    if status == "unconfirmed":
        return "?", ": applied, not yet confirmed by the editor", "yellow"
    reason = str(output.get("reason") or "").strip()
    return "✗", ": failed" + (f" ({reason.splitlines()[0][:200]})" if reason else ""), "red"
def parent_call(update: dict[str, Any]) -> str | None:
    """The ``task`` call a sub-agent's update belongs to (``_meta.agentLs``), if any."""
    meta = update.get("_meta")
    agent_ls = meta.get("agentLs") if isinstance(meta, dict) else None
    parent = agent_ls.get("parentToolCallId") if isinstance(agent_ls, dict) else None
    return str(parent) if parent else None


class Renderer:
    """Answer text goes to stdout; tool calls, diffs and progress to stderr."""

    def __init__(
        self,
        *,
        quiet: bool = False,
        color: bool | None = None,
        root: Path | None = None,
        json_output: bool = False,
    ):
        self.quiet = quiet
        self.root = root
        # With --json, stdout carries the result object alone; the answer streams to stderr.
        self.out = sys.stderr if json_output else sys.stdout
        self._color = color
        self.titles: dict[str, str] = {}
        self.nested: set[str] = set()  # tool calls of sub-agents, shown indented
        self._mid_line = False
        self._broke_line = False  # _break_line ended the answer's line: owes one newline back

    @cached_property
    def err(self) -> Console:
        """The console of stderr (tool calls, diffs, questions), made at its first use."""
        from rich.console import Console

        return Console(stderr=True, highlight=False, soft_wrap=True, force_terminal=self._color)

    def _break_line(self) -> None:
        if self._mid_line:
            self.out.write("\n")
            self.out.flush()
            self._mid_line = False
            self._broke_line = True

    def update(self, update: dict[str, Any]) -> None:
        kind = update.get("sessionUpdate")
        if kind == "agent_message_chunk":
            if self.quiet and self.out is not sys.stdout:
                return
            text = (update.get("content") or {}).get("text", "")
            if self._broke_line and text:
                # the next turn's text starts with the newlines that part it from the last
                # turn's; one of them was written already when a tool call broke the line
                self._broke_line = False
                text = text.removeprefix("\n")
                if not text:
                    return
            self.out.write(text)
            self.out.flush()
            self._mid_line = not text.endswith("\n")
            return
        if self.quiet:
            return
        if kind == "agent_thought_chunk":
            return
        if kind == "tool_call":
            self._break_line()
            call_id = str(update.get("toolCallId"))
            self.titles[call_id] = str(update.get("title", ""))
            if parent_call(update):
                self.nested.add(call_id)
            pad = self._pad(call_id)
            if update.get("status") == "failed":
                self.err.print(styled(f"{pad}✗ {self.titles[call_id]}", "red"))
            else:
                self.err.print(styled(f"{pad}→ {self.titles[call_id]}", "cyan"))
        elif kind == "tool_call_update":
            self._tool_update(update)
        elif kind == "current_mode_update":
            self.err.print(styled(f"mode: {update.get('currentModeId')}", "magenta"))

    def _pad(self, call_id: str) -> str:
        return NESTED_INDENT if call_id in self.nested else ""

    def _tool_update(self, update: dict[str, Any]) -> None:
        status = update.get("status")
        pad = self._pad(str(update.get("toolCallId")))
        for item in update.get("content") or []:
            if item.get("type") == "diff":
                self._break_line()
                self.diff(
                    str(item.get("path")), item.get("oldText"), str(item.get("newText")), pad
                )
            elif item.get("type") == "content" and status in ("completed", "failed"):
                text = str((item.get("content") or {}).get("text", ""))
                lines = text.rstrip("\n").splitlines()
                if len(lines) > OUTPUT_LINES:
                    skipped = len(lines) - OUTPUT_LINES
                    lines = [f"[... {skipped} lines ...]", *lines[-OUTPUT_LINES:]]
                self._break_line()
                for line in lines:
                    self.err.print(styled(pad + "  │ " + line, "dim"))
        if status in ("completed", "failed"):
            title = self.titles.get(str(update.get("toolCallId")), "")
            output = update.get("rawOutput")
            mark, detail, style = (
                STATUS_MARK[status],
                "",
                "green" if status == "completed" else "red",
            )
            if isinstance(output, dict) and output.get("status") in EDIT_OUTCOMES:
                mark, detail, style = edit_outcome(output)
            elif status == "failed" and isinstance(output, str):
                detail = ": " + output.strip().splitlines()[0][:200] if output.strip() else ""
            self._break_line()
            self.err.print(styled(f"{pad}{mark} {title}{detail}", style))

    def diff(self, path: str, old: str | None, new: str, indent: str = "") -> None:
        with contextlib.suppress(ValueError):
            path = str(Path(path).relative_to(Path.cwd() if self.root is None else self.root))
        lines = difflib.unified_diff(
            (old or "").splitlines(keepends=True),
            new.splitlines(keepends=True),
            fromfile=f"a/{path}" if old is not None else "/dev/null",
            tofile=f"b/{path}",
        )
        for line in lines:
            line = line.rstrip("\n")
            style = None
            if line.startswith(("+++", "---")):
                style = "bold"
            elif line.startswith("+"):
                style = "green"
            elif line.startswith("-"):
                style = "red"
            elif line.startswith("@@"):
                style = "cyan"
            self.err.print(styled(indent + line, style or ""))

    def question(self, message: str, answer: str, why: str) -> None:
        """Show a question the client answered by itself, and its answer."""
        if self.quiet:
            return
        self._break_line()
        lines = [ln for ln in message.splitlines() if ln.strip()]
        for line in lines[:6]:
            self.err.print(styled("? " + line, "yellow"))
        self.err.print(styled(f"  {answer} ({why})", "yellow"))

    def progress(self, message: str) -> None:
        # A sub-agent's step is "[<agent>: <description>] <title>": its tool call is shown.
        step = message.split("] ", 1)[1] if message.startswith("[") and "] " in message else None
        if step is not None and step in self.titles.values():
            return
        if not self.quiet and message and message not in self.titles.values():
            self._break_line()
            self.err.print(styled(f"  {message}", "dim"))

    def finish(self, result: dict[str, Any]) -> None:
        self._break_line()
        if self.quiet:
            return
        usage = result.get("usage") or {}
        cost = result.get("costUsd") or 0
        stop = result.get("stopReason")
        line = (
            f"[{stop}] {usage.get('inputTokens', 0)} in / {usage.get('outputTokens', 0)} out tokens"
            + (f", ${cost:.4f}" if cost else "")
        )
        style = "red" if stop in ("error", "cancelled") else "dim"
        if result.get("error"):
            self.err.print(styled(f"error: {result['error']}", "red"))
        self.err.print(styled(line, style))

    def mcp_servers(self, answer: dict[str, Any]) -> None:
        """``agent-ls mcp``: one line per server on stdout, its error and tools below."""
        servers = answer.get("servers") or []
        if not servers:
            print("No MCP servers configured.", file=self.out)
        for server in servers:
            tools = server.get("tools") or []
            print(
                f"{server.get('name')}  [{server.get('source')}]  {server.get('state')}"
                + (f"  {len(tools)} tools" if tools else ""),
                file=self.out,
            )
            if server.get("error"):
                print(f"    error: {server['error']}", file=self.out)
            for tool in tools:
                print(f"    {tool}", file=self.out)
        for problem in answer.get("problems") or []:
            print(f"problem: {problem}", file=self.out)
