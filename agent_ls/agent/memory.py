"""The project's memory file: ``MEMORY.md`` in the data dir, keyed by the workspace root.

The system prompt shows its first lines (see :func:`agent_ls.agent.prompt.memory_section`);
the agent edits it with the ordinary file tools, without a question; ``agent.remember`` and
``agent-ls remember`` append one line.
"""

from __future__ import annotations

import threading
from pathlib import Path

from agent_ls.settings import memory_file

_LOCK = threading.Lock()
MAX_NOTE_CHARS = 2000


def remember(root: Path, text: str) -> tuple[Path, str]:
    """Append ``text`` as one ``- `` line to the project's memory; returns (path, line).

    Raises ``ValueError`` for an empty note.
    """
    note = " ".join(text.split())
    if not note:
        raise ValueError("nothing to remember: the text is empty")
    if len(note) > MAX_NOTE_CHARS:
        raise ValueError(f"a note is at most {MAX_NOTE_CHARS} characters, got {len(note)}")
    path = memory_file(root)
    line = f"- {note}"
    with _LOCK:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            existing = path.read_bytes()
        except FileNotFoundError:
            existing = b""
        with path.open("a", encoding="utf-8", newline="") as handle:
            if existing and not existing.endswith(b"\n"):
                handle.write("\n")
            handle.write(line + "\n")
    return path, line
