"""The contract's command arguments as pydantic models, and its names.

``docs/protocol.md`` is the prose version; editor plugins and tests rely on both.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agent_ls.settings import Mode

COMMANDS = (
    "agent.ask",
    "agent.fix",
    "agent.cancel",
    "agent.newSession",
    "agent.sessions",
    "agent.resume",
    "agent.compact",
    "agent.status",
    "agent.setMode",
    "agent.clearGrants",
    "agent.remember",
    "agent.undo",
    "agent.mcp",
)
UPDATE_NOTIFICATION = "agent/update"
SAVE_DOCUMENTS_REQUEST = "agent/saveDocuments"
GET_DIAGNOSTICS_REQUEST = "agent/getDiagnostics"

MAX_PROMPT_CHARS = 1_000_000


class _Params(BaseModel):
    # Each built at its first use (~0.2 ms each): a start reads one or two of them.
    model_config = ConfigDict(extra="ignore", populate_by_name=True, defer_build=True)


class Position(_Params):
    line: int = Field(ge=0)
    character: int = Field(ge=0)


class Range(_Params):
    start: Position
    end: Position


class AskParams(_Params):
    prompt: str = Field(min_length=1, max_length=MAX_PROMPT_CHARS)
    uri: str | None = None
    range: Range | None = None
    session_id: str | None = Field(default=None, alias="sessionId")


class FixParams(_Params):
    uri: str
    range: Range
    diagnostics: list[dict[str, Any]] = Field(min_length=1, max_length=1000)
    session_id: str | None = Field(default=None, alias="sessionId")


class SessionParams(_Params):
    session_id: str | None = Field(default=None, alias="sessionId")


class ResumeParams(_Params):
    session_id: str = Field(alias="sessionId", min_length=1)


class SetModeParams(_Params):
    mode: Mode
    session_id: str | None = Field(default=None, alias="sessionId")


class RememberParams(_Params):
    text: str = Field(min_length=1, max_length=2000)
