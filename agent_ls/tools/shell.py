"""run_shell: a command authorised by :mod:`agent_ls.safety.shell_policy`, run contained.

Execution: ``bash -c`` in its own session and process group, in the workspace root, stdin
from /dev/null, the agent's API keys removed from the environment, output streamed to the
editor and capped (head and tail kept). On timeout or cancel the whole group gets SIGTERM,
then SIGKILL after a short grace, and processes that escaped the group (``setsid``) but carry
the run's marker in their environment are killed too. When the command ends, background
processes it left in its group are stopped and the model is told.

With the sandbox active (:mod:`agent_ls.safety.sandbox`), the group leader is ``bwrap``: the
command runs in its own PID namespace, so killing the group (or the command ending) ends
everything inside, and a failure that looks like the sandbox's refusal is said so.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import logging
import os
import secrets
import signal
import time
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agent_ls import prompts
from agent_ls.ports import updates
from agent_ls.ports.editor import Unsupported
from agent_ls.ports.updates import ToolCallContent
from agent_ls.safety.sandbox import (
    SandboxRun,
    SandboxStatus,
    refusal_note,
    remove_placeholders,
    sandbox_status,
)
from agent_ls.safety.sandbox import prepare as prepare_sandbox
from agent_ls.tools.base import Tool, ToolContext, ToolResult

log = logging.getLogger(__name__)
MAX_TIMEOUT_MS = 600_000
OUTPUT_HEAD = 50_000  # characters kept from the start of the output
OUTPUT_TAIL = 150_000  # and from its end (errors come last); the loop stores large results
STREAM_INTERVAL = 0.1  # seconds between streamed updates
STREAM_WINDOW = 8_000  # characters of the latest output shown while the command runs
TERM_GRACE = 0.1  # seconds between SIGTERM and SIGKILL of the group
DRAIN_GRACE = 0.25  # seconds to wait for the output pipe to close after the command exits
WAIT_BOUND = 2.0  # never wait longer than this for a killed process or its pipe
MAX_COMMAND_CHARS = 100_000
RUN_MARKER = "AGENT_LS_SHELL_RUN"  # in the child's environment, to find escaped processes

SCRUBBED_ENV = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_AUTH_TOKEN", "AGENT_LS_MODEL")
_PROVIDER_PREFIXES = ("ANTHROPIC_", "OPENAI_", "AGENT_LS_")
_SECRET_SUFFIXES = ("_KEY", "_TOKEN", "_SECRET")  # ANTHROPIC_API_KEY, OPENAI_ADMIN_KEY...


class RunShellInput(BaseModel):
    model_config = ConfigDict(defer_build=True)  # built at its first call (schemas.py)

    command: str = Field(description="The bash command line to run.")
    timeout: int | None = Field(
        default=None, ge=1, le=MAX_TIMEOUT_MS, description="Timeout in milliseconds."
    )


# --------------------------------------------------------------------------- environment


def is_scrubbed(name: str) -> bool:
    """The agent's own credentials: never handed to the commands it runs."""
    upper = name.upper()
    if upper in SCRUBBED_ENV:
        return True
    return upper.startswith(_PROVIDER_PREFIXES) and upper.endswith(_SECRET_SUFFIXES)


def child_environment(marker: str = "") -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not is_scrubbed(k)}
    env.setdefault("TERM", "dumb")
    env["PAGER"] = "cat"
    env["GIT_PAGER"] = "cat"
    env["GIT_TERMINAL_PROMPT"] = "0"  # a credential prompt would wait for a stdin that is closed
    if marker:
        env[RUN_MARKER] = marker
    return env


# --------------------------------------------------------------------------- processes


def live_group_members(pgid: int) -> list[int]:
    """PIDs of the processes of group ``pgid`` that are still running (zombies excluded).

    A signal-0 probe answers first; on Linux /proc then tells live members from zombies
    (an orphan's zombie lingers where PID 1 does not reap, as in many containers).
    """
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return []
    except PermissionError:
        pass
    if not os.path.exists("/proc/self/stat"):
        return [pgid]
    wanted = str(pgid)
    members = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read().decode("ascii", "replace")
        except OSError:
            continue
        fields = stat.rpartition(")")[2].split()
        if len(fields) > 2 and fields[0] != "Z" and fields[2] == wanted:
            members.append(int(name))
    return members


def _marked_processes(marker: str) -> list[int]:
    """Processes of this user whose environment carries the run's marker (escaped ones too)."""
    if not marker or not os.path.exists("/proc/self/environ"):
        return []
    needle = f"{RUN_MARKER}={marker}".encode()
    me, uid = os.getpid(), os.getuid()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            if os.stat(f"/proc/{name}").st_uid != uid:
                continue
            with open(f"/proc/{name}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    found.append(int(name))
        except OSError:
            continue
    return found


LIVE_GROUPS: set[int] = set()  # process groups of commands running now (killed on exit)


def kill_live_groups() -> None:
    """Kill every running command's group at once (the server is exiting: no time to wait)."""
    for pgid in list(LIVE_GROUPS):
        kill_group(pgid)
    LIVE_GROUPS.clear()
    remove_placeholders()  # the background clean-ups will not run after os._exit


def kill_group(pgid: int, sig: int = signal.SIGKILL) -> None:
    """Signal the command's whole process group (it leads its own session)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def terminate(pgid: int, marker: str = "", grace: float = TERM_GRACE) -> None:
    """SIGTERM the group, SIGKILL it after ``grace`` seconds, then the escaped marked ones.

    A second cancellation during the grace period still ends with SIGKILL.
    """
    kill_group(pgid, signal.SIGTERM)
    try:
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and live_group_members(pgid):  # noqa: ASYNC110
            await asyncio.sleep(0.01)  # polling /proc: a process group has no exit event
    finally:
        kill_group(pgid, signal.SIGKILL)
        for pid in _marked_processes(marker):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


# --------------------------------------------------------------------------- output


class OutputBuffer:
    """The command's output as text: the head and the tail are kept, the middle counted."""

    def __init__(self, head: int = OUTPUT_HEAD, tail: int = OUTPUT_TAIL) -> None:
        self._head_cap, self._tail_cap = head, tail
        self._head = ""
        self._tail: list[str] = []
        self._tail_len = 0
        self.total = 0
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def feed(self, data: bytes, final: bool = False) -> str:
        text = self._decoder.decode(data, final)
        self.add(text)
        return text

    def add(self, text: str) -> None:
        if not text:
            return
        self.total += len(text)
        room = self._head_cap - len(self._head)
        if room > 0:
            self._head += text[:room]
            text = text[room:]
        if text:
            self._tail.append(text)
            self._tail_len += len(text)
            if self._tail_len > 2 * self._tail_cap:
                joined = "".join(self._tail)[-self._tail_cap :]
                self._tail, self._tail_len = [joined], len(joined)

    def _tail_text(self, limit: int) -> str:
        joined = "".join(self._tail)
        self._tail, self._tail_len = [joined], len(joined)
        return joined[-limit:] if limit else ""

    def text(self) -> str:
        """All of it when it fits, else head, a marker with what was left out, and tail."""
        tail = self._tail_text(self._tail_cap)
        omitted = self.total - len(self._head) - len(tail)
        if omitted <= 0:
            return self._head + tail
        return f"{self._head}\n\n[... {omitted:,} characters of output omitted ...]\n\n{tail}"

    def recent(self, limit: int = STREAM_WINDOW) -> str:
        """The latest ``limit`` characters, for the live view in the editor."""
        if self.total <= limit:
            return self._head + self._tail_text(self._tail_cap)
        tail = self._tail_text(limit)
        if len(tail) < limit:  # still inside the head
            tail = (self._head + tail)[-limit:]
        return f"[... {self.total - len(tail):,} earlier characters ...]\n{tail}"


# --------------------------------------------------------------------------- the tool


@dataclass
class RunOutcome:
    output: str
    exit_code: int | None
    elapsed_ms: float
    timed_out: bool = False
    stopped_background: int = 0  # processes left in the group when the command ended
    total_chars: int = 0


class RunShell(Tool[RunShellInput]):
    name = "run_shell"
    input_model = RunShellInput
    kind = "execute"

    def reads_only(self, args: RunShellInput) -> bool:
        """Plan mode may run what the classifier allows without asking (ls, git log, ...)."""
        from agent_ls.safety.shell import classify

        return classify(args.command).decision == "allow"

    def title(self, args: RunShellInput) -> str:
        first = args.command.strip().splitlines()[0] if args.command.strip() else ""
        return f"Run {first[:80]}"

    async def run(self, args: RunShellInput, ctx: ToolContext) -> ToolResult:
        if not args.command.strip():
            return ToolResult("The command is empty.", is_error=True)
        if "\0" in args.command:
            return ToolResult("The command contains a NUL byte; it was not run.", is_error=True)
        if len(args.command) > MAX_COMMAND_CHARS:
            return ToolResult(
                f"The command is {len(args.command):,} characters long; the limit is "
                f"{MAX_COMMAND_CHARS:,}. Put long scripts in a file and run that.",
                is_error=True,
            )
        sandbox = await sandbox_status(ctx.settings.sandbox, ctx.workspace.roots)
        if sandbox.mode == "on" and not sandbox.active:
            why = prompts.load("sandbox/unavailable.md").format(reason=sandbox.reason)
            return ToolResult(why, is_error=True)
        # Here, not at start-up: ~3 ms of the first request (and the bash parser's loading).
        from agent_ls.safety.shell_policy import authorize

        decision = await authorize(args.command, ctx, sandboxed=sandbox.active)
        if decision.refusal:
            return ToolResult(decision.refusal, is_error=True)
        network = decision.network or ctx.settings.sandbox_network
        notes = await self._save_edited(ctx)
        timeout_ms = min(args.timeout or ctx.settings.shell_timeout_ms, MAX_TIMEOUT_MS)
        confined = sandbox if sandbox.active else None
        outcome = await execute(args.command, ctx, timeout_ms, confined, network)
        body = _describe(outcome, timeout_ms)
        failed = outcome.timed_out or outcome.exit_code != 0
        if confined is not None and failed and not outcome.timed_out:
            note = refusal_note(outcome.output, network)
            body = f"{body}\n{note}" if note else body
        if notes:
            body = notes + "\n" + body
        raw: dict[str, Any] = {
            "exitCode": outcome.exit_code,
            "timedOut": outcome.timed_out,
            "ms": round(outcome.elapsed_ms),
            "sandboxed": confined is not None,
        }
        display: list[ToolCallContent] = [updates.text_item(body)]
        return ToolResult(body, is_error=failed, raw_output=raw, display=display)

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


def _describe(outcome: RunOutcome, timeout_ms: int) -> str:
    code = outcome.exit_code
    if outcome.timed_out:
        status = (
            f"Timed out after {timeout_ms / 1000:g} s: the command and every process it "
            "started were killed. Output so far:"
        )
    elif code is not None and code < 0:
        try:
            sig = signal.Signals(-code).name
        except ValueError:
            sig = f"signal {-code}"
        status = f"Killed by {sig}"
    else:
        status = f"Exit code {code}"
    text = outcome.output.rstrip("\n")
    body = f"{status}\n{text}" if text else f"{status} (no output)"
    if outcome.stopped_background:
        body += (
            f"\n[{outcome.stopped_background} background process(es) still running when the "
            "command ended were stopped: commands cannot outlive the call. Run servers in the "
            "foreground with a timeout instead.]"
        )
    return body


async def execute(
    command: str,
    ctx: ToolContext,
    timeout_ms: int,
    sandbox: SandboxStatus | None = None,
    network: bool = False,
) -> RunOutcome:
    """Run ``command`` contained: own process group, closed stdin, timeout, capped output;
    inside the sandbox when one is given (with network only when ``network``)."""
    started = time.monotonic()
    marker = secrets.token_hex(8)
    argv, env = ["bash", "-c", command], child_environment(marker)
    confined: SandboxRun | None = None
    if sandbox is not None and sandbox.program:
        confined = await asyncio.to_thread(
            prepare_sandbox, sandbox.program, ctx.workspace.roots, network=network, env=env
        )
        argv, env = confined.wrap(argv), confined.environment(env)
    proc: asyncio.subprocess.Process | None = None
    try:
        read_fd, write_fd = os.pipe()
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                cwd=str(ctx.workspace.root),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=write_fd,
                stderr=write_fd,
                env=env,
                start_new_session=True,
            )
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)  # the child holds its own copy; EOF comes when every holder exits
        LIVE_GROUPS.add(proc.pid)
        try:
            return await _supervise(proc, read_fd, marker, ctx, timeout_ms, started)
        finally:
            kill_group(proc.pid)  # whatever happened, nothing of the group survives the call
            LIVE_GROUPS.discard(proc.pid)
    finally:
        if confined is not None:
            # bwrap that exited by itself reaped its PID namespace: nothing inside is left.
            # Killed, its namespace dies a moment later; the placeholders go only after.
            killed = proc is None or proc.returncode is None or proc.returncode < 0
            # In the background (removing directories costs milliseconds on some disks): the
            # result need not wait for it, and a later command shares what is still there.
            cleanup = asyncio.get_running_loop().run_in_executor(
                None, _close_sandbox, confined, marker, killed
            )
            _CLEANUPS.add(cleanup)
            cleanup.add_done_callback(_CLEANUPS.discard)


_CLEANUPS: set[asyncio.Future[None]] = set()  # sandbox clean-ups still running


def _close_sandbox(confined: SandboxRun, marker: str, killed: bool) -> None:
    try:
        deadline = time.monotonic() + WAIT_BOUND
        while killed and _marked_processes(marker) and time.monotonic() < deadline:
            time.sleep(0.01)
        confined.close()
    except Exception:  # a clean-up error must not surface as an unretrieved future
        log.exception("sandbox clean-up failed")


async def _supervise(
    proc: asyncio.subprocess.Process,
    read_fd: int,
    marker: str,
    ctx: ToolContext,
    timeout_ms: int,
    started: float,
) -> RunOutcome:
    pgid = proc.pid
    loop = asyncio.get_running_loop()
    output = OutputBuffer()
    reader = asyncio.StreamReader(limit=2**20)
    try:
        pipe = os.fdopen(read_fd, "rb", buffering=0)
    except BaseException:
        os.close(read_fd)
        raise
    try:
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), pipe
        )
    except BaseException:
        pipe.close()
        raise
    last_stream = 0.0
    streamed_total = -1
    later: asyncio.TimerHandle | None = None

    def stream(force: bool = False) -> None:
        """At most one update per STREAM_INTERVAL; output held back is sent by a timer."""
        nonlocal last_stream, streamed_total, later
        now = time.monotonic()
        if output.total == streamed_total:
            return
        wait = last_stream + STREAM_INTERVAL - now
        if wait > 0 and not force:
            if later is None:
                later = loop.call_later(wait, stream)
            return
        if later is not None:
            later.cancel()
            later = None
        last_stream, streamed_total = now, output.total
        ctx.stream(output.recent())

    async def pump() -> None:
        while True:
            data = await reader.read(65536)
            if not data:
                output.feed(b"", final=True)
                return
            output.feed(data)
            stream()

    reading = asyncio.ensure_future(pump())
    # No pipe belongs to the subprocess transport, so wait() returns when bash exits, even
    # while a background child still holds the output pipe open.
    waiting = asyncio.ensure_future(proc.wait())
    timed_out = False
    stopped = 0
    try:
        done, _ = await asyncio.wait({waiting}, timeout=timeout_ms / 1000)
        if waiting in done:
            # The command is over; give the pipe a moment to deliver the last output.
            await asyncio.wait({reading}, timeout=DRAIN_GRACE)
            left = set(live_group_members(pgid)) | set(_marked_processes(marker))
            if left:
                stopped = len(left)
                await terminate(pgid, marker)
        else:
            timed_out = True
            await terminate(pgid, marker)
        # Every writer is dead now; never wait on the pipe for long all the same.
        await asyncio.wait({reading}, timeout=WAIT_BOUND)
    except asyncio.CancelledError:
        await _cleanup_after_cancel(pgid, marker)
        raise
    finally:
        kill_group(pgid)
        if later is not None:
            later.cancel()
        if not reading.done():
            reading.cancel()
        transport.close()
        if not waiting.done():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(waiting), WAIT_BOUND)
            waiting.cancel()
    stream(force=True)
    elapsed = (time.monotonic() - started) * 1000
    return RunOutcome(output.text(), proc.returncode, elapsed, timed_out, stopped, output.total)


async def _cleanup_after_cancel(pgid: int, marker: str) -> None:
    """Kill everything the command started; survive being cancelled again meanwhile."""
    task = asyncio.ensure_future(terminate(pgid, marker))
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        kill_group(pgid)
    except Exception:  # never mask the cancellation with a cleanup error
        log.exception("cleanup after cancel failed")
        kill_group(pgid)
