"""The agent's own verdict on a shell command, without running it (``agent-ls check-command``).

The same layers as a session in ``default`` mode: the classifier, then
:func:`~agent_ls.safety.shell_policy.authorize_command` with the user's and the project's
rules (secret and outside-the-workspace paths, write targets, other repositories). Every
question it would ask is recorded and answered "Allow once", so all of them are collected.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_ls.ports.editor import (
    Buffer,
    ConfirmRequest,
    Decision,
    EditorPort,
    EditOutcome,
    EditProposal,
    Unsupported,
)
from agent_ls.ports.updates import SessionUpdate
from agent_ls.safety.permissions import Permissions
from agent_ls.safety.shell import classify
from agent_ls.safety.shell_policy import authorize_command
from agent_ls.settings import PermissionRules


@dataclass(slots=True)
class _Folder:
    root: Path

    def contains(self, path: Path) -> bool:
        return path.resolve().is_relative_to(self.root)


class _NoEditor:
    """An editor that is not there: nothing here proposes edits or reads buffers."""

    def open_buffer(self, path: Path) -> Buffer | None:
        return None

    async def confirm(self, request: ConfirmRequest) -> Decision:
        return Decision.ALLOW

    async def propose_edit(self, proposal: EditProposal) -> EditOutcome:
        raise Unsupported("no editor")

    async def save_documents(self, paths: list[Path]) -> list[Path]:
        raise Unsupported("no editor")

    async def diagnostics(self, path: Path | None) -> list[dict[str, Any]]:
        raise Unsupported("no editor")

    def update(self, session_id: str, update: SessionUpdate) -> None:
        return None

    def progress(self, message: str, percentage: int | None = None) -> None:
        return None

    def log(self, message: str) -> None:
        return None


@dataclass(slots=True)
class _Recording(Permissions):
    """Permissions that record each question and answer it "Allow once"."""

    questions: list[list[str]] = field(default_factory=list)

    async def ask(
        self,
        port: EditorPort,
        message: str,
        grant: str | None,
        reasons: Any = (),
        *,
        rule_asks: bool = False,
    ) -> bool:
        self.questions.append(list(reasons) or [message])
        return True


@dataclass(slots=True)
class _Scope:
    workspace: _Folder
    permissions: Permissions
    port: EditorPort
    named_paths: set[Path] = field(default_factory=set)
    readable_paths: set[Path] = field(default_factory=set)


async def check_command_async(
    command: str, cwd: Path, rules: PermissionRules | None = None
) -> dict[str, Any]:
    """``{"decision": "allow"|"ask"|"deny", "reasons": [...]}`` for ``command`` in ``cwd``."""
    perms = _Recording(mode="default", rules=rules or PermissionRules())
    scope = _Scope(_Folder(cwd.resolve()), perms, _NoEditor())
    try:
        refusal = await authorize_command(command, scope)
    except Exception as exc:  # fail closed: a verdict the checker could not reach asks
        return {"decision": "ask", "reasons": [f"the command could not be checked ({exc!r})"]}
    if refusal is not None:
        verdict = classify(command)
        reasons = verdict.reasons if verdict.decision == "deny" else [refusal]
        return {"decision": "deny", "reasons": list(reasons)}
    if perms.questions:
        reasons = [r for question in perms.questions for r in question]
        return {"decision": "ask", "reasons": list(dict.fromkeys(reasons))}
    return {"decision": "allow", "reasons": classify(command).reasons}


def check_command(command: str, cwd: Path, rules: PermissionRules | None = None) -> dict[str, Any]:
    return asyncio.run(check_command_async(command, cwd, rules))
