"""run_shell: a command judged by the shell classifier, confirmed when needed, run contained.

Authorisation (:func:`authorize_command`) works on the parsed simple commands, never on the
raw line. For each one, in order of precedence:

1. a deny rule (also tried behind wrappers such as ``sudo``) or a classifier deny refuses the
   whole line;
2. ``bypassPermissions`` asks nothing else (an opaque line is refused when deny rules exist,
   since it cannot be checked against them);
3. an opaque line (``eval``, ``bash -c``, substitutions in command position...) asks once,
   showing everything, and cannot be granted for the session;
4. an ask rule asks every time;
5. an allow rule or a session grant clears the command's *own* ask (``npm test`` runs project
   code) but never the asks that come from around it: redirections to files, sensitive
   variable assignments (``PATH=.. x``) and write targets outside the workspace or on
   sensitive paths. Those are asked each time;
6. otherwise the classifier's verdict decides.

"Allow for this session" grants exactly the command words shown in the dialog.

Execution: ``bash -c`` in its own session and process group, in the workspace root, stdin
from /dev/null, the agent's API keys removed from the environment, output streamed to the
editor and capped (head and tail kept). On timeout or cancel the whole group gets SIGTERM,
then SIGKILL after a short grace, and processes that escaped the group (``setsid``) but carry
the run's marker in their environment are killed too. When the command ends, background
processes it left in its group are stopped and the model is told.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import logging
import os
import re
import secrets
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from agent_ls.agent.port import Unsupported
from agent_ls.safety.permissions import command_words, is_secret_like, sensitive_reason
from agent_ls.tools.registry import Tool, ToolContext, ToolResult

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agent_ls.safety.shell import SimpleCommand

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


# --------------------------------------------------------------------------- authorisation


_REDIRECT_REASON = re.compile(
    r"^(?:redirects|appends) output to (?P<target>.+?)(?P<dyn>, a file named by an expansion)?$"
)
_EFFECT_REASON = re.compile(
    r"^(?:(?:redirects|appends) output to |the redirection opens a network connection"
    r"|sets [A-Za-z_][A-Za-z0-9_]*, which changes what programs run or how)"
    r"|gets text with a substitution that may run later"
)
_HARMLESS_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty", "-"})
_DYNAMIC = re.compile(r"[$`]|^['\"]|<\(|>\(")
# Commands whose path arguments are not read for their content: no secret-read question.
_NOT_READING = frozenset(
    """echo printf ls cd pushd popd pwd test [ [[ stat du df file type which command realpath
    readlink dirname basename wc touch mkdir rm rmdir ln chmod chown chgrp""".split()  # noqa: SIM905
)


def is_effect_reason(reason: str) -> bool:
    """An ask that comes from around the command (redirection, assignment), not from it."""
    return bool(_EFFECT_REASON.search(reason))


def _operands(args: Sequence[str], takes_value: frozenset[str] = frozenset()) -> list[str]:
    out: list[str] = []
    i, ended = 0, False
    while i < len(args):
        a = args[i]
        if ended or a == "-" or not a.startswith("-"):
            out.append(a)
        elif a == "--":
            ended = True
        elif a in takes_value:
            i += 1
        i += 1
    return out


def _option_values(args: Sequence[str], short: str, *long: str) -> list[str]:
    """Values of ``-X VALUE``, ``-XVALUE``, ``--long VALUE`` and ``--long=VALUE``."""
    values: list[str] = []
    for i, a in enumerate(args):
        if a == "--":
            break
        nxt = args[i + 1] if i + 1 < len(args) else None
        if short and a == short and nxt is not None:
            values.append(nxt)
        elif short and a.startswith(short) and not a.startswith("--") and len(a) > len(short):
            values.append(a[len(short) :])
        for name in long:
            if a == name and nxt is not None:
                values.append(nxt)
            elif a.startswith(name + "="):
                values.append(a[len(name) + 1 :])
    return values


_OPT_VALUE = {
    "touch": frozenset({"-d", "-t", "-r", "--date", "--reference"}),
    "mkdir": frozenset({"-m", "--mode"}),
    "truncate": frozenset({"-s", "-r", "--size", "--reference"}),
    "install": frozenset({"-m", "-o", "-g", "-t", "-S", "--mode", "--owner", "--group"}),
    "cp": frozenset({"-t", "-S", "--suffix", "--target-directory"}),
    "mv": frozenset({"-t", "-S", "--suffix", "--target-directory"}),
    "ln": frozenset({"-t", "-S", "--suffix", "--target-directory"}),
    "sed": frozenset({"-e", "-f", "-l", "--expression", "--file", "--line-length"}),
    "rsync": frozenset({"-e", "--rsh", "--exclude", "--include", "--filter", "-f"}),
}


def write_targets(argv: Sequence[str]) -> list[str]:
    """Paths a known writing command writes, removes or changes, from its arguments.

    Best effort: commands that run arbitrary code (interpreters, build tools) can write
    anywhere and are asked about anyway; this names what is plain from the words.
    """
    if not argv:
        return []
    name, args = argv[0].rpartition("/")[2], list(argv[1:])
    takes = _OPT_VALUE.get(name, frozenset())
    ops = _operands(args, takes)
    if name in ("rm", "rmdir", "unlink", "shred", "touch", "mkdir", "mkfifo", "truncate", "tee"):
        return ops
    if name in ("chmod", "chown", "chgrp", "chattr"):
        refs = _option_values(args, "", "--reference")
        return ops if refs else ops[1:]
    if name == "mv":
        return ops + _option_values(args, "-t", "--target-directory")
    if name in ("cp", "install", "ln", "rsync", "scp"):
        target_dirs = _option_values(args, "-t", "--target-directory")
        if target_dirs:
            return target_dirs
        if name == "install" and "-d" in args:
            return ops
        local = [o for o in ops if not re.match(r"^[^/]*:", o)]  # host:path is remote
        if name == "ln" and len(ops) == 1:
            return ["."]
        return local[-1:] if len(ops) >= 2 else []
    if name == "dd":
        return [a[3:] for a in args if a.startswith("of=")]
    if name == "sed":
        in_place = any(
            a.startswith("--in-place") or (re.match(r"^-[a-zA-Z]*i", a) and not a.startswith("--"))
            for a in args
        )
        if not in_place:
            return []
        scripted = bool(
            _option_values(args, "-e", "--expression") + _option_values(args, "-f", "--file")
        )
        return ops if scripted else ops[1:]
    if name == "sort":
        return _option_values(args, "-o", "--output")
    if name == "curl":
        found = _option_values(args, "-o", "--output") + _option_values(args, "", "--output-dir")
        if any(a in ("-O", "--remote-name", "--remote-name-all") for a in args):
            found.append(".")
        return found
    if name == "wget":
        found = _option_values(args, "-O", "--output-document")
        found += _option_values(args, "-P", "--directory-prefix")
        return found or ["."]
    if name == "tar":
        return _option_values(args, "-C", "--directory")
    if name == "unzip":
        return _option_values(args, "-d") or ["."]
    if name == "find":
        outs = [v for opt in ("-fprint", "-fprint0", "-fprintf", "-fls") for v in _after(args, opt)]
        if "-delete" in args:
            roots = []
            for a in args:
                if a.startswith(("-", "(", "!")):
                    break
                roots.append(a)
            outs += roots or ["."]
        return outs
    return []


def _after(args: Sequence[str], option: str) -> list[str]:
    return [args[i + 1] for i, a in enumerate(args[:-1]) if a == option]


@dataclass
class _Where:
    """The working directory as the line moves through ``cd``: None once it is unknown."""

    cwd: Path | None

    def follow(self, part: SimpleCommand) -> None:
        if part.name in ("cd", "pushd"):
            args = [a for a in part.argv[1:] if a not in ("-L", "-P", "-e", "-@", "--")]
            if not args:
                self.cwd = Path.home() if part.name == "cd" else None
            elif args[0] == "-" or _DYNAMIC.search(args[0]):
                self.cwd = None
            elif self.cwd is not None:
                self.cwd = self.resolve(args[0])
        elif part.name == "popd":
            self.cwd = None

    def resolve(self, raw: str) -> Path | None:
        if _DYNAMIC.search(raw):
            return None
        path = Path(os.path.expanduser(raw))
        if not path.is_absolute():
            if self.cwd is None:
                return None
            path = self.cwd / path
        # globs: judge the directory they expand in
        parts = path.parts
        for i, p in enumerate(parts):
            if re.search(r"(?<!\\)[*?\[]", p):
                path = Path(*parts[:i]) if i else Path("/")
                break
        try:
            return path.resolve()
        except (OSError, RuntimeError):
            return None


@dataclass
class _PartCheck:
    """What one simple command needs before it may run, by what can clear it."""

    part: SimpleCommand
    own: list[str] = field(default_factory=list)  # the command's own: allow rules, grants
    around: list[str] = field(default_factory=list)  # redirections, variables: asked each time
    targets: list[str] = field(default_factory=list)  # its own write targets: asked each time

    @property
    def sticky(self) -> list[str]:
        return self.around + self.targets


def _target_reason(raw: str, where: _Where, ctx: ToolContext) -> str | None:
    if raw in _HARMLESS_TARGETS or raw.startswith("/dev/fd/"):
        return None
    resolved = where.resolve(raw)
    if resolved is None:
        return f"writes {raw}, a path only known when it runs (it may be outside the workspace)"
    if not ctx.workspace.contains(resolved):
        shown = raw if str(resolved) == raw else f"{raw} ({resolved})"
        return f"writes {shown}, outside the workspace"
    sensitive = sensitive_reason(resolved)
    if sensitive:
        return f"writes {raw}: {sensitive}"
    return None


def _add(reasons: list[str], reason: str | None) -> None:
    if reason and reason not in reasons:
        reasons.append(reason)


def _check_part(part: SimpleCommand, where: _Where, ctx: ToolContext) -> _PartCheck:
    check = _PartCheck(part)
    if part.decision == "ask":
        for reason in part.reasons:
            _add(check.around if is_effect_reason(reason) else check.own, reason)
    for reason in part.reasons:
        m = _REDIRECT_REASON.match(reason)
        if m and m.group("dyn"):
            _add(check.around, f"{m.group('target')} may be outside the workspace")
        elif m:
            _add(check.around, _target_reason(m.group("target"), where, ctx))
    for target in write_targets(part.argv):
        _add(check.targets, _target_reason(target, where, ctx))
    if part.name and part.name.rpartition("/")[2] not in _NOT_READING:
        for raw in part.argv[1:]:
            _add(check.own, _secret_read(raw, where, ctx))
    for raw in _input_redirects(part.text):
        _add(check.around, _secret_read(raw, where, ctx))
    return check


def _secret_read(raw: str, where: _Where, ctx: ToolContext) -> str | None:
    if raw.startswith("-") or _DYNAMIC.search(raw):
        return None
    resolved = where.resolve(raw)
    if not (is_secret_like(Path(raw)) or (resolved is not None and is_secret_like(resolved))):
        return None
    if resolved is not None and resolved in ctx.named_paths:
        return None  # the user named it in the prompt
    return f"reads {raw}, which looks like a secret (environment file, key or credentials)"


def _input_redirects(text: str) -> list[str]:
    return [m.group(2) for m in re.finditer(r"(?:^|\s)\d*<\s*(['\"]?)([^\s'\"<>|;&()]+)\1", text)]


def _quote_block(command: str) -> str:
    shown = command if len(command) <= 4000 else command[:4000] + "\n[... the line continues ...]"
    return "\n".join("    " + line for line in shown.splitlines() or [""])


async def authorize_command(command: str, ctx: ToolContext) -> str | None:
    """None when the command may run; else why not, for the model."""
    from agent_ls.safety.shell import classify

    verdict = classify(command)
    perms = ctx.permissions
    for part in verdict.commands:
        match = perms.shell_match(part.argv)
        if match and match.verdict == "deny":
            return (
                f"`{command_words(part.argv)}` is denied by the user's permission rule "
                f"`{match.rule}`; the command was not run. Do not try to get around the rule."
            )
    if verdict.decision == "deny":
        return "This command was refused as destructive: " + "; ".join(verdict.reasons)
    if perms.mode == "bypassPermissions":
        if verdict.opaque and perms.has_shell_deny_rules():
            return (
                "This command cannot be analysed statically ("
                + "; ".join(verdict.reasons)
                + "), so it cannot be checked against the user's deny rules; it was not run. "
                "Run the commands directly instead of through eval, bash -c or substitutions."
            )
        return None
    if not verdict.commands and not verdict.opaque and verdict.decision == "allow":
        return None  # nothing runs: assignments or comments only

    where = _Where(ctx.workspace.root)
    checks: list[_PartCheck] = []
    for part in verdict.commands:
        checks.append(_check_part(part, where, ctx))
        where.follow(part)
    line = _quote_block(command)

    if verdict.opaque or not verdict.commands:
        reasons = list(verdict.reasons) if verdict.commands else ["it cannot be analysed"]
        for check in checks:
            reasons += [r for r in check.own + check.sticky if r not in reasons]
        message = (
            f"Run this shell command?\n\n{line}\n\n"
            f"It cannot be checked statically: {'; '.join(reasons)}.\n"
            "It can only be allowed once: what cannot be analysed is never granted for the "
            "session."
        )
        if await perms.ask(ctx.port, message, grant=None):
            return None
        return "The user denied running this command; it was not run."

    compound = len(verdict.commands) > 1
    answered: set[str] = set()  # reasons the user already allowed in this line
    for check in checks:
        part = check.part
        argv = part.argv
        words = command_words(argv) if argv else ""
        match = perms.shell_match(argv) if argv else None  # a grant may have just been given
        rule_ask = match is not None and match.verdict == "ask"
        own = [] if match is not None and match.verdict == "allow" else list(check.own)
        if rule_ask:
            assert match is not None
            own.insert(0, f"the permission rule `{match.rule}` asks for it")
        own = [r for r in own if f"{words}: {r}" not in answered]
        around = [r for r in check.around if r not in answered]
        targets = [r for r in check.targets if r not in answered]
        if not own and not around and not targets:
            continue
        grantable = bool(own) and not rule_ask and not targets
        grant = perms.shell_grant_for(argv) if grantable else None
        message = _dialog(line, part.text, words, own, around, targets, grant, compound, rule_ask)
        if not await perms.ask(ctx.port, message, grant=grant):
            return f"The user denied `{part.text}`; the command was not run."
        answered.update(around + targets)
        answered.update(f"{words}: {r}" for r in own)
    return None


def _dialog(
    line: str,
    text: str,
    words: str,
    own: list[str],
    around: list[str],
    targets: list[str],
    grant: str | None,
    compound: bool,
    rule_ask: bool,
) -> str:
    """The confirmation: the whole line, the part asked about and what a grant covers."""
    sticky = around + targets
    reasons = "; ".join(own + sticky)
    lines = ["Run this shell command?", "", line, ""]
    if compound:
        lines.append(f"The part `{text}` needs permission: {reasons}.")
    else:
        lines.append(f"Why this is asked: {reasons}.")
    if grant:
        scope = "not the rest of the line" if compound else "nothing else"
        lines.append(
            f'"Allow for this session" will allow the command `{words}` (exactly these words) '
            f"for the rest of this session; {scope}."
        )
        if sticky:
            lines.append("Still asked each time: " + "; ".join(sticky) + ".")
    elif rule_ask:
        lines.append("It can only be allowed once: a permission rule asks for it every time.")
    else:
        kinds = []
        if any(not r.startswith(("sets ", "reads ")) for r in around):
            kinds.append("redirections to files")
        if any(r.startswith("sets ") for r in around):
            kinds.append("sensitive variables")
        if any(r.startswith("reads ") for r in around):
            kinds.append("secret-looking files read through a redirection")
        if targets:
            kinds.append("writes outside the workspace, to sensitive paths or to run-time paths")
        lines.append(f"It can only be allowed once (always asked: {'; '.join(kinds)}).")
    return "\n".join(lines)


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
        refusal = await authorize_command(args.command, ctx)
        if refusal:
            return ToolResult(refusal, is_error=True)
        notes = await self._save_edited(ctx)
        timeout_ms = min(args.timeout or ctx.settings.shell_timeout_ms, MAX_TIMEOUT_MS)
        outcome = await execute(args.command, ctx, timeout_ms)
        body = _describe(outcome, timeout_ms)
        if notes:
            body = notes + "\n" + body
        raw: dict[str, Any] = {
            "exitCode": outcome.exit_code,
            "timedOut": outcome.timed_out,
            "ms": round(outcome.elapsed_ms),
        }
        display = [{"type": "content", "content": {"type": "text", "text": body}}]
        failed = outcome.timed_out or outcome.exit_code != 0
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


async def execute(command: str, ctx: ToolContext, timeout_ms: int) -> RunOutcome:
    """Run ``command`` contained: own process group, closed stdin, timeout, capped output."""
    started = time.monotonic()
    marker = secrets.token_hex(8)
    read_fd, write_fd = os.pipe()
    try:
        proc = await asyncio.create_subprocess_exec(
            "bash",
            "-c",
            command,
            cwd=str(ctx.workspace.root),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=write_fd,
            stderr=write_fd,
            env=child_environment(marker),
            start_new_session=True,
        )
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)  # the child holds its own copy; EOF comes when every holder exits
    try:
        return await _supervise(proc, read_fd, marker, ctx, timeout_ms, started)
    finally:
        kill_group(proc.pid)  # whatever happened, nothing of the group survives the call


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
