"""edit_file and write_file: changes proposed to the editor, never written behind its back."""

from __future__ import annotations

import asyncio
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from agent_ls.edits import EditError, hunks_diff, plan_replacement, plan_write
from agent_ls.ports import updates
from agent_ls.ports.editor import EditOutcome, EditProposal, Hunk
from agent_ls.ports.updates import Location, ToolCallContent
from agent_ls.safety.permissions import allowed_by_hook
from agent_ls.settings import memory_file
from agent_ls.tools import diagnostics
from agent_ls.tools.access import authorize_path
from agent_ls.tools.base import Tool, ToolContext, ToolResult
from agent_ls.workspace import FileProblem

# Edits to one file are serialised across sessions: the second waits, then finds the file
# changed since its read and is told to read it again.
_FILE_LOCKS: dict[Path, asyncio.Lock] = {}


def file_lock(path: Path) -> asyncio.Lock:
    return _FILE_LOCKS.setdefault(path, asyncio.Lock())


class EditFileInput(BaseModel):
    model_config = ConfigDict(defer_build=True)  # built at its first call (schemas.py)

    file_path: str = Field(description="Path relative to the workspace root, or absolute.")
    old_string: str = Field(description="Exact text to replace, as shown by read_file.")
    new_string: str = Field(description="The text to put in its place.")
    replace_all: bool = Field(default=False, description="Replace every occurrence.")


class WriteFileInput(BaseModel):
    model_config = ConfigDict(defer_build=True)  # built at its first call (schemas.py)

    file_path: str = Field(description="Path relative to the workspace root, or absolute.")
    content: str = Field(description="The complete new content of the file.")


def _diff_display(
    path: Path, shown: str, old_text: str | None, new_text: str, hunks: list[Hunk]
) -> list[ToolCallContent]:
    """ACP's diff content, plus the unified diff of the hunks for clients that show text."""
    return [
        {
            "type": "diff",
            "path": str(path),
            "oldText": old_text,
            "newText": new_text,
            "unifiedDiff": hunks_diff(shown, old_text or "", hunks),
        }
    ]


async def _propose(
    ctx: ToolContext,
    tool: str,
    path: Path,
    old_text: str | None,
    new_text: str,
    hunks: list[Hunk],
    version: int | None,
) -> ToolResult:
    shown = ctx.workspace.display(path)
    display = _diff_display(path, shown, old_text, new_text, hunks)
    ctx.port.update(ctx.session_id, updates.tool_call_update(ctx.tool_call_id, content=display))
    # A PreToolUse hook's "allow" skips the preview's question as it skips the others.
    accept = ctx.permissions.mode in ("acceptEdits", "bypassPermissions") or bool(
        allowed_by_hook()
    )
    proposal = EditProposal(
        path=path,
        old_text=old_text,
        new_text=new_text,
        hunks=hunks,
        version=version,
        label=f"agent: {tool} {shown}",
        needs_confirmation=not accept,
    )
    if is_memory(ctx, path) and ctx.port.open_buffer(path) is None:
        # The agent's own notes, outside the workspace: written without a question.
        outcome = await asyncio.to_thread(_write_memory, path, new_text)
        return _report(ctx, path, shown, proposal, outcome)
    before = await diagnostics.snapshot(ctx, path)
    outcome = await ctx.port.propose_edit(proposal)
    result = _report(ctx, path, shown, proposal, outcome)
    if outcome.status in ("applied", "partial"):
        # The editor's language servers are the agent's feedback loop: a type error the edit
        # caused shows up in this result, without running anything.
        delta = await diagnostics.settled_delta(ctx, path, before)
        if delta:
            result.content += "\n\n" + delta
    return result


def _report(
    ctx: ToolContext,
    path: Path,
    shown: str,
    proposal: EditProposal,
    outcome: EditOutcome,
) -> ToolResult:
    total = len(proposal.hunks)
    if outcome.final_text is not None:
        ctx.read_state.record_text(path, outcome.final_text, outcome.final_version)
    if ctx.journal is not None and outcome.status in ("applied", "partial", "unconfirmed"):
        # "unconfirmed": the editor applied it but still shows the old text: the new one is
        # what will be there.
        landed = outcome.final_text
        if outcome.status == "unconfirmed" or landed is None:
            landed = proposal.new_text
        if landed != proposal.old_text:
            ctx.journal.record(path, proposal.old_text, landed)
    if outcome.status == "applied":
        ctx.edited_paths.add(path)
        verb = "Created" if proposal.old_text is None else "Edited"
        diff = hunks_diff(shown, proposal.old_text or "", proposal.hunks)
        return ToolResult(
            f"{verb} {shown} ({total} hunk{'s' if total != 1 else ''} applied).",
            raw_output={"status": "applied", "diff": diff},
        )
    if outcome.status == "partial":
        ctx.edited_paths.add(path)
        landed = ", ".join(str(i + 1) for i in outcome.landed) or "none"
        return ToolResult(
            f"The user accepted only part of the edit to {shown}: of the {total} hunks "
            f"proposed, they accepted hunk(s) {landed} and rejected the others. Read the file "
            "again to see what it holds now.",
            raw_output={"status": "partial", "landed": outcome.landed, "hunks": total},
        )
    if outcome.status == "unconfirmed":
        ctx.edited_paths.add(path)
        return ToolResult(
            f"The editor reports the edit to {shown} as applied, but has not sent the changed "
            "text yet, so read_file may still show the previous content for a while. Assume "
            "the change landed; read the file again before editing it further.",
            raw_output={"status": "unconfirmed"},
        )
    if outcome.status == "rejected":
        return ToolResult(
            f"The user rejected this edit to {shown}; the file is unchanged."
            + (f" ({outcome.reason})" if outcome.reason else "")
            + " Do not retry the same change; ask the user what they want instead.",
            raw_output={"status": "rejected"},
        )
    return ToolResult(
        f"The edit to {shown} could not be applied: {outcome.reason or 'the editor refused it'}. "
        "This was not the user rejecting it; the file is unchanged. Read the file again and "
        "retry, differently if needed.",
        is_error=True,
        raw_output={"status": "failed", "reason": outcome.reason},
    )


def is_memory(ctx: ToolContext, path: Path) -> bool:
    """Whether ``path`` is the project's memory file (``MEMORY.md`` in the data dir)."""
    return path.resolve() == memory_file(ctx.workspace.root)


def _write_memory(path: Path, text: str) -> EditOutcome:
    import os
    import tempfile

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".MEMORY.", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except OSError as exc:
        return EditOutcome("failed", reason=str(exc))
    return EditOutcome("applied", final_text=text)


class EditFile(Tool[EditFileInput]):
    name = "edit_file"
    input_model = EditFileInput
    kind = "edit"

    def title(self, args: EditFileInput) -> str:
        return f"Edit {args.file_path}"

    def locations(self, args: EditFileInput, ctx: ToolContext) -> list[Location]:
        return [{"path": str(ctx.workspace.resolve(args.file_path))}]

    async def run(self, args: EditFileInput, ctx: ToolContext) -> ToolResult:
        path = ctx.workspace.resolve(args.file_path)
        async with file_lock(path):
            return await self._edit(path, args, ctx)

    async def _edit(self, path: Path, args: EditFileInput, ctx: ToolContext) -> ToolResult:
        if not ctx.workspace.exists(path):
            return ToolResult(
                f"{args.file_path} does not exist: use write_file to create it.", is_error=True
            )
        refusal = await authorize_path(ctx, self.name, path, write=True)
        if refusal:
            return ToolResult(refusal, is_error=True)
        view = await ctx.workspace.load(path)
        stale = ctx.read_state.check(view)
        if stale:
            return ToolResult(f"Cannot edit {args.file_path}: {stale}", is_error=True)
        try:
            new_text, hunks = plan_replacement(
                view.text, args.old_string, args.new_string, replace_all=args.replace_all
            )
        except EditError as exc:
            return ToolResult(f"Cannot edit {args.file_path}: {exc}", is_error=True)
        return await _propose(ctx, self.name, path, view.text, new_text, hunks, view.version)


class WriteFile(Tool[WriteFileInput]):
    name = "write_file"
    input_model = WriteFileInput
    kind = "edit"

    def title(self, args: WriteFileInput) -> str:
        return f"Write {args.file_path}"

    def locations(self, args: WriteFileInput, ctx: ToolContext) -> list[Location]:
        return [{"path": str(ctx.workspace.resolve(args.file_path))}]

    async def run(self, args: WriteFileInput, ctx: ToolContext) -> ToolResult:
        path = ctx.workspace.resolve(args.file_path)
        async with file_lock(path):
            return await self._write(path, args, ctx)

    async def _write(self, path: Path, args: WriteFileInput, ctx: ToolContext) -> ToolResult:
        if path.is_dir():
            return ToolResult(f"{args.file_path} is a directory.", is_error=True)
        refusal = await authorize_path(ctx, self.name, path, write=True)
        if refusal:
            return ToolResult(refusal, is_error=True)
        if not ctx.workspace.exists(path):
            hunks = [Hunk(0, 0, args.content)]
            return await _propose(ctx, self.name, path, None, args.content, hunks, None)
        try:
            view = await ctx.workspace.load(path)
        except FileProblem as exc:
            return ToolResult(f"Cannot overwrite {args.file_path}: {exc}", is_error=True)
        stale = ctx.read_state.check(view)
        if stale:
            return ToolResult(f"Cannot overwrite {args.file_path}: {stale}", is_error=True)
        content, hunks = plan_write(view.text, args.content)  # keeps the file's line endings
        if not hunks:
            return ToolResult(f"{args.file_path} already holds exactly this content.")
        return await _propose(ctx, self.name, path, view.text, content, hunks, view.version)
