"""Path permission checks shared by the file tools."""

from __future__ import annotations

import re
from pathlib import Path

from agent_ls.safety.paths import is_secret_like, path_problem, sensitive_reason
from agent_ls.safety.rules import Rule
from agent_ls.settings import memory_file
from agent_ls.tools.base import ToolContext

OUTSIDE = "it is outside the workspace folders"
SECRET = "it looks like a secret (environment file, key or credentials)"


async def authorize_path(ctx: ToolContext, tool: str, path: Path, *, write: bool) -> str | None:
    """None when ``tool`` may touch ``path``; else the refusal the model should read.

    The path is judged where it really leads (symlinks and ``..`` resolved). Junk (NUL bytes,
    control characters, over-long) is refused. Deny rules always win; in
    ``bypassPermissions`` nothing else is asked. Otherwise these ask, whatever the mode
    (``acceptEdits`` included): a path outside the workspace folders (unless the user named it
    in the prompt or an allow rule opens it), writing a sensitive path (``.git/``, ``.env*``,
    keys, shell start-up files, the agent's own settings and instructions), and reading a file
    that looks like a secret (unless the user named it). An ask rule asks every time.

    The project's memory file (``MEMORY.md`` in the data dir) is read and written without a
    question (deny and ask rules still apply).

    An allow rule opens paths outside the workspace; it opens sensitive and secret-looking
    files only when it names them (``.env*``, ``.git/**``, ``config/.env``), not when it is
    broad (``**``, ``src/**``). A session grant names one path and opens it.
    """
    problem = path_problem(str(path))
    if problem:
        return f"Refused: the path {problem}. Give a plain file path."
    real = path.resolve()
    perms = ctx.permissions
    shown = ctx.workspace.display(real)
    match = perms.path_match(tool, shown)
    if match and match.verdict == "deny":
        return (
            f"{tool} on {shown} is denied by the user's permission rule `{match.rule}`; "
            "do not try to reach it another way."
        )
    if perms.mode == "bypassPermissions":
        return None
    if real == memory_file(ctx.workspace.root) and not (match and match.verdict == "ask"):
        return None  # the project's memory: the agent keeps its notes without a question
    named = (
        real in ctx.named_paths
        or path in ctx.named_paths
        or any(real.is_relative_to(n) for n in ctx.named_paths if n != real and n.is_dir())
    )  # the user named it, or a folder above it, in the prompt
    readable = not write and any(real.is_relative_to(f) for f in ctx.readable_paths)
    sticky: list[str] = []  # only an exact grant or rule for this very path clears these
    reasons: list[str] = []  # an allow rule clears these
    if not ctx.workspace.contains(real) and not named and not readable:
        reasons.append(OUTSIDE)
    if write:
        sensitive = sensitive_reason(real)
        if sensitive:
            sticky.append(sensitive)
    elif is_secret_like(real) and not named:
        sticky.append(SECRET)
    if match and match.verdict == "allow":
        reasons = []
        if match.exact or not _broad(match.rule):
            sticky = []
    asks = sticky + reasons
    grant: str | None = perms.path_grant_for(tool, shown)
    if match and match.verdict == "ask":
        asks.append(f"the permission rule `{match.rule}` asks for it")
        grant = None  # an ask rule asks every time
    if not asks:
        return None
    verb = "write to" if write else "read"
    where = f"{real}" if str(real) == shown else f"{shown} ({real})"
    lines = [f"Allow the agent to {verb} {where}?", "", f"Why this is asked: {'; '.join(asks)}."]
    if grant:
        lines.append(
            f'"Allow for this session" lets the agent {verb} this one path again in this '
            "session, not other files next to it."
        )
    else:
        lines.append("This can only be allowed once: a permission rule asks for it every time.")
    rule_asks = bool(match and match.verdict == "ask")
    if await perms.ask(ctx.port, "\n".join(lines), grant=grant, rule_asks=rule_asks):
        return None
    action = "writing" if write else "reading"
    return f"The user did not allow {action} {shown}. Do not try again without asking."


def _broad(rule_text: str) -> bool:
    """A rule that matches a file because of where it is, not because of its name."""
    rule = Rule.parse(rule_text)
    if rule is None or rule.pattern is None:
        return True
    pattern = rule.pattern.strip().rstrip("/")
    head, _, last = pattern.rpartition("/")
    if not re.fullmatch(r"[*?]*", last):
        return False
    targeted = head and (sensitive_reason(Path(head)) or is_secret_like(Path(head)))
    return not targeted
