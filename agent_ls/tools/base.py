"""The tool interface and the context a tool runs in.

A tool declares its input as a pydantic model (which is also the JSON schema the model sees),
whether it only reads, and whether it may run concurrently. Defaults fail closed: writing,
not concurrent.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeVar

from pydantic import BaseModel, ValidationError

from agent_ls import prompts
from agent_ls.ports import updates
from agent_ls.ports.model import ToolSpec
from agent_ls.ports.updates import Location, ToolCallContent, ToolKind
from agent_ls.tools.schemas import input_schema

if TYPE_CHECKING:
    from agent_ls.ports.editor import EditorPort
    from agent_ls.safety.permissions import Permissions
    from agent_ls.settings import Settings
    from agent_ls.workspace import EditJournal, ReadState, Workspace

RESULT_CHAR_CAP = 30_000


@dataclass(slots=True)
class ToolResult:
    """What the model reads back; ``content`` is always text."""

    content: str
    is_error: bool = False
    raw_output: Any = None
    display: list[ToolCallContent] | None = None  # ACP tool-call content (diffs, output)
    images: list[tuple[str, str]] | None = None  # (media type, base64) for the model


class SubagentRunner(Protocol):
    """Runs one sub-agent to its end, for the ``task`` tool (``agent/subagents.py``)."""

    async def run_task(
        self, agent: str, description: str, prompt: str, ctx: ToolContext
    ) -> ToolResult: ...


@dataclass
class ToolContext:
    """Everything a tool may touch while it runs."""

    workspace: Workspace
    port: EditorPort
    read_state: ReadState
    permissions: Permissions
    settings: Settings
    session_id: str
    tool_call_id: str = ""
    edited_paths: set[Path] = field(default_factory=set)
    named_paths: set[Path] = field(default_factory=set)  # paths the user named in the prompt
    readable_paths: set[Path] = field(default_factory=set)  # folders always readable
    subagents: SubagentRunner | None = None  # the ``task`` tool's runner; None in sub-agents
    journal: EditJournal | None = None  # records what edits landed (for agent.undo)

    def stream(self, text: str) -> None:
        """Stream partial output of the running tool to the editor."""
        self.port.update(
            self.session_id,
            updates.tool_call_update(self.tool_call_id, content=[updates.text_item(text)]),
        )


InputT = TypeVar("InputT", bound=BaseModel)


class Tool(ABC, Generic[InputT]):
    """A model-facing tool. Subclasses set the class attributes and implement ``run``."""

    name: ClassVar[str]
    input_model: ClassVar[type[BaseModel]]
    kind: ClassVar[ToolKind] = "other"
    read_only: ClassVar[bool] = False
    concurrency_safe: ClassVar[bool] = False
    # Large results are stored in the session folder and shown as head and tail; tools that
    # page their own output (read_file) opt out.
    persist_large_results: ClassVar[bool] = True

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name,
            description=prompts.load(f"tools/{self.name}.md"),
            input_schema=input_schema(self.input_model),
        )

    def parse(self, raw: dict[str, Any]) -> InputT:
        return self.input_model.model_validate(raw)  # type: ignore[return-value]

    def title(self, args: InputT) -> str:
        return self.name

    def reads_only(self, args: InputT) -> bool:
        """Whether this call only reads (plan mode runs only such calls)."""
        return self.read_only

    def runs_in_plan(self, args: InputT, ctx: ToolContext) -> bool:
        """Whether plan mode lets this call run (by default: when it only reads)."""
        return self.reads_only(args)

    def locations(self, args: InputT, ctx: ToolContext) -> list[Location]:
        return []

    @abstractmethod
    async def run(self, args: InputT, ctx: ToolContext) -> ToolResult: ...


def describe_validation_error(tool: str, exc: ValidationError) -> str:
    problems = []
    for err in exc.errors()[:10]:
        where = ".".join(str(p) for p in err["loc"]) or "input"
        problems.append(f"{where}: {err['msg']}")
    return f"Invalid input for {tool}: " + "; ".join(problems)


def cap_text(text: str, limit: int = RESULT_CHAR_CAP) -> str:
    """Keep head and tail of an over-long result, saying what was left out."""
    if len(text) <= limit:
        return text
    head = text[: limit * 2 // 3]
    tail = text[-(limit // 3) :]
    omitted = len(text) - len(head) - len(tail)
    return f"{head}\n\n[... {omitted} characters omitted ...]\n\n{tail}"
