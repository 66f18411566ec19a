"""The workspace as the agent sees it: roots, paths, the editor's view of files, read-state.

The editor's view wins: an open buffer's unsaved text is what the agent reads and edits.
Read-state records what the agent saw of each file so an edit over content it has not seen
(or that changed since) is refused.

Files on disk are UTF-8. A UTF-8 byte-order mark is not part of the text: editors strip it
from the buffer they hold (VS Code "UTF-8 with BOM", Neovim 'bomb', Emacs
``utf-8-with-signature``) and write it back on save, so LSP positions never count it. The same
goes here: :func:`decode_text` strips it and says it was there, :func:`encode_text` puts it
back, and offsets, positions and hunks all refer to the text without it. Binary files, UTF-16/32
files and text in other encodings (Latin-1, Windows-1252...) are refused with the reason,
never decoded lossily, so an edit cannot corrupt them.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from agent_ls.ports.editor import Buffer

BufferLookup = Callable[[Path], Buffer | None]
# The editor's text of a file fetched on demand (ACP's fs/read_text_file); None: not available.
TextReader = Callable[[Path], Awaitable[str | None]]

BINARY_SNIFF_BYTES = 8192  # as git: a NUL byte in the first 8 KB means binary
MAX_TEXT_BYTES = 64 * 1024 * 1024  # larger files are not loaded at all
UTF8_BOM = b"\xef\xbb\xbf"
_UTF16_32_BOMS = (
    (b"\xff\xfe\x00\x00", "UTF-32 (little-endian)"),
    (b"\x00\x00\xfe\xff", "UTF-32 (big-endian)"),
    (b"\xff\xfe", "UTF-16 (little-endian)"),
    (b"\xfe\xff", "UTF-16 (big-endian)"),
)


class FileProblem(Exception):
    """A file cannot be read or written; the message is written for the model."""


@dataclass(slots=True)
class FileView:
    """The text of a file as the agent sees it now."""

    path: Path
    text: str
    version: int | None  # buffer version when open in the editor
    from_buffer: bool
    bom: bool = False  # the file on disk starts with a UTF-8 BOM (not part of ``text``)
    size: int | None = None  # bytes on disk, when read from disk

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


@dataclass(slots=True)
class JournalEntry:
    """One file a run changed: its text before the run's first edit (None: the run created
    it) and after the run's last one, as the editor really held it."""

    before: str | None
    after: str


class EditJournal:
    """What a session's last run applied, file by file, for ``agent.undo``."""

    def __init__(self) -> None:
        self.files: dict[Path, JournalEntry] = {}

    def record(self, path: Path, before: str | None, after: str) -> None:
        entry = self.files.get(path)
        if entry is None:
            self.files[path] = JournalEntry(before, after)
        else:
            entry.after = after

    def clear(self) -> None:
        self.files.clear()

    def to_json(self) -> dict[str, dict[str, str | None]]:
        return {str(p): {"before": e.before, "after": e.after} for p, e in self.files.items()}

    @classmethod
    def from_json(cls, data: dict[str, object]) -> EditJournal:
        journal = cls()
        for path, entry in data.items():
            if not isinstance(entry, dict):
                continue
            before, after = entry.get("before"), entry.get("after")
            if isinstance(after, str) and (before is None or isinstance(before, str)):
                journal.files[Path(path)] = JournalEntry(before, after)
        return journal


class Workspace:
    """Workspace folders, path resolution and buffer-aware file access."""

    def __init__(
        self,
        roots: list[Path],
        buffers: BufferLookup | None = None,
        all_buffers: Callable[[], list[Buffer]] | None = None,
        reader: TextReader | None = None,
    ):
        if not roots:
            raise ValueError("a workspace needs at least one folder")
        self.roots = [r.resolve() for r in roots]
        self._buffers = buffers or (lambda _p: None)
        self._all_buffers = all_buffers or list
        self._reader = reader

    def open_buffers(self) -> list[Buffer]:
        """Every buffer open in the editor (search looks at their unsaved text)."""
        return self._all_buffers()

    @property
    def root(self) -> Path:
        return self.roots[0]

    def resolve(self, raw: str) -> Path:
        """An absolute, normalised path for a model-supplied path (relative to the root).

        Junk (NUL, control or invisible characters, over-long paths or names) is refused with
        a :class:`FileProblem` the model can read.
        """
        from agent_ls.safety.paths import path_problem

        problem = path_problem(raw)
        if problem is None and any(len(os.fsencode(p)) > 255 for p in Path(raw).parts):
            problem = "has a name longer than 255 bytes"
        if problem:
            raise FileProblem(f"Refused: the path {problem}.")
        path = Path(os.path.expanduser(raw))
        if not path.is_absolute():
            path = self.root / path
        try:
            return path.resolve()
        except OSError as exc:
            raise FileProblem(
                f"Refused: the path cannot be used ({exc.strerror or exc})."
            ) from None

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
        disk = read_disk(path)
        return FileView(path, disk.text, None, False, bom=disk.bom, size=disk.size)

    async def load(self, path: Path) -> FileView:
        """Like :meth:`view`, but asks the editor for the text when it can only be fetched.

        An editor reached over ACP holds no buffer list here: its ``fs/read_text_file`` gives
        the text of its buffer (unsaved changes included) or of the disk. The text counts as
        the editor's (``from_buffer``) only when it differs from the disk.
        """
        if self._reader is None or self._buffers(path) is not None:
            return self.view(path)
        text = await self._reader(path)
        if text is None:
            return self.view(path)
        try:
            disk: DiskText | None = read_disk(path)
        except FileProblem:
            disk = None
        if disk is not None and disk.text == text:
            return FileView(path, text, None, False, bom=disk.bom, size=disk.size)
        return FileView(path, text, None, from_buffer=True, bom=disk.bom if disk else False)

    def exists(self, path: Path) -> bool:
        return self._buffers(path) is not None or path.exists()


@dataclass(frozen=True, slots=True)
class DiskText:
    """A text file's content as decoded from disk."""

    text: str  # without the byte-order mark
    bom: bool  # the file starts with a UTF-8 BOM
    size: int  # bytes on disk


def human_size(n: int) -> str:
    """``n`` bytes for people: 512 bytes, 3.4 KB, 10.0 MB."""
    if n < 1024:
        return f"{n} bytes"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KB"
    return f"{n / (1024 * 1024):.1f} MB"


def decode_text(data: bytes, name: str | Path = "the file") -> DiskText:
    """Decode a file's bytes as UTF-8 text, or raise :class:`FileProblem` saying why not.

    A leading UTF-8 BOM is stripped (``bom`` says it was there). Refused: binary data (a NUL
    byte in the first 8 KB), UTF-16/32 (by their BOM) and bytes that are not UTF-8, with the
    place of the first bad byte and a guess at the encoding.
    """
    for mark, encoding in _UTF16_32_BOMS:
        if data.startswith(mark):
            raise FileProblem(
                f"{name} is {encoding} text ({human_size(len(data))}); only UTF-8 files can be "
                "read and edited here, so it is not shown."
            )
    bom = data.startswith(UTF8_BOM)
    body = data[len(UTF8_BOM) :] if bom else data
    if b"\0" in body[:BINARY_SNIFF_BYTES]:
        raise FileProblem(
            f"{name} is a binary file ({human_size(len(data))}, it contains NUL bytes); it is not "
            "shown and cannot be edited as text."
        )
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FileProblem(_not_utf8(name, body, exc.start)) from None
    return DiskText(text, bom, len(data))


def _not_utf8(name: str | Path, data: bytes, at: int) -> str:
    line = data.count(b"\n", 0, at) + 1
    column = at - (data.rfind(b"\n", 0, at) + 1) + 1
    guess = ""
    try:
        data.decode("cp1252")
        guess = " It looks like Latin-1/Windows-1252 text."
    except UnicodeDecodeError:
        pass
    return (
        f"{name} is not UTF-8 text: byte 0x{data[at]:02X} at line {line}, column {column} "
        f"(byte offset {at}) is not valid UTF-8.{guess} It is not shown, and cannot be edited, "
        "to avoid corrupting it; converting it to UTF-8 (e.g. with iconv) is the user's call."
    )


def encode_text(text: str, bom: bool = False) -> bytes:
    """The bytes to write for ``text``: UTF-8, with the BOM back when the file had one."""
    data = text.encode("utf-8", "surrogatepass")
    return UTF8_BOM + data if bom and not text.startswith("\ufeff") else data


def write_atomically(path: Path, text: str, *, bom: bool = False) -> None:
    """Write via a temp file in the same folder and rename, keeping the file's mode (and its
    UTF-8 byte-order mark, which editors keep out of the buffer text)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = None
    with contextlib.suppress(FileNotFoundError):
        mode = path.stat().st_mode & 0o7777
    import tempfile  # here: ~4 ms of the server's start (shutil, random) before any edit

    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".agent-ls", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(encode_text(text, bom))
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def read_disk(path: Path) -> DiskText:
    """Read a text file from disk, refusing directories, binaries and non-UTF-8 text."""
    try:
        size = path.stat().st_size
        if size > MAX_TEXT_BYTES:
            raise FileProblem(
                f"{path} is too large to load ({human_size(size)}; the limit is "
                f"{human_size(MAX_TEXT_BYTES)}); use grep_search or run_shell (head, sed -n) on it."
            )
        data = path.read_bytes()
    except FileNotFoundError:
        raise FileProblem(f"{path} does not exist") from None
    except IsADirectoryError:
        raise FileProblem(f"{path} is a directory: use list_files to see what it holds") from None
    except PermissionError:
        raise FileProblem(f"{path} cannot be read: permission denied") from None
    except OSError as exc:
        raise FileProblem(f"{path} cannot be read: {exc.strerror or exc}") from None
    return decode_text(data, path)


def read_disk_text(path: Path) -> str:
    """The text of a file on disk as an editor holds it (UTF-8, without a BOM)."""
    return read_disk(path).text
