"""The ``task`` tool: hand a self-contained job to a sub-agent and read back its final answer.

Tools sit below the agent core, so the tool only uses what it needs from it: a
:class:`~agent_ls.tools.base.SubagentRunner`, passed in :attr:`ToolContext.subagents`. A
sub-agent's own loop never gets one (depth 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from agent_ls import prompts
from agent_ls.ports.model import ToolSpec
from agent_ls.ports.updates import ToolKind
from agent_ls.tools.base import Tool, ToolResult
from agent_ls.tools.schemas import input_schema

if TYPE_CHECKING:
    from agent_ls.tools.base import ToolContext

DEFAULT_AGENT = "general"


@dataclass(frozen=True, slots=True)
class AgentSummary:
    """What the parent model reads about one agent in the tool's description."""

    name: str
    description: str


class TaskInput(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)  # built at first use

    description: str = Field(min_length=1, max_length=100)
    prompt: str = Field(min_length=1)
    agent: str | None = None


def describe_agents(agents: list[AgentSummary]) -> str:
    return "\n".join(f"- {a.name}: {a.description}" for a in agents)


class TaskTool(Tool[TaskInput]):
    name: ClassVar[str] = "task"
    input_model: ClassVar[type[BaseModel]] = TaskInput
    kind: ClassVar[ToolKind] = "other"
    # Several task calls of one turn run in parallel (the runner caps how many at once).
    concurrency_safe: ClassVar[bool] = True
    # The child has its own read-state: the parent's large-result store is still the right
    # place for an over-long final answer.
    persist_large_results: ClassVar[bool] = True

    def __init__(self, agents: list[AgentSummary]):
        self.agents = agents

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name,
            description=prompts.load("tools/task.md").format(
                agents=describe_agents(self.agents), default=DEFAULT_AGENT
            ),
            input_schema=input_schema(self.input_model),
        )

    def title(self, args: TaskInput) -> str:
        return args.description

    def reads_only(self, args: TaskInput) -> bool:
        # A sub-agent runs in the session's mode: in plan mode its own loop refuses writes.
        return True

    async def run(self, args: TaskInput, ctx: ToolContext) -> ToolResult:
        if ctx.subagents is None:
            return ToolResult(
                "Sub-agents cannot start sub-agents: do this work yourself.", is_error=True
            )
        return await ctx.subagents.run_task(
            args.agent or DEFAULT_AGENT, args.description, args.prompt, ctx
        )
