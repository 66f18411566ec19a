"""The agent loop: stream a turn, run the tools it asks for, feed results back, repeat.

It stops when the model calls no tool. Tool failures, denials and rejected edits go back to
the model as tool results; only what the model cannot fix ends the run with an error.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from agent_ls.agent.compaction import compact, needs_compaction
from agent_ls.agent.hooks import HookRunner
from agent_ls.agent.session import Session
from agent_ls.ports.editor import EditorPort
from agent_ls.ports.messages import Message, ToolResultBlock, ToolUseBlock, Usage
from agent_ls.ports.model import (
    Model,
    ModelError,
    ModelRequest,
    TextDelta,
    ThinkingDelta,
    ToolInputDelta,
    TurnComplete,
    UsageSoFar,
)
from agent_ls.ports.updates import Location, TokenCounts, ToolCallUpdate
from agent_ls.pricing import cost_usd
from agent_ls.safety.permissions import hook_allowance
from agent_ls.settings import Settings
from agent_ls.tools.base import (
    SubagentRunner,
    Tool,
    ToolContext,
    ToolResult,
    describe_validation_error,
)
from agent_ls.tools.registry import ToolRegistry
from agent_ls.workspace import FileProblem, Workspace

log = logging.getLogger(__name__)

CANCELLED_RESULT = "The user cancelled this tool call; it did not complete."
MAX_RETRIES = 4
LARGE_RESULT_CHARS = 20_000
# A turn cancelled mid-stream: its streamed output counted at about this many characters a token
# (the provider's final count never comes).
CHARS_PER_TOKEN = 4


@dataclass
class RunResult:
    """The outcome of one ask, in the contract's terms."""

    session_id: str
    stop_reason: str
    text: str
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    error: str | None = None

    def to_contract(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "sessionId": self.session_id,
            "stopReason": self.stop_reason,
            "text": self.text,
            "usage": self.usage.to_contract(),
            "costUsd": round(self.cost_usd, 6),
        }
        if self.error is not None:
            out["error"] = self.error
        return out


class SubagentHosting(SubagentRunner, Protocol):
    """The runner of a loop's ``task`` calls (``agent/subagents.py``), as the loop sees it."""

    def totals(self) -> tuple[Usage, float]:
        """The usage and cost of this run's sub-agents so far."""
        ...


_STOP_REASONS = {
    "end_turn": "end_turn",
    "stop_sequence": "end_turn",
    "max_tokens": "max_tokens",
    "refusal": "refusal",
}


class AgentLoop:
    """Runs asks in one session against one model, tool set, workspace and editor."""

    def __init__(
        self,
        *,
        session: Session,
        model: Model,
        tools: ToolRegistry,
        workspace: Workspace,
        port: EditorPort,
        settings: Settings,
        system_prompt: str,
        hooks: HookRunner | None = None,
    ):
        self.session = session
        self.hooks = hooks
        self.model = model
        self.tools = tools
        self.workspace = workspace
        self.port = port
        self.settings = settings
        self.system_prompt = system_prompt
        # What goes before this turn's first text so the run's turns read apart: the chat's
        # chunks and the result's text stay one and the same string.
        self._separator = ""
        # Sub-agents (agent/subagents.py): the runner of this loop's ``task`` calls, the
        # usage of the run in flight (read live by the runner), and what the rest of the run
        # tree has spent (a parent's children; for a child, its parent and siblings), so one
        # spending cap covers the whole tree.
        self.subagents: SubagentHosting | None = None
        self.live_usage = Usage()
        self.spent_elsewhere: Callable[[], float] = lambda: 0.0
        # Where applied edits are recorded for agent.undo: a sub-agent records into its
        # parent session's journal, so undoing the run undoes what its children applied.
        self.journal = session.journal
        # The usage of the whole run tree so far (a sub-agent reports its root's), sent with
        # every usage_update so that editors can show tokens while the run goes.
        self.tree_usage: Callable[[], Usage] = self._own_tree_usage
        # The turn being streamed: what the provider reported of its usage, and the
        # characters streamed, counted if the run is cancelled before the turn completes.
        self._turn_reported = Usage()
        self._turn_chars = 0

    def _own_tree_usage(self) -> Usage:
        total = Usage()
        total.add(self.live_usage)
        if self.subagents is not None:
            total.add(self.subagents.totals()[0])
        return total

    def _cut_turn_usage(self) -> Usage:
        """The usage of a turn cancelled before it completed: the input the provider reported
        and the output streamed so far (estimated from its length when not reported)."""
        cut = Usage()
        cut.add(self._turn_reported)
        estimated = -(-self._turn_chars // CHARS_PER_TOKEN)  # ceil
        cut.output_tokens = max(cut.output_tokens, estimated)
        self._turn_reported, self._turn_chars = Usage(), 0
        return cut

    def spent(self, usage: Usage) -> float:
        """The session's spending so far, this run's whole tree included."""
        return self.session.cost_usd + self._cost(usage) + self.spent_elsewhere()

    async def run(self, prompt: str) -> RunResult:
        """Run one ask to completion, cancellation or failure."""
        session = self.session
        if session.journal.files:  # what this run applies, for agent.undo
            session.journal.clear()
            await asyncio.to_thread(session.save_journal)
        # -- hooks: SessionStart, UserPromptSubmit (a block answers without a model call)
        if self.hooks is not None:
            start = None if session.hooks_started else ("resume" if session.history else "startup")
            session.hooks_started = True
            refusal, prompt = await self.hooks.prompt_submitted(prompt, start)
            if refusal:
                self.port.update(
                    session.id,
                    {
                        "sessionUpdate": "agent_message_chunk",
                        "content": {"type": "text", "text": refusal},
                    },
                )
                return RunResult(session.id, "refusal", refusal)
        stop_hook_active = False
        # --
        session.add_user_text(prompt)
        usage = self.live_usage = Usage()
        texts: list[str] = []
        stop = "max_turn_requests"
        error: str | None = None
        try:
            for _turn in range(self.settings.max_turns):
                cap = self.settings.max_cost_usd
                if cap is not None and self.spent(usage) >= cap:
                    session.close_dangling_tool_uses(CANCELLED_RESULT)
                    stop = "error"
                    error = (
                        f"the session's spending cap of ${cap:.2f} is reached "
                        f"(spent ${self.spent(usage):.4f}); "
                        "raise maxCostUsd or start a new session"
                    )
                    break
                if needs_compaction(session, self.model, self.settings.compact_threshold):
                    await self.compact(usage)
                joined = "".join(texts)
                self._separator = "\n\n" if joined and not joined.endswith("\n\n") else ""
                complete = await self._stream_turn(usage)
                session.append(complete.message)
                turn_text = complete.message.text()
                if turn_text:
                    texts.append(self._separator + turn_text)
                uses = complete.message.tool_uses()
                if complete.stop_reason == "max_tokens" and uses:
                    # The last tool input may be cut off: never run it.
                    session.close_dangling_tool_uses(
                        "Your reply hit max_tokens before this tool call was complete; "
                        "it was not run. Make smaller calls."
                    )
                    continue
                if uses:
                    results = await self._run_tools(uses)
                    session.append(Message("user", list(results)))
                    continue
                if complete.stop_reason == "pause_turn":
                    continue
                stop = _STOP_REASONS.get(complete.stop_reason, "end_turn")
                # -- hooks: a blocking Stop hook makes the run go on (once)
                if self.hooks is not None:
                    again = await self.hooks.stop(stop_hook_active)
                    if again:
                        stop_hook_active = True
                        session.add_user_text(again)
                        stop = "max_turn_requests"
                        continue
                # --
                break
        except asyncio.CancelledError:
            session.close_dangling_tool_uses(CANCELLED_RESULT)
            stop = "cancelled"
            usage.add(self._cut_turn_usage())  # the provider bills a cut stream too
        except ModelError as exc:
            session.close_dangling_tool_uses(CANCELLED_RESULT)
            stop, error = "error", str(exc)
        cost = self._cost(usage)
        if self.subagents is not None:  # the run's usage and cost include its sub-agents
            child_usage, child_cost = self.subagents.totals()
            usage = Usage()
            usage.add(self.live_usage)
            usage.add(child_usage)
            cost += child_cost
        session.usage.add(usage)
        session.cost_usd += cost
        if session.journal.files:
            await asyncio.to_thread(session.save_journal)
        return RunResult(session.id, stop, "".join(texts), usage, cost, error)

    async def compact_now(self) -> RunResult:
        """``agent.compact``: summarise the history on demand."""
        usage = Usage()
        stop, error = "end_turn", None
        try:
            await self.compact(usage)
        except asyncio.CancelledError:
            stop = "cancelled"
        except ModelError as exc:
            stop, error = "error", str(exc)
        cost = self._cost(usage)
        self.session.usage.add(usage)
        self.session.cost_usd += cost
        return RunResult(self.session.id, stop, "", usage, cost, error)

    async def compact(self, usage: Usage) -> None:
        """Summarise the history now (visible in progress), counting the call's tokens."""
        used = self.session.last_context_tokens
        self.port.progress(
            f"compacting the conversation ({used:,} of {self.model.context_window:,} tokens)"
        )
        tools = self.tools.specs()
        usage.add(await compact(self.session, self.model, self.system_prompt, tools))

    def _cost(self, usage: Usage) -> float:
        return cost_usd(self.model.name, usage, self.settings.prices)

    # -- model turns -----------------------------------------------------------------

    async def _stream_turn(self, usage: Usage) -> TurnComplete:
        """One model call, retried on transient failures; the history sees only success."""
        request = ModelRequest(
            system=self.system_prompt,
            tools=self.tools.specs(),
            messages=list(self.session.history),
            max_tokens=self.settings.max_tokens,
            thinking_budget=self.settings.thinking_budget,
            effort=self.settings.effort,
        )
        attempt = 0
        while True:
            try:
                return await self._stream_once(request, usage)
            except ModelError as exc:
                _raise_if_cancelled()  # a cancel that surfaced as a connection error
                attempt += 1
                if not exc.retryable or attempt > MAX_RETRIES:
                    raise
                delay = exc.retry_after
                if delay is None:
                    delay = min(8.0, 0.5 * 2 ** (attempt - 1)) * (0.5 + random.random() / 2)
                self.port.progress(
                    f"model error ({exc}); retrying in {delay:.0f} s, {attempt}/{MAX_RETRIES}"
                )
                await asyncio.sleep(delay)

    async def _stream_once(self, request: ModelRequest, usage: Usage) -> TurnComplete:
        sid = self.session.id
        separator = self._separator
        self._turn_reported, self._turn_chars = Usage(), 0
        async for event in self.model.stream(request):
            if isinstance(event, TextDelta | ThinkingDelta):
                self._turn_chars += len(event.text)
            elif isinstance(event, ToolInputDelta):
                self._turn_chars += len(event.partial_json)
            if isinstance(event, UsageSoFar):
                self._turn_reported = event.usage
            elif isinstance(event, TextDelta):
                if separator:
                    self.port.update(
                        sid,
                        {
                            "sessionUpdate": "agent_message_chunk",
                            "content": {"type": "text", "text": separator},
                        },
                    )
                    separator = ""
                self.port.update(
                    sid,
                    {
                        "sessionUpdate": "agent_message_chunk",
                        "content": {"type": "text", "text": event.text},
                    },
                )
            elif isinstance(event, ThinkingDelta):
                self.port.update(
                    sid,
                    {
                        "sessionUpdate": "agent_thought_chunk",
                        "content": {"type": "text", "text": event.text},
                    },
                )
            elif isinstance(event, TurnComplete):
                self._turn_reported, self._turn_chars = Usage(), 0
                usage.add(event.usage)
                self.session.last_context_tokens = event.usage.context_tokens
                self.port.update(
                    sid,
                    {
                        "sessionUpdate": "usage_update",
                        "used": event.usage.context_tokens,
                        "size": self.model.context_window,
                        "cost": {
                            "amount": round(self.spent(usage), 6),
                            "currency": "USD",
                        },
                        "_meta": {"agentLs": {"usage": token_counts(self.tree_usage())}},
                    },
                )
                return event
        raise ModelError("the model stream ended without a complete turn", retryable=True)

    # -- tools -----------------------------------------------------------------------

    async def _run_tools(self, uses: list[ToolUseBlock]) -> list[ToolResultBlock]:
        """Run the turn's tool calls: consecutive concurrency-safe ones in parallel."""
        results: list[ToolResultBlock] = []
        batch: list[ToolUseBlock] = []

        async def flush() -> None:
            if batch:
                done = await asyncio.gather(*(self._run_one(u) for u in batch))
                results.extend(done)
                batch.clear()

        for use in uses:
            tool = self.tools.get(use.name)
            if tool is not None and tool.concurrency_safe:
                batch.append(use)
                continue
            await flush()
            results.append(await self._run_one(use))
        await flush()
        return results

    async def _run_one(self, use: ToolUseBlock) -> ToolResultBlock:
        sid = self.session.id
        tool = self.tools.get(use.name)
        if tool is None:
            known = ", ".join(self.tools.names())
            return self._report_unstarted(
                use, f"Unknown tool {use.name!r}. Available tools: {known}."
            )
        try:
            args = tool.parse(use.input)
        except Exception as exc:
            from pydantic import ValidationError

            if isinstance(exc, ValidationError):
                return self._report_unstarted(use, describe_validation_error(tool.name, exc))
            return self._report_unstarted(use, f"Invalid input for {tool.name}: {exc}")
        ctx = ToolContext(
            workspace=self.workspace,
            port=self.port,
            read_state=self.session.read_state,
            permissions=self.session.permissions,
            settings=self.settings,
            session_id=sid,
            tool_call_id=use.id,
            edited_paths=self.session.edited_paths,
            journal=self.journal,
            named_paths=self.session.named_paths,
            readable_paths=self.session.readable_paths,
            subagents=self.subagents,
        )
        title = tool.title(args)
        self.port.update(
            sid,
            {
                "sessionUpdate": "tool_call",
                "toolCallId": use.id,
                "title": title,
                "kind": tool.kind,
                "status": "pending",
                "locations": _safe_locations(tool, args, ctx),
                "rawInput": use.input,
            },
        )
        self.port.progress(title)
        # -- hooks: PreToolUse may block the call, ask the user, or allow it (skip questions)
        allowed_by: str | None = None
        if self.hooks is not None:
            verdict = await self.hooks.before_tool(
                tool.name, use.input, use.id, shown_input=_shown_input(use.input)
            )
            if verdict.decision == "deny":
                return self._finish(use, tool, ToolResult(verdict.result, is_error=True))
            if verdict.decision == "allow" and verdict.by is not None:
                allowed_by = verdict.by.hook.shown
        # --
        if self.session.permissions.mode == "plan" and not tool.runs_in_plan(args, ctx):
            result = ToolResult(
                f"This {tool.name} call is not available in plan mode: only read-only tools and "
                "read-only shell commands may run. "
                "Describe the change you would make instead; the user will switch modes.",
                is_error=True,
            )
        else:
            self.port.update(
                sid,
                {
                    "sessionUpdate": "tool_call_update",
                    "toolCallId": use.id,
                    "status": "in_progress",
                },
            )
            with hook_allowance(allowed_by):
                result = await self._execute(tool, args, ctx)
            # -- hooks: PostToolUse may add to the result
            if self.hooks is not None:
                response = result.raw_output if result.raw_output is not None else result.content
                result.content = await self.hooks.after_tool(
                    tool.name, use.input, use.id, _jsonable(response), result.content
                )
            # --
        return self._finish(use, tool, result)

    def _finish(self, use: ToolUseBlock, tool: Tool[Any], result: ToolResult) -> ToolResultBlock:
        """Report the call's end to the editor and make its result block."""
        sid = self.session.id
        update: ToolCallUpdate = {
            "sessionUpdate": "tool_call_update",
            "toolCallId": use.id,
            "status": "failed" if result.is_error else "completed",
            "rawOutput": result.raw_output if result.raw_output is not None else result.content,
        }
        if result.display is not None:
            update["content"] = result.display
        self.port.update(sid, update)
        content = self._fit(use, result.content) if tool.persist_large_results else result.content
        images = [list(i) for i in result.images] if result.images else None
        return ToolResultBlock(use.id, content, result.is_error, images=images)

    def _fit(self, use: ToolUseBlock, content: str) -> str:
        """Keep a large result out of the context: store it, give the model head, tail, path."""
        if len(content) <= LARGE_RESULT_CHARS or self.session.store is None:
            return content
        folder = self.session.store.results_dir(self.session.id)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{use.id}.txt"
        path.write_text(content, encoding="utf-8")
        self.session.readable_paths.add(folder)
        lines = content.count("\n") + 1
        head = content[: LARGE_RESULT_CHARS * 2 // 3]
        tail = content[-(LARGE_RESULT_CHARS // 4) :]
        return (
            f"{head}\n\n[... the result is {len(content):,} characters ({lines:,} lines); "
            f"it is saved in full at {path}: read it with read_file and offset/limit ...]\n\n"
            f"{tail}"
        )

    async def _execute(self, tool: Tool[Any], args: Any, ctx: ToolContext) -> ToolResult:
        try:
            return await tool.run(args, ctx)
        except FileProblem as exc:
            return ToolResult(str(exc), is_error=True)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug in a tool must not end the run
            _raise_if_cancelled()
            log.exception("tool %s failed", tool.name)
            return ToolResult(f"{tool.name} failed: {type(exc).__name__}: {exc}", is_error=True)

    def _report_unstarted(self, use: ToolUseBlock, message: str) -> ToolResultBlock:
        self.port.update(
            self.session.id,
            {
                "sessionUpdate": "tool_call",
                "toolCallId": use.id,
                "title": use.name,
                "kind": "other",
                "status": "failed",
                "locations": [],
                "rawInput": _jsonable(use.input),
            },
        )
        return ToolResultBlock(use.id, message, is_error=True)


def token_counts(usage: Usage) -> TokenCounts:
    return {
        "inputTokens": usage.input_tokens,
        "outputTokens": usage.output_tokens,
        "cachedReadTokens": usage.cache_read_tokens,
        "cachedWriteTokens": usage.cache_write_tokens,
    }


def _raise_if_cancelled() -> None:
    """Cancellation is one state: once the run's task is being cancelled, nothing swallows it."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


def _shown_input(value: Any) -> str:
    text = json.dumps(_jsonable(value), ensure_ascii=False, indent=1)
    return text if len(text) <= 2000 else text[:2000] + "\n[...]"


def _safe_locations(tool: Tool[Any], args: Any, ctx: ToolContext) -> list[Location]:
    try:
        return tool.locations(args, ctx)
    except Exception:
        return []


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return repr(value)
