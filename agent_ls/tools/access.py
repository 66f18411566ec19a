"""Path permission checks shared by the file tools."""

from __future__ import annotations

from pathlib import Path

from agent_ls.safety.permissions import is_secret_like, sensitive_reason
from agent_ls.tools.registry import ToolContext


async def authorize_path(ctx: ToolContext, tool: str, path: Path, *, write: bool) -> str | None:
    """None when ``tool`` may touch ``path``; else the refusal the model should read.

    Outside the workspace asks (unless the user named the path), sensitive paths ask even when
    edits are otherwise accepted, and deny rules always win.
    """
    perms = ctx.permissions
    shown = ctx.workspace.display(path)
    rule = perms.path_rule(tool, shown)
    if rule == "deny":
        return f"{tool} on {shown} is denied by the user's permission rules."
    if perms.mode == "bypassPermissions":
        return None
    named = path in ctx.named_paths or (
        not write and any(path.is_relative_to(folder) for folder in ctx.readable_paths)
    )
    reasons: list[str] = []
    if not ctx.workspace.contains(path) and not named:
        reasons.append("it is outside the workspace")
    if write:
        sensitive = sensitive_reason(path)
        if sensitive:
            reasons.append(sensitive)
    elif is_secret_like(path) and not named:
        reasons.append("it looks like a secret (environment file or key)")
    if rule == "allow":
        reasons = []
    if rule == "ask":
        reasons.append("a permission rule asks for it")
    if not reasons:
        return None
    verb = "write to" if write else "read"
    message = f"Allow the agent to {verb} {path}? ({'; '.join(reasons)})"
    if await perms.ask(ctx.port, message, grant=f"{tool}({shown})"):
        return None
    action = "writing" if write else "reading"
    return f"The user did not allow {action} {shown}. Do not try again without asking."
