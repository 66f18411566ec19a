"""run_shell: a command judged by the shell classifier, confirmed when needed, run contained.

Each command runs in its own process group with stdin closed, a timeout, and the agent's own
API keys removed from its environment; on timeout or cancel the whole group is killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from typing import Any

from pydantic import BaseModel, Field

from agent_ls.agent.port import Unsupported
from agent_ls.tools.registry import Tool, ToolContext, ToolResult, cap_text

MAX_TIMEOUT_MS = 600_000
OUTPUT_CAP = 200_000  # head and tail kept; the loop stores large results
STREAM_INTERVAL = 0.1
SCRUBBED_ENV = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_AUTH_TOKEN", "AGENT_LS_MODEL")


class RunShellInput(BaseModel):
    command: str = Field(description="The bash command line to run.")
    timeout: int | None = Field(
        default=None, ge=1, le=MAX_TIMEOUT_MS, description="Timeout in milliseconds."
    )


def child_environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED_ENV}
    env.setdefault("TERM", "dumb")
    env["PAGER"] = "cat"
    env["GIT_PAGER"] = "cat"
    return env


def kill_group(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL the command's whole process group (it leads its own session)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


async def authorize_command(command: str, ctx: ToolContext) -> str | None:
    """None when the command may run; else why not, for the model."""
    from agent_ls.safety.shell import classify

    verdict = classify(command)
    perms = ctx.permissions
    for part in verdict.commands:
        if perms.shell_rule(part.text) == "deny":
            return f"`{part.text}` is denied by the user's permission rules; it was not run."
    if verdict.decision == "deny":
        return "This command was refused as destructive: " + "; ".join(verdict.reasons)
    if perms.mode == "bypassPermissions":
        return None
    if verdict.opaque or not verdict.commands:
        reasons = "; ".join(verdict.reasons) or "it cannot be analysed"
        message = (
            f"Run this command?\n\n{command}\n\nIt cannot be checked statically ({reasons}). "
            "It can only be allowed once."
        )
        if await perms.ask(ctx.port, message, grant=None):
            return None
        return "The user denied running this command; it was not run."
    for part in verdict.commands:
        rule = perms.shell_rule(part.text)
        if rule == "allow" or (part.decision == "allow" and rule is None):
            continue
        why = "; ".join(part.reasons) or "a permission rule asks for it"
        grant = perms.shell_grant_for(part)
        message = (
            f"Run this command?\n\n{command}\n\n`{part.text}`: {why}.\n"
            f'"Allow for this session" allows `{part.text}` only.'
        )
        if not await perms.ask(ctx.port, message, grant=grant):
            return f"The user denied `{part.text}`; the command was not run."
    return None


class RunShell(Tool[RunShellInput]):
    name = "run_shell"
    input_model = RunShellInput
    kind = "execute"

    def title(self, args: RunShellInput) -> str:
        first = args.command.strip().splitlines()[0] if args.command.strip() else ""
        return f"Run {first[:80]}"

    async def run(self, args: RunShellInput, ctx: ToolContext) -> ToolResult:
        if not args.command.strip():
            return ToolResult("The command is empty.", is_error=True)
        if "\0" in args.command:
            return ToolResult("The command contains a NUL byte.", is_error=True)
        refusal = await authorize_command(args.command, ctx)
        if refusal:
            return ToolResult(refusal, is_error=True)
        notes = await self._save_edited(ctx)
        timeout_ms = args.timeout or ctx.settings.shell_timeout_ms
        output, code, elapsed, timed_out = await self._execute(args.command, ctx, timeout_ms)
        text = cap_text(output, OUTPUT_CAP).rstrip("\n")
        status = (
            f"Timed out after {timeout_ms / 1000:g} s (the process group was killed)"
            if timed_out
            else f"Exit code {code}"
        )
        body = f"{status}\n{text}" if text else f"{status} (no output)"
        if notes:
            body = notes + "\n" + body
        raw: dict[str, Any] = {"exitCode": code, "timedOut": timed_out, "ms": round(elapsed)}
        display = [{"type": "content", "content": {"type": "text", "text": body}}]
        return ToolResult(body, is_error=timed_out or code != 0, raw_output=raw, display=display)

    async def _save_edited(self, ctx: ToolContext) -> str:
        open_edited = sorted(p for p in ctx.edited_paths if ctx.workspace.buffer(p) is not None)
        if not open_edited:
            return ""
        try:
            saved = set(await ctx.port.save_documents(open_edited))
        except Unsupported:
            saved = set()
        unsaved = [ctx.workspace.display(p) for p in open_edited if p not in saved]
        if not unsaved:
            return ""
        return (
            "Note: these edited files are not saved, so the command sees their disk version: "
            + ", ".join(unsaved)
        )

    async def _execute(
        self, command: str, ctx: ToolContext, timeout_ms: int
    ) -> tuple[str, int | None, float, bool]:
        started = time.monotonic()
        proc = await asyncio.create_subprocess_exec(
            "bash",
            "-c",
            command,
            cwd=str(ctx.workspace.root),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=child_environment(),
            start_new_session=True,
        )
        assert proc.stdout is not None
        chunks: list[str] = []
        size = 0
        last_stream = 0.0
        pending: list[str] = []

        async def pump() -> None:
            nonlocal size, last_stream
            assert proc.stdout is not None
            while True:
                data = await proc.stdout.read(65536)
                if not data:
                    return
                text = data.decode("utf-8", "replace")
                size += len(text)
                if size <= OUTPUT_CAP * 4:  # keep enough for head and tail
                    chunks.append(text)
                else:
                    chunks.append(text)
                    joined = "".join(chunks)
                    chunks[:] = [joined[:OUTPUT_CAP], joined[-OUTPUT_CAP:]]
                pending.append(text)
                now = time.monotonic()
                if now - last_stream >= STREAM_INTERVAL:
                    ctx.stream("".join(pending)[-4000:])
                    pending.clear()
                    last_stream = now

        timed_out = False
        try:
            await asyncio.wait_for(pump(), timeout_ms / 1000)
            code = await proc.wait()
        except TimeoutError:
            timed_out = True
            kill_group(proc)
            code = await proc.wait()
        except asyncio.CancelledError:
            kill_group(proc)
            with contextlib.suppress(Exception):
                await asyncio.shield(proc.wait())
            raise
        finally:
            kill_group(proc)  # background children left by the command die with the group
        if pending:
            ctx.stream("".join(pending)[-4000:])
        return "".join(chunks), code, (time.monotonic() - started) * 1000, timed_out
