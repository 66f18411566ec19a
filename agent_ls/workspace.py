"""The workspace as the agent sees it: roots, paths, the editor's view of files, read-state.

The editor's view wins: an open buffer's unsaved text is what the agent reads and edits.
Read-state records what the agent saw of each file so an edit over content it has not seen
(or that changed since) is refused.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agent_ls.agent.port import Buffer

BufferLookup = Callable[[Path], Buffer | None]

BINARY_SNIFF_BYTES = 8192


class FileProblem(Exception):
    """A file cannot be read or written; the message is written for the model."""


@dataclass(slots=True)
class FileView:
    """The text of a file as the agent sees it now."""

    path: Path
    text: str
    version: int | None  # buffer version when open in the editor
    from_buffer: bool

    @property
    def digest(self) -> str:
        return content_digest(self.text)


def content_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(slots=True)
class ReadRecord:
    digest: str
    version: int | None


class ReadState:
    """What one session has seen of each file."""

    def __init__(self) -> None:
        self._seen: dict[Path, ReadRecord] = {}

    def record(self, view: FileView) -> None:
        self._seen[view.path] = ReadRecord(view.digest, view.version)

    def record_text(self, path: Path, text: str, version: int | None) -> None:
        self._seen[path] = ReadRecord(content_digest(text), version)

    def check(self, view: FileView) -> str | None:
        """None when ``view`` is what the agent last saw, else a reason for the model."""
        seen = self._seen.get(view.path)
        if seen is None:
            return "you have not read this file yet: read it with read_file before editing it."
        if seen.digest != view.digest:
            where = "in the editor" if view.from_buffer else "on disk"
            return (
                f"the file changed {where} since you last read it: read it again before editing it."
            )
        return None

    def forget(self, path: Path) -> None:
        self._seen.pop(path, None)


class Workspace:
    """Workspace folders, path resolution and buffer-aware file access."""

    def __init__(self, roots: list[Path], buffers: BufferLookup | None = None):
        if not roots:
            raise ValueError("a workspace needs at least one folder")
        self.roots = [r.resolve() for r in roots]
        self._buffers = buffers or (lambda _p: None)

    @property
    def root(self) -> Path:
        return self.roots[0]

    def resolve(self, raw: str) -> Path:
        """An absolute, normalised path for a model-supplied path (relative to the root)."""
        if "\0" in raw:
            raise FileProblem("the path contains a NUL byte")
        if not raw.strip():
            raise FileProblem("the path is empty")
        path = Path(os.path.expanduser(raw))
        if not path.is_absolute():
            path = self.root / path
        return path.resolve()

    def contains(self, path: Path) -> bool:
        resolved = path.resolve()
        return any(resolved == r or resolved.is_relative_to(r) for r in self.roots)

    def display(self, path: Path) -> str:
        """The path relative to the workspace when inside it, else absolute."""
        for root in self.roots:
            if path.is_relative_to(root):
                rel = path.relative_to(root).as_posix()
                return rel or "."
        return str(path)

    def buffer(self, path: Path) -> Buffer | None:
        return self._buffers(path)

    def view(self, path: Path) -> FileView:
        """The file's current text: the open buffer when there is one, else the disk."""
        buffer = self._buffers(path)
        if buffer is not None:
            return FileView(path, buffer.text, buffer.version, from_buffer=True)
        return FileView(path, read_disk_text(path), None, from_buffer=False)

    def exists(self, path: Path) -> bool:
        return self._buffers(path) is not None or path.exists()


def read_disk_text(path: Path) -> str:
    """Read a text file from disk, refusing directories, binaries and non-UTF-8 text."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise FileProblem(f"{path} does not exist") from None
    except IsADirectoryError:
        raise FileProblem(f"{path} is a directory: use list_files to see what it holds") from None
    except PermissionError:
        raise FileProblem(f"{path} cannot be read: permission denied") from None
    except OSError as exc:
        raise FileProblem(f"{path} cannot be read: {exc.strerror or exc}") from None
    if b"\0" in data[:BINARY_SNIFF_BYTES]:
        raise FileProblem(f"{path} is a binary file ({len(data)} bytes); it is not shown")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FileProblem(
            f"{path} is not UTF-8 text (undecodable byte at offset {exc.start}); "
            "it is not shown to avoid corrupting it"
        ) from None
