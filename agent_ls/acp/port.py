"""The agent's :class:`EditorPort` spoken over ACP to the client that started ``agent-ls acp``.

Updates are the loop's own ``{sessionUpdate: KIND, ...}`` dicts, checked against the ACP
schema and sent as ``session/update`` in order. Questions are ``session/request_permission``
on the tool call that asks (known from the ``tool_call`` update sent in the same task), with
``optionId == kind``. Edits ask with the diff as the tool call's content (unless the mode
accepts edits), then land through ``fs/write_text_file`` when the client offers it (its
buffer), else atomically on disk. Reads go through ``fs/read_text_file`` when offered.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acp.schema import (
    ClientCapabilities,
    ContentToolCallContent,
    FileEditToolCallContent,
    PermissionOption,
    SessionNotification,
    TextContentBlock,
    ToolCallUpdate,
)
from pydantic import ValidationError

from agent_ls.acp.transport import StdioTransport, recording_requests
from agent_ls.ports.editor import (
    Buffer,
    ConfirmRequest,
    Decision,
    EditOutcome,
    EditProposal,
    Unsupported,
)
from agent_ls.ports.updates import SessionUpdate
from agent_ls.workspace import FileProblem, read_disk, write_atomically

if TYPE_CHECKING:
    from acp import Client

    from agent_ls.settings import Settings

log = logging.getLogger(__name__)

ALLOW, ALLOW_SESSION, DENY = "Allow", "Allow for this session", "Deny"
# The tool call whose task is running: set when its ``tool_call`` update goes out, read when
# that same task asks a question (parallel tool calls each run in a task of their own).
_current_tool_call: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "agent_ls_acp_tool_call", default=None
)


@dataclass
class ClientLink:
    """What every session's port shares: the connection, the transport and the client."""

    transport: StdioTransport
    capabilities: ClientCapabilities = field(default_factory=ClientCapabilities)
    conn: Client | None = None

    @property
    def reads_files(self) -> bool:
        fs = self.capabilities.fs
        return bool(fs and fs.read_text_file)

    @property
    def writes_files(self) -> bool:
        fs = self.capabilities.fs
        return bool(fs and fs.write_text_file)

    def notify(self, session_id: str, update: Mapping[str, Any]) -> None:
        """Send one ``session/update``, in order with everything else sent."""
        try:
            params = SessionNotification.model_validate(
                {"sessionId": session_id, "update": update}
            ).model_dump(mode="json", by_alias=True, exclude_none=True)
        except ValidationError as exc:  # a bug here: still send it, the client may cope
            log.warning("session/update does not fit the ACP schema: %s", exc)
            params = {"sessionId": session_id, "update": update}
        self.transport.send_nowait({"jsonrpc": "2.0", "method": "session/update", "params": params})


class AcpEditorPort:
    """One session's view of the ACP client: questions, edits, file reads and updates."""

    def __init__(self, link: ClientLink, session_id: str, settings: Settings) -> None:
        self.link = link
        self.session_id = session_id
        self.settings = settings
        self._tool_calls: dict[str, dict[str, Any]] = {}  # id -> the tool_call update sent

    # -- buffers ---------------------------------------------------------------------

    def open_buffer(self, path: Path) -> Buffer | None:
        return None  # ACP has no buffer list: the text is fetched with read_text

    async def read_text(self, path: Path) -> str | None:
        """The client's text of ``path`` (its unsaved buffer), or None when unavailable."""
        conn = self.link.conn
        if conn is None or not self.link.reads_files:
            return None
        try:
            answer = await asyncio.wait_for(
                conn.read_text_file(session_id=self.session_id, path=str(path)),
                self.settings.client_request_timeout,
            )
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except Exception as exc:  # no such file, refused, no answer: the disk decides
            log.info("fs/read_text_file %s: %s", path, exc)
            return None
        return str(answer.content)

    # -- questions -------------------------------------------------------------------

    async def confirm(self, request: ConfirmRequest) -> Decision:
        options = [PermissionOption(option_id="allow_once", name=ALLOW, kind="allow_once")]
        if request.grant:
            options.append(
                PermissionOption(option_id="allow_always", name=ALLOW_SESSION, kind="allow_always")
            )
        options.append(PermissionOption(option_id="reject_once", name=DENY, kind="reject_once"))
        text = ContentToolCallContent(
            type="content", content=TextContentBlock(type="text", text=request.message)
        )
        title = request.message.strip().splitlines()[0] if request.message.strip() else "Allow?"
        answer = await self._ask(options, [text], title[:120])
        if answer == "allow_once":
            return Decision.ALLOW
        if answer == "allow_always" and request.grant:
            return Decision.ALLOW_SESSION
        return Decision.DENY

    async def _ask(
        self, options: list[PermissionOption], content: list[Any], title: str
    ) -> str | None:
        """``session/request_permission``; None for no answer, a cancelled outcome, a failure.

        The question is about the tool call running in this task; outside any tool call it
        gets a tool call of its own, titled ``title``.
        """
        conn = self.link.conn
        if conn is None:
            return None
        call_id = _current_tool_call.get() or "agent-ls/question"
        sent = self._tool_calls.get(call_id, {})
        tool_call = ToolCallUpdate(
            tool_call_id=call_id,
            title=sent.get("title") or title,
            kind=sent.get("kind"),
            status="pending",
            content=content,
            raw_input=sent.get("rawInput"),
        )
        with recording_requests() as ids:
            try:
                response = await asyncio.wait_for(
                    conn.request_permission(
                        session_id=self.session_id, tool_call=tool_call, options=options
                    ),
                    self.settings.edit_confirm_timeout,
                )
            except asyncio.CancelledError:  # the run was cancelled: withdraw the question
                self._withdraw(ids)
                raise
            except TimeoutError:
                self._withdraw(ids)
                log.info("permission request not answered in time: Deny")
                return None
            except Exception as exc:  # the client failed or went away: Deny
                log.info("permission request failed: %s", exc)
                return None
        outcome = response.outcome
        if getattr(outcome, "outcome", None) != "selected":
            return None
        option_id = str(getattr(outcome, "option_id", ""))
        return option_id if option_id in {o.option_id for o in options} else None

    def _withdraw(self, ids: list[Any]) -> None:
        """Tell the client a question is no longer asked (ACP ``$/cancel_request``)."""
        for request_id in ids:
            self.link.transport.send_nowait(
                {
                    "jsonrpc": "2.0",
                    "method": "$/cancel_request",
                    "params": {"requestId": request_id},
                }
            )

    # -- edits -----------------------------------------------------------------------

    async def propose_edit(self, proposal: EditProposal) -> EditOutcome:
        if proposal.needs_confirmation:
            diff = FileEditToolCallContent(
                type="diff",
                path=str(proposal.path),
                old_text=proposal.old_text,
                new_text=proposal.new_text,
            )
            options = [
                PermissionOption(option_id="allow_once", name=ALLOW, kind="allow_once"),
                PermissionOption(option_id="reject_once", name=DENY, kind="reject_once"),
            ]
            verb = "Create" if proposal.old_text is None else "Edit"
            if await self._ask(options, [diff], f"{verb} {proposal.path.name}") != "allow_once":
                return EditOutcome(
                    "rejected", final_text=proposal.old_text, final_version=proposal.version
                )
        try:
            await self._write(proposal)
        except Exception as exc:
            return EditOutcome("failed", reason=f"writing the file failed: {exc}")
        return EditOutcome(
            "applied", list(range(len(proposal.hunks))), proposal.new_text, proposal.version
        )

    async def _write(self, proposal: EditProposal) -> None:
        conn = self.link.conn
        if conn is not None and self.link.writes_files:
            await asyncio.wait_for(
                conn.write_text_file(
                    session_id=self.session_id,
                    path=str(proposal.path),
                    content=proposal.new_text,
                ),
                self.settings.client_request_timeout,
            )
            return
        bom = False
        if proposal.old_text is not None:
            with contextlib.suppress(FileProblem):
                bom = read_disk(proposal.path).bom
        await asyncio.to_thread(write_atomically, proposal.path, proposal.new_text, bom=bom)

    # -- what LSP editors offer and ACP does not -----------------------------------------

    async def save_documents(self, paths: list[Path]) -> list[Path]:
        return list(paths)  # edits were written with fs/write_text_file or to disk

    async def diagnostics(self, path: Path | None) -> list[dict[str, Any]]:
        raise Unsupported("ACP clients do not share their language servers' diagnostics")

    # -- streaming -----------------------------------------------------------------------

    def update(self, session_id: str, update: SessionUpdate) -> None:
        if update["sessionUpdate"] == "tool_call":
            call_id = update["toolCallId"]
            self._tool_calls[call_id] = dict(update)
            _current_tool_call.set(call_id)
        self.link.notify(session_id, update)

    def progress(self, message: str, percentage: int | None = None) -> None:
        log.debug("progress: %s", message)  # ACP has no progress channel besides updates

    def log(self, message: str) -> None:
        log.warning("%s", message)  # ACP has no log channel: the agent's own log (stderr)
