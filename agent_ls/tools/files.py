"""read_file: numbered lines from the editor's view of a file."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from agent_ls.edits import split_lines
from agent_ls.ports.updates import Location
from agent_ls.tools.access import authorize_path
from agent_ls.tools.base import Tool, ToolContext, ToolResult
from agent_ls.workspace import human_size

DEFAULT_LIMIT = 2000
LINE_CHAR_CAP = 2000
OUTPUT_CHAR_CAP = 60_000  # a page of output; the model pages on with offset


class ReadFileInput(BaseModel):
    model_config = ConfigDict(defer_build=True)  # built at its first call (schemas.py)

    file_path: str = Field(description="Path relative to the workspace root, or absolute.")
    offset: int | None = Field(
        default=None, ge=1, description="First line number to show (1-based)."
    )
    limit: int | None = Field(default=None, ge=1, description="Number of lines to show.")


def number_lines(text: str, offset: int, limit: int) -> tuple[str, int]:
    """Lines ``offset``..``offset+limit-1`` numbered from 1, and the total.

    Lines break where LSP breaks them (``\\r\\n``, ``\\r``, ``\\n``) and are shown without
    their endings, so the model never sees ``\\r`` and line numbers match the editor's.
    """
    lines = split_lines(text[1:] if text.startswith("\ufeff") else text)
    total = len(lines)
    shown: list[str] = []
    size = 0
    for number in range(offset, min(total, offset + limit - 1) + 1):
        line = lines[number - 1]
        if len(line) > LINE_CHAR_CAP:
            line = line[:LINE_CHAR_CAP] + f" [... {len(line) - LINE_CHAR_CAP} more characters]"
        size += len(line) + 8
        if shown and size > OUTPUT_CHAR_CAP:
            break
        shown.append(f"{number:>6}\t{line}")
    return "\n".join(shown), total


class ReadFile(Tool[ReadFileInput]):
    name = "read_file"
    input_model = ReadFileInput
    kind = "read"
    read_only = True
    concurrency_safe = True
    persist_large_results = False

    def title(self, args: ReadFileInput) -> str:
        return f"Read {args.file_path}"

    def locations(self, args: ReadFileInput, ctx: ToolContext) -> list[Location]:
        return [{"path": str(ctx.workspace.resolve(args.file_path)), "line": args.offset or 1}]

    async def run(self, args: ReadFileInput, ctx: ToolContext) -> ToolResult:
        path = ctx.workspace.resolve(args.file_path)
        refusal = await authorize_path(ctx, self.name, path, write=False)
        if refusal:
            return ToolResult(refusal, is_error=True)
        view = await ctx.workspace.load(path)
        ctx.read_state.record(view)
        offset = args.offset or 1
        limit = args.limit or DEFAULT_LIMIT
        body, total = number_lines(view.text, offset, limit)
        shown_lines = body.count("\n") + 1 if body else 0
        shown = ctx.workspace.display(path)
        if total == 0:
            return ToolResult(f"{shown} is empty.")
        if offset > total:
            return ToolResult(
                f"{shown} has only {total} lines; offset {offset} is past the end.", is_error=True
            )
        last = min(total, offset + shown_lines - 1)
        notes = []
        if view.from_buffer:
            notes.append("as open in the editor, including unsaved changes")
        if offset > 1 or last < total:
            size = view.size if view.size is not None else len(view.text.encode("utf-8", "replace"))
            notes.append(
                f"lines {offset}-{last} of {total}, {human_size(size)} in all; "
                "use offset/limit for more"
            )
        header = f"{shown}" + (f" ({'; '.join(notes)})" if notes else "")
        return ToolResult(f"{header}\n{body}")
