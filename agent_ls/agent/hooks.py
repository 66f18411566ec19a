"""Hooks: the user's own commands around prompts, tool calls and the end of a run.

Claude Code's shape, from the ``hooks`` setting, ``<user config dir>/settings.json`` and the
project's ``.agent-ls/settings.json`` (the last only once the user approved it, through
:mod:`agent_ls.safety.trust`)::

    {EVENT: [{"matcher": REGEX?, "hooks": [{"type": "command", "command": CMD, "timeout": S?}]}]}

A hook runs as ``sh -c CMD`` in the workspace root, in its own process group, with the event
as JSON on stdin. Exit 2 blocks (stderr is the reason); exit 0 may print a JSON decision; any
other exit, a timeout or a crash is a warning and the run goes on (fail open, as in Claude
Code). Matching hooks of one event run in parallel.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import shlex
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_ls import prompts
from agent_ls.ports.editor import ConfirmRequest, Decision, EditorPort
from agent_ls.safety.trust import TrustRequest, TrustStore, ensure_trusted
from agent_ls.settings import user_config_dir

log = logging.getLogger(__name__)

EVENTS = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop")
TOOL_EVENTS = ("PreToolUse", "PostToolUse")
DEFAULT_TIMEOUT = 60.0
MAX_TIMEOUT = 3600.0
OUTPUT_CAP = 20_000  # characters of a hook's stdout/stderr kept
PROJECT_SETTINGS = Path(".agent-ls") / "settings.json"
DECISIONS = ("allow", "deny", "ask")


@dataclass(frozen=True, slots=True)
class HookCommand:
    """One command hook of one event, with where it came from."""

    event: str
    command: str
    matcher: str = ""
    timeout: float = DEFAULT_TIMEOUT
    source: str = "settings"  # settings | user | project

    def matches(self, tool_name: str | None) -> bool:
        if self.event not in TOOL_EVENTS or not self.matcher or self.matcher == "*":
            return True
        try:
            return re.fullmatch(self.matcher, tool_name or "") is not None
        except re.error:
            return False

    @property
    def shown(self) -> str:
        command = self.command if len(self.command) <= 80 else self.command[:77] + "..."
        return f"{self.event} hook `{command}`"


@dataclass(slots=True)
class HookOutcome:
    """What one hook run said."""

    hook: HookCommand
    exit_code: int | None  # None: it timed out or could not start
    stdout: str = ""
    stderr: str = ""
    elapsed_ms: float = 0.0
    error: str = ""
    output: dict[str, Any] = field(default_factory=dict)  # the JSON on stdout, if any

    @property
    def blocked(self) -> bool:
        return self.exit_code == 2

    @property
    def specific(self) -> dict[str, Any]:
        value = self.output.get("hookSpecificOutput")
        return value if isinstance(value, dict) else {}

    @property
    def decision(self) -> str | None:
        value = self.specific.get("permissionDecision")
        return value if value in DECISIONS else None

    @property
    def reason(self) -> str:
        value = self.specific.get("permissionDecisionReason")
        return value.strip() if isinstance(value, str) else ""

    @property
    def context(self) -> str:
        """Text the hook adds to what the model reads."""
        value = self.specific.get("additionalContext")
        if isinstance(value, str) and value.strip():
            return value.strip()
        if (
            self.exit_code == 0
            and not self.output
            and self.hook.event in ("SessionStart", "UserPromptSubmit")
        ):
            return self.stdout.strip()
        return ""

    @property
    def block_reason(self) -> str:
        return self.stderr.strip() or f"blocked by {self.hook.shown} (it gave no reason)"


# -- configuration ---------------------------------------------------------------------------


def parse_hooks(raw: Any, source: str) -> tuple[list[HookCommand], list[str]]:
    """Hooks from one ``hooks`` object; unknown events and bad entries are reported, skipped."""
    if raw is None:
        return [], []
    if not isinstance(raw, dict):
        return [], [f"hooks ({source}) must be an object of events, got {type(raw).__name__}"]
    found: list[HookCommand] = []
    problems: list[str] = []
    for event, groups in raw.items():
        if event not in EVENTS:
            problems.append(
                f"hooks ({source}): unknown event {event!r}; known: {', '.join(EVENTS)}"
            )
            continue
        if not isinstance(groups, list):
            problems.append(f"hooks.{event} ({source}) must be a list")
            continue
        for group in groups:
            if not isinstance(group, dict):
                problems.append(f"hooks.{event} ({source}): an entry is not an object")
                continue
            matcher = group.get("matcher") or ""
            if not isinstance(matcher, str):
                problems.append(f"hooks.{event} ({source}): matcher must be a string")
                continue
            try:
                re.compile(matcher)
            except re.error as exc:
                problems.append(f"hooks.{event} ({source}): bad matcher {matcher!r}: {exc}")
                continue
            for hook in group.get("hooks") or []:
                command = hook.get("command") if isinstance(hook, dict) else None
                if not isinstance(hook, dict) or hook.get("type", "command") != "command":
                    problems.append(f"hooks.{event} ({source}): only type 'command' is supported")
                    continue
                if not isinstance(command, str) or not command.strip():
                    problems.append(f"hooks.{event} ({source}): a hook has no command")
                    continue
                timeout = hook.get("timeout", DEFAULT_TIMEOUT)
                if (
                    not isinstance(timeout, int | float)
                    or isinstance(timeout, bool)
                    or timeout <= 0
                ):
                    problems.append(f"hooks.{event} ({source}): bad timeout {timeout!r}; using 60")
                    timeout = DEFAULT_TIMEOUT
                found.append(
                    HookCommand(event, command, matcher, min(float(timeout), MAX_TIMEOUT), source)
                )
    return found, problems


def _settings_file_hooks(path: Path) -> tuple[Any, bytes | None, str | None]:
    """The ``hooks`` object of a settings file, its bytes, and a problem (None if fine)."""
    try:
        content = path.read_bytes()
    except FileNotFoundError:
        return None, None, None
    except OSError as exc:
        return None, None, f"cannot read {path}: {exc}"
    try:
        data = json.loads(content.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        return None, content, f"{path} is not valid JSON: {exc}"
    if not isinstance(data, dict):
        return None, content, f"{path} must hold a JSON object"
    return data.get("hooks"), content, None


def named_scripts(root: Path, hooks: list[HookCommand]) -> list[Path]:
    """Files inside ``root`` that the commands name (their content is part of the approval)."""
    found: list[Path] = []
    real_root = root.resolve()
    for hook in hooks:
        try:
            words = shlex.split(hook.command)
        except ValueError:
            words = hook.command.split()
        for word in words:
            word = word.replace("$CLAUDE_PROJECT_DIR", str(root))
            word = word.replace("$AGENT_LS_PROJECT_DIR", str(root))
            if word.startswith("-") or "=" in word.split("/")[0]:
                continue
            candidate = (root / word).resolve()
            inside = candidate.is_file() and candidate.is_relative_to(real_root)
            if inside and candidate not in found:
                found.append(candidate)
    return found


def project_trust_request(root: Path) -> tuple[TrustRequest | None, list[HookCommand], list[str]]:
    """The project's hooks and what approving them means (None when it has none)."""
    file = root / PROJECT_SETTINGS
    raw, content, problem = _settings_file_hooks(file)
    if content is None or raw is None:
        return None, [], [problem] if problem else []
    hooks, problems = parse_hooks(raw, "project")
    if problem:
        problems.append(problem)
    if not hooks:
        return None, [], problems
    # Approval covers the settings file and every script of the repository a command names:
    # a changed script asks again, like a changed command.
    blob = content
    for script in named_scripts(root, hooks):
        with contextlib.suppress(OSError):
            blob += b"\0" + str(script).encode() + b"\0" + script.read_bytes()
    items = tuple(f"{h.event}{f' [{h.matcher}]' if h.matcher else ''}: {h.command}" for h in hooks)
    return TrustRequest(root, file, blob, "hooks", items), hooks, problems


class HookConfig:
    """Loads the hooks for a run; remembers a project denial until the file changes."""

    def __init__(self, store: TrustStore | None = None) -> None:
        self._store = store
        self._denied: set[str] = set()  # digests the user denied in this process

    @property
    def store(self) -> TrustStore:
        return self._store or TrustStore.default()

    async def load(self, setting: Any, root: Path, port: EditorPort) -> list[HookCommand]:
        """Every hook in force for a run in ``root``: settings, user file, approved project."""
        hooks, problems = parse_hooks(setting, "settings")
        user_raw, _content, problem = await asyncio.to_thread(
            _settings_file_hooks, user_config_dir() / "settings.json"
        )
        user_hooks, user_problems = parse_hooks(user_raw, "user")
        hooks += user_hooks
        problems += user_problems + ([problem] if problem else [])
        request, project_hooks, project_problems = await asyncio.to_thread(
            project_trust_request, root
        )
        problems += project_problems
        if request is not None and request.digest not in self._denied:
            if await ensure_trusted(port, self.store, request):
                hooks += project_hooks
            else:
                self._denied.add(request.digest)
                port.log(
                    f"agent-ls: the project's hooks in {request.file} are not approved; not run"
                )
        for line in problems:
            port.log(f"agent-ls: {line}")
        return hooks


# -- running ---------------------------------------------------------------------------------


def hook_environment(root: Path) -> dict[str, str]:
    from agent_ls.tools.shell import child_environment

    env = child_environment()
    env["AGENT_LS_PROJECT_DIR"] = str(root)
    env["CLAUDE_PROJECT_DIR"] = str(root)  # so existing Claude Code scripts find the project
    return env


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


@dataclass(frozen=True, slots=True)
class HookSandbox:
    """Where hooks run: bubblewrap's ``program`` over the workspace ``roots`` (as commands
    do), or, with ``refused``, nowhere (the ``sandbox: "on"`` setting without a sandbox)."""

    program: str | None
    roots: tuple[Path, ...]
    network: bool = False
    refused: str | None = None


async def run_hook(
    hook: HookCommand, payload: dict[str, Any], root: Path, sandbox: HookSandbox | None = None
) -> HookOutcome:
    """Run one hook to its end, its timeout or the run's cancellation (the group dies);
    inside the sandbox when one is given, as shell commands run."""
    from agent_ls.safety.sandbox import prepare

    started = time.perf_counter()
    data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
    if sandbox is not None and sandbox.refused:
        return HookOutcome(hook, None, error=f"not run: {sandbox.refused}")
    argv, env = ["sh", "-c", hook.command], hook_environment(root)
    confined = None
    if sandbox is not None and sandbox.program:
        confined = await asyncio.to_thread(
            prepare, sandbox.program, list(sandbox.roots), network=sandbox.network, env=env
        )
        argv, env = confined.wrap(argv), confined.environment(env)
    try:
        return await _run_hook_process(hook, argv, env, root, data, started)
    finally:
        if confined is not None:
            await asyncio.to_thread(confined.close)


async def _run_hook_process(
    hook: HookCommand,
    argv: list[str],
    env: dict[str, str],
    root: Path,
    data: bytes,
    started: float,
) -> HookOutcome:
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=str(root),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
    except OSError as exc:
        return HookOutcome(hook, None, error=f"could not start: {exc}")
    try:
        out, err = await asyncio.wait_for(proc.communicate(data), hook.timeout)
    except TimeoutError:
        _kill(proc.pid)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(proc.wait(), 2)
        elapsed = (time.perf_counter() - started) * 1000
        return HookOutcome(
            hook, None, elapsed_ms=elapsed, error=f"timed out after {hook.timeout:g} s"
        )
    except BaseException:
        _kill(proc.pid)  # cancelled: the hook and whatever it started die with the run
        raise
    finally:
        _kill(proc.pid)  # children it left in its group do not outlive it
    outcome = HookOutcome(
        hook,
        proc.returncode,
        out.decode("utf-8", "replace")[:OUTPUT_CAP],
        err.decode("utf-8", "replace")[:OUTPUT_CAP],
        (time.perf_counter() - started) * 1000,
    )
    text = outcome.stdout.strip()
    if outcome.exit_code == 0 and text.startswith("{"):
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            outcome.output = parsed
    return outcome


@dataclass(slots=True)
class PreToolVerdict:
    """What the PreToolUse hooks decided about one call (deny > ask > allow).

    ``decision`` is ``allow`` (the questions of this call are skipped: ``by`` names the hook),
    ``deny`` (the call does not run: ``result`` is the model's tool result) or None.
    """

    decision: str | None = None
    by: HookOutcome | None = None
    reason: str = ""
    result: str = ""
    context: list[str] = field(default_factory=list)


def pre_tool_verdict(outcomes: list[HookOutcome]) -> PreToolVerdict:
    verdict = PreToolVerdict(context=[text for _o, text in contexts(outcomes)])
    blocking = first_blocking(outcomes)
    if blocking is not None:
        verdict.decision, verdict.by, verdict.reason = "deny", blocking, blocking.block_reason
        return verdict
    for wanted in DECISIONS_BY_PRECEDENCE:
        for outcome in outcomes:
            if outcome.decision == wanted:
                verdict.decision, verdict.by, verdict.reason = wanted, outcome, outcome.reason
                return verdict
    return verdict


DECISIONS_BY_PRECEDENCE = ("deny", "ask", "allow")


def first_blocking(outcomes: list[HookOutcome]) -> HookOutcome | None:
    return next((o for o in outcomes if o.blocked), None)


def contexts(outcomes: list[HookOutcome]) -> list[tuple[HookOutcome, str]]:
    return [(o, o.context) for o in outcomes if o.context]


def _context_blocks(outcomes: list[HookOutcome]) -> list[str]:
    return [
        prompts.load("hooks/context.md").format(hook=o.hook.shown, text=text)
        for o, text in contexts(outcomes)
    ]


@dataclass
class HookRunner:
    """The hooks of one run, and what they do to it; ``port`` is the run's editor port."""

    hooks: list[HookCommand]
    root: Path
    session_id: str
    port: EditorPort
    transcript_path: str = ""
    sandbox: HookSandbox | None = None  # hooks run sandboxed too, as shell commands do

    def wants(self, event: str, tool_name: str | None = None) -> bool:
        return any(h.event == event and h.matches(tool_name) for h in self.hooks)

    async def run(
        self, event: str, tool_name: str | None = None, **fields: Any
    ) -> list[HookOutcome]:
        """Run every hook of ``event`` that matches, in parallel; warn about failed ones."""
        chosen = [h for h in self.hooks if h.event == event and h.matches(tool_name)]
        if not chosen:
            return []
        payload: dict[str, Any] = {
            "session_id": self.session_id,
            "transcript_path": self.transcript_path,
            "cwd": str(self.root),
            "hook_event_name": event,
        }
        if tool_name is not None:
            payload["tool_name"] = tool_name
        payload.update(fields)
        outcomes = await asyncio.gather(
            *(run_hook(h, payload, self.root, self.sandbox) for h in chosen)
        )
        for outcome in outcomes:
            if outcome.exit_code not in (0, 2):
                why = outcome.error or f"exited with {outcome.exit_code}"
                detail = f": {outcome.stderr.strip()[:500]}" if outcome.stderr.strip() else ""
                self.port.log(f"agent-ls: {outcome.hook.shown} {why}{detail}; the run goes on")
        return list(outcomes)

    # -- what each event does to the run -----------------------------------------------------

    async def prompt_submitted(self, prompt: str, session_start: str | None) -> tuple[str, str]:
        """SessionStart (``session_start`` is its source) and UserPromptSubmit.

        Returns ``(refusal, prompt)``: a non-empty refusal means a hook blocked the prompt
        (no model call); else the prompt with the hooks' context before it.
        """
        added: list[str] = []
        if session_start is not None:
            added += _context_blocks(await self.run("SessionStart", source=session_start))
        outcomes = await self.run("UserPromptSubmit", prompt=prompt)
        blocking = first_blocking(outcomes)
        if blocking is not None:
            self.port.progress(f"{blocking.hook.shown} blocked the prompt")
            return blocking.block_reason, prompt
        added += _context_blocks(outcomes)
        for outcome, _text in contexts(outcomes):
            self.port.progress(f"{outcome.hook.shown} added context to the prompt")
        return "", "\n\n".join([*added, prompt]) if added else prompt

    async def before_tool(
        self, tool: str, tool_input: Any, tool_use_id: str, *, shown_input: str
    ) -> PreToolVerdict:
        """PreToolUse: block, ask the user, or allow (skip the call's questions)."""
        if not self.wants("PreToolUse", tool):
            return PreToolVerdict()
        outcomes = await self.run(
            "PreToolUse", tool, tool_input=tool_input, tool_use_id=tool_use_id
        )
        verdict = pre_tool_verdict(outcomes)
        by = verdict.by.hook.shown if verdict.by else ""
        if verdict.decision == "deny":
            self.port.progress(f"{by} blocked {tool}")
            reason = verdict.reason or "(it gave no reason)"
            verdict.result = prompts.load("hooks/blocked.md").format(
                hook=by, tool=tool, reason=reason
            )
        elif verdict.decision == "ask":
            why = f" ({verdict.reason})" if verdict.reason else ""
            message = f"The {by} asks you to confirm this {tool} call{why}:\n\n{shown_input}"
            try:
                answer = await self.port.confirm(ConfirmRequest(message, grant=None))
            except Exception:  # a broken dialog is a Deny
                answer = Decision.DENY
            if answer is Decision.DENY:
                self.port.progress(f"{tool} not allowed (asked by {by})")
                verdict.decision = "deny"
                verdict.result = prompts.load("hooks/ask_denied.md").format(
                    hook=by, tool=tool, reason=why
                )
            else:
                # The user answered the hook's question: like a hook's allow, it stands for
                # the call's own questions (deny rules, ask rules and the classifier still
                # have their say).
                verdict.decision = "allow"
        elif verdict.decision == "allow":
            self.port.progress(f"{by} allowed {tool}")
        return verdict

    async def after_tool(
        self, tool: str, tool_input: Any, tool_use_id: str, response: Any, content: str
    ) -> str:
        """PostToolUse: a blocking hook's stderr and any context are added to the result."""
        if not self.wants("PostToolUse", tool):
            return content
        outcomes = await self.run(
            "PostToolUse",
            tool,
            tool_input=tool_input,
            tool_use_id=tool_use_id,
            tool_response=response,
        )
        added: list[str] = []
        for outcome in outcomes:
            text = outcome.stderr.strip() if outcome.blocked else outcome.context
            if text:
                self.port.progress(f"{outcome.hook.shown} added to the {tool} result")
                added.append(
                    prompts.load("hooks/post.md").format(hook=outcome.hook.shown, text=text)
                )
        return "\n\n".join([content, *added]) if added else content

    async def stop(self, active: bool) -> str:
        """Stop: the message that makes the run go on, or "" to let it end.

        While ``active`` (the run already went on because of a Stop hook) it always ends.
        """
        outcomes = await self.run("Stop", stop_hook_active=active)
        blocking = first_blocking(outcomes)
        if blocking is None:
            return ""
        if active:
            self.port.progress(f"{blocking.hook.shown} blocked again; the run ends")
            return ""
        self.port.progress(f"{blocking.hook.shown} keeps the run going")
        return prompts.load("hooks/stop.md").format(
            hook=blocking.hook.shown, reason=blocking.block_reason
        )
