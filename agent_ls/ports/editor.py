"""The one door between the agent core and the editor.

``server.py`` implements :class:`EditorPort` over LSP; tests and other front ends may implement
it directly. Nothing here knows LSP: paths are ``Path`` objects, updates are JSON dicts typed in
``ports/updates.py`` in the shapes of the contract (``docs/protocol.md``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from agent_ls.ports.updates import SessionUpdate


@dataclass(frozen=True, slots=True)
class Hunk:
    """Replace ``old_text[start:end]`` with ``new_text``."""

    start: int
    end: int
    new_text: str


class Decision(enum.Enum):
    ALLOW = "allow"
    ALLOW_SESSION = "allow_session"
    DENY = "deny"


@dataclass(slots=True)
class ConfirmRequest:
    """A question for the user. ``grant`` is what "Allow for this session" would remember."""

    message: str
    grant: str | None = None


@dataclass(slots=True)
class Buffer:
    """An open editor buffer: its unsaved text and LSP version."""

    path: Path
    text: str
    version: int | None


@dataclass(slots=True)
class EditProposal:
    """A change to one file, as hunks over the text the agent read.

    ``old_text`` is None when the file is created. ``version`` pins the buffer version the
    agent read (None for files that are not open).
    """

    path: Path
    old_text: str | None
    new_text: str
    hunks: list[Hunk]
    version: int | None
    label: str
    needs_confirmation: bool = True


# "unconfirmed": the editor says it applied the edit but has not shown the new text yet.
EditStatus = Literal["applied", "partial", "rejected", "failed", "unconfirmed"]


@dataclass(slots=True)
class EditOutcome:
    """What the editor really holds after an edit, not just what it answered."""

    status: EditStatus
    landed: list[int] = field(default_factory=list)
    final_text: str | None = None
    final_version: int | None = None
    reason: str = ""


class Unsupported(Exception):
    """The editor does not offer this (no handler, or no answer in time)."""


class EditorPort(Protocol):
    def open_buffer(self, path: Path) -> Buffer | None:
        """The open buffer for ``path``, or None when the editor has no buffer for it."""
        ...

    async def confirm(self, request: ConfirmRequest) -> Decision:
        """Ask the user. No answer, a dismissed dialog or any failure is ``DENY``."""
        ...

    async def propose_edit(self, proposal: EditProposal) -> EditOutcome:
        """Send the edit for review and report what actually landed."""
        ...

    async def save_documents(self, paths: list[Path]) -> list[Path]:
        """Ask the editor to save these buffers; returns those saved. Raises Unsupported."""
        ...

    async def diagnostics(self, path: Path | None) -> list[dict[str, Any]]:
        """``[{uri, diagnostics}]`` from the editor's language servers. Raises Unsupported."""
        ...

    def update(self, session_id: str, update: SessionUpdate) -> None:
        """Send one ``agent/update`` (``{sessionUpdate: KIND, ...}``)."""
        ...

    def progress(self, message: str, percentage: int | None = None) -> None:
        """Report the current step of the run in progress."""
        ...
