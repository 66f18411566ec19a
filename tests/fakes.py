"""An in-process EditorPort for testing the agent core without a server."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_ls.edits import apply_hunks
from agent_ls.ports.editor import (
    Buffer,
    ConfirmRequest,
    Decision,
    EditOutcome,
    EditProposal,
    Unsupported,
)


@dataclass
class FakePort:
    """Applies accepted edits to its buffers (or disk) and answers questions from a queue."""

    buffers: dict[Path, Buffer] = field(default_factory=dict)
    decisions: list[Decision] = field(default_factory=list)
    asked: list[ConfirmRequest] = field(default_factory=list)
    proposals: list[EditProposal] = field(default_factory=list)
    accept_edits: bool = True
    updates: list[dict[str, Any]] = field(default_factory=list)
    progress_messages: list[str] = field(default_factory=list)
    logged: list[str] = field(default_factory=list)
    diagnostics_items: list[dict[str, Any]] | None = None

    def open_buffer(self, path: Path) -> Buffer | None:
        return self.buffers.get(path)

    async def confirm(self, request: ConfirmRequest) -> Decision:
        self.asked.append(request)
        return self.decisions.pop(0) if self.decisions else Decision.DENY

    async def propose_edit(self, proposal: EditProposal) -> EditOutcome:
        self.proposals.append(proposal)
        if not self.accept_edits:
            return EditOutcome("rejected", final_text=proposal.old_text)
        new_text = apply_hunks(proposal.old_text or "", proposal.hunks)
        buffer = self.buffers.get(proposal.path)
        if buffer is not None:
            buffer.text = new_text
            buffer.version = (buffer.version or 0) + 1
            version = buffer.version
        else:
            proposal.path.parent.mkdir(parents=True, exist_ok=True)
            proposal.path.write_text(new_text, encoding="utf-8")
            version = None
        return EditOutcome("applied", list(range(len(proposal.hunks))), new_text, version)

    async def save_documents(self, paths: list[Path]) -> list[Path]:
        raise Unsupported("no saving here")

    async def diagnostics(self, path: Path | None) -> list[dict[str, Any]]:
        if self.diagnostics_items is None:
            raise Unsupported("no diagnostics here")
        return self.diagnostics_items

    def update(self, session_id: str, update: dict[str, Any]) -> None:
        self.updates.append(update)

    def progress(self, message: str, percentage: int | None = None) -> None:
        self.progress_messages.append(message)

    def log(self, message: str) -> None:
        self.logged.append(message)

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [u for u in self.updates if u.get("sessionUpdate") == kind]
