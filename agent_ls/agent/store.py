"""Sessions on disk: one append-only JSONL transcript per session.

A line is written as each message completes, so a server killed mid-run resumes at the last
complete turn (a tool call without its result is closed as interrupted on load).
"""

from __future__ import annotations

import datetime
import json
import re
from pathlib import Path
from typing import Any

from agent_ls.ports.messages import Message
from agent_ls.settings import data_dir

_SAFE_ID = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")


class SessionStore:
    """Reads and appends session transcripts under one folder."""

    def __init__(self, root: Path):
        self.root = root

    @classmethod
    def default(cls) -> SessionStore:
        return cls(data_dir() / "sessions")

    def path(self, session_id: str) -> Path:
        if not _SAFE_ID.match(session_id):
            raise ValueError(f"invalid session id {session_id!r}")
        return self.root / f"{session_id}.jsonl"

    def results_dir(self, session_id: str) -> Path:
        """Where large tool results of the session are kept."""
        return self.path(session_id).with_suffix("") / "results"

    def journal_path(self, session_id: str) -> Path:
        """Where the session's last run's journal (for undo) is kept."""
        return self.path(session_id).with_suffix("") / "undo.json"

    def save_journal(self, session_id: str, files: dict[str, Any]) -> None:
        path = self.journal_path(session_id)
        if not files:
            path.unlink(missing_ok=True)
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(files, ensure_ascii=False), encoding="utf-8")
        tmp.replace(path)

    def load_journal(self, session_id: str) -> dict[str, Any]:
        try:
            data = json.loads(self.journal_path(session_id).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def append(self, session_id: str, record: dict[str, Any]) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
        with self.path(session_id).open("a", encoding="utf-8") as handle:
            handle.write(line + "\n")

    def exists(self, session_id: str) -> bool:
        try:
            return self.path(session_id).is_file()
        except ValueError:
            return False

    def read(self, session_id: str) -> list[dict[str, Any]]:
        """Every intact record; a torn last line (killed mid-write) is skipped."""
        records: list[dict[str, Any]] = []
        with self.path(session_id).open(encoding="utf-8") as handle:
            for line in handle:
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError:
                    continue
        return records

    def load_messages(self, session_id: str) -> tuple[dict[str, Any], list[Message]]:
        meta: dict[str, Any] = {}
        messages: list[Message] = []
        for record in self.read(session_id):
            kind = record.get("type")
            if kind == "meta":
                meta.update(record)
            elif kind == "message":
                try:
                    messages.append(Message.from_json(record["message"]))
                except (KeyError, TypeError):
                    continue
            elif kind == "compaction":
                try:
                    messages = [Message.from_json(m) for m in record["messages"]]
                except (KeyError, TypeError):
                    continue
            elif kind == "totals":
                meta["totals"] = record
        return meta, messages

    def list(self) -> list[dict[str, Any]]:
        """Saved sessions, newest first."""
        if not self.root.is_dir():
            return []
        rows: list[dict[str, Any]] = []
        for path in self.root.glob("*.jsonl"):
            title = workspace = ""
            turns = 0
            try:
                with path.open(encoding="utf-8") as handle:
                    for line in handle:
                        if '"type":"meta"' in line:
                            # An ACP session's first record names its folder before the
                            # first message brings the title: the first title, the last
                            # folder (a session loaded in another folder moved there).
                            meta = json.loads(line)
                            title = title or meta.get("title", "")
                            workspace = meta.get("workspace") or workspace
                        elif '"role":"assistant"' in line:
                            turns += 1
            except (OSError, json.JSONDecodeError):
                continue
            updated = datetime.datetime.fromtimestamp(path.stat().st_mtime)
            rows.append(
                {
                    "sessionId": path.stem,
                    "title": title,
                    "workspace": workspace,
                    "turns": turns,
                    "updated": updated.isoformat(timespec="seconds"),
                }
            )
        rows.sort(key=lambda r: str(r["updated"]), reverse=True)
        return rows
