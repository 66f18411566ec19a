"""A recording ACP client: the ``agent-client-protocol`` package's own client side, driving
``agent-ls acp`` in a subprocess, as an editor would (buffers, permission answers)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import acp
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    DeniedOutcome,
    FileSystemCapabilities,
    ReadTextFileResponse,
    RequestPermissionResponse,
    WriteTextFileResponse,
)

# answer(tool_call, options) -> an optionId, None for "cancelled", or "never" to not answer
Answer = Callable[[dict[str, Any], list[str]], str | None]


def plain(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


@dataclass
class RecordingClient:
    """Answers the agent's requests and records everything it was sent."""

    buffers: dict[str, str] = field(default_factory=dict)  # path -> unsaved editor text
    answer: Answer = lambda tool_call, options: "allow_once"
    updates: list[dict[str, Any]] = field(default_factory=list)
    permissions: list[dict[str, Any]] = field(default_factory=list)
    reads: list[str] = field(default_factory=list)
    writes: list[tuple[str, str]] = field(default_factory=list)
    raw_in: list[dict[str, Any]] = field(default_factory=list)  # every message the agent sent
    asked: asyncio.Event = field(default_factory=asyncio.Event)
    after_read: Callable[[str], None] | None = None  # the user typing meanwhile

    async def request_permission(
        self, session_id: str, tool_call: Any, options: Any, **kwargs: Any
    ) -> RequestPermissionResponse:
        call = plain(tool_call)
        option_ids = [o.option_id for o in options]
        self.permissions.append({"toolCall": call, "options": [plain(o) for o in options]})
        self.asked.set()
        choice = self.answer(call, option_ids)
        if choice == "never":
            await asyncio.Event().wait()  # a client that never answers
        if choice is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=choice)
        )

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(plain(update))

    async def read_text_file(self, session_id: str, path: str, **kwargs: Any) -> Any:
        self.reads.append(path)
        if path in self.buffers:
            content = self.buffers[path]
        else:
            try:
                content = Path(path).read_text(encoding="utf-8")
            except OSError:
                raise acp.RequestError.resource_not_found(path) from None
        if self.after_read is not None:
            self.after_read(path)
        return ReadTextFileResponse(content=content)

    async def write_text_file(self, session_id: str, path: str, content: str, **kwargs: Any) -> Any:
        self.writes.append((path, content))
        self.buffers[path] = content
        return WriteTextFileResponse()

    def on_connect(self, conn: Any) -> None:
        pass

    # -- what a test reads --------------------------------------------------------------

    def kinds(self) -> list[str]:
        return [u["sessionUpdate"] for u in self.updates]

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [u for u in self.updates if u["sessionUpdate"] == kind]

    def text(self) -> str:
        return "".join(u["content"]["text"] for u in self.of_kind("agent_message_chunk"))

    def observe(self, event: Any) -> None:
        if event.direction.value == "incoming":
            self.raw_in.append(event.message)


def agent_env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {
        "AGENT_LS_DATA_DIR": str(data_dir),
        "AGENT_LS_CONFIG_DIR": str(data_dir / "config"),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
    }
    env.update(extra)
    return env


def write_script(folder: Path, script: dict[str, Any]) -> str:
    path = folder / "script.json"
    path.write_text(json.dumps(script), encoding="utf-8")
    return f"script:{path}"


@contextlib.asynccontextmanager
async def acp_agent(
    client: RecordingClient,
    env: dict[str, str],
    *args: str,
    fs: bool = True,
) -> AsyncIterator[tuple[Any, asyncio.subprocess.Process]]:
    """``agent-ls acp`` in a subprocess, initialised; yields the connection and the process."""
    async with acp.spawn_agent_process(
        client,
        sys.executable,
        "-m",
        "agent_ls",
        "acp",
        *args,
        env=env,
        transport_kwargs={"stderr": None},
        observers=[client.observe],
    ) as (conn, proc):
        caps = ClientCapabilities(
            fs=FileSystemCapabilities(read_text_file=fs, write_text_file=fs), terminal=False
        )
        await asyncio.wait_for(conn.initialize(protocol_version=1, client_capabilities=caps), 30)
        yield conn, proc


def live_processes_with(marker: str) -> list[int]:
    """PIDs (not zombies) whose command line holds ``marker``, judged from /proc alone."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if marker in cmdline and state not in ("Z", "X"):
            found.append(int(entry.name))
    return found


async def wait_until(predicate: Callable[[], bool], seconds: float = 10.0) -> bool:
    deadline = asyncio.get_running_loop().time() + seconds
    while asyncio.get_running_loop().time() < deadline:
        if predicate():
            return True
        await asyncio.sleep(0.05)
    return predicate()
