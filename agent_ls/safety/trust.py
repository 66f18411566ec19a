"""Project trust: programs a repository names (MCP servers, hooks) run only once approved.

A file in the workspace that names programs to run (``.mcp.json``, ``.agent-ls/settings.json``)
is shown to the user — every program's exact command line — with ``Allow`` / ``Deny``.
Approval is remembered in the data dir for that workspace, that file and that exact content
(SHA-256): a changed file asks again. No answer, a dismissed dialog or any failure is Deny;
a denial is not remembered (the next start asks again). The user's own files and editor
settings need no approval and never come here.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_ls.ports.editor import ConfirmRequest, Decision, EditorPort
from agent_ls.settings import data_dir

_LOCK = threading.Lock()  # one writer at a time within this process


def content_digest(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


@dataclass(frozen=True, slots=True)
class TrustRequest:
    """One workspace file's programs, as the dialog shows them."""

    root: Path  # the workspace folder the file belongs to
    file: Path  # the file that names the programs
    content: bytes  # its exact content (what approval is tied to)
    kind: str  # "MCP servers", "hooks"
    items: tuple[str, ...]  # one line per program: "name: command line"

    @property
    def digest(self) -> str:
        return content_digest(self.content)


class TrustStore:
    """Approved (workspace, file, digest) triples in one JSON file of the data dir."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def default(cls) -> TrustStore:
        return cls(data_dir() / "trust.json")

    def _load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    @staticmethod
    def _key(root: Path, file: Path) -> str:
        return f"{root.resolve()}\0{file.resolve()}"

    def is_approved(self, request: TrustRequest) -> bool:
        entry = self._load().get(self._key(request.root, request.file))
        return isinstance(entry, dict) and entry.get("sha256") == request.digest

    def approve(self, request: TrustRequest) -> None:
        with _LOCK:
            data = self._load()
            data[self._key(request.root, request.file)] = {"sha256": request.digest}
            self.path.parent.mkdir(parents=True, exist_ok=True)
            import tempfile  # here, not at start-up (~4 ms): few starts approve anything

            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".trust-")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    json.dump(data, handle, indent=1, sort_keys=True)
                os.replace(tmp, self.path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise


def trust_message(request: TrustRequest) -> str:
    shown = "\n".join(f"  • {item}" for item in request.items) or "  (none)"
    return (
        f"{request.file.name} in {request.root} asks to run these {request.kind}:\n\n"
        f"{shown}\n\n"
        "They run as you, with your files and network. Allow only if you trust this "
        "repository. Approval is remembered for this exact file; a change asks again."
    )


async def ensure_trusted(port: EditorPort, store: TrustStore, request: TrustRequest) -> bool:
    """True when the file's exact content is approved, asking the user when it is not yet."""
    if store.is_approved(request):
        return True
    try:
        decision = await port.confirm(ConfirmRequest(trust_message(request), grant=None))
    except Exception:  # fail closed: a broken dialog is a Deny
        return False
    if decision is not Decision.ALLOW:
        return False
    store.approve(request)
    return True
