"""A conversation with the agent: history, permissions, read-state and running totals."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from agent_ls.agent.store import SessionStore
from agent_ls.ports.messages import Message, TextBlock, ToolResultBlock, Usage
from agent_ls.safety.permissions import Permissions
from agent_ls.workspace import EditJournal, ReadState


def new_session_id() -> str:
    return "s-" + uuid.uuid4().hex[:12]


@dataclass
class Session:
    """One chat. Only one run at a time uses it (the server enforces that)."""

    id: str = field(default_factory=new_session_id)
    history: list[Message] = field(default_factory=list)
    permissions: Permissions = field(default_factory=Permissions)
    read_state: ReadState = field(default_factory=ReadState)
    edited_paths: set[Path] = field(default_factory=set)
    named_paths: set[Path] = field(default_factory=set)  # paths the user named in a prompt
    readable_paths: set[Path] = field(default_factory=set)  # folders the agent may always read
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    last_context_tokens: int = 0
    created: float = field(default_factory=time.time)
    title: str = ""  # the user's own first words, for pickers and `agent-ls sessions`
    workspace: str = ""  # the folder the session works in
    store: SessionStore | None = None
    compactions: int = 0
    journal: EditJournal = field(default_factory=EditJournal)  # what the last run applied
    hooks_started: bool = False  # SessionStart hooks ran in this process

    def append(self, message: Message) -> None:
        """Add a complete message to the history and to the transcript on disk."""
        self.history.append(message)
        if self.store is not None:
            # The title is known with the first message (a transcript may already exist: an
            # ACP session is saved with its folder when it is created).
            if len(self.history) == 1:
                self.store.append(
                    self.id,
                    {
                        "type": "meta",
                        "sessionId": self.id,
                        "created": self.created,
                        "title": self.title,
                        "workspace": self.workspace,
                    },
                )
            self.store.append(self.id, {"type": "message", "message": message.to_json()})

    def replace_history(self, messages: list[Message], summary: str) -> None:
        """Start over from ``messages`` (after compaction); the transcript records why."""
        self.history = list(messages)
        self.compactions += 1
        if self.store is not None:
            self.store.append(
                self.id,
                {
                    "type": "compaction",
                    "summary": summary,
                    "messages": [m.to_json() for m in messages],
                },
            )

    def name_after(self, words: str) -> None:
        """Title the session with the user's own words (not the context sent with them)."""
        if not self.title:
            self.title = words.strip().splitlines()[0][:80] if words.strip() else "(empty)"

    def add_user_text(self, text: str) -> None:
        """Append the user's words (providers merge consecutive user messages)."""
        self.name_after(text)
        self.append(Message("user", [TextBlock(text)]))

    @classmethod
    def load(cls, store: SessionStore, session_id: str) -> Session:
        """A saved session, resumed at its last complete turn."""
        meta, messages = store.load_messages(session_id)
        session = cls(id=session_id, history=messages, store=store)
        session.title = str(meta.get("title", ""))
        session.workspace = str(meta.get("workspace", ""))
        session.created = float(meta.get("created", session.created))
        session.close_dangling_tool_uses("Interrupted: the agent stopped before this finished.")
        session.journal = EditJournal.from_json(store.load_journal(session_id))
        return session

    def save_journal(self) -> None:
        """Keep what the last run applied beside the transcript (``agent-ls undo`` later)."""
        if self.store is not None:
            self.store.save_journal(self.id, self.journal.to_json())

    def close_dangling_tool_uses(self, reason: str) -> None:
        """Give every tool_use without a result one, so the history stays valid."""
        if not self.history or self.history[-1].role != "assistant":
            return
        uses = self.history[-1].tool_uses()
        if uses:
            self.append(
                Message(
                    "user",
                    [ToolResultBlock(u.id, reason, is_error=True) for u in uses],
                )
            )
